"""The report gives memory in GiB, as every notebook does (it printed 'peak memory 2.7 GB' beside 04's GiB)."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from helpers import tables
from helpers.challenge.report import in_gib


def test_the_reports_comparison_table_gives_peak_memory_in_gib():
    shown = pd.DataFrame({"img/s": ["493", "9,800"], "peak memory GB": ["2.90", "—"], "batch": [64, 512]},
                         index=pd.Index(["baseline", "my run"], name="run"))
    t = tables.Table(data=shown, shown=shown, notes=("— peak memory: no GPU allocator on a CPU.",))
    verdicts = [SimpleNamespace(peak_mem_gb=2**30 * 2.7 / 1e9), SimpleNamespace(peak_mem_gb=None)]
    out = in_gib(t, verdicts)
    assert list(out.shown.columns) == ["img/s", "peak memory GiB", "batch"]
    assert list(out.shown["peak memory GiB"]) == ["2.70", "—"] and out.notes == t.notes
    assert "GB" not in " ".join(out.shown.columns)
