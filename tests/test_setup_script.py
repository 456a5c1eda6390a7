"""setup.sh, README's first step: once it has run, a rerun says one line, and t2t_lite stays this tree's, editable.

The rerun reinstalls t2t_lite into the .venv these tests run in (pip reinstalls an editable
package every time: seconds), leaving it as it was. Skipped under any other Python: there
it would build a new .venv, minutes of downloads and installs.
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(REPO, ".venv")


@pytest.mark.skipif(
    not os.path.isdir(VENV) or not os.path.samefile(sys.prefix, VENV),
    reason="runs setup.sh again only where its .venv is the environment of these tests",
)
def test_a_rerun_prints_only_its_closing_line_and_keeps_the_editable_install():
    result = subprocess.run(["bash", os.path.join(REPO, "setup.sh")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == (
        "setup.sh: .venv ready (t2t_lite installed editable with its test, plot and serving extras).\n"
    )
    where = subprocess.run(
        [sys.executable, "-c", "import t2t_lite, t2t_lite.problems; print(t2t_lite.__file__)"],
        capture_output=True,
        text=True,
        cwd="/",  # not the repository, whose folder would be found first however t2t_lite is installed
        check=True,
    )
    assert where.stdout.strip() == os.path.join(REPO, "t2t_lite", "__init__.py")
