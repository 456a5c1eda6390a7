"""Test-wide settings (TensorFlow's logs, Keras' backend, the cycle collector), the fork servers the workers share
(tests/forkserver.py), `built_once`, `--cpu-report`."""

import collections
import fcntl
import gc
import json
import os
import resource
import shutil
import signal
import subprocess
import time

import forkserver
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
# What the processes the tests start load with (forkserver.LOAD_VARIABLES), restored after collection: the
# benchmarks some tests import (bench/decode_products.py, matmul_peak.py) set thread counts for their own runs.
_LOAD_VARIABLES = {name: os.environ.get(name) for name in forkserver.LOAD_VARIABLES}


def merged_reports(processes, report_of) -> dict:
    """The reports of processes a shared build started side by side (`report_of(process)` each), merged; any
    still running when one fails is killed."""
    report = {}
    try:
        for process in processes:
            report.update(report_of(process))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()
    return report


def sigint_as_at_a_terminal() -> None:
    """`preexec_fn` for a tool a test sends Ctrl-C's SIGINT: the signal's default disposition, as at a terminal.

    A non-interactive shell starts its background jobs (a suite run by a script with `&`) with SIGINT
    ignored, and every process a test starts would inherit that: Python then installs no
    KeyboardInterrupt, and the tool would run on to its end.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pytest_collection_finish(session):
    """The variables the tests' processes load with, as before collection; the cycle collector tuned."""
    for name, value in _LOAD_VARIABLES.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _tune_the_cycle_collector()


def _tune_the_cycle_collector():
    """Python's cycle collector tuned for a process that traces hundreds of small models.

    Tracing allocates millions of short-lived objects, so at the default thresholds a test worker
    collects about a thousand times per test file, and every few of its tests a full collection walks
    every object alive: TensorFlow's and Keras' modules (about 330,000 objects after collection) and
    what the tests keep. Frozen, the modules are never walked again; a young generation of 50,000
    objects lets most garbage die by reference count before a collection looks at it. Cycles are
    still found, in fewer, larger passes (docs/testing.md: the collector's share of a worker's time).
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    """`built_once(name, build)`: the directory `build(path)` wrote, built once per test run.

    pytest-xdist runs a module's tests on both workers, and a module fixture runs once per worker
    and module; an artefact that takes a minute to make (a trained model and its exports, used by
    test_export and test_warmup) would be made up to four times. The first worker to ask builds it
    under a lock in the run's directory, which the workers share; the others wait and reuse it. A
    build that failed part-way leaves no marker and is redone.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's directory; each worker's basetemp is a folder in it

    def build_once(name, build):
        path = root / name
        with open(root / f"{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (root / f"{name}.built").exists():
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir()
                build(path)
                (root / f"{name}.built").touch()
        return path

    return build_once


@pytest.fixture(scope="session")
def reverse_data(built_once):
    """An algorithmic_reverse data_dir with 1,000 train pairs in its two shards (dev and test as the problem's).

    Enough for the tests' few steps of small batches; the problem's own 20,000 would fill the
    trainer's 10,000-example shuffle buffer at every start of training, seconds of CPU per run
    in each of the many tests that train. Built once per test run; tests only read it.
    """

    def generate(path):
        from t2t_lite import registry

        problem = registry.problem("algorithmic_reverse")
        problem.num_examples = dict(problem.num_examples, train=1000)
        problem.generate_data(str(path), str(path))

    return str(built_once("algorithmic_reverse_1000", generate))


# --cpu-report=FILE: where the suite's CPU time goes, per test and per test file (docs/testing.md).


@pytest.fixture
def small_disk(tmp_path):
    """A directory on a tmpfs of its own, 16 MiB, to fill (tests/full_disk.py): mounted where the tests run as
    root, else skipped."""
    if os.geteuid() != 0:
        pytest.skip("a full disk is made by mounting a small tmpfs, which needs root")
    disk = tmp_path / "small_disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=True)


def pytest_addoption(parser):
    parser.addoption(
        "--cpu-report",
        metavar="FILE",
        help="write each test's wall time and CPU seconds (its worker's own, and those of the processes it "
        "started and waited for) to FILE as JSON lines, and print the CPU per test file at the end",
    )


def pytest_configure(config):
    report = config.getoption("cpu_report")
    if report and not hasattr(config, "workerinput"):  # the controller starts the file; workers append
        open(report, "w").close()
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput") and _is_this_suite(config):
        forkserver.start_shared_servers()  # importing while the workers start; they share them


def _is_this_suite(config) -> bool:
    """Whether this is the project's own suite (whose tests start processes), not a run in another folder."""
    return os.path.samefile(config.rootpath, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cpu_seconds():
    """(this process', its children's): those it waited for, and those forkserver's servers forked for it."""
    own, children = (resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime + forkserver.cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Setup, call and teardown: a shared build (`built_once`) counts in the test that asked for it first."""
    report = item.config.getoption("cpu_report")
    started, (own, children) = time.time(), _cpu_seconds()
    yield
    if report:
        own_after, children_after = _cpu_seconds()
        line = {
            "test": item.nodeid,
            "wall_s": round(time.time() - started, 2),
            "cpu_s": round(own_after - own, 2),
            "child_cpu_s": round(children_after - children, 2),
        }
        with open(report, "a") as file:  # one write per line: the workers' lines never interleave
            file.write(json.dumps(line) + "\n")


def pytest_terminal_summary(terminalreporter, config):
    report = config.getoption("cpu_report")
    if not report or hasattr(config, "workerinput"):
        return
    files = collections.defaultdict(lambda: [0.0, 0.0, 0])
    with open(report) as lines:
        for line in map(json.loads, lines):
            totals = files[line["test"].split("::")[0]]
            totals[0] += line["cpu_s"]
            totals[1] += line["child_cpu_s"]
            totals[2] += 1
    everything = sum(own + children for own, children, _ in files.values())
    terminalreporter.section(f"CPU per test file: {everything:.0f} core-s in tests (--cpu-report={report})")
    for name, (own, children, count) in sorted(files.items(), key=lambda item: -sum(item[1][:2]))[:20]:
        terminalreporter.write_line(
            f"{own + children:7.0f} core-s  ({own:.0f} in the worker, {children:.0f} in its processes)  "
            f"{count:3d} tests  {name}"
        )
