#!/usr/bin/env python3
"""Run every notebook at full scale on a GPU node with nbval; keep the executed
notebooks; record each notebook's run time and slowest cell in ``results/<gpu-slug>.json``;
print the five slowest cells and the time budget; print a summary.

    make test-gpu                               # with the project's .venv
    python3 scripts/gpu_test.py                 # with any Python that has the stack (see README)
    python3 scripts/gpu_test.py notebooks/01_baseline.ipynb --keep build/executed

A notebook or cell over the budget (scripts/notebook_times.py: 300 s and 90 s on one H100)
fails the run, unless ``--no-budget``.

    python3 scripts/gpu_test.py --shrink-boxes 0.1      # every time box 10× shorter (helpers/timebox.py)

runs the notebooks with every time box shrunk: a fast GPU stands in for a slow machine. Its figures go to
``<keep>/results/`` (the reference file stays as it was); ``scripts/shrunk_boxes.py`` compares them with the
normal run's and records the largest difference of an asserted figure.

    make preview PROFILE=t4                             # python3 scripts/gpu_test.py --profile t4

runs every notebook at full scale under a learner-machine profile (helpers/machine_profiles.py: t4, two-core):
this process and everything it starts get the profile's cores, SMs, memory, no bf16 and no GPM. What an instructor
with a large GPU sees is what a learner with the small one will see, named as such everywhere: the figures go to
``results/<gpu-slug>.<profile>.json`` (with ``profile_notebooks_run`` and ``profile_notebooks_passed``), the
executed notebooks to ``build/preview-<profile>/``; the GPU unit tests run are the profile's own checks.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


#: The whole course at full scale on one H100, every notebook under nbval from one command.
FULL_COURSE_BUDGET_S = 1800.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("notebooks", nargs="*", help="notebooks to run (default: all in notebooks/)")
    ap.add_argument("--keep", default=str(ROOT / "build" / "executed"), help="folder for the executed notebooks")
    ap.add_argument("--cell-timeout", type=int, default=1800, help="seconds one cell may take")
    ap.add_argument("--no-budget", action="store_true", help="report the time budget without failing on it")
    ap.add_argument("--unit", nargs="*", default=None, help="GPU unit tests to run (default: tests/test_*_gpu.py; --unit alone: none)")
    ap.add_argument("--shrink-boxes", type=float, default=None, metavar="FACTOR",
                    help="multiply every time box by FACTOR (0.1: 10× shorter); figures go to <keep>/results/")
    ap.add_argument("--profile", default=None, metavar="NAME",
                    help="run under a learner-machine profile (t4, two-core): see helpers/machine_profiles.py")
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    if args.profile:
        os.environ["HELPERS_PROFILE"] = args.profile  # before the helpers are imported: they apply it
        if args.keep == ap.get_default("keep"):
            args.keep = str(ROOT / "build" / f"preview-{args.profile}")
        if args.unit is None:
            args.unit = [str(ROOT / "tests" / "test_machine_profiles_gpu.py")]
    try:
        import helpers  # noqa: F401 - applies the profile's host limits to this process and all it starts
    except ValueError as e:  # an unknown profile: the message lists the names
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("error: no CUDA GPU is visible, and the full-scale run measures one. Run this on a GPU node "
              "(check with nvidia-smi), or use 'make test' for the CPU smoke run.", file=sys.stderr)
        return 2
    missing = [m for m in ("nbval", "ipykernel", "plotly", "ipywidgets", "pynvml") if _missing(m)]
    if missing:
        print(f"error: {', '.join(missing)} not importable. On an offline node, build a wheelhouse with "
              "scripts/wheelhouse.sh elsewhere and install it with scripts/offline_install.sh (README).", file=sys.stderr)
        return 2

    notebooks = args.notebooks or sorted(str(p) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    keep = Path(args.keep)
    if args.shrink_boxes is not None:  # the reference results stay as the normal run left them
        os.environ["HELPERS_TIMEBOX_FACTOR"] = str(args.shrink_boxes)
        os.environ["HELPERS_RESULTS"] = str((keep / "results").resolve())
    env = dict(os.environ, HELPERS_SCALE="full", HELPERS_EXECUTED_DIR=str(keep), PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    unit = args.unit if args.unit is not None else sorted(str(p) for p in (ROOT / "tests").glob("test_*_gpu.py"))
    gpu_tests = [sys.executable, "-m", "pytest", "-v", *unit]
    cmd = [sys.executable, "-m", "pytest", "-v", "--nbval-lax", "--nbval-current-env",
           f"--nbval-cell-timeout={args.cell_timeout}", *notebooks]
    (keep / "timings.json").unlink(missing_ok=True)  # a run that dies early must not report the last run's times
    start = time.perf_counter()
    if unit:
        print("==>", " ".join(gpu_tests), flush=True)
        rc_unit = subprocess.call(gpu_tests, cwd=ROOT, env=env)  # the real NVML/GPU paths of the helpers
    else:  # `--unit` with no tests: notebooks only (pytest with no paths would run every unit test)
        print("==> no GPU unit tests asked for", flush=True)
        rc_unit = 0
    print("==>", " ".join(cmd), flush=True)
    before = _figures_now()  # what this run records is what differs after it
    nb_start = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT, env=env)
    course_s = time.perf_counter() - nb_start  # every notebook under nbval, one process after another
    wall = time.perf_counter() - start

    from helpers import results, tables

    import notebook_times  # beside this script

    timings_file = keep / "timings.json"
    timings = notebook_times.load(timings_file) if timings_file.exists() else {"scale": "full", "notebooks": {}}
    misses = notebook_times.over_budget(timings, "full")
    path = notebook_times.record(timings)  # also rewrites the README's run-time table
    whole_course = not args.notebooks and args.shrink_boxes is None and rc == 0 and not args.profile
    if args.profile and timings["notebooks"]:  # how much of the course ran, and passed, on this stand-in
        path = record_profile_runs(timings)
    if path is not None and whole_course:  # the course in one command: recorded only when every notebook ran and passed
        results.record({"full_course_run_s": round(course_s, 1)}, path=path)
        print(f"==> the whole course: {course_s:.0f} s under nbval (budget {FULL_COURSE_BUDGET_S:.0f} s)")
    if path is not None:
        print(f"\n==> results in {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
        data = results.load(path)
        print(f"device {data['device']} | driver {data['driver']} | torch {data['torch']} | CUDA {data['cuda']} | {data['date']}")
        summary = tables.readable(results.figures_table(path))  # each figure in its unit, as the notebooks show it
        print("\n".join([summary.shown.to_string(index=False), *summary.notes]))
    if timings["notebooks"]:
        print("\n" + notebook_times.report(timings))
    print(f"\n==> executed notebooks in {keep}; GPU unit tests {'passed' if rc_unit == 0 else 'FAILED'}; "
          f"nbval {'passed' if rc == 0 else 'FAILED'}; time budget {'met' if not misses else 'MISSED'}; "
          f"{wall:.0f} s in all")
    over = whole_course and course_s > FULL_COURSE_BUDGET_S
    after = _figures_now()
    split = results.disagreeing(after, {k for k, v in after.items() if before.get(k) != v})
    for line in split:
        print(f"==> FAILED: {line}", flush=True)
    return rc or rc_unit or (4 if split else 0) or (0 if args.no_budget or not (misses or over) else 3)


def _figures_now() -> dict:
    """The figures of this GPU's results file as they stand (empty before its first run)."""
    from helpers import results

    try:
        return dict(results.load(results.results_path()).get("figures", {}))
    except (OSError, ValueError):
        return {}


def record_profile_runs(timings: dict) -> Path:
    """Which notebooks ran under the profile and whether each passed (kept per notebook, so a preview split over
    several calls adds up), and ``profile_notebooks_run`` / ``profile_notebooks_passed`` over all of them."""
    from helpers import env, results

    path = results.results_path()
    runs = dict(results.load(path).get("profile_notebooks", {}))
    runs.update({name: {"passed": bool(t.get("passed")), "run_s": t["run_s"], "date": env.today()}
                 for name, t in timings["notebooks"].items()})
    return results.record({"profile_notebooks_run": len(runs),
                           "profile_notebooks_passed": sum(r["passed"] for r in runs.values())},
                          path=path, header={"profile_notebooks": dict(sorted(runs.items()))})


def _missing(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is None


if __name__ == "__main__":
    sys.exit(main())
