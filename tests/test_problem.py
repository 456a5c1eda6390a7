"""Problems and t2t-datagen: tensor2tensor's on-disk format, reuse, reports and errors.

Exercised through `translate_files` on a small corpus the test writes.
"""

import os
import pathlib
import shutil

import full_disk
import kill_points
import pytest
import sentencepiece
import tensorflow as tf
from absl.testing import flagsaver

from t2t_lite import registry
from t2t_lite.cli import flags, tool_process
from t2t_lite.cli import t2t_datagen as datagen_cli
from t2t_lite.data import datagen
from t2t_lite.problems.algorithmic import AlgorithmicReverse
from t2t_lite.problems.translate_files import CorpusError, TranslateFiles

SUBJECTS = [
    ("the cat", "die Katze"),
    ("the old man", "der alte Mann"),
    ("my sister", "meine Schwester"),
    ("the mayor of Zürich", "der Bürgermeister von Zürich"),
    ("our team", "unser Team"),
]
VERBS = [("sees", "sieht"), ("likes", "mag"), ("calls", "ruft"), ("finds", "findet")]
OBJECTS = [
    ("the dog.", "den Hund."),
    ("a “good” idea.", "eine „gute“ Idee."),
    ("42 apples.", "42 Äpfel."),
    ("the café.", "das Café."),
    ("https://example.org.", "https://example.org."),
]


def sentence_pairs():
    return [(f"{s} {v} {o}", f"{ts} {tv} {to}") for s, ts in SUBJECTS for v, tv in VERBS for o, to in OBJECTS]


class TinyFiles(TranslateFiles):
    approx_vocab_size = 400
    max_subword_length = 60
    num_shards = {"train": 3, "dev": 1, "test": 1}


def write_corpus(tmp_dir, split, pairs):
    os.makedirs(tmp_dir, exist_ok=True)
    with (
        open(os.path.join(tmp_dir, split + ".src"), "w", encoding="utf-8") as src,
        open(os.path.join(tmp_dir, split + ".tgt"), "w", encoding="utf-8") as tgt,
    ):
        for source, target in pairs:
            src.write(source + "\n")
            tgt.write(target + "\n")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("files")
    tmp_dir, data_dir = str(root / "raw"), str(root / "data")
    pairs = sentence_pairs()
    long_pair = (" ".join(["word"] * 200), "Wort")
    write_corpus(tmp_dir, "train", pairs[:80] + [("", "leer"), long_pair, ("  spaced   out ", "x  y")])
    write_corpus(tmp_dir, "dev", pairs[80:90] + [long_pair])
    write_corpus(tmp_dir, "test", pairs[90:])
    report = datagen.generate(TinyFiles(), data_dir, tmp_dir)
    return report, data_dir, tmp_dir


def read_records(path):
    """Parses the files with tf.train.Example itself, independently of Problem.dataset."""
    examples = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        features = tf.train.Example.FromString(record).features.feature
        examples.append((list(features["inputs"].int64_list.value), list(features["targets"].int64_list.value)))
    return examples


def test_tensor2tensor_file_names_and_vocabulary(generated):
    _, data_dir, _ = generated
    names = sorted(os.listdir(data_dir))
    assert names == [
        "raw_fingerprint.tiny_files.json",
        "tiny_files-dev-00000-of-00001",
        "tiny_files-test-00000-of-00001",
        "tiny_files-train-00000-of-00003",
        "tiny_files-train-00001-of-00003",
        "tiny_files-train-00002-of-00003",
        "vocab.tiny_files.model",
    ]
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(data_dir, "vocab.tiny_files.model"))
    assert TinyFiles().vocab_size(data_dir) == processor.get_piece_size()


def test_records_are_ids_ending_in_eos_that_decode_to_the_text(generated):
    _, data_dir, _ = generated
    processor = sentencepiece.SentencePieceProcessor(model_file=os.path.join(data_dir, "vocab.tiny_files.model"))
    test = read_records(os.path.join(data_dir, "tiny_files-test-00000-of-00001"))
    decoded = sorted((processor.decode(inputs[:-1]), processor.decode(targets[:-1])) for inputs, targets in test)
    assert decoded == sorted(sentence_pairs()[90:])
    assert all(inputs[-1] == 1 and targets[-1] == 1 and 0 not in inputs + targets for inputs, targets in test)


