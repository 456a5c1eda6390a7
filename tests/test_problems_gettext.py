"""translate_ende_gettext / translate_enfr_gettext on .mo catalogs the test writes in the GNU format."""

import collections
import gettext
import os
import struct

import pytest

from t2t_lite import registry
from t2t_lite.data import datagen, input_pipeline
from t2t_lite.data.input_pipeline import batched_dataset
from t2t_lite.problems import translate_gettext
from t2t_lite.problems.translate_gettext import TranslateEndeGettext, read_mo


def write_mo(path, messages, charset="UTF-8"):
    """The GNU .mo format: header, two tables of (length, offset), then NUL-terminated strings."""
    header = f"Content-Type: text/plain; charset={charset}\nPlural-Forms: nplurals=2; plural=(n != 1);\n"
    entries = sorted([("", header)] + list(messages))
    ids = [msgid.encode(charset) for msgid, _ in entries]
    strs = [msgstr.encode(charset) for _, msgstr in entries]
    count = len(entries)
    originals_at = 28
    translations_at = originals_at + 8 * count
    data_at = translations_at + 8 * count
    tables, blob = [[], []], b""
    for table, strings in zip(tables, (ids, strs)):
        for string in strings:
            table.append((len(string), data_at + len(blob)))
            blob += string + b"\0"
    with open(path, "wb") as file:
        file.write(struct.pack("<7I", 0x950412DE, 0, count, originals_at, translations_at, 0, 0))
        for table in tables:
            for length, offset in table:
                file.write(struct.pack("<2I", length, offset))
        file.write(blob)


COREUTILS = [
    ("Try '%s --help' for more information.\n", "„%s --help“ gibt weitere Informationen.\n"),
    ("cannot open %s for reading", "%s kann nicht zum Lesen geöffnet werden"),
    ("_File", "_Datei"),
    ("Save _As…", "Speichern _unter …"),
    ("&Open", "Ö&ffnen"),
    ("use snake_case names", "snake_case-Namen verwenden"),
    ("Add APT repository", "Paketdepot _hinzufügen"),
    ("%s: %s", "%s – %s"),
    ("%d file\0%d files", "%d Datei\0%d Dateien"),
    ("menu\x04Quit", "Beenden"),
    ("Untranslated message", "Untranslated message"),
    ("Fish & &amp; chips", "Fisch & &amp; Pommes"),
]
TAR = [
    ("cannot open %s for reading", "%s kann nicht zum Lesen geöffnet werden"),  # duplicate across packages
    ("Archive contains obsolescent base-64 headers", "Archiv enthält veraltete Base-64-Kopfzeilen"),
] + [(f"Error number {n} in the archive", f"Fehlernummer {n} im Archiv") for n in range(60)]


@pytest.fixture()
def locale_dir(tmp_path):
    messages = tmp_path / "locale" / "de" / "LC_MESSAGES"
    messages.mkdir(parents=True)
    write_mo(str(messages / "coreutils.mo"), COREUTILS)
    write_mo(str(messages / "tar.mo"), TAR)
    latin = tmp_path / "locale" / "de_DE" / "LC_MESSAGES"
    latin.mkdir(parents=True)
    write_mo(str(latin / "old.mo"), [("Overwrite file?", "Datei überschreiben?")], charset="ISO-8859-1")
    return str(tmp_path / "locale")


def test_reader_agrees_with_the_standard_library(locale_dir):
    path = os.path.join(locale_dir, "de", "LC_MESSAGES", "coreutils.mo")
    with open(path, "rb") as file:
        catalog = gettext.GNUTranslations(file)
    assert catalog.gettext("cannot open %s for reading") == "%s kann nicht zum Lesen geöffnet werden"
    assert catalog.ngettext("%d file", "%d files", 2) == "%d Dateien"
    mine = dict(read_mo(path))
    assert mine["cannot open %s for reading"] == catalog.gettext("cannot open %s for reading")
    assert mine["%d file\0%d files"] == "%d Datei\0%d Dateien"
    latin = os.path.join(locale_dir, "de_DE", "LC_MESSAGES", "old.mo")
    assert dict(read_mo(latin))["Overwrite file?"] == "Datei überschreiben?"


