"""The ladder's rungs: what each trains (its configuration and the setup every rung shares), what it ran as on this
device, its result, and the judgement of it against the rung it built on. :mod:`helpers.gpt.ladder` trains them.

    setup = LadderSetup.at_scale()          # the GPT, the batch per optimizer step, the steps, the learning rate
    rungs = ladder_rungs(setup)             # eager fp32 → bf16 → SDPA → fused AdamW → compile → … → FP8
    plan(config, "cuda")                    # (autocast dtype, what it runs as here, why it cannot run here or None)
    judge(result, top)                      # kept, or dropped with the reason (helpers.gpt.ladder's docstring)
"""

from __future__ import annotations

import dataclasses

import torch

from .. import bench, env, tables
from . import fp8 as _fp8
from .model import GPTConfig

__all__ = ["RungConfig", "Rung", "LadderSetup", "RungResult", "tokens_per_s_of", "ladder_rungs", "plan", "judge", "LOSS_TOLERANCE"]

#: A rung trains worse when its mean loss over the last third of the common steps is this share above the top's.
LOSS_TOLERANCE = 0.02


@dataclasses.dataclass(frozen=True)
class RungConfig:
    """Every knob a rung can turn: what the training step runs."""

    dtype: str = "fp32"  # "fp32", or "bf16": torch.autocast (the weights, gradients and Adam's moments stay fp32)
    attention: str = "manual"  # "manual": the T×T scores written out; "sdpa": scaled_dot_product_attention
    fused_adamw: bool = False  # AdamW(fused=True): one kernel for the whole update
    compile: bool = False  # torch.compile of the model (Inductor on a GPU; aot_eager on a CPU)
    micro_batch: int = 8  # sequences per forward and backward pass; the rest of the global batch is accumulated
    checkpoint: str = "none"  # "none" or "selective" (GPT.saves decides what is kept)
    fp8: bool = False  # the linear layers' matmuls in FP8 (torchao)


