"""Row softmax four ways, and how to compare them fairly: unfused PyTorch ops, ``torch.softmax``,
``torch.compile`` of the unfused ops, and a hand-written Triton kernel.

    naive_softmax(x)                       # max, subtract, exp, sum, divide: five kernels, five trips to memory
    compare({"unfused": naive_softmax, "torch.softmax": ..., "Triton": my_softmax}, rows=16384, cols=2048,
            copy_gb_per_s=ceil.copy_gb_per_s)    # each checked against torch.softmax first, then timed

A row softmax reads each number once and writes it once when it is fused; that is all the memory
traffic it needs, so its speed limit is the copy bandwidth. The unfused version moves the row
through memory about five times.
"""

from __future__ import annotations

import os
from typing import Callable

import torch

from .. import bench, env, tables

__all__ = ["naive_softmax", "interpreted", "triton_importable", "compare", "bytes_moved"]


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, written as separate PyTorch ops (each its own kernel)."""
    row_max = x.max(dim=-1, keepdim=True).values  # read x
    shifted = x - row_max  # read x, write
    num = shifted.exp()  # read, write
    den = num.sum(dim=-1, keepdim=True)  # read
    return num / den  # read, write


def interpreted() -> bool:
    """True when Triton kernels run through its interpreter on the CPU (no CUDA GPU here)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def triton_importable() -> tuple[bool, str]:
    """Whether ``import triton`` works here, and if not, what to install."""
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return False, (f"Triton is not importable ({e}). It ships with PyTorch's Linux wheels; elsewhere "
                       "install it with `pip install triton`.")
    return True, ""


def bytes_moved(x: torch.Tensor) -> int:
    """The least a softmax over ``x`` must move: read every number once, write every number once."""
    return 2 * x.numel() * x.element_size()


def compare(variants: dict[str, Callable[[torch.Tensor], torch.Tensor]], *, rows: int, cols: int,
            copy_gb_per_s: float | None = None, device: torch.device | str | None = None,
            dtype: torch.dtype = torch.float32, repeats: int = 20, seed: int = 0) -> "pandas.DataFrame":  # noqa: F821
    """Check each variant against ``torch.softmax`` on one random ``rows × cols`` input, then time it.

    Columns: MB moved (the least bytes a softmax must move), ms (median), GB/s (those bytes over the time), share of
    the copy bandwidth, and speed-up over the first variant. A variant that gives a wrong answer raises before
    any timing: a fast wrong kernel is not a result.
    """
    import pandas as pd

    dev = torch.device(device) if device is not None else env.device()
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=dtype).to(dev)
    want = torch.softmax(x.float(), dim=-1).to(dtype)
    rows_out = []
    for name, fn in variants.items():
        got = fn(x)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-3,
                                   msg=lambda m, name=name: f"{name} does not match torch.softmax: {m}")
        m = bench.time_it(lambda: fn(x), warmup=3, repeats=repeats, device=dev)
        gbs = bytes_moved(x) / (m.median_ms * 1e-3) / 1e9
        rows_out.append({"variant": name, "MB moved": bytes_moved(x) / 1e6, "ms": m.median_ms,
                         "spread_pct": m.spread_pct, "GB/s": gbs,
                         "share of copy bandwidth": gbs / copy_gb_per_s if copy_gb_per_s else None})
    df = pd.DataFrame(rows_out)
    df["× vs " + df["variant"].iloc[0]] = df["ms"].iloc[0] / df["ms"]
    df.attrs["spread"] = "spread_pct"
    df.attrs["spread_of"] = ["ms", "GB/s", "× vs " + df["variant"].iloc[0]]
    df.attrs["ratio_of"] = {"× vs " + df["variant"].iloc[0]: ("ms", df.index[0], "base/row")}
    df.attrs["missing"] = {"share of copy bandwidth": "no copy ceiling was given to compare with"}
    # GB/s and the share are the reader's arithmetic on the cells as shown: the bytes over the time, and that over
    # the copy bandwidth as printed, whole (03 read Triton's share 96.1 where 4,101 ÷ 4,265 is 96.2, and GB/s
    # whose ratios read a digit off the "×" beside them)
    shown_copy = round(copy_gb_per_s) if copy_gb_per_s else None
    df.attrs["derived"] = {"GB/s": lambda r: r["MB moved"] / r["ms"],
                           "share of copy bandwidth": lambda r: r["GB/s"] / shown_copy if shown_copy else None}
    if dev.type == "cpu":
        df.attrs["above_roof"] = {"share of copy bandwidth": "a CPU's copy ceiling is a small stand-in measured in a "
                                  "moment, and a softmax this small stays in its caches"}
    return tables.with_ratios_as_shown(df)  # 03 records the Triton row's speed-up: as its table reads
