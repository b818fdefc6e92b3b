"""What a kernel launch costs, and how many launches a model makes (eager, ``nn.Sequential``, compiled).

    lo = launch_overhead()                 # LaunchOverhead: µs per launch from Python, µs of GPU work each
    many_vs_one(n=1000, numel=256)         # DataFrame: 1000 tiny adds vs one foreach call vs one big add
    separate_adds_text(lo, table)          # each of those adds' cost beside launch_overhead's, in words
    count_launches(model, x)               # LaunchCount: tensor ops dispatched, GPU kernels (on a GPU)
    compiled_launches(torch.compile(model), x)   # the kernels Inductor generated, by name
    with triton_launches() as names: fn(x)       # the @triton.jit kernels fn launched itself, by name

Every tensor op PyTorch runs eagerly launches at least one kernel. Wrapping layers in
``nn.Sequential`` changes how the model is written, not what runs: the same ops, the
same launches. ``torch.compile`` generates new kernels that do several ops in one pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import time
from typing import Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import bench, env, tables

__all__ = ["elementwise_chain", "LaunchOverhead", "launch_overhead", "many_vs_one", "separate_adds_text",
           "LaunchCount", "count_launches", "counts_table", "compiled_launches", "parse_calls", "parse_launches", "triton_launches"]


def elementwise_chain(x: torch.Tensor) -> torch.Tensor:
    """Five elementwise ops (a SiLU-style activation, shifted and clamped): five kernels eagerly, each reading
    and writing the whole tensor; one kernel once compiled, reading ``x`` once and writing once."""
    y = x * 1.702
    y = torch.sigmoid(y)
    y = y * x
    y = y + 0.5
    return torch.clamp(y, -4.0, 4.0)


@dataclasses.dataclass(frozen=True)
class LaunchOverhead:
    """One tiny op launched ``launches`` times from Python, back to back."""

    host_us_per_launch: float  # wall time per launch, the queue drained at the end
    gpu_us_per_kernel: float | None  # GPU time per kernel from CUDA events (None on a CPU)
    launches: int
    device: str

    def __str__(self) -> str:
        if self.gpu_us_per_kernel is None:
            return f"{self.host_us_per_launch:.2f} µs per tiny op on {self.device} (no GPU: nothing is launched)"
        return (f"{self.host_us_per_launch:.2f} µs per launch from Python; the GPU spent "
                f"{self.gpu_us_per_kernel:.2f} µs per kernel, so it sat idle "
                f"{1 - min(1.0, self.gpu_us_per_kernel / self.host_us_per_launch):.0%} of the time")


def launch_overhead(*, launches: int = 20_000, device: torch.device | str | None = None,
                    repeats: int = 5) -> LaunchOverhead:
    """Time ``launches`` in-place adds on a one-element tensor: the GPU work is nothing, so what is left is launch.

    The median over ``repeats`` runs is reported. The host clock is read after a synchronize, so
    it covers the GPU finishing too; CUDA events around the same loop give the GPU's own time.
    """
    dev = torch.device(device) if device is not None else env.device()
    x = torch.zeros(1, device=dev)
    for _ in range(100):  # warm-up: the first launches load the kernel
        x.add_(1)
    host, gpu = [], []
    for _ in range(repeats):
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = time.perf_counter()
        for _ in range(launches):
            x.add_(1)
        if dev.type == "cuda":
            end.record()
            torch.cuda.synchronize(dev)  # note: a CPU-GPU sync point, so the clock covers the GPU's work too
            gpu.append(start.elapsed_time(end) * 1e3 / launches)
        host.append((time.perf_counter() - t0) * 1e6 / launches)
    med = sorted(host)[len(host) // 2]
    # The GPU-side time per kernel when kernels are queued back to back: profile a burst of them.
    gpu_us = _kernel_us(x, dev) if dev.type == "cuda" else None
    return LaunchOverhead(med, gpu_us, launches, str(dev))


def _kernel_us(x: torch.Tensor, dev: torch.device) -> float:
    """Mean duration of the add kernel itself, from the profiler (events would include the gaps)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        for _ in range(200):
            x.add_(1)
        torch.cuda.synchronize(dev)
    times = [e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(times) / len(times) if times else float("nan")


def many_vs_one(*, n: int = 1000, numel: int = 256, device: torch.device | str | None = None,
                repeats: int = 20) -> "pandas.DataFrame":  # noqa: F821
    """The same additions three ways: ``n`` tiny ``add_`` calls, one ``torch._foreach_add_`` over the ``n``
    tensors (what optimizers do with ``foreach=True``), and one ``add_`` over all the numbers in one tensor."""
    import pandas as pd

    dev = torch.device(device) if device is not None else env.device()
    tensors = [torch.zeros(numel, device=dev) for _ in range(n)]
    flat = torch.zeros(n * numel, device=dev)

    def loop():
        for t in tensors:
            t.add_(1.0)

    variants = {
        f"{n} separate add_ calls": loop,
        "one torch._foreach_add_ over the list": lambda: torch._foreach_add_(tensors, 1.0),
        f"one add_ over one tensor of {n}×{numel}": lambda: flat.add_(1.0),
    }
    rows = []
    for name, fn in variants.items():
        m = bench.time_it(fn, warmup=3, repeats=repeats, device=dev)
        rows.append({"variant": name, "ms": m.median_ms, "spread_pct": m.spread_pct})
    df = pd.DataFrame(rows)
    df["× slower than one add_"] = df["ms"] / df["ms"].iloc[-1]
    df.attrs["ratio_of"] = {"× slower than one add_": ("ms", df.index[-1], "row/base")}
    return tables.with_ratios_as_shown(df)  # 03 records the first row's ratio: as its table reads


def separate_adds_text(lo: LaunchOverhead, table: "pandas.DataFrame", *, n: int = 1000,  # noqa: F821
                       numel: int = 256) -> str:
    """The cost of each of :func:`many_vs_one`'s separate adds set beside :func:`launch_overhead`'s, so two
    figures for one launch read as one: ``"1000 separate add_ calls: 8.90 µs each, the cost of one launch above
    (8.70 µs)"``. ``n`` and ``numel``: as ``many_vs_one`` was called."""
    each = float(table["ms"].iloc[0]) * 1e3 / n
    what = "launch" if lo.gpu_us_per_kernel is not None else "tiny op"
    # each figure as the lines above print it (the table's ms to three figures, the launch line's µs to the
    # hundredth), and the ratio from those: "9.4 µs each, 0.80× the 11.8 µs" had stood below 9.37 ms and 11.84 µs,
    # whose ratio is 0.79
    each_text, launch_text = tables.sig(each), f"{lo.host_us_per_launch:.2f}"
    ratio = tables.as_shown(each_text) / tables.as_shown(launch_text)
    # "the cost of one launch" only where the two read alike (03 once said it of 9.5 µs beside 12.0 µs)
    if abs(ratio - 1) <= 0.1:
        return f"{n} separate add_ calls: {each_text} µs each, the cost of one {what} above ({launch_text} µs)"
    return (f"{n} separate add_ calls: {each_text} µs each, {tables.times(ratio, 2)} the {launch_text} µs per {what} "
            f"measured above, in another way: that loop added to one tensor of one element, these add to {n} tensors "
            f"of {numel} taken from a list")


@dataclasses.dataclass(frozen=True)
class LaunchCount:
    """What one call of a model launches."""

    variant: str
    ops: tuple[str, ...] | None  # tensor ops dispatched (views excluded), in order; None for compiled code
    kernels: tuple[str, ...] | None = dataclasses.field(repr=False, default=None)  # GPU kernels seen; None on a CPU

    @property
    def tensor_ops(self) -> int | None:
        """Ops that do work, as PyTorch dispatched them: each is at least one kernel on a GPU."""
        return None if self.ops is None else len(self.ops)

    @property
    def gpu_kernels(self) -> int | None:
        return None if self.kernels is None else len(self.kernels)

    def as_row(self) -> dict:
        return {"variant": self.variant, "tensor ops": self.tensor_ops, "GPU kernels": self.gpu_kernels}


class _OpCounter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not func.is_view:  # a view (t, view, permute, detach) only relabels memory: no kernel
            self.ops.append(func.__name__.split(".")[0])
        return func(*args, **(kwargs or {}))


def count_launches(fn: Callable, *args, variant: str = "", compiled: bool = False, warmup: int = 2) -> LaunchCount:
    """Count what ``fn(*args)`` runs: tensor ops dispatched, and on a GPU the kernels the profiler records.

    A ``compiled`` function runs generated code, so its dispatched ops are not visible (``tensor_ops`` is
    None): read its ``gpu_kernels`` on a GPU, and :func:`compiled_launches` anywhere.
    """
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        ops: list[str] = []
        if not compiled:
            with _OpCounter() as counter:
                fn(*args)
            ops = counter.ops
        kernels: list[str] | None = None
        if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
                fn(*args)
                torch.cuda.synchronize()
            kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                       and not e.name.startswith(("Memcpy", "Memset"))]
    return LaunchCount(variant, None if compiled else tuple(ops), None if kernels is None else tuple(kernels))


