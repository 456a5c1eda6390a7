"""One writer per directory: a lock file that a second run on the same directory finds.

Two `t2t-trainer` runs on one `--output_dir` would each save `ckpt-<step>` there, one
run's checkpoints replacing the other's, and `t2t-avg-all` would then average a mix.
So a tool that writes a model directory first creates `<dir>/t2t.lock`, which names its
holder (tool, pid, host, start time), by a hard link that the file system grants to one
process only (as O_CREAT | O_EXCL), so the lock never exists without its holder. A second run stops at once, naming
that process and what to do.

A run that ends, or fails with an exception, removes its lock. One killed with
SIGKILL (or by a power cut) leaves it behind: a lock whose process no longer runs on
this host is stale, and the next run says so in one line and takes it over.

Remote directories (gs://, s3://, hdfs://) have no O_EXCL through TensorFlow's file
system, and the pid of a process on another host cannot be checked. There the lock is
written after a check that none exists (two runs starting within the same second can
both pass), and a lock left by a killed run on another host is not recognised as
stale: the message says which file to remove once that run is known to be gone.
"""

import contextlib
import datetime
import json
import os
import socket
import time

import tensorflow as tf

LOCK_FILE = "t2t.lock"
_WRITE_SECONDS = 10  # a lock file still empty after this long was left by a run killed while writing it


class DirectoryInUse(RuntimeError):
    """Another process holds the directory's lock."""


@contextlib.contextmanager
def directory_lock(directory: str, tool: str, log=print):
    """Holds `directory`'s lock for `tool` while the block runs; raises DirectoryInUse if another process has it."""
    path = os.path.join(directory, LOCK_FILE)
    mine = {
        "tool": tool,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }
    remote = "://" in directory
    created = not remote and not os.path.isdir(directory)
    tf.io.gfile.makedirs(directory)
    (_acquire_remote if remote else _acquire_local)(path, mine, log)
    try:
        yield path
    finally:
        _release(path, mine)
        if created and not os.listdir(directory):  # a run that stopped before writing leaves nothing behind
            os.rmdir(directory)


def _acquire_local(path: str, mine: dict, log) -> None:
    # A stale lock is moved out of the way and creation retried; twice is enough for one takeover.
    for _ in range(3):
        if _publish(path, mine):
            return
        holder = _read(path)
        if holder is None and not os.path.exists(path):  # released since: try again
            continue
        if holder is None and _seconds_since_written(path) < _WRITE_SECONDS:
            raise DirectoryInUse(
                f"{path}: another run is taking this directory at this moment; wait for "
                f"it to finish, or write to another directory."
            )
        if holder is not None and not _is_stale(holder):
            raise DirectoryInUse(_in_use_message(path, holder))
        _take_over(path, holder, log)
    raise DirectoryInUse(f"{path}: other runs keep taking this directory; wait for them, or write elsewhere.")


def _publish(path: str, mine: dict) -> bool:
    """Creates the lock with its holder already in it; False if a lock exists.

    The holder is written to a file of this process's own and hard-linked into place, which
    fails if the lock exists, as O_EXCL does; so a run that starts at the same instant reads a
    whole lock and can name its holder. A file system without hard links gets O_EXCL, where
    the lock is empty for the moment between its creation and its write.
    """
    staged = f"{path}.{os.getpid()}.new"
    try:
        with open(staged, "w") as file:
            file.write(json.dumps(mine) + "\n")
    except OSError as error:  # a full disk: nothing of the lock stays, and the error names the lock
        if os.path.exists(staged):
            os.remove(staged)
        raise OSError(error.errno, error.strerror, path) from None
    try:
        os.link(staged, path)
        return True
    except FileExistsError:
        return False
    except OSError:  # no hard links here
        return _create_exclusive(path, mine)
    finally:
        os.remove(staged)


def _create_exclusive(path: str, mine: dict) -> bool:
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w") as file:
        file.write(json.dumps(mine) + "\n")
    return True


def _take_over(path: str, stale: dict, log) -> None:
    """Removes a stale lock, unless another run replaced it meanwhile (then that lock is put back)."""
    moved = f"{path}.stale-{os.getpid()}"
    try:
        os.rename(path, moved)  # atomic: of several runs taking over, one moves it
    except FileNotFoundError:
        return
    if _read(moved) != stale:  # a run took the directory between our read and the rename: its lock goes back
        with contextlib.suppress(FileExistsError):
            os.link(moved, path)
    elif stale is None:
        log(f"{path}: unreadable lock file (a run killed while writing it); taking it over.")
    else:
        log(f"{path}: {_describe(stale)} no longer runs (killed?); taking its lock over.")
    os.remove(moved)


def _acquire_remote(path: str, mine: dict, log) -> None:
    if tf.io.gfile.exists(path):
        holder = _read(path)
        if holder is not None and not _is_stale(holder):
            raise DirectoryInUse(_in_use_message(path, holder))
        gone = f"{_describe(holder)} no longer runs (killed?)" if holder else "unreadable lock file"
        log(f"{path}: {gone}; taking it over.")
        tf.io.gfile.remove(path)
    with tf.io.gfile.GFile(path, "w") as file:
        file.write(json.dumps(mine) + "\n")


def _release(path: str, mine: dict) -> None:
    if _read(path) == mine:  # never remove a lock that another run took over
        tf.io.gfile.remove(path)


def _read(path: str):
    """The lock's holder, or None when the file is gone or was cut short."""
    try:
        with tf.io.gfile.GFile(path) as file:
            holder = json.loads(file.read())
    except (tf.errors.NotFoundError, FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return holder if isinstance(holder, dict) else None


def _seconds_since_written(path: str) -> float:
    try:
        return time.time() - os.path.getmtime(path)
    except FileNotFoundError:
        return _WRITE_SECONDS


def _is_stale(holder: dict) -> bool:
    """Whether the holder's process is known to be gone: only on this host can its pid be checked."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, run by another user
        return False
    return False


def _describe(holder: dict) -> str:
    return (
        f"{holder.get('tool', 'a t2t tool')} (pid {holder.get('pid')} on host {holder.get('host')}, "
        f"started {holder.get('started')})"
    )


def _in_use_message(path: str, holder: dict) -> str:
    directory = os.path.dirname(path)
    if holder.get("host") == socket.gethostname():
        gone = f"if you are sure it has stopped, remove {path}"
    else:
        gone = f"its host cannot be checked from here, so if you are sure that run has stopped, remove {path}"
    return (
        f"{directory} is in use by {_describe(holder)}. Wait for it to finish, or write to another directory; {gone}."
    )
