"""07_transformer's ladder, its FP8 rung's gate, activations kept by a checkpointing policy, and the step's kernels
on the roofline (helpers.gpt.ladder, .fp8, .activations, .step_kernels): on a CPU, with a tiny GPT."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
import types

import pytest
import torch
from torch import nn

from helpers import bench, env, profiling, tables
from helpers.figure_check import problems
from helpers.gpt import activations, fp8, ladder, step_kernels
from helpers.gpt.flops import flops_breakdown, flops_per_token
from helpers.gpt.model import GPT, MATMUL_OPS, GPTConfig, op_name, saves_matmuls, unique_params

TINY = GPTConfig(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=64)
SETUP = ladder.LadderSetup(TINY, seq_len=16, global_batch=4, micro_batch=1, large_micro_batch=2, warmup_steps=1,
                           steps=3, lr=3e-3)
CPU_CEIL = bench.Ceilings("test CPU", matmul_tflops=0.1, matmul_dtype="float32", matmul_n=64, copy_gb_per_s=10.0,
                          copy_bytes=1, bounds=False)
GPU_CEIL = bench.Ceilings("test GPU", matmul_tflops=800.0, matmul_dtype="bfloat16", matmul_n=8192,
                          copy_gb_per_s=3000.0, copy_bytes=1, datasheet_tflops=989.4, datasheet_gpu="NVIDIA H100 SXM")


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---- the rungs and the setup --------------------------------------------------------------------------------------

def test_each_rung_changes_one_knob_of_the_step():
    rungs = ladder.ladder_rungs(SETUP)
    assert [r.key for r in rungs] == ["eager_fp32", "bf16", "sdpa", "fused_adamw", "compile", "large_micro_batch",
                                      "selective_checkpoint", "fp8"]
    config = ladder.RungConfig()
    assert (config.dtype, config.attention, config.fused_adamw, config.compile) == ("fp32", "manual", False, False)
    for r in rungs[1:]:
        after = dataclasses.replace(config, **r.changes)
        changed = [f.name for f in dataclasses.fields(config) if getattr(after, f.name) != getattr(config, f.name)]
        assert len(changed) == 1, (r.name, changed)
        config = after
    assert rungs[5].changes == {"micro_batch": SETUP.large_micro_batch}


def test_the_setups_accumulate_whole_micro_batches_to_one_batch():
    full = ladder.LadderSetup.at_scale("full", gpu_gib=80.0)
    assert (full.cfg, full.seq_len, full.global_batch) == (GPTConfig.full(), 1024, 64)
    assert (full.micro_batch, full.large_micro_batch) == (8, 32)  # the MFU rung: micro-batches of 32 × 1,024 tokens
    small = ladder.LadderSetup.at_scale("full", gpu_gib=15.0)  # a T4: eager fp32 at micro-batch 8 would not fit
    assert small.global_batch % small.large_micro_batch == 0 and small.micro_batch < full.micro_batch
    smoke = ladder.LadderSetup.at_scale("smoke")
    assert smoke.cfg == GPTConfig.smoke() and smoke.tokens_per_step == smoke.global_batch * smoke.seq_len
    with pytest.raises(ValueError, match="does not divide the global batch"):
        dataclasses.replace(SETUP, micro_batch=3)


def test_plan_says_what_runs_where(monkeypatch):
    cpu = torch.device("cpu")
    assert ladder.plan(ladder.RungConfig(), cpu) == (None, "", None)
    monkeypatch.setattr(env, "autocast_dtype", lambda dtype, dev: None)  # a CPU without bf16 instructions
    low, runs_as, skip = ladder.plan(ladder.RungConfig(dtype="bf16"), cpu)
    assert low is None and "no bf16 instructions" in skip and "fp32" in skip
    monkeypatch.setattr(env, "autocast_dtype", lambda dtype, dev: torch.float16)  # a GPU without bf16: a T4
    low, runs_as, skip = ladder.plan(ladder.RungConfig(dtype="bf16"), cpu)
    assert low is torch.float16 and "GradScaler" in runs_as and skip is None
    monkeypatch.setattr(env, "autocast_dtype", lambda dtype, dev: torch.bfloat16)
    low, runs_as, skip = ladder.plan(ladder.RungConfig(dtype="bf16", fp8=True), cpu)
    assert low is torch.bfloat16 and runs_as == "" and "no GPU here" in skip


# ---- the FP8 rung's gate --------------------------------------------------------------------------------------------

def test_fp8_is_skipped_without_a_gpu_in_one_line():
    why = fp8.fp8_unavailable("cpu")
    assert why and "\n" not in why and "8.9" in why


def test_fp8_is_skipped_on_a_gpu_older_than_ada(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (7, 5))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "Tesla T4")
    why = fp8.fp8_unavailable("cuda")
    assert "7.5" in why and "no FP8" in why and "\n" not in why


def test_fp8_is_skipped_without_torchao_and_says_what_to_install(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "NVIDIA H100 80GB HBM3")
    monkeypatch.setitem(sys.modules, "torchao", None)  # import torchao raises ImportError
    monkeypatch.setitem(sys.modules, "torchao.float8", None)
    why = fp8.fp8_unavailable("cuda")
    assert "torchao" in why and "pip install torchao" in why and "\n" not in why


def test_fp8_runs_where_hopper_and_torchao_are(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev=None: "NVIDIA H100 80GB HBM3")
    fake = types.ModuleType("torchao.float8")
    calls = []

    def convert(module, *, module_filter_fn=None, config=None):
        calls.append([fqn for fqn, m in module.named_modules() if module_filter_fn(m, fqn)])
        return module

    fake.convert_to_float8_training = convert
    monkeypatch.setitem(sys.modules, "torchao", types.ModuleType("torchao"))
    monkeypatch.setitem(sys.modules, "torchao.float8", fake)
    assert fp8.fp8_unavailable("cuda") is None
    fp8.to_float8(GPT(GPTConfig.smoke()))
    # every linear layer of the blocks, not the output layer (tied to the token table), nothing that is not Linear
    assert calls[0] == [f"blocks.{i}.{n}" for i in range(2) for n in ("attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                                                      "mlp.c_proj")]
    assert not fp8.linear_filter(nn.Linear(10, 32), "x")  # _scaled_mm takes sides that are multiples of 16


@pytest.mark.skipif(importlib.util.find_spec("torchao") is None, reason="torchao is not installed here")
def test_the_fp8_rung_trains_where_torchao_imports(monkeypatch):
    monkeypatch.setattr(fp8, "fp8_unavailable", lambda dev: None)  # the gate passed: what runs after it
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    rung = ladder.ladder_rungs(SETUP)[-1]
    result, _ = lad.train(rung, ladder.RungConfig(attention="sdpa", fp8=True, micro_batch=1))
    assert result.ran, result.not_run
    bf16, _ = lad.train(rung, ladder.RungConfig(attention="sdpa", micro_batch=1))
    assert len(result.losses) == SETUP.warmup_steps + SETUP.steps
    # FP8's rounding moves the curve a little, not away: the judge's tolerance is what a change may move it
    assert result.losses == pytest.approx(bf16.losses, rel=ladder.LOSS_TOLERANCE)


# ---- training a rung ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def climbed():
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    rungs = ladder.ladder_rungs(SETUP)
    lines = []
    lad.climb(rungs, on_result=lambda r: lines.append(str(r)))
    return lad, lines


def test_every_rung_that_can_run_on_a_cpu_runs_from_the_same_start(climbed):
    lad, lines = climbed
    by_key = {r.key: r for r in lad.results}
    assert not by_key["fp8"].ran and "no GPU" in by_key["fp8"].not_run
    assert by_key["bf16"].ran == (env.autocast_dtype(torch.bfloat16, "cpu") is not None)
    for key in ("eager_fp32", "sdpa", "fused_adamw", "compile", "large_micro_batch", "selective_checkpoint"):
        r = by_key[key]
        assert r.ran, (key, r.not_run)
        assert len(r.losses) == SETUP.warmup_steps + SETUP.steps and r.step.repeats == SETUP.steps
        assert r.tokens_per_s == pytest.approx(SETUP.tokens_per_step / (tables.as_shown(r.step_ms_shown) / 1e3))
        assert r.peak_mem_gib is None  # no allocator on a CPU
    # the same weights, the same batches, the same global batch: fp32 rungs compute the same losses (float order aside)
    base = by_key["eager_fp32"].losses
    for key in ("sdpa", "fused_adamw", "compile", "large_micro_batch", "selective_checkpoint"):
        assert by_key[key].losses == pytest.approx(base, rel=1e-4, abs=1e-5), key
    assert base[-1] < base[0]  # and it learns
    assert len(lines) == len(lad.results) and all("\n" not in r.not_run for r in lad.results if not r.ran)


def test_the_top_is_the_last_rung_kept_and_each_builds_on_it(climbed):
    lad, _ = climbed
    kept = [r for r in lad.results if r.kept]
    assert kept[0].key == "eager_fp32" and lad.top is kept[-1]
    assert lad.top_without_fp8 is kept[-1]  # FP8 did not run here
    assert lad.runner is not None and lad.runner.config == kept[-1].config
    for before, r in zip(lad.results, lad.results[1:]):
        if r.ran:
            assert r.built_on is not None and r.over_top_x is not None
    loss = lad.runner.step()
    assert torch.isfinite(loss)  # the kept runner trains on: what the profiler runs


def test_the_table_and_the_loss_figure_read(climbed):
    lad, _ = climbed
    df = lad.table()
    assert list(df.index) == [r.name for r in lad.results]
    html = tables.readable(df)._repr_html_()
    assert tables.unreadable_cells(html) == []
    assert "a CPU has no data sheet peak" in html
    fig = lad.loss_figure()
    assert problems(fig) == []
    assert len(fig.data) == sum(r.ran for r in lad.results)
    # each rung its own colour and marker: 07's curves lay on each other in two near-identical reds
    assert len({t.line.color for t in fig.data}) == len({t.marker.symbol for t in fig.data}) == len(fig.data)
    floor = lad.source.entropy_rate()  # the Markov chain's: the line the curves are read against, inside the axis
    assert [round(sh.y0, 6) for sh in fig.layout.shapes] == [round(floor, 6)]
    lo, hi = fig.layout.yaxis.range
    assert lo < floor < hi and all(lo < v < hi for r in lad.results for v in r.losses)
    assert any(f"still above the chain's best possible loss ({floor:.2f})" in line for line in lad.summary_lines())
    assert all(isinstance(line, str) and "nan" not in line.lower() for line in lad.summary_lines())


def test_the_selective_rung_under_compile_computes_what_eager_does():
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    rung = ladder.ladder_rungs(SETUP)[6]
    eager, _ = lad.train(rung, ladder.RungConfig(attention="sdpa", checkpoint="selective", micro_batch=2))
    compiled, _ = lad.train(rung, ladder.RungConfig(attention="sdpa", checkpoint="selective", compile=True,
                                                    micro_batch=2))
    assert eager.ran and compiled.ran, compiled.not_run
    assert eager.losses[-1] < eager.losses[0] - 0.05  # it trains
    assert compiled.losses == pytest.approx(eager.losses, rel=1e-5)
    with pytest.raises(ValueError, match="does not divide the global batch"):
        lad.train(rung, ladder.RungConfig(micro_batch=3))


def test_fp16_with_a_scaler_trains_like_fp32(monkeypatch):
    """Where bf16 runs as fp16 (a T4), the step scales the loss: its curve stays with fp32's."""
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    rung = ladder.ladder_rungs(SETUP)[1]
    fp32, _ = lad.train(rung, ladder.RungConfig(attention="sdpa", micro_batch=2))
    monkeypatch.setattr(ladder, "plan", lambda config, dev: (torch.float16, "fp16 with a GradScaler", None))
    fp16, _ = lad.train(rung, ladder.RungConfig(dtype="bf16", attention="sdpa", micro_batch=2))
    assert fp16.ran and fp16.runs_as == "fp16 with a GradScaler", fp16.not_run
    assert fp16.losses == pytest.approx(fp32.losses, rel=0.01)
    assert "[runs as fp16 with a GradScaler]" in str(fp16)


