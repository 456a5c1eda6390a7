"""Table 3 in miniature: one row's result from its run directory, and the table from every result found.

    python bench/table3.py result --row=A1 --seed=1 --train_steps=1200 ... WORK/A1/seed1
    python bench/table3.py table WORK [--png WORK/table3.png]

`result` (bench/table3.sh's last step for a row and seed) reads what the tools wrote into the run
directory, train.log (t2t-trainer's: the parameter count and the dev evaluation at the last update,
whose perplexity is exp of the mean negative log-likelihood per target wordpiece, without label
smoothing, as the paper's "PPL (dev)"), bleu.txt (t2t-bleu's) and train_seconds, and writes
result.json, atomically: its presence is what marks the row and seed finished.

`table` prints the markdown table of every WORK/<row>/seed<N>/result.json: per row the mean over its
seeds and their spread (max − min), the paper's figures (bench/table3_rows.py) and both deltas
against base, and a verdict per metric. A row's delta against base is "within noise" when its size is
at most the base row's seed spread of that metric, else "better" or "worse"; with one base seed
there is no spread to judge by ("needs seeds"). BLEU deltas and verdicts use the tokenized BLEU, the
paper's own measure; "paper's direction" says whether a delta outside the noise has the paper's sign.
The PNG draws each row's ΔPPL and ΔBLEU beside the paper's.
"""

import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import table3_rows  # noqa: E402

RESULT = "result.json"


class MissingMeasure(ValueError):
    """A run directory lacks a figure its result needs."""


# -- One row and seed: result.json ---------------------------------------------------------------
def read_result(run_dir: str, train_steps: int) -> dict:
    """The figures of a finished run directory: params, dev_ppl, sacrebleu, tokenized_bleu, train_seconds."""
    log = _read(run_dir, "train.log")
    evaluations = re.findall(rf"^Eval at step {train_steps}: (.*)$", log, re.MULTILINE)
    if not evaluations:
        raise MissingMeasure(
            f"{os.path.join(run_dir, 'train.log')} has no dev evaluation at step {train_steps}: "
            f"the training did not reach its last update; rerun bench/table3.sh to resume it."
        )
    perplexity = re.search(r"(?:^|, )perplexity ([\d.]+)", evaluations[-1])
    parameters = re.findall(r"^Model \w+: ([\d,]+) parameters;", log, re.MULTILINE)
    bleu = _read(run_dir, "bleu.txt")
    sacrebleu = re.search(r"^sacreBLEU = ([\d.]+)  \((.*)\)$", bleu, re.MULTILINE)
    tokenized = re.search(r"^BLEU tokenized as in the paper .* = ([\d.]+)  \(uncased", bleu, re.MULTILINE)
    for figure, found, file in (
        ("the dev perplexity", perplexity, "train.log"),
        ("the parameter count", parameters, "train.log"),
        ("sacreBLEU", sacrebleu, "bleu.txt"),
        ("the tokenized BLEU", tokenized, "bleu.txt"),
    ):
        if not found:
            raise MissingMeasure(f"{os.path.join(run_dir, file)} has no {figure}; rerun bench/table3.sh.")
    seconds = _read(run_dir, "train_seconds").split()
    return {
        "params": int(parameters[-1].replace(",", "")),
        "dev_ppl": float(perplexity.group(1)),
        "sacrebleu": float(sacrebleu.group(1)),
        "sacrebleu_signature": sacrebleu.group(2),
        "tokenized_bleu": float(tokenized.group(1)),
        "train_seconds": sum(int(value) for value in seconds),
    }


def _read(run_dir: str, name: str) -> str:
    path = os.path.join(run_dir, name)
    if not os.path.isfile(path):
        raise MissingMeasure(f"{path} is missing; rerun bench/table3.sh to make it.")
    with open(path, encoding="utf-8") as file:
        return file.read()


def write_result(run_dir: str, record: dict) -> str:
    """result.json, through a temporary file renamed over it: it exists whole or not at all."""
    path = os.path.join(run_dir, RESULT)
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as file:
        file.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(temporary, path)
    return path


