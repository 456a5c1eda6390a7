"""t2t-decoder: input order kept while decoding sorted by length, n-best, splits, settings, bad input."""

import io
import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags
from test_attention_page import page_attention, page_data

from t2t_lite import registry
from t2t_lite.cli import t2t_decoder as decoder_cli
from t2t_lite.data import datagen
from t2t_lite.data.text_lines import read_lines as read_input_lines
from t2t_lite.decode import batch_decoding, input_notes
from t2t_lite.decode.decode_settings import DecodeHParams, decode_hparams
from t2t_lite.decode.encoded_inputs import InputTooLongError
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.decode.translation import translate
from t2t_lite.hparam import HParamsError
from t2t_lite.run_dir import checkpoints, model_info

HPARAMS = registry.hparams("transformer_tiny").replace(hidden_size=32, filter_size=64, num_heads=4)


# Shaw et al.'s relative positions alone (transformer_relative_tiny's kind), clipped at ±3.
RELATIVE_HPARAMS = HPARAMS.replace(pos="none", self_attention_type="dot_product_relative", max_relative_position=3)


def random_run(root, hparams):
    """A generated algorithmic_reverse problem and a random-weights checkpoint ckpt-7 beside hparams.json."""
    problem = registry.problem("algorithmic_reverse")
    problem.num_examples = {"train": 40, "dev": 10, "test": 12}
    datagen.generate(problem, str(root / "data"), str(root / "tmp"))
    keras.utils.set_random_seed(5)  # fixed weights, so every run decodes the same hypotheses
    model = model_info.build_model(hparams, problem.vocab_size(str(root / "data")))
    output_dir = str(root / "train")
    checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_model(model))
    manager = checkpoints.checkpoint_manager(checkpoint, output_dir, keep_checkpoint_max=2)
    manager.save(checkpoint_number=7)
    model_info.write_model_info(output_dir, hparams, problem.name, "transformer", model.vocab_size)
    return problem, model, str(root / "data"), output_dir


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """`random_run` of HPARAMS (sinusoids)."""
    return random_run(tmp_path_factory.mktemp("decoder"), HPARAMS)


@pytest.fixture(scope="module")
def relative_trained(tmp_path_factory):
    """`random_run` of RELATIVE_HPARAMS."""
    return random_run(tmp_path_factory.mktemp("relative_decoder"), RELATIVE_HPARAMS)


@pytest.fixture(scope="module", params=["absolute", "relative"])
def either_trained(request):
    """`trained`, then `relative_trained`: for the tests that must hold for both kinds of positions."""
    return request.getfixturevalue("trained" if request.param == "absolute" else "relative_trained")


def test_output_in_input_order_equals_each_line_decoded_alone(trained):
    problem, model, data_dir, _ = trained
    vocabulary = problem.vocabulary(data_dir)
    lines = ["1 2 3 4 5 6 7", "4", "9 9 1", "", "2 3 4 5 6 7 8 9 0 1 2 3"]
    settings = DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=4, batch_size=2)
    batched = translate(model, vocabulary, lines, settings, progress=False)
    for line, translation in zip(lines, batched):
        ids, _ = batch_decoding.decode_batch(
            model,
            np.array([vocabulary.encode(line) + [1]], np.int32),
            SearchSettings(beam_size=3, alpha=0.6, extra_length=4),
        )
        assert translation.source == line
        assert translation.hypotheses[0] == vocabulary.decode(ids[0])


def test_xla_decoding_gives_the_same_translations(trained):
    problem, model, data_dir, _ = trained
    vocabulary = problem.vocabulary(data_dir)
    lines = ["1 2 3 4 5 6 7", "4", "9 9 1", "2 3 4 5 6 7 8 9 0 1 2 3", "5 5"]  # 3 batches, the last 1 row
    settings = DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=4, batch_size=2, return_beams=True)
    plain = translate(model, vocabulary, lines, settings, progress=False)
    compiled = translate(model, vocabulary, lines, settings.replaced(xla=True), progress=False)
    for expected, translation in zip(plain, compiled):
        assert translation.hypotheses == expected.hypotheses
        np.testing.assert_allclose(translation.scores, expected.scores, rtol=1e-4)


