"""The machine's fp32 matrix-multiply peak in TensorFlow, the yardstick for a train step's FLOP/s.

    .venv/bin/python bench/matmul_peak.py [--threads=2] [--sizes=1024,2048,4096] [--repeats=5]
    .venv/bin/python bench/matmul_peak.py --dtype=bfloat16     # the yardstick of a bfloat16 step
    .venv/bin/python bench/matmul_peak.py --step_shapes [--xla]  # the base train step's own products

Square float32 (or bfloat16: oneDNN uses AMX where the CPU has it) products C = A·B of
n×n matrices, each timed alone after one untimed call; FLOP/s = 2·n³ / seconds (one multiply and one add
per term), and the peak is the best over every size and repeat. TensorFlow gets the same 2 intra-op / 2 inter-op
threads as the benchmarked training steps (bench/peer_project.py). Prints one JSON line.

`--step_shapes` times instead the products one training step of `--hparams_set` is made of
on `--tokens` source and as many target tokens (default: transformer_base on the peers' base batch,
512 tokens), forward and backward (C = A·B, Aᵀ·B and A·Bᵀ, as automatic differentiation writes
them), each distinct shape `--repeats` times as a batch of 8 (2 for the vocabulary projection)
distinct products in one call so call overhead does not count; `--xla` compiles them with XLA, as
`xla_compile=true` does the step. `matmul_only_flops_per_s` weighs them by their count per step:
the FLOP/s of a step that did nothing but its products, each at its own best rate, the most any
implementation of that step reaches with these kernels.
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


# --step_shapes without a model: transformer_base on the peers' base batch (16 × 32 tokens).
STEP_DEFAULTS = {"hparams_set": "transformer_base", "tokens": 512, "vocab_size": 37000}


def step_shapes(hparams, vocab_size: int, tokens: int) -> list:
    """(name, M, K, N, transpose_a, transpose_b, count per step) of every product of one training step.

    Each weight matrix W [k, n] of the model is used once per token forward (X·W) and twice
    backward (dW = Xᵀ·dY, dX = dY·Wᵀ): the query, key, value and output projections of every
    attention layer (the encoder's self-attention, the decoder's self- and encoder-decoder
    attention), both feed-forward layers, and the shared embedding as the pre-softmax projection
    (h·Eᵀ, E [vocab, d]). Their FLOPs sum to 6 · tokens · flops.matmul_parameters; the attention
    products themselves (length long, a few per cent of the step) are not among them.
    """
    d, kc, vc, ff = hparams.hidden_size, hparams.key_channels, hparams.value_channels, hparams.filter_size
    attentions = hparams.encoder_layers + 2 * hparams.decoder_layers
    feed_forwards = hparams.encoder_layers + hparams.decoder_layers
    weights = (
        ("query and key projections", d, kc, 2 * attentions),
        ("value projection", d, vc, attentions),
        ("output projection", vc, d, attentions),
        ("FFN inner", d, ff, feed_forwards),
        ("FFN outer", ff, d, feed_forwards),
    )
    shapes = []  # forward, then dW, then dX of each weight
    for name, k, n, count in weights:
        shapes += [
            (f"{name} X·W", tokens, k, n, False, False, count),
            (f"{name}, dW = Xᵀ·dY", k, tokens, n, True, False, count),
            (f"{name}, dX = dY·Wᵀ", tokens, n, k, False, True, count),
        ]
    return shapes + [
        ("vocabulary projection h·Eᵀ", tokens, d, vocab_size, False, True, 1),
        ("vocabulary, dE = dzᵀ·h", vocab_size, tokens, d, True, False, 1),
        ("vocabulary, dh = dz·E", tokens, vocab_size, d, False, False, 1),
    ]


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


def measure_step_shapes(shapes, repeats, xla) -> dict:
    """Best FLOP/s of each distinct shape of `shapes` (see step_shapes), and of all of them in their
    per-step counts: the FLOP/s of a step that did nothing but its matrix products, each at its own
    best rate."""
    rates, by_shape, flops, seconds = {}, {}, 0.0, 0.0
    for name, m, k, n, transpose_a, transpose_b, count in shapes:
        shape = (m, k, n, transpose_a, transpose_b)
        if shape not in by_shape:  # e.g. the Q, K, V and O projections when d_k·h = d_v·h = d_model
            by_shape[shape] = max(step_shape_flops_per_s(*shape, repeats, xla))
        rates[name] = by_shape[shape]
        flops += count * 2.0 * m * k * n
        seconds += count * 2.0 * m * k * n / rates[name]
    return {
        "step_shapes": rates,
        "matmul_only_step_flops": flops,
        "matmul_only_step_s": seconds,
        "matmul_only_flops_per_s": flops / seconds,
        "xla": xla,
        "dtype": "float32",
        "threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "repeats": repeats,
    }


def measure(sizes, repeats, dtype="float32") -> dict:
    """{"matmul_peak_flops_per_s": best, "by_size": {n: best for n}} over the given sizes."""
    by_size = {str(size): max(matmul_flops_per_s(size, repeats, dtype)) for size in sizes}
    return {
        "matmul_peak_flops_per_s": max(by_size.values()),
        "by_size": by_size,
        "dtype": dtype,
        "threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "repeats": repeats,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=THREADS, help="TF intra- and inter-op threads")
    parser.add_argument("--sizes", default="1024,2048,4096", help="comma-separated matrix sizes n")
    parser.add_argument("--repeats", type=int, default=5, help="timed products per size")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="operand dtype")
    parser.add_argument("--step_shapes", action="store_true", help="time a train step's products instead")
    for name, what in (
        ("hparams_set", "the model"),
        ("tokens", "source (= target) tokens per step"),
        ("vocab_size", "the shared vocabulary"),
    ):
        parser.add_argument(
            f"--{name}",
            type=type(STEP_DEFAULTS[name]),
            default=None,
            help=f"with --step_shapes: {what} (default {STEP_DEFAULTS[name]})",
        )
    parser.add_argument("--xla", action="store_true", help="with --step_shapes: compile the products with XLA")
    args = parser.parse_args()
    step_flags = ["--xla"] * args.xla + [f"--{name}" for name in STEP_DEFAULTS if getattr(args, name) is not None]
    if step_flags and not args.step_shapes:
        parser.error(f"{', '.join(step_flags)}: only with --step_shapes")
    for name in ("tokens", "vocab_size"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: must be a positive number")
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    if args.step_shapes:
        from t2t_lite import registry  # after the thread settings above

        model = {
            name: default if getattr(args, name) is None else getattr(args, name)
            for name, default in STEP_DEFAULTS.items()
        }
        shapes = step_shapes(registry.hparams(model["hparams_set"]), model["vocab_size"], model["tokens"])
        result = dict(measure_step_shapes(shapes, args.repeats, args.xla), **model)
        print(json.dumps(result, ensure_ascii=False), flush=True)
        return
    print(json.dumps(measure([int(size) for size in args.sizes.split(",")], args.repeats, args.dtype)), flush=True)


if __name__ == "__main__":
    main()