@dataclasses.dataclass(frozen=True)
class Rung:
    """One change: its name, what it adds in words, and the fields of :class:`RungConfig` it sets."""

    key: str  # the figure's name part: gpt_<key>_tok_per_s
    name: str
    adds: str
    changes: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class LadderSetup:
    """What every rung trains: the network, the batch per optimizer step, the steps and the learning rate."""

    cfg: GPTConfig
    seq_len: int
    global_batch: int  # sequences per optimizer step, every rung
    micro_batch: int  # the first rungs' micro-batch
    large_micro_batch: int  # the larger micro-batch rung's
    warmup_steps: int  # untimed optimizer steps first (compilation happens there)
    steps: int  # timed optimizer steps after them (fewer where the time box ends the rung)
    lr: float
    seed: int = 0
    #: optimizer steps over which the learning rate rises linearly to ``lr`` (0: none). AdamW's first updates move
    #: every weight by about ``lr`` whatever its gradient; at GPT-2 small's 6e-4 from the first step the loss rose
    #: within the first steps above a uniform guess's on one H100 (11.19 against ln 50,257 = 10.83, 2026-11-27).
    lr_warmup: int = 0

    def __post_init__(self) -> None:
        for m in (self.micro_batch, self.large_micro_batch):
            if m < 1 or self.global_batch % m:
                raise ValueError(f"micro-batch {m} does not divide the global batch {self.global_batch}: every "
                                 "rung accumulates whole micro-batches to the same batch per optimizer step.")
        if self.lr_warmup < 0:
            raise ValueError(f"lr_warmup={self.lr_warmup}: give the number of warm-up steps, 0 for none.")
        if not 1 <= self.seq_len <= self.cfg.block_size:
            raise ValueError(f"seq_len={self.seq_len}: give 1 to block_size={self.cfg.block_size}.")

    @classmethod
    def at_scale(cls, scale: env.Scale | None = None, *, gpu_gib: float | None = None) -> "LadderSetup":
        """GPT-2 small at 64 × 1,024 tokens a step, micro-batches of 8 then 32 (full); on a GPU of
        :data:`helpers.env.SMALL_GPU_GIB` or less (a T4: eager fp32 with attention written out needs about 25 GiB at
        micro-batch 8), 16 × 1,024 tokens in micro-batches of 2 then 8; the smoke model at 16 × 64 tokens,
        micro-batches of 2 then 8 (smoke). ``gpu_gib``: the GPU's memory (default: this machine's)."""
        if (scale or env.scale()) == "full":
            gib = gpu_gib if gpu_gib is not None else env.gpu_memory_gib()
            if gib is not None and gib <= env.SMALL_GPU_GIB:
                return cls(GPTConfig.full(), seq_len=1024, global_batch=16, micro_batch=2, large_micro_batch=8,
                           warmup_steps=1, steps=8, lr=6e-4, lr_warmup=4)
            return cls(GPTConfig.full(), seq_len=1024, global_batch=64, micro_batch=8, large_micro_batch=32,
                       warmup_steps=1, steps=8, lr=6e-4, lr_warmup=4)
        return cls(GPTConfig.smoke(), seq_len=64, global_batch=16, micro_batch=2, large_micro_batch=8,
                   warmup_steps=1, steps=8, lr=3e-3, lr_warmup=4)

    def lr_at(self, step: int) -> float:
        """The learning rate of optimizer step ``step`` (0 first): rising linearly over :attr:`lr_warmup` steps.

        >>> LadderSetup.at_scale("smoke").lr_at(0), LadderSetup.at_scale("smoke").lr_at(3)
        (0.00075, 0.003)
        """
        return self.lr * min(1.0, (step + 1) / self.lr_warmup) if self.lr_warmup else self.lr

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len

    def describe(self) -> str:
        c = self.cfg
        return (f"a GPT of {c.n_layer} layers, width {c.n_embd}, {c.n_head} heads, vocabulary {c.vocab_size:,} "
                f"({c.param_count(non_embedding=False):,} parameters), trained on {self.global_batch} sequences of "
                f"{self.seq_len:,} tokens per optimizer step ({self.tokens_per_step:,} tokens), AdamW at lr "
                f"{self.lr:g}" + (f" after a linear warm-up over {self.lr_warmup} steps" if self.lr_warmup else "")
                + f"; each rung {self.warmup_steps} untimed step(s), then up to {self.steps} timed ones")


def ladder_rungs(setup: LadderSetup) -> list[Rung]:
    """The ladder, bottom to top: each rung sets one field of :class:`RungConfig`."""
    m, big = setup.micro_batch, setup.large_micro_batch
    return [
        Rung("eager_fp32", "eager fp32", f"the baseline: fp32 (matmuls without TF32, PyTorch's default), attention "
             f"written out, AdamW's default, micro-batches of {m}", {"micro_batch": m}),
        Rung("bf16", "+ bf16 autocast", "matmuls in bf16 on tensor cores (fp32 weights and optimizer)",
             {"dtype": "bf16"}),
        Rung("sdpa", "+ fused attention", "scaled_dot_product_attention: no T×T scores kept", {"attention": "sdpa"}),
        Rung("fused_adamw", "+ fused AdamW", "AdamW(fused=True): the whole update fused into one kernel",
             {"fused_adamw": True}),
        Rung("compile", "+ torch.compile", "the model compiled: elementwise ops fused, fewer launches",
             {"compile": True}),
        Rung("large_micro_batch", f"+ micro-batch {big}", f"micro-batches of {big} instead of {m}, "
             f"{setup.global_batch // big} accumulated per step", {"micro_batch": big}),
        Rung("selective_checkpoint", "+ selective checkpointing", "each block checkpointed: matmul outputs kept, "
             "the rest recomputed in backward", {"checkpoint": "selective"}),
        Rung("fp8", "+ FP8 matmuls", "the linear layers' matmuls in FP8 (torchao float8 training)", {"fp8": True}),
    ]


