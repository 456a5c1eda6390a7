"""BPE-dropout (Provilkov et al., 2020): training sentences segmented with some BPE merges skipped.

§5.1 encodes every sentence with byte-pair encoding, which always splits a word the same
way. BPE-dropout applies the same merge table but skips each merge with probability p
while a training sentence is encoded, so one word comes in several segmentations
("Männer", "M ä nner", ...) and the model learns how pieces compose; dev, test and
decoding keep the deterministic encoding. The authors report up to +2.3 BLEU on small
corpora at p = 0.1, trained to convergence. A sampled segmentation is longer (on Multi30k at
p = 0.1: 20.0 pieces per English sentence against 14.3), so a batch of a fixed number of
tokens holds fewer sentences, and a model needs more updates to learn the many segmentations:
in one CPU-hour of Multi30k it scored 23.13 val BLEU in 5,232 updates against 39.43 in 5,841
without it (docs/results.md).

The records datagen writes hold ids, not text, so the sampling happens there: the
training split is written `copies` times, each copy of a pair segmented afresh (the
paper samples anew every epoch; with about as many copies as the run has epochs, each
epoch sees new segmentations). SentencePiece implements BPE-dropout as the sampling mode
of a BPE model (`enable_sampling`, `alpha` = p). Each encoding call draws from one thread's
generator seeded afresh from the seed set beforehand, so every call gets a seed of its own
(the same seed would give every copy the same segmentation), and two datagen runs on the
same raw data write the same files. Each copy is a full copy of the training split on disk
and one thread encodes them: meant for small corpora; lower the copies for a large one.

The settings a training split was written with are recorded beside its shards
(`<data_dir>/bpe_dropout.<problem>.json`; no record: deterministic BPE), so a rerun of
datagen with other settings stops instead of reusing shards segmented otherwise.
"""

import collections
import itertools
import json
import numbers
import os

import sentencepiece

from t2t_lite.vocabulary import EOS_ID, Vocabulary

SAMPLING_SEED = 1234  # fixed, as datagen's shuffle: the same raw data gives the same files
_PAIRS_PER_BLOCK = 10_000  # pairs held in memory while their copies are encoded
DROP_TOO_LONG_COPY = "too long (sampled copies, counted one by one)"  # datagen's other reasons count raw pairs


def check_settings(dropout: float, copies: int, problem: str) -> None:
    """Fails with the problem's name when its bpe_dropout or bpe_dropout_copies cannot be used."""
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"{problem}: bpe_dropout={dropout} is a probability of skipping a merge; "
                         f"set it in [0, 1) (0.1 in Provilkov et al., 2020; 0 turns BPE-dropout off).")
    if dropout and (isinstance(copies, bool) or not isinstance(copies, int) or copies < 1):
        raise ValueError(f"{problem}: bpe_dropout_copies={copies}: write at least 1 sampled copy of the "
                         f"training split (about as many as the run has epochs).")


def sampled_pairs(pairs, vocabulary: Vocabulary, dropout: float, copies: int, drops: collections.Counter, *,
                  max_length: int = 0):
    """(inputs, targets) id lists ending in EOS: `copies` BPE-dropout segmentations of each normalized pair.

    A sampled copy with a side longer than `max_length` ids (EOS included; 0 = no limit) is
    counted in `drops` as DROP_TOO_LONG_COPY: one count per copy, where datagen's other reasons
    count raw pairs (a pair may then be written in some of its copies and not in others).
    """
    processor = sentencepiece.SentencePieceProcessor(model_proto=vocabulary.model_proto)
    seeds = itertools.count(SAMPLING_SEED)
    pairs = iter(pairs)
    while block := list(itertools.islice(pairs, _PAIRS_PER_BLOCK)):
        sources, targets = [source for source, _ in block], [target for _, target in block]
        for _ in range(copies):
            sampled_sources = _sample(processor, sources, dropout, next(seeds))
            sampled_targets = _sample(processor, targets, dropout, next(seeds))
            for inputs, outputs in zip(sampled_sources, sampled_targets):
                inputs, outputs = inputs + [EOS_ID], outputs + [EOS_ID]
                if max_length and max(len(inputs), len(outputs)) > max_length:
                    drops[DROP_TOO_LONG_COPY] += 1
                else:
                    yield inputs, outputs


def _sample(processor, sentences: list, dropout: float, seed: int) -> list:
    # One thread: with several, sentences draw from the generators in a varying order (measured:
    # two runs with the same seed differed), and the files would differ from run to run.
    sentencepiece.set_random_generator_seed(seed)
    return processor.encode(sentences, enable_sampling=True, alpha=dropout, nbest_size=-1, num_threads=1)


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
            f"to write them afresh (the vocabulary and every split are regenerated), or choose another --data_dir.")


def write_record(data_dir: str, base_name: str, dropout: float, copies: int) -> None:
    """Records the settings a training split is about to be written with (before its shards; none: no record)."""
    path = record_path(data_dir, base_name)
    if not dropout:
        if os.path.exists(path):  # left by shards removed by hand
            os.remove(path)
        return
    with open(path + ".incomplete", "w", encoding="utf-8") as file:
        json.dump(settings(dropout, copies), file, sort_keys=True)
    os.replace(path + ".incomplete", path)


def _describe(recorded: dict) -> str:
    if not recorded.get("bpe_dropout"):
        return "bpe_dropout=0 (deterministic BPE)"
    return (f"bpe_dropout={recorded['bpe_dropout']}, bpe_dropout_copies={recorded.get('bpe_dropout_copies')} "
            f"(sampling seed {recorded.get('sampling_seed')})")
