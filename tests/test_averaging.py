"""Checkpoint averaging (§6.1) against the numpy mean of the checkpoints' variables, and t2t-avg-all."""

import json
import os
import shutil
import signal
import sys

import full_disk
import keras
import kill_points
import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags
from test_checkpoints import small_model, write_checkpoints

from t2t_lite import registry
from t2t_lite.cli import t2t_avg_all, tool_process
from t2t_lite.run_dir import averaging, checkpoints, model_info


def test_untrained_step_0_is_left_out_of_the_average(tmp_path, capsys):
    """ckpt-0 (the initial random weights the trainer saves) joins an average only if it is all there is."""
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[0, 10, 20], keep=5)
    prefix = averaging.average_checkpoints(model_dir, output_dir, n=5)
    assert "Left out: ckpt-0 (the untrained initial weights)" in capsys.readouterr().out
    averaged = tf.train.load_checkpoint(prefix)
    readers = [tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (10, 20)]
    for key in weight_keys(prefix):
        np.testing.assert_allclose(
            averaged.get_tensor(key), exact_mean([r.get_tensor(key) for r in readers]), rtol=1e-6
        )
    assert [os.path.basename(p) for p in averaging.last_checkpoints(model_dir, 2)] == ["ckpt-10", "ckpt-20"]

    only_initial = str(tmp_path / "fresh")
    write_checkpoints(only_initial, steps=[0], keep=5)
    assert [os.path.basename(p) for p in averaging.last_checkpoints(only_initial, 5)] == ["ckpt-0"]


def exact_mean(arrays):
    """The mean in float64: a float32 mean rounds each partial sum, which for a weight near zero
    is off by more than the averaged checkpoint's single rounding to float32."""
    return np.mean([np.asarray(a, np.float64) for a in arrays], axis=0)


def restored_weights(path):
    model = small_model()
    tf.train.Checkpoint(model=checkpoints.trackable_model(model)).restore(
        path
    ).expect_partial().assert_existing_objects_matched()
    return model.get_weights()


def weight_keys(path):
    """Keys of the model's weights, as read by tf.train.load_checkpoint (no TensorFlow objects)."""
    return [name for name, _ in tf.train.list_variables(path) if name.startswith("model/")]


def test_average_equals_numpy_mean_of_last_n(tmp_path):
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[10, 20, 30, 40, 50, 60], keep=5)
    assert os.path.basename(tf.train.latest_checkpoint(model_dir)) == "ckpt-60"

    prefix = averaging.average_checkpoints(model_dir, output_dir, n=3)

    assert tf.train.latest_checkpoint(output_dir) == prefix and prefix.endswith("ckpt-60")
    averaged = tf.train.load_checkpoint(prefix)
    readers = [tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (40, 50, 60)]
    keys = weight_keys(prefix)
    assert len(keys) == 4  # two kernels, two biases
    for key in keys:
        expected = exact_mean([reader.get_tensor(key) for reader in readers])
        np.testing.assert_allclose(averaged.get_tensor(key), expected, rtol=1e-6)
        assert not np.allclose(expected, readers[-1].get_tensor(key))  # the weights did move
    # Restored into a model, the weights are the mean of the restored weights.
    per_checkpoint = [restored_weights(os.path.join(model_dir, f"ckpt-{s}")) for s in (40, 50, 60)]
    for got, *sources in zip(restored_weights(prefix), *per_checkpoint):
        np.testing.assert_allclose(got, exact_mean(sources), rtol=1e-6)
    # Optimizer state is the newest checkpoint's, unaveraged.
    for name, _ in tf.train.list_variables(prefix):
        if name.startswith("optimizer/") and name not in keys:
            np.testing.assert_array_equal(averaged.get_tensor(name), readers[-1].get_tensor(name))
    assert model_info.read_hparams(output_dir) == registry.hparams("transformer_tiny")
    assert model_info.read_problem_info(output_dir)["problem"] == "algorithmic_reverse"


def run_avg_all(argv):
    absl_flags.FLAGS.unparse_flags()
    absl_flags.FLAGS(["t2t-avg-all"] + argv)
    t2t_avg_all.main([])


