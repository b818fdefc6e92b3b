#!/usr/bin/env bash
# `make test` as CI runs it, in a fresh clone of this repository's HEAD, timed from the clone to the end (the
# virtual environment's setup included); the seconds are recorded as smoke_make_test_s_avx2 on an AVX2-only CPU
# (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2, as `make time-fresh-clone` sets, make one) or smoke_make_test_s.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s.%N)
git clone -q "$root" "$work/clone"
(cd "$work/clone" && make test)
secs=$(python3 -c "import sys; print(round($(date +%s.%N) - $start, 1))")
# The clone's setup registered the Jupyter kernel 'gpu-perf-lab' with its own (now deleted) environment: point it back.
.venv/bin/python -m ipykernel install --user --name gpu-perf-lab --display-name "Python (gpu-perf-lab)" >/dev/null
.venv/bin/python scripts/notebook_times.py fresh-clone "$secs"  # the file and name follow the CPU's capability
