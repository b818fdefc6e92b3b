"""Mixed precision, measured: fp32 (with and without TF32), bf16 and fp16 trained side by side, and
what ``GradScaler`` does when fp16 gradients overflow.

    runs = compare_precisions(cfg)          # {name: TrainResult}, same data, same initial weights
    precision_table(runs)                   # img/s, allocator peak, the loss (mean of the last quarter); against fp32
    loss_figure(runs)
    scaler_trace()                          # fp16 + GradScaler step by step: the scale, skipped steps

bf16 keeps fp32's 8-bit exponent (its range), with fewer mantissa bits: gradients do not underflow,
so it needs no loss scaling. fp16 has a 5-bit exponent: small gradients round to zero unless the
loss is scaled up first, which is what ``torch.amp.GradScaler("cuda")`` does, skipping any step
whose gradients overflowed and lowering the scale.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

import torch

from .. import models, timebox, train
from ..train import TrainConfig, TrainResult
from .anatomy import free_memory

__all__ = ["PRECISIONS", "tf32", "compare_precisions", "step_img_per_s", "precision_table", "loss_figure",
           "scaler_trace", "tf32_memory_reading"]

DEFAULT_FP32 = "fp32 (PyTorch's default: TF32 convolutions)"

#: name → (TrainConfig.dtype, TF32 on?). "fp32" is what PyTorch does by default: cuDNN convolutions in TF32.
PRECISIONS = {
    "fp32, no TF32": ("fp32", False),
    "fp32 (PyTorch's default: TF32 convolutions)": ("fp32", None),
    "TF32 everywhere": ("fp32", True),
    "bf16 autocast": ("bf16", None),
    "fp16 autocast + GradScaler": ("fp16", None),
}


@contextlib.contextmanager
def tf32(enabled: bool | None) -> Iterator[None]:
    """TF32 on (True) or off (False) for matmuls and cuDNN convolutions, or PyTorch's defaults (None)."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if enabled is None:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True  # PyTorch's defaults
    else:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def compare_precisions(cfg: TrainConfig, names: list[str] | None = None, *,
                       device: torch.device | str | None = None) -> dict[str, TrainResult]:
    """Train ``cfg`` once per precision: same seed (same data, same initial weights), only the arithmetic differs.

    The precisions run in the order given until the ``precision_comparison`` time box is up: the ones left are
    missing from the result (the box's line names them).
    """
    out = {}
    names = names or list(PRECISIONS)
    box = timebox.window("precision_comparison", planned=len(names), unit="precisions")
    for i, name in enumerate(names):
        box.left_out = "not measured here: " + ", ".join(names[i:])  # what a cut before this one leaves out
        # cut before a run that would end past the box (expected: the mean of the runs so far; on a T4-class GPU
        # each takes about 20 s, and a fourth started at 59 s took the cell to 80 s)
        if not box.more(next_s=box.elapsed_s / box.done if box.done else 0.0):
            break
        dtype, tf = PRECISIONS[name]
        free_memory()  # each run from an empty cache: what one left cached is not the next one's
        with tf32(tf):
            out[name] = train.train(dataclasses.replace(cfg, dtype=dtype), device=device)
        box.tick()
    return out


def step_img_per_s(r: TrainResult) -> float:
    """Images per second of the step alone: the batch over the median time of forward, backward and optimizer
    (CUDA events on a GPU), without the time spent making the batch: what the precision itself changes."""
    return r.config.batch_size * r.config.grad_accum / (r.phase_ms["compute"] / 1e3)


