"""Decoding text with a trained model: what `t2t-decoder` does (§6.1, §6.3).

Sentences are encoded with the problem's vocabulary (plus EOS), sorted by length so
each batch holds sentences of similar length (less padding), decoded with
`t2t_lite.decode.batch_decoding.decode_batch` (beam search with the paper's length penalty and a
key/value cache), and written back in the input's order, one output line per input
line. Decoding settings come from the hparams set, then the problem's defaults
(e.g. parsing: beam 21, α 0.3, +300), then `--decode_hparams`. With `max_input_size`, a
longer input is cut to its first ids and EOS, and `truncation_note` names the lines cut.
Reading and writing files and stdin is in `decode_files`; the attention of a decoded line,
read back through the model, in `t2t_lite.insights.attention_readout`.
"""

import dataclasses
import math
import time

import keras
import numpy as np

from t2t_lite import registry
from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.decode import batch_decoding, quantization, sampling
from t2t_lite.hparam import HParamsError, parse_overrides
from t2t_lite.run_dir import model_info

# With xla=True, batches are padded to batch_size rows and to a multiple of this many source
# positions, so a file needs a few compilations, not one per sentence length.
XLA_LENGTH_BUCKET = 16


class BadInputError(ValueError):
    """An input line the model cannot decode; the message names the line."""


class InputTooLongError(BadInputError):
    """An input line longer than the model's learned position table."""


@dataclasses.dataclass(frozen=True)
class DecodeHParams:
    """Settings of one decoding run (`--decode_hparams="beam_size=4,alpha=0.6"`)."""

    beam_size: int = 4  # Beam width; 1 = greedy.
    alpha: float = 0.6  # Length penalty exponent α of ((5+|Y|)/6)^α.
    extra_length: int = 50  # Maximum output length = input length + extra_length.
    batch_size: int = 32  # Sentences decoded together.
    return_beams: bool = False  # Write every beam with its score (n-best), not only the best.
    xla: bool = False  # Compile the whole search with XLA: one compilation per padded batch shape.
    max_input_size: int = 0  # Longer inputs are cut to this many ids (EOS included), and named; 0 = no cut.
    quantize: str = (
        ""  # "int8" or "bfloat16" product weights after restoring (t2t_lite/decode/quantization.py); "" = float32.
    )
    score_per_token: bool = False  # --score_file: each subword's log-probability after the sum.
    # Sampling (tensor2tensor's names): "random" draws each token instead of searching (beam_size does not apply).
    sampling_method: str = "argmax"  # "argmax": the search above; "random": t2t_lite/decode/sampling.py.
    sampling_temp: float = 1.0  # Temperature of the draws; 0 = argmax.
    sampling_keep_top_k: int = -1  # Draw among the k most probable tokens; -1 = all.
    sampling_seed: int = 1  # Fixes every draw: the same seed gives the same samples.
    num_samples: int = 1  # Samples per input, written like return_beams (each with its log-probability).

    def __post_init__(self):
        quantization.check_mode(self.quantize)
        cut_ok = self.max_input_size == 0 or self.max_input_size >= 2
        if self.beam_size < 1 or self.batch_size < 1 or self.extra_length < 0 or not cut_ok:
            raise ValueError(
                f"--decode_hparams: beam_size and batch_size must be ≥ 1, extra_length ≥ 0 and "
                f"max_input_size 0 (no cut) or ≥ 2 (a token and EOS) (got {self})."
            )
        check_length_penalty(self.alpha)
        if self.sampling_method not in ("argmax", "random"):
            raise ValueError(f"--decode_hparams: sampling_method={self.sampling_method}: use argmax or random.")
        if not 0 <= self.sampling_temp < math.inf or self.sampling_keep_top_k == 0 or self.sampling_keep_top_k < -1:
            raise ValueError(
                f"--decode_hparams: sampling_temp must be ≥ 0 and finite and sampling_keep_top_k ≥ 1 or -1 (all) "
                f"(got {self.sampling_temp}, {self.sampling_keep_top_k})."
            )
        if self.num_samples < 1 or (self.num_samples > 1 and self.sampling_method != "random"):
            raise ValueError(
                f"--decode_hparams: num_samples={self.num_samples}: at least 1, and above 1 only with "
                f"sampling_method=random (argmax gives the same translation every time)."
            )

    def samplings(self) -> list:
        """One `sampling.Sampling` per sample, or [None] for the search (argmax)."""
        if self.sampling_method != "random":
            return [None]
        top_k = max(self.sampling_keep_top_k, 0)
        return [
            sampling.Sampling(self.sampling_temp, top_k, self.sampling_seed, sample)
            for sample in range(self.num_samples)
        ]

    @property
    def writes_several(self) -> bool:
        """Whether an output line holds several hypotheses with their scores (return_beams or samples)."""
        return self.return_beams or self.num_samples > 1


