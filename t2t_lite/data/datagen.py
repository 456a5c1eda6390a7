"""t2t-datagen's work: raw pairs -> subword ids -> sharded, shuffled TFRecord files.

The on-disk format is tensor2tensor's, so its tools and habits carry over:
`<data_dir>/<problem>-<split>-00000-of-000NN` hold `tf.train.Example`s with int64
list features `inputs` and `targets`, each ending in EOS (id 1), and the shared
vocabulary (§5.1) sits beside them as `<data_dir>/vocab.<problem>.model`. With
`train_alignments` the training records also hold `alignment`, their subword links
(`t2t_lite.data.word_alignment`).
A split whose files exist is reused; each split is written to `.incomplete` files
first and renamed at the end, so an interrupted run leaves nothing that a second run
would mistake for finished data. A write that fails (a full disk) or is interrupted
removes the split's files; those a kill -9 left are removed, with a line, when the
split is written again.

Reuse is safe only while the raw files are those the data was made from: a record of
them (`raw_fingerprint.<problem>.json`, see `t2t_lite.data.raw_fingerprint`) sits beside the
shards, and a rerun whose raw files changed stops and names them; `overwrite=True`
(t2t-datagen --overwrite) regenerates the vocabulary and every split from them.

The number of shards grows with the corpus (one per `PAIRS_PER_SHARD` pairs, at least
the problem's `num_shards`), so a WMT-size training set gives hundreds of files, enough
to give each of many workers files of its own, and the shuffle holds one shard in
memory, whatever the corpus size.

    report = datagen.generate(registry.problem("translate_ende"), data_dir, tmp_dir)
"""

import collections
import dataclasses
import math
import operator
import os
import random
import re
import time

import tensorflow as tf

from t2t_lite.data import raw_fingerprint, word_alignment
from t2t_lite.data.vocabulary import EOS_ID, normalize_text

SPLITS = ("train", "dev", "test")
# Why a pair is not written; the report counts each.
DROP_EMPTY = "empty side"
DROP_TOO_LONG = "too long"
DROP_IDENTICAL = "identical source and target"
_ENCODE_BATCH = 512  # sentences tokenized per call of the in-graph tokenizer
_PROGRESS_EVERY = 1000
_READ_BATCH = 4096  # records per read when shuffling into shards
_SHUFFLE_SEED = 1234  # fixed, so two runs on the same raw data write the same files
# About tensor2tensor's shard size (WMT EN-DE: 4.5 M pairs in 100 shards): WMT14 EN-FR's
# 36 M pairs make 720 files, enough to give hundreds of workers files of their own, and
# one shard (what the shuffle holds in memory) stays near 10 MB (9 MB measured at 2 M pairs).
PAIRS_PER_SHARD = 50_000


class EmptySplitError(ValueError):
    """Every pair of a split was dropped: writing empty shards would look complete and be reused."""


@dataclasses.dataclass
class DatagenReport:
    """What one run of `generate` did, per split."""

    problem: str
    written: dict = dataclasses.field(default_factory=dict)
    dropped: dict = dataclasses.field(default_factory=dict)  # split -> Counter of reasons
    reused: list = dataclasses.field(default_factory=list)
    missing: list = dataclasses.field(default_factory=list)
    bpe_dropout: dict = dataclasses.field(default_factory=dict)  # split -> (p, copies) when written so
    aligned: list = dataclasses.field(default_factory=list)  # splits written with word links (--train_alignments)

    def summary(self) -> str:
        lines = []
        for split in SPLITS:
            if split in self.reused:
                lines.append(f"{self.problem} {split}: files exist, reused.")
            elif split in self.missing:
                lines.append(f"{self.problem} {split}: no raw data for this split, nothing written.")
            elif split in self.written:
                dropped = self.dropped.get(split, collections.Counter())
                reasons = format_drops(dropped)
                sampled = ""
                if split in self.bpe_dropout:
                    dropout, copies = self.bpe_dropout[split]
                    sampled = f" ({copies} BPE-dropout segmentations of each, p={dropout})"
                if split in self.aligned:
                    sampled += " with their subword links (--train_alignments)"
                lines.append(
                    f"{self.problem} {split}: wrote {self.written[split]} pairs{sampled}; "
                    f"dropped {sum(dropped.values())}" + (f" ({reasons})." if reasons else ".")
                )
        return "\n".join(lines)


def format_drops(dropped) -> str:
    """ "3 empty side, 1 too long": a split's drop counts by reason."""
    return ", ".join(f"{count} {reason}" for reason, count in sorted(dropped.items()))


