"""t2t-bleu against the sacrebleu command line, and the paper's tokenized BLEU against hand counts."""

import json
import math
import os
import subprocess
import sys

import pytest

from t2t_lite import bleu

VENV_BIN = os.path.dirname(sys.executable)
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
    command = [os.path.join(VENV_BIN, "sacrebleu"), reference, "-i", translation, "-m", "bleu", "chrf", "-w", "4"]
    by_name = {result["name"]: result for result in json.loads(subprocess.check_output(command, text=True))}
    report = bleu.evaluate_files(translation, reference)
    assert report.sacrebleu == pytest.approx(by_name["BLEU"]["score"], abs=1e-4)
    assert report.sacrebleu_signature == by_name["BLEU"]["signature"]
    assert report.chrf == pytest.approx(by_name["chrF2"]["score"], abs=1e-4)
    assert report.chrf_signature == by_name["chrF2"]["signature"]
    assert 0 < report.sacrebleu < 100 and report.lines == 4


def test_the_tool_prints_every_figure(tmp_path):
    translation, reference = write(tmp_path / "hyp", TRANSLATION), write(tmp_path / "ref", REFERENCE)
    output = subprocess.run([sys.executable, os.path.join(REPO, "bin", "t2t-bleu"), f"--translation={translation}",
                             f"--reference={reference}"], capture_output=True, text=True, check=True).stdout
    report = bleu.evaluate_files(translation, reference)
    assert f"sacreBLEU = {report.sacrebleu:.2f}" in output and report.sacrebleu_signature in output
    assert f"chrF2 = {report.chrf:.2f}" in output and "not comparable with sacreBLEU" in output


def test_mismatched_line_counts_name_both_files_and_counts(tmp_path):
    translation, reference = write(tmp_path / "hyp", TRANSLATION[:3]), write(tmp_path / "ref", REFERENCE)
    with pytest.raises(bleu.LineCountError, match=r"hyp has 3 lines .*ref has 4"):
        bleu.evaluate_files(translation, reference)


@pytest.mark.parametrize("text, tokens", [
    ("1,000.5 Euro", ["1,000.5", "Euro"]),  # punctuation between digits stays
    ("Hallo, Welt!", ["Hallo", ",", "Welt", "!"]),
    ("in 2017.", ["in", "2017."]),  # mteval's quirk, kept by tensor2tensor
    ("5 € + 3$", ["5", "€", "+", "3", "$"]),  # symbols always split
    ("„Ja“ – nein", ["„", "Ja", "“", "–", "nein"]),
])
def test_bleu_tokenize_is_mteval_international_tokenization(text, tokens):
    assert bleu.bleu_tokenize(text) == tokens


def test_compounds_are_split_as_get_ende_bleu_does():
    assert bleu.paper_tokenize("Euro-Zone, 1-2 - ok") == [
        "Euro", "##AT##-##AT##", "Zone", ",", "1", "##AT##-##AT##", "2", "-", "ok"]


def test_paper_bleu_against_hand_counts():
    # 4 of 4 unigrams ... 1 of 1 four-grams match; 4 tokens against 5: BP = exp(1 - 5/4).
    assert bleu.paper_bleu(["a b c d"], ["a b c d e"]) == pytest.approx(100 * math.exp(-0.25), abs=1e-6)
    # Cased, "A" matches nothing: precisions 3/4, 2/3, 1/2, 0/1 -> 0 without smoothing (multi-bleu).
    assert bleu.paper_bleu(["A b c d"], ["a b c d e"]) == 0.0
    assert bleu.paper_bleu(["A b c d"], ["a b c d e"], lowercase=True) == pytest.approx(100 * math.exp(-0.25))
    # "x-y" is three tokens: 7 tokens each, precisions 6/7, 5/6, 4/5, 3/4.
    assert bleu.paper_bleu(["a b-c d e f"], ["a b-c d e g"]) == pytest.approx(100 * (3 / 7) ** 0.25)
