"""BPE-dropout (Provilkov et al., 2020): training sentences segmented with some BPE merges skipped.

§5.1 encodes every sentence with byte-pair encoding, which always splits a word the same
way. BPE-dropout applies the same merge table but skips each merge with probability p
while a training sentence is encoded, so one word comes in several segmentations
("Männer", "M ä nner", ...) and the model learns how pieces compose; dev, test and
decoding keep the deterministic encoding. The authors report up to +2.3 BLEU on small
corpora at p = 0.1, trained to convergence. A sampled segmentation is longer (on Multi30k at
p = 0.1: 20.0 pieces per English sentence against 14.3), so a batch of a fixed number of
tokens holds fewer sentences, and a model needs more updates to learn the many segmentations:
in one CPU-hour of Multi30k it scores far below deterministic BPE (docs/results.md, ablations).

The records datagen writes hold ids, not text, so the sampling happens there: the
training split is written `copies` times, each copy of a pair segmented afresh (the
paper samples anew every epoch; with about as many copies as the run has epochs, each
epoch sees new segmentations). SentencePiece implements BPE-dropout as the sampling mode
of a BPE model (`enable_sampling`, `alpha` = p), but `set_random_generator_seed` does not make
it repeatable (sentencepiece 0.2.3: the same seed gives other segmentations in every new
process, forked ones included), so the sampler here is sentencepiece's BPE encoder restated in
Python with a generator of its own (`Segmenter`): the same pieces, scores and merge order, a
merge skipped at the point sentencepiece's sampler skips one, and with p = 0 exactly its
deterministic encoding (tested; on Multi30k's 58,000 training sentences too). At p = 0.1 it
gives as many pieces per sentence as sentencepiece's sampler (Multi30k: 20.0 per English, 21.2
per German sentence against 14.3 and 14.8). Each copy of each side draws from a generator seeded
from SAMPLING_SEED, so two datagen runs on the same raw data write the same files, in any
process on any machine. It is slower than sentencepiece's C++ (Multi30k's 16 copies, 464,000
pairs, take about a minute of one core), and each copy is a full copy of the training split on
disk: meant for small corpora; lower the copies for a large one.

The settings a training split was written with are recorded beside its shards
(`<data_dir>/bpe_dropout.<problem>.json`; no record: deterministic BPE), so a rerun of
datagen with other settings stops instead of reusing shards segmented otherwise.
"""

import collections
import heapq
import itertools
import json
import numbers
import os
import random

from sentencepiece import sentencepiece_model_pb2

from t2t_lite.data import whole_files
from t2t_lite.data.vocabulary import EOS_ID, Vocabulary

SAMPLING_SEED = 1234  # fixed, as datagen's shuffle: the same raw data gives the same files
_PAIRS_PER_BLOCK = 10_000  # pairs held in memory while their copies are encoded
DROP_TOO_LONG_COPY = "too long (sampled copies, counted one by one)"  # datagen's other reasons count raw pairs


def check_settings(dropout: float, copies: int, problem: str) -> None:
    """Fails with the problem's name when its bpe_dropout or bpe_dropout_copies cannot be used."""
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
        raise ValueError(
            f"{problem}: bpe_dropout={dropout} is a probability of skipping a merge; "
            f"set it in [0, 1) (0.1 in Provilkov et al., 2020; 0 turns BPE-dropout off)."
        )
    if dropout and (isinstance(copies, bool) or not isinstance(copies, int) or copies < 1):
        raise ValueError(
            f"{problem}: bpe_dropout_copies={copies}: write at least 1 sampled copy of the "
            f"training split (about as many as the run has epochs)."
        )


def sampled_pairs(
    pairs, vocabulary: Vocabulary, dropout: float, copies: int, drops: collections.Counter, *, max_length: int = 0
):
    """(inputs, targets) id lists ending in EOS: `copies` BPE-dropout segmentations of each normalized pair.

    A sampled copy with a side longer than `max_length` ids (EOS included; 0 = no limit) is
    counted in `drops` as DROP_TOO_LONG_COPY: one count per copy, where datagen's other reasons
    count raw pairs (a pair may then be written in some of its copies and not in others).
    """
    segmenter = Segmenter(vocabulary.model_proto, vocabulary.model_path)
    seeds = itertools.count(SAMPLING_SEED)
    pairs = iter(pairs)
    while block := list(itertools.islice(pairs, _PAIRS_PER_BLOCK)):
        for _ in range(copies):
            source_draws, target_draws = random.Random(next(seeds)), random.Random(next(seeds))
            for source, target in block:
                inputs = segmenter.encode(source, dropout, source_draws) + [EOS_ID]
                outputs = segmenter.encode(target, dropout, target_draws) + [EOS_ID]
                if max_length and max(len(inputs), len(outputs)) > max_length:
                    drops[DROP_TOO_LONG_COPY] += 1
                else:
                    yield inputs, outputs


