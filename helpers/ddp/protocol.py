"""What the worker and the notebook agree on: the ``RESULT`` lines, progress lines, and a training :class:`Variant`.

    from helpers.ddp import report, shutdown
    report({"rank": rank, "epoch": epoch, "seen": seen})   # in a worker: one line that launch() collects
    shutdown()                                             # the worker's last line: the process group closed

Kept apart from the worker module so that ``python -m helpers.ddp.worker`` does not import that module
twice (once through the package, once as ``__main__``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys

__all__ = ["exit_now", "RESULT_PREFIX", "SYNC_MODES", "report", "log", "shutdown", "Variant"]

RESULT_PREFIX = "RESULT "  # a worker prints one line "RESULT {json}" per rank

SYNC_MODES = ("every", "last", "none")


def report(obj: dict) -> None:
    """Print one ``RESULT {json}`` line, which :func:`helpers.ddp.launch.launch` collects into ``.results``.

    Written with one system call: the ranks share one pipe, and a write of under 4 KiB to a pipe is never
    interleaved with another process's (``print`` writes the newline apart).
    """
    line = (RESULT_PREFIX + json.dumps(obj) + "\n").encode()
    if len(line) > 4000:
        raise ValueError(f"a rank's result is {len(line)} bytes; keep it under 4000 so it reaches the notebook whole.")
    _write_whole(line)


def log(rank: int, world: int, text: str) -> None:
    """A progress line, tagged with the rank, written whole (see :func:`report`)."""
    _write_whole(f"[rank {rank}/{world}] {text}\n".encode())


def _write_whole(line: bytes) -> None:
    sys.stdout.flush()
    os.write(sys.stdout.fileno(), line)


def exit_now(code: int) -> "typing.NoReturn":  # noqa: F821
    """Leave a worker process at once, its results out: flush what it printed, then ``os._exit(code)``.

    Once a rank has reported and destroyed its process group, the interpreter's teardown (torch's modules, its
    threads) is all that is left, and it took 2 s of a 12 s two-rank launch on a 2-core CPU (measured 2026-11-27:
    torchrun exited 3.0 s after the ranks' last line, 1.2 s with this). Only for a ``__main__`` that returned:
    an exception still ends the process the usual way, with its traceback and a failed status.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def shutdown() -> None:
    """End a worker's process group: ``dist.destroy_process_group()``, after freeing what DDP held.

    A DDP model's reference cycles keep the process group alive; a gloo group destroyed while still
    held can abort the process at exit ("terminate called without an active exception"). Collecting
    them first lets the group close cleanly.
    """
    import gc

    import torch.distributed as dist

    gc.collect()
    dist.destroy_process_group()


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way to run the training step, timed apart from the others in the same launch.

    ``sync``: ``"every"`` all-reduces after every micro-batch's backward (DDP's default), ``"last"`` only
    after the last one of an accumulated step (``no_sync`` on the others), ``"none"`` never (``no_sync``
    throughout: the compute alone, to subtract). ``ddp=None`` wraps in DDP when there is more than one rank.
    """

    label: str = "default"
    batch: int = 32
    accumulate: int = 1
    sync: str = "every"
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    ddp: bool | None = None

    def __post_init__(self) -> None:
        if self.sync not in SYNC_MODES:
            raise ValueError(f"sync={self.sync!r}: use one of {', '.join(SYNC_MODES)}.")
        if self.batch < 1 or self.accumulate < 1:
            raise ValueError(f"batch={self.batch} and accumulate={self.accumulate} must be at least 1.")