def test_a_rung_that_fails_says_why_in_one_line_and_the_ladder_goes_on(monkeypatch):
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    rungs = ladder.ladder_rungs(SETUP)

    def broken(*args, **kwargs):
        raise RuntimeError("the compiler gave up\nwith a long trace")

    lad.climb(rungs[:1])
    monkeypatch.setattr(torch, "compile", broken)
    (failed,) = lad.climb([rungs[4]])
    assert not failed.ran and failed.not_run == "RuntimeError: the compiler gave up" and not failed.kept
    assert lad.top.key == "eager_fp32"
    (after,) = lad.climb([rungs[2]])  # the next rung builds on the top
    assert after.built_on == "eager fp32" and lad.config_for(rungs[2]).compile is False


# ---- judging ----------------------------------------------------------------------------------------------------------

def _result(tps, spread=1.0, losses=(3.0, 2.0, 1.0), key="x", **kw):
    step = bench.Measurement(median_ms=1e3 / tps, q1_ms=1e3 / tps * (1 - spread / 200),
                             q3_ms=1e3 / tps * (1 + spread / 200), min_ms=0, max_ms=0, repeats=5)
    return ladder.RungResult(key=key, name=key, adds="", config=ladder.RungConfig(), losses=tuple(losses), step=step,
                             tokens_per_s=tps, **kw)


