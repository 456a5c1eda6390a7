"""Sampling (tensor2tensor's sampling_method=random): draws follow the model's softmax, tempered and cut to
the top k; temperature 0 is greedy decoding; a seed fixes the samples; cache and XLA draw the same."""

import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf
from test_translation import (  # noqa: F401 (fixtures: tiny random-weight models)
    HPARAMS,
    either_trained,
    relative_trained,
    run_decoder,
    trained,
)

from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import batch_decoding
from t2t_lite.decode.decode_settings import DecodeHParams, decode_hparams
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.decode.translation import translate
from t2t_lite.hparam import HParamsError

LINES = ["3 4 5", "1 2 3 4 5 6", "7", "9 9 1 2", "2 2"]
SOURCE = [5, 6, EOS_ID]  # ids of one source sentence (symbols 3 and 4)


def first_step_probabilities(model, temperature=1.0, top_k=0):
    """The model's distribution of the first target token for SOURCE, tempered and cut as the sampler does."""
    logits = model({"inputs": tf.constant([SOURCE]), "targets": tf.constant([[EOS_ID]])}, training=False)
    log_probs = np.asarray(tf.nn.log_softmax(logits[0, 0]), np.float64) / temperature
    if top_k:
        log_probs[np.argsort(log_probs)[:-top_k]] = -np.inf
    probabilities = np.exp(log_probs - log_probs.max())
    return probabilities / probabilities.sum()


def drawing(temperature, top_k, seed, **search):
    """The search settings that draw with temperature T among the top k (0: all) tokens, from `seed`."""
    return SearchSettings(
        sampling_method="random",
        sampling_temp=temperature,
        sampling_keep_top_k=top_k or -1,
        sampling_seed=seed,
        **{"beam_size": 1, "alpha": 0.0, **search},
    )


def sampled_first_tokens(model, search, count):
    """The first token of `count` samples for SOURCE: one batch of `count` identical rows, each drawn apart."""
    ids, _ = batch_decoding.decode_batch(model, np.array([SOURCE] * count, np.int32), search)
    return ids[:, 0]


def chi_square_critical_value(degrees: int, z: float = 3.0902) -> float:
    """The chi-square quantile at the standard normal's quantile z (3.0902: 0.999), by Wilson and Hilferty (1931)."""
    return degrees * (1 - 2 / (9 * degrees) + z * math.sqrt(2 / (9 * degrees))) ** 3


@pytest.mark.parametrize("temperature, top_k", [(1.0, 0), (0.7, 4)])
def test_first_tokens_are_drawn_from_the_tempered_softmax(trained, temperature, top_k):  # noqa: F811
    """Pearson's chi-square test at significance 0.001 (categories expecting fewer than 5 draws pooled)."""
    model = trained[1]
    count = 4000
    # Only the first token is tested, whatever the length limit: extra_length 4 makes (1.0, 0) the search that
    # test_the_cache_draws_as_the_full_recomputation... traces on the same model (one trace per model and settings).
    tokens = sampled_first_tokens(model, drawing(temperature, top_k, seed=7, extra_length=4), count)
    expected = first_step_probabilities(model, temperature, top_k) * count
    observed = np.bincount(tokens, minlength=len(expected)).astype(np.float64)
    assert observed[expected == 0].sum() == 0  # nothing drawn outside the top k
    small = expected < 5
    cells = [(observed[~small & (expected > 0)], expected[~small & (expected > 0)])]
    if expected[small].sum() > 0:
        cells.append((observed[small].sum(keepdims=True), expected[small].sum(keepdims=True)))
    observed, expected = (np.concatenate(column) for column in zip(*cells))
    statistic = float(((observed - expected) ** 2 / expected).sum())
    assert len(expected) >= 3, expected  # a distribution with something to test
    assert statistic < chi_square_critical_value(len(expected) - 1), (statistic, observed, expected)


def test_top_k_never_draws_outside_the_k_best_at_any_step(trained):  # noqa: F811
    model = trained[1]
    inputs = np.array([[5, 6, 7, 8, 9, 10, EOS_ID]] * 64, np.int32)
    ids, _ = batch_decoding.decode_batch(model, inputs, drawing(1.5, 2, seed=3, extra_length=4))
    targets = np.where(ids > 0, ids, 0).astype(np.int32)
    logits = model({"inputs": tf.constant(inputs), "targets": tf.constant(targets)}, training=False).numpy()
    second_best = np.sort(logits, axis=-1)[..., -2]
    drawn = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    emitted = targets > 0
    assert emitted.sum() > 100 and np.all(drawn[emitted] >= second_best[emitted] - 1e-5)
    assert len(set(map(tuple, ids))) > 1  # a flat temperature: not the same sample 64 times


def settings(**changes):
    return DecodeHParams.of(**{"beam_size": 4, "alpha": 0.6, "extra_length": 3, **changes})


def test_temperature_zero_is_greedy_decoding(trained):  # noqa: F811
    problem, model, data_dir, _ = trained
    vocabulary = problem.vocabulary(data_dir)
    greedy = translate(model, vocabulary, LINES, settings(beam_size=1), progress=False)
    sampled = translate(model, vocabulary, LINES, settings(sampling_method="random", sampling_temp=0.0), progress=False)
    assert [t.hypotheses for t in sampled] == [t.hypotheses for t in greedy]
    np.testing.assert_allclose([t.scores for t in sampled], [t.scores for t in greedy], rtol=1e-6)