def test_avg_all_tool(tmp_path):
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    # Fewer than n: all of them (--min_steps=0: these steps are all inside transformer_tiny's warm-up).
    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=5", "--min_steps=0"])
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    one, two = (tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (1, 2))
    key = weight_keys(os.path.join(model_dir, "ckpt-2"))[0]
    np.testing.assert_allclose(reader.get_tensor(key), (one.get_tensor(key) + two.get_tensor(key)) / 2, rtol=1e-6)
    with open(os.path.join(output_dir, "problem.json")) as file:
        assert json.load(file)["vocab_size"] == 12


def test_avg_all_and_the_newest_average_work_with_directories_relative_to_the_cwd(tmp_path, monkeypatch):
    """`--model_dir=train --output_dir=avg`, as a user types them (TensorFlow joins the checkpoint file's paths)."""
    write_checkpoints(str(tmp_path / "train"), steps=[1, 2, 3], keep=5)
    monkeypatch.chdir(tmp_path)
    assert checkpoints.listed_checkpoints("train") == [os.path.join("train", f"ckpt-{s}") for s in (1, 2, 3)]
    run_avg_all(["--model_dir=train", "--output_dir=avg", "--n=2", "--min_steps=0"])
    newest = checkpoints.checkpoint_path("avg")  # what t2t-decoder --output_dir=avg reads
    assert newest == os.path.join("avg", "ckpt-3")
    assert 'model_checkpoint_path: "ckpt-3"' in (tmp_path / "avg" / "checkpoint").read_text()  # still movable
    reader, two, three = (tf.train.load_checkpoint(path) for path in (newest, "train/ckpt-2", "train/ckpt-3"))
    key = weight_keys("train/ckpt-3")[0]
    np.testing.assert_allclose(reader.get_tensor(key), (two.get_tensor(key) + three.get_tensor(key)) / 2, rtol=1e-6)


def test_avg_all_errors_name_the_flag(tmp_path):
    with pytest.raises(t2t_avg_all.flags.UsageError, match="--model_dir"):
        run_avg_all([f"--output_dir={tmp_path}"])
    with pytest.raises(t2t_avg_all.flags.UsageError, match="--model_dir"):
        run_avg_all([f"--model_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}"])
    with pytest.raises(t2t_avg_all.flags.UsageError, match="--n=0"):
        run_avg_all([f"--model_dir={tmp_path}", f"--output_dir={tmp_path / 'o'}", "--n=0"])


def test_avg_all_never_replaces_a_checkpoint(tmp_path):
    """The average is refused where it would overwrite trained weights or an earlier average."""
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    trained = {path: open(path, "rb").read() for path in tf.io.gfile.glob(os.path.join(model_dir, "*"))}
    with pytest.raises(t2t_avg_all.flags.UsageError, match="is --model_dir: writing it would replace --model_dir"):
        run_avg_all([f"--model_dir={model_dir}", f"--output_dir={model_dir}/"])
    assert {path: open(path, "rb").read() for path in trained} == trained  # nothing written

    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2"])
    first = open(os.path.join(output_dir, "ckpt-2.data-00000-of-00001"), "rb").read()
    with pytest.raises(t2t_avg_all.flags.UsageError, match="ckpt-2 exists already"):
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
    model_info.write_model_info(other, registry.hparams("transformer_base"), "algorithmic_reverse", "transformer", 12)
    with pytest.raises(t2t_avg_all.flags.UsageError, match="hparams.json differs .* another model"):
        run_avg_all([f"--model_dir={other}", f"--output_dir={output_dir}"])


