"""The side-by-side run's rows as figures, ratios and targets per preset, in JSON and Markdown.

bench/compare_peers.py runs the rows (one JSON line each, in the schema of the peers'
peer_common.py) and hands them here. Figures are medians over timed steps/calls; with
several rounds, the median of the rounds' medians:
  train tok/s        target tokens per second of one full training step
  train FLOP/s       flops.flops_per_step(hparams, vocab, batch × 32, 32) ÷ step time; the
                     same estimate is applied to every row, as they all do the same work
  % of peak          train FLOP/s ÷ the fp32 matmul peak measured by bench/matmul_peak.py
                     (the t2t_lite-bf16 row: ÷ the bfloat16 peak, `--dtype=bfloat16`)
  % of bound         train FLOP/s ÷ the matmul-only bound: the FLOP/s of a step that did
                     nothing but the preset step's matrix products, each timed alone at its
                     own shape with the faster of oneDNN's and XLA's kernels
  greedy, beam4      sentences per second, 32 sentences of 20 tokens decoded to 30 tokens
  peak RSS           the process's maximum resident memory (os.wait4 of the child)
  memory probes      VmHWM of a transformer_base update at a 4,096-token micro-batch, and of
                     one beam-4 decoding call, each in a process of its own
Ratios in the main table are row ÷ t2t_lite; the decoding table gives every decoder
÷ CTranslate2 float32 and ÷ CTranslate2 int8, the decode-only inference engine.
"""

import statistics

PEERS = ("modelgarden", "torch", "kerashub", "modelgarden-xla", "kerashub-xla", "ctranslate2", "ctranslate2-int8")
CT2, CT2_INT8 = "ctranslate2", "ctranslate2-int8"
OURS, OURS_XLA, OURS_BF16, OURS_SAVEDMODEL = "t2t_lite", "t2t_lite-xla", "t2t_lite-bf16", "t2t_lite-savedmodel"
# int8 or bfloat16 product weights (t2t_lite/decode/quantization.py), decode only: the XLA decoder and the XLA export.
OURS_XLA_INT8, OURS_SAVEDMODEL_INT8 = "t2t_lite-xla-int8", "t2t_lite-savedmodel-int8"
OURS_XLA_BF16_WEIGHTS, OURS_SAVEDMODEL_BF16_WEIGHTS = "t2t_lite-xla-bf16-weights", "t2t_lite-savedmodel-bf16-weights"
# Our model converted by t2t_lite/serve/ctranslate2_export.py, decoded by CTranslate2 (float32; int8 weights).
OURS_CT2, OURS_CT2_INT8 = "t2t_lite-ctranslate2", "t2t_lite-ctranslate2-int8"
OUR_VARIANTS = {
    OURS_XLA: "xla",
    OURS_BF16: "bf16",
    OURS_SAVEDMODEL: "savedmodel",  # summary key of each
    OURS_XLA_INT8: "xla_int8",
    OURS_SAVEDMODEL_INT8: "savedmodel_int8",
    OURS_XLA_BF16_WEIGHTS: "xla_bf16_weights",
    OURS_SAVEDMODEL_BF16_WEIGHTS: "savedmodel_bf16_weights",
    OURS_CT2: "ctranslate2",
    OURS_CT2_INT8: "ctranslate2_int8",
}
# Our decoders, for the targets against CTranslate2: the converted model runs in CTranslate2 itself.
OUR_DECODERS = tuple(label for label in OUR_VARIANTS if label not in (OURS_CT2, OURS_CT2_INT8))
PEAK, PEAK_BF16 = "matmul_peak", "matmul_peak_bf16"
BOUNDS = ("matmul_bound", "matmul_bound-xla")  # oneDNN's kernels, XLA's
MEMORY_PHASES = ("train", "decode")
TARGETS = {
    "train_vs_fastest_peer": 1.2,
    "fraction_of_matmul_peak": 0.85,
    "beam_vs_modelgarden": 2.0,
    "savedmodel_vs_ctranslate2": 1.0,
    "decoder_vs_ctranslate2_int8": 1.0,
}


def best_peaks(rows) -> dict:
    """{PEAK: the highest fp32 matmul peak measured, PEAK_BF16: the highest bfloat16 one} (None if none)."""
    return {
        label: max(
            (row["matmul_peak_flops_per_s"] for row in rows if row["label"] == label and "error" not in row),
            default=None,
        )
        for label in (PEAK, PEAK_BF16)
    }


