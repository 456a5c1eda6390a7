"""A full disk for tests of writers (the `small_disk` fixture, tests/conftest.py, mounts one)."""

import os
import shutil


def fill(disk, leave: int = 0) -> str:
    """Fills `disk` up to `leave` bytes free with one file; returns its path, to remove when space is freed."""
    filler = os.path.join(disk, "filler")
    with open(filler, "wb") as file:
        try:
            while shutil.disk_usage(disk).free > leave:
                file.write(b"\0" * min(4096, max(shutil.disk_usage(disk).free - leave, 1)))
                file.flush()
        except OSError:
            pass
    return filler
