"""The export's signatures: raw text (or ids) in, translations, scores and flags out (§6.1 decoding).

`serving_module` holds the model's weights, the SentencePiece tokenizer and one function per
signature, each the whole of `t2t-decoder`'s path in the graph:

    text -> whitespace normalization -> SentencePiece ids (+ EOS) -> beam search with the
    key/value cache (`t2t_lite.decode.beam_search.decode`) -> best hypothesis -> SentencePiece text

  serving_default  inputs: string [batch]        -> outputs: string [batch], scores: float32 [batch],
                                                    input_truncated: bool [batch], input_not_utf8: bool [batch]
  translate_ids    inputs: int32 [batch, length] -> outputs: int32 [batch, length], scores: float32 [batch],
                                                    input_truncated: bool [batch]
  score, translate_prefix, sample: strings [batch] in, as `export.export_config` lists them.

`translate_ids` is for clients that tokenize themselves: each row holds a sentence's
SentencePiece ids, 0-padded, with or without a final EOS (ids 0 and 1 are dropped;
ids beyond the vocabulary are an error); its `outputs` are the best hypothesis' ids as
`decode_batch` returns them (EOS included unless the length limit was reached, then
0-padded to the longest hypothesis of the batch). `scores` are log P(Y|X) / lp(Y) of the
best hypothesis. An input string that is not valid UTF-8 is not translated: its
`input_not_utf8` is true, its output "" and its score -inf, and the rest of the batch
translates as usual (one bad sentence never fails a batch TF Serving merged from
several clients). An empty batch returns empty outputs.

An input of another rank (a [batch, 1] string tensor, a single string, ids [batch]) is refused
with InvalidArgumentError "inputs: expected string [batch] …; got shape …": the signatures
declare their inputs of any rank and check it in the graph (`of_rank`), since a declared
[None] is checked by nobody: TF Serving and a session feed a rank-2 tensor through it, and
TensorFlow folds the graph's own rank checks away against the declaration.

With write_alignment in its settings, serving_default, translate_prefix, sample and score also return
`alignments`: string [batch], each translation's (or given pair's) word links as `t2t-decoder` writes them
after " ||| " (`t2t_lite.decode.alignment`), "" for an input that is not UTF-8.

`settings` is the export's `ExportSettings` (`t2t_lite.serve.export_settings`): its
`SearchSettings` (beam size, α, extra length, xla, the sampling settings), max_input_length
and max_batch_size, fixed at export.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from t2t_lite.data.vocabulary import EOS_ID, PAD_ID, normalize_text_in_graph
from t2t_lite.decode import alignment, beam_search, scoring
from t2t_lite.serve import xla_buckets


def model_inputs(ids: tf.RaggedTensor, max_input_length: int):
    """Ragged subword ids [batch, None] -> 0-padded int32 [batch, ≤ max_input_length], each row ending in EOS."""
    return ending_in_eos(ids[:, : max_input_length - 1])


def ending_in_eos(ids: tf.RaggedTensor):
    """Ragged subword ids [batch, None] -> 0-padded [batch, longest + 1], EOS after each row's ids."""
    eos = tf.RaggedTensor.from_tensor(tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype)))
    return tf.concat([ids, eos], axis=1).to_tensor(default_value=PAD_ID)


def hypothesis_tokens(ids) -> tf.RaggedTensor:
    """What `Vocabulary.decode` reads of decoded ids [batch, length]: up to the first EOS, padding dropped."""
    before_eos = tf.cumsum(tf.cast(ids == EOS_ID, tf.int32), axis=1) == 0
    return tf.ragged.boolean_mask(ids, before_eos & (ids != PAD_ID))


def best_hypotheses_fn(model, settings):
    """0-padded inputs [batch, length] -> (ids [batch, length'], scores [batch]) of the best hypotheses.

    The batch may be empty. One traced function serves both signatures (serving_default and
    translate_ids), so the export holds that search once; with xla it is compiled, and a bucket
    shape is compiled (and warmed up) once for the two.
    """
    search_settings = settings.search
    # Every signature is traced without autograph, as batch_decoding.decode_batch: the graph uses TensorFlow's
    # own control flow, and autograph would rewrite the model's layers at each of the export's many traces.
    if search_settings.xla:
        compiled = tf.function(
            lambda batch: beam_search.decode(model, batch, search_settings), jit_compile=True, autograph=False
        )
        output_length = xla_buckets.length_buckets(settings.max_input_length)[-1] + search_settings.extra_length

        def search_in_buckets(inputs):
            ids, scores = xla_buckets.decode_in_buckets(
                compiled, inputs, settings.max_input_length, output_length, settings.max_batch_size
            )
            return without_padding_columns(ids), scores

        return search_in_buckets

    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False)
    def search(inputs):
        def best():
            ids, scores = beam_search.decode(model, inputs, search_settings)
            return ids[:, 0], scores[:, 0]

        # The search's length limits reduce over the batch, which fails on an empty one.
        return tf.cond(tf.shape(inputs)[0] > 0, best, lambda: (tf.zeros([0, 0], tf.int32), tf.zeros([0])))

    return search


