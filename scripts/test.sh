#!/usr/bin/env bash
# The test command of README.md (CI runs it through .ci/run). Sets up the venv, starts
# the services the integration tests use (PostgreSQL on 127.0.0.1:5432, a real
# single-node Slurm cluster, iproute2 for network namespaces), then runs pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -m "not slurm" -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services_up.sh
exec .venv/bin/python -m pytest "$@"
