"""Batches by tokens, not sentences (§5.1).

§5.1: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000
source tokens and 25000 target tokens." As in tensor2tensor, an example's length
is its longer side, examples of similar length share a bucket, and a bucket of
length L batches `hparams.batch_size // L` examples per replica, so every batch
holds about `batch_size` tokens of the padded longer side. Larger steps
(`tokens_per_step`) are the trainer's gradient accumulation over such batches.

Bucket lengths are tensor2tensor's `_bucket_boundaries`: min_length_bucket, then
each about length_bucket_step times the previous, up to max_length. Unlike
tensor2tensor, each side of a batch is padded to a bucket length (the smallest that
holds that side's longest example), not to the longest in the batch, so training
batches take their shapes from a finite set and a compiled (XLA) training step is
traced once per shape, not per batch; under `xla_compile` training batches are padded
further, to one shape per bucket (`pad_to_bucket_shapes`).

Training drops examples longer than `hparams.max_length` and logs how many (to stderr, at
the end of the first pass over the files it reads, and again only at the end of a pass whose
count differs; one line per pipeline, so per replica); dev and test keep every
example, putting those over the longest bucket into batches of one per replica (a side
longer than the last bucket is padded to its own length, the other to its bucket).
Training shuffles with `seed` (same seed, same batches) and repeats; dev and test read
the files in order, once. The trainer's batches come from `t2t_lite.train.replica_input`: one
such pipeline per replica, each over train files of its own (`share`).
"""

import sys

import numpy as np
import tensorflow as tf

from t2t_lite.data import seeded_shuffle
from t2t_lite.data.word_alignment import ALIGNMENT

SHUFFLE_BUFFER = 10000  # Examples in the training shuffle buffer (tensor2tensor's default order of magnitude).


def bucket_boundaries(max_length: int, min_length: int = 8, length_bucket_step: float = 1.1) -> list:
    """tensor2tensor's `_bucket_boundaries`: geometric, each at least one above the previous."""
    boundaries = []
    length = min_length
    while length < max_length:
        boundaries.append(length)
        length = max(length + 1, int(length * length_bucket_step))
    return boundaries


def bucket_lengths(hparams) -> list:
    """The padded lengths of the buckets: the boundaries below max_length, then max_length itself.

    With max_length = 0, the longest bucket is batch_size, and training drops longer examples, as tensor2tensor.
    """
    max_length = hparams.max_length or hparams.batch_size
    return bucket_boundaries(max_length, hparams.min_length_bucket, hparams.length_bucket_step) + [max_length]