def without_padding_columns(ids):
    """ids [batch, length] cut after their last column that is not all padding (the width plain decoding gives)."""
    used = tf.cumsum(tf.cast(tf.reduce_any(ids != PAD_ID, axis=0), tf.int32), reverse=True) > 0
    return ids[:, : tf.reduce_sum(tf.cast(used, tf.int32))]


def serving_module(model, vocabulary, settings) -> tf.Module:
    """A tf.Module holding the model's weights, the tokenizer and the signature functions.

    The Keras model itself is left out of the object graph (only closures refer to it),
    so the SavedModel holds plain variables and functions that load without Keras.
    """
    tokenizer = vocabulary.tokenizer
    search = best_hypotheses_fn(model, settings)
    word_pieces = vocabulary.word_pieces() if settings.alignment.write_alignment else None

    def decode_best(ids: tf.RaggedTensor):
        inputs = model_inputs(ids, settings.max_input_length)
        hypotheses, scores = search(inputs)
        truncated = ids.row_lengths() > settings.max_input_length - 1
        return inputs, hypotheses, scores, truncated

    def with_alignments(outputs, inputs, targets, utf8):
        """`outputs` and, when the export writes alignments, "alignments": each row's word links ("" if not UTF-8)."""
        if word_pieces is None:
            return outputs

        def links():
            return alignment.alignments(model, inputs, targets, settings.alignment, word_pieces)

        # An empty batch, or no hypothesis with a token, has no links (and no attention to take them from).
        found = tf.cond(tf.size(targets) > 0, links, lambda: tf.fill([tf.shape(targets)[0]], ""))
        return {**outputs, "alignments": tf.where(utf8, found, "")}

    def valid_utf8(*texts):
        # Replacing invalid bytes changes exactly the strings that are not valid UTF-8.
        checks = [tf.strings.unicode_transcode(text, "UTF-8", "UTF-8", errors="replace") == text for text in texts]
        return tf.reduce_all(tf.stack(checks), axis=0)

    def sentences(texts, name):
        return of_rank(texts, 1, f"{name}: expected string [batch], one sentence per element")

    def subwords(texts, utf8):
        """Ragged ids of the normalized texts; "" where a pair is not valid UTF-8."""
        return tokenizer.tokenize(normalize_text_in_graph(tf.where(utf8, texts, "")))

    def plain_search(inputs, utf8, prefixes=None, **changes):
        """The search without XLA (sampling, prefixes), `changes` made to its settings: outputs as `translate`'s."""
        ids = subwords(inputs, utf8)
        search = dataclasses.replace(settings.search, xla=False, **changes)
        model_ids = model_inputs(ids, settings.max_input_length)
        hypotheses, scores = beam_search.decode(model, model_ids, search, prefixes=prefixes)
        outputs = {
            "outputs": tf.where(utf8, tokenizer.detokenize(hypothesis_tokens(hypotheses[:, 0])), ""),
            "scores": tf.where(utf8, scores[:, 0], -np.inf),
            "input_truncated": ids.row_lengths() > settings.max_input_length - 1,
            "input_not_utf8": ~utf8,
        }
        return with_alignments(outputs, model_ids, hypotheses[:, 0], utf8)

    @tf.function(input_signature=[any_rank(tf.string, "inputs"), any_rank(tf.string, "prefixes")], autograph=False)
    def translate_prefix(inputs, prefixes):
        # Each translation starts with its prefix's subwords; beam search goes on from there.
        inputs = sentences(inputs, "inputs")
        prefixes = one_per_input(inputs, sentences(prefixes, "prefixes"), "prefixes")
        utf8 = valid_utf8(inputs, prefixes)
        forced = subwords(prefixes, utf8).to_tensor(PAD_ID)
        return plain_search(inputs, utf8, prefixes=tf.cast(forced, tf.int32))

    @tf.function(input_signature=[any_rank(tf.string, "inputs")], autograph=False)
    def sample(inputs):
        # One translation drawn from the model's distribution (back-translation), with the export's settings.
        inputs = sentences(inputs, "inputs")
        return plain_search(inputs, valid_utf8(inputs), sampling_method="random")

    @tf.function(input_signature=[any_rank(tf.string, "inputs")], autograph=False)
    def translate(inputs):
        inputs = sentences(inputs, "inputs")
        utf8 = valid_utf8(inputs)
        model_ids, ids, scores, truncated = decode_best(subwords(inputs, utf8))
        outputs = {
            "outputs": tf.where(utf8, tokenizer.detokenize(hypothesis_tokens(ids)), ""),
            "scores": tf.where(utf8, scores, -np.inf),
            "input_truncated": truncated,
            "input_not_utf8": ~utf8,
        }
        return with_alignments(outputs, model_ids, ids, utf8)

    @tf.function(input_signature=[any_rank(tf.string, "inputs"), any_rank(tf.string, "targets")], autograph=False)
    def score(inputs, targets):
        # log P(target | source), teacher-forced, as `t2t-decoder --score_file` (t2t_lite.decode.scoring).
        inputs = sentences(inputs, "inputs")
        targets = one_per_input(inputs, sentences(targets, "targets"), "targets")
        utf8 = valid_utf8(inputs, targets)
        source_ids = subwords(inputs, utf8)
        target_ids = ending_in_eos(subwords(targets, utf8))
        model_ids = model_inputs(source_ids, settings.max_input_length)
        token_scores = scoring.token_log_probs(model, model_ids, target_ids)
        outputs = {
            "scores": tf.where(utf8, tf.reduce_sum(token_scores, axis=1), -np.inf),
            "token_scores": token_scores,
            "target_lengths": tf.reduce_sum(tf.cast(target_ids != PAD_ID, tf.int32), axis=1),
            "input_truncated": source_ids.row_lengths() > settings.max_input_length - 1,
            "input_not_utf8": ~utf8,
        }
        return with_alignments(outputs, model_ids, target_ids, utf8)

    @tf.function(input_signature=[any_rank(tf.int32, "inputs")], autograph=False)
    def translate_ids(inputs):
        inputs = of_rank(inputs, 2, "inputs: expected int32 [batch, length], a row of subword ids per sentence")
        _, ids, scores, truncated = decode_best(tf.ragged.boolean_mask(inputs, inputs > EOS_ID))
        return {"outputs": ids, "scores": scores, "input_truncated": truncated}

    module = tf.Module(name="t2t_lite_translator")
    # The tf.Variables behind the Keras variables: TF Serving's loader restores the variables
    # the functions read only when those are the tracked objects themselves (a tracked Keras
    # variable is exported as a copy, which TF Serving would restore instead).
    module.model_weights = [weight.value for weight in model.weights]
    module.tokenizer = tokenizer
    module.translate = translate
    module.translate_ids = translate_ids
    module.score = score
    module.translate_prefix = translate_prefix
    module.sample = sample
    return module


