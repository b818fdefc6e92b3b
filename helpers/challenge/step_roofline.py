"""The final step's kernels on the roofline: what each kind of work does per step, and how close it gets to its roof.

    kernels = step_roofline(final.profile, final_model, image_size=224, batch=512)
    kernels.table(session.ceilings)                     # per point: ms per step, share of the step, % of its roof
    roofline.roofline_figure(kernels.points, session.ceilings).show()
    kernels.unplaced                                     # kinds left off the roofline, with their share of the step

A kernel's place on the roofline needs its FLOPs and the bytes it must move. The profile gives each kernel's name
and time; the FLOPs and bytes come from the network's shapes, so kernels are grouped by what they compute:

- **convolutions**, forward and backward together (cuDNN's kernel names say fprop, dgrad or wgrad, not which
  layer): every layer's forward, its weight gradient, and its input gradient (all but the first layer's: the
  images need none). The FLOPs are the ones the hardware does, so a first convolution padded to 8 input channels
  counts 8;
- **the fully connected layers** (GEMM), forward and backward;
- **the fused bias + ReLU + max-pool kernels** of :mod:`helpers.kernels.relu_pool_triton`, forward and backward
  apart: the forward reads the convolution's output and writes a quarter of it; the backward reads it again with
  the output gradient and writes the input gradient. Where the forward keeps each window's argmax instead
  (``fuse_relu_pool(model, keep="argmax")``), the forward also writes a byte per output and the backward reads
  those bytes, not the convolution's output. Their few FLOPs (adds and comparisons) hardly count: they are judged
  by bytes.

What is left (elementwise kernels Inductor fused, copies, the optimizer) depends on what the compiler fused, so
its bytes are not known from the shapes: its share of the step is listed in ``unplaced`` instead.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from torch import nn

from .. import profiling, tables
from ..bench import Ceilings
from ..roofline import RooflinePoint, attainable_tflops, ceilings_as_shown

#: Why a kernel can pass its roof: the reason under a table where one does (tables.readable names the kernels).
PAST_THE_ROOF = ("the memory roof is the bandwidth one copy kernel reached, reading and writing the same number of "
                 "bytes. A kernel can pass it where it moves fewer bytes through memory than its FLOP/byte counts "
                 "(part of its input still in the L2 cache) or mostly reads (max-pool reads four values for each it "
                 "writes), which memory likely serves faster than a copy's even mix (no read-only rate is measured "
                 "here)")

__all__ = ["StepKernels", "Saving", "step_costs", "step_roofline", "FUSED_FORWARD", "FUSED_BACKWARD",
           "PAST_THE_ROOF", "place_kernels"]

FUSED_FORWARD = "relu_maxpool_fwd"  # the Triton kernels' names (helpers.kernels.relu_pool_triton)
FUSED_BACKWARD = "relu_maxpool_bwd"


def step_costs(model: nn.Module, *, image_size: int, batch: int, bytes_per_value: int = 2) -> dict[str, tuple[float, float]]:
    """FLOPs and least bytes moved per training step for each group: ``{"convolutions": (flops, bytes), ...}``.

    ``model`` is a ReferenceCNN, as built or as the final challenge changes it (padded first convolution, fused
    pools): its convolutions in order at full, half and quarter resolution, then its fully connected layers.
    ``bytes_per_value``: 2 for bf16 activations and weights.
    """
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if len(convs) != 3 or len(linears) != 2:
        raise ValueError(f"step_costs reads a ReferenceCNN (3 convolutions, 2 linear layers); this model has "
                         f"{len(convs)} and {len(linears)}.")
    b = bytes_per_value
    keeps_argmax = getattr(model, "relu_pool_keeps", "input") == "argmax"  # helpers.kernels.relu_pool_triton.KEEPS
    conv_flops = conv_bytes = pool_fwd_flops = pool_fwd_bytes = pool_bwd_flops = pool_bwd_bytes = 0.0
    for i, conv in enumerate(convs):
        side = image_size >> i
        inp = batch * conv.in_channels * side * side
        out = batch * conv.out_channels * side * side
        weights = conv.weight.numel()
        fwd = _conv_pass_flops(conv, batch=batch, side=side, in_channels=conv.in_channels)
        passes = 3 if i > 0 else 2  # forward, weight gradient, input gradient (the images need none)
        conv_flops += passes * fwd
        conv_bytes += (inp + weights + out) * b * passes  # each pass reads two of the three and writes the third
        pooled = out // 4
        pool_fwd_flops += 8.0 * pooled  # four bias adds, three comparisons, one ReLU per output
        pool_fwd_bytes += (out + pooled) * b
        if keeps_argmax:  # the forward also writes a byte per output; the backward reads it, not the input
            pool_fwd_bytes += pooled
            pool_bwd_flops += 2.0 * pooled  # the ReLU's mask, the bias gradient's sum
            pool_bwd_bytes += pooled * (b + 1) + out * b  # reads the output gradient and the argmax, writes the input's
        else:
            pool_bwd_flops += 8.0 * pooled  # the argmax found again, the bias gradient's sum
            pool_bwd_bytes += (out + pooled + out) * b  # reads the input and the output gradient, writes the input's
    gemm_flops = gemm_bytes = 0.0
    for lin in linears:
        fwd = 2.0 * batch * lin.in_features * lin.out_features
        gemm_flops += 3 * fwd
        gemm_bytes += 3 * (batch * lin.in_features + lin.weight.numel() + batch * lin.out_features) * b
    return {"convolutions": (conv_flops, conv_bytes), "fully connected (GEMM)": (gemm_flops, gemm_bytes),
            "fused pool forward": (pool_fwd_flops, pool_fwd_bytes),
            "fused pool backward": (pool_bwd_flops, pool_bwd_bytes)}


def _conv_pass_flops(conv: nn.Conv2d, *, batch: int, side: int, in_channels: int) -> float:
    """FLOPs of one pass (forward, weight or input gradient) of a same-size convolution over ``in_channels`` of its
    input: 2 per multiply-add."""
    return 2.0 * batch * conv.out_channels * side * side * in_channels * conv.kernel_size[0] * conv.kernel_size[1]


#: The kind of op each group is (:data:`helpers.roofline.KIND_COLORS`): one colour per kind on every roofline.
_KIND = {"convolutions": "convolution", "fully connected (GEMM)": "GEMM", "fused pool forward": "pooling",
         "fused pool backward": "pooling"}


def _group(kernel: str, kind: str) -> str | None:
    if FUSED_FORWARD in kernel:
        return "fused pool forward"
    if FUSED_BACKWARD in kernel:
        return "fused pool backward"
    return {"convolution": "convolutions", "GEMM": "fully connected (GEMM)"}.get(kind)


@dataclasses.dataclass(frozen=True)
class StepKernels:
    """The step's kernel groups placed on the roofline (time per step in ``ms``), and what could not be placed."""

    points: list[RooflinePoint]
    shares: dict[str, float]  # point name → share of the step's kernel time (%)
    unplaced: dict[str, float]  # kind of kernel → share of the step's kernel time (%), not on the roofline
    step_kernel_ms: float  # all kernel time per step (on a CPU: the ops' CPU time)
    notes: tuple[str, ...] = ()  # sentences about the figures, shown under the table (:meth:`readable`)

    def table(self, ceil: Ceilings) -> "pandas.DataFrame":  # noqa: F821
        """Per point: ms per step, share of the kernel time, FLOP/byte, which roof bounds it, achieved and roof
        TFLOP/s, GB/s moved, and its share of the roof. The roof, GB/s and share are the reader's arithmetic on the
        cells as the table shows them (``tables``' ``derived``), kept as shown, so the figures 06 records from this
        table and the sentences written from it (the report's) read as the table does. 06's table read "FC … 384 … 726 … 52.8"
        (384 ÷ 726 is 52.9) and "fused pool forward … 2.50 … 3.10 … 80.5" (80.6), and 07's "GEMM … 719 … 787 … 91.5"
        (91.4): each share had been computed from the unrounded rates.

            kernels.table(ceil).set_index("kernels")["% of roof"]["convolutions"]   # 58.3, as the table shows it
        """
        import pandas as pd

        peak, gb_per_s = ceilings_as_shown(ceil)
        rows = []
        for p in self.points:
            roof = attainable_tflops(p.intensity, ceil)
            # the share is of the step's kernel time, as the line under the table says: "share of step" had read
            # as a share of the step's wall time (6.72 ms of 11.6 is 57.9%, beside 58.0)
            rows.append({"kernels": p.name, "ms per step": p.ms, "share of kernel time %": self.shares[p.name],
                         "FLOP/byte": p.intensity, "bound": p.bound(ceil), "achieved TFLOP/s": p.achieved_tflops,
                         "roof TFLOP/s": roof, "GB/s moved": p.bytes / (p.ms * 1e-3) / 1e9,
                         "% of roof": 100 * p.achieved_tflops / roof})
        df = pd.DataFrame(rows)
        # the reader's arithmetic on the cells as shown (06 read "170 … 727", where 170 × 4.265 is 725, and
        # "383 TFLOP/s … 170 FLOP/byte … 2,247 GB/s", where 383 ÷ 170 is 2,253): tables' "derived"
        df.attrs["derived"] = {
            "roof TFLOP/s": lambda r: min(peak, r["FLOP/byte"] * gb_per_s / 1e3),
            "GB/s moved": lambda r: 1e3 * r["achieved TFLOP/s"] / r["FLOP/byte"],
            # under the sloped roof, the bytes' rate over the copy ceiling: the four-figure GB/s is the tighter
            # arithmetic (06 read "2.49 … 3.11 … 3,425 … 80.1", where 3,425 ÷ 4,271 is 80.2)
            "% of roof": lambda r: 100 * (r["GB/s moved"] / gb_per_s if r["roof TFLOP/s"] < peak
                                          else r["achieved TFLOP/s"] / r["roof TFLOP/s"]),
        }
        return tables.with_ratios_as_shown(df)

    def largest_saving(self, ceil: Ceilings, *, step_ms: float, mfu_pct: float) -> "Saving":
        """The group that would save the most of a ``step_ms`` step if it ran at its roof (its time now less the
        least its FLOPs and bytes allow), and the MFU the run (at ``mfu_pct`` now) would reach then, everything
        else as it is: MFU grows as the step's time shrinks."""
        savings = []
        for p in self.points:
            least_ms = p.flops / (attainable_tflops(p.intensity, ceil) * 1e12) * 1e3
            savings.append((p.ms - least_ms, p.name))
        save_ms, name = max(savings)
        return Saving(name, save_ms, mfu_pct * step_ms / max(step_ms - save_ms, 1e-9))

    def readable(self, ceil: Ceilings) -> tables.Table:
        """:meth:`table` as a person reads it: three significant figures, shares in %; a note under it where a
        kernel passes its roof, saying why that can happen."""
        df = self.table(ceil).set_index("kernels")
        over = [str(k) for k, v in df["% of roof"].items() if v > 100]
        if over:  # the reason, said under the table (tables.readable names the kernels)
            df.attrs["above_roof"] = {"% of roof": PAST_THE_ROOF}
        df.attrs["notes"] = list(self.notes)
        return tables.readable(df)


