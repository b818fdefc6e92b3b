"""Notebooks in git: no outputs, no widget state, the course's shape; and the GPU run's keep-executed hook."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_the_course_has_its_first_notebooks():
    names = [p.stem for p in NOTEBOOKS]
    assert names[:6] == ["00_setup", "01_baseline", "02_dataloader", "03_kernels", "04_memory", "05_ddp"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs_or_widget_state(path):
    nb = json.loads(path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"cell {i} has stored outputs: clear them before committing"
            assert cell.get("execution_count") is None, f"cell {i} has an execution count"
    assert "widgets" not in nb["metadata"], "widget state is stored in the notebook's metadata"


#: An export's code box is 1,100 px wide and its code about 7.3 px a character: a longer line is cut (03's timeline
#: call, 153 characters, needed 1,120 px).
EXPORT_LINE_CHARS = 150


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_code_line_fits_the_exports_code_box(path):
    nb = json.loads(path.read_text())
    long = [(cell.get("id"), len(line)) for cell in nb["cells"] if cell["cell_type"] == "code"
            for line in "".join(cell["source"]).splitlines() if len(line) > EXPORT_LINE_CHARS]
    assert not long, f"code lines longer than {EXPORT_LINE_CHARS} characters, cut in the export (cell, length): {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_notebook_has_the_course_shape(path):
    nb = json.loads(path.read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    first = "".join(nb["cells"][0]["source"])
    assert first.startswith(f"# {path.stem[:2]} · ")
    for part in ("**You will learn**", "**Run time**", "## Setup", "## Exercise", "## Summary", "**Reflection**",
                 "**Further reading**"):
        assert part in text, f"{path.name} lacks {part!r}"
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "env.report()" in code and "checks.check_" in code


@pytest.fixture(scope="module")
def nbval_run(tmp_path_factory):
    """One nbval run, as `make test` runs the notebooks (each pytest start-up costs seconds), of two small notebooks:
    ``demo``, which passes, and ``tables``, whose second cell shows a table of raw floats. Returns the finished
    process and the folder the hook under test keeps the executed notebooks in (``HELPERS_EXECUTED_DIR``)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    make = "import pandas as pd\ndf = pd.DataFrame({'img_per_s': [7362.606991], 'peak_gib': [None]})\n"
    notebooks = {
        "demo": [new_code_cell("\n# the answer\nx = 6 * 7"), new_code_cell("print(x)")],
        "tables": [new_code_cell(make + "from helpers.tables import readable\n"
                                 "readable(df, missing={'peak_gib': 'no GPU allocator on a CPU'})"),
                   new_code_cell("df")],
    }
    (ROOT / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=ROOT / "build"))  # inside the repository: its conftest.py is under test
    for name, cells in notebooks.items():
        nb = new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, work / f"{name}.ipynb")
    keep = tmp_path_factory.mktemp("nbval") / "executed"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rA", "--nbval-lax", "--nbval-current-env",
             *(str(work / f"{name}.ipynb") for name in notebooks)],
            cwd=ROOT, env=dict(os.environ, HELPERS_EXECUTED_DIR=str(keep)), capture_output=True, text=True,
            timeout=300,
        )
    finally:
        shutil.rmtree(work)
    return proc, keep


def _outcomes(proc, notebook: str) -> list[str]:
    """What pytest's summary (-rA) says of each of ``notebook``'s cells, in order: PASSED, FAILED, ERROR..."""
    return [line.split()[0] for line in proc.stdout.splitlines() if f"{notebook}.ipynb::" in line
            and line.startswith(("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS"))]


@pytest.mark.slow  # runs nbval on notebooks in a child pytest (nbval_run): `make test-slow`
def test_gpu_run_keeps_executed_notebooks_and_timings(nbval_run):
    import nbformat

    proc, keep = nbval_run
    # the run passed but for the tables notebook's raw-float cell (the next test), and ended without internal errors
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED and _outcomes(proc, "demo") == ["PASSED", "PASSED"], \
        proc.stdout + proc.stderr
    executed = nbformat.read(keep / "demo.ipynb", as_version=4)
    assert executed.cells[1].outputs[0]["text"] == "42\n"
    timings = json.loads((keep / "timings.json").read_text())
    assert timings["scale"] == "smoke"
    demo = timings["notebooks"]["demo"]
    assert demo["passed"] and demo["run_s"] >= 0
    assert [c["first_line"] for c in demo["cells"]] == ["# the answer", "print(x)"]  # each cell timed, named
    assert all(c["s"] >= 0 and c["passed"] for c in demo["cells"])
    assert "notebook run times" in proc.stdout  # every notebook run ends with its times


@pytest.mark.slow  # runs nbval on notebooks in a child pytest (nbval_run): `make test-slow`
def test_a_cell_that_shows_a_table_of_raw_floats_fails(nbval_run):
    proc, keep = nbval_run
    assert _outcomes(proc, "tables") == ["PASSED", "FAILED"], proc.stdout + proc.stderr
    assert "hard to read" in proc.stdout and "7362.606991" in proc.stdout and "readable(df)" in proc.stdout
    cells = json.loads((keep / "timings.json").read_text())["notebooks"]["tables"]["cells"]
    assert [c["passed"] for c in cells] == [True, False]  # the readable table passes, the raw one fails


def test_ci_runs_the_readme_test_command_then_the_slow_tier():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme and "make test-slow" in readme
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-2:] == ["make test", "make test-slow"]
    make = (ROOT / "Makefile").read_text()
    assert '-m "not slow" tests' in make and "-m slow tests" in make  # the two tiers together are the whole suite
