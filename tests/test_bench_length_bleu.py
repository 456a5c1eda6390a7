"""bench/length_bleu.py: the buckets by hand, each bucket's BLEU that of its sentences alone, the tool's errors."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import length_bleu  # noqa: E402


def test_lengths_fall_in_the_bucket_whose_upper_edge_they_reach():
    edges = [2, 4]
    assert length_bleu.bucket_names(edges) == ["1-2", "3-4", ">4"]
    assert [length_bleu.bucket_of(length, edges) for length in (0, 1, 2, 3, 4, 5, 40)] == [0, 0, 0, 1, 1, 2, 2]


def test_each_bucket_scores_its_own_sentences_and_an_empty_one_none():
    references = ["a b c d", "the cat sat on the mat", "one two three four five", "x y"]
    perfect = list(references)
    # Wrong in the long sentences only: the short bucket keeps 100, the long one drops to 0 (no 4-gram matches).
    short_only = [references[0], "dog dog dog dog dog dog", "six seven eight nine ten", references[3]]
    lengths = [4, 6, 5, 2]
    rows = length_bleu.bucketed_bleu(lengths, references, {"perfect": perfect, "short": short_only}, [4, 8, 16])
    assert [(name, count) for name, count, _ in rows] == [("1-4", 2), ("5-8", 2), ("9-16", 0), (">16", 0)]
    assert rows[0][2] == {"perfect": pytest.approx(100.0), "short": pytest.approx(100.0)}
    assert rows[1][2]["perfect"] == pytest.approx(100.0) and rows[1][2]["short"] == pytest.approx(0.0)
    assert rows[2][2] == {"perfect": None, "short": None}
    table = length_bleu.markdown_table(rows, ["perfect", "short"])
    assert "| 5-8 | 2 | 100.00 | 0.00 |" in table and "| 9-16 | 0 | – | – |" in table


def test_the_tool_reads_files_counts_words_and_refuses_files_of_other_lengths(tmp_path, capsys):
    (tmp_path / "src").write_text("a b\nc d e f g\n")
    (tmp_path / "ref").write_text("p q r s\nz z z z z\n")  # 4 words at least: BLEU counts up to 4-grams
    (tmp_path / "hyp").write_text("p q r s\nz z z z z\n")
    (tmp_path / "short").write_text("x y\n")
    argv = [f"--source={tmp_path / 'src'}", f"--reference={tmp_path / 'ref'}", "--edges=2,4"]
    assert length_bleu.main(argv + [f"mine={tmp_path / 'hyp'}"]) == 0
    out = capsys.readouterr().out
    assert "| 1-2 | 1 | 100.00 |" in out and "| >4 | 1 | 100.00 |" in out
    assert length_bleu.main(argv + [f"cut={tmp_path / 'short'}"]) == 2
    assert "cut has 1 lines, --source 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        length_bleu.main(argv[:2] + ["--edges=4,2", f"mine={tmp_path / 'hyp'}"])
