"""Checkpoint averaging (§6.1), for `t2t-avg-all`.

§6.1: "For the base models, we used a single model obtained by averaging the last 5
checkpoints, which were written at 10-minute intervals. For the big models, we averaged
the last 20 checkpoints." `average_checkpoints` does that: every floating-point model
weight becomes the mean over the checkpoints, and the result is a checkpoint like any other.

An average is written as the trainer writes a checkpoint: hparams.json and problem.json
first (renamed into place), then the checkpoint's files, then the `checkpoint` list that
makes it visible. A process killed or stopped at any moment leaves the earlier averages
listed and whole; what it wrote of the new one is unlisted, and the next run removes it,
saying so, and writes it again (`t2t_lite.run_dir.partial_writes`). A write that fails
(a full disk) removes its own files.
"""

import os

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_lite.run_dir import checkpoints, model_info, partial_writes

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def last_checkpoints(model_dir: str, n: int, min_step: int = 0) -> list:
    """The prefixes of the last `n` checkpoints in `model_dir` that `chosen_checkpoints` keeps, oldest first."""
    return chosen_checkpoints(checkpoints.all_checkpoints(model_dir), n, min_step)[0]


def chosen_checkpoints(paths: list, n: int, min_step: int = 0) -> tuple:
    """(the last `n` of `paths` worth averaging, [(path, why)] for those of the last `n` left out), oldest first.

    Left out, each with its reason:
    * ckpt-0, the initial random weights the trainer saves so that a run restarted from scratch
      is exact: averaged into a short run's checkpoints it pulls the model towards noise;
    * checkpoints before `min_step` (t2t-avg-all: the end of eq. 3's warm-up), whose weights are
      far from the trained ones while the learning rate is still rising;
    * a periodic checkpoint that the run's final checkpoint follows within half the usual
      interval (a run stopped by the clock just after a save): the two are nearly one model,
      which would count twice.
    When nothing is left, the newest checkpoint alone is the result.
    """
    left_out = [(path, "the untrained initial weights") for path in paths if checkpoints.checkpoint_step(path) == 0]
    left_out += [
        (path, f"before --min_steps={min_step}") for path in paths if 0 < checkpoints.checkpoint_step(path) < min_step
    ]
    dropped = {path for path, _ in left_out}
    kept = [path for path in paths if path not in dropped]
    near = _near_duplicate(kept)
    if near:
        left_out.append((near, f"{_gap(near, kept[-1]):,} update(s) before the final {os.path.basename(kept[-1])}"))
        kept.remove(near)
    if not kept:
        kept, left_out = paths[-1:], [item for item in left_out if item[0] != paths[-1]]
    chosen = kept[-n:]
    return chosen, [(path, why) for path, why in sorted(left_out, key=_step_of_first) if path in paths[-n:]]


def _step_of_first(item: tuple) -> int:
    return checkpoints.checkpoint_step(item[0])


def _near_duplicate(paths: list):
    """The checkpoint before the newest when the newest follows it within half the usual interval, else None."""
    if len(paths) < 3:
        return None
    steps = [checkpoints.checkpoint_step(path) for path in paths]
    usual = sorted(b - a for a, b in zip(steps[:-1], steps[1:-1]))
    usual = usual[len(usual) // 2]
    return paths[-2] if 2 * (steps[-1] - steps[-2]) < usual else None


def _gap(older: str, newer: str) -> int:
    return checkpoints.checkpoint_step(newer) - checkpoints.checkpoint_step(older)


def average_checkpoints(model_dir: str, output_dir: str, n: int, newest: str = None, min_step: int = 0) -> str:
    """Averages the model weights of the last `n` checkpoints of `model_dir` (up to `newest`) into `output_dir`.

    Which checkpoints count: `chosen_checkpoints` (ckpt-0, steps before `min_step` and a periodic
    checkpoint the final one nearly duplicates are left out, and named in the line printed).

    Every floating-point model variable becomes the mean over the checkpoints; everything
    else (the optimizer's state, the object graph) is copied from the newest, so the result
    loads like any other checkpoint. hparams.json and problem.json are copied beside it.
    Returns the new checkpoint's prefix, `output_dir/ckpt-<newest step>`.
    """
    if n < 1:
        raise ValueError(f"--n={n}: must be at least 1.")
    every = _up_to(checkpoints.all_checkpoints(model_dir), newest)
    paths, left_out = chosen_checkpoints(every, n, min_step)
    prefix = os.path.join(output_dir, f"{checkpoints.CHECKPOINT_NAME}-{checkpoints.checkpoint_step(paths[-1])}")
    _check_not_model_dir(model_dir, output_dir)
    partial_writes.clean_checkpoint_dir(output_dir, "t2t-avg-all", own_unlisted=True)
    _check_average_destination(model_dir, output_dir, prefix)
    names, tensors = _averaged_tensors(paths)
    tf.io.gfile.makedirs(output_dir)
    for info_file in (model_info.HPARAMS_FILE, model_info.PROBLEM_FILE):  # first: a listed average has them beside it
        source = os.path.join(model_dir, info_file)
        if tf.io.gfile.exists(source):
            model_info.atomic_write(os.path.join(output_dir, info_file), _read(source).rstrip("\n"))
    # Recorded relative to output_dir, as CheckpointManager does, so the directory can be moved;
    # earlier averages (of earlier steps) stay listed, the newest last, as tensor2tensor's avg/ does.
    state = tf.train.get_checkpoint_state(output_dir)
    earlier = [os.path.basename(path) for path in state.all_model_checkpoint_paths] if state else []
    try:
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=tensors)
        checkpoints.write_checkpoint_list(output_dir, earlier + [os.path.basename(prefix)])
    except BaseException:
        partial_writes.remove_unlisted(prefix)
        raise
    plural = "" if len(paths) == 1 else "s"
    print(f"Averaged {len(paths)} checkpoint{plural} ({', '.join(os.path.basename(p) for p in paths)}) into {prefix}")
    if left_out:
        print("Left out: " + "; ".join(f"{os.path.basename(path)} ({why})" for path, why in left_out))
    return prefix