def tf32_memory_reading(runs: dict[str, TrainResult], *, baseline: str = DEFAULT_FP32, within_pct: float = 5.0,
                        measure: TrainConfig | None = None, device: torch.device | str | None = None) -> list[str]:
    """Why the fp32 runs' peaks differ, one sentence per fp32 variant more than ``within_pct`` from ``baseline``,
    written from their peaks: the three keep the same tensors (fp32, the same shapes), so what differs is the scratch
    memory (workspace) of the convolution and matrix-product algorithms cuDNN and cuBLAS chose for each setting.

    ``measure``: the runs' config; then, where a peak differs, one step of the variant and one of ``baseline`` are
    probed layer by layer (:func:`helpers.memory.scratch.layer_scratch`) and the sentence gives the largest scratch
    each held beside the gap in peaks. Without it (or on a CPU) the sentence says the workspace is inferred, not
    measured. Empty where the peaks agree, or no allocator measured them (a CPU).

        print("\n".join(tf32_memory_reading(runs, measure=cfg)))
    """
    from .scratch import highest, largest, layer_scratch

    base = runs.get(baseline)
    if base is None or not base.peak_allocated_gib:
        return []
    out = []
    probed: dict[str, object] = {}

    def scratch_of(name: str):
        if name not in probed:
            with tf32(PRECISIONS[name][1]):
                rows = layer_scratch(dataclasses.replace(measure, dtype="fp32"), device=device)
            probed[name] = (largest(rows), highest(rows))
        return probed[name]

    for name, r in runs.items():
        if name == baseline or PRECISIONS.get(name, ("",))[0] != "fp32" or not r.peak_allocated_gib:
            continue
        diff = 100 * (r.peak_allocated_gib / base.peak_allocated_gib - 1)
        if abs(diff) <= within_pct:
            continue
        said = (f"{name}: its peak, {r.peak_allocated_gib:.2f} GiB, is {abs(diff):.0f}% "
                f"{'above' if diff > 0 else 'below'} {baseline}'s {base.peak_allocated_gib:.2f} GiB, though both keep "
                "the same fp32 tensors of the same shapes")
        (mine, top), (theirs, _) = ((scratch_of(name), scratch_of(baseline)) if measure is not None
                                    else ((None, None), (None, None)))
        if mine is None or theirs is None:
            out.append(said + ": the difference is most likely the scratch memory (workspace) of the algorithms cuDNN "
                              "and cuBLAS chose for each setting, which the allocator counts with the tensors "
                              "(inferred, since nothing else differs; the workspace is not measured apart).")
            continue
        gap = r.peak_allocated_gib - base.peak_allocated_gib
        said += (". Probed call by call in one step, the memory a layer held only while it ran (cuDNN's and cuBLAS's "
                 f"workspaces are such memory) reached {mine.scratch_gib:.2f} GiB at most here, in {mine.layer}'s "
                 f"{mine.pass_}, against {theirs.scratch_gib:.2f} GiB at most in {baseline}, in {theirs.layer}'s "
                 f"{theirs.pass_}")
        if top is mine and gap > 0 and mine.entry_gib < base.peak_allocated_gib:
            # the step peaked inside that call, which began holding less than the other setting's peak
            outlived = "its output" if mine.pass_ == "forward" else "the gradients it computed"
            # the three parts as printed add up to the peak as printed (8.41 + 0.77 + 7.47 had read 16.64): the
            # middle one is what the others leave
            added = round(mine.peak_gib, 2) - round(mine.entry_gib, 2) - round(mine.scratch_gib, 2)
            said += (f". The probed step's memory was highest inside that call, at {mine.peak_gib:.2f} GiB: "
                     f"{mine.entry_gib:.2f} GiB allocated when it began, {added:.2f} GiB of {outlived} and "
                     f"the {mine.scratch_gib:.2f} GiB of scratch. It began below the {base.peak_allocated_gib:.2f} GiB "
                     f"peak of {baseline}, so the peaks differ by {gap:+.2f} GiB, not by the scratch's "
                     f"{mine.scratch_gib - theirs.scratch_gib:+.2f} GiB.")
        else:
            said += (f": a difference of {mine.scratch_gib - theirs.scratch_gib:+.2f} GiB beside the peaks' "
                     f"{gap:+.2f} GiB.")
        out.append(said)
    return out


#: The table's loss column: what it is, since the curve beside it ends on one step's loss (04 read "final loss"
#: 0.620 where the fp32 curve ended near 0.54).
LOSS_COLUMN = "loss, mean of the last quarter"

#: The speed column: the step alone's, as its name says (beside the whole loop's img/s, it read as that one's ratio).
SPEED_COLUMN = "× step-alone speed vs fp32"


