"""One writer per directory: a second run stops naming the first; a lock left by SIGKILL is taken over."""

import errno
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

import forkserver
import full_disk
import pytest
import tensorflow as tf

from t2t_lite.run_dir import run_lock

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,learning_rate_warmup_steps=10"


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped), as SIGKILL leaves one."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def write_lock(directory, **holder):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, run_lock.LOCK_FILE)
    with open(path, "w") as file:
        file.write(json.dumps({"tool": "t2t-trainer", "started": "2026-01-01 00:00:00 UTC", **holder}))
    return path


def test_the_lock_records_its_holder_and_is_removed_at_the_end(tmp_path):
    with run_lock.directory_lock(str(tmp_path), "t2t-trainer") as path:
        with open(path) as file:
            holder = json.load(file)
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        assert holder["tool"] == "t2t-trainer" and holder["started"].endswith("UTC")
        (tmp_path / "written").write_text("x")
    assert os.listdir(tmp_path) == ["written"]
    new = tmp_path / "new" / "train"
    with run_lock.directory_lock(str(new), "t2t-avg-all"):
        assert os.path.isdir(new)
    assert not os.path.exists(new)  # created for the lock, left empty: removed again


def test_a_second_writer_stops_naming_the_first_and_what_to_do(tmp_path):
    with run_lock.directory_lock(str(tmp_path), "t2t-trainer") as path:
        with pytest.raises(run_lock.DirectoryInUse) as error:
            with run_lock.directory_lock(str(tmp_path), "t2t-avg-all"):
                pass
        assert os.path.exists(path)  # the holder keeps its lock
    message = str(error.value)
    assert f"is in use by t2t-trainer (pid {os.getpid()} on host {socket.gethostname()}, started " in message
    assert "Wait for it to finish, or write to another directory" in message
    assert f"if you are sure it has stopped, remove {path}" in message and "\n" not in message


def _try_lock(directory, barrier, results, refusals):
    barrier.wait()  # every process reaches the lock at the same instant
    try:
        with run_lock.directory_lock(directory, "t2t-trainer"):
            results.put(("held", os.getpid()))
            # Held until the others have looked (a fixed second was not enough for a late one on a busy host).
            deadline = time.time() + 60
            while refusals.value < barrier.parties - 1 and time.time() < deadline:
                time.sleep(0.01)
    except run_lock.DirectoryInUse as error:
        results.put(("refused", str(error)))
        with refusals.get_lock():
            refusals.value += 1


