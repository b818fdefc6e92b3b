"""What the class judge (:mod:`.classroom`) runs in its child processes: the session, measured once, then each
submission, judged alone in a fresh process. No submission's code runs in the session's process.

    python -m helpers.challenge.class_children --session-setup setup.json --result session.json
    python -m helpers.challenge.class_children --one ada.py --session session.json --result ada.json

A submission's process imports the file, judges its ``train`` with :func:`.to_target.judge_training` (its
``build_model`` and ``NAME`` where it defines them) and writes the verdict as JSON: the parent reads it as evidence,
never as a figure it trusts (:mod:`.classroom`'s threat model). What the process prints goes to its log.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main"]  # run as a module by the class judge (python -m helpers.challenge.class_children)


def _printable(raw: Any, limit: int) -> str:
    """``raw`` as text a table and a terminal can show: printable characters only (no escapes), ``limit`` at most."""
    return "".join(c for c in str(raw) if c.isprintable())[:limit].strip()


def _clean_name(raw: Any, fallback: str) -> str:
    """A name a table can print: printable characters only, 80 at most (the file's name where none is left)."""
    return _printable(raw, 80) or fallback


def _session_child(setup_file: Path, result: Path) -> int:
    """Measure the session (no submission's code runs here) and write what every child and the parent need."""
    from .. import bench, results
    from .accuracy import AccuracyTarget, time_target
    from .harness import Session
    from .rules import Rules

    setup = json.loads(setup_file.read_text())
    rules = Rules(**setup["rules"]) if setup.get("rules") else Rules.at_scale()
    ceilings = bench.Ceilings(**setup["ceilings"]) if setup.get("ceilings") else None
    target = (AccuracyTarget(**{**setup["target"], "accuracies": tuple(setup["target"]["accuracies"])})
              if setup.get("target") else time_target(rules))
    if target is None:
        print(f"no accuracy target was measured for these rules ({rules.target_key}): see "
              "helpers/challenge/accuracy.py", file=sys.stderr)
        return 3
    session = Session.start(rules, ceilings=ceilings)
    from .start import start_model

    start_model(rules)  # the start weights, into the data cache here: each submission's process only reads them
    _write_atomic(result, {"rules": dataclasses.asdict(session.rules), "ceilings": dataclasses.asdict(session.ceilings),
                           "flops_per_image": session.flops_per_image, "device": session.ceilings.device_name,
                           "ceiling_img_per_s": session.ceiling_img_per_s,
                           "target": {**dataclasses.asdict(target), "threshold": target.threshold},
                           "header": results.device_header()})
    print(f"session: {session.ceilings}; target {target.threshold:.1%}")
    return 0


class _PipeGate:
    """The timed call's two moments, told to the class judge over two pipes (:class:`.to_target.Gate`): ``R`` when
    ready (the judge answers ``G`` and starts its clock), then ``D``, the byte count and the trained weights, as fp32
    in the reference network's parameter order (the judge's clock stops when the last byte arrives)."""

    def __init__(self, read_fd: int, write_fd: int, image_size: int) -> None:
        from .isolation import reference_shapes

        self._r, self._w = read_fd, write_fd
        self._shapes = reference_shapes(image_size)
        self._buffer = None

    def ready(self) -> None:
        import torch

        from .. import env

        total = sum(s.numel() for _, s in self._shapes)
        # the weights' way out, allocated before the clock (pinned on a GPU: the copy then runs at full speed)
        self._buffer = torch.empty(total, dtype=torch.float32, pin_memory=env.device().type == "cuda")
        os.write(self._w, b"R")
        if os.read(self._r, 1) != b"G":
            raise RuntimeError("the class judge did not start the clock")

    def done(self, model, mapping) -> None:
        import torch

        params = dict(torch.nn.Module.named_parameters(model))  # not an override of the submission's
        where = {ref: (sub, sl) for ref, sub, sl in mapping}
        off = 0
        with torch.no_grad():
            for name, shape in self._shapes:
                sub, sl = where[name]
                n = shape.numel()
                self._buffer[off:off + n].copy_(params[sub].detach()[sl].float().reshape(-1), non_blocking=True)
                off += n
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        data = memoryview(self._buffer.numpy()).cast("B")
        os.write(self._w, b"D" + len(data).to_bytes(8, "little"))
        while data:
            data = data[os.write(self._w, data[: 1 << 20]):]


def _one_child(file: Path, session_file: Path, result: Path, gate_fds: tuple[int, int] | None = None) -> int:
    from .. import bench
    from .accuracy import AccuracyTarget
    from .harness import Session
    from .rules import Rules
    from .to_target import judge_training

    s = json.loads(session_file.read_text())
    session = Session(Rules(**s["rules"]), bench.Ceilings(**s["ceilings"]), s["flops_per_image"], s["device"])
    t = {k: v for k, v in s["target"].items() if k != "threshold"}
    target = AccuracyTarget(**{**t, "accuracies": tuple(t["accuracies"])})
    name = file.stem

    def refuse(why: str) -> int:  # refused before the harness made a verdict: no figures, nothing to rank
        _write_atomic(result, {"name": name, "passed": False, "reasons": [why], "figures": {}, "checks": {}})
        return 0

    try:
        spec = importlib.util.spec_from_file_location(f"submission_{file.stem}", file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # as an import would: a dataclass or pickle in the file finds its module
        spec.loader.exec_module(module)
    except BaseException as e:  # noqa: BLE001 - SystemExit and KeyboardInterrupt from a submission included
        last = traceback.format_exception_only(type(e), e)[-1].strip()
        return refuse(f"the file did not import: {last[:300]}")
    name = _clean_name(getattr(module, "NAME", file.stem), file.stem)
    train = getattr(module, "train", None)
    if not callable(train):
        found = "nothing" if train is None else f"a {type(train).__name__}"
        return refuse(f"it defines no train(model, data, device) function (found {found}); define one at the top "
                      "level of the file")
    build = getattr(module, "build_model", None)
    if build is not None and not callable(build):
        return refuse(f"build_model is a {type(build).__name__}; it must be a function that takes the reference "
                      "network and returns the network to train")
    gate = _PipeGate(*gate_fds, session.rules.image_size) if gate_fds is not None else None
    try:
        v = judge_training(train, session, target, name=name, build_model=build, gate=gate)
    except Exception as e:  # noqa: BLE001 - anything judge_training lets through
        return refuse(f"judging raised {type(e).__name__}: {str(e)[:300]}")
    # a run that stopped (before training, or in it) measured nothing: its figures stay empty, not zeros
    figures = {} if v.stopped else {k: (None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x))
                                    for k, x in v.figures(session).items()}
    _write_atomic(result, {"name": name, "passed": v.reached, "reasons": v.reasons, "figures": figures,
                           "checks": {k: ok for k, (ok, _) in v.checks.items()}, "stopped": v.stopped})
    print(v)
    return 0


def _write_atomic(path: Path, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` whole or not at all (a reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.challenge.class_children",
                                 description="The class judge's child processes (python -m helpers.challenge."
                                             "classroom FOLDER starts them).")
    ap.add_argument("--one", help="a submission file to judge")
    ap.add_argument("--session-setup", help="measure the session from this setup file")
    ap.add_argument("--session", help="the session a submission is judged in")
    ap.add_argument("--result", required=True, help="where the verdict (or the session) is written")
    ap.add_argument("--gate", help="READ_FD,WRITE_FD: the pipes to the class judge, which times the run itself")
    ap.add_argument("--confine", help="the only folder this process may write (Landlock, where the kernel has it)")
    ap.add_argument("--hide", action="append", default=[], help="a path this process may not read (repeatable)")
    args = ap.parse_args(argv)
    if args.session_setup:
        return _session_child(Path(args.session_setup), Path(args.result))
    if not (args.one and args.session):
        ap.error("give --one FILE --session FILE, or --session-setup FILE")
    if args.confine:
        from .sandbox import confine

        # before any of the submission's code runs: what it may write, read and signal, for good
        print("confined:", confine(writable=[Path(args.confine)], hidden=[Path(h) for h in args.hide]).describe())
    gate = tuple(int(fd) for fd in args.gate.split(",")) if args.gate else None
    code = _one_child(Path(args.one), Path(args.session), Path(args.result), gate)
    # the verdict is written: end here, so that nothing the submission registered (atexit, threads) runs after it
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    raise SystemExit(main())