def generate(
    problem, data_dir: str, tmp_dir: str, *, overwrite: bool = False, vocab_from: str = None, train_alignments=None
) -> DatagenReport:
    """Runs `problem.generate_data` and prints what was written and dropped.

    Stops with `raw_fingerprint.RawDataChangedError` when raw files changed since the
    data in `data_dir` was written from them; `overwrite` then removes that data (the
    vocabulary too) and writes it afresh. `vocab_from` (a vocabulary file) is used instead
    of training one (`TextProblem.adopt_vocabulary`). `train_alignments` (a file of Pharaoh
    word links, one line per training pair) stores each training pair's links in its record
    (`t2t_lite.data.word_alignment`); the file counts as a raw file of the train split.
    """
    if vocab_from and not hasattr(problem, "adopt_vocabulary"):
        raise ValueError(f"--vocab_from: problem {problem.base_name} has no vocabulary file to take.")
    extra_files = word_alignment.checked_raw_files(problem, train_alignments)
    os.makedirs(data_dir, exist_ok=True)
    os.makedirs(tmp_dir, exist_ok=True)
    record = raw_fingerprint.record_path(data_dir, problem.base_name)
    if overwrite:
        remove_generated(problem, data_dir)
    else:
        raw_fingerprint.check_unchanged(record, problem, data_dir, tmp_dir, extra_files)
    if vocab_from:
        problem.adopt_vocabulary(data_dir, vocab_from)
    # Taken before reading, so a raw file edited while datagen runs is found by the next run.
    unwritten = [split for split in SPLITS if not complete_shards(data_dir, problem.base_name, split)]
    before = {split: raw_fingerprint.split_fingerprint(problem, tmp_dir, split, extra_files) for split in unwritten}
    aligned = {"train_alignments": train_alignments} if train_alignments else {}
    report = problem.generate_data(data_dir, tmp_dir, **aligned)
    raw_fingerprint.update(
        record, problem, tmp_dir, before, written=list(report.written), reused=report.reused, extra_files=extra_files
    )
    print(report.summary())
    identity = raw_fingerprint.digest(record)
    if identity:
        print(f"{problem.base_name}: raw data digest {identity[0]} ({identity[1]:,} files); equal digests, equal data.")
    return report


def remove_generated(problem, data_dir: str) -> None:
    """Deletes what datagen wrote for `problem` in `data_dir` (shards, vocabulary, raw-file record), saying so."""
    removed = generated_paths(problem, data_dir)
    for name in removed:
        os.remove(name)
    if removed:
        print(f"--overwrite: removed {len(removed)} file(s) of {problem.base_name} in {data_dir}.")


# -- File names ---------------------------------------------------------------------


def generated_paths(problem, data_dir: str) -> list:
    """The files datagen wrote for `problem` in `data_dir` that exist: shards, vocabulary, records."""
    names = [name for split in SPLITS for name in tf.io.gfile.glob(filepattern(data_dir, problem.base_name, split))]
    names += problem.generated_files(data_dir)
    names.append(raw_fingerprint.record_path(data_dir, problem.base_name))
    return [name for name in names if os.path.exists(name)]


def shard_filenames(data_dir: str, base_name: str, split: str, num_shards: int) -> list:
    return [
        os.path.join(data_dir, f"{base_name}-{split}-{index:05d}-of-{num_shards:05d}") for index in range(num_shards)
    ]


def filepattern(data_dir: str, base_name: str, split: str) -> str:
    return os.path.join(data_dir, f"{base_name}-{split}-*-of-*")


def complete_shards(data_dir: str, base_name: str, split: str) -> list:
    """The split's files when all NN of `-of-000NN` are there, else []."""
    shard = re.compile(re.escape(f"{base_name}-{split}-") + r"\d{5}-of-(\d{5})$")
    files = sorted(name for name in tf.io.gfile.glob(filepattern(data_dir, base_name, split)) if shard.search(name))
    if files and len(files) == int(shard.search(files[0]).group(1)):
        return files
    return []


# -- Damaged shards -----------------------------------------------------------------


class DamagedShardError(ValueError):
    """A shard that cannot be read to its end (cut short, overwritten); the message names it and what to do."""


