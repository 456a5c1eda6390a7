"""t2t-datagen at WMT size: wall time, pairs/s and peak memory on corpora of growing size.

    nice -n 5 .venv/bin/python bench/datagen_scale.py --data=../shared/data --work_dir=$WORK \
        --sizes=250000,1000000,4000000

Builds synthetic parallel corpora from real EN-DE sentence pairs (the WMT sample and
newstest2013 under --data): each synthetic pair joins the first half of one real pair
(the first half of the words of each side) to the second half of another, so sentence
lengths, characters and word frequencies stay those of real text while the pairs
are new. Runs `t2t-datagen --problem=translate_files` on each corpus as a child
process and prints its wall time, pairs per second, peak resident memory (the
child's own, from `os.wait4`) and the number of train shards written, then
extrapolates the time to WMT14 EN-FR's 36 M pairs. Flat memory and linear time are
what the datagen design promises; this shows whether it keeps them.
"""

import argparse
import os
import random
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WMT14_ENFR_PAIRS = 36_000_000
# (source file, target file) of the real pairs under --data, relative to it.
REAL_PAIRS = [
    ("wmt_sample/detok/src-train.detok.en", "wmt_sample/detok/tgt-train.detok.de"),
    ("wmt_sample/detok/src-val.detok.en", "wmt_sample/detok/tgt-val.detok.de"),
    ("newstest2013/newstest2013.en", "newstest2013/newstest2013.de"),
]
DEV_PAIRS = 3000  # real pairs kept aside as the dev split, never spliced into train


def read_real_pairs(data_dir: str) -> list:
    pairs = []
    for source_name, target_name in REAL_PAIRS:
        with (
            open(os.path.join(data_dir, source_name), encoding="utf-8") as sources,
            open(os.path.join(data_dir, target_name), encoding="utf-8") as targets,
        ):
            pairs += [
                (source.strip(), target.strip())
                for source, target in zip(sources, targets)
                if source.strip() and target.strip()
            ]
    return pairs


def halves(sentence: str) -> tuple:
    words = sentence.split()
    middle = (len(words) + 1) // 2
    return " ".join(words[:middle]), " ".join(words[middle:])


def spliced_pair(first: tuple, second: tuple) -> tuple:
    """The first half of each side of `first` joined to the second half of the same side of `second`."""
    return tuple(" ".join(part for part in (halves(a)[0], halves(b)[1]) if part) for a, b in zip(first, second))


def write_corpus(pairs: list, size: int, tmp_dir: str, *, dev_pairs: int = DEV_PAIRS, seed: int = 0) -> None:
    """train.{src,tgt}: `size` spliced pairs, streamed to disk; dev.{src,tgt}: the first `dev_pairs` real pairs."""
    os.makedirs(tmp_dir, exist_ok=True)
    dev, pool = pairs[:dev_pairs], pairs[dev_pairs:]
    rng = random.Random(seed)
    with (
        open(os.path.join(tmp_dir, "train.src"), "w", encoding="utf-8") as sources,
        open(os.path.join(tmp_dir, "train.tgt"), "w", encoding="utf-8") as targets,
    ):
        for _ in range(size):
            source, target = spliced_pair(rng.choice(pool), rng.choice(pool))
            sources.write(source + "\n")
            targets.write(target + "\n")
    with (
        open(os.path.join(tmp_dir, "dev.src"), "w", encoding="utf-8") as sources,
        open(os.path.join(tmp_dir, "dev.tgt"), "w", encoding="utf-8") as targets,
    ):
        for source, target in dev:
            sources.write(source + "\n")
            targets.write(target + "\n")


def run_datagen(tmp_dir: str, data_dir: str) -> tuple:
    """(wall seconds, peak resident MiB) of one t2t-datagen child process."""
    command = [
        sys.executable,
        os.path.join(REPO, "bin", "t2t-datagen"),
        "--problem=translate_files",
        f"--data_dir={data_dir}",
        f"--tmp_dir={tmp_dir}",
    ]
    started = time.time()
    with open(os.path.join(os.path.dirname(data_dir), "datagen.log"), "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        )
        _, status, usage = os.wait4(process.pid, 0)
    seconds = time.time() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"t2t-datagen failed on {tmp_dir}; see {log.name}.")
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def train_shards(data_dir: str) -> int:
    return len([name for name in os.listdir(data_dir) if name.startswith("translate_files-train-")])


def extrapolate_seconds(sizes: list, seconds: list, target: int) -> float:
    """Time for `target` pairs from the two largest runs: their per-pair slope plus the fixed part."""
    if len(sizes) == 1:
        return seconds[0] * target / sizes[0]
    slope = (seconds[-1] - seconds[-2]) / (sizes[-1] - sizes[-2])
    return seconds[-1] + slope * (target - sizes[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="The shared data directory (../shared/data).")
    parser.add_argument("--work_dir", required=True, help="Where corpora and generated data are written.")
    parser.add_argument("--sizes", default="250000,1000000,4000000", help="Comma-separated corpus sizes, in pairs.")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    pairs = read_real_pairs(args.data)
    print(
        f"{len(pairs):,} real pairs ({DEV_PAIRS:,} kept as dev); building spliced corpora of "
        f"{', '.join(f'{size:,}' for size in sizes)} pairs."
    )
    print("| pairs | wall time (s) | pairs/s | peak RSS (MiB) | train shards |")
    print("|---:|---:|---:|---:|---:|")
    seconds = []
    for size in sizes:
        root = os.path.join(args.work_dir, str(size))
        write_corpus(pairs, size, os.path.join(root, "raw"))
        wall, peak = run_datagen(os.path.join(root, "raw"), os.path.join(root, "data"))
        seconds.append(wall)
        shards = train_shards(os.path.join(root, "data"))
        print(f"| {size:,} | {wall:,.0f} | {size / wall:,.0f} | {peak:,.0f} | {shards} |", flush=True)
    estimate = extrapolate_seconds(sizes, seconds, WMT14_ENFR_PAIRS)
    print(f"Extrapolated to WMT14 EN-FR ({WMT14_ENFR_PAIRS:,} pairs): about {estimate / 3600:.1f} h on this machine.")


if __name__ == "__main__":
    main()
