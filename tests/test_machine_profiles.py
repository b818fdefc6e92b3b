"""Learner-machine profiles on a CPU: the table, the cores a process and its children get, the names every report and
record carries, where the figures go, no bf16 and no GPM, and what a profile says when it cannot limit SMs.
The GPU limits themselves (SMs on every route, memory) are checked on a GPU by test_machine_profiles_gpu.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from helpers import env, machine_profiles, nvml, results, tables

ROOT = Path(__file__).resolve().parents[1]


def _load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_table_holds_a_t4_and_a_two_core_host():
    t4, two = machine_profiles.PROFILES["t4"], machine_profiles.PROFILES["two-core"]
    assert (t4.sms, t4.gpu_memory_gib, t4.bf16, t4.gpm, t4.usable_cores) == (8, 15, False, False, 2)
    assert t4.stands_for.name == "NVIDIA T4" and t4.published_figures() == {
        "published_fp16_tflops": 65, "published_copy_gb_per_s": 320}
    assert (two.sms, two.gpu_memory_gib, two.bf16, two.gpm, two.usable_cores) == (None, None, True, True, 2)
    assert "8 SMs" in t4.limits() and "2 usable CPU cores" in two.limits() and two.published_figures() == {}


def test_a_profile_is_chosen_by_name_and_a_wrong_name_says_the_right_ones(monkeypatch):
    assert env.profile() is None
    monkeypatch.setenv("HELPERS_PROFILE", "T4 ")
    assert env.profile().name == "t4"
    monkeypatch.setenv("HELPERS_PROFILE", "k80")
    with pytest.raises(ValueError, match="'k80' is not a learner-machine profile: use one of t4, two-core"):
        env.profile()


@pytest.mark.slow  # starts processes that import torch: `make test-slow`
def test_a_process_and_everything_it_starts_get_the_profiles_cores():
    """A one-core profile (this machine may have two): the process, torch's threads, a DataLoader worker and a
    child process all see one core."""
    script = textwrap.dedent("""
        import json, os, subprocess, sys
        from helpers import machine_profiles
        machine_profiles.PROFILES["one-core"] = machine_profiles.Profile("one-core", "a host with one core",
                                                                         usable_cores=1)
        os.environ["HELPERS_PROFILE"] = "one-core"
        import torch
        from torch.utils.data import DataLoader
        from helpers import env
        applied = env.apply_profile()

        class Cores(torch.utils.data.Dataset):
            def __len__(self):
                return 1
            def __getitem__(self, i):
                return len(os.sched_getaffinity(0))

        worker = next(iter(DataLoader(Cores(), num_workers=1, batch_size=None)))
        child = subprocess.run([sys.executable, "-c", "import os; print(len(os.sched_getaffinity(0)))"],
                               capture_output=True, text=True).stdout.strip()
        print(json.dumps({"self": len(os.sched_getaffinity(0)), "threads": torch.get_num_threads(),
                          "worker": int(worker), "child": int(child), "omp": os.environ["OMP_NUM_THREADS"],
                          "usable": env.usable_cpus(), "lines": applied.lines()}))
    """)
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={k: v for k, v in os.environ.items() if k != "HELPERS_PROFILE"})
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert (seen["self"], seen["threads"], seen["worker"], seen["child"], seen["omp"], seen["usable"]) == \
        (1, 1, 1, 1, "1", 1)
    assert any("CPU cores 0" in line for line in seen["lines"])


def test_every_report_and_record_names_the_profile_and_its_figures_go_to_their_own_file(monkeypatch, capsys):
    monkeypatch.setenv("HELPERS_PROFILE", "t4")
    rep = env.report()
    out = capsys.readouterr().out
    assert "profile t4 (stands for NVIDIA T4)" in out and rep.profile and "its GPU limits apply" in out
    header = results.device_header()
    assert header["device"] == "cpu as t4" and header["profile"] == "t4" and header["stands_for"] == "NVIDIA T4"
    assert header["published"] == {"published_fp16_tflops": 65, "published_copy_gb_per_s": 320}
    path = results.record({"ceiling_fp16_tflops": 58.0})
    assert path.name == "cpu.t4-smoke.json"
    saved = json.loads(path.read_text())
    assert list(saved)[:3] == ["device", "profile", "stands_for"] and saved["device"] == "cpu as t4"
    gpu = {"device": "NVIDIA H100 80GB HBM3 as t4", "profile": "t4"}
    assert results.results_path(gpu, scale="full").name == "nvidia-h100-80gb-hbm3.t4.json"
    assert results.results_path({"device": "NVIDIA H100 80GB HBM3"}, scale="full").name == "nvidia-h100-80gb-hbm3.json"
    assert env.device_label("NVIDIA H100 80GB HBM3") == "NVIDIA H100 80GB HBM3 as t4"
    assert env.device_label("NVIDIA H100 80GB HBM3 as t4") == "NVIDIA H100 80GB HBM3 as t4"  # said once


def test_every_table_names_the_profile_above_it(monkeypatch):
    import pandas as pd

    df = pd.DataFrame({"img_per_s": [7362.6]})
    assert "profile" not in tables.readable(df)._repr_html_()
    monkeypatch.setenv("HELPERS_PROFILE", "two-core")
    env.apply_profile()
    shown = tables.readable(df)
    assert ("profile two-core: this machine limited to 2 usable CPU cores, standing in for this GPU on a host with 2 "
            "usable CPU cores") in shown._repr_html_()
    assert repr(shown).startswith("profile two-core") and tables.unreadable_cells(shown._repr_html_()) == []
    machine_profiles.forget()
    assert "profile" not in tables.readable(df)._repr_html_()


def test_no_bf16_under_the_t4_profile_on_a_gpu_that_has_it(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert env.native_precision("bf16", "cuda")
    monkeypatch.setenv("HELPERS_PROFILE", "t4")
    assert not env.native_precision("bf16", "cuda") and env.resolve_dtype("bf16", "cuda") == "fp16"
    assert ("NVIDIA H100 80GB HBM3 as t4 (standing in for the NVIDIA T4, compute capability 7.5) has no bf16"
            in capsys.readouterr().out)
    monkeypatch.setenv("HELPERS_PROFILE", "two-core")
    assert env.native_precision("bf16", "cuda")  # a two-core host keeps its GPU's bf16


def test_no_gpm_once_a_profile_turns_it_off(capsys):
    from helpers import notices
    from helpers.monitor.telemetry import NvmlReader
    from tests.conftest import FakeNvml

    fake = FakeNvml(gpm={})
    fake.nvmlGpmQueryDeviceSupport = lambda handle: type("Support", (), {"isSupportedDevice": 1})()
    nvml.reset_for_tests(fake)
    notices.forget("no-gpm")
    assert nvml.gpm_supported(object()) and NvmlReader(fake, object(), pcie=False).gpm is not None
    nvml.disable_gpm("the t4 profile stands for a GPU without GPM")
    assert not nvml.gpm_supported(object()) and nvml.gpm_disabled().startswith("the t4 profile")
    assert NvmlReader(fake, object(), pcie=False).gpm is None
    assert "no GPM metrics (the t4 profile stands for a GPU without GPM)" in capsys.readouterr().out
    notices.forget("no-gpm")
    nvml.reset_for_tests(fake)  # a new process: GPM as the GPU has it
    assert nvml.gpm_supported(object())


def test_without_green_contexts_the_profile_says_it_cannot_limit_sms_and_applies_the_rest(monkeypatch, capsys):
    from torch.cuda import green_contexts

    def refuse(**_kw):
        raise RuntimeError("Green Context requires user mode driver 12.8+")

    monkeypatch.setattr(green_contexts.GreenContext, "create", staticmethod(refuse))
    state = machine_profiles.Applied(machine_profiles.PROFILES["t4"], gpu=True, total_sms=40)
    machine_profiles._limit_sms(state, 8, 0)
    assert state.sms is None and "no CUDA green context here (Green Context requires user mode driver 12.8+)" in \
        state.cannot[0]
    assert "cannot limit SMs here" in capsys.readouterr().out
    assert any(line.strip().startswith("cannot limit SMs") for line in state.lines())
    state = machine_profiles.Applied(machine_profiles.PROFILES["t4"], gpu=True, total_sms=8)
    machine_profiles._limit_sms(state, 8, 0)  # a GPU no larger than the profile: nothing to limit, said so
    assert "no more than the profile's 8" in state.cannot[0]


def test_a_profiles_run_is_never_a_column_of_real_hardware(tmp_path):
    figures = _load_script("readme_figures")
    for name, device, profile in [("nvidia-h100-80gb-hbm3.json", "NVIDIA H100 80GB HBM3", None),
                                  ("nvidia-h100-80gb-hbm3.t4.json", "NVIDIA H100 80GB HBM3 as t4", "t4")]:
        data = {"device": device, "figures": {"final_mfu_pct": 30.0}} | ({"profile": profile} if profile else {})
        (tmp_path / name).write_text(json.dumps(data))
    assert [n for n, _ in figures.gpu_results(tmp_path)] == ["nvidia-h100-80gb-hbm3.json"]


def test_a_preview_split_over_calls_adds_up_its_notebooks(monkeypatch):
    monkeypatch.setenv("HELPERS_PROFILE", "t4")
    monkeypatch.setenv("HELPERS_SCALE", "full")
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    gpu_test = _load_script("gpu_test")
    nb = lambda passed: {"run_s": 12.0, "passed": passed, "cells": []}  # noqa: E731
    gpu_test.record_profile_runs({"scale": "full", "notebooks": {"00_setup": nb(True), "01_baseline": nb(False)}})
    path = gpu_test.record_profile_runs({"scale": "full", "notebooks": {"01_baseline": nb(True), "02_dataloader": nb(True)}})
    data = results.load(path)
    assert path.name == "cpu.t4.json" and data["device"] == "cpu as t4"
    assert data["figures"]["profile_notebooks_run"] == 3 and data["figures"]["profile_notebooks_passed"] == 3
    assert list(data["profile_notebooks"]) == ["00_setup", "01_baseline", "02_dataloader"]


def test_the_readme_lists_the_profiles_and_what_each_run_measured(tmp_path):
    figures = _load_script("readme_figures")
    assert "No run under a profile is recorded yet" in figures.profiles_block(tmp_path, ["00_setup", "02_dataloader"])
    (tmp_path / "nvidia-h100-80gb-hbm3.t4.json").write_text(json.dumps({
        "device": "NVIDIA H100 80GB HBM3 as t4", "profile": "t4", "date": "2026-11-23",
        "published": {"published_fp16_tflops": 65, "published_copy_gb_per_s": 320},
        "profile_notebooks": {"00_setup": {"passed": True, "run_s": 25.5, "date": "2026-11-23"},
                              "02_dataloader": {"passed": False, "run_s": 99.0, "date": "2026-11-23"}},
        "figures": {"ceiling_fp16_tflops": 58.1, "ceiling_copy_gb_per_s": 655.0, "run_s_00_setup": 325.5,
                    "max_cell_s_00_setup": 7.7, "profile_notebooks_run": 2.0, "profile_notebooks_passed": 1.0}}))
    block = figures.profiles_block(tmp_path, ["00_setup", "02_dataloader", "03_kernels"])
    rows = {line.split(" |")[0].strip("| `"): line for line in block.splitlines() if line.startswith("| ")}
    assert "8 SMs; 15 GiB of GPU memory" in rows["t4"] and "2 usable CPU cores" in rows["two-core"]
    run = next(line for line in block.splitlines() if line.startswith("| NVIDIA H100 80GB HBM3 as t4, 2026-11-23"))
    assert "| 58 TFLOP/s fp16 (65) | 655 (320) | 1 of 2 run (the course has 3) |" in run
    assert run.endswith("| 326 s (8 s) **over budget** | failed (2026-11-23) | not run yet |")


def test_gpu_memory_is_the_cards_or_the_profiles_limit(monkeypatch):
    assert env.gpu_memory_gib() is None  # no GPU here
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: type("Props", (), {"total_memory": 80 * 2**30, "multi_processor_count": 132})())
    assert env.gpu_memory_gib() == 80
    applied = machine_profiles.Applied(machine_profiles.PROFILES["t4"], gpu=True, memory_gib=15)
    monkeypatch.setattr(env, "apply_profile", lambda index=None: applied)
    assert env.gpu_memory_gib() == 15 and env.gpu_memory_gib() <= env.SMALL_GPU_GIB
