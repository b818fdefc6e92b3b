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


def test_gpu_run_keeps_executed_notebooks_and_timings(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("\n# the answer\nx = 6 * 7"), new_code_cell("print(x)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    # Inside the repository, so that its conftest.py (the hook under test) applies.
    (ROOT / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=ROOT / "build"))
    src = work / "demo.ipynb"
    nbformat.write(nb, src)
    keep = tmp_path / "executed"
    env = dict(os.environ, HELPERS_EXECUTED_DIR=str(keep))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-current-env", str(src)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )
    finally:
        shutil.rmtree(work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    executed = nbformat.read(keep / "demo.ipynb", as_version=4)
    assert executed.cells[1].outputs[0]["text"] == "42\n"
    timings = json.loads((keep / "timings.json").read_text())
    assert timings["scale"] == "smoke"
    demo = timings["notebooks"]["demo"]
    assert demo["passed"] and demo["run_s"] >= 0
    assert [c["first_line"] for c in demo["cells"]] == ["# the answer", "print(x)"]  # each cell timed, named
    assert all(c["s"] >= 0 and c["passed"] for c in demo["cells"])
    assert "notebook run times" in proc.stdout  # every notebook run ends with its times


def test_a_cell_that_shows_a_table_of_raw_floats_fails(tmp_path):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    make = "import pandas as pd\ndf = pd.DataFrame({'img_per_s': [7362.606991], 'peak_gib': [None]})\n"
    nb = new_notebook(cells=[
        new_code_cell(make + "from helpers.tables import readable\n"
                      "readable(df, missing={'peak_gib': 'no GPU allocator on a CPU'})"),
        new_code_cell("df"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (ROOT / "build").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=ROOT / "build"))  # inside the repository: its conftest.py is under test
    src = work / "tables.ipynb"
    nbformat.write(nb, src)
    keep = tmp_path / "executed"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-current-env", str(src)],
            cwd=ROOT, env=dict(os.environ, HELPERS_EXECUTED_DIR=str(keep)), capture_output=True, text=True,
            timeout=300,
        )
    finally:
        shutil.rmtree(work)
    assert proc.returncode != 0
    assert "hard to read" in proc.stdout and "7362.606991" in proc.stdout and "readable(df)" in proc.stdout
    cells = json.loads((keep / "timings.json").read_text())["notebooks"]["tables"]["cells"]
    assert [c["passed"] for c in cells] == [True, False]  # the readable table passes, the raw one fails


def test_ci_runs_exactly_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make lab" in readme
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test"