def test_training_files_are_shuffled_and_complete(generated):
    _, data_dir, _ = generated
    vocabulary = TinyFiles().vocabulary(data_dir)
    train = [
        example
        for name in sorted(os.listdir(data_dir))
        if "-train-" in name
        for example in read_records(os.path.join(data_dir, name))
    ]
    sources = [vocabulary.decode(inputs) for inputs, _ in train]
    assert sorted(sources) == sorted([s for s, _ in sentence_pairs()[:80]] + ["spaced out"])
    assert sources != [s for s, _ in sentence_pairs()[:80]] + ["spaced out"]


def test_shards_grow_with_the_corpus():
    """At least the problem's count; one per PAIRS_PER_SHARD pairs beyond (WMT14 EN-FR: 36 M pairs, 720 files)."""
    assert datagen.num_shards_for(81, 3) == 3
    assert datagen.num_shards_for(250_000, 10) == 10
    assert datagen.num_shards_for(1_000_000, 10) == 20  # file-based sharding feeds 16 workers from 1 M pairs
    assert datagen.num_shards_for(36_000_000, 10) == 720
    assert datagen.num_shards_for(datagen.PAIRS_PER_SHARD + 1, 1) == 2


def test_every_pair_is_written_once_shuffled_into_shards_sized_by_count(tmp_path, monkeypatch):
    monkeypatch.setattr(datagen, "PAIRS_PER_SHARD", 7)
    pairs = [([index + 2, 1], [index + 3, 1]) for index in range(100)]
    assert datagen.write_shuffled_shards(iter(pairs), str(tmp_path), "toy", "train", 2, "toy train") == 100
    names = sorted(os.listdir(tmp_path))
    assert names == [f"toy-train-{index:05d}-of-00015" for index in range(15)]  # ceil(100 / 7); no leftovers
    written = [example for name in names for example in read_records(str(tmp_path / name))]
    assert sorted(written) == sorted(pairs)
    assert written != pairs and all(read_records(str(tmp_path / name)) for name in names)


def test_report_counts_dropped_pairs_by_reason(generated, capsys):
    report, _, _ = generated
    assert report.written == {"train": 81, "dev": 11, "test": 10}
    assert report.dropped["train"] == {datagen.DROP_EMPTY: 1, datagen.DROP_TOO_LONG: 1}
    assert report.dropped["dev"] == {}  # dev keeps its long pair: it is scored on every sentence
    assert "wrote 81 pairs; dropped 2 (1 empty side, 1 too long)" in report.summary()


def test_second_run_reuses_the_files(generated):
    _, data_dir, tmp_dir = generated
    before = {name: os.stat(os.path.join(data_dir, name)).st_mtime_ns for name in os.listdir(data_dir)}
    report = datagen.generate(TinyFiles(), data_dir, tmp_dir)
    assert report.reused == ["train", "dev", "test"] and report.written == {}
    assert {name: os.stat(os.path.join(data_dir, name)).st_mtime_ns for name in os.listdir(data_dir)} == before


def test_dataset_and_its_reverse(generated):
    _, data_dir, _ = generated
    forward = list(TinyFiles().dataset("test", data_dir).as_numpy_iterator())
    reverse_problem = TinyFiles(was_reversed=True)
    backward = list(reverse_problem.dataset("test", data_dir).as_numpy_iterator())
    assert reverse_problem.name == "tiny_files_rev" and reverse_problem.base_name == "tiny_files"
    assert forward[0]["inputs"].dtype == "int32"
    for one, other in zip(forward, backward):
        assert list(one["inputs"]) == list(other["targets"]) and list(one["targets"]) == list(other["inputs"])


def test_unknown_mode_and_missing_data(generated, tmp_path):
    _, data_dir, _ = generated
    with pytest.raises(ValueError, match="train, dev, test"):
        TinyFiles().dataset("validation", data_dir)
    with pytest.raises(FileNotFoundError, match="t2t-datagen --problem=tiny_files"):
        TinyFiles().dataset("train", str(tmp_path))


