"""t2t_lite beside TF Model Garden, torch.nn.Transformer and keras-hub: speed and memory, in one run.

    .venv/bin/python bench/compare_peers.py                          # tiny + base, 1 round (~25 min)
    .venv/bin/python bench/compare_peers.py --presets=tiny --json    # ~5 min
    .venv/bin/python bench/compare_peers.py --skip_peers             # t2t_lite rows only
    .venv/bin/python bench/compare_peers.py --no_bf16                # without the bfloat16 row

Every row is one process, run alone under `taskset -c 0-1` with 2 threads, in the order
the two memory probes (once, --memory_presets), then in each round the matmul peak, per
preset the peers, t2t_lite, t2t_lite +XLA, t2t_lite in bfloat16 and the preset step's
matmul-only bound (oneDNN's and XLA's kernels), and the matmul peak again (the higher one
counts); with --repeats the rounds interleave every row. The peers are the scripts
of /work/shared/peers (found as ../shared/peers beside the repository, or --peers_dir),
each in its own virtual environment (`bash <peers_dir>/setup_venvs.sh` creates them);
t2t_lite is bench/peer_project.py on the same peer_common.py protocol, so inputs, warm-up
and timing are identical.

Figures (medians over timed steps/calls; with several rounds, the median of the rounds'):
  train tok/s        target tokens per second of one full training step
  train FLOP/s       flops.flops_per_step(hparams, vocab, batch × 32, 32) ÷ step time; the
                     same estimate is applied to every row, as they all do the same work
  % of peak          train FLOP/s ÷ the fp32 matmul peak measured by bench/matmul_peak.py
                     (the t2t_lite-bf16 row: ÷ the bfloat16 peak, `--dtype=bfloat16`)
  % of bound         train FLOP/s ÷ the matmul-only bound: the FLOP/s of a step that did
                     nothing but the preset step's matrix products, each timed alone at its
                     own shape with the faster of oneDNN's and XLA's kernels
                     (`peer_project.py --matmul_bound [--xla]`); context for the % of peak,
                     as products of a few hundred rows do not run at the n = 4096 rate
  greedy, beam4      sentences per second, 32 sentences of 20 tokens decoded to 30 tokens
  peak RSS           the process's maximum resident memory (os.wait4 of the child)
  memory probes      VmHWM of a transformer_base update at a 4,096-token micro-batch, and of
                     one beam-4 decoding call, each in a process of its own
Ratios are row ÷ t2t_lite. --json prints one JSON object per preset instead of the tables.

The t2t_lite-bf16 row (`activation_dtype=bfloat16`: float32 variables and optimizer, bfloat16
matmuls, float32 softmax and loss) is reported beside the targets, not counted in them: the
peers run float32, and the issue compares like with like.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(BENCH_DIR)
DEFAULT_PEERS_DIR = os.path.join(os.path.dirname(REPO_DIR), "shared", "peers")
PEERS = ("modelgarden", "torch", "kerashub", "modelgarden-xla", "kerashub-xla")
# label -> (virtual environment, script, extra arguments), as run_all.sh of the peers runs them.
PEER_SCRIPTS = {
    "modelgarden": ("/tmp/peer-venv-tfm", "peer_modelgarden.py", []),
    "modelgarden-xla": ("/tmp/peer-venv-tfm", "peer_modelgarden.py", ["--jit-compile"]),
    "torch": ("/tmp/peer-venv-torch", "peer_torch.py", []),
    "kerashub": ("/tmp/peer-venv-kh", "peer_kerashub.py", []),
    "kerashub-xla": ("/tmp/peer-venv-kh", "peer_kerashub.py", ["--jit-compile"]),
}
OURS, OURS_XLA, OURS_BF16 = "t2t_lite", "t2t_lite-xla", "t2t_lite-bf16"
PEAK, PEAK_BF16 = "matmul_peak", "matmul_peak_bf16"
BOUNDS = ("matmul_bound", "matmul_bound-xla")  # oneDNN's kernels, XLA's
MEMORY_PHASES = ("train", "decode")
TARGETS = {"train_vs_fastest_peer": 1.2, "fraction_of_matmul_peak": 0.85, "beam_vs_modelgarden": 2.0}


class PeersNotFoundError(FileNotFoundError):
    """The peers' harness (peer_common.py and the peer scripts) or a peer's venv is missing."""


# -- Finding the peers -----------------------------------------------------------------
def find_peers_dir(peers_dir=None) -> str:
    """--peers_dir, else ../shared/peers beside the repository; must hold peer_common.py."""
    path = os.path.abspath(peers_dir or DEFAULT_PEERS_DIR)
    if not os.path.isfile(os.path.join(path, "peer_common.py")):
        raise PeersNotFoundError(
            f"no peer benchmark harness at {path} (peer_common.py missing). It ships with the project's "
            f"shared folder, not with t2t_lite: pass --peers_dir=/path/to/shared/peers.")
    return path


def peer_command(label, peers_dir) -> list:
    """The command run_all.sh uses for `label`; fails with the setup command if its venv is missing."""
    if label not in PEER_SCRIPTS:
        raise ValueError(f"--peers: unknown peer {label!r}; choose from {', '.join(PEERS)}.")
    venv, script, extra = PEER_SCRIPTS[label]
    python = os.path.join(venv, "bin", "python")
    if not os.access(python, os.X_OK):
        raise PeersNotFoundError(f"peer {label!r} needs the virtual environment {venv} ({python} not found); "
                                 f"create it with: bash {os.path.join(peers_dir, 'setup_venvs.sh')}")
    return [python, os.path.join(peers_dir, script), *extra]


def our_command(peers_dir, *extra) -> list:
    return [sys.executable, os.path.join(BENCH_DIR, "peer_project.py"), "--peers_dir", peers_dir, *extra]


# -- Running one row ----------------------------------------------------------------------
def child_environment(label, threads) -> dict:
    """run_all.sh's environment: fixed threads, no GPU, quiet TensorFlow."""
    env = dict(os.environ, PEER_LABEL=label, PEER_THREADS=str(threads), TF_CPP_MIN_LOG_LEVEL="2",
               KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
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
    peers = [] if args.skip_peers else [(label, peer_command(label, peers_dir)) for label in args.peers]
    rows = []
    # Memory does not depend on the load of the machine, so the probes go first, once.
    for preset in args.memory_presets:
        for phase in MEMORY_PHASES:
            rows.append(run_row(f"{OURS}-memory-{phase}", our_command(peers_dir, "--memory", phase),
                                preset, args, log_path))
    matmul = [sys.executable, os.path.join(BENCH_DIR, "matmul_peak.py"), "--threads", str(args.threads)]
    peaks = [(PEAK, matmul)] + ([] if args.no_bf16 else [(PEAK_BF16, matmul + ["--dtype", "bfloat16"])])
    ours = [(OURS, our_command(peers_dir)), (OURS_XLA, our_command(peers_dir, "--xla"))]
    if not args.no_bf16:
        ours.append((OURS_BF16, our_command(peers_dir, "--activation_dtype", "bfloat16")))
    if not args.no_matmul_bound:
        ours += [(BOUNDS[0], our_command(peers_dir, "--matmul_bound")),
                 (BOUNDS[1], our_command(peers_dir, "--matmul_bound", "--xla"))]
    for round_index in range(args.repeats):
        # A peak is a best case: measured before and after the round, the higher one counts.
        rows += [dict(run_row(label, argv, None, args, log_path), round=round_index + 1) for label, argv in peaks]
        for preset in args.presets:
            for label, argv in peers + ours:
                rows.append(dict(run_row(label, argv + protocol_flags(preset, args), preset, args, log_path),
                                 round=round_index + 1))
        rows += [dict(run_row(label, argv, None, args, log_path), round=round_index + 1) for label, argv in peaks]
    return rows, best_peaks(rows)


def best_peaks(rows) -> dict:
    """{PEAK: the highest fp32 matmul peak measured, PEAK_BF16: the highest bfloat16 one} (None if none)."""
    return {label: max((row["matmul_peak_flops_per_s"] for row in rows if row["label"] == label and "error" not in row),
                       default=None) for label in (PEAK, PEAK_BF16)}


# -- Summaries -------------------------------------------------------------------------------
def _median_of(rows, *keys):
    """Median over rounds of a per-round figure (a pc.summary block's median), None if absent."""
    values = []
    for row in rows:
        for key in keys:
            row = row.get(key) if isinstance(row, dict) else None
        if isinstance(row, dict) and row.get("median") is not None:
            values.append(row["median"])
    return statistics.median(values) if values else None


def matmul_bound(rows) -> dict:
    """The matmul-only bound of one preset's step: the best of each kernel's rows, and of both."""
    best = {label: max((row["matmul_bound"]["matmul_only_flops_per_s"] for row in rows
                        if row["label"] == label and "matmul_bound" in row), default=None) for label in BOUNDS}
    return {"onednn_flops_per_s": best[BOUNDS[0]], "xla_flops_per_s": best[BOUNDS[1]],
            "flops_per_s": max((value for value in best.values() if value), default=None)}


def row_figures(rows, flops_per_step, matmul_peak, bound=None) -> dict:
    """The comparable figures of one label at one preset."""
    step_s = _median_of(rows, "train", "step_s")
    firsts = [row["train"]["first_step_s"] for row in rows if "train" in row]
    flops = flops_per_step / step_s if flops_per_step and step_s else None
    return {
        "train_tokens_per_s": _median_of(rows, "train", "tgt_tok_per_s"),
        "train_step_s": step_s,
        "train_flops_per_s": flops,
        "fraction_of_matmul_peak": flops / matmul_peak if flops and matmul_peak else None,
        "fraction_of_matmul_bound": flops / bound if flops and bound else None,
        "decode_sentences_per_s": _median_of(rows, "decode", "beam", "sent_per_s"),
        "decode_greedy_sentences_per_s": _median_of(rows, "decode", "greedy", "sent_per_s"),
        "first_step_s": statistics.median(firsts) if firsts else None,
        "peak_rss_mb": max((r["peak_rss_mb"] for r in rows), default=None),
        "params": next((r["params"] for r in rows if "params" in r), None),
        "errors": [r["error"] for r in rows if "error" in r],
    }


def _ratio(numerator, denominator):
    return numerator / denominator if numerator and denominator else None


def preset_summary(preset, rows, matmul_peak, bf16_peak=None) -> dict:
    """One JSON object: t2t_lite's figures at top level, the peers' under "peers", the targets."""
    at_preset = [row for row in rows if row.get("preset") == preset]
    flops_per_step = next((r["train"]["flops_per_step"] for r in at_preset
                           if r["label"] == OURS and "train" in r), None)
    by_label = {}
    for row in at_preset:
        by_label.setdefault(row["label"], []).append(row)
    bound = matmul_bound(at_preset)
    figures = {label: row_figures(group, flops_per_step, bf16_peak if label == OURS_BF16 else matmul_peak,
                                  None if label == OURS_BF16 else bound["flops_per_s"])
               for label, group in by_label.items() if not label.startswith(f"{OURS}-memory") and label not in BOUNDS}
    ours = figures.get(OURS, row_figures([], None, None))
    peers = {label: dict(figure, train_ratio_to_ours=_ratio(figure["train_tokens_per_s"], ours["train_tokens_per_s"]),
                         decode_ratio_to_ours=_ratio(figure["decode_sentences_per_s"], ours["decode_sentences_per_s"]))
             for label, figure in figures.items() if label not in (OURS, OURS_XLA, OURS_BF16)}
    memory = {phase: (by_label.get(f"{OURS}-memory-{phase}") or [{}])[0] for phase in MEMORY_PHASES}
    summary = {"preset": preset, **ours, "train_flops_per_step": flops_per_step,
               "matmul_peak_flops_per_s": matmul_peak,
               "matmul_bound": dict(bound, fraction_of_matmul_peak=_ratio(bound["flops_per_s"], matmul_peak)),
               "xla": figures.get(OURS_XLA),
               "bf16": figures.get(OURS_BF16), "matmul_peak_bf16_flops_per_s": bf16_peak,
               "memory": {"train_peak_rss_mb": memory["train"].get("memory", {}).get("peak_rss_mb"),
                          "train_micro_batch_tokens": memory["train"].get("memory", {}).get("micro_batch_tokens"),
                          "decode_beam4_peak_rss_mb": memory["decode"].get("memory", {}).get("peak_rss_mb")},
               "peers": peers}
    summary["targets"] = targets(summary)
    if summary["bf16"]:
        fastest = max((row["train_tokens_per_s"] or 0 for row in peers.values()), default=0)
        summary["bf16"]["train_vs_fastest_peer"] = _ratio(summary["bf16"]["train_tokens_per_s"], fastest)
    return summary


def targets(summary) -> dict:
    """The issue's targets: best t2t_lite row against the fastest peer, the matmul peak, Model Garden's beam.

    The beam target compares the best t2t_lite row with Model Garden's plain row (the issue's
    "cached beam search"); its entry also gives each of our rows against Model Garden and
    Model Garden + XLA, so a win that comes from XLA alone shows.
    """
    ours = {OURS: summary, **({OURS_XLA: summary["xla"]} if summary.get("xla") else {})}
    best_train = max((row["train_tokens_per_s"] or 0 for row in ours.values()), default=0)
    best_flops = max((row["train_flops_per_s"] or 0 for row in ours.values()), default=0)
    best_beam = max(((row["decode_sentences_per_s"] or 0, label) for label, row in ours.items()), default=(0, None))
    fastest = max(((row["train_tokens_per_s"] or 0, label) for label, row in summary["peers"].items()),
                  default=(0, None))
    gardens = {label: summary["peers"].get(label, {}).get("decode_sentences_per_s")
               for label in ("modelgarden", "modelgarden-xla")}
    values = {"train_vs_fastest_peer": _ratio(best_train, fastest[0]),
              "fraction_of_matmul_peak": _ratio(best_flops, summary["matmul_peak_flops_per_s"]),
              "beam_vs_modelgarden": _ratio(best_beam[0], gardens["modelgarden"])}
    result = {name: {"value": value, "target": TARGETS[name], "met": None if value is None else value >= TARGETS[name]}
              for name, value in values.items()}
    result["train_vs_fastest_peer"]["fastest_peer"] = fastest[1]
    result["beam_vs_modelgarden"]["ours_row"] = best_beam[1] if best_beam[0] else None
    result["beam_vs_modelgarden"]["each"] = {
        f"{label} / {garden}": _ratio(row["decode_sentences_per_s"], gardens[garden])
        for label, row in ours.items() for garden in gardens}
    return result


# -- Printing ------------------------------------------------------------------------------------
def _cell(value, digits=1, ratio=None):
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}" + (f" ({ratio:.2f}×)" if ratio is not None else "")


