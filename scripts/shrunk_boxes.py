#!/usr/bin/env python3
"""Do the course's asserted figures survive time boxes 10× shorter? Compare a shrunk-box run with a normal one.

    python3 scripts/gpu_test.py                                   # the normal run → results/<gpu>.json
    python3 scripts/gpu_test.py --shrink-boxes 0.1 --keep build/shrunk   # → build/shrunk/results/<gpu>.json
    python3 scripts/shrunk_boxes.py build/shrunk/results/<gpu>.json results/<gpu>.json

The asserted figures are the notebooks' required ``Target`` rows (read from their source). For each one both
runs measured, the difference in percent of the normal run's value; the largest is recorded in the normal run's
file as ``shrunk_box_max_diff_pct``, with ``shrunk_box_factor`` and the shrunk run's ``shrunk_run_s_<notebook>``
and ``shrunk_max_cell_s_<notebook>``. A figure the shrunk run left unmeasured (a cut below a window's minimum)
is listed as such, not compared.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def asserted_figures(notebooks: list[Path] | None = None) -> dict[str, str]:
    """``{figure: notebook}`` for every required ``Target("figure", ...)`` in the notebooks' code cells."""
    out: dict[str, str] = {}
    for nb_path in notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(nb_path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            try:
                tree = ast.parse("".join(cell["source"]))
            except SyntaxError:  # a cell with IPython magics: no targets live there
                continue
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Target" and node.args
                        and isinstance(node.args[0], ast.Constant)):
                    required = next((k.value for k in node.keywords if k.arg == "required"), ast.Constant(True))
                    if isinstance(required, ast.Constant) and required.value is True:
                        out[node.args[0].value] = nb_path.stem
    return out


def compare(shrunk: dict, normal: dict, figures: dict[str, str]) -> list[dict]:
    """One row per asserted figure: both values and the difference in percent (None where one is missing)."""
    rows = []
    for name, nb in sorted(figures.items(), key=lambda kv: (kv[1], kv[0])):
        a, b = normal["figures"].get(name), shrunk["figures"].get(name)
        ok = all(v is not None and math.isfinite(v) for v in (a, b))
        rows.append({"notebook": nb, "figure": name, "normal": a, "shrunk": b,
                     "diff_pct": 100 * abs(b - a) / abs(a) if ok and a else None})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shrunk", type=Path, help="the shrunk-box run's results file")
    ap.add_argument("normal", type=Path, help="the normal run's results file (the figures are recorded here)")
    ap.add_argument("--factor", type=float, default=0.1, help="the factor the shrunk run used")
    args = ap.parse_args(argv)
    shrunk, normal = (json.loads(p.read_text()) for p in (args.shrunk, args.normal))
    if shrunk.get("device") != normal.get("device"):
        print(f"error: the runs are of different devices ({shrunk.get('device')} vs {normal.get('device')}): "
              "compare runs of one GPU.", file=sys.stderr)
        return 2
    rows = compare(shrunk, normal, asserted_figures())
    compared = [r for r in rows if r["diff_pct"] is not None]
    for r in rows:
        diff = "not measured in both" if r["diff_pct"] is None else f"{r['diff_pct']:5.1f}%"
        print(f"{r['notebook']:15s} {r['figure']:40s} normal {r['normal']!s:>12.10} shrunk {r['shrunk']!s:>12.10} {diff}")
    if not compared:
        print("error: no asserted figure was measured by both runs.", file=sys.stderr)
        return 1
    worst = max(compared, key=lambda r: r["diff_pct"])
    figures = {"shrunk_box_factor": args.factor, "shrunk_box_max_diff_pct": worst["diff_pct"],
               "shrunk_box_figures_compared": float(len(compared))}
    figures.update({f"shrunk_{k}": v for k, v in shrunk["figures"].items()
                    if k.startswith(("run_s_", "max_cell_s_"))})
    normal["figures"].update(figures)
    args.normal.write_text(json.dumps(normal, indent=2) + "\n")
    print(f"{len(compared)} asserted figures compared; largest difference {worst['diff_pct']:.1f}% "
          f"({worst['figure']}); recorded in {args.normal}")
    return 0 if worst["diff_pct"] <= 10 else 3


if __name__ == "__main__":
    sys.exit(main())