def test_a_corrupt_catalog_is_named(tmp_path):
    """A truncated .mo or an unknown charset stops with the file's path, not a struct error."""
    path = str(tmp_path / "cut.mo")
    write_mo(path, COREUTILS)
    with open(path, "rb") as file:
        whole = file.read()
    for cut in (40, len(whole) - 30):  # inside the tables; inside the strings
        with open(path, "wb") as file:
            file.write(whole[:cut])
        with pytest.raises(ValueError, match=f"{path}: .*truncated or corrupt"):
            read_mo(path)
    write_mo(path, COREUTILS, charset="UTF-8")
    with open(path, "rb") as file:
        renamed = file.read().replace(b"charset=UTF-8", b"charset=NOPE-8")
    with open(path, "wb") as file:
        file.write(renamed)
    with pytest.raises(ValueError, match=f"{path}: declares charset 'NOPE-8'"):
        read_mo(path)


def test_pairs_plurals_accelerators_placeholders(locale_dir):
    problem = TranslateEndeGettext(locale_dir=locale_dir)
    pairs = set(pair for split in ("train", "dev", "test") for pair in problem.text_pairs("", split))
    assert ("Try '%s --help' for more information.", "„%s --help“ gibt weitere Informationen.") in pairs
    assert ("%d file", "%d Datei") in pairs and ("%d files", "%d Dateien") in pairs
    assert ("Quit", "Beenden") in pairs  # msgctxt dropped
    assert ("File", "Datei") in pairs and ("Save As…", "Speichern unter …") in pairs
    assert ("Open", "Öffnen") in pairs
    assert ("use snake_case names", "snake_case-Namen verwenden") in pairs
    assert ("Add APT repository", "Paketdepot hinzufügen") in pairs
    assert ("Fish & &amp; chips", "Fisch & &amp; Pommes") in pairs
    assert ("Overwrite file?", "Datei überschreiben?") in pairs  # de_DE, ISO-8859-1
    assert sum(source == "cannot open %s for reading" for source, _ in pairs) == 1  # de-duplicated


def test_splits_never_share_a_source_sentence(locale_dir):
    problem = TranslateEndeGettext(locale_dir=locale_dir)
    splits = {split: {source for source, _ in problem.text_pairs("", split)} for split in ("train", "dev", "test")}
    assert splits["train"] and splits["dev"] | splits["test"]
    assert not splits["train"] & splits["dev"] and not splits["train"] & splits["test"]
    assert not splits["dev"] & splits["test"]
    for split, sources in splits.items():
        assert all(translate_gettext.split_of(source) == split for source in sources)


def test_datagen_drops_untranslated_and_placeholder_only_messages(locale_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(input_pipeline, "SHUFFLE_BUFFER", 100)  # a few hundred examples: no need for 10,000

    class TinyGettext(TranslateEndeGettext):
        approx_vocab_size = 400
        num_shards = {"train": 1, "dev": 1, "test": 1}

    data_dir = str(tmp_path / "data")
    report = datagen.generate(TinyGettext(locale_dir=locale_dir), data_dir, str(tmp_path / "tmp"))
    dropped = sum(report.dropped.values(), start=collections.Counter())
    assert dropped == {datagen.DROP_IDENTICAL: 1, translate_gettext.DROP_NO_WORDS: 1}
    assert sum(report.written.values()) == len(COREUTILS) + len(TAR) + 1 + 1 - 1 - 2  # +plural +de_DE -dup -drops
    hparams = registry.hparams("transformer_tiny").replace(batch_size=64, max_length=32)
    batch = next(
        batched_dataset(TinyGettext(locale_dir=locale_dir), "train", data_dir, hparams, seed=0).as_numpy_iterator()
    )
    assert batch["inputs"].shape[1] == batch["targets"].shape[1]


def test_no_catalogs_error_names_packages_and_translate_files(tmp_path):
    problem = registry.problem("translate_enfr_gettext")
    problem.locale_dir = str(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"(?s)fr/LC_MESSAGES.*apt-get install.*coreutils.*translate_files"):
        problem.text_pairs("", "train")
