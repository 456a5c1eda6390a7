"""English->German and English->French from the gettext catalogs the OS ships: an offline default.

Every translated Debian/Ubuntu package installs its messages as compiled gettext
catalogs, `/usr/share/locale/<lang>/LC_MESSAGES/<package>.mo`: real human
translations of English user-interface text, present without any download. On this
project's Debian 12 machine 86 German and 87 French catalogs (54,900 and 62,000 distinct
message pairs; 43,200 and 57,400 once untranslated ones are dropped) come from
packages such as coreutils, findutils, diffutils, tar, grep, sed, bash, wget, make,
man-db, apt, libapt-pkg6.0, dpkg, git, systemd, procps, iso-codes, xkb-data, libc-l10n,
gnupg-l10n, libglib2.0-data, postgresql-15 and postgresql-client-15;
`apt-get install -y <package>` adds more. (Minimal container images often delete
/usr/share/locale; reinstall the packages after removing the
`path-exclude=/usr/share/locale/*` line from /etc/dpkg/dpkg.cfg.d/excludes.)

How catalogs become pairs (`catalog_pairs`):
- The .mo binary format is read with the standard library, in the charset its header
  declares. Message contexts (msgctxt) are dropped; the header entry is skipped.
- Plural forms: the singular msgid pairs with msgstr[0] and the plural msgid with
  msgstr[1] (German and French both have two forms, singular first).
- Accelerator markers: when the English text marks a mnemonic (`_File`, `&File`,
  at the start of a word), the marker is removed from it and the first `_` or `&`
  before a letter is removed from the translation, where translators put it
  anywhere in a word (`Spei_chern`); a word-initial `_` that only the translation has
  is removed too. `&&`, `__`, `&amp;` and identifiers such as `foo_bar` are left alone.
- printf placeholders (`%s`, `%1$d`, `%(name)s`, `{0}`) are kept exactly as written.
- Whitespace is normalized as everywhere (`t2t_lite.data.vocabulary.normalize_text`), so
  multi-line help texts become one line; those longer than `max_subword_length`
  ids are dropped from training.
- Duplicate pairs (the same message in several packages) are kept once; pairs that
  are empty, identical on both sides (untranslated), or whose English has no letter
  outside placeholders are dropped, and datagen reports how many.
- Split: a pair goes to dev or test when the MD5 of its English text falls in the
  first or second `HOLDOUT_PERCENT` percent, else to train, so an English sentence
  (with all its translations) is in exactly one split, whatever the catalogs.

The catalogs are the raw files that t2t-datagen records (`t2t_lite.data.raw_fingerprint`,
by absolute path): after a package is installed, upgraded or removed, a rerun on the
same --data_dir stops and names the catalogs that appeared, changed or disappeared;
`--overwrite` regenerates the data from the catalogs installed now.
"""

import glob
import hashlib
import os
import re
import struct

from t2t_lite.data.vocabulary import normalize_text
from t2t_lite.problem import TextProblem
from t2t_lite.registry import register_problem

DEFAULT_LOCALE_DIR = "/usr/share/locale"
HOLDOUT_PERCENT = 3  # Percent of English messages held out for dev, and again for test.
DROP_NO_WORDS = "only placeholders or punctuation"
_MO_MAGIC = (0x950412DE, 0xDE120495)
_CONTEXT_SEPARATOR = "\x04"
_PLURAL_SEPARATOR = "\x00"
# printf conversions (%s, %1$d, %-10.3f, %(name)s, %lld) and Python/C# braces ({0}, {name}).
_PLACEHOLDER = re.compile(
    r"%(\d+\$)?(\(\w+\))?[-+ #0']*(\*|\d+)?(\.(\*|\d+))?[hlLqjzt]*[diouxXeEfFgGcrsaCSpn%]|\{\w*\}"
)
# A mnemonic marker at the start of a word in the English text: "_File", "Save _As", "&Open".
_SOURCE_ACCELERATOR = re.compile(r"(?<![\w&_])[_&](?=[^\W\d_])")
_TARGET_ACCELERATOR = re.compile(r"(?<![&_])[_&](?=[^\W\d_])")
_ADDED_UNDERSCORE = re.compile(r"(?<![\w_])_(?=[^\W\d_])")
_HTML_ENTITY = re.compile(r"&\w+;")


def read_mo(path: str) -> list:
    """(msgid, msgstr) pairs of a compiled gettext catalog, decoded with its declared charset."""
    with open(path, "rb") as file:
        data = file.read()
    if len(data) < 20:
        raise ValueError(f"{path}: too short to be a gettext .mo file.")
    magic = struct.unpack("<I", data[:4])[0]
    if magic not in _MO_MAGIC:
        raise ValueError(f"{path}: not a gettext .mo file (magic {magic:#x}).")
    order = "<" if magic == _MO_MAGIC[0] else ">"
    _, count, originals_at, translations_at = struct.unpack(order + "4I", data[4:20])

    def string(table_at, index):
        length, offset = struct.unpack(order + "2I", data[table_at + 8 * index : table_at + 8 * index + 8])
        if offset + length > len(data):
            raise ValueError(
                f"{path}: string {index} runs past the end of the file; the catalog is truncated or corrupt."
            )
        return data[offset : offset + length]

    try:
        raw = [(string(originals_at, i), string(translations_at, i)) for i in range(count)]
        charset = _charset(dict(raw).get(b"", b""))
        return [(msgid.decode(charset, "replace"), msgstr.decode(charset, "replace")) for msgid, msgstr in raw]
    except struct.error:
        raise ValueError(
            f"{path}: its string tables run past the end of the file; the catalog is truncated or corrupt."
        ) from None
    except LookupError:
        raise ValueError(f"{path}: declares charset {charset!r}, which Python does not know.") from None


