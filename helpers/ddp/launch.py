"""Start ``torchrun`` from a notebook cell, stream what every rank prints, and never leave a process behind.

    spec = LaunchSpec(nproc_per_node=2, args=["--steps", "20"])      # the worker: helpers.ddp.worker
    res = launch(spec)                 # lines appear as they come; res.results: one dict per rank
    res.ok, res.results, res.error     # error: the failing rank's own message, when one failed

    # two "nodes" on one machine (the same commands run on two hosts of a cluster):
    a, b = launch_nodes([LaunchSpec(nnodes=2, node_rank=r, master_port=port) for r in (0, 1)])

Processes started by DDP cannot run a function defined in a notebook: the worker is a module,
and ``torchrun`` starts one copy per rank. The launch runs in its own process group with a time
limit: a rank that crashes ends the launch with that rank's error, a rank that hangs is killed
when the limit passes, and either way every process of the launch is gone when this returns.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

from .protocol import RESULT_PREFIX

__all__ = ["RESULT_PREFIX", "LaunchSpec", "LaunchResult", "free_port", "port_in_use", "torchrun_command", "launch",
           "launch_nodes", "parse_results", "leftover_processes"]

_ROOT = Path(__file__).resolve().parents[2]
# parsed rather than shown; and the profiler library's start/stop markers, which say nothing to a reader
_NOT_SHOWN = (RESULT_PREFIX, "USDT:")


def free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


@dataclasses.dataclass(frozen=True)
class LaunchSpec:
    """One ``torchrun`` on one node. ``master_port=None`` picks a free port (single node).

    The worker is ``module`` (``python -m``), or the file ``script`` when one is given.
    """

    nproc_per_node: int = 2
    nnodes: int = 1
    node_rank: int = 0  # which node of the launch this is; the rendezvous, not this, assigns the ranks
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    rdzv_id: str | None = None
    module: str = "helpers.ddp.worker"
    script: str | None = None  # a worker script's path, run instead of ``module``
    args: tuple[str, ...] = ()
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if self.nproc_per_node < 1 or self.nnodes < 1 or not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"LaunchSpec needs nproc_per_node ≥ 1, nnodes ≥ 1 and 0 ≤ node_rank < nnodes (got "
                             f"{self.nproc_per_node}, {self.nnodes}, {self.node_rank}).")


def torchrun_command(spec: LaunchSpec, *, port: int) -> list[str]:
    """The command line: ``python -m torch.distributed.run`` (what ``torchrun`` runs) with a c10d rendezvous."""
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(spec.nnodes),
            "--nproc-per-node", str(spec.nproc_per_node),  # no --node-rank: the c10d rendezvous assigns the ranks
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{spec.master_addr}:{port}",
            "--rdzv-id", spec.rdzv_id or "gpu-perf-lab", "--max-restarts", "0",
            *([str(spec.script)] if spec.script else ["-m", spec.module]), *spec.args]


@dataclasses.dataclass(frozen=True)
class LaunchResult:
    command: tuple[str, ...]
    returncode: int | None
    timed_out: bool
    wall_s: float
    lines: tuple[str, ...] = dataclasses.field(repr=False)
    results: tuple[dict, ...] = ()

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def error(self) -> str | None:
        """What went wrong, in the failing rank's own words (its traceback's last line), or the time-out."""
        if self.ok:
            return None
        if self.timed_out:
            return "the launch did not finish within its time limit and was stopped (every process of it killed)"
        errors = [line for line in self.lines if ("Error:" in line or "Exception:" in line) and "ChildFailed" not in line
                  and "torch.distributed.elastic" not in line]
        if errors:
            return errors[0].strip()
        said = [line for line in self.lines if line.strip() and not line.startswith(_NOT_SHOWN)][-3:]
        return f"torchrun exited with {self.returncode}" + (f"; its last lines: {' | '.join(said)}" if said else "")


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue
    # the leader may be gone while children linger in its group: make sure
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def launch(spec: LaunchSpec, *, on_line: Callable[[str], None] | None = print, env: dict | None = None) -> LaunchResult:
    """Run ``torchrun`` for ``spec``; stream its lines to ``on_line``; parse each rank's ``RESULT`` line."""
    if spec.master_port is not None and spec.node_rank == 0 and port_in_use(spec.master_port, "127.0.0.1"):
        raise OSError(f"port {spec.master_port} is in use: the rendezvous cannot listen there. Pick another "
                      "master_port, or leave master_port=None for a free one.")
    port = spec.master_port or free_port()
    cmd = torchrun_command(spec, port=port)
    run_env = dict(os.environ if env is None else env)
    run_env["PYTHONPATH"] = str(_ROOT) + (os.pathsep + run_env["PYTHONPATH"] if run_env.get("PYTHONPATH") else "")
    run_env.setdefault("PYTHONUNBUFFERED", "1")
    run_env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default too; said here so it is not a warning
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            env=run_env, start_new_session=True)  # its own process group: killed as one
    lines: list[str] = []
    q: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [q.put(line) for line in proc.stdout] + [q.put(None)], daemon=True)
    reader.start()
    timed_out = False
    try:
        while True:
            remaining = spec.timeout_s - (time.perf_counter() - t0)
            if remaining <= 0:
                timed_out = True
                break
            try:
                line = q.get(timeout=min(remaining, 0.5))
            except queue.Empty:
                continue
            if line is None:
                break
            line = line.rstrip("\n")
            lines.append(line)
            if on_line is not None and not line.startswith(_NOT_SHOWN):
                on_line(line)
    finally:
        if timed_out or proc.poll() is None:
            _kill_group(proc)
        proc.wait()
        _kill_group(proc)  # anything left in the group (a rank that outlived torchrun)
    return LaunchResult(tuple(cmd), proc.returncode, timed_out, time.perf_counter() - t0, tuple(lines),
                        parse_results(lines))


