"""Beam search against exhaustive search and the GNMT formula; model decoding against teacher forcing."""

import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.decode import batch_decoding, beam_search
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.hparam import HParams
from t2t_lite.model.transformer import Transformer

EOS = 1


# -- A fixed toy "model": logits from a table indexed by position and previous token ----------
def table_logits_fn(table):
    """symbols_to_logits_fn over table[position, previous token] whose state is the prefix so far.

    The state must arrive reordered exactly like the ids, or the assertion fails; it grows
    by one position per step, as a key/value cache does.
    """
    table = tf.constant(table, tf.float32)

    def symbols_to_logits_fn(ids, step, states):
        tf.debugging.assert_equal(states["prefix"][:, :, 0], ids[:, :-1])
        logits = tf.gather(table[step], ids[:, -1])
        return logits, {"prefix": tf.concat([states["prefix"], ids[:, -1:, None]], axis=1)}

    return symbols_to_logits_fn


def empty_prefix(batch_size):
    return {"prefix": tf.zeros([batch_size, 0, 1], tf.int32)}


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def exhaustive(table, initial_id, limit, alpha):
    """Every complete sequence (ending in EOS or reaching `limit` tokens), best score first."""
    log_probs = log_softmax(np.asarray(table, np.float64))
    complete = []

    def extend(prefix, log_prob):
        previous = prefix[-1] if prefix else initial_id
        for token in range(table.shape[-1]):
            sequence, total = prefix + [token], log_prob + log_probs[len(prefix), previous, token]
            if token == EOS or len(sequence) == limit:
                complete.append((total / ((5 + len(sequence)) / 6) ** alpha, sequence))
            else:
                extend(sequence, total)

    extend([], 0.0)
    return sorted(complete, key=lambda item: -item[0])


def hypothesis(ids, limit):
    """The tokens of one returned hypothesis: up to its first EOS, or its `limit` tokens."""
    tokens = list(ids[:limit])
    return tokens[: tokens.index(EOS) + 1] if EOS in tokens else tokens


def random_table(seed, length=4, vocab=4):
    return np.random.default_rng(seed).normal(scale=2.0, size=(length, vocab, vocab))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_wide_beam_ranks_every_hypothesis_as_exhaustive_search(alpha):
    table, limits, initial_ids = random_table(seed=1), [4, 2], [0, 2]
    truth = [exhaustive(table, initial_ids[row], limits[row], alpha) for row in range(2)]
    beam_size = len(truth[0])  # 1 + 3 + 9 + 27·4 = 121 sequences: the beam holds them all
    search = tf.function(
        lambda: beam_search.beam_search(
            table_logits_fn(table),
            tf.constant(initial_ids),
            beam_size,
            tf.constant(limits),
            4,
            alpha,
            states=empty_prefix(2),
            stop_early=False,
        )
    )
    ids, scores = (tensor.numpy() for tensor in search())
    for row in range(2):
        found = len(truth[row])
        assert [hypothesis(ids[row, beam], limits[row]) for beam in range(found)] == [s for _, s in truth[row]]
        np.testing.assert_allclose(scores[row, :found], [score for score, _ in truth[row]], rtol=1e-5)
        assert np.all(np.isneginf(scores[row, found:]))


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_early_stopping_keeps_the_exhaustive_best(seed):
    table = random_table(seed)
    ids, scores = beam_search.beam_search(
        table_logits_fn(table), tf.constant([0]), 121, 4, 4, 0.6, states=empty_prefix(1)
    )
    best_score, best = exhaustive(table, 0, 4, 0.6)[0]
    assert hypothesis(ids.numpy()[0, 0], 4) == best
    assert scores.numpy()[0, 0] == pytest.approx(best_score, rel=1e-5)


def test_stop_early_ends_the_search_once_nothing_alive_can_win():
    """§6.1 "terminate early when possible": EOS first (P ≈ 1) outscores anything that could still come.

    With stop_early the search ends after that one step: the best alive hypothesis, log P ≈ log 1e-4,
    cannot beat it even at the limit's length penalty. Without it, the search goes on until the
    finished set is full (tensor2tensor's meaning), and the result is the same.
    """
    probs = np.full((10, 4, 4), 1e-4)
    probs[:, :, EOS] = 1 - 3e-4
    steps = {}
    for stop_early in (True, False):
        ids, scores = beam_search.beam_search(
            table_logits_fn(np.log(probs)),
            tf.constant([0]),
            2,
            10,
            4,
            0.6,
            states=empty_prefix(1),
            stop_early=stop_early,
        )
        steps[stop_early] = ids.shape[-1]
        assert hypothesis(ids.numpy()[0, 0], 10) == [EOS]
        assert scores.numpy()[0, 0] == pytest.approx(math.log(1 - 3e-4) / ((5 + 1) / 6) ** 0.6, abs=1e-6)
    assert steps[True] == 1 and steps[False] > 1


