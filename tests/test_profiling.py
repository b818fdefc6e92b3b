import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

from helpers import profiling
from helpers.tables import readable


def test_union_of_intervals_counts_overlaps_once():
    assert profiling.intervals_union_us([]) == 0
    assert profiling.intervals_union_us([(0, 10), (5, 15), (20, 25)]) == 20
    assert profiling.intervals_union_us([(20, 25), (0, 10), (2, 3)]) == 15


def _work():
    a = torch.randn(64, 64)
    for _ in range(3):
        a = torch.relu(a @ a)
    return a


@pytest.fixture(scope="module")
def prof():
    return profiling.profile_steps(_work, wait=1, warmup=1, active=2)


def test_top_ops_is_a_table_of_self_and_total_times(prof):
    df = prof.top_ops(3)
    assert list(df.columns) == ["op", "calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms", "device_total_ms"]
    assert len(df) == 3
    assert (df["cpu_total_ms"] >= df["self_cpu_ms"] - 1e-9).all()
    assert df["self_cpu_ms"].is_monotonic_decreasing  # "auto" sorts by CPU self time without a GPU
    assert "aten::mm" in set(prof.top_ops(50)["op"])
    with pytest.raises(ValueError, match="sort_by"):
        prof.top_ops(sort_by="bogus")


def test_trace_exports_more_than_once(prof, tmp_path):
    a = prof.export_trace(tmp_path / "a.pt.trace.json")
    b = prof.export_trace(tmp_path / "sub" / "b.pt.trace.json")
    assert json.loads(a.read_text()) == json.loads(b.read_text())
    assert any(e["cat"] == "cpu_op" for e in prof.trace_events())


def test_timeline_has_a_row_per_kind_of_event(prof):
    fig = prof.timeline_figure()
    names = {t.name for t in fig.data}
    assert {"CPU ops", "ranges (NVTX, steps)"} <= names
    bars = next(t for t in fig.data if t.name == "CPU ops")
    assert len(bars.x) == len(bars.base) > 0 and min(bars.base) >= 0


