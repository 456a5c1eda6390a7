"""A seeded `Dataset.shuffle` that also takes a tensor seed under a global seed of 0.

The trainer seeds the shuffles of epoch e with `random_seed + e`, a tensor inside the
pipeline's `flat_map` (`t2t_lite.train.replica_input`). `Dataset.shuffle` pairs its op seed
with the global seed (`tf.random.set_seed`, set from `--random_seed`), and TensorFlow
2.21's `random_seed.get_seed` compares that pair with (0, 0) in Python, to avoid the pair
the kernels read as "unseeded". Under a global seed of 0 (or any multiple of 2**31 - 1,
the modulus seeds are reduced by) the first halves match and Python asks the symbolic op
seed for a truth value: `t2t-trainer --random_seed=0` stopped before its first batch.

In that one case this module builds the shuffle from the pair that `tf.data` itself
derives for such a seed, (0, op seed mod 2**31 - 1, a 0 read as 2**31 - 1), so a tensor
seed shuffles exactly as the same integer seed would. Every other case is
`Dataset.shuffle` unchanged.
"""

import tensorflow as tf

_SEED_MODULUS = 2**31 - 1  # TensorFlow reduces seeds modulo this; (0, 0) would mean "unseeded"


def shuffle(dataset: tf.data.Dataset, buffer_size: int, seed) -> tf.data.Dataset:
    """`dataset.shuffle(buffer_size, seed=seed)`, for an integer or a tensor `seed` under any global seed."""
    if not _tensor_seed_under_zero_global_seed(seed):
        return dataset.shuffle(buffer_size, seed=seed)
    op_seed = tf.cast(seed, tf.int64) % _SEED_MODULUS
    op_seed = tf.where(op_seed == 0, tf.constant(_SEED_MODULUS, tf.int64), op_seed)
    specs = tf.nest.flatten(dataset.element_spec)
    if not all(isinstance(spec, tf.TensorSpec) for spec in specs):
        raise TypeError(f"seeded_shuffle.shuffle takes datasets of dense tensors; got {dataset.element_spec}.")
    variant = tf.raw_ops.ShuffleDatasetV3(
        input_dataset=tf.data.experimental.to_variant(dataset),
        buffer_size=tf.constant(buffer_size, tf.int64),
        seed=tf.constant(0, tf.int64),
        seed2=op_seed,
        seed_generator=tf.raw_ops.DummySeedGenerator(),
        output_types=[spec.dtype for spec in specs],
        output_shapes=[spec.shape for spec in specs],
    )
    return tf.data.experimental.from_variant(variant, dataset.element_spec)


def _tensor_seed_under_zero_global_seed(seed) -> bool:
    """The case `Dataset.shuffle` cannot take: a symbolic seed while the graph's seed reduces to 0."""
    if not tf.is_tensor(seed) or tf.executing_eagerly():
        return False  # an eager tensor answers Python's comparison itself
    global_seed = tf.compat.v1.get_default_graph().seed
    return global_seed is not None and global_seed % _SEED_MODULUS == 0