def test_alpha_flips_the_ranking_where_the_formula_says():
    # "EOS" now (p=0.6, |Y|=1) against "2 2 EOS" (p=0.39·0.98·0.98, |Y|=3): the longer one wins
    # once log(p_long) / ((5+3)/6)^α > log(p_short) / ((5+1)/6)^α, i.e. α > α*.
    probs = np.full((3, 3, 3), 0.01)
    probs[0, 0] = [0.01, 0.6, 0.39]
    probs[1, 2] = [0.01, 0.01, 0.98]
    probs[2, 2] = [0.01, 0.98, 0.01]
    short, long = math.log(0.6), math.log(0.39 * 0.98 * 0.98)
    crossing = math.log(long / short) / math.log(8 / 6)
    for alpha, winner in ((crossing - 0.01, [EOS]), (crossing + 0.01, [2, 2, EOS])):
        ids, scores = beam_search.beam_search(
            table_logits_fn(np.log(probs)), tf.constant([0]), 2, 3, 3, alpha, states=empty_prefix(1)
        )
        assert hypothesis(ids.numpy()[0, 0], 3) == winner
        log_prob, length = (short, 1) if winner == [EOS] else (long, 3)
        assert scores.numpy()[0, 0] == pytest.approx(log_prob / ((5 + length) / 6) ** alpha, rel=1e-4)


def test_beam_search_over_a_large_vocabulary_equals_the_plain_top_k_search(monkeypatch):
    # 4 × 1,000 candidates per row: beam search takes the chunked path of `top_k.offset_top_k`.
    table, limits = random_table(seed=8, length=5, vocab=1000), tf.constant([5, 3])

    def search():
        return [
            tensor.numpy()
            for tensor in beam_search.beam_search(
                table_logits_fn(table), tf.constant([0, 7]), 4, limits, 1000, 0.6, states=empty_prefix(2)
            )
        ]

    chunked_ids, chunked_scores = search()
    monkeypatch.setattr(
        beam_search,
        "offset_top_k",
        lambda scores, offsets, k: tf.math.top_k(
            tf.reshape(scores + offsets[:, :, None], [tf.shape(scores)[0], -1]), k=k
        ),
    )
    plain_ids, plain_scores = search()
    np.testing.assert_array_equal(chunked_ids, plain_ids)
    np.testing.assert_array_equal(chunked_scores, plain_scores)


def test_greedy_search_follows_the_argmax():
    table = random_table(seed=5, length=5, vocab=6)
    ids, scores = beam_search.greedy_search(
        table_logits_fn(table), tf.constant([0, 3, 4]), tf.constant([5, 5, 2]), 0.6, states=empty_prefix(3)
    )
    log_probs = log_softmax(table)
    for row, (previous, limit) in enumerate(zip([0, 3, 4], [5, 5, 2])):
        expected, total = [], 0.0
        while len(expected) < limit and EOS not in expected:
            token = int(np.argmax(log_probs[len(expected), previous]))
            total += log_probs[len(expected), previous, token]
            expected.append(token)
            previous = token
        assert list(ids.numpy()[row, 0, : len(expected)]) == expected
        assert not ids.numpy()[row, 0, len(expected) :].any()
        assert scores.numpy()[row, 0] == pytest.approx(total / ((5 + len(expected)) / 6) ** 0.6, rel=1e-5)


# -- The Transformer's cache API -----------------------------------------------------------------
VOCAB = 24


# Shaw et al.'s relative positions alone, clipped at ±3 so that the sentences of up to 15 + 3 steps clip them.
RELATIVE = {"pos": "none", "self_attention_type": "dot_product_relative", "max_relative_position": 3}


@pytest.fixture(scope="module", params=["absolute", "relative"])
def model(request):
    """A random tiny Transformer whose EOS embedding points along the decoder's mean output; sinusoids, then
    relative positions.

    Untrained, it would never emit EOS; this makes beams end at different lengths, some
    by EOS and some at the length limit, so the tests cover both ways to finish.
    """
    tf.keras.utils.set_random_seed(7)
    hparams = HParams(
        hidden_size=16,
        filter_size=32,
        num_heads=2,
        num_hidden_layers=2,
        max_length=32,
        layer_prepostprocess_dropout=0.0,
        **(RELATIVE if request.param == "relative" else {}),
    )
    model = Transformer(hparams, vocab_size=VOCAB)
    hidden, _ = model.decoder_hidden({"inputs": sentences([4, 15, 12], seed=3), "targets": sentences([8] * 3, seed=5)})
    direction = tf.reduce_mean(hidden, axis=[0, 1]).numpy()
    embeddings = model.target_embedding.embeddings.numpy()
    embeddings[EOS] = 0.2 * direction / np.linalg.norm(direction) * np.linalg.norm(embeddings, axis=1).mean()
    model.target_embedding.embeddings.assign(embeddings)
    return model


