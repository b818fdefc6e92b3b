import dataclasses

import pytest
import torch

from helpers import bench
from helpers.models import ReferenceCNN


def test_measurement_statistics():
    m = bench.Measurement.of([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (m.median_ms, m.min_ms, m.max_ms, m.repeats) == (3.0, 1.0, 5.0, 5)
    assert m.q1_ms == 2.0 and m.q3_ms == 4.0
    assert m.spread_pct == pytest.approx(100 * 2 / 3)
    assert "median" in str(m)
    with pytest.raises(ValueError):
        bench.Measurement.of([])


def test_time_it_warms_up_then_repeats():
    calls = []
    m = bench.time_it(lambda: calls.append(1), warmup=2, repeats=5, device="cpu")
    assert len(calls) == 7 and m.repeats == 5
    with pytest.raises(ValueError, match="repeats"):
        bench.time_it(lambda: None, repeats=0, device="cpu")


def test_time_it_can_warm_up_for_a_while_before_timing():
    # a call slow for its first 0.15 s (clocks rising, one-off costs) and fast after: two warm-up calls leave it
    # slow in the timing, a warm-up of 0.2 s does not
    import time

    def make():
        start = time.perf_counter()
        return lambda: time.sleep(0.02 if time.perf_counter() - start < 0.15 else 0.0)

    assert bench.time_it(make(), warmup=2, repeats=3, device="cpu").median_ms >= 15
    t0 = time.perf_counter()
    assert bench.time_it(make(), warmup=2, repeats=3, device="cpu", warmup_s=0.2).median_ms < 5
    assert time.perf_counter() - t0 >= 0.2
    with pytest.raises(ValueError, match="warmup_s"):
        bench.time_it(lambda: None, warmup_s=-1, device="cpu")


def _forward_flops(size: int) -> float:
    # Analytic count: 2 FLOPs per multiply-add of every conv and linear layer.
    flops, side, cin = 0, size, 3
    for cout in (64, 128, 256):
        flops += 2 * cin * cout * 9 * side * side
        side, cin = side // 2, cout
    flops += 2 * (256 * side * side) * 512 + 2 * 512 * 10
    return flops


@pytest.mark.parametrize("size", [32, 224])
def test_flop_counter_agrees_with_the_analytic_count(size):
    model = ReferenceCNN(size) if size < 224 else None
    if model is None:
        with torch.device("meta"):
            model = ReferenceCNN(size)
    fwd = bench.flops_per_image(model, size, backward=False)
    assert fwd == _forward_flops(size)
    both = bench.flops_per_image(model, size)
    # backward ≈ 2× forward, less the first conv's input gradient, which nothing needs
    assert 2.9 * fwd < both < 3.0 * fwd


def test_reference_workload_costs_12_gflop_per_image():
    with torch.device("meta"):
        model = ReferenceCNN(224)
    assert bench.flops_per_image(model, 224) / 1e9 == pytest.approx(12.06, abs=0.01)


def test_flop_count_leaves_the_model_untouched():
    model = ReferenceCNN(32)
    before = [p.detach().clone() for p in model.parameters()]
    bench.flops_per_image(model, 32)
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_mfu_and_ceilings():
    assert bench.mfu(img_per_s=1000, flops_per_img=1e9, peak_tflops=10) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="peak_tflops"):
        bench.mfu(img_per_s=1, flops_per_img=1, peak_tflops=0)
    c = bench.Ceilings("x", matmul_tflops=800, matmul_dtype="bfloat16", matmul_n=8192, copy_gb_per_s=3000, copy_bytes=1)
    assert c.img_per_s_ceiling(12.06e9) == pytest.approx(66_335, rel=1e-3)
    # from its inputs as printed: 01 and 06 read 66,712 beside "805 TFLOP/s" and "12.06 GFLOP" (805 ÷ 12.06 is 66,750)
    measured = dataclasses.replace(c, matmul_tflops=804.6494)
    assert measured.img_per_s_ceiling(12.0615e9) == pytest.approx(805e12 / 12.06e9)


def test_ceilings_run_on_a_cpu():
    c = bench.measure_ceilings("cpu")
    assert c.matmul_tflops > 0 and c.copy_gb_per_s > 0
    assert c.matmul_dtype == "float32" and c.device_name.startswith("CPU")


def test_the_data_sheet_peak_is_found_by_whole_name_and_mfu_over_it_is_lower():
    """MFU against the measured ceiling read 27.8% where PaLM's definition (the data sheet's dense peak) gives about
    22.5%: both are shown now. Only named variants get a figure: an NVL board or an L40 is not its neighbour."""
    peak = bench.datasheet_peak("NVIDIA H100 80GB HBM3")
    assert peak is not None and peak.tflops == pytest.approx(989.4) and peak.dtype == "bf16"
    assert bench.datasheet_peak("NVIDIA H100 NVL") is None and bench.datasheet_peak("NVIDIA L40") is None
    assert bench.datasheet_peak("NVIDIA L40S").tflops != bench.datasheet_peak("NVIDIA L4").tflops
    c = bench.Ceilings("x", matmul_tflops=800.0, matmul_dtype="bfloat16", matmul_n=8192, copy_gb_per_s=3000.0,
                       copy_bytes=1, datasheet_tflops=peak.tflops, datasheet_gpu=peak.gpu)
    assert c.datasheet_mfu_pct(27.8) == pytest.approx(27.8 * 800 / 989.4) and c.datasheet_mfu_pct(None) is None
    cpu = bench.Ceilings("cpu", 0.3, "float32", 1024, 20.0, 1, bounds=False, datasheet_tflops=1.0)
    assert cpu.datasheet_mfu_pct(50.0) is None  # a CPU's ceiling bounds nothing: no MFU either way


def test_under_a_learner_profile_the_data_sheet_is_the_gpu_it_stands_for(monkeypatch):
    monkeypatch.setenv("HELPERS_PROFILE", "t4")
    from helpers import machine_profiles

    machine_profiles.forget()
    peak = bench.datasheet_peak("NVIDIA H100 80GB HBM3")
    assert peak.gpu == "NVIDIA T4" and peak.tflops == 65 and peak.dtype == "fp16"


def test_steadier_times_again_only_past_the_spread_and_keeps_the_steadier():
    from helpers import bench as b

    wide, steady = b.Measurement.of([2.0, 3.0, 4.0]), b.Measurement.of([3.3, 3.35, 3.4])
    given = iter([wide, steady])
    m, first = b.steadier(lambda: next(given))
    assert m is steady and first == pytest.approx(wide.spread_pct) and first > b.RETIME_SPREAD_PCT
    given = iter([steady])
    assert b.steadier(lambda: next(given)) == (steady, None)  # steady at once: measured once
    given = iter([steady.__class__.of([2.0, 3.0, 4.0]), b.Measurement.of([1.0, 3.0, 5.0])])
    m, _ = b.steadier(lambda: next(given))
    assert m.spread_pct == pytest.approx(wide.spread_pct)  # the second was wider still: the first is kept


def test_mfu_pcts_divide_by_the_peaks_as_printed():
    # 06 read MFU 33.2% where a reader's 22,117 img/s × 12.06 GFLOP ÷ 805 TFLOP/s (the ceiling as printed) is 33.1%
    c = bench.Ceilings("x", matmul_tflops=804.65, matmul_dtype="bfloat16", matmul_n=8192, copy_gb_per_s=3000.0,
                       copy_bytes=1, datasheet_tflops=989.4, datasheet_gpu="NVIDIA H200")
    mfu, sheet = c.mfu_pcts(22_117, 12.0615e9)
    assert f"{mfu:.1f}" == "33.1" and mfu == pytest.approx(100 * 22_117 * 12.06e9 / 805e12)
    assert mfu == pytest.approx(100 * 22_117 / c.img_per_s_ceiling(12.0615e9))  # MFU is img/s over the ceiling
    assert sheet == pytest.approx(100 * 22_117 * 12.06e9 / 989e12)
    cpu = dataclasses.replace(c, bounds=False)  # a CPU's ceiling bounds nothing: no data sheet share
    assert cpu.mfu_pcts(1.0, 1e9)[1] is None and cpu.mfu_pcts(1.0, 1e9)[0] == pytest.approx(100 * 1e9 / 805e12)
