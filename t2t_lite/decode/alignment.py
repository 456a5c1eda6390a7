"""Word alignments of a translation from the encoder-decoder attention (Garg et al. 2019, §3; Pharaoh links).

For a source x and its translation y (the search's output, or a given pair), one teacher-forced pass
gives the encoder-decoder attention of decoder layer l; averaged over its first H heads (all when
alignment_heads=0) it is a distribution over source subwords for each target subword t:

    A(t, s) = 1/H Σ_{h<H} softmax(q_t^{l,h} · K^{l,h}ᵀ / √d_k)(s)
    W(i, j) = Σ_{t ∈ target word i} Σ_{s ∈ source word j} A(t, s)                (subwords merged into words)
    link(i) = argmax_j W(i, j)                                                     (one "j-i" per target word)

Words are those of the raw text (`str.split()`: what the vocabulary's "▁" pieces mark, see
`Vocabulary.word_pieces`), so punctuation written against a word belongs to it ("world!" is one
word) and a tag placed between words of the source has a place between words of the translation.
Summing over the source word's subwords makes A a distribution over words (a word is not less likely
for being split in more pieces); the sum over the target word's subwords is their mean up to a
factor, which argmax ignores. EOS takes no part: the source's EOS is no word (attention that rests on
it is dropped before the argmax) and the target's EOS is none either. Each target word gets exactly
one source word (the tag of a target word always has a source to come from); a source word no
target word picked is unaligned. An empty translation has no links; neither has a translation of a
source without words.

The output is the translation's line `translation ||| 0-0 2-1 1-2` (Marian's and OpenNMT-py's
separator; source word index - target word index, counted from 0, in target order).
The teacher-forced pass equals the attention the search saw (cached decoding equals full decoding),
so the links of a hypothesis do not depend on the search that found it, and CTranslate2's
`return_attention` (the same layer and heads, see `serve/ctranslate2_export.py`) gives the same links.
"""

import dataclasses
import weakref

import numpy as np
import tensorflow as tf

from t2t_lite.data.word_alignment import word_indices

SEPARATOR = " ||| "


@dataclasses.dataclass(frozen=True)
class AlignmentSettings:
    """Which attention aligns the words, and whether to write the links (`--decode_hparams`)."""

    write_alignment: bool = False  # Write `translation ||| links` (Pharaoh source-target word links).
    # Decoder layer whose encoder-decoder attention aligns, Python-indexed (-1 = last); docs/results.md.
    alignment_layer: int = -1
    alignment_heads: int = 0  # Average the first N heads of that layer; 0 = all of them.

    def __post_init__(self):
        if self.alignment_heads < 0:
            raise ValueError(
                f"--decode_hparams: alignment_heads={self.alignment_heads}: the number of heads to average, "
                f"≥ 1, or 0 for all of them."
            )

    def check_model(self, hparams) -> None:
        """Refuses a layer or head count that the model of `hparams` does not have, naming the flag."""
        layers = hparams.decoder_layers
        if not -layers <= self.alignment_layer < layers:
            raise ValueError(
                f"--decode_hparams: alignment_layer={self.alignment_layer}: the decoder has {layers} layers; "
                f"give 0..{layers - 1}, or -1..-{layers} counted from the last."
            )
        if self.alignment_heads > hparams.num_heads:
            raise ValueError(
                f"--decode_hparams: alignment_heads={self.alignment_heads}: each layer has {hparams.num_heads} "
                f"heads; give 1..{hparams.num_heads}, or 0 for all."
            )


def layer_attention(model, inputs, targets, settings: AlignmentSettings):
    """A(t, s) [batch, target length, source length]: the chosen layer's encoder-decoder attention, heads averaged."""
    # The decoder's output is not needed, so neither is its projection onto the vocabulary.
    _, attention = model.decoder_hidden({"inputs": inputs, "targets": targets}, return_attention=True)
    weights = tf.cast(attention["encoder_decoder"][settings.alignment_layer], tf.float32)
    if settings.alignment_heads:
        weights = weights[:, : settings.alignment_heads]
    return tf.reduce_mean(weights, axis=1)