def counts_table(counts: list[LaunchCount]) -> "pandas.DataFrame":  # noqa: F821
    """One row per variant: tensor ops dispatched, GPU kernels (blank where not counted)."""
    import pandas as pd

    df = pd.DataFrame([c.as_row() for c in counts]).astype({"tensor ops": "Int64", "GPU kernels": "Int64"})
    df.attrs["missing"] = {"tensor ops": "a compiled function runs its generated code, not one tensor op at a time",
                           "GPU kernels": "no GPU here, so no kernels to count"}
    return df


_GENERATED = re.compile(r"^\s*(?:\w+\s*=\s*)?((?:triton|cpp)_\w+?)(?:\.run)?\(", re.M)
_EXTERN = re.compile(r"extern_kernels\.(\w+)\(")


def parse_calls(code: str) -> list[tuple[str, str]]:
    """From Inductor's generated wrapper code: every kernel it launches, in call order, as (name, "generated" or
    "library")."""
    calls = []
    call = code[code.find("def call("):] if "def call(" in code else code
    for line in call.splitlines():
        m = _GENERATED.match(line)
        if m and "async_compile" not in line:
            calls.append((m.group(1), "generated"))
            continue
        e = _EXTERN.search(line)
        if e:
            calls.append((e.group(1), "library"))
    return calls


