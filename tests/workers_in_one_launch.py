"""Several worker scripts in one torchrun launch, each run as torchrun would start it, but forked from this process.

    torchrun --nnodes 2 --nproc-per-node 1 ... tests/workers_in_one_launch.py NODE OUT LOGS TIMEOUT_S a.py b.py ...

A launch spends seconds before a worker's first line (torchrun, then every rank importing torch and DDP); for a
small worker script that start-up is most of its run. tests/test_ddp_analysis.py checks 05's exercise against
several known-wrong workers: each rank here imports what they need once and forks one child per script, so they
pay one start-up between them. A child has its rank's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR) and
the arguments the exercise's check gives (``OUT/<i>/node<NODE>``), but a MASTER_PORT of its own, where rank 0's
child hosts a new store: a process group made again on the agent's store would find the previous one's keys there.
Script ``i``'s stdout and stderr go to ``LOGS/<i>.node<NODE>.log``, its exit status to ``LOGS/<i>.node<NODE>.rc``
("timeout" when it outlived TIMEOUT_S and was killed).

A job may also be a module with its own arguments, given as JSON (``{"module": "helpers.ddp.by_hand", "argv":
[...]}``): run as ``python -m`` would. On one node of several ranks (``--nproc-per-node 2``), NODE ``-`` names each
rank's files by its rank instead: ``LOGS/<i>.rank<RANK>.log`` and ``.rc``.
"""

from __future__ import annotations

import datetime
import json
import os
import runpy
import signal
import sys
import time
from pathlib import Path

import torch._dynamo  # noqa: F401  (what DDP imports when first used: once here rather than in every child)
import torch.distributed as dist
from torch.utils.data import DataLoader  # noqa: F401

from helpers.ddp.launch import free_port


def _run_child(job: str, argv: list[str], log: Path, port: str) -> None:
    """In the forked child: run the script (or the module a JSON job names, with its own arguments) as ``__main__``
    with its output in ``log``; never return."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.environ["MASTER_PORT"] = port
    os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)  # rank 0's child hosts the store at MASTER_PORT
    module = None
    if job.startswith("{"):
        spec = json.loads(job)
        module, argv = spec["module"], list(spec["argv"])
    sys.argv = [module or job, *argv]
    code = 0
    try:
        if module:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(job, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:
        sys.excepthook(*sys.exc_info())  # as the interpreter reports an uncaught error (torch.distributed's hook)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _wait(pid: int, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return str(os.waitstatus_to_exitcode(status))
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "timeout"


def main(node: str, out: str, logs: str, timeout_s: str, *paths: str) -> None:
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                          timeout=datetime.timedelta(seconds=float(timeout_s)))  # the agent's: to agree on ports
    tag = f"rank{os.environ['RANK']}" if node == "-" else f"node{node}"
    for i, path in enumerate(paths):
        if os.environ["RANK"] == "0":
            store.set(f"workers_in_one_launch/{i}", str(free_port()))
        port = store.get(f"workers_in_one_launch/{i}").decode()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _run_child(path, [str(Path(out) / str(i) / tag)], Path(logs) / f"{i}.{tag}.log", port)
        (Path(logs) / f"{i}.{tag}.rc").write_text(_wait(pid, float(timeout_s)))


if __name__ == "__main__":
    main(*sys.argv[1:])