def check_shards(files: list) -> None:
    """Reads every record of `files`, checksums included; stops at the first damaged file with DamagedShardError.

    It reads every byte, so it is done before a split other than train is read in full, and for the
    training shards (a WMT-size corpus) only once a read failed: TensorFlow's error names no file.
    """
    try:  # all at once first: a dataset per file costs tens of milliseconds more each
        _count_records(tf.data.TFRecordDataset(files))
        return
    except tf.errors.DataLossError:
        pass
    for path in files:
        try:
            _count_records(tf.data.TFRecordDataset(path))
        except tf.errors.DataLossError as error:
            readable = _count_records(tf.data.TFRecordDataset(path).ignore_errors())
            raise DamagedShardError(
                f"{path}: record {readable + 1:,} is damaged ({_read_error(error)}): the file was cut short or "
                f"overwritten. Remove it and rerun t2t-datagen with the same --problem, --data_dir and --tmp_dir: it "
                f"writes that split again from the raw data."
            ) from None


def _count_records(records: tf.data.Dataset) -> int:
    # In batches: a reduce function called once per record is many times slower than the reading.
    batches = records.batch(_READ_BATCH)
    return int(batches.reduce(tf.constant(0, tf.int64), lambda count, batch: count + tf.size(batch, tf.int64)))


def _read_error(error: tf.errors.OpError) -> str:
    """TensorFlow's reason, e.g. "truncated record at 310061", without the name of the op that failed."""
    found = re.search(r"(truncated|corrupted) record at \d+", error.message)
    return found.group(0) if found else re.sub(r"\{\{[^}]*\}\}\s*", "", error.message).splitlines()[0]


# -- From text pairs to id pairs ----------------------------------------------------


def clean_pairs(pairs, drops: collections.Counter, drop_reason):
    """Normalized (source, target) pairs; a pair for which `drop_reason` names a reason is counted in `drops`.

    The first step of every text problem's pairs on their way to the shards, so the count of
    pairs read is shown here (`with_progress`).
    """
    for source, target, *links in with_progress(pairs):  # links: a training pair's alignment line, if given
        source, target = normalize_text(source), normalize_text(target)
        reason = drop_reason(source, target)
        if reason:
            drops[reason] += 1
        else:
            yield (source, target, *links)


def encode_pairs(pairs, tokenizer, drops: collections.Counter, *, max_length: int = 0, word_pieces=None):
    """(inputs, targets) id lists ending in EOS, tokenized in the tf.data graph.

    Pairs with a side longer than `max_length` ids (EOS included; 0 = no limit)
    are counted in `drops` as too long. With `word_pieces` (the vocabulary's), `pairs` are
    (source, target, Pharaoh line) triples and (inputs, targets, subword links) come out
    (`t2t_lite.data.word_alignment`).
    """
    columns = 3 if word_pieces else 2
    text = tf.data.Dataset.from_generator(lambda: pairs, output_signature=tf.TensorSpec([columns], tf.string)).batch(
        _ENCODE_BATCH
    )
    if word_pieces:
        ids = text.map(lambda batch: word_alignment.with_words(batch, tokenizer, word_pieces))
    else:
        ids = text.map(lambda batch: (tokenizer.tokenize(batch[:, 0]), tokenizer.tokenize(batch[:, 1])))
    for inputs_batch, targets_batch, *aligned in ids.as_numpy_iterator():
        for index, (inputs, targets) in enumerate(zip(inputs_batch, targets_batch)):
            inputs, targets = inputs.tolist() + [EOS_ID], targets.tolist() + [EOS_ID]
            if max_length and max(len(inputs), len(targets)) > max_length:
                drops[DROP_TOO_LONG] += 1
            elif aligned:
                yield inputs, targets, word_alignment.pair_links(*(column[index] for column in aligned))
            else:
                yield inputs, targets


# -- Writing ------------------------------------------------------------------------


def example_proto(inputs, targets, alignment=None) -> bytes:
    """tensor2tensor's record: a tf.train.Example with int64 lists `inputs` and `targets`.

    `alignment`, when given: the pair's flat subword links [s₀, t₀, …] (`t2t_lite.data.word_alignment`),
    written as the int64 list `alignment`, present (perhaps empty) in every record of an aligned split.
    """
    feature = {
        "inputs": tf.train.Feature(int64_list=tf.train.Int64List(value=inputs)),
        "targets": tf.train.Feature(int64_list=tf.train.Int64List(value=targets)),
    }
    if alignment is not None:
        feature[word_alignment.ALIGNMENT] = tf.train.Feature(int64_list=tf.train.Int64List(value=alignment))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def num_shards_for(count: int, minimum: int) -> int:
    """Shards for `count` pairs: one per PAIRS_PER_SHARD, and at least `minimum`."""
    return max(minimum, math.ceil(count / PAIRS_PER_SHARD))