def test_a_damaged_dev_shard_is_named_and_rewritten_as_the_message_says(generated, tmp_path):
    """A changed byte (its checksum fails) is named before the split is read; removing the file and rerunning
    t2t-datagen, as the message says, writes it again byte for byte."""
    _, data_dir, tmp_dir = generated
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    (dev,) = datagen.complete_shards(str(copy), "tiny_files", "dev")
    damaged = bytearray(pathlib.Path(dev).read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    pathlib.Path(dev).write_bytes(damaged)
    with pytest.raises(datagen.DamagedShardError, match=rf"^{dev}: record \d+ is damaged \(corrupted record at \d+\)"):
        TinyFiles().dataset("dev", str(copy))
    os.remove(dev)
    datagen.generate(TinyFiles(), str(copy), tmp_dir)
    assert pathlib.Path(dev).read_bytes() == pathlib.Path(data_dir, os.path.basename(dev)).read_bytes()


def test_registered_problem_and_its_defaults():
    problem = registry.problem("translate_files_rev")
    assert isinstance(problem, TranslateFiles) and problem.was_reversed
    assert problem.name == "translate_files_rev"
    assert problem.eval_metrics == ["bleu"] and problem.has_inputs and problem.decode_defaults() == {}


@pytest.mark.parametrize(
    "source, target, message",
    [
        (b"one\ntwo\nthree\n", b"eins\nzwei\n", r"train.src has 3 lines but .*train.tgt has 2.*ends at line 2"),
        (b"", b"", r"train.src is empty"),
        (b"ok\nbad \xff byte\n", b"gut\nschlecht\n", r"train.src:2: not valid UTF-8"),
    ],
)
def test_bad_corpus_files_name_the_file_and_line(tmp_path, source, target, message):
    (tmp_path / "train.src").write_bytes(source)
    (tmp_path / "train.tgt").write_bytes(target)
    with pytest.raises(CorpusError, match=message):
        TinyFiles().text_pairs(str(tmp_path), "train")


def test_byte_order_marks_and_control_characters_are_removed_and_said_once_per_file(tmp_path, capsys):
    """An editor's BOM (also where concatenated files meet) and stray controls never reach the vocabulary;
    tab and the other whitespace controls become spaces, as normalize_text makes them."""
    tmp_dir, data_dir = tmp_path / "raw", str(tmp_path / "data")
    pairs = sentence_pairs()
    write_corpus(str(tmp_dir), "train", pairs[:80])
    lines = (tmp_dir / "train.src").read_text(encoding="utf-8").split("\n")
    lines[0] = "\ufeff" + lines[0]
    lines[40] = "\ufeff" + lines[40].replace(" ", " \x1b[0m", 1)  # a terminal's colour code, pasted
    lines[41] = lines[41].replace(" ", "\x00\u0080 ", 1) + "\x7f"
    lines[42] = lines[42].replace(" ", "\t\x0c", 1)  # whitespace controls: kept for normalize_text
    (tmp_dir / "train.src").write_text("\n".join(lines), encoding="utf-8")
    (tmp_dir / "train.tgt").write_bytes(b"\xef\xbb\xbf" + (tmp_dir / "train.tgt").read_bytes())

    problem = TinyFiles()
    datagen.generate(problem, data_dir, str(tmp_dir))
    out = capsys.readouterr().out
    source, target = str(tmp_dir / "train.src"), str(tmp_dir / "train.tgt")
    assert out.count(f"{source}: removed") == out.count(f"{target}: removed") == 1  # read twice, said once
    assert f"{source}: removed 2 byte-order marks (first on line 1) and 4 control characters (first on line 41)" in out
    assert f"{target}: removed 1 byte-order mark (first on line 1);" in out

    vocabulary = sentencepiece.SentencePieceProcessor(model_file=os.path.join(data_dir, problem.vocab_filename()))
    pieces = {vocabulary.id_to_piece(i) for i in range(vocabulary.get_piece_size())}
    assert not [piece for piece in pieces if "\ufeff" in piece or "\x1b" in piece or "\x7f" in piece]
    texts = {
        vocabulary.decode(inputs[:-1])
        for path in tf.io.gfile.glob(os.path.join(data_dir, f"{problem.name}-train-*"))
        for inputs, _ in read_records(path)
    }
    expected = [" ".join(s.split()) for s, _ in pairs[:80]]
    expected[40] = expected[40].replace(" ", " [0m", 1)  # the colour code's printable rest stays: it is text
    assert texts == set(expected)  # every sentence as written, without the marks and controls


def test_a_split_with_every_pair_dropped_is_not_written(tmp_path):
    """Empty shards would pass for a complete split and be reused after the raw data was fixed."""
    tmp_dir, data_dir = str(tmp_path / "raw"), str(tmp_path / "data")
    pairs = sentence_pairs()
    write_corpus(tmp_dir, "train", pairs[:80])
    write_corpus(tmp_dir, "dev", [("", "leer"), ("nichts", "")])
    with pytest.raises(
        datagen.EmptySplitError,
        match=r"files dev: no pair left to write; nothing written. "
        r"Dropped: 2 empty side. Check the raw dev data in "
        r"--tmp_dir=.*raw",
    ):
        datagen.generate(TinyFiles(), data_dir, tmp_dir)
    assert not [name for name in os.listdir(data_dir) if "-dev-" in name]
    write_corpus(tmp_dir, "dev", pairs[80:85])
    report = datagen.generate(TinyFiles(), data_dir, tmp_dir)
    assert report.reused == ["train"] and report.written["dev"] == 5


def test_shards_without_their_vocabulary_are_not_reused(generated, tmp_path):
    """A vocabulary trained afresh would give other ids than the shards hold."""
    _, data_dir, tmp_dir = generated
    copy = tmp_path / "data"
    copy.mkdir()
    for name in os.listdir(data_dir):
        if "-train-" in name:
            tf.io.gfile.copy(os.path.join(data_dir, name), str(copy / name))
    with pytest.raises(
        ValueError,
        match=r"holds tiny_files train files but not vocab.tiny_files.model.*Restore it, "
        r"or remove",
    ):
        datagen.generate(TinyFiles(), str(copy), tmp_dir)
    assert not (copy / "vocab.tiny_files.model").exists()


def test_missing_training_file_names_it(tmp_path):
    with pytest.raises(CorpusError, match="train.src is missing"):
        TinyFiles().text_pairs(str(tmp_path), "train")
    assert TinyFiles().text_pairs(str(tmp_path), "dev") is None  # dev and test are optional


def test_cli_errors_name_the_flag(tmp_path):
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()  # as absl's app.run would, with every flag at its default
    with flagsaver.flagsaver(problem="translate_files", data_dir=str(tmp_path), tmp_dir=None):
        with pytest.raises(flags.UsageError, match="--tmp_dir"):
            datagen_cli.main([])
    with flagsaver.flagsaver(problem="translate_fils", data_dir=str(tmp_path), tmp_dir=str(tmp_path)):
        with pytest.raises(flags.UsageError, match="--problem.*translate_files"):
            datagen_cli.main([])
    with flagsaver.flagsaver(problem="translate_files", data_dir=str(tmp_path), tmp_dir=str(tmp_path)):
        with pytest.raises(flags.UsageError, match="train.src is missing"):
            datagen_cli.main([])


def test_cli_generates_the_base_problems_files_for_rev(tmp_path, capsys, monkeypatch):
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    monkeypatch.setattr(AlgorithmicReverse, "num_examples", {"train": 200, "dev": 20, "test": 20})
    data_dir = tmp_path / "data"
    with flagsaver.flagsaver(problem="algorithmic_reverse_rev", data_dir=str(data_dir), tmp_dir=str(tmp_path)):
        datagen_cli.main([])
    assert "algorithmic_reverse-train-00000-of-00002" in os.listdir(data_dir)
    assert "algorithmic_reverse train: wrote 200 pairs; dropped 0." in capsys.readouterr().out


def test_vocab_from_encodes_a_new_corpus_with_another_problems_vocabulary(generated, tmp_path, capsys):
    """t2t-datagen --vocab_from (a warm start's data): the given vocabulary is copied under this problem's name,
    the new corpus is encoded with it, and a data_dir holding another vocabulary is refused, not overwritten."""
    _, source_dir, _ = generated
    vocab_file = os.path.join(source_dir, TinyFiles().vocab_filename())
    tmp_dir, data_dir = str(tmp_path / "raw"), str(tmp_path / "data")
    pairs = [(f"{source} again", f"{target} wieder") for source, target in sentence_pairs()[:40]]
    for split in ("train", "dev"):
        write_corpus(tmp_dir, split, pairs)
    problem = TinyFiles()
    datagen.generate(problem, data_dir, tmp_dir, vocab_from=vocab_file)
    assert f"Using the vocabulary {vocab_file}" in capsys.readouterr().out
    copied = os.path.join(data_dir, problem.vocab_filename())
    assert open(copied, "rb").read() == open(vocab_file, "rb").read()
    processor = sentencepiece.SentencePieceProcessor(model_file=vocab_file)
    inputs, _ = read_records(tf.io.gfile.glob(problem.filepattern(data_dir, "dev"))[0])[0]
    assert processor.decode(inputs[:-1]) in [source for source, _ in pairs]

    other = str(tmp_path / "other.model")
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter([s for pair in pairs for s in pair] * 3),
        model_prefix=other[: -len(".model")],
        vocab_size=60,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match=rf"--vocab_from={other}: {copied} exists and is another vocabulary"):
        datagen.generate(problem, data_dir, tmp_dir, vocab_from=other)
    assert open(copied, "rb").read() == open(vocab_file, "rb").read()
    with pytest.raises(ValueError, match="problem algorithmic_reverse has no vocabulary file"):
        datagen.generate(AlgorithmicReverse(), str(tmp_path / "alg"), tmp_dir, vocab_from=vocab_file)


