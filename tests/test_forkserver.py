"""tests/forkserver.py: a forked child behaves as a fresh `python` started by subprocess (the reference here)."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import forkserver

ECHO = textwrap.dedent(
    """
    import os, sys
    print("out", sys.argv, os.getcwd(), os.environ.get("MARK"), sys.path[0], __name__)
    print("err", file=sys.stderr)
    sys.exit(int(sys.argv[1]))
    """
)


def both(args, **settings):
    """(fresh, forked): subprocess.run and forkserver.run of the same command."""
    return [
        run(args, capture_output=True, text=True, timeout=120, **settings) for run in (subprocess.run, forkserver.run)
    ]


def test_arguments_directory_environment_streams_and_status_are_a_fresh_pythons(tmp_path):
    env = dict(os.environ, MARK="marked")
    fresh, forked = both([sys.executable, "-c", ECHO, "3", "two words"], cwd=tmp_path, env=env)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.returncode == 3 and forked.stdout.startswith(f"out ['-c', '3', 'two words'] {tmp_path} marked")

    script = tmp_path / "script.py"
    script.write_text(ECHO)
    fresh, forked = both([sys.executable, str(script), "0"], cwd=tmp_path, env=env)
    assert (
        (forked.returncode, forked.stdout, forked.stderr)
        == (fresh.returncode, fresh.stdout, fresh.stderr)
        == (
            0,
            f"out [{str(script)!r}, '0'] {tmp_path} marked {tmp_path} __main__\n",
            "err\n",
        )
    )


def test_an_uncaught_exception_prints_its_traceback_and_exits_1():
    fresh, forked = both([sys.executable, "-c", "raise ValueError('no such file: x')"])
    assert forked.returncode == fresh.returncode == 1
    assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1] == "ValueError: no such file: x"


def test_signals_reach_the_script_and_a_killed_child_reports_the_signal(tmp_path):
    script = textwrap.dedent(
        """
        import time
        try:
            print("ready", flush=True)
            time.sleep(60)
        except KeyboardInterrupt:
            print("stopped")
        """
    )
    process = forkserver.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"
    process.send_signal(signal.SIGINT)  # Ctrl-C: KeyboardInterrupt, as at a terminal
    assert process.communicate(timeout=60) == ("stopped\n", None) and process.returncode == 0

    process = forkserver.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdout=subprocess.DEVNULL)
    process.kill()
    assert process.wait(timeout=60) == -signal.SIGKILL
    assert process.poll() == -signal.SIGKILL


def test_a_client_gone_before_its_request_was_whole_leaves_the_server_serving():
    server = forkserver._server(forkserver.load_values([sys.executable, "-c"], os.environ))
    for sent in (b"", b"\x00\x00"):  # nothing; half of a request's header
        with server.connect() as connection:
            connection.sendall(sent)
    result = forkserver.run([sys.executable, "-c", "print('served')"], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "served\n")


def test_a_timeout_kills_the_child_and_raises_as_subprocess_does():
    started = time.time()
    try:
        forkserver.run([sys.executable, "-c", "import time; time.sleep(60)"], capture_output=True, timeout=1)
    except subprocess.TimeoutExpired:
        pass
    else:
        raise AssertionError("no TimeoutExpired")
    assert time.time() - started < 30


TENSORFLOW_KERNELS = textwrap.dedent(
    """
    import os, sys
    if sys.argv[1].startswith("before"):
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"  # as t2t_lite's tools do, before TensorFlow loads
    if sys.argv[1] == "before the registry":
        from t2t_lite import registry
        registry.hparams("transformer_tiny")  # loads TensorFlow through importlib.import_module
    from t2t_lite.train import trainer  # loads TensorFlow
    if sys.argv[1] == "after":
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "1"  # too late to matter, in a fresh interpreter too
    from tensorflow.python.util import _pywrap_util_port
    print(_pywrap_util_port.IsMklEnabled())
    """
)


def test_tensorflow_loads_with_the_settings_a_fresh_python_would_have_used():
    """TensorFlow reads TF_ENABLE_ONEDNN_OPTS when it loads: set before that, oneDNN is on (the server loaded
    TensorFlow without it, so the child becomes a fresh interpreter); set after, it changes nothing."""
    from tensorflow.python.util import _pywrap_util_port

    env = {name: value for name, value in os.environ.items() if name != "TF_ENABLE_ONEDNN_OPTS"}
    kernels = {}
    for when in ("before", "before the registry", "after"):
        result = forkserver.run(
            [sys.executable, "-c", TENSORFLOW_KERNELS, when], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr[-3000:]
        kernels[when] = result.stdout.split()[0]
    assert kernels["before"] == kernels["before the registry"] == "True"
    if "TF_ENABLE_ONEDNN_OPTS" not in os.environ:  # then this process loaded TensorFlow without it too
        assert kernels["after"] == str(_pywrap_util_port.IsMklEnabled())


def test_the_child_starts_tensorflows_runtime_itself_so_it_can_still_split_the_cpu():
    script = textwrap.dedent(
        """
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        print(len(tf.config.list_logical_devices("CPU")))
        """
    )
    result = forkserver.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout) == (0, "2\n"), result.stderr[-3000:]


def test_the_childrens_cpu_time_is_counted_for_the_cpu_report():
    before = forkserver.cpu_seconds()
    result = forkserver.run(
        [sys.executable, "-c", "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"]
    )
    assert result.returncode == 0
    assert forkserver.cpu_seconds() - before >= 0.5


def test_a_shell_scripts_stand_ins_run_its_commands_in_forked_children_as_the_real_ones(tmp_path):
    env = forkserver.bin_directory(dict(os.environ))
    script = '"$BIN/python" -c "import os, sys; print(os.getppid()); sys.exit(4)"; echo "status $? shell $$"'
    before = forkserver.cpu_seconds()
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    parent, status = result.stdout.splitlines()
    assert status.startswith("status 4 shell ") and parent != status.split()[-1]  # the fork server's child
    assert forkserver.cpu_seconds() > before

    (tmp_path / "hyp").write_text("the cat sat on the mat\n")
    (tmp_path / "ref").write_text("the cat sat on a mat\n")
    flags = f"--translation={tmp_path / 'hyp'} --reference={tmp_path / 'ref'}"
    real = os.path.join(os.path.dirname(sys.executable), "t2t-bleu")
    fresh = subprocess.run(f"{real} {flags}", shell=True, capture_output=True, text=True, timeout=120)
    forked = subprocess.run(f'"$BIN/t2t-bleu" {flags}', shell=True, env=env, capture_output=True, text=True)
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout) and "BLEU" in fresh.stdout
