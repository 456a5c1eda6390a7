"""The best checkpoint (<output_dir>/best/): kept by the chosen metric, read by every tool, replaced atomically."""

import json
import os
import shutil

import kill_points
import numpy as np
import pytest
import tensorflow as tf
import test_early_stopping
import test_trainer
from tensorflow.python.ops import gen_io_ops
from test_trainer import logged_scalars, train

from t2t_lite import registry
from t2t_lite.decode import model_loading
from t2t_lite.run_dir import averaging, checkpoints, model_info, partial_writes
from t2t_lite.train import best_checkpoint
from t2t_lite.train.early_stopping import EarlyStopping

reference_run = test_trainer.reference_run  # the shared 8-step run, a fixture
early_stopped_run = test_early_stopping.early_stopped_run  # the run that stops at step 6, a fixture


def test_the_best_evaluation_is_kept_and_keep_checkpoint_max_never_removes_it(reverse_data, tmp_path):
    """By accuracy (maximized), evaluated every 2 of 8 steps, only the newest ckpt kept: best/ holds the step
    whose logged accuracy is highest (the first of equals), its value in best.json, beside the run's records."""
    output_dir, lines = str(tmp_path / "run"), []
    train(
        reverse_data,
        output_dir,
        schedule="train_and_evaluate",
        local_eval_frequency=2,
        eval_steps=1,
        keep_checkpoint_max=1,
        early_stopping=EarlyStopping("accuracy"),
        log=lines.append,
    )
    accuracy = logged_scalars(os.path.join(output_dir, "eval"), "accuracy")
    assert sorted(accuracy) == [2, 4, 6, 8]
    best_step = max(sorted(accuracy), key=lambda step: (accuracy[step], -step))
    record = best_checkpoint.read(output_dir)
    assert record["metric"] == "accuracy" and record["step"] == best_step
    assert record["value"] == pytest.approx(accuracy[best_step], rel=1e-6)
    best = best_checkpoint.best_dir(output_dir)
    assert checkpoints.checkpoint_path(best) == os.path.join(best, f"ckpt-{best_step}")
    assert [os.path.basename(p) for p in checkpoints.listed_checkpoints(output_dir)] == ["ckpt-8"]
    assert sorted(os.listdir(best)) == sorted(
        ["best.json", "checkpoint", "hparams.json", "problem.json", f"ckpt-{best_step}.index"]
        + [f"ckpt-{best_step}.data-00000-of-00001"]
    )
    for name in ("hparams.json", "problem.json"):
        assert open(os.path.join(best, name)).read() == open(os.path.join(output_dir, name)).read()


def test_the_decoder_exporter_and_averager_read_best_as_a_checkpoint_directory(
    reverse_data, early_stopped_run, tmp_path
):
    """The best weights are those of the run's checkpoint at that step (early_stopped_run: step 2)."""
    run, _ = early_stopped_run
    best = best_checkpoint.best_dir(run)
    hparams = model_info.read_hparams(best)
    problem = registry.problem(model_info.read_problem_info(best)["problem"])
    model = model_loading.load_model_for_decoding(problem, hparams, reverse_data, best)
    reference = model_info.restore_model(os.path.join(run, "ckpt-2"), hparams, model.vocab_size)
    for kept, trained in zip(model.variables, reference.variables):
        np.testing.assert_array_equal(kept.numpy(), trained.numpy())
    averaged = averaging.average_checkpoints(best, str(tmp_path / "avg"), n=1)
    assert os.path.basename(averaged) == "ckpt-2"
    reader, kept = tf.train.load_checkpoint(averaged), tf.train.load_checkpoint(os.path.join(best, "ckpt-2"))
    for key in reader.get_variable_to_shape_map():
        if key.startswith("model/"):
            np.testing.assert_array_equal(reader.get_tensor(key), kept.get_tensor(key))


@pytest.fixture
def run_with_a_best(reference_run, tmp_path):
    """A copy of the reference run whose best/ holds ckpt-2's weights, and the model to keep others from."""
    run = str(tmp_path / "run")
    shutil.copytree(reference_run, run)
    hparams = model_info.read_hparams(run)
    model = model_info.restore_model(
        os.path.join(run, "ckpt-2"), hparams, model_info.read_problem_info(run)["vocab_size"]
    )
    best_checkpoint.keep(model, run, "loss", 2.5, 2)
    checkpoints.restore_weights(model, os.path.join(run, "ckpt-4"))
    return run, model


def loads(prefix, model):
    checkpoints.restore_weights(model, prefix)
    return True


