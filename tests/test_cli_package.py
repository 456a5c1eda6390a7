"""Importing the tools' package does nothing to the process (t2t_lite/cli/__init__.py): only a command's entry point
prepares it (t2t_lite/cli/entry_points.py), so a notebook or a test can import any tool's module and its flags."""

import os
import subprocess
import sys

# Imports every module of t2t_lite.cli in a process whose name is a tool's (the name once decided it), then reports
# what changed: the environment, the import hooks, file descriptor 2, and the processes it started. The libraries
# under the tools come first: TensorFlow sets variables of its own as it loads.
PROBE = """
import importlib, json, os, pkgutil, sys
import absl.app, keras, tensorflow
import t2t_lite.decode.translation, t2t_lite.evaluate.bleu, t2t_lite.insights.server, t2t_lite.serve.export
import t2t_lite.train.trainer
before = dict(os.environ), list(sys.meta_path), os.fstat(2).st_ino
import t2t_lite.cli
names = sorted(info.name for info in pkgutil.iter_modules(t2t_lite.cli.__path__))
for name in names:
    importlib.import_module("t2t_lite.cli." + name)
children = [
    child
    for task in os.listdir(f"/proc/{os.getpid()}/task")
    for child in open(f"/proc/{os.getpid()}/task/{task}/children").read().split()
]
print(json.dumps({
    "modules": names,
    "environment": sorted(set(os.environ.items()) ^ set(before[0].items())),
    "import_hooks_added": [repr(hook) for hook in sys.meta_path if hook not in before[1]],
    "stderr_replaced": os.fstat(2).st_ino != before[2],
    "children": children,
}))
"""


def test_importing_every_tool_module_changes_nothing_of_the_process(tmp_path):
    import json

    probe = tmp_path / "t2t-probe"
    probe.write_text(PROBE)
    result = subprocess.run([sys.executable, str(probe)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    seen = json.loads(result.stdout.splitlines()[-1])
    assert {"entry_points", "tool_process", "flags", "t2t_trainer", "t2t_decoder"} <= set(seen["modules"])
    assert seen["environment"] == []
    assert seen["import_hooks_added"] == []
    assert seen["stderr_replaced"] is False
    assert seen["children"] == []


def test_every_command_is_an_entry_point_that_prepares_its_process_first():
    """bin/t2t-* and the console scripts of setup.cfg call one function each of entry_points, which prepares the
    process before the tool's module (and TensorFlow) is imported."""
    from t2t_lite.cli import entry_points

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    commands = sorted(os.listdir(os.path.join(repo, "bin")))
    setup = open(os.path.join(repo, "setup.cfg")).read()
    for command in commands:
        function = command.replace("-", "_")
        assert callable(getattr(entry_points, function)), command
        assert f"from t2t_lite.cli.entry_points import {function}" in open(os.path.join(repo, "bin", command)).read()
        assert f"{command} = t2t_lite.cli.entry_points:{function}" in setup
