"""Each replica reads its own train shards (files r::R) and resumes at its own position; one replica is unchanged."""

import gc
import json
import os
import shutil
import sys
import types

import forkserver
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import merged_reports

from t2t_lite import registry
from t2t_lite.data import datagen, input_pipeline
from t2t_lite.data.vocabulary import EOS_ID
from t2t_lite.train import replica_input, trainer

# Shard i of algorithmic_reverse holds only symbol 2 + i, so any batch row tells which file it came from;
# the shards differ in size, so the replicas' epochs end after different numbers of batches.
SHARD_SIZES = (150, 250, 100, 200)
SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,learning_rate_warmup_steps=10"


def write_marked_shards(data_dir):
    paths = datagen.shard_filenames(data_dir, "algorithmic_reverse", "train", len(SHARD_SIZES))
    rng = np.random.default_rng(0)
    for shard, (path, size) in enumerate(zip(paths, SHARD_SIZES)):
        with tf.io.TFRecordWriter(path) as writer:
            for length in rng.integers(1, 9, size):
                symbols = [2 + shard] * int(length)
                writer.write(datagen.example_proto(symbols + [EOS_ID], symbols + [EOS_ID]))


@pytest.fixture(scope="module")
def marked_data(tmp_path_factory):
    data_dir = str(tmp_path_factory.mktemp("marked"))
    write_marked_shards(data_dir)
    return data_dir


def hparams():
    return registry.hparams("transformer_tiny").override(SMALL)


@pytest.mark.parametrize("global_seed", [0, 1])
def test_one_replica_reads_every_file_epoch_after_epoch_as_batched_dataset(marked_data, global_seed):
    """With one replica, epoch e is batched_dataset(seed=random_seed + e) over all files, as before.

    Under any global seed: the trainer sets it from --random_seed, and with 0 TensorFlow's own
    Dataset.shuffle cannot take the epoch's tensor seed (t2t_lite.data.seeded_shuffle).
    """
    keras.utils.set_random_seed(global_seed)
    problem = registry.problem("algorithmic_reverse")
    epochs = [
        list(
            input_pipeline.batched_dataset(
                problem, "train", marked_data, hparams(), shuffle=True, repeat=False, seed=7 + epoch
            ).as_numpy_iterator()
        )
        for epoch in (0, 1, 2)
    ]
    assert {int(symbol) for batch in epochs[0] for symbol in np.unique(batch["inputs"])} == {0, 1, 2, 3, 4, 5}
    expected = [batch for batches in epochs for batch in batches]
    batches = replica_input.TrainingBatches(problem, marked_data, hparams(), 7, tf.distribute.get_strategy())
    for index, want in enumerate(expected[:-1]):  # all but the last batch of epoch 2
        got = batches.next()
        assert all(np.array_equal(got[side].numpy(), want[side]) for side in want), index
    batches.record_positions()
    batches.close()  # its prefetching threads end now, not in a later test's garbage collection
    assert batches.epoch.numpy().tolist() == [2] and batches.batches_taken.numpy().tolist() == [len(epochs[2]) - 1]


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_closing_stops_the_pipelines_threads_at_once(marked_data):
    """close() ends the prefetching threads then, not at a later garbage collection.

    The pipelines' functions refer back to the TrainingBatches, so a forgotten one lives in a
    reference cycle; automatic collection is off here, so only close() can end its threads.
    """
    from test_trainer import live_threads, live_threads_settled

    problem = registry.problem("algorithmic_reverse")

    def read_and_close():
        batches = replica_input.TrainingBatches(problem, marked_data, hparams(), 7, tf.distribute.get_strategy())
        batches.next()
        running = live_threads()
        batches.close()
        return running

    read_and_close()  # TensorFlow's own thread pools, created once per process, exist from here on
    gc.collect()
    before = live_threads()
    gc.disable()
    try:
        running = read_and_close()
        after = live_threads_settled(before)  # automatic collection is off: only close() can have ended them
    finally:
        gc.enable()
    assert running > before, "the pipeline should run threads of its own while it is read"
    assert after <= before