def plan(config: RungConfig, device: torch.device | str) -> tuple[torch.dtype | None, str, str | None]:
    """What ``config`` runs as on ``device``: (autocast dtype or None, what differs from its name in words or "",
    why it cannot run here or None). bf16 on a GPU without it runs in fp16 with a GradScaler; on a CPU without
    bf16 instructions it would be fp32 again, so it is not run; FP8 needs what :func:`fp8.fp8_unavailable` says."""
    dev = torch.device(device)
    low = env.autocast_dtype(config.dtype, dev) if config.dtype != "fp32" else None
    runs_as, skip = "", None
    if config.dtype == "bf16" and low is None:
        skip = (f"this CPU has no bf16 instructions ({env.cpu_capability()}): bf16 would run as fp32 here, the rung "
                "before it again")
    elif config.dtype == "bf16" and low == torch.float16:
        runs_as = "fp16 with a GradScaler (this GPU has no bf16)"
    if config.fp8 and skip is None:
        skip = _fp8.fp8_unavailable(dev)
    return low, runs_as, skip


def tokens_per_s_of(tokens_per_step: int, step: bench.Measurement) -> float:
    """A rung's tok/s: a step's tokens over its median step *as printed* (four figures, :attr:`RungResult.step_ms_shown`),
    so every sentence, ratio and MFU computed from it agrees with the step printed beside it. 07 had printed 43,546 tok/s
    beside "step 1,505 ms" in the rung's line and 43,553 (from the unrounded 1,504.8 ms) in its MFU sentence. Four
    figures move it by at most 0.05%, under the half-percent a rung must beat the one below it by.

        tokens_per_s_of(65_536, m)   # m.median_ms 146.121 → 65,536 ÷ 0.1461 s = 448,569 tok/s
    """
    return 1e3 * tables.rate_as_shown(tokens_per_step, step.median_ms, 4)  # as _step_ms_shown prints the step


def _step_ms_shown(step: bench.Measurement) -> str:
    """The median step to four figures, as a rung's line and the table of rungs print it."""
    return tables.sig(step.median_ms, 4)


@dataclasses.dataclass(frozen=True)
class RungResult:
    """One rung, trained and timed (or why not), and judged against the top it built on."""

    key: str
    name: str
    adds: str
    config: RungConfig
    losses: tuple[float, ...] = ()  # the global batch's mean loss at every optimizer step, warm-up included
    step: bench.Measurement | None = None  # the timed optimizer steps
    tokens_per_s: float = float("nan")  # a step's tokens over the step as printed (tokens_per_s_of)
    first_steps_s: float | None = None  # the untimed steps' wall time (compilation included)
    peak_mem_gib: float | None = None  # GPU only
    runs_as: str = ""
    not_run: str | None = None  # why it did not run here, in one line
    kept: bool = False
    verdict: str = ""  # the judgement, in words
    over_top_x: float | None = None  # tokens/s over the top it built on
    built_on: str | None = None
    # the first timing's spread where it passed bench.RETIME_SPREAD_PCT and the rung was timed again (the steadier
    # of the two timings kept); None: timed once
    retimed_from_spread_pct: float | None = None
    # a step's tokens (the global batch × the sequence length), where the ladder trained it: tok/s as printed is
    # these over the step as printed, exactly
    tokens_per_step: int | None = None

    @property
    def ran(self) -> bool:
        return self.not_run is None

    @property
    def step_ms_shown(self) -> str:
        """The median step as the rung's line and the table of rungs print it: four figures (146.1 ms on a GPU,
        2.531 ms for a CPU's smoke step), what a step's clock reading says to a reader."""
        return _step_ms_shown(self.step)

    @property
    def tokens_per_s_shown(self) -> float:
        """tok/s as printed: a step's tokens over the step as printed (:attr:`step_ms_shown`), so the reader's division
        of the line's figures gives it. 07 read "448,504 tok/s  step 146.1 ms" from the 146.121 ms median, where 65,536
        tokens ÷ 146.1 ms is 448,569. A ladder's results are made with :func:`tokens_per_s_of` and keep their
        :attr:`tokens_per_step`, so this is their :attr:`tokens_per_s`; a result made with an unrounded rate prints
        this one. (Recovering the tokens from a rate already over the printed step, through the unrounded median,
        had missed them by a few: 07's table read 43,548 tok/s beside its sentence's 43,546, and 65,536 ÷ 1.505 s
        is 43,546.)"""
        if self.tokens_per_step is not None:
            return tokens_per_s_of(self.tokens_per_step, self.step)
        tokens = round(self.tokens_per_s * self.step.median_ms / 1e3)  # tok/s is a step's tokens over its median
        return tokens_per_s_of(tokens, self.step)

    def __str__(self) -> str:
        if not self.ran:
            return f"{self.name:<28} not run: {self.not_run}"
        step = self.step
        text = (f"{self.name:<28} {self.tokens_per_s_shown:>12,.0f} tok/s  step {self.step_ms_shown} ms "
                f"(spread {step.spread_pct:.1f}%, {step.repeats} steps)")
        if self.runs_as:
            text += f"  [runs as {self.runs_as}]"
        return text + (f"\n{'':<28} {self.verdict}" if self.verdict else "")