def check_length_penalty(alpha: float) -> None:
    """Refuses an α of the length penalty that is negative, infinite or NaN (`--decode_hparams`)."""
    if not 0.0 <= alpha < math.inf:  # NaN fails every comparison
        raise ValueError(
            f"--decode_hparams: alpha={alpha}: the length penalty's exponent must be a finite number ≥ 0 "
            f"(0 = no penalty; the paper's 0.6)."
        )


def decode_hparams(hparams, problem, overrides: str = "") -> DecodeHParams:
    """The hparams' decode defaults, then the problem's, then `overrides` (--decode_hparams)."""
    settings = {"beam_size": hparams.beam_size, "alpha": hparams.alpha, "extra_length": hparams.extra_length}
    settings.update(problem.decode_defaults())
    try:
        settings.update(parse_overrides(DecodeHParams, overrides))
        return DecodeHParams(**settings)
    except ValueError as error:  # HParamsError too: say which flag to fix
        message = str(error)
        raise HParamsError(
            message if message.startswith("--decode_hparams") else f"--decode_hparams: {message}"
        ) from None


def load_hparams(hparams_set: str, overrides: str, model_dir: str):
    """--hparams_set (+ --hparams) if given, else the hparams.json the trainer wrote beside the checkpoints."""
    if hparams_set:
        return registry.hparams(hparams_set).override(overrides)
    return model_info.read_hparams(model_dir).override(overrides)


@dataclasses.dataclass
class Translation:
    """The decoded hypotheses of one input line, best first, with their length-normalised scores.

    `source_ids` are the ids the model read (EOS included, cut to max_input_size), `source_length`
    how many the line had before the cut, and `ids` the best hypothesis' ids (EOS included if emitted).
    """

    source: str
    hypotheses: list
    scores: list
    source_ids: list = dataclasses.field(default_factory=list)
    source_length: int = 0
    ids: list = dataclasses.field(default_factory=list)

    @property
    def truncated(self) -> bool:
        return self.source_length > len(self.source_ids)

    def line(self, return_beams: bool) -> str:
        """The output line: the best hypothesis, or every beam as `text<TAB>score` fields."""
        if not return_beams:
            return self.hypotheses[0]
        return "\t".join(f"{text}\t{score:.4f}" for text, score in zip(self.hypotheses, self.scores))


