"""Training (§5): learning a task, resuming after SIGKILL, NaN stops (the accumulated step: test_train_step.py)."""

import gc
import glob
import os
import shutil
import signal
import subprocess
import sys
import time

import forkserver
import full_disk
import kill_points
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.ops import gen_io_ops

from t2t_lite import cpu_features, registry
from t2t_lite.cli import tool_process
from t2t_lite.data import datagen, input_pipeline
from t2t_lite.run_dir import checkpoints, model_info
from t2t_lite.train import loss, trainer

SMALL = "hidden_size=32,filter_size=64,num_heads=2,num_hidden_layers=1,batch_size=128,learning_rate_warmup_steps=10"
# Every algorithmic_reverse example (2-9 tokens with EOS) in one length bucket, not in buckets 8 and 9: one batch
# shape, so that a run traces its update once, not again when it meets the second bucket (XLA: compiles it once).
# For runs whose checks do not depend on what their batches hold, or that compare runs batched alike.
ONE_SHAPE = ",min_length_bucket=10"


@pytest.fixture(scope="module")
def full_reverse_data(tmp_path_factory):
    """algorithmic_reverse as the problem makes it (20,000 train pairs), for the test that learns it."""
    data_dir = str(tmp_path_factory.mktemp("data"))
    registry.problem("algorithmic_reverse").generate_data(data_dir, str(tmp_path_factory.mktemp("tmp")))
    return data_dir


def logged_scalars(output_dir, tag="loss"):
    """step -> value of a TensorBoard scalar, read from the event files (later files win).

    Tests poll a running trainer's files with this: TensorFlow's record reader takes under 1 ms a run, where a
    tf.data pipeline built per poll took 33 ms, more CPU than the trainer it waits for."""
    values = {}
    for path in sorted(glob.glob(os.path.join(output_dir, "events.out.tfevents.*"))):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(tf.make_ndarray(value.tensor))
    return values


def train(data_dir, output_dir, overrides=SMALL, **kwargs):
    options = dict(
        train_steps=8,
        eval_steps=1,
        save_checkpoints_steps=2,
        schedule="train",
        summary_steps=1,
        random_seed=3,
        log=lambda message: None,
    )
    options.update(kwargs)
    hparams = registry.hparams("transformer_tiny").override(overrides)
    return trainer.train_and_evaluate(registry.problem("algorithmic_reverse"), hparams, data_dir, output_dir, **options)


def test_transformer_tiny_learns_algorithmic_reverse(full_reverse_data, tmp_path):
    """Nearly every dev sequence reversed exactly (teacher-forced argmax) after 500 steps of 256 tokens.

    transformer_tiny narrowed to one layer each side of d_model 64 (d_ff 256), without dropout and with
    the rate decayed linearly over the last 200 steps, so that the run is short on a small CPU: three
    seeds reached 98-100 % of sequences, where an untrained model gets ~0 % (batches of 512 tokens reached
    100 % at about 1.5 times the cost, batches of 128 tokens 25-44 %; two layers without the decay needed
    800 steps of 512 tokens for about 96 %). Float32 sums are rounded differently
    on different CPUs, and the trajectories part after some tens of steps, so each CPU behaves like
    another seed: a host below the bounds at 500 steps trains on (the same command resumes the run) to
    700, then 900.
    """
    hparams = registry.hparams("transformer_tiny").override(
        "hidden_size=64,filter_size=256,num_hidden_layers=1,batch_size=256,learning_rate=1.0,"
        "learning_rate_warmup_steps=100,learning_rate_decay_steps=200,layer_prepostprocess_dropout=0"
    )
    for steps in (500, 700, 900):  # evaluated and saved once, at each end
        metrics = trainer.train_and_evaluate(
            registry.problem("algorithmic_reverse"),
            hparams,
            full_reverse_data,
            str(tmp_path / "reverse"),
            train_steps=steps,
            eval_steps=0,
            local_eval_frequency=steps,
            save_checkpoints_steps=steps,
            random_seed=1,
            log=print,
        )
        if metrics["accuracy_per_sequence"] >= 0.9 and metrics["accuracy"] >= 0.98:
            break
    assert metrics["accuracy_per_sequence"] >= 0.9, metrics
    assert metrics["accuracy"] >= 0.98, metrics


def live_threads() -> int:
    """Threads of this process, TensorFlow's native ones included (threading.enumerate sees only Python's)."""
    return len(os.listdir("/proc/self/task"))


def live_threads_settled(limit: int, seconds: float = 10.0) -> int:
    """live_threads() once it is at most `limit`, or after `seconds`: a joined thread can still be
    listed in /proc for a moment after its join returns, longer on a loaded machine."""
    deadline = time.time() + seconds
    while live_threads() > limit and time.time() < deadline:
        time.sleep(0.05)
    return live_threads()


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
def test_training_in_process_leaves_no_input_threads_running(reverse_data, reference_run, tmp_path):
    """When train_and_evaluate returns, its endless prefetching input pipeline has stopped.

    Otherwise a notebook or a test process that trains keeps a pipeline's threads per run until a
    full garbage collection finds them (measured: 8 threads before a run, 23 after it). Automatic
    collection is off during the second run, so only the trainer itself can have stopped them.
    """
    # TensorFlow's own pools exist from here on: a rerun of a finished run starts its input pipeline, its
    # summary writer and its model as a run does, and returns without tracing an update.
    train(reverse_data, copy_of(reference_run, tmp_path / "warm"))
    gc.collect()
    before = live_threads()
    gc.disable()
    try:
        train(reverse_data, str(tmp_path / "run"), train_steps=2)
        after = live_threads_settled(before)
    finally:
        gc.enable()
    assert after <= before


