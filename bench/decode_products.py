"""The products of one beam-search step at transformer_base, under XLA, in each precision the decoder offers.

    .venv/bin/python bench/decode_products.py                 # 128 rows (32 sentences × beam 4), ~1 min
    .venv/bin/python bench/decode_products.py --rows=640 --repeats=10

A cached beam-4 step of 32 sentences multiplies 128 rows by each decoder layer's projections
(512 × 512; the FFN's 512 × 2,048 and 2,048 × 512) and by the vocabulary projection
(512 × 37,000). Each shape is timed as XLA compiles it (`jit_compile=True`, 2 threads) in the
three forms t2t_lite/decode/quantization.py can give it:

    float32     tf.matmul(float32, float32)                                 (quantize='')
    int8        tf.matmul(int8, int8, output_type=int32)                    (quantize=int8)
    bfloat16    tf.matmul(bfloat16, bfloat16, output_type=float32)          (quantize=bfloat16)

and, for reference, the plain bfloat16 product (bfloat16 output), which XLA's CPU backend
turns into a float32 product between conversions. `--repeats` products run in one call
(each on a different input, so none is skipped) and the best of `--calls` calls counts.
Only the products: the quantization and rounding of the activations are not timed.
Prints one JSON line: milliseconds per product and GOP/s (2 · rows · k · n / s) per shape and form,
and `step_ms`, one decoder step's products (PER_STEP) per `quantize` mode; then, on stderr, which
mode multiplies fastest on this CPU.
"""

import argparse
import json
import os
import platform
import sys
import time

THREADS = 2
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, str(THREADS))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SHAPES = {
    "projection 512x512": (512, 512),
    "FFN in 512x2048": (512, 2048),
    "FFN out 2048x512": (2048, 512),
    "vocabulary 512x37000": (512, 37000),
}
# How many of each shape one cached step of transformer_base's decoder multiplies: per layer (6) the
# self-attention's Q, K, V, O and the encoder-decoder attention's Q and O (its K and V are the
# encoder's, once per call), and the FFN's two; the vocabulary projection once.
PER_STEP = {"projection 512x512": 36, "FFN in 512x2048": 6, "FFN out 2048x512": 6, "vocabulary 512x37000": 1}
# form -> (operand dtype, the product of a and b)
FORMS = {
    "float32": (tf.float32, lambda a, b: tf.matmul(a, b)),
    "int8": (tf.int8, lambda a, b: tf.matmul(a, b, output_type=tf.int32)),
    "bfloat16 (float32 output)": (tf.bfloat16, lambda a, b: tf.matmul(a, b, output_type=tf.float32)),
    "bfloat16 (bfloat16 output)": (tf.bfloat16, lambda a, b: tf.matmul(a, b)),
}
# The forms that --decode_hparams=quantize= gives a product, by its value.
QUANTIZE = {"": "float32", "int8": "int8", "bfloat16": "bfloat16 (float32 output)"}


def operands(rows, k, n, dtype, repeats, rng):
    """`repeats` distinct left operands [rows, k] and one right operand [k, n] of `dtype`."""
    if dtype == tf.int8:
        return (
            tf.constant(rng.integers(-127, 128, size=(repeats, rows, k)), tf.int8),
            tf.constant(rng.integers(-127, 128, size=(k, n)), tf.int8),
        )
    return (
        tf.cast(tf.constant(rng.normal(size=(repeats, rows, k)), tf.float32), dtype),
        tf.cast(tf.constant(rng.normal(size=(k, n)) / np.sqrt(k), tf.float32), dtype),
    )


def best_seconds_per_product(product, lefts, right, calls):
    repeats = lefts.shape[0]

    @tf.function(jit_compile=True)
    def many(lefts, right):  # a scalar from every product, so each is computed and little else is
        return tf.add_n([tf.reduce_sum(tf.cast(product(lefts[i], right)[:, :1], tf.float32)) for i in range(repeats)])

    many(lefts, right).numpy()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        many(lefts, right).numpy()
        times.append((time.perf_counter() - start) / repeats)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=128, help="rows of the left operand (sentences × beam)")
    parser.add_argument("--repeats", type=int, default=20, help="products per timed call (5 for the vocabulary)")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per shape and form; the best counts")
    args = parser.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)
    rng = np.random.default_rng(0)
    result = {
        "rows": args.rows,
        "threads": THREADS,
        "tensorflow": tf.__version__,
        "machine": platform.processor() or platform.machine(),
        "shapes": {},
    }
    for name, (k, n) in SHAPES.items():
        repeats = max(1, args.repeats // 4) if n > 4096 else args.repeats
        figures = {}
        for form, (dtype, product) in FORMS.items():
            lefts, right = operands(args.rows, k, n, dtype, repeats, rng)
            seconds = best_seconds_per_product(product, lefts, right, args.calls)
            figures[form] = {
                "ms": round(1e3 * seconds, 3),
                "gop_per_s": round(2 * args.rows * k * n / seconds / 1e9, 1),
            }
        result["shapes"][name] = figures
    result["step_ms"] = step_milliseconds(result["shapes"])
    print(json.dumps(result))
    print(advice(result["step_ms"], args.rows), file=sys.stderr)


def step_milliseconds(shapes) -> dict:
    """quantize value -> milliseconds of one decoder step's products (PER_STEP of each shape) in that form."""
    return {
        mode: round(sum(count * shapes[name][form]["ms"] for name, count in PER_STEP.items()), 2)
        for mode, form in QUANTIZE.items()
    }


def advice(step_ms, rows: int) -> str:
    """Which --decode_hparams=quantize= multiplies fastest on this CPU, with each mode's step time."""
    fastest = min(step_ms, key=step_ms.get)
    times = ", ".join(f"{QUANTIZE[mode].split()[0]} {ms:.1f} ms" for mode, ms in step_ms.items())
    choice = f"xla=true,quantize={fastest}" if fastest else "xla=true (float32: leave quantize empty)"
    return (
        f"The products of one decoder step at transformer_base, {rows} rows ({times}), are fastest here with "
        f"--decode_hparams={choice}; a step is mostly its products, so the decoder ranks the same."
    )


if __name__ == "__main__":
    main()
