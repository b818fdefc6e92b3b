"""The models behind sentences the notebooks print: one ceiling per session, max-pool's indices counted in the
roofline and in the memory anatomy, the fp32 peaks' difference said from the peaks, where a batch search stopped
against where the card's memory would have let it, and what the allocator said when the training loop backed off."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import types

import pytest
import torch
import torch.nn.functional as F

from helpers import bench, models, roofline, train
from helpers.memory import anatomy, precision, resilient, search


@pytest.fixture
def results_here(tmp_path, monkeypatch):
    monkeypatch.setenv("HELPERS_RESULTS", str(tmp_path))
    return tmp_path


def test_the_ceilings_are_measured_once_a_session_and_reused(results_here, monkeypatch):
    calls = []
    real = bench.measure_ceilings

    def counting(device=None):
        calls.append(device)
        return real(device)

    monkeypatch.setattr(bench, "measure_ceilings", counting)
    first = bench.session_ceilings("cpu", fresh=True)
    again = bench.session_ceilings("cpu")
    assert len(calls) == 1 and not first.reused and again.reused
    assert again.matmul_tflops == first.matmul_tflops and again.copy_gb_per_s == first.copy_gb_per_s
    assert first.provenance.startswith("ceilings measured now") and again.provenance.startswith("ceilings measured at ")
    assert "reused" in again.provenance
    # fresh=True measures over it (00_setup), and the later notebooks take the new one
    bench.session_ceilings("cpu", fresh=True)
    assert len(calls) == 2


def test_ceilings_of_another_machine_or_too_old_or_unreadable_are_measured_again(results_here, monkeypatch):
    bench.session_ceilings("cpu", fresh=True)
    (path,) = (results_here / "local" / "ceilings").glob("*.json")
    saved = json.loads(path.read_text())
    calls = []
    monkeypatch.setattr(bench, "measure_ceilings", lambda device=None: calls.append(1) or dataclasses.replace(
        bench.Ceilings(**saved["ceilings"]), measured_at=bench._utc_now()))

    old = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=bench.SESSION_HOURS + 1)).isoformat()
    path.write_text(json.dumps({**saved, "ceilings": {**saved["ceilings"], "measured_at": old}}))
    assert not bench.session_ceilings("cpu").reused and len(calls) == 1

    path.write_text(json.dumps({**saved, "identity": {**saved["identity"], "boot": "another boot"}}))
    assert not bench.session_ceilings("cpu").reused and len(calls) == 2

    path.write_text("{ half a file")
    assert not bench.session_ceilings("cpu").reused and len(calls) == 3


def test_the_roofline_counts_max_pools_int64_indices_where_they_are_written():
    pool = torch.nn.MaxPool2d(2)
    x = torch.randn(2, 4, 8, 8, dtype=torch.bfloat16)
    out = pool(x)
    kind, _, with_idx = roofline._op_cost(pool, x, out, pool_indices=True)
    _, _, without = roofline._op_cost(pool, x, out, pool_indices=False)
    assert kind == "pooling" and with_idx - without == out.numel() * 8
    # a bf16 output's 2 bytes against its index's 8: most of what a pool writes is indices
    assert without == (x.numel() + out.numel()) * 2


def test_the_anatomy_keeps_the_indices_apart_and_a_lower_precision_does_not_shrink_them():
    net = models.ReferenceCNN(32)
    x, y = torch.randn(8, 3, 32, 32, requires_grad=False), torch.randint(0, 10, (8,))
    kept = anatomy.saved_bytes_by_kind(lambda: F.cross_entropy(net(x), y), list(net.parameters()))
    # three 2×2 pools (64, 128, 256 channels at 16², 8², 4²), one int64 index per output, 8 images; and the 8 labels
    assert kept["integers"] == 8 * 8 * (64 * 16**2 + 128 * 8**2 + 256 * 4**2) + 8 * 8
    assert kept["floats"] > kept["integers"]

    full = anatomy.Anatomy("SGD, fp32", 0, 0, 0, 1000, None, None, None, None, None, None, activation_indices=200)
    low = anatomy.Anatomy("SGD, bf16", 0, 0, 0, 600, None, None, None, None, None, None, activation_indices=200)
    line = anatomy.precision_reading(full, low)
    assert "40% less" in line and "floats fell 50%" in line and "stayed at" in line
    assert anatomy.anatomy_table([full, low]).loc["SGD, bf16", "of which integers GiB"] == 200 / 2**30


def test_the_fp32_peaks_difference_is_said_from_the_peaks():
    run = lambda gib: types.SimpleNamespace(peak_allocated_gib=gib)  # noqa: E731
    base = precision.DEFAULT_FP32
    said = precision.tf32_memory_reading({base: run(10.0), "fp32, no TF32": run(14.0), "TF32 everywhere": run(10.2),
                                          "bf16 autocast": run(6.0)})
    assert len(said) == 1 and said[0].startswith("fp32, no TF32: its peak, 14.00 GiB, is 40% above")
    assert "workspace" in said[0] and "most likely" in said[0]  # reached by elimination: said as such
    assert precision.tf32_memory_reading({base: run(None)}) == []


def test_the_fp32_peaks_difference_is_said_from_the_scratch_memory_measured_where_it_was(monkeypatch):
    from helpers.memory import scratch

    run = lambda gib: types.SimpleNamespace(peak_allocated_gib=gib)  # noqa: E731
    base = precision.DEFAULT_FP32
    probed = []

    peak_elsewhere = False
    probe = dict(scratch_gib=4.5, entry_gib=9.0, added_gib=0.5, peak_gib=14.0)

    def fake(cfg, *, device=None, warmup_steps=2):
        tf32 = torch.backends.cudnn.allow_tf32  # as the reading set it around the call
        probed.append(tf32)
        L = scratch.LayerScratch
        if not tf32:  # the scratch comes in the backward, when the step holds 9 GiB
            return [L("features.3", "Conv2d", "backward", **probe),
                    L("features.0", "Conv2d", "forward", 0.1, entry_gib=2.0, added_gib=0.9,
                      peak_gib=20.0 if peak_elsewhere else 3.0)]
        return [L("features.3", "Conv2d", "backward", 0.25, entry_gib=9.0, added_gib=0.25, peak_gib=9.5),
                L("features.0", "Conv2d", "forward", 0.1, entry_gib=9.9, added_gib=0.0, peak_gib=10.0)]

    monkeypatch.setattr(scratch, "layer_scratch", fake)
    cfg = train.TrainConfig(batch_size=8, image_size=32, dtype="bf16")
    runs = {base: run(10.0), "fp32, no TF32": run(14.0), "TF32 everywhere": run(10.2)}
    said = precision.tf32_memory_reading(runs, measure=cfg)
    assert probed == [False, True]  # the variant, then the default (TF32 convolutions); TF32 everywhere: no gap
    assert len(said) == 1 and "most likely" not in said[0] and "inferred" not in said[0]
    assert ("reached 4.50 GiB at most here, in features.3's backward, against 0.25 GiB at most in "
            f"{base}, in features.3's backward. The probed step's memory was highest inside that call, at 14.00 GiB: "
            "9.00 GiB allocated when it began, 0.50 GiB of the gradients it computed and the 4.50 GiB of scratch. It "
            f"began below the 10.00 GiB peak of {base}, so the peaks differ by +4.00 GiB, not by the scratch's "
            "+4.25 GiB.") in said[0]
    # the parts as printed add up to the peak as printed (04 read 16.64 GiB: 8.41 + 0.77 + 7.47, which is 16.65)
    probe = dict(scratch_gib=7.466, entry_gib=8.406, added_gib=0.765, peak_gib=16.637)
    runs["fp32, no TF32"] = run(16.637)
    assert ("at 16.64 GiB: 8.41 GiB allocated when it began, 0.76 GiB of the gradients it computed and the 7.47 GiB "
            "of scratch") in precision.tf32_memory_reading(runs, measure=cfg)[0]
    probe, runs["fp32, no TF32"] = dict(scratch_gib=4.5, entry_gib=9.0, added_gib=0.5, peak_gib=14.0), run(14.0)
    peak_elsewhere = True  # the step peaked in another call: the two differences are only set side by side
    said = precision.tf32_memory_reading(runs, measure=cfg)
    assert "highest inside" not in said[0]
    assert "a difference of +4.25 GiB beside the peaks' +4.00 GiB." in said[0]


def _trial(batch, fits, peak=None, **said):
    return search.Trial(batch, fits, peak, 100.0 if fits else None, "" if fits else "out of memory", **said)


def test_a_search_says_when_fragmentation_not_the_memory_stopped_it():
    # peaks on the line 1 + 0.02 × batch GiB: a 79 GiB card holds about 3,900
    trials = [_trial(b, True, 1 + 0.02 * b) for b in (256, 512, 1024, 2048)] + [
        _trial(4096, False, asked_gib=18.4, free_gib=17.8, cached_gib=15.5, live_gib=30.0),
        _trial(3072, False, asked_gib=14.0, free_gib=10.0, cached_gib=12.0, live_gib=45.0)]
    s = search.BatchSearch("bf16 + checkpointing", tuple(trials), None, None, 79.0)
    assert s.batch_at_capacity() == 3900
    reading = s.edge_reading()
    assert reading.startswith("bf16 + checkpointing: largest batch 2,048; the line through its peaks reaches the "
                              "card's 79.0 GiB at about 3,900: fragmentation stopped it 47% short")
    # no capacity (a CPU): nothing to say
    assert search.BatchSearch("x", tuple(trials), None, None, None).edge_reading() == ""
    assert "slowly" not in reading  # every batch that fitted ran at 100 img/s


def test_a_search_says_when_its_largest_batch_ran_slowly():
    """04's fp32 search on one H200 fitted 3,328 at 2,428 img/s, after 5,219 at 3,072: no sentence said so."""
    speeds = {256: 5434.0, 1024: 5351.0, 3072: 5219.0, 3328: 2428.0}
    trials = [search.Trial(b, True, 0.04 * b, ips) for b, ips in speeds.items()] + [
        search.Trial(3456, False, None, None, "out of memory", asked_gib=9.0, free_gib=3.0, cached_gib=0.1,
                     live_gib=136.0)]
    reading = search.BatchSearch("fp32", tuple(trials), None, None, 139.8).edge_reading()
    assert "It fits, but slowly: 2,428 img/s at 3,328 against 5,434 at 256 (-55%)" in reading
    assert reading.endswith("The largest batch that fits is not the fastest.")
    fast = [search.Trial(b, True, 0.04 * b, 5000.0) for b in speeds] + trials[-1:]
    assert "slowly" not in search.BatchSearch("fp32", tuple(fast), None, None, 139.8).edge_reading()