def test_kernel_stats_from_a_known_trace():
    # Two steps; kernels at 0-10 and 20-30 µs, a copy 25-35; the span is 0-100 µs.
    res = profiling.ProfileResult(prof=None, active_steps=2)
    res._trace = [
        {"cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 100},
        {"cat": "kernel", "name": "k1", "ts": 0, "dur": 10},
        {"cat": "kernel", "name": "k2", "ts": 20, "dur": 10},
        {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 25, "dur": 10},
    ]
    ks = res.kernel_stats()
    assert ks.kernels_per_step == 1.0
    assert ks.mean_kernel_us == 10.0
    assert ks.gpu_busy_share == pytest.approx(0.25)
    assert ks.span_ms_per_step == pytest.approx(0.05)
    assert "kernels per step" in str(ks)


def test_warm_up_kernels_are_not_counted_as_the_active_steps():
    # Kineto hands over the warm-up step's kernels (launch 1, its CPU side dropped) with the active steps' ones:
    # only kernels launched inside a ProfilerStep count. Launch 3 is a CUDA graph replay: two kernels, one id.
    events = [
        {"ph": "X", "cat": "kernel", "name": "warm", "ts": 5, "dur": 10, "args": {"correlation": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 20, "dur": 40},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 21, "dur": 2, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 25, "dur": 10, "args": {"correlation": 2}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 30, "dur": 2, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "g1", "ts": 35, "dur": 5, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "g2", "ts": 40, "dur": 5, "args": {"correlation": 3}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 1, "dur": 3, "args": {"correlation": 0}},
    ]
    res = profiling.ProfileResult(prof=None, active_steps=1, _raw_trace=json.dumps({"traceEvents": events}).encode())
    kept = [e["name"] for e in res.trace_events() if e["cat"] in profiling.GPU_CATEGORIES]
    assert kept == ["k", "g1", "g2"]
    assert res.kernel_stats().kernels_per_step == 3
    # the warm-up kernel ran 5-15 µs, before the profiled span (20-60 µs) began: it adds no busy time here
    assert res.kernel_stats().earlier_work_share == 0
    assert set(res.top_kernels(10).kernel) == {"k", "g1", "g2"}


def test_work_queued_before_the_profiled_steps_counts_as_busy_and_is_named():
    # The host ran ahead: a step launched before the profile (launch 1) still runs 20-50 µs, while the profiled
    # step's kernel (launch 2, launched at 22 µs) waits for it and runs 50-80 µs. Span 20-80 µs, all of it busy.
    events = [
        {"ph": "X", "cat": "kernel", "name": "queued", "ts": 10, "dur": 40, "args": {"correlation": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 20, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 22, "dur": 2, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 50, "dur": 30, "args": {"correlation": 2}},
    ]
    res = profiling.ProfileResult(prof=None, active_steps=1, _raw_trace=json.dumps({"traceEvents": events}).encode())
    ks = res.kernel_stats()
    assert ks.gpu_busy_share == pytest.approx(1.0)
    assert ks.earlier_work_share == pytest.approx(0.5)
    assert ks.profiled_work_share == pytest.approx(0.5)
    assert "GPU busy 100% of the profiled time: 50% on the profiled steps' kernels, 50% still finishing" in str(ks)
    # the parts as printed add up to the busy share as printed (03 read "busy 98%: 78% … 19%")
    odd = dataclasses.replace(ks, gpu_busy_share=0.9788, earlier_work_share=0.1940)
    assert "GPU busy 98% of the profiled time: 79% on the profiled steps' kernels, 19% still finishing" in str(odd)
    rows = res.timeline_rows()
    assert rows["GPU, earlier"] == [(0.0, 0.03, "launched before the profiled steps: queued")]  # 20-50 µs, clipped
    assert list(rows).index("GPU, earlier") == list(rows).index("GPU kernels") + 1
    assert "GPU, earlier" in {t.name for t in res.timeline_figure().data}


def test_top_ops_counts_the_kernels_of_the_profiled_steps_as_top_kernels_does():
    # key_averages() counts the kernels the warm-up steps launched too (on an H100: a pooling kernel at 12 calls in
    # top_ops, 9 in top_kernels): its kernel rows must agree with the trace's kernels launched inside a step.
    # "_ZN3foo3barEv" is a kernel whose name the trace keeps mangled while key_averages demangles it.
    cuda, cpu = DeviceType.CUDA, DeviceType.CPU
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 2, "dur": 1, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 10, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "warm_only", "ts": 6, "dur": 4, "args": {"correlation": 1}},
        {"ph": "X", "cat": "kernel", "name": "_ZN3foo3barEv", "ts": 7, "dur": 2, "args": {"correlation": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 20, "dur": 40},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "ts": 20, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 21, "dur": 2, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 25, "dur": 3, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "_ZN3foo3barEv", "ts": 30, "dur": 6, "args": {"correlation": 2}},
    ]

    def row(key, count, device_us, device_type, cpu_us=0.0):
        return SimpleNamespace(key=key, count=count, self_cpu_time_total=cpu_us, cpu_time_total=cpu_us,
                               self_device_time_total=device_us, device_time_total=device_us, device_type=device_type)

    averages = [row("ProfilerStep*", 1, 0.0, cpu, 40.0),
                row("aten::relu", 1, 3.0, cpu, 5.0),            # a CPU op: kept as it is
                row("forward", 1, 45.0, cuda),                  # the GPU's side of an annotation, not in the trace
                row("k", 2, 13.0, cuda),                        # 10 µs of it launched in the warm-up step
                row("warm_only", 1, 4.0, cuda),                 # launched only in the warm-up step
                row("foo::bar()", 2, 8.0, cuda)]
    res = profiling.ProfileResult(prof=SimpleNamespace(key_averages=lambda: averages), active_steps=1,
                                  _raw_trace=json.dumps({"traceEvents": events}).encode())
    ops = res.top_ops(10).set_index("op")
    kernels = res.top_kernels(10).set_index("kernel")
    # the trace's kernel names read as key_averages reads them, both shown by kernel_label (no parameter list)
    assert set(kernels.index) == {"k", "foo::bar"}
    for name in kernels.index:
        assert ops.loc[name, "calls"] == kernels.loc[name, "calls"] == 1
        assert ops.loc[name, "self_device_ms"] == ops.loc[name, "device_total_ms"] == kernels.loc[name, "total_us"] / 1e3
    assert "warm_only" not in ops.index
    assert ops.loc["aten::relu"].tolist() == [1, 0.005, 0.005, 0.003, 0.003]
    assert ops.loc["forward", "calls"] == 1 and ops.loc["forward", "self_device_ms"] == 0.045
    assert list(ops.index[:2]) == ["forward", "foo::bar"]  # sorted by the kernels' own times


