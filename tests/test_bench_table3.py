"""Table 3 in miniature: the rows (bench/table3_rows.py) as the paper's scaled, bench/table3.sh end to end on a
tiny corpus, and the assembler (bench/table3.py) on hand-written results."""

import json
import os
import re
import shutil
import subprocess
import sys

import forkserver
import pytest
from test_bench_multi30k import write_corpus

from t2t_lite import registry

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench")
sys.path.insert(0, BENCH)
import table3  # noqa: E402
import table3_rows  # noqa: E402

SCRIPT = os.path.join(BENCH, "table3.sh")
# Widths (d_model, d_ff, h·d_k, h·d_v) and depths; the rest a row changes as the paper does.
WIDTHS = ("hidden_size", "filter_size", "key_channels", "value_channels")
DEPTHS = ("encoder_layers", "decoder_layers")
UNSCALED = ("num_heads", "layer_prepostprocess_dropout", "label_smoothing", "pos")


def test_rows_are_named_in_the_paper_order():
    names = [row.name for row in table3_rows.ROWS]
    assert names == ["base", "A1", "A2", "A3", "A4", "B1", "B2"] + [f"C{i}" for i in range(1, 8)] + [
        "D1",
        "D2",
        "D3",
        "D4",
        "E",
        "big",
    ]


def test_the_miniature_base_is_table_3_base_at_half_width_and_half_depth():
    paper, miniature = registry.hparams("transformer_base"), registry.hparams("transformer_table3_base")
    assert [getattr(miniature, name) for name in WIDTHS] == [256, 1024, 256, 256]  # 512, 2048, 512, 512 / 2
    assert [getattr(miniature, name) for name in DEPTHS] == [3, 3]  # N = 6 / 2
    assert [getattr(miniature, name) for name in UNSCALED] == [getattr(paper, name) for name in UNSCALED]


@pytest.mark.parametrize("row", table3_rows.ROWS, ids=lambda row: row.name)
def test_each_miniature_row_is_the_paper_row_scaled_by_one_half(row):
    paper = registry.hparams("transformer_base").override(row.paper_overrides)
    miniature = registry.hparams("transformer_table3_base").override(row.miniature_overrides)
    for name in WIDTHS + DEPTHS:
        assert getattr(miniature, name) * 2 == getattr(paper, name), name
    for name in UNSCALED:
        assert getattr(miniature, name) == getattr(paper, name), name
    # Nothing else changes: the miniature row changes the fields the paper's row changes.
    assert changed_fields(miniature, "transformer_table3_base") == changed_fields(paper, "transformer_base")


def changed_fields(hparams, parent):
    return {name for name, value in registry.hparams(parent).values().items() if hparams.values()[name] != value}


def test_the_paper_rows_are_the_paper_tables_cells():
    # Table 3's d_k and d_v columns per row, from the paper's overrides of transformer_base.
    paper_d_k = {"A1": 512, "A2": 128, "A3": 32, "A4": 16, "B1": 16, "B2": 32, "C4": 32, "C5": 128}
    for name, d_k in paper_d_k.items():
        hp = registry.hparams("transformer_base").override(table3_rows.BY_NAME[name].paper_overrides)
        assert hp.key_channels // hp.num_heads == d_k, name
    # The big row is the paper's named big set, trained 300K steps against base's 100K.
    big = table3_rows.BY_NAME["big"]
    assert registry.hparams("transformer_base").override(big.paper_overrides) == registry.hparams("transformer_big")
    assert big.train_steps_factor == 3
    base = table3_rows.BY_NAME["base"]
    assert (base.paper_ppl, base.paper_bleu, base.paper_params_millions) == (4.92, 25.8, 65)


# -- bench/table3.sh ---------------------------------------------------------------------------------
# A smoke run's model: 1 layer of width 32, no XLA, eq. 3 without the set's decay (longer than the run).
SMOKE = dict(
    HPARAMS="hidden_size=32,filter_size=64,num_hidden_layers=1,learning_rate_warmup_steps=2,"
    "learning_rate_decay_steps=0,xla_compile=false,extra_length=2",
    TRAIN_STEPS="3",
    SAVE_STEPS="3",
    LOCAL_EVAL_FREQUENCY="3",
    DECODE_HPARAMS="batch_size=4",
)


