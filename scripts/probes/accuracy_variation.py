#!/usr/bin/env python3
"""How much does held-out accuracy move from one honest run to the next, and does the reference solution's recipe
learn as much as the baseline's? The measurements the final challenge's accuracy rule is set from.

For one challenge size, the baseline's recipe (batch 32, learning rate 0.01, fp32, the PIL pipeline; loader workers
added: they change the speed, not the batches) is trained from several seeds (``TrainConfig.init_seed``: other
initial weights and another batch order, the same data), and each variant of the reference solution's recipe
(``BATCH:LR[:WARMUP[:DECAY]]``: its batch, learning rate, warm-up steps and decay) from several seeds too, eager
(torch.compile changes the speed, not what is learned), with its fused Triton kernels and padded conv1::

    python3 scripts/probes/accuracy_variation.py --size gpu --seeds 8 --variants 512:0.02 512:0.04:5:cosine --out a.json

The output holds every run's held-out accuracy; ``helpers/challenge/accuracy_targets.json`` is written from it
with ``--write-targets`` (the baseline's accuracies per size: :func:`helpers.challenge.accuracy.accuracy_target`).
For each variant it says how many of its reruns the rule would refuse (false refusals) and how many of them it
would refuse one point lower (the rule's power against a run one point worse).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _variant(text: str) -> dict:
    parts = text.split(":")
    return {"batch": int(parts[0]), "lr": float(parts[1]), "lr_warmup_steps": int(parts[2]) if len(parts) > 2 else 0,
            "lr_decay": parts[3] if len(parts) > 3 else "none"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="gpu", help="a key of helpers.challenge.rules.SIZES")
    ap.add_argument("--seeds", type=int, default=8, help="baseline seeds (0 .. N-1)")
    ap.add_argument("--variant-seeds", type=int, default=5, help="seeds per reference variant")
    ap.add_argument("--variants", nargs="*", default=[], help="reference recipes as BATCH:LR[:WARMUP[:DECAY]]")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"], help="the reference recipe's precision")
    ap.add_argument("--as-judged", action="store_true",
                    help="keep the reference solution's torch.compile mode (CUDA graphs) and precision: the kernels "
                         "a judged run uses, whose rounding differs from eager's")
    ap.add_argument("--skip-baseline", action="store_true", help="variants only (the target from the targets file)")
    ap.add_argument("--workers", type=int, default=8, help="loader workers for the baseline's PIL pipeline")
    ap.add_argument("--out", default=None, help="write the JSON here")
    ap.add_argument("--record-from", default=None, metavar="JSON",
                    help="instead of measuring: record the reruns of the reference solution's recipe in this probe's "
                         "JSON into its device's results file (ladder_top_accuracy_mean_over_baseline_pts, "
                         "accuracy_false_refusals, accuracy_reruns, accuracy_refused_one_point_lower)")
    ap.add_argument("--write-targets", default=None, metavar="JSON",
                    help="instead of measuring: write helpers/challenge/accuracy_targets.json's entries from this "
                         "probe's JSON output (one or more sizes)")
    args = ap.parse_args(argv)
    if args.record_from:
        return _record(Path(args.record_from))
    if args.write_targets:
        from helpers.challenge.accuracy import write_targets

        for size in write_targets(json.loads(Path(args.write_targets).read_text()), source=args.write_targets):
            print(f"accuracy target for {size} written")
        return 0

    import torch

    from helpers import env, results
    from helpers.challenge import ladder
    from helpers.challenge.accuracy import AccuracyTarget, accuracy_target, heldout_accuracy
    from helpers.challenge.rules import SIZES, Rules
    from helpers.challenge.start import start_model
    from helpers.train import Trainer

    scale = "smoke" if args.size == "smoke" else "full"
    if scale == "full" and not torch.cuda.is_available():
        print("error: no CUDA GPU is visible; this size trains on one.", file=sys.stderr)
        return 2
    rules = Rules.at_scale(scale, args.size)
    rungs = ladder.ladder(scale, rules)
    base_cfg = rungs[0].submission.config
    ref = rungs[-1].submission
    workers = args.workers if scale == "full" else 0

    def run(cfg, seed: int, build=None) -> tuple[float, float]:
        cfg = dataclasses.replace(rules.fit(cfg), init_seed=seed)
        model = start_model(rules, seed=seed)
        if build is not None:
            model = build(model.to(env.device()))
        t = time.perf_counter()
        trainer = Trainer(cfg, model=model)
        trainer.run(boxed=False)
        acc = heldout_accuracy(trainer.model, image_size=rules.image_size, precision=trainer.precision,
                               n=rules.heldout)
        return acc, time.perf_counter() - t

    out = {**results.device_header(), "device_label": env.device_label(), "date": time.strftime("%Y-%m-%d"),
           "size": args.size, "rules": dataclasses.asdict(rules), "baseline": [], "variants": []}
    fast_base = dataclasses.replace(base_cfg, num_workers=workers, pin_memory=workers > 0, sync_each_step=False,
                                    item_each_step=False, persistent_workers=workers > 0,
                                    prefetch_factor=4 if workers else None)
    for seed in range(0 if args.skip_baseline else args.seeds):
        acc, wall = run(fast_base, seed)
        out["baseline"].append({"seed": seed, "accuracy": acc, "wall_s": wall})
        print(f"baseline seed {seed}: {acc:.2%} ({wall:.1f} s)", flush=True)
    target = accuracy_target(args.size) if args.skip_baseline else AccuracyTarget(
        size=args.size, accuracies=tuple(r["accuracy"] for r in out["baseline"]), device=out["device_label"],
        date=out["date"], torch=torch.__version__)
    print(target.describe(), flush=True)
    for text in args.variants:
        v = _variant(text)
        cfg = dataclasses.replace(ref.config, batch_size=v["batch"], lr=v["lr"], lr_warmup_steps=v["lr_warmup_steps"],
                                  lr_decay=v["lr_decay"])
        if not args.as_judged:
            cfg = dataclasses.replace(cfg, dtype=args.dtype, compile=False, compile_mode="default")
        accs = []
        for seed in range(args.variant_seeds):
            acc, wall = run(cfg, seed, ref.build_model)
            accs.append(acc)
            print(f"{text} seed {seed}: {acc:.2%} ({wall:.1f} s)", flush=True)
        row = {**v, "text": text, "dtype": cfg.dtype, "compile": cfg.compile, "compile_mode": cfg.compile_mode, "accuracies": accs, "mean": statistics.mean(accs),
               "sd": statistics.stdev(accs) if len(accs) > 1 else 0.0,
               "mean_over_baseline_pts": 100 * (statistics.mean(accs) - target.mean),
               "refused": sum(a < target.threshold for a in accs),
               "refused_one_point_lower": sum(a - 0.01 < target.threshold for a in accs)}
        out["variants"].append(row)
        print(f"{text}: mean {row['mean']:.2%} (sd {row['sd']:.2%}), {row['mean_over_baseline_pts']:+.2f} pts over "
              f"the baseline's mean; refused {row['refused']}/{len(accs)}, one point lower "
              f"{row['refused_one_point_lower']}/{len(accs)}", flush=True)
    text = json.dumps(out, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


def _record(path: Path) -> int:
    """Record the reference recipe's reruns of a probe's output in that device's results file."""
    from helpers import results
    from helpers.challenge import ladder
    from helpers.challenge.accuracy import accuracy_target
    from helpers.challenge.rules import Rules

    probe = json.loads(path.read_text())
    rules = Rules.at_scale("full", probe["size"])
    ref = rules.fit(ladder.top_rung("full", rules).config)
    want = (ref.batch_size, ref.lr, ref.lr_warmup_steps, ref.lr_decay)
    rows = [v for v in probe["variants"] if (v["batch"], v["lr"], v["lr_warmup_steps"], v["lr_decay"]) == want]
    if not rows:
        print(f"error: {path} has no reruns of the reference recipe {want}", file=sys.stderr)
        return 2
    v = rows[-1]
    target = accuracy_target(probe["size"])
    figures = {"ladder_top_accuracy_mean_over_baseline_pts": 100 * (v["mean"] - target.mean),
               "accuracy_false_refusals": sum(a < target.threshold for a in v["accuracies"]),
               "accuracy_reruns": len(v["accuracies"]),
               "accuracy_refused_one_point_lower": sum(a - 0.01 < target.threshold for a in v["accuracies"])}
    header = {k: probe[k] for k in ("device", "driver", "torch", "cuda", "date", "host_cpu") if k in probe}
    out = results.record(figures, path=results.results_path(header, scale="full"), header=header)
    print(f"recorded in {out}: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
