"""translate_files: the user's own parallel corpus, as plain text files in --tmp_dir.

    <tmp_dir>/train.src  train.tgt    (required)
    <tmp_dir>/dev.src    dev.tgt      (optional; t2t-trainer evaluates on dev)
    <tmp_dir>/test.src   test.tgt     (optional)

One sentence per line, UTF-8, line i of `.tgt` the translation of line i of `.src`.
Files are checked before anything is written: line counts that differ, an empty
file and invalid UTF-8 stop datagen with the file and line to fix.

Two kinds of stray characters are removed rather than stopping datagen, each counted in one
line per file: byte-order marks (U+FEFF) that start a line (an editor's mark at the top of a
file, or at the top of each file that was concatenated into it) and control characters that are
not whitespace (U+0000-U+0008, U+000E-U+001B, U+007F-U+0084, U+0086-U+009F). Neither is text a
model should learn to read or write, and either would become byte pieces of the vocabulary.
Tab and the other whitespace controls stay: `normalize_text` turns them into spaces.

The shared BPE vocabulary (§5.1) asks for 8,000 pieces, a size that suits corpora
from ten thousand to a few hundred thousand sentence pairs; on less text
SentencePiece learns as many merges as the text supports and the vocabulary file
records the smaller size (see `t2t_lite.data.vocabulary.train_vocabulary`).
"""

import os
import re

from t2t_lite.problem import TextProblem
from t2t_lite.registry import register_problem

SOURCE_SUFFIX = ".src"
TARGET_SUFFIX = ".tgt"


BYTE_ORDER_MARK = "\ufeff"
# Control characters that are not whitespace (str.isspace): what `normalize_text` would keep.
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")


class CorpusError(ValueError):
    """A parallel text file that cannot be used, with the file and line to fix."""


def clean_line(line: str) -> tuple:
    """(the line without a leading byte-order mark and non-whitespace control characters, marks, controls removed)."""
    marks = 0
    if line.startswith(BYTE_ORDER_MARK):
        line, marks = line[1:], 1
    line, controls = _CONTROL.subn("", line)
    return line, marks, controls


def check_lines(path: str, log=print) -> int:
    """The number of lines of a UTF-8 text file, read as a stream; errors name the file and line.

    What `read_lines` will remove from it is said in one line (`log`), with the first line concerned.
    """
    count = 0
    removed = {"byte-order mark": [0, 0], "control character": [0, 0]}  # kind -> [count, first line]
    with open(path, "rb") as file:
        for count, raw in enumerate(file, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorpusError(
                    f"{path}:{count}: not valid UTF-8 (byte {error.start}: {raw[error.start : error.start + 1]!r}); "
                    f"convert the file, e.g. `iconv -f latin1 -t utf-8`."
                ) from None
            for tally, found in zip(removed.values(), clean_line(line)[1:]):
                tally[1] = tally[1] or (count if found else 0)
                tally[0] += found
    if count == 0:
        raise CorpusError(f"{path} is empty; it needs one sentence per line.")
    said = [
        f"{number:,} {kind}{'s' * (number > 1)} (first on line {first})"
        for kind, (number, first) in removed.items()
        if number
    ]
    if said:
        log(f"{path}: removed {' and '.join(said)}; they are not text to translate.")
    return count


def read_lines(path: str):
    """The lines of a UTF-8 text file (checked by `check_lines`), one at a time, as `clean_line` leaves them.

    As in `t2t_lite.data.text_lines`, a line ends at "\\n" only, and a "\\r" before it is dropped.
    """
    with open(path, "rb") as file:
        for raw in file:
            line = raw[:-1] if raw.endswith(b"\n") else raw
            yield clean_line((line[:-1] if line.endswith(b"\r") else line).decode("utf-8"))[0]


def read_parallel(source_path: str, target_path: str, log=print):
    """(source, target) pairs of two line-aligned files, streamed after both are checked whole.

    The check reads both files once before the first pair, so a bad line stops datagen
    before anything is written; the pairs themselves are never all in memory.
    """
    sources, targets = check_lines(source_path, log), check_lines(target_path, log)
    if sources != targets:
        shorter = source_path if sources < targets else target_path
        raise CorpusError(
            f"{source_path} has {sources} lines but {target_path} has {targets}; "
            f"{shorter} ends at line {min(sources, targets)}. "
            f"Line i of each file must be a translation of line i of the other."
        )
    return _CheckedPairs(source_path, target_path, sources)


class _CheckedPairs:
    """The pairs of two checked files, streamed; their number, known from the check, is datagen's progress total."""

    def __init__(self, source_path: str, target_path: str, count: int):
        self.source_path, self.target_path, self.count = source_path, target_path, count

    def __iter__(self):
        return zip(read_lines(self.source_path), read_lines(self.target_path))

    def __len__(self) -> int:
        return self.count


@register_problem
class TranslateFiles(TextProblem):
    """Translation of the user's own corpus: <tmp_dir>/{train,dev,test}.{src,tgt}."""

    approx_vocab_size = 8000

    def raw_files(self, tmp_dir: str, split: str) -> list:
        paths = [os.path.join(tmp_dir, split + suffix) for suffix in (SOURCE_SUFFIX, TARGET_SUFFIX)]
        return [path for path in paths if os.path.exists(path)]

    def text_pairs(self, tmp_dir: str, split: str):
        source_path = os.path.join(tmp_dir, split + SOURCE_SUFFIX)
        target_path = os.path.join(tmp_dir, split + TARGET_SUFFIX)
        if not os.path.exists(source_path) and not os.path.exists(target_path) and split != "train":
            return None
        for path in (source_path, target_path):
            if not os.path.exists(path):
                raise CorpusError(
                    f"{path} is missing: translate_files reads <tmp_dir>/{split}{SOURCE_SUFFIX} and "
                    f"<tmp_dir>/{split}{TARGET_SUFFIX}, one sentence per line (see --tmp_dir)."
                )
        return read_parallel(source_path, target_path, log=self._say_once)

    def _say_once(self, message: str) -> None:
        """Prints `message` once: the training files are read twice when the vocabulary is trained from them."""
        said = self.__dict__.setdefault("_said", set())
        if message not in said:
            said.add(message)
            print(message)
