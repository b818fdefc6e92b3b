"""The t4 profile's GPU limits on a real GPU (run by scripts/gpu_test.py and `make preview`; skipped without CUDA).

Each check runs in a fresh process, as a notebook's kernel starts: the profile must be applied before any kernel
runs. The SM limit must hold on every route a kernel takes (the current stream, a side stream, a replayed CUDA
graph, torch.compile's graph trees); the memory limit must give the out-of-memory error a 15 GiB card gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ROOT = Path(__file__).resolve().parents[1]


def _run(code_or_script: list[str], profile: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "HELPERS_PROFILE"}
    if profile:
        env["HELPERS_PROFILE"] = profile
    run = subprocess.run([sys.executable, *code_or_script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    return json.loads(run.stdout[run.stdout.index("{"):])


def test_the_sm_limit_holds_on_every_route_a_kernel_takes():
    probe = [str(ROOT / "scripts" / "probes" / "profile_routes.py")]
    full, t4 = _run(probe, None), _run(probe, "t4")
    print(json.dumps({"full": full, "t4": t4}, indent=1))
    assert t4["device"].endswith(" as t4") and not full["device"].endswith(" as t4")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for route in ("current", "side_stream", "cuda_graph", "compiled_graph_tree"):
        share = t4[f"route_{route}_tflops"] / full[f"route_{route}_tflops"]
        # 8 SMs of this GPU's: about 8/sms of its rate (a little more: fewer SMs share the same memory bandwidth)
        assert share < 3 * 8 / sms, f"{route}: {share:.0%} of the full GPU's rate under the t4 profile"
    assert all(v is not False for v in t4["green"].values()), t4["green"]


def test_memory_bf16_gpm_and_cores_are_the_t4s():
    code = textwrap.dedent("""
        import json, os, torch
        from helpers import env, nvml
        dev = env.device()
        out = {"bf16": env.native_precision("bf16", dev), "autocast": str(env.autocast_dtype(torch.bfloat16, dev)),
               "gpm": nvml.gpm_supported(nvml.handle_for_cuda_device(0)), "cores": len(os.sched_getaffinity(0)),
               "report": env.collect().lines()}
        x = torch.empty(12 * 2**30, dtype=torch.uint8, device=dev)  # fits in 15 GiB
        try:
            y = torch.empty(4 * 2**30, dtype=torch.uint8, device=dev)  # 16 GiB: past the T4's memory
            out["oom"] = None
        except torch.OutOfMemoryError as e:
            out["oom"] = str(e)[:200]
        print(json.dumps(out))
    """)
    seen = _run(["-c", code], "t4")
    assert not seen["bf16"] and seen["autocast"] == "torch.float16" and not seen["gpm"] and seen["cores"] <= 2
    assert seen["oom"] is not None, "16 GiB were allocated under a 15 GiB profile"
    assert any(" as t4" in line for line in seen["report"]) and any("8 of " in line for line in seen["report"])
