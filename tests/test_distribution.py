"""MirroredStrategy over two logical CPU devices gives the losses of one device for the same global batches.

In training each replica reads its own train shards (`t2t_lite.train.replica_input`), so the one-device
reference is fed both replicas' batches side by side.
"""

import json
import os
import subprocess
import sys

import forkserver
import numpy as np
import pytest
import tensorflow as tf
import test_trainer
from conftest import merged_reports
from test_multiworker import check_judged_run
from test_trainer import logged_scalars, run_cli

from t2t_lite.data import datagen
from t2t_lite.train import distribution

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
reference_run = test_trainer.reference_run  # the shared 8-step run, a fixture

# The parts run in processes of their own: the CPU must be split into two logical devices before TensorFlow's
# runtime starts. A process may do several parts in turn; each group of
# processes is built once per test run (`parts_report`), its processes side by side, and the tests
# share their reports. Three groups, each for the tests that read it, keep every build short.
PRELUDE = r"""
import json, os, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
import numpy as np
from t2t_lite import registry
from t2t_lite.run_dir import checkpoints, model_info
from t2t_lite.train import distribution, replica_input, train_step, trainer
from t2t_lite.train.schedule import adam_optimizer

data_dir, output_dir, source_run = sys.argv[1], sys.argv[2], sys.argv[3]
problem = registry.problem("algorithmic_reverse")
hparams = registry.hparams("transformer_tiny").override(
    "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,"
    "learning_rate_warmup_steps=10,layer_prepostprocess_dropout=0")
# End to end, with accumulation: 2 micro-batches of 2 × 128 tokens on two replicas, each replica reading its own
# train shard.
accumulated = hparams.replace(tokens_per_step=512)
report = {}
"""

