#!/usr/bin/env python3
"""Which recipes at eight times the baseline's batch learn as much as the baseline, from every seed?

Trains each recipe of RECIPES with helpers.large_batch.train_run (the code 04's exercise judges with) from several
seeds, at this scale's setup (or --scale), and records held-out accuracy, the final loss and the wall time, beside
the baseline's from the same seeds and the margin the exercise allows.

    python3 scripts/probes/large_batch.py --seeds 4 --out large_batch.json
    HELPERS_SCALE=smoke python3 scripts/probes/large_batch.py --seeds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from helpers import env, large_batch as lb  # noqa: E402
from helpers.challenge.accuracy import accuracy_margin  # noqa: E402


def adamw(lr):
    return lambda p: torch.optim.AdamW(p, lr=lr, weight_decay=0.0)


def recipes(setup: lb.Setup):
    b, lr = setup.large_batch, setup.base_lr
    k = setup.large_batch // setup.base_batch
    w = max(1, setup.large_steps // 10)
    return [
        ("same lr", lb.sgd(lr), lb.constant(lr)),
        (f"lr x{k} (linear rule), no warm-up", lb.sgd(lr * k), lb.constant(lr * k)),
        (f"lr x{k}, warm-up {w}, decay", lb.sgd(lr * k), lb.warmup_decay(lr * k, w)),
        (f"lr x{k // 2}, warm-up {w}, decay", lb.sgd(lr * k / 2), lb.warmup_decay(lr * k / 2, w)),
        (f"lr x{k // 4}, warm-up {w}, decay", lb.sgd(lr * k / 4), lb.warmup_decay(lr * k / 4, w)),
        (f"lr x{k // 4}, constant", lb.sgd(lr * k / 4), lb.constant(lr * k / 4)),
        ("adamw 1e-3, warm-up, decay", adamw(1e-3), lb.warmup_decay(1e-3, w)),
        ("adamw 3e-3, warm-up, decay", adamw(3e-3), lb.warmup_decay(3e-3, w)),
        ("adamw 1e-3, constant", adamw(1e-3), lb.constant(1e-3)),
        ("adamw 1e-2, constant", adamw(1e-2), lb.constant(1e-2)),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="recipe names to run (default all)")
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--out", default="large_batch.json")
    args = ap.parse_args()
    setup = lb.setup_for()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    out = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else f"cpu ({torch.backends.cpu.get_cpu_capability()})",
           "torch": torch.__version__, "date": env.today(), "scale": env.scale(),
           "setup": {k: (v.kwargs() if hasattr(v, "kwargs") else v) for k, v in vars(setup).items()},
           "baseline": [], "recipes": []}
    t0 = time.perf_counter()
    for seed in range(args.seeds):
        r = lb.baseline(setup, seed=seed, device=dev)
        out["baseline"].append({"seed": seed, "accuracy": r.accuracy, "final_loss": r.final_loss, "s": round(r.seconds, 2)})
        print("baseline", seed, round(100 * r.accuracy, 1), round(r.seconds, 2), flush=True)
    accs = [b["accuracy"] for b in out["baseline"]]
    out["baseline_mean"] = statistics.mean(accs)
    out["margin"] = accuracy_margin(out["baseline_mean"], setup.heldout)
    for name, opt, sched in recipes(setup):
        if args.only and name not in args.only:
            continue
        if time.perf_counter() - t0 > args.budget_s:
            out["cut"] = f"budget reached before {name}"
            break
        runs = []
        for seed in range(args.seeds):
            r = lb.train_run(setup, opt, sched, batch=setup.large_batch, seed=seed, device=dev, name=name)
            runs.append({"seed": seed, "accuracy": r.accuracy, "final_loss": r.final_loss, "s": round(r.seconds, 2)})
        a = [r["accuracy"] for r in runs]
        row = {"recipe": name, "runs": runs, "min": min(a), "mean": statistics.mean(a),
               "passes_all": all(x >= b - out["margin"] for x, b in zip(a, accs))}
        out["recipes"].append(row)
        print(name, [round(100 * x, 1) for x in a], "passes" if row["passes_all"] else "fails",
              [r["s"] for r in runs], flush=True)
        Path(args.out).write_text(json.dumps(out, indent=1))
    Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
