# gpu-perf-lab: the two commands a newcomer needs, and the GPU run.
#   make lab       open the curriculum in JupyterLab (sets up .venv on first use)
#   make test      the quick unit tests + every notebook at smoke scale (a newcomer's check)
#   make test-slow the slow tier: the class judge against hostile code, launches of ranks, the browser checks
#   make test-all  both (what CI runs: .ci/run)
#   make test-gpu  every notebook at full scale on a GPU node; writes results/<gpu>.json
#   make preview PROFILE=t4   every notebook at full scale as a learner's smaller machine sees it (a T4 with 2 cores;
#                             PROFILE=two-core: this GPU with 2 cores); writes results/<gpu>.<profile>.json
#   make time-smoke  every notebook at smoke scale, timed; writes results/smoke.json (or smoke-avx2.json on an
#                    AVX2-only CPU) and README's run-time table
#   make time-smoke-avx2   the same with PyTorch's and oneDNN's CPU kernels limited to AVX2, on any x86 machine
#   make time-fresh-clone  `make test` in a fresh clone with AVX2 only, timed; recorded in results/smoke-avx2.json
#   make export-html  the executed notebooks of the latest full-scale run (build/executed/) as static HTML in exports/

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test test-all test-slow test-unit test-notebooks test-gpu preview export-html time-smoke time-smoke-avx2 time-fresh-clone wheelhouse clean

# The slower CPU many learners have: no AVX-512, so no bf16 instructions.
AVX2_ONLY := ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2

$(STAMP): pyproject.toml scripts/bootstrap.sh
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/bootstrap.sh

lab: $(STAMP)
	VENV=$(VENV) scripts/lab.sh

test: $(STAMP)
	$(MAKE) --no-print-directory test-unit test-notebooks

test-unit: $(STAMP)
	HELPERS_SCALE=smoke $(PY) -m pytest -q -m "not slow" tests

test-slow: $(STAMP)
	scripts/ensure_browser.sh
	HELPERS_SCALE=smoke $(PY) -m pytest -q -m slow tests

test-all: $(STAMP)
	$(MAKE) --no-print-directory test test-slow

test-notebooks: $(STAMP)
	HELPERS_SCALE=smoke $(PY) -m pytest -q --nbval-lax --nbval-current-env notebooks

test-gpu: $(STAMP)
	$(PY) scripts/gpu_test.py

PROFILE ?= t4
preview: $(STAMP)
	$(PY) scripts/gpu_test.py --profile $(PROFILE)

time-smoke: $(STAMP)
	rm -rf build/smoke
	HELPERS_SCALE=smoke HELPERS_EXECUTED_DIR=build/smoke $(PY) -m pytest -q --nbval-lax --nbval-current-env notebooks
	$(PY) scripts/notebook_times.py record build/smoke/timings.json

time-smoke-avx2: $(STAMP)
	$(AVX2_ONLY) $(MAKE) --no-print-directory time-smoke

time-fresh-clone: $(STAMP)
	$(AVX2_ONLY) scripts/time_fresh_clone.sh

export-html: $(STAMP)
	scripts/ensure_browser.sh
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[export]"
	$(PY) scripts/export_html.py

wheelhouse:
	scripts/wheelhouse.sh .whl

clean:
	rm -rf $(VENV) build results/local
