"""SIGINT and SIGTERM: t2t-trainer saves the step it reached, releases its lock, says so in one line, exits
130 / 143, and the rerun continues the uninterrupted run; a second Ctrl-C stops at once. The other tools end
with one line too."""

import os
import signal
import subprocess
import sys
import time

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import test_trainer
from test_trainer import SMALL, logged_scalars, train

from t2t_lite.run_dir import checkpoints
from t2t_lite.train import interruption

reference_run = test_trainer.reference_run  # the shared 8-step run, a fixture

# t2t-trainer as a user starts it, each update after the third taking a second longer, so that the
# signal reaches it in the middle of the run on any host (the losses are the same at any speed).
SLOW_TRAINER = r"""
import sys, time
from t2t_lite.train import trainer
one_update, updates = trainer._one_update, []
def one_slow_update(*args):
    updates.append(1)
    if len(updates) > 3:
        time.sleep(1.0)
    return one_update(*args)
trainer._one_update = one_slow_update
train_and_evaluate = trainer.train_and_evaluate  # a loss logged at every step, for the test to follow
trainer.train_and_evaluate = lambda *args, **changes: train_and_evaluate(*args, summary_steps=1, **changes)
from t2t_lite.cli import entry_points
sys.argv = ["t2t-trainer"] + sys.argv[1:]
entry_points.t2t_trainer()
"""


def start_slow_trainer(data_dir, output_dir):
    argv = [
        "--problem=algorithmic_reverse",
        "--hparams_set=transformer_tiny",
        f"--hparams={SMALL}",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        "--train_steps=8",
        "--save_checkpoints_steps=100",  # no periodic checkpoint after ckpt-0: the one saved is the signal's
        "--schedule=train",
        "--random_seed=3",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return forkserver.Popen(
        [sys.executable, "-c", SLOW_TRAINER, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for_step(process, output_dir, step):
    deadline = time.time() + 120
    while process.poll() is None and max(logged_scalars(output_dir), default=0) < step and time.time() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, process.communicate()[1][-3000:]


@pytest.mark.parametrize("sent, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_saves_the_step_reached_and_the_rerun_continues_the_run(
    reverse_data, reference_run, tmp_path, sent, code
):
    output_dir = str(tmp_path / "run")
    process = start_slow_trainer(reverse_data, output_dir)
    wait_for_step(process, output_dir, 4)
    process.send_signal(sent)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == code, stderr[-3000:]
    latest = tf.train.latest_checkpoint(output_dir)
    reached = checkpoints.checkpoint_step(latest)
    assert 4 <= reached < 8
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == (
        f"t2t-trainer: stopped by {sent.name} at step {reached}; rerun the same command to resume from {latest}."
    )
    assert not os.path.exists(os.path.join(output_dir, "t2t.lock"))  # released
    train(reverse_data, output_dir, save_checkpoints_steps=100)  # the same run, resumed
    resumed, expected = logged_scalars(output_dir), logged_scalars(reference_run)
    assert sorted(resumed) == list(range(1, 9))
    np.testing.assert_allclose([resumed[s] for s in range(1, 9)], [expected[s] for s in range(1, 9)], rtol=1e-5)


def test_a_second_ctrl_c_stops_at_once_without_saving(reverse_data, tmp_path):
    output_dir = str(tmp_path / "run")
    process = start_slow_trainer(reverse_data, output_dir)
    wait_for_step(process, output_dir, 4)
    process.send_signal(signal.SIGINT)
    time.sleep(0.2)  # inside the same one-second update
    process.send_signal(signal.SIGINT)
    started = time.time()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130 and time.time() - started < 5, stderr[-3000:]
    assert "SIGINT: stopped at once, without saving (as asked)" in stderr and "Traceback" not in stderr
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-0")  # nothing saved after the start


def test_under_tf_config_the_first_signal_stops_the_worker_at_once(monkeypatch, capfd):
    """A checkpoint needs every worker: a signalled worker ends at once and says why (the others then stop,
    naming it: test_multiworker.py)."""
    exits = []
    monkeypatch.setattr(interruption.tf_config, "is_multi_worker", lambda: True)
    monkeypatch.setattr(interruption.os, "_exit", exits.append)
    interruption.StopSignals()._handle(signal.SIGTERM, None)
    assert exits == [143]
    assert (
        "SIGTERM: stopped at once, without saving (under TF_CONFIG the workers save together)" in capfd.readouterr().err
    )


def test_another_tool_stopped_by_ctrl_c_says_so_in_one_line(tmp_path):
    """t2t-datagen on algorithmic_reverse's 20,000 pairs, interrupted while it writes: exit 130, one line, and
    the split it was writing is not left as finished data."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    command = [
        sys.executable,
        os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", "t2t-datagen"),
        "--problem=algorithmic_reverse",
        f"--data_dir={tmp_path / 'data'}",
        f"--tmp_dir={tmp_path / 'tmp'}",
    ]
    process = forkserver.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while process.poll() is None and not list((tmp_path / "data").glob("*incomplete*")) and time.time() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr[-3000:]
    assert (
        stderr.strip().splitlines()[-1] == "t2t-datagen: stopped by SIGINT before it finished; rerun the same command."
    )
    assert "Traceback" not in stderr
    assert not list((tmp_path / "data").glob("algorithmic_reverse-train-*-of-*"))
