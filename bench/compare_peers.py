"""t2t_lite beside TF Model Garden, torch.nn.Transformer, keras-hub and CTranslate2: speed and memory, in one run.

    .venv/bin/python bench/compare_peers.py --peers_dir ../shared/peers  # tiny + base, 1 round (~15 min quiet)
    .venv/bin/python bench/compare_peers.py --presets=tiny --json                  # ~4 min
    .venv/bin/python bench/compare_peers.py --skip_peers                           # t2t_lite rows only
    .venv/bin/python bench/compare_peers.py --peers=ctranslate2,ctranslate2-int8   # decoding beside CTranslate2
    .venv/bin/python bench/compare_peers.py --presets=base --peers=ctranslate2,ctranslate2-int8 --no_bf16 \
        --quantize= --no_matmul_bound --memory_presets=   # base, beam 4: our decoders, SavedModel, CTranslate2

Every row is one process, run alone under `taskset -c 0-1` with 2 threads, in the order
the two memory probes (once, --memory_presets), then in each round the matmul peak, per
preset the peers, t2t_lite, t2t_lite +XLA, t2t_lite in bfloat16, the exported SavedModel,
per --quantize mode (int8, bfloat16: t2t_lite/decode/quantization.py) the XLA decoder and the XLA
export with those product weights (decode only), our model converted to CTranslate2 (float32 and
int8 compute types, decode only; where ctranslate2 is installed), the preset step's matmul-only bound
(oneDNN's and XLA's kernels), and the matmul peak again (the higher one counts); with
--repeats the rounds interleave every row.

The peers are the scripts of the peers' harness, which is not part of this repository:
found as ../shared/peers beside the checkout, or --peers_dir. Each runs in its own
virtual environment, created by the harness's `bash setup_venvs.sh [tfm torch kh ct2]`
as <VENV_PREFIX><name> (--venv_prefix, default the temporary directory's `peer-venv-`,
setup_venvs.sh's own default). ctranslate2 and ctranslate2-int8 are the CTranslate2
inference engine (float32, and int8 weights with float32 elsewhere): decode only.

t2t_lite's rows are bench/peer_project.py on the same peer_common.py protocol, so inputs,
warm-up and timing are identical. t2t_lite-savedmodel is the model exported by
t2t_lite/serve/export.py, loaded with tf.saved_model.load and called through its
`translate_ids` signature (decode only; bench/peer_project.py --savedmodel says how every
hypothesis is made to run to 30 tokens). The figures, ratios and targets are
bench/peer_summary.py's; --json prints one JSON object per preset instead of the tables.

The t2t_lite-bf16 row (`activation_dtype=bfloat16`: float32 variables and optimizer, bfloat16
matmuls, float32 softmax and loss) is reported beside the float32 targets, not counted in
them: the peers run float32. Against CTranslate2 int8 it counts, as int8 is lower precision too.
"""

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

from peer_summary import (
    BOUNDS,
    MEMORY_PHASES,
    OURS,
    OURS_BF16,
    OURS_CT2,
    OURS_CT2_INT8,
    OURS_SAVEDMODEL,
    OURS_SAVEDMODEL_BF16_WEIGHTS,
    OURS_SAVEDMODEL_INT8,
    OURS_XLA,
    OURS_XLA_BF16_WEIGHTS,
    OURS_XLA_INT8,
    PEAK,
    PEAK_BF16,
    PEERS,
    best_peaks,
    format_table,
    preset_summary,
)

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
DEFAULT_PEERS_DIR = os.path.join(os.path.dirname(REPO_DIR), "shared", "peers")
DEFAULT_VENV_PREFIX = os.path.join(tempfile.gettempdir(), "peer-venv-")
# label -> (venv name given to setup_venvs.sh, script, extra arguments), as the peers' run_all.sh runs them.
PEER_SCRIPTS = {
    "modelgarden": ("tfm", "peer_modelgarden.py", []),
    "modelgarden-xla": ("tfm", "peer_modelgarden.py", ["--jit-compile"]),
    "torch": ("torch", "peer_torch.py", []),
    "kerashub": ("kh", "peer_kerashub.py", []),
    "kerashub-xla": ("kh", "peer_kerashub.py", ["--jit-compile"]),
    "ctranslate2": ("ct2", "peer_ctranslate2.py", ["--compute-type", "float32"]),
    "ctranslate2-int8": ("ct2", "peer_ctranslate2.py", ["--compute-type", "int8"]),
}
# --quantize mode -> the labels of its rows: the XLA decoder's and the XLA export's.
QUANTIZED_ROWS = {
    "int8": (OURS_XLA_INT8, OURS_SAVEDMODEL_INT8),
    "bfloat16": (OURS_XLA_BF16_WEIGHTS, OURS_SAVEDMODEL_BF16_WEIGHTS),
}


