"""Word alignments of the training pairs (`t2t-datagen --train_alignments=FILE`), mapped to their subwords.

The file holds one line per raw training pair, in the corpus' order, of Pharaoh (Moses) links `j-i`:
source word j is aligned with target word i, both counted from 0 over the whitespace-separated words
of the raw text (`str.split()`, the words `t2t_lite.decode.alignment` writes links over). An empty line
is a pair without links. An unsupervised aligner writes such files (bench/eflomal_align.py).

Datagen stores each pair's links over its subword ids, as the flat int64 feature `alignment`
[s₀, t₀, s₁, t₁, …] of (source position, target position) in the ids of `inputs` and `targets`: a
word link links every subword of source word j with every subword of target word i,

    links(x, y) = {(s, t) : word(s) = j, word(t) = i, (j, i) ∈ word links},

`word` being `word_indices` over the vocabulary's `word_pieces()`. EOS is no word on either side and
has no link: the guided-alignment loss (t2t_lite/train/guided_alignment.py) leaves the target's EOS
unsupervised, and no target subword is pointed at the source's EOS.

The file is checked whole before anything is written: a line count other than the pairs', a line
that is not links, or an index beyond its sentence's words stops datagen naming the file and line.
Links travel with their pair through datagen's cleaning, so a dropped pair drops its line with it.
"""

import operator
import os
import re

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocabulary import EOS_ID

# The feature of an aligned training split's records (flat subword links) and the key of its batches'
# alignment matrices (bool [batch, target length, source length], `alignment_matrix`).
ALIGNMENT = "alignment"
_LINK = re.compile(r"(\d+)-(\d+)$")


class AlignmentFileError(ValueError):
    """An alignment file that does not fit its corpus, with the file and line to fix."""


def parse_links(line: str) -> list:
    """[(source word, target word), …] of one Pharaoh line; ValueError says what is wrong with it."""
    links = []
    for link in line.split():
        found = _LINK.match(link)
        if not found:
            raise ValueError(f"{link!r} is not a link source-target of word indices counted from 0, as 0-0 2-1")
        links.append((int(found.group(1)), int(found.group(2))))
    return links


def check_links(line: str, source: str, target: str) -> None:
    """ValueError naming the link when `line` is not links within the words of (`source`, `target`)."""
    source_words, target_words = len(source.split()), len(target.split())
    for source_word, target_word in parse_links(line):
        if source_word >= source_words or target_word >= target_words:
            raise ValueError(
                f"link {source_word}-{target_word} is outside the pair, whose source has {source_words} words "
                f"and target {target_words}"
            )


def with_links(pairs, path: str):
    """(source, target, Pharaoh line) triples: `pairs` with the lines of `path` beside them, each line checked.

    Pairs that can be read twice (translate_files' checked files) are read through once first, with
    the file, so a line that does not fit stops datagen before anything is written; a stream of
    pairs read once is checked as it goes (datagen then removes what it had written of the split).
    """
    triples = _Triples(pairs, path)
    if iter(pairs) is not pairs:
        triples.count = sum(1 for _ in triples)
    return triples


_FIX = "Write the links of training pair n on line n, as `0-0 2-1`, source word-target word, counted from 0"


class _Triples:
    """The triples, streamed and checked; their number, once known, is datagen's progress total."""

    def __init__(self, pairs, path: str):
        self.pairs, self.path, self.count = pairs, path, None

    def __iter__(self):
        with open(self.path, "rb") as lines:
            for number, ((source, target), line) in enumerate(_zip_lines(self.pairs, lines, self.path), 1):
                try:
                    line = line.decode("utf-8")
                    check_links(line, source, target)
                except UnicodeDecodeError as error:
                    raise AlignmentFileError(
                        f"{self.path}:{number}: not valid UTF-8 ({error.reason}). {_FIX}."
                    ) from None
                except ValueError as error:
                    raise AlignmentFileError(f"{self.path}:{number}: {error}. {_FIX}.") from None
                yield source, target, line

    def __length_hint__(self) -> int:
        return self.count if self.count is not None else operator.length_hint(self.pairs, 0)


def _zip_lines(pairs, lines, path: str):
    """(pair, line) for each pair and line, stopping with AlignmentFileError when one runs out before the other."""
    lines = iter(lines)
    count = 0
    for count, pair in enumerate(pairs, start=1):
        line = next(lines, None)
        if line is None:
            raise AlignmentFileError(
                f"{path} has {count - 1} lines, but the training data has more pairs (at least {count}). {_FIX}."
            )
        yield pair, line.rstrip(b"\r\n")
    if next(lines, None) is not None:
        raise AlignmentFileError(
            f"{path} has more lines than the training data has pairs ({count}): line {count + 1} aligns no pair. "
            f"{_FIX}."
        )


