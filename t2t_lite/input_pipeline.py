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
traced once per shape, not per batch.

Training drops examples longer than `hparams.max_length` and logs how many
(to stderr at the 1st, 10th, 100th, ... drop); dev and test keep every example,
putting those over the longest bucket into batches of one per replica (a side
longer than the last bucket is padded to its own length, the other to its bucket). Training shuffles with `seed` (same seed, same batches) and
repeats; dev and test read the files in order, once.
"""

import sys

import tensorflow as tf

SHUFFLE_BUFFER = 10000  # Examples in the training shuffle buffer (tensor2tensor's default order of magnitude).
_LOG_AT = [10 ** power for power in range(13)]  # Drop counts at which training logs the count.


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

    With max_length = 0 (no limit), the longest bucket is batch_size, as in tensor2tensor.
    """
    max_length = hparams.max_length or hparams.batch_size
    return bucket_boundaries(max_length, hparams.min_length_bucket, hparams.length_bucket_step) + [max_length]


def bucket_batch_sizes(hparams, num_replicas: int = 1) -> list:
    """Examples per batch of each bucket: batch_size tokens per replica of the padded longer side."""
    return [max(1, hparams.batch_size // length) * num_replicas for length in bucket_lengths(hparams)]


def example_length(example) -> tf.Tensor:
    """The longer side, as tensor2tensor's `example_length`."""
    return tf.maximum(tf.size(example["inputs"]), tf.size(example["targets"]))


def batched_dataset(problem, mode, data_dir, hparams, *, shuffle=None, repeat=None, seed=None, num_replicas=1):
    """`{"inputs": int32[b, s], "targets": int32[b, t]}` batches of `problem`'s `mode` examples.

    `shuffle` and `repeat` default to True for "train" and False otherwise.
    """
    training = mode == "train"
    shuffle = training if shuffle is None else shuffle
    repeat = training if repeat is None else repeat
    dataset = problem.dataset(mode, data_dir, hparams, shuffle_files=shuffle, seed=seed)
    if repeat:
        dataset = dataset.repeat()
    if training and hparams.max_length:
        dataset = drop_too_long(dataset, hparams.max_length)
    if shuffle:
        dataset = dataset.shuffle(SHUFFLE_BUFFER, seed=seed)
    dataset = bucket_by_length(dataset, bucket_lengths(hparams), bucket_batch_sizes(hparams, num_replicas),
                               num_replicas)
    return dataset.prefetch(tf.data.AUTOTUNE)


def drop_too_long(dataset: tf.data.Dataset, max_length: int) -> tf.data.Dataset:
    """Drops examples whose longer side exceeds `max_length`, counting them in the log."""

    def count(dropped, example):
        too_long = example_length(example) > max_length
        dropped += tf.cast(too_long, tf.int64)
        return dropped, (example, too_long, dropped)

    def keep(example, too_long, dropped):
        if too_long and tf.reduce_any(tf.equal(dropped, _LOG_AT)):
            tf.print("batched_dataset: dropped", dropped, "training examples longer than max_length =",
                     max_length, "so far.", output_stream=sys.stderr)
        return tf.logical_not(too_long)

    counted = dataset.scan(tf.constant(0, tf.int64), count)
    return counted.filter(keep).map(lambda example, too_long, dropped: example)


def bucket_by_length(dataset: tf.data.Dataset, lengths: list, batch_sizes: list, num_replicas: int = 1):
    """Groups examples by the bucket of their longer side and pads each side to its own bucket length.

    The key is the longer side's bucket, as in tensor2tensor, so a batch holds
    `batch_sizes[bucket]` examples (the tokens §5.1 budgets) and the number of keys stays
    small. Few keys matter: each key's last, partly filled window is flushed at the end
    of an epoch, and keying by the pair (input bucket, target bucket) instead left ~240
    such flushed batches of a handful of sentences in every Multi30k epoch (464 batches),
    each taking a full optimizer step, which stalled training (docs/results.md). Each
    side is then padded up to the smallest bucket length that holds its own longest
    example, not to the longer side's bucket, so a pair whose target is much shorter
    than its source carries little target padding, and shapes still come from a finite
    set. An example longer than the last length goes to an overflow bucket whose
    batches hold `num_replicas` examples; a side longer than the last length is padded
    to its longest, a shorter side to its bucket length as everywhere else.
    """
    window_sizes = tf.constant(batch_sizes + [num_replicas], tf.int64)
    upper_bounds = tf.constant(lengths, tf.int32)
    overflow_bucket = len(lengths)

    def key(example):
        return tf.reduce_sum(tf.cast(example_length(example) > upper_bounds, tf.int64))

    def window_size(bucket_key):
        return window_sizes[bucket_key]

    def pad_to_bucket(ids):
        """[batch, longest] -> [batch, smallest bucket length >= longest] (the overflow bucket: unchanged)."""
        longest = tf.shape(ids)[1]
        bucket = tf.reduce_sum(tf.cast(longest > upper_bounds, tf.int32))
        target = tf.where(bucket < overflow_bucket, upper_bounds[tf.minimum(bucket, overflow_bucket - 1)], longest)
        return tf.pad(ids, [[0, 0], [0, target - longest]])

    def batch(bucket_key, examples):
        batches = examples.padded_batch(window_size(bucket_key), padded_shapes={"inputs": [-1], "targets": [-1]})
        return batches.map(lambda b: {side: pad_to_bucket(ids) for side, ids in b.items()})

    return dataset.group_by_window(key, batch, window_size_func=window_size)
