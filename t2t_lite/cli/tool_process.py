"""A t2t-* tool's process: quiet stderr, oneDNN kernels, Keras without matplotlib, one line at a signal.

`prepare()` makes the running process a tool's; `t2t_lite.cli.entry_points` calls it first, before
it imports the tool's module and with it TensorFlow. Importing this module changes nothing.

A tool is quiet by default: it prints its own lines, warnings and errors, not the log of
the libraries under it. What TensorFlow 2.21 and tensorflow-text print, and how each is kept out:

* C++ lines through TensorFlow's own logging (`cpu_feature_guard.cc`, `tf_record_dataset_op.cc`)
  honour TF_CPP_MIN_LOG_LEVEL, which `prepare` sets to 1 (no INFO).
* C++ lines that no setting reaches are dropped by the filter below (`_dropped`):
  - Abseil's INFO lines (`port.cc` "oneDNN custom operations are on", `cudart_stub.cc` "Could
    not find cuda drivers") and its "All log messages before absl::InitializeLog()" banner:
    Abseil's threshold can only be set from C++;
  - `cuda_platform.cc` "failed call to cuInit: ... UNKNOWN ERROR (303)" when no CUDA driver is
    installed (TensorFlow's pip package always tries CUDA; on such a machine the error only
    repeats "no GPU"); with a driver installed it is news and passes;
  - tf.data's `root_dataset.cc` "Optimization loop failed: CANCELLED: Operation was cancelled",
    a warning its autotuning thread writes when the iterator it tunes is closed while it runs (a
    pipeline read to its end or closed on purpose, more often on a busy machine): nothing failed
    that the run needed;
  - `util.cc` "oneDNN supports DT_INT8 only on platforms with AVX-512. Falling back to the default
    Eigen-based implementation if present.", written when an int8 model (`quantize=int8`) is first
    run, on AVX-512 CPUs too: the tool's own note (`quantization.speed_note`) says when int8 is
    slower than float32 here, and why;
  - SentencePiece's INFO lines (`normalizer.cc(51) LOG(INFO) precompiled_charsmap is empty. use
    identity normalization.`), written each time tensorflow-text's SentencePiece op loads one of
    our identity-normalised vocabularies (t2t-datagen, t2t-exporter): the op carries its own copy
    of SentencePiece, which `sentencepiece.set_min_log_level` does not reach.
* Python lines: absl's `app.run` raises its verbosity to INFO, which lets TensorFlow's INFO
  lines (`functional_saver.py` "Sharding callback duration") through; it goes back to absl's
  default, WARNING, and TensorFlow's Python logger (deprecation notes addressed to the
  developers of code that calls it) shows errors only.

The filter covers the whole run. From `prepare` on, file descriptor 2 (the stderr that C++
and Python write to) becomes a pipe read by a small forked process, which copies every line
to the real stderr unless `_dropped` says it is one of those above. Every other line (the
tool's own, warnings, errors, tracebacks) passes as written, byte for byte and in order; a
line still unfinished after `_UNFINISHED_LINE_WAIT_S` (a progress bar redrawn with "\\r") is
shown as far as it goes. Being a process of its own, the filter reads the pipe to its end
however the tool stops: a normal exit or an exception (the tool then waits for it, so its last
lines come before the shell's prompt), `os._exit` (`distribution.leave_cluster`), a crash
(C++'s fatal message included) or a kill. It ignores Ctrl-C and SIGTERM (a terminal or a job
manager signals the tool's whole process group) and ends when the last writer of the pipe
has closed it. Stdout is left alone: nothing TensorFlow-side is written there.

`--verbosity` (`-v`), or TF_CPP_MIN_LOG_LEVEL=0 set by the user, turns all of this off, so every
line comes back as TensorFlow, tensorflow-text and absl write it. A level the user sets to 1 or more
asks for fewer lines: it is kept, and so is the filter (Abseil's INFO lines ignore that variable).

A tool also runs TensorFlow's oneDNN kernels on every x86-64 CPU, where TensorFlow alone runs
Eigen's on CPUs without VNNI, AVX-512 BF16 or AMX (`cpu_features.use_onednn_kernels`: on such a
CPU a transformer_base beam-4 decode takes about half the time; docs/benchmarks.md, Decoding);
TF_ENABLE_ONEDNN_OPTS set by the user wins.

Keras' visualization helpers (image galleries), which no tool calls, import matplotlib as Keras
loads: nearly a second of every tool's start. In a tool's process those imports are refused
(`_NoMatplotlibForKerasVisualization`, installed by `prepare`; Keras catches the ImportError and
leaves its helpers without matplotlib), so a tool that draws (attention pictures, BLEU over steps)
is the only one that loads it.
"""

