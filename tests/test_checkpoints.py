"""Checkpoint averaging (§6.1) against the numpy mean of the checkpoints' variables."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags

from t2t_lite import checkpoints, registry
from t2t_lite.cli import avg_all


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
    checkpoints.write_model_info(model_dir, registry.hparams("transformer_tiny"), "algorithmic_reverse", "transformer", 12)
    return model


def test_untrained_step_0_is_left_out_of_the_average(tmp_path, capsys):
    """ckpt-0 (the initial random weights the trainer saves) joins an average only if it is all there is."""
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[0, 10, 20], keep=5)
    prefix = checkpoints.average_checkpoints(model_dir, output_dir, n=5)
    assert "ckpt-0, the untrained initial weights, left out" in capsys.readouterr().out
    averaged = tf.train.load_checkpoint(prefix)
    readers = [tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (10, 20)]
    for key in weight_keys(prefix):
        np.testing.assert_allclose(averaged.get_tensor(key), np.mean([r.get_tensor(key) for r in readers], axis=0),
                                   rtol=1e-6)
    assert [os.path.basename(p) for p in checkpoints.last_checkpoints(model_dir, 2)] == ["ckpt-10", "ckpt-20"]

    only_initial = str(tmp_path / "fresh")
    write_checkpoints(only_initial, steps=[0], keep=5)
    assert [os.path.basename(p) for p in checkpoints.last_checkpoints(only_initial, 5)] == ["ckpt-0"]


def restored_weights(path):
    model = small_model()
    tf.train.Checkpoint(model=checkpoints.trackable_model(model)).restore(path).expect_partial().assert_existing_objects_matched()
    return model.get_weights()


def weight_keys(path):
    """Keys of the model's weights, as read by tf.train.load_checkpoint (no TensorFlow objects)."""
    return [name for name, _ in tf.train.list_variables(path) if name.startswith("model/")]


def test_average_equals_numpy_mean_of_last_n(tmp_path):
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[10, 20, 30, 40, 50, 60], keep=5)
    assert os.path.basename(tf.train.latest_checkpoint(model_dir)) == "ckpt-60"

    prefix = checkpoints.average_checkpoints(model_dir, output_dir, n=3)

    assert tf.train.latest_checkpoint(output_dir) == prefix and prefix.endswith("ckpt-60")
    averaged = tf.train.load_checkpoint(prefix)
    readers = [tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (40, 50, 60)]
    keys = weight_keys(prefix)
    assert len(keys) == 4  # two kernels, two biases
    for key in keys:
        expected = np.mean([reader.get_tensor(key) for reader in readers], axis=0)
        np.testing.assert_allclose(averaged.get_tensor(key), expected, rtol=1e-6)
        assert not np.allclose(expected, readers[-1].get_tensor(key))  # the weights did move
    # Restored into a model, the weights are the mean of the restored weights.
    per_checkpoint = [restored_weights(os.path.join(model_dir, f"ckpt-{s}")) for s in (40, 50, 60)]
    for got, *sources in zip(restored_weights(prefix), *per_checkpoint):
        np.testing.assert_allclose(got, np.mean(sources, axis=0), rtol=1e-6)
    # Optimizer state is the newest checkpoint's, unaveraged.
    for name, _ in tf.train.list_variables(prefix):
        if name.startswith("optimizer/") and name not in keys:
            np.testing.assert_array_equal(averaged.get_tensor(name), readers[-1].get_tensor(name))
    assert checkpoints.read_hparams(output_dir) == registry.hparams("transformer_tiny")
    assert checkpoints.read_problem_info(output_dir)["problem"] == "algorithmic_reverse"


def run_avg_all(argv):
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-avg-all"] + argv)
    avg_all.main([])


def test_avg_all_tool(tmp_path):
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=5"])  # fewer than n: all of them
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    one, two = (tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (1, 2))
    key = weight_keys(os.path.join(model_dir, "ckpt-2"))[0]
    np.testing.assert_allclose(reader.get_tensor(key), (one.get_tensor(key) + two.get_tensor(key)) / 2, rtol=1e-6)
    with open(os.path.join(output_dir, "problem.json")) as file:
        assert json.load(file)["vocab_size"] == 12


