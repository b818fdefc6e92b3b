"""torch.compile's modes, with the one-off compile time kept apart from the time per step.

    t = time_train_step(dataclasses.replace(cfg, compile=True, compile_mode="reduce-overhead"))
    t.compile_s, t.step.median_ms, t.img_per_s
    time_call(torch.compile(mlp, mode="max-autotune"), x, label="max-autotune")   # a small case

The first call of a compiled function traces it, generates kernels and compiles them: seconds to
minutes, paid once per shape. Inductor keeps what it compiled in a cache on disk, and a first call that
finds its graphs there loads them instead, in well under a second: ``t.compile_cache`` says which it
was (:data:`CACHE_WORDS`). Every later call runs the generated code. Judge a mode by its step time, and
ask whether its compile time pays back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from typing import Callable, Iterator

import torch

from .. import bench
from ..bench import Measurement
from ..train import TrainConfig, explain_out_of_memory, raise_freed, step_only_trainer

__all__ = ["StepTiming", "time_train_step", "time_call", "timings_table", "quiet_autotuning", "CACHE_WORDS"]

#: What ``StepTiming.compile_cache`` says of a compiled first call, as the tables and sentences put it.
CACHE_WORDS = {
    "miss": "compiled now: the cache on disk did not have it",
    "hit": "loaded from the compile cache on disk, left by an earlier run or cell that compiled the same graphs",
    "partly": "partly compiled now, partly loaded from the compile cache on disk",
    "none": "nothing compiled or loaded: the code compiled by an earlier call in this process was reused",
}


@dataclasses.dataclass(frozen=True)
class StepTiming:
    """A first call (compile included) and the steady steps after it."""

    label: str
    compile_s: float  # wall time of the first call, synchronised: tracing + code generation + compiling + one step
    step: Measurement
    items: int  # images (or rows) per step
    # a compiled first call's graphs: "miss" (compiled now), "hit" (all loaded from Inductor's cache on disk),
    # "partly", or "none" (none looked up: reused from this process); None for an eager call (CACHE_WORDS)
    compile_cache: str | None = None

    @property
    def items_per_s(self) -> float:
        return self.items / (self.step.median_ms / 1e3)

    @property
    def first_call(self) -> str:
        """The first call in words: ``"a first call of 0.3 s, loaded from the compile cache on disk, ..."``."""
        words = f"a first call of {self.compile_s:.1f} s"
        return words if self.compile_cache is None else f"{words}, {CACHE_WORDS[self.compile_cache]}"

    def as_row(self) -> dict:
        return {"variant": self.label, "first call s": self.compile_s, "compile cache": self.compile_cache,
                "step ms": self.step.median_ms, "spread %": self.step.spread_pct, "per s": self.items_per_s}


@contextlib.contextmanager
def quiet_autotuning() -> Iterator[None]:
    """Keep max-autotune's tables of every kernel it tried (and the configs it rejects) out of the notebook,
    and two warnings Inductor gives while compiling that say nothing about the learner's code."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TypedStorage is deprecated")  # Inductor's own code
        warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores")  # fp32 matmuls are the course's choice
        with _quiet_select_algorithm():
            yield


@contextlib.contextmanager
def _quiet_select_algorithm() -> Iterator[None]:
    """Inductor's autotuner prints a table per kernel it tunes: switch it off, then put every knob back."""
    try:
        from torch._inductor import config, select_algorithm
    except ImportError:  # an older or newer torch without these knobs: let it print
        yield
        return
    logger = logging.getLogger(select_algorithm.__name__)
    saved = (getattr(select_algorithm, "PRINT_AUTOTUNE", None), logger.level,
             getattr(config, "max_autotune_report_choices_stats", None))
    select_algorithm.PRINT_AUTOTUNE = False
    logger.setLevel(logging.CRITICAL)
    if saved[2] is not None:
        config.max_autotune_report_choices_stats = False
    try:
        yield
    finally:
        if saved[0] is not None:
            select_algorithm.PRINT_AUTOTUNE = saved[0]
        logger.setLevel(saved[1])
        if saved[2] is not None:
            config.max_autotune_report_choices_stats = saved[2]


