"""Processes for tests that start tools and scripts, forked from a Python that has already imported TensorFlow.

A test that starts `python -c SCRIPT` or `python bin/t2t-trainer ...` pays TensorFlow's import (seconds of CPU)
before the process does any of the work the test is about, and the suite starts dozens of them. A server
imports TensorFlow, Keras and t2t_lite's library once, starts nothing of TensorFlow's runtime (no device, no thread
pool: so forking it is safe), and forks a child per request. The child takes the request's arguments, environment,
working directory and standard streams, and runs the script as `python` would, to the exit status `python` would
give. `Popen` and `run` stand in for subprocess's; `bin_directory` gives a shell script stand-ins for `$BIN/python`
and `$BIN/t2t-*` that do the same. pytest's main process starts the servers its workers share.

The variables read when Python starts or TensorFlow loads (LOAD_VARIABLES) keep the values they had then. There is
one server per set of values; the request's environment picks it, and t2t_lite's tools count as setting
TF_ENABLE_ONEDNN_OPTS=1 (as `t2t_lite.cli.tool_process.prepare` does before TensorFlow loads, on x86). A child
watches its script's imports: when it first imports a module that loads TensorFlow in a fresh interpreter, its
environment must still hold the server's values; if the script changed one before that point, the child becomes a
fresh interpreter (exec, same pid and streams) and runs the script from its start there, so a test never runs on
settings it did not ask for.

Otherwise a child is a fresh `python`: SIGINT raises KeyboardInterrupt (as at a terminal), numpy's and `random`'s
global generators are seeded anew. What it shares with its server, and so what tests start fresh interpreters for:
what the server printed while TensorFlow loaded (test_quiet, test_cpu_features: a tool's start-up output), the
loaded modules (the export's serving client must run without the project; t2t-make-tf-configs must load no
TensorFlow; a tool that loads none lists TensorFlow's absl flags in --helpfull), the string-hash seed and the state
of native libraries loaded by the server (test_bpe_dropout: sentencepiece's sampler in another process).
"""

import atexit
import builtins
import gc
import hashlib
import importlib.util
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

LOAD_VARIABLES = (
    "PYTHONHASHSEED",
    "PYTHONPATH",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "KERAS_BACKEND",
)
LOADS_TENSORFLOW = ("tensorflow", "keras", "tf_keras", "tensorflow_text", "tensorflow_datasets")
_HEADER = struct.Struct("!Q")  # the length of a request's JSON
_PID = struct.Struct("!q")
_END = struct.Struct("!qd")  # the exit status as Popen gives it, the child's CPU seconds

# -- The test's side ------------------------------------------------------------------------------------------


_servers = {}  # LOAD_VARIABLES' values: the server for them
_counted = 0.0  # CPU seconds of the children this process waited for
_OWN = os.path.join(tempfile.gettempdir(), f"forkserver-{os.getpid()}")  # this process' servers, stand-ins, counts


def cpu_seconds() -> float:
    """CPU seconds of the forked children that this process and its stand-ins (`bin_directory`) waited for:
    resource.RUSAGE_CHILDREN does not count them (they are the servers' children)."""
    try:
        with open(os.path.join(_OWN, "cpu")) as counts:
            return _counted + sum(map(float, counts))
    except FileNotFoundError:
        return _counted


def start_shared_servers():
    """Starts, without waiting for them, the servers that the processes this one starts next will share (pytest's
    workers: FORKSERVER_DIRECTORY tells them where): for scripts and for tools, with this environment."""
    os.environ["FORKSERVER_DIRECTORY"] = _OWN
    for like_a_tool in (False, True):
        _server(load_values([sys.executable, "-c"], os.environ, like_a_tool))


def load_values(args, env, like_a_tool=False) -> tuple:
    """LOAD_VARIABLES as a fresh `python *args` started with `env` would load TensorFlow with them.

    `like_a_tool`: the script turns oneDNN on before TensorFlow loads, as t2t_lite's tools (t2t-*) do."""
    values = {name: env.get(name) for name in LOAD_VARIABLES}
    like_a_tool |= len(args) > 1 and os.path.basename(args[1]).startswith("t2t-")
    if like_a_tool and values["TF_ENABLE_ONEDNN_OPTS"] is None and os.uname().machine in ("x86_64", "amd64"):
        values["TF_ENABLE_ONEDNN_OPTS"] = "1"
    return tuple(sorted(values.items()))