def test_a_back_off_says_what_the_allocator_had():
    said = resilient._said("CUDA out of memory. Tried to allocate 2.30 GiB. GPU 0 has a total capacity of 79.19 GiB of "
                           "which 1.25 GiB is free. Of the allocated memory 70.10 GiB is allocated by PyTorch, and "
                           "3.50 GiB is reserved by PyTorch but unallocated.")
    assert said == ("it asked for 2.30 GiB with 1.25 GiB free, 3.50 GiB cached, 70.10 GiB in live tensors; free and "
                    "cached together were more than that, in no piece that large (fragmentation)")
    ev = resilient.Backoff(0, 5632, 2816, 2, said)
    assert str(ev) == f"step 0: micro-batch 5,632 → 2,816 (× 2 accumulated); {said}"
    assert resilient._said("out of memory") == ""


def test_one_quantity_recorded_twice_in_a_session_must_read_one_way():
    from helpers import results

    split = {"ceiling_bf16_tflops": 784.0, "final_ceiling_tflops": 807.0, "baseline_img_per_s": 600.0}
    (line,) = results.disagreeing(split)
    assert line.startswith("ceiling_bf16_tflops is 784 but final_ceiling_tflops is 807")
    # only pairs this session recorded both of: 06 alone may read a ceiling of its own machine
    assert results.disagreeing(split, {"final_ceiling_tflops"}) == []
    assert results.disagreeing({**split, "final_ceiling_tflops": 784.0}) == []


