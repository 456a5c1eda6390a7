"""setup.sh, README's first step: with its dependencies installed, a run says one line and installs this tree editable.

It runs on a copy of the files the install reads, into a fresh .venv that sees the packages of the
environment these tests run in (a .pth file), so pip finds every dependency installed and the
install takes seconds; the .venv of the tests, which other tests' processes import from, is never
touched.
"""

import os
import shutil
import subprocess
import sys
import sysconfig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INSTALLED_FROM = ("setup.sh", "setup.cfg", "pyproject.toml", "README.md", "t2t_lite", "problems", "hparams")


def copy_of_the_project(root: str) -> str:
    for name in INSTALLED_FROM:
        source, target = os.path.join(REPO, name), os.path.join(root, name)
        if os.path.isdir(source):
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, target)
    venv = os.path.join(root, ".venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with open(os.path.join(site, "the_tests_packages.pth"), "w") as file:
        file.write(sysconfig.get_paths()["purelib"] + "\n")
    return python


def test_setup_prints_only_its_closing_line_and_installs_the_tree_editable(tmp_path):
    python = copy_of_the_project(str(tmp_path))
    result = subprocess.run(["bash", str(tmp_path / "setup.sh")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == (
        "setup.sh: .venv ready (t2t_lite installed editable with its test, plot and serving extras).\n"
    )
    where = subprocess.run(
        [python, "-c", "import importlib.util as u; print(u.find_spec('t2t_lite').origin)"],
        capture_output=True,
        text=True,
        cwd="/",  # not the copy, whose folder would be found first however t2t_lite is installed
        check=True,
    )
    assert where.stdout.strip() == str(tmp_path / "t2t_lite" / "__init__.py")
    again = subprocess.run(["bash", str(tmp_path / "setup.sh")], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout + again.stderr == result.stdout  # a rerun says the same