@pytest.mark.parametrize("killed_after_reads", [0, 3])  # the unshuffled file written; two shards in place
def test_a_kill_while_a_split_is_written_is_cleaned_by_the_next_run_in_one_line(
    tmp_path, monkeypatch, capsys, killed_after_reads
):
    monkeypatch.setattr(datagen, "PAIRS_PER_SHARD", 7)
    pairs = [([index + 2, 1], [index + 3, 1]) for index in range(100)]
    data_dir, killed = tmp_path / "data", str(tmp_path / "killed")
    data_dir.mkdir()
    kill_points.kill_at(monkeypatch, datagen, "_records", str(data_dir), killed, after_calls=killed_after_reads)
    with pytest.raises(kill_points.Killed):
        datagen.write_shuffled_shards(iter(pairs), str(data_dir), "toy", "train", 2, "toy train")
    monkeypatch.undo()
    monkeypatch.setattr(datagen, "PAIRS_PER_SHARD", 7)
    left = sorted(name for name in os.listdir(killed) if ".incomplete" in name)
    assert left and datagen.complete_shards(killed, "toy", "train") == []  # never taken for finished data
    capsys.readouterr()
    assert datagen.write_shuffled_shards(iter(pairs), killed, "toy", "train", 2, "toy train") == 100
    removed = ", ".join(os.path.join(killed, name) for name in left)
    assert capsys.readouterr().out.startswith(f"Removed {removed}: left unfinished by an interrupted t2t-datagen.\n")
    names = sorted(os.listdir(killed))
    assert names == [f"toy-train-{index:05d}-of-00015" for index in range(15)]
    assert sorted(example for name in names for example in read_records(os.path.join(killed, name))) == sorted(pairs)


def test_a_split_on_a_full_disk_stops_naming_the_file_and_leaves_none_of_it(small_disk, monkeypatch):
    monkeypatch.setattr(datagen, "PAIRS_PER_SHARD", 7)
    pairs = [([index + 200] * 500 + [1], [index + 201] * 500 + [1]) for index in range(100)]  # 200 kB of records
    filler = full_disk.fill(small_disk, leave=64 * 1024)
    with pytest.raises(tf.errors.ResourceExhaustedError) as error:
        datagen.write_shuffled_shards(iter(pairs), str(small_disk), "toy", "train", 2, "toy train")
    message = tool_process.disk_full_message(error.value)
    assert (
        message.startswith(f"the disk holding {small_disk} is full") and f"could not write {small_disk}/toy-" in message
    )
    assert os.listdir(small_disk) == ["filler"]
    os.remove(filler)
    assert datagen.write_shuffled_shards(iter(pairs), str(small_disk), "toy", "train", 2, "toy train") == 100