def test_events_without_a_timestamp_are_left_out_and_the_kernels_kept_by_their_start():
    # Every CUDA API event at ts 0 (seen in a notebook on an H100): no launch to match, so the GPU work that began
    # after the first step began is kept; the untimed events would stretch the time axis to the epoch
    events = [
        {"ph": "X", "cat": "kernel", "name": "warm", "ts": 5, "dur": 10, "args": {"correlation": 1}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 20, "dur": 40},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 0, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 25, "dur": 10, "args": {"correlation": 2}},
    ]
    res = profiling.ProfileResult(prof=None, active_steps=1, _raw_trace=json.dumps(events).encode())
    assert [e["name"] for e in res.trace_events()] == ["ProfilerStep#2", "k"] and res.untimed_events == 1
    rows = res.timeline_rows()
    assert rows["GPU kernels"] == [(0.005, 0.01, "k")] and not rows["CUDA API"]
    assert "1 events came without a timestamp" in res.timeline_figure().layout.title.text


def test_a_profile_without_timestamps_is_taken_again(monkeypatch):
    untimed = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 0, "args": {"correlation": 1}}]
    timed = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 7, "dur": 1, "args": {"correlation": 1}}]
    traces = [untimed, timed]
    calls = []

    def once(step_fn, **kw):
        calls.append(kw)
        return profiling.ProfileResult(prof=None, active_steps=kw["active"], _raw_trace=json.dumps(traces.pop(0)).encode())

    monkeypatch.setattr(profiling, "_profile_once", once)
    res = profiling.profile_steps(lambda: None, active=3)
    assert len(calls) == 2 and res.untimed_events == 0 and [e["name"] for e in res.trace_events()] == ["k"]
    traces[:] = [untimed]
    res = profiling.profile_steps(lambda: None, active=3, attempts=1)  # the last attempt is returned, and says so
    assert len(calls) == 3 and res.untimed_events == 1
    with pytest.raises(ValueError, match="attempts"):
        profiling.profile_steps(lambda: None, attempts=0)


def test_a_trace_without_step_markers_keeps_every_kernel():
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 3, "dur": 1, "args": {"correlation": 1}}]
    res = profiling.ProfileResult(prof=None, active_steps=1, _raw_trace=json.dumps(events).encode())
    assert [e["name"] for e in res.trace_events()] == ["k"]


def test_kernel_stats_on_a_cpu_run(prof):
    ks = prof.kernel_stats()
    assert ks.kernels_per_step == 0 and "no GPU kernels" in str(ks)


def test_bad_schedule_is_refused():
    with pytest.raises(ValueError, match="active"):
        profiling.profile_steps(_work, active=0)


def test_python_hotspots_sees_the_python_side():
    def slow_python():
        return sum(i * i for i in range(20000))

    df = profiling.python_hotspots(slow_python, repeats=2, top=5)
    assert list(df.columns) == ["function", "calls", "self_ms", "cumulative_ms"]
    assert df["self_ms"].is_monotonic_decreasing
    assert any("genexpr" in f for f in df["function"])


def test_nvtx_range_shows_in_the_profiler():
    def step():
        with profiling.nvtx_range("my-phase"):
            _work()

    p = profiling.profile_steps(step, wait=0, warmup=1, active=1)
    assert any(e["name"] == "my-phase" for e in p.trace_events())


def test_no_trace_is_left_in_the_temporary_folder(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    res = profiling.profile_steps(_work, wait=0, warmup=0, active=1)
    assert res.trace_events() and res.kernel_stats() is not None
    assert not list((tmp_path / "tmp").iterdir())  # read, and gone at once: a killed kernel leaves nothing either
    kept = res.export_trace(tmp_path / "runs" / "kept.pt.trace.json")
    assert json.loads(kept.read_text())["traceEvents"]  # the trace the learner asked for stays where it was put
    assert not list((tmp_path / "tmp").iterdir())


def test_launch_split_tells_graph_replays_from_kernels_launched_one_by_one():
    # One step: a graph launch (correlation 3) replays two kernels; the optimizer launches one kernel by itself
    # (correlation 4) inside its annotation, which sits inside the step's annotation.
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": 10, "dur": 2, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "g1", "ts": 20, "dur": 30, "args": {"correlation": 3}},
        {"ph": "X", "cat": "kernel", "name": "g2", "ts": 50, "dur": 30, "args": {"correlation": 3}},
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "ts": 60, "dur": 20},
        {"ph": "X", "cat": "cpu_op", "name": "aten::_foreach_add_", "ts": 62, "dur": 5},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 63, "dur": 2, "args": {"correlation": 4}},
        {"ph": "X", "cat": "kernel", "name": "multi_tensor_apply", "ts": 80, "dur": 20, "args": {"correlation": 4}},
    ]
    res = profiling.ProfileResult(prof=None, active_steps=1, _raw_trace=json.dumps({"traceEvents": events}).encode())
    df = res.launch_split()
    assert list(df["how"]) == ["replayed in a CUDA graph", "launched one by one"]
    assert list(df["launched by"]) == ["the graph's one launch", "Optimizer.step#SGD.step"]  # the outermost
    assert list(df["kernels per step"]) == [2, 1] and list(df["share %"]) == pytest.approx([75, 25])
    # a tail of kernels that add up to almost nothing is one row
    tail = [{"ph": "X", "cat": "cpu_op", "name": f"aten::tiny{i}", "ts": 90 + i, "dur": 0.5} for i in range(3)]
    tail += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 90 + i, "dur": 0.2,
              "args": {"correlation": 10 + i}} for i in range(3)]
    tail += [{"ph": "X", "cat": "kernel", "name": f"t{i}", "ts": 100 + i, "dur": 0.01,
              "args": {"correlation": 10 + i}} for i in range(3)]
    res = profiling.ProfileResult(prof=None, active_steps=1,
                                  _raw_trace=json.dumps({"traceEvents": events + tail}).encode())
    df = res.launch_split()
    assert list(df["launched by"])[-1] == "3 others, each under 0.1% of the time" and len(df) == 3



