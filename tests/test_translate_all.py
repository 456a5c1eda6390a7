"""t2t-translate-all: each step's file equals a fresh decode of that checkpoint; skips, waits, resumes, bad input.

The command line is run as a subprocess, as a user runs it beside a training run.
"""

import dataclasses
import functools
import json
import os
import shutil
import sys
import time

import forkserver
import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags as absl_flags

from t2t_lite import registry
from t2t_lite.cli import flags as cli_flags
from t2t_lite.cli import t2t_translate_all as translate_all_cli
from t2t_lite.data import datagen
from t2t_lite.data.text_lines import read_lines
from t2t_lite.decode import model_loading, translation
from t2t_lite.decode.decode_settings import DecodeHParams
from t2t_lite.insights import translate_all
from t2t_lite.run_dir import checkpoints, model_info

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HPARAMS = registry.hparams("transformer_tiny").replace(hidden_size=32, filter_size=64, num_heads=4)
SETTINGS = DecodeHParams.of(beam_size=2, alpha=0.6, extra_length=3, batch_size=3)
SOURCE_LINES = ["3 4 5", "1", "7 7 7 7 7 7", "2 9", "8 1 8"]


def build_run(root):
    """algorithmic_reverse data, a model directory with random-weight checkpoints ckpt-0, -10 and -20, a source."""
    problem = registry.problem("algorithmic_reverse")
    problem.num_examples = {"train": 20, "dev": 5, "test": 5}
    data_dir = str(root / "data")
    datagen.generate(problem, data_dir, str(root / "tmp"))
    keras.utils.set_random_seed(3)
    model = model_info.build_model(HPARAMS, problem.vocab_size(data_dir))
    model_dir = str(root / "train")
    checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_model(model))
    manager = checkpoints.checkpoint_manager(checkpoint, model_dir, keep_checkpoint_max=10)
    for step in (0, 10, 20):
        save_random_weights(model, manager, step)
    model_info.write_model_info(model_dir, HPARAMS, problem.name, "transformer", model.vocab_size)
    (root / "src.txt").write_text("\n".join(SOURCE_LINES) + "\n")


@pytest.fixture(scope="module")
def run(built_once):
    """The run of `build_run`, made once per test run (tests only read it), and a model of its architecture."""
    root = built_once("translate_all_run", build_run)
    problem, data_dir = registry.problem("algorithmic_reverse"), str(root / "data")
    model = model_info.build_model(HPARAMS, problem.vocab_size(data_dir))
    return problem, model, data_dir, str(root / "train"), str(root / "src.txt")


def save_random_weights(model, manager, step):
    """Each step gets weights of its own, so that different checkpoints decode differently."""
    generator = np.random.default_rng(step)
    for variable in model.trainable_variables:
        variable.assign(generator.normal(0, 0.5, variable.shape).astype(variable.dtype))
    manager.save(checkpoint_number=step)


@functools.lru_cache(maxsize=None)
def fresh_decode(problem, data_dir, checkpoint_path):
    """What t2t-decoder gives with this checkpoint alone: a model built and loaded for it (once per process and
    checkpoint; a test that asks again gets the same lines)."""
    model = model_loading.load_model_for_decoding(problem, HPARAMS, data_dir, checkpoint_path)
    translations = translation.translate(model, problem.vocabulary(data_dir), SOURCE_LINES, SETTINGS, progress=False)
    return [translation.hypotheses[0] for translation in translations]


@functools.lru_cache(maxsize=None)
def translator(problem, data_dir):
    """One float32 CheckpointTranslator per process: each translate_all call below restores the weights of each
    checkpoint it decodes into that translator's model, as one call does from its second checkpoint on, so the
    decoder is traced once rather than once per call."""
    return translate_all.CheckpointTranslator(problem, HPARAMS, data_dir, "transformer", SETTINGS)


@pytest.fixture(scope="module")
def translated(run, built_once):
    """translate_all over the run (min_steps=10, average_last_n=2) into a translations_dir, once per test run:
    (that directory, what the call returned and logged, the model directory's listing before and after it)."""
    problem, _, data_dir, model_dir, source = run

    def build(root):
        messages, model_dir_before = [], sorted(os.listdir(model_dir))
        written = translate_all.translate_all(
            translator(problem, data_dir),
            model_dir,
            source,
            SOURCE_LINES,
            str(root / "out"),
            min_steps=10,
            average_last_n=2,
            log=messages.append,
        )
        result = {
            "written": written,
            "messages": messages,
            "model_dir": [model_dir_before, sorted(os.listdir(model_dir))],
        }
        (root / "result.json").write_text(json.dumps(result))

    root = built_once("translate_all_translated", build)
    return root / "out", json.loads((root / "result.json").read_text())


