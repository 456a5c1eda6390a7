"""The t2t-exporter SavedModel driven as a server is used: concurrent clients, latency percentiles, warm-up.

    .venv/bin/python bench/serve.py --source_file=$DATA/multi30k/val.en      # DATA=../shared/data
    .venv/bin/python bench/serve.py --source_file=$DATA/newstest2013.en --threads=1,4 --batch_sizes=1,64 \
        --requests=2000 --decode_hparams=beam_size=4,max_input_length=64

Made here, in a temporary directory: a 1,000-piece SentencePiece vocabulary trained on
`--source_file`, a `--hparams_set` model with random weights (float32) saved as a
checkpoint, and exports of it by `export_model`: the plain one, `xla=true`, and (asked for
with `--exports`) `xla=true,quantize=int8` and `xla=true,quantize=bfloat16`.
Each is loaded with `tf.saved_model.load` and its `serving_default` signature called
on raw sentences of `--source_file` (cycled), as TF Serving calls it: tokenization,
beam search and detokenization are timed. Reported per export:

  * first-request latency of each batch size in a fresh process, with the warm-up file
    replayed first (what TF Serving does at load; its time is reported) and without;
  * for 1, 4 and 16 client threads (each sending one request at a time, back to back)
    and batch sizes 1, 8 and 64, after the warm-up: sentences/s and the latency
    percentiles p50/p95/p99 of `--requests` requests;
  * resident memory (VmRSS) before `--memory_requests` more requests and after each fifth of them.

Random weights rarely emit EOS, so most outputs run to the input length +
extra_length: the output length in subwords is reported beside the rates.
"""

import argparse
import concurrent.futures
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tensorflow_text  # noqa: E402,F401  (the SentencePiece ops of the loaded graph)

from t2t_lite import registry  # noqa: E402
from t2t_lite.data import vocabulary
from t2t_lite.run_dir import checkpoints, model_info
from t2t_lite.serve import export, serving_warmup

VOCAB_SIZE = 1000
# --exports: each kind's --decode_hparams beside the user's; xla-int8 and xla-bf16-weights are
# t2t_lite/decode/quantization.py's int8 products and bfloat16 product weights.
EXPORT_KINDS = {
    "plain": "xla=false",
    "xla": "xla=true",
    "xla-int8": "xla=true,quantize=int8",
    "xla-bf16-weights": "xla=true,quantize=bfloat16",
}


def read_sentences(path, count):
    """The first `count` non-empty lines of `path`."""
    if not os.path.isfile(path):
        raise SystemExit(f"--source_file={path}: no such file (e.g. $DATA/multi30k/val.en, DATA=../shared/data).")
    with open(path, encoding="utf-8") as file:
        lines = [line.strip() for line in file if line.strip()]
    if not lines:
        raise SystemExit(f"--source_file={path} has no non-empty line.")
    return lines[:count]


def write_exports(scratch, hparams_set, decode_hparams, sentences, kinds):
    """Vocabulary, random-weight checkpoint, and its `kinds` of export ("plain", "xla"); returns {kind: version dir}."""
    problem = registry.problem("translate_files")
    data_dir, train_dir = os.path.join(scratch, "data"), os.path.join(scratch, "train")
    vocab = vocabulary.train_vocabulary(sentences, os.path.join(data_dir, problem.vocab_filename()), VOCAB_SIZE)
    hparams = registry.hparams(hparams_set)
    keras.utils.set_random_seed(1234)
    model = model_info.build_model(hparams, vocab.vocab_size)
    checkpoints.checkpoint_manager(tf.train.Checkpoint(model=checkpoints.trackable_model(model)), train_dir, 1).save(1)
    exports = {}
    for kind in kinds:
        overrides = ",".join(part for part in (decode_hparams, EXPORT_KINDS[kind]) if part)
        start = time.perf_counter()
        exports[kind] = export.export_model(
            problem, hparams, data_dir, train_dir, os.path.join(scratch, kind), overrides
        )
        print(f"# {kind} export took {time.perf_counter() - start:.1f} s", flush=True)
    return exports


def resident_megabytes():
    with open("/proc/self/status") as file:
        return next(int(line.split()[1]) for line in file if line.startswith("VmRSS:")) / 1024


def first_requests(version_dir, sentences, batch_sizes, replay):
    """In this (fresh) process: load, replay the warm-up file or not, then time one request per batch size."""
    start = time.perf_counter()
    loaded = tf.saved_model.load(version_dir)
    result = {"load_s": time.perf_counter() - start}
    if replay:
        start = time.perf_counter()
        serving_warmup.replay(loaded, serving_warmup.read_warmup_requests(version_dir))
        result["replay_s"] = time.perf_counter() - start
    translate = loaded.signatures[export.TEXT_SIGNATURE]
    for batch_size in batch_sizes:
        start = time.perf_counter()
        translate(inputs=tf.constant(sentences[:batch_size]))["outputs"].numpy()
        result[f"first_{batch_size}_s"] = time.perf_counter() - start
    return result


def first_requests_in_fresh_process(version_dir, args, replay):
    command = [
        sys.executable,
        __file__,
        "--first_requests_of",
        version_dir,
        "--source_file",
        args.source_file,
        "--batch_sizes",
        args.batch_sizes,
    ] + (["--replay"] if replay else [])
    process = subprocess.run(command, capture_output=True, text=True)
    if process.returncode:
        raise RuntimeError(process.stderr[-3000:])
    return json.loads(process.stdout.strip().splitlines()[-1])


