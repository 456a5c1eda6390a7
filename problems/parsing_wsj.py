"""parsing_wsj: English constituency parsing on the WSJ Penn Treebank as translation (§6.3).

§6.3 trains a 4-layer Transformer "on the Wall Street Journal (WSJ) portion of the
Penn Treebank, about 40K training sentences", with a 16K-token vocabulary, beam 21,
α = 0.3 and a maximum output length of input length + 300. Inputs are the words of
a sentence; targets are its tree linearized as in Vinyals & Kaiser et al. (2015),
see `t2t_lite.data.trees`.

The treebank is licensed by the LDC (LDC99T42), so the user supplies it:

    <tmp_dir>/wsj/00/wsj_0001.mrg ... <tmp_dir>/wsj/24/wsj_2454.mrg
    (treebank_3/parsed/mrg/wsj from the LDC release, copied as is)

With that standard layout the standard split is used: sections 02-21 train,
22 dev, 23 test (00, 01 and 24 are not used). Any other set of `.mrg` files under
`<tmp_dir>/wsj` (e.g. NLTK's 10% sample) is split by file: a file goes to dev when
the MD5 of its name modulo 20 is 0, to test when it is 1, else to train.

A learning curve trains on a share of the training trees: a subclass with `train_percent` p < 100
keeps tree i of the train split's n (in file order) when ⌊(i+1)·p/100⌋ > ⌊i·p/100⌋, so ⌊n·p/100⌋ trees
spread evenly over every file; a share of every k-th tree lies inside one of every j-th when j divides k
(25 % keeps every fourth tree, 50 % every second: 25 % ⊂ 50 % ⊂ 100 %). Dev and test stay whole.
`bench/parsing.sh`'s TRAIN_PERCENT registers such a subclass.

A split's `.mrg` files are the raw files t2t-datagen records (`t2t_lite.data.raw_fingerprint`):
a rerun after one of them changed, or one was added or removed, stops and names it;
`--overwrite` regenerates.
"""

import glob
import hashlib
import os

from t2t_lite.data import trees
from t2t_lite.problem import TextProblem
from t2t_lite.registry import register_problem

STANDARD_SECTIONS = {
    "train": [f"{section:02d}" for section in range(2, 22)],
    "dev": ["22"],
    "test": ["23"],
}


def mrg_files(tmp_dir: str) -> list:
    """Every .mrg file under <tmp_dir>/wsj, maybe none."""
    return sorted(glob.glob(os.path.join(tmp_dir, "wsj", "**", "*.mrg"), recursive=True))


def treebank_files(tmp_dir: str) -> list:
    """`mrg_files`; an error says where to put them when there are none."""
    root = os.path.join(tmp_dir, "wsj")
    files = mrg_files(tmp_dir)
    if not files:
        raise FileNotFoundError(
            f"No Penn Treebank files (*.mrg) under {root}. The WSJ treebank is LDC-licensed (LDC99T42): "
            f"copy its treebank_3/parsed/mrg/wsj directory there, as {root}/NN/wsj_NNNN.mrg "
            f"(sections 02-21 train, 22 dev, 23 test)."
        )
    return files


def split_files(files: list, tmp_dir: str, *, note_layout: bool = True) -> dict:
    """split -> files: the standard WSJ sections when present, else a split by file-name hash, said aloud."""
    root = os.path.join(tmp_dir, "wsj")
    by_section = {}
    for path in files:
        by_section.setdefault(os.path.relpath(os.path.dirname(path), root), []).append(path)
    standard = [section for sections in STANDARD_SECTIONS.values() for section in sections]
    missing = [section for section in standard if section not in by_section]
    if not missing:
        return {
            split: [path for section in sections for path in by_section[section]]
            for split, sections in STANDARD_SECTIONS.items()
        }
    # Said aloud: a partial or nested copy of the treebank would otherwise score on another test set.
    if note_layout:
        print(
            f"parsing_wsj: {root} lacks the standard sections {', '.join(missing)} (expected {root}/NN/*.mrg "
            f"for NN = 02-23), so the files are split by name hash: the test set is not section 23 and "
            f"scores are not comparable with §6.3."
        )
    splits = {"train": [], "dev": [], "test": []}
    for path in files:
        bucket = int(hashlib.md5(os.path.basename(path).encode("utf-8")).hexdigest(), 16) % 20
        splits["dev" if bucket == 0 else "test" if bucket == 1 else "train"].append(path)
    return splits


def evenly_spaced_share(items: list, percent: int) -> list:
    """The items i with ⌊(i+1)·percent/100⌋ > ⌊i·percent/100⌋: ⌊n·percent/100⌋ of n, spread over the list."""
    if not isinstance(percent, int) or isinstance(percent, bool) or not 1 <= percent <= 100:
        raise ValueError(f"train_percent={percent!r}: give a whole number of percent from 1 to 100.")
    return [item for i, item in enumerate(items) if (i + 1) * percent // 100 > i * percent // 100]


def tree_pairs(paths) -> list:
    """(words, linearized tree) pairs of every tree in `paths`, traces and function tags removed."""
    pairs = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            for tree in trees.read_trees(file.read(), source=path):
                tree = trees.clean(tree)
                if tree is not None:
                    pairs.append((" ".join(trees.words(tree)), trees.linearize(tree)))
    return pairs


@register_problem
class ParsingWsj(TextProblem):
    """WSJ constituency parsing: words -> linearized tree (§6.3)."""

    eval_metrics = ["bracket_f1"]
    approx_vocab_size = 16000
    train_percent = 100  # the share of the training trees kept (a learning curve's point); dev and test stay whole

    def decode_defaults(self) -> dict:
        return {"beam_size": 21, "alpha": 0.3, "extra_length": 300}  # §6.3

    def whole_pieces(self) -> frozenset:
        return trees.linearized_symbols()

    def raw_files(self, tmp_dir: str, split: str) -> list:
        files = mrg_files(tmp_dir)
        return split_files(files, tmp_dir, note_layout=False)[split] if files else []

    def text_pairs(self, tmp_dir: str, split: str):
        # The layout note is about the test set, so it is said when that split is read: once per datagen.
        pairs = tree_pairs(split_files(treebank_files(tmp_dir), tmp_dir, note_layout=split == "test")[split])
        return evenly_spaced_share(pairs, self.train_percent) if split == "train" else pairs


@register_problem
class ParsingWsj4k(ParsingWsj):
    """parsing_wsj with a 4K vocabulary, for a sample of the treebank such as NLTK's 10 % (3,914 trees).

    §6.3's 16K vocabulary is learned on 40K sentences. On the sample's 96K words (12K word types,
    half of them seen once) 16K pieces are whole words, most seen once and untrained; 4K pieces
    keep the frequent words whole and spell the rare ones in pieces seen often (the tensor2tensor
    analogue is parsing_english_ptb8k beside ptb16k).
    """

    approx_vocab_size = 4000
