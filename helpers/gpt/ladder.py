"""The transformer's ladder: one change per rung, on the same GPT, the same batches and the same start, each judged.

    setup = LadderSetup.at_scale()                 # GPT-2 small, 64 sequences of 1,024 tokens a step; tiny on a CPU
    rungs = ladder_rungs(setup)                    # eager fp32 → bf16 → SDPA → fused AdamW → compile → … → FP8
    lad = Ladder(setup, device="cuda", ceilings=bench.session_ceilings())  # draws every step's batch once
    lad.climb(rungs[:4], monitor=mon, on_result=print)   # each rung trained, timed and judged against the top
    lad.table(), lad.loss_figure(), lad.top_without_fp8  # the comparison; every rung's loss; the MFU rung

The rungs, the setup, what a rung runs as on this device and the judgement live in :mod:`.rungs`; this module trains.

**Every rung trains the same thing.** The same initial weights (one seed), the same batches (drawn once, before
any clock starts), the same global batch per optimizer step (micro-batches accumulated to it), the same optimizer
and learning rate: so a rung's loss curve lies on the one before it unless its change alters what is computed
(bf16's rounding, FP8's), and a change that trains worse shows as a curve above the others.

**Timing.** A rung runs ``warmup_steps`` optimizer steps untimed (``torch.compile`` compiles there; their losses are
on the curve), then up to ``steps`` timed ones, each timed alone (CUDA events around the step on a GPU,
``perf_counter`` on a CPU), stopping at the ``training_window`` time box. The step's median gives tokens/s; the
interquartile range over the median is its spread. A timing whose spread passes ``bench.RETIME_SPREAD_PCT`` is
taken again over the same batches (their losses not kept) and the steadier kept (:func:`bench.steadier`): on one
H200, fused AdamW's rung read 15% slower than the rung below it at 18.6% spread, and the next rung's gain was
measured over that. MFU is tokens/s × FLOPs per token (``6N + 12·L·H·Q·T``) over
the data sheet's dense peak and over the matmul ceiling measured in this session. Peak memory is the allocator's
peak over the rung, less what was allocated before it began.

**Judging.** Each rung adds one change to the *top*: the last rung kept. A rung is kept unless it is slower than
the top by more than the larger of their two spreads (noise is no verdict), or trains worse (its mean loss over the
last third of the steps both ran more than :data:`LOSS_TOLERANCE` above the top's). A rung that is dropped (or could
not run here: no bf16, no FP8, out of memory) says why in one line, and the next rung builds on the top. A change
that only trades time for memory, such as selective checkpointing, is kept where it costs no measurable time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import math
import time
from typing import Any, Callable

import torch

from .. import bench, env, tables, timebox
from . import fp8 as _fp8
from .data import MarkovSource
from .text import TextSource
from .flops import flops_per_token as _flops_per_token
from .model import GPT, unique_params
from .rungs import LOSS_TOLERANCE, LadderSetup, Rung, RungConfig, RungResult, judge, ladder_rungs, plan, tokens_per_s_of

__all__ = ["RungConfig", "Rung", "LadderSetup", "RungResult", "Runner", "Ladder", "ladder_rungs", "plan",
           "judge", "LOSS_TOLERANCE"]


#: The loss figure's colours, one per rung, distinct to a colour-blind reader too (Okabe and Ito's palette, its
#: yellow last: it reads faintly on white), and its markers.
RUNG_COLORS = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#999999", "#F0E442")
RUNG_MARKERS = ("circle", "square", "diamond", "cross", "x", "triangle-up", "triangle-down", "star", "hexagon")


@dataclasses.dataclass
class Runner:
    """A rung's model, optimizer and step, kept to run more steps (the profiler's)."""

    config: RungConfig
    model: torch.nn.Module = dataclasses.field(repr=False)
    step: Callable[[], torch.Tensor] = dataclasses.field(repr=False)  # one optimizer step on the first batch


class _QuietDynamo:
    """Torch's compiler logs one warning line for checkpointing with a policy under torch.compile (a note to check for
    in-place ops, which the GPT has none of): kept off the learner's screen, with the loggers it may come from."""

    NAMES = ("torch._higher_order_ops.wrap", "torch._dynamo.variables.higher_order_ops", "torch._dynamo")

    def __enter__(self):
        self._levels = [(logging.getLogger(n), logging.getLogger(n).level) for n in self.NAMES]
        for logger, _ in self._levels:
            logger.setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        for logger, level in self._levels:
            logger.setLevel(level)


