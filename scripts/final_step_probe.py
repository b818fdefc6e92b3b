#!/usr/bin/env python3
"""Probe for the final challenge's reference solution, on a GPU: where the compiled step's time goes, with and
without the fused ReLU + max-pool, and which learning rate keeps held-out accuracy at batch 512.

    python3 scripts/final_step_probe.py --out $OUT/probe.json

Prints each variant's img/s, MFU (FLOPs from FlopCounterMode over the bf16 matmul ceiling measured here) and
first-call time, the top kernels of the profiled steps, and held-out accuracy per (batch, lr).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--variants", default="ref,pad,pad_fused,pad_fused_graphs")
    ap.add_argument("--profile", default="pad,pad_fused")
    ap.add_argument("--images", type=int, default=24576)
    ap.add_argument("--runs", default="32@0.01,512@0.01,512@0.02,512@0.03,256@0.01,256@0.02",
                    help="batch@lr pairs to train for --images images and judge on the held-out set")
    ap.add_argument("--block-p", default="16,32,64", help="tile heights to time the fused pool 1 at")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    from helpers import bench, models, profiling, train
    from helpers.challenge.accuracy import heldout_accuracy
    from helpers.kernels import compile_modes
    from helpers.kernels import relu_pool_triton as rp

    out: dict = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "date": time.strftime("%F")}
    ceil = bench.measure_ceilings()
    out["matmul_tflops"] = ceil.matmul_tflops
    flops = bench.flops_per_image(models.ReferenceCNN(224), 224)
    base = train.TrainConfig(batch_size=args.batch, image_size=224, data="gpu", dtype="bf16", channels_last=True,
                             cudnn_benchmark=True, compile=True, fused_optimizer=True)

    def build(name):
        m = models.ReferenceCNN(224)
        if "pad" in name:
            models.pad_first_conv(m)
        if "fused" in name:
            rp.fuse_relu_pool(m)
        cfg = dataclasses.replace(base, compile_mode="reduce-overhead") if "graphs" in name else base
        return cfg, m

    for name in args.variants.split(","):
        cfg, m = build(name)
        t = compile_modes.time_train_step(cfg, label=name, repeats=30, model=m)
        mfu = 100 * t.items_per_s * flops / (ceil.matmul_tflops * 1e12)
        out[f"step_{name}"] = {"ms": t.step.median_ms, "spread_pct": t.step.spread_pct, "img_per_s": t.items_per_s,
                               "mfu_pct": mfu, "first_call_s": t.compile_s}
        print(f"{name}: {t.step.median_ms:.2f} ms, {t.items_per_s:,.0f} img/s, MFU {mfu:.1f}%, first {t.compile_s:.0f} s",
              flush=True)
        if name in args.profile.split(","):
            trainer = train.step_only_trainer(cfg, model=build(name)[1])
            prof = profiling.profile_steps(lambda: trainer.step(measure=False), wait=2, warmup=2, active=3)
            top = prof.top_kernels(18)
            # over the whole profile: on a GPU the trace also holds the warm-up steps' kernels (calls show how many)
            top["total_ms"] = top["total_us"] / 1e3
            print(top[["kernel", "kind", "calls", "total_ms", "share"]].to_string(), flush=True)
            out[f"top_{name}"] = top.to_dict("records")
            del trainer
        torch.cuda.empty_cache()

    for block_p in (int(v) for v in args.block_p.split(",") if v):
        rp.BLOCK_P = block_p
        x = torch.randn(args.batch, 64, 224, 224, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
        b = torch.randn(64, device="cuda", requires_grad=True)
        g = torch.randn(args.batch, 64, 112, 112, device="cuda", dtype=torch.bfloat16)
        g = g.contiguous(memory_format=torch.channels_last)
        fwd = bench.time_it(lambda: rp.relu_maxpool2x2(x, b), repeats=20).median_ms
        both = bench.time_it(lambda: torch.autograd.grad(rp.relu_maxpool2x2(x, b), (x, b), g), repeats=20).median_ms
        out[f"pool1_block_p{block_p}"] = {"fwd_ms": fwd, "fwd_bwd_ms": both}
        print(f"pool 1 with bias, BLOCK_P {block_p}: forward {fwd:.2f} ms, forward + backward {both:.2f} ms", flush=True)
        del x, g
    rp.BLOCK_P = 16
    acc = {}
    for batch, lr in ((int(b), float(lr)) for b, lr in (r.split("@") for r in args.runs.split(",") if r)):
        cfg = train.TrainConfig(batch_size=batch, image_size=224, data="gpu", dtype="bf16", channels_last=True,
                                cudnn_benchmark=True, steps=args.images // batch, warmup_steps=0, lr=lr,
                                dataset_size=50_000)
        t0 = time.perf_counter()
        tr = train.Trainer(cfg)
        r = tr.run()
        a = heldout_accuracy(tr.model, image_size=224, precision="bf16", n=4096)
        acc[f"{batch}@{lr}"] = {"heldout": a, "train_acc": r.accuracy, "loss": r.loss, "s": time.perf_counter() - t0}
        print(f"batch {batch} lr {lr}: held-out {a:.3f}, train acc {r.accuracy:.3f}, loss {r.loss:.3f}, "
              f"{time.perf_counter() - t0:.0f} s", flush=True)
        del tr
    out["accuracy"] = acc
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