# -- Figures of one label ------------------------------------------------------------------
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
    best = {
        label: max(
            (
                row["matmul_bound"]["matmul_only_flops_per_s"]
                for row in rows
                if row["label"] == label and "matmul_bound" in row
            ),
            default=None,
        )
        for label in BOUNDS
    }
    return {
        "onednn_flops_per_s": best[BOUNDS[0]],
        "xla_flops_per_s": best[BOUNDS[1]],
        "flops_per_s": max((value for value in best.values() if value), default=None),
    }


def row_figures(rows, flops_per_step, matmul_peak, bound=None) -> dict:
    """The comparable figures of one label at one preset (decode-only rows have "train": null)."""
    step_s = _median_of(rows, "train", "step_s")
    firsts = [row["train"]["first_step_s"] for row in rows if row.get("train")]
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


# -- One preset ------------------------------------------------------------------------------
def preset_summary(preset, rows, matmul_peak, bf16_peak=None) -> dict:
    """One JSON object: t2t_lite's figures at top level, its variants and the peers' beside, the targets."""
    at_preset = [row for row in rows if row.get("preset") == preset]
    flops_per_step = next(
        (r["train"]["flops_per_step"] for r in at_preset if r["label"] == OURS and r.get("train")), None
    )
    by_label = {}
    for row in at_preset:
        by_label.setdefault(row["label"], []).append(row)
    bound = matmul_bound(at_preset)
    figures = {
        label: row_figures(
            group,
            flops_per_step,
            bf16_peak if label == OURS_BF16 else matmul_peak,
            None if label == OURS_BF16 else bound["flops_per_s"],
        )
        for label, group in by_label.items()
        if not label.startswith(f"{OURS}-memory") and label not in BOUNDS
    }
    ours = figures.get(OURS, row_figures([], None, None))
    peers = {
        label: dict(
            figure,
            train_ratio_to_ours=_ratio(figure["train_tokens_per_s"], ours["train_tokens_per_s"]),
            decode_ratio_to_ours=_ratio(figure["decode_sentences_per_s"], ours["decode_sentences_per_s"]),
        )
        for label, figure in figures.items()
        if label != OURS and label not in OUR_VARIANTS
    }
    memory = {phase: (by_label.get(f"{OURS}-memory-{phase}") or [{}])[0] for phase in MEMORY_PHASES}
    summary = {
        "preset": preset,
        **ours,
        "train_flops_per_step": flops_per_step,
        "matmul_peak_flops_per_s": matmul_peak,
        "matmul_bound": dict(bound, fraction_of_matmul_peak=_ratio(bound["flops_per_s"], matmul_peak)),
        **{key: figures.get(label) for label, key in OUR_VARIANTS.items()},
        "savedmodel_xla": next(
            (r["savedmodel_xla"] for r in by_label.get(OURS_SAVEDMODEL, []) if "savedmodel_xla" in r), None
        ),
        "matmul_peak_bf16_flops_per_s": bf16_peak,
        "memory": {
            "train_peak_rss_mb": memory["train"].get("memory", {}).get("peak_rss_mb"),
            "train_micro_batch_tokens": memory["train"].get("memory", {}).get("micro_batch_tokens"),
            "decode_beam4_peak_rss_mb": memory["decode"].get("memory", {}).get("peak_rss_mb"),
        },
        "peers": peers,
    }
    summary["versus_ctranslate2"] = versus_ctranslate2(summary)
    summary["targets"] = targets(summary)
    if summary["bf16"]:
        fastest = max((row["train_tokens_per_s"] or 0 for row in peers.values()), default=0)
        summary["bf16"]["train_vs_fastest_peer"] = _ratio(summary["bf16"]["train_tokens_per_s"], fastest)
    return summary


def our_rows(summary, variants=tuple(OUR_VARIANTS)) -> dict:
    """{label: figures} of t2t_lite and those of its `variants` that ran."""
    rows = {OURS: summary, **{label: summary.get(OUR_VARIANTS[label]) for label in variants}}
    return {label: row for label, row in rows.items() if row}


def versus_ctranslate2(summary) -> dict:
    """Each decoder's sentences/s ÷ CTranslate2 float32's and ÷ CTranslate2 int8's, greedy and beam 4."""
    engines = {
        name: summary["peers"].get(label, {}) for name, label in (("ctranslate2", CT2), ("ctranslate2_int8", CT2_INT8))
    }
    decoders = {**our_rows(summary), **{label: row for label, row in summary["peers"].items()}}
    result = {}
    for label, row in decoders.items():
        if row["decode_sentences_per_s"] is None and row["decode_greedy_sentences_per_s"] is None:
            continue
        entry = {
            "beam_sentences_per_s": row["decode_sentences_per_s"],
            "greedy_sentences_per_s": row["decode_greedy_sentences_per_s"],
        }
        for name, engine in engines.items():
            entry[f"beam_vs_{name}"] = _ratio(row["decode_sentences_per_s"], engine.get("decode_sentences_per_s"))
            entry[f"greedy_vs_{name}"] = _ratio(
                row["decode_greedy_sentences_per_s"], engine.get("decode_greedy_sentences_per_s")
            )
        result[label] = entry
    return result


