"""Nsight Systems on a GPU, where an nsys that can record is installed: the final challenge's baseline and top rung
recorded as 03 records them, every kernel torch.profiler counts found in the recording, and the two read per step.

    PATH=build/nsys/target-linux-x64:$PATH python3 -m pytest -q -s tests/test_nsys_gpu.py   # on a GPU node

Skipped without a CUDA GPU or without an nsys that records (ours carry Debian's: scripts/nsys_debian.sh)."""

from __future__ import annotations

import json
import os
import time

import pytest

torch = pytest.importorskip("torch")

from helpers import nsys  # noqa: E402
from helpers.nsys_stats import per_step  # noqa: E402

pytestmark = [pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

STEPS = 5


@pytest.fixture(scope="module")
def tool():
    found = nsys.find_nsys()
    if found is None or not found.can_record:
        pytest.skip(nsys.availability(found).line)
    return found


@pytest.fixture(scope="module")
def recorded(tool):
    out = {}
    for run in ("baseline", "top"):
        t0 = time.perf_counter()
        out[run] = nsys.measure(run=run, steps=STEPS, tool=tool)
        print(f"{run}: {time.perf_counter() - t0:.1f} s; {out[run].line}")
    return out


@pytest.mark.parametrize("run", ["baseline", "top"])
def test_each_run_is_recorded_whole(recorded, run):
    res = recorded[run]
    assert res.state == "ok", res.line
    assert res.availability.kernels_expected and res.availability.kernels_recorded >= (
        nsys.TOO_FEW * res.availability.kernels_expected)
    steps = next(r for r in res.stats.ranges if r.name.lstrip(":") == "step")
    assert steps.instances == STEPS  # each profiled step in its range, none of the warm-up's


def test_the_top_rung_runs_its_steps_as_cuda_graphs_with_fewer_calls_and_a_busier_gpu(recorded):
    side = per_step({"baseline": recorded["baseline"].stats, "top rung": recorded["top"].stats}).data
    print(side.to_string())
    where = os.environ.get("NSYS_EVIDENCE")
    if where:  # what the closing note quotes: the two recordings per step, and each run's line
        with open(where, "w") as f:
            json.dump({"per_step": side.to_dict(), "lines": {k: v.line for k, v in recorded.items()},
                       "command": {k: list(v.command) for k, v in recorded.items()}}, f, indent=1, default=str)
    b, t = side["baseline"], side["top rung"]
    assert t["CUDA graph launches (CUDA API)"] >= 1 and b["CUDA graph launches (CUDA API)"] == 0
    assert b["synchronizing calls (CUDA API)"] >= 1  # the classic loop waits for the GPU every step
    assert t["CUDA API calls in all"] < b["CUDA API calls in all"]
    assert t["GPU busy, % of the wall time"] > b["GPU busy, % of the wall time"]
    assert t["host time inside the step, ms"] < t["wall time per step, ms"]  # the host runs ahead of the GPU
