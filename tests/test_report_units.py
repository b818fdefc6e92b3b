"""Memory is given in GiB everywhere a learner reads it, as every notebook does (the report and 06's verdicts
printed 'peak memory 2.7 GB' beside 04's GiB); the leaderboard keeps its GB column, converted once."""

from __future__ import annotations

import dataclasses

from fakes import tiny_challenge, tiny_session

from helpers.challenge.harness import Submission, judge, readable_table


def test_verdicts_and_their_table_give_peak_memory_in_gib():
    rules, cfg = tiny_challenge()
    v = judge(Submission("mine", cfg), tiny_session(rules))
    gpu = dataclasses.replace(v, peak_mem_gb=2**30 * 2.7 / 1e9)  # as a GPU run would carry it
    assert gpu.peak_mem_gib == 2.7 and "peak memory 2.7 GiB" in str(gpu) and " GB" not in str(gpu)
    t = readable_table([v, gpu])
    assert "peak memory GiB" in t.shown.columns and not any(c.endswith(" GB") for c in t.shown.columns)
    assert list(t.shown["peak memory GiB"]) == ["—", "2.70"]
    assert gpu.figures()["peak_mem_gb"] == gpu.peak_mem_gb  # the leaderboard's figure stays in GB
