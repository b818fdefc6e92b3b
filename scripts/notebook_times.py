#!/usr/bin/env python3
"""How long each notebook and each of its cells takes: figures for results/, the budget, the README's table.

The notebook runs (nbval) write ``timings.json`` (see the repository's ``conftest.py``). From it:

    python3 scripts/notebook_times.py record build/smoke/timings.json   # a smoke run's times → results/smoke*.json
    python3 scripts/notebook_times.py fresh-clone 734                  # `make test` from a fresh clone took 734 s
    python3 scripts/notebook_times.py readme                            # README's run-time table from results/
    python3 scripts/notebook_times.py readme --check                    # exit 1 if the README is out of date

``make time-smoke`` runs the notebooks at smoke scale and records them: in ``results/smoke-avx2.json`` when the
CPU's kernels are limited to AVX2 (no AVX-512: the slower kind many learners have, and what
``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2`` makes of any x86 machine), else in ``results/smoke.json``.
``make time-fresh-clone`` times ``make test`` in a fresh clone with AVX2 only. ``make test-gpu`` records the full
scale, checks the budget and rewrites the README's table. Nobody types a run time into the README.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The course's reference GPU: the README's full-scale times are this file's.
REFERENCE = "nvidia-h100-80gb-hbm3.json"
#: Notebooks that one GPU cannot run at full scale, and the results file of the node that ran them.
MULTI_GPU_REFERENCE = {"05_ddp": "nvidia-h200.json"}
SMOKE = "smoke.json"
#: Smoke runs on a CPU whose kernels use AVX2 at most (no AVX-512, no bf16 instructions) have their own file.
SMOKE_AVX2 = "smoke-avx2.json"
_spec = importlib.util.spec_from_file_location("readme_figures", Path(__file__).with_name("readme_figures.py"))
_figures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_figures)

_BEGIN = "<!-- run times: written by scripts/notebook_times.py from results/; do not edit by hand -->"
_END = "<!-- /run times -->"


@dataclasses.dataclass(frozen=True)
class Budget:
    """What an instructor can plan around: seconds per notebook and per cell at one scale."""

    notebook_s: float
    cell_s: float | None


#: Full scale is budgeted on one H100; smoke scale on any 2-core CPU (CI's machine, and one with AVX2 only).
BUDGETS = {"full": Budget(notebook_s=300, cell_s=90), "smoke": Budget(notebook_s=180, cell_s=60)}


def avx2_only(capability: str) -> bool:
    """Whether a run's CPU capability (``env.cpu_capability()``: ``"AVX2"``, ``"AVX512 (oneDNN ≤ AVX2)"``, ...)
    limits PyTorch's or oneDNN's kernels to AVX2 or less."""
    return not capability.startswith("AVX512") or "≤ AVX2" in capability or "≤ AVX)" in capability


def smoke_file(timings: dict) -> str:
    """The results file of a smoke run: ``smoke-avx2.json`` for an AVX2-only CPU, else ``smoke.json``."""
    return SMOKE_AVX2 if avx2_only(timings.get("cpu_capability", "")) else SMOKE


def load(path: str | Path) -> dict:
    """A ``timings.json``: ``{"scale": ..., "notebooks": {name: {"run_s", "passed", "cells": [...]}}}``."""
    raw = json.loads(Path(path).read_text())
    if "notebooks" not in raw:
        raise ValueError(f"{path} is not a timings file written by the notebook runs (no 'notebooks' key).")
    return raw


def figures_from(timings: dict) -> dict[str, float]:
    """``run_s_<notebook>``, ``max_cell_s_<notebook>`` and ``figures_checked_<notebook>`` (the plotly figures its cells
    showed, each checked by ``helpers.figure_check``) for every notebook whose cells all passed."""
    out: dict[str, float] = {}
    for name, t in timings["notebooks"].items():
        if not t.get("passed", True) or not t["cells"]:
            continue  # a failed run's time is not the notebook's time
        out[f"run_s_{name}"] = float(t["run_s"])
        out[f"max_cell_s_{name}"] = max(float(c["s"]) for c in t["cells"])
        if "figures_checked" in t:
            out[f"figures_checked_{name}"] = int(t["figures_checked"])
    return out


def slowest_cells(timings: dict, n: int = 5) -> list[dict]:
    """The ``n`` slowest cells over every notebook, each with its notebook, id, seconds and first line."""
    cells = [{"notebook": name, **c} for name, t in timings["notebooks"].items() for c in t["cells"]]
    return sorted(cells, key=lambda c: -c["s"])[:n]


def over_budget(timings: dict, scale: str) -> list[str]:
    """One line per notebook or cell over ``scale``'s budget (empty when everything fits)."""
    budget = BUDGETS[scale]
    out = []
    for name, t in timings["notebooks"].items():
        if t["run_s"] > budget.notebook_s:
            out.append(f"{name} took {t['run_s']:.0f} s (budget {budget.notebook_s:.0f} s)")
        for c in t["cells"]:
            if budget.cell_s is not None and c["s"] > budget.cell_s:
                out.append(f"{name} cell [{c['cell']}] took {c['s']:.0f} s (budget {budget.cell_s:.0f} s): "
                           f"{c['first_line']}")
    return out