# A training run in a fresh process that SIGKILLs itself inside the save of step KILL_IN_SAVE,
# after the checkpoint's files are written and before the `checkpoint` list names them; a
# negative value -s kills it just after the save of step s is complete.
TRAIN_SCRIPT = (
    """
import sys
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_management
from t2t_lite import registry
from t2t_lite.train import trainer
data_dir, output_dir, kill_in_save = sys.argv[1], sys.argv[2], int(sys.argv[3])
record_state = checkpoint_management.CheckpointManager._record_state
def record_state_or_die(manager):
    import os, signal
    if kill_in_save > 0 and manager.latest_checkpoint.endswith(f"-{kill_in_save}"):
        os.kill(os.getpid(), signal.SIGKILL)
    record_state(manager)
    if kill_in_save < 0 and manager.latest_checkpoint.endswith(f"-{-kill_in_save}"):
        os.kill(os.getpid(), signal.SIGKILL)
checkpoint_management.CheckpointManager._record_state = record_state_or_die
one_update, updates = trainer._one_update, []
def one_slow_update(*args):
    # Killed from outside (kill_in_save 0): a second per update after the third, so that the test's
    # poll kills the run before it ends on any host (the losses are the same at any speed).
    updates.append(1)
    if kill_in_save == 0 and len(updates) > 3:
        import time
        time.sleep(1.0)
    return one_update(*args)
trainer._one_update = one_slow_update
hparams = registry.hparams("transformer_tiny").override(%r)
trainer.train_and_evaluate(registry.problem("algorithmic_reverse"), hparams, data_dir, output_dir, train_steps=8,
                           save_checkpoints_steps=2, schedule="train", summary_steps=1, random_seed=3)
"""
    % SMALL
)


