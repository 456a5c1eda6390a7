"""t2t-datagen notices raw files that changed since their data was written, and --overwrite regenerates."""

import hashlib
import os

import pytest
from absl.testing import flagsaver
from test_problem import TinyFiles, sentence_pairs, write_corpus
from test_problems_gettext import COREUTILS, TAR, write_mo
from test_problems_parsing import TinyParsing, write_treebank

from t2t_lite.cli import flags
from t2t_lite.cli import t2t_datagen as datagen_cli
from t2t_lite.data import datagen, raw_fingerprint
from t2t_lite.problems.translate_gettext import TranslateEndeGettext


def data_files(data_dir):
    """name -> (mtime, bytes) of every file in data_dir, to show that nothing was touched."""
    result = {}
    for name in sorted(os.listdir(data_dir)):
        with open(os.path.join(data_dir, name), "rb") as file:
            result[name] = (os.stat(os.path.join(data_dir, name)).st_mtime_ns, file.read())
    return result


@pytest.fixture
def generated(tmp_path):
    tmp_dir, data_dir = str(tmp_path / "raw"), str(tmp_path / "data")
    write_corpus(tmp_dir, "train", sentence_pairs()[:80])
    write_corpus(tmp_dir, "test", sentence_pairs()[90:])
    datagen.generate(TinyFiles(), data_dir, tmp_dir)
    return data_dir, tmp_dir


def test_the_record_holds_size_mtime_and_hash_of_each_raw_file(generated):
    data_dir, tmp_dir = generated
    record = raw_fingerprint.read_record(raw_fingerprint.record_path(data_dir, "tiny_files"))
    assert sorted(record) == ["test", "train"] and sorted(record["train"]) == ["train.src", "train.tgt"]
    with open(os.path.join(tmp_dir, "train.src"), "rb") as file:
        assert record["train"]["train.src"]["sha256"] == hashlib.sha256(file.read()).hexdigest()
    assert record["train"]["train.src"]["size"] == os.path.getsize(os.path.join(tmp_dir, "train.src"))


def test_the_digest_names_the_raw_data_so_two_machines_can_tell_whether_theirs_is_the_same(generated, tmp_path, capsys):
    """Equal on a copy of the same raw files elsewhere, different when one file's content differs."""
    data_dir, tmp_dir = generated
    digest, files = raw_fingerprint.digest(raw_fingerprint.record_path(data_dir, "tiny_files"))
    assert files == 4 and len(digest) == 12
    hashes = {}
    for split, names in (("train", ("train.src", "train.tgt")), ("test", ("test.src", "test.tgt"))):
        for name in names:
            with open(os.path.join(tmp_dir, name), "rb") as file:
                hashes[(split, name)] = hashlib.sha256(file.read()).hexdigest()
    lines = sorted(f"{split}\t{name}\t{sha}" for (split, name), sha in hashes.items())
    assert digest == hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]

    elsewhere, other_data = str(tmp_path / "copy"), str(tmp_path / "copy_data")
    write_corpus(elsewhere, "train", sentence_pairs()[:80])
    write_corpus(elsewhere, "test", sentence_pairs()[90:])
    capsys.readouterr()
    datagen.generate(TinyFiles(), other_data, elsewhere)
    assert f"tiny_files: raw data digest {digest} (4 files)" in capsys.readouterr().out
    changed, changed_data = str(tmp_path / "changed"), str(tmp_path / "changed_data")
    write_corpus(changed, "train", sentence_pairs()[:79])
    write_corpus(changed, "test", sentence_pairs()[90:])
    datagen.generate(TinyFiles(), changed_data, changed)
    assert raw_fingerprint.digest(raw_fingerprint.record_path(changed_data, "tiny_files"))[0] != digest


