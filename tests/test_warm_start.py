"""Warm start (t2t-trainer --warm_start_from): a new run from another run's weights, the source never written."""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import test_trainer
from test_trainer import SMALL, logged_scalars, run_cli, train

from t2t_lite.cli import flags
from t2t_lite.run_dir import checkpoints, model_info
from t2t_lite.train import warm_start

reference_run = test_trainer.reference_run  # the shared 8-step run, a fixture


def file_hashes(directory):
    hashes = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                hashes[os.path.relpath(path, directory)] = hashlib.sha256(file.read()).hexdigest()
    return hashes


def model_weights(prefix):
    """The model's weights in a checkpoint, by key, read with TensorFlow's own reader (the dropout layers'
    int64 seed-generator states are not weights: a warm-started run draws its own)."""
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    return {
        key: reader.get_tensor(key)
        for key in reader.get_variable_to_shape_map()
        if key.startswith("model/") and dtypes[key].is_floating
    }


def test_a_warm_start_takes_the_weights_and_starts_optimizer_step_and_schedule_afresh(
    reverse_data, reference_run, tmp_path
):
    """From a run directory (its latest, ckpt-8): ckpt-0 of the new run holds exactly ckpt-8's model weights,
    step 0 and zero Adam moments; the first update uses eq. 3 at step 1; the source is never written; the
    changed dropout is recorded; the same command again resumes the new run, not the source (which
    checkpoint a run restores is decided before its first update, so the rerun ends where it starts,
    without tracing an update again; that a resumed run trains on exactly: test_trainer.py)."""
    before = file_hashes(reference_run)
    output_dir, lines = str(tmp_path / "fine_tuned"), []
    overrides = SMALL + ",layer_prepostprocess_dropout=0.3"
    train(reverse_data, output_dir, overrides, train_steps=2, warm_start_from=reference_run, log=lines.append)

    source = os.path.join(reference_run, "ckpt-8")
    assert f"Warm start from {source} (step 8)" in "\n".join(lines)
    start, weights = tf.train.load_checkpoint(os.path.join(output_dir, "ckpt-0")), model_weights(source)
    assert start.get_tensor("optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE") == 0
    built = model_info.build_model(
        model_info.read_hparams(output_dir), model_info.read_problem_info(output_dir)["vocab_size"]
    )
    assert len(weights) == len(built.trainable_variables)
    for key, value in weights.items():
        np.testing.assert_array_equal(start.get_tensor(key), value, err_msg=key)
    moments = [key for key in start.get_variable_to_shape_map() if key.startswith("optimizer/_variables/")]
    assert moments and all(not np.any(start.get_tensor(key)) for key in moments)
    # eq. 3 from its start: the source's 8 steps do not count (SMALL: d_model 32, warm-up 10).
    eq3 = {step: 32**-0.5 * min(step**-0.5, step * 10**-1.5) for step in (1, 2)}
    assert logged_scalars(output_dir, "learning_rate") == pytest.approx(eq3, rel=1e-6)
    record = json.load(open(os.path.join(output_dir, warm_start.RECORD_FILE)))
    assert record == {
        "warm_start_from": source,
        "source_step": 8,
        "hparams_changed": {"layer_prepostprocess_dropout": [0.1, 0.3]},
    }
    assert json.load(open(os.path.join(output_dir, "hparams.json")))["layer_prepostprocess_dropout"] == 0.3

    lines.clear()  # the same command again: its own ckpt-2, not the source's ckpt-8
    train(reverse_data, output_dir, overrides, train_steps=2, warm_start_from=reference_run, log=lines.append)
    assert f"Restored {os.path.join(output_dir, 'ckpt-2')} (step 2)." in lines
    assert not any(line.startswith("Warm start") for line in lines)
    assert tf.train.latest_checkpoint(output_dir).endswith("ckpt-2")
    assert json.load(open(os.path.join(output_dir, warm_start.RECORD_FILE)))["source_step"] == 8
    assert file_hashes(reference_run) == before


@pytest.mark.parametrize(
    "change, message",
    [
        ("hidden_size=64", r"built another model \(hidden_size 32 → 64\)"),
        ("norm_position=pre", r"norm_position 'post' → 'pre'"),
        # Relative positions instead of absolute ones: other weights (Shaw et al.'s tables), another model.
        ("self_attention_type=dot_product_relative", r"self_attention_type 'dot_product' → 'dot_product_relative'"),
        ("vocabulary", r"problem.json: the checkpoint was trained with vocabulary 'symbols:other'"),
    ],
)
def test_a_warm_start_from_another_model_or_vocabulary_stops_before_any_work(
    reverse_data, reference_run, tmp_path, change, message
):
    source = str(tmp_path / "source")
    shutil.copytree(reference_run, source)
    overrides = SMALL
    if change == "vocabulary":  # a run whose vocabulary has the same size but other pieces
        info_path = os.path.join(source, "problem.json")
        info = dict(json.load(open(info_path)), vocabulary="symbols:other")
        json.dump(info, open(info_path, "w"))
    elif change.startswith("hidden_size"):
        overrides = SMALL.replace("hidden_size=32", change)
    else:
        overrides = f"{SMALL},{change}"
    output_dir = str(tmp_path / "new")
    with pytest.raises(warm_start.WarmStartError, match=message):
        train(reverse_data, output_dir, overrides, train_steps=2, warm_start_from=source)
    assert not os.path.exists(output_dir) or not [n for n in os.listdir(output_dir) if not n.startswith(".")]


