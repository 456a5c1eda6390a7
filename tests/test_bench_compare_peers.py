"""bench/compare_peers.py without running any peer: missing harness errors, the rows it runs, its output.

The peers' outputs are mocked: canned rows in peer_common.py's schema (see
tests/test_bench_peer_summary.py) stand in for the processes.
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import compare_peers  # noqa: E402
from test_bench_peer_summary import MATMUL_PEAK, canned_rows  # noqa: E402


def test_missing_peers_folder_says_how_to_point_at_it(tmp_path):
    with pytest.raises(compare_peers.PeersNotFoundError, match="--peers_dir"):
        compare_peers.find_peers_dir(str(tmp_path))
    with pytest.raises(SystemExit, match="peer_common.py missing"):
        compare_peers.main(["--peers_dir", str(tmp_path), "--cpus", ""])


def test_missing_peer_venv_names_the_setup_script_and_the_venv_to_make(tmp_path):
    (tmp_path / "peer_common.py").write_text("")
    prefix = str(tmp_path / "venvs" / "peer-venv-")
    with pytest.raises(SystemExit, match=f"VENV_PREFIX={prefix} bash {tmp_path}/setup_venvs.sh ct2"):
        compare_peers.main(
            ["--peers_dir", str(tmp_path), "--peers", "ctranslate2-int8", "--venv_prefix", prefix, "--cpus", ""]
        )
    with pytest.raises(SystemExit, match="unknown peer 'fairseq'"):
        compare_peers.main(["--peers_dir", str(tmp_path), "--peers", "fairseq", "--cpus", ""])


def fake_venv(prefix, name):
    python = prefix + name + "/bin/python"
    os.makedirs(os.path.dirname(python))
    with open(python, "w") as file:
        file.write("#!/bin/sh\n")
    os.chmod(python, 0o755)
    return python


def test_ctranslate2_rows_are_run_as_the_harness_runs_them_and_the_savedmodel_row_is_ours(tmp_path, monkeypatch):
    (tmp_path / "peer_common.py").write_text("")
    prefix = str(tmp_path / "peer-venv-")
    python = fake_venv(prefix, "ct2")
    commands = []
    monkeypatch.setattr(
        compare_peers,
        "run_row",
        lambda label, argv, preset, args, log: (
            commands.append((label, argv, preset))
            or {"label": label, "preset": preset, "matmul_peak_flops_per_s": MATMUL_PEAK}
        ),
    )
    args = compare_peers.parse_args(
        [
            "--peers",
            "ctranslate2,ctranslate2-int8",
            "--presets",
            "base",
            "--memory_presets",
            "",
            "--no_bf16",
            "--no_matmul_bound",
            "--cpus",
            "",
            "--venv_prefix",
            prefix,
        ]
    )
    compare_peers.run_all(args, str(tmp_path), str(tmp_path / "run.log"))
    by_label = {label: argv for label, argv, preset in commands if preset == "base"}
    script = str(tmp_path / "peer_ctranslate2.py")
    # run_all.sh's commands, with the protocol's one timed decoding call at base for every row alike.
    assert by_label["ctranslate2"] == [python, script, "--compute-type", "float32", "--decode-repeats", "1"]
    assert by_label["ctranslate2-int8"] == [python, script, "--compute-type", "int8", "--decode-repeats", "1"]
    assert by_label["t2t_lite-savedmodel"][1:] == [
        os.path.join(compare_peers.BENCH_DIR, "peer_project.py"),
        "--peers_dir",
        str(tmp_path),
        "--savedmodel",
        "--decode-repeats",
        "1",
    ]
    # The int8 rows decode only: the XLA decoder and the XLA export, with int8 products.
    project = os.path.join(compare_peers.BENCH_DIR, "peer_project.py")
    assert by_label["t2t_lite-xla-int8"][1:] == [
        project,
        "--peers_dir",
        str(tmp_path),
        "--xla",
        "--quantize",
        "int8",
        "--skip-train",
        "--decode-repeats",
        "1",
    ]
    assert by_label["t2t_lite-savedmodel-int8"][1:] == [
        project,
        "--peers_dir",
        str(tmp_path),
        "--savedmodel",
        "--quantize",
        "int8",
        "--decode-repeats",
        "1",
    ]
    # ... and the same two with bfloat16 product weights.
    assert by_label["t2t_lite-xla-bf16-weights"][1:] == [
        project,
        "--peers_dir",
        str(tmp_path),
        "--xla",
        "--quantize",
        "bfloat16",
        "--skip-train",
        "--decode-repeats",
        "1",
    ]
    assert by_label["t2t_lite-savedmodel-bf16-weights"][1:] == [
        project,
        "--peers_dir",
        str(tmp_path),
        "--savedmodel",
        "--quantize",
        "bfloat16",
        "--decode-repeats",
        "1",
    ]
    assert [label for label, _, preset in commands if preset is None] == ["matmul_peak", "matmul_peak"]
    args.no_savedmodel = True
    commands.clear()
    compare_peers.run_all(args, str(tmp_path), str(tmp_path / "run.log"))
    labels = {label for label, _, _ in commands}
    assert not {"t2t_lite-savedmodel", "t2t_lite-savedmodel-int8", "t2t_lite-savedmodel-bf16-weights"} & labels
    assert {"t2t_lite-xla-int8", "t2t_lite-xla-bf16-weights"} <= labels
    args.quantize = ["bfloat16"]
    commands.clear()
    compare_peers.run_all(args, str(tmp_path), str(tmp_path / "run.log"))
    labels = {label for label, _, _ in commands}
    assert "t2t_lite-xla-int8" not in labels and "t2t_lite-xla-bf16-weights" in labels


def test_an_unknown_quantize_mode_names_the_flag(capsys):
    with pytest.raises(SystemExit):
        compare_peers.parse_args(["--quantize", "int4"])
    assert "--quantize: unknown int4; choose from int8,bfloat16." in capsys.readouterr().err
    assert compare_peers.parse_args(["--quantize", ""]).quantize == []


def test_json_output_has_one_object_per_preset_with_the_issue_fields(tmp_path, monkeypatch, capsys):
    (tmp_path / "peer_common.py").write_text("")
    rows = canned_rows("tiny") + [r for r in canned_rows("base") if r["label"] != "matmul_peak"]
    peaks = {compare_peers.PEAK: MATMUL_PEAK, compare_peers.PEAK_BF16: 4 * MATMUL_PEAK}
    monkeypatch.setattr(compare_peers, "run_all", lambda args, peers_dir, log: (rows, peaks))
    compare_peers.main(
        ["--peers_dir", str(tmp_path), "--skip_peers", "--json", "--cpus", "", "--output_dir", str(tmp_path / "out")]
    )
    objects = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [summary["preset"] for summary in objects] == ["tiny", "base"]
    for summary in objects:
        for key in ("train_tokens_per_s", "train_flops_per_s", "matmul_peak_flops_per_s", "decode_sentences_per_s"):
            assert summary[key] is not None, key
        for label, peer in summary["peers"].items():
            assert peer["decode_sentences_per_s"], label
            assert peer["train_tokens_per_s"] or label.startswith("ctranslate2"), label
        assert summary["targets"]["savedmodel_vs_ctranslate2"]["value"] == pytest.approx(4.0 / 8.0)
        assert summary["versus_ctranslate2"]["t2t_lite"]["beam_vs_ctranslate2_int8"] == pytest.approx(5.0 / 10.0)
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == objects
