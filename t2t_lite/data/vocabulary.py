"""Subword vocabularies: one BPE vocabulary shared by source and target (§5.1).

§5.1 of the paper encodes WMT14 EN-DE with byte-pair encoding into "a shared
source-target vocabulary of about 37000 tokens" (EN-FR: 32000 word-pieces).
We train that vocabulary with the `sentencepiece` package (model_type=bpe) and
apply it inside the tf.data graph with `tensorflow_text.SentencepieceTokenizer`.

Ids: 0 = padding, 1 = EOS, 2 = unknown; there is no BOS (the decoder's start
symbol is the padding id, as in tensor2tensor).

Normalization, chosen so that real text round-trips: `normalize_text` turns every
run of whitespace (spaces, tabs, newlines, no-break spaces: what `str.split`
splits on) into one space and strips the ends; nothing else changes. SentencePiece
itself runs with the `identity` rule (its default `nmt_nfkc` would rewrite
typographic quotes, ligatures and full-width forms), and `byte_fallback` spells any
character the vocabulary lacks as UTF-8 bytes, so for normalized text
`decode(encode(text)) == text` holds for umlauts, accents, typographic quotes,
digits, URLs and scripts never seen in training.

`SymbolVocabulary` is the fixed vocabulary of the synthetic algorithmic problems,
with the same interface.
"""

import functools
import hashlib
import io
import os
import re
import sys
from typing import TYPE_CHECKING

import numpy as np
import sentencepiece
import tensorflow as tf

from t2t_lite.data import whole_files

if TYPE_CHECKING:
    import tensorflow_text

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
# Reserved ids below the first real symbol of a SymbolVocabulary: pad, EOS.
NUM_RESERVED_IDS = 2
# SentencePiece's mark of the space before a word, on the word's first piece.
WORD_MARK = "\u2581"


@functools.cache
def _whitespace_run() -> str:
    """Every character Python's `str.split()` splits on, as one RE2 class, so the graph version
    of the normalisation equals `normalize_text` exactly (not only for ASCII whitespace). Made on
    first use: the scan of every code point costs a tenth of a second."""
    return "[" + "".join(f"\\x{{{code:x}}}" for code in range(sys.maxunicode + 1) if chr(code).isspace()) + "]+"


def normalize_text(text: str) -> str:
    """The one normalization applied to raw text before it meets the vocabulary."""
    return " ".join(text.split())


def normalize_text_in_graph(strings: tf.Tensor) -> tf.Tensor:
    """`normalize_text` as a TensorFlow op, for raw text tokenized in the graph (e.g. when serving)."""
    collapsed = tf.strings.regex_replace(strings, _whitespace_run(), " ")
    return tf.strings.regex_replace(collapsed, r"^ | $", "")


def train_vocabulary(
    sentences, model_path: str, vocab_size: int, *, max_sentences: int = 1_000_000, whole_pieces=()
) -> "Vocabulary":
    """Trains a shared BPE vocabulary on `sentences` (an iterable of str) and writes `model_path`.

    `max_sentences` caps how many sentences SentencePiece samples (uniformly, with
    shuffling) from a large corpus such as WMT. The vocabulary may come out smaller
    than `vocab_size` when the text is too small to learn that many merges
    (`hard_vocab_limit=False`); the file records the size actually learned.
    `whole_pieces` are words that are always one piece, word-start mark included
    (SentencePiece's user-defined symbols, given as `▁word`), e.g. a linearized tree's
    brackets, which its script rule would otherwise cut in two (`(` is punctuation,
    `NP` Latin) and its word-start mark in three.
    """
    model = io.BytesIO()
    try:
        _train_sentencepiece(
            sentences, model, vocab_size, max_sentences, sorted(WORD_MARK + word for word in whole_pieces)
        )
    except RuntimeError as error:
        # Every byte (256 pieces for byte fallback), the special ids and each character seen need a piece.
        needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(error))
        if not needed:
            raise
        raise ValueError(
            f"A {vocab_size:,}-piece vocabulary is too small for {model_path}: with the 256 byte pieces, the "
            f"special ids and the characters of this text it needs at least {int(needed.group(1)):,}. Ask "
            f"for more (the problem's approx_vocab_size)."
        ) from None
    os.makedirs(os.path.dirname(os.path.abspath(model_path)), exist_ok=True)
    whole_files.write_whole(model_path, model.getvalue())  # a crash never leaves a truncated vocabulary behind
    return Vocabulary(model_path)


