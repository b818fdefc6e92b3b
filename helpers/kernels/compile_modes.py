"""torch.compile's modes, with the one-off compile time kept apart from the time per step.

    t = time_train_step(dataclasses.replace(cfg, compile=True, compile_mode="reduce-overhead"))
    t.compile_s, t.step.median_ms, t.img_per_s
    time_call(torch.compile(mlp, mode="max-autotune"), x, label="max-autotune")   # a small case
    first_calls_note([eager, default, reduce_overhead])   # why two first calls that both compiled differ

The first call of a compiled function traces it, generates kernels and compiles them: seconds to
minutes, paid once per shape. Inductor keeps what it compiled in a cache on disk, and a first call that
finds its graphs there loads them instead, in well under a second: ``t.compile_cache`` says which it
was (:data:`CACHE_WORDS`). That cache holds whole graphs, and its key includes the mode, so a second mode
compiling the same function misses it. On a GPU, ``t.kernel_compile_s`` and ``t.kernel_tuning_s`` keep two
parts of a compiled first call apart: compiling its Triton kernels (Triton keeps each kernel it compiled on disk,
by its source, so a second mode generating the same kernels loads them) and benchmarking each kernel's launch
configurations on its first run (Inductor keeps the best on disk too); the rest is tracing, lowering and
generating code, and running the step once. Every later call runs the generated code. Judge a mode by its step time, and ask whether its compile time pays
back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from typing import Callable, Iterator

import torch

from .. import bench, tables
from ..bench import Measurement
from ..train import TrainConfig, explain_out_of_memory, raise_freed, step_only_trainer

__all__ = ["StepTiming", "time_train_step", "time_call", "timings_table", "first_calls_note", "quiet_autotuning",
           "CACHE_WORDS"]

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
    # a compiled first call on a GPU: the Triton kernels its graphs need, the seconds it spent compiling them or
    # waiting for its compile workers to, and benchmarking their launch configurations (Inductor's own timers);
    # None for an eager call or without a GPU (Inductor writes C++ for a CPU)
    kernels: int | None = None
    kernel_compile_s: float | None = None
    kernel_tuning_s: float | None = None
    # what ``items`` counts, as its rate's column reads: a training step's images, a forward call's input rows
    rate_unit: str = "img/s"

    @property
    def items_per_s(self) -> float:
        return self.items / (self.step.median_ms / 1e3)

    @property
    def first_call(self) -> str:
        """The first call in words, its seconds as :func:`timings_table`'s "first call s" shows them: ``"a first call
        of 0.350 s, loaded from the compile cache on disk, ..."`` (03 read "0.4 s" beside the table's 0.350)."""
        words = f"a first call of {tables.sig(self.compile_s)} s"
        return words if self.compile_cache is None else f"{words}, {CACHE_WORDS[self.compile_cache]}"

    def as_row(self) -> dict:
        return {"variant": self.label, "first call s": self.compile_s, "compile cache": self.compile_cache,
                "Triton kernels": self.kernels, "kernel compile s": self.kernel_compile_s,
                "kernel tuning s": self.kernel_tuning_s,
                "step ms": self.step.median_ms, "spread %": self.step.spread_pct, self.rate_unit: self.items_per_s}


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


#: Inductor's timers (``torch._dynamo.utils.compilation_time_metrics``) of compiling Triton kernels, and of
#: benchmarking a kernel's launch configurations on its first run
_COMPILE_TIMERS = ("async_compile.precompile", "async_compile.wait")
_TUNING_TIMERS = ("CachingAutotuner.benchmark_all_configs", "CachingAutotuner.coordinate_descent_tuning")


def _triton_work() -> tuple[int, float, float]:
    """Distinct Triton kernels Inductor asked for so far in this process, the seconds it spent compiling kernels
    or waiting for its workers to, and the seconds it spent benchmarking their launch configurations."""
    from torch._dynamo.utils import compilation_time_metrics as timers, counters

    # "async_compile_cache_miss" counts every request, "…_hit" the requests for a kernel asked for before
    asked = counters["inductor"]["async_compile_cache_miss"] - counters["inductor"]["async_compile_cache_hit"]
    return (asked, sum(sum(timers.get(k, ())) for k in _COMPILE_TIMERS),
            sum(sum(timers.get(k, ())) for k in _TUNING_TIMERS))


@dataclasses.dataclass(frozen=True)
class _FirstCall:
    seconds: float
    cache: str | None
    kernels: int | None = None
    kernel_s: float | None = None
    tuning_s: float | None = None


