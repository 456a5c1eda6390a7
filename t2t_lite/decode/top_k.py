"""Exact top-k over the beam × vocabulary candidates of a beam-search step, by chunks (§6.1).

Beam search ranks every one-token extension of every alive hypothesis at every step,

    score(hypothesis + token) = log P(token | hypothesis, X) + log P(hypothesis | X),

148,000 candidates per sentence for the paper's EN-DE vocabulary and beam 4, and keeps
the 2·beam best. A plain `tf.math.top_k` over all of them costs more on a CPU than the
rest of the search's bookkeeping together; these functions give exactly its result
(ties to the lower index, as it does) while searching only a few chunks.
"""

import numpy as np
import tensorflow as tf

# Elements per chunk in `chunked_top_k`: big enough that the per-chunk maxima are few, small
# enough that k chunks are cheap to search.
CHUNK_SIZE = 128


def chunked_top_k(scores, k, chunk_size=CHUNK_SIZE):
    """`tf.math.top_k(scores, k)` over the last axis, exactly, ties included, at a fraction of its cost.

    The k best elements always lie in the k chunks
    with the highest maxima: an element whose chunk is not among them is beaten by k chunk
    maxima. So the rows are cut into chunks, the k chunks with the best maxima chosen (one
    cheap max per chunk), and the exact top-k taken over those k·chunk_size elements only.
    Ties resolve as in `tf.math.top_k` (lower index first): chunk ties go to the lower chunk,
    and the chosen chunks are searched in index order.

    Args:
      scores: float [rows, n] with n ≥ k, no NaN.
      k: how many to return (a Python int).
    Returns (values [rows, k], indices int32 [rows, k]), best first.
    """
    n = scores.shape[-1]
    if n is None or n <= 2 * k * chunk_size:  # small rows: the plain op is as fast
        return tf.math.top_k(scores, k=k)
    num_chunks = -(-n // chunk_size)
    # Padding with -inf at the end never displaces a real element (ties go to lower indices).
    padded = tf.pad(scores, [[0, 0], [0, num_chunks * chunk_size - n]], constant_values=-np.inf)
    return _top_k_of_chunks(tf.reshape(padded, [-1, num_chunks, chunk_size]), k)


def offset_top_k(scores, offsets, k, chunk_size=CHUNK_SIZE):
    """`tf.math.top_k` of (scores + offsets[..., None]) flattened to [rows, groups·n], without that sum.

    Beam search ranks log P(token | hypothesis) + log P(hypothesis), the second term one
    number per beam (group). When a chunk size near `chunk_size` divides n, no chunk
    straddles two groups, so a chunk's best sum is its maximum plus its group's offset
    (exactly: rounding is monotonic) and only the k chosen chunks are added to; the sum over
    all candidates and the padding copy of `chunked_top_k` are never made. Otherwise the
    sum is formed and `chunked_top_k` ranks it. Same results, ties included.

    Args:
      scores: float [rows, groups, n], no NaN; offsets: float [rows, groups]; k: a Python int.
    Returns (values [rows, k], indices int32 [rows, k] into groups·n), best first.
    """
    groups, n = scores.shape[1], scores.shape[2]
    size = _dividing_chunk_size(n, chunk_size)
    if size is None or groups * n <= 2 * k * size:
        return chunked_top_k(tf.reshape(scores + offsets[:, :, None], [-1, groups * n]), k, chunk_size)
    chunks_per_group = n // size
    chunks = tf.reshape(scores, [-1, groups * chunks_per_group, size])
    return _top_k_of_chunks(chunks, k, tf.repeat(offsets, chunks_per_group, axis=1))


def _dividing_chunk_size(n, target):
    """The divisor of n in [target / 2, 2 · target] closest to target, or None."""
    divisors = [size for size in range(max(target // 2, 1), 2 * target + 1) if n is not None and n % size == 0]
    return min(divisors, key=lambda size: abs(size - target)) if divisors else None


def _top_k_of_chunks(chunks, k, chunk_offsets=None):
    """The exact top-k over [rows, num_chunks, size] chunks (plus a per-chunk offset), by chunk maxima.

    The k best elements always lie in the k chunks with the highest maxima (see
    `chunked_top_k`); indices count along the flattened chunks.
    """
    size = chunks.shape[-1]
    maxima = tf.reduce_max(chunks, axis=2)
    if chunk_offsets is not None:
        maxima += chunk_offsets
    best_chunks = tf.sort(tf.math.top_k(maxima, k=k).indices, axis=1)
    candidates = tf.gather(chunks, best_chunks, batch_dims=1)
    if chunk_offsets is not None:
        candidates += tf.gather(chunk_offsets, best_chunks, batch_dims=1)[:, :, None]
    values, positions = tf.math.top_k(tf.reshape(candidates, [-1, k * size]), k=k)
    chunk_of = tf.gather(best_chunks, positions // size, batch_dims=1)
    return values, chunk_of * size + positions % size
