"""Length and batch buckets of the XLA export: which shapes exist, and that padding to them, splitting
large batches and unpadding give every row exactly what it gets alone, in the input's order."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_lite.serve import xla_buckets


def test_length_buckets_step_by_1_5_and_4_3_from_16_and_end_at_max_input_length_rounded_up_to_8():
    assert xla_buckets.length_buckets(256) == (16, 24, 32, 48, 64, 96, 128, 192, 256)
    assert xla_buckets.length_buckets(100) == (16, 24, 32, 48, 64, 96, 104)
    assert xla_buckets.length_buckets(21) == (16, 24)  # the peers' 20 ids + EOS: 3 padding positions, not 11
    assert xla_buckets.length_buckets(10) == (16,)
    assert xla_buckets.length_buckets(16) == (16,)
    assert xla_buckets.length_buckets(17) == (16, 24)
    for max_input_length in range(1, 600):
        buckets = xla_buckets.length_buckets(max_input_length)
        assert buckets[-1] >= max_input_length and all(length % 8 == 0 for length in buckets)
        assert list(buckets) == sorted(set(buckets)) and buckets[0] == 16
        # Less than a third of a bucket is padding for the inputs it is chosen for (one past the bucket below).
        assert all(3 * (later - earlier - 1) < later for earlier, later in zip(buckets, buckets[1:]))
    assert len(xla_buckets.bucket_shapes(256, 64)) == 9 * 6


def test_batch_buckets_double_from_8_and_end_at_max_batch_size():
    assert xla_buckets.batch_buckets(64) == (1, 4, 8, 16, 32, 64)  # the default
    assert xla_buckets.batch_buckets(16) == (1, 4, 8, 16)
    assert xla_buckets.batch_buckets(100) == (1, 4, 8, 16, 32, 64, 100)
    assert xla_buckets.batch_buckets(6) == (1, 4, 6)
    assert xla_buckets.batch_buckets(4) == (1, 4)
    assert xla_buckets.batch_buckets(1) == (1,)
    for max_batch_size in range(1, 300):
        buckets = xla_buckets.batch_buckets(max_batch_size)
        assert list(buckets) == sorted(set(buckets)) and buckets[0] == 1 and buckets[-1] == max_batch_size
        # From 4 sentences on, at most half of a bucket is padding for the batches it is chosen for.
        assert all(later <= 2 * earlier for earlier, later in zip(buckets[1:], buckets[2:]))


class CallLog:
    """The shapes a traced function is called with, written by its graph into variables as it runs."""

    def __init__(self, capacity=8):
        self.shapes = tf.Variable(tf.zeros([capacity, 2], tf.int32))
        self.count = tf.Variable(0)

    def record(self, batch):
        self.shapes.scatter_nd_update([[self.count]], [tf.shape(batch)])
        self.count.assign_add(1)

    def calls(self):
        return [tuple(shape) for shape in self.shapes.numpy()[: int(self.count.numpy())].tolist()]

    def clear(self):
        self.count.assign(0)


def row_function(traced_shapes, call_log):
    """A stand-in for the compiled search that records the input shapes it is traced with and called with; each
    row's result depends on that row alone (ids: the row doubled, beam 2; score: the row's sum), as the beam
    search's does."""

    def decode_fn(batch):
        traced_shapes.add(tuple(batch.shape))
        call_log.record(batch)
        sums = tf.cast(tf.reduce_sum(batch, 1), tf.float32)
        return tf.stack([batch * 2, batch * 3], axis=1), tf.stack([sums, -sums], axis=1)

    return decode_fn


def bucket_calls(rows, length, max_input_length, max_batch_size):
    """The shapes the search must be called with: chunks of at most max_batch_size rows, each in the smallest
    batch bucket that holds it, all in the smallest length bucket that holds `length`."""
    bucket_length = min(bucket for bucket in xla_buckets.length_buckets(max_input_length) if bucket >= length)
    batch_buckets = [size for size in (1, 4, 8, 16, 32, 64) if size < max_batch_size] + [max_batch_size]
    chunks = [min(max_batch_size, rows - start) for start in range(0, rows, max_batch_size)]
    return [(min(size for size in batch_buckets if size >= chunk), bucket_length) for chunk in chunks]


MAX_INPUT_LENGTH, OUTPUT_LENGTH = 40, 48


@pytest.fixture(scope="module", params=[64, 6], ids=["max_batch_size=64", "max_batch_size=6"])
def bucketed(request):
    """(decode_in_buckets around the stand-in, traced once for inputs of any shape as the export's signatures
    are; the shapes the stand-in was traced with; its CallLog; max_batch_size)."""
    traced_shapes, call_log, max_batch_size = set(), CallLog(capacity=32), request.param
    decode = tf.function(
        lambda batch: xla_buckets.decode_in_buckets(
            row_function(traced_shapes, call_log), batch, MAX_INPUT_LENGTH, OUTPUT_LENGTH, max_batch_size
        ),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    decode.get_concrete_function()
    return decode, traced_shapes, call_log, max_batch_size


@pytest.mark.parametrize("rows,length", [(0, 0), (0, 7), (1, 3), (3, 16), (5, 17), (64, 30), (65, 2), (150, 40)])
def test_padding_chunking_and_unpadding_keep_each_row_its_own_result(bucketed, rows, length):
    decode, traced_shapes, call_log, max_batch_size = bucketed
    call_log.clear()
    inputs = np.random.default_rng(rows).integers(1, 9, size=(rows, length)).astype(np.int32)
    ids, scores = decode(tf.constant(inputs, shape=(rows, length)))
    expected = np.zeros((rows, OUTPUT_LENGTH), np.int32)
    expected[:, :length] = inputs * 2
    np.testing.assert_array_equal(ids.numpy(), expected)
    np.testing.assert_array_equal(scores.numpy(), inputs.sum(axis=1))
    # The search is traced with each length bucket and its batch left unknown (so one trace per length serves
    # every batch bucket); each chunk reaches it padded to its bucket's shape, and no other shape does.
    assert traced_shapes == {(None, length) for length in xla_buckets.length_buckets(MAX_INPUT_LENGTH)}
    assert call_log.calls() == bucket_calls(rows, length, MAX_INPUT_LENGTH, max_batch_size)
    assert set(call_log.calls()) <= set(xla_buckets.bucket_shapes(MAX_INPUT_LENGTH, max_batch_size))