def run(corpus, work, **knobs):
    """bench/table3.sh on `corpus`, its tools run by forkserver's stand-ins."""
    environment = forkserver.bin_directory({**os.environ, "CORPUS": str(corpus), "WORK": str(work), **knobs})
    return subprocess.run(["bash", SCRIPT], env=environment, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def smoke_run(built_once):
    """The script's smoke run of the base row, once per test run: (its WORK, exit code, stdout, stderr)."""

    def build(path):
        write_corpus(path / "corpus")
        result = run(path / "corpus", path / "work", ROWS="base", **SMOKE)
        (path / "result.json").write_text(json.dumps([result.returncode, result.stdout, result.stderr]))

    path = built_once("table3_smoke_run", build)
    return (path, *json.loads((path / "result.json").read_text()))


def test_a_row_trains_decodes_and_scores_in_its_own_run_directory(smoke_run):
    path, returncode, stdout, stderr = smoke_run
    assert returncode == 0, stderr[-3000:]
    for row, heads in (("base", 8),):  # the stand-in test below runs every row
        run_dir = path / "work" / row / "seed1"
        result = json.loads((run_dir / "result.json").read_text())
        assert (result["row"], result["seed"], result["train_steps"]) == (row, 1, 3)
        assert json.loads((run_dir / "train" / "hparams.json").read_text())["num_heads"] == heads
        # d = 32, d_ff = 64, one layer of each stack, no biases in attention, the vocabulary's V pieces:
        # V·32 + (4·32² + 2·32·64 + 64 + 32 + 4·32) + (8·32² + 2·32·64 + 64 + 32 + 6·32), the same for any h.
        vocab = json.loads((run_dir / "train" / "problem.json").read_text())["vocab_size"]
        assert result["params"] == vocab * 32 + (4096 + 4096 + 96 + 128) + (8192 + 4096 + 96 + 192)
        assert result["dev_ppl"] > 1.0 and result["train_seconds"] >= 0
        assert result["decode_hparams"].startswith("beam_size=4,alpha=0.6")  # the paper's protocol
        bleu = (run_dir / "bleu.txt").read_text()
        assert f"sacreBLEU = {result['sacrebleu']:.2f}" in bleu
        assert len((run_dir / "val.decodes").read_text().splitlines()) == 4  # one per val sentence
    assert "== datagen: " in stdout and (path / "work" / "data" / "datagen.done").exists()


def test_a_rerun_does_not_retrain_a_finished_row(smoke_run, tmp_path):
    """Every row of the rerun has its result.json: no tool runs, the logs are the first run's."""
    path, returncode, _, stderr = smoke_run
    assert returncode == 0, stderr[-3000:]
    work = tmp_path / "work"
    shutil.copytree(path / "work", work, symlinks=True)
    logs = {row: (work / row / "seed1" / "train.log").read_text() for row in ("base",)}
    result = run(path / "corpus", work, ROWS="base", **SMOKE)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.findall(r"^== (\w+) seed 1: finished .*, not retrained$", result.stdout, re.MULTILINE) == ["base"]
    assert "== datagen" not in result.stdout  # the shards of the first run, kept
    assert {row: (work / row / "seed1" / "train.log").read_text() for row in logs} == logs


def test_a_run_directory_of_another_recipe_is_refused(smoke_run, tmp_path):
    """A smoke run's WORK rerun with the recipe's updates: neither resumed nor taken for finished."""
    path, returncode, _, stderr = smoke_run
    assert returncode == 0, stderr[-3000:]
    work = tmp_path / "work"
    shutil.copytree(path / "work", work, symlinks=True)
    result = run(path / "corpus", work, ROWS="base", **{**SMOKE, "TRAIN_STEPS": "4"})
    assert result.returncode == 2
    assert f"table3.sh: {work}/base/seed1 holds a run of transformer_table3_base hidden_size=32," in result.stderr
    assert "3 updates, seed 1, not transformer_table3_base" in result.stderr and "4 updates" in result.stderr
    assert not (work / "base" / "seed1" / "train" / "ckpt-4.index").exists()


STAND_INS = {
    # Each reads its standard input to the end, as a tool that read it would: the rows still all run.
    "t2t-datagen": 'for a in "$@"; do case $a in --data_dir=*) mkdir -p "${a#*=}";; esac; done',
    "t2t-trainer": 'cat >/dev/null; for a in "$@"; do case $a in --train_steps=*) s=${a#*=};; esac; done\n'
    'echo "Model transformer: 1,000 parameters; 1 replica(s)"; echo "Eval at step $s: loss 1.0, perplexity 2.5"',
    "t2t-decoder": 'cat >/dev/null; for a in "$@"; do case $a in --decode_to_file=*) echo x > "${a#*=}";; esac; done',
    "t2t-bleu": 'echo "sacreBLEU = 12.50  (nrefs:1|sig)"\n'
    'echo "BLEU tokenized as in the paper (t2t) = 13.00  (uncased 13.5)"',
}


def test_every_row_and_seed_runs_with_the_rows_updates_factor_though_a_tool_reads_standard_input(tmp_path):
    """The script's plan with stand-in tools (no training): big trains 3 × TRAIN_STEPS, each seed its directory."""
    bin_directory = tmp_path / "bin"
    bin_directory.mkdir()
    for name, body in STAND_INS.items():
        (bin_directory / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_directory / name).chmod(0o755)
    (bin_directory / "python").symlink_to(sys.executable)
    corpus = write_corpus(tmp_path / "corpus")
    environment = {**os.environ, "CORPUS": str(corpus), "WORK": str(tmp_path / "work"), "BIN": str(bin_directory)}
    environment.update(ROWS="base big", SEEDS="1 2", TRAIN_STEPS="5")
    result = subprocess.run(["bash", SCRIPT], env=environment, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    for row, steps in (("base", 5), ("big", 15)):
        for seed in (1, 2):
            record = json.loads((tmp_path / "work" / row / f"seed{seed}" / "result.json").read_text())
            assert (record["row"], record["seed"], record["train_steps"]) == (row, seed, steps)
            assert (record["params"], record["dev_ppl"], record["sacrebleu"], record["tokenized_bleu"]) == (
                1000,
                2.5,
                12.5,
                13.0,
            )


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"ROWS": "A1 C9 F"}, "unknown row C9, F; name rows of Table 3 from: base A1 A2 A3 A4 B1 B2 C1"),
        ({"SEEDS": "1 x"}, "SEEDS=1 x: x is not a whole number"),
        ({"TRAIN_STEPS": "0"}, "TRAIN_STEPS=0: give a positive whole number"),
        ({"DECODE_HPARAMS": "beam_size=1"}, "beam_size and alpha are Table 3's protocol"),
    ],
)
def test_a_bad_knob_stops_the_script_before_any_work(tmp_path, knobs, message):
    corpus = write_corpus(tmp_path / "corpus")
    result = run(corpus, tmp_path / "work", **knobs)
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "work").exists()


