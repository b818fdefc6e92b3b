"""05_ddp's exercises: a worker made correct for DDP, the efficiency at a small batch predicted, and data parallelism
written by hand in three steps (every gradient averaged after backward; in buckets; overlapped with backward).

    from helpers.exercises import nb05 as checks
    my_prediction = checks.predict(big_batch_efficiency_pct=90, small_batch_efficiency_pct=60)  # before any launch
    started = checks.measuring("the scaling launches")            # the first scaling cell's first line
    checks.check_prediction(my_prediction, table, started=started, big=256, small=32, on_gpus=True)  # both measured
    checks.check_ddp_worker("runs/05_ddp/my_worker.py")          # runs it as two nodes on 127.0.0.1
    checks.check_predicted_efficiency(predicted_efficiency_pct)
    checks.check_sync("runs/05_ddp/my_sync.py", "each")          # two gloo ranks, against DDP ("bucketed", "overlapped")

Try the exercises before reading the reference solutions below.
"""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path
from typing import Any, Callable

from ..ddp.launch import LaunchResult, LaunchSpec, launch_nodes
from . import predictions
from .common import CheckResult, WrongForm, as_function, as_number, as_path, failed, not_done
from .predictions import Prediction, measuring

__all__ = ["DATASET_SIZE", "WORKER_SOLUTION", "solution_worker", "check_ddp_worker", "predicted_efficiency_pct",
           "check_predicted_efficiency", "SYNC_SOLUTION", "solution_sync", "check_sync", "predict", "measuring",
           "check_prediction"]

# -- exercise 1: a worker that is correct under DDP ------------------------------------------------------

DATASET_SIZE = 64  # the exercise's data set: items 0..63

WORKER_SOLUTION = '''\
"""A DDP worker: a small model on 64 items for 2 epochs, then one checkpoint.  torchrun ... my_worker.py OUT_DIR"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from helpers.ddp import report, shutdown  # report: one line per rank, collected by the notebook


def train(out_dir):
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.arange(64), torch.randn(64, 8), torch.randn(64, 1))  # (item number, input, target)
    sampler = DistributedSampler(data)  # this rank's shard: rank and world size come from the process group
    loader = DataLoader(data, batch_size=8, sampler=sampler)  # the sampler shuffles: no shuffle=True here
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        sampler.set_epoch(epoch)  # a new shuffle each epoch, the same on every rank
        seen = []
        for idx, x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += idx.tolist()
        report({"rank": rank, "epoch": epoch, "seen": seen, "loss": loss.item()})
    if rank == 0:  # the global rank: one writer in the whole job (local rank 0 exists on every node)
        os.makedirs(out_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(out_dir, "checkpoint.pt"))  # without DDP's "module."
    dist.barrier()  # nobody reads the checkpoint before it is written


dist.init_process_group("gloo")  # the CPU backend: this exercise runs on any machine
train(sys.argv[1])
shutdown()  # dist.destroy_process_group(), after freeing what DDP held
'''


#: The worker as [05-28] hands it out, wrong in four ways (tests/test_ddp_analysis.py keeps it equal to the cell).
WORKER_HANDED_OUT = '''\
"""My DDP worker: a small model on 64 items for 2 epochs, then a checkpoint.  torchrun ... my_worker.py OUT_DIR"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from helpers.ddp import report, shutdown  # report: one line per rank, collected by the notebook


def train(out_dir):
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.arange(64), torch.randn(64, 8), torch.randn(64, 1))  # (item number, input, target)
    loader = DataLoader(data, batch_size=8, shuffle=True)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        seen = []
        for idx, x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += idx.tolist()
        report({"rank": rank, "epoch": epoch, "seen": seen, "loss": loss.item()})
    os.makedirs(out_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(out_dir, "checkpoint.pt"))
    dist.barrier()


dist.init_process_group("gloo")  # the CPU backend: this exercise runs on any machine
train(sys.argv[1])
shutdown()  # dist.destroy_process_group(), after freeing what DDP held'''