def test_runs_starting_at_the_same_instant_are_refused_by_name(tmp_path):
    context = multiprocessing.get_context("fork")
    barrier, results, refusals = context.Barrier(8), context.Queue(), context.Value("i", 0)
    processes = [context.Process(target=_try_lock, args=(str(tmp_path), barrier, results, refusals)) for _ in range(8)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    held = [detail for kind, detail in outcomes if kind == "held"]
    refused = [detail for kind, detail in outcomes if kind == "refused"]
    assert len(held) == 1 and len(refused) == 7
    for message in refused:  # none saw a lock still being written: each names the one that holds it
        assert f"is in use by t2t-trainer (pid {held[0]} on host {socket.gethostname()}" in message
    assert os.listdir(tmp_path) == []  # no lock, and no file staged for one, is left


def test_a_lock_left_by_a_killed_run_is_taken_over_with_one_line(tmp_path):
    pid = dead_pid()
    write_lock(str(tmp_path), pid=pid, host=socket.gethostname())
    messages = []
    with run_lock.directory_lock(str(tmp_path), "t2t-trainer", log=messages.append) as path:
        with open(path) as file:
            assert json.load(file)["pid"] == os.getpid()
    assert len(messages) == 1 and f"(pid {pid} on host {socket.gethostname()}" in messages[0]
    assert "no longer runs (killed?); taking its lock over" in messages[0]
    assert os.listdir(tmp_path) == []  # no stray files from the takeover


def test_a_lock_held_on_another_host_is_never_taken_over(tmp_path):
    path = write_lock(str(tmp_path), pid=dead_pid(), host="another-host")
    with pytest.raises(
        run_lock.DirectoryInUse,
        match=f"its host cannot be checked from here, so if you are sure that run has stopped, remove {path}",
    ):
        with run_lock.directory_lock(str(tmp_path), "t2t-trainer"):
            pass


def test_an_empty_lock_is_a_run_starting_now_unless_it_is_old(tmp_path):
    path = os.path.join(tmp_path, run_lock.LOCK_FILE)
    open(path, "w").close()  # a run between creating the file and writing it
    with pytest.raises(run_lock.DirectoryInUse, match="taking this directory at this moment"):
        with run_lock.directory_lock(str(tmp_path), "t2t-trainer"):
            pass
    old = time.time() - 60
    os.utime(path, (old, old))  # a run killed between the two
    messages = []
    with run_lock.directory_lock(str(tmp_path), "t2t-trainer", log=messages.append):
        pass
    assert "unreadable lock file" in messages[0]


# -- The tools, in separate processes --------------------------------------------------------
def trainer_command(data_dir, output_dir, *flags):
    return [
        sys.executable,
        os.path.join(REPO, "bin", "t2t-trainer"),
        "--problem=algorithmic_reverse",
        "--hparams_set=transformer_tiny",
        f"--hparams={SMALL}",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        "--schedule=train",
        *flags,
    ]


def start(command):
    return forkserver.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# t2t-trainer as a user starts it, each update taking half a second longer: a run bound by the clock holds
# its directory as long, with the CPU free for the other tests.
SLOW_TRAINER = r"""
import sys, time
from t2t_lite.train import trainer
one_update = trainer._one_update
def one_slow_update(*args):
    time.sleep(0.5)
    return one_update(*args)
trainer._one_update = one_slow_update
from t2t_lite.cli import entry_points
sys.argv = ["t2t-trainer"] + sys.argv[1:]
entry_points.t2t_trainer()
"""


def test_two_trainers_started_together_exactly_one_trains(reverse_data, tmp_path):
    output_dir = str(tmp_path / "train")
    # The first holds the directory through its start-up and then 6 s of sleeping updates: both are forked
    # from the same warm server an instant apart, so the later one reaches the lock long before that ends.
    runs = [
        start(
            [sys.executable, "-c", SLOW_TRAINER]
            + trainer_command(
                reverse_data, output_dir, "--train_steps=100000", "--train_minutes=0.1", f"--random_seed={seed}"
            )[2:]
        )
        for seed in (1, 2)
    ]
    results = [(run.pid, run.wait(timeout=300), *run.communicate()) for run in runs]
    winners = [result for result in results if result[1] == 0]
    losers = [result for result in results if result[1] != 0]
    assert len(winners) == 1 and len(losers) == 1, results
    (winner_pid, _, winner_out, _), (_, loser_code, loser_out, loser_err) = winners[0], losers[0]
    assert "Stopped after 0.1 minutes" in winner_out
    assert loser_code == 1 and "Model transformer" not in loser_out  # it did not train
    assert (
        f"t2t-trainer: --output_dir: {output_dir} is in use by t2t-trainer (pid {winner_pid} on host "
        f"{socket.gethostname()}, started "
    ) in loser_err
    assert "Traceback" not in loser_err
    assert not os.path.exists(os.path.join(output_dir, run_lock.LOCK_FILE))  # the winner released it


def test_a_sigkilled_trainers_directory_resumes_without_clean_up(reverse_data, tmp_path):
    output_dir = str(tmp_path / "train")
    command = trainer_command(reverse_data, output_dir, "--train_steps=40", "--save_checkpoints_steps=10")
    killed = start(command)
    deadline = time.time() + 180
    while not tf.io.gfile.exists(os.path.join(output_dir, "ckpt-10.index")) and time.time() < deadline:
        time.sleep(0.1)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert os.path.exists(os.path.join(output_dir, run_lock.LOCK_FILE))  # SIGKILL leaves the lock behind

    again = forkserver.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"(pid {killed.pid} on host {socket.gethostname()}" in again.stdout
    assert "no longer runs (killed?); taking its lock over" in again.stdout
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-40")
    assert not os.path.exists(os.path.join(output_dir, run_lock.LOCK_FILE))


def test_averaging_into_a_directory_in_use_stops_at_once(tmp_path):
    output_dir = str(tmp_path / "avg")
    with run_lock.directory_lock(output_dir, "t2t-avg-all"):
        result = forkserver.run(
            [
                sys.executable,
                os.path.join(REPO, "bin", "t2t-avg-all"),
                f"--model_dir={tmp_path}",
                f"--output_dir={output_dir}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert f"t2t-avg-all: --output_dir: {output_dir} is in use by t2t-avg-all (pid {os.getpid()}" in result.stderr
    assert "Traceback" not in result.stderr


def test_exporting_into_a_directory_in_use_stops_before_loading_anything(tmp_path):
    export_dir, model_dir = str(tmp_path / "export"), str(tmp_path / "train")
    os.makedirs(model_dir)  # no checkpoint or hparams.json: the lock must stop the exporter before it reads them
    with run_lock.directory_lock(export_dir, "t2t-exporter"):
        result = forkserver.run(
            [
                sys.executable,
                os.path.join(REPO, "bin", "t2t-exporter"),
                "--problem=algorithmic_reverse",
                f"--data_dir={tmp_path}",
                f"--output_dir={model_dir}",
                f"--export_dir={export_dir}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert f"t2t-exporter: --export_dir: {export_dir} is in use by t2t-exporter (pid {os.getpid()}" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_remote_directory_is_locked_too_without_a_pid_check_across_hosts():
    """TensorFlow's in-memory file system (ram://) stands in for gs://: no O_EXCL, the same messages."""
    directory = f"ram://run_lock_{os.getpid()}/train"
    with run_lock.directory_lock(directory, "t2t-trainer") as path:
        with pytest.raises(run_lock.DirectoryInUse, match=f"is in use by t2t-trainer \\(pid {os.getpid()}"):
            with run_lock.directory_lock(directory, "t2t-avg-all"):
                pass
    assert not tf.io.gfile.exists(path)
    with tf.io.gfile.GFile(path, "w") as file:
        file.write(json.dumps({"tool": "t2t-trainer", "pid": dead_pid(), "host": "another-host", "started": "-"}))
    with pytest.raises(run_lock.DirectoryInUse, match="its host cannot be checked from here"):
        with run_lock.directory_lock(directory, "t2t-trainer"):
            pass
    tf.io.gfile.remove(path)
    with tf.io.gfile.GFile(path, "w") as file:
        file.write(json.dumps({"tool": "t2t-trainer", "pid": dead_pid(), "host": socket.gethostname(), "started": "-"}))
    messages = []
    with run_lock.directory_lock(directory, "t2t-trainer", log=messages.append):
        pass
    assert "no longer runs (killed?); taking it over" in messages[0]


def test_a_lock_on_a_full_disk_is_an_error_naming_it_and_leaves_nothing(small_disk):
    full_disk.fill(small_disk)
    directory = str(small_disk)
    with pytest.raises(OSError) as error:
        with run_lock.directory_lock(directory, "t2t-trainer"):
            pass
    assert error.value.errno == errno.ENOSPC and error.value.filename == os.path.join(directory, "t2t.lock")
    assert sorted(os.listdir(directory)) == ["filler"]
