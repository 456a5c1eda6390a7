"""Checkpoints in `--output_dir`, the model's settings beside them, and averaging (§6.1).

A model directory holds, as tensor2tensor's did:
  ckpt-<step>.index / .data-*   TensorFlow checkpoints (`tf.train.latest_checkpoint` finds them)
  checkpoint                    the CheckpointManager's list of the kept ones
  hparams.json                  `HParams.to_json()`, so every tool rebuilds the same model
  problem.json                  problem, model and vocabulary size

Crash safety comes from TensorFlow's own protocol: a checkpoint's files are written
under temporary names and renamed, and only then is the `checkpoint` list rewritten
atomically, so a process killed at any moment leaves the previous latest checkpoint
listed and loadable. The JSON files are written to a temporary file and renamed too.

A checkpoint that cannot be read (a disk that filled up, a copy cut short) is named with
its file; the trainer skips it, moves it to `set_aside/` and resumes from the newest one
that reads (`restore_for_training`). Averaging (§6.1) is in `t2t_lite.train.averaging`.
"""

import dataclasses
import json
import os
import re
import time

import tensorflow as tf

from t2t_lite import registry
from t2t_lite.hparam import HParams

CHECKPOINT_NAME = "ckpt"
SET_ASIDE = "set_aside"  # where the trainer moves checkpoints it cannot read or must not overwrite
HPARAMS_FILE = "hparams.json"
PROBLEM_FILE = "problem.json"


class CheckpointError(FileNotFoundError):
    """No checkpoint where one was expected, or missing model information beside it."""


# -- What a checkpoint holds ---------------------------------------------------------------
def trackable_model(model) -> tf.Module:
    """The model's variables, in the model's own order, as one trackable object.

    Keras 3 layers do not expose sub-layers kept in Python lists (an encoder's stack) to
    `tf.train.Checkpoint`, so the model object itself would save only part of its weights.
    The flat list of `model.variables` saves all of them, including the dropout
    seed-generator states that make a resumed run repeat the uninterrupted one. Keys are
    list positions, not Keras paths, because Keras numbers layer names per process
    (`transformer_1`, `seed_generator_7`) while the order is fixed by the architecture;
    restoring checks every shape, so a different architecture fails loudly.
    """
    holder = tf.Module()
    holder.weights_in_order = list(model.variables)
    return holder


def training_checkpoint(model, optimizer, **extra) -> tf.train.Checkpoint:
    """The checkpoint written during training: model variables, optimizer state and `extra`."""
    return tf.train.Checkpoint(model=trackable_model(model), optimizer=optimizer, **extra)


# -- Writing, during training ------------------------------------------------------------
def checkpoint_manager(checkpoint: tf.train.Checkpoint, output_dir: str, keep_checkpoint_max: int):
    """Keeps the last `keep_checkpoint_max` checkpoints `ckpt-<step>` in `output_dir`."""
    return tf.train.CheckpointManager(
        checkpoint, output_dir, max_to_keep=keep_checkpoint_max, checkpoint_name=CHECKPOINT_NAME
    )


@dataclasses.dataclass
class SaveEvery:
    """When to write a checkpoint: every `seconds` of training if > 0 (tensor2tensor's
    --save_checkpoints_secs, which then replaces the step interval), else every `steps`."""

    steps: int
    seconds: float
    last_time: float  # when the interval started: the start of training, then each save

    def due(self, step: int, now: float) -> bool:
        if self.seconds > 0:
            return now - self.last_time >= self.seconds
        return step % self.steps == 0

    def saved(self, now: float) -> None:
        self.last_time = now


def write_model_info(
    output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int, vocabulary: str = None
):
    """Writes hparams.json and problem.json beside the checkpoints (atomically).

    `vocabulary` is the vocabulary's fingerprint (`Vocabulary.fingerprint`): a vocabulary
    regenerated from other data has the same size but other pieces.
    """
    tf.io.gfile.makedirs(output_dir)
    _atomic_write(os.path.join(output_dir, HPARAMS_FILE), hparams.to_json())
    info = {"problem": problem_name, "model": model_name, "vocab_size": int(vocab_size)}
    if vocabulary is not None:
        info["vocabulary"] = vocabulary
    _atomic_write(os.path.join(output_dir, PROBLEM_FILE), json.dumps(info, indent=2, sort_keys=True))


