"""Whole files or none: a small file written to `<path>.incomplete` and renamed over `path`.

The rename is atomic on one file system, so a reader, or a run after a kill, finds the old
file or the new one, never half of one. A write that fails (a full disk) or is interrupted
removes its `.incomplete` file, and its OSError names `path` (`naming`): Python's failed
write() names no file, which would leave the user's one-line message without one.
"""

import contextlib
import os


@contextlib.contextmanager
def naming(path: str):
    """Gives an OSError raised inside that names no file the name `path`."""
    try:
        yield
    except OSError as error:
        if error.filename is None and error.errno is not None:
            raise OSError(error.errno, error.strerror, path) from None
        raise


def write_whole(path: str, content) -> None:
    """Writes `content` (str: UTF-8 text; bytes) to `path` through `<path>.incomplete`."""
    partial = path + ".incomplete"
    binary = isinstance(content, bytes)
    try:
        with naming(path), open(partial, "wb" if binary else "w", encoding=None if binary else "utf-8") as file:
            file.write(content)
        os.replace(partial, path)
    except BaseException:
        if os.path.exists(partial):
            os.remove(partial)
        raise
