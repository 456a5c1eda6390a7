"""Checkpoints in `--output_dir`: writing, listing, damaged ones, and resuming (§5, §6.1).

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
that reads (`restore_for_training`). hparams.json and problem.json, and the model they build,
are `t2t_lite.run_dir.model_info`'s; averaging (§6.1) is `t2t_lite.run_dir.averaging`'s.
"""

import dataclasses
import os
import re
import time

import tensorflow as tf

CHECKPOINT_NAME = "ckpt"
SET_ASIDE = "set_aside"  # where the trainer moves checkpoints it cannot read or must not overwrite


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


# -- Finding checkpoints, for the decoder, the exporter and t2t-avg-all ---------------------


def checkpoint_path(checkpoint_path_or_dir: str, flag: str = "--checkpoint_path") -> str:
    """A checkpoint prefix as given, or the latest one in a directory (`flag`: how the user gave it)."""
    if tf.io.gfile.isdir(checkpoint_path_or_dir):
        state = tf.train.get_checkpoint_state(checkpoint_path_or_dir)
        if state is None or not state.model_checkpoint_path:
            raise CheckpointError(
                f"{checkpoint_path_or_dir}: no checkpoint found (expected ckpt-<step>.index and a "
                f"'checkpoint' file written by t2t-trainer)."
            )
        latest = state.model_checkpoint_path
        if not tf.io.gfile.exists(latest + ".index"):
            raise damaged(latest, None, flag=flag)
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


# A checkpoint's .index is a LevelDB-style table: it ends with a 48-byte footer whose last 8 bytes are
# this magic number, so a cut one is told from a cut .data file without reading either.
INDEX_FOOTER_LENGTH = 48
INDEX_MAGIC = bytes.fromhex("57fb808b247547db")


def _index_is_whole(index_path: str) -> bool:
    with tf.io.gfile.GFile(index_path, "rb") as file:
        size = file.size()
        if size < INDEX_FOOTER_LENGTH:
            return False
        file.seek(size - len(INDEX_MAGIC))
        return file.read(len(INDEX_MAGIC)) == INDEX_MAGIC


def damaged(prefix: str, error, what: str = "", flag: str = "--checkpoint_path") -> CheckpointError:
    """The error for a checkpoint that cannot be read: which file, and how to pick another one with `flag`."""
    older = [
        path
        for path in listed_checkpoints(os.path.dirname(prefix))
        if checkpoint_step(path) < checkpoint_step(prefix) and tf.io.gfile.exists(path + ".index")
    ]
    example = f"{flag}={older[-1]}" if older else f"{flag}=<another ckpt-N>"
    return CheckpointError(
        f"{damage(prefix, error)}, so {os.path.basename(prefix)} is damaged. Pick another "
        f"checkpoint with {example}{' (' + what + ')' if what else ''}."
    )


def damage(prefix: str, error) -> str:
    """What is wrong with the files of checkpoint `prefix`, naming them."""
    if not tf.io.gfile.exists(prefix + ".index"):
        return f"{prefix}.index is missing"
    if not _index_is_whole(prefix + ".index"):
        return f"{prefix}.index is cut short (it lacks the footer every checkpoint index ends with)"
    data = sorted(tf.io.gfile.glob(prefix + ".data-*"))
    if not data:
        return f"{prefix}.data-* files are missing"
    reason = str(error).strip().splitlines()[0][:200] if error is not None else "unreadable"
    return f"{', '.join(data)} cannot be read ({reason}; cut short?)"


def restore_for_training(
    checkpoint: tf.train.Checkpoint,
    output_dir: str,
    named: str = None,
    log=print,
    set_aside: bool = True,
    optional: dict = None,
):
    """Restores the newest readable checkpoint of `output_dir` (or `named`, one of them); returns it or None.

    A checkpoint that cannot be read is skipped with a warning and its files are moved to
    `output_dir/set_aside/<time>/`, never deleted; so are, when `named` is given, the
    checkpoints after it, which the resumed run would otherwise overwrite step by step.
    Without `set_aside` (a process that does not write `output_dir`), nothing is moved and
    an unreadable checkpoint stops with CheckpointError.
    `optional` {name: trackable}: parts of the checkpoint that runs written by earlier versions
    lack; restored when the checkpoint holds them, and saved from now on either way.
    """
    optional = optional or {}
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
            _restore(checkpoint, path, optional)
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
    _restore(checkpoint, None, optional)
    return None


def _restore(checkpoint: tf.train.Checkpoint, path, optional: dict) -> None:
    """Restores `path` (None: nothing) into `checkpoint`, and then `optional`'s parts that it holds."""
    if path is not None:
        checkpoint.restore(path).assert_existing_objects_matched()
        held = tf.train.load_checkpoint(path).get_variable_to_shape_map()
    for name, part in optional.items():
        if path is not None and any(key.startswith(name + "/") for key in held):
            tf.train.Checkpoint(**{name: part}).restore(path).expect_partial().assert_existing_objects_matched()
        setattr(checkpoint, name, part)


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


def restore_weights(model, path: str, flag: str = "--checkpoint_path") -> None:
    """Restores a checkpoint's weights (no optimizer state) into a built model, naming the file that fails."""
    try:
        status = tf.train.Checkpoint(model=trackable_model(model)).restore(path).expect_partial()
        status.assert_existing_objects_matched()
    except READ_ERRORS as error:
        raise damaged(path, error, flag=flag) from None
    except (ValueError, AssertionError) as error:
        reason = str(error).strip().splitlines()[0][:300]
        raise CheckpointError(
            f"{path}: its weights do not fit the model these hparams build ({reason}). Use the hparams it was "
            f"trained with: leave out --hparams_set and --hparams to read the hparams.json beside it."
        ) from None


# -- Listing, for t2t-avg-all and the trainer ---------------------------------------------
def all_checkpoints(model_dir: str) -> list:
    """The prefixes of every checkpoint listed in `model_dir`, by step, oldest first."""
    paths = listed_checkpoints(model_dir)
    if not paths:
        raise CheckpointError(f"--model_dir={model_dir}: no checkpoints found.")
    return paths
