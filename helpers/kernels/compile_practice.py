"""torch.compile as a practitioner meets it: graph breaks, recompiles when shapes change, and the optimizer compiled.

    gb = graph_breaks(model, x)          # GraphBreaks: how many graphs, and each break's reason and line of code
    gb.table()                           # DataFrame: one row per break
    break_gain(ScaleLoggedMLP, Fixed, x)     # BreakGain: both compiled, same weights, timed side by side
    runs = [compiles_over(mlp, batches, variant=v) for v in VARIANTS]   # how often each way of compiling compiled
    compiles_table(runs)                 # DataFrame: compiles, recompiles, their seconds, and the time per call
    optimizer_variants(model, x, y)      # DataFrame: the optimizer's step eager, fused and compiled
    step_variants(model, x, y)           # DataFrame: whole training steps, the model and its optimizer compiled or not

A **graph break** is a line Dynamo cannot put in a graph (``.item()``, ``print`` of a tensor, a branch on a
tensor's value): the function runs as two compiled graphs with Python between them, and at ``.item()`` the host
waits for the GPU. ``torch._dynamo.explain`` finds each one, with the line that caused it (``TORCH_LOGS=graph_breaks``
prints the same while a program runs).

A **recompile** happens when a call's inputs fail the guards of every graph compiled so far: a new batch size,
say. By default Dynamo compiles the first shape as it is, and on the first change compiles again with that size
left symbolic (``dynamic``); ``dynamic=False`` compiles once per size instead; ``torch._dynamo.mark_dynamic``
on the first input compiles the symbolic graph at once; padding every batch to one size needs one graph and keeps
its kernels specialised. ``TORCH_LOGS=recompiles`` prints why each recompile happened, as the table here does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import statistics
import time
from typing import Callable, Iterator, Sequence

import torch
from torch import nn

from .. import bench, models, tables

__all__ = ["ScaleLoggedMLP", "quiet_torch_logs", "counting_backend", "GraphBreak", "GraphBreaks", "graph_breaks", "BreakGain", "break_gain", "VARIANTS",
           "CompileCount", "compiles_over", "compiles_table", "optimizer_variants", "step_variants"]


class ScaleLoggedMLP(nn.Module):
    """The small MLP (``models.small_mlp``) with a check a practitioner adds for a dashboard: the activations' mean
    size halfway through, kept in ``self.scale`` on every call. Written with ``.item()`` it breaks the compiled
    graph in two and makes the host wait for the GPU at that line on every call.

        m = ScaleLoggedMLP().cuda(); m(x); m.scale   # 0.41: the last call's, a Python float
    """

    def __init__(self, width: int = 256, depth: int = 8) -> None:
        super().__init__()
        half = max(1, depth // 2)
        self.front = models.small_mlp(width, half)
        self.back = models.small_mlp(width, max(1, depth - half))
        self.scale: float | torch.Tensor | None = None  # the last call's; read it with float(m.scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.front(x)
        self.scale = h.detach().abs().mean().item()  # a Python float now: a graph break and a sync
        return self.back(h)


@contextlib.contextmanager
def quiet_torch_logs() -> Iterator[None]:
    """Keep Dynamo's own warnings ("Graph break from `Tensor.item()`…", a profiler range it ignores) off the learner's
    screen while this module finds and counts those things itself: torch's loggers at ERROR, then as they were."""
    loggers = [logging.getLogger(name) for name, obj in list(logging.root.manager.loggerDict.items())
               if (name == "torch" or name.startswith("torch.")) and isinstance(obj, logging.Logger)]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        if lg.level == logging.NOTSET and lg.name != "torch":
            continue  # a child takes its parent's level
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


# -- graph breaks ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class GraphBreak:
    """One graph break: Dynamo's reason (its first line), and where in the user's code it happened."""

    reason: str
    where: str  # "file.py:42 in forward"
    line: str  # that line of code