# -- Every row found: the table -------------------------------------------------------------------
def collect(work: str) -> dict:
    """{row name: [result, ...]} for every WORK/<row>/seed<N>/result.json of a Table 3 row, seeds in order."""
    found = {}
    for path in sorted(glob.glob(os.path.join(work, "*", "seed*", RESULT))):
        with open(path, encoding="utf-8") as file:
            record = json.load(file)
        if record["row"] in table3_rows.BY_NAME:
            found.setdefault(record["row"], []).append(record)
    return {row.name: sorted(found[row.name], key=lambda r: r["seed"]) for row in table3_rows.ROWS if row.name in found}


def summary(results: list) -> dict:
    """Mean of each figure over the seeds, and the spread (max − min; None for one seed)."""
    out = {"seeds": len(results), "params": results[0]["params"]}
    for name in ("dev_ppl", "sacrebleu", "tokenized_bleu"):
        values = [result[name] for result in results]
        out[name] = statistics.fmean(values)
        out[name + "_spread"] = max(values) - min(values) if len(values) > 1 else None
    return out


LOWER_IS_BETTER = {"dev_ppl": True, "tokenized_bleu": False}


def verdict(delta: float, base: dict, metric: str) -> str:
    """better / worse / within noise, the noise being the base row's seed spread of `metric`."""
    noise = base[metric + "_spread"]
    if noise is None:
        return "needs seeds"
    if abs(delta) <= noise:
        return "within noise"
    return "better" if (delta < 0) == LOWER_IS_BETTER[metric] else "worse"


def direction(delta: float, paper_delta: float, judged: str) -> str:
    """Whether a delta judged better or worse has the paper's sign ("holds") or the opposite ("inverts")."""
    if judged not in ("better", "worse"):
        return "—"
    if paper_delta == 0:
        return "paper: no change"
    return "holds" if (delta > 0) == (paper_delta > 0) else "inverts"


HEADER = (
    "| row | changes | params ×10^6 | dev PPL | sacreBLEU | tokenized BLEU | seeds | spread PPL / BLEU "
    "| paper PPL | paper BLEU | paper params | paper ΔPPL | our ΔPPL | paper ΔBLEU | our ΔBLEU | verdict "
    "| paper's direction |"
)


