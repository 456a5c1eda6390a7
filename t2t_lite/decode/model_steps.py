"""The model as beam search's `symbols_to_logits_fn`: one decoder step per call (§3.1, §6.1).

`cached_step` runs `Transformer.decode_step` on the last token with the self-attention
keys/values of the earlier ones kept in a cache (the encoder runs once per batch);
`uncached_step` re-runs the whole model, encoder included, over the prefix at every step,
the slow reference the cached decoding must equal. Both give `beam_search` and
`greedy_search` logits for the next token of every hypothesis.
"""

import tensorflow as tf


def cached_step(model, inputs, beam_size, max_length=None):
    """symbols_to_logits_fn over `model.decode_step`, the cache leaves beam search must reorder,
    and those it must leave in their beam slots (None without them).

    Only the self-attention keys/values depend on a hypothesis' past: they start empty
    (a 0-length axis, or `max_length` preallocated positions written in place) and are
    reordered with the beams. Every other leaf (encoder-decoder keys/values, source padding
    bias) is the same for all beams of a sentence: it keeps one row per sentence, never
    gathered or repeated (the encoder-decoder attention shares a row among its beams).
    Preallocated for a beam (`max_length`, beam_size > 1), the keys/values have a slot per
    beam instead and are never copied: only the cache's "slots" map, [batch, max_length]
    ints, is reordered (see `Transformer.decode_step`). Reordering the keys/values would copy
    the whole cache every step, a sizeable share of a transformer_base beam-4 call
    (docs/benchmarks.md, Decoding).
    """
    encoder_output, inputs_mask = model.encode(inputs)
    beam_slots = beam_size if max_length and beam_size > 1 else 0
    cache = model.initial_cache(encoder_output, inputs_mask, max_length or 0, beam_slots=beam_slots)
    slots = cache.pop("slots", None)
    leaves = tf.nest.flatten(cache)
    if max_length:  # the preallocated leaves are those that start empty without preallocation
        # (the graph of this second cache is pruned: only its static shapes are read).
        unallocated = tf.nest.flatten(model.initial_cache(encoder_output, inputs_mask))
        grows = [leaf.shape != other.shape for leaf, other in zip(leaves, unallocated)]
    else:
        grows = [0 in leaf.shape for leaf in leaves]
    fixed = [leaf for leaf, g in zip(leaves, grows) if not g]
    growing = [leaf for leaf, g in zip(leaves, grows) if g]

    def join(growing):
        growing, constant = iter(growing), iter(fixed)
        return tf.nest.pack_sequence_as(cache, [next(growing) if g else next(constant) for g in grows])

    def run(ids, step, cache):
        last = ids[:, -1] if max_length is None else tf.gather(ids, step, axis=1)
        logits, new_cache = model.decode_step(last, step, cache, in_place=max_length is not None)
        new_slots = new_cache.pop("slots", None)
        return logits, new_slots, [leaf for leaf, g in zip(tf.nest.flatten(new_cache), grows) if g]

    if not beam_slots:

        def symbols_to_logits_fn(ids, step, growing):
            logits, _, growing = run(ids, step, join(growing))
            return logits, growing

        return symbols_to_logits_fn, growing, None

    def slot_symbols_to_logits_fn(ids, step, slots, in_slots):  # -> (logits, slots, in_slots)
        return run(ids, step, {**join(in_slots), "slots": slots})

    return slot_symbols_to_logits_fn, slots, growing


def uncached_step(model, inputs, beam_size):
    """symbols_to_logits_fn that runs the whole model, teacher-forced, over the prefix."""
    beam_inputs = tf.repeat(inputs, beam_size, axis=0)

    def symbols_to_logits_fn(ids, step, states):
        # The model shifts targets right behind the start symbol, so targets = prefix
        # without the start id plus one placeholder; the last position predicts the next token,
        # and only it goes through the pre-softmax projection.
        targets = tf.pad(ids[:, 1:], [[0, 0], [0, 1]])
        hidden, _ = model.decoder_hidden({"inputs": beam_inputs, "targets": targets})
        return model.logits(hidden[:, -1]), states

    return symbols_to_logits_fn