def _train_sentencepiece(sentences, model, vocab_size, max_sentences, whole_pieces):
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=(normalize_text(sentence) for sentence in sentences),
        model_writer=model,
        model_type="bpe",
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        pad_id=PAD_ID,
        eos_id=EOS_ID,
        unk_id=UNK_ID,
        bos_id=-1,
        byte_fallback=True,
        character_coverage=0.9999,
        normalization_rule_name="identity",
        remove_extra_whitespaces=True,
        input_sentence_size=max_sentences,
        shuffle_input_sentence=True,
        max_sentence_length=1 << 16,
        minloglevel=2,
        **({"user_defined_symbols": whole_pieces} if whole_pieces else {}),
    )


class DamagedVocabularyError(FileNotFoundError):
    """A vocabulary file that is no SentencePiece model; every tool stops on it as on a missing one."""


def _processor(model_path: str, model_proto: bytes) -> sentencepiece.SentencePieceProcessor:
    """SentencePiece's processor of the file's bytes; a file that holds no model stops, named."""
    try:
        if model_proto:  # an empty file would load as a model "not initialized", of no piece at all
            return sentencepiece.SentencePieceProcessor(model_proto=model_proto)
    except RuntimeError:  # SentencePiece's "INTERNAL: ... ParseFromArray": a file cut short or overwritten
        pass
    raise DamagedVocabularyError(
        f"Vocabulary {model_path} ({len(model_proto):,} bytes) is not a SentencePiece model: it was cut short or "
        f"overwritten. Restore it from a copy (the data beside it, and the models trained on that data, were "
        f"encoded with it); without one, rerun t2t-datagen with --overwrite and train again."
    )


