#!/usr/bin/env python3
"""How far do honest runs land from the reference network's numbers? The tolerances of the final challenge's
function checks (helpers/challenge/function_check.py: TOLERANCES), measured.

For each honest variant (the ladder's rungs at this scale, after the baseline, whose numbers are the input
pipeline rung's; and the reference solution in fp16, as a GPU without bf16 trains it), it runs the harness's check
before training (fp32, TF32 off: the largest logit gap in training and evaluation mode, the largest gradient gap)
and trains the whole run, taking the spot check's gap at every k-th step (the training's own logits against the
reference network's in fp32 on that step's weights and batch). It prints the largest per variant and per
precision, and the tolerance each is held to::

    python3 scripts/probes/same_function_tolerance.py --scale smoke --out tol.json
    python3 scripts/probes/same_function_tolerance.py --scale full --size gpu --out tol-h100.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default=None, choices=["smoke", "full"], help="default: this machine's")
    ap.add_argument("--size", default=None, help="a key of helpers.challenge.rules.SIZES (default: this machine's)")
    ap.add_argument("--checks", type=int, default=32, help="spot checks per run, spread over its steps")
    ap.add_argument("--only", nargs="*", default=None, help="variants whose name holds one of these")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)

    import torch

    from helpers import env
    from helpers.challenge import harness
    from helpers.challenge.function_check import (MAX_CHECK_BATCH, TOLERANCES, SpotCheck, check_function,
                                                  spot_precision)
    from helpers.challenge.ladder import ladder
    from helpers.challenge.rules import Rules
    from helpers.train import Trainer

    scale = args.scale or env.scale()
    rules = Rules.at_scale(scale, args.size)
    device = env.device()
    rungs = [r for r in ladder(scale, rules)[1:] if not r.left_out and not (r.needs_gpu and device.type != "cuda")]
    variants = [(r.name, r.submission) for r in rungs]
    top = rungs[-1].submission
    variants.append(("reference solution in fp16", dataclasses.replace(
        top, config=dataclasses.replace(top.config, dtype="fp16", batch_size=rules.final.final_batch))))
    if args.only:
        variants = [(n, s) for n, s in variants if any(o in n for o in args.only)]
    rows = []
    for name, sub in variants:
        start = time.perf_counter()
        torch._dynamo.reset()  # each variant from a fresh compiler state, as the harness judges it
        cfg = rules.fit(sub.config)
        reference = harness._reference_model(rules)
        model = harness._build(sub, reference, device)
        check = check_function(model, reference.to(device), image_size=rules.image_size,
                               batch=min(cfg.batch_size, MAX_CHECK_BATCH), channels_last=cfg.channels_last,
                               heldout=rules.heldout)
        if not check.ok:
            print(f"{name}: refused by the check before training: {check.why}")
            rows.append({"variant": name, "refused": check.why})
            continue
        key = spot_precision(env.resolve_dtype(cfg.dtype, device), device)
        spot = SpotCheck(model, check.mapping, image_size=rules.image_size, precision=key, step=0)
        gaps: list[tuple[int, float]] = []
        steps = cfg.warmup_steps + cfg.steps
        every = max(1, steps // args.checks)
        trainer = Trainer(cfg, model=model, spot_check=lambda step, x, lg: gaps.append((step, spot.measure(x, lg)[1])),
                          spot_steps=set(range(0, steps, every)) | {steps - 1})
        trainer.run(boxed=False)
        worst = max(g for _, g in gaps)
        row = {"variant": name, "precision": key, "batch": cfg.batch_size, "steps": steps,
               "check_logits_gap": check.logits_gap, "check_grads_gap": check.grads_gap, "spot_gap_max": worst,
               "spot_gap_last": gaps[-1][1], "spot_checks": len(gaps), "tolerance": TOLERANCES[key].logits,
               "wall_s": time.perf_counter() - start, "gaps": gaps}
        rows.append(row)
        print(f"{name:<28} {key:<5} batch {cfg.batch_size:>4}: check logits {check.logits_gap:.2g}, grads "
              f"{check.grads_gap:.2g} | spot gap max {worst:.3g} over {len(gaps)} steps (last {gaps[-1][1]:.3g}); "
              f"tolerance {TOLERANCES[key].logits:g} | {row['wall_s']:.0f} s", flush=True)
        del trainer, model, reference
        if device.type == "cuda":
            torch.cuda.empty_cache()
    by = {}
    for r in rows:
        if "precision" in r:
            by[r["precision"]] = max(by.get(r["precision"], 0.0), r["spot_gap_max"])
    checks = [r for r in rows if "check_logits_gap" in r]
    print("largest spot gap per precision: " + ", ".join(f"{k} {v:.3g}" for k, v in by.items()))
    if checks:
        print(f"largest check gaps (fp32): logits {max(r['check_logits_gap'] for r in checks):.3g}, gradients "
              f"{max(r['check_grads_gap'] for r in checks):.3g}")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": str(device), "scale": scale, "size": rules.size,
                                              "by_precision": by, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
