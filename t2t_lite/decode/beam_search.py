"""Beam search with a length penalty, and greedy decoding (Vaswani et al. 2017, §6.1).

The paper decodes "with a beam size of 4 and length penalty α = 0.6", the penalty of
Wu et al. 2016 (GNMT, eq. 14): a hypothesis Y is scored

    score(Y) = log P(Y | X) / lp(Y),    lp(Y) = ((5 + |Y|) / 6) ** α

where |Y| counts the tokens emitted, EOS included. `beam_search` is tensor2tensor's
algorithm: `beam_size` alive hypotheses and up to `beam_size` finished ones kept
apart; each step extends the alive ones, takes the 2·beam best candidates (so that
`beam_size` of them are still alive after the EOS ones leave), moves candidates that
are complete to the finished set, and stops at the length limit or once no alive
hypothesis can still beat the best finished one.

Two deliberate differences from tensor2tensor, both so that the result is the best
*complete* hypothesis as an exhaustive search would define it:
  * A hypothesis that reaches its row's length limit is complete, like one that ends
    in EOS, and competes with the finished ones under the same penalty (tensor2tensor
    returns the alive beams, unnormalised, only when no hypothesis ever ended in EOS).
  * `decode_length` may be a vector: each row stops at its own limit, so a sentence
    decodes the same alone or in a batch with longer ones.
Empty slots (a row with fewer than `beam_size` distinct hypotheses) score -inf.

`greedy_search` is the beam-1 decoder (tensor2tensor also switches to an argmax loop
for beam 1): it follows the argmax token until EOS or the limit, or, given a
`sampling.Sampling`, a token drawn from the model's distribution. `decode` drives
both, as one `SearchSettings` (t2t_lite/decode/search_settings.py) says, with a model's
cache API (`encode`, `initial_cache`, `decode_step`, wrapped by `model_steps`);
`use_cache=False` instead re-runs the whole model (encoder included) over the prefix at
every step, the slow reference that the cache must equal.
"""

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import model_steps, target_prefix
from t2t_lite.decode import sampling as sampling_lib
from t2t_lite.decode.search_settings import SearchSettings
from t2t_lite.decode.top_k import offset_top_k

START_ID = 0  # The decoder's start symbol: targets are shifted right with 0 (padding).


