"""Decoding speed of t2t_lite: beam 4, cached and uncached (and XLA), on transformer_tiny and transformer_base.

Same work as the peers' harness (../shared/peers, README there): random weights, 32 random
source sentences of 20 tokens in [3, vocab), every sentence decoded to exactly 30 tokens
(an EOS id the model cannot emit, so nothing stops early), beam 4 with α = 0.6, 2 threads.
Each measurement is one call that decodes the whole batch; the first call (tf.function
tracing + one run) is reported apart and excluded. Beside them, scoring (`t2t-decoder
--score_file`'s teacher-forced log P(target | source)) of the same 32 sources with 30-token
targets, plain and with XLA, and by the same model converted to CTranslate2 (`score_batch`, float32
and int8; where ctranslate2 is installed): pairs per second. Then, on tiny only, how the time per sentence
grows with the output length.

    .venv/bin/python bench/decode.py                      # tiny and base (~10 min on 2 idle cores)
    .venv/bin/python bench/decode.py --presets=tiny --repeats=5
    TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python bench/decode.py --presets=base
    .venv/bin/python bench/decode.py --presets=multi30k,multi30k_relative --xla --no_growth --no_ctranslate2
                                                          # absolute against relative positions, as the recipe decodes

On x86-64 it runs TensorFlow's oneDNN kernels, as the t2t-* tools do (t2t_lite/cpu_features.py);
TF_ENABLE_ONEDNN_OPTS=0 measures Eigen's, which TensorFlow alone picks on CPUs without VNNI,
AVX-512 BF16 or AMX. The header line says which ran.
"""

import argparse
import importlib.util
import os
import platform
import statistics
import time

THREADS = 2
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, str(THREADS))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
from t2t_lite import cpu_features  # noqa: E402

cpu_features.use_onednn_kernels()  # as the t2t-* tools do; TF_ENABLE_ONEDNN_OPTS=0 measures Eigen's kernels

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.util import _pywrap_util_port  # noqa: E402

from t2t_lite import registry  # noqa: E402
from t2t_lite.decode import batch_decoding, scoring  # noqa: E402
from t2t_lite.decode.search_settings import SearchSettings  # noqa: E402
from t2t_lite.model.transformer import Transformer  # noqa: E402

# multi30k and multi30k_relative: the Multi30k recipe's set and its relative-position twin (Shaw et al.), with
# the recipe's 8,000-piece vocabulary, to compare the two kinds of positions at one size.
PRESETS = {
    "tiny": ("transformer_tiny", 8000),
    "base": ("transformer_base", 37000),
    "multi30k": ("transformer_multi30k_small", 8000),
    "multi30k_relative": ("transformer_multi30k_small_relative", 8000),
}
SENTENCES, SOURCE_LENGTH, OUTPUT_LENGTH = 32, 20, 30
BEAM_SIZE, ALPHA = 4, 0.6
NO_EOS = -1  # no id equals it, so every sentence runs to its length limit
GROWTH_LENGTHS = (10, 20, 40)


def make_model(preset):
    hparams_set, vocab_size = PRESETS[preset]
    tf.keras.utils.set_random_seed(1234)
    return Transformer(registry.hparams(hparams_set), vocab_size=vocab_size)


def source_batch(vocab_size, seed=4321):
    return np.random.default_rng(seed).integers(3, vocab_size, size=(SENTENCES, SOURCE_LENGTH), dtype=np.int32)


def time_decoding(model, source, *, use_cache, output_length, repeats, beam_size=BEAM_SIZE, xla=False):
    """(first call seconds, [seconds of each timed call]) for one whole-batch decode."""
    search = SearchSettings(beam_size=beam_size, alpha=ALPHA, extra_length=output_length - SOURCE_LENGTH, xla=xla)
    settings = dict(use_cache=use_cache, eos_id=NO_EOS)
    start = time.perf_counter()
    ids, _ = batch_decoding.decode_batch(model, source, search, **settings)
    first = time.perf_counter() - start
    assert ids.shape == (SENTENCES, output_length), ids.shape
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        batch_decoding.decode_batch(model, source, search, **settings)
        times.append(time.perf_counter() - start)
    return first, times


