#!/usr/bin/env bash
# Creates the virtual environment .venv (once) and installs t2t_lite into it, editable, with its
# pinned dependencies, the test tools, matplotlib (for attention pictures) and TF Serving's protos. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")"
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test,plot,serving]"
