#!/usr/bin/env bash
# Create .venv and install axbgate with the trainer's stack, the framework integrations
# (transformers, accelerate, lightning for the HF/Lightning callback tests: about 14 s and
# 200 MB the first time) and the test extras. Idempotent: a second run only re-installs
# the project itself (about 5 s). torch is pinned to 2.13.0, the CPU build
# that lies on the CI machine's disk; do not let pip resolve a multi-GB CUDA build here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install -q torch==2.13.0 numpy
fi
.venv/bin/python -m pip install -q -e '.[dev,trainer,integrations]'
echo "axbgate installed in $(pwd)/.venv ($(.venv/bin/axbgate --help >/dev/null && echo ok))"