def time_scoring(model, source, *, repeats, xla):
    """(first call seconds, [seconds of each timed call]) scoring every source with a random OUTPUT_LENGTH target."""
    targets = np.random.default_rng(8765).integers(3, model.vocab_size, size=(SENTENCES, OUTPUT_LENGTH), dtype=np.int32)
    log_probs = scoring.compiled_token_log_probs(model, xla)
    source, targets = tf.constant(source), tf.constant(targets)
    start = time.perf_counter()
    assert log_probs(source, targets).shape == (SENTENCES, OUTPUT_LENGTH)
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        log_probs(source, targets).numpy()
        times.append(time.perf_counter() - start)
    return first, times


def time_ctranslate2_scoring(model, hparams_set, source, *, repeats, compute_types):
    """time_scoring's pairs scored by the same model converted once to CTranslate2 (`Translator.score_batch`).

    score_batch scores every target token and EOS, so it is given the first OUTPUT_LENGTH - 1 tokens:
    OUTPUT_LENGTH positions, as time_scoring's. Per compute type: (first call seconds, [seconds of each
    timed call], the largest difference of a pair's sum from ours).
    """
    import tempfile

    import ctranslate2

    from t2t_lite.serve import ctranslate2_export
    from t2t_lite.serve.export_settings import ExportSettings

    targets = np.random.default_rng(8765).integers(3, model.vocab_size, size=(SENTENCES, OUTPUT_LENGTH), dtype=np.int32)
    eos = np.ones_like(targets[:, :1])  # id 1; CTranslate2 appends it to every source and target itself
    ours = scoring.compiled_token_log_probs(model, False)(
        tf.constant(np.concatenate([source, eos], axis=1)), tf.constant(np.concatenate([targets[:, :-1], eos], axis=1))
    ).numpy()
    pieces = ["<pad>", "</s>", "<unk>"] + [f"w{index}" for index in range(3, model.vocab_size)]
    source_pieces = [[pieces[i] for i in row] for row in source.tolist()]
    target_pieces = [[pieces[i] for i in row[:-1]] for row in targets.tolist()]
    settings = ExportSettings(max_input_length=SOURCE_LENGTH + 1)
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        spec = ctranslate2_export.transformer_spec(model, registry.hparams(hparams_set), pieces, settings)
        spec.validate()
        spec.optimize()
        spec.save(scratch)
        for compute_type in compute_types:
            translator = ctranslate2.Translator(
                scratch, device="cpu", compute_type=compute_type, intra_threads=THREADS, inter_threads=1
            )
            start = time.perf_counter()
            scores = translator.score_batch(source_pieces, target_pieces, max_batch_size=0)
            first = time.perf_counter() - start
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                translator.score_batch(source_pieces, target_pieces, max_batch_size=0)
                times.append(time.perf_counter() - start)
            difference = max(abs(float(np.sum(mine)) - sum(other.log_probs)) for mine, other in zip(ours, scores))
            results[compute_type] = first, times, difference
    return results