def solution_worker() -> Path:
    """The reference worker, written to a temporary file (what the notebook runs when yours is not done)."""
    path = Path(tempfile.mkdtemp(prefix="ddp-worker-")) / "reference_worker.py"
    path.write_text(WORKER_SOLUTION)
    return path


def _run_two_nodes(path: Path, out: Path, timeout_s: float):
    """The worker as two "nodes" of one process each on 127.0.0.1: every rank has LOCAL_RANK 0, as on a cluster."""
    specs = [LaunchSpec(nproc_per_node=1, nnodes=2, node_rank=r, script=str(path), args=(str(out / f"node{r}"),),
                        timeout_s=timeout_s) for r in (0, 1)]
    return launch_nodes(specs, on_line=None)


def _worker_problem(results_by_node: list[list[dict]], out: Path) -> str | None:
    """What is wrong with the worker's run, in words; ``None`` when it is right."""
    epochs: dict[tuple[int, int], list[int]] = {}
    rank_of_node: dict[str, int] = {}  # the rendezvous, not the node's number, decides each process's rank
    for node, results in enumerate(results_by_node):
        for r in results:
            if {"rank", "epoch", "seen"} <= r.keys():
                epochs[(int(r["rank"]), int(r["epoch"]))] = [int(i) for i in r["seen"]]
                rank_of_node[f"node{node}"] = int(r["rank"])
    want = {(rank, epoch) for rank in (0, 1) for epoch in (0, 1)}
    if set(epochs) != want:
        return ("the ranks did not report two epochs each: keep the report({'rank': ..., 'epoch': ..., 'seen': ...}) "
                "line at the end of each epoch.")
    everything = set(range(DATASET_SIZE))
    for epoch in (0, 1):
        a, b = epochs[(0, epoch)], epochs[(1, epoch)]
        if len(a) == DATASET_SIZE or len(b) == DATASET_SIZE:
            return (f"in epoch {epoch} a rank saw all {DATASET_SIZE} items: every rank trains on the whole data set, "
                    "so the two ranks do every item twice and no rank's data differs. \"DistributedSampler and "
                    "set_epoch\" [05-05] shows how each rank gets a share of its own.")
        if sorted(a) == sorted(b):
            return (f"in epoch {epoch} both ranks saw the same {len(a)} items: on two nodes both processes have "
                    "LOCAL_RANK 0, so a share picked by LOCAL_RANK is the same share on both. [05-03] says which "
                    "number is unique in the whole job.")
        if set(a) & set(b) or set(a) | set(b) != everything:
            return (f"in epoch {epoch} the ranks' items overlap or miss some: each item must be seen exactly once per "
                    "epoch across the ranks (one DistributedSampler per rank, over the same data set).")
    if epochs[(0, 0)] == epochs[(0, 1)]:
        return ("each rank's second epoch visits its items in the first epoch's order: the sampler shuffles the same "
                "way every epoch unless it is told which epoch it is ([05-05] measured both).")
    saved = sorted(p for p in out.rglob("*") if p.is_file())
    if not saved:
        return "no checkpoint was written: the worker must save one, from one process of the job."
    if len(saved) > 1:
        return (f"{len(saved)} checkpoints were written, one per process. On a cluster's shared file system they are "
                "one file written by several processes at once; one process of the whole job must write it, and "
                "LOCAL_RANK is 0 on every node ([05-03]).")
    if rank_of_node.get(saved[0].parent.name) != 0:
        return "the checkpoint was written by rank 1; the job's first process, rank 0, is the one to write it."
    import torch

    state = torch.load(saved[0], map_location="cpu", weights_only=True)
    if not isinstance(state, dict) or any(str(k).startswith("module.") for k in state):
        return ("the checkpoint's keys start with 'module.': it holds DDP's wrapper, and a plain torch.nn.Linear(8, "
                "1) refuses those keys. Save the state of the model DDP wraps, not of the wrapper.")
    return None


_WORKER_CHECK = "05 · a worker that is correct under DDP"


