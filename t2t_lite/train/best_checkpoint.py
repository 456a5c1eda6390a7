"""The best checkpoint by a dev metric, kept apart in `<output_dir>/best/` (keep-best, as fairseq and OpenNMT-tf).

Not the paper (§6.1 averages the last checkpoints); what a researcher who stops early keeps.
Whenever the trainer evaluates and the metric improves (`t2t_lite.train.early_stopping`),
the model's weights at that step are written to `best/ckpt-<step>` beside copies of
hparams.json and problem.json, with `best.json` = {metric, value, step, checkpoint}. The
checkpoint manager keeps only `ckpt-*` of `<output_dir>` itself, so `keep_checkpoint_max`
never removes it, and every tool that reads a checkpoint directory (t2t-decoder,
t2t-exporter, t2t-avg-all, t2t-translate-all) reads `best/` as it reads a run.

Replacing it is safe at any moment a process is killed, by the order of its writes:

  1. the new `ckpt-<step>` files (unlisted: no tool reads them yet);
  2. `best.json`, renamed into place: the decision, from now on the one a restart completes;
  3. the `checkpoint` list, renamed into place: from now on tools read the new weights;
  4. the previous checkpoint's files are removed.

A kill before 3 leaves the previous best listed and whole; the next write (or the trainer's
next start) completes 3 and 4 from best.json, and removes, saying so, what the kill left
unfinished: TensorFlow's staging directory `ckpt-<step>_temp/` of a write cut in 1, the files
of a checkpoint that best.json never named (`t2t_lite.run_dir.partial_writes`). A write that
fails (a full disk) removes its own files before the error goes on.
"""

import json
import os

import tensorflow as tf

from t2t_lite.run_dir import checkpoints, model_info, partial_writes

BEST_DIR = "best"
BEST_FILE = "best.json"


def best_dir(model_dir: str) -> str:
    return os.path.join(model_dir, BEST_DIR)


def keep(model, model_dir: str, metric: str, value: float, step: int) -> str:
    """Writes `model`'s weights as the best checkpoint of `model_dir`; returns its prefix."""
    directory = best_dir(model_dir)
    name = f"{checkpoints.CHECKPOINT_NAME}-{step}"
    record = _readable(model_dir)
    if record.get("checkpoint") == name and record.get("metric") == metric:
        complete(model_dir)  # a resumed run reached the same step again: the same weights
        return os.path.join(directory, name)
    tf.io.gfile.makedirs(directory)
    prefix = os.path.join(directory, name)
    weights = tf.train.Checkpoint(model=checkpoints.trackable_model(model))
    weights.save_counter  # created, so that it is written as in every other checkpoint restore_weights reads
    try:
        weights.write(prefix)
    except BaseException:
        partial_writes.remove_checkpoint(prefix)
        raise
    for info in (model_info.HPARAMS_FILE, model_info.PROBLEM_FILE):  # the same for the whole run
        if not tf.io.gfile.exists(os.path.join(directory, info)):
            with tf.io.gfile.GFile(os.path.join(model_dir, info)) as file:
                model_info.atomic_write(os.path.join(directory, info), file.read().rstrip("\n"))
    record = {"metric": metric, "value": value, "step": step, "checkpoint": name}
    model_info.atomic_write(os.path.join(directory, BEST_FILE), json.dumps(record, indent=2, sort_keys=True))
    complete(model_dir)
    return prefix


def complete(model_dir: str, log=print) -> None:
    """Finishes a replacement that best.json records: lists its checkpoint and removes the previous one's files;
    then removes, with a line, what an interrupted write left (`partial_writes.clean_checkpoint_dir`).

    A best.json that cannot be read (cut short, edited) is said and left as it is: best/ keeps the
    checkpoint its `checkpoint` list names, and the next best evaluation writes both afresh.
    """
    directory = best_dir(model_dir)
    if not tf.io.gfile.isdir(directory):
        return
    try:
        name = read(model_dir).get("checkpoint")
    except checkpoints.CheckpointError as error:
        log(f"WARNING: {error}")
        name = None
    listed = [os.path.basename(path) for path in checkpoints.listed_checkpoints(directory)]
    if name and tf.io.gfile.exists(os.path.join(directory, name + ".index")):
        if listed != [name]:
            checkpoints.write_checkpoint_list(directory, [name])
        for previous in listed:  # step 4: the best this one replaces
            if previous != name:
                partial_writes.remove_checkpoint(os.path.join(directory, previous))
    partial_writes.clean_checkpoint_dir(directory, "write of the best checkpoint", log, own_unlisted=True)


def read(model_dir: str) -> dict:
    """`best/best.json` of a run: {metric, value, step, checkpoint}, or {} when none is kept.

    CheckpointError names the file when it is not such a record.
    """
    path = os.path.join(best_dir(model_dir), BEST_FILE)
    try:
        record = model_info.json_object(path)
    except ValueError as error:
        raise _unreadable(path, error) from None
    if record and not isinstance(record.get("checkpoint"), str):
        raise _unreadable(path, "not a record of metric, value, step and checkpoint")
    return record


def _unreadable(path: str, why) -> checkpoints.CheckpointError:
    return checkpoints.CheckpointError(
        f"{path} cannot be read ({why}); best/ keeps the checkpoint its `checkpoint` file lists, and the next "
        f"best evaluation rewrites {BEST_FILE}."
    )


def _readable(model_dir: str) -> dict:
    try:
        return read(model_dir)
    except checkpoints.CheckpointError:
        return {}  # rewritten with the new best