class Vocabulary:
    """A SentencePiece model file: `encode`/`decode` in Python, `tokenizer` inside tf.data."""

    def __init__(self, model_path: str):
        if not os.path.exists(model_path):
            raise FileNotFoundError(
                f"Vocabulary {model_path} does not exist; run t2t-datagen with the same "
                f"--problem and --data_dir to create it."
            )
        self.model_path = model_path
        with open(model_path, "rb") as file:
            self.model_proto = file.read()
        self._processor = _processor(model_path, self.model_proto)
        self._tokenizer = None

    @property
    def vocab_size(self) -> int:
        return self._processor.vocab_size()

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the model file: two vocabularies of the same size still differ here."""
        return "sentencepiece-sha256:" + hashlib.sha256(self.model_proto).hexdigest()

    def encode(self, text: str) -> list:
        """Ids of the normalized text, without EOS."""
        return self._processor.encode(normalize_text(text))

    def decode(self, ids) -> str:
        """Text of `ids`, dropping padding and stopping at the first EOS."""
        ids = [int(i) for i in ids]
        if EOS_ID in ids:
            ids = ids[: ids.index(EOS_ID)]
        return self._processor.decode([i for i in ids if i != PAD_ID])

    def word_pieces(self) -> tuple:
        """(starts, bare) bool [vocab_size]: which ids begin a word of the text, and which are a bare "▁".

        SentencePiece marks the space before a word with "▁" on the word's first piece, so a text's words
        (`str.split()`) are its pieces from one "▁" piece to the next. A bare "▁" piece (before bytes or a
        character written as bytes) begins a word only when something follows it in that word.
        """
        pieces = [self._processor.id_to_piece(index) for index in range(self.vocab_size)]
        processor = self._processor
        special = [processor.is_control(index) or processor.is_unknown(index) for index in range(len(pieces))]
        starts = np.array([piece.startswith(WORD_MARK) and not skip for piece, skip in zip(pieces, special)])
        return starts, np.array([piece == WORD_MARK for piece in pieces])

    @property
    def tokenizer(self) -> "tensorflow_text.SentencepieceTokenizer":
        """The same model as a TensorFlow op: `tokenize(strings)` -> int32 RaggedTensor.

        It expects normalized text (`normalize_text` or `normalize_text_in_graph`).
        """
        if self._tokenizer is None:
            # Imported here, not with the module: loading its ops costs every process that starts a
            # tool about half a second, and the algorithmic problems' SymbolVocabulary never needs them.
            import tensorflow_text

            self._tokenizer = tensorflow_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)
        return self._tokenizer


class SymbolVocabulary:
    """A fixed vocabulary of `num_symbols` symbols written as their numbers "0", "1", ...

    Symbol k has id k + 2 (0 is padding, 1 is EOS). Text is the symbols separated
    by spaces, so `encode("3 1 4") == [5, 3, 6]`.
    """

    def __init__(self, num_symbols: int):
        self.num_symbols = num_symbols
        self.model_proto = None
        self._tokenizer = None

    @property
    def vocab_size(self) -> int:
        return self.num_symbols + NUM_RESERVED_IDS

    @property
    def fingerprint(self) -> str:
        return f"symbols:{self.num_symbols}"

    def encode(self, text: str) -> list:
        ids = []
        for symbol in text.split():
            if not symbol.isdigit() or int(symbol) >= self.num_symbols:
                raise ValueError(f"{symbol!r} is not a symbol of this vocabulary (0..{self.num_symbols - 1}).")
            ids.append(int(symbol) + NUM_RESERVED_IDS)
        return ids

    def decode(self, ids) -> str:
        symbols = []
        for i in ids:
            if int(i) == EOS_ID:
                break
            if int(i) >= NUM_RESERVED_IDS:
                symbols.append(str(int(i) - NUM_RESERVED_IDS))
        return " ".join(symbols)

    def word_pieces(self) -> tuple:
        """(starts, bare) as `Vocabulary.word_pieces`: every symbol is a word of its own."""
        starts = np.arange(self.vocab_size) >= NUM_RESERVED_IDS
        return starts, np.zeros(self.vocab_size, bool)

    @property
    def tokenizer(self) -> "SymbolTokenizer":
        if self._tokenizer is None:
            self._tokenizer = SymbolTokenizer(self.num_symbols)
        return self._tokenizer


class SymbolTokenizer:
    """`SymbolVocabulary` as TensorFlow ops, with the `tokenize`/`detokenize` of tensorflow_text."""

    def __init__(self, num_symbols: int):
        symbols = tf.constant([str(k) for k in range(num_symbols)])
        ids = tf.range(NUM_RESERVED_IDS, num_symbols + NUM_RESERVED_IDS, dtype=tf.int32)
        # There is no unknown symbol here (id 2 is symbol "0"): anything else maps to -1.
        self._to_id = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(symbols, ids), -1)
        self._symbols = symbols

    def tokenize(self, strings):
        return tf.ragged.map_flat_values(self._to_id.lookup, tf.strings.split(strings))

    def detokenize(self, ids):
        """Symbols of `ids` (ragged or dense, [batch, length]) joined by spaces; padding and EOS dropped."""
        if not isinstance(ids, tf.RaggedTensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.ragged.boolean_mask(ids, ids >= NUM_RESERVED_IDS)
        symbols = tf.ragged.map_flat_values(lambda flat: tf.gather(self._symbols, flat - NUM_RESERVED_IDS), ids)
        return tf.strings.reduce_join(symbols, axis=-1, separator=" ")
