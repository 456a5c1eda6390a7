"""Translating lines of text with a trained model: what `t2t-decoder` does with each batch (§6.1, §6.3).

Sentences are encoded with the problem's vocabulary (plus EOS; `encoded_inputs`), sorted by length
so each batch holds sentences of similar length (less padding), decoded with
`t2t_lite.decode.batch_decoding.decode_batch` (beam search with the paper's length penalty and a
key/value cache, as the run's `SearchSettings` say), and returned in the input's order, one
`Translation` per line. Reading and writing files and stdin is in `decode_files`; what the
decoder says about cut and long inputs in `input_notes`.
"""

import dataclasses
import time

import keras
import numpy as np

from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import alignment, batch_decoding, encoded_inputs
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.decode.encoded_inputs import XLA_LENGTH_BUCKET, pad_batch


@dataclasses.dataclass
class Translation:
    """The decoded hypotheses of one input line, best first, with their length-normalised scores.

    `source_ids` are the ids the model read (EOS included, cut to max_input_size), `source_length`
    how many the line had before the cut, and `ids` the best hypothesis' ids (EOS included if emitted).
    `alignments`: with write_alignment, each hypothesis' word links (t2t_lite/decode/alignment.py).
    """

    source: str
    hypotheses: list
    scores: list
    source_ids: list = dataclasses.field(default_factory=list)
    source_length: int = 0
    ids: list = dataclasses.field(default_factory=list)
    alignments: list = dataclasses.field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.source_length > len(self.source_ids)

    def line(self, return_beams: bool) -> str:
        """The output line: the best hypothesis, or every beam as `text<TAB>score` fields; each
        hypothesis as `text ||| links` when it has its alignment."""
        texts = self.hypotheses
        if self.alignments:
            texts = [alignment.with_links(text, links) for text, links in zip(texts, self.alignments)]
        if not return_beams:
            return texts[0]
        return "\t".join(f"{text}\t{score:.4f}" for text, score in zip(texts, self.scores))


def translate(model, vocabulary, lines, settings: DecodeHParams, *, progress: bool = True, prefixes=None) -> list:
    """Decodes `lines` (strings) and returns one `Translation` per line, in the input's order.

    `prefixes`: None, or one target prefix per line (raw text, "" for none): that line's
    hypotheses start with the prefix's subwords, and the search continues after them.
    """
    full = [encoded_inputs.encode_line(vocabulary, line, number) for number, line in enumerate(lines, start=1)]
    prefix_ids = (
        None
        if prefixes is None
        else [encoded_inputs.encode_prefix(vocabulary, text, n) for n, text in enumerate(prefixes, 1)]
    )
    encoded = [encoded_inputs.cut(ids, settings.max_input_size) for ids in full]
    encoded_inputs.check_learned_positions(model, encoded, settings.search.extra_length)
    order = sorted(range(len(lines)), key=lambda index: len(encoded[index]))
    results = [None] * len(lines)
    bar = keras.utils.Progbar(len(lines), unit_name="sentence", stateful_metrics=["sentences/s"]) if progress else None
    start = time.time()
    for first in range(0, len(order), settings.batch_size):
        batch = order[first : first + settings.batch_size]
        inputs = pad_batch([encoded[index] for index in batch])
        if settings.search.xla:  # all-padding rows and columns change no sentence's result (each has its own limit)
            inputs = pad_batch(inputs, rows=settings.batch_size, multiple=XLA_LENGTH_BUCKET)
        forced = None
        if prefix_ids is not None:
            multiple = XLA_LENGTH_BUCKET if settings.search.xla else 1
            forced = pad_batch([prefix_ids[index] for index in batch], rows=inputs.shape[0], multiple=multiple)
        ids, scores = _decode(model, inputs, settings, forced)
        links = _alignments(model, vocabulary, inputs, ids, settings)
        for row, index in enumerate(batch):
            usable = [beam for beam in range(ids.shape[1]) if np.isfinite(scores[row, beam])] or [0]
            results[index] = Translation(
                lines[index],
                [vocabulary.decode(ids[row, beam]) for beam in usable],
                [float(scores[row, beam]) for beam in usable],
                encoded[index],
                len(full[index]),
                _until_eos(ids[row, usable[0]]),
                [] if links is None else [links[row, beam] for beam in usable],
            )
        if bar is not None:
            done = first + len(batch)
            bar.update(done, values=[("sentences/s", done / max(time.time() - start, 1e-9))])
    return results


def _decode(model, inputs, settings: DecodeHParams, prefixes=None):
    """(ids [batch, hypotheses, length], scores [batch, hypotheses]): the beams, or each sample in turn."""
    results = [
        batch_decoding.decode_batch(model, inputs, settings.search, return_beams=True, prefixes=prefixes, sample=sample)
        for sample in range(settings.searches)
    ]
    if len(results) == 1:
        return results[0]
    width = max(ids.shape[2] for ids, _ in results)
    ids = np.concatenate([np.pad(ids, [(0, 0), (0, 0), (0, width - ids.shape[2])]) for ids, _ in results], axis=1)
    return ids, np.concatenate([scores for _, scores in results], axis=1)


def _alignments(model, vocabulary, inputs, ids, settings: DecodeHParams):
    """str [batch, hypotheses]: each hypothesis' word links with write_alignment, else None."""
    if not settings.alignment.write_alignment:
        return None
    return alignment.hypothesis_alignments(model, vocabulary, inputs, ids, settings.alignment)


def _until_eos(ids) -> list:
    """A hypothesis' ids up to its first EOS (kept), else without the padding after its last token."""
    ids = [int(i) for i in ids]
    if EOS_ID in ids:
        return ids[: ids.index(EOS_ID) + 1]
    while ids and ids[-1] == 0:
        ids.pop()
    return ids