@pytest.mark.parametrize(
    "positions", ["", ",self_attention_type=dot_product_relative,pos=none"], ids=["absolute", "relative"]
)
def test_averaged_transformer_loads_with_load_model(tmp_path, positions):
    """The decoder's and exporter's entry point restores an averaged Transformer checkpoint (relative positions:
    Shaw et al.'s tables averaged as every other weight)."""
    hparams = registry.hparams("transformer_tiny").override(
        "hidden_size=16,filter_size=32,num_heads=2,num_hidden_layers=1" + positions
    )
    model_dir = str(tmp_path / "train")
    weights = []
    for step, seed in ((1, 1), (2, 2)):
        keras.utils.set_random_seed(seed)
        model = model_info.build_model(hparams, vocab_size=12)
        optimizer = keras.optimizers.Adam()
        optimizer.build(model.trainable_variables)
        checkpoints.checkpoint_manager(checkpoints.training_checkpoint(model, optimizer), model_dir, 5).save(step)
        weights.append([v.numpy() for v in model.trainable_variables])
    model_info.write_model_info(model_dir, hparams, "algorithmic_reverse", "transformer", 12)
    averaging.average_checkpoints(model_dir, str(tmp_path / "avg"), n=2)

    loaded = model_info.restore_model(str(tmp_path / "avg"), model_info.read_hparams(str(tmp_path / "avg")), 12)
    for variable, first, second in zip(loaded.trainable_variables, *weights):
        np.testing.assert_allclose(variable.numpy(), (first + second) / 2, rtol=1e-6)
    assert len([v for v in loaded.trainable_variables if "relative_positions" in v.path]) == (4 if positions else 0)
    with pytest.raises(checkpoints.CheckpointError, match="no checkpoint"):
        model_info.restore_model(str(tmp_path), hparams, 12)