class PeersNotFoundError(FileNotFoundError):
    """The peers' harness (peer_common.py and the peer scripts) or a peer's venv is missing."""


# -- Finding the peers -----------------------------------------------------------------
def find_peers_dir(peers_dir=None) -> str:
    """--peers_dir, else ../shared/peers beside the repository; must hold peer_common.py."""
    path = os.path.abspath(peers_dir or DEFAULT_PEERS_DIR)
    if not os.path.isfile(os.path.join(path, "peer_common.py")):
        raise PeersNotFoundError(
            f"no peer benchmark harness at {path} (peer_common.py missing). It ships with the project's "
            f"shared folder, not with t2t_lite: pass --peers_dir=/path/to/shared/peers."
        )
    return path


def peer_command(label, peers_dir, venv_prefix=DEFAULT_VENV_PREFIX) -> list:
    """The command run_all.sh uses for `label`; fails with the setup command if its venv is missing."""
    if label not in PEER_SCRIPTS:
        raise ValueError(f"--peers: unknown peer {label!r}; choose from {', '.join(PEERS)}.")
    name, script, extra = PEER_SCRIPTS[label]
    python = os.path.join(venv_prefix + name, "bin", "python")
    if not os.access(python, os.X_OK):
        raise PeersNotFoundError(
            f"peer {label!r} needs the virtual environment {venv_prefix + name} ({python} not found); create it "
            f"with: VENV_PREFIX={venv_prefix} bash {os.path.join(peers_dir, 'setup_venvs.sh')} {name}"
        )
    return [python, os.path.join(peers_dir, script), *extra]


def our_command(peers_dir, *extra) -> list:
    return [sys.executable, os.path.join(BENCH_DIR, "peer_project.py"), "--peers_dir", peers_dir, *extra]


# -- Running one row ----------------------------------------------------------------------
def child_environment(label, threads) -> dict:
    """run_all.sh's environment: fixed threads, no GPU, quiet TensorFlow."""
    env = dict(
        os.environ,
        PEER_LABEL=label,
        PEER_THREADS=str(threads),
        TF_CPP_MIN_LOG_LEVEL="2",
        KERAS_BACKEND="tensorflow",
        CUDA_VISIBLE_DEVICES="",
        PYTHONHASHSEED="0",
    )
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[variable] = str(threads)
    return env