import atexit
import ctypes.util
import errno
import importlib.abc
import logging
import os
import re
import select
import shutil
import signal
import sys
import time

from absl import app
from absl import flags as absl_flags
from absl import logging as absl_logging

from t2t_lite import cpu_features

# Abseil's C++ format: severity letter, date (0000 before InitializeLog), time, thread, file:line].
_ABSL_INFO_LINE = re.compile(r"^I\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [\w.]+:\d+\] ")
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_NO_DRIVER_CUINIT = re.compile(r"^E\d{4} .*cuda_platform\.cc:\d+\] failed call to cuInit: ")
_AUTOTUNE_CANCELLED = re.compile(r"^W\d{4} .*root_dataset\.cc:\d+\] Optimization loop failed: CANCELLED: ")
_ONEDNN_INT8_FALLBACK = re.compile(
    r"^E\d{4} .*util\.cc:\d+\] oneDNN supports DT_INT8 only on platforms with AVX-512\. Falling back to the "
    r"default Eigen-based implementation if present\.$"
)
# SentencePiece's C++ format: file(line) LOG(severity) message.
_SENTENCEPIECE_INFO_LINE = re.compile(r"^[\w./-]+\.cc\(\d+\) LOG\(INFO\) ")
# SentencePiece writes one line in several pieces (std::cerr), microseconds apart; a progress
# bar redrawn on one line is shown at least this often.
_UNFINISHED_LINE_WAIT_S = 0.25
# At exit the tool waits this long at most for the filter: a process it started may still hold the pipe.
_EXIT_WAIT_S = 2.0
_filter_at_exit = []  # (filter pid, the real stderr, the tool's pid) once stderr goes through the filter


def prepare() -> None:
    """Makes this process a tool's (see the module's docstring); call it before TensorFlow is imported.

    oneDNN's switch and TF_CPP_MIN_LOG_LEVEL are read as TensorFlow loads, and the stderr filter is forked
    while no thread of TensorFlow's runs. A second call changes nothing.
    """
    if any(type(finder) is _NoMatplotlibForKerasVisualization for finder in sys.meta_path):
        return
    cpu_features.use_onednn_kernels()
    sys.meta_path.insert(0, _NoMatplotlibForKerasVisualization())
    if not _user_asked_for_logs():
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # a user's 2 or 3 stands: fewer lines still
        _filter_stderr_until_exit()
        app.call_after_init(_quiet_python_logs)


class _NoMatplotlibForKerasVisualization(importlib.abc.MetaPathFinder):
    """Refuses matplotlib to a module of keras.src.visualization while that module loads; finds nothing else."""

    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "matplotlib" and any(
            getattr(module.__spec__, "_initializing", False)
            for loading, module in list(sys.modules.items())
            if loading.startswith("keras.src.visualization.") and getattr(module, "__spec__", None)
        ):
            raise ImportError(f"{name} is not loaded for Keras' visualization helpers in a t2t-* tool")
        return None


