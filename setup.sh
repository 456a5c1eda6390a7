#!/usr/bin/env bash
# Creates the virtual environment .venv (once) and installs t2t_lite into it, editable, with its
# pinned dependencies, the test tools, matplotlib (for attention pictures) and TF Serving's protos. Safe to re-run.
# pip runs with -qq, errors only: at -q it still passes on warnings, such as setuptools' banner on
# every editable install and the ones a machine's pip configuration raises, which say nothing about
# this install; the one line at the end says it worked.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -qq --upgrade pip
.venv/bin/python -m pip install -qq -e ".[test,plot,serving]"
echo "setup.sh: .venv ready (t2t_lite installed editable with its test, plot and serving extras)."
