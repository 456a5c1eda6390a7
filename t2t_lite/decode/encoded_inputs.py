"""Input lines as the model reads them: subword ids with EOS, cut where asked, padded into batches.

A line is encoded with the problem's vocabulary and EOS appended, as training examples are;
with `max_input_size` N a longer line keeps its first N − 1 ids and EOS (tensor2tensor's
name). Batches are 0-padded (padding is id 0, masked out by attention, §3.2.3); for XLA they
are padded further to a multiple of `XLA_LENGTH_BUCKET` positions, so a file needs a few
compilations, not one per sentence length.
"""

import numpy as np

from t2t_lite.data.vocabulary import EOS_ID

# With xla=True, batches are padded to batch_size rows and to a multiple of this many source
# positions, so a file needs a few compilations, not one per sentence length.
XLA_LENGTH_BUCKET = 16


class BadInputError(ValueError):
    """An input line the model cannot decode; the message names the line."""


class BadPrefixError(BadInputError):
    """A target prefix line the vocabulary cannot encode; the message names the line."""


class InputTooLongError(BadInputError):
    """An input line longer than the model's learned position table."""


def encode_line(vocabulary, line: str, number: int) -> list:
    """The ids of input line `number` and EOS; BadInputError names the line if the vocabulary refuses it."""
    try:
        return vocabulary.encode(line) + [EOS_ID]
    except ValueError as error:  # e.g. a word that is no symbol of an algorithmic problem
        raise BadInputError(f"input line {number}: {error}") from None


def encode_prefix(vocabulary, text: str, number: int) -> list:
    """The ids of target prefix `number` (no EOS: the translation goes on after it)."""
    try:
        return vocabulary.encode(text)
    except ValueError as error:
        raise BadPrefixError(f"prefix line {number}: {error}") from None


def cut(ids, max_input_size):
    """The first max_input_size - 1 ids and EOS (0 = all of them)."""
    if not max_input_size or len(ids) <= max_input_size:
        return ids
    return ids[: max_input_size - 1] + [EOS_ID]


def pad_batch(sequences, rows=0, multiple=1) -> np.ndarray:
    """Sequences as a 0-padded int32 batch of at least `rows` rows, its length a multiple of `multiple`."""
    length = max(len(sequence) for sequence in sequences)
    batch = np.zeros((max(len(sequences), rows), -(-length // multiple) * multiple), np.int32)
    for row, sequence in enumerate(sequences):
        batch[row, : len(sequence)] = sequence
    return batch


def check_learned_positions(model, encoded, extra_length):
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