@dataclasses.dataclass(frozen=True)
class GraphBreaks:
    """What ``torch._dynamo.explain`` found in one call: the graphs it made, and the breaks between them."""

    graphs: int
    breaks: tuple[GraphBreak, ...]
    ops: int  # ops put into graphs

    def __str__(self) -> str:
        if not self.breaks:
            return f"{self.graphs} graph{'s' * (self.graphs != 1)}, no graph break: the whole call is compiled"
        return (f"{self.graphs} graphs, {len(self.breaks)} graph break{'s' * (len(self.breaks) > 1)}: "
                + "; ".join(f"{b.where}: {b.reason}" for b in self.breaks))

    def table(self) -> "pandas.DataFrame":  # noqa: F821
        import pandas as pd

        df = pd.DataFrame([dataclasses.asdict(b) for b in self.breaks], columns=["reason", "where", "line"])
        df.attrs["formats"] = {"reason": "text", "where": "text", "line": "text"}
        return df


def _short_reason(reason: str) -> str:
    first = next((line.strip() for line in str(reason).splitlines() if line.strip()), str(reason))
    return first[:160]


def graph_breaks(fn: Callable, *args, **kwargs) -> GraphBreaks:
    """Run ``fn(*args, **kwargs)`` once under ``torch._dynamo.explain`` (Dynamo only: nothing is code-generated) and
    say how many graphs it made and where each break came from. Note: explain resets Dynamo, so functions compiled
    earlier in the process compile again on their next call (from the compile cache on disk, mostly)."""
    with quiet_torch_logs():
        out = torch._dynamo.explain(fn)(*args, **kwargs)
    breaks = []
    for r in out.break_reasons:
        frame = r.user_stack[-1] if r.user_stack else None
        where = f"{frame.filename.rsplit('/', 1)[-1]}:{frame.lineno} in {frame.name}" if frame else "?"
        breaks.append(GraphBreak(_short_reason(r.reason), where, (frame.line or "").strip() if frame else ""))
    # explain counts graphs; a break with no graph after it (the call's last line) still counts as a break
    return GraphBreaks(out.graph_count, tuple(breaks), out.op_count)


@dataclasses.dataclass(frozen=True)
class BreakGain:
    """The same model compiled with a graph break and without, timed in alternating rounds."""

    broken_ms: float  # median time per call with the break
    fixed_ms: float
    low: float  # the lowest round's ratio broken / fixed
    high: float
    graphs: tuple[int, int]  # graphs each compiled into

    @property
    def speedup(self) -> float:
        return self.broken_ms / self.fixed_ms

    def __str__(self) -> str:
        return (f"compiled with the graph break ({self.graphs[0]} graphs): {self.broken_ms * 1e3:.0f} µs per call; "
                f"without it ({self.graphs[1]} graph{'s' * (self.graphs[1] != 1)}): {self.fixed_ms * 1e3:.0f} µs: "
                f"{self.speedup:.2f}× (rounds ranged {self.low:.2f}× to {self.high:.2f}×)")


def break_gain(broken_cls: type[nn.Module], fixed_cls: type[nn.Module], x: torch.Tensor, *, rounds: int = 9,
               calls: int = 50) -> BreakGain:
    """Build both classes with one set of weights, compile each (Inductor, default mode), and time their forward
    on ``x`` in alternating rounds of ``calls`` calls (inference). A break's cost is the host waiting at the break
    (the GPU idles while Python runs the next graph's launches) plus the fusion lost across it."""
    dev = x.device
    torch.manual_seed(0)
    broken = broken_cls().to(dev)
    fixed = fixed_cls().to(dev)
    fixed.load_state_dict(broken.state_dict())
    graphs = (graph_breaks(broken, x).graphs, graph_breaks(fixed, x).graphs)
    fns = [torch.compile(broken), torch.compile(fixed)]
    per: list[list[float]] = [[], []]
    with torch.no_grad():
        with quiet_torch_logs():  # the break is the point here: Dynamo need not warn of it
            for f in fns:
                for _ in range(3):
                    f(x)
        for r in range(rounds):
            for i in ((0, 1) if r % 2 == 0 else (1, 0)):
                _sync(dev)
                t0 = time.perf_counter()
                for _ in range(calls):
                    fns[i](x)
                _sync(dev)
                per[i].append((time.perf_counter() - t0) * 1e3 / calls)
    ratios = [b / f for b, f in zip(*per)]
    return BreakGain(statistics.median(per[0]), statistics.median(per[1]), min(ratios), max(ratios), graphs)


