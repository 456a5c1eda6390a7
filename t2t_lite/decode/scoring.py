"""Scoring given translations: the model's log-probability of a target given its source.

    log P(y | x) = Σ_t log softmax(z_t)[y_t],   z_t = W_E · decoder(x, y_<t)   (§3.4, teacher forcing)

summed over the target's subwords and its EOS, in natural logarithms (an empty target: the one
term log P(EOS | x), the probability of translating to nothing): the quantity training
maximises, and the one beam search ranks before its length penalty (greedy decoding with α = 0
scores its own output with exactly this sum). Uses: reranking n-best lists, filtering a corpus,
quality estimation. `t2t-decoder --score_file=FILE` reads `source<TAB>target` lines of raw text;
`score_pairs` scores them in batches of similar length (sorted, as decoding sorts its inputs) and
returns them in the file's order, each with its per-subword terms, and with write_alignment the pair's word
links (`t2t_lite.decode.alignment`), written after the score as `score ||| links`.
"""

import dataclasses

import numpy as np
import tensorflow as tf

from t2t_lite.data import text_lines
from t2t_lite.decode import alignment
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.encoded_inputs import XLA_LENGTH_BUCKET, BadInputError, encode_line, pad_batch


@dataclasses.dataclass(frozen=True)
class PairScore:
    """log P(target | source), and its terms: one per target subword, EOS last; the pair's links or None."""

    log_probability: float
    per_token: tuple
    source_length: int = 0  # the source's ids, EOS included
    alignment: str = None

    def line(self, per_token: bool) -> str:
        """The output line: the sum, then (with `per_token`) each term, tab-separated; then ` ||| links`."""
        fields = [f"{self.log_probability:.6f}"]
        if per_token:
            fields += [f"{term:.6f}" for term in self.per_token]
        text = "\t".join(fields)
        return text if self.alignment is None else alignment.with_links(text, self.alignment)


def read_score_file(path: str) -> list:
    """(source, target) of each `source<TAB>target` line; a line that is neither is an error naming it.

    Either side may be empty: an empty target is the empty translation, scored as the probability of
    ending at once, log P(EOS | x); an empty source is read as the decoder reads an empty line, EOS alone.
    """
    pairs = []
    for number, line in enumerate(text_lines.read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 2:
            raise BadInputError(
                f"{path}:{number}: expected source<TAB>target, found {len(fields) - 1} tabs. "
                f"Write each pair on one line with one tab between its sides."
            )
        pairs.append((fields[0], fields[1]))
    return pairs


def score_pairs(model, vocabulary, pairs, settings: DecodeHParams) -> list:
    """One `PairScore` per (source, target) pair of raw text, in the pairs' order."""
    sources = [encode_line(vocabulary, source, number) for number, (source, _) in enumerate(pairs, start=1)]
    targets = [encode_line(vocabulary, target, number) for number, (_, target) in enumerate(pairs, start=1)]
    order = sorted(range(len(pairs)), key=lambda index: (len(targets[index]), len(sources[index])))
    step = compiled_token_log_probs(model, settings.search.xla)
    results = [None] * len(pairs)
    for first in range(0, len(order), settings.batch_size):
        batch = order[first : first + settings.batch_size]
        rows = settings.batch_size if settings.search.xla else 0  # XLA: one shape per length bucket
        multiple = XLA_LENGTH_BUCKET if settings.search.xla else 1
        inputs = pad_batch([sources[index] for index in batch], rows, multiple)
        target_ids = pad_batch([targets[index] for index in batch], rows, multiple)
        terms = step(tf.constant(inputs), tf.constant(target_ids)).numpy()
        links = None
        if settings.alignment.write_alignment:
            links = alignment.pair_alignments(model, vocabulary, inputs, target_ids, settings.alignment)
        for row, index in enumerate(batch):
            kept = terms[row, : len(targets[index])].astype(np.float64)
            pair_links = None if links is None else links[row]
            results[index] = PairScore(
                float(kept.sum()), tuple(float(term) for term in kept), len(sources[index]), pair_links
            )
    return results


def token_log_probs(model, inputs, targets):
    """[batch, target length] log softmax(z_t)[y_t] of 0-padded ids (each row ending in EOS); 0 at padding.

    Traceable: the SavedModel's `score` signature runs it too.
    """
    logits = model({"inputs": inputs, "targets": targets}, training=False)
    log_softmax = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    chosen = tf.gather(log_softmax, targets, batch_dims=2)
    return tf.where(tf.not_equal(targets, 0), chosen, 0.0)


def compiled_token_log_probs(model, xla: bool):
    """`token_log_probs` of `model`, compiled (with XLA: once per padded shape)."""

    def log_probs(inputs, targets):
        return token_log_probs(model, inputs, targets)

    # Without autograph, as batch_decoding.decode_batch: nothing here needs Python control flow on tensors.
    if xla:
        return tf.function(log_probs, jit_compile=True, autograph=False)
    spec = tf.TensorSpec([None, None], tf.int32)
    return tf.function(log_probs, input_signature=[spec, spec], autograph=False)