def judge(result: RungResult, top: RungResult | None) -> RungResult:
    """``result`` with its verdict against ``top`` (the last rung kept): kept unless slower beyond the larger spread,
    or trains worse (:mod:`helpers.gpt.ladder`'s docstring says how). The first rung that ran is kept: it is the baseline."""
    if not result.ran:
        base = f"; the next rung builds on {top.name!r}" if top is not None else ""
        return dataclasses.replace(result, kept=False, verdict=f"not run: {result.not_run}{base}")
    if top is None:
        return dataclasses.replace(result, kept=True, verdict="the baseline: every rung above builds on it")
    x = result.tokens_per_s / top.tokens_per_s
    noise = max(result.step.spread_pct, top.step.spread_pct, 0.5) / 100
    n = min(len(result.losses), len(top.losses))
    tail = slice(n - max(1, n // 3), n)
    mine, theirs = (sum(r.losses[tail]) / len(r.losses[tail]) for r in (result, top))
    loss_rel = (mine - theirs) / abs(theirs) if theirs else 0.0
    speed = (f"{x:.2f}× the tokens/s of {top.name!r}"
             + (f" (spread {100 * noise:.1f}%)" if abs(x - 1) < 0.1 else ""))
    k = tail.stop - tail.start
    steps = "at the last step both ran" if k == 1 else f"over the last {k} steps"
    loss = (f"the same loss {steps}" if abs(loss_rel) < 5e-4 else
            f"loss {steps} {abs(loss_rel):.1%} {'above' if loss_rel > 0 else 'below'} it")
    slower, worse = x < 1 - noise, loss_rel > LOSS_TOLERANCE
    if worse:
        verdict = (f"trains worse: {loss} (more than {LOSS_TOLERANCE:.0%}), at {speed}: dropped, the next rung "
                   f"builds on {top.name!r}")
    elif slower:
        verdict = f"slower: {speed}, more than the spread; {loss}: dropped, the next rung builds on {top.name!r}"
    else:
        # within the spread, the words say which way it moved, from the ratio as printed: "no slower" had read
        # beside 0.94× (6% slower, within an 18.4% spread)
        shown = round(x, 2)
        word = ("faster" if x > 1 + noise else "as fast, within the spread" if shown == 1 else
                f"{abs(shown - 1):.0%} {'faster' if shown > 1 else 'slower'}, within the spread")
        verdict = f"{word}: {speed}; {loss}: kept"
    return dataclasses.replace(result, kept=not (slower or worse), verdict=verdict, over_top_x=x, built_on=top.name)
