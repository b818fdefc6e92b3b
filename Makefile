# gpu-perf-lab: the two commands a newcomer needs, and the GPU run.
#   make lab       open the curriculum in JupyterLab (sets up .venv on first use)
#   make test      unit tests + every notebook at smoke scale (what CI runs)
#   make test-gpu  every notebook at full scale on a GPU node; writes results/<gpu>.json
#   make time-smoke  every notebook at smoke scale, timed; writes results/smoke.json and README's run-time table

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test test-unit test-notebooks test-gpu time-smoke wheelhouse clean

$(STAMP): pyproject.toml scripts/bootstrap.sh
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/bootstrap.sh

lab: $(STAMP)
	VENV=$(VENV) scripts/lab.sh

test: $(STAMP)
	$(MAKE) --no-print-directory test-unit test-notebooks

test-unit: $(STAMP)
	scripts/ensure_browser.sh
	HELPERS_SCALE=smoke $(PY) -m pytest -q tests

test-notebooks: $(STAMP)
	HELPERS_SCALE=smoke $(PY) -m pytest -q --nbval-lax --nbval-current-env notebooks

test-gpu: $(STAMP)
	$(PY) scripts/gpu_test.py

time-smoke: $(STAMP)
	rm -rf build/smoke
	HELPERS_SCALE=smoke HELPERS_EXECUTED_DIR=build/smoke $(PY) -m pytest -q --nbval-lax --nbval-current-env notebooks
	$(PY) scripts/notebook_times.py record build/smoke/timings.json

wheelhouse:
	scripts/wheelhouse.sh .whl

clean:
	rm -rf $(VENV) build results/local