def _up_to(paths: list, newest: str) -> list:
    """The listed checkpoints up to `newest` (--checkpoint_path), or all of them."""
    if newest is None:
        return paths
    newest = checkpoints.checkpoint_path(newest)
    if newest not in paths:
        raise checkpoints.CheckpointError(
            f"--checkpoint_path={newest}: not listed in --model_dir's 'checkpoint' file; give one of "
            f"{', '.join(os.path.basename(path) for path in paths)}."
        )
    return [path for path in paths if checkpoints.checkpoint_step(path) <= checkpoints.checkpoint_step(newest)]


def _averaged_tensors(paths: list):
    """(names, tensors): model weights averaged over `paths`, everything else from the newest."""
    readers = [_Reader(path) for path in paths]
    newest = readers[-1]
    model_keys = _model_variable_keys(newest)
    names, tensors = [], []
    for name, dtype in sorted(newest.dtypes().items()):
        value = newest.tensor(name)
        if name in model_keys and dtype.is_floating:
            value = tf.cast(np.mean([reader.tensor(name).astype(np.float64) for reader in readers], axis=0), dtype)
        names.append(name)
        tensors.append(tf.convert_to_tensor(value))
    return names, tensors


class _Reader:
    """A checkpoint's tensors; a file that cannot be read stops with its name and how to pick others."""

    def __init__(self, path: str):
        self.path = path
        self.reader = self._reading(lambda: tf.train.load_checkpoint(path))

    def dtypes(self) -> dict:
        return self._reading(self.reader.get_variable_to_dtype_map)

    def tensor(self, name: str) -> np.ndarray:
        return self._reading(lambda: self.reader.get_tensor(name))

    def _reading(self, read):
        try:
            return read()
        except checkpoints.READ_ERRORS as error:
            raise checkpoints.damaged(self.path, error, "the newest to average; or lower --n") from None


def _check_not_model_dir(model_dir: str, output_dir: str) -> None:
    """Stops before anything is written (or cleaned) where the average would replace a trained checkpoint."""
    if os.path.realpath(output_dir) == os.path.realpath(model_dir):
        raise checkpoints.CheckpointError(
            f"--output_dir={output_dir} is --model_dir: the average would replace the newest trained "
            f"checkpoint there. Give another directory, e.g. --output_dir={os.path.join(model_dir, 'avg')}."
        )


def _check_average_destination(model_dir: str, output_dir: str, prefix: str) -> None:
    """Stops before anything is written where the average would replace an earlier average or mix models."""
    if tf.io.gfile.exists(prefix + ".index"):
        raise checkpoints.CheckpointError(
            f"--output_dir={output_dir}: {os.path.basename(prefix)} exists already (an earlier average of the "
            f"same step). Remove it, or give another --output_dir."
        )
    # A damaged record would be copied beside the average, to stop the tool that reads it later.
    for info_file, read in (
        (model_info.HPARAMS_FILE, model_info.read_hparams),
        (model_info.PROBLEM_FILE, model_info.read_problem_info),
    ):
        if tf.io.gfile.exists(os.path.join(model_dir, info_file)):
            read(model_dir)
    for info_file in (model_info.HPARAMS_FILE, model_info.PROBLEM_FILE):
        mine, theirs = os.path.join(output_dir, info_file), os.path.join(model_dir, info_file)
        if tf.io.gfile.exists(mine) and tf.io.gfile.exists(theirs) and _read(mine) != _read(theirs):
            raise checkpoints.CheckpointError(
                f"--output_dir={output_dir}: its {info_file} differs from {theirs}, so it holds averages of "
                f"another model. Give another --output_dir."
            )


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
    graph.ParseFromString(reader.tensor(_OBJECT_GRAPH_KEY))
    pending = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"]
    seen = set()
    while pending:
        node_id = pending.pop()
        if node_id not in seen:
            seen.add(node_id)
            pending.extend(child.node_id for child in graph.nodes[node_id].children)
    return {attribute.checkpoint_key for node_id in seen for attribute in graph.nodes[node_id].attributes}
