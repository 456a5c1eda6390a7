"""Early stopping (--eval_early_stopping_*): the rule, its one line, and exact stops after a kill and resume."""

import glob
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from test_trainer import logged_scalars, train

from t2t_lite.run_dir import checkpoints
from t2t_lite.train import early_stopping
from t2t_lite.train.early_stopping import EarlyStopping

# Evaluations at steps 2, 4, 6, …; with a delta no later value can beat, the best is the first
# evaluation's (step 2), and a patience of 4 steps stops the run at step 6 of its 20.
EVAL_EVERY, PATIENCE, STOP_AT = 2, 4, 6
JUDGED = dict(
    schedule="train_and_evaluate",
    train_steps=20,
    local_eval_frequency=EVAL_EVERY,
    eval_steps=1,
    early_stopping=EarlyStopping("loss", steps=PATIENCE, delta=100.0),
)


@pytest.fixture(scope="session")
def early_stopped_run(built_once, reverse_data):
    """A run that stops early at step 6 (see JUDGED), its log lines in log.txt; tests only read it."""

    def build(path):
        lines = []
        train(reverse_data, str(path / "run"), log=lines.append, **JUDGED)
        (path / "log.txt").write_text("\n".join(lines))

    path = built_once("early_stopped_run", build)
    return str(path / "run"), (path / "log.txt").read_text().splitlines()


@pytest.mark.parametrize(
    "rule, value, best, improves",
    [
        (EarlyStopping("loss"), 1.9, 2.0, True),  # v < b − δ, δ = 0
        (EarlyStopping("loss"), 2.0, 2.0, False),  # equal is no improvement
        (EarlyStopping("loss", delta=0.2), 1.9, 2.0, False),  # not by more than δ
        (EarlyStopping("loss", delta=0.2), 1.7, 2.0, True),
        (EarlyStopping("accuracy", delta=0.01), 0.52, 0.5, True),  # v > b + δ: maximized by default
        (EarlyStopping("bleu"), 20.0, 21.0, False),
        (EarlyStopping("neg_log_perplexity"), -1.0, -2.0, True),
        (EarlyStopping("accuracy", minimize=True), 0.4, 0.5, True),  # --..._minimize overrides the default
        (EarlyStopping("loss"), math.nan, 2.0, False),  # a NaN never improves
        (EarlyStopping("loss"), 5.0, math.nan, True),  # the first evaluation always does
    ],
)
def test_a_value_improves_when_it_beats_the_best_by_more_than_delta(rule, value, best, improves):
    assert rule.improves(value, best) is improves


def test_each_metric_has_its_own_direction_and_bad_settings_are_refused():
    assert [EarlyStopping(m).lower_is_better for m in ("loss", "perplexity", "accuracy", "bleu")] == [
        True,
        True,
        False,
        False,
    ]
    with pytest.raises(ValueError, match="--eval_early_stopping_metric=blue: use one of .*bleu"):
        EarlyStopping("blue")
    with pytest.raises(ValueError, match="both must be zero or positive"):
        EarlyStopping("loss", delta=-0.1)


def test_the_best_so_far_stops_a_run_patience_steps_after_its_best():
    best, rule = early_stopping.BestSoFar(), EarlyStopping("loss", steps=4)
    assert best.update(rule, 2, 3.0) and best.update(rule, 4, 2.5)
    assert not best.update(rule, 6, 2.6) and not best.stops(rule, 6)  # 2 steps since the best at 4
    assert not best.update(rule, 8, 2.5) and best.stops(rule, 8)
    assert best.best == (2.5, 4) and best.stopped_before(rule, 8) and not best.stopped_before(rule, 10)
    assert not best.stops(EarlyStopping("loss", steps=0), 1000)  # 0: never stop early