class Popen:
    """The part of subprocess.Popen the tests use, for `args` = [sys.executable, script or -c/-m, ...]."""

    def __init__(self, args, stdin=None, stdout=None, stderr=None, env=None, cwd=None, text=False, like_a_tool=False):
        if args[0] != sys.executable:
            raise ValueError(f"forkserver starts Python only, as {sys.executable}; got {args[0]!r}")
        env = dict(os.environ if env is None else env)
        args = [os.fspath(arg) for arg in args]
        self.args, self.returncode = args, None
        self.stdin = self.stdout = self.stderr = None
        self._theirs = []  # the child's ends of pipes and /dev/null, closed here once sent
        fds = [self._stream(stdin, 0, text), self._stream(stdout, 1, text)]
        fds.append(fds[1] if stderr == subprocess.STDOUT else self._stream(stderr, 2, text))
        try:
            server = _server(load_values(args, env, like_a_tool))
            self._connection = _request(server.connect(), args, env, os.fspath(cwd or os.getcwd()), fds)
        finally:  # sent or not, the child's ends are no longer this process's to hold
            for fd in self._theirs:
                os.close(fd)
        self.pid = _PID.unpack(_receive(self._connection, _PID.size))[0]

    def _stream(self, how, number, text):
        """The descriptor the child gets as stream `number` (0, 1, 2); a pipe's other end for subprocess.PIPE."""
        if how is None:
            return number
        if how == subprocess.DEVNULL:
            self._theirs.append(os.open(os.devnull, os.O_RDWR))
            return self._theirs[-1]
        if how == subprocess.PIPE:
            read, write = os.pipe()
            ours, theirs, mode = (write, read, "w") if number == 0 else (read, write, "r")
            setattr(self, ("stdin", "stdout", "stderr")[number], os.fdopen(ours, mode if text else mode + "b"))
            self._theirs.append(theirs)
            return theirs
        return how if isinstance(how, int) else how.fileno()

    def poll(self):
        if self.returncode is None and self._ended(0):
            self._collect()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._collect()
        return self.returncode

    def _ended(self, timeout) -> bool:
        """Whether the server has written the child's end within `timeout` seconds (None: waits)."""
        waiting = select.poll()  # not select.select: a test worker's descriptors pass 1024
        waiting.register(self._connection, select.POLLIN)
        return bool(waiting.poll(None if timeout is None else timeout * 1000))

    def _collect(self):
        global _counted
        self.returncode, seconds = _END.unpack(_receive(self._connection, _END.size))
        _counted += seconds
        self._connection.close()

    def communicate(self, input=None, timeout=None):
        """(stdout, stderr), each read to its end in a thread of its own so that neither pipe fills."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not hasattr(self, "_readers"):
            if self.stdin is not None:
                if input is not None:
                    self.stdin.write(input)
                self.stdin.close()
            self._output = [None, None]
            self._readers = [
                threading.Thread(target=self._read_all, args=(index, stream), daemon=True)
                for index, stream in enumerate((self.stdout, self.stderr))
                if stream is not None
            ]
            for reader in self._readers:
                reader.start()
        for reader in self._readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        for output in self._output:
            if isinstance(output, BaseException):
                raise output
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return tuple(self._output)

    def _read_all(self, index, stream):
        try:
            self._output[index] = stream.read()
        except (OSError, ValueError) as error:  # raised by communicate(), as subprocess would
            self._output[index] = error
        stream.close()

    def send_signal(self, number):
        if self.poll() is None:
            os.kill(self.pid, number)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)


def run(args, *, capture_output=False, check=False, timeout=None, stdout=None, stderr=None, **popen):
    """subprocess.run, for a forked child."""
    if capture_output:
        stdout = stderr = subprocess.PIPE
    process = Popen(args, stdout=stdout, stderr=stderr, **popen)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    if check and process.returncode:
        raise subprocess.CalledProcessError(process.returncode, args, out, err)
    return subprocess.CompletedProcess(args, process.returncode, out, err)


def bin_directory(env) -> dict:
    """`env` for a shell script that runs `$BIN/python` and `$BIN/t2t-*`, with BIN a folder of stand-ins for them.

    A stand-in hands its command, arguments and streams to the fork server for its settings and ends as the child
    ended; with no such server it becomes the real command. The servers for `env` are started here."""
    shims = os.path.join(_OWN, "bin")
    if not os.path.isdir(shims):
        os.makedirs(shims)
        atexit.register(_remove_own_directory, os.getpid())
        real = os.path.dirname(sys.executable)
        for name in ["python", *(name for name in os.listdir(real) if name.startswith("t2t-"))]:
            program = None if name == "python" else os.path.join(real, name)
            with open(os.path.join(shims, name), "w") as shim:
                shim.write(
                    f"#!{sys.executable} -S\nimport sys\nsys.path.insert(0, {os.path.dirname(__file__)!r})\n"
                    f"import forkserver\nforkserver.attach({program!r})\n"
                )
            os.chmod(os.path.join(shims, name), 0o755)
    sockets = {}
    for like_a_tool in (False, True):
        values = load_values([sys.executable, "-c"], env, like_a_tool)
        _server(values).connect().close()  # ready: a stand-in finding no server would pay the import
        sockets[repr(values)] = _server(values).path
    return dict(env, BIN=shims, FORKSERVER_SOCKETS=json.dumps(sockets), FORKSERVER_COUNTS=os.path.join(_OWN, "cpu"))


def attach(program):
    """A stand-in's work: `python [program] *sys.argv[1:]` in a forked child with this process' streams."""
    args = [sys.executable, *([program] if program else []), *sys.argv[1:]]
    path = json.loads(os.environ["FORKSERVER_SOCKETS"]).get(repr(load_values(args, os.environ)))
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(path)
    except (OSError, TypeError):  # no server for these settings: the real command
        os.execv(sys.executable, args)
    connection = _request(connection, args, dict(os.environ), os.getcwd(), [0, 1, 2])
    # Ctrl-C at a terminal reaches the child itself (one process group); a job manager's SIGTERM is passed on.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    pid = _PID.unpack(_receive(connection, _PID.size))[0]
    signal.signal(signal.SIGTERM, lambda number, _: os.kill(pid, number))
    code, seconds = _END.unpack(_receive(connection, _END.size))
    with open(os.environ["FORKSERVER_COUNTS"], "a") as counts:
        counts.write(f"{seconds}\n")
    if code < 0:  # ended by a signal: so does its stand-in
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code)


def _remove_own_directory(owner):
    if os.getpid() == owner:  # not in a forked copy of this process
        shutil.rmtree(_OWN, ignore_errors=True)


def _server(values):
    """The server for `values`: this process' own, or one a parent started for it (start_shared_servers)."""
    if values not in _servers:
        name = hashlib.sha1(repr(values).encode()).hexdigest()[:16]
        shared = os.environ.get("FORKSERVER_DIRECTORY")
        if shared and shared != _OWN and os.path.exists(os.path.join(shared, name + ".log")):
            _servers[values] = _Server(os.path.join(shared, name))
        else:
            _servers[values] = _Server(os.path.join(_OWN, name), values)
    return _servers[values]


