"""Screens Multi30k settings on an accelerator at a fixed update count, before CPU-hours go to them.

The Multi30k recipe is judged by one CPU-hour of `bench/multi30k.sh`; each of its runs costs that hour.
This script trains the same model the same way for a given number of updates on a GPU (under
`KERAS_BACKEND=jax`: no TensorFlow needed) and scores val, so that the CPU runs go to the changes
that a screen ranks first. What is the same as `t2t-trainer`: the `Transformer` (t2t_lite/model/transformer.py),
`padded_cross_entropy` (t2t_lite/train/loss.py), Adam with the set's β1, β2, ε, eq. 3 with tensor2tensor's
linear decay over the last `learning_rate_decay_steps` updates (t2t_lite/train/schedule.py), token batches
of `batch_size` per side bucketed by the longer side (t2t_lite/data/input_pipeline.py's boundaries, both
sides padded to the bucket, as under `xla_compile`), the SentencePiece vocabulary (give the one
`t2t-datagen` wrote) and the ids (pad 0, EOS 1). What differs, so these are screen figures and not
the recipe's: greedy decoding of val instead of beam 4 (scored with sacreBLEU against the raw
references), a shuffle of the whole training set per epoch instead of a shuffle buffer, optax's
Adam, float32 with the accelerator's default matmul precision, no checkpoints, no averaging.

    KERAS_BACKEND=jax python bench/screen_gpu.py --corpus DIR --vocab vocab.model --updates 4700 \
        --config 'base:learning_rate_decay_steps=2000' --config 'ar01:...,attention_dropout=0.1'

Each `--config NAME:OVERRIDES[@UPDATES]` (overrides on `--hparams_set`, "k=v,..."; `@UPDATES`
replaces `--updates` for that one, e.g. a smaller model that a CPU-hour holds more updates of)
runs in its own process, all at once, sharing the accelerator. Each prints one JSON line: dev
perplexity every `--eval_every` updates, greedy val sacreBLEU and chrF2, seconds.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EOS_ID = 1  # t2t_lite.data.vocabulary.EOS_ID, restated: this script runs on a machine without TensorFlow


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, help="directory with train.en, train.TARGET, val.en, val.TARGET")
    parser.add_argument("--target", default="de")
    parser.add_argument("--vocab", required=True, help="the SentencePiece model t2t-datagen wrote (vocab.*.model)")
    parser.add_argument(
        "--vocab_for",
        action="append",
        default=[],
        help="NAME=PATH: another vocabulary for config NAME (a vocabulary-size row)",
    )
    parser.add_argument("--hparams_set", default="transformer_multi30k_hour")
    parser.add_argument("--config", action="append", required=True, help="NAME:OVERRIDES[@UPDATES]")
    parser.add_argument("--updates", type=int, required=True)
    parser.add_argument("--eval_every", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default="", help="directory for one NAME.json per config")
    parser.add_argument("--one", default="", help=argparse.SUPPRESS)  # a child process: this config only
    return parser.parse_args(argv)


def split_config(text, default_updates):
    """'name:k=v,...@N' -> (name, overrides, updates)."""
    name, _, rest = text.partition(":")
    overrides, _, updates = rest.partition("@")
    return name, overrides, int(updates) if updates else default_updates


def main(argv=None):
    args = parse_args(argv)
    if args.one:
        print(json.dumps(run_one(args, *split_config(args.one, args.updates))), flush=True)
        return
    names = [split_config(c, args.updates)[0] for c in args.config]
    if len(set(names)) != len(names):
        sys.exit(f"screen_gpu.py: --config names must differ (got {names})")
    # Each process takes a share of the accelerator's memory instead of JAX's default 75 %.
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": f"{0.9 / len(args.config):.3f}",
    }
    children = [
        subprocess.Popen(
            [sys.executable, __file__, *argv_of(args), "--one", config], env=env, stdout=subprocess.PIPE, text=True
        )
        for config in args.config
    ]
    failed = 0
    for config, child in zip(args.config, children):
        output, _ = child.communicate()
        if child.returncode:
            failed += 1
            print(
                f"screen_gpu.py: config {config!r} failed (exit {child.returncode}); its stderr is above",
                file=sys.stderr,
            )
        print(output.strip().splitlines()[-1] if output.strip() else "", flush=True)
    sys.exit(1 if failed else 0)


def argv_of(args):
    argv = [
        "--corpus",
        args.corpus,
        "--target",
        args.target,
        "--vocab",
        args.vocab,
        "--hparams_set",
        args.hparams_set,
        "--updates",
        str(args.updates),
        "--eval_every",
        str(args.eval_every),
        "--seed",
        str(args.seed),
        "--out",
        args.out,
    ]
    for item in args.vocab_for:
        argv += ["--vocab_for", item]
    for config in args.config:
        argv += ["--config", config]
    return argv


# -- One configuration, in its own process -------------------------------------------------------


def import_t2t_lite():
    """t2t_lite from this checkout; `t2t_lite.hparams` is hparams/ (setup.cfg's package_dir)."""
    sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location(
        "t2t_lite.hparams", ROOT / "hparams" / "__init__.py", submodule_search_locations=[str(ROOT / "hparams")]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["t2t_lite.hparams"] = module
    spec.loader.exec_module(module)


def run_one(args, name, overrides, updates):
    import_t2t_lite()
    import keras
    import numpy as np

    from t2t_lite.model.transformer import Transformer

    # The set's function itself: registry.hparams() would also import the problems, which need TensorFlow.
    hparams = getattr(sys.modules["t2t_lite.hparams.transformer"], args.hparams_set)()
    hparams = (hparams.override(overrides) if overrides else hparams).replace(
        activation_dtype="float32", xla_compile=False
    )
    vocab_path = dict(item.split("=", 1) for item in args.vocab_for).get(name, args.vocab)
    vocab = load_vocab(vocab_path)
    corpus = Path(args.corpus)
    train = encode_pairs(vocab, corpus / "train.en", corpus / f"train.{args.target}", hparams.max_length)
    val_sources = read_lines(corpus / "val.en")
    val_references = read_lines(corpus / f"val.{args.target}")
    val = encode_pairs(vocab, corpus / "val.en", corpus / f"val.{args.target}", 0)

    keras.utils.set_random_seed(args.seed)
    model = Transformer(hparams, vocab.get_piece_size())
    started = time.time()
    state, curve = train_model(
        model, hparams, train, val, updates, args.eval_every, np.random.default_rng(args.seed), name
    )
    trained = time.time() - started
    hypotheses = greedy_translate(model, state, [ids for ids, _ in val], vocab, hparams.extra_length)
    result = {
        "name": name,
        "overrides": overrides,
        "updates": updates,
        "vocab": Path(vocab_path).name,
        "dev_perplexity": curve,
        **score(hypotheses, val_references),
        "train_seconds": round(trained, 1),
        "decode_seconds": round(time.time() - started - trained, 1),
        "val_sentences": len(val_sources),
    }
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"{name}.json").write_text(json.dumps(result, indent=1))
        (Path(args.out) / f"{name}.{args.target}").write_text("".join(h + "\n" for h in hypotheses))
    return result


def load_vocab(path):
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_file=str(path))


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [" ".join(line.split()) for line in f]  # t2t_lite.data.vocabulary.normalize_text


