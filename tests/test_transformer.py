"""The Transformer against the paper: Table 3 parameter counts, causal and padding masks by
perturbation, cached incremental decoding equal to teacher forcing, dropout only in training."""

import collections
import os
import re
import sys

import keras
import numpy as np
import pytest

from t2t_lite import registry
from t2t_lite.model.transformer import Transformer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import table3_rows  # noqa: E402

VOCAB = 37000  # the shared EN-DE BPE vocabulary of §5.1

# (the set, its overrides, Table 3 "params ×10^6"): every row of bench/table3_rows.py at the paper's scale (a
# blank params cell is the base's 65: unchanged), and the paper's named big set, which the big row restates.
TABLE_3 = [
    (table3_rows.PAPER_SET, row.paper_overrides, row.paper_params_millions or 65) for row in table3_rows.ROWS
] + [("transformer_big", "", 213)]


def expected_parameters(hp, vocab):
    """Counted from §3 by hand: shared embedding, per-layer projections, FFN, LayerNorms (no relative tables)."""
    d, d_ff = hp.hidden_size, hp.filter_size
    attention = d * hp.key_channels * 2 + d * hp.value_channels + hp.value_channels * d  # no biases
    ffn = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = 2 * attention + ffn + 3 * norm
    # Row E: a learned table per stack, one vector for each position a training example or a decode reaches.
    positions = 2 * (hp.max_length + hp.extra_length) * d if hp.pos == "emb" else 0
    return vocab * d + positions + hp.encoder_layers * encoder_layer + hp.decoder_layers * decoder_layer


@pytest.mark.parametrize("set_name,overrides,paper_millions", TABLE_3)
def test_parameter_count_matches_table_3(set_name, overrides, paper_millions):
    hp = registry.hparams(set_name).override(overrides)
    # Counted from the variables' shapes: in a stateless scope that does not initialize them, Keras
    # creates them without drawing their initial values (seconds per model of the paper's sizes).
    with keras.StatelessScope(initialize_variables=False):
        count = Transformer(hp, VOCAB).count_params()
    assert count == expected_parameters(hp, VOCAB)
    assert abs(count / 1e6 - paper_millions) / paper_millions < 0.07


def test_the_parsing_recipe_has_the_parameters_counted_by_hand():
    # d = 256, d_ff = 512, N = 4, a 4,000-piece vocabulary (parsing_wsj4k):
    # embedding 4,000 * 256 = 1,024,000; attention 4 * 256^2 = 262,144; FFN 2 * 256 * 512 + 512 + 256
    # = 262,912; encoder layer 262,144 + 262,912 + 2 * 512 = 526,080; decoder layer 2 * 262,144 + 262,912
    # + 3 * 512 = 788,736; 1,024,000 + 4 * 526,080 + 4 * 788,736 = 6,283,264.
    hp = registry.hparams("transformer_parsing_small")
    with keras.StatelessScope(initialize_variables=False):
        assert Transformer(hp, 4000).count_params() == 6_283_264


# Shaw et al.'s tables: per self-attention layer (N in the encoder, N in the decoder) w^K and w^V of
# 2k + 1 = 41 rows, one head wide (d_k = d_v = d_model / h), counted by hand.
RELATIVE_TABLES = [
    ("transformer_relative", 12 * 2 * 41 * 64),  # 62,976 over base's 65 M
    ("transformer_relative_big", 12 * 2 * 41 * 64),  # d_k = 1024 / 16 = 64 as in base
    ("transformer_relative_tiny", 4 * 2 * 41 * 32),  # N = 2, d_k = 128 / 4
]


@pytest.mark.parametrize("set_name,tables", RELATIVE_TABLES)
def test_relative_sets_add_two_tables_per_self_attention_layer(set_name, tables):
    hp = registry.hparams(set_name)
    with keras.StatelessScope(initialize_variables=False):
        count = Transformer(hp, VOCAB).count_params()
    assert count == expected_parameters(hp, VOCAB) + tables


def test_pre_norm_adds_a_final_layer_norm_to_each_stack():
    """Pre-norm (x + Sublayer(LN(x))) leaves each stack's output unnormalised, so each gets one more LN."""
    hp = registry.hparams("transformer_tiny")
    assert Transformer(hp, 100).count_params() == expected_parameters(hp, 100)
    pre = hp.replace(norm_position="pre")
    assert Transformer(pre, 100).count_params() == expected_parameters(hp, 100) + 2 * (2 * hp.hidden_size)