def any_rank(dtype, name: str) -> tf.TensorSpec:
    """A signature input of any rank (the rank is checked in the graph, `of_rank`)."""
    return tf.TensorSpec(None, dtype, name=name)


def one_per_input(inputs, paired, name: str):
    """`paired` (a sentence per input: targets, prefixes), checked in the graph to have as many as `inputs`.

    Another count stops the call with InvalidArgumentError naming both inputs and their counts.
    """
    check = tf.debugging.Assert(
        tf.equal(tf.size(inputs), tf.size(paired)),
        [f"inputs and {name}: expected one of {name} per input; got", tf.size(inputs), "inputs and", tf.size(paired)],
        name=f"check_{name}_count",
    )
    with tf.control_dependencies([check]):
        return tf.identity(paired)


def of_rank(tensor, rank: int, expected: str):
    """`tensor`, of any rank in the signature, checked in the graph to have `rank`; it leaves with that rank.

    A wrong rank stops the call with InvalidArgumentError naming the input, `expected` and the shape given.
    """
    check = tf.debugging.Assert(
        tf.equal(tf.rank(tensor), rank), [f"{expected}; got shape", tf.shape(tensor)], name="check_input_rank"
    )
    with tf.control_dependencies([check]):
        # A reshape to its own shape, run after the check: the graph below sees the rank (tf.ensure_shape
        # would fail first, at the function's shape inference, with a message of its own).
        shaped = tf.reshape(tensor, tf.shape(tensor)[:rank])
    shaped.set_shape([None] * rank)
    return shaped