def test_judge_keeps_what_is_not_slower_beyond_the_noise_and_trains_as_well():
    top = _result(1000.0, key="top")
    assert ladder.judge(_result(1500.0), top).kept
    within = ladder.judge(_result(985.0, spread=2.0), top)  # 1.5% slower, 2% spread: noise, no verdict
    assert within.kept and "within the spread" in within.verdict
    # the words say which way it moved (07 read "no slower (within the spread): 0.94×" beside an 18.4% spread)
    noisy = ladder.judge(_result(940.0, spread=18.4), top)
    assert noisy.kept and noisy.verdict.startswith("6% slower, within the spread: 0.94× the tokens/s of 'top'")
    assert "no slower" not in noisy.verdict
    assert ladder.judge(_result(1003.0, spread=2.0), top).verdict.startswith("as fast, within the spread: 1.00×")
    assert ladder.judge(_result(1016.0, spread=2.0), top).verdict.startswith("2% faster, within the spread: 1.02×")
    slower = ladder.judge(_result(900.0, spread=2.0), top)
    assert not slower.kept and "slower" in slower.verdict and "builds on 'top'" in slower.verdict
    worse = ladder.judge(_result(2000.0, losses=(3.0, 2.0, 1.1)), top)  # faster, but its loss ends 10% higher
    assert not worse.kept and worse.verdict.startswith("trains worse")
    first = ladder.judge(_result(10.0), None)
    assert first.kept and "baseline" in first.verdict
    skipped = ladder.judge(ladder.RungResult(key="fp8", name="fp8", adds="", config=ladder.RungConfig(),
                                             not_run="no GPU here"), top)
    assert not skipped.kept and "not run: no GPU here" in skipped.verdict