# Relative positions only, k small enough that targets of 6 steps clip their distances.
RELATIVE = {"pos": "none", "self_attention_type": "dot_product_relative", "max_relative_position": 2}


def tiny(**changes):
    hp = registry.hparams("transformer_tiny").replace(hidden_size=32, filter_size=64, num_heads=4, **changes)
    return Transformer(hp, vocab_size=50)


def random_batch(rng, batch=3, src_len=7, tgt_len=6):
    inputs = rng.integers(2, 50, size=(batch, src_len)).astype("int32")
    targets = rng.integers(2, 50, size=(batch, tgt_len)).astype("int32")
    inputs[0, 4:] = 0  # a padded sentence
    return {"inputs": inputs, "targets": targets}


@pytest.mark.parametrize("overrides", [{}, {"norm_position": "pre"}, RELATIVE], ids=["post", "pre", "relative"])
def test_changing_target_j_changes_no_logits_before_j(overrides):
    model = tiny(**overrides)
    features = random_batch(np.random.default_rng(0))
    base = np.asarray(model(features))
    for j in range(features["targets"].shape[1]):
        changed = {**features, "targets": features["targets"].copy()}
        changed["targets"][:, j] = (changed["targets"][:, j] + 7) % 48 + 2
        logits = np.asarray(model(changed))
        # Position j+1 reads target j (shift right), so logits up to j must not move.
        np.testing.assert_array_equal(logits[:, : j + 1], base[:, : j + 1])
        if j + 1 < logits.shape[1]:
            assert not np.allclose(logits[:, j + 1], base[:, j + 1])


def test_changing_padded_source_tokens_changes_no_logits():
    model = tiny()
    rng = np.random.default_rng(1)
    features = random_batch(rng)
    base = np.asarray(model(features))
    # Append more padding, and change what sits behind the padding of sentence 0 in a longer batch.
    longer = np.pad(features["inputs"], ((0, 0), (0, 5)))
    np.testing.assert_allclose(model({**features, "inputs": longer}), base, atol=1e-5)
    other = features["inputs"].copy()
    other[1:, :] = rng.integers(2, 50, size=other[1:].shape)
    logits = np.asarray(model({**features, "inputs": other}))
    np.testing.assert_allclose(logits[0], base[0], atol=1e-5)


@pytest.mark.parametrize("preallocated", [False, True], ids=["growing-cache", "preallocated-cache"])
@pytest.mark.parametrize(
    "overrides",
    [{}, {"norm_position": "pre"}, {"pos": "emb"}, {"shared_embedding_and_softmax_weights": False}, RELATIVE],
    ids=["base", "pre", "emb", "unshared", "relative"],
)
def test_cached_decoding_reproduces_teacher_forced_logits(overrides, preallocated):
    model = tiny(**overrides)
    features = random_batch(np.random.default_rng(2))
    full = np.asarray(model(features))
    encoder_output, mask = model.encode(features["inputs"])
    # A preallocated cache longer than the targets: its empty positions must not be attended to.
    max_length = features["targets"].shape[1] + 3 if preallocated else 0
    cache = model.initial_cache(encoder_output, mask, max_length)
    ids = np.zeros(features["targets"].shape[0], "int32")
    steps = []
    for step in range(features["targets"].shape[1]):
        logits, cache = model.decode_step(ids, step, cache, in_place=preallocated)
        steps.append(np.asarray(logits))
        ids = features["targets"][:, step]
    assert np.abs(np.stack(steps, axis=1) - full).max() <= 1e-4
    self_cache, positions = cache["layers"]["layer_0"]["self"], max_length or features["targets"].shape[1]
    assert self_cache["v"].shape[2] == positions
    # Preallocated, the keys are kept transposed ([.., depth, positions]) for a plain QKᵀ product.
    assert (self_cache["k_transposed"].shape[2:] if preallocated else self_cache["k"].shape[2:4][::-1]) == (
        self_cache["v"].shape[3],
        positions,
    )


