#!/usr/bin/env python3
"""The learner's challenge measured with its own harness (helpers.challenge.to_target): the accuracy target, the
reference solution's time to it from several seeds, and the task's figures.

* **the target**: the classic loop's recipe (batch 32, SGD lr 0.01, momentum 0.9, fp32) trained for one epoch
  (49,152 images) from ``--seeds`` start weights; run on data held on the GPU without per-step syncs (the same
  updates as the classic loop, faster), each judged by the harness. ``--write-targets`` writes the target from
  this output (``to-target:224`` in helpers/challenge/accuracy_targets.json);
* **the reference solution** (helpers.challenge.recipes) from ``--reference-seeds`` start weights: time to the
  target, img/s, MFU, held-out accuracy, and how many reruns miss the target;
* **the task**: the reference recipe on a quarter of its images, with its learning rate 4× too high, and on other
  image counts (accuracy against images);
* **the classic loop itself** (PIL per image, a sync and ``loss.item()`` every step) on ``--classic-images``.

    python3 scripts/probes/time_to_target.py --out t.json
    python3 scripts/probes/time_to_target.py --write-targets t.json      # on any machine, after a run
    python3 scripts/probes/time_to_target.py --record-from t.json --curve-from task.json   # into results/

``--record-from`` records in that device's results file: the reference solution's reruns and how many missed the
target (``to_target_reruns``, ``to_target_false_refusals``), their time to it and their MFU (``final_mfu_pct_median``,
``final_mfu_pct_min``), the classic loop's time to it
(``baseline_time_to_target_s``, or its accuracy where it fell short), the quarter-images run's gap below the
target (``task_quarter_images_gap_pts``), what 4× the learning rate cost (``task_lr4x_drop_pts``), and, from a
scripts/probes/challenge_task.py output (``--curve-from``), how many points the classic recipe's accuracy against
images has on the challenge's task (``task_accuracy_curve_points``). From a ``--recipes`` output holding the reference
recipe alone (``--recipes adamw:512:1e-3:20:36864``), only the reruns' figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _fast_classic(images: int, batch: int = 32, lr: float = 0.01):
    """The classic loop's updates (batch, SGD, fp32) on the GPU-resident set, without its syncs."""
    import torch
    import torch.nn.functional as F

    from helpers import data as _data

    def train(model, data, device):
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        seen = 0
        while seen < images:
            for x_u8, y in data.on_device(device, batch_size=batch):
                loss = F.cross_entropy(model(_data.gpu_resize_normalize(x_u8, data.image_size)), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                seen += len(y)
                if seen >= images:
                    break
        return model

    return train


def _row(v) -> dict:
    return {"name": v.name, "accuracy": v.accuracy, "train_s": v.train_s, "images": v.images,
            "img_per_s": v.img_per_s, "mfu_pct": v.mfu_pct, "reached": v.reached, "rehearsal_s": v.rehearsal_s,
            "peak_mem_gib": v.peak_mem_gib, "nvml_util_pct": v.nvml_util_pct, "gpm_sm_pct": v.gpm_sm_pct,
            "reasons": v.reasons}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=8, help="reruns of the classic recipe for the target")
    ap.add_argument("--reference-seeds", type=int, default=5)
    ap.add_argument("--classic-images", type=int, default=24_576)
    ap.add_argument("--image-counts", type=int, nargs="*", default=[24_576, 49_152])
    ap.add_argument("--out", default="time_to_target.json")
    ap.add_argument("--write-targets", default=None, metavar="JSON")
    ap.add_argument("--record-from", default=None, metavar="JSON")
    ap.add_argument("--recipes", nargs="*", default=None, metavar="OPT:BATCH:LR:WARMUP:IMAGES[:MODE][:FLAG]",
                    help="instead of the whole probe: the reference solution with these recipes (adamw or sgd; MODE "
                         "is torch.compile's), each from --reference-seeds seeds, its time and MFU")
    ap.add_argument("--curve-from", default=None, metavar="JSON")
    args = ap.parse_args()
    if args.record_from:
        return _record(Path(args.record_from), Path(args.curve_from) if args.curve_from else None)
    from helpers.challenge.accuracy import AccuracyTarget, write_targets

    if args.write_targets:
        p = json.loads(Path(args.write_targets).read_text())
        print(write_targets(p["target"], source=args.write_targets, key=p["target"]["size"]))
        return 0

    import torch

    from helpers import env
    from helpers.challenge import recipes
    from helpers.challenge.harness import Session
    from helpers.challenge.rules import Rules
    from helpers.challenge.accuracy import time_target as target_now
    from helpers.challenge.to_target import judge_training
    from reference_timeline import build_from, recipe_from  # the same recipe tokens

    rules = Rules.at_scale()
    session = Session.start(rules)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
           "date": env.today(), "commit": commit, "size": rules.size, "ceiling_tflops": session.ceilings.matmul_tflops}
    t0 = time.perf_counter()
    placeholder = AccuracyTarget(size="probe", accuracies=(0.0, 0.0), device="", date="")

    def save():
        out["s"] = round(time.perf_counter() - t0, 1)
        Path(args.out).write_text(json.dumps(out, indent=1))

    if args.recipes is not None:
        out["recipes"] = []
        base = recipes.REFERENCE_RECIPES[rules.size]
        for text in args.recipes:
            recipe = recipe_from(base, text)
            recipes.REFERENCE_RECIPES[rules.size] = recipe
            try:
                for seed in range(args.reference_seeds):
                    v = judge_training(recipes.reference_training(rules), session, target_now(rules), name=text,
                                       build_model=build_from(text), rerun_seed=seed)
                    out["recipes"].append({"recipe": text, "seed": seed, **_row(v)})
                    print(f"{text} seed {seed}: {v}", flush=True)
                    save()
            finally:
                recipes.REFERENCE_RECIPES[rules.size] = base
        return 0

    epoch = (rules.dataset_size // 1024) * 1024
    reruns = []
    for seed in range(args.seeds):
        v = judge_training(_fast_classic(epoch), session, placeholder, name=f"classic recipe seed {seed}",
                           rerun_seed=seed)
        reruns.append(_row(v))
        print(f"target rerun {seed}: {v.accuracy:.4f} ({v.train_s:.1f} s)", flush=True)
    out["target"] = {"size": rules.target_key, "date": out["date"], "device_label": out["device"],
                     "torch": out["torch"], "images": epoch, "baseline": reruns}
    accs = tuple(r["accuracy"] for r in reruns)
    target = AccuracyTarget(size=rules.target_key, accuracies=accs, device=out["device"], date=out["date"]) \
        if len(accs) >= 2 else placeholder
    out["threshold"] = target.threshold
    print(f"target: {target.threshold:.4f} (mean {target.mean:.4f}, sd {target.sd:.4f})", flush=True)
    save()

    ref = []
    for seed in range(args.reference_seeds):
        v = judge_training(recipes.reference_training(rules), session, target, name=f"reference seed {seed}",
                           build_model=recipes.reference_build, rerun_seed=seed)
        ref.append(_row(v))
        print(f"reference seed {seed}: {v}", flush=True)
    out["reference"] = ref
    save()

    base = recipes.REFERENCE_RECIPES[rules.size]
    variants = [("quarter images", dataclasses.replace(base, images=base.images // 4)),
                ("lr x4", dataclasses.replace(base, lr=4 * base.lr))]
    variants += [(f"{n} images", dataclasses.replace(base, images=n)) for n in args.image_counts]
    out["variants"] = []
    for label, recipe in variants:
        recipes.REFERENCE_RECIPES[rules.size] = recipe
        try:
            v = judge_training(recipes.reference_training(rules), session, target, name=label,
                               build_model=recipes.reference_build)
        finally:
            recipes.REFERENCE_RECIPES[rules.size] = base
        out["variants"].append({"label": label, "recipe": dataclasses.asdict(recipe), **_row(v)})
        print(f"{label}: {v}", flush=True)
        save()

    v = judge_training(recipes.classic_training(images=args.classic_images), session, target, name="classic loop")
    out["classic"] = _row(v)
    print(f"classic: {v}", flush=True)
    save()
    return 0


def _record(path: Path, curve_path: Path | None) -> int:
    import statistics

    from helpers import data, results

    p = json.loads(path.read_text())
    # a whole probe's output, or --recipes' with the reference recipe alone: its reruns only
    ref = p["reference"] if "reference" in p else p["recipes"]
    if "reference" not in p and len({r["recipe"] for r in ref}) != 1:
        raise SystemExit(f"{path}: record the reruns of one recipe (the reference solution's), not of "
                         f"{sorted({r['recipe'] for r in ref})}")
    accs = [r["accuracy"] for r in ref]
    figures = {"to_target_reruns": len(ref), "to_target_false_refusals": sum(not r["reached"] for r in ref),
               "reference_time_to_target_s_median": statistics.median(r["train_s"] for r in ref),
               "final_mfu_pct_median": statistics.median(r["mfu_pct"] for r in ref),
               "final_mfu_pct_min": min(r["mfu_pct"] for r in ref),
               "final_accuracy_min": min(accs)}
    if "reference" in p:
        threshold = p["threshold"]
        variants = {v["label"]: v for v in p["variants"]}
        figures.update({"to_target_threshold_pct": 100 * threshold,
                        "task_quarter_images_gap_pts": 100 * (threshold - variants["quarter images"]["accuracy"]),
                        "task_lr4x_drop_pts": 100 * (statistics.mean(accs) - variants["lr x4"]["accuracy"])})
        classic = p["classic"]
        if classic["reached"]:
            figures["baseline_time_to_target_s"] = classic["train_s"]
        figures["baseline_to_target_accuracy"] = classic["accuracy"]
        figures["baseline_to_target_images"] = classic["images"]
    if curve_path is not None:
        curve = json.loads(curve_path.read_text())
        task = dataclasses.asdict(data.CHALLENGE_TASK)
        runs = [r for t in curve["tasks"] if t["task"] == task for r in t["runs"] if r["recipe"] == "baseline"]
        if runs:
            figures["task_accuracy_curve_points"] = len(runs[0]["curve"])
    header = {"device": p["device"], "torch": p["torch"], "date": p["date"]}
    out = results.record(figures, path=results.results_path(header, scale="full"), header=header)
    print(f"recorded in {out}: {figures}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