def word_indices(ids, starts, bare):
    """int32 [batch, length]: the word of the text that each id belongs to, -1 for EOS, padding and after EOS.

    `starts`, `bare`: the vocabulary's `word_pieces()` tables. The first piece of a text begins its first
    word whatever it is (a byte, a piece without "▁"); a bare "▁" begins a word only when a piece of that
    word follows it.
    """
    ids = tf.convert_to_tensor(ids, tf.int32)
    real = (ids > EOS_ID) & (tf.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=1) == 0)
    first = real & (tf.cumsum(tf.cast(real, tf.int32), axis=1) == 1)
    begins = (tf.gather(tf.constant(starts), ids) | first) & real
    next_begins_or_ends = tf.concat([begins[:, 1:] | ~real[:, 1:], tf.ones_like(begins[:, :1])], axis=1)
    # A bare "▁" with no piece of its word after it is a space the text's words do not count: it joins the
    # word before it (before the first word, none).
    begins &= ~(tf.gather(tf.constant(bare), ids) & next_begins_or_ends)
    return tf.where(real, tf.cumsum(tf.cast(begins, tf.int32), axis=1) - 1, -1)


def subword_links(line: str, source_words, target_words) -> list:
    """The flat [s₀, t₀, s₁, t₁, …] subword links of one pair's Pharaoh `line` (the module docstring).

    `source_words`, `target_words`: `word_indices` of the pair's ids (numpy, -1 where no word).
    """
    source_words, target_words = np.asarray(source_words), np.asarray(target_words)
    flat = []
    for source_word, target_word in parse_links(line):
        sources, targets = np.flatnonzero(source_words == source_word), np.flatnonzero(target_words == target_word)
        if not len(sources) or not len(targets):  # the vocabulary counts other words than str.split()
            raise ValueError(
                f"link {source_word}-{target_word}: the subwords of that pair hold {source_words.max() + 1} source "
                f"and {target_words.max() + 1} target words, not as many as the text's whitespace-separated words"
            )
        grid = np.stack(np.meshgrid(sources, targets, indexing="ij"), axis=-1).reshape(-1, 2)
        flat.extend(grid.reshape(-1).tolist())
    return flat


def alignment_matrix(links, source_length, target_length, transpose: bool = False):
    """bool [target_length, source_length]: True at (t, s) for each link (s, t) of the flat `links` (int64).

    `transpose`: the pair was reversed (a `_rev` problem): its links are read target-source.
    """
    pairs = tf.reshape(tf.cast(links, tf.int32), [-1, 2])
    positions = pairs if transpose else tf.reverse(pairs, axis=[1])
    shape = tf.stack([target_length, source_length])
    counts = tf.scatter_nd(positions, tf.ones(tf.shape(positions)[:1], tf.int32), shape)
    return counts > 0


def records_have_links(files: list) -> bool:
    """Whether the records of `files` hold subword links (`--train_alignments`): the first record says for all."""
    for record in tf.data.TFRecordDataset(files[:1]).take(1).as_numpy_iterator():
        return ALIGNMENT in tf.train.Example.FromString(record).features.feature
    return False


def with_words(batch, tokenizer, word_pieces):
    """A batch of triples' ids, with each id's word (`word_indices`) and the Pharaoh lines."""
    inputs, targets = tokenizer.tokenize(batch[:, 0]), tokenizer.tokenize(batch[:, 1])
    source_words = word_indices(inputs.to_tensor(), *word_pieces)
    target_words = word_indices(targets.to_tensor(), *word_pieces)
    return inputs, targets, batch, source_words, target_words


def pair_links(triple, source_words, target_words) -> list:
    """A training pair's Pharaoh line as subword links; a link that does not fit names the pair."""
    source, target, line = (column.decode("utf-8") for column in triple)
    try:
        return subword_links(line, source_words, target_words)
    except ValueError as error:
        raise AlignmentFileError(
            f"--train_alignments: the pair {source!r} ||| {target!r}: {error}. Its links cannot be placed on its "
            f"subwords."
        ) from None


def checked_raw_files(problem, train_alignments) -> dict:
    """{"train": [file]}: `--train_alignments`, once it exists and `problem` makes text pairs; {} without it.

    The file is a raw file of the train split, so the raw-data fingerprint covers it.
    """
    if not train_alignments:
        return {}
    if not hasattr(problem, "text_pairs"):
        raise ValueError(
            f"--train_alignments: problem {problem.base_name} makes no text pairs whose words could be aligned; "
            f"give it with a translation problem (translate_files, ...)."
        )
    if not os.path.isfile(train_alignments):
        raise FileNotFoundError(f"--train_alignments={train_alignments}: no such file.")
    return {"train": [train_alignments]}
