"""bench/peer_summary.py on canned rows: figures, ratios to t2t_lite and to CTranslate2, targets, tables.

The canned rows have the shape peer_common.py writes (pc.summary blocks with a median;
CTranslate2 and the SavedModel decode only, with "train": null); expected figures are
worked out by hand from them.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import peer_summary  # noqa: E402

MATMUL_PEAK = 100e9
FLOPS_PER_STEP = 40e9


def block(median):
    return {"median": median, "min": median, "max": median, "mean": median, "n": 1, "values": [median]}


def row(label, preset, tokens_per_s=None, step_s=None, beam=None, greedy=None, rss=1000.0):
    result = {"label": label, "preset": preset, "round": 1, "peak_rss_mb": rss, "params": 10}
    if tokens_per_s is not None:
        result["train"] = {"tgt_tok_per_s": block(tokens_per_s), "step_s": block(step_s), "first_step_s": 3.0}
        if label == peer_summary.OURS:
            result["train"]["flops_per_step"] = FLOPS_PER_STEP
    else:
        result["train"] = None  # a decode-only row, as peer_ctranslate2.py and --savedmodel write it
    if beam is not None:
        result["decode"] = {"beam": {"sent_per_s": block(beam)}, "greedy": {"sent_per_s": block(greedy)}}
    return result


def canned_rows(preset="base", ctranslate2=True):
    memory = [
        {
            "label": f"t2t_lite-memory-{phase}",
            "preset": preset,
            "peak_rss_mb": rss,
            "memory": {"phase": phase, "peak_rss_mb": rss, "micro_batch_tokens": 4096},
        }
        for phase, rss in (("train", 5000.0), ("decode", 2000.0))
    ]
    engines = (
        [row("ctranslate2", preset, beam=8.0, greedy=16.0), row("ctranslate2-int8", preset, beam=10.0, greedy=20.0)]
        if ctranslate2
        else []
    )
    return [
        {"label": "matmul_peak", "preset": None, "matmul_peak_flops_per_s": MATMUL_PEAK, "peak_rss_mb": 300.0},
        row("modelgarden", preset, 200.0, 2.56, beam=2.0, greedy=6.0),
        row("modelgarden-xla", preset, 210.0, 2.4, beam=4.0, greedy=7.0),
        row("kerashub-xla", preset, 250.0, 2.048, beam=3.5, greedy=12.0),
        *engines,
        row("t2t_lite", preset, 160.0, 3.2, beam=5.0, greedy=10.0),
        row("t2t_lite-xla", preset, 240.0, 2.0, beam=4.4, greedy=11.0),
        row("t2t_lite-bf16", preset, 400.0, 1.28, beam=6.0, greedy=12.0),
        dict(row("t2t_lite-savedmodel", preset, beam=4.0, greedy=9.0), savedmodel_xla=False),
        *memory,
        *bound_rows(preset),
    ]


def bound_rows(preset):
    """Two rounds of the matmul-only bound: oneDNN's best is 80 GFLOP/s, XLA's 50."""
    return [
        {
            "label": label,
            "preset": preset,
            "round": round_index,
            "peak_rss_mb": 900.0,
            "matmul_bound": {"matmul_only_flops_per_s": flops},
        }
        for label, values in (("matmul_bound", (70e9, 80e9)), ("matmul_bound-xla", (50e9, 40e9)))
        for round_index, flops in enumerate(values, 1)
    ]


def test_summary_figures_ratios_and_targets():
    summary = peer_summary.preset_summary("base", canned_rows(), MATMUL_PEAK, bf16_peak=4 * MATMUL_PEAK)
    assert summary["train_tokens_per_s"] == 160.0
    assert summary["train_flops_per_s"] == pytest.approx(40e9 / 3.2)
    assert summary["fraction_of_matmul_peak"] == pytest.approx(0.125)
    assert summary["decode_sentences_per_s"] == 5.0
    assert summary["xla"]["train_flops_per_s"] == pytest.approx(20e9)
    # The peers' FLOP/s use the same estimate: they do the same work in their own step time.
    assert summary["peers"]["modelgarden"]["train_flops_per_s"] == pytest.approx(40e9 / 2.56)
    assert summary["peers"]["modelgarden"]["train_ratio_to_ours"] == pytest.approx(200 / 160)
    assert summary["peers"]["kerashub-xla"]["decode_ratio_to_ours"] == pytest.approx(3.5 / 5)
    # The bound is the best kernel's best round; each row's FLOP/s are a fraction of it (bf16 aside).
    assert summary["matmul_bound"] == {
        "onednn_flops_per_s": 80e9,
        "xla_flops_per_s": 50e9,
        "flops_per_s": 80e9,
        "fraction_of_matmul_peak": pytest.approx(0.8),
    }
    assert summary["fraction_of_matmul_bound"] == pytest.approx(40e9 / 3.2 / 80e9)
    assert summary["xla"]["fraction_of_matmul_bound"] == pytest.approx(0.25)
    assert summary["peers"]["kerashub-xla"]["fraction_of_matmul_bound"] == pytest.approx(40e9 / 2.048 / 80e9)
    assert summary["bf16"]["fraction_of_matmul_bound"] is None
    assert not {"matmul_bound", "matmul_bound-xla"} & set(summary["peers"])
    assert summary["memory"] == {
        "train_peak_rss_mb": 5000.0,
        "train_micro_batch_tokens": 4096,
        "decode_beam4_peak_rss_mb": 2000.0,
    }
    targets = summary["targets"]
    # Best of ours (XLA, 240 tok/s) against the fastest peer (kerashub-xla, 250 tok/s); the
    # decode-only rows have no training figure and do not count.
    assert targets["train_vs_fastest_peer"]["value"] == pytest.approx(240 / 250)
    assert targets["train_vs_fastest_peer"]["fastest_peer"] == "kerashub-xla"
    assert targets["train_vs_fastest_peer"]["met"] is False
    assert targets["fraction_of_matmul_peak"]["value"] == pytest.approx(0.2)
    # Best float32 row of ours (plain, 5.0 sent/s; bf16's 6.0 does not count) against Model Garden's plain row.
    assert targets["beam_vs_modelgarden"]["value"] == pytest.approx(2.5)
    assert targets["beam_vs_modelgarden"]["ours_row"] == "t2t_lite"
    assert targets["beam_vs_modelgarden"]["met"] is True
    # The bfloat16 row is faster than every row above, yet left out of the float32 targets, and
    # its FLOP/s are a fraction of the bfloat16 peak.
    assert summary["bf16"]["fraction_of_matmul_peak"] == pytest.approx((40e9 / 1.28) / 400e9)
    assert summary["bf16"]["train_vs_fastest_peer"] == pytest.approx(400 / 250)
    assert "t2t_lite-bf16" not in summary["peers"]
    table = peer_summary.format_table(summary)
    assert "| t2t_lite-bf16 | 400.0 (2.50×) | 31.2 | 7.8 | n/a |" in table and "not counted in the float32" in table
    assert "| t2t_lite-xla | 240.0 (1.50×) | 20.0 | 20.0 | 25.0 |" in table
    assert "bound of this step (its products alone, each at its best rate): 80.0 GFLOP/s = 80.0 % of the peak" in table
    assert targets["beam_vs_modelgarden"]["each"] == pytest.approx(
        {
            "t2t_lite / modelgarden": 2.5,
            "t2t_lite / modelgarden-xla": 1.25,
            "t2t_lite-xla / modelgarden": 2.2,
            "t2t_lite-xla / modelgarden-xla": 1.1,
        }
    )


def test_every_decoder_against_ctranslate2_float32_and_int8():
    summary = peer_summary.preset_summary("base", canned_rows(), MATMUL_PEAK, bf16_peak=4 * MATMUL_PEAK)
    versus = summary["versus_ctranslate2"]
    assert versus["t2t_lite-xla"] == pytest.approx(
        {
            "beam_sentences_per_s": 4.4,
            "greedy_sentences_per_s": 11.0,
            "beam_vs_ctranslate2": 4.4 / 8,
            "greedy_vs_ctranslate2": 11 / 16,
            "beam_vs_ctranslate2_int8": 4.4 / 10,
            "greedy_vs_ctranslate2_int8": 11 / 20,
        }
    )
    assert versus["t2t_lite-savedmodel"]["beam_vs_ctranslate2"] == pytest.approx(0.5)
    assert versus["modelgarden"]["beam_vs_ctranslate2_int8"] == pytest.approx(0.2)
    assert versus["ctranslate2-int8"]["beam_vs_ctranslate2"] == pytest.approx(10 / 8)
    # The SavedModel is ours, not a peer, and decode-only: no training figures.
    assert "t2t_lite-savedmodel" not in summary["peers"]
    assert summary["savedmodel"]["train_tokens_per_s"] is None and summary["savedmodel_xla"] is False
    assert summary["peers"]["ctranslate2"]["train_tokens_per_s"] is None
    targets = summary["targets"]
    assert targets["savedmodel_vs_ctranslate2"] == {"value": pytest.approx(0.5), "target": 1.0, "met": False}
    # Against int8 every decoder of ours counts: the bfloat16 row's 6.0 sent/s is the fastest.
    assert targets["decoder_vs_ctranslate2_int8"]["value"] == pytest.approx(0.6)
    assert targets["decoder_vs_ctranslate2_int8"]["ours_row"] == "t2t_lite-bf16"
    table = peer_summary.format_table(summary)
    assert "| ctranslate2 | n/a | n/a | n/a | n/a | n/a | 16.00 (1.60×) | 8.00 (1.60×) | 1,000 |" in table
    assert "| t2t_lite-savedmodel | n/a | n/a | n/a | n/a | n/a | 9.00 (0.90×) | 4.00 (0.80×) | 1,000 |" in table
    assert "| t2t_lite-savedmodel | 9.00 | 0.56 | 0.45 | 4.00 | 0.50 | 0.40 |" in table
    assert "XLA decoding off (this export.py has no xla setting)" in table
    assert "- savedmodel_vs_ctranslate2: 0.500 (target ≥ 1.0) NOT met" in table
    assert "- decoder_vs_ctranslate2_int8: 0.600 (target ≥ 1.0) NOT met (by t2t_lite-bf16)" in table


def test_the_int8_rows_count_against_ctranslate2_int8_but_not_as_the_float32_savedmodel():
    rows = canned_rows() + [
        row("t2t_lite-xla-int8", "base", beam=12.0, greedy=24.0),
        dict(row("t2t_lite-savedmodel-int8", "base", beam=11.0, greedy=22.0), savedmodel_xla=True),
    ]
    summary = peer_summary.preset_summary("base", rows, MATMUL_PEAK, bf16_peak=4 * MATMUL_PEAK)
    assert summary["xla_int8"]["decode_sentences_per_s"] == 12.0 and "t2t_lite-xla-int8" not in summary["peers"]
    assert summary["versus_ctranslate2"]["t2t_lite-savedmodel-int8"]["beam_vs_ctranslate2_int8"] == pytest.approx(1.1)
    targets = summary["targets"]
    assert targets["decoder_vs_ctranslate2_int8"]["value"] == pytest.approx(12.0 / 10.0)
    assert targets["decoder_vs_ctranslate2_int8"]["ours_row"] == "t2t_lite-xla-int8"
    assert targets["decoder_vs_ctranslate2_int8"]["met"] is True
    assert targets["savedmodel_vs_ctranslate2"]["value"] == pytest.approx(4.0 / 8.0)  # the float32 export's


def test_without_ctranslate2_rows_those_targets_are_not_applicable():
    summary = peer_summary.preset_summary("base", canned_rows(ctranslate2=False), MATMUL_PEAK)
    assert summary["targets"]["savedmodel_vs_ctranslate2"] == {"value": None, "target": 1.0, "met": None}
    assert summary["versus_ctranslate2"]["t2t_lite"]["beam_vs_ctranslate2"] is None
    table = peer_summary.format_table(summary)
    assert "Decoding against CTranslate2" not in table
    assert "- decoder_vs_ctranslate2_int8: n/a (target ≥ 1.0) n/a" in table


def test_a_failed_ctranslate2_row_is_marked_and_counts_for_nothing():
    rows = [r for r in canned_rows() if r["label"] != "ctranslate2"]
    rows.append({"label": "ctranslate2", "preset": "base", "round": 1, "peak_rss_mb": 50.0, "error": "exit code 2"})
    summary = peer_summary.preset_summary("base", rows, MATMUL_PEAK)
    assert summary["targets"]["savedmodel_vs_ctranslate2"]["met"] is None
    assert "| ctranslate2 **failed** | n/a |" in peer_summary.format_table(summary)


def test_the_highest_peak_of_each_dtype_counts_and_failed_probes_do_not():
    rows = [{"label": peer_summary.PEAK, "matmul_peak_flops_per_s": value} for value in (3e11, 2.5e11)]
    rows += [
        {"label": peer_summary.PEAK_BF16, "matmul_peak_flops_per_s": 1e12},
        {"label": peer_summary.PEAK_BF16, "error": "exit code 1"},
    ]
    assert peer_summary.best_peaks(rows) == {peer_summary.PEAK: 3e11, peer_summary.PEAK_BF16: 1e12}
    assert peer_summary.best_peaks([]) == {peer_summary.PEAK: None, peer_summary.PEAK_BF16: None}


def test_table_shows_each_figure_with_its_ratio_to_ours():
    table = peer_summary.format_table(peer_summary.preset_summary("base", canned_rows(), MATMUL_PEAK))
    modelgarden = next(line for line in table.splitlines() if line.startswith("| modelgarden "))
    assert "200.0 (1.25×)" in modelgarden and "2.00 (0.40×)" in modelgarden
    assert "train_vs_fastest_peer: 0.960 (target ≥ 1.2) NOT met" in table