def length_penalty(length, alpha):
    """GNMT's lp(Y) = ((5 + |Y|) / 6) ** α for an integer length tensor."""
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def beam_search(
    symbols_to_logits_fn,
    initial_ids,
    beam_size,
    decode_length,
    vocab_size,
    alpha,
    eos_id=EOS_ID,
    states=None,
    stop_early=True,
    max_length=None,
    slot_states=None,
    prefix_ids=None,
):
    """Returns the `beam_size` best complete hypotheses per row, best first.

    Args:
      symbols_to_logits_fn: `(ids [batch*beam, i+1], i, states) -> (logits [batch*beam,
        vocab], new_states)`; `ids` starts with the initial id and `i` is the step. With
        `max_length`, `ids` is the whole buffer [batch*beam, max_length+1] instead, zeros
        after position i.
      initial_ids: int32 [batch], the first id fed to the model (0 for the Transformer).
      beam_size: number of hypotheses kept (a Python int).
      decode_length: maximum number of tokens to emit: a scalar, or int32 [batch] for a
        limit per row. Limits below 1 count as 1.
      vocab_size: size of the last axis of the logits (a Python int).
      alpha: length penalty exponent α ≥ 0 (0 = no penalty).
      eos_id: the id that ends a hypothesis.
      states: nested structure of [batch, ...] tensors (the model's cache; None = {}). Each is
        repeated to [batch*beam, ...] and reordered with the beams; a leaf may grow
        along any axis from one step to the next, only its last dimension must stay.
      stop_early: stop a row as soon as its best finished hypothesis beats every alive
        one's best reachable score; False decodes to the limit unless the finished set
        is full of hypotheses that no alive one can beat (tensor2tensor's meaning).
      max_length: None, or a Python int ≥ every row limit: every shape is then static
        (the id buffers have max_length + 1 positions and the states must keep their
        shapes), as XLA compilation needs.
      slot_states: None, or a nested structure of tensors with one slot per beam inside
        (never repeated or reordered; a hypothesis finds its past in them through `states`).
        symbols_to_logits_fn is then called as `(ids, i, states, slot_states)` and returns
        `(logits, new_states, new_slot_states)`.
      prefix_ids: None, or int32 [batch, P], 0-padded: each row's hypotheses start with these
        tokens (a target prefix), scored as the model scores them; the search continues after them.

    Returns:
      (ids int32 [batch, beam, length], scores float32 [batch, beam]): the emitted ids
      without the initial id, EOS included, padded with 0; scores are log P / lp. The
      length is the number of steps run, or `max_length` when given.
    """
    if slot_states is not None and max_length is None:
        raise ValueError("beam_search(slot_states=...) needs max_length: slots are preallocated.")
    batch_size = tf.shape(initial_ids)[0]
    row_limits = _row_limits(decode_length, batch_size)
    steps_needed = tf.reduce_max(row_limits)
    buffer_length = steps_needed if max_length is None else max_length

    def rows_done(i, alive_log_probs, finished_scores):
        # log P only falls as a hypothesis grows and lp is largest at the limit (α ≥ 0),
        # so the best alive hypothesis can at most reach this score.
        best_reachable = alive_log_probs[:, 0] / length_penalty(row_limits, alpha)
        if stop_early:
            bar = tf.reduce_max(finished_scores, axis=1)
        else:
            bar = tf.reduce_min(finished_scores, axis=1)
        return (bar > best_reachable) | (i >= row_limits)

    def grow_topk(i, logits, alive_seq, alive_log_probs):
        """The 2·beam best one-token extensions of the alive hypotheses, and which are complete."""
        log_probs = tf.nn.log_softmax(tf.reshape(tf.cast(logits, tf.float32), [batch_size, beam_size, vocab_size]))
        if prefix_ids is not None:
            log_probs = target_prefix.force(log_probs, prefix_ids, i)
        # Every candidate of a step has the same length, so ranking by score = by log-probability:
        # log P(token | hypothesis) + log P(hypothesis), over beam × vocabulary candidates.
        top_log_probs, top_index = offset_top_k(log_probs, alive_log_probs, 2 * beam_size)
        parents, tokens = top_index // vocab_size, top_index % vocab_size
        top_seq = _append(tf.gather(alive_seq, parents, batch_dims=1), tokens, i + 1)
        complete = ((tokens == eos_id) | (i + 1 >= row_limits)[:, None]) & tf.math.is_finite(top_log_probs)
        return top_seq, top_log_probs, top_log_probs / length_penalty(i + 1, alpha), parents, complete

    def grow_alive(top_seq, top_log_probs, parents, complete):
        pick = _top_indices(tf.where(complete, -np.inf, top_log_probs), beam_size)
        return (
            tf.gather(top_seq, pick, batch_dims=1),
            tf.gather(tf.where(complete, -np.inf, top_log_probs), pick, batch_dims=1),
            tf.gather(parents, pick, batch_dims=1),
        )

    def grow_finished(finished_seq, finished_scores, top_seq, top_scores, complete):
        scores = tf.concat([finished_scores, tf.where(complete, top_scores, -np.inf)], axis=1)
        pick = _top_indices(scores, beam_size)
        return (
            tf.gather(tf.concat([finished_seq, top_seq], axis=1), pick, batch_dims=1),
            tf.gather(scores, pick, batch_dims=1),
        )

    def run_model(ids, i, states, slots):
        if slot_states is None:
            logits, states = symbols_to_logits_fn(ids, i, states)
            return logits, states, slots
        return symbols_to_logits_fn(ids, i, states, slots)

    def step(i, alive_seq, alive_log_probs, finished_seq, finished_scores, states, slots):
        # A row that is done stops changing while the batch decodes on, so its result is the
        # one it would get alone: with no alive hypothesis left, no candidate can be complete.
        alive_log_probs = tf.where(rows_done(i, alive_log_probs, finished_scores)[:, None], -np.inf, alive_log_probs)
        prefix = alive_seq if max_length is not None else alive_seq[:, :, : i + 1]
        ids = tf.reshape(prefix, [batch_size * beam_size, -1])
        logits, states, slots = run_model(ids, i, states, slots)
        top_seq, top_log_probs, top_scores, parents, complete = grow_topk(i, logits, alive_seq, alive_log_probs)
        alive_seq, alive_log_probs, alive_parents = grow_alive(top_seq, top_log_probs, parents, complete)
        finished_seq, finished_scores = grow_finished(finished_seq, finished_scores, top_seq, top_scores, complete)
        states = _reorder(states, alive_parents, beam_size)
        return i + 1, alive_seq, alive_log_probs, finished_seq, finished_scores, states, slots

    def not_done(i, alive_seq, alive_log_probs, finished_seq, finished_scores, states, slots):
        return (i < steps_needed) & ~tf.reduce_all(rows_done(i, alive_log_probs, finished_scores))

    initial_seq = tf.tile(tf.cast(initial_ids, tf.int32)[:, None, None], [1, beam_size, 1])
    alive_seq = tf.pad(initial_seq, [[0, 0], [0, 0], [0, buffer_length]])  # a buffer for every step's token
    # Only beam 0 starts alive, so the first step does not pick the same token beam_size times.
    alive_log_probs = tf.tile(tf.constant([[0.0] + [-np.inf] * (beam_size - 1)]), [batch_size, 1])
    loop_vars = (
        tf.constant(0),
        alive_seq,
        alive_log_probs,
        tf.zeros_like(alive_seq),
        tf.fill([batch_size, beam_size], -np.inf),
        tf.nest.map_structure(lambda state: tf.repeat(state, beam_size, axis=0), {} if states is None else states),
        {} if slot_states is None else slot_states,
    )
    steps, _, _, finished_seq, finished_scores, _, _ = tf.while_loop(
        not_done, step, loop_vars, shape_invariants=None if max_length else _shape_invariants(loop_vars[:-1]) + ({},)
    )
    return finished_seq[:, :, 1:] if max_length is not None else finished_seq[:, :, 1 : steps + 1], finished_scores


