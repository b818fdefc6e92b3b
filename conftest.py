"""pytest hooks for the notebook runs (nbval): every cell's wall time, the executed notebooks, readable tables.

Every nbval run ends with a table of each notebook's run time and its slowest cells, so an instructor
(and CI's log) sees where the time goes. With ``HELPERS_EXECUTED_DIR`` set (the GPU run sets it), each
notebook is saved there with the outputs nbval collected, and ``timings.json`` records each notebook's
wall time and every cell's (read by ``scripts/notebook_times.py``). Notebooks in git stay output-free.
A cell that shows a table of raw floats (``7362.606991``) or bare ``None`` fails, saying how to show it; so does one
whose plotly figure is drawn wrong: an axis that misses its data, a label or line far from it, a cut title or
legend, labels over one another, NaN ticks (``helpers.figure_check``); and so does one that prints on stderr
anything but a Python warning (a library's log lines show as red boxes that look like errors to a learner), and so
does one that prints NaN or inf with a unit ("nan× the baseline": a figure of what the run did not measure).
The outputs kept are in the order a learner sees them: nbval merges every stream of a cell into its first one, which
put the titles a loop printed above all the tables it displayed, so here only neighbouring streams are merged, as
Jupyter does (:func:`coalesce_in_order`).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

_KEEP = os.environ.get("HELPERS_EXECUTED_DIR")
_CR = re.compile(r"^.*\r(?=[^\n])", re.M)  # a line a carriage return wrote over (a progress bar's earlier states)
_BS = re.compile(r"[^\n]\x08")  # a character a backspace took back


def coalesce_in_order(outputs):
    """A cell's outputs with each run of neighbouring stream outputs of one name merged into one, everything else
    where it was: what Jupyter shows (a title printed, its table displayed, the next title, the next table). nbval's
    own merges every stream of a name into the first, wherever the displays between them stood. Carriage returns
    and backspaces are applied within each merged stream, as nbval applies them."""
    if not outputs:
        return outputs
    merged = []
    for out in outputs:
        last = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and last is not None and last.get("output_type") == "stream"
                and last.get("name") == out.get("name")):
            last["text"] = last["text"] + out["text"]
        else:
            merged.append(out)
    for out in merged:
        if out.get("output_type") == "stream":
            text = out["text"]
            while True:
                shorter = _BS.sub("", text)
                if shorter == text:
                    break
                text = shorter
            out["text"] = _CR.sub("", text)
    return merged


try:  # the notebook runs keep what a learner sees; the unit tests run without nbval's plugin in play
    import nbval.plugin as _nbval_plugin

    _nbval_plugin.coalesce_streams = coalesce_in_order
except ImportError:  # pragma: no cover - nbval is a test dependency
    pass
_spans: dict[str, list[float]] = {}
_figures: dict[str, int] = {}  # notebook → plotly figures its cells showed, each checked by helpers.figure_check
_cells: dict[str, list[dict]] = {}
_notebooks: dict[str, object] = {}


def first_line(source: str) -> str:
    """The first line of a cell that says what it does (not blank), shortened for a table."""
    for line in source.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= 80 else line[:77] + "..."
    return ""


def unreadable_tables(outputs) -> list[str]:
    """What makes a table a cell displayed hard to read (``helpers.tables.unreadable_cells``), per table."""
    from helpers.tables import unreadable_cells

    problems = []
    for out in outputs or []:
        html = out.get("data", {}).get("text/html", "")
        html = "".join(html) if isinstance(html, list) else html
        if "<table" in html:
            problems += unreadable_cells(html)
    return list(dict.fromkeys(problems))


def misdrawn_figures(outputs) -> list[str]:
    """What is wrong with each plotly figure a cell displayed (``helpers.figure_check.problems``)."""
    from helpers.figure_check import problems as figure_problems

    found = []
    for out in outputs or []:
        fig = out.get("data", {}).get("application/vnd.plotly.v1+json")
        if isinstance(fig, dict):
            found += figure_problems(fig)
    return list(dict.fromkeys(found))


#: The first line of a Python warning as ``warnings`` prints it: ``/path/file.py:87: UserWarning: message``.
_WARNING = re.compile(r"^.*:\d+: [A-Za-z_.]*Warning: ")


def stray_stderr(outputs) -> list[str]:
    """The lines a cell printed on stderr that are not part of a Python warning (its first line, and the indented
    lines and message lines after it that ``warnings`` prints): the course shows a learner no other stderr."""
    stray = []
    for out in outputs or []:
        if out.get("output_type") != "stream" or out.get("name") != "stderr":
            continue
        text = out.get("text", "")
        in_warning = False
        for line in ("".join(text) if isinstance(text, list) else text).splitlines():
            if _WARNING.match(line):
                in_warning = True
            elif not line.strip() or (in_warning and line.startswith((" ", "\t"))):
                continue
            else:
                in_warning = False
                stray.append(line if len(line) <= 120 else line[:117] + "...")
    return list(dict.fromkeys(stray))


def not_a_number_printed(outputs) -> list[str]:
    """NaN or inf printed with a unit ("nan× the baseline") in what a cell printed or displayed as text
    (``helpers.tables.not_a_number_figures``): a figure of something the run did not measure, shown as if it had."""
    from helpers.tables import not_a_number_figures

    return list(dict.fromkeys(found for text in _printed_texts(outputs) for found in not_a_number_figures(text)))


def _printed_texts(outputs):
    """What a cell printed (stdout) or displayed as text, one string per output."""
    for out in outputs or []:
        text = out.get("text") if out.get("output_type") == "stream" else out.get("data", {}).get("text/plain")
        if text:
            yield "".join(text) if isinstance(text, list) else text


def arithmetic_printed(outputs) -> list[str]:
    """A ratio or a change in % printed beside the two figures it comes from that the reader's arithmetic on those
    figures, as printed, does not give (``helpers.tables.arithmetic_disagreements``): "0.704 ms, compiled 0.129 ms
    (5.4×)"."""
    from helpers.tables import arithmetic_disagreements

    return list(dict.fromkeys(found for text in _printed_texts(outputs) for found in arithmetic_disagreements(text)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = time.perf_counter()
    outcome = yield
    if hasattr(item, "cell") and hasattr(item.parent, "nb") and outcome.excinfo is None:
        # Every table a notebook shows must read at a glance: a raw float or a bare "None" fails the cell.
        problems = unreadable_tables(getattr(item, "test_outputs", None))
        if problems:
            outcome.force_exception(AssertionError(
                "this cell shows a table that is hard to read: " + "; ".join(problems)
                + ". Show it with helpers.tables.readable(df), and say in df.attrs['missing'] why a value is missing."))
        misdrawn = misdrawn_figures(getattr(item, "test_outputs", None))
        if misdrawn and not problems:  # a figure drawn wrong (helpers.figure_check.problems says how)
            outcome.force_exception(AssertionError("this cell draws a figure wrong: " + "; ".join(misdrawn) + "."))
        stray = stray_stderr(getattr(item, "test_outputs", None))
        if stray and not problems and not misdrawn:
            outcome.force_exception(AssertionError(
                f"this cell prints on stderr what is not a warning ({len(stray)} lines; the first: {stray[0]!r}): "
                "keep a library's log lines off the learner's screen (helpers/__init__.py quiets Kineto's), and print "
                "what the learner should read on stdout."))
        nan = not_a_number_printed(getattr(item, "test_outputs", None))
        if nan and not problems and not misdrawn and not stray:
            outcome.force_exception(AssertionError(
                f"this cell prints a figure that is not a number ({', '.join(nan)}): a ratio or share of something "
                "this run did not measure. Say that it was not measured, and why (helpers.tables.times_over)."))
        sums = arithmetic_printed(getattr(item, "test_outputs", None))
        if sums and not problems and not misdrawn and not stray and not nan:
            outcome.force_exception(AssertionError(
                f"this cell prints a figure beside the figures it comes from that their arithmetic, as printed, does "
                f"not give ({'; '.join(sums)}): compute it from the figures as printed (helpers.tables.times_as_shown, "
                "helpers.tables.as_shown)."))
    if hasattr(item, "cell") and hasattr(item.parent, "nb"):
        end = time.perf_counter()
        key = str(item.parent.path)
        shown = [o for o in getattr(item, "test_outputs", None) or []
                 if isinstance(o.get("data", {}).get("application/vnd.plotly.v1+json"), dict)]
        _figures[key] = _figures.get(key, 0) + len(shown)
        span = _spans.setdefault(key, [start, start])
        span[1] = end
        _cells.setdefault(key, []).append({"cell": item.cell.get("id") or str(item.cell_num),
                                           "s": round(end - start, 2), "first_line": first_line(item.cell.source),
                                           "passed": outcome.excinfo is None})
        if _KEEP:
            item.cell.outputs = getattr(item, "test_outputs", None) or []
            _notebooks[key] = item.parent.nb


def timings() -> dict[str, dict]:
    """``{notebook: {"run_s", "passed", "figures_checked", "cells": [{"cell", "s", "first_line", "passed"}, ...]}}`` of
    this session."""
    return {Path(k).stem: {"run_s": round(end - start, 2), "passed": all(c["passed"] for c in _cells.get(k, [])),
                           "figures_checked": _figures.get(k, 0), "cells": _cells.get(k, [])}
            for k, (start, end) in _spans.items()}


def pytest_terminal_summary(terminalreporter):
    if not _spans:
        return
    write = terminalreporter.write_line
    terminalreporter.section("notebook run times")
    for name, t in timings().items():
        slowest = sorted(t["cells"], key=lambda c: -c["s"])[:3]
        write(f"{name:22s} {t['run_s']:7.1f} s   {t['figures_checked']:2d} figure{'' if t['figures_checked'] == 1 else 's'} checked   slowest cells: "
              + "; ".join(f"{c['s']:.1f} s [{c['cell']}] {c['first_line'][:40]}" for c in slowest))


def pytest_sessionfinish(session):
    if not _KEEP or not _spans:
        return
    import nbformat

    from helpers import env

    out = Path(_KEEP)
    out.mkdir(parents=True, exist_ok=True)
    for key, nb in _notebooks.items():
        # the day it ran, kept with it: its export says that date, not the day a later run rewrote the results file
        nb.metadata.setdefault("gpu_perf_lab", {})["executed"] = env.today()
        nbformat.write(nb, out / Path(key).name)

    # The CPU's kernels decide a smoke run's times (AVX2 only emulates bf16): the record says which it had.
    record = {"scale": env.scale(), "cpu_capability": env.cpu_capability(), "notebooks": timings()}
    (out / "timings.json").write_text(json.dumps(record, indent=2) + "\n")