@dataclasses.dataclass(frozen=True)
class Saving:
    """What running one group of kernels at its roof would save: :meth:`StepKernels.largest_saving`."""

    group: str
    save_ms: float  # per step
    mfu_pct_then: float


def step_roofline(prof: profiling.ProfileResult | None, model: nn.Module, *, image_size: int, batch: int,
                  bytes_per_value: int = 2) -> StepKernels | None:
    """Place the profiled step's kernel groups on the roofline (see the module's docstring).

    ``prof``: a profile of training steps (``judge(..., profile=True)`` keeps one); ``model``: the network those
    steps trained. On a CPU the profile has no kernels, and the ops' CPU time stands in for them. None where
    ``prof`` is None (a run refused before it trained has no profile): nothing to place, and the report and the
    reflection say why.
    """
    if prof is None:
        return None
    costs = step_costs(model, image_size=image_size, batch=batch, bytes_per_value=bytes_per_value)
    return dataclasses.replace(place_kernels(prof, costs, _group, _KIND),
                               notes=padding_notes(model, costs, image_size=image_size, batch=batch))


def padding_notes(model: nn.Module, costs: dict[str, tuple[float, float]], *, image_size: int,
                  batch: int) -> tuple[str, ...]:
    """What the convolutions' row counts where the first convolution's input is padded (``models.pad_first_conv``):
    the hardware's FLOPs, its zero channels included, which MFU does not count. 06's row read "463 TFLOP/s … 57.5% of
    roof" beside an MFU of the reference network's FLOPs alone, and said nothing of the difference."""
    from ..models import PaddedInputConv

    padded = [m for m in model.modules() if isinstance(m, PaddedInputConv) and m.extra > 0]
    if not padded or "convolutions" not in costs:
        return ()
    conv = padded[0].conv
    # its forward and weight gradient (the images need no input gradient) over the zero channels, at full resolution
    zeros = 2 * _conv_pass_flops(conv, batch=batch, side=image_size, in_channels=padded[0].extra)
    share = 100 * zeros / costs["convolutions"][0]
    real = conv.in_channels - padded[0].extra
    return (f"convolutions: the FLOPs the hardware does, the first convolution's {padded[0].extra} zero input channels "
            f"(padded from {real} to {conv.in_channels}) included: {tables.percent(share)}% of them. MFU counts the "
            f"reference network's FLOPs only, so at the same speed its share of the roof would be "
            f"{tables.percent(100 - share)}% of this row's.",)


