"""Scoring given pairs: log P(target | source) under teacher forcing, checked against an unbatched
recomputation and against greedy decoding, which with α = 0 scores its own output with the same sum.

The model is the trained word-reversal fixture (tests/fixtures/written_before_regroup): it ends its
translations with EOS, as the greedy check needs, and it costs no training.
"""

import numpy as np
import pytest
import tensorflow as tf
from test_compatibility import FIXTURE, restored_model
from test_export import either_setup, random_sentences, relative_setup, setup  # noqa: F401 (fixtures: trained exports)
from test_translation import run_decoder

from t2t_lite import registry
from t2t_lite.cli import t2t_decoder as decoder_cli
from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import model_loading, quantization, scoring
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.translation import translate

SOURCES = ["die katze läuft", "der hund", "grün haus straße", "haus", "der die das katze hund"]


@pytest.fixture(scope="module")
def model_and_vocabulary():
    return restored_model()


def unbatched_log_probs(model, vocabulary, source, target):
    """Each target subword's log softmax, one pair alone (no padding, no sorting), in numpy float64."""
    inputs = np.array([vocabulary.encode(source) + [EOS_ID]], np.int32)
    targets = np.array([vocabulary.encode(target) + [EOS_ID]], np.int32)
    logits = model({"inputs": tf.constant(inputs), "targets": tf.constant(targets)}, training=False)
    logits = np.asarray(logits, np.float64)[0]
    peak = logits.max(-1, keepdims=True)
    log_softmax = logits - peak - np.log(np.exp(logits - peak).sum(-1, keepdims=True))
    return log_softmax[np.arange(targets.shape[1]), targets[0]]


def test_scores_equal_each_pairs_log_softmax_computed_alone(model_and_vocabulary):
    model, vocabulary = model_and_vocabulary
    targets = ["läuft katze die", "hund der", "haus", "straße haus grün der", "katze"]
    pairs = list(zip(SOURCES, targets))
    # Two pairs a batch: sorted by length, padded, and put back in the file's order.
    scores = scoring.score_pairs(model, vocabulary, pairs, DecodeHParams.of(batch_size=2))
    for (source, target), score in zip(pairs, scores):
        expected = unbatched_log_probs(model, vocabulary, source, target)
        np.testing.assert_allclose(score.per_token, expected, rtol=1e-5, atol=1e-5)
        assert score.log_probability == pytest.approx(expected.sum(), abs=1e-4)
        assert len(score.per_token) == len(vocabulary.encode(target)) + 1  # EOS's term is last
    assert all(score.log_probability < 0 for score in scores)


def greedy_and_scored(model, vocabulary, settings):
    """(greedy decoding's scores, the same outputs scored) for the sources whose output ended in EOS and
    re-encodes to the ids decoded."""
    greedy = translate(model, vocabulary, SOURCES, settings, progress=False)
    kept = [t for t in greedy if t.ids and t.ids[-1] == EOS_ID and vocabulary.encode(t.hypotheses[0]) == t.ids[:-1]]
    assert len(kept) >= 3, [t.hypotheses for t in greedy]
    scored = scoring.score_pairs(model, vocabulary, [(t.source, t.hypotheses[0]) for t in kept], settings)
    return [t.scores[0] for t in kept], [score.log_probability for score in scored]


def test_greedy_decoding_without_length_penalty_scores_its_output_as_scoring_does(model_and_vocabulary):
    model, vocabulary = model_and_vocabulary
    greedy, scored = greedy_and_scored(model, vocabulary, DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=10))
    np.testing.assert_allclose(scored, greedy, atol=1e-4)


def test_xla_and_int8_score_as_their_own_decoders(model_and_vocabulary):
    model, vocabulary = model_and_vocabulary
    xla = DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=10, xla=True, batch_size=4)
    greedy, scored = greedy_and_scored(model, vocabulary, xla)
    np.testing.assert_allclose(scored, greedy, atol=1e-4)
    plain = scoring.score_pairs(model, vocabulary, [(s, s) for s in SOURCES], DecodeHParams.of())
    compiled = scoring.score_pairs(model, vocabulary, [(s, s) for s in SOURCES], xla)
    np.testing.assert_allclose([s.log_probability for s in compiled], [s.log_probability for s in plain], atol=1e-4)

    int8 = quantization.quantize_for_decoding(restored_model()[0], "int8")
    greedy, scored = greedy_and_scored(int8, vocabulary, DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=10))
    np.testing.assert_allclose(scored, greedy, atol=1e-4)


