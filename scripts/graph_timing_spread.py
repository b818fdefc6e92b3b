#!/usr/bin/env python3
"""How steady is 03's CUDA-graph speed-up from one process to the next? Two ways of timing it, side by side.

    python3 scripts/graph_timing_spread.py --processes 6          # on a GPU node

Each of ``--processes`` fresh processes builds the small MLP, captures it (03's reference), and times it both
ways, in the same process:

- ``events``: what 03 did first: 50 eager calls timed one by one with CUDA events, then 50 replays the same way
  (``bench.time_it``); the ratio of the two medians;
- ``rounds``: :func:`helpers.kernels.graphs.graph_speedup`: eager and replay in alternating rounds of 20 calls,
  the median of each round's ratio;
- ``gpu_busy_pct``: from the same rounds, the forward's kernels (summed) over the replay's time per call: the
  share of its own time the GPU is busy in a replay, the figure 03 asserts.

Prints each process's two speed-ups and, per method, the range over processes as a share of its median (what a
second run of the notebook can differ by); records them as ``graph_speedup_spread_pct_events``,
``..._rounds`` and ``..._gpu_busy_pct`` in ``results/`` with the device, with each method's lowest and highest
(``graph_speedup_min_<method>``, ``graph_speedup_max_<method>``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = """
import json, torch
from helpers import bench, models
from helpers.exercises import nb03
from helpers.kernels import graphs
m = models.small_mlp().cuda().eval()
x = torch.randn(64, 256, device="cuda")
run = nb03.graphed(m, x)
with torch.no_grad():
    t_e = bench.time_it(lambda: m(x), repeats=50).median_ms
    t_g = bench.time_it(lambda: run(x), repeats=50).median_ms
    g = graphs.graph_speedup(lambda: m(x), lambda: run(x), rounds=25)
print("JSON " + json.dumps({"events": t_e / t_g, "rounds": g.speedup, "rounds_low": g.low, "rounds_high": g.high,
                          "eager_us": g.eager_us, "graph_us": g.graph_us, "kernel_us": g.kernel_us,
                          "gpu_busy_pct": g.gpu_busy_pct}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--processes", type=int, default=6)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    from helpers import results

    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible; this measures CUDA graphs. Run it on a GPU node.", file=sys.stderr)
        return 2
    runs = []
    for i in range(args.processes):
        out = subprocess.run([sys.executable, "-c", ONE], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        runs.append(json.loads(next(line for line in out.splitlines() if line.startswith("JSON "))[5:]))
        r = runs[-1]
        print(f"process {i}: events {r['events']:.2f}×, rounds {r['rounds']:.2f}× "
              f"(its rounds {r['rounds_low']:.2f}× to {r['rounds_high']:.2f}×); eager {r['eager_us']:.0f} µs, "
              f"replay {r['graph_us']:.1f} µs, kernels {r['kernel_us']:.1f} µs: GPU busy {r['gpu_busy_pct']:.1f}%")
    figures = {}
    for method in ("events", "rounds", "gpu_busy_pct"):
        vals = [r[method] for r in runs]
        spread = 100 * (max(vals) - min(vals)) / statistics.median(vals)
        figures[f"graph_speedup_spread_pct_{method}"] = spread
        figures[f"graph_speedup_min_{method}"], figures[f"graph_speedup_max_{method}"] = min(vals), max(vals)
        print(f"{method}: median {statistics.median(vals):.2f}, {min(vals):.2f} to {max(vals):.2f} over "
              f"{len(vals)} processes ({spread:.1f}% of the median)")
    print(f"saved to {results.record(figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