@pytest.mark.parametrize("overrides", [{}, RELATIVE], ids=["base", "relative"])
def test_beam_slots_follow_hypotheses_that_beam_search_reorders(overrides):
    """Keys/values stay in the slot of the beam that wrote them; only the "slots" rows are
    reordered, at random here, and each row must still see exactly its own history (with relative
    positions: at the distance of its own position, not of its slot's place in the cache)."""
    model = tiny(**overrides)
    rng = np.random.default_rng(4)
    features = random_batch(rng)
    (batch, length), beam = features["targets"].shape, 3
    encoder_output, mask = model.encode(features["inputs"])
    cache = model.initial_cache(encoder_output, mask, length + 2, beam_slots=beam)
    cache["slots"] = np.repeat(cache["slots"], beam, axis=0)  # as beam_search repeats its states
    beam_inputs = np.repeat(features["inputs"], beam, axis=0)
    history = np.zeros((batch * beam, 0), "int32")
    ids = np.zeros(batch * beam, "int32")
    for step in range(length):
        logits, cache = model.decode_step(ids, step, cache, in_place=True)
        targets = np.concatenate([history, np.zeros((batch * beam, 1), "int32")], axis=1)
        teacher_forced = np.asarray(model({"inputs": beam_inputs, "targets": targets}))[:, -1]
        assert np.abs(np.asarray(logits) - teacher_forced).max() <= 1e-4, f"step {step}"
        parents = (rng.integers(0, beam, size=(batch, beam)) + beam * np.arange(batch)[:, None]).reshape(-1)
        cache["slots"] = np.asarray(cache["slots"])[parents]
        ids = rng.integers(2, model.vocab_size, size=batch * beam).astype("int32")
        history = np.concatenate([history[parents], ids[:, None]], axis=1)
    self_cache = cache["layers"]["layer_0"]["self"]
    assert self_cache["v"].shape[:3] == (batch, model.hparams.num_heads, (length + 2) * beam)
    assert self_cache["k_transposed"].shape[3] == (length + 2) * beam


def test_dropout_only_in_training():
    model = tiny(attention_dropout=0.1, relu_dropout=0.1)
    features = random_batch(np.random.default_rng(3))
    np.testing.assert_array_equal(model(features), model(features, training=False))
    assert not np.allclose(model(features, training=True), model(features, training=True))


def test_a_dropped_symbol_is_padding_in_the_encoder_and_the_decoder_inputs():
    """tensor2tensor's symbol_dropout: a dropped source word is masked out like padding, a dropped
    decoder input embeds to zero like the start symbol. With every id dropped (rate just below 1)
    and no other dropout, training sees what inference sees for all-padding inputs and targets."""
    features = random_batch(np.random.default_rng(4))
    model = tiny(layer_prepostprocess_dropout=0.0, symbol_dropout=1.0 - 1e-9)
    all_padding = {name: np.zeros_like(ids) for name, ids in features.items()}
    np.testing.assert_allclose(model(features, training=True), model(all_padding), rtol=1e-5, atol=1e-5)
    assert not np.allclose(model(features), model(all_padding))  # inference drops nothing


def test_symbol_dropout_adds_only_its_seed_to_the_checkpoint_layout():
    """Every weight keeps its name and shape with word dropout on; off (every set), nothing is added."""

    def layout(model):  # variable paths without the model's and layers' uniquifying suffixes
        return collections.Counter(
            (re.sub(r"_\d+", "", v.path.split("/", 1)[1]), tuple(v.shape)) for v in model.variables
        )

    off, on = layout(tiny()), layout(tiny(symbol_dropout=0.1))
    assert on - off == collections.Counter({("seed_generator_state", (2,)): 1})
    assert not off - on


def test_attention_weights_are_returned_per_layer_and_sum_to_one():
    model = tiny()
    features = random_batch(np.random.default_rng(4))
    _, attention = model(features, return_attention=True)
    assert set(attention) == {"encoder_self", "decoder_self", "encoder_decoder"}
    assert len(attention["encoder_self"]) == 2 and len(attention["decoder_self"]) == 2
    assert attention["encoder_decoder"][0].shape == (3, 4, 6, 7)
    np.testing.assert_allclose(np.sum(attention["decoder_self"][1], -1), 1.0, atol=1e-5)
    assert np.all(np.asarray(attention["decoder_self"][0])[..., 0, 1:] == 0)  # causal


@pytest.mark.parametrize("overrides", [{}, RELATIVE], ids=["absolute", "relative"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_mixed_precision_keeps_logits_and_variables_float32(dtype, overrides):
    model = tiny(activation_dtype=dtype, **overrides)
    logits = model(random_batch(np.random.default_rng(5)))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert all(weight.dtype == "float32" for weight in model.weights)
    assert model.encoder.stack[0].feed_forward.compute_dtype == dtype
    assert np.isfinite(np.asarray(logits)).all()


def test_registered_as_transformer():
    assert registry.model("transformer") is Transformer