def start_training(data_dir, output_dir, kill_in_save=0):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return forkserver.Popen(
        [sys.executable, "-c", TRAIN_SCRIPT, data_dir, output_dir, str(kill_in_save)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


@pytest.fixture(scope="session")
def reference_run(built_once, reverse_data):
    """`train(reverse_data, dir)`, built once per test run: 8 steps of SMALL with checkpoints 0, 2, 4, 6, 8
    and a loss and learning rate logged at every step. Tests only read it, or train on in a copy (`copy_of`)."""
    return str(built_once("trainer_reference_run", lambda path: train(reverse_data, str(path))))


def copy_of(run, destination):
    """A copy of a finished run's directory to resume or change (its checkpoint list names files relatively)."""
    shutil.copytree(run, destination)
    return str(destination)


@pytest.mark.parametrize("killed", ["in_save", "outside", "after_save"])
def test_resume_after_sigkill_continues_the_uninterrupted_run(reverse_data, tmp_path, request, killed):
    """A run SIGKILLed inside a save, at an arbitrary moment, or just after a save: the same command
    again resumes it and logs the uninterrupted run's losses at every step, to its last checkpoint."""
    output_dir = str(tmp_path / killed)
    process = start_training(
        reverse_data, output_dir, kill_in_save={"in_save": 6, "outside": 0, "after_save": -4}[killed]
    )
    # Asked for once the run to kill has started, so that it starts up while the reference trains (if not yet built).
    expected = logged_scalars(request.getfixturevalue("reference_run"))
    assert sorted(expected) == list(range(1, 9))

    if killed == "outside":  # at an arbitrary moment after step 3
        deadline = time.time() + 120
        while process.poll() is None and max(logged_scalars(output_dir), default=0) < 3 and time.time() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
        latest = tf.train.latest_checkpoint(output_dir)
        assert latest is not None and checkpoints.checkpoint_step(latest) < 8
    elif killed == "in_save":  # inside the save of step 6: ckpt-6's files exist but the list still ends at ckpt-4
        assert process.wait(timeout=120) == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
        assert os.path.exists(os.path.join(output_dir, "ckpt-6.index"))
        assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-4")
    else:  # just after the save of step 4 is complete: step 4's scalars must already be logged
        assert process.wait(timeout=120) == -signal.SIGKILL, process.stderr.read().decode()[-2000:]
        assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-4")

    train(reverse_data, output_dir)  # the same command again resumes
    resumed = logged_scalars(output_dir)
    assert sorted(resumed) == list(range(1, 9))
    np.testing.assert_allclose([resumed[s] for s in range(1, 9)], [expected[s] for s in range(1, 9)], rtol=1e-5)
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-8")


def test_nan_loss_stops_with_the_last_good_checkpoint(reverse_data, tmp_path):
    output_dir = str(tmp_path / "nan")
    with pytest.raises(trainer.TrainingError, match="last good checkpoint"):
        train(reverse_data, output_dir, overrides=SMALL + ",learning_rate=1e30", save_checkpoints_steps=1)
    latest = tf.train.latest_checkpoint(output_dir)
    model = model_info.restore_model(latest, model_info.read_hparams(output_dir), 12)
    assert all(np.isfinite(v.numpy()).all() for v in model.trainable_variables)


def train_with_a_speed_switch(data_dir, output_dir, switch, **kwargs):
    """12 steps at learning rate 2 with `switch` added to SMALL; returns the logged losses."""
    overrides = SMALL + ",learning_rate=2," + switch
    train(data_dir, output_dir, overrides=overrides, train_steps=12, save_checkpoints_steps=100, **kwargs)
    return logged_scalars(output_dir)


def assert_learns(losses):
    # Against the first loss (about 3.1; the plateau of guessing among 12 symbols is ln 12 = 2.48): the
    # means of steps 1-3 and 10-12 were only 0.24-0.29 apart, and one loss moves by 0.1 from step to step.
    assert np.mean([losses[s] for s in (10, 11, 12)]) < losses[1] - 0.3


def test_float16_trains(reverse_data, tmp_path):  # bfloat16: the test below; xla_compile: the one after it
    assert_learns(train_with_a_speed_switch(reverse_data, str(tmp_path / "run"), "activation_dtype=float16"))


def test_bfloat16_trains_and_on_a_cpu_without_its_units_is_noted(reverse_data, tmp_path, monkeypatch):
    """Emulated bfloat16 is slower than float32: the log says so and how to switch, and the run goes on.

    One bfloat16 run, on a CPU that says it has no bfloat16 units: noted, and it trains all 12 steps and
    learns. The same command again on a CPU that has them (True), or cannot tell (None), notes nothing:
    the note is logged before the training loop, for a fresh or a resumed run alike, so those reruns,
    which resume at step 12 and train no step, check it without tracing a second and third step.
    """
    output_dir = str(tmp_path / "run")
    for units, noted in ((False, True), (True, False), (None, False)):
        monkeypatch.setattr(cpu_features, "bfloat16_units", lambda cpuinfo="/proc/cpuinfo", units=units: units)
        lines = []
        losses = train_with_a_speed_switch(reverse_data, output_dir, "activation_dtype=bfloat16", log=lines.append)
        note = any("no bfloat16 multiply units" in line and "activation_dtype=float32" in line for line in lines)
        assert note is noted, (units, lines)
        assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-12")
        if units is False:  # the fresh run
            assert_learns(losses)
        else:  # the rerun resumed at the end: it trained nothing
            assert f"Restored {os.path.join(output_dir, 'ckpt-12')} (step 12)." in lines, lines


def test_xla_step_equals_the_plain_step_and_trains(reverse_data, tmp_path):
    """Projecting every position and masking padding (XLA) gives the plain step's loss and update.

    The plain step projects only the real target tokens; with dropout off and one seed, the
    two runs must log the same losses step after step (equal weights after each update). The
    XLA run goes on to step 12 and learns as the float16 and bfloat16 runs do. Both are batched
    alike, in one batch shape (ONE_SHAPE), which XLA compiles once.
    """
    runs = {}
    for name, switch, steps in (("plain", "", 4), ("xla", ",xla_compile=true", 12)):
        overrides = SMALL + ONE_SHAPE + ",learning_rate=2,layer_prepostprocess_dropout=0.0" + switch
        train(reverse_data, str(tmp_path / name), overrides=overrides, train_steps=steps, save_checkpoints_steps=100)
        runs[name] = logged_scalars(str(tmp_path / name))
    assert sorted(runs["plain"]) == [1, 2, 3, 4] and sorted(runs["xla"]) == list(range(1, 13))
    for step in range(1, 5):
        assert runs["xla"][step] == pytest.approx(runs["plain"][step], rel=1e-4), step
    assert runs["plain"][4] < runs["plain"][1]  # the weights did move
    losses = runs["xla"]
    assert np.mean([losses[s] for s in (10, 11, 12)]) < losses[1] - 0.3


RELATIVE = "self_attention_type=dot_product_relative,pos=none"


@pytest.mark.parametrize("recorded_as", ["absolute", "relative"])
def test_resuming_with_the_other_position_type_stops_naming_the_hparams(
    reverse_data, reference_run, tmp_path, recorded_as
):
    """A run trained with absolute positions refuses to resume with relative ones (Shaw et al.), and the other way
    round (a relative run's record, written here into a copy), before any checkpoint is read."""
    output_dir = copy_of(reference_run, tmp_path / "run")
    overrides = f"{SMALL},{RELATIVE}"
    if recorded_as == "relative":
        path = os.path.join(output_dir, "hparams.json")
        relative = registry.hparams("transformer_tiny").override(overrides)
        with open(path, "w") as file:
            file.write(relative.to_json())
        overrides = SMALL
    before, after = ("'timing'", "'none'") if recorded_as == "absolute" else ("'none'", "'timing'")
    types = ("'dot_product'", "'dot_product_relative'")
    before_type, after_type = types if recorded_as == "absolute" else types[::-1]
    with pytest.raises(
        checkpoints.CheckpointError,
        match=rf"other hparams \(pos {before} → {after}; self_attention_type {before_type} → {after_type}\)",
    ):
        train(reverse_data, output_dir, overrides=overrides, train_steps=10)


def test_resuming_with_other_settings_stops_naming_them(reverse_data, reference_run, tmp_path):
    """Another --hparams or --problem on a run's --output_dir stops before restoring or writing anything."""
    output_dir = copy_of(reference_run, tmp_path / "run")  # ckpt-8
    recorded = open(os.path.join(output_dir, "hparams.json")).read()
    latest = tf.train.latest_checkpoint(output_dir)
    with pytest.raises(
        checkpoints.CheckpointError,
        match=r"other hparams \(layer_prepostprocess_dropout 0.1 → 0.3\).*or give a new --output_dir",
    ):
        train(reverse_data, output_dir, overrides=SMALL + ",layer_prepostprocess_dropout=0.3", train_steps=10)
    hparams = registry.hparams("transformer_tiny").override(SMALL)
    with pytest.raises(
        checkpoints.CheckpointError, match="trained with problem 'algorithmic_reverse', not 'algorithmic_identity'"
    ):
        trainer.train_and_evaluate(
            registry.problem("algorithmic_identity"),
            hparams,
            reverse_data,
            output_dir,
            train_steps=10,
            schedule="train",
            log=lambda message: None,
        )
    assert open(os.path.join(output_dir, "hparams.json")).read() == recorded
    assert tf.train.latest_checkpoint(output_dir) == latest
    train(reverse_data, output_dir, train_steps=10)  # the same settings resume
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-10")


def test_logged_learning_rate_is_eq3_at_the_logged_step(reference_run):
    """Update s used lrate(s) of eq. 3 (§5.3), and TensorBoard shows that rate at step s."""
    logged = logged_scalars(reference_run, "learning_rate")
    eq3 = {step: 32**-0.5 * min(step**-0.5, step * 10**-1.5) for step in range(1, 9)}  # SMALL: d 32, warmup 10
    assert logged == pytest.approx(eq3, rel=1e-6)


def test_linear_decay_cools_the_last_updates_and_is_announced(reverse_data, tmp_path):
    """learning_rate_decay_steps=4 of 6 steps: updates 3-6 take 4/4, 3/4, 2/4, 1/4 of eq. 3 (t2t's linear_decay)."""
    output_dir, lines = str(tmp_path / "run"), []
    train(reverse_data, output_dir, overrides=SMALL + ",learning_rate_decay_steps=4", train_steps=6, log=lines.append)
    logged = logged_scalars(output_dir, "learning_rate")
    eq3 = {step: 32**-0.5 * min(step**-0.5, step * 10**-1.5) for step in range(1, 7)}
    factor = {1: 1.0, 2: 1.0, 3: 1.0, 4: 0.75, 5: 0.5, 6: 0.25}
    assert logged == pytest.approx({step: eq3[step] * factor[step] for step in eq3}, rel=1e-6)
    assert any("from 1 to 1/4 over steps 3-6" in line for line in lines), lines


def test_evaluate_schedule_scores_the_latest_checkpoint_and_writes_none(reverse_data, reference_run, tmp_path):
    """schedule=evaluate: the dev metrics of the checkpoint's weights over the whole dev split, once."""
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint to evaluate"):
        train(reverse_data, str(tmp_path / "empty"), schedule="evaluate")
    output_dir = copy_of(reference_run, tmp_path / "run")  # evaluating writes eval/
    listed = checkpoints.all_checkpoints(output_dir)
    metrics = train(reverse_data, output_dir, schedule="evaluate", eval_steps=0)
    assert checkpoints.all_checkpoints(output_dir) == listed

    hparams = model_info.read_hparams(output_dir)
    model = model_info.restore_model(output_dir, hparams, 12)
    problem = registry.problem("algorithmic_reverse")
    totals = {}
    for batch in input_pipeline.batched_dataset(problem, "dev", reverse_data, hparams, shuffle=False, repeat=False):
        for name, value in loss.eval_sums(model(batch, training=False), batch["targets"], 0.1).items():
            totals[name] = totals.get(name, 0.0) + float(value)
    assert totals["sequences"] == 500  # the whole dev split of algorithmic_reverse
    for name, value in loss.eval_metrics(totals).items():
        assert metrics[name] == pytest.approx(value, rel=1e-5), name


def test_evaluating_without_a_dev_split_stops_before_training(reverse_data, tmp_path):
    """The default schedule evaluates on dev: a corpus without one is named at the start, not hours in."""
    train_only = tmp_path / "train_only"
    train_only.mkdir()
    for path in glob.glob(os.path.join(reverse_data, "*-train-*")):
        shutil.copy(path, train_only)
    output_dir = str(tmp_path / "run")
    with pytest.raises(
        ValueError,
        match=r"--schedule=train_and_evaluate evaluates on the dev split.*"
        r"or train with --schedule=train",
    ):
        train(str(train_only), output_dir, schedule="train_and_evaluate")
    assert not os.path.exists(output_dir)
    train(str(train_only), output_dir, train_steps=2)  # schedule=train needs no dev split
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-2")


def test_missing_or_damaged_train_data_stops_naming_it_before_anything_is_written(reverse_data, tmp_path):
    """No train shards: one message naming the pattern and t2t-datagen. A train shard cut short: its name and
    record, from the first batch, taken before the run writes its records or ckpt-0."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"has no train data for algorithmic_reverse .*Run t2t-datagen"):
        train(str(empty), str(tmp_path / "run"))
    assert not os.path.exists(tmp_path / "run")
    damaged = shutil.copytree(reverse_data, tmp_path / "damaged")
    cut = sorted(glob.glob(os.path.join(damaged, "*-train-*")))[1]
    os.truncate(cut, os.path.getsize(cut) - 3)
    output_dir = tmp_path / "damaged_run"
    with pytest.raises(datagen.DamagedShardError, match=rf"^{cut}: record \d+ is damaged"):
        train(str(damaged), str(output_dir))
    assert not glob.glob(os.path.join(output_dir, "*"))  # no hparams.json, no ckpt-0


def clock_per_update(monkeypatch, seconds):
    """The trainer's clock advances seconds(n) with the n-th optimizer update, and stands still otherwise."""
    clock, updates = [1000.0], [0]
    one_update = trainer._one_update

    def timed_update(*args):
        updates[0] += 1
        clock[0] += seconds(updates[0])
        return one_update(*args)

    monkeypatch.setattr(trainer, "_one_update", timed_update)
    monkeypatch.setattr(trainer.time, "time", lambda: clock[0])


@pytest.fixture
def hundred_seconds_per_update(monkeypatch):
    clock_per_update(monkeypatch, lambda update: 100.0)


def test_checkpoints_every_n_seconds_replace_the_step_interval(reverse_data, tmp_path, hundred_seconds_per_update):
    """§6.1's checkpoints "written at 10-minute intervals": --save_checkpoints_secs, on a clock
    that advances 100 s per update, saves every third update (and the last), not every 2nd step."""
    output_dir = str(tmp_path / "run")
    train(
        reverse_data,
        output_dir,
        overrides=SMALL + ONE_SHAPE,
        train_steps=8,
        save_checkpoints_steps=2,
        save_checkpoints_secs=250,
    )
    saved = [checkpoints.checkpoint_step(path) for path in checkpoints.all_checkpoints(output_dir)]
    assert saved == [0, 3, 6, 8]


def test_eta_honours_train_minutes(reverse_data, tmp_path, hundred_seconds_per_update):
    """On a clock that advances 100 s per update, a 10-minute run's ETA is the time left of the 10 minutes."""
    messages = []
    five_step_warmup = SMALL.replace("learning_rate_warmup_steps=10", "learning_rate_warmup_steps=5")
    train(
        reverse_data,
        str(tmp_path / "run"),
        overrides=five_step_warmup,
        train_steps=100000,
        save_checkpoints_steps=1000,
        train_minutes=10,
        log=messages.append,
    )
    etas = [line.split("ETA ")[1] for line in messages if "ETA" in line]
    assert etas == ["0:08:20", "0:06:40", "0:05:00", "0:03:20", "0:01:40", "0:00:00"]  # 600 s - 100 s per step
    assert "Stopped after 10 minutes at step 6" in messages[-1]


def test_a_bound_that_runs_out_during_an_evaluation_stops_at_the_step_evaluated_and_saved(
    reverse_data, tmp_path, monkeypatch
):
    """100 s per update and 250 s per evaluation, every 4 steps, in a 10-minute bound: the evaluation of
    step 4 ends at 650 s, past the bound, so the run stops at ckpt-4, without a 5th update, a 5th-step
    checkpoint one update after the 4th, or a second evaluation."""
    clock_per_update(monkeypatch, lambda update: 100.0)
    evaluate = trainer._Training.evaluate_and_log

    def slow_evaluation(self, eval_steps):
        metrics = evaluate(self, eval_steps)
        evaluations_took[0] += 250.0
        return metrics

    evaluations_took, update_clock = [0.0], trainer.time.time
    monkeypatch.setattr(trainer.time, "time", lambda: update_clock() + evaluations_took[0])
    monkeypatch.setattr(trainer._Training, "evaluate_and_log", slow_evaluation)
    lines, output_dir = [], str(tmp_path / "run")
    train(
        reverse_data,
        output_dir,
        train_steps=100000,
        save_checkpoints_steps=4,
        local_eval_frequency=4,
        schedule="train_and_evaluate",
        train_minutes=10,
        log=lines.append,
    )
    assert [line.split(":")[0] for line in lines if line.startswith("Eval at step")] == ["Eval at step 4"]
    assert [checkpoints.checkpoint_step(path) for path in checkpoints.all_checkpoints(output_dir)] == [0, 4]
    assert any("Stopped after 10 minutes at step 4;" in line for line in lines), lines


def test_the_run_says_early_how_long_its_updates_take_on_this_machine(reverse_data, tmp_path, monkeypatch):
    """Updates of 3 s while settling, then 0.5 s: timed from update 10 to 50, the 30 left take 15 s.

    80 updates: the estimate comes after update 50 whatever the run's length (progress.SETTLING_UPDATES +
    TIMED_UPDATES); at step 60 the ETA, 20 × 0.5 s = 10 s, leaves the settling updates out (with them,
    the mean update of 0.92 s would give 18 s)."""
    clock_per_update(monkeypatch, lambda update: 3.0 if update <= 10 else 0.5)
    lines = []
    run = str(tmp_path / "run")
    train(reverse_data, run, overrides=SMALL + ONE_SHAPE, train_steps=80, save_checkpoints_steps=1000, log=lines.append)
    assert (
        "On this machine: 0.5 s per update (updates 11-50), so the 30 updates left take about 0:00:15. "
        "The model is the same on any host; only this time is the machine's." in lines
    ), lines
    assert [line.split("ETA ")[1] for line in lines if line.startswith(("step 60/", "step 79/"))] == [
        "0:00:10",
        "0:00:00",
    ]


def test_a_bound_that_stops_the_run_inside_the_warmup_is_warned_of_early_and_at_the_stop(
    reverse_data, tmp_path, hundred_seconds_per_update
):
    """A 20-minute bound at 100 s per update holds 12 updates of a 100-step warm-up (the Multi30k
    recipe on a slow CPU: docs/results.md). Updates are timed after the settling tenth (from update
    2, 200 s); the first estimate, after a twentieth of timed updates (update 3, 300 s), foresees
    3 + 900 / 100 = 12 updates; the stop says eq. 3 got to 12/100 of its peak. Nothing is fitted."""
    lines = []
    train(
        reverse_data,
        str(tmp_path / "run"),
        overrides=SMALL.replace("learning_rate_warmup_steps=10", "learning_rate_warmup_steps=100") + ONE_SHAPE,
        train_steps=100000,
        save_checkpoints_steps=1000,
        train_minutes=20,
        summary_steps=100,
        log=lines.append,
    )
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 2, lines
    assert warnings[0].startswith(
        "WARNING: at 100 s per update --train_minutes=20 holds about 12 updates, fewer "
        "than eq. 3's learning_rate_warmup_steps=100"
    ), warnings
    assert lines.index(warnings[0]) < lines.index(next(line for line in lines if line.startswith("Stopped after")))
    assert "Stopped after 20 minutes at step 12" in lines[-2]
    assert lines[-1] == (
        "WARNING: --train_minutes=20 ran out at step 12, inside eq. 3's 100-step warm-up: the "
        "learning rate was still rising, at 0.12 of its peak."
    )


def test_a_run_fitted_to_train_minutes_ends_its_decay_inside_them(reverse_data, tmp_path, monkeypatch):
    """20 minutes less 2 %, updates of 100 s, 60 s from the 3rd, 40 s from the 7th, a line every 10 steps:
    the updates are timed from step 2 (the settling tenth, 120 s, has passed); the first estimate, once
    they span a twentieth of the bound (60 s), at step 3: 3 + ⌊(1,176 − 260) / 60⌋ = 18, before any
    line; it grows as they speed up; the decay of 5 begins at step 19, between two lines, which fixes
    the count at 23; the run ends there inside the bound, with the weights of --train_steps=23, and a
    resumed run ends with it instead of fitting anew."""
    clock_per_update(monkeypatch, lambda update: 100.0 if update <= 2 else 60.0 if update <= 6 else 40.0)
    overrides = SMALL + ",learning_rate_decay_steps=5" + ONE_SHAPE
    fitted, lines = str(tmp_path / "fitted"), []
    fitting = dict(
        overrides=overrides,
        train_steps=100000,
        train_minutes=20,
        fit_train_steps_to_minutes=True,
        summary_steps=10,
        save_checkpoints_steps=5,
    )
    train(reverse_data, fitted, log=lines.append, **fitting)
    assert tf.train.latest_checkpoint(fitted).endswith("ckpt-23")
    assert not any("Stopped after" in line for line in lines)
    assert any(
        line.startswith("Fitting the run to --train_minutes=20") and "ends at step 18 " in line for line in lines
    ), lines
    fixing = [i for i, line in enumerate(lines) if "The decay began at step 19 and ends the run at step 23" in line]
    assert fixing and fixing[0] < next(i for i, line in enumerate(lines) if line.startswith("step 20/23 "))
    assert lines.index(next(line for line in lines if line.startswith("Fitting"))) < next(
        i for i, line in enumerate(lines) if line.startswith("step 10/")
    )

    replayed = str(tmp_path / "replayed")
    train(reverse_data, replayed, overrides=overrides, train_steps=23, save_checkpoints_steps=5)
    weights = [name for name, _ in tf.train.list_variables(replayed + "/ckpt-23") if name.startswith("model/")]
    assert weights
    for name in weights:
        np.testing.assert_allclose(
            tf.train.load_variable(fitted + "/ckpt-23", name),
            tf.train.load_variable(replayed + "/ckpt-23", name),
            rtol=1e-6,
            err_msg=name,
        )

    lines.clear()
    train(reverse_data, fitted, log=lines.append, **fitting)
    assert tf.train.latest_checkpoint(fitted).endswith("ckpt-23")
    assert any(
        "Resuming inside the decay fitted by an earlier process: the run ends at step 23" in line for line in lines
    ), lines


def test_a_fitted_run_the_clock_stops_inside_its_decay_says_how_far_the_decay_got(reverse_data, tmp_path, monkeypatch):
    """As above until the decay fixes the count at 23 (step 19, 960 s); then updates of 300 s: the
    20th ends at 1,260 s, past the 1,200 s bound, having taken (23 + 1 − 20) / 5 of eq. 3."""
    clock_per_update(
        monkeypatch, lambda update: 100.0 if update <= 2 else 60.0 if update <= 6 else 40.0 if update <= 19 else 300.0
    )
    lines = []
    train(
        reverse_data,
        str(tmp_path / "run"),
        overrides=SMALL + ",learning_rate_decay_steps=5" + ONE_SHAPE,
        train_steps=100000,
        train_minutes=20,
        fit_train_steps_to_minutes=True,
        summary_steps=10,
        log=lines.append,
    )
    assert "Stopped after 20 minutes at step 20" in lines[-2]
    assert lines[-1].startswith(
        "WARNING: --train_minutes=20 ran out at step 20 of the 23 fitted, with the decay "
        "at 0.80 of eq. 3's rate instead of 1/5"
    ), lines[-2:]


def test_a_damaged_newest_checkpoint_is_skipped_and_training_resumes_exactly(reverse_data, reference_run, tmp_path):
    """ckpt-8 cut short: skipped and set aside; the run resumes from ckpt-6 and its updates 7 and 8 log the
    uninterrupted reference run's losses (the updates after the restored step are the ones a wrong
    restore, of weights, optimizer moments or data position, would change)."""
    output_dir = copy_of(reference_run, tmp_path / "run")
    data = os.path.join(output_dir, "ckpt-8.data-00000-of-00001")
    os.truncate(data, os.path.getsize(data) // 2)  # a disk that filled up during the last save
    for events in glob.glob(os.path.join(output_dir, "events.out.tfevents.*")):
        os.remove(events)  # the scalars read below are then the resumed run's only
    messages = []
    train(reverse_data, output_dir, train_steps=8, log=messages.append)
    assert messages[0].startswith(f"WARNING: {data} cannot be read") and "skipped ckpt-8" in messages[0]
    assert "Moved ckpt-8 to" in messages[1] and f"Restored {os.path.join(output_dir, 'ckpt-6')} (step 6)." in messages
    assert glob.glob(os.path.join(output_dir, "set_aside", "*", "ckpt-8.data-00000-of-00001"))  # kept, not deleted
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-8")
    resumed, expected = logged_scalars(output_dir), logged_scalars(reference_run)
    assert sorted(resumed) == [7, 8]
    np.testing.assert_allclose([resumed[s] for s in (7, 8)], [expected[s] for s in (7, 8)], rtol=1e-5)


def test_checkpoint_path_resumes_the_run_from_an_earlier_checkpoint(reverse_data, reference_run, tmp_path, capsys):
    output_dir = copy_of(reference_run, tmp_path / "run")  # ckpt-0, 2, 4, 6, 8
    run_cli(
        [
            "--problem=algorithmic_reverse",
            "--hparams_set=transformer_tiny",
            f"--hparams={SMALL}",
            f"--data_dir={reverse_data}",
            f"--output_dir={output_dir}",
            "--schedule=train",
            "--train_steps=6",
            "--save_checkpoints_steps=2",
            "--random_seed=3",
            f"--checkpoint_path={output_dir}/ckpt-4",
        ]
    )
    out = capsys.readouterr().out
    assert "Moved ckpt-6, ckpt-8 to" in out and f"Restored {output_dir}/ckpt-4 (step 4)" in out
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-6")
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(output_dir, "set_aside", "*", "*.index"))) == [
        "ckpt-6.index",
        "ckpt-8.index",
    ]


def run_cli(argv):
    from absl import flags as absl_flags

    from t2t_lite.cli import t2t_trainer as trainer_cli

    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-trainer"] + argv)
    trainer_cli.main([])


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--hparams_set=transformer_tiny", "--data_dir=d", "--output_dir=o"], "--problem"),
        (
            ["--problem=algorithmic_reverse", "--hparams_set=transformer_tinny", "--data_dir=d", "--output_dir=o"],
            "--hparams_set",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--hparams=num_head=2",
                "--data_dir=d",
                "--output_dir=o",
            ],
            "--hparams",
        ),
        (
            ["--problem=algorithmic_revers", "--hparams_set=transformer_tiny", "--data_dir=d", "--output_dir=o"],
            "--problem",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--train_steps=0",
            ],
            "--train_steps",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--worker_gpu=64",
            ],
            "--worker_gpu",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--generate_data",
            ],
            "--tmp_dir",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--model=transformr",
            ],
            "--model",
        ),
        (
            ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--data_dir=absent", "--output_dir=o"],
            "--data_dir=absent: no such directory",
        ),
        (
            ["--problem=algorithmic_reverse", "--hparams_set=transformer_tiny", "--data_dir=d", "--output_dir=a_file"],
            "--output_dir=a_file: is a file; give a directory",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--checkpoint_path=o/ckpt-5",
            ],
            r"--checkpoint_path: o/ckpt-5: not a checkpoint \(no o/ckpt-5.index\)",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--save_checkpoints_secs=-1",
            ],
            "--save_checkpoints_secs",
        ),
        (
            [
                "--problem=algorithmic_reverse",
                "--hparams_set=transformer_tiny",
                "--data_dir=d",
                "--output_dir=o",
                "--fit_train_steps_to_minutes",
                "--train_minutes=5",
            ],
            "--fit_train_steps_to_minutes.*learning_rate_decay_steps",
        ),
    ],
)
def test_bad_flags_stop_before_any_work_naming_the_flag(tmp_path, monkeypatch, argv, flag):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "a_file").write_text("not a directory")
    with pytest.raises(Exception, match=flag) as error:
        run_cli(argv)
    assert "UsageError" in type(error.value).__name__
    assert not os.path.exists(tmp_path / "o")  # nothing written