def test_fewer_shards_than_replicas_stop_naming_both_counts(marked_data):
    eight_replicas = types.SimpleNamespace(num_replicas_in_sync=8)
    with pytest.raises(
        ValueError,
        match=r"holds 4 train shards of algorithmic_reverse, but training has 8 replicas.*"
        r"Regenerate the data with at least 8 train shards.*or train with fewer "
        r"replicas",
    ):
        replica_input.TrainingBatches(
            registry.problem("algorithmic_reverse"), marked_data, hparams(), 1, eight_replicas
        )


def test_files_that_give_no_batch_stop_instead_of_looping(marked_data):
    """max_length 1 drops every example: the pipeline would look for a batch epoch after epoch, forever."""
    batches = replica_input.TrainingBatches(
        registry.problem("algorithmic_reverse"),
        marked_data,
        hparams().replace(max_length=1),
        1,
        tf.distribute.get_strategy(),
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"train shards 0::1 in .* give no batches"):
        batches.next()
    batches.close()


def test_a_shard_cut_mid_record_stops_training_naming_it(marked_data, tmp_path):
    """TensorFlow's DataLossError ("truncated record at N") names no file; the error names the shard and record."""
    for name in os.listdir(marked_data):
        shutil.copy(os.path.join(marked_data, name), tmp_path)
    cut = datagen.shard_filenames(str(tmp_path), "algorithmic_reverse", "train", len(SHARD_SIZES))[2]
    os.truncate(cut, os.path.getsize(cut) - 3)  # into the last record's checksum: a copy cut short
    batches = replica_input.TrainingBatches(
        registry.problem("algorithmic_reverse"), str(tmp_path), hparams(), 1, tf.distribute.get_strategy()
    )
    with pytest.raises(
        datagen.DamagedShardError,
        match=rf"^{cut}: record {SHARD_SIZES[2]} is damaged \(truncated record at \d+\).*rerun t2t-datagen",
    ):
        for _ in range(10):  # the first batch needs the whole epoch in the shuffle buffer
            batches.next()
    batches.close()


def logged_losses(output_dir):
    from test_trainer import logged_scalars

    return logged_scalars(output_dir)


def as_earlier_versions_saved(run, step, output_dir):
    """A run directory holding `run`'s ckpt-`step` as earlier versions saved it: data_epoch and data_batches_taken
    scalars (one pipeline), every other tensor as it is; its hparams, and no event file, so that the losses logged
    there are only those of the run resumed from it."""
    os.mkdir(output_dir)
    for name in ("hparams.json", "problem.json"):
        shutil.copy(os.path.join(run, name), output_dir)
    saved = tf.train.load_checkpoint(os.path.join(run, f"ckpt-{step}"))
    dtypes = saved.get_variable_to_dtype_map()
    scalars = {f"data_{name}/.ATTRIBUTES/VARIABLE_VALUE" for name in ("epoch", "batches_taken")}
    names = sorted(dtypes)
    tensors = [
        tf.constant(saved.get_tensor(name).reshape(()) if name in scalars else saved.get_tensor(name), dtypes[name])
        for name in names
    ]
    prefix = os.path.join(output_dir, f"ckpt-{step}")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors)
    tf.compat.v1.train.update_checkpoint_state(output_dir, f"ckpt-{step}")


