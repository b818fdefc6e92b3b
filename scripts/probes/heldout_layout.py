"""Held-out evaluation of the harness's own network in NCHW against a channels_last copy: wall time per call
(median and spread of interleaved repeats) and the accuracy each reads, in the precisions the harness judges in
(fp32 for the learner's own training, the run's own for the ladder), on this machine or under a profile.

    HELPERS_PROFILE=t4 python3 scripts/probes/heldout_layout.py --out heldout_layout.t4.json

Why: every judged run in 06 ends with a held-out evaluation of thousands of images at the challenge's image size,
and on a small GPU those evaluations add up to a large share of the notebook's time. The layout changes only the
rounding, so the accuracies should agree to a few images in thousands.

Its answer under the t4 profile (results/archive/probe-heldout-layout.nvidia-h100-80gb-hbm3.t4.2026-11-27.json):
the two layouts take the same time in both precisions, so the harness evaluates each network in the layout it has.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from helpers import env
    from helpers.challenge.accuracy import heldout_accuracy
    from helpers.challenge.rules import Rules
    from helpers.challenge.start import start_model

    rules = Rules.at_scale()
    device = env.device()
    model = start_model(rules).to(device)
    # a few steps of training so the logits are not all alike (ties would make accuracy meaningless)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    from helpers import data as _data
    images, labels = _data.synthetic_images(256, seed=rules.seed, task=rules.task)
    x = _data.gpu_resize_normalize(torch.from_numpy(images).permute(0, 3, 1, 2).to(device), rules.image_size)
    y = torch.from_numpy(labels).to(device)
    for _ in range(5):
        for i in range(0, 256, 32):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
            opt.step()
    del x, y
    nhwc = copy.deepcopy(model).to(memory_format=torch.channels_last)  # heldout_accuracy follows the layout
    nets = {"nchw": model, "channels_last": nhwc}
    precisions = ["fp32", env.resolve_dtype("bf16", device)] if device.type == "cuda" else ["fp32"]
    out: dict = {"device": env.device_label(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
                 "images": rules.to_target_heldout, "image_size": rules.image_size, "repeats": args.repeats,
                 "results": {}}
    for precision in precisions:
        times: dict[str, list[float]] = {"nchw": [], "channels_last": []}
        accs: dict[str, list[float]] = {"nchw": [], "channels_last": []}
        for layout in ("nchw", "channels_last"):  # one warm-up each: cuDNN's first calls, the cache of images
            heldout_accuracy(nets[layout], image_size=rules.image_size, precision=precision, n=256,
                             task=rules.task)
        for _ in range(args.repeats):
            for layout in ("nchw", "channels_last"):  # interleaved: drift falls on both alike
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t = time.perf_counter()
                acc = heldout_accuracy(nets[layout], image_size=rules.image_size, precision=precision,
                                       n=rules.to_target_heldout, task=rules.task)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times[layout].append(time.perf_counter() - t)
                accs[layout].append(acc)
        row = {layout: {"median_s": statistics.median(ts), "min_s": min(ts), "max_s": max(ts),
                        "accuracy": accs[layout][0]} for layout, ts in times.items()}
        row["speedup"] = row["nchw"]["median_s"] / row["channels_last"]["median_s"]
        row["accuracy_gap_images"] = round(abs(row["nchw"]["accuracy"] - row["channels_last"]["accuracy"])
                                           * rules.to_target_heldout)
        out["results"][precision] = row
        print(f"{precision}: NCHW {row['nchw']['median_s']:.3f} s, channels_last "
              f"{row['channels_last']['median_s']:.3f} s ({row['speedup']:.2f}×); accuracy "
              f"{100 * row['nchw']['accuracy']:.2f}% vs {100 * row['channels_last']['accuracy']:.2f}%", flush=True)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
