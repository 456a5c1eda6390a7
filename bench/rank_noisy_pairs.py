"""Corpus filtering by score: a split's true pairs mixed with as many mismatched ones, ranked by log P(target | source).

    .venv/bin/python bench/rank_noisy_pairs.py --problem=translate_ende_gettext --data_dir=$DATA \
        --output_dir=$TRAIN/averaged [--split=test --seed=1]

The split's pairs (the detokenized ids of its TFRecords, as `t2t-decoder --decode_split` reads
them) are joined by the same number of noise pairs: each source with the target of another pair
(a random permutation without fixed points, `--seed`). Every pair is scored as `t2t-decoder
--score_file` scores it (`t2t_lite.decode.scoring`), and ranked two ways: by log P(target |
source), and by it divided by the target's subwords and EOS (per-token, which does not favour
short targets). Prints, for each ranking, how many true pairs are among the top half (as many as
there are true pairs) and the probability that a true pair outranks a noise pair (ROC AUC).
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.decode import decode_settings, model_loading, scoring  # noqa: E402
from t2t_lite.run_dir import model_info  # noqa: E402


def derangement(count: int, rng) -> np.ndarray:
    """A random permutation of range(count) that moves every index."""
    while True:
        order = rng.permutation(count)
        if not np.any(order == np.arange(count)):
            return order


def ranking_figures(scores: np.ndarray, is_true: np.ndarray) -> tuple:
    """(true pairs in the top len(true) by score, P(a true pair's score > a noise pair's score))."""
    top = np.argsort(-scores, kind="stable")[: is_true.sum()]
    true, noise = scores[is_true], scores[~is_true]
    wins = (true[:, None] > noise[None, :]).mean() + 0.5 * (true[:, None] == noise[None, :]).mean()
    return int(is_true[top].sum()), float(wins)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--output_dir", required=True, help="the trained (or averaged) model's directory")
    parser.add_argument("--split", default="test")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    problem = registry.problem(args.problem)
    vocabulary = problem.vocabulary(args.data_dir)
    hparams = model_info.read_hparams(args.output_dir)
    pairs = [
        (vocabulary.decode(example["inputs"]), vocabulary.decode(example["targets"]))
        for example in problem.dataset(args.split, args.data_dir).as_numpy_iterator()
    ]
    shuffled = derangement(len(pairs), np.random.default_rng(args.seed))
    noisy = pairs + [(pairs[index][0], pairs[other][1]) for index, other in enumerate(shuffled)]
    is_true = np.arange(len(noisy)) < len(pairs)
    model = model_loading.load_model_for_decoding(problem, hparams, args.data_dir, args.output_dir)
    scores = scoring.score_pairs(model, vocabulary, noisy, decode_settings.DecodeHParams.of(batch_size=64))
    total = np.array([score.log_probability for score in scores])
    per_token = total / np.array([len(score.per_token) for score in scores])
    print(f"{len(pairs)} true pairs of {args.problem} {args.split} and {len(pairs)} mismatched ones (seed {args.seed})")
    print("| ranked by | true pairs in the top half | P(true outranks mismatched) |")
    print("|---|---:|---:|")
    for name, values in (("log P(target | source)", total), ("log P per target subword", per_token)):
        top, auc = ranking_figures(values, is_true)
        print(f"| {name} | {top} of {len(pairs)} ({100 * top / len(pairs):.1f} %) | {auc:.4f} |")


if __name__ == "__main__":
    sys.exit(main())