def parse_results(lines: Iterable[str]) -> tuple[dict, ...]:
    """The ``RESULT`` lines among ``lines`` (what :func:`helpers.ddp.report` printed), parsed, in rank order."""
    results = (json.loads(line[len(RESULT_PREFIX):]) for line in lines if line.startswith(RESULT_PREFIX))
    return tuple(sorted(results, key=lambda r: r.get("rank", 0)))


def launch_nodes(specs: list[LaunchSpec], *, on_line: Callable[[str], None] | None = print) -> list[LaunchResult]:
    """Several ``torchrun``s at once, as the nodes of one job would run them (on one machine here: loopback).

    They share a rendezvous: give them one ``master_port`` (node 0 listens there) and one ``rdzv_id``.
    """
    rdzv = specs[0].rdzv_id or f"gpu-perf-lab-{uuid.uuid4().hex[:8]}"
    port = specs[0].master_port or free_port()
    specs = [dataclasses.replace(s, master_port=port, rdzv_id=rdzv) for s in specs]
    out: list[LaunchResult | None] = [None] * len(specs)

    def run(i: int) -> None:
        prefix = f"[node {specs[i].node_rank}] "
        out[i] = launch(specs[i], on_line=None if on_line is None else (lambda line: on_line(prefix + line)))

    # node 0 first: it checks the port and hosts the rendezvous; the others connect to it
    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(specs))]
    for t in threads:
        t.start()
        time.sleep(0.2)
    for t in threads:
        t.join()
    return out  # type: ignore[return-value]


def leftover_processes(pattern: str = "helpers.ddp.worker") -> list[str]:
    """Processes of this user whose command line holds ``pattern`` (after a launch: none should be left)."""
    import psutil

    me, out = os.getpid(), []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if proc.info["pid"] != me and pattern in cmd:
            out.append(f"{proc.info['pid']}: {cmd[:120]}")
    return out