def write_shuffled_shards(
    examples, data_dir: str, base_name: str, split: str, min_shards: int, description: str
) -> int:
    """Writes (inputs, targets) pairs to the split's shards, shuffled; returns how many.

    Memory holds one shard, never the corpus: the examples stream to one unshuffled
    file while they are counted; the count fixes the number of shards (`num_shards_for`);
    then, as in tensor2tensor, each record goes to a random shard and each shard is
    shuffled in memory.
    """
    _remove_incomplete(data_dir, base_name, split, "Removed {}: left unfinished by an interrupted t2t-datagen.")
    try:
        return _write_shuffled_shards(examples, data_dir, base_name, split, min_shards, description)
    except BaseException:  # a full disk, Ctrl-C: none of the split's partial files stays
        _remove_incomplete(data_dir, base_name, split)
        raise


def _remove_incomplete(data_dir: str, base_name: str, split: str, say: str = "") -> None:
    """Removes the split's `.incomplete*` files (a write in progress), saying `say` with their names if given."""
    partial = sorted(tf.io.gfile.glob(os.path.join(data_dir, f"{base_name}-{split}*.incomplete*")))
    for path in partial:
        tf.io.gfile.remove(path)
    if partial and say:
        print(say.format(", ".join(partial)))


def _write_shuffled_shards(examples, data_dir, base_name, split, min_shards, description) -> int:
    unshuffled = os.path.join(data_dir, f"{base_name}-{split}.incomplete-unshuffled")
    count = _write_counting(examples, unshuffled, description)
    if count == 0:
        os.remove(unshuffled)
        raise EmptySplitError(f"{description}: no pair left to write; nothing written.")
    filenames = shard_filenames(data_dir, base_name, split, num_shards_for(count, min_shards))
    rng = random.Random(_SHUFFLE_SEED)
    partial_names = [name + ".incomplete" for name in filenames]
    writers = [tf.io.TFRecordWriter(name) for name in partial_names]
    try:
        for record in _records(unshuffled):
            writers[rng.randrange(len(writers))].write(record)
    finally:
        for writer in writers:
            writer.close()
    os.remove(unshuffled)
    try:
        for partial, final in zip(partial_names, filenames):
            records = list(_records(partial))
            rng.shuffle(records)
            with tf.io.TFRecordWriter(final + ".incomplete-shuffled") as writer:
                for record in records:
                    writer.write(record)
            os.replace(final + ".incomplete-shuffled", final)
            os.remove(partial)
    except BaseException:  # the shards already in place are of a split that is not: they go too
        for final in filenames:
            if os.path.exists(final):
                os.remove(final)
        raise
    return count


def _records(path: str):
    """The serialized records of a TFRecord file, read in batches (one eager call per record is slow)."""
    for batch in tf.data.TFRecordDataset(path).batch(_READ_BATCH).as_numpy_iterator():
        yield from batch


def _write_counting(examples, path: str, description: str) -> int:
    """Streams (inputs, targets[, alignment]) examples to one TFRecord file; returns how many.

    The progress below the title is the reader's (`with_progress`): how many pairs there are
    is known, if at all, before they are cleaned and encoded, not here.
    """
    print(f"Writing {description}:", flush=True)
    count = 0
    with tf.io.TFRecordWriter(path) as writer:
        for example in examples:  # (inputs, targets) or (inputs, targets, alignment)
            writer.write(example_proto(*example))
            count += 1
    return count


# -- Progress -----------------------------------------------------------------------


def with_progress(pairs, done: str = "pairs read"):
    """`pairs`, passed through, counted on one line of stdout that is rewritten every thousand pairs.

    "12000/40764 pairs read" when their number is known up front (a list; anything with a
    length or length hint, as a tfds split), else "12000 pairs read"; at the end the time taken
    is added and the line ends. The line is rewritten with a carriage return even when stdout is
    a pipe, as a terminal behind `tee` shows it in place (quickstart.sh).
    """
    total = operator.length_hint(pairs, 0) or None
    started = time.monotonic()
    count = 0
    for pair in pairs:
        yield pair
        count += 1
        if count % _PROGRESS_EVERY == 0:
            print(f"\r  {_progress_count(count, total)} {done}", end="", flush=True)
    print(f"\r  {_progress_count(count, total)} {done} in {time.monotonic() - started:.1f} s", flush=True)


def _progress_count(count: int, total) -> str:
    return f"{count}/{total}" if total else str(count)