def test_n_best_lists_every_beam_with_scores_best_first(trained):
    problem, model, data_dir, _ = trained
    # The search of the two tests above (decode_batch traces once per model and settings; return_beams is not one).
    settings = DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=4, return_beams=True)
    (translation,) = translate(model, problem.vocabulary(data_dir), ["1 2 3"], settings, progress=False)
    assert len(translation.hypotheses) == 3
    assert translation.scores == sorted(translation.scores, reverse=True)
    fields = translation.line(return_beams=True).split("\t")
    assert len(fields) == 6 and float(fields[1]) == pytest.approx(translation.scores[0], abs=1e-4)


def test_settings_hparams_then_problem_then_flag(trained):
    problem = trained[0]
    base = registry.hparams("transformer_base")
    assert decode_hparams(base, registry.problem("translate_files"), "") == DecodeHParams.of(
        beam_size=4, alpha=0.6, extra_length=50
    )
    # algorithmic problems decode greedily with 2 extra tokens; the flag wins over both.
    assert decode_hparams(base, problem, "") == DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=2)
    assert decode_hparams(base, problem, "beam_size=5,batch_size=8") == DecodeHParams.of(
        beam_size=5, alpha=0.0, extra_length=2, batch_size=8
    )
    with pytest.raises(HParamsError, match="beam_sise.*Did you mean beam_size"):
        decode_hparams(base, problem, "beam_sise=5")


@pytest.mark.parametrize(
    "overrides, message",
    [
        ("alpha=-1", r"alpha=-1.0: the length penalty's exponent must be a finite number ≥ 0"),
        ("alpha=nan", "alpha=nan: the length penalty's exponent"),
        ("alpha=inf", "alpha=inf: the length penalty's exponent"),
        ("sampling_method=random,sampling_temp=nan", "sampling_temp must be ≥ 0 and finite"),
        ("sampling_method=random,sampling_temp=inf", "sampling_temp must be ≥ 0 and finite"),
        ("beam_size=0", "beam_size must be ≥ 1"),
        ("batch_size=0", "batch_size must be ≥ 1"),
        ("max_input_size=1", "max_input_size 0 .* or ≥ 2"),
    ],
)
def test_nonsense_decode_settings_are_refused_naming_the_flag(overrides, message):
    """α=-1, NaN or ∞ and a NaN or ∞ temperature, once decoded with, stop at the flag."""
    with pytest.raises(HParamsError, match=f"^--decode_hparams: .*{message}"):
        decode_hparams(registry.hparams("transformer_base"), registry.problem("translate_files"), overrides)


def test_learned_positions_stop_a_line_longer_than_their_table(trained):
    """pos=emb has max_length + extra_length positions; a line that would need more is named, not decoded."""
    problem, _, data_dir, _ = trained
    hparams = HPARAMS.replace(pos="emb", max_length=8, extra_length=2)
    model = model_info.build_model(hparams, problem.vocab_size(data_dir))
    vocabulary = problem.vocabulary(data_dir)
    settings = DecodeHParams.of(beam_size=1, extra_length=2)
    (fits,) = translate(model, vocabulary, ["1 2 3 4 5 6 7"], settings, progress=False)  # 8 ids + 2 = 10
    assert len(fits.hypotheses[0].split()) <= 10  # input length + extra_length, EOS included
    with pytest.raises(
        InputTooLongError,
        match=r"input line 2 has 9 ids .* would need 11 positions, but the "
        r"learned position table \(pos=emb\) has 10",
    ):
        translate(model, vocabulary, ["1", "1 2 3 4 5 6 7 8"], settings, progress=False)