def test_mfu_against_the_data_sheet_and_the_measured_ceiling():
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=GPU_CEIL)
    r = _result(150_000.0)
    fpt = flops_per_token(TINY, seq_len=SETUP.seq_len)
    # each share within the rounding of a rate and a peak printed to three figures of the unrounded one
    assert lad.mfu(r) == pytest.approx(150_000 * fpt / 989.4e12, rel=5e-3)
    assert lad.mfu(r, against="measured") == pytest.approx(150_000 * fpt / 800e12, rel=5e-3)
    lad.flops_per_token = 2 * fpt  # the learner's count, once it passes, is what MFU divides
    assert lad.mfu(r) == pytest.approx(2 * 150_000 * fpt / 989.4e12, rel=5e-3)
    assert "NVIDIA H100 SXM data sheet" in lad.mfu_text(r)
    # the shares follow from the rate as printed (07 read "433 TFLOP/s … 43.7%", where 433 ÷ 989 is 43.8%), and the
    # rate is the product of the two figures printed before it (07 read "521,082 tok/s × 0.855 GFLOP per
    # token = 445 TFLOP/s", where the product is 445.5): 150,000 × 2.88 is 432, not the unrounded 432.9
    lad.flops_per_token = 2.8842e9  # unrounded, 150,000 of them a second are 432.6 TFLOP/s
    text = lad.mfu_text(r)
    assert "150,000 tok/s × 2.88 GFLOP per token = 432.0 TFLOP/s" in text and "54.0% of the 800 TFLOP/s" in text
    assert "43.7% of the NVIDIA H100 SXM" in text
    # the rate to a tenth of a TFLOP/s, and the table's MFU columns (07's recorded figure too) the sentence's shares,
    # which are also the table's tok/s × GFLOP per token ÷ the peak: 371,579 × 0.855 is 317.7 TFLOP/s, 39.7% of 800
    # (a rate printed to three figures, "318", had given 39.8% beside the table's tok/s, whose share is 39.7%)
    lad.flops_per_token = 0.855e9
    r = _result(371_579.0)
    text = lad.mfu_text(r)
    assert "371,579 tok/s × 0.855 GFLOP per token = 317.7 TFLOP/s" in text and "39.7% of the 800 TFLOP/s" in text
    lad.results.append(r)
    row = lad.table().iloc[0]
    assert round(row["MFU % of measured"], 1) == 39.7 == round(100 * lad.mfu(r, against="measured"), 1)
    assert round(row["MFU % of data sheet"], 1) == round(100 * 371_579 * 0.855e9 / 989.4e12, 1) == 32.1
    cpu = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    assert cpu.mfu(r) is None and "not meaningful" in cpu.mfu_text(r)


