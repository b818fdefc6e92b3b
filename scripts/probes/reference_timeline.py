#!/usr/bin/env python3
"""Where the reference solution's timed run goes: the set's copy to the device, the steps, and the syncs.

For each recipe (``OPT:BATCH:LR:WARMUP:IMAGES[:MODE][:keep-input]``, as scripts/probes/time_to_target.py takes
them) the reference solution's training function runs on the challenge's training set three times, outside the
judge: once to compile, once timed (a host clock synchronised at both ends, a CUDA event recorded as each batch is
handed out), once under ``torch.cuda.set_sync_debug_mode("warn")`` to count the syncs it makes. Reported: the whole
run, the time before the first batch is handed out (the set's copy to the device, the optimizer, the compiled
function's first call), the GPU's time per step between batches (median and spread), the time after the last batch,
img/s and MFU (the judge's FLOPs per image against the measured bf16 matmul ceiling). First, the training set's copy
to the device as the harness made it before 2026-11-25 (a CPU permute, then the copy) and as it makes it now.

    python3 scripts/probes/reference_timeline.py --recipes adamw:512:1e-3:20:36864 adamw:1024:1e-3:10:49152 --out t.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def build_from(text: str):
    """The network's build for a recipe: the reference solution's, or with the flag ``keep-input`` its fused pools
    keeping the convolution's output for the backward (as before 2026-11-25) instead of the argmax."""
    from helpers.challenge import recipes
    from helpers.kernels.relu_pool_triton import fuse_relu_pool
    from helpers.models import pad_first_conv

    if "keep-input" in text.split(":")[5:]:
        return lambda model: fuse_relu_pool(pad_first_conv(model), keep="input")
    return recipes.reference_build


def recipe_from(base, text: str):
    """``OPT:BATCH:LR:WARMUP:IMAGES[:MODE][:keep-input]`` (keep-input: build_from) as a recipes.Recipe. The runs of
    2026-11-25 also took the flags eager-input, cdt and bl0 (the input prepared outside the compiled function,
    Inductor's coordinate-descent tuning, cuDNN trying every algorithm): kept in results/archive, dropped since."""
    opt, batch, lr, warm, images, *more = text.split(":")
    modes = [m for m in more if m != "keep-input"]
    return dataclasses.replace(base, optimizer=opt, batch_size=int(batch), lr=float(lr), warmup_steps=int(warm),
                               images=int(images), compile_mode=modes[0] if modes else "default")