def run_decoder(*argv):
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-decoder", *argv])
    try:
        decoder_cli.main([])
    finally:
        absl_flags.FLAGS.unparse_flags()


def test_cli_decodes_a_file_one_line_per_input_line(trained, tmp_path):
    problem, _, data_dir, output_dir = trained
    source = tmp_path / "in.txt"
    source.write_text("3 4 5\n1\n\n7 7 7 7 7 7\n")
    run_decoder(
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        f"--decode_from_file={source}",
        "--decode_hparams=beam_size=2,extra_length=3",
    )
    default_output = f"{source}.transformer.hparams.algorithmic_reverse.beam2.alpha0.0.decodes"
    lines = read_input_lines(str(source))
    expected = translate(
        trained[1],
        problem.vocabulary(data_dir),
        lines,
        DecodeHParams.of(beam_size=2, alpha=0.0, extra_length=3),
        progress=False,
    )
    assert read_input_lines(default_output) == [translation.hypotheses[0] for translation in expected]


def test_cli_checkpoint_path_may_be_a_prefix_or_a_directory(trained, tmp_path):
    """--checkpoint_path=DIR reads DIR/hparams.json and DIR's latest checkpoint; DIR/ckpt-7 the same."""
    _, _, data_dir, output_dir = trained
    source = tmp_path / "in.txt"
    source.write_text("3 4 5\n1 2\n")
    outputs = []
    for path in (output_dir, os.path.join(output_dir, "ckpt-7")):
        outputs.append(tmp_path / f"out{len(outputs)}.txt")
        run_decoder(
            "--problem=algorithmic_reverse",
            f"--data_dir={data_dir}",
            f"--checkpoint_path={path}",
            f"--decode_from_file={source}",
            f"--decode_to_file={outputs[-1]}",
        )
    assert outputs[0].read_text() == outputs[1].read_text() and len(outputs[0].read_text().splitlines()) == 2


def test_cli_decodes_the_test_split_with_inputs_and_targets(trained):
    problem, _, data_dir, output_dir = trained
    run_decoder("--problem=algorithmic_reverse", f"--data_dir={data_dir}", f"--output_dir={output_dir}")
    base = os.path.join(output_dir, "algorithmic_reverse.test")
    decodes, inputs, targets = (read_input_lines(f"{base}.{kind}") for kind in ("decodes", "inputs", "targets"))
    assert len(decodes) == len(inputs) == len(targets) == 12
    assert all(target == " ".join(reversed(line.split())) for line, target in zip(inputs, targets))


