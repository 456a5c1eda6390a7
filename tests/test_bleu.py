"""t2t-bleu against the sacrebleu command line, and the paper's tokenized BLEU against hand counts."""

import json
import math
import os
import re
import subprocess
import sys

import pytest

from t2t_lite.evaluate import bleu

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRANSLATION = [
    "Die Katze sitzt auf der Matte.",
    "Ein gut-bekanntes Beispiel kostet 1.000,50 €.",
    "Er sagte: „Wir kommen morgen“ – vielleicht.",
    "Das ist alles",
]
REFERENCE = [
    "Die Katze saß auf der Matte.",
    "Ein gut-bekanntes Beispiel kostet 1.000,50 Euro.",
    "Er sagte: „Wir kommen morgen“.",
    "Das war alles, danke.",
]


def write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_sacrebleu_and_chrf_agree_with_the_sacrebleu_command_line(tmp_path):
    translation, reference = write(tmp_path / "hyp.de", TRANSLATION), write(tmp_path / "ref.de", REFERENCE)
    # `python -m sacrebleu` is its command line in any environment, with or without the console script.
    command = [sys.executable, "-m", "sacrebleu", reference, "-i", translation, "-m", "bleu", "chrf", "-w", "4"]
    by_name = {result["name"]: result for result in json.loads(subprocess.check_output(command, text=True))}
    report = bleu.evaluate_files(translation, reference)
    assert report.sacrebleu == pytest.approx(by_name["BLEU"]["score"], abs=1e-4)
    assert report.sacrebleu_signature == by_name["BLEU"]["signature"]
    assert report.chrf == pytest.approx(by_name["chrF2"]["score"], abs=1e-4)
    assert report.chrf_signature == by_name["chrF2"]["signature"]
    assert 0 < report.sacrebleu < 100 and report.lines == 4


def run_t2t_bleu(translation, reference, check=False):
    command = [sys.executable, os.path.join(REPO, "bin", "t2t-bleu"), f"--translation={translation}"]
    return subprocess.run(command + [f"--reference={reference}"], capture_output=True, text=True, check=check)


def test_the_tool_prints_every_figure(tmp_path):
    translation, reference = write(tmp_path / "hyp", TRANSLATION), write(tmp_path / "ref", REFERENCE)
    output = run_t2t_bleu(translation, reference, check=True).stdout
    report = bleu.evaluate_files(translation, reference)
    assert f"sacreBLEU = {report.sacrebleu:.2f}" in output and report.sacrebleu_signature in output
    assert f"chrF2 = {report.chrf:.2f}" in output and "not comparable with sacreBLEU" in output


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    translation, reference = write(tmp_path / "hyp", TRANSLATION[:3]), write(tmp_path / "ref", REFERENCE)
    with pytest.raises(bleu.LineCountError, match=r"hyp has 3 lines .*ref has 4"):
        bleu.evaluate_files(translation, reference)


def test_two_empty_files_stop_in_one_line(tmp_path):
    """sacrebleu raises IndexError on no lines; there is nothing to score, and the tool says so."""
    translation, reference = str(tmp_path / "hyp"), str(tmp_path / "ref")
    for path in (translation, reference):
        open(path, "w").close()
    with pytest.raises(bleu.LineCountError, match="hyp and --reference=.*ref are empty: there is no line to score"):
        bleu.evaluate_files(translation, reference)
    result = run_t2t_bleu(translation, reference)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip().splitlines()[-1]
        == f"{translation} and --reference={reference} are empty: there is no line to score."
    )


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("1,000.5 Euro", ["1,000.5", "Euro"]),  # punctuation between digits stays
        ("Hallo, Welt!", ["Hallo", ",", "Welt", "!"]),
        ("in 2017.", ["in", "2017."]),  # mteval's quirk, kept by tensor2tensor
        ("5 € + 3$", ["5", "€", "+", "3", "$"]),  # symbols always split
        ("„Ja“ – nein", ["„", "Ja", "“", "–", "nein"]),
    ],
)
def test_bleu_tokenize_is_mteval_international_tokenization(text, tokens):
    assert bleu.bleu_tokenize(text) == tokens


def test_compounds_are_split_as_get_ende_bleu_does():
    assert bleu.paper_tokenize("Euro-Zone, 1-2 - ok") == [
        "Euro",
        "##AT##-##AT##",
        "Zone",
        ",",
        "1",
        "##AT##-##AT##",
        "2",
        "-",
        "ok",
    ]


def test_paper_bleu_against_hand_counts():
    # 4 of 4 unigrams ... 1 of 1 four-grams match; 4 tokens against 5: BP = exp(1 - 5/4).
    assert bleu.paper_bleu(["a b c d"], ["a b c d e"]) == pytest.approx(100 * math.exp(-0.25), abs=1e-6)
    # Cased, "A" matches nothing: precisions 3/4, 2/3, 1/2, 0/1 -> 0 without smoothing (multi-bleu).
    assert bleu.paper_bleu(["A b c d"], ["a b c d e"]) == 0.0
    assert bleu.paper_bleu(["A b c d"], ["a b c d e"], lowercase=True) == pytest.approx(100 * math.exp(-0.25))
    # "x-y" is three tokens: 7 tokens each, precisions 6/7, 5/6, 4/5, 3/4.
    assert bleu.paper_bleu(["a b-c d e f"], ["a b-c d e g"]) == pytest.approx(100 * (3 / 7) ** 0.25)


# -- t2t-bleu --translations_dir: a table, TensorBoard scalars and a plot by checkpoint step ----------