def precision_table(runs: dict[str, TrainResult], *, baseline: str = DEFAULT_FP32):
    """One row per precision: img/s (whole loop and step alone), PyTorch allocated peak, the loss (the mean over
    the last quarter of the measured steps, as :class:`TrainResult` keeps it, so named: the loss curve's last point
    is one step's), and the step's speed and the peak against ``baseline``."""
    import pandas as pd

    base = runs[baseline]
    rows = []
    for name, r in runs.items():
        row = {"precision": name, "ran as": r.precision, "img/s": r.img_per_s, "step alone img/s": step_img_per_s(r),
               "PyTorch allocated peak GiB": r.peak_allocated_gib, LOSS_COLUMN: r.loss,
               SPEED_COLUMN: step_img_per_s(r) / step_img_per_s(base)}
        if r.peak_allocated_gib is not None and base.peak_allocated_gib:
            row["memory saved vs fp32 %"] = 100 * (1 - r.peak_allocated_gib / base.peak_allocated_gib)
        rows.append(row)
    df = pd.DataFrame(rows).set_index("precision")
    # shown as the reader's division of the step-alone column beside it (it read "× speed vs fp32" 0.532 beside
    # whole-loop img/s of 2,906 and 5,377, where the step alone gave it)
    # the peaks to the hundredth of a GiB the sentences beside the table print ("11.85 GiB"; three figures read
    # 11.9), and the saving from those peaks as shown (31.7 had stood beside 11.9 and 8.10, which give 31.9)
    df.attrs["ratio_of"] = {SPEED_COLUMN: ("step alone img/s", baseline, "row/base"),
                            "memory saved vs fp32 %": ("PyTorch allocated peak GiB", baseline, "saved % of base")}
    df.attrs["decimals"] = {"PyTorch allocated peak GiB": 2}
    df.attrs["missing"] = {"PyTorch allocated peak GiB": "no GPU allocator on a CPU",
                           "memory saved vs fp32 %": "no GPU allocator on a CPU"}
    return df


def loss_figure(runs: dict[str, TrainResult], *, title: str = "Training loss, step by step: the precisions side by side"):
    import plotly.graph_objects as go

    fig = go.Figure()
    for name, r in runs.items():
        fig.add_trace(go.Scatter(y=list(r.losses), mode="lines", name=name))
    # the legend under the plot: its names are long ("fp32 (PyTorch's default: TF32 convolutions)"), and at the
    # right they took a third of the width from the curves
    fig.update_layout(title=title, xaxis_title="measured step", yaxis_title="loss", height=420,
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig


def scaler_trace(*, steps: int = 12, overflow_at: tuple[int, ...] = (5,), growth_interval: int = 3,
                 max_norm: float = 1.0, device: torch.device | str | None = None, seed: int = 0):
    """fp16 training of a small MLP with ``GradScaler``, step by step, with an overflow forced at ``overflow_at``.

    Each step: scale the loss, backward, ``unscale_`` (gradients back to their true size, and checked
    for inf/NaN), clip (after unscaling, so the threshold means what it says), ``step`` (skipped when
    an inf/NaN was found), ``update`` (halve the scale after an overflow; double it after
    ``growth_interval`` clean steps). Returns one row per step.
    """
    import pandas as pd

    dev = torch.device(device) if device is not None else (torch.device("cuda") if torch.cuda.is_available()
                                                           else torch.device("cpu"))
    torch.manual_seed(seed)
    model = models.small_mlp(width=64, depth=3).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler(dev.type, init_scale=2.0**16, growth_interval=growth_interval)
    rows = []
    for step in range(steps):
        x, target = torch.randn(32, 64, device=dev), torch.randn(32, 64, device=dev)
        before = [p.detach().clone() for p in model.parameters()]
        scale = scaler.get_scale()
        with torch.autocast(dev.type, dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x).float(), target)
        if step in overflow_at:
            loss = loss * 1e6  # × the scale: past fp16's largest number (65,504), so the gradients overflow
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        skipped = all(torch.equal(b, p) for b, p in zip(before, model.parameters()))
        rows.append({"step": step, "scale": scale, "gradient norm (unscaled)": norm,
                     "overflow found": not torch.isfinite(torch.tensor(norm)).item(), "step skipped": skipped,
                     "scale after update": scaler.get_scale()})
    df = pd.DataFrame(rows).set_index("step")
    df.attrs["missing"] = {"gradient norm (unscaled)": "the gradients overflowed (inf or NaN): no norm, and the step "
                                                       "is skipped"}
    df.attrs["formats"] = {"scale": "whole", "scale after update": "whole"}
    return df
