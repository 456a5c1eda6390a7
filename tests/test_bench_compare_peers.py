"""bench/compare_peers.py without running any peer: missing harness errors, and the summary from canned rows.

The canned rows have the shape peer_common.py writes (pc.summary blocks with a median);
expected figures are worked out by hand from them.
"""

import importlib.util
import json
import os

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
spec = importlib.util.spec_from_file_location("compare_peers", os.path.join(BENCH, "compare_peers.py"))
compare_peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_peers)

MATMUL_PEAK = 100e9
FLOPS_PER_STEP = 40e9


def block(median):
    return {"median": median, "min": median, "max": median, "mean": median, "n": 1, "values": [median]}


def row(label, preset, tokens_per_s=None, step_s=None, beam=None, greedy=None, rss=1000.0):
    result = {"label": label, "preset": preset, "round": 1, "peak_rss_mb": rss, "params": 10}
    if tokens_per_s is not None:
        result["train"] = {"tgt_tok_per_s": block(tokens_per_s), "step_s": block(step_s), "first_step_s": 3.0}
        if label == compare_peers.OURS:
            result["train"]["flops_per_step"] = FLOPS_PER_STEP
    if beam is not None:
        result["decode"] = {"beam": {"sent_per_s": block(beam)}, "greedy": {"sent_per_s": block(greedy)}}
    return result


def canned_rows(preset="base"):
    memory = [{"label": f"t2t_lite-memory-{phase}", "preset": preset, "peak_rss_mb": rss,
               "memory": {"phase": phase, "peak_rss_mb": rss, "micro_batch_tokens": 4096}}
              for phase, rss in (("train", 5000.0), ("decode", 2000.0))]
    return [
        {"label": "matmul_peak", "preset": None, "matmul_peak_flops_per_s": MATMUL_PEAK, "peak_rss_mb": 300.0},
        row("modelgarden", preset, 200.0, 2.56, beam=2.0, greedy=6.0),
        row("modelgarden-xla", preset, 210.0, 2.4, beam=4.0, greedy=7.0),
        row("kerashub-xla", preset, 250.0, 2.048, beam=3.5, greedy=12.0),
        row("t2t_lite", preset, 160.0, 3.2, beam=5.0, greedy=10.0),
        row("t2t_lite-xla", preset, 240.0, 2.0, beam=4.4, greedy=11.0),
        row("t2t_lite-bf16", preset, 400.0, 1.28, beam=6.0, greedy=12.0),
        *memory,
        *bound_rows(preset),
    ]


def bound_rows(preset):
    """Two rounds of the matmul-only bound: oneDNN's best is 80 GFLOP/s, XLA's 50."""
    return [{"label": label, "preset": preset, "round": round_index, "peak_rss_mb": 900.0,
             "matmul_bound": {"matmul_only_flops_per_s": flops}}
            for label, values in (("matmul_bound", (70e9, 80e9)), ("matmul_bound-xla", (50e9, 40e9)))
            for round_index, flops in enumerate(values, 1)]


def test_missing_peers_folder_says_how_to_point_at_it(tmp_path):
    with pytest.raises(compare_peers.PeersNotFoundError, match="--peers_dir"):
        compare_peers.find_peers_dir(str(tmp_path))
    with pytest.raises(SystemExit, match="peer_common.py missing"):
        compare_peers.main(["--peers_dir", str(tmp_path), "--cpus", ""])


def test_missing_peer_venv_names_the_setup_script(tmp_path, monkeypatch):
    (tmp_path / "peer_common.py").write_text("")
    monkeypatch.setitem(compare_peers.PEER_SCRIPTS, "torch", (str(tmp_path / "no-venv"), "peer_torch.py", []))
    with pytest.raises(SystemExit, match=f"bash {tmp_path}/setup_venvs.sh"):
        compare_peers.main(["--peers_dir", str(tmp_path), "--peers", "torch", "--cpus", ""])
    with pytest.raises(SystemExit, match="unknown peer 'fairseq'"):
        compare_peers.main(["--peers_dir", str(tmp_path), "--peers", "fairseq", "--cpus", ""])