# -- recompiles --------------------------------------------------------------------------------------------
#: The ways of compiling a function that sees batches of several sizes, as ``compiles_over`` names them.
VARIANTS = {
    "dynamic=False": "compiled for each size it sees",
    "default": "the first size as it is, then one graph with the size symbolic",
    "mark_dynamic": "torch._dynamo.mark_dynamic(x, 0) on the first batch: one symbolic graph from the start",
    "padded": "every batch padded to the largest size: one graph, its kernels specialised to that size",
}


@dataclasses.dataclass(frozen=True)
class CompileCount:
    """A function compiled one way and called over batches of changing sizes."""

    variant: str
    compiles: int  # graphs compiled over the calls (the first compile included)
    reasons: tuple[str, ...]  # why each recompile happened, as TORCH_LOGS=recompiles says it
    compile_s: float  # wall time of the calls that compiled, less a steady call's time each
    call_ms: float  # median time of a call once every graph it needs is compiled (over all the sizes)
    sizes: tuple[int, ...]

    @property
    def recompiles(self) -> int:
        return max(0, self.compiles - 1)

    def as_row(self) -> dict:
        return {"variant": self.variant, "how": VARIANTS[self.variant], "compiles": self.compiles,
                "recompiles": self.recompiles, "compile s": self.compile_s, "call ms": self.call_ms,
                "why it recompiled": "; ".join(dict.fromkeys(self.reasons)) or None}


class _Recompiles(logging.Handler):
    """Collects Dynamo's recompile messages (what ``TORCH_LOGS=recompiles`` prints)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "triggered by the following guard failure" not in text:
            return
        lines = [line.strip(" -") for line in text.splitlines() if line.strip().startswith("-")]
        self.reasons.append(_guard_words(lines[0]) if lines else "a guard failed")


def _guard_words(line: str) -> str:
    """``"0/0: tensor 'x' size mismatch at index 0. expected 64, actual 48"`` → the part after the guard's id."""
    return line.split(": ", 1)[-1][:120] if ": " in line else line[:120]


@contextlib.contextmanager
def _recompile_log() -> Iterator[_Recompiles]:
    """Dynamo's recompile messages, collected instead of printed (``TORCH_LOGS=recompiles`` would print them)."""
    from torch._dynamo import guards

    handler = _Recompiles()
    log = getattr(guards, "recompiles_log", None) or logging.getLogger("torch._dynamo.guards.__recompiles")
    torch._logging.set_logs(recompiles=True)
    log.propagate = False  # to this handler only: torch's own would print each message under the cell
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        torch._logging.set_logs()  # torch's defaults again: a TORCH_LOGS setting of this process is off from here