def run_child(argv, env, log_path, cpus) -> tuple:
    """Runs argv pinned to `cpus`; returns (exit code, stdout, wall seconds, peak RSS MiB of the child)."""
    pinned = ["taskset", "-c", cpus, *argv] if cpus else list(argv)
    started = datetime.datetime.now(datetime.timezone.utc)
    with open(log_path, "a") as log:
        log.write(f"\n=== {started:%H:%M:%SZ} {' '.join(pinned)}\n")
        log.flush()
        process = subprocess.Popen(pinned, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        stdout = process.stdout.read()
        # wait4 gives this child's own rusage; taskset execs the command in the same process.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        log.write(stdout)
    wall = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
    return process.returncode, stdout, wall, usage.ru_maxrss / 1024.0


def last_json_line(stdout):
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def run_row(label, argv, preset, args, log_path) -> dict:
    argv = [*argv, "--preset", preset] if preset else list(argv)
    progress(f"{label} {preset or ''}")
    rc, stdout, wall, rss = run_child(argv, child_environment(label, args.threads), log_path, args.cpus)
    row = last_json_line(stdout) if rc == 0 else None
    if row is None:
        row = {"label": label, "preset": preset, "error": f"exit code {rc}, see {log_path}"}
    row.update(label=label, wall_s=round(wall, 1), peak_rss_mb=round(rss, 1))
    progress(f"    rc={rc} wall {wall:.0f}s peak RSS {rss:.0f} MiB")
    return row


def progress(message):
    print(f"[{datetime.datetime.now(datetime.timezone.utc):%H:%M:%SZ}] {message}", file=sys.stderr, flush=True)


def protocol_flags(preset, args) -> list:
    """Overrides of the peers' timing protocol, passed to every row alike."""
    repeats = args.base_decode_repeats if preset == "base" else None
    return ["--decode-repeats", str(repeats)] if repeats is not None else []


def run_all(args, peers_dir, log_path) -> tuple:
    """The memory probes, then every round: the matmul peak and each preset's rows; returns (rows, peaks)."""
    peers = (
        [] if args.skip_peers else [(label, peer_command(label, peers_dir, args.venv_prefix)) for label in args.peers]
    )
    rows = []
    # Memory does not depend on the load of the machine, so the probes go first, once.
    for preset in args.memory_presets:
        for phase in MEMORY_PHASES:
            rows.append(
                run_row(f"{OURS}-memory-{phase}", our_command(peers_dir, "--memory", phase), preset, args, log_path)
            )
    matmul = [sys.executable, os.path.join(BENCH_DIR, "matmul_peak.py"), "--threads", str(args.threads)]
    peaks = [(PEAK, matmul)] + ([] if args.no_bf16 else [(PEAK_BF16, matmul + ["--dtype", "bfloat16"])])
    ours = [(OURS, our_command(peers_dir)), (OURS_XLA, our_command(peers_dir, "--xla"))]
    if not args.no_bf16:
        ours.append((OURS_BF16, our_command(peers_dir, "--activation_dtype", "bfloat16")))
    if not args.no_savedmodel:
        ours.append((OURS_SAVEDMODEL, our_command(peers_dir, "--savedmodel")))
    for mode in args.quantize:
        decoder, export = QUANTIZED_ROWS[mode]
        ours.append((decoder, our_command(peers_dir, "--xla", "--quantize", mode, "--skip-train")))
        if not args.no_savedmodel:
            ours.append((export, our_command(peers_dir, "--savedmodel", "--quantize", mode)))
    if not args.no_ctranslate2:
        ours += [
            (OURS_CT2, our_command(peers_dir, "--ctranslate2", "float32")),
            (OURS_CT2_INT8, our_command(peers_dir, "--ctranslate2", "int8")),
        ]
    if not args.no_matmul_bound:
        ours += [
            (BOUNDS[0], our_command(peers_dir, "--matmul_bound")),
            (BOUNDS[1], our_command(peers_dir, "--matmul_bound", "--xla")),
        ]
    for round_index in range(args.repeats):
        # A peak is a best case: measured before and after the round, the higher one counts.
        rows += [dict(run_row(label, argv, None, args, log_path), round=round_index + 1) for label, argv in peaks]
        for preset in args.presets:
            for label, argv in peers + ours:
                rows.append(
                    dict(
                        run_row(label, argv + protocol_flags(preset, args), preset, args, log_path),
                        round=round_index + 1,
                    )
                )
        rows += [dict(run_row(label, argv, None, args, log_path), round=round_index + 1) for label, argv in peaks]
    return rows, best_peaks(rows)


# -- Entry point --------------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default="tiny,base", help="comma-separated subset of tiny,base (timed rows)")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS))
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds of every row")
    parser.add_argument("--skip_peers", action="store_true", help="only the t2t_lite rows (and the matmul peak)")
    parser.add_argument("--no_bf16", action="store_true", help="leave out the bfloat16 row and its matmul peak")
    parser.add_argument("--no_savedmodel", action="store_true", help="leave out the exported SavedModel's row")
    parser.add_argument(
        "--quantize",
        default=",".join(QUANTIZED_ROWS),
        help="decode-only rows with lower-precision product weights, per mode (comma-separated "
        "subset of int8,bfloat16; '' = none): the XLA decoder and, unless --no_savedmodel, "
        "the XLA export",
    )
    parser.add_argument(
        "--no_ctranslate2",
        action="store_true",
        help="leave out our model converted to CTranslate2 (float32, int8); left out where ctranslate2 is missing",
    )
    parser.add_argument(
        "--no_matmul_bound",
        action="store_true",
        help="leave out the matmul-only bound of each preset's step (two rows per preset)",
    )
    parser.add_argument(
        "--memory_presets",
        default="base",
        help="presets whose peak memory is probed, once, before the timed rows ('' = none)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object per preset instead of tables")
    parser.add_argument("--peers_dir", default=None, help=f"the peers' harness (default {DEFAULT_PEERS_DIR})")
    parser.add_argument(
        "--venv_prefix",
        default=DEFAULT_VENV_PREFIX,
        help="the peers' venvs are <prefix>tfm, torch, kh, ct2 (setup_venvs.sh's VENV_PREFIX)",
    )
    parser.add_argument("--output_dir", default=None, help="results.jsonl, summary.json and run.log go here")
    parser.add_argument("--cpus", default="0-1", help="taskset CPU list for every row ('' = no pinning)")
    parser.add_argument("--threads", type=int, default=2, help="framework threads in every row")
    parser.add_argument(
        "--base_decode_repeats",
        type=int,
        default=1,
        help="timed decoding calls at `base` for every row (peers' protocol: 2; 1 keeps the run short)",
    )
    args = parser.parse_args(argv)
    args.presets = [preset for preset in args.presets.split(",") if preset]
    args.peers = [peer for peer in args.peers.split(",") if peer]
    args.memory_presets = [preset for preset in args.memory_presets.split(",") if preset]
    args.quantize = [mode for mode in args.quantize.split(",") if mode]
    args.no_ctranslate2 = args.no_ctranslate2 or importlib.util.find_spec("ctranslate2") is None
    if set(args.quantize) - set(QUANTIZED_ROWS):
        parser.error(
            f"--quantize: unknown {', '.join(sorted(set(args.quantize) - set(QUANTIZED_ROWS)))}; "
            f"choose from {','.join(QUANTIZED_ROWS)}."
        )
    unknown = [preset for preset in args.presets + args.memory_presets if preset not in ("tiny", "base")]
    if unknown:
        parser.error(f"--presets: unknown {', '.join(unknown)}; choose from tiny,base.")
    if args.cpus and not shutil.which("taskset"):
        parser.error("--cpus: taskset is not installed; install util-linux or pass --cpus=''.")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        peers_dir = find_peers_dir(args.peers_dir)
        for label in [] if args.skip_peers else args.peers:
            peer_command(label, peers_dir, args.venv_prefix)
    except (PeersNotFoundError, ValueError) as error:
        sys.exit(f"bench/compare_peers.py: {error}")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    output_dir = args.output_dir or os.path.join(tempfile.gettempdir(), "t2t_lite_compare_peers", stamp)
    os.makedirs(output_dir, exist_ok=True)
    progress(f"results -> {output_dir}; load average {os.getloadavg()}")
    rows, peaks = run_all(args, peers_dir, os.path.join(output_dir, "run.log"))
    with open(os.path.join(output_dir, "results.jsonl"), "w") as results:
        results.writelines(json.dumps(row) + "\n" for row in rows)
    summaries = [preset_summary(preset, rows, peaks[PEAK], peaks[PEAK_BF16]) for preset in args.presets]
    with open(os.path.join(output_dir, "summary.json"), "w") as summary_file:
        json.dump(summaries, summary_file, indent=1)
    for summary in summaries:
        print(json.dumps(summary) if args.json else format_table(summary) + "\n", flush=True)
    progress(f"done; load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