def greedy_search(
    symbols_to_logits_fn,
    initial_ids,
    decode_length,
    alpha,
    eos_id=EOS_ID,
    states=None,
    max_length=None,
    sampling: "sampling_lib.Sampling" = None,
    prefix_ids=None,
):
    """Argmax decoding: beam_search's interface and results for beam 1; or sampling.

    Each row follows its most probable token (or, with `sampling`, a drawn one) until EOS or
    its limit; later positions are 0. Returns (ids int32 [batch, 1, length], scores float32
    [batch, 1]) with scores = log P / lp under the model, as beam_search (`max_length` as there).
    """
    batch_size = tf.shape(initial_ids)[0]
    row_limits = _row_limits(decode_length, batch_size)
    steps_needed = tf.reduce_max(row_limits)
    buffer_length = steps_needed if max_length is None else max_length

    def step(i, seq, log_probs, lengths, states):
        logits, states = symbols_to_logits_fn(seq if max_length is not None else seq[:, : i + 1], i, states)
        step_log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
        if prefix_ids is not None:
            step_log_probs = target_prefix.force(step_log_probs, prefix_ids, i)
        if sampling is None:
            tokens = tf.argmax(step_log_probs, axis=-1, output_type=tf.int32)
        else:
            tokens = sampling.choose(step_log_probs, i)
        running = lengths == 0
        log_probs += tf.where(running, tf.gather(step_log_probs, tokens, batch_dims=1), 0.0)
        seq = _append(seq, tf.where(running, tokens, 0), i + 1)
        ends = running & ((tokens == eos_id) | (i + 1 >= row_limits))
        lengths = tf.where(ends, i + 1, lengths)
        return i + 1, seq, log_probs, lengths, states

    def not_done(i, seq, log_probs, lengths, states):
        return (i < steps_needed) & tf.reduce_any(lengths == 0)

    seq = tf.concat([tf.cast(initial_ids, tf.int32)[:, None], tf.zeros([batch_size, buffer_length], tf.int32)], 1)
    loop_vars = (tf.constant(0), seq, tf.zeros([batch_size]), tf.zeros([batch_size], tf.int32), states or {})
    steps, seq, log_probs, lengths, _ = tf.while_loop(
        not_done, step, loop_vars, shape_invariants=None if max_length else _shape_invariants(loop_vars)
    )
    scores = log_probs / length_penalty(lengths, alpha)
    return seq[:, None, 1:] if max_length is not None else seq[:, None, 1 : steps + 1], scores[:, None]