def _kernels(prof, wall_s: float, steps: int) -> dict:
    """The profiled run's GPU kernel time by kind (helpers.profiling.kernel_kind) and its longest kernels."""
    import torch

    from helpers.profiling import kernel_kind

    if torch.cuda.is_available():
        rows = [(e.key, e.self_device_time_total, e.count) for e in prof.key_averages()
                if e.device_type == torch.autograd.DeviceType.CUDA and e.self_device_time_total > 0]
    else:  # a CPU: its ops' own time (only to try the probe out)
        rows = [(e.key, e.self_cpu_time_total, e.count) for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total_us = sum(r[1] for r in rows)
    kinds: dict[str, float] = {}
    for name, us, _ in rows:
        kinds[kernel_kind(name)] = kinds.get(kernel_kind(name), 0.0) + us
    top = sorted(rows, key=lambda r: -r[1])[:20]
    return {"wall_s": wall_s, "kernel_s": total_us / 1e6, "steps": steps,
            "kernel_ms_per_step": total_us / 1e3 / max(steps, 1),
            "kinds_ms_per_step": {k: v / 1e3 / max(steps, 1) for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])},
            "top": [{"kernel": n[:140], "ms_per_step": us / 1e3 / max(steps, 1), "calls": c} for n, us, c in top]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", nargs="+", required=True)
    ap.add_argument("--out", default="reference_timeline.json")
    ap.add_argument("--profile", action="store_true", help="one more run per recipe under the profiler: the GPU's "
                    "kernel time by kind and the longest kernels")
    args = ap.parse_args()

    import torch

    from helpers import env
    from helpers.challenge import recipes
    from helpers.challenge.harness import Session
    from helpers.challenge.rules import Rules
    from helpers.challenge.to_target import _challenge_set, start_model
    from helpers.challenge.training_data import HandOut, TrainingData

    device = env.device()
    rules = Rules.at_scale()
    session = Session.start(rules)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out: dict = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                 "torch": torch.__version__, "date": env.today(), "commit": commit, "size": rules.size,
                 "ceiling_tflops": session.ceilings.matmul_tflops, "flops_per_image": session.flops_per_image}
    images, labels = _challenge_set(rules)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # -- the set's copy to the device, before and after ------------------------------------------------------------
    def old_copy():
        return torch.from_numpy(images).permute(0, 3, 1, 2).contiguous().to(device)

    def new_copy():
        return torch.from_numpy(images).to(device).permute(0, 3, 1, 2).contiguous()

    copies = {}
    for name, fn in (("cpu permute, then copy", old_copy), ("copy, then device permute", new_copy)) * 2:
        ts = []
        for _ in range(3):
            sync()
            t = time.perf_counter()
            x = fn()
            sync()
            ts.append(time.perf_counter() - t)
            del x
        copies.setdefault(name, []).extend(ts)
    out["set_copy_s"] = {k: {"median": statistics.median(v), "all": v} for k, v in copies.items()}
    print(json.dumps(out["set_copy_s"], indent=1), flush=True)

    base = recipes.REFERENCE_RECIPES[rules.size]
    out["recipes"] = []
    for text in args.recipes:
        recipe = recipe_from(base, text)
        torch._dynamo.reset()  # a batch size of its own: not a dynamic-shape recompile of the last recipe's
        recipes.REFERENCE_RECIPES[rules.size] = recipe
        try:
            row = {"recipe": text}
            for run in ("compile", "timed", "syncs") + (("profiled",) if args.profile else ()):
                events: list = []
                host: list[float] = []

                def on_batch(n, events=events, host=host):
                    host.append(time.perf_counter())
                    if device.type == "cuda":
                        e = torch.cuda.Event(enable_timing=True)
                        e.record()
                        events.append(e)

                hand_out = HandOut(on_batch=on_batch)
                data = TrainingData(images, labels, image_size=rules.image_size, hand_out=hand_out)
                model = build_from(text)(start_model(rules)).to(device)
                torch.manual_seed(rules.seed)
                train = recipes.reference_training(rules)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    if run == "syncs" and device.type == "cuda":
                        torch.cuda.set_sync_debug_mode("warn")
                    prof = None
                    if run == "profiled":
                        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA
                                                                  if device.type == "cuda" else
                                                                  torch.profiler.ProfilerActivity.CPU])
                        prof.__enter__()
                    sync()
                    t0 = time.perf_counter()
                    try:
                        train(model, data, device)
                    finally:
                        sync()
                        t1 = time.perf_counter()
                        if device.type == "cuda":
                            torch.cuda.set_sync_debug_mode("default")
                total = t1 - t0
                if prof is not None:
                    prof.__exit__(None, None, None)
                    row["profile"] = _kernels(prof, total, hand_out.batches)
                    continue
                if run == "syncs":
                    sync_lines = [str(w.message).splitlines()[0] for w in caught
                                  if "synchroniz" in str(w.message).lower()]
                    row["syncs"] = len(sync_lines)
                    row["sync_kinds"] = sorted(set(sync_lines))[:8]
                    continue
                steps_ms = [a.elapsed_time(b) for a, b in zip(events, events[1:])]
                row[run] = {
                    "total_s": total, "images": hand_out.images, "batches": hand_out.batches,
                    "before_first_batch_s": host[0] - t0 if host else None,
                    "after_last_batch_s": t1 - host[-1] if host else None,
                    "gpu_step_ms_median": statistics.median(steps_ms) if steps_ms else None,
                    "gpu_step_ms_min": min(steps_ms) if steps_ms else None,
                    "gpu_step_ms_max": max(steps_ms) if steps_ms else None,
                    "first_steps_ms": steps_ms[:4],
                    "img_per_s": hand_out.images / total,
                    "mfu_pct": 100 * hand_out.images / total * session.flops_per_image
                    / (session.ceilings.matmul_tflops * 1e12),
                }
                if steps_ms:
                    steady = statistics.median(steps_ms[2:] or steps_ms) / 1e3
                    row[run]["steady_mfu_pct"] = 100 * recipe.batch_size / steady * session.flops_per_image \
                        / (session.ceilings.matmul_tflops * 1e12)
            out["recipes"].append(row)
            print(json.dumps(row, indent=1), flush=True)
        finally:
            recipes.REFERENCE_RECIPES[rules.size] = base
        Path(args.out).write_text(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