def _written(path, exercise: str, reference: Callable[[], Path], *, what: str, name: str, first: str,
             kind: str = "file") -> "Path | CheckResult":
    """``path`` as a Path to a file that exists; else the check's result (failed for a path of the wrong form, not
    done for a file not written yet), carrying on with ``reference()``."""
    try:
        path = as_path(path, what=what, form=f"the path of your {kind}, a string or a Path such as RUN_DIR / '{name}'")
        there = path.is_file()
    except WrongForm as e:
        return failed(exercise, reference(), str(e))
    except (OSError, ValueError):  # a name no file can have (too long, say): no such file either
        there = False
    if not there:
        return not_done(exercise, reference(), f"{first}: {path} does not exist yet (run the %%writefile cell above).")
    return path


def check_ddp_worker(path: str | Path, *, timeout_s: float = 120.0) -> CheckResult:
    """Run the worker at ``path`` as two nodes on this machine and check what each rank did.

    Its ``value`` is the worker's path when it passed, else the reference worker's.
    """
    path = _written(path, _WORKER_CHECK, solution_worker, what="The worker's path", name="my_worker.py",
                    first="write the worker first", kind="worker file")
    if isinstance(path, CheckResult):
        return path
    if _unchanged(path):
        return not_done(_WORKER_CHECK, solution_worker(), "The worker is as handed out: find the cause of each of the "
                                                          "four faults [05-27] describes, fix it in [05-28], and run "
                                                          "both cells again.")
    out = Path(tempfile.mkdtemp(prefix="ddp-exercise-"))
    return _verdict(path, _run_two_nodes(path, out, timeout_s), out)