def test_schedule_flag_accepts_only_t2t_names():
    from absl import flags as absl_flags

    with pytest.raises(absl_flags.IllegalFlagValueError, match="schedule"):
        run_cli(["--schedule=continuous_train_and_eval"])


def test_one_step_end_to_end_under_tfds_mock_data(tmp_path):
    """translate_ende with a tiny vocabulary: datagen, one training step, evaluation, reload (no download)."""
    import tensorflow_datasets as tfds

    from t2t_lite.data import datagen
    from t2t_lite.problems.translate_wmt import TranslateEnde

    class TinyEnde(TranslateEnde):
        approx_vocab_size = 300
        num_shards = {"train": 1, "dev": 1, "test": 1}

    data_dir, output_dir = str(tmp_path / "data"), str(tmp_path / "train")
    with tfds.testing.mock_data(num_examples=24):
        datagen.generate(TinyEnde(), data_dir, str(tmp_path / "tmp"))
    hparams = registry.hparams("transformer_tiny").override(
        SMALL.replace("batch_size=128", "batch_size=512") + ",max_length=64"
    )
    metrics = trainer.train_and_evaluate(
        TinyEnde(), hparams, data_dir, output_dir, train_steps=1, eval_steps=1, log=lambda message: None
    )
    assert set(metrics) >= {"loss", "perplexity", "accuracy"} and np.isfinite(metrics["loss"])
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-1")
    info = model_info.read_problem_info(output_dir)
    assert info["vocab_size"] == TinyEnde().vocab_size(data_dir)
    model_info.restore_model(output_dir, model_info.read_hparams(output_dir), info["vocab_size"])


