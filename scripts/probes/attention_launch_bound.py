#!/usr/bin/env python3
"""Why 03's attention sweep read its shortest length slow: at short sequences a call's kernels take less GPU time than
the host takes to launch them. Runs the sweep twice from L=512 and once from L=1024, then times naive attention and
SDPA (forward + backward, bf16, batch 4, 16 heads, head size 64) per call with a sync after each, beside the GPU time
of their kernels (torch.profiler)::

    OUT=/tmp python3 scripts/probes/attention_launch_bound.py     # writes $OUT/attn.json

Measured on one H100 (2026-11-24): results/archive/probe-03-attention-launch-bound.nvidia-h100-80gb-hbm3.2026-11-24.json
"""
import time, torch, json, os
from helpers.kernels import attention
from helpers import bench
dev = torch.device("cuda")
out = {}
for rep in range(2):
    df = attention.sweep([512, 1024, 2048], batch=4, heads=16, head_dim=64)
    out[f"sweep{rep}"] = df[["seq_len", "SDPA kernel", "naive ms", "SDPA ms"]].to_dict("records")
df = attention.sweep([1024, 512], batch=4, heads=16, head_dim=64)
out["sweep_from_1024"] = df[["seq_len", "naive ms", "SDPA ms"]].to_dict("records")
# per-call synchronised timing, host wall vs events
for L in (512, 1024):
    q, k, v = (torch.randn(4, 16, L, 64, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(4, 16, L, 64, device=dev, dtype=torch.bfloat16)
    for name, fn in (("naive", attention.naive_attention), ("SDPA", attention.sdpa)):
        def step():
            o = fn(q, k, v); o.backward(dout); q.grad = k.grad = v.grad = None
        for _ in range(50): step()
        torch.cuda.synchronize()
        host = []
        for _ in range(50):
            t0 = time.perf_counter(); step(); torch.cuda.synchronize(); host.append((time.perf_counter() - t0) * 1e3)
        host.sort()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(10): step()
            torch.cuda.synchronize()
        gpu_us = sum(e.self_device_time_total for e in p.key_averages()) / 10
        out[f"{name}_L{L}"] = {"host_ms_median_synced": host[25], "gpu_ms_per_call": gpu_us / 1e3,
                               "kernels": sorted(((e.key[:60], round(e.self_device_time_total / 10)) for e in p.key_averages()), key=lambda t: -t[1])[:6]}
print(json.dumps(out, indent=1, default=str))
json.dump(out, open(os.environ["OUT"] + "/attn.json", "w"), indent=1, default=str)