def _charset(header: bytes) -> str:
    match = re.search(rb"charset=([\w.-]+)", header)
    name = match.group(1).decode("ascii") if match else "utf-8"
    return "utf-8" if name.upper() == "CHARSET" else name


def message_pairs(msgid: str, msgstr: str) -> list:
    """The (English, translation) pairs of one catalog entry: one, or two for plural forms."""
    if not msgid or not msgstr:
        return []
    msgid = msgid.split(_CONTEXT_SEPARATOR)[-1]
    sources = msgid.split(_PLURAL_SEPARATOR)
    targets = msgstr.split(_PLURAL_SEPARATOR)
    return [(source, target) for source, target in zip(sources, targets[:2]) if target]


def strip_accelerators(source: str, target: str) -> tuple:
    """Removes mnemonic markers (`_File`, `&File`) from both sides.

    When the English marks one, the first marker anywhere in a word of the translation
    goes too; when the English has no `_` at all, a `_` starting a word of the
    translation can only be a marker the translator added (`Paketdepot _hinzufügen`).
    """
    if _SOURCE_ACCELERATOR.search(_HTML_ENTITY.sub("", source)):
        source = _SOURCE_ACCELERATOR.sub("", source, count=1)
        if not _HTML_ENTITY.match(target, _first_position(_TARGET_ACCELERATOR, target)):
            target = _TARGET_ACCELERATOR.sub("", target, count=1)
    elif "_" not in source:
        target = _ADDED_UNDERSCORE.sub("", target, count=1)
    return source, target


def _first_position(pattern, text) -> int:
    match = pattern.search(text)
    return match.start() if match else len(text)


def catalog_pairs(paths) -> list:
    """De-duplicated (English, translation) pairs of the catalogs at `paths`, in a stable order."""
    pairs = set()
    for path in sorted(paths):
        for msgid, msgstr in read_mo(path):
            for source, target in message_pairs(msgid, msgstr):
                source, target = strip_accelerators(source, target)
                pairs.add((normalize_text(source), normalize_text(target)))
    return sorted(pairs)


def split_of(source: str) -> str:
    """train, dev or test, from the MD5 of the English text (stable across machines and runs)."""
    bucket = int(hashlib.md5(source.encode("utf-8")).hexdigest(), 16) % 100
    if bucket < HOLDOUT_PERCENT:
        return "dev"
    if bucket < 2 * HOLDOUT_PERCENT:
        return "test"
    return "train"


class TranslateGettext(TextProblem):
    """English -> `target_language` message pairs from the OS's gettext catalogs."""

    target_language = ""
    approx_vocab_size = 8000
    drop_identical_pairs = True  # An untranslated message has msgstr == msgid.
    num_shards = {"train": 4, "dev": 1, "test": 1}

    def __init__(self, was_reversed: bool = False, locale_dir: str = DEFAULT_LOCALE_DIR):
        super().__init__(was_reversed)
        self.locale_dir = locale_dir

    def installed_catalogs(self) -> list:
        """`<locale_dir>/<lang>/LC_MESSAGES/*.mo` (also `<lang>_<COUNTRY>` for the main country), maybe none."""
        languages = (self.target_language, f"{self.target_language}_{self.target_language.upper()}")
        paths = []
        for language in languages:
            paths += glob.glob(os.path.join(self.locale_dir, language, "LC_MESSAGES", "*.mo"))
        return sorted(paths)

    def catalog_paths(self) -> list:
        """`installed_catalogs`, or an error saying where they come from when there are none."""
        paths = self.installed_catalogs()
        if not paths:
            raise FileNotFoundError(
                f"No gettext catalogs found under {self.locale_dir}/{self.target_language}/LC_MESSAGES/*.mo. "
                f"They come with translated Debian/Ubuntu packages, e.g. `apt-get install -y coreutils tar grep "
                f"sed wget make man-db apt dpkg iso-codes util-linux-locales gnupg-l10n libc-l10n` (minimal "
                f"images may exclude /usr/share/locale in /etc/dpkg/dpkg.cfg.d/). Or bring your own corpus "
                f"with --problem=translate_files."
            )
        return paths

    def raw_files(self, tmp_dir: str, split: str) -> list:
        # Every split draws on every catalog, so one installed or removed with a package is a change.
        return self.installed_catalogs()

    def text_pairs(self, tmp_dir: str, split: str):
        return [pair for pair in catalog_pairs(self.catalog_paths()) if split_of(pair[0]) == split]

    def drop_reason(self, source: str, target: str):
        reason = super().drop_reason(source, target)
        if reason is None and not re.search(r"[^\W\d_]", _PLACEHOLDER.sub("", source)):
            return DROP_NO_WORDS
        return reason


@register_problem
class TranslateEndeGettext(TranslateGettext):
    """English -> German user-interface messages of the installed packages."""

    target_language = "de"


@register_problem
class TranslateEnfrGettext(TranslateGettext):
    """English -> French user-interface messages of the installed packages."""

    target_language = "fr"