def translate(model, vocabulary, lines, settings: DecodeHParams, *, progress: bool = True, prefixes=None) -> list:
    """Decodes `lines` (strings) and returns one `Translation` per line, in the input's order.

    `prefixes`: None, or one target prefix per line (raw text, "" for none): that line's
    hypotheses start with the prefix's subwords, and the search continues after them.
    """
    full = [encode_line(vocabulary, line, number) for number, line in enumerate(lines, start=1)]
    prefix_ids = (
        None if prefixes is None else [encode_prefix(vocabulary, text, n) for n, text in enumerate(prefixes, 1)]
    )
    encoded = [_cut(ids, settings.max_input_size) for ids in full]
    _check_learned_positions(model, encoded, settings.extra_length)
    order = sorted(range(len(lines)), key=lambda index: len(encoded[index]))
    results = [None] * len(lines)
    bar = keras.utils.Progbar(len(lines), unit_name="sentence", stateful_metrics=["sentences/s"]) if progress else None
    start = time.time()
    for first in range(0, len(order), settings.batch_size):
        batch = order[first : first + settings.batch_size]
        inputs = pad_batch([encoded[index] for index in batch])
        if settings.xla:  # all-padding rows and columns change no sentence's result (each has its own limit)
            inputs = pad_batch(inputs, rows=settings.batch_size, multiple=XLA_LENGTH_BUCKET)
        forced = None
        if prefix_ids is not None:
            multiple = XLA_LENGTH_BUCKET if settings.xla else 1
            forced = pad_batch([prefix_ids[index] for index in batch], rows=inputs.shape[0], multiple=multiple)
        ids, scores = _decode(model, inputs, settings, forced)
        for row, index in enumerate(batch):
            usable = [beam for beam in range(ids.shape[1]) if np.isfinite(scores[row, beam])] or [0]
            results[index] = Translation(
                lines[index],
                [vocabulary.decode(ids[row, beam]) for beam in usable],
                [float(scores[row, beam]) for beam in usable],
                encoded[index],
                len(full[index]),
                _until_eos(ids[row, usable[0]]),
            )
        if bar is not None:
            done = first + len(batch)
            bar.update(done, values=[("sentences/s", done / max(time.time() - start, 1e-9))])
    return results


def _decode(model, inputs, settings: DecodeHParams, prefixes=None):
    """(ids [batch, hypotheses, length], scores [batch, hypotheses]): the beams, or each sample in turn."""
    results = [
        batch_decoding.decode_batch(
            model,
            inputs,
            beam_size=1 if draw else settings.beam_size,
            alpha=settings.alpha,
            extra_length=settings.extra_length,
            return_beams=True,
            xla=settings.xla,
            sampling=draw,
            prefixes=prefixes,
        )
        for draw in settings.samplings()
    ]
    if len(results) == 1:
        return results[0]
    width = max(ids.shape[2] for ids, _ in results)
    ids = np.concatenate([np.pad(ids, [(0, 0), (0, 0), (0, width - ids.shape[2])]) for ids, _ in results], axis=1)
    return ids, np.concatenate([scores for _, scores in results], axis=1)


def encode_prefix(vocabulary, text: str, number: int) -> list:
    """The ids of target prefix `number` (no EOS: the translation goes on after it)."""
    try:
        return vocabulary.encode(text)
    except ValueError as error:
        raise BadInputError(f"prefix line {number}: {error}") from None


def encode_line(vocabulary, line: str, number: int) -> list:
    """The ids of input line `number` and EOS; BadInputError names the line if the vocabulary refuses it."""
    try:
        return vocabulary.encode(line) + [EOS_ID]
    except ValueError as error:  # e.g. a word that is no symbol of an algorithmic problem
        raise BadInputError(f"input line {number}: {error}") from None


def _cut(ids, max_input_size):
    """The first max_input_size - 1 ids and EOS (0 = all of them)."""
    if not max_input_size or len(ids) <= max_input_size:
        return ids
    return ids[: max_input_size - 1] + [EOS_ID]


def _until_eos(ids) -> list:
    """A hypothesis' ids up to its first EOS (kept), else without the padding after its last token."""
    ids = [int(i) for i in ids]
    if EOS_ID in ids:
        return ids[: ids.index(EOS_ID) + 1]
    while ids and ids[-1] == 0:
        ids.pop()
    return ids


def truncation_note(translations, settings: DecodeHParams, noun: str = "input line", shown: int = 5) -> str:
    """A line naming the inputs cut to max_input_size ("" if none was), so no cut goes unsaid."""
    numbers = [number for number, translation in enumerate(translations, start=1) if translation.truncated]
    if not numbers:
        return ""
    nouns, listed = _listed(numbers, noun, shown)
    return (
        f"Truncated {len(numbers)} {nouns} to their first {settings.max_input_size - 1} ids and EOS "
        f"(--decode_hparams max_input_size={settings.max_input_size}): {nouns} {listed}."
    )