def test_a_point_past_its_roof_gets_the_reason_its_measurements_give_or_none():
    ceil = bench.Ceilings("a GPU", matmul_tflops=100.0, matmul_dtype="bfloat16", matmul_n=8192, copy_gb_per_s=1000.0,
                          copy_bytes=2**31)
    big = 4e9  # bytes: past any L2

    def point(name, kind, flops, ms, read_share):
        return roofline.RooflinePoint(name, flops, big, kind, ms, read_bytes=big * read_share)

    # memory roof at 0.25 FLOP/byte: 0.25 TFLOP/s; 1e9 FLOP in 3.6 ms is 0.278 TFLOP/s, 111% of it
    add = point("add", "elementwise", 1e9, 3.6, 2 / 3)
    relu = point("relu", "elementwise", 1e9, 3.6, 1 / 2)
    near = point("pool", "pooling", 1e9, 3.9, 1 / 2)  # 103%: the two measurements' spread
    assert "reads more bytes than it writes" in roofline._above_roof_reason([add], ceil)
    assert "within 5% of its roof" in roofline._above_roof_reason([near], ceil)
    assert roofline._above_roof_reason([relu], ceil) is None  # reads as much as it writes: no reason the course knows
    assert roofline._above_roof_reason([add, relu], ceil) is None
    table = roofline.points_table([add, relu], ceil)
    assert "above_roof" not in table.attrs  # so the table's note says it is unexplained, and the notebook runs refuse it
    cpu = dataclasses.replace(ceil, bounds=False)
    assert "stand-ins" in roofline._above_roof_reason([relu], cpu)