PARTS = {
    # The same global batches on one device and on two replicas.
    "replicas": r"""
rng = np.random.default_rng(0)
global_batches = []
for _ in range(3):  # 6 sentences of up to 9 ids, 0-padded at the end, one shape so each step traces once
    lengths = rng.integers(2, 10, size=(6, 2))
    ids = rng.integers(2, 12, size=(6, 2, 9)) * (np.arange(9) < lengths[..., None])
    global_batches.append({"inputs": tf.constant(ids[:, 0], tf.int32), "targets": tf.constant(ids[:, 1], tf.int32)})

def losses(worker_gpu):
    keras.utils.set_random_seed(0)
    strategy = distribution.strategy_for(worker_gpu)
    with strategy.scope():
        model = model_info.build_model(hparams, problem.vocab_size(data_dir))
        optimizer = adam_optimizer(hparams)
        optimizer.build(model.trainable_variables)
    steps = train_step.StepFunctions(model, optimizer, hparams, strategy)
    batches = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices({name: tf.stack([b[name] for b in global_batches])
                                            for name in ("inputs", "targets")})))
    result = []
    for _ in range(3):
        sums = steps.train_step(next(batches))
        result.append(float(sums[0] / sums[2]))
    return result

report.update({"replicas": distribution.strategy_for(2).num_replicas_in_sync, "one": losses(1), "two": losses(2)})
""",
    # The trainer on two replicas with accumulation (its losses are logged in output_dir/2).
    "accumulated": r"""
trainer.train_and_evaluate(problem, accumulated, data_dir, f"{output_dir}/2", train_steps=3, schedule="train",
                           summary_steps=1, worker_gpu=2, log=lambda message: None)
""",
    # The updates of "accumulated" as one device fed both replicas' micro-batches side by side (the same global
    # batches).
    "side_by_side": r"""
keras.utils.set_random_seed(1)  # the trainer's random_seed: same initial weights, same shuffles
strategy = distribution.strategy_for(2)
replica_batches = replica_input.TrainingBatches(problem, data_dir, accumulated, 1, strategy)
model = model_info.build_model(accumulated, problem.vocab_size(data_dir))
optimizer = adam_optimizer(accumulated)
optimizer.build(model.trainable_variables)
steps = train_step.StepFunctions(model, optimizer, accumulated, tf.distribute.get_strategy())
steps.build_accumulators()
def side_by_side(local):  # the replicas' batches as one, padded to the longer length
    def padded(ids, length):
        return tf.pad(ids, [[0, 0], [0, length - ids.shape[1]]])
    return {name: tf.concat([padded(batch[name], max(b[name].shape[1] for b in local)) for batch in local], 0)
            for name in ("inputs", "targets")}
report["side_by_side"] = []
for _ in range(3):
    sums = 0
    for _ in range(2):  # k = 512 / (2 × 128)
        sums += steps.accumulate_step(side_by_side(strategy.experimental_local_results(replica_batches.next()))).numpy()
    steps.apply_step()
    report["side_by_side"].append(float(sums[0] / sums[2]))
""",
    "dropout_float16_clip_fit": r"""
# Dropout: each replica its own masks (the seed generator is one mirrored variable).
from t2t_lite.model.dropout import Dropout
strategy = distribution.strategy_for(2)
with strategy.scope():
    layer = Dropout(0.5, seed=3)
masks = strategy.experimental_local_results(
    strategy.run(tf.function(lambda: layer(tf.ones([64, 64]), training=True))))
report["dropout"] = {"differ": bool((masks[0].numpy() != masks[1].numpy()).any()),
                     "keep": [float((m.numpy() != 0).mean()) for m in masks]}

# float16: an overflow on replica 1 alone skips the step on both and halves the loss scale.
with strategy.scope():
    weight = tf.Variable([1.0, 2.0])
    optimizer = adam_optimizer(hparams.replace(activation_dtype="float16"))
    optimizer.build([weight])
def overflow_on_replica_1():
    replica = tf.distribute.get_replica_context().replica_id_in_sync_group
    gradient = tf.ones([2]) * tf.where(tf.equal(replica, 1), float("inf"), 1.0)
    optimizer.apply_gradients(zip(distribution.skip_together([gradient]), [weight]))
scale = float(optimizer.dynamic_scale.numpy())
strategy.run(tf.function(overflow_on_replica_1))
report["float16"] = {"iterations": int(optimizer.iterations.numpy()), "finite": bool(np.isfinite(weight.numpy()).all()),
                     "scale_ratio": float(optimizer.dynamic_scale.numpy()) / scale}
try:  # gradient clipping would clip each replica's share, not the global norm
    trainer.train_and_evaluate(problem, hparams.replace(clip_grad_norm=1.0), data_dir, f"{output_dir}/clip",
                               train_steps=1, schedule="train", worker_gpu=2, log=lambda message: None)
    report["clip"] = "trained"
except ValueError as error:
    report["clip"] = str(error)
# The step count fitted to the clock: a variable the schedule reads, mirrored on both replicas.
trainer.train_and_evaluate(problem, hparams.replace(learning_rate_decay_steps=2), data_dir, f"{output_dir}/fit",
                           train_steps=3, schedule="train", worker_gpu=2, train_minutes=10,
                           fit_train_steps_to_minutes=True, summary_steps=1, log=lambda message: None)
report["fit"] = os.path.basename(tf.train.latest_checkpoint(f"{output_dir}/fit"))
""",
    # Warm-started from the reference run, evaluated every 2 steps; no evaluation beats the first by 100, so a
    # patience of 4 steps stops the run at step 6 of its 40 (test_early_stopping.py's rule).
    "judged": r"""
from t2t_lite.train.early_stopping import EarlyStopping
report["judged"] = []
trainer.train_and_evaluate(problem, hparams, data_dir, f"{output_dir}/judged", train_steps=40, worker_gpu=2,
                           save_checkpoints_steps=10, schedule="train_and_evaluate", local_eval_frequency=2,
                           eval_steps=1, warm_start_from=source_run,
                           early_stopping=EarlyStopping("loss", steps=4, delta=100.0), log=report["judged"].append)
""",
}


# The groups: each a name and its processes, each process the parts it runs in turn. The trainer's run
# and its side-by-side reference each run alone in a process, side by side.
ACCUMULATED = ("distribution_accumulated", (("accumulated",), ("side_by_side",)))
REPLICAS = ("distribution_replicas", (("replicas", "dropout_float16_clip_fit"),))
JUDGED = ("distribution_judged", (("judged",),))


