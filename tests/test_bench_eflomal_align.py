"""bench/eflomal_align.py: grow-diag-final-and against links worked out by hand, and eflomal itself when installed."""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import eflomal_align  # noqa: E402


def test_grow_diag_final_and_starts_from_the_intersection_and_grows_to_unlinked_neighbours():
    # forward ∩ reverse = {(0,0), (2,2)}. (1,1), in the union and a diagonal neighbour of both, links words
    # still unlinked: grown. (1,2) neighbours (2,2), but its words are both linked by then: not grown.
    # (3,0) neighbours no link; final-and would need both its words unlinked, and target 0 is linked: left out.
    # (4,3) neighbours no link; source 4 and target 3 are both unlinked: final-and adds it.
    forward = {(0, 0), (1, 1), (2, 2), (3, 0), (4, 3)}
    reverse = {(0, 0), (2, 2), (1, 2)}
    assert eflomal_align.symmetrize(forward, reverse) == {(0, 0), (1, 1), (2, 2), (4, 3)}


def test_intersection_only_when_the_directions_add_nothing_new():
    assert eflomal_align.symmetrize({(0, 1), (1, 0)}, {(0, 1), (1, 0)}) == {(0, 1), (1, 0)}
    assert eflomal_align.symmetrize(set(), set()) == set()


def test_links_are_written_in_target_order():
    assert eflomal_align.pharaoh({(2, 0), (0, 1), (1, 1)}) == "2-0 0-1 1-1"


def test_eflomal_aligns_a_word_for_word_corpus_in_both_splits(tmp_path):
    pytest.importorskip("eflomal", reason="eflomal is the optional extra `align` (pip install -e '.[align]')")
    words = {"a": "ein", "dog": "Hund", "cat": "Katze", "runs": "rennt", "sleeps": "schläft", "big": "großer"}
    english = [
        f"a {size} {animal} {verb}" for size in ("big", "") for animal in ("dog", "cat") for verb in ("runs", "sleeps")
    ]
    english = [" ".join(sentence.split()) for sentence in english] * 20
    german = [" ".join(words[word] for word in sentence.split()) for sentence in english]
    for name, lines in (
        ("train.en", english[:-8]),
        ("train.de", german[:-8]),
        ("val.en", english[-8:]),
        ("val.de", german[-8:]),
    ):
        (tmp_path / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    files = {
        f"--{split}_{side}": str(tmp_path / f"{split}.{language}")
        for split in ("train", "val")
        for side, language in (("source", "en"), ("target", "de"))
    }
    assert (
        eflomal_align.main([item for pair in files.items() for item in pair] + ["--output_dir", str(tmp_path / "out")])
        == 0
    )
    val = (tmp_path / "out" / "val.align").read_text().splitlines()
    assert len(val) == 8 and len((tmp_path / "out" / "train.align").read_text().splitlines()) == len(english) - 8
    diagonal = [{f"{i}-{i}" for i in range(len(sentence.split()))} for sentence in english[-8:]]
    found = sum(len(truth & set(line.split())) for truth, line in zip(diagonal, val))
    assert found >= 0.9 * sum(map(len, diagonal))  # word for word: the diagonal
