"""int8 products for decoding: CTranslate2's `int8_float32` scheme on a trained Transformer (not in the paper).

A beam-search step at `transformer_base` is its matrix products (85 % of the time,
docs/benchmarks.md: "Decoding at base"), and on CPUs an int8 product under XLA runs
2–5× faster than a float32 one. So, for decoding only, every product weight W is
stored as int8 with one scale per output column, and each row x of the activations
is quantized on the fly with its own scale:

    s_W[j] = 127 / max_i |W[i, j]|        W_q = round(W · s_W)          (once, after restoring)
    s_x    = 127 / max_i |x[i]|           x_q = round(x · s_x)          (every call)
    y[j]   = (x_q · W_q)[j] / (s_x · s_W[j])                           (int8 × int8 → int32, then float32)

The attention projections and both FFN layers (`keras.layers.Dense`) use Keras' own
`Dense.quantize("int8")`, which is exactly this; the shared embedding and pre-softmax
projection (§3.4's E, [vocab, d_model]) uses `SharedEmbedding.quantize`, a scale per
vocabulary row, so `h Eᵀ` is an int8 product too. Softmax, layer normalization, the
attention's own QKᵀ and weights·V products, and the beam search stay float32.

Training never runs in int8: the weights are quantized after a float32 checkpoint is
restored (`--decode_hparams=quantize=int8` of t2t-decoder, t2t-exporter, t2t-insights and
t2t-translate-all). What it costs in BLEU is measured in docs/results.md.
"""

import keras

from t2t_lite.embedding import SharedEmbedding

MODES = ("", "int8")  # "" = float32 weights, as trained


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"--decode_hparams: quantize={mode!r}; choose '' (float32, as trained) or 'int8'.")


def quantize_for_decoding(model: keras.Model, mode: str) -> keras.Model:
    """Quantizes `model`'s products in place (mode "int8"), or leaves it as it is (mode ""); returns it.

    The model must be built and hold its trained weights: quantizing replaces the float32
    variables, so restore a checkpoint first.
    """
    check_mode(mode)
    if mode:
        model.quantize(mode, filters=lambda layer: isinstance(layer, (keras.layers.Dense, SharedEmbedding)))
    return model