@pytest.mark.parametrize("split", ["train", "test"])
def test_cli_names_a_damaged_shard_of_the_split_it_decodes(trained, tmp_path, split):
    _, _, data_dir, output_dir = trained
    shutil.copytree(data_dir, tmp_path / "data")
    shard = datagen.complete_shards(str(tmp_path / "data"), "algorithmic_reverse", split)[0]
    os.truncate(shard, os.path.getsize(shard) // 2)
    flags = [f"--data_dir={tmp_path / 'data'}", f"--output_dir={output_dir}", f"--decode_split={split}"]
    with pytest.raises(decoder_cli.t2t_flags.UsageError, match=rf"^--decode_split={split}: {shard}: record \d+ is"):
        run_decoder("--problem=algorithmic_reverse", *flags, f"--decode_to_file={tmp_path / 'out'}")
    assert not os.path.exists(tmp_path / "out")


def attention_decoder_flags(data_dir, output_dir, tmp_path):
    """t2t-decoder's flags for two lines decoded with their attention written into tmp_path/attention."""
    source = tmp_path / "two.txt"
    source.write_text("3 4\n5\n")
    return (
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        f"--decode_from_file={source}",
        f"--decode_to_file={tmp_path / 'out.txt'}",
        f"--attention_dir={tmp_path / 'attention'}",
    )


def test_cli_writes_one_attention_page(either_trained, tmp_path):
    problem, model, data_dir, output_dir = either_trained
    pictures = tmp_path / "attention"
    run_decoder(*attention_decoder_flags(data_dir, output_dir, tmp_path), "--decode_hparams=beam_size=2")
    assert os.listdir(pictures) == ["attention.html"]
    sentences = page_data((pictures / "attention.html").read_text())["sentences"]
    assert [sentence["source"] for sentence in sentences] == ["3 4", "5"]
    # The n-best (the beams that ended with a finite score), though the file has the best.
    settings = decode_hparams(model.hparams, problem, "beam_size=2")
    n_best = translate(model, problem.vocabulary(data_dir), ["3 4", "5"], settings, progress=False)
    assert [len(sentence["beams"]) for sentence in sentences] == [len(t.hypotheses) for t in n_best]
    for sentence in sentences:
        for kind, layers in page_attention(sentence).items():
            assert len(layers) == 2 and layers[0].shape[0] == 4
            for weights in layers:
                np.testing.assert_allclose(weights.sum(-1), 1.0, atol=weights.shape[-1] / 510)  # softmax rows, eq. 1
                if kind == "decoder_self":  # a position never attends to a later one (§3.2.3)
                    assert not np.triu(weights, k=1).any()


@pytest.fixture(scope="module")
def two_headed(tmp_path_factory):
    """`random_run` of HPARAMS with 2 heads, not 4: a PNG per layer, head and kind costs a quarter of a second to
    draw, and two layers of two heads each are enough to see that every layer and every head gets its own."""
    return random_run(tmp_path_factory.mktemp("two_headed_decoder"), HPARAMS.replace(num_heads=2))


def test_cli_writes_the_attention_pngs_on_request(two_headed, tmp_path):
    _, _, data_dir, output_dir = two_headed
    run_decoder(*attention_decoder_flags(data_dir, output_dir, tmp_path), "--attention_pngs")
    # 2 layers x 2 heads x 3 kinds (encoder self, decoder self, encoder-decoder) per sentence.
    for sentence in ("sentence_0000", "sentence_0001"):
        names = sorted(path.name for path in (tmp_path / "attention" / sentence).glob("*.png"))
        assert names == sorted(
            f"{kind}_layer{layer}_head{head}.png"
            for kind in ("encoder_self", "decoder_self", "encoder_decoder")
            for layer in range(2)
            for head in range(2)
        )


def test_cli_names_the_lines_it_cut_and_the_length_kept(trained, tmp_path, capsys):
    problem, model, data_dir, output_dir = trained
    lines = ["1 2 3 4 5 6 7", "1", "1 2 3 4 5", "1 2 3 4", *["2 3 4 5 6"] * 5]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n")
    run_decoder(
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        f"--decode_from_file={source}",
        "--decode_hparams=max_input_size=5",
        f"--attention_dir={tmp_path / 'page'}",
    )
    printed = capsys.readouterr().out
    assert (
        "Truncated 7 lines to their first 4 ids and EOS (--decode_hparams max_input_size=5): "
        "lines 1, 3, 5, 6, 7 and 2 more."
    ) in printed
    cut = translate(
        model,
        problem.vocabulary(data_dir),
        ["1 2 3 4"],
        DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=2),
        progress=False,
    )[0]
    decoded = read_input_lines(f"{source}.transformer.hparams.algorithmic_reverse.beam1.alpha0.0.decodes")
    assert decoded[0] == cut.hypotheses[0] and len(decoded) == len(lines)  # line 1 decoded as its first 4 symbols
    first, second = page_data((tmp_path / "page" / "attention.html").read_text())["sentences"][:2]
    assert first["source_tokens"] == ["1", "2", "3", "4", "<eos>"] and first["source"] == lines[0]
    assert first["note"] == "The input had 8 ids (EOS included); the model read its first 4 and EOS (max_input_size)."
    assert second["note"] == ""