def test_a_seed_fixes_the_samples_and_another_seed_draws_others(trained):  # noqa: F811
    problem, model, data_dir, _ = trained
    vocabulary = problem.vocabulary(data_dir)

    def samples(seed):
        chosen = settings(sampling_method="random", sampling_temp=1.5, sampling_seed=seed, num_samples=3)
        return [t.hypotheses for t in translate(model, vocabulary, LINES, chosen, progress=False)]

    def traces():  # of every search compiled for this model
        return sum(
            search.experimental_get_tracing_count() for search in batch_decoding._COMPILED.get(model, {}).values()
        )

    traced_before = traces()
    first = samples(1)
    assert all(len(hypotheses) == 3 for hypotheses in first)
    assert any(len(set(hypotheses)) > 1 for hypotheses in first)  # the three samples of a line differ
    assert samples(1) == first and samples(2) != first
    # The seed and the sample's index are arguments of the traced search: nine draws, at most one new trace.
    assert traces() - traced_before <= 1


def teacher_forced_log_probability(model, inputs, ids, extra_length):
    """log P(ids | inputs) per row, to its first EOS or its length limit (a drawn id 0 counts), one forward pass."""
    limits = (inputs > 0).sum(axis=1) + extra_length
    ids = np.pad(ids, [(0, 0), (0, max(0, limits.max() - ids.shape[1]))])
    logits = model({"inputs": tf.constant(inputs), "targets": tf.constant(ids.astype(np.int32))}, training=False)
    terms = tf.gather(tf.nn.log_softmax(logits), ids.astype(np.int32), batch_dims=2).numpy()
    totals = []
    for row, limit in enumerate(limits):
        ends = np.flatnonzero(ids[row, :limit] == EOS_ID)
        totals.append(terms[row, : ends[0] + 1 if len(ends) else limit].sum())
    return np.array(totals)


def test_the_cache_draws_as_the_full_recomputation_and_xla_draws_from_the_same_distribution(either_trained):  # noqa: F811
    """Cached and uncached decoding run the same kernels, so a seed draws the same tokens. XLA has its own
    random generator: its samples are others, repeatable for a seed, and scored as the model scores them
    (with sinusoids, then with relative positions)."""
    model = either_trained[1]
    inputs = np.array([[5, 6, 7, EOS_ID, 0], [9, 9, 3, 4, EOS_ID], [2, EOS_ID, 0, 0, 0]], np.int32)
    search = drawing(1.0, 0, seed=11, extra_length=4)
    full = batch_decoding.decode_batch(model, inputs, search, use_cache=False)
    cached = batch_decoding.decode_batch(model, inputs, search)
    np.testing.assert_array_equal(cached[0], full[0])
    np.testing.assert_allclose(cached[1], full[1], rtol=1e-5)
    xla = batch_decoding.decode_batch(model, inputs, dataclasses.replace(search, xla=True))
    np.testing.assert_array_equal(
        batch_decoding.decode_batch(model, inputs, dataclasses.replace(search, xla=True))[0], xla[0]
    )
    for ids, scores in (cached, xla):  # α = 0: a sample's score is its log-probability
        np.testing.assert_allclose(scores, teacher_forced_log_probability(model, inputs, ids, 4), atol=1e-4)


def test_the_decoder_writes_every_sample_with_its_score(trained, tmp_path):  # noqa: F811
    _, _, data_dir, output_dir = trained
    source = tmp_path / "in.txt"
    source.write_text("3 4 5\n1\n")
    run_decoder(
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        f"--decode_from_file={source}",
        f"--decode_to_file={tmp_path / 'out'}",
        "--decode_hparams=sampling_method=random,sampling_temp=1.5,num_samples=4,sampling_seed=5",
    )
    lines = (tmp_path / "out").read_text().splitlines()
    assert len(lines) == 2 and all(len(line.split("\t")) == 8 for line in lines)  # 4 × (sample, score)
    assert all(float(score) <= 0 for line in lines for score in line.split("\t")[1::2])


@pytest.mark.parametrize(
    "overrides, message",
    [
        ("num_samples=2", "above 1 only with sampling_method=random"),
        ("sampling_method=topk", "sampling_method=topk: use argmax or random"),
        ("sampling_method=random,sampling_temp=-1", "sampling_temp must be ≥ 0"),
        ("sampling_method=random,sampling_keep_top_k=0", "sampling_keep_top_k ≥ 1 or -1"),
    ],
)
def test_sampling_settings_are_checked_like_every_flag(trained, overrides, message):  # noqa: F811
    with pytest.raises(HParamsError, match=message):
        decode_hparams(HPARAMS, trained[0], overrides)


def test_samples_continue_a_target_prefix(either_trained):  # noqa: F811
    model = either_trained[1]
    inputs = np.array([[5, 6, 7, EOS_ID]] * 8, np.int32)
    prefixes = np.array([[9, 4]] * 4 + [[0, 0]] * 4, np.int32)  # four rows forced to start 9 4, four free
    ids, _ = batch_decoding.decode_batch(model, inputs, drawing(1.5, 0, seed=2, extra_length=3), prefixes=prefixes)
    assert all(list(row[:2]) == [9, 4] for row in ids[:4])
    assert len({tuple(row[2:]) for row in ids[:4]}) > 1  # drawn after the prefix, not forced further
