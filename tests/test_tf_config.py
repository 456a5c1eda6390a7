"""TF_CONFIG, one per task (t2t-make-tf-configs, as tensor2tensor's tool); reading a process' own is checked in
test_distribution.py, where it chooses the strategy."""

import json
import os
import subprocess
import sys

import pytest

from t2t_lite.train import tf_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_tf_configs(*args):
    command = [sys.executable, os.path.join(REPO, "bin", "t2t-make-tf-configs"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))


def test_make_tf_configs_prints_one_shell_line_per_task():
    result = make_tf_configs("--workers=host1:2222,host2:2222")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    cluster = {"worker": ["host1:2222", "host2:2222"]}
    for index, line in enumerate(lines):
        assert line.startswith("export TF_CONFIG='") and line.endswith(f"  # worker {index} on host{index + 1}:2222")
        config = json.loads(line.split("'")[1])
        assert config == {"cluster": cluster, "task": {"type": "worker", "index": index}}
    # The shell reads each line back as the JSON TensorFlow expects.
    echoed = subprocess.run(["bash", "-c", lines[1] + '\nprintf %s "$TF_CONFIG"'], capture_output=True, text=True)
    assert json.loads(echoed.stdout)["task"] == {"type": "worker", "index": 1}


def test_make_tf_configs_with_a_chief():
    configs = tf_config.one_per_task("host1:2222,host2:2222", "host0:2222")
    assert [(task_type, index, host) for task_type, index, host, _ in configs] == [
        ("chief", 0, "host0:2222"),
        ("worker", 0, "host1:2222"),
        ("worker", 1, "host2:2222"),
    ]
    assert all(
        config["cluster"] == {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2222"]} for *_, config in configs
    )


@pytest.mark.parametrize(
    "workers, chief, message",
    [
        ("", "", r"--workers=''.*at least one host:port"),
        ("host1:2222,host2", "", r"--workers: 'host2' is not host:port"),
        ("host1:2222", "host0:99999", r"--chief: 'host0:99999' is not host:port"),
        ("host1:2222,host1:2222", "", r"host1:2222 appears twice"),
    ],
)
def test_make_tf_configs_names_bad_input(workers, chief, message):
    with pytest.raises(ValueError, match=message):
        tf_config.one_per_task(workers, chief)


def test_make_tf_configs_cli_errors_name_the_flag():
    result = make_tf_configs("--workers=host1")
    assert result.returncode == 1 and "--workers: 'host1' is not host:port" in result.stderr
    assert "Traceback" not in result.stderr
    assert "--workers" in make_tf_configs().stderr


def test_the_tool_starts_without_tensorflow():
    """It runs where a cluster is planned, often a login node: JSON takes no TensorFlow start-up."""
    check = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('tensorflow imported' if 'tensorflow' in sys.modules else 'no tensorflow'))\n"
        "sys.argv = ['t2t-make-tf-configs', '--workers=host1:2222']\n"
        "from t2t_lite.cli.entry_points import t2t_make_tf_configs\n"
        "t2t_make_tf_configs()\n"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "no tensorflow"
    assert result.stdout.startswith("export TF_CONFIG='")
