"""Lower-precision products for decoding: int8 or bfloat16 weights on a trained Transformer (not in the paper).

A beam-search step at `transformer_base` is its matrix products (docs/benchmarks.md:
"Decoding at base"), and on CPUs with AVX-512 a product of 8- or 16-bit operands runs
faster than a float32 one. So, for decoding only, every product weight W (the attention
projections, both FFN layers, and the shared embedding that is also the pre-softmax
projection, §3.4's E) is stored in lower precision, in one of two modes:

int8 (CTranslate2's `int8_float32`): W as int8 with one scale per output column, and each
row x of the activations quantized on the fly with its own scale:

    s_W[j] = 127 / max_i |W[i, j]|        W_q = round(W · s_W)          (once, after restoring)
    s_x    = 127 / max_i |x[i]|           x_q = round(x · s_x)          (every call)
    y[j]   = (x_q · W_q)[j] / (s_x · s_W[j])                           (int8 × int8 → int32, then float32)

bfloat16: W rounded to bfloat16 once, each activation row rounded to bfloat16 on the fly,
and the products summed in float32:

    y[j]   = Σ_i bf16(x[i]) · bf16(W[i, j])                            (each product exact in float32)

bfloat16 keeps 8 significant bits of every value, where int8 keeps 7 of a row's or
column's largest, and needs no scales. Which of the two decodes faster depends on the CPU:
bfloat16 where it has AVX-512 BF16 but no AMX; int8 with AMX, and where bfloat16 is emulated
(docs/benchmarks.md, "Decoding at base" and "Side by side with the peers"). Under XLA,
`tf.matmul(..., output_type=tf.float32)` of bfloat16 operands is one `dot` with float32 output,
which XLA's CPU backend runs on bfloat16 kernels; elsewhere (the plain decoder, another Keras
backend) the same rounded values are multiplied in float32: the same results up to summation
order, without the speed. int8 is Keras' own `Dense.quantize("int8")` on the Dense layers and
`SharedEmbedding.quantize("int8")`; int8 products are integer `dot`s under XLA and slow
without it. Softmax, layer normalization, the attention's own QKᵀ and weights·V products,
and the beam search stay float32 in both modes.

Training never runs in either: the weights are converted after a float32 checkpoint is
restored (`--decode_hparams=quantize=int8` or `quantize=bfloat16` of t2t-decoder,
t2t-exporter, t2t-insights and t2t-translate-all). What each costs in BLEU: docs/results.md,
"Lower-precision decoding".
"""

import contextlib
import gc

import keras
from keras import ops

from t2t_lite import cpu_features
from t2t_lite.model.bfloat16 import bfloat16_matmul, replace_by_bfloat16
from t2t_lite.model.embedding import SharedEmbedding

MODES = ("", "int8", "bfloat16")  # "" = float32 weights, as trained
# Without XLA, each mode's speed against float32: the plain decoder at transformer_base, greedy and
# beam 4 (docs/benchmarks.md, "Lower precision without XLA or without the CPU's units").
UNCOMPILED_COST = {
    "int8": "measured at 0.18-0.22x of float32's speed",
    "bfloat16": "measured at 0.91-0.94x of float32's speed",
}


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"--decode_hparams: quantize={mode!r}; choose '' (float32, as trained), 'int8' or 'bfloat16'.")


def speed_note(mode: str, xla: bool, cpuinfo: str = "/proc/cpuinfo"):
    """A note for a mode that decodes slower than float32 on this CPU or without XLA, else None.

    The tools print it once, before decoding or exporting. The figures it gives are transformer_base's
    (docs/benchmarks.md, "Lower precision without XLA or without the CPU's units"); a CPU that cannot
    be read gets no note.
    """
    if not mode:
        return None
    advice = "decode with quantize= (float32) or time both here with bench/decode_products.py (a minute)."
    if not xla:
        return (
            f"Note: quantize={mode} pays only with xla=true: without XLA TensorFlow multiplies "
            f"{'int8 operands on a generic integer kernel' if mode == 'int8' else 'the rounded values in float32'}, "
            f"{UNCOMPILED_COST[mode]}; add xla=true to --decode_hparams, or {advice}"
        )
    if mode == "int8" and cpu_features.int8_dot_units(cpuinfo) is False:
        return (
            f"Note: quantize=int8, but this CPU has no int8 dot-product units (none of "
            f"{', '.join(cpu_features.INT8_DOT_FLAGS)} in {cpuinfo}), so int8 gains little or loses: beam 4 "
            f"measured at 0.78-1.03x of float32's speed on such CPUs; {advice}"
        )
    if mode == "bfloat16" and cpu_features.bfloat16_units(cpuinfo) is False:
        return (
            f"Note: quantize=bfloat16, but this CPU has no bfloat16 multiply units (none of "
            f"{', '.join(cpu_features.BFLOAT16_FLAGS)} in {cpuinfo}), so XLA emulates them: beam 4 measured "
            f"at 0.70x of float32's speed on such a CPU; {advice}"
        )
    return None


def quantize_for_decoding(model: keras.Model, mode: str) -> keras.Model:
    """Converts `model`'s product weights in place (mode "int8" or "bfloat16"), or leaves them (mode ""); returns it.

    The model must be built and hold its trained weights: converting replaces the float32
    variables, so restore a checkpoint first.
    """
    check_mode(mode)
    with _no_full_collections():
        if mode == "int8":
            model.quantize(mode, filters=lambda layer: isinstance(layer, (keras.layers.Dense, SharedEmbedding)))
        elif mode == "bfloat16":
            for layer in list(model._flatten_layers()):
                if isinstance(layer, SharedEmbedding):
                    layer.use_bfloat16_weights()
                elif type(layer) is keras.layers.Dense:
                    _use_bfloat16_kernel(layer)
    return model


@contextlib.contextmanager
def _no_full_collections():
    """Skips the full garbage collections Keras runs while a model is converted.

    Keras' `Layer.__delattr__` calls `gc.collect()` each time a layer drops a variable (to free
    accelerator buffers at once), and converting drops one per product weight: 97 full
    collections for transformer_base, each walking every Python object of the process, made its
    conversion many times slower (bench/quantize.py; docs/benchmarks.md, "Converting a model for
    lower-precision decoding"). None is needed: a dropped float32 weight is in no reference cycle,
    so it is freed as it is replaced. `gc.collect` is replaced process-wide while the conversion
    runs (Keras looks it up at each call); a collection another thread asks for then is skipped,
    and Python's own automatic collections go on as always.
    """
    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect


class BFloat16Dense(keras.layers.Dense):
    """A `keras.layers.Dense` whose kernel is bfloat16: activation(bf16(x) · W + b), b and the sums in float32.

    Only made by `quantize_for_decoding(model, "bfloat16")` from a built float32 Dense.
    """

    def call(self, inputs, training=None):
        outputs = bfloat16_matmul(inputs, self._kernel)
        if self.bias is not None:
            outputs = ops.add(outputs, ops.cast(self.bias, "float32"))
        if self.activation is not None:
            outputs = self.activation(outputs)
        return ops.cast(outputs, self.compute_dtype)


def _use_bfloat16_kernel(layer):
    """Replaces a built Dense's float32 kernel by its bfloat16 rounding, and makes the layer a BFloat16Dense."""
    replace_by_bfloat16(layer, "_kernel", "_kernel", "kernel")
    layer.__class__ = BFloat16Dense
