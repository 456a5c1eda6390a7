"""A TF_CONFIG cluster that cannot go on stops with what to do: a worker that never came, a killed chief.

MultiWorkerMirroredStrategy needs every worker in every step, so the survivors of a lost
worker must stop (not wait for ever), say which worker they lost or waited for and say to
relaunch all of them; a relaunch then resumes from the chief's last complete checkpoint.
"""

import glob
import json
import os
import signal
import sys
import tempfile
import time

import forkserver
from test_multiworker import (
    ENV,
    HPARAMS,
    REPO,
    finish,
    free_ports,
    kill_after_checkpoint_and_see_the_other_stop,
    launch_workers,
    started,  # noqa: F401, F811  (a fixture)
)

from t2t_lite.run_dir import run_lock

# worker 0 (the chief) is killed once ckpt-KILL_AFTER is written, well before TRAIN_STEPS.
KILL_AFTER, TRAIN_STEPS = 10, 20


def test_a_worker_whose_cluster_never_comes_stops_at_the_deadline(reverse_data, tmp_path):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    data_dir, output_dir = reverse_data, str(tmp_path / "train")
    config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": 0}}  # worker 1 never starts
    started_at = time.time()
    result = forkserver.run(
        [
            sys.executable,
            os.path.join(REPO, "bin", "t2t-trainer"),
            "--problem=algorithmic_reverse",
            "--hparams_set=transformer_tiny",
            f"--hparams={HPARAMS}",
            f"--data_dir={data_dir}",
            f"--output_dir={output_dir}",
            "--train_steps=10",
            "--schedule=train",
            "--cluster_start_minutes=0.1",
        ],
        env=dict(ENV, TF_CONFIG=json.dumps(config)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]  # by its watchdog: TensorFlow held it
    assert time.time() - started_at < 120
    assert (
        f"did not come together within --cluster_start_minutes=0.1: worker 0 ({workers[0]}) waited for "
        f"worker 1 ({workers[1]})"
    ) in result.stderr, result.stderr[-3000:]
    assert "relaunch all of them" in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not os.path.exists(os.path.join(output_dir, run_lock.LOCK_FILE))


def test_a_killed_chief_stops_the_other_worker_and_a_relaunch_resumes(reverse_data, tmp_path, started):  # noqa: F811
    data_dir, output_dir, logs = reverse_data, str(tmp_path / "train"), str(tmp_path)

    # 1. Worker 0, the chief, is killed after a checkpoint: worker 1 stops within 60 s, naming it.
    processes, workers = launch_workers(data_dir, output_dir, TRAIN_STEPS, logs, started)
    kill_after_checkpoint_and_see_the_other_stop(processes, workers, output_dir, KILL_AFTER, victim=0)
    finish(processes[:1])
    # The survivor removed its scratch directory as it stopped.
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"t2t_scratch_worker_1_{processes[1].pid}_*"))

    # 2. The chief's directory is as it left it: its lock, and a last complete checkpoint that reads.
    with open(os.path.join(output_dir, run_lock.LOCK_FILE)) as lock:
        assert json.load(lock)["pid"] == processes[0].pid
    with open(os.path.join(output_dir, "checkpoint")) as state:
        latest = state.readline().split('"')[1]  # model_checkpoint_path: "ckpt-N"
    assert not os.path.exists(os.path.join(output_dir, f"ckpt-{TRAIN_STEPS}.index"))

    # 3. Both relaunched: the chief takes the stale lock over in one line; both resume from that checkpoint.
    relaunched = finish(launch_workers(data_dir, output_dir, TRAIN_STEPS, logs, started)[0])
    for code, output in relaunched:
        assert code == 0, output[-3000:]
        assert f"Restored {os.path.join(output_dir, latest)} (step {latest.split('-')[1]})" in output, output[-3000:]
    takeover = [line for line in relaunched[0][1].splitlines() if "taking its lock over" in line]
    assert len(takeover) == 1 and f"pid {processes[0].pid} " in takeover[0], takeover
    assert os.path.exists(os.path.join(output_dir, f"ckpt-{TRAIN_STEPS}.index"))
    assert not os.path.exists(os.path.join(output_dir, "set_aside"))  # no checkpoint was damaged
    assert not os.path.exists(os.path.join(output_dir, run_lock.LOCK_FILE))  # released at the end