def test_unchanged_raw_files_are_reused_even_when_copied_afresh(generated):
    data_dir, tmp_dir = generated
    before = data_files(data_dir)
    source = os.path.join(tmp_dir, "train.src")
    os.utime(source, ns=(1, 1))  # as a `cp` or `touch` would: other mtime, same bytes
    report = datagen.generate(TinyFiles(), data_dir, tmp_dir)
    assert report.reused == ["train", "test"]
    assert data_files(data_dir) == before


@pytest.mark.parametrize("edit", ["longer", "same size"])
def test_changed_raw_files_stop_the_rerun_and_name_the_files(generated, edit, capsys):
    data_dir, tmp_dir = generated
    before = data_files(data_dir)
    pairs = sentence_pairs()[:80]
    if edit == "longer":
        pairs = pairs + [("a new sentence.", "ein neuer Satz.")]
    else:  # one letter changed in each file, so their sizes stay
        pairs = [("Xhe" + pairs[0][0][3:], "Xie" + pairs[0][1][3:])] + pairs[1:]
    write_corpus(tmp_dir, "train", pairs)
    with pytest.raises(
        raw_fingerprint.RawDataChangedError,
        match=r"changed since .*\(train: train.src, train.tgt\)\. Rerun t2t-datagen with --overwrite",
    ):
        datagen.generate(TinyFiles(), data_dir, tmp_dir)
    assert data_files(data_dir) == before  # nothing touched

    report = datagen.generate(TinyFiles(), data_dir, tmp_dir, overwrite=True)
    assert report.written["train"] == len(pairs) and report.reused == []
    assert "--overwrite: removed" in capsys.readouterr().out
    vocabulary = TinyFiles().vocabulary(data_dir)
    train = [
        vocabulary.decode(example["inputs"]) for example in TinyFiles().dataset("train", data_dir).as_numpy_iterator()
    ]
    assert sorted(train) == sorted(source for source, _ in pairs)
    assert datagen.generate(TinyFiles(), data_dir, tmp_dir).reused == ["train", "test"]  # recorded afresh


def test_a_split_added_later_is_generated_without_complaint(generated):
    data_dir, tmp_dir = generated
    write_corpus(tmp_dir, "dev", sentence_pairs()[80:90])
    report = datagen.generate(TinyFiles(), data_dir, tmp_dir)
    assert report.reused == ["train", "test"] and report.written["dev"] == 10


def test_a_removed_raw_file_counts_as_a_change(generated):
    data_dir, tmp_dir = generated
    os.remove(os.path.join(tmp_dir, "test.src"))
    os.remove(os.path.join(tmp_dir, "test.tgt"))
    with pytest.raises(raw_fingerprint.RawDataChangedError, match=r"test: test.src, test.tgt"):
        datagen.generate(TinyFiles(), data_dir, tmp_dir)


def test_cli_offers_overwrite_and_checks_paths_first(generated, tmp_path, monkeypatch):
    data_dir, tmp_dir = generated
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    monkeypatch.setattr(flags, "problem_from_flags", TinyFiles)
    write_corpus(tmp_dir, "test", sentence_pairs()[85:])
    with flagsaver.flagsaver(problem="tiny_files", data_dir=data_dir, tmp_dir=tmp_dir):
        with pytest.raises(flags.UsageError, match="test.src, test.tgt.*--overwrite"):
            datagen_cli.main([])
    with flagsaver.flagsaver(problem="tiny_files", data_dir=data_dir, tmp_dir=tmp_dir, overwrite=True):
        datagen_cli.main([])
    assert TinyFiles().dataset("test", data_dir).reduce(0, lambda count, _: count + 1).numpy() == 15
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with flagsaver.flagsaver(problem="tiny_files", data_dir=str(a_file), tmp_dir=tmp_dir):
        with pytest.raises(flags.UsageError, match="--data_dir=.*a_file: is a file"):
            datagen_cli.main([])


class TinyGettext(TranslateEndeGettext):
    approx_vocab_size = 400
    num_shards = {"train": 1, "dev": 1, "test": 1}