class _Server:
    """This module run as a script with LOAD_VARIABLES set to `values` (None: unset), listening at `name`.socket
    and writing to `name`.log; without `values`, a server another process started there."""

    def __init__(self, name, values=None):
        self.path, self.log_path, self.process = name + ".socket", name + ".log", None
        if values is None:
            return
        env = dict(os.environ)
        for variable, value in values:
            if value is None:
                env.pop(variable, None)
            else:
                env[variable] = value
        os.makedirs(os.path.dirname(name), exist_ok=True)
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), self.path],
                env=env,
                stdin=subprocess.PIPE,  # its end of file tells the server that this process has ended
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=os.path.dirname(name),
            )
        self._owner = os.getpid()
        atexit.register(self.stop)

    def connect(self):
        """A connection to the server, once it has imported what it imports (it listens only then)."""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and (self.process is None or self.process.poll() is None):
            connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                connection.connect(self.path)
                return connection
            except (FileNotFoundError, ConnectionRefusedError):
                connection.close()
                time.sleep(0.05)
        with open(self.log_path) as log:
            raise RuntimeError(f"the fork server at {self.path} did not start:\n{log.read()[-3000:]}")

    def stop(self):
        if os.getpid() != self._owner:  # a forked copy of the process that started it exits
            return
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()
        if all(server.process is None or server.process.poll() is not None for server in _servers.values()):
            shutil.rmtree(_OWN, ignore_errors=True)