def _unchanged(path: Path) -> bool:
    """The worker as the notebook hands it out (its %%writefile cell, [05-28], unedited)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return _code_lines(text) == _code_lines(WORKER_HANDED_OUT)


def _code_lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _verdict(path: Path, nodes: list[LaunchResult], out: Path) -> CheckResult:
    """The check's verdict on one run of the worker at ``path``: ``nodes``, each node's launch (node 0 first), whose
    worker was given ``out/node<r>`` to write its checkpoint in. Apart from the run, so that a test can judge runs
    of several workers made in one launch."""
    bad = next((n for n in nodes if not n.ok), None)
    if bad is not None:
        return failed(_WORKER_CHECK, solution_worker(), f"the worker failed: {bad.error}")
    problem = _worker_problem([list(n.results) for n in nodes], out)
    if problem:
        return failed(_WORKER_CHECK, solution_worker(), problem[0].upper() + problem[1:])
    return CheckResult(_WORKER_CHECK, "passed", "Each rank saw its own half of the data, a new order each epoch, and "
                                                "one checkpoint was written, by rank 0, loadable without DDP.", path)


# -- exercise 2: predict the efficiency at a small batch ---------------------------------------------------

def predicted_efficiency_pct(compute_ms: float, allreduce_ms: float, hidden_fraction: float) -> float:
    """Reference: each rank computes as one GPU does; what the all-reduce adds is the part backward does not hide."""
    return 100 * compute_ms / (compute_ms + (1 - hidden_fraction) * allreduce_ms)


_WRONG: list[tuple[Callable[[float, float, float], float], str]] = [
    (lambda c, a, h: c / (c + (1 - h) * a),
     "it returns a fraction: return the efficiency in percent (0–100)."),
    (lambda c, a, h: 100 * c / (c + a),
     "it leaves out the hidden share: only the part of the all-reduce that backward does not hide, "
     "(1 − hidden_fraction) × allreduce_ms, adds to the step."),
    (lambda c, a, h: 100 * c / (c + h * a),
     "hidden_fraction is the share that overlaps computation: what adds to the step is the rest, (1 − hidden_fraction)."),
    (lambda c, a, h: 100 * (1 - (1 - h) * a / c),
     "1 − exposed/compute is a first-order guess: the efficiency is one GPU's step over the DDP step, "
     "compute / (compute + exposed)."),
    (lambda c, a, h: 100 * (c + (1 - h) * a) / c,
     "it is upside down: the efficiency is at most 100%, one GPU's step over the longer DDP step."),
]


def check_predicted_efficiency(fn: Callable[[float, float, float], float]) -> CheckResult:
    """Test ``fn(compute_ms, allreduce_ms, hidden_fraction) -> %`` on fresh numbers; name a known mistake."""
    name = "05 · predict the efficiency of two GPUs"
    try:
        fn = as_function(fn, what="Your answer", form="the function itself, predicted_efficiency_pct (no brackets: the "
                                                      "check calls it with fresh numbers), which returns a percentage")
    except WrongForm as e:
        return failed(name, predicted_efficiency_pct, str(e))
    rng = random.Random()
    cases = [(rng.uniform(1, 60), rng.uniform(0.2, 20), rng.uniform(0, 0.95)) for _ in range(6)] + [(10.0, 4.0, 0.0)]
    try:
        returned = [fn(*c) for c in cases]
    except NotImplementedError:
        return not_done(name, predicted_efficiency_pct, "Write predicted_efficiency_pct, then run this "
                                                        "cell again ([05-10] measured what communication costs, "
                                                        "[05-12] how much of it hides).")
    except Exception as e:  # the learner's code: any error is theirs to see
        return failed(name, predicted_efficiency_pct, f"it raised {type(e).__name__}: {e}")
    try:  # a numpy scalar or a 0-d tensor is a number too
        got = [as_number(r, what="What it returns", form="the efficiency in percent, a number such as 87.5")
               for r in returned]
    except WrongForm as e:
        return failed(name, predicted_efficiency_pct, f"it returned {e.given}; return the efficiency in percent, a "
                                                      "number such as 87.5.")
    want = [predicted_efficiency_pct(*c) for c in cases]
    if all(math.isclose(g, w, rel_tol=1e-6) for g, w in zip(got, want)):
        return CheckResult(name, "passed", "Right on fresh numbers. Now compare it with what two GPUs measure.", fn)
    for wrong, why in _WRONG:
        if all(math.isclose(g, wrong(*c), rel_tol=1e-6) for g, c in zip(got, cases)):
            return failed(name, predicted_efficiency_pct, f"Not yet: {why}")
    c, g, w = cases[-1], got[-1], want[-1]
    return failed(name, predicted_efficiency_pct, f"For compute {c[0]} ms, all-reduce {c[1]} ms, nothing hidden it "
                                                  f"gave {g:.4g}; the efficiency there is {w:.4g}%.")


# -- exercise 3: data parallelism by hand ------------------------------------------------------------------

SYNC_SOLUTION = '''\
"""Data parallelism by hand: every gradient averaged over the ranks, one by one; in buckets; overlapped with backward."""
import torch
import torch.distributed as dist


def sync_each(model):
    """After backward: each gradient summed over the ranks, then divided by their number (the mean)."""
    world = dist.get_world_size()
    for p in model.parameters():
        if p.grad is not None:
            dist.all_reduce(p.grad)  # a sum, by default
            p.grad /= world


def _buckets(params, bucket_mb):
    """The gradients in buckets of at most bucket_mb, in the order backward makes them (last layer first)."""
    limit, buckets, current, size = bucket_mb * 2**20, [], [], 0
    for p in reversed(list(params)):
        nbytes = p.numel() * p.element_size()
        if current and size + nbytes > limit:
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets


def sync_bucketed(model, bucket_mb):
    """After backward: each bucket's gradients side by side in one buffer, one all-reduce for the buffer."""
    world = dist.get_world_size()
    for bucket in _buckets([p for p in model.parameters() if p.grad is not None], bucket_mb):
        flat = torch.cat([p.grad.reshape(-1) for p in bucket])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for p in bucket:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))
            offset += p.numel()