def bucket_batch_sizes(hparams, num_replicas: int = 1) -> list:
    """Examples per batch of each bucket: batch_size tokens per replica of the padded longer side."""
    return [max(1, hparams.batch_size // length) * num_replicas for length in bucket_lengths(hparams)]


def example_length(example) -> tf.Tensor:
    """The longer side, as tensor2tensor's `example_length`."""
    return tf.maximum(tf.size(example["inputs"]), tf.size(example["targets"]))


def batched_dataset(
    problem, mode, data_dir, hparams, *, shuffle=None, repeat=None, seed=None, num_replicas=1, share=None
):
    """`{"inputs": int32[b, s], "targets": int32[b, t]}` batches of `problem`'s `mode` examples.

    `shuffle` and `repeat` default to True for "train" and False otherwise. `share=(index,
    count)` reads only the shards index::count (`Problem.dataset`). Training with
    `hparams.guided_alignment_weight` > 0 adds "alignment": bool [b, t, s], each example's subword
    links padded with False as its sides are padded (`Problem.dataset(alignments=True)`).
    """
    training = mode == "train"
    shuffle = training if shuffle is None else shuffle
    repeat = training if repeat is None else repeat
    aligned = training and hparams.guided_alignment_weight > 0  # t2t_lite/train/guided_alignment.py reads them
    links = {"alignments": True} if aligned else {}
    dataset = problem.dataset(mode, data_dir, hparams, shuffle_files=shuffle, seed=seed, share=share, **links)
    if training:  # max_length 0 means batch_size, as tensor2tensor: no batch exceeds its token budget
        files = "the data" if share is None or share[1] == 1 else f"train files {share[0]}::{share[1]}"
        dataset = drop_too_long(dataset, hparams.max_length or hparams.batch_size, files)
    if repeat:  # after the drop, so each pass counts its own
        dataset = dataset.repeat()
    if shuffle:
        dataset = seeded_shuffle.shuffle(dataset, SHUFFLE_BUFFER, seed)
    lengths, batch_sizes = bucket_lengths(hparams), bucket_batch_sizes(hparams, num_replicas)
    dataset = bucket_by_length(dataset, lengths, batch_sizes, num_replicas)
    if training and hparams.xla_compile:
        dataset = pad_to_bucket_shapes(dataset, lengths, batch_sizes)
    return dataset.prefetch(tf.data.AUTOTUNE)


def pad_to_bucket_shapes(dataset: tf.data.Dataset, lengths: list, batch_sizes: list) -> tf.data.Dataset:
    """Every batch of bucket b as [batch_sizes[b], lengths[b]] on both sides: one shape per bucket, for XLA.

    XLA compiles the training step once per shape it meets. Padded side by side, Multi30k's
    251 training batches of an epoch come in 144 shapes (seconds of compiling each on a
    small CPU: more time than XLA saves in the first epoch), and the partial batch that ends an
    epoch in a bucket has a new number of rows each epoch. So under `xla_compile` both
    sides are padded to the bucket of the longer one and the rows to the bucket's batch
    size: at most one shape per bucket, compiled once for the whole run. The added
    positions are padding (id 0): the loss and the token counts skip them, and attention
    masks them as keys, so the step's loss and update are the unpadded batch's.
    """
    upper_bounds = tf.constant(lengths, tf.int32)
    rows_of_bucket = tf.constant(batch_sizes, tf.int32)

    def pad(batch):
        longer = tf.maximum(tf.shape(batch["inputs"])[1], tf.shape(batch["targets"])[1])
        bucket = tf.minimum(_bucket_of(longer, upper_bounds), len(lengths) - 1)  # training has no overflow
        length, rows = upper_bounds[bucket], rows_of_bucket[bucket]
        padded = {
            side: tf.pad(ids, [[0, rows - tf.shape(ids)[0]], [0, length - tf.shape(ids)[1]]])
            for side, ids in _sides(batch)
        }
        return _with_alignment(padded, batch)

    return dataset.map(pad, num_parallel_calls=tf.data.AUTOTUNE)


def drop_too_long(dataset: tf.data.Dataset, max_length: int, files: str = "the data") -> tf.data.Dataset:
    """Drops examples whose longer side exceeds `max_length`; logs their count at the end of a pass, when it is new.

    `files` names what the dataset reads in that line ("train files 1::4": one replica's).
    An end marker (an empty example flagged True) follows the examples, so the count of the
    whole pass is known there; scan's state restarts with each pass of a repeated dataset.
    The trainer reads the same files epoch after epoch, so every pass drops the same examples:
    the line is said after the first pass and again only if a later pass's count differs.
    """
    empty = tf.nest.map_structure(lambda spec: tf.zeros([0] * spec.shape.rank, spec.dtype), dataset.element_spec)
    flagged = dataset.map(lambda example: (example, False)).concatenate(tf.data.Dataset.from_tensors((empty, True)))
    say_if_new = _drop_line(max_length, files)

    def count(totals, element):
        example, end = element
        too_long = tf.logical_and(tf.logical_not(end), example_length(example) > max_length)
        totals += tf.stack([tf.cast(too_long, tf.int64), tf.cast(tf.logical_not(end), tf.int64)])
        return totals, (example, too_long, end, totals)

    def keep(example, too_long, end, totals):
        # tf.cond, not a Python `if`: the pipeline's builders skip AutoGraph (seconds of CPU at every start).
        said = tf.cond(
            tf.logical_and(end, totals[0] > 0),
            lambda: tf.numpy_function(say_if_new, [totals], tf.bool, stateful=True),
            lambda: tf.constant(False),
        )
        with tf.control_dependencies([said]):
            return tf.logical_not(tf.logical_or(too_long, end))

    counted = flagged.scan(tf.zeros([2], tf.int64), count)
    return counted.filter(keep).map(lambda example, too_long, end, totals: example)


def _drop_line(max_length: int, files: str):
    """A function of a pass's [dropped, read] counts that prints the drop line unless those counts were the last said.

    Python, not tf.print: what was said last must outlive the pass, and each pass of the
    trainer's epochs is a new dataset whose graph state starts afresh; this function is
    made once per pipeline and lives as long as it.
    """
    last_said = None

    def say_if_new(totals):
        nonlocal last_said
        counts = tuple(int(total) for total in totals)
        if counts == last_said:
            return np.bool_(False)
        last_said = counts
        print(
            f"batched_dataset: dropped {counts[0]} of {counts[1]} training examples longer than max_length = "
            f"{max_length} in this pass over {files}.",
            file=sys.stderr,
            flush=True,
        )
        return np.bool_(True)

    return say_if_new


def _sides(batch):
    """(name, ids) of the inputs and targets of an example or batch, without its alignment."""
    return ((side, batch[side]) for side in ("inputs", "targets"))


def _with_alignment(padded: dict, original: dict) -> dict:
    """`padded` sides, with `original`'s alignment [rows, t, s] (if any) padded with False to their shapes.

    The links stay where they were: padding adds rows, target positions and source positions after them.
    """
    if ALIGNMENT not in original:
        return padded
    alignment = original[ALIGNMENT]
    before, after = tf.shape(alignment), tf.shape(padded["targets"])
    padding = [[0, after[0] - before[0]], [0, after[1] - before[1]], [0, tf.shape(padded["inputs"])[1] - before[2]]]
    return {**padded, ALIGNMENT: tf.pad(alignment, padding)}


def _strip_example(row: dict) -> dict:
    """A row's sides without trailing padding (`_strip_padding`), its alignment cut to them."""
    stripped = {side: _strip_padding(ids) for side, ids in _sides(row)}
    if ALIGNMENT in row:
        stripped[ALIGNMENT] = row[ALIGNMENT][: tf.size(stripped["targets"]), : tf.size(stripped["inputs"])]
    return stripped


def _bucket_of(length, upper_bounds):
    """Index of the first bucket whose upper bound holds `length` (len(upper_bounds): none does)."""
    return tf.reduce_sum(tf.cast(length > upper_bounds, tf.int32))


def _strip_padding(ids):
    """ids up to their last non-zero id: trailing padding only, whatever ids sit in between."""
    positions = tf.range(1, tf.size(ids) + 1, dtype=tf.int32)
    return ids[: tf.reduce_max(tf.where(tf.not_equal(ids, 0), positions, 0))]


def bucket_by_length(dataset: tf.data.Dataset, lengths: list, batch_sizes: list, num_replicas: int = 1):
    """Batches of `batch_sizes[b]` examples whose longer side falls in bucket b, each side padded to a bucket length.

    First, examples are grouped by the pair (bucket of the inputs, bucket of the targets)
    and each side is padded to its own bucket's length, so a pair whose target is much
    shorter than its source carries little target padding. A batch still holds the tokens
    §5.1 budgets (`batch_sizes` of the longer side's bucket), and shapes come from a finite set.

    Pair keys are many, and at the end of the data (one epoch: the trainer reads epoch by
    epoch) each key's partly filled window would come out as a small batch taking a whole
    optimizer step; on Multi30k that was about half of all batches, and training stalled
    (docs/results.md). So the examples of those leftover windows are grouped a second
    time by their longer side's bucket alone (tensor2tensor's key): full batches again,
    with at most one partial batch per bucket at the very end. Their sides are padded to
    the smallest bucket length holding that side's longest example.

    An example longer than the last length goes to an overflow bucket whose batches hold
    `num_replicas` examples; a side longer than the last length is padded to its longest.
    """
    window_sizes = tf.constant(batch_sizes + [num_replicas], tf.int64)
    upper_bounds = tf.constant(lengths, tf.int32)
    num_buckets = len(lengths) + 1  # the last one is the overflow bucket

    def side_bucket(length):
        return tf.cast(_bucket_of(length, upper_bounds), tf.int64)

    def pad_to_bucket(ids):
        """[batch, longest] -> [batch, smallest bucket length >= longest] (overflow: unchanged)."""
        longest = tf.shape(ids)[1]
        bucket = side_bucket(longest)
        target = tf.where(
            bucket < num_buckets - 1, tf.gather(upper_bounds, tf.minimum(bucket, num_buckets - 2)), longest
        )
        return tf.pad(ids, [[0, 0], [0, target - longest]])

    def batch_rows(rows, size):
        """Rows (0-padded or not) -> batches of `size`, each side padded to its bucket length."""
        real = rows.map(_strip_example, num_parallel_calls=tf.data.AUTOTUNE)
        shapes = {"inputs": [-1], "targets": [-1], **({ALIGNMENT: [-1, -1]} if ALIGNMENT in real.element_spec else {})}
        batches = real.padded_batch(size, padded_shapes=shapes)
        return batches.map(
            lambda batch: _with_alignment({side: pad_to_bucket(ids) for side, ids in _sides(batch)}, batch),
            num_parallel_calls=tf.data.AUTOTUNE,
        )

    # Stage 1: windows keyed by the pair of buckets; a flag says whether the window filled.
    def pair_key(example):
        return side_bucket(tf.size(example["inputs"])) * num_buckets + side_bucket(tf.size(example["targets"]))

    def pair_window(key):
        return window_sizes[tf.maximum(key // num_buckets, key % num_buckets)]

    def pair_batches(key, examples):
        size = pair_window(key)
        return batch_rows(examples, size).map(lambda batch: (batch, tf.shape(batch["inputs"], tf.int64)[0] == size))

    stage_1 = dataset.group_by_window(pair_key, pair_batches, window_size_func=pair_window)
    # A leftover (partly filled) window becomes rows of one, to be regrouped.
    stage_1 = stage_1.flat_map(
        lambda batch, full: (
            tf.data.Dataset.from_tensor_slices(batch)
            .batch(tf.where(full, tf.shape(batch["inputs"], tf.int64)[0], 1))
            .map(lambda rows: (rows, full))
        )
    )

    # Stage 2: a full batch passes through alone (key -size); leftover rows group by their longer side's bucket.
    def stage_2_key(batch, full):
        longer = side_bucket(tf.maximum(tf.shape(batch["inputs"])[1], tf.shape(batch["targets"])[1]))
        return tf.where(full, -tf.shape(batch["inputs"], tf.int64)[0], longer)

    def stage_2_window(key):
        return tf.where(key < 0, tf.constant(1, tf.int64), window_sizes[tf.maximum(key, 0)])

    def stage_2_batches(key, elements):
        rows = elements.map(lambda batch, full: batch).unbatch()
        return batch_rows(rows, tf.where(key < 0, -key, window_sizes[tf.maximum(key, 0)]))

    return stage_1.group_by_window(stage_2_key, stage_2_batches, window_size_func=stage_2_window)
