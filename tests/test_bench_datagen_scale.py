"""bench/datagen_scale.py: spliced pairs keep real halves, corpora have the asked size, the extrapolation is linear."""

import importlib.util
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
spec = importlib.util.spec_from_file_location("datagen_scale", os.path.join(BENCH, "datagen_scale.py"))
datagen_scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(datagen_scale)

REAL = [
    ("the cat sat on the mat .", "die Katze saß auf der Matte ."),
    ("we also say that", "wir sagen auch , dass"),
    ("Yes", "Ja"),
    ("a b c d", "w x y z"),
]


def test_a_spliced_pair_joins_the_first_half_of_one_pair_to_the_second_half_of_another():
    first, second = REAL[0], REAL[3]
    assert datagen_scale.spliced_pair(first, second) == ("the cat sat on c d", "die Katze saß auf y z")
    for sentence in (side for pair in REAL for side in pair):
        head, tail = datagen_scale.halves(sentence)
        assert " ".join(part for part in (head, tail) if part) == sentence  # halves lose no word
    assert datagen_scale.spliced_pair(REAL[2], REAL[2]) == REAL[2]


def test_corpus_has_the_asked_size_and_only_real_halves(tmp_path):
    datagen_scale.write_corpus(REAL, 50, str(tmp_path), dev_pairs=1)
    sources = (tmp_path / "train.src").read_text(encoding="utf-8").splitlines()
    targets = (tmp_path / "train.tgt").read_text(encoding="utf-8").splitlines()
    assert len(sources) == len(targets) == 50
    heads = {datagen_scale.halves(source)[0] for source, _ in REAL[1:]}
    assert all(any(source.startswith(head) for head in heads) for source in sources)
    assert (tmp_path / "dev.src").read_text(encoding="utf-8") == REAL[0][0] + "\n"  # dev: real pairs, kept aside


def test_extrapolation_is_the_slope_of_the_two_largest_runs():
    sizes, seconds = [250_000, 1_000_000, 4_000_000], [40.0, 100.0, 340.0]  # 20 s fixed + 80 µs per pair
    assert datagen_scale.extrapolate_seconds(sizes, seconds, 36_000_000) == pytest.approx(20 + 80e-6 * 36e6)
    assert datagen_scale.extrapolate_seconds([1000], [2.0], 36_000) == pytest.approx(72.0)
