"""A kill -9 at a chosen call of a writer, for tests of partial writes: the disk as the kill leaves it.

A kill -9 runs no handler of the killed process: no `finally`, no `except`. So the test copies the directory the
writer writes at the moment the chosen call starts (what a kill then leaves on disk) and stops the writer with
`Killed`; the test then runs the next start on the copy, never on the directory whose writer's handlers ran.
"""

import json
import os
import shutil
import subprocess


class Killed(BaseException):
    """Where the kill struck (a BaseException, as KeyboardInterrupt: no `except Exception` of the writer takes it)."""


def kill_at(monkeypatch, owner, name: str, directory: str, snapshot: str, after_calls: int = 0) -> None:
    """Makes call number `after_calls` + 1 of `owner.name` copy `directory` to `snapshot` and raise Killed."""
    original = getattr(owner, name)
    calls = []

    def struck(*args, **kwargs):
        calls.append(1)
        if len(calls) <= after_calls:
            return original(*args, **kwargs)
        shutil.copytree(directory, snapshot, symlinks=True)
        _as_left_by_a_process_gone(snapshot)
        raise Killed

    monkeypatch.setattr(owner, name, struck)


def _as_left_by_a_process_gone(snapshot: str) -> None:
    """The copy names a process that has ended where it names this one, as the killed writer has: the holder of
    its directory lock (t2t.lock), and the names ending in -<pid> (staging directories, temporary files)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    lock = os.path.join(snapshot, "t2t.lock")
    if os.path.exists(lock):
        with open(lock) as file:
            holder = json.load(file)
        with open(lock, "w") as file:
            json.dump(dict(holder, pid=ended.pid), file)
    mine = f"-{os.getpid()}"
    for name in os.listdir(snapshot):
        if name.endswith(mine):
            os.rename(os.path.join(snapshot, name), os.path.join(snapshot, name[: -len(mine)] + f"-{ended.pid}"))