def _best_beam(rows) -> tuple:
    """(beam-4 sentences/s, label) of the fastest of `rows`, (0, None) when none decoded."""
    return max(((row["decode_sentences_per_s"] or 0, label) for label, row in rows.items()), default=(0, None))


def targets(summary) -> dict:
    """The targets (docs/benchmarks.md, "Against the targets"): best t2t_lite row against the fastest
    peer, the matmul peak, Model Garden's beam, CTranslate2 float32 (the SavedModel) and CTranslate2
    int8 (our fastest decoder).

    The training and Model Garden targets count t2t_lite and t2t_lite-xla only (the peers run
    float32); the beam target's entry also gives each of them against Model Garden and Model
    Garden + XLA, so a win that comes from XLA alone shows. The SavedModel target counts the
    float32 export against CTranslate2 float32. Against CTranslate2 int8, whose products are
    int8, every decoder of ours counts, the bfloat16, int8 and bfloat16-weights ones included
    (not our model converted to CTranslate2, which is CTranslate2's decoder).
    """
    float32_rows = our_rows(summary, (OURS_XLA,))
    best_train = max((row["train_tokens_per_s"] or 0 for row in float32_rows.values()), default=0)
    best_flops = max((row["train_flops_per_s"] or 0 for row in float32_rows.values()), default=0)
    best_beam = _best_beam(float32_rows)
    fastest_decoder = _best_beam(our_rows(summary, OUR_DECODERS))
    fastest = max(
        ((row["train_tokens_per_s"] or 0, label) for label, row in summary["peers"].items()), default=(0, None)
    )
    beam_of = {
        label: summary["peers"].get(label, {}).get("decode_sentences_per_s")
        for label in ("modelgarden", "modelgarden-xla", CT2, CT2_INT8)
    }
    savedmodel = (summary.get("savedmodel") or {}).get("decode_sentences_per_s")
    values = {
        "train_vs_fastest_peer": _ratio(best_train, fastest[0]),
        "fraction_of_matmul_peak": _ratio(best_flops, summary["matmul_peak_flops_per_s"]),
        "beam_vs_modelgarden": _ratio(best_beam[0], beam_of["modelgarden"]),
        "savedmodel_vs_ctranslate2": _ratio(savedmodel, beam_of[CT2]),
        "decoder_vs_ctranslate2_int8": _ratio(fastest_decoder[0], beam_of[CT2_INT8]),
    }
    result = {
        name: {"value": value, "target": TARGETS[name], "met": None if value is None else value >= TARGETS[name]}
        for name, value in values.items()
    }
    result["train_vs_fastest_peer"]["fastest_peer"] = fastest[1]
    result["beam_vs_modelgarden"]["ours_row"] = best_beam[1] if best_beam[0] else None
    result["beam_vs_modelgarden"]["each"] = {
        f"{label} / {garden}": _ratio(row["decode_sentences_per_s"], beam_of[garden])
        for label, row in float32_rows.items()
        for garden in ("modelgarden", "modelgarden-xla")
    }
    result["decoder_vs_ctranslate2_int8"]["ours_row"] = fastest_decoder[1] if fastest_decoder[0] else None
    return result


# -- Printing ------------------------------------------------------------------------------------
def _cell(value, digits=1, ratio=None):
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}" + (f" ({ratio:.2f}×)" if ratio is not None else "")


def _table_row(label, row, ours) -> str:
    def with_ratio(key, digits):
        return _cell(row[key], digits, _ratio(row[key], ours[key]))

    flops, fraction, of_bound = (
        row["train_flops_per_s"],
        row["fraction_of_matmul_peak"],
        row["fraction_of_matmul_bound"],
    )
    cells = [
        label + (" **failed**" if row["errors"] else ""),
        with_ratio("train_tokens_per_s", 1),
        _cell(flops and flops / 1e9),
        _cell(fraction and 100 * fraction),
        _cell(of_bound and 100 * of_bound),
        _cell(row["first_step_s"]),
        with_ratio("decode_greedy_sentences_per_s", 2),
        with_ratio("decode_sentences_per_s", 2),
        _cell(row["peak_rss_mb"], 0),
    ]
    return "| " + " | ".join(cells) + " |"


