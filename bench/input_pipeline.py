"""Input-pipeline benchmark: examples/s, tokens/s and padding efficiency of token-bucketed batches.

    .venv/bin/python bench/input_pipeline.py --hparams_set=transformer_base \
        --corpus_dir=../shared/data/wmt_sample

The corpus (OpenNMT's WMT sample: src-train.txt / tgt-train.txt / src-val.txt /
tgt-val.txt) is linked as train.src/train.tgt/dev.src/dev.tgt into a temporary
tmp_dir outside the repository and generated with the `translate_files` problem;
then one pass over the chosen split is batched by `batched_dataset`.

Padding efficiency = real tokens / padded tokens, counted over both sides of every
batch (inputs and targets). The longer-side figure counts, per example, only its
longer side against the padded bucket length, i.e. the tokens §5.1 and
tensor2tensor budget a batch by.
"""

import argparse
import os
import platform
import tempfile
import time

import numpy as np

from t2t_lite import registry
from t2t_lite.data import datagen
from t2t_lite.data.input_pipeline import batched_dataset

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_CORPUS_DIR = os.path.join(os.path.dirname(REPO_DIR), "shared", "data", "wmt_sample")
CORPUS_FILES = {
    "src-train.txt": "train.src",
    "tgt-train.txt": "train.tgt",
    "src-val.txt": "dev.src",
    "tgt-val.txt": "dev.tgt",
}


def link_corpus(corpus_dir: str, tmp_dir: str) -> None:
    corpus_dir = os.path.abspath(corpus_dir)  # the links live in tmp_dir
    for name, link in CORPUS_FILES.items():
        if os.path.exists(os.path.join(corpus_dir, name)):
            os.symlink(os.path.join(corpus_dir, name), os.path.join(tmp_dir, link))


def measure(dataset) -> dict:
    """Counts over one pass of `dataset`; the first batch (graph building) is not timed."""
    iterator = dataset.as_numpy_iterator()
    first = next(iterator)
    totals = dict(batches=0, examples=0, real=0, padded=0, longer_real=0, longer_padded=0)
    shapes = set()
    start = time.perf_counter()
    for batch in [first, *iterator]:
        inputs, targets = batch["inputs"], batch["targets"]
        shapes.add((inputs.shape, targets.shape))
        input_lengths, target_lengths = (inputs > 0).sum(axis=1), (targets > 0).sum(axis=1)
        totals["batches"] += 1
        totals["examples"] += len(inputs)
        totals["real"] += int(input_lengths.sum() + target_lengths.sum())
        totals["padded"] += inputs.size + targets.size
        totals["longer_real"] += int(np.maximum(input_lengths, target_lengths).sum())
        totals["longer_padded"] += len(inputs) * max(inputs.shape[1], targets.shape[1])
    totals["seconds"] = time.perf_counter() - start
    totals["shapes"] = len(shapes)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="translate_files")
    parser.add_argument("--hparams_set", default="transformer_base")
    parser.add_argument("--hparams", default="")
    parser.add_argument("--mode", default="train", choices=["train", "dev", "test"])
    parser.add_argument(
        "--corpus_dir",
        default=DEFAULT_CORPUS_DIR,
        help="OpenNMT's WMT sample (default ../shared/data/wmt_sample beside the checkout)",
    )
    parser.add_argument("--data_dir", default="", help="Reuse generated data here (default: a temporary dir).")
    args = parser.parse_args()
    if not args.data_dir and not os.path.isfile(os.path.join(args.corpus_dir, "src-train.txt")):
        parser.error(
            f"--corpus_dir={args.corpus_dir} has no src-train.txt; point it at OpenNMT's WMT sample "
            f"(src-train.txt, tgt-train.txt, src-val.txt, tgt-val.txt)."
        )

    hparams = registry.hparams(args.hparams_set).override(args.hparams)
    problem = registry.problem(args.problem)
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = args.data_dir or os.path.join(scratch, "data")
        if not args.data_dir:  # reused data are read as they are (its raw files are not the corpus here)
            tmp_dir = os.path.join(scratch, "tmp")
            os.makedirs(tmp_dir)
            link_corpus(args.corpus_dir, tmp_dir)
            datagen.generate(problem, data_dir, tmp_dir)
        # One pass (repeat=False) in training order: shuffled, long examples dropped.
        dataset = batched_dataset(problem, args.mode, data_dir, hparams, repeat=False, seed=1)
        totals = measure(dataset)

    seconds = totals["seconds"]
    print(
        f"machine: {platform.node()} ({os.cpu_count()} CPUs), problem {args.problem}, mode {args.mode}, "
        f"hparams {args.hparams_set} {args.hparams} (batch_size={hparams.batch_size}, "
        f"max_length={hparams.max_length}, min_length_bucket={hparams.min_length_bucket}, "
        f"length_bucket_step={hparams.length_bucket_step})"
    )
    print(f"batches {totals['batches']}, examples {totals['examples']}, distinct batch shapes {totals['shapes']}")
    print(
        f"examples/s {totals['examples'] / seconds:,.0f}   tokens/s {totals['real'] / seconds:,.0f} (real, both sides)"
    )
    print(f"padding efficiency (both sides): {totals['real'] / totals['padded']:.1%}")
    print(f"padding efficiency (longer side): {totals['longer_real'] / totals['longer_padded']:.1%}")


if __name__ == "__main__":
    main()