def counting_backend(backend: str | Callable, counter: list[int]) -> Callable:
    """``backend`` (a name, or a compiler function) that adds one to ``counter[0]`` for every graph it compiles."""
    inner = torch._dynamo.lookup_backend(backend) if isinstance(backend, str) else backend

    def compile_one(gm, example_inputs):
        counter[0] += 1
        return inner(gm, example_inputs)

    return compile_one


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def compiles_over(model: nn.Module, batches: Sequence[torch.Tensor], *, variant: str, backend: str = "inductor",
                  repeats: int = 5) -> CompileCount:
    """Compile ``model`` the way ``variant`` says (:data:`VARIANTS`) and call it on each of ``batches`` (inference,
    sizes changing along dimension 0): count the graphs compiled, say why each recompile happened, and time a
    call once everything is compiled (``repeats`` passes over all the batches, median per call).

    ``backend``: Inductor generates code (on a CPU, C++ compiled for each graph: slow on two cores); ``"eager"``
    runs Dynamo alone, which compiles the same number of graphs, for the same reasons, in a fraction of the time.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)} (got {variant!r}).")
    if not batches:
        raise ValueError("compiles_over needs at least one batch.")
    torch._dynamo.reset()  # no graph of an earlier variant may serve this one
    dev = batches[0].device
    largest = max(b.shape[0] for b in batches)
    counter = [0]
    compiled = torch.compile(model, backend=counting_backend(backend, counter), dynamic=False if variant == "dynamic=False"
                             else None)

    def call(x: torch.Tensor) -> torch.Tensor:
        if variant == "padded" and x.shape[0] < largest:
            pad = x.new_zeros((largest - x.shape[0], *x.shape[1:]))
            return compiled(torch.cat([x, pad]))[: x.shape[0]]
        return compiled(x)

    first = batches[0]
    if variant == "mark_dynamic":
        first = first.clone()
        torch._dynamo.mark_dynamic(first, 0)
    compile_s = 0.0
    with torch.no_grad(), _recompile_log() as log:
        for i, x in enumerate([first, *batches[1:]]):
            before = counter[0]
            _sync(dev)
            t0 = time.perf_counter()
            call(x)
            _sync(dev)
            if counter[0] > before:
                compile_s += time.perf_counter() - t0
        times = []
        for _ in range(repeats):
            for x in batches:
                m = bench.time_it(lambda: call(x), warmup=1, repeats=3, device=dev)
                times.append(m.median_ms)
    return CompileCount(variant, counter[0], tuple(log.reasons), compile_s, statistics.median(times),
                        tuple(int(b.shape[0]) for b in batches))


def compiles_table(runs: list[CompileCount]) -> "pandas.DataFrame":  # noqa: F821
    """One row per variant: graphs compiled, recompiles and why, the seconds they took, the time per call."""
    import pandas as pd

    df = pd.DataFrame([r.as_row() for r in runs])
    df.attrs["formats"] = {"how": "text", "why it recompiled": "text", "compiles": "whole", "recompiles": "whole"}
    df.attrs["missing"] = {"why it recompiled": "it never recompiled"}
    return df


# -- the optimizer -----------------------------------------------------------------------------------------
def _opt_kernels(step: Callable[[], None], dev: torch.device) -> int | None:
    """GPU kernels one call of ``step`` launches (None on a CPU)."""
    if dev.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize(dev)
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        step()
        torch.cuda.synchronize(dev)
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def optimizer_variants(model_fn: Callable[[], nn.Module], x: torch.Tensor, y: torch.Tensor, *, lr: float = 1e-3,
                       repeats: int = 20, backend: str = "inductor") -> "pandas.DataFrame":  # noqa: F821
    """Adam's step on the same model and gradients, four ways: a loop over the tensors (``foreach=False``), one
    kernel per op over all tensors (``foreach``, PyTorch's default on a GPU), ``fused=True`` (one CUDA kernel), and
    ``torch.compile`` of the step (Inductor fuses the update into a few kernels). Each row: the optimizer step's
    time alone, median of ``repeats``, and the kernels it launches (on a GPU). ``model_fn`` makes a fresh model."""
    import pandas as pd

    dev = x.device
    rows = []
    variants: list[tuple[str, dict, bool]] = [("for-loop (foreach=False)", {"foreach": False}, False),
                                              ("foreach (the default on a GPU)", {"foreach": True}, False)]
    if dev.type == "cuda":
        variants.append(("fused=True", {"fused": True}, False))
    variants.append(("torch.compile(opt.step)", {"foreach": True}, True))
    for label, kwargs, compiled in variants:
        torch.manual_seed(0)
        model = model_fn().to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=lr, **kwargs)
        nn.functional.cross_entropy(model(x), y).backward()  # gradients to step with, kept for every timed step
        step = torch.compile(opt.step, backend=backend) if compiled else opt.step
        first_s, m, kernels = _first_then_timed(step, dev, calls=1, repeats=repeats)
        rows.append({"optimizer step": label, "first call s": first_s, "step ms": m.median_ms,
                     "spread %": m.spread_pct, "kernels": kernels})
    return _against_first(pd.DataFrame(rows), "optimizer step", "× vs for-loop")


#: The whole training steps :func:`step_variants` times: (label, the model compiled, Adam's keywords, its step compiled)
STEP_VARIANTS: tuple[tuple[str, bool, dict, bool], ...] = (
    ("eager model, foreach Adam", False, {"foreach": True}, False),
    ("compiled model, foreach Adam", True, {"foreach": True}, False),
    ("compiled model, fused Adam", True, {"fused": True}, False),
    ("compiled model, compiled Adam step", True, {"foreach": True}, True),
)


def step_variants(model_fn: Callable[[], nn.Module], x: torch.Tensor, y: torch.Tensor, *, lr: float = 1e-3,
                  repeats: int = 20, backend: str = "inductor") -> "pandas.DataFrame":  # noqa: F821
    """Whole training steps (forward, backward, Adam's step, zeroing the gradients), the optimizer compiled *with*
    the model, against the model alone compiled: each row's step time (median of ``repeats``, after the first calls
    compiled), its first call, and the kernels one step launches on a GPU. ``fused=True`` needs a GPU: on a CPU that
    row is left out. The model's forward and backward compile as one graph pair; the optimizer's step compiles
    apart (``torch.compile(opt.step)``, as PyTorch's own recipe does it): ``loss.backward()`` is the boundary
    between the two, which Dynamo does not trace through.

        df = step_variants(models.small_mlp, x, y)   # "× vs eager": each step's speed over the eager step's
    """
    import pandas as pd

    dev = x.device
    rows = []
    for label, compile_model, kwargs, compile_step in STEP_VARIANTS:
        if kwargs.get("fused") and dev.type != "cuda":
            continue
        torch.manual_seed(0)
        model = model_fn().to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=lr, **kwargs)
        fwd = torch.compile(model, backend=backend) if compile_model else model
        opt_step = torch.compile(opt.step, backend=backend) if compile_step else opt.step

        def step(fwd=fwd, opt=opt, opt_step=opt_step) -> None:
            nn.functional.cross_entropy(fwd(x), y).backward()
            opt_step()
            opt.zero_grad(set_to_none=True)

        # two first calls: the second compiles too, for Adam's state exists only after the first
        first_s, m, kernels = _first_then_timed(step, dev, calls=2, repeats=repeats)
        rows.append({"training step": label, "first two calls s": first_s, "step ms": m.median_ms,
                     "spread %": m.spread_pct, "kernels": kernels})
    return _against_first(pd.DataFrame(rows), "training step", "× vs eager")


def _first_then_timed(step: Callable[[], None], dev: torch.device, *, calls: int, repeats: int):
    """(seconds of the first ``calls`` calls, where compiling happens; the steady calls' timing; kernels per call)."""
    _sync(dev)
    t0 = time.perf_counter()
    with quiet_torch_logs():  # Dynamo notes that it skips the step's profiler range: nothing to act on
        for _ in range(calls):
            step()
    _sync(dev)
    first_s = time.perf_counter() - t0
    # timed again where the spread is wide (the fused-Adam row read fastest at 33.5%, wider than the rows' gaps)
    m, _ = bench.steadier(lambda: bench.time_it(step, warmup=3, repeats=repeats, device=dev))
    return first_s, m, _opt_kernels(step, dev)


def _against_first(df: "pandas.DataFrame", label: str, ratio: str) -> "pandas.DataFrame":  # noqa: F821
    """Each row's speed over the first row's, and how the table reads (spreads, text, whole kernel counts)."""
    df[ratio] = df["step ms"].iloc[0] / df["step ms"]
    df.attrs["spread"] = "spread %"
    df.attrs["spread_of"] = ["step ms", ratio]
    df.attrs["ratio_of"] = {ratio: ("step ms", df.index[0], "base/row")}
    df.attrs["formats"] = {label: "text", "kernels": "whole"}
    df.attrs["missing"] = {"kernels": "a CPU launches no kernels"}
    return tables.with_ratios_as_shown(df)  # 03 records a row's ratio: as the table reads it