def parse_launches(code: str) -> tuple[list[str], list[str]]:
    """From Inductor's generated wrapper code: (kernels it generated, library kernels it calls), each in call order."""
    calls = parse_calls(code)
    return [n for n, k in calls if k == "generated"], [n for n, k in calls if k == "library"]


def compiled_launches(compiled_fn: Callable, *args) -> "pandas.DataFrame":  # noqa: F821
    """The kernels one call of ``torch.compile``'d ``compiled_fn`` launches: generated (fused) and library
    (cuBLAS/cuDNN/oneDNN) kernels, in call order, read from the code Inductor wrote.

    To see that code it compiles ``compiled_fn`` afresh: it clears torch.compile's in-process caches
    (``torch._dynamo.reset()``), so other compiled functions compile again on their next call.
    """
    import pandas as pd
    from torch._inductor.utils import run_and_get_code

    with torch.no_grad():
        _, codes = run_and_get_code(compiled_fn, *args)
    if not codes:
        raise ValueError("compiled_launches saw no code being generated: pass a function made by torch.compile(...).")
    rows = []
    for code in codes:  # in call order: generated kernels and library calls interleaved as the code runs them
        rows += [{"kernel": k, "kind": "generated by torch.compile", "fuses": _fused_ops(k)} if kind == "generated"
                 else {"kernel": k, "kind": "library call", "fuses": k} for k, kind in parse_calls(code)]
    return pd.DataFrame(rows, columns=["kernel", "kind", "fuses"])


def _fused_ops(name: str) -> str:
    # Inductor names a kernel after the ops it fuses: triton_poi_fused_max_pool2d_with_indices_relu_1
    m = re.search(r"fused_(.*?)(?:_\d+)?$", name)
    return m.group(1).replace("_", " ") if m else name


class Launched(list):
    """The kernels :func:`triton_launches` saw launched, as ``module.name``; ``storage`` holds the memory of every
    tensor handed to them, so that a check can tell whether a kernel of the learner's wrote its result
    (:meth:`touched`) or only ran beside PyTorch's ops."""

    def __init__(self) -> None:
        super().__init__()
        self.storage: set[int] = set()

    def touched(self, t: torch.Tensor) -> bool:
        return _storage(t) in self.storage


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@contextlib.contextmanager
def triton_launches() -> Iterator[Launched]:
    """Record the ``@triton.jit`` kernels launched inside the block (``kernel[grid](...)``, autotuned or not), as
    ``module.name``; on a CPU through Triton's interpreter, on a GPU compiled.

    Only kernels launched from Python code count: Inductor's generated kernels go through their own launchers,
    and kernels defined inside ``torch`` are left out, so ``torch.softmax`` or a compiled function records
    nothing. It tells "this function ran a Triton kernel of its author's" from "this function calls PyTorch".
    """
    from triton.runtime import jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # an older Triton: the interpreter's functions are JITFunctions too
        pass
    names = Launched()
    originals = {cls: cls.__dict__["run"] for cls in classes if "run" in cls.__dict__}

    def recording(original):
        def run(self, *args, **kwargs):
            fn = getattr(self, "fn", None)
            module = getattr(fn, "__module__", "") or ""
            if not kwargs.get("warmup") and not module.startswith("torch"):
                names.append(f"{module}.{getattr(fn, '__name__', type(self).__name__)}")
                names.storage.update(_storage(a) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor))
            return original(self, *args, **kwargs)
        return run

    for cls, original in originals.items():
        cls.run = recording(original)
    try:
        yield names
    finally:
        for cls, original in originals.items():
            cls.run = original