def format_ctranslate2_table(summary) -> list:
    """Lines of the decoding table against CTranslate2 (none when neither CTranslate2 row ran)."""
    if not ({CT2, CT2_INT8} & set(summary["peers"])):
        return []
    lines = [
        "",
        "Decoding against CTranslate2 (sentences/s; ratios = row ÷ ctranslate2 float32 / ÷ ctranslate2-int8):",
        "",
        "| row | greedy sent/s | ÷ fp32 | ÷ int8 | beam4 sent/s | ÷ fp32 | ÷ int8 |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label, entry in summary["versus_ctranslate2"].items():
        cells = [
            label,
            _cell(entry["greedy_sentences_per_s"], 2),
            _cell(entry["greedy_vs_ctranslate2"], 2),
            _cell(entry["greedy_vs_ctranslate2_int8"], 2),
            _cell(entry["beam_sentences_per_s"], 2),
            _cell(entry["beam_vs_ctranslate2"], 2),
            _cell(entry["beam_vs_ctranslate2_int8"], 2),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if summary.get("savedmodel"):
        lines += [
            "",
            f"{OURS_SAVEDMODEL}: the export's `translate_ids` signature loaded with tf.saved_model.load, "
            f"XLA decoding {'on' if summary.get('savedmodel_xla') else 'off (this export.py has no xla setting)'}.",
        ]
    if summary.get("ctranslate2") or summary.get("ctranslate2_int8"):
        lines += [
            "",
            f"{OURS_CT2}, {OURS_CT2_INT8}: our model converted by t2t_lite/serve/ctranslate2_export.py, "
            f"decoded by CTranslate2 with compute_type float32 / int8.",
        ]
    return lines


def format_table(summary) -> str:
    """A Markdown table of one preset: every figure with its ratio to t2t_lite, then CTranslate2, memory, targets."""
    peak = summary["matmul_peak_flops_per_s"]
    lines = [
        f"### preset `{summary['preset']}` (matmul peak {_cell(peak and peak / 1e9)} GFLOP/s; ratios = row ÷ t2t_lite)",
        "",
        "| row | train tok/s | train GFLOP/s | % of peak | % of bound | first step s | greedy sent/s "
        "| beam4 sent/s | peak RSS MiB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [*our_rows(summary).items(), *summary["peers"].items()]
    lines += [_table_row(label, row, summary) for label, row in rows]
    if summary.get("bf16"):
        bf16_peak = summary["matmul_peak_bf16_flops_per_s"]
        lines += [
            "",
            f"{OURS_BF16}: `activation_dtype=bfloat16`, its % of peak is of the bfloat16 matmul peak "
            f"({_cell(bf16_peak and bf16_peak / 1e9)} GFLOP/s); not counted in the float32 targets: "
            f"training ÷ the fastest peer {_cell(summary['bf16'].get('train_vs_fastest_peer'), 2)}.",
        ]
    lines += format_ctranslate2_table(summary)
    bound = summary["matmul_bound"]
    if bound["flops_per_s"]:
        lines += [
            "",
            f"Matmul-only bound of this step (its products alone, each at its best rate): "
            f"{_cell(bound['flops_per_s'] / 1e9)} GFLOP/s = {_cell(100 * bound['fraction_of_matmul_peak'])} % "
            f"of the peak (oneDNN {_cell(bound['onednn_flops_per_s'] and bound['onednn_flops_per_s'] / 1e9)}, "
            f"XLA {_cell(bound['xla_flops_per_s'] and bound['xla_flops_per_s'] / 1e9)} GFLOP/s); "
            f"% of bound = train FLOP/s ÷ it.",
        ]
    memory = summary["memory"]
    if memory["train_peak_rss_mb"] or memory["decode_beam4_peak_rss_mb"]:
        lines += [
            "",
            f"Peak resident memory (VmHWM of its own process): a training update at a "
            f"{_cell(memory['train_micro_batch_tokens'], 0)}-token micro-batch "
            f"{_cell(memory['train_peak_rss_mb'], 0)} MiB; beam-4 decoding of 32 sentences "
            f"{_cell(memory['decode_beam4_peak_rss_mb'], 0)} MiB.",
        ]
    lines.append("")
    for name, target in summary["targets"].items():
        verdict = "n/a" if target["met"] is None else ("met" if target["met"] else "NOT met")
        detail = ", ".join(f"{pair} {_cell(value, 2)}" for pair, value in target.get("each", {}).items())
        if target.get("ours_row") and "each" not in target:
            detail = f"by {target['ours_row']}"
        lines.append(
            f"- {name}: {_cell(target['value'], 3)} (target ≥ {target['target']}) {verdict}"
            + (f" ({detail})" if detail else "")
        )
    return "\n".join(lines)
