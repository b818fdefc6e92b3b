#!/usr/bin/env bash
# The README's two commands in a fresh clone of this repository's HEAD, timed from the clone to the end of
# `make test` (the virtual environment's setup included): scripts/fresh_machine_check.py's cpu route. The seconds
# are recorded as smoke_make_test_s_avx2 on an AVX2-only CPU (ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2, as
# `make time-fresh-clone` sets, make one) or smoke_make_test_s, with fresh_clone_lab_ready_s beside them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${VENV:-.venv}/bin/python" scripts/fresh_machine_check.py cpu  # records with helpers: the project's environment