def run_scoring(tmp_path, text, *flags):
    (tmp_path / "pairs.tsv").write_bytes(text)
    run_decoder(
        "--problem=translate_files",
        f"--data_dir={FIXTURE / 'data'}",
        f"--output_dir={FIXTURE / 'train'}",
        f"--score_file={tmp_path / 'pairs.tsv'}",
        *flags,
    )


def test_the_decoder_writes_one_score_per_pair_and_per_token_on_request(model_and_vocabulary, tmp_path, capsys):
    model, vocabulary = model_and_vocabulary
    run_scoring(tmp_path, "der hund\thund der\nhaus\thaus\n".encode(), "--decode_hparams=score_per_token=true")
    lines = (tmp_path / "pairs.tsv.scores").read_text().splitlines()
    assert "Wrote 2 scores" in capsys.readouterr().out
    for line, (source, target) in zip(lines, [("der hund", "hund der"), ("haus", "haus")]):
        total, *terms = map(float, line.split("\t"))
        expected = unbatched_log_probs(model, vocabulary, source, target)
        np.testing.assert_allclose(terms, expected, atol=1e-5)
        assert total == pytest.approx(expected.sum(), abs=1e-4)
    run_scoring(tmp_path, "der hund\thund der\n".encode(), f"--decode_to_file={tmp_path / 'out'}")
    assert len((tmp_path / "out").read_text().splitlines()[0].split("\t")) == 1  # the sum alone by default


@pytest.mark.parametrize(
    "text, message",
    [
        (b"der hund\thund der\nno tab here\n", r"pairs.tsv:2: expected source<TAB>target, found 0 tabs"),
        (b"a\tb\tc\n", r"pairs.tsv:1: expected source<TAB>target, found 2 tabs"),
        (b"haus\thaus\nbad \xff\thaus\n", r"pairs.tsv:2: not valid UTF-8"),
    ],
)
def test_a_bad_line_stops_the_tool_before_any_work_naming_it(tmp_path, monkeypatch, text, message):
    def no_model(*args):
        raise AssertionError("the model was loaded before the file was checked")

    monkeypatch.setattr(decoder_cli.t2t_flags, "trained_model", no_model)
    with pytest.raises(decoder_cli.t2t_flags.UsageError, match="--score_file: .*" + message):
        run_scoring(tmp_path, text)
    assert not (tmp_path / "pairs.tsv.scores").exists()


def test_an_empty_target_is_the_probability_of_eos_first_and_an_empty_source_eos_alone(model_and_vocabulary):
    """log P("" | x) = log softmax(z_1)[EOS], from the logits computed by hand; an empty source reads as [EOS]."""
    model, vocabulary = model_and_vocabulary
    pairs = [("der hund", ""), ("", "hund der"), ("", ""), ("haus", "haus")]
    scores = scoring.score_pairs(model, vocabulary, pairs, DecodeHParams.of(batch_size=3))
    for (source, target), score in zip(pairs, scores):
        expected = unbatched_log_probs(model, vocabulary, source, target)
        np.testing.assert_allclose(score.per_token, expected, rtol=1e-5, atol=1e-5)
    assert len(scores[0].per_token) == 1 and scores[0].log_probability < 0  # EOS's term alone
    # What a model that learned to translate gives nothing a nonempty source: far less likely than its translation.
    assert (
        scores[0].log_probability
        < scoring.score_pairs(model, vocabulary, [("der hund", "hund der")], DecodeHParams.of())[0].log_probability
    )


def test_the_decoder_scores_its_own_empty_translations_and_says_which(model_and_vocabulary, tmp_path, capsys):
    model, vocabulary = model_and_vocabulary
    run_scoring(tmp_path, "der hund\thund der\nhaus\t\n\thaus\n".encode())
    lines = (tmp_path / "pairs.tsv.scores").read_text().splitlines()
    assert len(lines) == 3
    assert float(lines[1]) == pytest.approx(unbatched_log_probs(model, vocabulary, "haus", "").sum(), abs=1e-4)
    printed = capsys.readouterr().out
    assert (
        "Scored 1 empty target as log P(EOS | source), the probability of translating to nothing (line 2); " in printed
    )
    assert "1 empty source as the decoder reads an empty line, EOS alone (line 3)." in printed


