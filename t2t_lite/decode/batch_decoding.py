"""`decode_batch`: beam search or greedy decoding of a numpy batch, traced once per model and settings (§6.1).

`beam_search.decode` is the search over a model's cache API as TensorFlow ops; a caller with ids in
numpy (t2t-decoder, the dev BLEU, the benchmarks) needs it compiled into one `tf.function` and kept:
tracing the search costs seconds, so each model keeps one compiled search per settings, dropped with
the model. `xla=True` compiles the search with XLA once per input shape.
"""

import weakref

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import sampling as sampling_lib
from t2t_lite.decode.beam_search import decode


def decode_batch(
    model,
    inputs,
    *,
    beam_size,
    alpha,
    extra_length,
    return_beams=False,
    use_cache=True,
    eos_id=EOS_ID,
    xla=False,
    sampling: "sampling_lib.Sampling" = None,
    prefixes=None,
):
    """`decode` compiled into one tf.function (traced once per model and settings), as numpy.

    A sample's seed and index are arguments of the traced search, not settings: they share its trace.

    Returns (ids [batch, length], scores [batch]) for the best hypothesis, or all beams
    ([batch, beam, length], [batch, beam]) with return_beams=True. Ids end with EOS (1)
    unless the length limit was reached, and are 0-padded; `Vocabulary.decode` reads them.
    `xla=True` compiles the whole search with XLA (`decode(static_shapes=True)`), once per
    input shape: the same results, and the ids lose their all-zero trailing columns.
    `prefixes` (int32 [batch, P], 0-padded) are target prefixes, as in `decode`.
    """
    unseeded = None if sampling is None else sampling.unseeded()
    settings = (beam_size, float(alpha), extra_length, use_cache, eos_id, xla, unseeded, prefixes is not None)
    compiled = _COMPILED.setdefault(model, {})
    if settings not in compiled:
        model_ref = weakref.ref(model)  # a strong reference here would keep the model in _COMPILED forever

        def decode_inputs(batch, seed_and_sample, prefixes=None):
            return decode(
                model_ref(),
                batch,
                beam_size=beam_size,
                alpha=alpha,
                extra_length=extra_length,
                use_cache=use_cache,
                eos_id=eos_id,
                static_shapes=xla,
                sampling=None if unseeded is None else unseeded.seeded(seed_and_sample),
                prefixes=prefixes,
            )

        # Without autograph: the search uses tf.while_loop/tf.cond, and autograph costs ~1 s per trace.
        if xla:  # static shapes: one trace and compilation per input shape
            compiled[settings] = tf.function(decode_inputs, jit_compile=True, reduce_retracing=False, autograph=False)
        else:
            ids_spec = tf.TensorSpec([None, None], tf.int32)
            spec = [ids_spec, tf.TensorSpec([2], tf.int32)] + [ids_spec] * (prefixes is not None)
            compiled[settings] = tf.function(decode_inputs, input_signature=spec, autograph=False)
    seed_and_sample = [sampling.seed, sampling.sample] if sampling else [0, 0]
    arguments = [inputs, seed_and_sample] + ([] if prefixes is None else [prefixes])
    ids, scores = compiled[settings](*(tf.convert_to_tensor(argument, tf.int32) for argument in arguments))
    ids, scores = ids.numpy(), scores.numpy()
    if xla:
        ids = ids[..., : _used_length(ids)]
    return (ids, scores) if return_beams else (ids[:, 0], scores[:, 0])


def _used_length(ids):
    """The length of the ids without the columns after the last non-zero one."""
    used = np.flatnonzero(ids.reshape(-1, ids.shape[-1]).any(axis=0))
    return int(used[-1]) + 1 if used.size else 0


# One compiled decoder per (model, settings); dropped with the model.
_COMPILED = weakref.WeakKeyDictionary()