def test_summary_figures_ratios_and_targets():
    summary = compare_peers.preset_summary("base", canned_rows(), MATMUL_PEAK, bf16_peak=4 * MATMUL_PEAK)
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
    assert summary["matmul_bound"] == {"onednn_flops_per_s": 80e9, "xla_flops_per_s": 50e9, "flops_per_s": 80e9,
                                       "fraction_of_matmul_peak": pytest.approx(0.8)}
    assert summary["fraction_of_matmul_bound"] == pytest.approx(40e9 / 3.2 / 80e9)
    assert summary["xla"]["fraction_of_matmul_bound"] == pytest.approx(0.25)
    assert summary["peers"]["kerashub-xla"]["fraction_of_matmul_bound"] == pytest.approx(40e9 / 2.048 / 80e9)
    assert summary["bf16"]["fraction_of_matmul_bound"] is None
    assert not {"matmul_bound", "matmul_bound-xla"} & set(summary["peers"])
    assert summary["memory"] == {"train_peak_rss_mb": 5000.0, "train_micro_batch_tokens": 4096,
                                 "decode_beam4_peak_rss_mb": 2000.0}
    targets = summary["targets"]
    # Best of ours (XLA, 240 tok/s) against the fastest peer (kerashub-xla, 250 tok/s).
    assert targets["train_vs_fastest_peer"]["value"] == pytest.approx(240 / 250)
    assert targets["train_vs_fastest_peer"]["fastest_peer"] == "kerashub-xla"
    assert targets["train_vs_fastest_peer"]["met"] is False
    assert targets["fraction_of_matmul_peak"]["value"] == pytest.approx(0.2)
    # Best of ours (plain, 5.0 sent/s) against Model Garden's plain row; each pair listed too.
    assert targets["beam_vs_modelgarden"]["value"] == pytest.approx(2.5)
    assert targets["beam_vs_modelgarden"]["ours_row"] == "t2t_lite"
    assert targets["beam_vs_modelgarden"]["met"] is True
    # The bfloat16 row is faster than every row above, yet left out of the targets, and its FLOP/s
    # are a fraction of the bfloat16 peak.
    assert summary["bf16"]["fraction_of_matmul_peak"] == pytest.approx((40e9 / 1.28) / 400e9)
    assert summary["bf16"]["train_vs_fastest_peer"] == pytest.approx(400 / 250)
    assert "t2t_lite-bf16" not in summary["peers"]
    table = compare_peers.format_table(summary)
    assert "| t2t_lite-bf16 | 400.0 (2.50×) | 31.2 | 7.8 | n/a |" in table and "not counted in the targets" in table
    assert "| t2t_lite-xla | 240.0 (1.50×) | 20.0 | 20.0 | 25.0 |" in table
    assert "bound of this step (its products alone, each at its best rate): 80.0 GFLOP/s = 80.0 % of the peak" in table
    assert targets["beam_vs_modelgarden"]["each"] == pytest.approx({
        "t2t_lite / modelgarden": 2.5, "t2t_lite / modelgarden-xla": 1.25,
        "t2t_lite-xla / modelgarden": 2.2, "t2t_lite-xla / modelgarden-xla": 1.1})


def test_the_highest_peak_of_each_dtype_counts_and_failed_probes_do_not():
    rows = [{"label": compare_peers.PEAK, "matmul_peak_flops_per_s": value} for value in (3e11, 2.5e11)]
    rows += [{"label": compare_peers.PEAK_BF16, "matmul_peak_flops_per_s": 1e12},
             {"label": compare_peers.PEAK_BF16, "error": "exit code 1"}]
    assert compare_peers.best_peaks(rows) == {compare_peers.PEAK: 3e11, compare_peers.PEAK_BF16: 1e12}
    assert compare_peers.best_peaks([]) == {compare_peers.PEAK: None, compare_peers.PEAK_BF16: None}


def test_json_output_has_one_object_per_preset_with_the_issue_fields(tmp_path, monkeypatch, capsys):
    (tmp_path / "peer_common.py").write_text("")
    rows = canned_rows("tiny") + [r for r in canned_rows("base") if r["label"] != "matmul_peak"]
    peaks = {compare_peers.PEAK: MATMUL_PEAK, compare_peers.PEAK_BF16: 4 * MATMUL_PEAK}
    monkeypatch.setattr(compare_peers, "run_all", lambda args, peers_dir, log: (rows, peaks))
    compare_peers.main(["--peers_dir", str(tmp_path), "--skip_peers", "--json", "--cpus", "",
                        "--output_dir", str(tmp_path / "out")])
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [summary["preset"] for summary in objects] == ["tiny", "base"]
    for summary in objects:
        for key in ("train_tokens_per_s", "train_flops_per_s", "matmul_peak_flops_per_s", "decode_sentences_per_s"):
            assert summary[key] is not None, key
        for peer in summary["peers"].values():
            assert peer["train_tokens_per_s"] and peer["decode_sentences_per_s"]
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == objects


def test_table_shows_each_figure_with_its_ratio_to_ours():
    table = compare_peers.format_table(compare_peers.preset_summary("base", canned_rows(), MATMUL_PEAK))
    modelgarden = next(line for line in table.splitlines() if line.startswith("| modelgarden "))
    assert "200.0 (1.25×)" in modelgarden and "2.00 (0.40×)" in modelgarden
    assert "train_vs_fastest_peer: 0.960 (target ≥ 1.2) NOT met" in table