# ---- activations kept and recomputed --------------------------------------------------------------------------------

def test_op_names_and_the_matmul_policy():
    assert op_name(torch.ops.aten.mm.default) == "mm" and op_name("aten.gelu.default") == "gelu"
    assert saves_matmuls(torch.ops.aten.addmm.default) and not saves_matmuls(torch.ops.aten.gelu.default)
    assert {"_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_for_cpu", "_scaled_mm"} <= MATMUL_OPS


def test_a_policy_keeps_less_than_none_and_recomputes_what_it_does_not_keep():
    record = activations.block_ops(GPTConfig.smoke(), batch=2, seq_len=64)
    fwd = sum(op.flops for op in record.ops)
    d, T, B = 64, 64, 2
    assert fwd == pytest.approx(B * T * 2 * 12 * d * d + 4 * B * GPTConfig.smoke().n_head * T * T * 16)
    matmuls = activations.policy_cost(saves_matmuls, record=record)
    assert matmuls.recompute_flops == 0 and matmuls.block_bytes < matmuls.kept_bytes < matmuls.none_bytes
    nothing = activations.policy_cost(lambda op: False, record=record)
    assert nothing.kept_bytes == nothing.block_bytes == B * T * d * 4  # the block's input only
    assert nothing.recompute_share == pytest.approx(1 / 3)  # the whole forward again: a third of training
    everything = activations.policy_cost(lambda op: True, record=record)
    assert everything.kept_bytes > matmuls.kept_bytes and everything.recompute_flops == 0
    table = matmuls.table()
    assert set(table.policy) == {"kept", "recomputed"} and "gelu" in set(table.op[table.policy == "recomputed"])
    assert tables.unreadable_cells(tables.readable(table)._repr_html_()) == []
    assert "69%" in matmuls.sentence() and "recomputes no matrix product" in matmuls.sentence()


