"""Test-wide settings (quiet TensorFlow logs, the TensorFlow Keras backend) and `built_once`."""

import fcntl
import os
import shutil

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


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