def test_avg_all_errors_name_the_flag(tmp_path):
    with pytest.raises(avg_all.flags.UsageError, match="--model_dir"):
        run_avg_all([f"--output_dir={tmp_path}"])
    with pytest.raises(avg_all.flags.UsageError, match="--model_dir"):
        run_avg_all([f"--model_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}"])
    with pytest.raises(avg_all.flags.UsageError, match="--n=0"):
        run_avg_all([f"--model_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}", "--n=0"])


def test_avg_all_never_replaces_a_checkpoint(tmp_path):
    """The average is refused where it would overwrite trained weights or an earlier average."""
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    trained = {path: open(path, "rb").read() for path in tf.io.gfile.glob(os.path.join(model_dir, "*"))}
    with pytest.raises(avg_all.flags.UsageError, match="is --model_dir: the average would replace"):
        run_avg_all([f"--model_dir={model_dir}", f"--output_dir={model_dir}/"])
    assert {path: open(path, "rb").read() for path in trained} == trained  # nothing written

    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2"])
    first = open(os.path.join(output_dir, "ckpt-2.data-00000-of-00001"), "rb").read()
    with pytest.raises(avg_all.flags.UsageError, match="ckpt-2 exists already"):
        run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=1"])
    assert open(os.path.join(output_dir, "ckpt-2.data-00000-of-00001"), "rb").read() == first

    # More training, a new average beside the earlier one, both listed.
    write_checkpoints(model_dir, steps=[3], keep=5)
    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2"])
    state = tf.train.get_checkpoint_state(output_dir)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-3"]
    assert os.path.basename(state.model_checkpoint_path) == "ckpt-3"

    other = str(tmp_path / "other")
    write_checkpoints(other, steps=[7], keep=5)
    checkpoints.write_model_info(other, registry.hparams("transformer_base"), "algorithmic_reverse", "transformer", 12)
    with pytest.raises(avg_all.flags.UsageError, match="hparams.json differs .* another model"):
        run_avg_all([f"--model_dir={other}", f"--output_dir={output_dir}"])


def test_a_checkpoint_names_the_problem_model_and_vocabulary_it_was_trained_with(tmp_path):
    model_dir = str(tmp_path)
    checkpoints.write_model_info(model_dir, registry.hparams("transformer_tiny"), "translate_files", "transformer",
                                 8000, vocabulary="sentencepiece-sha256:aa")
    checkpoints.check_trained_with(model_dir, "translate_files", "transformer", 8000, "sentencepiece-sha256:aa")
    checkpoints.check_trained_with(model_dir, None, "transformer", 8000)  # what is not given is not checked
    for given, message in [
        (("translate_ende", "transformer", 8000, None), "problem 'translate_files', not 'translate_ende'; give the "
                                                        "--problem"),
        (("translate_files", "other", 8000, None), "model 'transformer', not 'other'; give the --model"),
        (("translate_files", "transformer", 8001, None), "vocab_size 8000, not 8001"),
        (("translate_files", "transformer", 8000, "sentencepiece-sha256:bb"),
         "vocabulary 'sentencepiece-sha256:aa', not 'sentencepiece-sha256:bb'; give the --data_dir"),
    ]:
        with pytest.raises(checkpoints.CheckpointError, match=message):
            checkpoints.check_trained_with(model_dir, *given)


def test_averaged_transformer_loads_with_load_model(tmp_path):
    """The decoder's and exporter's entry point restores an averaged Transformer checkpoint."""
    hparams = registry.hparams("transformer_tiny").override("hidden_size=16,filter_size=32,num_heads=2,num_hidden_layers=1")
    model_dir = str(tmp_path / "train")
    weights = []
    for step, seed in ((1, 1), (2, 2)):
        keras.utils.set_random_seed(seed)
        model = checkpoints.build_model(hparams, vocab_size=12)
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        checkpoints.checkpoint_manager(checkpoints.training_checkpoint(model, optimizer), model_dir, 5).save(step)
        weights.append([v.numpy() for v in model.trainable_variables])
    checkpoints.write_model_info(model_dir, hparams, "algorithmic_reverse", "transformer", 12)
    checkpoints.average_checkpoints(model_dir, str(tmp_path / "avg"), n=2)

    loaded = checkpoints.load_model(str(tmp_path / "avg"), checkpoints.read_hparams(str(tmp_path / "avg")), 12)
    for variable, first, second in zip(loaded.trainable_variables, *weights):
        np.testing.assert_allclose(variable.numpy(), (first + second) / 2, rtol=1e-6)
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint"):
        checkpoints.load_model(str(tmp_path), hparams, 12)