def _request(connection, args, env, cwd, fds):
    """Sends a request: the server answers on `connection` with the child's pid, then how it ended."""
    request = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
    socket.send_fds(connection, [_HEADER.pack(len(request))], fds)
    connection.sendall(request)
    return connection


def _receive(connection, size) -> bytes:
    data = b""
    while len(data) < size:
        chunk = connection.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the fork server closed the connection: see its log (did it die?)")
        data += chunk
    return data


# -- The server's side ----------------------------------------------------------------------------------------


def _prepare() -> frozenset:
    """Imports what the tools and the tests' scripts import; the modules whose import loads TensorFlow.

    A child's tool prepares its own process (`t2t_lite.cli.tool_process.prepare`, called by its entry point).
    """
    imported = _ImportsRecorded()
    import numpy  # noqa: F401
    import tensorflow  # noqa: F401
    from tensorflow.python.eager import context

    from t2t_lite import registry  # noqa: F401
    from t2t_lite.decode import beam_search, scoring, translation  # noqa: F401
    from t2t_lite.serve import export  # noqa: F401
    from t2t_lite.train import trainer  # noqa: F401

    imported.stop()
    if context.context_safe() is not None and context.context()._context_handle is not None:
        raise RuntimeError("the imports started TensorFlow's runtime: forking would not be safe")
    return imported.loading_tensorflow()


class _ImportsRecorded:
    """Which modules each module imports (builtins.__import__), so as to know which load TensorFlow."""

    def __init__(self):
        self.edges, self._original = {}, builtins.__import__
        builtins.__import__ = self._import

    def _import(self, name, globals=None, locals=None, fromlist=(), level=0):
        module = self._original(name, globals, locals, fromlist, level)
        importer = (globals or {}).get("__name__")
        self.edges.setdefault(importer, set()).update(_names(name, globals, fromlist, level))
        return module

    def stop(self):
        builtins.__import__ = self._original

    def loading_tensorflow(self) -> frozenset:
        loading = {name for name in sys.modules if name.partition(".")[0] in LOADS_TENSORFLOW}
        while True:
            more = {importer for importer, names in self.edges.items() if names & loading} - loading
            if not more:
                return frozenset(loading)
            loading |= more


def _names(name, globals, fromlist, level) -> set:
    """The modules an import statement runs: the named one, its packages, and modules named in `fromlist`."""
    if level:
        try:
            name = importlib.util.resolve_name("." * level + name, (globals or {}).get("__package__"))
        except (ImportError, ValueError):
            return set()
    parts = name.split(".")
    names = {".".join(parts[: index + 1]) for index in range(len(parts))}
    return names | {f"{name}.{item}" for item in fromlist or () if f"{name}.{item}" in sys.modules}


