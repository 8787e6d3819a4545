#!/usr/bin/env bash
# The GPU check: a dense and a MoE rung of about 1B parameters, bf16, seq 4,096, a few hundred steps on one
# GPU; prints tokens/s, MFU against the datasheet peak and peak memory against the plan's estimate.
#   bench/gpu_check.sh                # on a machine with a GPU (a few minutes)
#   bench/gpu_check.sh --size tiny    # the same path at a CPU's size (make test runs this)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
exec "$PY" -m bench.gpu_check "$@"