def test_a_run_in_a_directory_relative_to_the_cwd_resumes_its_own_checkpoints(reverse_data, tmp_path, monkeypatch):
    """`--output_dir=run`, as a user types it: the second invocation resumes at step 4 and sets nothing aside."""
    monkeypatch.chdir(tmp_path)
    train(reverse_data, "run", train_steps=4)
    lines = []
    train(reverse_data, "run", train_steps=6, log=lines.append)
    assert tf.train.latest_checkpoint("run").endswith("ckpt-6")
    assert lines[0] == f"Restored {os.path.join('run', 'ckpt-4')} (step 4).", lines[:2]
    assert not any("set_aside" in line or "Moved" in line for line in lines)
    assert not os.path.exists(os.path.join("run", checkpoints.SET_ASIDE))


def test_a_kill_inside_a_checkpoint_write_is_cleaned_by_the_next_start_in_one_line(
    reverse_data, reference_run, tmp_path, monkeypatch
):
    """A kill -9 while TensorFlow merges a checkpoint's files leaves `ckpt-10_temp/` and the list at ckpt-8: the
    same command again removes it, saying so, resumes from ckpt-8 and saves ckpt-10."""
    output_dir, killed = copy_of(reference_run, tmp_path / "run"), str(tmp_path / "killed")
    kill_points.kill_at(monkeypatch, gen_io_ops, "merge_v2_checkpoints", output_dir, killed)
    with pytest.raises(kill_points.Killed):
        train(reverse_data, output_dir, train_steps=10)
    monkeypatch.undo()
    assert os.path.isdir(os.path.join(killed, "ckpt-10_temp")) and tf.train.latest_checkpoint(killed).endswith("ckpt-8")
    messages = []
    train(reverse_data, killed, train_steps=10, log=messages.append)
    removed = f"Removed ckpt-10_temp from {killed}: left unfinished by an interrupted checkpoint save."
    assert removed in messages and f"Restored {os.path.join(killed, 'ckpt-8')} (step 8)." in messages
    assert tf.train.latest_checkpoint(killed) == os.path.join(killed, "ckpt-10")
    assert not glob.glob(os.path.join(killed, "*_temp"))


def test_a_full_disk_stops_a_save_naming_the_file_and_a_rerun_resumes_from_the_last_complete_checkpoint(
    reverse_data, reference_run, small_disk
):
    output_dir = copy_of(reference_run, small_disk / "run")
    checkpoint_size = sum(os.path.getsize(path) for path in glob.glob(os.path.join(output_dir, "ckpt-8.*")))
    filler = full_disk.fill(small_disk, leave=checkpoint_size // 2)
    with pytest.raises(Exception) as error:
        train(reverse_data, output_dir, train_steps=10)
    message = tool_process.disk_full_message(error.value)
    assert message is not None, error.value
    assert message.startswith(f"the disk holding {output_dir}") and f"could not write {output_dir}/" in message
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-8")
    assert not glob.glob(os.path.join(output_dir, "ckpt-10*")) and not glob.glob(os.path.join(output_dir, "*.tmp-*"))
    os.remove(filler)  # space freed
    messages = []
    train(reverse_data, output_dir, train_steps=10, log=messages.append)
    assert f"Restored {os.path.join(output_dir, 'ckpt-8')} (step 8)." in messages
    assert tf.train.latest_checkpoint(output_dir) == os.path.join(output_dir, "ckpt-10")
