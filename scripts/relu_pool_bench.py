#!/usr/bin/env python3
"""The fused ReLU + max-pool (helpers/kernels/relu_pool_triton.py) against PyTorch's two ops, on a GPU.

    python3 scripts/relu_pool_bench.py                  # batch 512, the reference CNN's three pools, then the step

1. Each of the reference CNN's three ReLU + pool pairs at batch ``--batch`` (bf16, channels_last): forward and
   backward together, fused against PyTorch's ops; the fused pair's share of the copy bandwidth (the least it
   must move: read x, write y; read x and y's gradient, write x's gradient: 3.5 × x's bytes).
2. The reference training step compiled (bf16, channels_last, the batch on the GPU), with and without the
   fused kernels: img/s and MFU (FLOPs from FlopCounterMode over the bf16 matmul ceiling measured here).

Figures go to results/<gpu>.json (``relu_pool_*``, ``step_fused_*``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=20, help="timed steps of the training step")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    import torch

    from helpers import bench, models, results, train
    from helpers.kernels import compile_modes
    from helpers.kernels import relu_pool_triton as rp

    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible; this times GPU kernels. Run it on a GPU node.", file=sys.stderr)
        return 2
    ceil = bench.measure_ceilings()
    print(f"ceilings: {ceil.matmul_tflops:,.0f} TFLOP/s ({ceil.matmul_dtype}), {ceil.copy_gb_per_s:,.0f} GB/s copy")
    figures: dict[str, float] = {}
    for i, (c, side) in enumerate(((64, 224), (128, 112), (256, 56)), start=1):
        x = torch.randn(args.batch, c, side, side, device="cuda", dtype=torch.bfloat16)
        x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
        g = torch.randn(args.batch, c, side // 2, side // 2, device="cuda", dtype=torch.bfloat16)
        g = g.contiguous(memory_format=torch.channels_last)
        times = {}
        for name, op in (("pytorch", rp.relu_maxpool2x2_reference), ("fused", rp.relu_maxpool2x2)):
            times[name] = bench.time_it(lambda op=op: torch.autograd.grad(op(x), x, g), repeats=20).median_ms
        frac = 3.5 * x.numel() * x.element_size() / (times["fused"] * 1e-3) / (ceil.copy_gb_per_s * 1e9)
        figures.update({f"relu_pool{i}_pytorch_ms": times["pytorch"], f"relu_pool{i}_fused_ms": times["fused"],
                        f"relu_pool{i}_speedup": times["pytorch"] / times["fused"], f"relu_pool{i}_bw_frac": frac})
        print(f"pool {i} ({args.batch}×{c}×{side}²): PyTorch {times['pytorch']:.2f} ms, fused {times['fused']:.2f} ms "
              f"({times['pytorch'] / times['fused']:.2f}×), {frac:.0%} of the copy bandwidth")
        del x, g
    cfg = train.TrainConfig(batch_size=args.batch, image_size=224, data="gpu", dtype="bf16", channels_last=True,
                            cudnn_benchmark=True, compile=True)
    flops = bench.flops_per_image(models.ReferenceCNN(224), 224)
    for label, model in (("compiled", None), ("compiled_fused", rp.fuse_relu_pool(models.ReferenceCNN(224)))):
        t = compile_modes.time_train_step(cfg, label=label, repeats=args.steps, model=model)
        mfu = 100 * t.items_per_s * flops / (ceil.matmul_tflops * 1e12)
        figures.update({f"step_{label}_img_per_s": t.items_per_s, f"step_{label}_mfu_pct": mfu,
                        f"step_{label}_first_call_s": t.compile_s})
        print(f"step {label}: {t.step.median_ms:.1f} ms ({t.items_per_s:,.0f} img/s, MFU {mfu:.1f}%), first call "
              f"{t.compile_s:.0f} s")
        torch.cuda.empty_cache()
    print(f"saved to {results.record(figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