def test_selective_checkpointing_trains_as_no_checkpointing():
    torch.manual_seed(0)
    model = GPT(GPTConfig.smoke())
    x = torch.randint(0, 256, (2, 64))
    grads = []
    for ck in ("none", "selective"):
        model.checkpoint, model.saves = ck, (lambda op: op_name(op) == "mm")  # keeps mm, recomputes attention
        model.zero_grad(set_to_none=True)
        model(x, x)[1].backward()
        grads.append([p.grad.clone() for p in unique_params(model)])
    assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_fused_attention_keeps_far_less_at_long_sequences():
    df = activations.attention_memory([32, 64, 128], cfg=GPTConfig.smoke(), device="cpu")
    assert list(df.index) == [32, 64, 128] and "manual peak MiB" not in df  # no allocator on a CPU
    assert (df["sdpa kept MiB"] < df["manual kept MiB"]).all()
    assert activations.growth(df, "sdpa kept MiB") == pytest.approx(1.0, abs=0.05)  # grows with T
    assert activations.growth(df, "manual kept MiB") > 1.2  # the T×T scores: faster than T
    assert df["manual ÷ fused kept ×"].is_monotonic_increasing


# ---- the step's kernels on the roofline -----------------------------------------------------------------------------

def test_the_groups_flops_add_up_to_the_convention_with_attention_halved():
    cfg = GPTConfig.full()
    costs = step_kernels.step_costs(cfg, seq_len=1024, global_batch=64, micro_batch=32)
    tokens = 64 * 1024
    matmul_params = cfg.n_layer * 12 * cfg.n_embd ** 2 + cfg.vocab_size * cfg.n_embd
    assert costs[step_kernels.GEMM][0] == pytest.approx(6 * matmul_params * tokens)
    parts = flops_breakdown(cfg, seq_len=1024)
    assert costs[step_kernels.ATTENTION][0] == pytest.approx(parts.attention_flops * tokens / 2)  # causal
    # the weights are read once per micro-batch: two micro-batches of 32 move more bytes than one of 64
    two = step_kernels.step_costs(cfg, seq_len=1024, global_batch=64, micro_batch=32)[step_kernels.GEMM][1]
    one = step_kernels.step_costs(cfg, seq_len=1024, global_batch=64, micro_batch=64)[step_kernels.GEMM][1]
    assert two > one
    manual = step_kernels.step_costs(cfg, seq_len=1024, global_batch=64, micro_batch=32, attention="manual")
    assert step_kernels.ATTENTION not in manual and manual[step_kernels.GEMM][0] > costs[step_kernels.GEMM][0]


def test_kernel_names_go_to_their_group():
    assert step_kernels.kernel_group("void pytorch_flash::flash_fwd_kernel<...>", "other") == step_kernels.ATTENTION
    assert step_kernels.kernel_group("fmha_cutlassB_bf16_aligned_64x64", "other") == step_kernels.ATTENTION
    assert step_kernels.kernel_group("aten::_scaled_dot_product_flash_attention_for_cpu", "other") == \
        step_kernels.ATTENTION
    assert step_kernels.kernel_group("sm90_xmma_gemm_bf16bf16_bf16f32", "GEMM") == step_kernels.GEMM
    assert step_kernels.kernel_group("triton_poi_fused_gelu_0", "elementwise") is None


def test_a_profiled_cpu_step_is_placed_on_the_roofline(climbed):
    lad, _ = climbed
    prof = profiling.profile_steps(lad.runner.step, wait=1, warmup=1, active=2)
    cfg = lad.runner.config
    kernels = step_kernels.step_roofline(prof, TINY, seq_len=SETUP.seq_len, global_batch=SETUP.global_batch,
                                         micro_batch=cfg.micro_batch, bytes_per_value=4, attention=cfg.attention)
    names = {p.name for p in kernels.points}
    assert step_kernels.GEMM in names
    assert sum(kernels.shares.values()) + sum(kernels.unplaced.values()) == pytest.approx(100)
    html = step_kernels.readable_kernels(kernels, CPU_CEIL)._repr_html_()
    assert tables.unreadable_cells(html) == []