def place_kernels(prof: profiling.ProfileResult, costs: dict[str, tuple[float, float]],
                  group_of: Callable[[str, str], str | None], kind_of: dict[str, str]) -> StepKernels:
    """The profiled steps' kernel time summed by ``group_of(name, kind)`` (None: not placed), each group that has a
    cost in ``costs`` (FLOPs, bytes per step) placed on the roofline under ``kind_of[group]``, the rest counted as
    unplaced by kind. The CNN's step (above) and 07's GPT step (``helpers.gpt.step_kernels``) share it."""
    kernels = prof.top_kernels(100_000)
    steps = max(1, prof.active_steps)
    total_us = float(kernels["total_us"].sum())
    if total_us <= 0:
        raise ValueError("the profile holds no kernel or op time: profile a few training steps first.")
    per_group: dict[str, float] = {}
    unplaced: dict[str, float] = {}
    for name, kind, us in zip(kernels["kernel"], kernels["kind"], kernels["total_us"]):
        group = group_of(str(name), str(kind))
        if group is None or group not in costs:
            unplaced[str(kind)] = unplaced.get(str(kind), 0.0) + 100 * us / total_us
        else:
            per_group[group] = per_group.get(group, 0.0) + us
    # each group under the kind 03's roofline gives its ops, so it has the same colour there and here
    points = [RooflinePoint(g, *costs[g], kind=kind_of[g], ms=per_group[g] / steps / 1e3)
              for g in costs if g in per_group]
    return StepKernels(points=points, shares={g: 100 * per_group[g] / total_us for g in per_group},
                       unplaced=dict(sorted(unplaced.items(), key=lambda kv: -kv[1])),
                       step_kernel_ms=total_us / steps / 1e3)
