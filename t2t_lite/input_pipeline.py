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
tensor2tensor, both sides of a batch are padded to the bucket's length, and each
bucket has a fixed batch size, so training batches take one of a few dozen shapes
and a compiled (XLA) training step is traced once per shape, not per batch.

Training drops examples longer than `hparams.max_length` and logs how many
(to stderr at the 1st, 10th, 100th, ... drop); dev and test keep every example,
putting those over the longest bucket into batches of one per replica padded to
their own length. Training shuffles with `seed` (same seed, same batches) and
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
    """Groups examples into buckets of `lengths` (inclusive) and pads each batch to its bucket's length.

    An example longer than the last length goes to an overflow bucket whose batches
    hold `num_replicas` examples padded to the longest of them.
    """
    pad_lengths = tf.constant(lengths + [-1], tf.int64)  # -1: pad to the longest in the batch
    window_sizes = tf.constant(batch_sizes + [num_replicas], tf.int64)
    upper_bounds = tf.constant(lengths, tf.int32)

    def bucket(example):
        return tf.reduce_sum(tf.cast(example_length(example) > upper_bounds, tf.int64))

    def batch(bucket_id, examples):
        pad_to = tf.reshape(pad_lengths[bucket_id], [1])
        return examples.padded_batch(window_sizes[bucket_id], padded_shapes={"inputs": pad_to, "targets": pad_to})

    return dataset.group_by_window(bucket, batch, window_size_func=lambda bucket_id: window_sizes[bucket_id])