@contextlib.contextmanager
def _cpu_threads(dev: torch.device):
    """One thread on a CPU while a rung trains: the smoke model's ops are too small to gain from a second, and on a
    2-core host shared with other work two threads made a step of it 30× slower (0.83 s against 0.03 s, measured
    2026-11-27); a GPU's host thread is left as it is."""
    if dev.type != "cpu":
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)  # note: a CPU-GPU sync point


class Ladder:
    """The rungs trained so far on one setup, device and set of batches (module docstring)."""

    def __init__(self, setup: LadderSetup, *, device: torch.device | str | None = None,
                 ceilings: bench.Ceilings | None = None, data: MarkovSource | TextSource | None = None) -> None:
        self.setup = setup
        self.device = torch.device(device) if device is not None else env.device()
        self.ceilings = ceilings
        self.source = data or MarkovSource(vocab_size=setup.cfg.vocab_size, seed=setup.seed)
        if self.source.vocab_size > setup.cfg.vocab_size:
            raise ValueError(f"the tokens' vocabulary ({self.source.vocab_size:,}) is larger than the model's "
                             f"({setup.cfg.vocab_size:,}): build the GPT with vocab_size of at least "
                             f"{self.source.vocab_size:,}, or give tokens it has rows for.")
        total = setup.warmup_steps + setup.steps
        g = torch.Generator().manual_seed(setup.seed + 1)
        seq = self.source.sample(total * setup.global_batch, setup.seq_len + 1, generator=g)
        seq = seq.view(total, setup.global_batch, setup.seq_len + 1).to(self.device)
        self.batches = [(s[:, :-1], s[:, 1:]) for s in seq]  # drawn once: every rung trains on these
        self.results: list[RungResult] = []
        self.top: RungResult | None = None
        self.config = RungConfig(micro_batch=setup.micro_batch)
        #: the last kept rung without FP8, ready to run more steps (the profiler's): see :attr:`top_without_fp8`
        self.runner: Runner | None = None
        self.saves: Callable[[Any], bool] | None = None  # the selective checkpointing policy (None: keep matmuls)
        self.flops_per_token: float = float(_flops_per_token(setup.cfg, seq_len=setup.seq_len))

    # -- training one rung -------------------------------------------------------------------------------------
    def _build(self, config: RungConfig, low: torch.dtype | None):
        s, dev = self.setup, self.device
        torch.manual_seed(s.seed)  # every device's generator: each rung starts from the same weights
        with dev:  # drawn where they train: GPT-2 small's 124M draws take a second or two on a host's CPU
            model = GPT(s.cfg, attention=config.attention, checkpoint=config.checkpoint, saves=self.saves)
        if config.fp8:
            model = _fp8.to_float8(model)
        opt = torch.optim.AdamW(unique_params(model), lr=s.lr, betas=(0.9, 0.95), weight_decay=0.0,
                                fused=True if config.fused_adamw else None)
        # dynamic=False: every rung's shapes are fixed, and a second rung compiling GPT.forward at another micro-batch
        # would otherwise recompile it with a symbolic batch size (the first rung's compiled code stays valid)
        fn = torch.compile(model, backend=env.compile_backend(dev), dynamic=False) if config.compile else model
        # fp16 (a GPU without bf16): a scaler starting at 2¹² rather than 2¹⁶ skips fewer of the first steps while it
        # finds a scale the gradients do not overflow at, so its loss curve stays comparable with the others'
        scaler = torch.amp.GradScaler(dev.type, init_scale=2.0**12) if low == torch.float16 else None
        return model, opt, fn, scaler

    def _step_fn(self, fn, opt, scaler, low, micro: int):
        dev = self.device
        n = self.setup.global_batch // micro
        taken = 0  # optimizer steps so far: the learning rate's warm-up counts them

        def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            nonlocal taken
            for group in opt.param_groups:  # a Python float: nothing recompiles, nothing waits
                group["lr"] = self.setup.lr_at(taken)
            taken += 1
            total = torch.zeros((), device=dev)
            for i in range(n):
                with torch.autocast(dev.type, dtype=low, enabled=low is not None):
                    _, loss = fn(x[i * micro:(i + 1) * micro], y[i * micro:(i + 1) * micro])
                loss = loss / n  # the gradients of the whole global batch, accumulated
                (scaler.scale(loss) if scaler is not None else loss).backward()
                total += loss.detach()
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
            return total

        return step

    def train(self, rung: Rung, config: RungConfig, *, monitor=None,
              keep: bool = False) -> tuple[RungResult, Runner | None]:
        """Train ``config`` for the setup's steps from the shared start on the shared batches; time it (module
        docstring). ``keep``: also return a :class:`Runner` of its model. Out of memory or a failure of the change
        itself (a compiler, torchao) is a result that did not run, with the reason in one line."""
        dev, s = self.device, self.setup
        if config.micro_batch < 1 or s.global_batch % config.micro_batch:
            raise ValueError(f"micro_batch={config.micro_batch} does not divide the global batch {s.global_batch}: "
                             "a rung accumulates whole micro-batches to the setup's batch per optimizer step.")
        low, runs_as, skip = plan(config, dev)
        base = dict(key=rung.key, name=rung.name, adds=rung.adds, config=config, runs_as=runs_as)
        if skip:
            return RungResult(**base, not_run=skip), None
        _sync(dev)
        before = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        model = opt = fn = None
        try:
            with _QuietDynamo(), _cpu_threads(dev):
                model, opt, fn, scaler = self._build(config, low)
                step = self._step_fn(fn, opt, scaler, low, config.micro_batch)
                batches = [(x.clone(), y.clone()) for x, y in self.batches]  # this rung's own copies
                losses: list[torch.Tensor] = []
                t0 = time.perf_counter()
                for x, y in batches[: s.warmup_steps]:
                    losses.append(step(x, y))
                    if monitor is not None:
                        monitor.refresh()
                _sync(dev)
                first_s = time.perf_counter() - t0
                # the monitor marks the timed steps inside the rung's band (the rest of it: the compile, autotuning,
                # the first CUDA graphs): its steady state is then theirs (07's compiled rung read 6% utilisation
                # over a 28 s window that was mostly its compile)
                phase = monitor.phase if monitor is not None else (lambda name: _nothing())
                kept = iter([losses, []])  # a second timing's losses are not kept: the curve is the first's
                with phase(f"{rung.name}: measured"):  # closes after _timed's sync: the GPU has run every step
                    m, retimed = bench.steadier(lambda: bench.Measurement.of(
                        self._timed(step, batches[s.warmup_steps:], next(kept), monitor)))
        except torch.OutOfMemoryError as e:
            why = (str(e).strip().splitlines() or [""])[0][:140]
            del model, opt, fn
            _free(dev)
            return RungResult(**base, not_run=f"out of GPU memory at micro-batch {config.micro_batch} ({why})"), None
        except Exception as e:  # noqa: BLE001 -- a change that fails here (compiler, torchao) is said, and skipped
            said = (str(e).strip().splitlines() or [""])[0][:200]
            del model, opt, fn
            _free(dev)
            return RungResult(**base, not_run=f"{type(e).__name__}: {said}"), None
        peak = (torch.cuda.max_memory_allocated(dev) - before) / 2**30 if dev.type == "cuda" else None
        result = RungResult(**base, losses=tuple(float(v) for v in torch.stack(losses).tolist()), step=m,
                            tokens_per_s=tokens_per_s_of(s.tokens_per_step, m), tokens_per_step=s.tokens_per_step,
                            first_steps_s=first_s,
                            peak_mem_gib=peak, retimed_from_spread_pct=retimed)
        runner = None
        if keep:
            x0, y0 = self.batches[0]

            def again() -> torch.Tensor:
                with _QuietDynamo(), _cpu_threads(dev):
                    return step(x0, y0)

            runner = Runner(config, model, again)
        else:
            del model, opt, fn, step
            _free(dev)
        return result, runner

    def _timed(self, step, batches, losses: list, monitor) -> list[float]:
        dev = self.device
        win = timebox.window("training_window", planned=len(batches), minimum=bench.MIN_REPEATS, unit="steps",
                             left_out="the rung's figures come from the steps it ran")
        if dev.type == "cuda":
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in batches]
            for (start, end), (x, y) in zip(events, batches):
                if not win.more():
                    break
                start.record()
                losses.append(step(x, y))
                end.record()
                win.tick()
                if monitor is not None:
                    monitor.refresh()
            torch.cuda.synchronize(dev)  # note: a CPU-GPU sync point; the events are read after the GPU reached them
            return [s.elapsed_time(e) for s, e in events[: win.done]]
        times = []
        for x, y in batches:
            if not win.more():
                break
            t0 = time.perf_counter()
            losses.append(step(x, y))
            times.append((time.perf_counter() - t0) * 1e3)
            win.tick()
            if monitor is not None:
                monitor.refresh()
        return times

    # -- the ladder ---------------------------------------------------------------------------------------------
    def climb(self, rungs: list[Rung], *, monitor=None,
              on_result: Callable[[RungResult], None] | None = None) -> list[RungResult]:
        """Train and judge each rung on the top (the last rung kept); return their results."""
        out = []
        for rung in rungs:
            config = self.config_for(rung)
            keep = not config.fp8  # the profiler's rung is the top without FP8
            phase = monitor.phase(rung.name) if monitor is not None else _nothing()
            with phase:
                result, runner = self.train(rung, config, monitor=monitor, keep=keep)
            result = judge(result, self.top)
            if result.kept:
                self.top, self.config = result, config
                if runner is not None:
                    self.runner = runner
            else:  # a rung not kept (or that failed: its frames are gone now) leaves nothing behind on the device
                del runner
                _free(self.device)
            self.results.append(result)
            out.append(result)
            if on_result is not None:
                on_result(result)
        return out

    @property
    def top_without_fp8(self) -> RungResult | None:
        """The last kept rung that does not compute in FP8: the rung MFU is reported at."""
        kept = [r for r in self.results if r.kept and not r.config.fp8]
        return kept[-1] if kept else None

    def result(self, key_or_name: str) -> RungResult | None:
        """The rung measured under this key (``"sdpa"``) or name (``"+ fused attention"``), or None."""
        return next((r for r in self.results if key_or_name in (r.key, r.name)), None)

    # -- figures ------------------------------------------------------------------------------------------------
    def mfu(self, result: RungResult, *, against: str = "datasheet") -> float | None:
        """``result``'s MFU (0–1) against the data sheet's dense peak (``"datasheet"``) or the matmul ceiling
        measured in this session (``"measured"``); None where there is no such peak (a CPU; a GPU the course has no
        data sheet figure for), or the rung did not run.

        The share of :meth:`mfu_text`'s rate by the peak, each as printed, so the table's MFU columns, the recorded
        figure and the sentence read one number. The rate is printed to a tenth of a TFLOP/s, so that the share
        also agrees with the table's tok/s × the GFLOP per token: 07's table had read 54.1% beside "431 TFLOP/s,
        MFU 54.0% of the 798", and, with shares of a rate rounded to three figures, 40.1% where tok/s × 0.855 ÷ 793
        gives 40.2."""
        c = self.ceilings
        if c is None or not result.ran or not math.isfinite(result.tokens_per_s) or not c.bounds:
            return None
        peak = c.datasheet_tflops if against == "datasheet" else c.matmul_tflops
        if not peak:
            return None
        return self._flop_rate(result)[3] / bench.flops_rate_as_shown(peak)

    def _flop_rate(self, result: RungResult) -> tuple[str, str, str, float]:
        """The tokens/s and GFLOP per token as :meth:`mfu_text` prints them, their product (the FLOP rate) as it
        prints it, and that rate in TFLOP/s as printed: the product of the two figures as printed (521,082 × 0.855
        had read 445 TFLOP/s, where it is 445.5), to a tenth of a TFLOP/s (below one TFLOP/s, a CPU's, in GFLOP/s)."""
        rate, per_token = f"{result.tokens_per_s:,.0f}", f"{self.flops_per_token / 1e9:.3g}"
        achieved = tables.as_shown(rate) * tables.as_shown(per_token) / 1e3
        if achieved >= 1:
            return rate, per_token, f"{achieved:,.1f} TFLOP/s", round(achieved, 1)
        return rate, per_token, bench.flops_rate(achieved), bench.flops_rate_as_shown(achieved)

    def config_for(self, rung: Rung) -> RungConfig:
        """What ``rung`` would train: the top's configuration with its one change."""
        return dataclasses.replace(self.config, **rung.changes)

    def mfu_text(self, result: RungResult, *, named: bool = True) -> str:
        """``result``'s FLOP rate and MFU in words: against the measured ceiling and the data sheet (where the course
        knows the GPU's figure), or why there is no MFU here (a CPU). ``named``: begin with the rung's name."""
        if not result.ran:
            return f"{result.name}: not run here ({result.not_run})"
        rate, per_token, flops, achieved = self._flop_rate(result)
        head = (f"{result.name}: " if named else "It trains ") + (
            f"{rate} tok/s × {per_token} GFLOP per token = {flops}")
        c = self.ceilings
        if c is None:
            return head
        if not c.bounds:
            return f"{head}; MFU is {bench.NOT_A_BOUND}"
        # the shares from the rate as printed in the head: a reader's division gives the same figures
        text = f"{head}, MFU {c.mfu_text_of_rate(achieved)}"
        return text if c.datasheet_tflops else text + " (the course has no data sheet figure for this GPU)"

    def summary_lines(self) -> list[str]:
        """The ladder in a few sentences, from its results: the top without FP8 against the baseline, the change that
        paid most, what was dropped or not run."""
        ran = [r for r in self.results if r.ran]
        top = self.top_without_fp8
        if not ran or top is None:
            return ["No rung ran."]
        base = ran[0]
        lines = [f"The top rung without FP8 is {top.name!r}: {top.tokens_per_s / base.tokens_per_s:.2f}× the "
                 f"baseline's tokens/s. " + self.mfu_text(top, named=False) + "."]
        fastest = max((r for r in ran if not r.config.fp8), key=lambda r: r.tokens_per_s)
        if fastest is not top:  # a rung kept within the spread, or for its memory, may be a little slower
            lines.append(f"The fastest rung without FP8 was {fastest.name!r}, {fastest.tokens_per_s:,.0f} tok/s "
                         f"({fastest.tokens_per_s / top.tokens_per_s:.2f}× the top rung's): the top rung is the last "
                         "one kept, and a rung slower than the one it built on by less than their spread is kept.")
        others = [r for r in ran[1:] if r.losses]
        if others:  # at the last step every rung ran (a time box may have ended one early)
            n = min(len(r.losses) for r in [base, *others])
            off = {r.name: r.losses[n - 1] / base.losses[n - 1] - 1 for r in others}
            far = max(off, key=lambda k: abs(off[k]))
            lines.append(f"After {n} steps every rung's loss lies within {abs(off[far]):.2%} of the baseline's "
                         f"{base.losses[n - 1]:.3f} ({far!r} furthest, {off[far]:+.2%}).")
        refs = self.source.reference_losses()
        if base.losses and refs:
            lines.append(against_references(base.losses[-1], refs, steps=len(base.losses)))
        gains = [r for r in self.results if r.kept and r.over_top_x is not None]
        if gains:
            best = max(gains, key=lambda r: r.over_top_x)
            lines.append(f"The change that paid most: {best.name!r}, {best.over_top_x:.2f}× the rung it built on.")
        if top.peak_mem_gib is not None and base.peak_mem_gib:
            lines.append(f"Peak memory: {base.peak_mem_gib:.3g} GiB at the baseline, {top.peak_mem_gib:.3g} GiB at "
                         f"{top.name!r}.")
        dropped = [r.name for r in self.results if r.ran and not r.kept]
        skipped = [r.name for r in self.results if not r.ran]
        if dropped:
            lines.append(f"Dropped after measuring: {', '.join(dropped)} (each one's line above says why).")
        if skipped:
            lines.append(f"Not run here: {', '.join(skipped)} (each one's line above says why).")
        return lines

    def table(self) -> "pandas.DataFrame":  # noqa: F821
        """One row per rung: what it adds, tokens/s, step time and spread, × the kept rung it built on, MFU against the
        data sheet and the measured ceiling, peak memory, the untimed first steps, the final loss, the verdict."""
        import pandas as pd

        rows = []
        for r in self.results:
            sheet, measured = self.mfu(r), self.mfu(r, against="measured")
            rows.append({"rung": r.name, "adds": r.adds + (f" [runs as {r.runs_as}]" if r.runs_as else ""),
                         # tok/s and the step as the rung's line prints them: a step's tokens over the step as
                         # shown give the tok/s beside it (07 had read 448,504 tok/s beside 146.1 ms, where
                         # 65,536 ÷ 146.1 ms is 448,569)
                         "tok/s": r.tokens_per_s_shown if r.ran else None,
                         "step ms": r.step_ms_shown if r.ran else None,
                         "spread %": r.step.spread_pct if r.ran else None,
                         "× the rung below": r.over_top_x,
                         "MFU % of data sheet": None if sheet is None else 100 * sheet,
                         "MFU % of measured": None if measured is None else 100 * measured,
                         "peak GiB": r.peak_mem_gib, "first steps s": r.first_steps_s,
                         "final loss": r.losses[-1] if r.losses else None, "kept": r.kept})
        df = pd.DataFrame(rows).set_index("rung")
        df.attrs["formats"] = {"adds": "text", "tok/s": "whole", "step ms": "text"}
        df.attrs["spread_of"] = ["tok/s"]
        again = [r for r in self.results if r.ran and r.retimed_from_spread_pct is not None]
        if again:
            df.attrs["notes"] = [
                "timed twice, the steadier timing kept, where the first one's spread passed "
                f"{bench.RETIME_SPREAD_PCT:g}%: " + ", ".join(f"{r.name} (first spread {r.retimed_from_spread_pct:.1f}%)"
                                                        for r in again)]
        on_cpu = self.device.type != "cuda"
        peak_why = ("a CPU has no data sheet peak and its measured ceiling bounds nothing" if on_cpu else
                    "the course has no data sheet figure for this GPU")
        not_run = ", ".join(r.name for r in self.results if not r.ran)
        df.attrs["missing"] = {
            "tok/s": f"not run here ({not_run}): the line under it said why",
            "step ms": "not run here: the line under it said why", "spread %": "not run here",
            "× the rung below": "the baseline, or not run: nothing to compare with",
            "MFU % of data sheet": peak_why if on_cpu or not (self.ceilings and self.ceilings.datasheet_tflops)
            else "not run here",
            "MFU % of measured": ("a CPU's measured ceiling is a small fp32 matmul that training passes: no MFU"
                                  if on_cpu else "not run here"),
            "peak GiB": "no GPU allocator on a CPU" if on_cpu else "not run here",
            "first steps s": "not run here", "final loss": "not run here",
        }
        return df

    def loss_figure(self, *, title: str | None = None):
        """Every rung that ran, its loss at each optimizer step, on one figure: a rung whose curve leaves the
        others' trains differently. Dropped rungs are dashed."""
        import plotly.graph_objects as go

        fig = go.Figure()
        ran = [r for r in self.results if r.ran]
        for i, r in enumerate(ran):
            # a colour and a marker of its own per rung: rungs that compute the same function draw one curve, and
            # plotly's default colours gave two of them near-identical reds (07's export); the markers still tell
            # the rungs apart where the curves lie on each other
            fig.add_trace(go.Scatter(x=list(range(1, len(r.losses) + 1)), y=list(r.losses), name=r.name,
                                     mode="lines+markers",
                                     marker=dict(size=7, symbol=RUNG_MARKERS[i % len(RUNG_MARKERS)]),
                                     line=dict(color=RUNG_COLORS[i % len(RUNG_COLORS)],
                                               dash="solid" if r.kept else "dash", width=2 if r.kept else 1.5)))
        s = self.setup
        fig.update_layout(title=title or ("Every rung's training loss, from the same start on the same batches"
                                          f"<br><sup>{s.tokens_per_step:,} tokens per optimizer step; dashed: "
                                          "dropped</sup>"),
                          xaxis_title="optimizer step", yaxis_title="training loss (nats per token)",
                          height=460, margin=dict(l=70, r=20, t=80, b=60))
        refs = self.source.reference_losses()
        for label, nats in refs:  # what the loss is read against: drawn, so the curves' height means something
            fig.add_hline(y=nats, line=dict(color="grey", dash="dot", width=1),
                          annotation=dict(text=f"{label}: {nats:.2f}", font=dict(size=11, color="dimgrey")),
                          annotation_position="top left")
        ys = [v for r in ran for v in r.losses] + [nats for _, nats in refs]
        if ys:  # the reference lines inside the axis, with room for their labels
            lo, hi = min(ys), max(ys)
            pad = 0.06 * (hi - lo or 1.0)
            fig.update_yaxes(range=[lo - pad, hi + 2 * pad])
        if max((len(r.losses) for r in ran), default=1) <= 20:
            fig.update_xaxes(dtick=1)
        return fig


def against_references(loss: float, refs: list[tuple[str, float]], *, steps: int) -> str:
    """One sentence: where a loss stands against the losses a source names to read it by (highest first).

    >>> against_references(4.49, [("uniform guessing", 5.55), ("byte frequencies alone", 3.26)], steps=9)
    "The baseline's loss after 9 steps, 4.490, is below uniform guessing (5.55) and still above byte frequencies alone (3.26)."
    """
    below = " and ".join(f"{label} ({nats:.2f})" for label, nats in refs if loss < nats)
    above = " and ".join(f"{label} ({nats:.2f})" for label, nats in refs if loss >= nats)
    where = " and ".join(part for part in (below and f"below {below}", above and f"still above {above}") if part)
    return f"The baseline's loss after {steps} steps, {loss:.3f}, is {where}."


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _free(dev: torch.device) -> None:
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
