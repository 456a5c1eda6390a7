"""`pytest --cpu-report=FILE` (tests/conftest.py): each test's times in a line, the CPU per test file at the end."""

import json
import os
import shutil
import subprocess
import sys

TESTS = """
import subprocess
import sys


def test_busy_here():
    sum(range(3_000_000))


def test_busy_in_a_process():
    subprocess.run([sys.executable, "-c", "sum(range(10_000_000))"], check=True)
"""


def test_each_test_gets_its_own_and_its_processes_cpu_and_the_log_sums_them_per_file(tmp_path):
    for helper in ("conftest.py", "forkserver.py"):
        shutil.copy(os.path.join(os.path.dirname(__file__), helper), tmp_path)
    (tmp_path / "test_busy.py").write_text(TESTS)
    report = tmp_path / "cpu.jsonl"
    # Two xdist workers, as the suite runs: each appends its own tests' lines to the one file.
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", f"--cpu-report={report}", "test_busy.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    lines = {line["test"]: line for line in map(json.loads, report.read_text().splitlines())}
    assert sorted(lines) == ["test_busy.py::test_busy_here", "test_busy.py::test_busy_in_a_process"]
    here, in_a_process = lines["test_busy.py::test_busy_here"], lines["test_busy.py::test_busy_in_a_process"]
    assert here["cpu_s"] > 0 and here["child_cpu_s"] == 0
    assert in_a_process["child_cpu_s"] > 0.05  # the Python process it started and waited for
    assert all(line["wall_s"] > 0 for line in lines.values())
    assert "CPU per test file:" in result.stdout
    assert [line for line in result.stdout.splitlines() if line.endswith("2 tests  test_busy.py")], result.stdout