def word_links(weights, source_ids, target_ids, starts, bare):
    """link(i) int32 [batch, target length]: the source word of target word i; -1 where there is no word i.

    weights: A(t, s) [batch, target length, source length] over the ids' subwords.
    """
    source_words = word_indices(source_ids, starts, bare)
    target_words = word_indices(target_ids, starts, bare)
    to_source_words = tf.one_hot(source_words, tf.shape(source_words)[1])  # -1: a row of zeros
    to_target_words = tf.one_hot(target_words, tf.shape(target_words)[1])
    subword_to_source_words = tf.matmul(tf.cast(weights, tf.float32), to_source_words)
    word_weights = tf.matmul(to_target_words, subword_to_source_words, transpose_a=True)
    source_count = tf.reduce_max(source_words, axis=1) + 1
    is_source_word = tf.range(tf.shape(source_words)[1])[None, :] < source_count[:, None]
    links = tf.argmax(tf.where(is_source_word[:, None, :], word_weights, -np.inf), axis=2, output_type=tf.int32)
    target_count = tf.reduce_max(target_words, axis=1) + 1
    is_target_word = tf.range(tf.shape(target_words)[1])[None, :] < target_count[:, None]
    return tf.where(is_target_word & (source_count > 0)[:, None], links, -1)


def pharaoh(links):
    """string [batch]: "j-i" for each target word i with a link, space-separated, in target order."""
    target_index = tf.broadcast_to(tf.range(tf.shape(links)[1])[None, :], tf.shape(links))
    pairs = tf.strings.as_string(links) + "-" + tf.strings.as_string(target_index)
    return tf.strings.reduce_join(tf.ragged.boolean_mask(pairs, links >= 0), axis=1, separator=" ")


def alignments(model, inputs, targets, settings: AlignmentSettings, word_pieces):
    """string [batch]: the Pharaoh links of each (inputs, targets) row; traceable (the SavedModel runs it).

    inputs, targets: 0-padded int32 ids, the inputs ending in EOS; targets as the search returns them (EOS,
    if any, then padding). word_pieces: the vocabulary's `word_pieces()`.
    """
    weights = layer_attention(model, inputs, targets, settings)
    return pharaoh(word_links(weights, inputs, targets, *word_pieces))


def hypothesis_alignments(model, vocabulary, inputs, ids, settings: AlignmentSettings) -> np.ndarray:
    """str [batch, hypotheses]: the links of each hypothesis `ids` [batch, hypotheses, length] of `inputs`."""
    batch, hypotheses, length = ids.shape
    if length == 0:
        return np.full((batch, hypotheses), "", object)
    compiled = _compiled(model, vocabulary, settings)
    links = compiled(tf.constant(np.repeat(inputs, hypotheses, axis=0)), tf.constant(ids.reshape(-1, length)))
    return np.array([text.decode("utf-8") for text in links.numpy()], object).reshape(batch, hypotheses)


def pair_alignments(model, vocabulary, inputs, targets, settings: AlignmentSettings) -> list:
    """The links of each given (inputs, targets) row (numpy ids, as `hypothesis_alignments`)."""
    links = _compiled(model, vocabulary, settings)(tf.constant(inputs), tf.constant(targets))
    return [text.decode("utf-8") for text in links.numpy()]


def with_links(text: str, links: str) -> str:
    """The output line of a translation with its alignment."""
    return f"{text}{SEPARATOR}{links}"


def _compiled(model, vocabulary, settings: AlignmentSettings):
    """`alignments` of `model` as one tf.function per settings, kept with the model (as decode_batch's searches)."""
    key = (settings.alignment_layer, settings.alignment_heads, vocabulary.fingerprint)
    compiled = _COMPILED.setdefault(model, {})
    if key not in compiled:
        model_ref, word_pieces = weakref.ref(model), vocabulary.word_pieces()
        spec = tf.TensorSpec([None, None], tf.int32)

        def links(inputs, targets):
            return alignments(model_ref(), inputs, targets, settings, word_pieces)

        compiled[key] = tf.function(links, input_signature=[spec, spec], autograph=False)
    return compiled[key]


_COMPILED = weakref.WeakKeyDictionary()