def test_the_learning_rate_rises_over_the_warm_up_and_every_rung_takes_it_from_its_own_first_step(monkeypatch):
    setup = dataclasses.replace(SETUP, lr_warmup=2)
    assert [setup.lr_at(i) for i in range(4)] == [1.5e-3, 3e-3, 3e-3, 3e-3] and SETUP.lr_at(0) == 3e-3
    assert ladder.LadderSetup.at_scale("full", gpu_gib=80).lr_warmup == 4  # GPT-2 small: no step at 6e-4 cold
    with pytest.raises(ValueError, match="warm-up steps"):
        dataclasses.replace(SETUP, lr_warmup=-1)
    seen: list[float] = []
    real_step = torch.optim.AdamW.step

    def step(self, *a, **k):
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    lad = ladder.Ladder(setup, device="cpu", ceilings=CPU_CEIL)
    rungs = ladder.ladder_rungs(setup)
    for rung in rungs[:2]:  # eager fp32, then bf16 (which runs as fp32 or says why): each from its own step 0
        seen.clear()
        lad.train(rung, ladder.RungConfig(micro_batch=setup.micro_batch))
        # a rung whose timed steps spread widely has them timed again (bench.steadier), past the warm-up: on a
        # loaded CPU the first rung took three more steps at the full rate, and the next still began at half of it
        assert seen[:4] == [1.5e-3, 3e-3, 3e-3, 3e-3] and set(seen[4:]) <= {3e-3} and len(seen) <= 7, seen


def test_a_monitored_rung_marks_its_measured_steps_inside_its_band():
    """07's compiled rung read 6% GPU utilisation over a 28 s window that was mostly its compile: the monitor now
    knows which steps were timed, and its summary leads with them."""
    from helpers.monitor import Monitor

    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    rung = ladder.ladder_rungs(SETUP)[0]
    with Monitor(title="ladder", period_s=0.05, live=False) as mon:
        lad.climb([rung], monitor=mon)
    names = [p["name"] for p in mon.record.phases]
    assert names == [rung.name, f"{rung.name}: measured"]
    outer, measured = mon.record.phases
    assert outer["start_s"] < measured["start_s"] <= measured["end_s"] <= outer["end_s"]  # after the untimed steps
    assert mon.snapshot().steady_phases() == (f"{rung.name}: measured",)
    assert mon.summary_text().startswith("steady state (measured steps)")


def test_importing_torchao_prints_no_syntax_warning_of_its_docstrings():
    """Python 3.12 warns of an invalid escape in a torchao docstring as it compiles the file; the import is quiet."""
    import warnings

    source = 'def f():\n    """a regex: fqn\\.weight"""\n'
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with fp8._quiet_import():
            compile(source, "torchao/quantization/quant_api.py", "exec")
    assert not [w for w in seen if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]
    with warnings.catch_warnings(record=True) as seen:  # outside it, the warning is not swallowed
        warnings.simplefilter("always")
        compile(source, "torchao/quantization/quant_api.py", "exec")
    assert [w for w in seen if issubclass(w.category, (SyntaxWarning, DeprecationWarning))]  # 3.11: a deprecation


def test_a_rung_timed_with_a_wide_spread_is_timed_again_and_the_steadier_kept(monkeypatch):
    """07 on one H200: '+ fused AdamW' read 15% slower than the rung below at an 18.6% spread, and '+ torch.compile'
    then read 1.17× over that one noisy timing."""
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    timings = iter([[10.0, 14.0, 18.0], [10.0, 10.2, 10.1]])  # the first spread 29% (4 ÷ 14), the second 1%
    calls = []

    def timed(step, batches, losses, monitor):
        calls.append(len(losses))
        for x, y in batches:
            losses.append(step(x, y))
        return next(timings)

    monkeypatch.setattr(lad, "_timed", timed)
    rung = ladder.ladder_rungs(SETUP)[0]
    result, _ = lad.train(rung, lad.config_for(rung))
    assert result.ran and result.step.median_ms == pytest.approx(10.1)
    assert result.retimed_from_spread_pct == pytest.approx(100 * 4 / 14)
    assert len(result.losses) == SETUP.warmup_steps + SETUP.steps  # the second timing's losses are not kept
    assert calls[1] == 0  # it was handed a list of its own
    lad.results.append(result)
    notes = lad.table().attrs["notes"]
    assert notes == [f"timed twice, the steadier timing kept, where the first one's spread passed 10%: "
                     f"{rung.name} (first spread 28.6%)"]
    # a steady first timing is kept, and no note is written
    timings = iter([[10.0, 10.1, 10.2]])
    steady, _ = lad.train(rung, lad.config_for(rung))
    assert steady.retimed_from_spread_pct is None and steady.step.median_ms == pytest.approx(10.1)


