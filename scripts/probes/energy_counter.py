#!/usr/bin/env python3
"""How often does NVML's energy counter move, and what does that do to a short window's mean power?

Loads the GPU with bf16 matmuls on a thread, reads nvmlDeviceGetTotalEnergyConsumption every 0.5 ms for 4 s and
keeps each change; prints (and writes to $OUT/energy_probe.json) the steps' spacing, the power over each step,
nvmlDeviceGetPowerUsage beside it, and the mean power over 0.8 s windows read at the counter's steps. Its H200 run
is results/archive/probe-energy-counter.nvidia-h200.2026-11-30.json (helpers/monitor/energy.py rests on it).

    python3 scripts/probes/energy_counter.py
"""
import json, os, statistics, threading, time
import torch, pynvml as nv

nv.nvmlInit(); h = nv.nvmlDeviceGetHandleByIndex(0)
stop = threading.Event()
def load():
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
    while not stop.is_set():
        for _ in range(20): a @ b
        torch.cuda.synchronize()
th = threading.Thread(target=load, daemon=True); th.start(); time.sleep(1.5)
ev, pw, inst = [], [], []
t0 = time.perf_counter(); last = None; next_p = t0
while time.perf_counter() - t0 < 4.0:
    t = time.perf_counter(); e = nv.nvmlDeviceGetTotalEnergyConsumption(h)
    if e != last: ev.append((t - t0, e)); last = e
    if t >= next_p:
        pw.append((t - t0, nv.nvmlDeviceGetPowerUsage(h) / 1e3)); next_p += 0.05
        try:
            fv = nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_POWER_INSTANT])[0]
            if fv.nvmlReturn == 0: inst.append(fv.value.uiVal / 1e3)
        except Exception as ex: inst.append(repr(ex)) if len(inst) < 1 else None
    time.sleep(0.0005)
stop.set(); th.join()
gaps = [b[0] - a[0] for a, b in zip(ev, ev[1:])]
per = [(b[1] - a[1]) / 1e3 / (b[0] - a[0]) for a, b in zip(ev, ev[1:])]
long_w = (ev[-1][1] - ev[0][1]) / 1e3 / (ev[-1][0] - ev[0][0])
def value_at(t):  # the counter as a sample at time t would read it
    v = ev[0][1]
    for tt, e in ev:
        if tt <= t: v = e
    return v
win = []
s = ev[0][0]
while s + 0.8 < ev[-1][0]:
    win.append((value_at(s + 0.8) - value_at(s)) / 1e3 / 0.8); s += 0.01
out = {"device": torch.cuda.get_device_name(), "driver": nv.nvmlSystemGetDriverVersion(), "updates": len(ev),
       "gap_ms_median": 1e3 * statistics.median(gaps), "gap_ms_min": 1e3 * min(gaps), "gap_ms_max": 1e3 * max(gaps),
       "power_per_update_w": [round(p) for p in per[:40]], "mean_power_long_w": long_w,
       "power_usage_mean_w": statistics.mean(p for _, p in pw), "power_usage_max_w": max(p for _, p in pw),
       "power_instant": inst[:20], "limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3,
       "window_0p8s_w": {"min": min(win), "median": statistics.median(win), "max": max(win), "n": len(win)}}
print(json.dumps(out, indent=1))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "energy_probe.json"), "w"), indent=1)