def _serve(path):
    """Forks a child per request; returns only in a child: its request and stream descriptors."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes select through wake_read
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the test run's terminal is the tests' to handle
    children, abandoned = {}, set()  # pid: the connection that asked for it; those killed as their test let go
    while True:
        watched = [connection for pid, connection in children.items() if pid not in abandoned]
        readable = select.select([listener, wake_read, sys.stdin, *watched], [], [])[0]
        if sys.stdin in readable:  # the tests' process has ended: so do its children
            for pid in children:
                os.kill(pid, signal.SIGKILL)
            os._exit(0)
        if wake_read in readable:
            os.read(wake_read, 4096)
        if listener in readable:
            child = _fork_for(listener.accept()[0], listener, children, wake_read, wake_write)
            if child is not None:
                return child
        for pid, connection in children.items():
            if connection in readable and pid not in abandoned:  # the test let go of it while it ran
                os.kill(pid, signal.SIGKILL)
                abandoned.add(pid)
        _reap(children, abandoned)


def _fork_for(connection, listener, children, wake_read, wake_write):
    """Forks a child for the request on `connection`; in the child, (its request, its stream descriptors)."""
    connection.settimeout(10)  # a client that stalls mid-request must not stall the server
    fds = []
    try:
        header, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 3)
        request = json.loads(_receive(connection, _HEADER.unpack(header)[0]))
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
    except (OSError, struct.error, ValueError):  # a client gone before its request was whole; no fork
        for fd in fds:
            os.close(fd)
        connection.close()
        return None
    if pid == 0:
        signal.set_wakeup_fd(-1)
        for descriptor in (listener, connection, *children.values()):
            descriptor.close()
        os.close(wake_read)
        os.close(wake_write)
        return request, fds
    for fd in fds:
        os.close(fd)
    children[pid] = connection
    try:
        connection.sendall(_PID.pack(pid))
    except OSError:  # the test is gone: so is its child, reaped as the others
        os.kill(pid, signal.SIGKILL)
    return None


def _reap(children, abandoned):
    while children:
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            return
        abandoned.discard(pid)
        connection = children.pop(pid, None)
        if connection is None:
            continue
        try:
            connection.sendall(_END.pack(os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime))
        except OSError:
            pass  # nobody waits for it any more
        connection.close()


def _become(request, fds, loading_tensorflow):
    """This forked child as `python *request["args"]`: streams, directory, environment, signals, generators."""
    import random
    import runpy  # noqa: F401  (before the watch: its imports load nothing of TensorFlow)

    import numpy

    for number, fd in enumerate(fds):
        os.dup2(fd, number)
    for fd in set(fds) - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    # Python reads PYTHONHASHSEED and PYTHONPATH as it starts: a script that changes them later changes nothing.
    at_start = ("PYTHONHASHSEED", "PYTHONPATH")
    loaded_with = {name: os.environ.get(name) for name in LOAD_VARIABLES if name not in at_start}
    os.environ.clear()
    os.environ.update(request["env"])
    for number in (signal.SIGCHLD, signal.SIGTERM):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    random.seed()
    numpy.random.seed()
    _watch_for_tensorflow(loading_tensorflow, loaded_with, request)
    return request["args"][1:]


def _watch_for_tensorflow(loading_tensorflow, loaded_with, request):
    """At the script's first import that loads TensorFlow in a fresh interpreter, a fresh interpreter if the
    environment no longer holds the values TensorFlow loaded with here."""
    original, original_import_module = builtins.__import__, importlib.import_module

    def check(names):
        if names & loading_tensorflow or any(module.partition(".")[0] in LOADS_TENSORFLOW for module in names):
            builtins.__import__, importlib.import_module = original, original_import_module
            if any(os.environ.get(variable) != value for variable, value in loaded_with.items()):
                sys.stdout.flush()
                sys.stderr.flush()
                os.execve(sys.executable, request["args"], request["env"])

    def watched(name, globals=None, locals=None, fromlist=(), level=0):
        check(_names(name, globals, fromlist, level))
        return original(name, globals, locals, fromlist, level)

    def watched_import_module(name, package=None):  # what t2t_lite's registry loads its built-ins with
        check(_names(name if not name.startswith(".") else importlib.util.resolve_name(name, package), None, (), 0))
        return original_import_module(name, package)

    builtins.__import__, importlib.import_module = watched, watched_import_module


def _run(args):
    """`python *args`, in this process."""
    import runpy

    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
        sys.modules["__main__"] = main = type(sys)("__main__")
        exec(compile(args[1], "<string>", "exec"), main.__dict__)
    elif args[0] == "-m":
        sys.argv = ["-m", *args[2:]]
        sys.path[0] = os.getcwd()
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    loading_tensorflow = _prepare()
    # What the children share with the server, out of the cycle collector's reach: a collection would write to
    # every object's header and so copy every page of the server's memory into each child.
    gc.collect()
    gc.freeze()
    request, fds = _serve(sys.argv[1])
    _run(_become(request, fds, loading_tensorflow))
