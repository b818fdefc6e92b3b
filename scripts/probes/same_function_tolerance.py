#!/usr/bin/env python3
"""How far do honest runs land from the reference network's numbers? The tolerances of the final challenge's
function checks (helpers/challenge/function_check.py: TOLERANCES), measured: logits and gradients, per precision.

For each honest variant (the ladder's rungs at this scale, after the baseline, whose numbers are the input
pipeline rung's; and the reference solution in fp16, as a GPU without bf16 trains it), it runs the harness's check
before training (fp32, TF32 off: the largest logit gap in training and evaluation mode, the largest gradient gap)
and trains the whole run, taking the spot check's gaps at every k-th step: the training's own logits, and the
gradients it left in each parameter (summed over its micro-batches, unscaled where fp16's GradScaler scaled them),
against the reference network's in fp32 on that step's weights and batch. A cheat is measured beside them, the
top rung with its convolutions run without gradients in training (its logits are the reference's): the margin the
gradient tolerance must keep. It prints the largest gaps per variant and per precision, and the tolerances, and
records them as JSON in results/archive/ (``--out`` elsewhere)::

    python3 scripts/probes/same_function_tolerance.py --scale smoke                 # a CPU: fp32 and bf16
    HELPERS_SCALE=full python3 scripts/probes/same_function_tolerance.py --size gpu  # a GPU: tf32, bf16, fp16
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _no_grad_convs(model):
    """The cheat: its convolutions' weights take no gradient, so conv1 to conv3 never train and the backward stops
    at fc1 (three layers cheaper); the logits stay the reference's. (Running them under ``torch.no_grad()`` in
    training mode is the same cheat; this form reaches the fused kernels' convolutions too.)"""
    for name, p in model.named_parameters():
        if name.startswith(("conv1.", "conv2.", "conv3.")):
            p.requires_grad_(False)
    return model


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default=None, choices=["smoke", "full"], help="default: this machine's")
    ap.add_argument("--size", default=None, help="a key of helpers.challenge.rules.SIZES (default: this machine's)")
    ap.add_argument("--checks", type=int, default=32, help="spot checks per run, spread over its steps")
    ap.add_argument("--only", nargs="*", default=None, help="variants whose name holds one of these")
    ap.add_argument("--out", default=None, help="write the JSON here (default: results/archive/probe-...json)")
    args = ap.parse_args(argv)

    import torch

    from helpers import env
    from helpers.challenge import harness
    from helpers.challenge.function_check import (MAX_CHECK_BATCH, TOLERANCES, SpotCheck, check_function,
                                                  map_parameters, spot_precision)
    from helpers.challenge.ladder import ladder
    from helpers.challenge.rules import Rules
    from helpers.challenge.start import start_model
    from helpers.train import Trainer

    # after helpers, which sets TRITON_INTERPRET on a machine without a GPU: these import Triton, which reads it once
    import torch._functorch.config
    import torch._inductor.config

    # Compiled graphs' caches keyed a graph without the autocast dtype around it: after an fp16 variant, the bf16 one
    # got the fp16 graph back, from memory and from disk (PyTorch 2.11, one H200, 2026-11-26; fx_graph_cache off cured
    # it). Off, so that each variant computes in its own precision.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False

    scale = args.scale or env.scale()
    rules = Rules.at_scale(scale, args.size)
    device = env.device()
    rungs = [r for r in ladder(scale, rules)[1:] if not r.left_out and not (r.needs_gpu and device.type != "cuda")]
    variants = [(r.name, r.submission, False) for r in rungs]
    top = rungs[-1].submission
    variants.append(("reference solution in fp16", dataclasses.replace(
        top, config=dataclasses.replace(top.config, dtype="fp16", batch_size=rules.final.final_batch)), False))
    variants.append(("cheat: convolutions without gradients", dataclasses.replace(
        top, build_model=lambda m: _no_grad_convs(m if top.build_model is None else top.build_model(m))), True))
    if args.only:
        variants = [v for v in variants if any(o in v[0] for o in args.only)]
    today = datetime.date.today().isoformat()
    label = env.device_label(torch.cuda.get_device_name(device)) if device.type == "cuda" else "cpu"
    out = Path(args.out) if args.out else (
        ROOT / "results" / "archive" / f"probe-same-function-tolerance.{env.gpu_slug(label)}.{scale}.{today}.json")
    rows: list[dict] = []
    by: dict[str, dict[str, float]] = {}

    def record() -> None:  # after each variant: a run cut short keeps what it measured
        for r in rows:
            if "precision" in r and not r["cheat"]:
                b = by.setdefault(r["precision"], {"logits": 0.0, "grads": 0.0})
                b["logits"] = max(b["logits"], r["spot_gap_max"])
                if not math.isnan(r["spot_grads_gap_max"]):
                    b["grads"] = max(b["grads"], r["spot_grads_gap_max"])
        out.write_text(json.dumps({
            "what": "the function checks' tolerances (helpers/challenge/function_check.py: TOLERANCES): the spot "
                    "check's logit and gradient gaps per variant and step", "date": today, "device": str(device),
            "device_name": label, "cpu_capability": env.cpu_capability(), "torch": torch.__version__,
            "scale": scale, "size": rules.size, "by_precision": by, "rows": rows}, indent=1))

    for name, sub, cheat in variants:
        start = time.perf_counter()
        torch._dynamo.reset()  # each variant from a fresh compiler state, as the harness judges it
        cfg = rules.fit(sub.config)
        reference = start_model(rules)
        model = harness._build(sub, reference, device)
        reference = reference.to(device)
        if cheat:  # refused before training by its gradients: measured in training alone, as if it had passed
            check, mapping = None, map_parameters(model, reference)[0]
        else:
            check = check_function(model, reference, image_size=rules.image_size,
                                   batch=min(cfg.batch_size, MAX_CHECK_BATCH), channels_last=cfg.channels_last,
                                   heldout=rules.heldout)
            if not check.ok:
                print(f"{name}: refused by the check before training: {check.why}")
                rows.append({"variant": name, "refused": check.why})
                continue
            mapping = check.mapping
        key = spot_precision(env.resolve_dtype(cfg.dtype, device), device)
        spot = SpotCheck(model, mapping, image_size=rules.image_size, precision=key)
        gaps: list[dict] = []

        def measure(s):
            m = spot.measure(s)
            gaps.append({"step": s.index, "logits": m.logits, "grads": m.grads, "grads_skipped": m.grads_skipped,
                         "grads_by_param": dict(m.grads_by_param)})

        steps = cfg.warmup_steps + cfg.steps
        every = max(1, steps // args.checks)
        trainer = Trainer(cfg, model=model, spot_check=measure, spot_steps=set(range(0, steps, every)) | {steps - 1})
        trainer.run(boxed=False)
        worst = max(g["logits"] for g in gaps)
        compared = [g for g in gaps if not math.isnan(g["grads"])]
        worst_grads = max((g["grads"] for g in compared), default=math.nan)
        tol = TOLERANCES[key]
        row = {"variant": name, "cheat": cheat, "precision": key, "batch": cfg.batch_size, "grad_accum": cfg.grad_accum,
               "steps": steps, "check_logits_gap": check.logits_gap if check else None,
               "check_grads_gap": check.grads_gap if check else None, "spot_gap_max": worst,
               "spot_grads_gap_max": worst_grads, "spot_gap_last": gaps[-1]["logits"], "spot_checks": len(gaps),
               "grads_skipped": len(gaps) - len(compared), "tolerance": tol.logits, "tolerance_grads": tol.grads,
               "wall_s": time.perf_counter() - start, "gaps": gaps}
        rows.append(row)
        record()
        checked = (f"check logits {check.logits_gap:.2g}, grads {check.grads_gap:.2g}" if check
                   else "not checked before training")
        print(f"{name:<40} {key:<5} batch {cfg.batch_size:>4}: {checked} | spot: logits max {worst:.3g}, grads max "
              f"{worst_grads:.3g} over {len(compared)} of {len(gaps)} steps; tolerances {tol.logits:g}, "
              f"{tol.grads:g} | {row['wall_s']:.0f} s", flush=True)
        del trainer, model, reference
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print("largest spot gaps per precision (honest runs): " + ", ".join(
        f"{k} logits {v['logits']:.3g}, gradients {v['grads']:.3g}" for k, v in by.items()))
    checks = [r for r in rows if r.get("check_logits_gap") is not None]
    if checks:
        print(f"largest check gaps (fp32): logits {max(r['check_logits_gap'] for r in checks):.3g}, gradients "
              f"{max(r['check_grads_gap'] for r in checks):.3g}")
    for r in rows:
        if r.get("cheat"):
            least = min((g["grads"] for g in r["gaps"] if not math.isnan(g["grads"])), default=math.nan)
            print(f"{r['variant']}: smallest spot gradient gap {least:.3g} "
                  f"(tolerance {r['tolerance_grads']:g})")
    record()
    print(f"recorded in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
