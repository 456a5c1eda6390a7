"""The machine's fp32 matrix-multiply peak in TensorFlow, the yardstick for a train step's FLOP/s.

    .venv/bin/python bench/matmul_peak.py [--threads=2] [--sizes=1024,2048,4096] [--repeats=5]
    .venv/bin/python bench/matmul_peak.py --dtype=bfloat16     # the yardstick of a bfloat16 step
    .venv/bin/python bench/matmul_peak.py --step_shapes [--xla]  # the base train step's own products

Square float32 (or bfloat16: oneDNN uses AMX where the CPU has it) products C = A·B of
n×n matrices, each timed alone after one untimed call; FLOP/s = 2·n³ / seconds (one multiply and one add per term), and the peak is the
best over every size and repeat. TensorFlow gets the same 2 intra-op / 2 inter-op
threads as the benchmarked training steps (bench/peer_project.py). Prints one JSON line.

`--step_shapes` times instead the products a transformer_base training step on the peers'
base batch (512 tokens) is made of, forward and backward (C = A·B, Aᵀ·B and A·Bᵀ, as automatic
differentiation writes them), each `--repeats` times as a batch of 8 (2 for the vocabulary
projection) distinct products in one call so call overhead does not count; `--xla` compiles
them with XLA, as `xla_compile=true` does the step. `matmul_only_flops_per_s` weighs them by
their count per step: the FLOP/s of a step that did nothing but its products, each at its own
best rate, the most any implementation of that step reaches with these kernels.
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


# (name, M, K, N, transpose_a, transpose_b, count per step): the products of one transformer_base
# training step on 512 tokens (16 × 32), forward and backward. 72 d×d projections: 6 encoder
# layers × 4 (Q, K, V, O) + 6 decoder layers × 8; 12 feed-forward layers; one vocabulary projection.
# Their FLOPs sum to 6 · 512 · P_matmul of trainer.flops_per_step (193.5 G of its 195.3 G; the
# rest are the attention products, 32 positions long).
STEP_SHAPES = (
    ("projection d×d", 512, 512, 512, False, False, 72),
    ("projection, dW = Xᵀ·dY", 512, 512, 512, True, False, 72),
    ("projection, dX = dY·Wᵀ", 512, 512, 512, False, True, 72),
    ("FFN inner d×d_ff", 512, 512, 2048, False, False, 12),
    ("FFN inner, dW = Xᵀ·dY", 512, 512, 2048, True, False, 12),
    ("FFN inner, dX = dY·Wᵀ", 512, 2048, 512, False, True, 12),
    ("FFN outer d_ff×d", 512, 2048, 512, False, False, 12),
    ("FFN outer, dW = Xᵀ·dY", 2048, 512, 512, True, False, 12),
    ("FFN outer, dX = dY·Wᵀ", 512, 512, 2048, False, True, 12),
    ("vocabulary projection d×V (h·Eᵀ)", 512, 512, 37000, False, True, 1),
    ("vocabulary, dh = dz·E", 512, 37000, 512, False, False, 1),
    ("vocabulary, dE = dzᵀ·h", 37000, 512, 512, True, False, 1),
)


def step_shape_flops_per_s(m, k, n, transpose_a, transpose_b, repeats, xla) -> list:
    """FLOP/s of `repeats` calls, each of `batch` distinct products of the given shape."""
    batch = 2 if max(m, k, n) > 4096 else 8
    a_shape = [k, m] if transpose_a else [m, k]
    a = [tf.random.stateless_uniform(a_shape, seed=[i, 1]) for i in range(batch)]
    b = tf.random.stateless_uniform([n, k] if transpose_b else [k, n], seed=[0, 2])

    @tf.function(jit_compile=xla)
    def products(a, b):  # every product is an output, so each is computed and nothing else is
        return [tf.linalg.matmul(x, b, transpose_a=transpose_a, transpose_b=transpose_b) for x in a]

    products(a, b)[0].numpy()
    rates = []
    for _ in range(repeats):
        started = time.perf_counter()
        products(a, b)[-1].numpy()
        rates.append(2.0 * m * k * n * batch / (time.perf_counter() - started))
    return rates


def measure_step_shapes(repeats, xla) -> dict:
    """Best FLOP/s of each of STEP_SHAPES, and of all of them in their per-step counts: the
    FLOP/s of a step that did nothing but its matrix products, each at its own best rate."""
    rates, flops, seconds = {}, 0.0, 0.0
    for name, m, k, n, transpose_a, transpose_b, count in STEP_SHAPES:
        rates[name] = max(step_shape_flops_per_s(m, k, n, transpose_a, transpose_b, repeats, xla))
        flops += count * 2.0 * m * k * n
        seconds += count * 2.0 * m * k * n / rates[name]
    return {"step_shapes": rates, "matmul_only_step_flops": flops, "matmul_only_step_s": seconds,
            "matmul_only_flops_per_s": flops / seconds, "xla": xla, "dtype": "float32",
            "threads": tf.config.threading.get_intra_op_parallelism_threads(), "repeats": repeats}


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
    parser.add_argument("--step_shapes", action="store_true", help="time the base train step's products instead")
    parser.add_argument("--xla", action="store_true", help="with --step_shapes: compile the products with XLA")
    args = parser.parse_args()
    if args.xla and not args.step_shapes:
        parser.error("--xla applies to --step_shapes only")
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.step_shapes:
        print(json.dumps(measure_step_shapes(args.repeats, args.xla), ensure_ascii=False), flush=True)
        return
    print(json.dumps(measure([int(size) for size in args.sizes.split(",")], args.repeats, args.dtype)), flush=True)


if __name__ == "__main__":
    main()
