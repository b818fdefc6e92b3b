"""03's attention sweep: its "SDPA speed-up" is the reader's own division of the two times the table shows."""

from __future__ import annotations

import types

import pytest

from helpers import bench, tables
from helpers.kernels import attention
from helpers.tables import readable


def test_attention_sweep_speedup_divides_the_times_as_the_table_shows_them(monkeypatch):
    """03 read 3.34 at L = 1,024 and 5.50 at L = 4,096 from the unrounded times, beside 0.891 ÷ 0.266 (3.35) and
    11.8 ÷ 2.14 (5.51): the times here are those, at two short lengths a CPU runs in a moment."""
    medians = iter([0.89063, 0.2664, 11.76, 2.1384])  # naive, then SDPA, at each length (one round)
    monkeypatch.setattr(bench, "time_it", lambda fn, **kw: types.SimpleNamespace(median_ms=next(medians)))
    df = attention.sweep([32, 64], batch=1, heads=2, head_dim=8, repeats=2, warmup_s=0.0, rounds=1)
    assert [round(n / s, 2) for n, s in zip(df["naive ms"], df["SDPA ms"])] == [3.34, 5.5]  # the case reported
    shown = readable(df).shown
    assert list(shown["naive ms"]) == ["0.891", "11.8"] and list(shown["SDPA ms"]) == ["0.266", "2.14"]
    assert list(shown["SDPA speed-up"]) == ["3.35", "5.51"]
    # the reader's arithmetic on the shown times, to the last digit shown
    assert list(shown["SDPA speed-up"]) == [tables.sig(0.891 / 0.266), tables.sig(11.8 / 2.14)]
    # 03 records figures["sdpa_speedup"] from the column and prints times_as_shown of the two times: all three agree
    longest = df.iloc[-1]
    assert float(longest["SDPA speed-up"]) == pytest.approx(5.51)
    sentence = tables.times_as_shown(tables.sig(longest["naive ms"]), tables.sig(longest["SDPA ms"]))
    assert sentence == "5.51×" == f"{shown['SDPA speed-up'].iloc[-1]}×"


def test_attention_sweep_memory_saved_is_one_less_the_two_memories_as_the_table_shows_them():
    """The saving, like the speed-up, is the reader's arithmetic on the two cells beside it (on a CPU, the bytes
    kept for backward; on a GPU, the peaks)."""
    df = attention.sweep([32, 64], batch=1, heads=2, head_dim=8, repeats=2, warmup_s=0.0, rounds=1)
    shown = readable(df).shown
    for i in range(len(df)):
        naive, fused = (tables.as_shown(shown[f"{n} kept for backward MiB"].iloc[i]) for n in ("naive", "SDPA"))
        assert shown["memory saved %"].iloc[i] == tables.percent(100 * (1 - fused / naive))