def test_a_run_stops_early_with_one_line_naming_metric_best_value_and_step(early_stopped_run):
    run, lines = early_stopped_run
    assert tf.train.latest_checkpoint(run).endswith(f"ckpt-{STOP_AT}")
    stop = [line for line in lines if line.startswith("Early stopping")]
    evaluated = logged_scalars(os.path.join(run, "eval"), "loss")
    assert sorted(evaluated) == [2, 4, 6]
    assert stop == [
        f"Early stopping at step {STOP_AT}: loss has not improved by more than 100 in 4 steps "
        f"(--eval_early_stopping_steps={PATIENCE}); best loss {evaluated[2]:.4f} at step 2. "
        f"Saved {os.path.join(run, f'ckpt-{STOP_AT}')}."
    ]


def killed_after_the_save_of(run, step, destination):
    """What SIGKILL just after the save of ckpt-`step` leaves of `run`'s run: its files up to that save.

    A copy of the finished run, cut back: the later checkpoints' files removed, the `checkpoint` list
    ending at ckpt-`step`, and no scalars (the resumed run's are then the only ones logged). The run up to
    a save is the same whether it is killed after it or not (one seed, the same command), so this is the
    directory a killed run leaves, without training its first `step` updates a second time."""
    shutil.copytree(run, destination)
    kept = [f"ckpt-{s}" for s in map(checkpoints.checkpoint_step, checkpoints.all_checkpoints(run)) if s <= step]
    for path in glob.glob(os.path.join(destination, "ckpt-*")):
        if checkpoints.checkpoint_step(os.path.basename(path).split(".")[0]) > step:
            os.remove(path)
    checkpoints.write_checkpoint_list(str(destination), kept)
    for events in glob.glob(os.path.join(destination, "**", "events.out.tfevents.*"), recursive=True):
        os.remove(events)
    return str(destination)


def test_a_run_killed_and_resumed_stops_at_the_step_of_the_uninterrupted_run(reverse_data, early_stopped_run, tmp_path):
    """Killed after ckpt-4 (best at 2, not yet stopped) and resumed: it stops at step 6 as the uninterrupted run.
    Were the best step not in the checkpoint, the resumed run would count from its first evaluation (6) and
    stop at 10."""
    uninterrupted, _ = early_stopped_run
    output_dir = killed_after_the_save_of(uninterrupted, 4, tmp_path / "run")
    lines = []
    train(reverse_data, output_dir, log=lines.append, **JUDGED)
    assert f"Restored {os.path.join(output_dir, 'ckpt-4')} (step 4)." in lines
    assert tf.train.latest_checkpoint(output_dir).endswith(f"ckpt-{STOP_AT}")
    assert any(line.startswith(f"Early stopping at step {STOP_AT}:") and "at step 2." in line for line in lines)
    resumed, expected = logged_scalars(output_dir), logged_scalars(uninterrupted)
    assert sorted(resumed) == list(range(5, STOP_AT + 1)) and sorted(expected) == list(range(1, STOP_AT + 1))
    np.testing.assert_allclose([resumed[s] for s in resumed], [expected[s] for s in resumed], rtol=1e-5)


def test_a_rerun_of_a_run_that_stopped_early_trains_no_further(reverse_data, early_stopped_run, tmp_path):
    output_dir = str(tmp_path / "run")
    shutil.copytree(early_stopped_run[0], output_dir)
    lines = []
    assert train(reverse_data, output_dir, log=lines.append, **JUDGED) == {}
    assert any(line.startswith(f"Early stopping at step {STOP_AT}") and "Nothing to train" in line for line in lines)
    assert tf.train.latest_checkpoint(output_dir).endswith(f"ckpt-{STOP_AT}")
    assert sorted(logged_scalars(os.path.join(output_dir, "eval"), "loss")) == [2, 4, 6]  # not evaluated again


def test_a_rerun_judged_by_another_metric_starts_its_best_there():
    best = early_stopping.BestSoFar()
    assert best.update(EarlyStopping("accuracy", steps=4), 2, 0.9)
    assert best.update(EarlyStopping("loss", steps=4), 4, 2.5)  # 2.5 would not beat an accuracy of 0.9
    assert best.best == (2.5, 4) and not best.stopped_before(EarlyStopping("accuracy", steps=1), 4)