def test_a_checkpoint_of_earlier_versions_resumes_exactly(marked_data, tmp_path):
    """Earlier versions saved scalar data_epoch / data_batches_taken; such a checkpoint continues the run.

    Batches of 512 tokens: one epoch of the four files (700 examples) is 12 batches, so the run saved
    at step 8 is inside epoch 0 and its resumption to step 16 goes on into epoch 1, in few steps. The
    earlier version's checkpoint is the uninterrupted run's ckpt-8 with its positions made scalars: the
    same state a run of that version saves (one pipeline's epoch and batches taken), one training run fewer.
    """

    def train(output_dir, train_steps):
        trainer.train_and_evaluate(
            registry.problem("algorithmic_reverse"),
            hparams().replace(batch_size=512),
            marked_data,
            output_dir,
            train_steps=train_steps,
            save_checkpoints_steps=8,
            schedule="train",
            summary_steps=1,
            random_seed=3,
            log=lambda message: None,
        )

    reference = str(tmp_path / "reference")
    train(reference, 16)
    positions = tf.train.load_checkpoint(os.path.join(reference, "ckpt-8"))
    assert [
        positions.get_tensor(f"data_{name}/.ATTRIBUTES/VARIABLE_VALUE").tolist() for name in ("epoch", "batches_taken")
    ] == [[0], [8]]

    output_dir = str(tmp_path / "run")
    as_earlier_versions_saved(reference, 8, output_dir)
    saved = tf.train.load_checkpoint(os.path.join(output_dir, "ckpt-8"))
    assert saved.get_variable_to_shape_map()["data_epoch/.ATTRIBUTES/VARIABLE_VALUE"] == []
    assert saved.get_tensor("data_batches_taken/.ATTRIBUTES/VARIABLE_VALUE") == 8
    train(output_dir, 16)
    assert tf.train.load_checkpoint(os.path.join(output_dir, "ckpt-16")).get_tensor(
        "data_epoch/.ATTRIBUTES/VARIABLE_VALUE"
    ).tolist() == [1]  # the resumed run went on into the next epoch
    resumed, expected = logged_losses(output_dir), logged_losses(reference)
    assert sorted(resumed) == list(range(9, 17))  # all logged by the resumed run
    np.testing.assert_allclose([resumed[s] for s in range(9, 17)], [expected[s] for s in range(9, 17)], rtol=1e-5)


# Two replicas need two logical CPUs, split before TensorFlow starts: a fresh process. A process may do
# several parts in turn, paying TensorFlow's import once; the processes run side by side (the two runs
# that the resume test compares among them), once per test run, and the tests share their reports
# (`resumed_runs`, `read_then_one_then_two`).
TWO_REPLICAS = r"""
import json, sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import numpy as np
from t2t_lite import registry
from t2t_lite.train import distribution, replica_input, trainer

parts, data_dir, output_dir, overrides = sys.argv[1:5]
problem = registry.problem("algorithmic_reverse")
hparams = registry.hparams("transformer_tiny").override(overrides)
report = {}

def train(name, train_steps, worker_gpu=2):
    log = []
    trainer.train_and_evaluate(problem, hparams, data_dir, f"{output_dir}/{name}", train_steps=train_steps,
                               save_checkpoints_steps=10, schedule="train", summary_steps=1, random_seed=3,
                               worker_gpu=worker_gpu, log=log.append)
    return log

for part in parts.split(","):
    if part == "read":  # Which files each replica's batches come from: shard i holds only symbol 2 + i.
        messages = []
        batches = replica_input.TrainingBatches(problem, data_dir, hparams, 1, distribution.strategy_for(2),
                                                messages.append)
        symbols = [set(), set()]
        for _ in range(50):  # more than one epoch of each replica's files
            for replica, local in enumerate(batches.strategy.experimental_local_results(batches.next())):
                symbols[replica] |= set(np.unique(local["inputs"].numpy()).tolist())
        batches.record_positions()
        report["symbols"] = [sorted(s - {0, 1}) for s in symbols]
        report["positions"] = [batches.epoch.numpy().tolist(), batches.batches_taken.numpy().tolist()]
        report["messages"] = messages
        batches.close()
    elif part == "uninterrupted":
        train("uninterrupted", 16)
    elif part == "interrupted":
        train("interrupted", 10)  # stopped after ckpt-10, then the same command resumes
        position = tf.train.load_checkpoint(f"{output_dir}/interrupted/ckpt-10")
        report["saved"] = [position.get_tensor(f"data_{name}/.ATTRIBUTES/VARIABLE_VALUE").tolist()
                           for name in ("epoch", "batches_taken")]
        train("interrupted", 16)
    elif part == "one_then_two":
        # A run of one replica resumed with two: the positions cannot be mapped, every replica starts a fresh epoch.
        train("one_then_two", 4, worker_gpu=1)
        report["one_then_two"] = train("one_then_two", 5)
print("REPORT " + json.dumps(report))
"""