def start_parts(parts, data_dir, output_dir, source_run):
    """PRELUDE, then PARTS[part] of each of `parts` in turn, in a process of its own with two logical CPU devices."""
    script = PRELUDE + "".join(PARTS[part] for part in parts) + '\nprint("REPORT " + json.dumps(report))\n'
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-c", script, data_dir, output_dir, source_run]
    return forkserver.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report_of(process):
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-3000:]
    return json.loads(stdout.split("REPORT ", 1)[1])


def parts_report(built_once, reverse_data, source_run, group):
    """(the directory the group's parts trained in, the report of all its parts), made once per test run.

    `source_run`: the run the "judged" part warm-starts from ("" for the groups without it)."""
    name, processes = group

    def build(path):
        started = [start_parts(parts, reverse_data, str(path), source_run) for parts in processes]
        report = merged_reports(started, report_of)
        with open(path / "report.json", "w") as file:
            json.dump(report, file)

    path = built_once(name, build)
    with open(path / "report.json") as file:
        return path, json.load(file)


@pytest.fixture(scope="module")
def accumulated_runs(built_once, reverse_data):
    return parts_report(built_once, reverse_data, "", ACCUMULATED)


@pytest.fixture(scope="module")
def replica_checks(built_once, reverse_data):
    return parts_report(built_once, reverse_data, "", REPLICAS)


@pytest.fixture(scope="module")
def judged_run(built_once, reverse_data, reference_run):
    return parts_report(built_once, reverse_data, reference_run, JUDGED)


def test_two_replicas_match_one_device(replica_checks):
    _, report = replica_checks
    assert report["replicas"] == 2
    np.testing.assert_allclose(report["two"], report["one"], rtol=1e-4)
    assert report["one"][-1] < report["one"][0]  # the updates did change the model


def test_accumulating_on_two_replicas_matches_one_device_fed_both_replicas_batches(accumulated_runs):
    """The trainer, each replica reading its own train shard, against the same micro-batches side by side."""
    # The two ran at once, in the two processes: neither needs the other's files.
    path, report = accumulated_runs
    side_by_side = report["side_by_side"]
    two = logged_scalars(str(path / "2"))
    assert sorted(two) == [1, 2, 3]
    np.testing.assert_allclose([two[s] for s in (1, 2, 3)], side_by_side, rtol=1e-4)


def test_replicas_draw_their_own_dropout_and_skip_overflows_together(replica_checks):
    """Dropout masks, a float16 overflow on one replica, clip_grad_norm refused, a step count fitted to the clock."""
    _, report = replica_checks
    # Replicas draw different dropout masks, each keeping about half (4,096 elements: 5σ ≈ 0.04).
    assert report["dropout"]["differ"] and all(abs(keep - 0.5) < 0.04 for keep in report["dropout"]["keep"])
    # float16 on two replicas: replica 1's overflow skipped the step everywhere and halved the scale.
    assert report["float16"] == {"iterations": 0, "finite": True, "scale_ratio": 0.5}
    assert "clip_grad_norm=1.0 with 2 replicas" in report["clip"]
    assert report["fit"] == "ckpt-3"  # at most --train_steps; 10 minutes hold more


def test_two_replicas_warm_start_and_stop_early_as_one_device(judged_run, reference_run):
    path, report = judged_run
    output_dir, lines = str(path / "judged"), report["judged"]
    check_judged_run(output_dir, reference_run, ["\n".join(lines)])
    assert any("2 replica(s)" in line for line in lines)


def test_worker_gpu_beyond_the_devices_names_the_flag():
    with pytest.raises(ValueError, match="--worker_gpu=64"):
        distribution.local_devices(64)