def test_a_damaged_checkpoint_stops_averaging_naming_it_and_how_to_average_others(tmp_path):
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[1, 2, 3], keep=5)
    data = os.path.join(model_dir, "ckpt-3.data-00000-of-00001")
    os.truncate(data, os.path.getsize(data) // 2)
    with pytest.raises(
        t2t_avg_all.flags.UsageError,
        match=rf"{data} cannot be read .*--checkpoint_path="
        rf"{os.path.join(model_dir, 'ckpt-2')} \(the newest",
    ):
        run_avg_all([f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2"])
    assert not os.path.exists(os.path.join(output_dir, "checkpoint"))  # nothing averaged
    run_avg_all(
        [
            f"--model_dir={model_dir}",
            f"--output_dir={output_dir}",
            "--n=2",
            "--min_steps=0",
            f"--checkpoint_path={os.path.join(model_dir, 'ckpt-2')}",
        ]
    )
    averaged = tf.train.load_checkpoint(tf.train.latest_checkpoint(output_dir))
    readers = [tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{s}")) for s in (1, 2)]
    for key in weight_keys(os.path.join(model_dir, "ckpt-2")):
        np.testing.assert_allclose(
            averaged.get_tensor(key), exact_mean([r.get_tensor(key) for r in readers]), rtol=1e-6
        )


def test_avg_all_paths_are_checked_before_any_work(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(t2t_avg_all.flags.UsageError, match="--model_dir=.*a_file: is a file; give a directory"):
        run_avg_all([f"--model_dir={a_file}", f"--output_dir={tmp_path / 'o'}"])
    write_checkpoints(str(tmp_path / "train"), steps=[1], keep=5)
    with pytest.raises(t2t_avg_all.flags.UsageError, match="--output_dir=.*a_file: is a file; give a directory"):
        run_avg_all([f"--model_dir={tmp_path / 'train'}", f"--output_dir={a_file}"])


def test_avg_all_leaves_out_the_warm_up_by_default_and_names_what_it_left_out(tmp_path, capsys):
    """A short run's average is not pulled back to weights of eq. 3's rising rate (transformer_tiny: 1,000 steps)."""
    model_dir = str(tmp_path / "train")
    write_checkpoints(model_dir, steps=[0, 250, 500, 750, 1000, 1250, 1500], keep=10)
    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={tmp_path / 'avg'}", "--n=5"])
    out = capsys.readouterr().out
    assert "Averaged 3 checkpoints (ckpt-1000, ckpt-1250, ckpt-1500)" in out
    assert "Left out: ckpt-500 (before --min_steps=1000); ckpt-750 (before --min_steps=1000)" in out
    key = weight_keys(f"{model_dir}/ckpt-1500")[0]
    expected = exact_mean(
        [tf.train.load_checkpoint(f"{model_dir}/ckpt-{s}").get_tensor(key) for s in (1000, 1250, 1500)]
    )
    np.testing.assert_allclose(
        tf.train.load_checkpoint(f"{tmp_path}/avg/ckpt-1500").get_tensor(key), expected, rtol=1e-6
    )

    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={tmp_path / 'all'}", "--n=5", "--min_steps=0"])
    assert "Averaged 5 checkpoints (ckpt-500, ckpt-750, ckpt-1000, ckpt-1250, ckpt-1500)" in capsys.readouterr().out


def test_a_run_that_ends_inside_the_warm_up_gives_its_newest_checkpoint_alone(tmp_path, capsys):
    model_dir = str(tmp_path / "train")
    write_checkpoints(model_dir, steps=[0, 250, 376], keep=10)
    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={tmp_path / 'avg'}"])
    out = capsys.readouterr().out
    assert "Averaged 1 checkpoint (ckpt-376)" in out and "ckpt-250 (before --min_steps=1000)" in out
    key = weight_keys(f"{model_dir}/ckpt-376")[0]
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(f"{tmp_path}/avg/ckpt-376").get_tensor(key),
        tf.train.load_checkpoint(f"{model_dir}/ckpt-376").get_tensor(key),
    )


def test_a_periodic_checkpoint_the_final_one_follows_within_half_an_interval_is_not_counted_twice():
    """A run stopped by the clock one update after a save leaves ckpt-1000 and ckpt-1001: nearly one model."""
    paths = [f"m/ckpt-{step}" for step in (0, 250, 500, 750, 1000, 1001)]
    chosen, left_out = averaging.chosen_checkpoints(paths, 5)
    assert chosen == ["m/ckpt-250", "m/ckpt-500", "m/ckpt-750", "m/ckpt-1001"]
    # Named: what the last 5 held and the average leaves out (ckpt-0 was not among them).
    assert left_out == [("m/ckpt-1000", "1 update(s) before the final ckpt-1001")]
    # Regular intervals, or a final checkpoint more than half an interval after the last periodic one: all count.
    assert averaging.chosen_checkpoints([f"m/ckpt-{s}" for s in (250, 500, 750, 1000)], 5)[0][0] == "m/ckpt-250"
    assert len(averaging.chosen_checkpoints([f"m/ckpt-{s}" for s in (250, 500, 750, 1000, 1130)], 5)[0]) == 5
    # Irregular (--save_checkpoints_secs) intervals: the median interval is the usual one.
    assert averaging.chosen_checkpoints([f"m/ckpt-{s}" for s in (100, 180, 300, 390, 395)], 5)[1] == [
        ("m/ckpt-390", "5 update(s) before the final ckpt-395")
    ]


@pytest.mark.parametrize(
    "killed_while, owner, name, left",
    [
        ("writing hparams.json", model_info, "atomic_write", []),
        ("writing the checkpoint", tf.raw_ops, "SaveV2", []),
        ("writing the list", checkpoints, "write_checkpoint_list", ["ckpt-3.data-00000-of-00001", "ckpt-3.index"]),
    ],
)
def test_a_kill_at_any_point_of_an_average_is_healed_by_rerunning_the_same_command(
    tmp_path, monkeypatch, capsys, killed_while, owner, name, left
):
    """Killed at any moment, t2t-avg-all leaves the earlier average listed and whole; the same command again
    removes what the kill left unfinished (saying so in one line) and writes the average, hparams.json beside it."""
    model_dir, output_dir, killed = str(tmp_path / "train"), str(tmp_path / "avg"), str(tmp_path / "killed")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    command = [f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2", "--min_steps=0"]
    run_avg_all(command)  # an earlier average, ckpt-2
    write_checkpoints(model_dir, steps=[3], keep=5)
    kill_points.kill_at(monkeypatch, owner, name, output_dir, killed)
    with pytest.raises(kill_points.Killed):
        run_avg_all(command)
    monkeypatch.undo()
    assert tf.train.latest_checkpoint(killed) == os.path.join(killed, "ckpt-2")  # what tools read meanwhile
    capsys.readouterr()
    run_avg_all([f"--model_dir={model_dir}", f"--output_dir={killed}", "--n=2", "--min_steps=0"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"{killed}/t2t.lock: t2t-avg-all (pid ") and "taking its lock over" in printed[0]
    removed = f"Removed {', '.join(left)} from {killed}: left unfinished by an interrupted t2t-avg-all."
    assert printed[1 : 1 + len(left[:1])] == [removed][: len(left[:1])]
    assert printed[1 + len(left[:1])].startswith("Averaged 2 checkpoints (ckpt-2, ckpt-3)")
    state = tf.train.get_checkpoint_state(killed)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-3"]
    two, three, average = (
        tf.train.load_checkpoint(p) for p in (f"{model_dir}/ckpt-2", f"{model_dir}/ckpt-3", state.model_checkpoint_path)
    )
    key = weight_keys(f"{model_dir}/ckpt-3")[0]
    np.testing.assert_allclose(average.get_tensor(key), (two.get_tensor(key) + three.get_tensor(key)) / 2, rtol=1e-6)
    assert open(os.path.join(killed, "hparams.json")).read() == open(os.path.join(model_dir, "hparams.json")).read()


def test_an_average_stopped_by_ctrl_c_or_a_full_disk_removes_its_own_files(tmp_path, monkeypatch):
    """Ctrl-C (or a write that fails) inside the write: the tool's own handler removes the unlisted files, so
    "rerun the same command" just works."""
    model_dir, output_dir = str(tmp_path / "train"), str(tmp_path / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    command = [f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2", "--min_steps=0"]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints, "write_checkpoint_list", interrupted)  # the files are written by then
    with pytest.raises(KeyboardInterrupt):
        run_avg_all(command)
    monkeypatch.undo()
    assert sorted(os.listdir(output_dir)) == ["hparams.json", "problem.json"]
    run_avg_all(command)
    assert tf.train.latest_checkpoint(output_dir) == os.path.join(output_dir, "ckpt-2")


def test_an_average_on_a_full_disk_stops_naming_the_file_and_reruns_once_space_is_freed(tmp_path, small_disk):
    model_dir, output_dir = str(tmp_path / "train"), str(small_disk / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    command = [f"--model_dir={model_dir}", f"--output_dir={output_dir}", "--n=2", "--min_steps=0"]
    # A tmpfs gives files whole pages: room for the lock, hparams.json and problem.json, none for the checkpoint.
    filler = full_disk.fill(small_disk, leave=3 * os.sysconf("SC_PAGE_SIZE"))
    with pytest.raises(tf.errors.ResourceExhaustedError) as error:
        run_avg_all(command)
    message = tool_process.disk_full_message(error.value)
    assert message.startswith(f"the disk holding {output_dir} is full (")
    assert f"could not write {output_dir}/ckpt-2.data-00000-of-00001. " in message
    assert sorted(os.listdir(output_dir)) == ["hparams.json", "problem.json"]  # no part of ckpt-2 is left
    os.remove(filler)
    run_avg_all(command)
    assert tf.train.latest_checkpoint(output_dir) == os.path.join(output_dir, "ckpt-2")


def test_t2t_avg_all_on_a_full_disk_prints_one_line_and_exits_1(tmp_path, small_disk, monkeypatch, capsys):
    """The tool as its entry point runs it (`tool_process.run_tool`): the line, no traceback, exit status 1."""
    model_dir, output_dir = str(tmp_path / "train"), str(small_disk / "avg")
    write_checkpoints(model_dir, steps=[1, 2], keep=5)
    full_disk.fill(small_disk, leave=3 * os.sysconf("SC_PAGE_SIZE"))
    absl_flags.FLAGS.unparse_flags()
    monkeypatch.setattr(sys, "argv", ["t2t-avg-all", f"--model_dir={model_dir}", f"--output_dir={output_dir}"])
    monkeypatch.setattr(signal, "signal", lambda number, handler: None)  # the test process keeps its own handlers
    with pytest.raises(SystemExit) as exit_info:
        tool_process.run_tool(t2t_avg_all.main)
    assert exit_info.value.code == 1
    printed = capsys.readouterr().err.splitlines()
    assert printed == [
        f"t2t-avg-all: the disk holding {output_dir} is full ({shutil.disk_usage(small_disk).free:,} bytes free): "
        f"could not write {output_dir}/ckpt-2.data-00000-of-00001. Free space there (or write elsewhere) and rerun "
        f"the same command; what this run left unfinished has been removed."
    ]
