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

§6.1: "For the base models, we used a single model obtained by averaging the last 5
checkpoints ... For the big models, we averaged the last 20 checkpoints."
`average_checkpoints` does that for `t2t-avg-all`.
"""

import dataclasses
import json
import os
import re

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_lite import registry
from t2t_lite.hparam import HParams

CHECKPOINT_NAME = "ckpt"
HPARAMS_FILE = "hparams.json"
PROBLEM_FILE = "problem.json"
_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


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


def write_model_info(output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int,
                     vocabulary: str = None):
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
        latest = tf.train.latest_checkpoint(checkpoint_path_or_dir)
        if latest is None:
            raise CheckpointError(
                f"{checkpoint_path_or_dir}: no checkpoint found (expected ckpt-<step>.index and a "
                f"'checkpoint' file written by t2t-trainer)."
            )
        return latest
    if not tf.io.gfile.exists(checkpoint_path_or_dir + ".index"):
        raise CheckpointError(f"{checkpoint_path_or_dir}: not a checkpoint (no {checkpoint_path_or_dir}.index).")
    return checkpoint_path_or_dir


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


def load_model(checkpoint_path_or_dir: str, hparams: HParams, vocab_size: int, model_name: str = "transformer",
               problem_name: str = None, vocabulary: str = None):
    """Builds the model and restores its weights only (no optimizer state) from a checkpoint.

    The problem.json beside the checkpoint (when there is one) must name the same problem
    (if `problem_name` is given), model, vocabulary size and vocabulary (if its fingerprint
    is given): a checkpoint restored under another vocabulary of the same size would decode
    garbage without any error.
    """
    path = checkpoint_path(checkpoint_path_or_dir)
    check_trained_with(os.path.dirname(path), problem_name, model_name, vocab_size, vocabulary)
    model = build_model(hparams, vocab_size, model_name)
    try:
        status = tf.train.Checkpoint(model=trackable_model(model)).restore(path).expect_partial()
        status.assert_existing_objects_matched()
    except (ValueError, AssertionError) as error:
        reason = str(error).strip().splitlines()[0][:300]
        raise CheckpointError(
            f"{path}: its weights do not fit the model these hparams build ({reason}). Use the hparams it was "
            f"trained with: leave out --hparams_set and --hparams to read the hparams.json beside it.") from None
    return model


def check_same_run(output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int,
                   vocabulary: str = None) -> None:
    """Stops a resumed run whose settings differ from those recorded in `output_dir`.

    Resuming under other hparams would either fail on the first weight's shape or, where
    the shapes agree (another dropout, another number of heads), train on silently and
    overwrite hparams.json, the only record of how the earlier steps were trained.
    """
    if tf.io.gfile.exists(os.path.join(output_dir, HPARAMS_FILE)):
        recorded = read_hparams(output_dir).values()
        changed = [f"{name} {recorded.get(name)!r} → {value!r}" for name, value in hparams.values().items()
                   if recorded.get(name) != value]
        if changed:
            raise CheckpointError(
                f"--output_dir={output_dir} holds a run trained with other hparams ({'; '.join(changed)}). "
                f"Resume it with the --hparams_set and --hparams of {os.path.join(output_dir, HPARAMS_FILE)}, "
                f"or give a new --output_dir.")
    check_trained_with(output_dir, problem_name, model_name, vocab_size, vocabulary)


def check_trained_with(model_dir: str, problem_name, model_name: str, vocab_size: int, vocabulary=None) -> None:
    """Stops when problem.json in `model_dir` records another problem, model, vocabulary size or vocabulary."""
    if not tf.io.gfile.exists(os.path.join(model_dir, PROBLEM_FILE)):
        return  # a checkpoint written by other code: the restore itself checks the shapes
    info = read_problem_info(model_dir)
    given = {"problem": (problem_name, "--problem"), "model": (model_name, "--model"),
             "vocab_size": (vocab_size, "--problem and --data_dir (the vocabulary)"),
             "vocabulary": (vocabulary, "--data_dir (whose vocab.*.model file)")}
    for key, (value, flag) in given.items():
        if value is not None and key in info and info[key] != value:
            raise CheckpointError(
                f"{os.path.join(model_dir, PROBLEM_FILE)}: the checkpoint was trained with {key} {info[key]!r}, "
                f"not {value!r}; give the {flag} it was trained with, or another directory.")


# -- Averaging, for t2t-avg-all ----------------------------------------------------------
def all_checkpoints(model_dir: str) -> list:
    """The prefixes of every checkpoint listed in `model_dir`, by step, oldest first."""
    state = tf.train.get_checkpoint_state(model_dir)
    if state is None or not state.all_model_checkpoint_paths:
        raise CheckpointError(f"--model_dir={model_dir}: no checkpoints found.")
    paths = [
        path if os.path.isabs(path) else os.path.join(model_dir, path)
        for path in state.all_model_checkpoint_paths
    ]
    return sorted(paths, key=checkpoint_step)


def last_checkpoints(model_dir: str, n: int) -> list:
    """The prefixes of the last `n` trained checkpoints in `model_dir`, by step, oldest first.

    The trainer saves ckpt-0, the initial random weights, so that a run restarted from
    scratch is exact; averaging it into a short run's checkpoints would pull the model
    towards noise, so it counts only when it is the only checkpoint.
    """
    return _last_trained(all_checkpoints(model_dir), n)


def _last_trained(paths: list, n: int) -> list:
    trained = [path for path in paths if checkpoint_step(path) > 0]
    return (trained or paths)[-n:]


def average_checkpoints(model_dir: str, output_dir: str, n: int) -> str:
    """Averages the model weights of the last `n` checkpoints of `model_dir` into `output_dir`.

    Every floating-point model variable becomes the mean over the checkpoints; everything
    else (the optimizer's state, the object graph) is copied from the newest, so the result
    loads like any other checkpoint. hparams.json and problem.json are copied beside it.
    Returns the new checkpoint's prefix, `output_dir/ckpt-<newest step>`.
    """
    if n < 1:
        raise ValueError(f"--n={n}: must be at least 1.")
    every = all_checkpoints(model_dir)
    paths = _last_trained(every, n)
    prefix = os.path.join(output_dir, f"{CHECKPOINT_NAME}-{checkpoint_step(paths[-1])}")
    _check_average_destination(model_dir, output_dir, prefix)
    readers = [tf.train.load_checkpoint(path) for path in paths]
    newest = readers[-1]
    model_keys = _model_variable_keys(newest)
    names, tensors = [], []
    for name, dtype in sorted(newest.get_variable_to_dtype_map().items()):
        value = newest.get_tensor(name)
        if name in model_keys and dtype.is_floating:
            value = np.mean([reader.get_tensor(name).astype(np.float64) for reader in readers], axis=0)
            value = tf.cast(value, dtype)
        names.append(name)
        tensors.append(tf.convert_to_tensor(value))
    tf.io.gfile.makedirs(output_dir)
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors)
    # Recorded relative to output_dir, as CheckpointManager does, so the directory can be moved;
    # earlier averages (of earlier steps) stay listed, the newest last, as tensor2tensor's avg/ does.
    relative = os.path.basename(prefix)
    state = tf.train.get_checkpoint_state(output_dir)
    earlier = [os.path.basename(path) for path in state.all_model_checkpoint_paths] if state else []
    tf.compat.v1.train.update_checkpoint_state(output_dir, relative, all_model_checkpoint_paths=earlier + [relative])
    for info_file in (HPARAMS_FILE, PROBLEM_FILE):
        source = os.path.join(model_dir, info_file)
        if tf.io.gfile.exists(source):
            tf.io.gfile.copy(source, os.path.join(output_dir, info_file), overwrite=True)
    left_out = len(paths) < min(n, len(every))  # only ckpt-0 is ever skipped
    note = " (ckpt-0, the untrained initial weights, left out)" if left_out else ""
    print(f"Averaged {len(paths)} checkpoints ({', '.join(os.path.basename(p) for p in paths)}) into {prefix}{note}")
    return prefix


def _check_average_destination(model_dir: str, output_dir: str, prefix: str) -> None:
    """Stops before anything is written where the average would replace a checkpoint or mix models."""
    if os.path.realpath(output_dir) == os.path.realpath(model_dir):
        raise CheckpointError(
            f"--output_dir={output_dir} is --model_dir: the average would replace the newest trained "
            f"checkpoint there. Give another directory, e.g. --output_dir={os.path.join(model_dir, 'avg')}.")
    if tf.io.gfile.exists(prefix + ".index"):
        raise CheckpointError(
            f"--output_dir={output_dir}: {os.path.basename(prefix)} exists already (an earlier average of the "
            f"same step). Remove it, or give another --output_dir.")
    for info_file in (HPARAMS_FILE, PROBLEM_FILE):
        mine, theirs = os.path.join(output_dir, info_file), os.path.join(model_dir, info_file)
        if tf.io.gfile.exists(mine) and tf.io.gfile.exists(theirs) and _read(mine) != _read(theirs):
            raise CheckpointError(
                f"--output_dir={output_dir}: its {info_file} differs from {theirs}, so it holds averages of "
                f"another model. Give another --output_dir.")


def _read(path: str) -> str:
    with tf.io.gfile.GFile(path) as file:
        return file.read()


def _model_variable_keys(reader) -> set:
    """Checkpoint keys of the variables reachable from the checkpoint's `model` child.

    Keys are named by the first path found to each variable, which for the model's weights
    may run through the optimizer (`optimizer/_trainable_variables/3/...`), so the object
    graph, not the key's spelling, says which variables belong to the model.
    """
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
    pending = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"]
    seen = set()
    while pending:
        node_id = pending.pop()
        if node_id not in seen:
            seen.add(node_id)
            pending.extend(child.node_id for child in graph.nodes[node_id].children)
    return {attribute.checkpoint_key for node_id in seen for attribute in graph.nodes[node_id].attributes}