def test_the_limit_is_the_cut_then_the_position_table_then_the_longest_training_example(trained):
    problem, model, data_dir, _ = trained
    settings = DecodeHParams.of(beam_size=3, alpha=0.6, extra_length=3)
    assert input_notes.max_input_ids(model, HPARAMS, settings)[0] == HPARAMS.max_length
    assert input_notes.max_input_ids(model, HPARAMS, DecodeHParams.of(max_input_size=7))[0] == 7
    learned = model_info.build_model(HPARAMS.replace(pos="emb", max_length=20), problem.vocab_size(data_dir))
    assert learned.source_position.max_positions - 3 == input_notes.max_input_ids(learned, HPARAMS, settings)[0]


def test_cli_warns_of_lines_longer_than_any_it_was_trained_on(trained, tmp_path, capsys):
    """Read whole, as the user asked nothing else, but named: hparams max_length 6 here (5 symbols and EOS)."""
    problem, model, data_dir, output_dir = trained
    trained_dir = tmp_path / "train"
    shutil.copytree(output_dir, trained_dir)
    recorded = json.loads((trained_dir / model_info.HPARAMS_FILE).read_text())
    (trained_dir / model_info.HPARAMS_FILE).write_text(json.dumps(dict(recorded, max_length=6)))
    source = tmp_path / "in.txt"
    source.write_text("1 2 3 4 5\n1 2 3 4 5 6\n1\n1 2 3 4 5 6 7\n")
    run_decoder(
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={trained_dir}",
        f"--decode_from_file={source}",
    )
    printed = capsys.readouterr().out
    assert (
        "Warning: 2 lines had more than 6 ids (EOS included), more than the longest example it was trained on, "
        "hparams max_length (6), and were read whole: lines 2, 4." in printed
    )
    assert "max_input_size=6 would cut them instead" in printed
    decoded = read_input_lines(f"{source}.transformer.hparams.algorithmic_reverse.beam1.alpha0.0.decodes")
    whole = translate(
        model,
        problem.vocabulary(data_dir),
        ["1 2 3 4 5 6 7"],
        DecodeHParams.of(beam_size=1, alpha=0.0, extra_length=2),
        progress=False,
    )
    assert decoded[3] == whole[0].hypotheses[0]  # not cut


def test_cli_continues_each_lines_target_prefix(trained, tmp_path):
    problem, model, data_dir, output_dir = trained
    (tmp_path / "in.txt").write_text("3 4 5\n1 2\n7 7 7\n")
    (tmp_path / "prefixes.txt").write_text("9 9\n\n2\n")
    common = [
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        f"--decode_from_file={tmp_path / 'in.txt'}",
    ]
    run_decoder(*common, f"--target_prefix_file={tmp_path / 'prefixes.txt'}", f"--decode_to_file={tmp_path / 'out'}")
    decoded = read_input_lines(str(tmp_path / "out"))
    settings = DecodeHParams.of(
        beam_size=1, alpha=0.0, extra_length=2
    )  # the problem's decode defaults, as the tool takes them
    unforced = translate(model, problem.vocabulary(data_dir), ["1 2"], settings, progress=False)[0]
    assert decoded[0].startswith("9 9") and decoded[2].startswith("2")
    assert decoded[1] == unforced.hypotheses[0]  # an empty prefix line: decoded as without a prefix
    (tmp_path / "prefixes.txt").write_text("9 9\n")
    with pytest.raises(decoder_cli.t2t_flags.UsageError, match="prefixes.txt has 1 lines but --decode_from_file has 3"):
        run_decoder(*common, f"--target_prefix_file={tmp_path / 'prefixes.txt'}")