def report(timings: dict) -> str:
    """The five slowest cells and the budget, as text for the run's log."""
    scale = timings.get("scale", "full")
    lines = ["the five slowest cells:"]
    lines += [f"  {c['s']:7.1f} s  {c['notebook']} [{c['cell']}]  {c['first_line']}" for c in slowest_cells(timings)]
    budget = BUDGETS[scale]
    cell = f", each cell ≤ {budget.cell_s:.0f} s" if budget.cell_s else ""
    misses = over_budget(timings, scale)
    lines.append(f"budget at {scale} scale: each notebook ≤ {budget.notebook_s:.0f} s{cell}: "
                 + ("within it" if not misses else "OVER: " + "; ".join(misses)))
    return "\n".join(lines)


def _secs(v: float | None) -> str:
    return "not measured yet" if v is None else f"{v:.0f} s"


def _course_sentence(full: dict, course: float | None, notebooks: list[str]) -> str:
    """``make test-gpu``'s one-command time, with the day it was measured; where a notebook's own time is newer, the
    sentence says the notebooks changed since and what their own times, measured one by one, add up to."""
    if not course:
        return ""
    ff = full["figures"]
    day = _figures.day_of(full, "full_course_run_s")
    newer = [nb for nb in notebooks if f"run_s_{nb}" in ff
             and str(_figures.day_of(full, f"run_s_{nb}")) > str(day)]
    text = (f"The whole course at full scale, every notebook under nbval from one command (`make test-gpu`, its "
            f"notebooks): {_secs(course)} on the {full.get('device', 'H100')}, {day}")
    if newer:
        total = sum(ff[f"run_s_{nb}"] for nb in notebooks if f"run_s_{nb}" in ff)
        text += (f" (not re-measured since; the notebooks have changed, and their own times on that GPU, in the "
                 f"table, add up to {_secs(total)})")
    return text + ". "


def readme_block(results_dir: Path = ROOT / "results", notebooks: list[str] | None = None) -> str:
    """The README's run-time table, from the reference GPU's results and the two smoke runs' (any CPU, AVX2 only)."""
    if notebooks is None:
        notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

    def read(name: str) -> dict:
        path = results_dir / name
        return json.loads(path.read_text()) if path.exists() else {"figures": {}}

    full, smoke, avx2 = read(REFERENCE), read(SMOKE), read(SMOKE_AVX2)
    sf, af = smoke["figures"], avx2["figures"]
    rows, others = [], []
    for nb in notebooks:
        name = MULTI_GPU_REFERENCE.get(nb, REFERENCE)
        data = full if name == REFERENCE else read(name)
        ff, mark = data["figures"], "" if name == REFERENCE else " ¹"
        rows.append(f"| `{nb}` | {_secs(ff.get(f'run_s_{nb}'))}{mark} | {_secs(ff.get(f'max_cell_s_{nb}'))} | "
                    f"{_secs(sf.get(f'run_s_{nb}'))} | {_secs(af.get(f'run_s_{nb}'))} | "
                    f"{_secs(af.get(f'max_cell_s_{nb}'))} |")
        if mark:
            gpus = int(ff.get("ddp_gpus", 2))
            others.append(f"`{nb}` on {gpus} × {data.get('device', name)}, {_figures.day_of(data, f'run_s_{nb}')} "
                          f"(`results/{name}`)")
    fb, sb = BUDGETS["full"], BUDGETS["smoke"]
    fresh = af.get("smoke_make_test_s_avx2")
    course = full["figures"].get("full_course_run_s")
    span = _figures.days_of(full, [f"run_s_{nb}" for nb in notebooks])
    where = (f"Full scale: one {full.get('device', 'H100')}, {span} (`results/{REFERENCE}`)"
             + (f"; ¹ needs several GPUs of one node: {'; '.join(others)}" if others else "") +
             f". Smoke scale: {smoke.get('host_cpu', 'a CPU')}, {smoke.get('date', '-')} (`results/{SMOKE}`); "
             f"AVX2 only: {avx2.get('device', 'a CPU limited to AVX2')}, {avx2.get('host_cpu', '-')}, "
             f"{avx2.get('date', '-')} (`results/{SMOKE_AVX2}`)"
             + (f"; `make test` from a fresh clone there, setup included: {_secs(fresh)}"
                + (f" (at commit {avx2['fresh_clone_commit']})" if avx2.get("fresh_clone_commit") else "")
                if fresh else "") + ". "
             + _course_sentence(full, course, notebooks) +
             f"Budget: each notebook ≤ {fb.notebook_s:.0f} s and each cell ≤ {fb.cell_s:.0f} s at full scale on one "
             f"H100 (on two GPUs for those that need them); each notebook ≤ {sb.notebook_s:.0f} s and each cell ≤ "
             f"{sb.cell_s:.0f} s at smoke scale on any 2-core CPU.")
    return "\n".join([_BEGIN, "| notebook | full scale | its slowest cell | smoke scale | smoke, AVX2 only | "
                      "its slowest cell |", "| --- | --- | --- | --- | --- | --- |", *rows, "", where, _END])