def test_gettext_catalogs_changed_installed_or_removed_stop_the_rerun(tmp_path):
    """The catalogs lie outside --tmp_dir (the system's locale directory): named by their absolute paths."""
    messages = tmp_path / "locale" / "de" / "LC_MESSAGES"
    messages.mkdir(parents=True)
    coreutils, tar, wget = (str(messages / name) for name in ("coreutils.mo", "tar.mo", "wget.mo"))
    write_mo(coreutils, COREUTILS)
    write_mo(tar, TAR)
    problem = TinyGettext(locale_dir=str(tmp_path / "locale"))
    data_dir, tmp_dir = str(tmp_path / "data"), str(tmp_path / "tmp")
    first = datagen.generate(problem, data_dir, tmp_dir)
    record = raw_fingerprint.read_record(raw_fingerprint.record_path(data_dir, "tiny_gettext"))
    assert {split: sorted(files) for split, files in record.items()} == {
        "train": [coreutils, tar],
        "dev": [coreutils, tar],
        "test": [coreutils, tar],
    }
    before = data_files(data_dir)

    write_mo(wget, [("Saving to: %s", "Wird in %s gespeichert.")])  # a package installed
    with pytest.raises(
        raw_fingerprint.RawDataChangedError,
        match=rf"of tiny_gettext changed since .*\(dev, test, train: {wget}\)\. Rerun",
    ):
        datagen.generate(problem, data_dir, tmp_dir)
    os.remove(wget)
    write_mo(tar, TAR[:-1] + [("Archive is compressed", "Archiv ist komprimiert")])  # upgraded
    os.remove(coreutils)  # removed
    with pytest.raises(raw_fingerprint.RawDataChangedError, match=rf"\(dev, test, train: {coreutils}, {tar}\)"):
        datagen.generate(problem, data_dir, tmp_dir)
    assert data_files(data_dir) == before  # nothing touched

    report = datagen.generate(problem, data_dir, tmp_dir, overwrite=True)
    assert sum(report.written.values()) == len(TAR) < sum(first.written.values())
    assert datagen.generate(problem, data_dir, tmp_dir).reused == ["train", "dev", "test"]


def test_a_changed_treebank_file_stops_the_rerun_naming_it(tmp_path):
    tmp_dir, data_dir = str(tmp_path / "raw"), str(tmp_path / "data")
    write_treebank(tmp_dir, [f"{n:02d}" for n in range(25)])
    datagen.generate(TinyParsing(), data_dir, tmp_dir)
    record = raw_fingerprint.read_record(raw_fingerprint.record_path(data_dir, "tiny_parsing"))
    assert sorted(record["test"]) == [os.path.join("wsj", "23", "wsj_2301.mrg")]
    assert len(record["train"]) == 20  # sections 02-21; 00, 01 and 24 are not used
    before = data_files(data_dir)

    with open(os.path.join(tmp_dir, "wsj", "05", "wsj_0501.mrg"), "a") as file:
        file.write("( (S (NP-SBJ (NNP Pierre) ) (VP (VBZ sleeps) ) (. .) ))\n")
    os.rename(os.path.join(tmp_dir, "wsj", "23", "wsj_2301.mrg"), os.path.join(tmp_dir, "wsj", "23", "wsj_2302.mrg"))
    with pytest.raises(
        raw_fingerprint.RawDataChangedError,
        match=r"in --tmp_dir=.*\(test: wsj/23/wsj_2301\.mrg, wsj/23/wsj_2302\.mrg; "
        r"train: wsj/05/wsj_0501\.mrg\)",
    ):
        datagen.generate(TinyParsing(), data_dir, tmp_dir)
    assert data_files(data_dir) == before

    report = datagen.generate(TinyParsing(), data_dir, tmp_dir, overwrite=True)
    assert report.written == {"train": 41, "dev": 2, "test": 2}
    assert datagen.generate(TinyParsing(), data_dir, tmp_dir).reused == ["train", "dev", "test"]
