"""Partial writes: what a write killed or stopped half-way leaves, recognised by its name and removed.

Every writer of a model directory or an export writes under a name no reader takes for the
finished thing, and makes the result visible by one rename (atomic on one file system) or,
for a checkpoint, by rewriting the `checkpoint` list last. A kill at any moment therefore
leaves the old state or the new. What it leaves besides is one of these, removed at the next
start of the tool that writes there (which holds the directory's lock), in one line:

  ckpt-<step>_temp/           TensorFlow's staging directory of a checkpoint being written; it is
                              merged into ckpt-<step>.index and .data-* and removed as the write ends
  ckpt-<step>.index, .data-*  an unlisted checkpoint cut short (its .index or a .data shard missing):
                              every writer rewrites the `checkpoint` list after the files; an unlisted
                              whole one too where only the writer puts checkpoints (best/, an average's
                              directory), not in a run's directory, where a user may have put one to
                              resume from (the resumed run rewrites it when it reaches its step)
  <file>.tmp-<pid>            `model_info.atomic_write`'s temporary file, once process <pid> is gone
  .<step>.incomplete-<pid>/   an export's staging directory (`t2t_lite.serve`), once <pid> is gone

A writer that fails (a full disk) removes its own partial files the same way (`remove_checkpoint`),
and its error names what it was writing (`t2t_lite.data.whole_files.naming`).
"""

import os
import re

import tensorflow as tf

from t2t_lite.run_dir import checkpoints

_CHECKPOINT_FILE = re.compile(rf"^{checkpoints.CHECKPOINT_NAME}-(\d+)(\.index|\.data-\d+-of-\d+)$")
_CHECKPOINT_STAGING = re.compile(rf"^{checkpoints.CHECKPOINT_NAME}-\d+_temp$")
_TEMPORARY_FILE = re.compile(r"^.+\.tmp-(\d+)$")
_EXPORT_STAGING = re.compile(r"^\.\d+\.incomplete-(\d+)$")


def clean_checkpoint_dir(directory: str, writer: str, log=print, own_unlisted: bool = False) -> list:
    """Removes what an interrupted `writer` left in a checkpoint directory (see the module); returns the paths.

    `own_unlisted`: the directory holds only the writer's checkpoints, so an unlisted whole one is unfinished too.
    """
    if not tf.io.gfile.isdir(directory):
        return []
    listed = {checkpoints.checkpoint_step(path) for path in checkpoints.listed_checkpoints(directory)}
    names = sorted(name.rstrip("/") for name in tf.io.gfile.listdir(directory))
    unlisted = {}  # step: its file names
    left = []
    for name in names:
        checkpoint_file = _CHECKPOINT_FILE.match(name)
        temporary = _TEMPORARY_FILE.match(name)
        if checkpoint_file and int(checkpoint_file.group(1)) not in listed:
            unlisted.setdefault(int(checkpoint_file.group(1)), []).append(name)
        elif _CHECKPOINT_STAGING.match(name) or (temporary and not _running(int(temporary.group(1)))):
            left.append(name)
    for files in unlisted.values():
        if own_unlisted or not _whole(files):
            left.extend(files)
    left = [os.path.join(directory, name) for name in sorted(left)]
    _remove(left, writer, log)
    return left


def _whole(files: list) -> bool:
    """Whether one checkpoint's file names are an .index and every .data shard it names (-of-N)."""
    data = [name for name in files if ".data-" in name]
    shards = {name.rsplit("-of-", 1)[1] for name in data}
    return any(name.endswith(".index") for name in files) and len(shards) == 1 and len(data) == int(shards.pop())


def clean_export_dir(export_dir: str, writer: str, log=print) -> list:
    """Removes the staging directories of exports into `export_dir` whose process is gone; returns them."""
    if not os.path.isdir(export_dir):
        return []
    left = [
        os.path.join(export_dir, name)
        for name in sorted(os.listdir(export_dir))
        if _EXPORT_STAGING.match(name) and not _running(int(_EXPORT_STAGING.match(name).group(1)))
    ]
    _remove(left, writer, log)
    return left


def remove_checkpoint(prefix: str) -> None:
    """Removes every file of the checkpoint `prefix` and its staging directory: a write that failed."""
    for path in tf.io.gfile.glob(prefix + ".*") + tf.io.gfile.glob(prefix + "_temp"):
        _delete(path)


def remove_unlisted(prefix: str) -> None:
    """`remove_checkpoint(prefix)` unless its directory's `checkpoint` list names it (the write got that far)."""
    listed = checkpoints.listed_checkpoints(os.path.dirname(prefix))
    if checkpoints.checkpoint_step(prefix) not in {checkpoints.checkpoint_step(path) for path in listed}:
        remove_checkpoint(prefix)


def _remove(paths: list, writer: str, log) -> None:
    if not paths:
        return
    for path in paths:
        _delete(path)
    names = ", ".join(os.path.basename(path) for path in paths)
    log(f"Removed {names} from {os.path.dirname(paths[0])}: left unfinished by an interrupted {writer}.")


def _delete(path: str) -> None:
    if tf.io.gfile.isdir(path):
        tf.io.gfile.rmtree(path)
    elif tf.io.gfile.exists(path):
        tf.io.gfile.remove(path)


def _running(pid: int) -> bool:
    """Whether process `pid` exists here (a temporary file of a live writer is its own)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
