"""Lower-precision products for decoding (t2t_lite/decode/quantization.py) against each mode's formula, written out
here in numpy.

int8:      s_W[j] = 127 / max_i |W[i, j]|,  W_q = round(W · s_W);  s_x = 127 / max_i |x[i]|,  x_q = round(x · s_x)
           y[j] = (x_q · W_q)[j] / (s_x · s_W[j])
bfloat16:  y[j] = Σ_i bf16(x[i]) · bf16(W[i, j]), bf16 = rounding to 8 significant bits, to nearest, ties to even
"""

import dataclasses
import functools
import gc
import weakref

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.decode import batch_decoding, beam_search, decode_settings, quantization
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.hparam import HParams, HParamsError
from t2t_lite.model.embedding import SharedEmbedding
from t2t_lite.model.transformer import Transformer

VOCAB, HIDDEN = 50, 16


def quantized_by_formula(matrix, axis):
    """(int8 values, scale) of `matrix` with one scale per slice along `axis` (numpy, float64)."""
    scale = 127.0 / (np.abs(matrix).max(axis=axis, keepdims=True) + 1e-7)
    return np.clip(np.round(matrix * scale), -127, 127), scale


def embedding_pair(seed=0):
    """A float32 SharedEmbedding and an int8 copy of it."""
    tf.keras.utils.set_random_seed(seed)
    layers = [SharedEmbedding(VOCAB, HIDDEN) for _ in range(2)]
    for layer in layers:
        layer.build()
    layers[1].embeddings.assign(layers[0].embeddings)
    layers[1].quantize("int8")
    return layers


def test_the_pre_softmax_projection_is_the_int8_formula():
    float_layer, int8_layer = embedding_pair()
    matrix = float_layer.embeddings.numpy().astype(np.float64)
    hidden = np.random.default_rng(1).normal(size=(6, HIDDEN)).astype(np.float32)
    matrix_q, matrix_scale = quantized_by_formula(matrix, axis=1)  # one scale per vocabulary row
    hidden_q, hidden_scale = quantized_by_formula(hidden.astype(np.float64), axis=1)  # one per hidden row
    expected = (hidden_q @ matrix_q.T) / (hidden_scale * matrix_scale.T)
    np.testing.assert_allclose(int8_layer.logits(tf.constant(hidden)).numpy(), expected, rtol=1e-5, atol=1e-6)
    # ... and within the rounding of two 8-bit operands of the float32 product.
    exact = hidden @ matrix.T
    assert np.abs(expected - exact).max() < 0.02 * np.abs(exact).max()


def test_the_embedding_lookup_uses_the_dequantized_rows_and_keeps_padding_zero():
    float_layer, int8_layer = embedding_pair()
    matrix_q, matrix_scale = quantized_by_formula(float_layer.embeddings.numpy().astype(np.float64), axis=1)
    ids = np.array([[3, 7, 0], [49, 1, 0]])
    expected = (matrix_q / matrix_scale)[ids] * np.sqrt(HIDDEN) * (ids != 0)[..., None]
    np.testing.assert_allclose(int8_layer(tf.constant(ids)).numpy(), expected, rtol=1e-5, atol=1e-6)


def test_the_int8_layer_keeps_int8_variables_only():
    _, int8_layer = embedding_pair()
    assert sorted((variable.name, variable.dtype) for variable in int8_layer.weights) == [
        ("embeddings_int8", "int8"),
        ("embeddings_scale", "float32"),
    ]
    with pytest.raises(NotImplementedError, match="int8"):
        embedding_pair()[0].quantize("int4")


# Shaw et al.'s relative positions alone, clipped at ±3.
RELATIVE = (("pos", "none"), ("self_attention_type", "dot_product_relative"), ("max_relative_position", 3))


@functools.lru_cache(maxsize=None)
def tiny_pair(mode, positions=()):
    """A random tiny Transformer (float32) and its copy converted by quantize_for_decoding(mode), built once;
    `positions`: hparams (name, value) pairs of another kind of positions (RELATIVE)."""
    hparams = HParams(
        hidden_size=32,
        filter_size=64,
        num_heads=4,
        num_hidden_layers=2,
        max_length=32,
        layer_prepostprocess_dropout=0.0,
        **dict(positions),
    )
    built = []
    for _ in range(2):
        tf.keras.utils.set_random_seed(3)
        model = Transformer(hparams, vocab_size=VOCAB)
        model({"inputs": np.ones([1, 3], np.int32), "targets": np.ones([1, 2], np.int32)})
        built.append(model)
    return built[0], quantization.quantize_for_decoding(built[1], mode)


