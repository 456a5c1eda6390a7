"""Checkpoints: what they hold, the model information beside them, and damaged ones named and skipped."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_lite import registry
from t2t_lite.run_dir import checkpoints, model_info


def small_model():
    model = keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(3)])
    model.build((None, 5))
    return model


def write_checkpoints(model_dir, steps, keep):
    """Checkpoints of a model and its Adam state at different weights, as training would leave them."""
    model = small_model()
    optimizer = keras.optimizers.Adam(0.1)
    checkpoint = checkpoints.training_checkpoint(model, optimizer)
    manager = checkpoints.checkpoint_manager(checkpoint, model_dir, keep)
    for step in steps:
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(tf.ones([2, 5])) ** 2)
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        manager.save(checkpoint_number=step)
    model_info.write_model_info(
        model_dir, registry.hparams("transformer_tiny"), "algorithmic_reverse", "transformer", 12
    )
    return model


def test_a_checkpoint_names_the_problem_model_and_vocabulary_it_was_trained_with(tmp_path):
    model_dir = str(tmp_path)
    model_info.write_model_info(
        model_dir,
        registry.hparams("transformer_tiny"),
        "translate_files",
        "transformer",
        8000,
        vocabulary="sentencepiece-sha256:aa",
    )
    model_info.check_trained_with(model_dir, "translate_files", "transformer", 8000, "sentencepiece-sha256:aa")
    model_info.check_trained_with(model_dir, None, "transformer", 8000)  # what is not given is not checked
    for given, message in [
        (
            ("translate_ende", "transformer", 8000, None),
            "problem 'translate_files', not 'translate_ende'; give the --problem",
        ),
        (("translate_files", "other", 8000, None), "model 'transformer', not 'other'; give the --model"),
        (("translate_files", "transformer", 8001, None), "vocab_size 8000, not 8001"),
        (
            ("translate_files", "transformer", 8000, "sentencepiece-sha256:bb"),
            "vocabulary 'sentencepiece-sha256:aa', not 'sentencepiece-sha256:bb'; give the --data_dir",
        ),
    ]:
        with pytest.raises(checkpoints.CheckpointError, match=message):
            model_info.check_trained_with(model_dir, *given)


# -- Damaged checkpoints -------------------------------------------------------------------
def cut_short(prefix):
    """A disk that filled up while the .data file was written: its second half is gone."""
    data = prefix + ".data-00000-of-00001"
    os.truncate(data, os.path.getsize(data) // 2)
    return data


def cut_index(prefix):
    os.truncate(prefix + ".index", os.path.getsize(prefix + ".index") - 1)
    return prefix + ".index"


def remove_index(prefix):
    os.remove(prefix + ".index")
    return prefix + ".index"


def transformer_checkpoints(model_dir, steps):
    """Checkpoints of a tiny Transformer at different weights, as the trainer leaves them."""
    hparams = registry.hparams("transformer_tiny").override(
        "hidden_size=16,filter_size=32,num_heads=2,num_hidden_layers=1"
    )
    manager = None
    for step in steps:
        keras.utils.set_random_seed(step)
        model = model_info.build_model(hparams, vocab_size=12)
        checkpoint = checkpoints.training_checkpoint(model, keras.optimizers.Adam())
        manager = checkpoints.checkpoint_manager(checkpoint, model_dir, 5)
        manager.save(step)
    model_info.write_model_info(model_dir, hparams, "algorithmic_reverse", "transformer", 12)
    return hparams


@pytest.mark.parametrize(
    "damage, named",
    [
        (cut_short, r"ckpt-3\.data-00000-of-00001 cannot be read"),
        (remove_index, r"ckpt-3\.index is missing"),
        (cut_index, r"ckpt-3\.index is cut short"),
    ],
)
def test_loading_a_damaged_checkpoint_names_the_file_and_how_to_pick_another(tmp_path, damage, named):
    model_dir = str(tmp_path)
    hparams = transformer_checkpoints(model_dir, [1, 2, 3])
    damage(os.path.join(model_dir, "ckpt-3"))
    with pytest.raises(checkpoints.CheckpointError, match=named) as error:
        model_info.restore_model(model_dir, hparams, 12)
    assert f"--checkpoint_path={os.path.join(model_dir, 'ckpt-2')}" in str(error.value)
    assert "\n" not in str(error.value)
    model_info.restore_model(os.path.join(model_dir, "ckpt-2"), hparams, 12)  # the way out it names works


def snapshot(directory):
    """Every file under `directory` (relative name -> bytes)."""
    return {
        os.path.relpath(os.path.join(root, name), directory): open(os.path.join(root, name), "rb").read()
        for root, _, names in os.walk(directory)
        for name in names
    }


@pytest.mark.parametrize("damage", [cut_short, remove_index, cut_index])
def test_training_resumes_from_the_newest_checkpoint_that_reads_keeping_the_damaged_one(tmp_path, damage):
    model_dir = str(tmp_path / "train")
    write_checkpoints(model_dir, steps=[1, 2, 3], keep=5)
    damaged_file = damage(os.path.join(model_dir, "ckpt-3"))
    before = snapshot(model_dir)
    messages = []
    fresh = small_model()
    checkpoint = checkpoints.training_checkpoint(fresh, keras.optimizers.Adam(0.1))
    restored = checkpoints.restore_for_training(checkpoint, model_dir, log=messages.append)

    assert restored == os.path.join(model_dir, "ckpt-2")
    np.testing.assert_array_equal(fresh.get_weights()[0], restored_kernel(restored))
    assert messages[0].startswith(f"WARNING: {damaged_file}") and "skipped ckpt-3" in messages[0]
    assert "Moved ckpt-3 to" in messages[1] and "set_aside" in messages[1]
    # Nothing deleted: what is left of ckpt-3 is in set_aside/, byte for byte; the rest is untouched.
    after = snapshot(model_dir)
    assert {os.path.basename(n): c for n, c in after.items() if n.startswith("set_aside")} == {
        n: c for n, c in before.items() if n.startswith("ckpt-3.")
    }
    assert {n: c for n, c in after.items() if n.startswith(("ckpt-1.", "ckpt-2."))} == {
        n: c for n, c in before.items() if n.startswith(("ckpt-1.", "ckpt-2."))
    }
    assert tf.train.latest_checkpoint(model_dir) == restored  # the list no longer names ckpt-3


def restored_kernel(prefix):
    """The first Dense kernel saved in a checkpoint of `small_model`, read without TensorFlow objects."""
    reader = tf.train.load_checkpoint(prefix)
    return reader.get_tensor("model/weights_in_order/0/.ATTRIBUTES/VARIABLE_VALUE")


def test_training_resumes_from_a_named_checkpoint_setting_the_later_ones_aside(tmp_path):
    model_dir = str(tmp_path / "train")
    write_checkpoints(model_dir, steps=[1, 2, 3], keep=5)
    later = {n: c for n, c in snapshot(model_dir).items() if n.startswith(("ckpt-2.", "ckpt-3."))}
    checkpoint = checkpoints.training_checkpoint(small_model(), keras.optimizers.Adam(0.1))
    messages = []
    named = os.path.join(model_dir, "ckpt-1")
    assert checkpoints.restore_for_training(checkpoint, model_dir, named, log=messages.append) == named
    assert "Moved ckpt-2, ckpt-3 to" in messages[0] and "they come after --checkpoint_path" in messages[0]
    kept = {os.path.basename(n): c for n, c in snapshot(model_dir).items() if n.startswith("set_aside")}
    assert kept == later  # byte for byte, in set_aside/
    assert tf.train.latest_checkpoint(model_dir) == named

    other = str(tmp_path / "other")
    write_checkpoints(other, steps=[5], keep=5)
    with pytest.raises(checkpoints.CheckpointError, match="not a checkpoint of --output_dir"):
        checkpoints.restore_for_training(checkpoint, model_dir, os.path.join(other, "ckpt-5"))