def test_cli_warns_of_long_prefixes_and_names_the_prefix_file_for_a_bad_prefix_line(trained, tmp_path, capsys):
    problem, model, data_dir, output_dir = trained
    trained_dir = tmp_path / "train"
    shutil.copytree(output_dir, trained_dir)
    recorded = json.loads((trained_dir / model_info.HPARAMS_FILE).read_text())
    (trained_dir / model_info.HPARAMS_FILE).write_text(json.dumps(dict(recorded, max_length=6)))
    (tmp_path / "in.txt").write_text("3 4\n1 2\n7\n")
    # 6 symbols and the EOS of any translation that starts with them: 7 ids, beyond max_length 6.
    (tmp_path / "prefixes.txt").write_text("1 2 3 4 5 6\n\n1 2 3 4 5\n")
    common = [
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--output_dir={trained_dir}",
        f"--decode_from_file={tmp_path / 'in.txt'}",
        f"--target_prefix_file={tmp_path / 'prefixes.txt'}",
    ]
    run_decoder(*common, f"--decode_to_file={tmp_path / 'out'}")
    printed = capsys.readouterr().out
    assert "Warning: 1 prefix line had more than 6 ids (EOS included)" in printed
    assert "prefix line 1 of --target_prefix_file" in printed
    (tmp_path / "prefixes.txt").write_text("9\n9 z\n\n")  # z: no symbol of the problem's vocabulary
    with pytest.raises(decoder_cli.t2t_flags.UsageError, match=r"^--target_prefix_file=.*prefixes.txt: prefix line 2"):
        run_decoder(*common, f"--decode_to_file={tmp_path / 'out2'}")


def test_cli_refuses_decode_settings_before_the_model_loads(trained, tmp_path, monkeypatch):
    """Each named by its setting: against the vocabulary (12 tokens, read from --data_dir) and the mode."""
    _, model, data_dir, output_dir = trained

    def no_model(*args):
        raise AssertionError("the model was loaded before the settings were checked")

    monkeypatch.setattr(decoder_cli.t2t_flags, "trained_model", no_model)
    source = tmp_path / "in.txt"
    source.write_text("3 4 5\n")
    vocab_size = model.vocab_size
    cases = [
        (
            f"sampling_method=random,sampling_keep_top_k={vocab_size + 1}",
            f"sampling_keep_top_k={vocab_size + 1} is more than the model's {vocab_size} tokens",
        ),
        ("sampling_temp=0.5", "sampling_temp has no effect with sampling_method=argmax"),
        (f"sampling_method=random,sampling_seed={2**63}", "sampling_seed=9223372036854775808: must be from 0"),
        ("score_per_token=true", "score_per_token=true adds each subword's term to --score_file's scores"),
    ]
    for overrides, message in cases:
        with pytest.raises(decoder_cli.t2t_flags.UsageError, match=f"^--decode_hparams: {message}"):
            run_decoder(
                "--problem=algorithmic_reverse",
                f"--data_dir={data_dir}",
                f"--output_dir={output_dir}",
                f"--decode_from_file={source}",
                f"--decode_hparams={overrides}",
            )


def test_cli_without_checkpoint_names_the_flags(trained):
    with pytest.raises(Exception, match="--output_dir"):
        run_decoder("--problem=algorithmic_reverse", f"--data_dir={trained[2]}")