def _cache_lookups() -> tuple[int, int]:
    """Inductor's and AOTAutograd's compile-cache hits and misses so far in this process."""
    from torch._dynamo.utils import counters

    return (counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"],
            counters["inductor"]["fxgraph_cache_miss"] + counters["aot_autograd"]["autograd_cache_miss"])


def _first_call(fn: Callable[[], object], device: torch.device, *, compiled: bool) -> tuple[float, str | None]:
    """The first call's seconds, and for a compiled one where its graphs came from (``StepTiming.compile_cache``)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    before = _cache_lookups() if compiled else (0, 0)
    t0 = time.perf_counter()
    with quiet_autotuning():
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # note: a CPU-GPU sync point, so the first step has really finished
    seconds = time.perf_counter() - t0
    if not compiled:
        return seconds, None
    hits, misses = (after - then for after, then in zip(_cache_lookups(), before))
    return seconds, ("partly" if hits and misses else "hit" if hits else "miss" if misses else "none")


def time_train_step(cfg: TrainConfig, *, label: str | None = None, device: torch.device | str | None = None,
                    warmup: int = 5, repeats: int = 20, model: torch.nn.Module | None = None) -> StepTiming:
    """One training step of ``cfg`` on a batch already on the device (no input work): first call, then steady.

    ``cfg.compile`` and ``cfg.compile_mode`` choose eager or a compile mode; ``warmup`` more steps
    follow the first (CUDA graphs are recorded there) before ``repeats`` are timed. ``model``: another network
    than the reference CNN (one with a fused kernel in it, say).
    """
    trainer = step_only_trainer(cfg, device=device, model=model)
    try:
        first, cache = _first_call(lambda: trainer.step(measure=False), trainer.device, compiled=cfg.compile)
        m = bench.time_it(lambda: trainer.step(measure=False), warmup=warmup, repeats=repeats, device=trainer.device)
    except torch.OutOfMemoryError as e:
        failed = explain_out_of_memory(cfg, e)
    else:
        failed = None
    if failed is not None:
        del trainer  # the next cell gets this step's memory back
        raise_freed(failed)
    name = label or (f"compiled, mode {cfg.compile_mode}" if cfg.compile else "eager")
    return StepTiming(name, first, m, cfg.batch_size * cfg.grad_accum, cache)


def time_call(fn: Callable, *args, label: str, warmup: int = 5, repeats: int = 50,
              grad: bool = False) -> StepTiming:
    """``fn(*args)`` (a model's forward, say): first call, then steady calls; ``torch.no_grad`` unless ``grad``."""
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    ctx = torch.enable_grad if grad else torch.no_grad

    def call():
        with ctx():
            if device.type == "cuda":
                torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs reuse output memory: a new call starts here
            return fn(*args)

    compiled = isinstance(fn, torch._dynamo.eval_frame.OptimizedModule) or hasattr(fn, "_torchdynamo_orig_callable")
    first, cache = _first_call(call, device, compiled=compiled)
    m = bench.time_it(call, warmup=warmup, repeats=repeats, device=device)
    batch = args[0].shape[0] if args and isinstance(args[0], torch.Tensor) and args[0].dim() else 1
    return StepTiming(label, first, m, batch, cache)


def timings_table(timings: list[StepTiming]) -> "pandas.DataFrame":  # noqa: F821
    """One row per variant, with the speed-up of each over the first row."""
    import pandas as pd

    df = pd.DataFrame([t.as_row() for t in timings])
    df["× vs " + timings[0].label] = timings[0].step.median_ms / df["step ms"]
    df.attrs["spread"] = "spread %"  # each row's step figures to the precision its spread supports
    df.attrs["spread_of"] = ["step ms", "per s", "× vs " + timings[0].label]
    df.attrs["formats"] = {"compile cache": "text"}
    df.attrs["missing"] = {"compile cache": "an eager call compiles nothing"}
    return df