def _table_row(label, row, ours) -> str:
    def with_ratio(key, digits):
        return _cell(row[key], digits, _ratio(row[key], ours[key]))

    flops, fraction, of_bound = row["train_flops_per_s"], row["fraction_of_matmul_peak"], row["fraction_of_matmul_bound"]
    cells = [label + (" **failed**" if row["errors"] else ""), with_ratio("train_tokens_per_s", 1),
             _cell(flops and flops / 1e9), _cell(fraction and 100 * fraction), _cell(of_bound and 100 * of_bound),
             _cell(row["first_step_s"]),
             with_ratio("decode_greedy_sentences_per_s", 2), with_ratio("decode_sentences_per_s", 2),
             _cell(row["peak_rss_mb"], 0)]
    return "| " + " | ".join(cells) + " |"


def format_table(summary) -> str:
    """A Markdown table of one preset: every figure with its ratio to t2t_lite, then memory and targets."""
    peak = summary["matmul_peak_flops_per_s"]
    lines = [f"### preset `{summary['preset']}` (matmul peak {_cell(peak and peak / 1e9)} GFLOP/s; "
             f"ratios = row ÷ t2t_lite)", "",
             "| row | train tok/s | train GFLOP/s | % of peak | % of bound | first step s | greedy sent/s "
             "| beam4 sent/s | peak RSS MiB |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = [(OURS, summary), (OURS_XLA, summary.get("xla")), (OURS_BF16, summary.get("bf16")),
            *summary["peers"].items()]
    lines += [_table_row(label, row, summary) for label, row in rows if row]
    if summary.get("bf16"):
        bf16_peak = summary["matmul_peak_bf16_flops_per_s"]
        lines += ["", f"{OURS_BF16}: `activation_dtype=bfloat16`, its % of peak is of the bfloat16 matmul peak "
                  f"({_cell(bf16_peak and bf16_peak / 1e9)} GFLOP/s); not counted in the targets (the peers run "
                  f"float32): training ÷ the fastest peer {_cell(summary['bf16'].get('train_vs_fastest_peer'), 2)}."]
    bound = summary["matmul_bound"]
    if bound["flops_per_s"]:
        lines += ["", f"Matmul-only bound of this step (its products alone, each at its best rate): "
                  f"{_cell(bound['flops_per_s'] / 1e9)} GFLOP/s = {_cell(100 * bound['fraction_of_matmul_peak'])} % "
                  f"of the peak (oneDNN {_cell(bound['onednn_flops_per_s'] and bound['onednn_flops_per_s'] / 1e9)}, "
                  f"XLA {_cell(bound['xla_flops_per_s'] and bound['xla_flops_per_s'] / 1e9)} GFLOP/s); "
                  f"% of bound = train FLOP/s ÷ it."]
    memory = summary["memory"]
    if memory["train_peak_rss_mb"] or memory["decode_beam4_peak_rss_mb"]:
        lines += ["", f"Peak resident memory (VmHWM of its own process): a training update at a "
                  f"{_cell(memory['train_micro_batch_tokens'], 0)}-token micro-batch "
                  f"{_cell(memory['train_peak_rss_mb'], 0)} MiB; beam-4 decoding of 32 sentences "
                  f"{_cell(memory['decode_beam4_peak_rss_mb'], 0)} MiB."]
    lines.append("")
    for name, target in summary["targets"].items():
        verdict = "n/a" if target["met"] is None else ("met" if target["met"] else "NOT met")
        detail = ", ".join(f"{pair} {_cell(value, 2)}" for pair, value in target.get("each", {}).items())
        lines.append(f"- {name}: {_cell(target['value'], 3)} (target ≥ {target['target']}) {verdict}"
                     + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


# -- Entry point --------------------------------------------------------------------------------
def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", default="tiny,base", help="comma-separated subset of tiny,base (timed rows)")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated subset of " + ",".join(PEERS))
    parser.add_argument("--repeats", type=int, default=1, help="interleaved rounds of every row")
    parser.add_argument("--skip_peers", action="store_true", help="only the t2t_lite rows (and the matmul peak)")
    parser.add_argument("--no_bf16", action="store_true", help="leave out the bfloat16 row and its matmul peak")
    parser.add_argument("--no_matmul_bound", action="store_true",
                        help="leave out the matmul-only bound of each preset's step (two rows per preset)")
    parser.add_argument("--memory_presets", default="base",
                        help="presets whose peak memory is probed, once, before the timed rows ('' = none)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per preset instead of tables")
    parser.add_argument("--peers_dir", default=None, help=f"the peers' harness (default {DEFAULT_PEERS_DIR})")
    parser.add_argument("--output_dir", default=None, help="results.jsonl, summary.json and run.log go here")
    parser.add_argument("--cpus", default="0-1", help="taskset CPU list for every row ('' = no pinning)")
    parser.add_argument("--threads", type=int, default=2, help="framework threads in every row")
    parser.add_argument("--base_decode_repeats", type=int, default=1,
                        help="timed decoding calls at `base` for every row (peers' protocol: 2; 1 keeps the run short)")
    args = parser.parse_args(argv)
    args.presets = [preset for preset in args.presets.split(",") if preset]
    args.peers = [peer for peer in args.peers.split(",") if peer]
    args.memory_presets = [preset for preset in args.memory_presets.split(",") if preset]
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
            peer_command(label, peers_dir)
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