def test_cli_bad_input_is_named_before_decoding(trained, tmp_path):
    """Each mistake stops with the flag (or file) to fix, before any output is written."""
    _, _, data_dir, output_dir = trained
    source = tmp_path / "in.txt"
    source.write_text("3 4 5\n")
    common = ("--problem=algorithmic_reverse", f"--data_dir={data_dir}", f"--output_dir={output_dir}")
    cases = [
        (("--decode_hparams=beam_size=0", f"--decode_from_file={source}"), "--decode_hparams: beam_size"),
        ((f"--decode_from_file={tmp_path / 'missing.txt'}",), "--decode_from_file=.*missing.txt: no such file"),
        (
            (f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'no' / 'out.txt'}"),
            "--decode_to_file=.*/no/out.txt: its directory .*/no does not exist",
        ),
        ((f"--decode_from_file={source}", f"--decode_to_file={tmp_path}"), "--decode_to_file=.*: is a directory"),
        ((f"--decode_from_file={source}", f"--attention_dir={source}"), "--attention_dir=.*in.txt: is a file"),
        ((f"--decode_from_file={source}", "--attention_pngs"), "--attention_pngs writes into --attention_dir"),
        ((f"--decode_from_file={tmp_path}",), "--decode_from_file=.*: is a directory; give a file"),
        (
            (f"--decode_from_file={source}", f"--output_dir={tmp_path / 'nowhere'}"),
            "--output_dir=.*nowhere: no such directory",
        ),
        (("--decode_hparams=max_input_size=1", f"--decode_from_file={source}"), "--decode_hparams: .*max_input_size"),
        (
            ("--decode_hparams=beam_sise=2", f"--decode_from_file={source}"),
            "--decode_hparams: .*Did you mean beam_size",
        ),
        ((f"--decode_from_file={source}", f"--decode_to_file={source}"), "is --decode_from_file"),
        (("--model=transformr", f"--decode_from_file={source}"), "--model: .*transformr"),
        (
            ("--hparams=hidden_size=64", f"--decode_from_file={source}", f"--decode_to_file={tmp_path / 'o.txt'}"),
            "ckpt-7: its weights do not fit the model these hparams build",
        ),
        (("--decode_interactive", f"--decode_from_file={source}"), "--decode_interactive reads stdin"),
        (("--decode_interactive", f"--attention_dir={tmp_path / 'pages'}"), "--attention_dir draws the sentences of"),
    ]
    empty = tmp_path / "empty_data"  # the algorithmic vocabulary needs no file, the split does
    empty.mkdir()
    cases.append(
        (
            (f"--data_dir={empty}", f"--decode_to_file={tmp_path / 'test.decodes'}"),
            "--decode_split=test: No test data .*Run t2t-datagen",
        )
    )
    absl_flags.FLAGS.unparse_flags()
    for argv, message in cases:
        with pytest.raises(decoder_cli.t2t_flags.UsageError, match=message):
            run_decoder(*common, *argv)
    assert source.read_text() == "3 4 5\n"
    assert sorted(os.listdir(tmp_path)) == ["empty_data", "in.txt"]
    # Same vocabulary size, another problem: the checkpoint's problem.json says which one it was trained on.
    with pytest.raises(
        decoder_cli.t2t_flags.UsageError, match="trained with problem 'algorithmic_reverse', not 'algorithmic_identity'"
    ):
        run_decoder(
            "--problem=algorithmic_identity",
            f"--data_dir={data_dir}",
            f"--output_dir={output_dir}",
            f"--decode_from_file={source}",
            f"--decode_to_file={tmp_path / 'o.txt'}",
        )


def test_interactive_reads_stdin_until_end(trained):
    from t2t_lite.decode.decode_files import decode_interactive

    problem, model, data_dir, _ = trained
    output = io.StringIO()
    decode_interactive(
        model,
        problem.vocabulary(data_dir),
        DecodeHParams.of(beam_size=1, extra_length=2),
        stdin=io.StringIO("1 2\n3\n"),
        stdout=output,
    )
    assert len(output.getvalue().splitlines()) == 2


def test_interactive_names_a_bad_line_and_goes_on(trained, capsys):
    from t2t_lite.decode.decode_files import decode_interactive

    problem, model, data_dir, _ = trained
    output = io.StringIO()
    decode_interactive(
        model,
        problem.vocabulary(data_dir),
        DecodeHParams.of(beam_size=1, extra_length=2),
        stdin=io.StringIO("1 x\n3\n"),
        stdout=output,
    )
    assert "this line: 'x' is not a symbol" in capsys.readouterr().err
    assert len(output.getvalue().splitlines()) == 1