def test_mfu_is_said_with_the_data_sheets_share_beside_the_measured_ceiling():
    from helpers import bench

    gpu = bench.Ceilings("NVIDIA H100 80GB HBM3", 790.0, "bfloat16", 8192, 3.0e12, 1 << 30, bounds=True,
                         datasheet_tflops=989.4, datasheet_gpu="NVIDIA H100 SXM")
    text = gpu.mfu_text(0.009)
    assert text.startswith("0.9% of the 790 TFLOP/s bfloat16 ceiling measured here; 0.7% of the NVIDIA H100 SXM")
    assert "989 TFLOP/s" in text
    unknown = bench.Ceilings("Some GPU", 100.0, "bfloat16", 8192, 1.0e12, 1 << 30)
    assert unknown.mfu_text(0.5) == "50.0% of the 100 TFLOP/s bfloat16 ceiling measured here"
    cpu = bench.Ceilings("cpu", 0.35, "float32", 1024, 2.0e10, 1 << 26, bounds=False)
    assert "not a bound on a CPU" in cpu.mfu_text(1.42)
    # a rate printed beside its MFU: each share the reader's division by the ceiling as printed (07 read "445
    # TFLOP/s, MFU 55.8% of the 797 TFLOP/s", 55.8 only by the unrounded 797.4)
    h200 = dataclasses.replace(gpu, matmul_tflops=797.4)
    assert h200.mfu_text_of_rate(446.0).startswith("56.0% of the 797 TFLOP/s bfloat16 ceiling measured here; "
                                                    "45.1% of the NVIDIA H100 SXM data sheet's dense 989 TFLOP/s")
    assert h200.mfu_text(446.0 / 797.4).startswith("55.9%")  # the unrounded ceiling's share, for contrast
    assert "not a bound on a CPU" in cpu.mfu_text_of_rate(0.5)
