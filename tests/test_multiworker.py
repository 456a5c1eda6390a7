"""Two t2t-trainer processes under TF_CONFIG on 127.0.0.1 train as one process with two replicas.

MultiWorkerMirroredStrategy over two one-CPU workers must give the losses of
MirroredStrategy over two logical CPUs of one process (same global batch: in both, replica
r reads train shard r of the two, `t2t_lite.train.replica_input`), each worker must say it reads
only its own shard, only the chief may write into --output_dir, a lost worker must stop the
other with a message that says to relaunch all, and a relaunch must resume to the
uninterrupted losses. Warm start, early stopping and the best checkpoint behave with two workers as in one
process (and with two replicas in one process: test_distribution.py).
"""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import forkserver
import numpy as np
import pytest
import test_trainer
from test_trainer import logged_scalars

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HPARAMS = (
    "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,"
    "learning_rate_warmup_steps=10,layer_prepostprocess_dropout=0"
)
# t2t-trainer logs the loss at its last step; worker 1 is killed after ckpt-10, well before step 20.
KILL_AFTER, TRAIN_STEPS, SAVE_EVERY = 10, 20, 5
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")

# The reference: one process, the CPU split into two logical devices before TensorFlow starts.
ONE_PROCESS = r"""
import sys
from t2t_lite import cpu_features
cpu_features.use_onednn_kernels()  # the kernels the t2t-trainer workers run: the same sums
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from t2t_lite import registry
from t2t_lite.train import trainer
data_dir, output_dir, hparams, train_steps, save_every = sys.argv[1:6]
trainer.train_and_evaluate(registry.problem("algorithmic_reverse"),
                           registry.hparams("transformer_tiny").override(hparams), data_dir, output_dir,
                           train_steps=int(train_steps), save_checkpoints_steps=int(save_every),
                           schedule="train", worker_gpu=2, summary_steps=1, log=lambda message: None)
"""


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.fixture
def started():
    """Processes the test starts; any still running at its end (a failed assertion) are killed."""
    processes = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def launch_workers(data_dir, output_dir, train_steps, log_dir, started, extra=()):
    """Starts two t2t-trainer workers (worker 0 is the chief), with `extra` flags; returns them and their addresses.

    Their output goes to files (TensorFlow's logs would fill a pipe and block them).
    """
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    processes = []
    for index in range(2):
        log = open(os.path.join(log_dir, f"worker{index}-{time.time()}.log"), "w+")
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        command = [
            sys.executable,
            os.path.join(REPO, "bin", "t2t-trainer"),
            "--problem=algorithmic_reverse",
            "--hparams_set=transformer_tiny",
            f"--hparams={HPARAMS}",
            f"--data_dir={data_dir}",
            f"--output_dir={output_dir}",
            f"--train_steps={train_steps}",
            f"--save_checkpoints_steps={SAVE_EVERY}",
            "--schedule=train",
            *extra,
        ]
        process = forkserver.Popen(
            command, env=dict(ENV, TF_CONFIG=json.dumps(config)), stdout=log, stderr=subprocess.STDOUT
        )
        process.log = log
        processes.append(process)
        started.append(process)
    return processes, workers


def finish(processes, timeout=600):
    """(exit code, output) of each process."""
    results = []
    for process in processes:
        code = process.wait(timeout)
        process.log.seek(0)
        results.append((code, process.log.read()))
        process.log.close()
    return results


def kill_after_checkpoint_and_see_the_other_stop(processes, workers, output_dir, step, victim, sent=signal.SIGKILL):
    """Sends `sent` to worker `victim` once ckpt-`step` exists; the other must stop within 60 s, naming it, no
    traceback. SIGTERM (a job manager's) ends a worker at once too, saying why: the workers save together."""
    survivor = 1 - victim
    checkpoint = os.path.join(output_dir, f"ckpt-{step}.index")
    deadline = time.time() + 600
    while not os.path.exists(checkpoint) and time.time() < deadline and processes[victim].poll() is None:
        time.sleep(0.05)
    assert os.path.exists(checkpoint), finish(processes)[0][1][-3000:]
    processes[victim].send_signal(sent)
    killed = time.time()
    code, output = finish(processes[survivor : survivor + 1], timeout=60)[0]
    assert time.time() - killed < 60
    assert code != 0
    assert f"lost worker {victim} ({workers[victim]})" in output and "relaunch all of them" in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]


def written_files(directory):
    return sorted(
        os.path.relpath(os.path.join(root, name), directory) for root, _, names in os.walk(directory) for name in names
    )