def _first_call(fn: Callable[[], object], device: torch.device, *, compiled: bool) -> _FirstCall:
    """The first call's seconds; for a compiled one, where its graphs came from (``StepTiming.compile_cache``)
    and on a GPU its Triton kernels and the seconds spent compiling and tuning them."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    before = _cache_lookups() if compiled else (0, 0)
    kernels_before = _triton_work() if compiled else (0, 0.0, 0.0)
    t0 = time.perf_counter()
    with quiet_autotuning():
        fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # note: a CPU-GPU sync point, so the first step has really finished
    seconds = time.perf_counter() - t0
    if not compiled:
        return _FirstCall(seconds, None)
    hits, misses = (after - then for after, then in zip(_cache_lookups(), before))
    cache = "partly" if hits and misses else "hit" if hits else "miss" if misses else "none"
    if device.type != "cuda":
        return _FirstCall(seconds, cache)
    kernels, kernel_s, tuning_s = (after - then for after, then in zip(_triton_work(), kernels_before))
    return _FirstCall(seconds, cache, kernels, kernel_s, tuning_s)


def time_train_step(cfg: TrainConfig, *, label: str | None = None, device: torch.device | str | None = None,
                    warmup: int = 5, repeats: int = 20, model: torch.nn.Module | None = None) -> StepTiming:
    """One training step of ``cfg`` on a batch already on the device (no input work): first call, then steady.

    ``cfg.compile`` and ``cfg.compile_mode`` choose eager or a compile mode; ``warmup`` more steps
    follow the first (CUDA graphs are recorded there) before ``repeats`` are timed. ``model``: another network
    than the reference CNN (one with a fused kernel in it, say).
    """
    trainer = step_only_trainer(cfg, device=device, model=model)
    try:
        first = _first_call(lambda: trainer.step(measure=False), trainer.device, compiled=cfg.compile)
        m = bench.time_it(lambda: trainer.step(measure=False), warmup=warmup, repeats=repeats, device=trainer.device)
    except torch.OutOfMemoryError as e:
        failed = explain_out_of_memory(cfg, e)
    else:
        failed = None
    if failed is not None:
        del trainer  # the next cell gets this step's memory back
        raise_freed(failed)
    name = label or (f"compiled, mode {cfg.compile_mode}" if cfg.compile else "eager")
    return StepTiming(name, first.seconds, m, cfg.batch_size * cfg.grad_accum, first.cache, first.kernels,
                      first.kernel_s, first.tuning_s)


def time_call(fn: Callable, *args, label: str, warmup: int = 5, repeats: int = 50,
              grad: bool = False, warmup_s: float = 0.0) -> StepTiming:
    """``fn(*args)`` (a model's forward, say): first call, then steady calls; ``torch.no_grad`` unless ``grad``.

    ``warmup_s``: seconds of calls after the ``warmup`` ones (:func:`helpers.bench.time_it`), for a call well under a
    millisecond that five calls leave cold."""
    device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
    ctx = torch.enable_grad if grad else torch.no_grad

    def call():
        with ctx():
            if device.type == "cuda":
                torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs reuse output memory: a new call starts here
            return fn(*args)

    compiled = isinstance(fn, torch._dynamo.eval_frame.OptimizedModule) or hasattr(fn, "_torchdynamo_orig_callable")
    first = _first_call(call, device, compiled=compiled)
    m = bench.time_it(call, warmup=warmup, repeats=repeats, device=device, warmup_s=warmup_s)
    batch = args[0].shape[0] if args and isinstance(args[0], torch.Tensor) and args[0].dim() else 1
    return StepTiming(label, first.seconds, m, batch, first.cache, first.kernels, first.kernel_s, first.tuning_s,
                      rate_unit="rows/s")  # a forward call's input rows (the small MLP's 64), not images


#: What a rate counts, as the column beside it is named: a training step's images, a forward call's input rows.
_ITEMS = {"img/s": "images per step", "rows/s": "rows per call"}


def timings_table(timings: list[StepTiming]) -> "pandas.DataFrame":  # noqa: F821
    """One row per variant, with the speed-up of each over the first row."""
    import pandas as pd

    if len({t.rate_unit for t in timings}) > 1:
        raise ValueError(f"timings_table compares one kind of call: these count {sorted({t.rate_unit for t in timings})}")
    df = pd.DataFrame([t.as_row() for t in timings])
    if all(t.kernels is None for t in timings):  # a CPU's, or eager alone: no Triton kernels to count
        df = df.drop(columns=["Triton kernels", "kernel compile s", "kernel tuning s"])
    df["× vs " + timings[0].label] = timings[0].step.median_ms / df["step ms"]
    # the items a call handles beside its rate, and the rate their quotient over the step as shown (03 read 16,578
    # img/s beside a 30.9 ms step of 512 images, which give 16,570)
    rate = timings[0].rate_unit
    items = _ITEMS.get(rate, "items")
    df.insert(list(df.columns).index("step ms"), items, [t.items for t in timings])
    df.attrs["spread"] = "spread %"  # each row's step figures to the precision its spread supports
    df.attrs["spread_of"] = ["step ms", rate, "× vs " + timings[0].label]
    df.attrs["ratio_of"] = {"× vs " + timings[0].label: ("step ms", df.index[0], "base/row")}
    df.attrs["derived"] = {rate: lambda r: r[items] / (r["step ms"] / 1e3)}
    df.attrs["formats"] = {"compile cache": "text", "Triton kernels": "whole", rate: "whole", items: "whole"}
    df.attrs["missing"] = {c: "an eager call compiles nothing" for c in ("compile cache", "Triton kernels",
                                                                         "kernel compile s", "kernel tuning s")}
    # the ratio as the table shows it, from its times as shown: 03 recorded and printed 1.90× from the unrounded
    # times beside a table that read 1.91 (58.70 ÷ 30.8)
    df = tables.with_ratios_as_shown(df)
    if note := _rate_ratio_note(df, timings[0].rate_unit, "× vs " + timings[0].label):
        df.attrs["notes"] = [note]
    return df


def _rate_ratio_note(df, rate: str, ratio: str) -> str:
    """Why a row's rate over the first row's reads a digit apart from its "×" (from the step times as shown): 03's
    small MLP read max-autotune "4.7" beside 469,428 ÷ 97,535 rows/s, 4.8, its steps shown as 0.14 and 0.66 ms.
    "" where every ratio of the rates as shown reads as its "×" does."""
    shown = tables.readable(df).shown
    apart = []
    for i in range(1, len(df)):
        x_text = str(shown[ratio].iloc[i])
        by_rate = tables.as_shown(str(shown[rate].iloc[i])) / tables.as_shown(str(shown[rate].iloc[0]))
        decimals = len(x_text.split(".")[1]) if "." in x_text else 0
        if f"{by_rate:.{decimals}f}" != x_text:
            apart.append(f"{df['variant'].iloc[i]} {x_text} where its {rate} give {by_rate:.{decimals}f}")
    if not apart:
        return ""
    return (f"{ratio} divides the step times as shown, to the figures their spread supports; the {rate}, shown whole, "
            f"divide a digit apart ({'; '.join(apart)}): the two agree within the steps' spread.")


def _secs(v: float) -> str:
    """Seconds as :func:`timings_table` shows them (three figures), so a sentence reads as the table beside it: 03's
    note read "took 0.7 s … 0.8 s … the rest 28.5 s" against a first call of 29.9 s, 30.0 s in all, beside a table's
    0.666 and 0.829. (One decimal had also said "0.0 s against 0.0 s" for the small MLP's one kernel.)"""
    return f"{tables.sig(v)} s"


def _rest_s(t: "StepTiming") -> str:
    """What a first call spent besides compiling and tuning its kernels: its seconds less the two parts, each as the
    table shows it, to the decimals of the first call's own figure (29.9 − 0.666 − 0.829 reads 28.4)."""
    total = tables.sig(t.compile_s)
    parts = tables.as_shown(tables.sig(t.kernel_compile_s)) + tables.as_shown(tables.sig(t.kernel_tuning_s or 0.0))
    decimals = len(total.split(".")[1]) if "." in total else 0
    return f"{max(tables.as_shown(total) - parts, 0.0):,.{decimals}f} s"


def first_calls_note(timings: list[StepTiming]) -> str:
    """Why first calls that compiled took different times, part by part: one sentence per compiled first call
    after the first, set against the first ("" when there is nothing to compare)::

        The first call of "reduce-overhead" took less than that of "default" (3.40 s against 7.80 s), though both
        missed the compile cache on disk: compiling its 34 Triton kernels took 0.0400 s against 2.30 s for 34,
        tuning them 0.100 s against 1.20 s, and the rest (tracing, lowering, generating code, running the step once)
        3.26 s against 4.30 s. Triton keeps each kernel it compiled on disk, by its source: ...

    Every figure reads as :func:`timings_table` shows it, and the rest is the total less the parts as shown.
    """
    compiled = [t for t in timings if t.compile_cache in ("miss", "partly") and t.kernel_compile_s is not None]
    if len(compiled) < 2:
        return ""
    ref, said = compiled[0], []
    for t in compiled[1:]:
        if abs(t.compile_s / ref.compile_s - 1) < 0.25:  # within a quarter: nothing to explain
            continue
        than = "less" if t.compile_s < ref.compile_s else "longer"
        both = ", though both" if than == "less" else ". Both"
        one = t.kernels == 1
        text = (f'The first call of "{t.label}" took {than} than that of "{ref.label}" ({_secs(t.compile_s)} against '
                f"{_secs(ref.compile_s)}){both} missed the compile cache on disk: compiling its {t.kernels} Triton "
                f"kernel{'' if one else 's'} took {_secs(t.kernel_compile_s)} against {_secs(ref.kernel_compile_s)} "
                f"for {ref.kernels}, tuning {'it' if one else 'them'} {_secs(t.kernel_tuning_s or 0)} against "
                f"{_secs(ref.kernel_tuning_s or 0)}, and the rest (tracing, lowering, generating code, running the "
                f"step once) {_rest_s(t)} against {_rest_s(ref)}.")
        if t.kernel_compile_s < 0.5 * ref.kernel_compile_s and ref.kernel_compile_s >= 0.3:
            text += (" Triton keeps each kernel it compiled on disk, by its source: the kernels the earlier call "
                     "compiled were loaded.")
        if (t.kernel_tuning_s or 0) < 0.5 * (ref.kernel_tuning_s or 0) and (ref.kernel_tuning_s or 0) >= 0.3:
            text += (" Inductor keeps each kernel's best launch configuration on disk too: the earlier call's "
                     "benchmarks were not run again.")
        said.append(text)
    return " ".join(said)
