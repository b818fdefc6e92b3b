"""The machines learners have: a GPU without bf16 (a T4), a CPU without bf16 instructions, a GPU without GPM.

No T4 is needed: each test forces the path the hardware would take.
"""

from __future__ import annotations

import pytest
import torch

from helpers import env, notices, train
from helpers.monitor import diagnose
from helpers.monitor.record import MonitorSummary
from helpers.monitor.telemetry import NvmlReader


@pytest.fixture(autouse=True)
def _say_again():
    notices.forget()
    yield
    notices.forget()


def _a_t4(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: including_emulation)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))


def test_bf16_on_a_gpu_without_it_runs_as_fp16_and_says_so_once(monkeypatch, capsys):
    _a_t4(monkeypatch)  # torch counts emulated bf16 as supported unless asked not to: the course asks
    assert not env.native_precision("bf16", "cuda") and env.native_precision("fp16", "cuda")
    assert env.resolve_dtype("bf16", "cuda") == "fp16"
    assert env.autocast_dtype(torch.bfloat16, "cuda") is torch.float16
    assert env.resolve_dtype("fp32", "cuda") == "fp32" and env.resolve_dtype("fp16", "cuda") == "fp16"
    out = capsys.readouterr().out
    assert out.count("Tesla T4 (compute capability 7.5) has no bf16") == 1 and "GradScaler" in out


def test_bf16_on_a_cpu_without_its_instructions_runs_as_fp32(monkeypatch, capsys):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert not env.native_precision("bf16", "cpu")
    assert env.resolve_dtype("bf16", "cpu") == "fp32" and env.autocast_dtype("bf16", "cpu") is None
    assert "This CPU has no bf16 instructions (PyTorch's CPU kernels: AVX2)" in capsys.readouterr().out


def test_onednn_limited_to_avx2_counts_as_no_bf16(monkeypatch):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)  # `make time-smoke-avx2` sets it for the whole run
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    assert env.native_precision("bf16", "cpu")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert not env.native_precision("bf16", "cpu")
    assert env.cpu_capability() == "AVX512 (oneDNN ≤ AVX2)"


def test_the_training_loop_pairs_fp16_with_a_scaler_when_bf16_is_missing(monkeypatch):
    monkeypatch.setattr(env, "resolve_dtype", lambda dtype, device: "fp16" if dtype == "bf16" else dtype)
    cfg = train.TrainConfig(batch_size=4, image_size=32, data="gpu", dataset_size=8, dtype="bf16", steps=5,
                            warmup_steps=1)
    trainer = train.Trainer(cfg, device="cpu")
    assert trainer.precision == "fp16" and trainer.autocast_dtype is torch.float16
    assert isinstance(trainer.scaler, torch.amp.GradScaler)
    r = trainer.run()
    assert r.precision == "fp16" and "bf16 ran as fp16" in r.summary()


def test_the_ddp_worker_pairs_fp16_with_a_scaler_when_bf16_is_missing(monkeypatch):
    # the worker's step, in this process (one rank, no process group needed): bf16 forced to resolve as on a T4
    import argparse

    from helpers.ddp import Variant, worker

    monkeypatch.setattr(env, "resolve_dtype", lambda dtype, device: "fp16" if dtype == "bf16" else dtype)
    scaled = []
    real_scale = torch.amp.GradScaler.scale
    monkeypatch.setattr(torch.amp.GradScaler, "scale",
                        lambda self, loss: scaled.append((self.is_enabled(), loss.dtype)) or real_scale(self, loss))
    args = argparse.Namespace(channels_last=True, image_size=32, dtype="bf16")
    step, use_ddp = worker._make_step(Variant("t4", 2), args, 0, 1, torch.device("cpu"))
    step()
    assert not use_ddp and scaled == [(True, torch.float32)]  # the loss is scaled in fp32, the forward in fp16
    monkeypatch.setattr(env, "resolve_dtype", lambda dtype, device: dtype)  # where bf16 is native: no scaling
    scaled.clear()
    step, _ = worker._make_step(Variant("native", 2), args, 0, 1, torch.device("cpu"))
    step()
    assert scaled == [(False, torch.float32)]


def test_the_training_loop_on_a_cpu_without_bf16_runs_fp32(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    cfg = train.TrainConfig(batch_size=4, image_size=32, data="gpu", dataset_size=8, dtype="bf16", steps=5,
                            warmup_steps=0)
    trainer = train.Trainer(cfg, device="cpu")
    assert trainer.precision == "fp32" and trainer.autocast_dtype is None and trainer.scaler is None


class _NoGpmNvml:
    """NVML as a GPU without GPM answers it (a T4): utilisation, memory, power; no GPM functions at all."""

    class _Util:
        gpu = 97

    class _Mem:
        used, total = 3 * 2**30, 16 * 2**30

    def nvmlDeviceGetUtilizationRates(self, h):
        return self._Util()

    def nvmlDeviceGetMemoryInfo(self, h):
        return self._Mem()

    def nvmlDeviceGetPowerUsage(self, h):
        return 65_000


def test_a_gpu_without_gpm_is_monitored_with_nvml_alone_said_once(capsys):
    reader = NvmlReader(_NoGpmNvml(), object(), pcie=False)
    NvmlReader(_NoGpmNvml(), object(), pcie=False)
    assert reader.gpm is None
    sample = reader.read()
    assert sample["util_pct"] == 97 and "sm_active_pct" not in sample
    assert capsys.readouterr().out.count("This GPU offers no GPM metrics") == 1


def test_the_diagnosis_reads_nvml_alone_without_gpm():
    s = MonitorSummary(source="nvml", duration_s=10, samples=40, mean_util_pct=97, mean_sm_active_pct=None,
                       mean_tensor_active_pct=None, mean_dram_bw_pct=None, peak_used_gib=3, mem_total_gib=16,
                       peak_allocated_gib=2, mean_power_w=65, slowdown_share=0, img_per_s=900, steps=30)
    titles = [f.title for f in diagnose(s)]
    assert "NVML alone: this GPU offers no GPM" in titles
    assert "Busy but not full: small kernels or launch overhead" not in titles  # that rule needs GPM's SM activity
    with_gpm = diagnose(s.__class__(**{**s.__dict__, "mean_sm_active_pct": 30.0}))
    assert "NVML alone: this GPU offers no GPM" not in [f.title for f in with_gpm]