def test_one_file_per_step_from_min_steps_on_and_one_for_the_average(translated):
    out, result = translated
    assert result["written"] == [str(out / name) for name in ("src.txt-10", "src.txt-20", "src.txt-avg2-20")]
    assert "ckpt-0: below --min_steps=10, skipped." in result["messages"]
    assert read_lines(str(out / "src.txt-10")) != read_lines(str(out / "src.txt-20"))
    before, after = result["model_dir"]
    assert after == before  # nothing written beside the run's checkpoints


@pytest.mark.parametrize("step", [10, 20])
def test_each_steps_file_equals_that_checkpoint_decoded_alone(run, translated, step):
    problem, _, data_dir, model_dir, _ = run
    out, _ = translated
    # one model, its weights replaced per step = a model loaded per step
    assert read_lines(str(out / f"src.txt-{step}")) == fresh_decode(
        problem, data_dir, os.path.join(model_dir, f"ckpt-{step}")
    )


def test_the_average_file_equals_the_averaged_checkpoint_decoded_alone(run, translated):
    problem, _, data_dir, model_dir, _ = run
    out, _ = translated
    average = str(out / "avg2" / "ckpt-20")  # the average lives in a directory of translations_dir
    assert read_lines(str(out / "src.txt-avg2-20")) == fresh_decode(problem, data_dir, average)
    averaged_weight = tf.train.load_checkpoint(average).get_tensor(
        "model/weights_in_order/0/.ATTRIBUTES/VARIABLE_VALUE"
    )
    np.testing.assert_allclose(
        averaged_weight,
        np.mean(
            [
                tf.train.load_checkpoint(os.path.join(model_dir, f"ckpt-{step}")).get_tensor(
                    "model/weights_in_order/0/.ATTRIBUTES/VARIABLE_VALUE"
                )
                for step in (10, 20)
            ],
            axis=0,
        ),
        rtol=1e-6,
    )


def test_a_second_run_skips_every_file_it_finds(run, translated, tmp_path):
    problem, _, data_dir, model_dir, source = run
    out = tmp_path / "out"
    shutil.copytree(translated[0], out)  # the first run's translations_dir, as that run left it
    expected = [str(out / name) for name in ("src.txt-10", "src.txt-20", "src.txt-avg2-20")]
    messages = []
    before = {path: os.stat(path).st_mtime_ns for path in expected}
    again = translate_all.translate_all(
        translator(problem, data_dir),
        model_dir,
        source,
        SOURCE_LINES,
        str(out),
        min_steps=10,
        average_last_n=2,
        log=messages.append,
    )
    assert again == [] and {path: os.stat(path).st_mtime_ns for path in expected} == before
    assert sum("exists already, skipped" in message for message in messages) == 3


def test_int8_translations_of_each_step_equal_that_checkpoint_decoded_alone_in_int8(run, tmp_path):
    """quantize=int8: each checkpoint's float32 weights are quantized anew (an int8 model takes no checkpoint)."""
    problem, _, data_dir, model_dir, source = run
    int8 = dataclasses.replace(SETTINGS, quantize="int8")
    translate_all.translate_all(
        translate_all.CheckpointTranslator(problem, HPARAMS, data_dir, "transformer", int8),
        model_dir,
        source,
        SOURCE_LINES,
        str(tmp_path),
        min_steps=10,
        log=lambda _: None,
    )
    # The second checkpoint is the one a reused int8 model would get wrong (the first is loaded fresh anyway).
    model = model_loading.load_model_for_decoding(
        problem, HPARAMS, data_dir, os.path.join(model_dir, "ckpt-20"), quantize="int8"
    )
    alone = translation.translate(model, problem.vocabulary(data_dir), SOURCE_LINES, int8, progress=False)
    assert read_lines(str(tmp_path / "src.txt-20")) == [t.hypotheses[0] for t in alone]
    assert read_lines(str(tmp_path / "src.txt-10")) != read_lines(str(tmp_path / "src.txt-20"))