def _atomic_write(path: str, text: str) -> None:
    # tf.io.gfile, so a model directory may be gs://... as the checkpoints' own files may.
    temporary = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(temporary, "w") as file:
        file.write(text + "\n")
    tf.io.gfile.rename(temporary, path, overwrite=True)


# -- Reading, for the decoder, the exporter and t2t-avg-all ------------------------------
def read_hparams(model_dir: str) -> HParams:
    path = os.path.join(model_dir, HPARAMS_FILE)
    if not tf.io.gfile.exists(path):
        raise CheckpointError(f"{path}: missing; it is written by t2t-trainer beside the checkpoints.")
    with tf.io.gfile.GFile(path) as file:
        return HParams.from_json(file.read())


def read_problem_info(model_dir: str) -> dict:
    """{"problem": ..., "model": ..., "vocab_size": ...} as written by t2t-trainer."""
    path = os.path.join(model_dir, PROBLEM_FILE)
    if not tf.io.gfile.exists(path):
        raise CheckpointError(f"{path}: missing; it is written by t2t-trainer beside the checkpoints.")
    with tf.io.gfile.GFile(path) as file:
        return json.loads(file.read())


def checkpoint_path(checkpoint_path_or_dir: str) -> str:
    """A checkpoint prefix as given, or the latest one in a directory."""
    if tf.io.gfile.isdir(checkpoint_path_or_dir):
        state = tf.train.get_checkpoint_state(checkpoint_path_or_dir)
        if state is None or not state.model_checkpoint_path:
            raise CheckpointError(
                f"{checkpoint_path_or_dir}: no checkpoint found (expected ckpt-<step>.index and a "
                f"'checkpoint' file written by t2t-trainer)."
            )
        latest = state.model_checkpoint_path
        if not tf.io.gfile.exists(latest + ".index"):
            raise damaged(latest, None)
        return latest
    if not tf.io.gfile.exists(checkpoint_path_or_dir + ".index"):
        raise CheckpointError(f"{checkpoint_path_or_dir}: not a checkpoint (no {checkpoint_path_or_dir}.index).")
    return checkpoint_path_or_dir


def listed_checkpoints(model_dir: str) -> list:
    """The prefixes of the checkpoints listed in `model_dir`'s `checkpoint` file, by step, oldest first."""
    state = tf.train.get_checkpoint_state(model_dir)
    if state is None:
        return []
    # The file lists paths relative to its directory (CheckpointManager's); TensorFlow has already
    # joined them to `model_dir` as given, so a relative --model_dir yields paths relative to the cwd.
    return sorted(state.all_model_checkpoint_paths, key=checkpoint_step)


# -- Damaged checkpoints (a disk that filled up, a copy cut short) -----------------------------
# Reading a checkpoint whose .data file was cut short raises IndexError("Read less bytes than
# requested") and one without its .index a NotFoundError, neither naming the file.
READ_ERRORS = (tf.errors.OpError, IndexError)


def damaged(prefix: str, error, what: str = "") -> CheckpointError:
    """The error for a checkpoint that cannot be read: which file, and how to pick another one."""
    older = [
        path
        for path in listed_checkpoints(os.path.dirname(prefix))
        if checkpoint_step(path) < checkpoint_step(prefix) and tf.io.gfile.exists(path + ".index")
    ]
    example = f"--checkpoint_path={older[-1]}" if older else "--checkpoint_path=<another ckpt-N>"
    return CheckpointError(
        f"{damage(prefix, error)}, so {os.path.basename(prefix)} is damaged. Pick another "
        f"checkpoint with {example}{' (' + what + ')' if what else ''}."
    )


def damage(prefix: str, error) -> str:
    """What is wrong with the files of checkpoint `prefix`, naming them."""
    if not tf.io.gfile.exists(prefix + ".index"):
        return f"{prefix}.index is missing"
    data = sorted(tf.io.gfile.glob(prefix + ".data-*"))
    if not data:
        return f"{prefix}.data-* files are missing"
    reason = str(error).strip().splitlines()[0][:200] if error is not None else "unreadable"
    return f"{', '.join(data)} cannot be read ({reason}; cut short?)"


