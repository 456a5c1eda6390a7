"""The machine's fp32 matrix-multiply peak in TensorFlow, the yardstick for a train step's FLOP/s.

    .venv/bin/python bench/matmul_peak.py [--threads=2] [--sizes=1024,2048,4096] [--repeats=5]
    .venv/bin/python bench/matmul_peak.py --dtype=bfloat16     # the yardstick of a bfloat16 step

Square float32 (or bfloat16: oneDNN uses AMX where the CPU has it) products C = A·B of
n×n matrices, each timed alone after one untimed call; FLOP/s = 2·n³ / seconds (one multiply and one add per term), and the peak is the
best over every size and repeat. TensorFlow gets the same 2 intra-op / 2 inter-op
threads as the benchmarked training steps (bench/peer_project.py). Prints one JSON line.
"""

import argparse
import json
import os
import time

THREADS = 2
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, str(THREADS))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def matmul_flops_per_s(size: int, repeats: int, dtype: str = "float32") -> list:
    """FLOP/s of each of `repeats` timed n×n products (the result is fetched, so it is done)."""
    a = tf.cast(tf.random.stateless_uniform([size, size], seed=[1, 2]), dtype)
    b = tf.cast(tf.random.stateless_uniform([size, size], seed=[3, 4]), dtype)
    product = tf.function(lambda: tf.reduce_sum(tf.cast(tf.linalg.matmul(a, b), tf.float32)))
    product().numpy()
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        product().numpy()
        rates.append(2.0 * size**3 / (time.perf_counter() - started))
    return rates


def measure(sizes, repeats, dtype="float32") -> dict:
    """{"matmul_peak_flops_per_s": best, "by_size": {n: best for n}} over the given sizes."""
    by_size = {str(size): max(matmul_flops_per_s(size, repeats, dtype)) for size in sizes}
    return {"matmul_peak_flops_per_s": max(by_size.values()), "by_size": by_size, "dtype": dtype,
            "threads": tf.config.threading.get_intra_op_parallelism_threads(), "repeats": repeats}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=THREADS, help="TF intra- and inter-op threads")
    parser.add_argument("--sizes", default="1024,2048,4096", help="comma-separated matrix sizes n")
    parser.add_argument("--repeats", type=int, default=5, help="timed products per size")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="operand dtype")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    print(json.dumps(measure([int(size) for size in args.sizes.split(",")], args.repeats, args.dtype)), flush=True)


if __name__ == "__main__":
    main()