def test_two_workers_train_as_two_replicas_and_resume_after_a_lost_worker(reverse_data, tmp_path, started):
    data_dir, logs = reverse_data, str(tmp_path)
    reference, output_dir = (str(tmp_path / name) for name in ("one_process", "two_workers"))
    one_process_log = open(os.path.join(logs, "one_process.log"), "w+")
    one_process = forkserver.Popen(
        [sys.executable, "-c", ONE_PROCESS, data_dir, reference, HPARAMS, str(TRAIN_STEPS), str(SAVE_EVERY)],
        env=ENV,
        stdout=one_process_log,
        stderr=subprocess.STDOUT,
        like_a_tool=True,
    )
    one_process.log = one_process_log
    started.append(one_process)

    # 1. Launched to TRAIN_STEPS, worker 1 gets SIGTERM after a checkpoint: worker 0 stops within 60 s.
    processes, workers = launch_workers(data_dir, output_dir, TRAIN_STEPS, logs, started)
    kill_after_checkpoint_and_see_the_other_stop(
        processes, workers, output_dir, KILL_AFTER, victim=1, sent=signal.SIGTERM
    )
    [(code, output)] = finish(processes[1:])
    assert code == 143 and "SIGTERM: stopped at once, without saving (under TF_CONFIG the workers save together)" in (
        output
    ), output[-3000:]
    for scratch in glob.glob(os.path.join(tempfile.gettempdir(), f"t2t_scratch_worker_1_{processes[1].pid}_*")):
        shutil.rmtree(scratch)  # a killed worker cannot remove its own
    assert not os.path.exists(os.path.join(output_dir, f"ckpt-{TRAIN_STEPS}.index"))  # it did stop early
    chiefs = [processes[0].pid]

    # 2. Both relaunched: they resume from the last checkpoint, exit 0 and end where one uninterrupted run ends.
    processes, _ = launch_workers(data_dir, output_dir, TRAIN_STEPS, logs, started)
    chiefs.append(processes[0].pid)
    for index, (code, output) in enumerate(finish(processes)):
        assert code == 0, output[-3000:]
        assert "Restored" in output
        # Each worker reads its own one of algorithmic_reverse's two train shards, none of the other's.
        assert f"worker {index} of 2 reads 1 of 2 train shards (replica {index})." in output, output[-3000:]
    # Only the chief wrote into --output_dir: one event file per launch, named with the chief's pid.
    files = written_files(output_dir)
    events = [name for name in files if name.startswith("events.out.tfevents")]
    writers = [int(re.search(r"\.(\d+)\.\d+\.v2$", name).group(1)) for name in events]  # ...<host>.<pid>.<n>.v2
    assert sorted(writers) == sorted(chiefs), (events, chiefs)
    assert sorted(set(files) - set(events)) == sorted(
        ["checkpoint", "hparams.json", "problem.json"]
        + [
            f"ckpt-{step}.{suffix}"
            for step in range(0, TRAIN_STEPS + 1, SAVE_EVERY)
            for suffix in ("data-00000-of-00001", "index")
        ]
    )
    # Worker 1 saved into a scratch directory of its own, removed when it finished.
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"t2t_scratch_worker_1_{processes[1].pid}_*"))
    [(code, output)] = finish([one_process])
    assert code == 0, output[-3000:]
    two_workers, one = logged_scalars(output_dir), logged_scalars(reference)
    assert sorted(two_workers) == [TRAIN_STEPS] and sorted(one) == list(range(1, TRAIN_STEPS + 1))
    np.testing.assert_allclose(two_workers[TRAIN_STEPS], one[TRAIN_STEPS], rtol=1e-4)
    assert one[TRAIN_STEPS] < one[1]  # the updates did change the model


reference_run = test_trainer.reference_run  # the shared 8-step run, a fixture
# Warm-started from the reference run; evaluated every 2 steps, the first evaluation is the best (no later one
# beats it by 100) and a patience of 4 stops the run at step 6 of its 20 (test_early_stopping.py's rule).
JUDGED = (
    "--schedule=train_and_evaluate",
    "--local_eval_frequency=2",
    "--eval_steps=1",
    "--eval_early_stopping_steps=4",
    "--eval_early_stopping_metric_delta=100",
)


def judged_flags(data_dir, output_dir, source):
    return [
        "--problem=algorithmic_reverse",
        "--hparams_set=transformer_tiny",
        f"--hparams={HPARAMS}",
        f"--data_dir={data_dir}",
        f"--output_dir={output_dir}",
        f"--train_steps={TRAIN_STEPS}",
        f"--save_checkpoints_steps={SAVE_EVERY}",
        f"--warm_start_from={source}",
        *JUDGED,
    ]


def check_judged_run(output_dir, source, outputs):
    """Every process started from `source`, stopped at step 6 naming the best (step 2); the chief kept best/."""
    for output in outputs:
        assert f"Warm start from {os.path.join(source, 'ckpt-8')} (step 8)" in output, output[-3000:]
        assert "Early stopping at step 6: loss has not improved by more than 100 in 4 steps" in output, output[-3000:]
        assert "Traceback" not in output
    assert open(os.path.join(output_dir, "checkpoint")).read().splitlines()[0].endswith('ckpt-6"')
    assert json.load(open(os.path.join(output_dir, "best", "best.json")))["step"] == 2
    assert json.load(open(os.path.join(output_dir, "warm_start.json")))["hparams_changed"] == {
        "layer_prepostprocess_dropout": [0.1, 0.0]
    }


def test_two_workers_warm_start_stop_early_at_one_step_and_the_chief_keeps_best(
    reverse_data, reference_run, tmp_path, started
):
    output_dir = str(tmp_path / "two_workers")
    flags = judged_flags(reverse_data, output_dir, reference_run)[5:]
    processes, _ = launch_workers(reverse_data, output_dir, TRAIN_STEPS, str(tmp_path), started, extra=flags)
    results = finish(processes)
    for code, output in results:
        assert code == 0, output[-3000:]
    check_judged_run(output_dir, reference_run, [output for _, output in results])
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"t2t_scratch_worker_1_{processes[1].pid}_*"))