def _user_asked_for_logs() -> bool:
    """--verbosity, or TF_CPP_MIN_LOG_LEVEL=0 (below the tools' 1: INFO too); a level of 1 or more asks for less."""
    verbosity = {"verbosity", "v"}
    given = any(arg.lstrip("-").split("=")[0] in verbosity for arg in sys.argv[1:] if arg.startswith("-"))
    return given or os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() == "0"


def _dropped(line: str, no_driver: bool) -> bool:
    return (
        line.rstrip("\n") == _ABSL_BANNER
        or bool(_ABSL_INFO_LINE.match(line))
        or bool(_SENTENCEPIECE_INFO_LINE.match(line))
        or bool(_AUTOTUNE_CANCELLED.match(line))
        or bool(_ONEDNN_INT8_FALLBACK.match(line.rstrip("\n")))
        or (no_driver and bool(_NO_DRIVER_CUINIT.match(line)))
    )


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


def _forward(read_end: int, no_driver: bool) -> None:
    """Copies the pipe to file descriptor 2 line by line, leaving out the `_dropped` ones, until it ends."""
    unfinished, show_by = b"", 0.0
    while True:
        if unfinished:
            wait = show_by - time.monotonic()
            if wait <= 0 or not select.select([read_end], [], [], wait)[0]:
                _write_all(2, unfinished)
                unfinished = b""
                continue
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        *lines, rest = (unfinished + chunk).split(b"\n")
        _write_all(
            2, b"".join(line + b"\n" for line in lines if not _dropped(line.decode(errors="replace"), no_driver))
        )
        if rest and (lines or not unfinished):  # a new line begins: it is shown whole, or by then
            show_by = time.monotonic() + _UNFINISHED_LINE_WAIT_S
        unfinished = rest
    _write_all(2, unfinished)


def _filter_stderr_until_exit() -> None:
    """Starts the filter process and points file descriptor 2 at it (see the module's docstring)."""
    read_end, write_end = os.pipe()
    sys.stderr.flush()
    filter_pid = os.fork()  # no thread runs yet: `prepare` comes before TensorFlow is imported
    if filter_pid == 0:
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            # Only the pipe's read end and the real stderr stay open: the filter sees the pipe end
            # once the tool's copies of the write end are closed, and the tool's other files (its
            # stdout read by a caller) close when the tool exits.
            os.dup2(os.open(os.devnull, os.O_RDWR), 0)
            os.dup2(0, 1)
            os.closerange(3, read_end)
            os.closerange(read_end + 1, os.sysconf("SC_OPEN_MAX"))
            # Asked here, not in the tool: find_library runs ldconfig, tens of milliseconds.
            _forward(read_end, no_driver=ctypes.util.find_library("cuda") is None)
        finally:
            os._exit(0)
    os.close(read_end)
    real_stderr = os.dup(2)
    os.dup2(write_end, 2)
    os.close(write_end)
    _filter_at_exit.extend([filter_pid, real_stderr, os.getpid()])
    atexit.register(_finish_filter, *_filter_at_exit)


def exit_at_once(code: int) -> None:
    """Ends the tool now with exit status `code`, without the interpreter's teardown, once stderr's filter
    has forwarded every line.

    For a TF_CONFIG worker whose cluster lost a member: everything of the run is on disk by then
    (checkpoints are written synchronously, the directory lock released), and TensorFlow's teardown of
    the strategy would wait on the lost worker's heartbeats for seconds (tensorflow/tensorflow#58434)
    before a job manager could see this worker stop too.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    if _filter_at_exit:
        _finish_filter(*_filter_at_exit)
    os._exit(code)


def _finish_filter(filter_pid: int, real_stderr: int, tool_pid: int) -> None:
    """At exit: the tool's end of the pipe closes, and the filter forwards what is left in it and ends."""
    if os.getpid() != tool_pid:  # a process forked from the tool, exiting: the filter is not its to wait for
        return
    sys.stderr.flush()
    os.dup2(real_stderr, 2)
    os.close(real_stderr)
    deadline = time.monotonic() + _EXIT_WAIT_S
    while os.waitpid(filter_pid, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.005)