def spread(values, digits=2):
    return f"{statistics.median(values):.{digits}f} [{min(values):.{digits}f}–{max(values):.{digits}f}]"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--presets", default="tiny,base", help=f"comma-separated subset of {','.join(PRESETS)} (default tiny,base)"
    )
    parser.add_argument("--xla", action="store_true", help="also the cached search compiled whole by XLA (xla=true)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per measurement (tiny)")
    parser.add_argument("--base_repeats", type=int, default=1, help="timed calls per measurement (base)")
    parser.add_argument("--no_growth", action="store_true", help="skip the output-length sweep")
    parser.add_argument(
        "--no_ctranslate2",
        action="store_true",
        help="leave out CTranslate2's score_batch of the converted model (left out where ctranslate2 is missing)",
    )
    args = parser.parse_args()
    args.no_ctranslate2 = args.no_ctranslate2 or importlib.util.find_spec("ctranslate2") is None
    tf.config.threading.set_intra_op_parallelism_threads(THREADS)
    tf.config.threading.set_inter_op_parallelism_threads(THREADS)
    print(
        f"# t2t_lite decoding benchmark, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"host {platform.node()}, {os.cpu_count()} CPUs, TF {tf.__version__}, {THREADS} threads, "
        f"oneDNN kernels {'on' if _pywrap_util_port.IsMklEnabled() else 'off'}"
    )
    print(
        f"# {SENTENCES} sentences x {SOURCE_LENGTH} source tokens -> {OUTPUT_LENGTH} output tokens, "
        f"beam {BEAM_SIZE}, alpha {ALPHA}, random weights"
    )
    print("| preset | decoding | sent/s median [min–max] | out tok/s median | first call s | timed calls |")
    print("|---|---|---:|---:|---:|---:|")
    for preset in args.presets.split(","):
        model = make_model(preset)
        source = source_batch(model.vocab_size)
        repeats = args.base_repeats if preset == "base" else args.repeats
        for use_cache, xla in ((True, False), (False, False)) + (((True, True),) if args.xla else ()):
            first, times = time_decoding(
                model, source, use_cache=use_cache, output_length=OUTPUT_LENGTH, repeats=repeats, xla=xla
            )
            rates = [SENTENCES / seconds for seconds in times]
            kind = "cached, XLA" if xla else "cached" if use_cache else "uncached"
            print(
                f"| {preset} | beam {BEAM_SIZE}, {kind} | {spread(rates)} | "
                f"{statistics.median(rates) * OUTPUT_LENGTH:.0f} | {first:.1f} | {repeats} |",
                flush=True,
            )
        for xla in (False, True):
            first, times = time_scoring(model, source, repeats=max(repeats, 3), xla=xla)
            rates = [SENTENCES / seconds for seconds in times]
            print(
                f"| {preset} | scoring given pairs{', XLA' if xla else ''} (pairs/s) | {spread(rates)} | "
                f"{statistics.median(rates) * OUTPUT_LENGTH:.0f} | {first:.1f} | {max(repeats, 3)} |",
                flush=True,
            )
        ctranslate2_rows = (
            {}
            if args.no_ctranslate2
            else time_ctranslate2_scoring(
                model, PRESETS[preset][0], source, repeats=max(repeats, 3), compute_types=("float32", "int8")
            )
        )
        for compute_type, (first, times, difference) in ctranslate2_rows.items():
            rates = [SENTENCES / seconds for seconds in times]
            print(
                f"| {preset} | scoring given pairs, CTranslate2 {compute_type} score_batch (pairs/s; sums differ "
                f"≤ {difference:.1e}) | {spread(rates)} | {statistics.median(rates) * OUTPUT_LENGTH:.0f} | "
                f"{first:.1f} | {max(repeats, 3)} |",
                flush=True,
            )
    if not args.no_growth and "tiny" in args.presets.split(","):
        print_growth(make_model("tiny"), repeats=2)


def print_growth(model, repeats):
    """Milliseconds per sentence against the output length: cached ~linear, uncached ~quadratic."""
    source = source_batch(model.vocab_size)
    print(f"\n| tiny, beam {BEAM_SIZE}: output tokens | " + " | ".join(map(str, GROWTH_LENGTHS)) + " |")
    print("|---|" + "---:|" * len(GROWTH_LENGTHS))
    for use_cache in (True, False):
        cells = []
        for length in GROWTH_LENGTHS:
            _, times = time_decoding(model, source, use_cache=use_cache, output_length=length, repeats=repeats)
            cells.append(f"{1000 * statistics.median(times) / SENTENCES:.1f}")
        print(f"| ms per sentence, {'cached' if use_cache else 'uncached'} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