# The parts of each process. The interrupted run and its resumption, two runs in turn, take the longest; the
# other parts share out so that no process takes longer (and the uninterrupted run runs beside it).
def start_two_replicas(parts, marked_data, output_dir):
    """Starts TWO_REPLICAS' `parts` in a process of its own; its output goes to files (a full pipe would block it)."""
    name = parts.replace(",", "_")
    stdout, stderr = (open(os.path.join(output_dir, f"{name}.{suffix}"), "w+") for suffix in ("out", "err"))
    command = [sys.executable, "-c", TWO_REPLICAS, parts, marked_data, output_dir, SMALL + ",tokens_per_step=512"]
    process = forkserver.Popen(command, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), stdout=stdout, stderr=stderr)
    process.files = stdout, stderr
    return process


def two_replicas_report(process):
    """Waits for a process of start_two_replicas; its report."""
    try:
        code = process.wait(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    stdout, stderr = process.files
    for file in process.files:
        file.seek(0)
    out, err = stdout.read(), stderr.read()
    stdout.close()
    stderr.close()
    assert code == 0, err[-3000:]
    return json.loads(out.split("REPORT ", 1)[1])


def run_two_replica_parts(built_once, name, processes):
    """(the directory of the runs, the reports of their parts): `processes` (each a comma-separated list of
    TWO_REPLICAS' parts, run in turn) side by side, made once per test run under `name`."""

    def build(path):
        # Its own copy of the data, beside the runs: the module's marked_data is one per test worker.
        data_dir = str(path / "marked")
        os.mkdir(data_dir)
        write_marked_shards(data_dir)
        started = [start_two_replicas(parts, data_dir, str(path)) for parts in processes]
        report = merged_reports(started, two_replicas_report)
        with open(path / "report.json", "w") as file:
            json.dump(report, file)

    path = built_once(name, build)
    with open(path / "report.json") as file:
        return path, json.load(file)


@pytest.fixture(scope="module")
def resumed_runs(built_once):
    """The interrupted run (resumed) and the uninterrupted one, side by side."""
    return run_two_replica_parts(built_once, "two_replica_resume", ("interrupted", "uninterrupted"))


@pytest.fixture(scope="module")
def read_then_one_then_two(built_once):
    """What each replica reads, and a run of one replica resumed with two, side by side in two processes.

    A fixture of its own, so that another test worker can build it while the resumed runs train; two
    processes, so that neither part waits for the other (in one process they took longer than a test may)."""
    return run_two_replica_parts(built_once, "two_replica_read", ("read", "one_then_two"))


def test_two_replicas_read_their_own_files(read_then_one_then_two):
    _, report = read_then_one_then_two
    # Replica 0 read files 0 and 2 only (symbols 2, 4), replica 1 files 1 and 3 (symbols 3, 5).
    assert report["symbols"] == [[2, 4], [3, 5]]
    assert report["messages"] == [f"replica {r} of 2 reads 2 of 4 train shards." for r in (0, 1)]
    # After 50 batches each, each replica is in an epoch of its own: their files (250 and 450
    # examples) make about 17 and 30 batches per epoch.
    epochs, taken = report["positions"]
    assert epochs[0] > epochs[1] >= 1


def test_two_replicas_resume_at_their_own_positions(resumed_runs):
    # The uninterrupted run and the interrupted one, resumed, ran side by side in two processes.
    path, report = resumed_runs
    # ckpt-10 (2 micro-batches per step: 20 batches per replica) holds both positions, replica 0 in epoch 1.
    saved_epochs, saved_taken = report["saved"]
    assert saved_epochs[0] == saved_epochs[1] + 1 == 1 and saved_taken[1] == 20 and 0 < saved_taken[0] < 20
    uninterrupted = logged_losses(str(path / "uninterrupted"))
    resumed = logged_losses(str(path / "interrupted"))
    assert sorted(resumed) == sorted(uninterrupted) == list(range(1, 17))
    np.testing.assert_allclose(
        [resumed[s] for s in range(11, 17)], [uninterrupted[s] for s in range(11, 17)], rtol=1e-5
    )


def test_a_run_of_one_replica_resumed_with_two_starts_every_replicas_epoch(read_then_one_then_two):
    _, report = read_then_one_then_two
    assert any(
        "holds the data positions of 1 input pipeline(s), and this run has 2 replicas" in line
        and "every replica starts epoch" in line
        for line in report["one_then_two"]
    ), report["one_then_two"]