def test_tf_config_selects_multi_worker(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG"):
        distribution.strategy_for(1)


@pytest.mark.parametrize(
    "config, message",
    [
        ("[1, 2]", r'TF_CONFIG=\[1, 2\]: not a JSON object of the form \{"cluster"'),
        ('"worker"', 'TF_CONFIG="worker": not a JSON object'),
        ('{"cluster": {"worker": "a:1"}}', 'TF_CONFIG\'s "cluster": .* must map "worker"'),
        ('{"cluster": {"ps": ["a:1"], "worker": ["b:1"]}}', "t2t-trainer runs no other task types"),
        (
            '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "chief", "index": 0}}',
            r'"task": \{"type": "chief", "index": 0\} is not one of its cluster\'s tasks \(\{"type": "worker", '
            r'"index": 0\}, \{"type": "worker", "index": 1\}\)',
        ),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 1}}', "is not one of its cluster"),
        ('{"cluster": {"worker": ["a:1"]}}', 'TF_CONFIG has no "task"'),
        ('{"task": {"type": "worker", "index": 0}}', r"cluster's tasks \(none\)"),
    ],
)
def test_a_tf_config_that_names_no_task_of_its_cluster_stops_before_any_work(monkeypatch, config, message):
    """Not an object: TensorFlow's resolver fails with an AttributeError; a task not in its cluster trains alone."""
    monkeypatch.setenv("TF_CONFIG", config)
    with pytest.raises(ValueError, match=message):
        distribution.check_strategy(1)


def test_the_trainer_stops_on_such_a_tf_config_writing_nothing(monkeypatch, tmp_path):
    data_dir = str(tmp_path)
    with tf.io.TFRecordWriter(datagen.shard_filenames(data_dir, "algorithmic_reverse", "train", 1)[0]) as writer:
        writer.write(datagen.example_proto([3, 4, 1], [4, 3, 1]))
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}')
    flags = ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", f"--data_dir={data_dir}"]
    flags.append("--schedule=train")
    with pytest.raises(Exception, match='TF_CONFIG "task": .* is not one of its cluster') as error:
        run_cli(flags + [f"--output_dir={tmp_path / 'train'}"])
    assert "UsageError" in type(error.value).__name__  # one line, exit 1
    assert not os.path.exists(tmp_path / "train")


def test_time_bounds_are_refused_across_workers(monkeypatch):
    """Each worker's clock would stop or save at its own step, leaving the others on a collective."""
    distribution.check_clock_free(train_minutes=10, save_checkpoints_secs=600)  # one process: fine
    monkeypatch.setenv("TF_CONFIG", '{"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 0}}')
    distribution.check_clock_free(train_minutes=0, save_checkpoints_secs=0)
    for minutes, seconds in ((10, 0), (0, 600)):
        with pytest.raises(ValueError, match="--train_minutes and --save_checkpoints_secs .* use --train_steps"):
            distribution.check_clock_free(train_minutes=minutes, save_checkpoints_secs=seconds)


def test_only_the_chief_saves_into_output_dir():
    class Resolver:
        def __init__(self, task_type, task_id):
            self.task_type, self.task_id = task_type, task_id

        def cluster_spec(self):
            import tensorflow as tf

            return tf.train.ClusterSpec({"worker": ["a:1", "b:1"]})

    class Strategy:
        def __init__(self, resolver):
            self.cluster_resolver = resolver

    assert distribution.checkpoint_directory(Strategy(Resolver("worker", 0)), "/out") == "/out"
    scratch = distribution.checkpoint_directory(Strategy(Resolver("worker", 1)), "/out")
    # Outside output_dir, so TensorBoard and t2t-avg-all see the chief's files only (removed when the run ends).
    assert os.path.isdir(scratch) and not scratch.startswith("/out")
    assert os.path.basename(scratch).startswith(f"t2t_scratch_worker_1_{os.getpid()}_")
    os.rmdir(scratch)
    import tensorflow as tf

    assert distribution.checkpoint_directory(tf.distribute.get_strategy(), "/out") == "/out"


def test_a_lost_worker_is_named_with_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 0}})
    )
    error = tf.errors.UnavailableError(
        None,
        None,
        "{{function_node x}} Collective ops is aborted by: "
        "remote target /job:worker/replica:0/task:1 and /job:worker/replica:0/task:0",
    )
    message = distribution.lost_worker_message(error, str(tmp_path))
    assert message.startswith(
        "lost worker 1 (b:2) of the TF_CONFIG cluster (UnavailableError: Collective ops is aborted by:"
    )
    assert "relaunch all of them" in message and f"from the start (no checkpoint in {tmp_path} yet)" in message
