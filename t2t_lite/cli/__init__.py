"""The t2t-* command-line tools: each module parses absl flags and calls one library function.

Every tool imports this package before TensorFlow, so it is the one place that keeps them
quiet: a tool prints its own lines, warnings and errors, not TensorFlow's start-up log.
What TensorFlow 2.21 prints, and how each is kept out:

* C++ lines through TensorFlow's own logging (`cpu_feature_guard.cc`, `tf_record_dataset_op.cc`)
  honour TF_CPP_MIN_LOG_LEVEL, set here to 1 (no INFO).
* C++ lines through Abseil's logging (`port.cc` "oneDNN custom operations are on",
  `cudart_stub.cc` "Could not find cuda drivers", `cuda_platform.cc` "failed call to cuInit:
  ... UNKNOWN ERROR (303)", the "All log messages before absl::InitializeLog()" banner) ignore
  it: Abseil's threshold can only be set from C++, and they are written while the libraries
  load and when CUDA is first initialised. So the first `import tensorflow`, and the listing of
  devices that initialises CUDA, run with the process's stderr passed through a filter that
  drops Abseil INFO lines, that banner, and the cuInit error when no CUDA driver is installed
  (TensorFlow's pip package always tries CUDA; on such a machine the error only repeats
  "no GPU"). Every other line, an error with a driver installed among them, passes through.
* Python lines: absl's `app.run` raises its verbosity to INFO, which lets TensorFlow's INFO
  lines (`functional_saver.py` "Sharding callback duration") through; it goes back to absl's
  default, WARNING, and TensorFlow's Python logger (deprecation notes addressed to the
  developers of code that calls it) shows errors only.

`--verbosity` (`-v`), or TF_CPP_MIN_LOG_LEVEL set by the user, turns all of this off, so every
line comes back as TensorFlow and absl write it.
"""

import contextlib
import ctypes.util
import importlib.abc
import importlib.util
import logging
import os
import re
import sys
import threading

from absl import app, flags as absl_flags, logging as absl_logging

# Abseil's C++ format: severity letter, date (0000 before InitializeLog), time, thread, file:line].
_ABSL_INFO_LINE = re.compile(r"^I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] ")
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_NO_DRIVER_CUINIT = re.compile(r"^E\d{4} .*cuda_platform\.cc:\d+\] failed call to cuInit: ")


def _user_asked_for_logs() -> bool:
    verbosity = {"verbosity", "v"}
    given = any(arg.lstrip("-").split("=")[0] in verbosity for arg in sys.argv[1:] if arg.startswith("-"))
    return given or "TF_CPP_MIN_LOG_LEVEL" in os.environ


def _dropped(line: str, no_driver: bool) -> bool:
    return (line.rstrip("\n") == _ABSL_BANNER or bool(_ABSL_INFO_LINE.match(line))
            or (no_driver and bool(_NO_DRIVER_CUINIT.match(line))))


@contextlib.contextmanager
def _stderr_filtered():
    """The process's stderr (file descriptor 2, where C++ writes) passes through `_dropped` while the block runs.

    A thread forwards every other line at once, so nothing is held back if the block crashes.
    """
    no_driver = ctypes.util.find_library("cuda") is None
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward():
        with os.fdopen(read_end, errors="replace") as lines:
            for line in lines:
                if not _dropped(line, no_driver):
                    os.write(original, line.encode())

    forwarder = threading.Thread(target=forward, daemon=True)
    forwarder.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)  # closes the pipe's last write end: the forwarder reads to the end and stops
        forwarder.join()
        os.close(original)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs the first `import tensorflow` (and CUDA's initialisation) inside `_stderr_filtered`."""

    def find_spec(self, name, path, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once, and so that the real finder answers below
        spec = importlib.util.find_spec(name)
        if spec is None:  # not installed: Python's own error follows
            return None
        self.loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__spec__.loader = module.__loader__ = self.loader
        with _stderr_filtered():
            self.loader.exec_module(module)
            module.config.list_physical_devices()  # initialises CUDA now, while filtered


def _quiet_python_logs():
    """After absl parsed the flags: its default verbosity again, unless --verbosity was given."""
    if not absl_flags.FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.WARNING)
        logging.getLogger("tensorflow").setLevel(logging.ERROR)


if not _user_asked_for_logs():
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "1"
    if "tensorflow" not in sys.modules:
        sys.meta_path.insert(0, _QuietTensorFlowImport())
    app.call_after_init(_quiet_python_logs)