def _listed(numbers: list, noun: str, shown: int) -> tuple:
    """(the noun, plural for several; the first `shown` line numbers, "and N more" for the rest)."""
    listed = ", ".join(map(str, numbers[:shown]))
    if len(numbers) > shown:
        listed += f" and {len(numbers) - shown} more"
    return (noun if len(numbers) == 1 else noun + "s"), listed


def pad_batch(sequences, rows=0, multiple=1) -> np.ndarray:
    """Sequences as a 0-padded int32 batch of at least `rows` rows, its length a multiple of `multiple`."""
    length = max(len(sequence) for sequence in sequences)
    batch = np.zeros((max(len(sequences), rows), -(-length // multiple) * multiple), np.int32)
    for row, sequence in enumerate(sequences):
        batch[row, : len(sequence)] = sequence
    return batch


def _check_learned_positions(model, encoded, extra_length):
    """Learned positions (pos=emb) end at their table: a longer input would have no encoding."""
    position = getattr(model, "source_position", None)
    if position is None or position.kind != "emb":
        return
    for number, ids in enumerate(encoded, start=1):
        if len(ids) + extra_length > position.max_positions:
            raise InputTooLongError(
                f"input line {number} has {len(ids)} ids (EOS included); with extra_length={extra_length} its "
                f"decoding would need {len(ids) + extra_length} positions, but the learned position table "
                f"(pos=emb) has {position.max_positions}. Shorten or split the line, lower extra_length, or cut "
                f"long lines with --decode_hparams=max_input_size={position.max_positions - extra_length}."
            )


def max_input_ids(model, hparams, settings: DecodeHParams) -> tuple:
    """(the most ids, EOS included, a sentence may have, why): the page refuses longer ones.

    max_input_size if --decode_hparams sets it; else a learned position table's size less
    extra_length (pos=emb); else the longest example the model was trained on (hparams
    max_length, 0 meaning batch_size as in training), as longer sentences are extrapolation.
    """
    if settings.max_input_size:
        return settings.max_input_size, "--decode_hparams max_input_size"
    position = getattr(model, "source_position", None)
    if position is not None and position.kind == "emb":
        return position.max_positions - settings.extra_length, "the learned position table less extra_length"
    return hparams.max_length or hparams.batch_size, "the longest example it was trained on, hparams max_length"


def longer_than_trained_note(translations, limit: int, reason: str, noun: str = "input line", shown: int = 5) -> str:
    """A warning naming the inputs longer than `limit` ids that were read whole ("" if none was).

    Beyond the longest example trained on, a model extrapolates (positions it never saw, attention
    over more keys than ever): the translation may still be good, but the user should know which.
    """
    numbers = [
        number
        for number, translation in enumerate(translations, start=1)
        if not translation.truncated and len(translation.source_ids) > limit
    ]
    if not numbers:
        return ""
    nouns, listed = _listed(numbers, noun, shown)
    return (
        f"Warning: {len(numbers)} {nouns} had more than {limit} ids (EOS included), more than {reason} ({limit}), "
        f"and were read whole: {nouns} {listed}. Their translations are extrapolation; "
        f"--decode_hparams=max_input_size={limit} would cut them instead."
    )


def input_note(translation: Translation) -> str:
    """Says that the model read a cut input ("" if it read all of it)."""
    if not translation.truncated:
        return ""
    return (
        f"The input had {translation.source_length} ids (EOS included); the model read its first "
        f"{len(translation.source_ids) - 1} and EOS (max_input_size)."
    )


def load_model_for_decoding(
    problem, hparams, data_dir: str, checkpoint_path_or_dir: str, model_name: str = "transformer", quantize: str = ""
):
    """The model of `checkpoint_path_or_dir`, sized by the problem's vocabulary, its products quantized as asked."""
    vocabulary = problem.vocabulary(data_dir)
    model = model_info.restore_model(
        checkpoint_path_or_dir,
        hparams,
        vocabulary.vocab_size,
        model_name,
        problem.name,
        getattr(vocabulary, "fingerprint", None),
    )
    return quantization.quantize_for_decoding(model, quantize)
