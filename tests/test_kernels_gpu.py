"""03_kernels' helpers on a real GPU (run by scripts/gpu_test.py; skipped without CUDA): launch counts,
the CUDA graph check and its known-wrong answers, the Triton softmax's speed, the CUDA extension, ncu."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

from helpers import models, ncu  # noqa: E402
from helpers.exercises import nb03  # noqa: E402
from helpers.kernels import attention, compile_modes, cuda_ext, graphs, launches  # noqa: E402


def test_launch_overhead_exceeds_the_kernel_itself():
    lo = launches.launch_overhead(launches=2000, repeats=3)
    assert lo.gpu_us_per_kernel is not None and 0 < lo.gpu_us_per_kernel < lo.host_us_per_launch


def test_sequential_launches_the_same_kernels_and_compile_fuses_the_chain():
    m = models.ReferenceCNN(32).cuda().eval()
    x = torch.randn(4, 3, 32, 32, device="cuda")
    plain = launches.count_launches(m, x)
    seq = launches.count_launches(models.as_sequential(m), x)
    assert plain.gpu_kernels == seq.gpu_kernels and plain.gpu_kernels >= plain.tensor_ops
    big = torch.randn(2**20, device="cuda")
    chain = torch.compile(launches.elementwise_chain)
    table = launches.compiled_launches(chain, big)
    assert len(table) == 1 and table.kernel.iloc[0].startswith("triton_poi_fused")
    eager = launches.count_launches(launches.elementwise_chain, big)
    fused = launches.count_launches(chain, big, compiled=True)
    assert eager.gpu_kernels == 5 and fused.gpu_kernels == 1


def test_cuda_graph_reference_passes():
    res = nb03.check_cuda_graph(nb03.graphed, device="cuda", seed=0)
    assert res.passed, res.message
    assert res.value is nb03.graphed  # the notebook carries on with a capturing function, passed or not


def _capture(model, example):
    static_x = example.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(g):
        static_y = model(static_x)
    return static_x, g, static_y


def test_cuda_graph_without_a_static_input_is_rejected():
    def no_static_input(model, example):
        static_x, g, static_y = _capture(model, example)

        def run(x):  # replays without copying x in: always the capture's input
            g.replay()
            return static_y.clone()
        return run

    res = nb03.check_cuda_graph(no_static_input, device="cuda", seed=1)
    assert res.status == "failed" and "captured with" in res.message and "copy each new input" in res.message


def test_cuda_graph_handing_out_its_output_buffer_is_rejected():
    def no_clone(model, example):
        static_x, g, static_y = _capture(model, example)

        def run(x):
            static_x.copy_(x)
            g.replay()
            return static_y  # the next replay overwrites it
        return run

    res = nb03.check_cuda_graph(no_clone, device="cuda", seed=2)
    assert res.status == "failed" and "static_y.clone()" in res.message


def test_the_eager_model_with_no_graph_is_rejected_however_the_timing_falls():
    # tried as a learner would: it gives the right outputs, and noise once timed it "1.0× faster than eager"
    res = nb03.check_cuda_graph(lambda model, example: (lambda x: model(x).detach()), device="cuda", seed=3)
    assert res.status == "failed" and "replayed no CUDA graph" in res.message, res.message


def test_a_graph_captured_again_on_every_call_is_not_clearly_faster():
    def capture_each_call(model, example):
        def run(x):
            static_x, g, static_y = _capture(model, x)
            g.replay()
            return static_y.clone()
        return run

    res = nb03.check_cuda_graph(capture_each_call, device="cuda", seed=4)
    assert res.status == "failed" and "not clearly faster" in res.message, res.message


def test_graph_launches_and_speedup_of_the_reference_and_of_eager_against_itself():
    m = models.small_mlp().cuda().eval()
    x = torch.randn(64, 256, device="cuda")
    run = nb03.graphed(m, x)
    with torch.no_grad():
        assert graphs.graph_launches(run, x) == 1 and graphs.graph_launches(m, x) == 0
        real = graphs.graph_speedup(lambda: m(x), lambda: run(x), rounds=9)
        same = graphs.graph_speedup(lambda: m(x), lambda: m(x), rounds=9)
    assert real.separated and real.speedup >= nb03.MIN_GRAPH_SPEEDUP and real.low <= real.speedup <= real.high
    # the bound is eager's time over the GPU's own: a replay that also copies its input in cannot beat it
    assert 0 < real.kernel_us < real.graph_us and real.speedup < real.bound and 0 < real.gpu_busy_pct < 100
    # the replay runs the forward's kernels and the copies in and out; what they leave of its time is per-kernel start
    assert real.replay_kernels >= graphs.kernel_profile(m, x)[1] + 1 and real.replay_kernel_us >= real.kernel_us
    assert 0 < real.gap_us < 10 and "between one kernel and the next" in str(real)
    assert not same.separated and same.speedup < nb03.MIN_GRAPH_SPEEDUP  # the same function, rounds overlap


def test_triton_softmax_reference_is_correct_and_fast():
    res = nb03.check_fused_softmax(nb03.fused_softmax, device="cuda", seed=0)
    assert res.passed and "faster than the unfused ops" in res.message, res.message


def test_bias_relu_pool_exercise_on_a_gpu_a_learners_kernel_and_the_reference_pass_and_beat_the_unfused_ops():
    from test_bias_relu_pool_exercise import _learners  # the kernel the notebook's skeleton asks for

    for fn in (_learners(0), nb03.bias_relu_pool):
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        res = nb03.check_bias_relu_pool(fn, device="cuda", dtype=dtype, seed=0)
        assert res.passed and "faster than the three unfused ops" in res.message, res.message
    res = nb03.check_bias_relu_pool(_learners(2), device="cuda", seed=1)  # NCHW strides assumed: wrong
    assert res.status == "failed" and "read x through its strides" in res.message, res.message


def test_fast_step_exercise_on_a_gpu_the_reference_replays_graphs_and_beats_eager_and_default_mode_is_refused():
    dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    res = nb03.check_fast_step(lambda m, o: nb03.fast_step(m, o, dtype=dtype), device="cuda", dtype=dtype,
                               image_size=64, batch=64, seed=0)
    assert res.passed and "replaying CUDA graphs" in res.message, res.message

    def default_mode(model, opt):  # compiled, channels_last, but nothing captured
        model.to(memory_format=torch.channels_last)
        compiled = torch.compile(model)

        def step(x, y):
            with torch.autocast("cuda", dtype=dtype):
                loss = torch.nn.functional.cross_entropy(compiled(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.detach()
        return step

    res = nb03.check_fast_step(default_mode, device="cuda", dtype=dtype, image_size=64, batch=64, seed=1)
    assert res.status == "failed" and "replays no CUDA graph" in res.message, res.message


def test_cuda_extension_builds_and_matches_pytorch():
    ok, why = cuda_ext.available()
    if not ok:
        pytest.skip(why)
    ext = cuda_ext.build()
    for dtype in (torch.float32, torch.bfloat16, torch.float16):  # fp16: the course's precision on a T4
        x = torch.randn(2, 3, 6, 10, device="cuda", dtype=dtype)
        torch.testing.assert_close(ext.module.relu_maxpool2x2(x), cuda_ext.reference(x))
    with pytest.raises(RuntimeError, match="even"):
        ext.module.relu_maxpool2x2(torch.randn(1, 1, 5, 4, device="cuda"))


def test_ncu_table_has_counters_where_ncu_runs():
    res = ncu.kernel_table(batch=2, image_size=32)
    if ncu.find_ncu() is None:
        assert res.source == "torch.profiler"
        pytest.skip("ncu is not on the PATH")
    assert res.source == "ncu", res.message
    assert not [p for p in res.command if p.startswith("/")]  # the command as typed by hand: no path of this machine
    assert (res.table.duration_us > 0).all() and res.table.sm_pct.notna().all()
    assert "convolution" in set(res.table.kind)
    # the detail counters: a pool kernel writes its output and, for the backward pass, an int64 index per output
    assert res.table.occupancy_pct.notna().all() and (res.table.dram_write_bytes >= 0).all(), res.message


def test_attention_uses_a_fused_kernel_on_the_gpu():
    q = torch.randn(1, 2, 128, 64, device="cuda", dtype=torch.bfloat16)
    assert attention.sdpa_backend(q, q, q) != "math (unfused ops)"
    df = attention.sweep([128, 256], batch=1, heads=2, head_dim=64, repeats=2)
    assert (df["naive peak GiB"] > df["SDPA peak GiB"]).all()
    total_gib = torch.cuda.get_device_properties(0).total_memory / 2**30
    assert 0 < df.attrs["headroom_gib"] <= total_gib  # the line the chart draws: what the sweep could still allocate


def test_fused_relu_pool_on_the_gpu_matches_pytorch_and_compiles():
    from helpers.kernels import relu_pool_triton as rp

    x = torch.randn(8, 64, 56, 56, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
    mine, ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, want = rp.relu_maxpool2x2(mine), rp.relu_maxpool2x2_reference(ref)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    grad = torch.randn_like(want)
    y.backward(grad)
    want.backward(grad)
    torch.testing.assert_close(mine.grad, ref.grad, rtol=0, atol=0)
    # torch.compile calls the custom ops as they are and differentiates through their registered backward
    m = rp.fuse_relu_pool(models.ReferenceCNN(32).cuda().to(memory_format=torch.channels_last))
    r = models.ReferenceCNN(32).cuda().to(memory_format=torch.channels_last)
    r.load_state_dict(m.state_dict())
    xs = torch.randn(4, 3, 32, 32, device="cuda").contiguous(memory_format=torch.channels_last)
    compiled = torch.compile(m)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out, want = compiled(xs), r(xs)
    torch.testing.assert_close(out.float(), want.float(), rtol=2e-2, atol=2e-2)
    out.float().sum().backward()
    assert all(p.grad is not None for p in m.parameters())


def test_a_compiled_first_call_on_a_gpu_counts_its_triton_kernels_and_their_seconds():
    def f(x):
        return torch.relu(x * 2 + 1)  # one fused pointwise kernel once compiled

    x = torch.randn(4096, device="cuda")
    t = compile_modes.time_call(torch.compile(f), x, label="compiled", warmup=1, repeats=3)
    assert t.kernels >= 1 and t.kernel_compile_s >= 0 and t.kernel_tuning_s >= 0
    assert t.kernel_compile_s + t.kernel_tuning_s <= t.compile_s
    assert compile_modes.time_call(f, x, label="eager", warmup=1, repeats=3).kernels is None


def test_compile_in_practice_on_a_gpu_break_gain_recompiles_and_what_graphs_capture():
    from helpers import profiling, train
    from helpers.kernels import compile_practice as cp

    x = torch.randn(64, 256, device="cuda")
    g = cp.break_gain(cp.ScaleLoggedMLP, nb03.ScaleLoggedNoBreak, x, rounds=3, calls=20)
    assert g.graphs == (2, 1) and g.broken_ms > 0 and g.fixed_ms > 0 and g.low <= g.speedup <= g.high
    mlp = models.small_mlp().cuda().eval()
    batches = [torch.randn(n, 256, device="cuda") for n in (64, 48, 64, 17)]
    counts = {v: cp.compiles_over(mlp, batches, variant=v, repeats=1).compiles for v in cp.VARIANTS}
    assert counts == {"dynamic=False": 3, "default": 2, "mark_dynamic": 1, "padded": 1}  # Inductor: as Dynamo alone
    cfg = train.TrainConfig(batch_size=8, image_size=32, data="gpu", dtype="bf16", compile=True,
                            compile_mode="reduce-overhead")
    trainer = train.step_only_trainer(cfg)
    for _ in range(3):
        trainer.step(measure=False)
    split = profiling.profile_steps(lambda: trainer.step(measure=False), wait=1, warmup=1, active=2).launch_split()
    hows = set(split["how"])
    assert hows == {"replayed in a CUDA graph", "launched one by one"}, split  # the optimizer stays eager
    assert (split["share %"].sum() - 100) < 1e-6


def test_nsight_systems_where_installed_or_one_line_that_says_why_not():
    """Our GPU nodes have no nsys (the line says so); where a CUDA toolkit brings one, its tables come back with the
    kernels the same steps launch, or the line says how many it lost."""
    from helpers import nsys

    res = nsys.measure(steps=3, batch=16, image_size=64, timeout_s=240)
    assert res.state in nsys.STATES and res.line and "\n" not in res.line
    if res.state == "ok":
        assert res.stats is not None and res.stats.kernel_count > 0
    elif res.state == "not installed":
        assert res.stats is None