def restore_for_training(
    checkpoint: tf.train.Checkpoint, output_dir: str, named: str = None, log=print, set_aside: bool = True
):
    """Restores the newest readable checkpoint of `output_dir` (or `named`, one of them); returns it or None.

    A checkpoint that cannot be read is skipped with a warning and its files are moved to
    `output_dir/set_aside/<time>/`, never deleted; so are, when `named` is given, the
    checkpoints after it, which the resumed run would otherwise overwrite step by step.
    Without `set_aside` (a process that does not write `output_dir`), nothing is moved and
    an unreadable checkpoint stops with CheckpointError.
    """
    listed = listed_checkpoints(output_dir)
    if named is not None:
        named = checkpoint_path(named)
        if os.path.dirname(os.path.abspath(named)) != os.path.abspath(output_dir):
            raise CheckpointError(
                f"--checkpoint_path={named}: not a checkpoint of --output_dir={output_dir}; "
                f"t2t-trainer resumes only a run of its own --output_dir."
            )
        later = [path for path in listed if checkpoint_step(path) > checkpoint_step(named)]
        if later and set_aside:
            _set_aside(output_dir, later, f"they come after --checkpoint_path={named}", log)
        listed = [path for path in listed if checkpoint_step(path) < checkpoint_step(named)] + [named]
    for path in reversed(listed):
        try:
            checkpoint.restore(path).assert_existing_objects_matched()
            return path
        except READ_ERRORS as error:
            if path == named or not set_aside:
                raise damaged(path, error) from None
            log(f"WARNING: {damage(path, error)}; skipped {os.path.basename(path)}, resuming from an earlier one.")
            _set_aside(output_dir, [path], "they cannot be read", log)
    if listed:
        raise CheckpointError(
            f"--output_dir={output_dir}: none of its checkpoints can be read (all moved to "
            f"{os.path.join(output_dir, SET_ASIDE)}); rerun to train from the start."
        )
    return None


def _set_aside(output_dir: str, prefixes: list, reason: str, log) -> None:
    """Moves checkpoints' files to output_dir/set_aside/<time>/ and drops them from the `checkpoint` list."""
    destination = os.path.join(output_dir, SET_ASIDE, time.strftime("%Y%m%d-%H%M%S"))
    tf.io.gfile.makedirs(destination)
    for prefix in prefixes:
        for path in tf.io.gfile.glob(prefix + ".*"):
            tf.io.gfile.rename(path, os.path.join(destination, os.path.basename(path)), overwrite=False)
    names = ", ".join(os.path.basename(prefix) for prefix in prefixes)
    log(f"Moved {names} to {destination}, as {reason}; delete them there once you no longer need them.")
    kept = [os.path.basename(path) for path in listed_checkpoints(output_dir) if path not in prefixes]
    if kept:
        write_checkpoint_list(output_dir, kept)
    else:
        tf.io.gfile.remove(os.path.join(output_dir, "checkpoint"))


def write_checkpoint_list(directory: str, names: list) -> None:
    """`directory`'s `checkpoint` file listing the checkpoints `names` (ckpt-<step>, the newest last).

    They are written relative to the directory, as CheckpointManager does, so it can be moved.
    TensorFlow takes the paths given for a relative directory as relative to the working
    directory (and rewrites them relative to it), for an absolute one as written.
    """
    given = [name if os.path.isabs(directory) else os.path.join(directory, name) for name in names]
    tf.compat.v1.train.update_checkpoint_state(directory, given[-1], all_model_checkpoint_paths=given)


def checkpoint_step(path: str) -> int:
    """The step number in a `.../ckpt-<step>` prefix."""
    match = re.search(r"-(\d+)$", path)
    if not match:
        raise CheckpointError(f"{path}: not named ckpt-<step>.")
    return int(match.group(1))


