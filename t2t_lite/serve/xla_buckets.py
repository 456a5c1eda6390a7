"""Static shapes for the XLA-compiled export: length and batch buckets, chosen in the graph (§6.1 decoding).

XLA compiles a function once per input shape, and a server cannot compile one for every
sentence length and batch size it meets. So the export's XLA path pads each request to
the smallest of a few shapes ("buckets") that holds it and runs the beam search compiled
for that shape:

  * length buckets: 16, 24, 32, 48, 64, 96, ... (16·2^k and 24·2^k) below `max_input_length`,
    and, last, `max_input_length` rounded up to a multiple of 8 (at least 16): 16, 24, 32, 48, 64,
    96, 128, 192, 256 for the default 256. The step of 1.5 or 4/3 keeps the count logarithmic and
    less than a third of a bucket padding (positions past a sentence's end cost compute, never
    its result: each row stops at its own limit). Padding is not free: at transformer_base, beam 4,
    the export decodes sentences of 21 ids measurably slower in a 32-id bucket than in a 24-id
    one, which runs as fast as the XLA decoder on the unpadded ids (docs/benchmarks.md, "Side by
    side with the peers"); a doubling ladder would put them in 32. 16, the smallest bucket, is t2t-decoder's xla=true
    padding step (`encoded_inputs.XLA_LENGTH_BUCKET`).
  * batch buckets: 1, 4, 8, 16, 32, 64 (powers of two from 8, so a batch is at most
    half padding from 4 sentences on, and clients' usual 8 and 32 fit exactly; the XLA decoder
    at base spent half its time on padding rows when 32 sentences went into a 64-row bucket),
    up to the export's `max_batch_size` (64 by default; TF Serving's batching `max_batch_size`),
    which is the last bucket: 1, 4, 8, 16 for 16, 1, 4, 8, 16, 32, 64, 100 for 100. Each
    bucket costs a compilation when the server loads the export, so a server that never
    batches more than 16 sentences compiles four shapes per length, not six. A request of
    more than `max_batch_size` sentences is decoded in chunks of that size (and a last,
    smaller chunk), in the same call; nothing is refused.

The search is traced once per length bucket, with its batch dimension unknown, and XLA
compiles that one graph for each batch bucket at the bucket's first call (the export's
warm-up): the SavedModel holds one search per length bucket, not one per shape.

Padding rows and columns change no sentence's result (`beam_search.decode` gives every row
its own length limit), so a sentence translates the same in any bucket, and the same as
`t2t-decoder --decode_hparams=xla=true`, which pads to a multiple of 16 positions and to
`batch_size` rows.
"""

import tensorflow as tf

from t2t_lite.decode.encoded_inputs import XLA_LENGTH_BUCKET

DEFAULT_MAX_BATCH_SIZE = 64  # the largest batch bucket unless the export sets another
LENGTH_STEP = 8  # every length bucket is a multiple of it


def batch_buckets(max_batch_size: int) -> tuple:
    """1, 4, then 8·2^k below max_batch_size, then max_batch_size: (1, 4, 8, 16, 32, 64) for 64."""
    ladder, size = [1, 4], 8
    while size < max_batch_size:
        ladder.append(size)
        size *= 2
    return tuple(bucket for bucket in ladder if bucket < max_batch_size) + (max_batch_size,)


def length_buckets(max_input_length: int) -> tuple:
    """16, 24, 32, 48, ... below max_input_length, then max_input_length rounded up to a multiple of 8."""
    last = max(XLA_LENGTH_BUCKET, -(-max_input_length // LENGTH_STEP) * LENGTH_STEP)
    buckets, length = [], XLA_LENGTH_BUCKET
    while length < last:
        buckets.append(length)
        length = length * 3 // 2 if length & (length - 1) == 0 else length * 4 // 3  # 2^k → 1.5·2^k → 2^(k+1)
    return tuple(buckets) + (last,)


def bucket_shapes(max_input_length: int, max_batch_size: int) -> list:
    """Every (batch, length) shape the XLA export compiles, in the order `decode_in_buckets` numbers them."""
    return [(batch, length) for length in length_buckets(max_input_length) for batch in batch_buckets(max_batch_size)]


def decode_in_buckets(decode_fn, inputs, max_input_length: int, output_length: int, max_batch_size: int):
    """Runs `decode_fn` on `inputs` padded to bucket shapes; returns (ids [batch, output_length], scores [batch]).

    Args:
      decode_fn: `(ids int32 [B, L]) -> (ids [B, beam, L'], scores [B, beam])`, XLA-compiled; L is a
        length bucket, static in the trace, and B a batch bucket at run time, unknown to the trace;
        L' ≤ output_length. Called once per bucket shape when traced, with [None, L]: a tf.function
        traces it once per length bucket.
      inputs: int32 [batch, length], 0-padded, length ≤ max_input_length; batch may be 0.
      max_input_length: the longest input, EOS included (sets the length buckets).
      output_length: the width the ids of every bucket are padded to (the longest L').
      max_batch_size: the largest batch bucket (sets the batch buckets); larger inputs go in chunks of it.
    Returns the best hypothesis of each row, in the input's order.
    """
    lengths = tf.constant(length_buckets(max_input_length))
    batches = batch_buckets(max_batch_size)
    length_index = tf.reduce_sum(tf.cast(lengths < tf.shape(inputs)[1], tf.int32))

    def branch(batch, length):
        def run(chunk):
            rows = tf.shape(chunk)[0]
            padded = tf.pad(chunk, [[0, batch - rows], [0, length - tf.shape(chunk)[1]]])
            # The batch dimension stays unknown to the trace: one graph per length bucket serves every batch
            # bucket, and XLA compiles it for each bucket's shape at that shape's first call.
            ids, scores = decode_fn(tf.reshape(padded, [-1, length]))
            ids = tf.pad(ids[:, 0], [[0, 0], [0, output_length - ids.shape[-1]]])
            return ids[:rows], scores[:rows, 0]

        return run

    branches = [branch(batch, length) for batch, length in bucket_shapes(max_input_length, max_batch_size)]

    def decode_chunk(start, ids, scores):
        chunk = inputs[start : start + max_batch_size]
        batch_index = tf.reduce_sum(tf.cast(tf.constant(batches) < tf.shape(chunk)[0], tf.int32))
        chunk_ids, chunk_scores = tf.switch_case(
            length_index * len(batches) + batch_index, [lambda run=run: run(chunk) for run in branches]
        )
        return start + max_batch_size, tf.concat([ids, chunk_ids], 0), tf.concat([scores, chunk_scores], 0)

    _, ids, scores = tf.while_loop(
        lambda start, ids, scores: start < tf.shape(inputs)[0],
        decode_chunk,
        (tf.constant(0), tf.zeros([0, output_length], tf.int32), tf.zeros([0], tf.float32)),
        shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, output_length]), tf.TensorShape([None])),
    )
    return ids, scores