def test_an_interrupted_run_leaves_no_file_for_the_step_it_was_on(run, tmp_path, monkeypatch):
    problem, _, data_dir, model_dir, source = run
    real_translate, calls = translation.translate, []

    def interrupted_on_second_checkpoint(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_translate(*args, **kwargs)

    monkeypatch.setattr(translation, "translate", interrupted_on_second_checkpoint)
    with pytest.raises(KeyboardInterrupt):
        translate_all.translate_all(
            translator(problem, data_dir),
            model_dir,
            source,
            SOURCE_LINES,
            str(tmp_path),
            min_steps=10,
            log=lambda message: None,
        )
    assert os.listdir(tmp_path) == ["src.txt-10"]
    monkeypatch.setattr(translation, "translate", real_translate)
    messages = []
    written = translate_all.translate_all(
        translator(problem, data_dir), model_dir, source, SOURCE_LINES, str(tmp_path), min_steps=10, log=messages.append
    )
    assert written == [str(tmp_path / "src.txt-20")]
    assert any(message.startswith("ckpt-10: ") and message.endswith("exists already, skipped.") for message in messages)


def test_waits_for_checkpoints_written_while_it_runs(run, tmp_path, monkeypatch):
    """--wait_minutes: a checkpoint saved during the wait is translated, then it stops when none comes."""
    problem, model, data_dir, model_dir, source = run
    training_dir = str(tmp_path / "train")
    shutil.copytree(model_dir, training_dir)
    checkpoint = tf.train.Checkpoint(model=checkpoints.trackable_model(model))
    manager = checkpoints.checkpoint_manager(checkpoint, training_dir, keep_checkpoint_max=10)
    real_sleep, sleeps = time.sleep, []

    def training_meanwhile(seconds):
        sleeps.append(seconds)
        if len(sleeps) == 1:
            save_random_weights(model, manager, 30)
        real_sleep(min(seconds, 0.2))

    monkeypatch.setattr(translate_all, "POLL_SECONDS", 0.1)
    monkeypatch.setattr(time, "sleep", training_meanwhile)
    written = translate_all.translate_all(
        translator(problem, data_dir),
        training_dir,
        source,
        SOURCE_LINES,
        str(tmp_path / "out"),
        min_steps=10,
        wait_minutes=0.02,
        log=lambda message: None,
    )
    assert written == [str(tmp_path / "out" / name) for name in ("src.txt-10", "src.txt-20", "src.txt-30")]
    assert read_lines(written[-1]) == fresh_decode(problem, data_dir, os.path.join(training_dir, "ckpt-30"))


def test_a_checkpoint_deleted_before_its_turn_is_skipped_and_said(run, tmp_path, monkeypatch):
    problem, _, data_dir, model_dir, source = run
    listed = checkpoints.all_checkpoints(model_dir)
    monkeypatch.setattr(checkpoints, "all_checkpoints", lambda directory: listed + [listed[-1][:-2] + "25"])
    messages = []
    written = translate_all.translate_all(
        translator(problem, data_dir), model_dir, source, SOURCE_LINES, str(tmp_path), min_steps=20, log=messages.append
    )
    assert written == [str(tmp_path / "src.txt-20")]
    assert "ckpt-25: deleted by the trainer (--keep_checkpoint_max) before it could be translated, skipped." in messages


def translate_all_tool(*argv):
    return forkserver.run(
        [sys.executable, os.path.join(REPO, "bin", "t2t-translate-all"), *argv], capture_output=True, text=True
    )


def test_the_tool_translates_then_skips_what_is_done(run, tmp_path):
    problem, _, data_dir, model_dir, source = run
    argv = [
        "--problem=algorithmic_reverse",
        f"--data_dir={data_dir}",
        f"--model_dir={model_dir}",
        f"--source={source}",
        f"--translations_dir={tmp_path}",
        "--min_steps=20",
        "--decode_hparams=beam_size=2,alpha=0.6,extra_length=3",
    ]
    first = translate_all_tool(*argv)
    assert first.returncode == 0, first.stderr
    assert read_lines(str(tmp_path / "src.txt-20")) == fresh_decode(
        problem, data_dir, os.path.join(model_dir, "ckpt-20")
    )
    second = translate_all_tool(*argv)
    assert second.returncode == 0 and "ckpt-20: " in second.stdout and "exists already, skipped." in second.stdout


def test_the_tool_names_the_flag_or_file_line_of_bad_input(run, tmp_path):
    _, _, data_dir, model_dir, source = run
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    (empty_dir / "hparams.json").write_text(HPARAMS.to_json())
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"3 4\n5 \xe9\n")
    common = ["--problem=algorithmic_reverse", f"--data_dir={data_dir}", f"--translations_dir={tmp_path / 'out'}"]
    cases = [
        ([f"--model_dir={tmp_path / 'missing'}", f"--source={source}"], "--model_dir=.*missing: no such directory"),
        ([f"--model_dir={empty_dir}", f"--source={source}"], f"--model_dir={empty_dir}: no checkpoints found"),
        ([f"--model_dir={model_dir}", f"--source={tmp_path / 'nope.txt'}"], "--source=.*nope.txt: no such file"),
    ]
    # One as a user meets it, a process: absl prints the UsageError in one line and exits 1, no traceback.
    process = translate_all_tool(*common, f"--model_dir={model_dir}", f"--source={latin1}")
    assert process.returncode == 1 and "Traceback" not in process.stderr
    assert any(f"--source: {latin1}:2: not valid UTF-8" in line for line in process.stderr.splitlines()), process.stderr
    # The others in this process (a TensorFlow start-up each spared): the same UsageError, named as the user wrote it.
    for argv, message in cases:
        absl_flags.FLAGS.unparse_flags()
        absl_flags.FLAGS(["t2t-translate-all", *common, *argv])
        try:
            with pytest.raises(cli_flags.UsageError, match=message):
                translate_all_cli.main([])
        finally:
            absl_flags.FLAGS.unparse_flags()
    assert not (tmp_path / "out").exists() or os.listdir(tmp_path / "out") == []