def test_launch_split_profiling_shares_divide_the_gpu_us_as_the_table_shows_them():
    """03's split read "share 0.79" for a row of 248 µs, where 248 ÷ 31,170 (the sum of its column as shown) is 0.80:
    each share is now the row's GPU µs over their sum, both as the table shows them."""
    rows = [("cudaGraphLaunch", None, 29871.4), ("cudaLaunchKernel", "Optimizer.step#SGD.step", 854.3),
            ("cudaLaunchKernel", "aten::contiguous", 247.6), ("cudaLaunchKernel", "Torch-Compiled Region: 4/0", 168.2),
            ("cudaLaunchKernel", "aten::fill_", 28.46)]
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 0, "dur": 40_000}]
    for i, (call, by, us) in enumerate(rows):
        ts = 10 + 100 * i
        if by is not None:
            events.append({"ph": "X", "cat": "cpu_op", "name": by, "ts": ts, "dur": 50})
        events += [{"ph": "X", "cat": "cuda_runtime", "name": call, "ts": ts + 1, "dur": 2, "args": {"correlation": i}},
                   {"ph": "X", "cat": "kernel", "name": f"k{i}", "ts": 1000 + 10 * i, "dur": us,
                    "args": {"correlation": i}}]
    res = profiling.ProfileResult(prof=None, active_steps=1, _raw_trace=json.dumps({"traceEvents": events}).encode())
    df = res.launch_split()
    assert round(100 * 247.6 / sum(us for *_, us in rows), 2) == 0.79  # the case reported: from the unrounded µs
    shown = readable(df).shown
    us = list(shown["GPU µs per step"])
    assert us == ["29,871", "854", "248", "168", "28.5"]
    assert list(shown["share %"]) == ["95.8", "2.7", "0.80", "0.54", "0.091"]
    total = sum(float(u.replace(",", "")) for u in us)  # 31,169.5: the reader's sum of the column
    assert shown["share %"].iloc[2] == f"{100 * 248 / total:.2f}"  # the reader's division, to its last digit
    # the data, from the same shown µs, adds up to 100 and rounds as the table does (03 records the graphs' share)
    assert df["share %"].sum() == pytest.approx(100) and df["share %"].iloc[0] == pytest.approx(100 * 29871 / total)

def test_a_timeline_names_a_long_wait_and_keeps_a_short_copy_visible():
    """03's export drew the profiler's closing synchronize as a long orange bar with no name (a static export has
    no hover), and 27 copies of a few µs as bars under a pixel: the copies' row looked empty."""
    res = profiling.ProfileResult(prof=None, active_steps=1)
    res._trace = [
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 0, "dur": 5},
        {"cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 10, "dur": 90_000},
        {"cat": "kernel", "name": "k1", "ts": 20, "dur": 80_000},
        {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 30, "dur": 2},
    ]
    fig = res.timeline_figure()
    api = next(t for t in fig.data if t.name == "CUDA API")
    assert "cudaDeviceSynchronize" in list(api.text) and "" in list(api.text)  # the short launch stays unnamed
    copies = next(t for t in fig.data if t.name == "GPU copies")
    span_ms = 90.01
    assert copies.x[0] >= span_ms * 0.002 and copies.customdata[0] == pytest.approx(0.002)  # drawn wide, hover true
    assert "customdata" in copies.hovertemplate