# -- bench/table3.py ---------------------------------------------------------------------------------
def write_results(work, row, figures):
    """Hand-written result.json files: figures [(dev_ppl, tokenized_bleu), ...], one per seed."""
    for seed, (ppl, bleu) in enumerate(figures, start=1):
        run_dir = work / row / f"seed{seed}"
        run_dir.mkdir(parents=True)
        record = {"row": row, "seed": seed, "params": 7_568_384, "dev_ppl": ppl, "sacrebleu": bleu - 1.0}
        record.update(tokenized_bleu=bleu, train_steps=1200, train_seconds=900)
        (run_dir / "result.json").write_text(json.dumps(record))


def cells(lines, row):
    (line,) = [line for line in lines if line.startswith(f"| {row} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


COLUMNS = [cell.strip() for cell in table3.HEADER.strip("|").split("|")]


def test_the_table_gives_means_spreads_deltas_and_verdicts_against_the_base_rows_spread(tmp_path):
    write_results(tmp_path, "base", [(5.00, 30.0), (5.20, 31.0), (5.10, 29.0)])  # mean 5.10 / 30.0, spread 0.20 / 2.0
    write_results(tmp_path, "C1", [(5.50, 27.0), (5.70, 26.0)])  # Δ +0.50 (worse), −3.50 (worse): the paper's way
    write_results(tmp_path, "D3", [(5.20, 31.5)])  # Δ +0.10 within 0.20; +1.5 within 2.0
    write_results(tmp_path, "A3", [(4.80, 32.5)])  # Δ −0.30 better, +2.5 better; the paper's BLEU: no change
    write_results(tmp_path, "D1", [(4.70, 29.0)])  # Δ −0.40 better: the paper's +0.85 inverts; BLEU −1.0 within
    lines = table3.table_lines(table3.collect(str(tmp_path)))
    column = {name: i for i, name in enumerate(COLUMNS)}
    base = cells(lines, "base")
    assert [base[column[name]] for name in ("dev PPL", "tokenized BLEU", "seeds", "spread PPL / BLEU")] == [
        "5.10",
        "30.0",
        "3",
        "0.20 / 2.0",
    ]
    assert [base[column[name]] for name in ("paper PPL", "paper BLEU", "paper params")] == ["4.92", "25.8", "65"]
    c1 = cells(lines, "C1")
    assert [c1[column[name]] for name in ("our ΔPPL", "our ΔBLEU", "paper ΔPPL", "paper ΔBLEU")] == [
        "+0.50",
        "-3.50",
        "+1.19",  # 6.11 − 4.92
        "-2.10",  # 23.7 − 25.8
    ]
    assert c1[column["verdict"]] == "PPL worse; BLEU worse"
    assert c1[column["paper's direction"]] == "PPL holds; BLEU holds"
    assert cells(lines, "D3")[column["verdict"]] == "PPL within noise; BLEU within noise"
    a3 = cells(lines, "A3")
    assert (a3[column["verdict"]], a3[column["paper's direction"]]) == (
        "PPL better; BLEU better",
        "PPL holds; BLEU paper: no change",  # 4.91 − 4.92 < 0; 25.8 − 25.8 = 0
    )
    d1 = cells(lines, "D1")
    assert (d1[column["verdict"]], d1[column["paper's direction"]]) == (
        "PPL better; BLEU within noise",
        "PPL inverts; BLEU —",
    )
    assert [line.split(" | ")[0] for line in lines[2:]] == ["| base", "| A3", "| C1", "| D1", "| D3"]  # paper's order


def test_one_base_seed_gives_no_noise_to_judge_by(tmp_path):
    write_results(tmp_path, "base", [(5.0, 30.0)])
    write_results(tmp_path, "C3", [(4.0, 33.0), (4.2, 34.0)])
    lines = table3.table_lines(table3.collect(str(tmp_path)))
    assert cells(lines, "C3")[COLUMNS.index("verdict")] == "PPL needs seeds; BLEU needs seeds"
    assert cells(lines, "base")[COLUMNS.index("spread PPL / BLEU")] == "— / —"


def test_the_command_prints_the_table_and_writes_the_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    write_results(tmp_path, "base", [(5.0, 30.0), (5.1, 31.0)])
    write_results(tmp_path, "E", [(5.3, 29.0)])
    assert table3.main(["table", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(table3.HEADER) and "| E | learned positional embedding" in out
    assert "No result yet for: A1 A2" in out
    png = (tmp_path / "table3.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")


def test_a_run_directory_without_its_last_evaluation_is_named(tmp_path):
    (tmp_path / "train.log").write_text("Model transformer: 1,000 parameters; 1 replica(s)\nEval at step 2: loss 1.0\n")
    with pytest.raises(table3.MissingMeasure, match=r"train\.log has no dev evaluation at step 3: .* resume"):
        table3.read_result(str(tmp_path), 3)


def test_the_rows_in_docs_results_are_the_modules():
    path = os.path.join(os.path.dirname(BENCH), "docs", "results.md")
    with open(path, encoding="utf-8") as file:
        section = file.read().split("## Table 3 in miniature\n")[1].split("\n## ")[0]
    for row in table3_rows.ROWS:
        (line,) = [line for line in section.splitlines() if line.startswith(f"| {row.name} |")]
        for overrides in (row.paper_overrides, row.miniature_overrides):
            assert (f"`{overrides}`" if overrides else "| — |") in line, row.name
        assert f"| {row.paper_ppl:.2f} | {row.paper_bleu:.1f} |" in line, row.name
