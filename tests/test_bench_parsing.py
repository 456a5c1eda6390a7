"""bench/parsing.sh: treebank files to bracket F1 in one command, each phase timed; a rerun resumes."""

import json
import os
import re
import shutil
import subprocess
import sys

import forkserver
import pytest
from test_problems_parsing import write_treebank

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench", "parsing.sh")
TINY = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,learning_rate_warmup_steps=2,xla_compile=false"


def run(corpus, work, **knobs):
    """bench/parsing.sh on `corpus`, its tools run by forkserver's stand-ins."""
    environment = forkserver.bin_directory({**os.environ, "CORPUS": str(corpus), "WORK": str(work), **knobs})
    return subprocess.run(["bash", SCRIPT], env=environment, capture_output=True, text=True, timeout=600)


KNOBS = dict(
    HPARAMS=TINY,
    TRAIN_STEPS="4",
    SAVE_STEPS="4",
    LOCAL_EVAL_FREQUENCY="4",
    BEAMS="2",
    DECODE_HPARAMS="batch_size=4,extra_length=4",
)


@pytest.fixture(scope="module")
def parsed(built_once):
    """One run of the script on a tiny treebank: (its directory, exit code, stdout, stderr)."""

    def build(path):
        write_treebank(str(path / "raw"), [f"{n:02d}" for n in range(25)])
        result = run(path / "raw" / "wsj", path / "run", **KNOBS)
        (path / "result.json").write_text(json.dumps([result.returncode, result.stdout, result.stderr]))

    path = built_once("parsing_script_run", build)
    return (path, *json.loads((path / "result.json").read_text()))


def test_one_command_trains_parses_and_scores_test_and_dev_beside_two_baselines(parsed):
    path, returncode, stdout, stderr = parsed
    assert returncode == 0, stderr[-3000:]
    phases = re.findall(r"^== ([\w ,]+): (\d+) s \(total (\d+) s\)$", stdout, re.MULTILINE)
    names = ["datagen", "training", "test, beam 2", "dev, beam 2", "baselines"]
    assert [name for name, _, _ in phases] == names
    totals = [int(total) for _, _, total in phases]
    assert totals == sorted(totals) and totals[-1] == sum(int(seconds) for _, seconds, _ in phases)
    work = path / "run"
    assert (work / "train" / "ckpt-4.index").exists()
    for name in ("test.beam2", "dev.beam2", "test.right_branching", "test.frequent_shape"):
        gold = (work / "test.beam2.targets" if name.startswith("test") else work / f"{name}.targets").read_text()
        decodes = (work / f"{name}.decodes").read_text().splitlines()
        assert len(decodes) == len(gold.splitlines()) == 2  # one parse per sentence of the split, none dropped
        report = (work / f"{name}.f1").read_text()
        assert re.search(r"Bracketing precision = [\d.]+ +recall = [\d.]+ +F1 = [\d.]+", report)
    assert re.search(r"^== test, beam 2: 2 sentences in \d+ s", stdout, re.MULTILINE)


def test_a_rerun_keeps_what_the_run_wrote(parsed, tmp_path):
    path, returncode, _, stderr = parsed
    assert returncode == 0, stderr[-3000:]
    work = tmp_path / "run"
    shutil.copytree(path / "run", work, symlinks=True)
    first_test = (work / "test.beam2.decodes").read_text()
    again = run(path / "raw" / "wsj", work, **KNOBS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (work / "test.beam2.decodes").read_text() == first_test  # kept, not decoded again
    assert "ckpt-4" in again.stdout  # the trainer found the run finished


def test_bad_knobs_are_refused_before_any_work(tmp_path):
    write_treebank(str(tmp_path / "raw"), ["02"])
    result = run(tmp_path / "raw" / "wsj", tmp_path / "run", BEAMS="21 four")
    assert result.returncode == 2 and 'BEAMS="21 four"' in result.stderr
    assert not (tmp_path / "run").exists()
    for share in ("0", "150", "half", "08"):
        result = run(tmp_path / "raw" / "wsj", tmp_path / "run", TRAIN_PERCENT=share)
        assert result.returncode == 2 and f"TRAIN_PERCENT={share}: give the share" in result.stderr
        assert not (tmp_path / "run").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run(empty, tmp_path / "run")
    assert result.returncode == 2 and "no .mrg files" in result.stderr


def test_a_train_percent_trains_every_tool_on_a_registered_share_of_the_training_trees(tmp_path):
    """TRAIN_PERCENT=25: the tools get parsing_wsj4k_train25 from WORK/usr, a parsing_wsj4k with train_percent 25.

    The script runs with a recording t2t-datagen that stops it, so nothing is trained; the package it was
    given is then imported as the tools import it (--t2t_usr_dir) in a process of its own."""
    write_treebank(str(tmp_path / "raw"), ["02"])
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "t2t-datagen").write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {tmp_path / "datagen.args"}\nexit 3\n')
    (stubs / "t2t-datagen").chmod(0o755)
    environment = {**os.environ, "CORPUS": str(tmp_path / "raw" / "wsj"), "WORK": str(tmp_path / "run")}
    result = subprocess.run(
        ["bash", SCRIPT], env={**environment, "BIN": str(stubs), "TRAIN_PERCENT": "25"}, capture_output=True, text=True
    )
    assert result.returncode == 3, result.stderr
    assert "== Parsing: parsing_wsj4k_train25," in result.stdout
    usr_dir = tmp_path / "run" / "usr" / "parsing_problem"
    args = (tmp_path / "datagen.args").read_text().splitlines()
    assert args[:2] == ["--problem=parsing_wsj4k_train25", f"--t2t_usr_dir={usr_dir}"]
    check = (
        "import sys; from t2t_lite import registry; registry.import_usr_dir(sys.argv[1]); "
        "problem = registry.problem('parsing_wsj4k_train25'); "
        "print(type(problem).__mro__[1].__name__, problem.train_percent, problem.approx_vocab_size)"
    )
    imported = forkserver.run([sys.executable, "-c", check, str(usr_dir)], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.split() == ["ParsingWsj4k", "25", "4000"]