def test_kernel_label_keeps_the_name_and_says_where_it_is_cut():
    label = profiling.kernel_label
    # the return type, anonymous namespaces and the parameter list go; the template arguments stay
    assert label("void at::<unnamed>::max_pool_forward_nhwc<c10::BFloat16, int>(const T1 *, int, T2, T2)") == \
        "at::max_pool_forward_nhwc<c10::BFloat16, int>"
    assert label("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>(T2 *, const T1 *)") \
        == "softmax_warp_forward<float, float, float, 10, false>"
    # a lambda's parameters inside the template stay: only the list that closes the name goes
    lam = ("void at::native::elementwise_kernel<128, 4, void at::native::gpu_kernel_impl<at::native::AddFunctor>"
           "(at::TensorIteratorBase &)::[lambda(int) (instance 1)]>(int, T3)")
    # and a return type inside the template arguments ("<128, 4, void at::…") goes too
    assert label(lam, width=200) == lam.removeprefix("void ").removesuffix("(int, T3)").replace(", void ", ", ")
    long = label(lam)
    assert len(long) == 72 and long.endswith("…") and long.startswith("at::native::elementwise_kernel<128, 4,")
    for short in ("triton_poi_fused_relu_0", "aten::mm", "ampere_sgemm_128x64_tn", "cudaLaunchKernel"):
        assert label(short) == short


def test_kernel_labels_keep_different_kernels_apart_and_demangle():
    """06's top-rung table showed two rows reading "at::native::elementwise_kernel<128, 4, …" alike once cut at the
    same width, and 03's a mangled cuDNN name (``_ZN17cutlass__5x_cudnn6KernelI…``)."""
    import shutil

    stem = ("void at::native::elementwise_kernel<(int)128, (int)4, void at::native::gpu_kernel_impl_nocast<"
            "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()"
            "() const::[lambda() (instance 7)]::operator ()() const::[lambda(c10::BFloat16) (instance 1)]>"
            "(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance {n})]>(int, T3)")
    a, b = stem.format(n=1), stem.format(n=2)
    la, lb, la2 = profiling.kernel_labels([a, b, a])
    assert la != lb and la == la2  # the same kernel twice reads the same; two kernels never alike
    assert len(la) <= 72 and "…" in la and la.startswith("at::native::elementwise_kernel<128,")
    assert "nstance 1)" in la and "nstance 2)" in lb  # the window where the two names first differ
    # the start stays as long as it can: 03 looks kernels up by a piece of it ("fprop")
    conv = ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1"
            "_execute_segment_k_off_kernel__5x_cudnn")
    one, two = profiling.kernel_labels([conv, conv.replace("128x128x64", "128x256x64")])
    assert one != two and len(one) == 72 and one.startswith("sm90_xmma_fprop_implicit_gemm")
    assert "128x128x64" in one and "128x256x64" in two
    assert "(int)1" not in la and "void" not in la
    assert profiling.kernel_labels(["triton_poi_fused_relu_0", "aten::mm"]) == ["triton_poi_fused_relu_0", "aten::mm"]
    mangled = "_ZN2at6native18elementwise_kernelILi128ELi4EEEvi"
    (read,) = profiling.kernel_labels([mangled])
    if shutil.which("c++filt"):
        assert read == "at::native::elementwise_kernel<128, 4>" and not read.startswith("_Z")
    else:
        assert read == mangled


def test_kernels_whose_names_differ_only_in_what_a_label_drops_are_still_told_apart():
    """03's and 06's tables showed two rows "sm90_xmma_wgrad_indexed_implicit_ge…xecute_segment_k_on_kernel__5x_cudnn":
    two kernels the profiler counted apart, whose names differ past what a label keeps."""
    wgrad = ("void sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64"
             "_execute_segment_k_on_kernel__5x_cudnn({p})")
    a, b = wgrad.format(p="cutlass::Params<1>"), wgrad.format(p="cutlass::Params<2>")
    la, lb, la2 = profiling.kernel_labels([a, b, a])
    assert la != lb and la == la2 and len(la) <= 72 and len(lb) <= 72
    assert la.startswith("sm90_xmma_wgrad_indexed") and "Params<1>" in la and "Params<2>" in lb
    # alone, a name still loses its parameter list
    assert profiling.kernel_labels(["void k<1>(int, float)"]) == ["k<1>"]
    # names no window of the width tells apart are numbered, never shown alike
    x, y = "k" * 30 + "a" + "k" * 30, "k" * 30 + "b" + "k" * 30
    lx, ly = profiling.kernel_labels([x, y], width=8)
    assert lx != ly and len(lx) <= 8 and len(ly) <= 8