def drive(translate, sentences, threads, batch_size, requests):
    """`threads` clients send `requests` requests of `batch_size` sentences in all; (sentences/s, latencies s)."""
    batches = [
        [sentences[(first + i) % len(sentences)] for i in range(batch_size)]
        for first in range(0, requests * batch_size, batch_size)
    ]
    next_request, lock, latencies = iter(range(requests)), threading.Lock(), []

    def client():
        while True:
            with lock:
                index = next(next_request, None)
            if index is None:
                return
            start = time.perf_counter()
            translate(inputs=tf.constant(batches[index]))["outputs"].numpy()
            with lock:
                latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for future in [pool.submit(client) for _ in range(threads)]:
            future.result()
    return requests * batch_size / (time.perf_counter() - start), np.array(latencies)


def output_length(loaded, sentences):
    ids = loaded.signatures[export.TEXT_SIGNATURE](inputs=tf.constant(sentences[:64]))["outputs"]
    return float(np.mean([len(text.split()) for text in ids.numpy()]))


def benchmark(kind, version_dir, sentences, args):
    print(f"\n## {kind} export\n", flush=True)
    for replay in (True, False):
        first = first_requests_in_fresh_process(version_dir, args, replay)
        warm = f"warm-up replayed in {first['replay_s']:.1f} s" if replay else "no warm-up replay"
        print(
            f"first request, fresh process, {warm} (load {first['load_s']:.1f} s): "
            + ", ".join(
                f"batch {size} {first[f'first_{size}_s'] * 1000:.0f} ms" for size in args.batch_sizes.split(",")
            ),
            flush=True,
        )
    loaded = tf.saved_model.load(version_dir)
    serving_warmup.replay(loaded, serving_warmup.read_warmup_requests(version_dir))
    translate = loaded.signatures[export.TEXT_SIGNATURE]
    print(f"output: {output_length(loaded, sentences):.1f} words per sentence on average (random weights)\n")
    print("| threads | batch | requests | sentences/s | p50 ms | p95 ms | p99 ms |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for threads in map(int, args.threads.split(",")):
        for batch_size in map(int, args.batch_sizes.split(",")):
            requests = max(threads, args.requests // batch_size)
            rate, latencies = drive(translate, sentences, threads, batch_size, requests)
            p50, p95, p99 = np.percentile(latencies, [50, 95, 99]) * 1000
            print(
                f"| {threads} | {batch_size} | {requests} | {rate:.1f} | {p50:.0f} | {p95:.0f} | {p99:.0f} |",
                flush=True,
            )
    # Read after every fifth of the requests: a leak grows with them, a one-time step (4 threads' first
    # allocations) does not.
    readings, chunk = [resident_megabytes()], max(1, args.memory_requests // 5)
    for _ in range(0, args.memory_requests, chunk):
        drive(translate, sentences, 4, 1, chunk)
        readings.append(resident_megabytes())
    print(
        f"\nresident memory over {len(readings) - 1} × {chunk} more requests (4 threads, batch 1): "
        + " → ".join(f"{mb:.0f}" for mb in readings)
        + " MB",
        flush=True,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source_file", required=True, help="sentences to translate, one per line")
    parser.add_argument("--sentences", type=int, default=1000, help="lines of --source_file used (cycled)")
    parser.add_argument("--hparams_set", default="transformer_tiny")
    parser.add_argument("--decode_hparams", default="", help='e.g. "beam_size=4,max_input_length=64"')
    parser.add_argument(
        "--exports", default="plain,xla", help="which exports to measure, comma-separated: " + ", ".join(EXPORT_KINDS)
    )
    parser.add_argument("--threads", default="1,4,16")
    parser.add_argument("--batch_sizes", default="1,8,64")
    parser.add_argument(
        "--requests",
        type=int,
        default=10000,
        help="sentences per setting: this many requests at batch 1, this / batch at larger batches",
    )
    parser.add_argument("--memory_requests", type=int, default=10000)
    parser.add_argument("--first_requests_of", help=argparse.SUPPRESS)  # the fresh process' mode
    parser.add_argument("--replay", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = sorted(set(args.exports.split(",")) - set(EXPORT_KINDS))
    if unknown:
        parser.error(f"--exports: unknown {', '.join(unknown)}; choose from {', '.join(EXPORT_KINDS)}.")
    sentences = read_sentences(args.source_file, args.sentences)
    if args.first_requests_of:
        batch_sizes = [int(size) for size in args.batch_sizes.split(",")]
        print(json.dumps(first_requests(args.first_requests_of, sentences, batch_sizes, args.replay)))
        return
    print(
        f"# t2t_lite serving benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, host "
        f"{platform.node()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, TF {tf.__version__}, "
        f"{args.hparams_set} (random float32 weights), {VOCAB_SIZE}-piece vocabulary, "
        f"--decode_hparams='{args.decode_hparams}', {len(sentences)} sentences of {args.source_file}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as scratch:
        for kind, version_dir in write_exports(
            scratch, args.hparams_set, args.decode_hparams, sentences, args.exports.split(",")
        ).items():
            benchmark(kind, version_dir, sentences, args)


if __name__ == "__main__":
    main()
