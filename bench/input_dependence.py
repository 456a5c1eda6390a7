"""Does a trained model read its input? Dev NLL with each pair's own source against another pair's.

    .venv/bin/python bench/input_dependence.py --problem=parsing_wsj4k --data_dir=WORK/data \
        --output_dir=WORK/train --checkpoints=500,1000,2000

A sequence-to-sequence model can lower its dev perplexity by learning the target language alone;
these two measurements tell that apart from learning the mapping, per checkpoint:

    own     = −(1/|T|) Σ_pairs log P(y | x)               (teacher-forced NLL per target token)
    shifted = −(1/|T|) Σ_pairs log P(y_i | x_{i+1 mod n})  (each target given the next pair's source)
    spread  = mean over model dimensions of the standard deviation of the encoder's output
              over all real source positions of the first batch

shifted − own is what the source is worth to the model, in nats per token: 0 means its predictions
do not depend on the source at all. A spread near 0 beside it says why: the encoder writes the same
vector at every position of every sentence, so the encoder-decoder attention has nothing to read.
Prints a Markdown table, a row per checkpoint.
"""

import argparse
import math
import os

import numpy as np
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.decode import model_loading
from t2t_lite.decode.encoded_inputs import pad_batch
from t2t_lite.train import loss

BATCH = 16


def split_pairs(problem, data_dir: str, split: str) -> list:
    """[(source ids, target ids)] of a split, in file order."""
    return [(example["inputs"], example["targets"]) for example in problem.dataset(split, data_dir).as_numpy_iterator()]


def shifted(pairs: list) -> list:
    """Each target with the next pair's source (the last with the first's)."""
    return [(pairs[(index + 1) % len(pairs)][0], target) for index, (_, target) in enumerate(pairs)]


def nll_per_token(model, pairs: list) -> float:
    """Teacher-forced −log P(target | source) per non-padding target token, without label smoothing."""
    total, tokens = 0.0, 0.0
    for first in range(0, len(pairs), BATCH):
        batch = pairs[first : first + BATCH]
        inputs, targets = (tf.constant(pad_batch([pair[side] for pair in batch])) for side in (0, 1))
        _, nll_sum, count = loss.padded_cross_entropy(model({"inputs": inputs, "targets": targets}), targets, 0.0)
        total, tokens = total + float(nll_sum), tokens + float(count)
    return total / tokens


def encoder_spread(model, pairs: list) -> float:
    """Mean over dimensions of the encoder output's standard deviation over the first batch's real positions."""
    output, mask = model.encode(tf.constant(pad_batch([source for source, _ in pairs[:BATCH]])))
    output = output.numpy()
    real = np.asarray(mask).astype(bool).reshape(output.shape[:2])
    return float(output[real].std(axis=0).mean())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--data_dir", required=True)
    parser.add_argument("--output_dir", required=True, help="the run directory (its hparams.json and checkpoints)")
    parser.add_argument("--checkpoints", required=True, help="comma-separated steps, e.g. 500,1000,2000")
    parser.add_argument("--split", default="dev")
    args = parser.parse_args(argv)
    problem = registry.problem(args.problem)
    hparams = model_loading.load_hparams("", "", args.output_dir)
    paths = [f"{args.output_dir}/ckpt-{int(step)}" for step in args.checkpoints.split(",")]
    missing = [path for path in paths if not os.path.exists(path + ".index")]
    if missing:
        parser.error(f"--checkpoints: no checkpoint {', '.join(missing)} (give steps the run saved)")
    pairs = split_pairs(problem, args.data_dir, args.split)
    if len(pairs) < 2:
        parser.error(f"--split={args.split}: {len(pairs)} pair(s) in {args.data_dir}; shifting sources needs two")
    print(f"{args.split}: {len(pairs)} pairs")
    print("| checkpoint | NLL, own source | NLL, the next pair's source | difference | encoder output spread |")
    print("|---|---:|---:|---:|---:|")
    for path in paths:
        step = path.rsplit("-", 1)[1]
        model = model_loading.load_model_for_decoding(problem, hparams, args.data_dir, path)
        own, other = nll_per_token(model, pairs), nll_per_token(model, shifted(pairs))
        print(
            f"| {int(step):,} | {own:.4f} (ppl {math.exp(own):.2f}) | {other:.4f} (ppl {math.exp(other):.2f}) | "
            f"{other - own:+.4f} | {encoder_spread(model, pairs):.2e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