class Segmenter:
    """SentencePiece's BPE encoder with each merge skipped with probability p, drawn from a given generator.

    As sentencepiece's bpe_model: the normalized sentence starts as its characters; the adjacent
    pair whose concatenation is a piece with the highest score (then the leftmost) is merged,
    and the pairs it forms with its neighbours join the candidates; with probability p a popped
    merge is skipped instead (that pair stays unmerged, as in sentencepiece's BPE-dropout). A
    symbol that is not a piece falls back to its UTF-8 bytes (or, without byte fallback, one
    unknown id per run of them).
    """

    def __init__(self, model_proto: bytes, name: str = "the vocabulary"):
        model = sentencepiece_model_pb2.ModelProto.FromString(model_proto)
        spec, normalizer, types = model.trainer_spec, model.normalizer_spec, model.SentencePiece.Type
        unsupported = [piece.piece for piece in model.pieces if piece.type in (types.USER_DEFINED, types.UNUSED)]
        if (
            spec.model_type != spec.BPE
            or normalizer.name != "identity"
            or spec.treat_whitespace_as_suffix
            or unsupported
        ):
            raise ValueError(
                f"BPE-dropout samples segmentations of t2t_lite's own BPE vocabularies (model_type bpe, "
                f"normalization identity, no user-defined or unused pieces); {name} is not one "
                f"(model_type {spec.model_type}, normalization {normalizer.name!r}, "
                f"{len(unsupported)} user-defined or unused pieces). Let t2t-datagen train the vocabulary."
            )
        self._pieces = {
            piece.piece: (i, piece.score) for i, piece in enumerate(model.pieces) if piece.type == types.NORMAL
        }
        self._bytes = {piece.piece: i for i, piece in enumerate(model.pieces) if piece.type == types.BYTE}
        self._byte_fallback = spec.byte_fallback
        self._unk_id = spec.unk_id
        self._prefix = "▁" if normalizer.add_dummy_prefix else ""

    def encode(self, sentence: str, dropout: float, draws: random.Random) -> list:
        """The ids of one normalized sentence (no EOS), merges skipped with probability `dropout`."""
        # sentencepiece's normalizer: spaces become "▁", and "▁"s at the end, literal ones too, are dropped.
        text = (self._prefix + sentence.replace(" ", "▁")).rstrip("▁")
        return self._ids(self._merge(list(text), dropout, draws)) if text else []

    def _merge(self, symbols: list, dropout: float, draws: random.Random) -> list:
        following = list(range(1, len(symbols))) + [-1]
        preceding = list(range(-1, len(symbols) - 1))
        candidates = []

        def consider(left, right):
            if left >= 0 and right >= 0:
                piece = self._pieces.get(symbols[left] + symbols[right])
                if piece:  # highest score first, then leftmost: heapq pops the smallest tuple
                    heapq.heappush(candidates, (-piece[1], left, right, len(symbols[left]) + len(symbols[right])))

        for left in range(len(symbols) - 1):
            consider(left, left + 1)
        while candidates:
            _, left, right, length = heapq.heappop(candidates)
            if not symbols[left] or not symbols[right] or len(symbols[left]) + len(symbols[right]) != length:
                continue  # a side was merged into something else since this pair was considered
            if dropout and draws.random() < dropout:
                continue
            symbols[left], symbols[right] = symbols[left] + symbols[right], ""
            following[left] = following[right]
            if following[right] >= 0:
                preceding[following[right]] = left
            consider(preceding[left], left)
            consider(left, following[left])
        return [symbol for symbol in symbols if symbol]

    def _ids(self, symbols: list) -> list:
        ids = []
        for symbol in symbols:
            if symbol in self._pieces:
                ids.append(self._pieces[symbol][0])
            elif self._byte_fallback:
                ids.extend(self._bytes[f"<0x{byte:02X}>"] for byte in symbol.encode("utf-8"))
            elif not ids or ids[-1] != self._unk_id:  # sentencepiece writes a run of unknowns as one
                ids.append(self._unk_id)
        return ids


def record_path(data_dir: str, base_name: str) -> str:
    return os.path.join(data_dir, f"bpe_dropout.{base_name}.json")


def settings(dropout: float, copies: int) -> dict:
    """What a training split's segmentation depends on besides the vocabulary and the raw text."""
    if not dropout:
        return {"bpe_dropout": 0.0}
    return {"bpe_dropout": float(dropout), "bpe_dropout_copies": copies, "sampling_seed": SAMPLING_SEED}


def check_reusable(data_dir: str, base_name: str, dropout: float, copies: int) -> None:
    """Stops when the training shards in `data_dir` were segmented with other BPE-dropout settings."""
    path = record_path(data_dir, base_name)
    written = settings(0.0, 0)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as file:
            written = json.load(file)
    if written != settings(dropout, copies):
        raise ValueError(
            f"The {base_name} training files in --data_dir={data_dir} were written with {_describe(written)}, "
            f"but {base_name} now sets {_describe(settings(dropout, copies))}. Rerun t2t-datagen with --overwrite "
            f"to write them afresh (the vocabulary and every split are regenerated), or choose another --data_dir."
        )


def write_record(data_dir: str, base_name: str, dropout: float, copies: int) -> None:
    """Records the settings a training split is about to be written with (before its shards; none: no record)."""
    path = record_path(data_dir, base_name)
    if not dropout:
        if os.path.exists(path):  # left by shards removed by hand
            os.remove(path)
        return
    whole_files.write_whole(path, json.dumps(settings(dropout, copies), sort_keys=True))


def _describe(recorded: dict) -> str:
    if not recorded.get("bpe_dropout"):
        return "bpe_dropout=0 (deterministic BPE)"
    return (
        f"bpe_dropout={recorded['bpe_dropout']}, bpe_dropout_copies={recorded.get('bpe_dropout_copies')} "
        f"(sampling seed {recorded.get('sampling_seed')})"
    )