@pytest.fixture(params=["int8", "bfloat16"])
def mode(request):
    return request.param


def sentences(lengths, seed=0):
    rng = np.random.default_rng(seed)
    batch = np.zeros([len(lengths), max(lengths)], np.int32)
    for row, length in enumerate(lengths):
        batch[row, :length] = np.append(rng.integers(3, VOCAB, size=length - 1), beam_search.EOS_ID)
    return batch


def test_every_product_weight_is_int8_and_the_rest_stays_float32():
    float_model, int8_model = tiny_pair("int8")
    dense = [layer for layer in int8_model._flatten_layers() if isinstance(layer, tf.keras.layers.Dense)]
    # Per layer: 4 self-attention projections and the FFN's 2; per decoder layer 4 more (encoder-decoder).
    assert len(dense) == 2 * 6 + 2 * 10
    assert all(layer._kernel.dtype == "int8" for layer in dense)
    int8_names = sorted(variable.path for variable in int8_model.weights if variable.dtype == "int8")
    assert len(int8_names) == len(dense) + 1  # and the shared embedding
    norms = [variable for variable in int8_model.weights if "layer_norm" in variable.path or "norm" in variable.name]
    assert norms and all(variable.dtype == "float32" for variable in norms)
    assert float_model.count_params() > 0 and all(variable.dtype == "float32" for variable in float_model.weights)


