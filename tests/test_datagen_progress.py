"""t2t-datagen's progress line: how far it is, against the total where the number of pairs is known up front."""

import re

import tensorflow_datasets as tfds
from test_problem import TinyFiles, sentence_pairs, write_corpus
from test_problems_wmt import TinyEnde

from t2t_lite.data import datagen
from t2t_lite.problems.algorithmic import AlgorithmicReverse


def shown(output: str) -> list:
    """The states the progress line went through: each carriage return rewrites it."""
    return [state for state in re.split(r"[\r\n]", output) if state]


def test_a_list_is_counted_against_its_length(capsys):
    pairs = [(f"source {i}", f"target {i}") for i in range(2500)]
    assert list(datagen.with_progress(pairs)) == pairs
    output = capsys.readouterr().out
    states = shown(output)
    assert states[:2] == ["  1000/2500 pairs read", "  2000/2500 pairs read"]
    assert re.fullmatch(r"  2500/2500 pairs read in \d+\.\d s", states[2]) and len(states) == 3
    assert output.endswith(" s\n")  # the finished line ends; what datagen prints next starts a line of its own


def test_pairs_of_unknown_number_get_a_plain_running_count(capsys):
    pairs = ((i, i) for i in range(1500))
    assert len(list(datagen.with_progress(pairs, "pairs generated"))) == 1500
    states = shown(capsys.readouterr().out)
    assert states[0] == "  1000 pairs generated" and re.fullmatch(r"  1500 pairs generated in \d+\.\d s", states[1])


def test_datagen_counts_a_corpus_against_its_line_count_and_generated_pairs_as_they_come(tmp_path, capsys, monkeypatch):
    pairs = sentence_pairs()
    write_corpus(str(tmp_path / "raw"), "train", pairs * 12)  # 1,200 lines
    write_corpus(str(tmp_path / "raw"), "dev", pairs[:10])
    datagen.generate(TinyFiles(), str(tmp_path / "files"), str(tmp_path / "raw"))
    states = shown(capsys.readouterr().out)
    written = states.index("Writing tiny_files train:")
    assert states[written + 1] == "  1000/1200 pairs read"
    assert states[written + 2].startswith("  1200/1200 pairs read in ")
    assert any(state.startswith("  10/10 pairs read in ") for state in states)  # dev
    assert not any("Unknown" in state for state in states)

    monkeypatch.setattr(AlgorithmicReverse, "num_examples", {"train": 1200, "dev": 20, "test": 20})
    datagen.generate(AlgorithmicReverse(), str(tmp_path / "reverse"), str(tmp_path / "raw"))
    states = shown(capsys.readouterr().out)
    assert "  1000 pairs generated" in states
    assert any(state.startswith("  1200 pairs generated in ") for state in states)


def test_a_tfds_split_is_counted_against_the_size_tfds_records(tmp_path, capsys):
    with tfds.testing.mock_data(num_examples=40):
        datagen.generate(TinyEnde(), str(tmp_path / "data"), str(tmp_path / "tmp"))
    states = shown(capsys.readouterr().out)
    assert sum(state.startswith("  40/40 pairs read in ") for state in states) == 3  # train, dev, test