def test_a_rungs_tok_s_is_printed_as_its_tokens_over_the_step_as_printed():
    """07's lines read "448,504 tok/s  step 146.1 ms" from the 146.121 ms median, where 65,536 tokens ÷ 146.1 ms is
    448,569: the line and the table print tok/s from the step as printed, whatever rate the result was made with."""
    import re

    step = bench.Measurement(median_ms=146.1213, q1_ms=146.0, q3_ms=146.3, min_ms=0, max_ms=0, repeats=20)
    r = ladder.RungResult(key="compile", name="+ torch.compile", adds="", config=ladder.RungConfig(),
                          losses=(3.0, 2.0), step=step, tokens_per_s=65_536 / 0.1461213)
    m = re.search(r"([\d,]+) tok/s  step ([\d,.]+) ms", str(r))
    assert (m[1], m[2]) == ("448,569", "146.1") and tables.whole(65_536 / (tables.as_shown(m[2]) / 1e3)) == m[1]
    assert tables.whole(r.tokens_per_s) == "448,504"  # the measurement itself is unchanged
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    lad.results.append(r)
    shown = tables.readable(lad.table()).shown.iloc[0]
    assert (shown["tok/s"], shown["step ms"]) == ("448,569", "146.1")
    # a CPU's smoke step of a few ms keeps four figures: what is printed moves by far less than a spread
    quick = dataclasses.replace(r, step=dataclasses.replace(step, median_ms=2.53137), tokens_per_s=64 / 2.53137e-3)
    assert quick.step_ms_shown == "2.531" and abs(quick.tokens_per_s_shown / quick.tokens_per_s - 1) < 2e-4


def test_a_trained_rungs_tok_s_is_its_tokens_over_the_step_as_printed_everywhere_it_is_used(monkeypatch):
    """07 printed 43,546 tok/s beside "step 1,505 ms" in the rung's line, and 43,553 (from the unrounded 1,504.8 ms)
    in its MFU sentence; the "× the rung below" and MFU columns followed the unrounded rates (0.990 where the printed
    rates give 0.989). A trained rung's tok/s is now the one printed, so each of those is computed from it."""
    lad = ladder.Ladder(SETUP, device="cpu", ceilings=CPU_CEIL)
    monkeypatch.setattr(lad, "_timed", lambda step, batches, losses, monitor: (
        [losses.append(step(x, y)) for x, y in batches], [10.1237, 10.1237, 10.1237])[1])
    rung = ladder.ladder_rungs(SETUP)[0]
    result, _ = lad.train(rung, lad.config_for(rung))
    assert result.step_ms_shown == "10.12"
    assert result.tokens_per_s == pytest.approx(SETUP.tokens_per_step / 10.12e-3, rel=1e-12)
    assert result.tokens_per_s_shown == pytest.approx(result.tokens_per_s, rel=1e-12)
    assert ladder.tokens_per_s_of(65_536, dataclasses.replace(result.step, median_ms=146.121)) == pytest.approx(
        65_536 / 0.1461, rel=1e-12)
    assert f"{result.tokens_per_s:,.0f} tok/s" in lad.mfu_text(result)
    # 07's eager fp32 rung: 65,536 tokens, a 1,505.1 ms median printed "1,505": its line and table had read 43,548
    # tok/s (the tokens recovered through the unrounded median, 65,540) beside its sentence's 43,546
    eager = dataclasses.replace(result, step=dataclasses.replace(result.step, median_ms=1505.1),
                                tokens_per_s=ladder.tokens_per_s_of(65_536, dataclasses.replace(result.step,
                                                                                                median_ms=1505.1)),
                                tokens_per_step=65_536)
    assert tables.whole(eager.tokens_per_s_shown) == tables.whole(eager.tokens_per_s) == "43,546"
    assert "43,546 tok/s  step 1,505 ms" in str(eager)
    assert result.tokens_per_step == SETUP.tokens_per_step