def test_a_warm_start_of_a_relative_model_takes_its_relative_position_tables(reverse_data, tmp_path):
    """Shaw et al.'s tables are weights like the others: the new run starts from the source's, and may
    change a training hparam; another clipping distance k would be another model."""
    relative = SMALL + ",self_attention_type=dot_product_relative,max_relative_position=3,pos=none"
    source = str(tmp_path / "source")
    train(reverse_data, source, relative, train_steps=2)
    output_dir = str(tmp_path / "fine_tuned")
    train(reverse_data, output_dir, relative + ",label_smoothing=0.2", train_steps=1, warm_start_from=source)
    # Checkpoint keys are list positions: the tables are the weights of shape [2k + 1, d_model / h] = [7, 16].
    weights = model_weights(os.path.join(source, "ckpt-2"))
    tables = {key: value for key, value in weights.items() if value.shape == (7, 16)}
    assert len(tables) == 4  # keys and values of one encoder and one decoder self-attention layer
    start = tf.train.load_checkpoint(os.path.join(output_dir, "ckpt-0"))
    for key, value in tables.items():
        np.testing.assert_array_equal(start.get_tensor(key), value, err_msg=key)
    with pytest.raises(warm_start.WarmStartError, match=r"max_relative_position 3 → 4"):
        train(
            reverse_data,
            str(tmp_path / "other_k"),
            relative.replace("max_relative_position=3", "max_relative_position=4"),
            train_steps=1,
            warm_start_from=source,
        )


def test_a_warm_start_into_its_source_or_into_another_run_stops(reverse_data, reference_run, tmp_path):
    source = str(tmp_path / "source")
    shutil.copytree(reference_run, source)
    with pytest.raises(warm_start.WarmStartError, match="is in --output_dir=.*never the source"):
        train(reverse_data, source, train_steps=10, warm_start_from=source)
    started = str(tmp_path / "started")
    shutil.copytree(reference_run, started)
    with open(os.path.join(started, warm_start.RECORD_FILE), "w") as file:
        file.write("{cut sh")
    with pytest.raises(
        warm_start.WarmStartError, match="warm_start.json cannot be read .*Rerun without --warm_start_from"
    ):
        train(reverse_data, started, train_steps=10, warm_start_from=source)
    other = str(tmp_path / "other")
    shutil.copytree(reference_run, other)  # a run of its own, not started from `source`
    with pytest.raises(warm_start.WarmStartError, match="already holds a run that did not start from a warm start"):
        train(reverse_data, other, train_steps=10, warm_start_from=source)
    assert tf.train.latest_checkpoint(other).endswith("ckpt-8")


@pytest.mark.parametrize("damage", ["missing", "cut_short", "index_cut", "index_missing", "no_checkpoint"])
def test_a_warm_start_from_a_missing_or_damaged_checkpoint_is_one_line_naming_it(
    reverse_data, reference_run, tmp_path, damage
):
    source = str(tmp_path / "source")
    shutil.copytree(reference_run, source)
    data = os.path.join(source, "ckpt-8.data-00000-of-00001")
    index = os.path.join(source, "ckpt-8.index")
    name = {"missing": os.path.join(source, "ckpt-9"), "no_checkpoint": str(tmp_path)}.get(damage, source)
    if damage == "cut_short":
        os.truncate(data, os.path.getsize(data) // 2)
    elif damage == "index_cut":
        os.truncate(index, os.path.getsize(index) // 2)
    elif damage == "index_missing":
        os.remove(index)
    argv = [
        "--problem=algorithmic_reverse",
        "--hparams_set=transformer_tiny",
        f"--hparams={SMALL}",
        f"--data_dir={reverse_data}",
        f"--output_dir={tmp_path / 'new'}",
        "--train_steps=2",
        f"--warm_start_from={name}",
    ]
    expected = {
        "missing": f"--warm_start_from: {name}: not a checkpoint",
        "cut_short": f"--warm_start_from: {data} cannot be read",
        "index_cut": f"--warm_start_from: {index} is cut short",
        "index_missing": f"--warm_start_from: {index} is missing",
        "no_checkpoint": f"--warm_start_from: {name}: no checkpoint found",
    }[damage]
    with pytest.raises(flags.UsageError) as raised:
        run_cli(argv)
    assert str(raised.value).startswith(expected) and "\n" not in str(raised.value)
    assert "--checkpoint_path" not in str(raised.value)  # the way out is another --warm_start_from
    assert not tf.train.latest_checkpoint(str(tmp_path / "new"))


def test_the_source_checkpoint_is_named_by_a_prefix_or_a_directory(reference_run):
    assert warm_start.source_checkpoint(reference_run) == os.path.join(reference_run, "ckpt-8")
    prefix = os.path.join(reference_run, "ckpt-4")
    assert warm_start.source_checkpoint(prefix) == prefix
    assert checkpoints.checkpoint_step(warm_start.source_checkpoint(prefix)) == 4