def table_lines(found: dict) -> list:
    """The markdown table's lines, rows in the paper's order."""
    summaries = {name: summary(results) for name, results in found.items()}
    base, paper_base = summaries.get("base"), table3_rows.BY_NAME["base"]
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for name, ours in summaries.items():
        row = table3_rows.BY_NAME[name]
        deltas, verdicts, directions = ["—"] * 4, [], []
        if base is not None and name != "base":
            for i, (metric, paper_figure, paper_of_base) in enumerate(
                (
                    ("dev_ppl", row.paper_ppl, paper_base.paper_ppl),
                    ("tokenized_bleu", row.paper_bleu, paper_base.paper_bleu),
                )
            ):
                delta, paper_delta = ours[metric] - base[metric], paper_figure - paper_of_base
                deltas[2 * i : 2 * i + 2] = [f"{paper_delta:+.2f}", f"{delta:+.2f}"]
                judged = verdict(delta, base, metric)
                label = "PPL" if metric == "dev_ppl" else "BLEU"
                verdicts.append(f"{label} {judged}")
                directions.append(f"{label} {direction(delta, paper_delta, judged)}")
        elif name != "base":
            verdicts, directions = ["needs base"], ["—"]
        spread = " / ".join(_figure(ours[f"{m}_spread"], d) for m, d in (("dev_ppl", 2), ("tokenized_bleu", 1)))
        cells = [
            name,
            row.change,
            f"{ours['params'] / 1e6:.2f}",
            f"{ours['dev_ppl']:.2f}",
            f"{ours['sacrebleu']:.1f}",
            f"{ours['tokenized_bleu']:.1f}",
            str(ours["seeds"]),
            spread,
            f"{row.paper_ppl:.2f}",
            f"{row.paper_bleu:.1f}",
            _figure(row.paper_params_millions, 0),
            *deltas,
            "; ".join(verdicts) or "—",
            "; ".join(directions) or "—",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _figure(value, decimals: int) -> str:
    return "—" if value is None else f"{value:.{decimals}f}"


def plot(found: dict, path: str) -> None:
    """A PNG of each row's ΔPPL and ΔBLEU against base beside the paper's; the base's seed spread shaded."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError("matplotlib is not installed (pip install -e '.[plot]')") from None
    matplotlib.use("Agg")  # a file only: works without a display
    from matplotlib import pyplot

    summaries = {name: summary(results) for name, results in found.items()}
    if "base" not in summaries:
        raise MissingMeasure("no base row's result: the deltas are against base; run ROWS=base first.")
    base, paper_base = summaries["base"], table3_rows.BY_NAME["base"]
    names = [name for name in summaries if name != "base"]
    figure, axes = pyplot.subplots(2, 1, figsize=(max(6.0, 0.55 * len(names) + 2), 6.5), sharex=True)
    positions = range(len(names))
    for axis, metric, paper_field, label in (
        (axes[0], "dev_ppl", "paper_ppl", "Δ dev PPL vs base (lower is better)"),
        (axes[1], "tokenized_bleu", "paper_bleu", "Δ dev BLEU vs base (higher is better)"),
    ):
        ours = [summaries[name][metric] - base[metric] for name in names]
        paper = [getattr(table3_rows.BY_NAME[name], paper_field) - getattr(paper_base, paper_field) for name in names]
        axis.bar([p - 0.2 for p in positions], ours, width=0.4, label="miniature (Multi30k)")
        axis.bar([p + 0.2 for p in positions], paper, width=0.4, label="paper (newstest2013)")
        if base[metric + "_spread"] is not None:
            noise = base[metric + "_spread"]
            axis.axhspan(-noise, noise, color="grey", alpha=0.2, zorder=0, label="base's seed spread")
        axis.axhline(0, color="black", linewidth=0.8)
        axis.set_ylabel(label)
        axis.grid(axis="y", alpha=0.3)
    axes[0].legend(loc="best", fontsize="small")
    axes[1].set_xticks(list(positions), names)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


# -- The command line ------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    result = commands.add_parser("result", help="write RUN_DIR/result.json from the tools' outputs")
    result.add_argument("run_dir")
    result.add_argument("--row", required=True, choices=list(table3_rows.BY_NAME))
    result.add_argument("--seed", required=True, type=int)
    result.add_argument("--train_steps", required=True, type=int)
    for name in ("--hparams_set", "--hparams", "--decode_hparams"):
        result.add_argument(name, default="")
    table = commands.add_parser("table", help="print the markdown table of every result under WORK, write the PNG")
    table.add_argument("work")
    table.add_argument("--png", help="the picture's path (default WORK/table3.png)")
    args = parser.parse_args(argv)
    try:
        if args.command == "result":
            record = {key: getattr(args, key) for key in ("row", "seed", "train_steps", "hparams_set", "hparams")}
            record["decode_hparams"] = args.decode_hparams
            record.update(read_result(args.run_dir, args.train_steps))
            print(f"Wrote {write_result(args.run_dir, record)}")
            return 0
        found = collect(args.work)
        if not found:
            raise MissingMeasure(
                f"{args.work} holds no <row>/seed<N>/{RESULT}; run bench/table3.sh with WORK={args.work}."
            )
        print("\n".join(table_lines(found)))
        missing = [row.name for row in table3_rows.ROWS if row.name not in found]
        if missing:
            print(f"\nNo result yet for: {' '.join(missing)}")
        if "base" not in found:
            print("No PNG: its deltas are against the base row, which has no result yet (ROWS=base).")
            return 0
        png = args.png or os.path.join(args.work, "table3.png")
        plot(found, png)
        print(f"Wrote {png}")
        return 0
    except (MissingMeasure, ImportError) as error:
        print(f"table3.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
