#!/usr/bin/env python3
"""Which image count and final batch keep the final challenge fair at a size? Held-out accuracy of the baseline
and of the reference solution at several batches and learning rates, judged by the harness on one GPU.

The small-GPU size (helpers/challenge/rules.py: SIZES) trains on fewer images than the large one; the reference
solution must still meet the accuracy rule there, and the "learning rate ×16" suspect must still break it. This
probe runs them side by side at one size, for one or more image counts, on the GPU as it is (accuracy does not
depend on how fast the GPU is; ``--dtype fp16`` trains the top rungs as a GPU without bf16 does)::

    python3 scripts/probes/challenge_sizes.py --size small-gpu --images 3072 6144 --out sizes.json

torch.compile is left out of every run (it changes the speed, not what is learned), so each run takes seconds.
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
    ap.add_argument("--size", default="small-gpu", help="a key of helpers.challenge.rules.SIZES")
    ap.add_argument("--images", type=int, nargs="+", default=None,
                    help="training image counts to try at this size (default: the size's own)")
    ap.add_argument("--dtype", default="fp16", choices=["bf16", "fp16"], help="the top rungs' precision")
    ap.add_argument("--variants", nargs="+", default=["128:0.02", "128:0.01", "64:0.02", "256:0.02", "128:0.16"],
                    help="reference-solution variants as BATCH:LR (the last, by default: the lr ×16 suspect)")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)

    import torch

    from helpers import env, results
    from helpers.challenge.harness import Session, Submission, judge
    from helpers.challenge.ladder import ladder
    from helpers.challenge.rules import SIZES, Rules

    if not torch.cuda.is_available() and args.size != "smoke":  # smoke: checks the probe itself on a CPU
        print("error: no CUDA GPU is visible; this probe trains on one.", file=sys.stderr)
        return 2
    size = SIZES[args.size]
    rows = []
    session = None
    scale = "smoke" if args.size == "smoke" else "full"
    # one data seed: the held-out set is drawn from seed 0's classes, so another seed would judge other classes
    for images in args.images or [size.images]:
        seed = 0
        rules = dataclasses.replace(Rules.at_scale(scale, args.size), images=images)
        session = Session.start(rules) if session is None else dataclasses.replace(session, rules=rules)
        rungs = {r.name: r.submission for r in ladder(scale, rules)}
        base = judge(rungs["baseline"], session)
        runs = [base, judge(rungs["+ input pipeline"], session, baseline=base)]
        ref = rungs["+ padded conv1"]
        for v in args.variants:
            batch, lr = v.split(":")
            cfg = dataclasses.replace(ref.config, batch_size=int(batch), lr=float(lr), dtype=args.dtype,
                                      compile=False, compile_mode="default")
            runs.append(judge(Submission(f"reference b{batch} lr{lr}", cfg, build_model=ref.build_model),
                              session, baseline=base))
        for v in runs:
            row = {"size": args.size, "images": rules.images, "seed": seed, "name": v.name,
                   "batch": v.config.batch_size, "lr": v.config.lr, "steps": v.config.steps + v.config.warmup_steps,
                   "precision": v.precision, "accuracy": v.accuracy, "img_per_s": v.img_per_s,
                   "accepted": not v.refused, "accuracy_check": v.checks["accuracy_not_worse"][1],
                   "wall_s": v.wall_s}
            rows.append(row)
            print(f"{images:>6} images {v.name:<28} batch {row['batch']:>4} lr {row['lr']:<5} {row['steps']:>4} steps "
                  f"{row['precision']:<5} acc {v.accuracy:6.1%}  {'ok ' if row['accepted'] else 'REFUSED'} "
                  f"{v.wall_s:5.1f} s", flush=True)
    out = {**results.device_header(), "size": dataclasses.asdict(size), "date": time.strftime("%Y-%m-%d"),
           "runs": rows, "device_label": env.device_label()}
    text = json.dumps(out, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text[:2000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