@pytest.mark.parametrize("killed_in", ["checkpoint_files", "before_the_list"])
def test_a_kill_while_best_is_replaced_leaves_the_previous_best(run_with_a_best, monkeypatch, killed_in):
    """Killed while writing the new files, or after best.json but before the `checkpoint` list: tools still read
    the previous best, whole; the next start completes what best.json had decided."""
    run, model = run_with_a_best
    best = best_checkpoint.best_dir(run)

    class Killed(Exception):
        pass

    def die(*args, **kwargs):
        raise Killed

    if killed_in == "checkpoint_files":
        monkeypatch.setattr(model_info, "atomic_write", die)  # the ckpt-4 files are written, best.json not
    else:
        monkeypatch.setattr(checkpoints, "write_checkpoint_list", die)
    with pytest.raises(Killed):
        best_checkpoint.keep(model, run, "loss", 2.0, 4)
    monkeypatch.undo()
    assert tf.train.latest_checkpoint(best) == os.path.join(best, "ckpt-2") and loads(
        os.path.join(best, "ckpt-2"), model
    )
    assert os.path.exists(os.path.join(best, "ckpt-4.index"))
    expected = {"checkpoint_files": ("ckpt-2", 2.5), "before_the_list": ("ckpt-4", 2.0)}[killed_in]
    best_checkpoint.complete(run)  # what the trainer does when it starts
    assert tf.train.latest_checkpoint(best) == os.path.join(best, expected[0])
    assert (best_checkpoint.read(run)["checkpoint"], best_checkpoint.read(run)["value"]) == expected
    assert sorted(n for n in os.listdir(best) if n.startswith("ckpt-")) == [
        f"{expected[0]}.data-00000-of-00001",
        f"{expected[0]}.index",
    ]
    assert loads(os.path.join(best, expected[0]), model)


def test_a_new_best_replaces_the_old_one_and_its_record(run_with_a_best):
    run, model = run_with_a_best
    prefix = best_checkpoint.keep(model, run, "loss", 2.0, 4)
    assert prefix == os.path.join(best_checkpoint.best_dir(run), "ckpt-4")
    assert json.load(open(os.path.join(best_checkpoint.best_dir(run), "best.json"))) == {
        "metric": "loss",
        "value": 2.0,
        "step": 4,
        "checkpoint": "ckpt-4",
    }
    assert tf.train.latest_checkpoint(best_checkpoint.best_dir(run)) == prefix
    assert not os.path.exists(os.path.join(best_checkpoint.best_dir(run), "ckpt-2.index"))


def test_a_damaged_best_json_is_said_and_rewritten_with_the_next_best(run_with_a_best):
    """best.json cut short or edited strands nothing: the trainer's start says so, best/ keeps what its
    `checkpoint` list names, and the next best writes both afresh."""
    run, model = run_with_a_best
    best = best_checkpoint.best_dir(run)
    with open(os.path.join(best, "best.json"), "w") as file:
        file.write('{"metric": "lo')
    lines = []
    best_checkpoint.complete(run, lines.append)
    assert lines == [
        f"WARNING: {best}/best.json cannot be read (Unterminated string starting at: line 1 column 12 (char 11)); "
        f"best/ keeps the checkpoint its `checkpoint` file lists, and the next best evaluation rewrites best.json."
    ]
    assert tf.train.latest_checkpoint(best) == os.path.join(best, "ckpt-2")
    best_checkpoint.keep(model, run, "loss", 2.0, 4)
    assert best_checkpoint.read(run)["checkpoint"] == "ckpt-4"


@pytest.mark.parametrize(
    "killed_while, target, after_calls, left, kept",
    [
        ("merging the new files", (gen_io_ops, "merge_v2_checkpoints"), 0, ["ckpt-4_temp"], "ckpt-2"),
        (
            "writing best.json",
            (model_info, "atomic_write"),
            0,
            ["ckpt-4.data-00000-of-00001", "ckpt-4.index"],
            "ckpt-2",
        ),
        ("writing the list", (checkpoints, "write_checkpoint_list"), 0, [], "ckpt-4"),
        ("removing the previous", (partial_writes, "_delete"), 1, "ckpt-2's file not yet removed", "ckpt-4"),
    ],
)
def test_a_kill_at_any_point_of_replacing_best_is_healed_by_the_next_start(
    run_with_a_best, monkeypatch, tmp_path, killed_while, target, after_calls, left, kept
):
    """Whatever moment a kill -9 strikes a new best, the tools read a whole best (the previous one or the new),
    the trainer's next start removes what the kill left unfinished in one line, and the next best is kept."""
    run, model = run_with_a_best
    killed = str(tmp_path / "killed")
    kill_points.kill_at(monkeypatch, *target, run, killed, after_calls)
    with pytest.raises(kill_points.Killed):
        best_checkpoint.keep(model, run, "loss", 2.0, 4)
    monkeypatch.undo()
    best = best_checkpoint.best_dir(killed)
    if isinstance(left, str):
        left = [name for name in os.listdir(best) if name.startswith("ckpt-2.")]
        assert len(left) == 1  # of its two files, one was removed when the kill struck
    lines = []
    best_checkpoint.complete(killed, lines.append)  # the trainer's next start
    removed = f"Removed {', '.join(left)} from {best}: left unfinished by an interrupted write of the best checkpoint."
    assert lines == ([removed] if left else [])
    assert tf.train.latest_checkpoint(best) == os.path.join(best, kept) and loads(os.path.join(best, kept), model)
    assert sorted(n for n in os.listdir(best) if n.startswith("ckpt-")) == [
        f"{kept}.data-00000-of-00001",
        f"{kept}.index",
    ]
    best_checkpoint.keep(model, killed, "loss", 1.5, 6)
    assert sorted(n for n in os.listdir(best) if n.startswith("ckpt-")) == [
        "ckpt-6.data-00000-of-00001",
        "ckpt-6.index",
    ]
    assert best_checkpoint.read(killed)["checkpoint"] == "ckpt-6"