def translations_dir(tmp_path):
    """Files as t2t-translate-all names them, three steps and one average, with files it must leave alone."""
    directory = tmp_path / "translations"
    directory.mkdir()
    by_name = {
        "val.en-100": ["Das ist"] * 4,
        "val.en-2000": TRANSLATION[:2] + ["Er sagte", "Das ist"],
        "val.en-300": TRANSLATION[:1] + ["Ein Beispiel.", "Er sagte: nein.", "Das ist alles"],
        "val.en-avg2-2000": TRANSLATION,
    }
    for name, lines in by_name.items():
        write(directory / name, lines)
    write(directory / "val.en-400.tmp", ["half a file"])  # a translation still being written
    (directory / "avg2").mkdir()  # where t2t-translate-all keeps the averaged checkpoint
    return directory, {name: by_name[name] for name in ("val.en-100", "val.en-300", "val.en-2000", "val.en-avg2-2000")}


def test_table_by_step_agrees_with_sacrebleu_and_events_and_plot_hold_the_same(tmp_path):
    import sacrebleu
    import tensorflow as tf

    directory, by_name = translations_dir(tmp_path)
    reference = write(tmp_path / "ref.de", REFERENCE)
    events, plot = tmp_path / "events", tmp_path / "curve.png"
    output = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "bin", "t2t-bleu"),
            f"--translations_dir={directory}",
            f"--reference={reference}",
            f"--event_dir={events}",
            f"--plot_file={plot}",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split() for line in output.splitlines()[1:5]]
    expected = {
        name: (sacrebleu.corpus_bleu(lines, [REFERENCE]).score, sacrebleu.corpus_chrf(lines, [REFERENCE]).score)
        for name, lines in by_name.items()
    }
    assert [row[:-2] for row in rows] == [["100"], ["300"], ["2000"], ["avg2", "@", "2000"]]  # by step, averages last
    for row, (bleu_score, chrf_score) in zip(rows, expected.values()):
        assert float(row[-2]) == pytest.approx(bleu_score, abs=0.006)
        assert float(row[-1]) == pytest.approx(chrf_score, abs=0.006)
    assert output.count("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp") == 1  # the signatures once
    assert expected["val.en-100"][0] < expected["val.en-2000"][0] < expected["val.en-avg2-2000"][0]

    scalars = {}
    for path in events.iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                scalars[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
    assert set(scalars) == {(tag, step) for tag in ("sacreBLEU", "chrF2") for step in (100, 300, 2000)} | {
        ("sacreBLEU_avg2", 2000),
        ("chrF2_avg2", 2000),
    }
    assert scalars[("sacreBLEU", 300)] == pytest.approx(expected["val.en-300"][0], rel=1e-6)
    assert scalars[("chrF2_avg2", 2000)] == pytest.approx(expected["val.en-avg2-2000"][1], rel=1e-6)

    pyplot = pytest.importorskip("matplotlib.pyplot", reason="matplotlib, the optional [plot] extra, is not installed")
    image = pyplot.imread(str(plot))
    assert image.shape[0] > 200 and image.shape[1] > 300 and image[..., :3].std() > 0.05  # drawn, not blank


def test_without_matplotlib_only_the_plot_is_left_out(tmp_path, monkeypatch, capsys):
    from absl import flags as absl_flags

    from t2t_lite.cli import t2t_bleu as bleu_cli

    directory, _ = translations_dir(tmp_path)
    reference = write(tmp_path / "ref.de", REFERENCE)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    absl_flags.FLAGS(["t2t-bleu", f"--translations_dir={directory}", f"--reference={reference}"])
    try:
        bleu_cli.main([])
    finally:
        absl_flags.FLAGS.unparse_flags()
    output = capsys.readouterr().out
    assert "avg2 @ 2000" in output and "matplotlib is not installed" in output and "no plot written" in output
    assert not (directory / "sacrebleu_by_step.png").exists()


def test_translations_dir_mistakes_name_the_flag_or_file(tmp_path):
    directory, _ = translations_dir(tmp_path)
    reference = write(tmp_path / "ref.de", REFERENCE)
    write(tmp_path / "short.de", REFERENCE[:3])
    other = tmp_path / "two_sources"
    other.mkdir()
    write(other / "val.en-100", TRANSLATION)
    write(other / "test.en-100", TRANSLATION)
    tool = [sys.executable, os.path.join(REPO, "bin", "t2t-bleu")]
    cases = [
        (
            [
                f"--translations_dir={directory}",
                f"--translation={directory / 'val.en-100'}",
                f"--reference={reference}",
            ],
            "Give either --translation .* or --translations_dir",
        ),
        (
            [f"--translation={directory / 'val.en-100'}", f"--reference={reference}", f"--event_dir={tmp_path}"],
            "--event_dir and --plot_file score a --translations_dir",
        ),
        ([f"--translations_dir={other}", f"--reference={reference}"], "several sources \\(test.en, val.en\\)"),
        ([f"--translations_dir={tmp_path / 'none'}", f"--reference={reference}"], "--translations_dir=.*none: no such"),
        ([f"--translations_dir={directory / 'avg2'}", f"--reference={reference}"], "no translation files named"),
        (
            [f"--translations_dir={directory}", f"--reference={tmp_path / 'short.de'}"],
            "val.en-100 has 4 lines but --reference=.*short.de has 3",
        ),
    ]
    for argv, message in cases:
        result = subprocess.run(tool + argv, capture_output=True, text=True)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert re.search(message, result.stderr), result.stderr
