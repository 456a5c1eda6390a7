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

import json
import os
import re
import shutil

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


def write_model_info(output_dir: str, hparams: HParams, problem_name: str, model_name: str, vocab_size: int):
    """Writes hparams.json and problem.json beside the checkpoints (atomically)."""
    os.makedirs(output_dir, exist_ok=True)
    _atomic_write(os.path.join(output_dir, HPARAMS_FILE), hparams.to_json())
    info = {"problem": problem_name, "model": model_name, "vocab_size": int(vocab_size)}
    _atomic_write(os.path.join(output_dir, PROBLEM_FILE), json.dumps(info, indent=2, sort_keys=True))


def _atomic_write(path: str, text: str) -> None:
    temporary = f"{path}.tmp-{os.getpid()}"
    with open(temporary, "w") as file:
        file.write(text + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


# -- Reading, for the decoder, the exporter and t2t-avg-all ------------------------------
def read_hparams(model_dir: str) -> HParams:
    path = os.path.join(model_dir, HPARAMS_FILE)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: missing; it is written by t2t-trainer beside the checkpoints.")
    with open(path) as file:
        return HParams.from_json(file.read())


def read_problem_info(model_dir: str) -> dict:
    """{"problem": ..., "model": ..., "vocab_size": ...} as written by t2t-trainer."""
    path = os.path.join(model_dir, PROBLEM_FILE)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: missing; it is written by t2t-trainer beside the checkpoints.")
    with open(path) as file:
        return json.load(file)


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


def load_model(checkpoint_path_or_dir: str, hparams: HParams, vocab_size: int, model_name: str = "transformer"):
    """Builds the model and restores its weights only (no optimizer state) from a checkpoint."""
    path = checkpoint_path(checkpoint_path_or_dir)
    model = build_model(hparams, vocab_size, model_name)
    status = tf.train.Checkpoint(model=trackable_model(model)).restore(path).expect_partial()
    status.assert_existing_objects_matched()
    return model


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
    os.makedirs(output_dir, exist_ok=True)
    prefix = os.path.join(output_dir, f"{CHECKPOINT_NAME}-{checkpoint_step(paths[-1])}")
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors)
    # Recorded relative to output_dir, as CheckpointManager does, so the directory can be moved.
    relative = os.path.basename(prefix)
    tf.compat.v1.train.update_checkpoint_state(output_dir, relative, all_model_checkpoint_paths=[relative])
    for info_file in (HPARAMS_FILE, PROBLEM_FILE):
        source = os.path.join(model_dir, info_file)
        if os.path.exists(source):
            shutil.copyfile(source, os.path.join(output_dir, info_file))
    left_out = len(paths) < min(n, len(every))  # only ckpt-0 is ever skipped
    note = " (ckpt-0, the untrained initial weights, left out)" if left_out else ""
    print(f"Averaged {len(paths)} checkpoints ({', '.join(os.path.basename(p) for p in paths)}) into {prefix}{note}")
    return prefix


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