def test_long_sources_and_targets_are_warned_about_as_long_decode_inputs(tmp_path, capsys):
    long = " ".join(["haus"] * 300)  # beyond the fixture's max_length
    run_scoring(tmp_path, f"haus\thaus\n{long}\thaus\nhaus\t{long}\n".encode())
    printed = capsys.readouterr().out
    assert "Warning: 1 source had more than" in printed and "scored whole: source 2 of --score_file" in printed
    assert "Warning: 1 target had more than" in printed and "target 3 of --score_file" in printed


@pytest.mark.parametrize(
    "overrides",
    ["return_beams=true", "sampling_method=random", "sampling_method=random,num_samples=2", "max_input_size=4"],
)
def test_a_decoding_setting_with_score_file_is_refused_not_ignored(tmp_path, overrides):
    with pytest.raises(decoder_cli.t2t_flags.UsageError, match="^--decode_hparams: return_beams, num_samples, .*whole"):
        run_scoring(tmp_path, b"haus\thaus\n", f"--decode_hparams={overrides}")
    assert not (tmp_path / "pairs.tsv.scores").exists()


def test_score_file_with_another_input_is_refused(tmp_path):
    (tmp_path / "in.txt").write_text("haus\n")
    with pytest.raises(decoder_cli.t2t_flags.UsageError, match="--score_file scores given pairs: leave out"):
        run_scoring(tmp_path, b"haus\thaus\n", f"--decode_from_file={tmp_path / 'in.txt'}")


def relative_int8_model(relative_setup):  # noqa: F811
    """The relative model restored afresh and converted to int8 (converting works in place)."""
    root = relative_setup["root"]
    return model_loading.load_model_for_decoding(
        registry.problem("translate_files"),
        relative_setup["hparams"],
        str(root / "data"),
        str(root / "train"),
        quantize="int8",
    )


def test_relative_positions_score_as_each_pair_alone_and_as_greedy_decoding(relative_setup):  # noqa: F811
    """Relative positions (transformer_relative_tiny, trained): each pair's log softmax alone, and greedy decoding's
    own score with α = 0, plain and int8 (XLA runs the same teacher-forced path as plain scoring)."""
    model, vocabulary = relative_setup["model"], relative_setup["vocab"]
    pairs = [(source, " ".join(reversed(source.split()))) for source in SOURCES]
    scores = scoring.score_pairs(model, vocabulary, pairs, DecodeHParams.of(batch_size=2))
    for (source, target), score in zip(pairs, scores):
        np.testing.assert_allclose(
            score.per_token, unbatched_log_probs(model, vocabulary, source, target), rtol=1e-5, atol=1e-5
        )
    for settings, scored_model in [
        (DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=10), model),
        (DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=10), relative_int8_model(relative_setup)),
    ]:
        greedy, scored = greedy_and_scored(scored_model, vocabulary, settings)
        np.testing.assert_allclose(scored, greedy, atol=1e-4)


def test_the_savedmodels_score_signature_gives_the_same_numbers(either_setup):  # noqa: F811
    """The `score` signature of `t2t-exporter`'s SavedModel: raw text in, scoring.score_pairs' numbers out."""
    loaded = tf.saved_model.load(either_setup["version_dir"])
    sentences = random_sentences(seed=8, count=5)
    pairs = [(sentence, " ".join(reversed(sentence.split()))) for sentence in sentences]
    pairs += [("der hund", ""), ("ein satz", "\xff")]  # an empty translation: log P(EOS | source)
    expected = scoring.score_pairs(
        either_setup["model"], either_setup["vocab"], pairs[:-1], DecodeHParams.of(batch_size=2)
    )
    served = loaded.signatures["score"](
        inputs=tf.constant([source.encode("utf-8") for source, _ in pairs[:-1]] + [b"ein satz"]),
        targets=tf.constant([target.encode("utf-8") for _, target in pairs[:-1]] + [b"\xff"]),
    )
    scores, token_scores = served["scores"].numpy(), served["token_scores"].numpy()
    lengths = served["target_lengths"].numpy()
    for row, score in enumerate(expected):
        assert lengths[row] == len(score.per_token)
        np.testing.assert_allclose(token_scores[row, : lengths[row]], score.per_token, atol=1e-4)
        assert scores[row] == pytest.approx(score.log_probability, abs=1e-3)
    assert lengths[-2] == 1  # EOS alone
    assert scores[-1] == -np.inf and served["input_not_utf8"].numpy().tolist() == [False] * 6 + [True]
    empty = loaded.signatures["score"](inputs=tf.constant([], tf.string), targets=tf.constant([], tf.string))
    assert empty["scores"].shape == (0,)
