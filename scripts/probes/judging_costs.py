"""Where a judged run's wall time goes besides its training: the harness's checks, set-up, held-out evaluation,
compiles and data, per section of 06 (a ladder rung, the suspects, the answer key), on this machine or under a
learner-machine profile. For keeping 06 within its time budget: it shows which of the harness's own costs to cut.

    HELPERS_PROFILE=t4 python3 scripts/probes/judging_costs.py --out judging_costs.t4.json
    python3 scripts/probes/judging_costs.py --sections suspects answer

Each of the harness's helpers named in ``WATCHED`` is wrapped with a timer for the run; a section's wall time minus
the timed training (the trainer's measured steps, the to-target clock) and minus what the wrapped helpers took is
"other" (Python, the monitor, the profiler, CUDA's lazy start).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

TIMES: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
CALLS: dict[str, list] = collections.defaultdict(list)  # per section: (helper, seconds, what it returned) in order
_section = ["(none)"]

#: (module, attribute) pairs timed wherever they are called from.
WATCHED = [
    ("helpers.challenge.harness", "check_function"), ("helpers.challenge.to_target", "check_function"),
    ("helpers.challenge.harness", "heldout_accuracy"), ("helpers.challenge.to_target", "heldout_accuracy"),
    ("helpers.challenge.harness", "start_model"), ("helpers.challenge.to_target", "start_model"),
    ("helpers.exercises.nb06", "start_model"), ("helpers.challenge.harness", "_build"),
    ("helpers.challenge.to_target", "_challenge_set"), ("helpers.challenge.to_target", "_random_data"),
    ("helpers.challenge.to_target", "trained_reference"), ("helpers.exercises.nb06", "_trained_anyway"),
    ("helpers.exercises.nb06", "_logits_gap_pct"), ("helpers.bench", "flops_per_image"),
    ("helpers.profiling", "profile_steps"), ("helpers.train", "_synthetic"), ("helpers.train", "Trainer.step"),
    ("helpers.train", "Trainer.__init__"), ("helpers.train", "Trainer.run"),
    ("helpers.challenge.to_target", "_spot_check"), ("helpers.challenge.to_target", "_record"),
    ("helpers.challenge.to_target", "_left_running"), ("helpers.challenge.to_target", "fresh_stream"),
    ("helpers.monitor", "Monitor.start"), ("helpers.monitor", "Monitor.stop"),
]


def _wrap(module: str, attr: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    owner, name = (getattr(mod, attr.split(".")[0]), attr.split(".")[1]) if "." in attr else (mod, attr)
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*a, **k):
        t = time.perf_counter()
        out = None
        try:
            out = fn(*a, **k)
            return out
        finally:
            dt = time.perf_counter() - t
            key = f"{module.rsplit('.', 1)[-1]}.{attr}"
            TIMES[_section[0]][key] += dt
            extra = ({"measured_wall_s": round(out.wall_s, 2), "steps": out.steps, "img_per_s": round(out.img_per_s)}
                     if attr == "Trainer.run" and out is not None else {})
            if attr != "Trainer.step" or dt > 0.2:  # a step is listed only when slow (a compile, cuDNN's autotuner)
                CALLS[_section[0]].append({"helper": key, "s": round(dt, 3), **extra})

    setattr(owner, name, timed)


@contextlib.contextmanager
def section(name: str, walls: dict):
    _section[0] = name
    t = time.perf_counter()
    try:
        yield
    finally:
        walls[name] = time.perf_counter() - t
        _section[0] = "(none)"


def _classic_loop(rules):
    """06's training function as the learner first meets it: the classic loop of 01 on a quarter of the ladder's
    images, a sync after the copy and after the step, the loss read every step."""
    import torch
    import torch.nn.functional as F

    from helpers.data import reference_transform

    def my_training(model, data, device):
        loader = data.loader(batch_size=32, shuffle=True, transform=reference_transform(data.image_size))
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        seen = 0
        while seen < rules.images // 4:
            for images, labels in loader:
                images, labels = images.to(device), labels.to(device)
                if device.type == "cuda":
                    torch.cuda.synchronize()
                loss = F.cross_entropy(model(images), labels)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                loss.item()
                seen += len(labels)
                if seen >= rules.images // 4:
                    break
        return model

    return my_training


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", nargs="*", default=["baseline", "rung", "suspects", "answer"],
                    help="'mine': 06's own training as the learner first meets it (the classic loop, a quarter of "
                         "the ladder's images), judged to the target as 06 judges it")
    ap.add_argument("--rungs", nargs="*", default=None, metavar="NAME",
                    help="with section 'rungs': the ladder's rungs to judge, each its own section (default: every rung "
                         "after the baseline that runs here)")
    ap.add_argument("--writes", action="store_true", help="also time the leaderboard's concurrent-writes check, "
                    "with each way of starting its processes")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    for m, a in WATCHED:
        _wrap(m, a)
    import torch

    from helpers import env
    from helpers.challenge import ladder, recipes
    from helpers.challenge.accuracy import time_target
    from helpers.challenge.harness import Session
    from helpers.challenge.rules import Rules
    from helpers.challenge.to_target import judge_training
    from helpers.exercises import nb06

    walls: dict[str, float] = {}
    trained: dict[str, float] = {}
    rules = Rules.at_scale()
    with section("session", walls):
        session = Session.start(rules)
    rungs = ladder.ladder(rules=rules)
    baseline = None
    if "baseline" in args.sections or "suspects" in args.sections or "rung" in args.sections:
        with section("baseline", walls):
            baseline = ladder.climb(rungs[:1], session)[0]
        trained["baseline"] = baseline.images_seen / baseline.img_per_s
    if "rungs" in args.sections:  # each judged as its own baseline: only its own costs
        from helpers.challenge.harness import judge

        for r in rungs[1:]:
            if (args.rungs and r.name not in args.rungs) or r.left_out or (r.needs_gpu and not env.has_cuda()):
                continue
            with section(f"rung {r.name}", walls):
                v = judge(r.submission, session)
            trained[f"rung {r.name}"] = v.images_seen / v.img_per_s
    if args.writes:
        from helpers import leaderboard

        for method in ("spawn", "forkserver"):
            with section(f"concurrent writes ({method})", walls):
                leaderboard.concurrent_writes_check(writers=4, each=25, start_method=method)
    if "rung" in args.sections:
        top = rungs[-1]
        with section(f"rung {top.name}", walls):
            v = ladder.climb([top], session, baseline=baseline)[0]
        trained[f"rung {top.name}"] = v.images_seen / v.img_per_s
    if "suspects" in args.sections:
        with section("suspects", walls):
            runs = nb06.suspects(session, baseline, seed=None)
        trained["suspects"] = sum(v.images_seen / v.img_per_s for v in runs.values() if v.img_per_s > 0)
    if "mine" in args.sections:
        with section("mine", walls):
            m = judge_training(_classic_loop(rules), session, time_target(rules), name="my run")
        trained["mine"] = m.train_s
        trained["mine: rehearsal"] = m.rehearsal_s
    if "answer" in args.sections:
        with section("answer", walls):
            a = judge_training(recipes.reference_training(rules), session, time_target(rules),
                               name="reference solution", build_model=recipes.reference_build)
        trained["answer"] = a.train_s
        trained["answer: rehearsal"] = a.rehearsal_s
    out = {"device": env.device_label(), "torch": torch.__version__, "date": time.strftime("%Y-%m-%d"),
           "sections": {}}
    for name, wall in walls.items():
        parts = dict(TIMES.get(name, {}))
        row = {"wall_s": round(wall, 2), "timed_training_s": round(trained.get(name, 0.0), 2),
               "helpers_s": {k: round(v, 2) for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}}
        row["calls"] = CALLS.get(name, [])
        if name in ("answer", "mine"):
            row["rehearsal_s"] = round(trained[f"{name}: rehearsal"], 2)
        out["sections"][name] = row
        print(f"\n{name}: {wall:.1f} s wall, {trained.get(name, 0.0):.1f} s timed training")
        for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
            print(f"    {v:7.2f} s  {k}")
        calls = [f"{c['helper'].split('.')[-1]} {c['s']:.2f}"
                 + (f" (measured {c['measured_wall_s']} s)" if "measured_wall_s" in c else "")
                 for c in CALLS.get(name, [])]
        print("    in order: " + ", ".join(calls))
        if name in ("answer", "mine"):
            print(f"    rehearsal {trained[f'{name}: rehearsal']:.2f} s (includes any compile)")
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
