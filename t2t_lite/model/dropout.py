"""Dropout (§5.4, Srivastava et al. 2014) with its masks drawn from an integer hash.

    Dropout(x)_i = x_i / (1 − P_drop)   if h(i, s) ≥ ⌊P_drop · 2³²⌉,   else 0
    h(i, s) = mix(mix(i ⊕ s₀) ⊕ s₁)

i is the element's flat index, s = (s₀, s₁) the call's seed from a `keras.random.SeedGenerator`
(advanced every call, as keras.layers.Dropout does), and mix is Chris Wellons' "lowbias32", a
bijection of 32-bit integers with full avalanche (every input bit flips each output bit with
probability ≈ ½). Each element is therefore kept independently with probability 1 − P_drop, up
to 2⁻³², and the kept ones are scaled so that the expectation is unchanged: the same layer as
`keras.layers.Dropout`, only the random bits differ.

Why not keras.layers.Dropout everywhere: it draws a float uniform per element with Philox,
which XLA on the CPU emits as separate, poorly vectorised loops writing a random buffer per
call. The paper's residual dropout is 32 calls of 512 tokens × 512 channels in the benchmark's
transformer_base step, a measurable share of the XLA step; the hash, which XLA fuses into the
select that applies it, makes the step faster (docs/benchmarks.md, Training). Without XLA the hash
is a dozen separate integer kernels, slower than TensorFlow's one Philox kernel, so there (eager
or a plain tf.function) the layer keeps `keras.random.dropout`. Either way: the same distribution,
different bits. Under several replicas (tf.distribute) the seed generator is one mirrored variable,
so replica r hashes with its own s₀ + r·0x9E3779B9: each replica draws its own masks, as one
device would for the whole batch.
"""

import math

import keras
from keras import ops

_TWO_TO_32 = 2**32


def _uint32(value):
    return ops.convert_to_tensor(value, "uint32")


def _xor_shift(x, shift):
    return ops.bitwise_xor(x, ops.right_shift(x, _uint32(shift)))


def mix(x):
    """lowbias32 (C. Wellons, "Prospecting for hash functions", 2018) on a uint32 tensor.

    Odd multipliers and xor-shifts are each invertible, so mix is a bijection.
    """
    x = ops.multiply(_xor_shift(x, 16), _uint32(0x7FEB352D))
    x = ops.multiply(_xor_shift(x, 15), _uint32(0x846CA68B))
    return _xor_shift(x, 16)


def random_bits(shape, seed):
    """One uint32 per element of `shape`: h(i, s) of the module docstring, s = seed[:2]."""
    seed = ops.cast(seed, "uint32")
    size = math.prod(shape)
    # tf2xla has no uint32 range, so count in int32 (tensors stay far below 2³¹ elements).
    index = ops.cast(ops.reshape(ops.arange(size, dtype="int32"), shape), "uint32")
    return mix(ops.bitwise_xor(mix(ops.bitwise_xor(index, seed[0])), seed[1]))


def drop_threshold(rate: float) -> int:
    """⌊rate · 2³²⌉: a uint32 h is dropped iff h < this, i.e. with probability rate (to 2⁻³²)."""
    return min(int(round(rate * _TWO_TO_32)), _TWO_TO_32 - 1)


def compiled_by_xla() -> bool:
    """True while tracing for XLA: always under JAX, under `jit_compile=True` in TensorFlow."""
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend != "tensorflow":
        return False
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util  # TensorFlow has no public test for this

    return control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph())


def replica_in_sync():
    """(this replica's id, replicas in sync) under tf.distribute; (0, 1) anywhere else."""
    backend = keras.backend.backend()
    if backend != "tensorflow":
        return 0, 1
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return 0, 1
    return ops.cast(context.replica_id_in_sync_group, "int64"), context.num_replicas_in_sync


def hash_dropout(x, rate: float, seed):
    """Inverted dropout of `x` with keep probability 1 − rate, masks from `random_bits`."""
    kept = ops.greater_equal(random_bits(ops.shape(x), seed), _uint32(drop_threshold(rate)))
    return ops.where(kept, x * ops.cast(1.0 / (1.0 - rate), x.dtype), ops.zeros_like(x))


class Dropout(keras.layers.Layer):
    """Drop-in for keras.layers.Dropout (same arguments, same checkpoint layout): hash masks
    when compiled by XLA, keras.random.dropout otherwise (module docstring).

    Args:
        rate: P_drop in [0, 1); 0 makes the layer the identity.
        seed: optional integer seed of the layer's SeedGenerator (else drawn from Keras'
            global seed, `keras.utils.set_random_seed`).

    Call arguments: `inputs`, `training` (dropout applies only when True).

    Example:
        >>> y = Dropout(0.1)(keras.ops.ones((2, 3)), training=True)  # entries 0 or 1/0.9
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout rate must be in [0, 1); got {rate}. Check the *_dropout hparams.")
        self.rate = rate
        self.seed = seed
        if rate > 0:
            self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def call(self, inputs, training=False):
        if not (training and self.rate > 0):
            return inputs
        replica, replicas = replica_in_sync()
        if replicas > 1:
            # The seed generator is one mirrored variable: every replica would draw the same masks.
            # Replica r hashes with s₀ + r·0x9E3779B9 (the golden-ratio constant spreads the streams).
            seed = ops.cast(self.seed_generator.next(), "int64")
            seed = seed + ops.cast(ops.stack([replica * 0x9E3779B9, 0]), "int64")
            return hash_dropout(inputs, self.rate, ops.mod(seed, _TWO_TO_32))
        if compiled_by_xla():
            return hash_dropout(inputs, self.rate, self.seed_generator.next())
        return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


class SymbolDropout(keras.layers.Layer):
    """tensor2tensor's `symbol_dropout` (word dropout): each id becomes padding (0) with probability `rate`.

        SymbolDropout(ids)_i = ids_i   if kept (probability 1 − rate),   else 0

    Nothing is rescaled: a dropped id embeds to the zero vector as padding does (t2t_lite/model/embedding.py),
    and where the mask is read from the ids (the encoder's), the word is masked out of attention as
    tensor2tensor's `embedding_to_padding` masks it. The keep decisions are `Dropout`'s masks, so they
    follow the same seeds, replicas and XLA path.

    Args:
        rate: probability in [0, 1) of dropping each id; 0 makes the layer the identity.

    Call arguments: `ids` (int), `training` (ids are dropped only when True).
    """

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self.keep = Dropout(rate, seed=seed, dtype="float32")
        self.built = True

    def call(self, ids, training=False):
        if not (training and self.rate > 0):
            return ids
        kept = ops.greater(self.keep(ops.ones(ops.shape(ids), "float32"), training=True), 0.0)
        return ops.where(kept, ids, ops.zeros_like(ids))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate}