class Overlapped:
    """Each bucket's all-reduce starts, asynchronously, as soon as backward has made its last gradient."""

    def __init__(self, model, bucket_mb):
        self.world = dist.get_world_size()
        self.buckets = _buckets([p for p in model.parameters() if p.requires_grad], bucket_mb)
        self.pending = []  # (handle, buffer, bucket) of each all-reduce started in this step
        self.ready = [0] * len(self.buckets)
        for i, bucket in enumerate(self.buckets):
            for p in bucket:
                p.register_post_accumulate_grad_hook(lambda p, i=i: self._ready(i))

    def _ready(self, i):
        self.ready[i] += 1
        if self.ready[i] == len(self.buckets[i]):  # the bucket's last gradient: send it, do not wait
            bucket = self.buckets[i]
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            self.pending.append((dist.all_reduce(flat, async_op=True), flat, bucket))

    def finish(self):
        """After backward: wait for each bucket, write its mean back into the gradients."""
        for handle, flat, bucket in self.pending:
            handle.wait()
            flat /= self.world
            offset = 0
            for p in bucket:
                p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))
                offset += p.numel()
        self.pending, self.ready = [], [0] * len(self.buckets)
'''


def solution_sync() -> Path:
    """The reference file (sync_each, sync_bucketed, Overlapped), written to a temporary file."""
    path = Path(tempfile.mkdtemp(prefix="ddp-sync-")) / "reference_sync.py"
    path.write_text(SYNC_SOLUTION)
    return path


_SYNC_NAMES = {"each": "05 · every gradient averaged by hand", "bucketed": "05 · gradients averaged in buckets",
               "overlapped": "05 · buckets averaged during backward"}
_SYNC_PASSED = {
    "each": "On both ranks every gradient matched DDP's after each step, and the weights after the optimizer's.",
    "bucketed": "It matched DDP's gradients and weights, with {calls} all-reduces a step for {params} gradients.",
    "overlapped": "It matched DDP's gradients and weights, and all {calls} all-reduces of a step started during "
                  "backward, asynchronously.",
}


#: What each step of the sync exercise defines in the learner's file: the functions whose bodies it writes.
_SYNC_DEFINES = {"each": ("sync_each",), "bucketed": ("sync_bucketed",), "overlapped": ("__init__", "finish")}


def _still_handed_out(path: Path, step: str) -> bool:
    """Is ``step`` still as the notebook hands it out: each function it asks for (for ``overlapped``, the methods of
    ``Overlapped``) only raising NotImplementedError, under its docstring? A file that does not parse, or that
    defines them otherwise, is run (the ranks report what is wrong with it)."""
    import ast

    try:
        tree = ast.parse(path.read_text())
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return False
    scope = tree.body
    if step == "overlapped":
        cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Overlapped"), None)
        if cls is None:
            return False
        scope = cls.body
    found = {n.name: n for n in scope if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    wanted = _SYNC_DEFINES[step]
    if not all(name in found for name in wanted):
        return False

    def only_raises(fn) -> bool:
        body = fn.body[1:] if (fn.body and isinstance(fn.body[0], ast.Expr)
                               and isinstance(fn.body[0].value, ast.Constant)
                               and isinstance(fn.body[0].value.value, str)) else fn.body
        if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
            return False
        exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"

    return all(only_raises(found[name]) for name in wanted)


def check_sync(path: str | Path, step: str, *, bucket_mb: float = 1.0, timeout_s: float = 120.0) -> CheckResult:
    """Run ``step`` (``"each"``, ``"bucketed"`` or ``"overlapped"``) of the file at ``path`` on two gloo ranks on this
    machine's CPU, against PyTorch's DDP (:mod:`helpers.ddp.by_hand`): the same gradients after each step, the same
    weights after the optimizer's, and the structure the step asks for (buckets no larger than ``bucket_mb``, fewer
    all-reduces than gradients; all-reduces started asynchronously during backward).

    Its ``value`` is your file's path when it passed, else the reference file's."""
    from ..ddp.by_hand import STEPS, run

    if step not in STEPS:
        raise ValueError(f"step={step!r}: one of {', '.join(STEPS)}.")
    name = _SYNC_NAMES[step]
    path = _written(path, name, solution_sync, what="Your file's path", name="my_sync.py", first="write it first")
    if isinstance(path, CheckResult):
        return path
    if _still_handed_out(path, step):  # known without starting two ranks (about 14 s each on a small host)
        return not_done(name, solution_sync(), f"Write {STEPS[step]} in your file, then run this cell again.")
    return _sync_verdict(path, step, run(path, step, bucket_mb=bucket_mb, timeout_s=timeout_s))


def _sync_verdict(path: Path, step: str, res) -> CheckResult:
    """What the two ranks' launch (``res``, a :class:`~helpers.ddp.launch.LaunchResult`) says of ``step`` of the file
    at ``path``: passed, not done, or failed with the first rank's reason."""
    from ..ddp.by_hand import STEPS

    name = _SYNC_NAMES[step]
    ranks = sorted(res.results, key=lambda r: r.get("rank", 0))
    if len(ranks) < 2:
        why = res.error or "the ranks reported nothing"
        if res.timed_out:
            why = ("the ranks did not finish within the time limit: one rank waited in an all-reduce the other never "
                   "made (every rank must call the same collectives, in the same order, with the same sizes)")
        return failed(name, solution_sync(), f"Not yet: {why}.")
    if any(r.get("not_done") for r in ranks):
        return not_done(name, solution_sync(), f"Write {STEPS[step]} in your file, then run this cell again.")
    bad = next((r for r in ranks if not r.get("ok")), None)
    if bad is not None:
        return failed(name, solution_sync(), f"Not yet, on rank {bad.get('rank')}: {bad.get('why')}.")
    calls = ranks[0].get("calls") or [0]
    from ..models import ReferenceCNN

    params = len(list(ReferenceCNN(32).parameters()))
    return CheckResult(name, "passed", _SYNC_PASSED[step].format(calls=calls[-1], params=params), path)


# -- the prediction, written before the first launch ------------------------------------------------------

def predict(*, big_batch_efficiency_pct: Any = None, small_batch_efficiency_pct: Any = None) -> Prediction:
    """Your prediction of two ranks' efficiency at the large and the small batch per rank, made before anything is
    launched: ``checks.predict(big_batch_efficiency_pct=90, small_batch_efficiency_pct=60)``."""
    return Prediction({"big_batch_efficiency_pct": big_batch_efficiency_pct,
                       "small_batch_efficiency_pct": small_batch_efficiency_pct})


def _efficiency(table, batch: int) -> float | None:
    """Two ranks' efficiency % at ``batch`` per rank from a ``scaling.scaling_table``; None where it has no such row."""
    try:
        return float(table.loc[(batch, 2), "efficiency %"])
    except (KeyError, AttributeError, TypeError, ValueError):
        return None


def check_prediction(prediction: Any, table, *, started: predictions.MeasurementStart, big: int, small: int,
                     on_gpus: bool) -> CheckResult:
    """Your prediction beside two ranks' measured efficiency at ``big`` and ``small`` images per rank (``table``: the
    scaling table holding both; None where this node measured no scaling)."""
    name = "05 · your prediction"
    ranks = "two GPUs" if on_gpus else "two ranks"
    questions = [predictions.Question("big_batch_efficiency_pct", f"{ranks}' efficiency at {big} images each", "%",
                                      example=90),
                 predictions.Question("small_batch_efficiency_pct", f"{ranks}' efficiency at {small} images each", "%",
                                      example=60)]
    measured = {"big_batch_efficiency_pct": _efficiency(table, big),
                "small_batch_efficiency_pct": _efficiency(table, small)}
    at_big, at_small = measured["big_batch_efficiency_pct"], measured["small_batch_efficiency_pct"]
    if not on_gpus:  # gloo ranks: their timings say nothing of how GPUs share an all-reduce with backward
        note = "gloo ranks on a CPU share its cores: these are the mechanics, not how GPUs scale."
    elif at_big is not None and at_small is not None and at_small < at_big:
        note = (f"At {small} images a GPU computes {big // small}× less per step but all-reduces the same gradients: "
                "less of the all-reduce hides behind backward, and the efficiency falls.")
    else:
        note = ""
    return predictions.check_prediction(name, prediction, measured, started=started, cell="05-pred-2",
                                        questions=questions, note=note,
                                        not_measured="scaling needs two GPUs of one node, or gloo ranks on a CPU")
