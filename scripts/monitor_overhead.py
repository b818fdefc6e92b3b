#!/usr/bin/env python3
"""Does watching the GPU slow training down? img/s of a full-scale training loop with the monitor
off, sampling at 4 Hz and at 10 Hz (with its live plot's redraws done off screen), and at 4 Hz without
the energy counter's 100 Hz poller thread, interleaved over several rounds; medians and the change
against "off" are printed and, at the default batch, recorded in results/.

    python3 scripts/monitor_overhead.py              # on a GPU node (records into results/<gpu>.json)
    python3 scripts/monitor_overhead.py --rounds 5 --steps 200
    python3 scripts/monitor_overhead.py --batch-size 8 --json small.json   # launch-bound: the host's threads count

The loop is GPU-bound (data resident on the GPU, bf16, channels_last, batch 256), so any time the
monitor takes from the training thread shows up in img/s rather than hiding in data waits.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODES = {"off": None, "4hz": 0.25, "10hz": 0.1, "4hz-no-energy-poll": 0.25}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5, help="runs of each mode (at least 3)")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--json", type=Path, help="also write every run here")
    ap.add_argument("--batch-size", type=int, default=256,
                    help="a small batch makes the loop launch-bound, where the monitor's threads take the host's time")
    args = ap.parse_args(argv)
    if args.rounds < 3:
        ap.error("--rounds must be at least 3: the figure is a median of runs")

    import torch

    from helpers import env, results, train
    from helpers.monitor import Monitor

    full = torch.cuda.is_available()
    cfg = train.TrainConfig(
        data="gpu", batch_size=args.batch_size if full else 8, image_size=224 if full else 32, dtype="bf16" if full else "fp32",
        channels_last=full, steps=args.steps if full else 5, warmup_steps=20 if full else 1,
        dataset_size=4096 if full else 64,
    )
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    names = list(MODES)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[: r % len(names)]  # rotate: no mode always runs first or last
        for mode in order:
            period = MODES[mode]
            if period is None:
                res = train.train(cfg)
            else:
                poll = {} if mode != "4hz-no-energy-poll" else {"energy_poll_s": None}
                with Monitor(period_s=period, live="offscreen", **poll) as mon:
                    res = train.train(cfg, monitor=mon)
            runs[mode].append(res.img_per_s)
            print(f"round {r + 1} {mode:>18}: {res.img_per_s:10,.1f} img/s", flush=True)

    med = {m: statistics.median(v) for m, v in runs.items()}
    overhead = {m: 100.0 * (med["off"] - med[m]) / med["off"] for m in MODES if m != "off"}
    print()
    for m in MODES:
        spread = (max(runs[m]) - min(runs[m])) / med[m] * 100
        extra = f"   change vs off {-overhead[m]:+.2f}%" if m in overhead else ""
        print(f"{m:>18}: median {med[m]:10,.1f} img/s over {len(runs[m])} runs (range {spread:.1f}% of median){extra}")
    if args.json:
        args.json.write_text(json.dumps({"config": cfg.__dict__, "runs": runs, "median": med, "overhead_pct": overhead}, indent=2))
    if full and args.batch_size == 256:
        path = results.record({
            "monitor_overhead_pct_4hz": overhead["4hz"],
            "monitor_overhead_pct_10hz": overhead["10hz"],
            "monitor_off_img_per_s": med["off"],
        })
        print(f"recorded in {path}")
    elif env.scale() == "smoke":
        print("(CPU: not recorded; the figures come from a GPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