def sentences(lengths, seed=0):
    rng = np.random.default_rng(seed)
    batch = np.zeros([len(lengths), max(lengths)], np.int32)
    for row, length in enumerate(lengths):
        batch[row, :length] = np.append(rng.integers(3, VOCAB, size=length - 1), EOS)
    return batch


def test_greedy_decoding_is_the_argmax_of_teacher_forcing(model):
    inputs = sentences([6, 4, 9])
    ids, _ = batch_decoding.decode_batch(model, inputs, SearchSettings(beam_size=1, alpha=0.6, extra_length=3))
    logits = model({"inputs": inputs, "targets": ids}).numpy()
    for row, length in enumerate([6, 4, 9]):
        emitted = hypothesis(ids[row], length + 3)
        assert emitted[-1] == EOS or len(emitted) == length + 3  # ended by EOS or by its own limit
        np.testing.assert_array_equal(logits[row, : len(emitted)].argmax(-1), emitted)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_cached_decoding_equals_full_recomputation(model, beam_size):
    inputs = sentences([5, 7])
    # The settings of the XLA test below: decode_batch traces once per model and settings, and the model is shared.
    search, settings = SearchSettings(beam_size=beam_size, alpha=0.6, extra_length=3), dict(return_beams=True)
    cached_ids, cached_scores = batch_decoding.decode_batch(model, inputs, search, **settings)
    full_ids, full_scores = batch_decoding.decode_batch(model, inputs, search, use_cache=False, **settings)
    np.testing.assert_array_equal(cached_ids, full_ids)
    np.testing.assert_allclose(cached_scores, full_scores, rtol=1e-4)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_xla_decoding_with_a_preallocated_cache_equals_the_growing_cache(model, beam_size):
    # Rows end by EOS and by their own limits (lengths 4, 15, 12 + 3) at different steps.
    inputs = sentences([4, 15, 12], seed=3)
    search, settings = SearchSettings(beam_size=beam_size, alpha=0.6, extra_length=3), dict(return_beams=True)
    ids, scores = batch_decoding.decode_batch(model, inputs, search, **settings)
    xla_ids, xla_scores = batch_decoding.decode_batch(model, inputs, dataclasses.replace(search, xla=True), **settings)
    # The same 0-padded ids; the XLA ids stop at the last non-zero column, not at the last step run.
    assert xla_ids.shape[-1] <= ids.shape[-1] and not ids[..., xla_ids.shape[-1] :].any()
    np.testing.assert_array_equal(xla_ids, ids[..., : xla_ids.shape[-1]])
    np.testing.assert_allclose(xla_scores, scores, rtol=1e-4)