def test_converting_frees_each_float32_weight_without_a_full_collection(mode):
    """Keras collects garbage for every variable a layer drops; converting needs none: each replaced weight is freed.

    Each full collection walks every object of the process: one per product weight made converting
    transformer_base take 15 s instead of 0.9 s (bench/quantize.py).
    """
    hparams = HParams(hidden_size=32, filter_size=64, num_heads=4, num_hidden_layers=2, max_length=32)
    model = Transformer(hparams, vocab_size=VOCAB)
    model({"inputs": np.ones([1, 3], np.int32), "targets": np.ones([1, 2], np.int32)})
    replaced = [weakref.ref(v) for v in model.weights if v.path.endswith(("kernel", "embeddings"))]
    collect, full = gc.collect, []

    def count(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(info)

    gc.callbacks.append(count)
    try:
        quantization.quantize_for_decoding(model, mode)
    finally:
        gc.callbacks.remove(count)
    assert len(replaced) == 33  # the product weights: 2 × 6 in the encoder, 2 × 10 in the decoder, the embedding
    assert [weight for weight in replaced if weight() is not None] == []  # freed as each was replaced
    assert full == []
    assert gc.collect is collect  # the process's own gc.collect is back


# Per mode: the largest logit error allowed (× the logits' standard deviation) and the least share of
# unchanged argmax predictions. bfloat16 keeps 8 significant bits of every value, int8 7 of a row's largest.
TEACHER_FORCED_BOUNDS = {"int8": (0.1, 0.9), "bfloat16": (0.05, 0.95)}


@pytest.mark.parametrize("positions", [(), RELATIVE], ids=["absolute", "relative"])
def test_teacher_forced_predictions_stay_those_of_the_float32_model(mode, positions):
    float_model, converted = tiny_pair(mode, positions)
    features = {"inputs": sentences([9, 6, 12], seed=1), "targets": sentences([8, 10, 5], seed=2)}
    exact, lower = float_model(features).numpy(), converted(features).numpy()
    largest_error, least_unchanged = TEACHER_FORCED_BOUNDS[mode]
    assert np.abs(lower - exact).max() < largest_error * exact.std()
    assert np.mean(lower.argmax(-1) == exact.argmax(-1)) > least_unchanged


@pytest.mark.parametrize(
    "beam_size,positions", [(1, ()), (4, ()), (4, RELATIVE)], ids=["greedy", "beam", "beam-relative"]
)
def test_cached_decoding_equals_full_recomputation_and_xla(mode, beam_size, positions):
    """Activations are quantized (int8) or rounded (bfloat16) per position, so the cache and XLA's static
    shapes and kernels change nothing but the order of float32 sums."""
    _, converted = tiny_pair(mode, positions)
    inputs = sentences([5, 7, 11], seed=4)
    search = SearchSettings(beam_size=beam_size, alpha=0.6, extra_length=4)
    cached_ids, cached_scores = batch_decoding.decode_batch(converted, inputs, search, return_beams=True)
    full_ids, full_scores = batch_decoding.decode_batch(converted, inputs, search, return_beams=True, use_cache=False)
    xla_ids, xla_scores = batch_decoding.decode_batch(
        converted, inputs, dataclasses.replace(search, xla=True), return_beams=True
    )
    # Another order of float32 sums moves an activation by an ulp, and now and then that flips its
    # rounding to bfloat16 (8 mantissa bits): a score moves by up to ~1e-3 relative (1.5e-3 seen on an
    # AVX2-only AMD Zen 3, whose kernels block the sums differently; under 1e-4 on AVX-512 hosts).
    rtol = 5e-3 if mode == "bfloat16" else 1e-4
    assert_same_beams(full_ids, full_scores, cached_ids, cached_scores, rtol)
    assert_same_beams(xla_ids, xla_scores, cached_ids[..., : xla_ids.shape[-1]], cached_scores, rtol)


def assert_same_beams(ids, scores, expected_ids, expected_scores, rtol):
    """The same hypotheses in each row, each with its score within rtol. Beams come in the order of their
    scores, so two may trade places only where their scores are that close (closest pair seen: -10.7226
    and -10.7590, 0.3 % apart)."""
    for row in range(ids.shape[0]):
        got = sorted(zip(map(tuple, ids[row].tolist()), scores[row].tolist()))
        want = sorted(zip(map(tuple, expected_ids[row].tolist()), expected_scores[row].tolist()))
        assert [hypothesis for hypothesis, _ in got] == [hypothesis for hypothesis, _ in want], row
        np.testing.assert_allclose([score for _, score in got], [score for _, score in want], rtol=rtol)


def test_an_unknown_mode_names_the_flag_and_the_choices():
    problem, hparams = registry.problem("algorithmic_reverse"), registry.hparams("transformer_tiny")
    assert decode_settings.decode_hparams(hparams, problem, "quantize=int8").quantize == "int8"
    assert decode_settings.decode_hparams(hparams, problem).quantize == ""
    assert decode_settings.decode_hparams(hparams, problem, "quantize=bfloat16").quantize == "bfloat16"
    with pytest.raises(HParamsError, match=r"--decode_hparams: quantize='int4'.*'int8' or 'bfloat16'"):
        decode_settings.decode_hparams(hparams, problem, "quantize=int4")


# -- the note for a mode slower than float32 on this CPU --------------------------------------------
# Abridged /proc/cpuinfo flags: AMD Zen 3 (AVX2 only), Zen 4 (VNNI, AVX-512 BF16), Intel with AMX.
ZEN3, ZEN4 = "flags\t\t: fpu avx2 fma\n", "flags\t\t: fpu avx2 avx512f avx512_vnni avx512_bf16\n"
XEON_AMX = "flags\t\t: fpu avx2 avx512f amx_bf16 amx_int8\n"


@pytest.mark.parametrize(
    "mode, xla, flags, said",
    [
        ("", False, ZEN3, None),  # float32: nothing to say
        ("int8", False, XEON_AMX, "pays only with xla=true"),  # without XLA, on any CPU
        ("bfloat16", False, ZEN4, "pays only with xla=true"),
        ("int8", True, ZEN3, "no int8 dot-product units"),
        ("int8", True, ZEN4, None),
        ("int8", True, XEON_AMX, None),
        ("bfloat16", True, ZEN3, "no bfloat16 multiply units"),
        ("bfloat16", True, ZEN4, None),
    ],
)
def test_a_mode_slower_than_float32_on_this_cpu_is_named_with_the_reason(tmp_path, monkeypatch, mode, xla, flags, said):
    monkeypatch.setattr("t2t_lite.cpu_features.platform.machine", lambda: "x86_64")
    (tmp_path / "cpuinfo").write_text(flags)
    note = quantization.speed_note(mode, xla, str(tmp_path / "cpuinfo"))
    if said is None:
        assert note is None
    else:
        assert note.startswith(f"Note: quantize={mode}") and said in note and "bench/decode_products.py" in note


def test_a_cpu_that_cannot_be_read_gets_no_note(tmp_path):
    assert quantization.speed_note("int8", True, str(tmp_path / "missing")) is None
    assert quantization.speed_note("bfloat16", True, str(tmp_path / "missing")) is None


# -- bfloat16 product weights ----------------------------------------------------------------------
def bfloat16_by_formula(values):
    """Rounds float32 values to bfloat16 (the upper 16 bits; to nearest, ties to even), as float64."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


def test_the_rounding_formula_keeps_8_significant_bits():
    assert bfloat16_by_formula([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-7, -3.0]).tolist() == [
        1.0,
        1.0,
        1 + 2**-6,
        1 + 2**-7,
        -3.0,
    ]  # ties to even both ways


def in_xla(function):
    return tf.function(function, jit_compile=True)


def test_the_bfloat16_pre_softmax_projection_and_lookup_are_the_formula_with_and_without_xla():
    float_layer, layer = (SharedEmbedding(VOCAB, HIDDEN) for _ in range(2))
    tf.keras.utils.set_random_seed(5)
    for each in (float_layer, layer):
        each.build()
    layer.embeddings.assign(float_layer.embeddings)
    layer.use_bfloat16_weights()
    assert [(variable.name, variable.dtype) for variable in layer.weights] == [("embeddings_bfloat16", "bfloat16")]
    matrix = bfloat16_by_formula(float_layer.embeddings.numpy())
    hidden = np.random.default_rng(1).normal(size=(6, HIDDEN)).astype(np.float32)
    expected = bfloat16_by_formula(hidden) @ matrix.T
    for logits in (layer.logits(tf.constant(hidden)), in_xla(layer.logits)(tf.constant(hidden))):
        assert logits.dtype == tf.float32
        np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-6)
    ids = np.array([[3, 7, 0], [49, 1, 0]])
    np.testing.assert_allclose(
        layer(tf.constant(ids)).numpy(), matrix[ids] * np.sqrt(HIDDEN) * (ids != 0)[..., None], rtol=1e-6
    )


def test_a_bfloat16_dense_is_the_formula_with_its_float32_bias_and_activation():
    float_model, model = tiny_pair("bfloat16")
    pairs = [
        (a, b)
        for a, b in zip(float_model._flatten_layers(), model._flatten_layers())
        if isinstance(b, quantization.BFloat16Dense) and b.activation.__name__ == "relu" and b.bias is not None
    ]
    assert pairs, "the FFN's first layer (ReLU, with a bias)"
    float_layer, layer = pairs[0]
    x = np.random.default_rng(2).normal(size=(3, 5, float_layer.kernel.shape[0])).astype(np.float32)
    expected = np.maximum(
        bfloat16_by_formula(x) @ bfloat16_by_formula(float_layer.kernel.numpy()) + float_layer.bias.numpy(), 0
    )
    for outputs in (layer(tf.constant(x)), in_xla(layer)(tf.constant(x))):
        assert outputs.dtype == tf.float32 and outputs.shape == expected.shape
        np.testing.assert_allclose(outputs.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_every_product_weight_is_bfloat16_and_the_rest_stays_float32():
    float_model, model = tiny_pair("bfloat16")
    dense = [layer for layer in model._flatten_layers() if isinstance(layer, tf.keras.layers.Dense)]
    assert len(dense) == 2 * 6 + 2 * 10 and all(isinstance(layer, quantization.BFloat16Dense) for layer in dense)
    assert sorted(variable.path for variable in model.weights if variable.dtype == "bfloat16") == sorted(
        [layer._kernel.path for layer in dense] + [f"{model.name}/shared_embedding/embeddings_bfloat16"]
    )
    assert {variable.dtype for variable in model.weights if "norm" in variable.path or "bias" in variable.name} == {
        "float32"
    }
    assert len(model.weights) == len(float_model.weights)  # each float32 kernel replaced, none kept beside it