def build_model(hparams: HParams, vocab_size: int, model_name: str = "transformer"):
    """The registered model, with its variables created by one call on a dummy batch."""
    model = registry.model(model_name)(hparams, vocab_size)
    dummy = tf.ones([1, 2], tf.int32)
    model({"inputs": dummy, "targets": dummy}, training=False)
    return model


def restore_model(
    checkpoint_path_or_dir: str,
    hparams: HParams,
    vocab_size: int,
    model_name: str = "transformer",
    problem_name: str = None,
    vocabulary: str = None,
):
    """Builds the model and restores its weights only (no optimizer state) from a checkpoint.

    The problem.json beside the checkpoint (when there is one) must name the same problem
    (if `problem_name` is given), model, vocabulary size and vocabulary (if its fingerprint
    is given): a checkpoint restored under another vocabulary of the same size would decode
    garbage without any error.
    """
    path = checkpoint_path(checkpoint_path_or_dir)
    check_trained_with(os.path.dirname(path), problem_name, model_name, vocab_size, vocabulary)
    model = build_model(hparams, vocab_size, model_name)
    restore_weights(model, path)
    return model


def restore_weights(model, path: str) -> None:
    """Restores a checkpoint's weights (no optimizer state) into a built model, naming the file that fails."""
    try:
        status = tf.train.Checkpoint(model=trackable_model(model)).restore(path).expect_partial()
        status.assert_existing_objects_matched()
    except READ_ERRORS as error:
        raise damaged(path, error) from None
    except (ValueError, AssertionError) as error:
        reason = str(error).strip().splitlines()[0][:300]
        raise CheckpointError(
            f"{path}: its weights do not fit the model these hparams build ({reason}). Use the hparams it was "
            f"trained with: leave out --hparams_set and --hparams to read the hparams.json beside it."
        ) from None


def check_same_run(
    output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int, vocabulary: str = None
) -> None:
    """Stops a resumed run whose settings differ from those recorded in `output_dir`.

    Resuming under other hparams would either fail on the first weight's shape or, where
    the shapes agree (another dropout, another number of heads), train on silently and
    overwrite hparams.json, the only record of how the earlier steps were trained.
    """
    if tf.io.gfile.exists(os.path.join(output_dir, HPARAMS_FILE)):
        recorded = read_hparams(output_dir).values()
        changed = [
            f"{name} {recorded.get(name)!r} → {value!r}"
            for name, value in hparams.values().items()
            if recorded.get(name) != value
        ]
        if changed:
            raise CheckpointError(
                f"--output_dir={output_dir} holds a run trained with other hparams ({'; '.join(changed)}). "
                f"Resume it with the --hparams_set and --hparams of {os.path.join(output_dir, HPARAMS_FILE)}, "
                f"or give a new --output_dir."
            )
    check_trained_with(output_dir, problem_name, model_name, vocab_size, vocabulary)


def check_trained_with(model_dir: str, problem_name, model_name: str, vocab_size: int, vocabulary=None) -> None:
    """Stops when problem.json in `model_dir` records another problem, model, vocabulary size or vocabulary."""
    if not tf.io.gfile.exists(os.path.join(model_dir, PROBLEM_FILE)):
        return  # a checkpoint written by other code: the restore itself checks the shapes
    info = read_problem_info(model_dir)
    given = {
        "problem": (problem_name, "--problem"),
        "model": (model_name, "--model"),
        "vocab_size": (vocab_size, "--problem and --data_dir (the vocabulary)"),
        "vocabulary": (vocabulary, "--data_dir (whose vocab.*.model file)"),
    }
    for key, (value, flag) in given.items():
        if value is not None and key in info and info[key] != value:
            raise CheckpointError(
                f"{os.path.join(model_dir, PROBLEM_FILE)}: the checkpoint was trained with {key} {info[key]!r}, "
                f"not {value!r}; give the {flag} it was trained with, or another directory."
            )


# -- Listing, for t2t-avg-all and the trainer ---------------------------------------------
def all_checkpoints(model_dir: str) -> list:
    """The prefixes of every checkpoint listed in `model_dir`, by step, oldest first."""
    paths = listed_checkpoints(model_dir)
    if not paths:
        raise CheckpointError(f"--model_dir={model_dir}: no checkpoints found.")
    return paths