def decode(
    model,
    inputs,
    search: SearchSettings,
    *,
    use_cache=True,
    eos_id=EOS_ID,
    prefixes=None,
    seed=None,
    sample=0,
):
    """Translates a batch with `model`'s cache API; traceable inside a tf.function or SavedModel.

    Args:
      model: a `Transformer` (or any model with `vocab_size`, `encode`, `initial_cache` and
        `decode_step`, and for use_cache=False `decoder_hidden` and `logits`).
      inputs: int32 [batch, src_len], 0-padded, EOS included as in training data.
      search: the `SearchSettings`: beam_size 1 decodes greedily (`greedy_search`), more runs
        `beam_search`, with the length penalty α; each sentence may emit up to (its own non-padding
        length + extra_length) tokens, so the result of a sentence does not depend on the rest of its
        batch (a row of padding only emits one); sampling_method=random draws each token instead
        (`sampling.Sampling`, one hypothesis); xla=True makes every shape static, as XLA compilation
        needs (`inputs` must have a static length): the cache is preallocated for src_len +
        extra_length steps and written in place, and the ids come back at that length (zeros after
        the last step).
      use_cache: False re-runs the whole model, encoder included, over the prefix at every
        step (slow; the reference the cached decoding must equal).
      eos_id: the id that ends a sentence; benchmarks pass -1 to decode to the full length.
      prefixes: None, or int32 [batch, P], 0-padded target prefixes: each output starts with its
        row's prefix and the search (or sampling) continues from there; a row's length limit grows
        by its prefix's length. An all-zero row decodes as without a prefix.
      seed, sample: the draws' seed (default: search.sampling_seed) and the sample's number, Python
        ints or int32 scalars (a traced search takes them as arguments); only read when sampling.

    Returns (ids int32 [batch, beam, length], scores float32 [batch, beam]) as beam_search.
    """
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    batch_size = tf.shape(inputs)[0]
    lengths = tf.reduce_sum(tf.cast(inputs != 0, tf.int32), axis=1)
    # A row of padding only (a batch padded to a static shape; a sentence has at least EOS) stops
    # after one step, rather than keep the whole batch decoding to its extra_length limit.
    decode_length = tf.where(lengths > 0, lengths + search.extra_length, 0)
    if prefixes is not None:
        prefixes = tf.convert_to_tensor(prefixes, tf.int32)
        decode_length += tf.reduce_sum(tf.cast(prefixes > 0, tf.int32), axis=1)
    initial_ids = tf.fill([batch_size], START_ID)
    max_length = None
    if search.xla:
        if inputs.shape[1] is None or not use_cache:
            raise ValueError("decode(search.xla=True) needs use_cache=True and inputs of a static length.")
        max_length = inputs.shape[1] + search.extra_length + (0 if prefixes is None else prefixes.shape[1])
    beam_size = search.beam_width
    slot_states = None
    if use_cache:
        symbols_to_logits_fn, states, slot_states = model_steps.cached_step(model, inputs, beam_size, max_length)
    else:
        symbols_to_logits_fn, states = model_steps.uncached_step(model, inputs, beam_size), None
    if beam_size == 1:
        return greedy_search(
            symbols_to_logits_fn,
            initial_ids,
            decode_length,
            search.alpha,
            eos_id,
            states,
            max_length,
            search.sampling(seed, sample),
            prefixes,
        )
    return beam_search(
        symbols_to_logits_fn,
        initial_ids,
        beam_size,
        decode_length,
        model.vocab_size,
        search.alpha,
        eos_id,
        states,
        max_length=max_length,
        slot_states=slot_states,
        prefix_ids=prefixes,
    )


def _row_limits(decode_length, batch_size):
    limits = tf.broadcast_to(tf.cast(decode_length, tf.int32), [batch_size])
    return tf.maximum(limits, 1)


def _append(seq, tokens, position):
    """Writes `tokens` at `position` of the last axis of a preallocated id buffer."""
    at_position = tf.range(tf.shape(seq)[-1]) == position
    return tf.where(at_position, tokens[..., None], seq)


def _top_indices(scores, k):
    return tf.math.top_k(scores, k=k).indices


def _reorder(states, parents, beam_size):
    """Gathers every state leaf once, by the parent beam of each surviving hypothesis."""
    batch_size = tf.shape(parents)[0]
    flat_parents = tf.reshape(parents + beam_size * tf.range(batch_size)[:, None], [-1])
    return tf.nest.map_structure(lambda state: tf.gather(state, flat_parents), states)


def _shape_invariants(loop_vars):
    """Fixed shapes for the loop's own tensors; state leaves may grow on any axis but the last."""
    *fixed, states = loop_vars
    growing = tf.nest.map_structure(
        lambda state: tf.TensorShape([None] * (state.shape.rank - 1) + [state.shape[-1]]), states
    )
    return tuple(tensor.shape for tensor in fixed) + (growing,)
