"""Training speed: target tokens/s and achieved FLOP/s of the train step on random token ids.

    .venv/bin/python bench/train.py --hparams_set=transformer_tiny,transformer_base \\
        --batch_size=4096 --length=32 --steps=10

Each micro-batch is batch_size // length sentences of `length` random ids (no padding),
so tokens = sentences × length per step; FLOPs per step follow the estimate documented
in t2t_lite/train/flops.py. The first (tracing/compiling) steps are not timed. On x86-64 it runs
TensorFlow's oneDNN kernels, as t2t-trainer does (TF_ENABLE_ONEDNN_OPTS=0 measures Eigen's).
"""

import argparse
import time

from t2t_lite import cpu_features

cpu_features.use_onednn_kernels()  # before TensorFlow loads: it reads the switch then

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.run_dir import model_info
from t2t_lite.train import flops, train_step
from t2t_lite.train.schedule import adam_optimizer  # noqa: E402


def benchmark(hparams_set, overrides, batch_size, length, vocab_size, steps, warmup_steps):
    hparams = registry.hparams(hparams_set).override(overrides).replace(batch_size=batch_size)
    keras.utils.set_random_seed(0)
    model = model_info.build_model(hparams, vocab_size)
    # A set with a linear decay needs a run length; the rate's value does not change a step's time.
    optimizer = adam_optimizer(hparams, train_steps=hparams.learning_rate_decay_steps + warmup_steps + steps)
    step_functions = train_step.StepFunctions(model, optimizer, hparams, tf.distribute.get_strategy())
    sentences = max(1, batch_size // length)
    rng = np.random.default_rng(0)
    batch = {
        name: tf.constant(rng.integers(2, vocab_size, size=(sentences, length)), tf.int32)
        for name in ("inputs", "targets")
    }
    for _ in range(warmup_steps):
        step_functions.train_step(batch).numpy()
    started = time.perf_counter()
    for _ in range(steps):
        sums = step_functions.train_step(batch)
    sums.numpy()
    seconds = (time.perf_counter() - started) / steps
    tokens = sentences * length
    step_flops = flops.flops_per_step(hparams, vocab_size, tokens, length)
    return {
        "hparams_set": hparams_set,
        "params": model.count_params(),
        "tokens/step": tokens,
        "ms/step": 1000 * seconds,
        "tokens/s": tokens / seconds,
        "GFLOP/s": step_flops / seconds / 1e9,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hparams_set", default="transformer_tiny,transformer_base", help="Comma-separated sets.")
    parser.add_argument("--hparams", default="", help="Overrides applied to every set, e.g. activation_dtype=bfloat16.")
    parser.add_argument("--batch_size", type=int, default=4096, help="Tokens per micro-batch (one replica).")
    parser.add_argument("--length", type=int, default=32, help="Source and target length of every sentence.")
    parser.add_argument("--vocab_size", type=int, default=37000, help="The paper's EN-DE shared vocabulary.")
    parser.add_argument("--steps", type=int, default=10, help="Timed steps.")
    parser.add_argument("--warmup_steps", type=int, default=2, help="Untimed steps first (tracing, XLA).")
    args = parser.parse_args()
    print(
        f"device: {tf.config.list_logical_devices()[-1].name}, batch_size={args.batch_size}, "
        f"length={args.length}, vocab_size={args.vocab_size}, hparams='{args.hparams}'"
    )
    for hparams_set in args.hparams_set.split(","):
        result = benchmark(
            hparams_set, args.hparams, args.batch_size, args.length, args.vocab_size, args.steps, args.warmup_steps
        )
        print(
            "  ".join(
                f"{key}={value:,.1f}"
                if isinstance(value, float)
                else f"{key}={value:,}"
                if isinstance(value, int)
                else f"{key}={value}"
                for key, value in result.items()
            )
        )


if __name__ == "__main__":
    main()
