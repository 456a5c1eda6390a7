"""Target prefixes: translations that must start with given subwords (interactive translation, constraints).

At each step t below a row's prefix length the search may only extend a hypothesis with the
prefix's token y_t: every other token's log-probability is set to -inf,

    log p'(y | y_<t, x) = log p(y | y_<t, x) if y = prefix_t else -inf,

so beam search, greedy decoding and sampling all emit the prefix first, scored as the model scores
it, and go on unconstrained after it. A row whose prefix is all padding is not constrained.
"""

import numpy as np
import tensorflow as tf


def force(log_probs, prefix_ids, step):
    """log_probs [batch, ..., vocab] at decoding `step`, each row cut to its prefix's token while it lasts.

    prefix_ids: int32 [batch, P], 0-padded (P may be 0).
    """
    forced = _forced_tokens(prefix_ids, step)
    forced = tf.reshape(forced, tf.concat([tf.shape(forced), tf.ones([tf.rank(log_probs) - 1], tf.int32)], 0))
    allowed = (forced < 0) | tf.equal(tf.range(tf.shape(log_probs)[-1]), forced)
    return tf.where(allowed, log_probs, -np.inf)


def _forced_tokens(prefix_ids, step):
    """int32 [batch]: the token each row must emit at `step` (its prefix's), or -1 once past its prefix."""
    lengths = tf.reduce_sum(tf.cast(prefix_ids > 0, tf.int32), axis=1)
    column = tf.minimum(step, tf.shape(prefix_ids)[1])  # the padded column past the last, for an empty prefix
    tokens = tf.gather(tf.pad(prefix_ids, [[0, 0], [0, 1]]), column, axis=1)
    return tf.where(step < lengths, tokens, -1)