def test_static_shapes_need_a_static_input_length(model):
    decode = tf.function(
        lambda batch: beam_search.decode(
            model, batch, SearchSettings(beam_size=2, alpha=0.6, extra_length=1, xla=True)
        ),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    with pytest.raises(ValueError, match="static length"):
        decode(tf.constant(sentences([3])))


def test_a_sentence_decodes_the_same_alone_and_beside_longer_ones(model):
    batch = sentences([4, 15, 12], seed=3)
    search, settings = SearchSettings(beam_size=4, alpha=0.6, extra_length=3), dict(return_beams=True)
    alone_ids, alone_scores = batch_decoding.decode_batch(model, batch[:1, :4], search, **settings)
    batch_ids, batch_scores = batch_decoding.decode_batch(model, batch, search, **settings)
    length = alone_ids.shape[2]
    np.testing.assert_array_equal(batch_ids[0, :, :length], alone_ids[0])
    assert not batch_ids[0, :, length:].any()
    np.testing.assert_allclose(batch_scores[0], alone_scores[0], rtol=1e-4)
    assert length <= 4 + 3


@pytest.mark.parametrize("inputs", [[[EOS]], [[0, 0, 0], [5, 6, EOS]]], ids=["only-eos", "all-padding"])
def test_an_empty_input_decodes(model, inputs):
    # The beam-4 settings of the tests above: decode_batch traces once per model and settings, and the model is shared.
    search = SearchSettings(beam_size=4, alpha=0.6, extra_length=3)
    ids, scores = batch_decoding.decode_batch(model, np.array(inputs, np.int32), search)
    assert ids.shape[0] == len(inputs) and np.all(np.isfinite(scores))
    for row, source in zip(ids, inputs):  # each row within its own limit: real input length + extra_length,
        # and one step for a row of padding only (batch padding, which must not keep the search going)
        assert np.count_nonzero(row) <= (np.count_nonzero(source) + search.extra_length if np.any(source) else 1)
    if len(inputs) == 2:  # the all-padding row does not disturb its neighbour
        alone_ids, alone_scores = batch_decoding.decode_batch(model, np.array(inputs[1:], np.int32), search)
        np.testing.assert_array_equal(ids[1, : alone_ids.shape[1]], alone_ids[0])
        np.testing.assert_allclose(scores[1], alone_scores[0], rtol=1e-4)


# -- Target prefixes ------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_prefix_ranks_its_continuations_as_exhaustive_search_over_them(alpha):
    """Row 0 forced to start [2, 3], row 1 to start [3]: every hypothesis is a continuation, scored whole."""
    table, limits, initial_ids, prefixes = random_table(seed=6), [4, 3], [0, 2], [[2, 3], [3, 0]]
    truth = [
        [
            (score, sequence)
            for score, sequence in exhaustive(table, initial_ids[row], limits[row], alpha)
            if sequence[: len(prefix)] == prefix
        ]
        for row, prefix in enumerate([[2, 3], [3]])
    ]
    beam_size = 16  # more than row 0's 1 + 4 and row 1's 1 + 4 continuations
    ids, scores = (
        tensor.numpy()
        for tensor in beam_search.beam_search(
            table_logits_fn(table),
            tf.constant(initial_ids),
            beam_size,
            tf.constant(limits),
            4,
            alpha,
            states=empty_prefix(2),
            stop_early=False,
            prefix_ids=tf.constant(prefixes),
        )
    )
    for row in range(2):
        found = len(truth[row])
        assert [hypothesis(ids[row, beam], limits[row]) for beam in range(found)] == [s for _, s in truth[row]]
        np.testing.assert_allclose(scores[row, :found], [score for score, _ in truth[row]], rtol=1e-5)
        assert np.all(np.isneginf(scores[row, found:]))


def test_greedy_search_follows_the_prefix_then_the_argmax():
    table = random_table(seed=5, length=5, vocab=6)
    ids, scores = beam_search.greedy_search(
        table_logits_fn(table),
        tf.constant([0]),
        tf.constant([5]),
        0.0,
        states=empty_prefix(1),
        prefix_ids=tf.constant([[4, 2]]),
    )
    log_probs = log_softmax(table)
    expected, total, previous = [], 0.0, 0
    while len(expected) < 5 and EOS not in expected:
        token = [4, 2][len(expected)] if len(expected) < 2 else int(np.argmax(log_probs[len(expected), previous]))
        total += log_probs[len(expected), previous, token]
        expected.append(token)
        previous = token
    assert list(ids.numpy()[0, 0, : len(expected)]) == expected
    assert scores.numpy()[0, 0] == pytest.approx(total, rel=1e-5)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_an_empty_prefix_decodes_as_no_prefix_and_a_prefix_is_kept_in_the_output(model, beam_size):
    inputs = sentences([5, 7, 4], seed=2)
    search, settings = SearchSettings(beam_size=beam_size, alpha=0.6, extra_length=3), dict(return_beams=True)
    plain_ids, plain_scores = batch_decoding.decode_batch(model, inputs, search, **settings)
    prefixes = np.array([[0, 0], [9, 10], [0, 0]], np.int32)  # rows 0 and 2: no prefix
    ids, scores = batch_decoding.decode_batch(model, inputs, search, prefixes=prefixes, **settings)
    for row in (0, 2):
        np.testing.assert_array_equal(ids[row, :, : plain_ids.shape[2]], plain_ids[row])
        np.testing.assert_allclose(scores[row], plain_scores[row], rtol=1e-4)
    best = ids[1, 0]
    assert list(best[:2]) == [9, 10] and np.count_nonzero(best) <= 7 + 3 + 2  # its limit grows by the prefix
    xla_ids, xla_scores = batch_decoding.decode_batch(
        model, inputs, dataclasses.replace(search, xla=True), prefixes=prefixes, **settings
    )
    np.testing.assert_array_equal(xla_ids, ids[..., : xla_ids.shape[-1]])
    np.testing.assert_allclose(xla_scores, scores, rtol=1e-4)