def encode_pairs(vocab, source_path, target_path, max_length):
    """[(source ids + EOS, target ids + EOS)], dropping pairs over max_length as training does."""
    sources, targets = read_lines(source_path), read_lines(target_path)
    if len(sources) != len(targets):
        sys.exit(f"screen_gpu.py: {source_path} has {len(sources)} lines, {target_path} {len(targets)}")
    pairs = [(s + [EOS_ID], t + [EOS_ID]) for s, t in zip(vocab.encode(sources), vocab.encode(targets))]
    return [p for p in pairs if not max_length or max(len(p[0]), len(p[1])) <= max_length]


def bucket_lengths(hparams):
    """t2t_lite.data.input_pipeline.bucket_lengths (that module needs TensorFlow): tensor2tensor's boundaries."""
    lengths, length = [], hparams.min_length_bucket
    while length < hparams.max_length:
        lengths.append(length)
        length = max(length + 1, int(length * hparams.length_bucket_step))
    return lengths + [hparams.max_length]


# Shapes the accelerator compiles for: each of t2t_lite's ~25 buckets would be a compilation of its own.
SCREEN_LENGTHS = (16, 24, 32, 48, 64, 96, 128)


def batches(pairs, hparams, rng):
    """Endless token batches: each pair joins the bucket of its longer side; a full bucket is one batch of
    batch_size // length rows, as t2t-trainer makes them. Only its padding differs: both sides to the next
    of SCREEN_LENGTHS and the rows to the most of any bucket sharing that length (rows of padding alone
    carry no loss), so that a handful of shapes are compiled."""
    import numpy as np

    lengths = bucket_lengths(hparams)
    rows = [max(1, hparams.batch_size // length) for length in lengths]
    shape_of = [next(c for c in SCREEN_LENGTHS + (length,) if c >= length) for length in lengths]
    rows_of_shape = {shape: max(r for r, s in zip(rows, shape_of) if s == shape) for shape in shape_of}
    bucket_of = [next(b for b, length in enumerate(lengths) if max(len(s), len(t)) <= length) for s, t in pairs]
    waiting = [[] for _ in lengths]
    while True:
        for index in rng.permutation(len(pairs)):
            bucket = bucket_of[index]
            waiting[bucket].append(pairs[index])
            if len(waiting[bucket]) == rows[bucket]:
                shape = shape_of[bucket]
                yield pad_batch(waiting[bucket], shape, rows_of_shape[shape], np)
                waiting[bucket] = []


def pad_batch(pairs, length, rows, np):
    inputs = np.zeros((rows, length), np.int32)
    targets = np.zeros((rows, length), np.int32)
    for row, (source, target) in enumerate(pairs):
        inputs[row, : len(source)] = source
        targets[row, : len(target)] = target
    return inputs, targets


def eq3_with_decay(hparams, train_steps):
    """t2t_lite.train.schedule.NoamSchedule for optax (a count from 0 → step = count + 1)."""
    import jax.numpy as jnp

    warmup = float(max(hparams.learning_rate_warmup_steps, 1))

    def rate(count):
        step = count.astype(jnp.float32) + 1.0
        value = hparams.learning_rate * hparams.hidden_size**-0.5 * jnp.minimum(step**-0.5, step * warmup**-1.5)
        if hparams.learning_rate_decay_steps:
            value = value * jnp.clip((train_steps + 1.0 - step) / hparams.learning_rate_decay_steps, 0.0, 1.0)
        return value

    return rate


def train_model(model, hparams, train, val, updates, eval_every, rng, label=""):
    """`updates` Adam steps; returns ((trainable, non_trainable) values, {update: dev perplexity})."""
    import jax
    import optax

    from t2t_lite.train.loss import padded_cross_entropy

    optimizer = optax.adam(
        eq3_with_decay(hparams, updates),
        b1=hparams.optimizer_adam_beta1,
        b2=hparams.optimizer_adam_beta2,
        eps=hparams.optimizer_adam_epsilon,
    )
    trainable = [v.value for v in model.trainable_variables]
    non_trainable = [v.value for v in model.non_trainable_variables]
    opt_state = optimizer.init(trainable)

    def loss(trainable, non_trainable, inputs, targets):
        logits, non_trainable = model.stateless_call(
            trainable, non_trainable, {"inputs": inputs, "targets": targets}, training=True
        )
        smoothed, _, tokens = padded_cross_entropy(logits, targets, hparams.label_smoothing)
        return smoothed / tokens, non_trainable

    @jax.jit
    def step(trainable, non_trainable, opt_state, inputs, targets):
        (_, non_trainable), grads = jax.value_and_grad(loss, has_aux=True)(trainable, non_trainable, inputs, targets)
        changes, opt_state = optimizer.update(grads, opt_state, trainable)
        return optax.apply_updates(trainable, changes), non_trainable, opt_state

    curve, dev_perplexity, started = {}, dev_perplexity_of(model, val), time.time()
    stream = batches(train, hparams, rng)
    for done in range(1, updates + 1):
        trainable, non_trainable, opt_state = step(trainable, non_trainable, opt_state, *next(stream))
        if done == 200:
            print(f"{label} 200 updates in {time.time() - started:.0f} s", file=sys.stderr, flush=True)
        if done % eval_every == 0 or done == updates:
            curve[done] = round(dev_perplexity((trainable, non_trainable)), 3)
            print(f"{label} {done}: dev perplexity {curve[done]}", file=sys.stderr, flush=True)
    return (trainable, non_trainable), curve


def dev_perplexity_of(model, val):
    """A function (trainable, non_trainable) -> perplexity of val's targets, teacher-forced (compiled once)."""
    import jax
    import numpy as np

    from t2t_lite.train.loss import padded_cross_entropy

    @jax.jit
    def sums(state, inputs, targets):
        logits, _ = model.stateless_call(*state, {"inputs": inputs, "targets": targets}, training=False)
        _, nll, tokens = padded_cross_entropy(logits, targets, 0.0)
        return nll, tokens

    val_batches = list(fixed_batches([s for s, _ in val], [t for _, t in val], 128))

    def perplexity(state):
        total_nll = total_tokens = 0.0
        for inputs, targets in val_batches:
            nll, tokens = sums(state, inputs, targets)
            total_nll += float(nll)
            total_tokens += float(tokens)
        return float(np.exp(total_nll / total_tokens))

    return perplexity


def fixed_batches(sources, targets, rows):
    """Batches of `rows` pairs in order, each side padded to a multiple of 16 (few shapes to compile)."""
    import numpy as np

    for start in range(0, len(sources), rows):
        part = list(range(start, min(start + rows, len(sources))))
        yield tuple(pad_rows([ids[i] for i in part], np) for ids in (sources, targets))


def pad_rows(rows, np):
    length = -(-max(len(r) for r in rows) // 16) * 16
    array = np.zeros((len(rows), length), np.int32)
    for i, ids in enumerate(rows):
        array[i, : len(ids)] = ids
    return array


def greedy_translate(model, state, sources, vocab, extra_length):
    """Greedy decoding (the most probable next piece until EOS, at most source length + extra_length),
    recomputing the decoder over the prefix each step: slow, but only `Transformer.call`."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def decode(state, inputs, buffer):
        def body(position, targets):
            logits, _ = model.stateless_call(*state, {"inputs": inputs, "targets": targets}, training=False)
            return targets.at[:, position].set(jnp.argmax(logits[:, position], axis=-1).astype(targets.dtype))

        return jax.lax.fori_loop(0, buffer.shape[1], body, buffer)

    hypotheses = []
    for (inputs,) in ((batch[0],) for batch in fixed_batches(sources, sources, 256)):
        limit = -(-(inputs.shape[1] + extra_length) // 16) * 16
        output = jax.device_get(decode(state, inputs, jnp.zeros((inputs.shape[0], limit), jnp.int32)))
        for row in output.tolist():
            row = row[: row.index(EOS_ID)] if EOS_ID in row else row
            hypotheses.append(vocab.decode(row))
    return hypotheses


def score(hypotheses, references):
    import sacrebleu

    bleu = sacrebleu.BLEU()
    chrf = sacrebleu.CHRF()
    return {
        "val_sacrebleu": round(bleu.corpus_score(hypotheses, [references]).score, 2),
        "val_chrf2": round(chrf.corpus_score(hypotheses, [references]).score, 2),
        "sacrebleu_signature": str(bleu.get_signature()),
    }


if __name__ == "__main__":
    main()
