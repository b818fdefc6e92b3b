"""pytest hooks for the notebook runs (nbval).

With ``HELPERS_EXECUTED_DIR`` set (the GPU run sets it), each notebook is
saved there with the outputs nbval collected, and ``timings.json`` records
each notebook's wall time. Notebooks in git stay output-free.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_KEEP = os.environ.get("HELPERS_EXECUTED_DIR")
_spans: dict[str, list[float]] = {}
_notebooks: dict[str, object] = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = time.perf_counter()
    yield
    if hasattr(item, "cell") and hasattr(item.parent, "nb"):
        key = str(item.parent.path)
        span = _spans.setdefault(key, [start, start])
        span[1] = time.perf_counter()
        if _KEEP:
            outputs = getattr(item, "test_outputs", None) or []
            item.cell.outputs = outputs
            _notebooks[key] = item.parent.nb


def pytest_sessionfinish(session):
    if not _KEEP or not _spans:
        return
    import nbformat

    out = Path(_KEEP)
    out.mkdir(parents=True, exist_ok=True)
    for key, nb in _notebooks.items():
        nbformat.write(nb, out / Path(key).name)
    timings = {Path(k).stem: round(end - start, 2) for k, (start, end) in _spans.items()}
    (out / "timings.json").write_text(json.dumps(timings, indent=2) + "\n")