#: The presenter's guide shows the same table between markers of its own.
GUIDE = ROOT / "PRESENTING.md"
_GUIDE_BEGIN = "<!-- times: written by scripts/notebook_times.py from results/; do not edit by hand -->"
_GUIDE_END = "<!-- /times -->"


def update_readme(readme: Path = ROOT / "README.md", *, check: bool = False, guide: Path | None = GUIDE) -> bool:
    """Rewrite the run-time table between the markers of the README (and of the presenter's guide, and the README's
    figures table); with ``check``, only say whether they are up to date."""
    block = readme_block()
    ok = _figures.rewrite_between(readme, _BEGIN, _END, block, check=check, what="run-time table")
    if guide is not None and guide.exists():
        inner = block.replace(_BEGIN, _GUIDE_BEGIN).replace(_END, _GUIDE_END)
        ok = _figures.rewrite_between(guide, _GUIDE_BEGIN, _GUIDE_END, inner, check=check, what="run-time table") and ok
    if not check and _figures.BEGIN in readme.read_text():  # the figures table beside it, from the same results/
        _figures.update_readme(readme)
    return ok


def _smoke_header(file: str, capability: str) -> dict:
    """A smoke file's device: an AVX2-only CPU says so in its name; both keep the capability the run had."""
    return {"device": "cpu (AVX2 only)" if file == SMOKE_AVX2 else "cpu", "cpu_capability": capability}


def record(timings: dict) -> Path | None:
    """Record a run's times (full scale in this device's results file, smoke scale in ``results/smoke.json`` or,
    on an AVX2-only CPU, ``results/smoke-avx2.json``) and rewrite the README's table from results/; None when no
    notebook passed, so there is nothing to record."""
    sys.path.insert(0, str(ROOT))
    from helpers import results

    figures = figures_from(timings)
    if not figures:
        return None
    if timings["scale"] == "smoke":
        file = smoke_file(timings)
        path = results.record(figures, path=results.results_dir() / file,
                              header=_smoke_header(file, timings.get("cpu_capability", "unknown")))
    else:
        path = results.record(figures)
    update_readme()  # it shows the reference GPU's and the smoke runs' files; rewriting it for another GPU changes nothing
    return path


def record_fresh_clone(seconds: float, *, lab_ready_s: float | None = None, commit: str | None = None) -> Path:
    """``make test``'s time from a fresh clone: ``smoke_make_test_s_avx2`` in ``smoke-avx2.json`` on an AVX2-only
    CPU (real or made by the two settings), else ``smoke_make_test_s`` in ``smoke.json``; with ``lab_ready_s``,
    how long `make lab` took from the clone to serving the notebooks (``fresh_clone_lab_ready_s``); with ``commit``,
    the commit the clone was made at (``fresh_clone_commit``, which the README states beside the time)."""
    sys.path.insert(0, str(ROOT))
    from helpers import env, results

    capability = env.cpu_capability()
    file = SMOKE_AVX2 if avx2_only(capability) else SMOKE
    name = "smoke_make_test_s_avx2" if file == SMOKE_AVX2 else "smoke_make_test_s"
    figures = {name: seconds} | ({"fresh_clone_lab_ready_s": lab_ready_s} if lab_ready_s is not None else {})
    header = _smoke_header(file, capability) | ({"fresh_clone_commit": commit} if commit else {})
    path = results.record(figures, path=results.results_dir() / file, header=header)
    update_readme()
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="record a timings.json in results/ and rewrite the README's table")
    rec.add_argument("timings")
    fresh = sub.add_parser("fresh-clone", help="record how long `make test` took from a fresh clone")
    fresh.add_argument("seconds", type=float)
    rd = sub.add_parser("readme", help="rewrite the README's run-time table from results/")
    rd.add_argument("--check", action="store_true", help="only check that it is up to date")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        timings = load(args.timings)
        path = record(timings)
        if path is None:
            print(f"no notebook in {args.timings} passed: nothing to record.", file=sys.stderr)
            return 1
        print(report(timings))
        print(f"recorded in {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}; README's table rewritten")
        return 0
    if args.cmd == "fresh-clone":
        path = record_fresh_clone(args.seconds)
        print(f"make test from a fresh clone: {args.seconds:g} s, recorded in {path}; README's table rewritten")
        return 0
    if args.check:
        ok = update_readme(check=True)
        print("README's run-time table is up to date" if ok else
              "README's run-time table differs from results/: run python3 scripts/notebook_times.py readme")
        return 0 if ok else 1
    update_readme()
    return 0


if __name__ == "__main__":
    sys.exit(main())
