"""Judge the example class (examples/class/) in one command, as the README says, and record its wall time.

    python scripts/time_class_example.py --out build/class --time-limit 120

Runs ``python -m helpers.challenge.classroom examples/class/`` in a fresh process (a leaderboard of its own under
``--out``), times it from start to end, and records ``class_example_wall_s`` with the submissions judged and passed
(``results.record``: ``results/<gpu>.json`` on a GPU, ``results/local/`` at smoke scale), beside how each submission's
process was confined on this machine (Landlock's ABI, 0 for none).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from helpers import results
    from helpers.challenge import sandbox

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/class", help="where the class's logs, tables and leaderboard go")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per submission (hangs.py waits it out; the classic loop takes about a minute on a GPU)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "helpers.challenge.classroom", str(ROOT / "examples" / "class"), "--out", str(out),
           "--time-limit", str(args.time_limit), "--leaderboard", str(out / "leaderboard.sqlite")]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        print(f"the class judge ended with exit code {proc.returncode}", file=sys.stderr)
        return proc.returncode
    data = json.loads((out / "class.json").read_text())
    rows = data["rows"]
    passed = sum(1 for r in rows if r["verdict"] == "passed")
    figures = {"class_example_wall_s": wall, "class_example_submissions": len(rows), "class_example_passed": passed,
               "class_example_landlock_abi": sandbox.landlock_abi()}
    path = results.record(figures)
    print(f"the example class: {len(rows)} submissions, {passed} passed, in {wall:.0f} s (Landlock ABI "
          f"{figures['class_example_landlock_abi']}); recorded in {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
