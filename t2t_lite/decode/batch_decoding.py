"""`decode_batch`: beam search or greedy decoding of a numpy batch, traced once per model and settings (§6.1).

`beam_search.decode` is the search over a model's cache API as TensorFlow ops; a caller with ids in
numpy (t2t-decoder, the dev BLEU, the benchmarks) needs it compiled into one `tf.function` and kept:
tracing the search costs seconds, so each model keeps one compiled search per `SearchSettings`
(`traced()`, the settings without the draws' seed), dropped with the model. `search.xla` compiles the
search with XLA once per input shape.
"""

import weakref

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode.beam_search import decode
from t2t_lite.decode.search_settings import SearchSettings


def decode_batch(
    model, inputs, search: SearchSettings, *, return_beams=False, use_cache=True, eos_id=EOS_ID, prefixes=None, sample=0
):
    """`decode` compiled into one tf.function (traced once per model and settings), as numpy.

    The draws' seed (`search.sampling_seed`) and the sample's number `sample` are arguments of the traced
    search, not part of its key: every seed and sample shares one trace.

    Returns (ids [batch, length], scores [batch]) for the best hypothesis, or all beams
    ([batch, beam, length], [batch, beam]) with return_beams=True. Ids end with EOS (1)
    unless the length limit was reached, and are 0-padded; `Vocabulary.decode` reads them.
    `search.xla` compiles the whole search with XLA, once per input shape: the same results, and
    the ids lose their all-zero trailing columns. `prefixes` (int32 [batch, P], 0-padded) are
    target prefixes, as in `decode`.
    """
    key = (search.traced(), use_cache, eos_id, prefixes is not None)
    compiled = _COMPILED.setdefault(model, {})
    if key not in compiled:
        compiled[key] = _compile(weakref.ref(model), *key)
    arguments = [inputs, [search.sampling_seed, sample]] + ([] if prefixes is None else [prefixes])
    ids, scores = compiled[key](*(tf.convert_to_tensor(argument, tf.int32) for argument in arguments))
    ids, scores = ids.numpy(), scores.numpy()
    if search.xla:
        ids = ids[..., : _used_length(ids)]
    return (ids, scores) if return_beams else (ids[:, 0], scores[:, 0])


def _compile(model_ref, search: SearchSettings, use_cache, eos_id, with_prefixes):
    """The tf.function of `decode` with these settings; `model_ref` is weak, or _COMPILED would keep the model."""

    def decode_inputs(batch, seed_and_sample, prefixes=None):
        return decode(
            model_ref(),
            batch,
            search,
            use_cache=use_cache,
            eos_id=eos_id,
            prefixes=prefixes,
            seed=seed_and_sample[0],
            sample=seed_and_sample[1],
        )

    # Without autograph: the search uses tf.while_loop/tf.cond, and autograph costs ~1 s per trace.
    if search.xla:  # static shapes: one trace and compilation per input shape
        return tf.function(decode_inputs, jit_compile=True, reduce_retracing=False, autograph=False)
    ids_spec = tf.TensorSpec([None, None], tf.int32)
    spec = [ids_spec, tf.TensorSpec([2], tf.int32)] + [ids_spec] * with_prefixes
    return tf.function(decode_inputs, input_signature=spec, autograph=False)


def _used_length(ids):
    """The length of the ids without the columns after the last non-zero one."""
    used = np.flatnonzero(ids.reshape(-1, ids.shape[-1]).any(axis=0))
    return int(used[-1]) + 1 if used.size else 0


# One compiled decoder per (model, settings); dropped with the model.
_COMPILED = weakref.WeakKeyDictionary()
