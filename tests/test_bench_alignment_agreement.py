"""bench/alignment_agreement.py: precision, recall, F1 and AER of links counted by hand."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import alignment_agreement  # noqa: E402


def write(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


def test_links_agree_by_line_over_the_whole_file(tmp_path, capsys):
    # Line 1: 2 of 3 proposed links are the reference's 4; line 2: 1 of 1 of 1; line 3: none proposed, 1 missed.
    hypothesis = write(tmp_path / "ours", ["-1.5 ||| 0-0 1-1 2-2", "text ||| 0-0", "-3.2 ||| "])
    reference = write(tmp_path / "theirs", ["0-0 1-1 1-2 3-2", "0-0", "1-0"])
    assert alignment_agreement.main(["--hypothesis", hypothesis, "--reference", reference, "--json"]) == 0
    scores = eval(capsys.readouterr().out.replace("true", "True"))  # a JSON object of numbers
    # |A| = 4, |R| = 6, |A ∩ R| = 3: P = 3/4, R = 3/6, F1 = 2·(3/4)(1/2)/(5/4) = 0.6, AER = 1 - 6/10.
    assert scores["hypothesis_links"] == 4 and scores["reference_links"] == 6 and scores["shared_links"] == 3
    assert scores["precision"] == pytest.approx(0.75) and scores["recall"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx(0.6) and scores["aer"] == pytest.approx(0.4)


def test_files_of_other_lengths_or_lines_that_are_not_links_are_refused_by_name(tmp_path, capsys):
    reference = write(tmp_path / "theirs", ["0-0", "1-1"])
    assert alignment_agreement.main(["--hypothesis", write(tmp_path / "short", ["0-0"]), "--reference", reference]) == 2
    assert "has 1 lines and" in capsys.readouterr().err
    bad = write(tmp_path / "bad", ["0-0", "1:1"])
    assert alignment_agreement.main(["--hypothesis", bad, "--reference", reference]) == 2
    assert f"{bad}:2: '1:1' is not a link" in capsys.readouterr().err