def _quiet_python_logs():
    """After absl parsed the flags: its default verbosity again, unless --verbosity was given."""
    if not absl_flags.FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.WARNING)
        logging.getLogger("tensorflow").setLevel(logging.ERROR)


class _Terminated(BaseException):
    """SIGTERM, raised where the tool is, as Ctrl-C raises KeyboardInterrupt."""


def _raise_terminated(number, frame):
    raise _Terminated


def run_tool(main) -> None:
    """absl's `app.run(main)`, where Ctrl-C (SIGINT) or SIGTERM ends the tool with one line, not a traceback,
    and so does a full disk (`disk_full_message`).

    The exit status is 128 + the signal's number (130, 143), as a shell reports a process a signal
    ended; 1 for a full disk. t2t-trainer's training loop handles both signals itself
    (`t2t_lite.train.interruption`): it saves the step reached first. Each writer removes its own
    partial files as the error passes (`t2t_lite.run_dir.partial_writes`), so a rerun once space is
    freed continues from the last complete state.
    """
    signal.signal(signal.SIGTERM, _raise_terminated)
    tool = os.path.basename(sys.argv[0])
    try:
        app.run(main)
    except (KeyboardInterrupt, _Terminated) as stop:
        number = signal.SIGTERM if isinstance(stop, _Terminated) else signal.SIGINT
        print(f"{tool}: stopped by {number.name} before it finished; rerun the same command.", file=sys.stderr)
        sys.exit(128 + number)
    except Exception as error:
        message = disk_full_message(error)
        if message is None:
            raise
        print(f"{tool}: {message}", file=sys.stderr)
        sys.exit(1)


# TensorFlow reports ENOSPC as ResourceExhaustedError "<file>; No space left on device", the file
# a temporary name of its own (`.tempstate<n>`, a checkpoint's `<prefix>_temp/part-...`).
_NO_SPACE = os.strerror(errno.ENOSPC)
_TENSORFLOW_FILE = re.compile(rf"(?:^|\}}\}} )(?P<path>[^;{{}}]+); {_NO_SPACE}")
_TENSORFLOW_TEMPORARY = (
    re.compile(r"\.tempstate\d+$"),
    re.compile(r"_temp/part-\d+-of-\d+(\.data-\d+-of-\d+|\.index)?$"),
)
_EXPORT_STAGING = re.compile(r"/\.(\d+)\.incomplete-\d+(?=/|$)")  # an export's `.<version>.incomplete-<pid>`


def disk_full_message(error: BaseException):
    """'the disk holding <dir> is full (<n> bytes free): could not write <file>. ...', or None for another error.

    ENOSPC as an OSError (Python's writes) or as TensorFlow's error wrapping it, here or in its causes.
    """
    while error is not None:
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return _full(error.filename)
        if _NO_SPACE in str(error):
            match = _TENSORFLOW_FILE.search(str(error))
            return _full(_written(match.group("path").strip()) if match else None)
        error = error.__cause__ or error.__context__
    return None


def _written(path: str) -> str:
    """The file TensorFlow was writing, without the temporary parts of its name (an export's: its version's)."""
    for temporary in _TENSORFLOW_TEMPORARY:
        path = temporary.sub("", path)
    return _EXPORT_STAGING.sub(r"/\1", path)


def _full(path) -> str:
    if not path:
        return f"a disk this tool writes is full ({_NO_SPACE}). Free space there and rerun the same command."
    path = os.fsdecode(path)
    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(directory) and directory != os.path.dirname(directory):
        directory = os.path.dirname(directory)
    free = shutil.disk_usage(directory).free
    return (
        f"the disk holding {directory} is full ({free:,} bytes free): could not write {path}. Free space there "
        f"(or write elsewhere) and rerun the same command; what this run left unfinished has been removed."
    )
