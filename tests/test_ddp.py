"""05_ddp's engine on a CPU: torchrun from Python with two gloo ranks, two "nodes" on 127.0.0.1, and launches that
fail (a crash, a hang, a port in use) ending within a bounded time with no process left behind."""

from __future__ import annotations

import dataclasses
import json
import os
import socket

import pytest

from helpers.ddp import Variant, overlap, scaling
from helpers.ddp import launch as L
from helpers.models import ReferenceCNN

QUIET = dict(on_line=None)
SMALL = ("--image-size", "32", "--batch", "4")


def _orphans() -> str:
    return "\n".join(L.leftover_processes())


def test_ddp_gradients_equal_one_process_on_the_global_batch():
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "grad-check", *SMALL), timeout_s=120), **QUIET)
    assert res.ok, res.error
    assert [r["rank"] for r in res.results] == [0, 1]
    assert all(r["world_size"] == 2 and r["max_relative_grad_difference"] < 1e-4 for r in res.results)


def test_set_epoch_reshuffles_and_its_absence_repeats_the_first_epoch():
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "sampler", "--dataset-size", "8")), **QUIET)
    assert res.ok, res.error
    for r in res.results:
        first, second = r["without_set_epoch"]
        assert first == second  # the same order every epoch
        assert r["with_set_epoch"][0] != r["with_set_epoch"][1]
    shards = [set(r["with_set_epoch"][0]) for r in res.results]
    assert shards[0].isdisjoint(shards[1]) and shards[0] | shards[1] == set(range(8))  # each sample once per epoch


def test_train_variants_allreduce_and_traces_in_one_launch(tmp_path):
    lines = []
    variants = [Variant("synced", 4), Variant("local", 4, sync="none"), Variant("accumulated", 4, accumulate=2, sync="last")]
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=(
        "--mode", "train,allreduce", *SMALL, "--steps", "2", "--repeats", "2", "--warmup", "1", "--dtype", "fp32",
        "--profile-dir", str(tmp_path), "--variants", json.dumps([dataclasses.asdict(v) for v in variants]))),
        on_line=lines.append)
    assert res.ok, res.error
    train = [r for r in res.results if r["mode"] == "train"]
    assert sorted((r["rank"], r["label"]) for r in train) == [(k, v.label) for k in (0, 1) for v in
                                                              sorted(variants, key=lambda v: v.label)]
    assert all(r["ddp"] and r["global_img_per_s"] == pytest.approx(2 * r["img_per_s"]) for r in train)
    assert {r["images_per_step"] for r in train if r["label"] == "accumulated"} == {8}
    reduce = [r for r in res.results if r["mode"] == "allreduce"]
    assert len(reduce) == 2 and all(r["bytes"] == 4 * sum(p.numel() for p in ReferenceCNN(32).parameters())
                                    for r in reduce)
    assert not any(line.startswith((L.RESULT_PREFIX, "USDT:")) for line in lines)  # results are parsed, not printed
    stats = scaling.summarize(res.results)
    assert set(stats) == {"synced", "local", "accumulated"}
    slowest = max(r["step_ms_median"] for r in train if r["label"] == "synced")
    assert stats["synced"].step_ms == slowest and stats["synced"].global_img_per_s == pytest.approx(2 * 4e3 / slowest)
    # the profiler traces HTA reads: one per rank, with the process group's rank in them, but no GPU kernels here
    traces = sorted(p.name for p in tmp_path.iterdir())
    assert traces == ["rank0.json", "rank1.json"]
    assert json.loads((tmp_path / "rank1.json").read_text())["distributedInfo"]["rank"] == 1
    assert not overlap.has_gpu_kernels(tmp_path)
    with pytest.raises(ValueError, match="no GPU kernels"):
        overlap.hta_overlap(tmp_path)


def test_ranks_agree_to_stop_at_the_time_box_and_run_what_the_hardware_has():
    # a box of almost nothing: every rank stops after the minimum of three timed blocks, together (a rank that went
    # on would wait at the barrier for one that stopped); bf16 on a CPU limited to AVX2 runs as fp32, said once
    env = {**os.environ, "HELPERS_TIMEBOX_FACTOR": "1e-6", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    lines = []
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "train", *SMALL, "--steps", "1", "--repeats", "10",
                                                         "--warmup", "1", "--dtype", "bf16")),
                   on_line=lines.append, env=env)
    assert res.ok, res.error
    assert [(r["rank"], r["timed_blocks"], r["precision"]) for r in res.results] == [(0, 3, "fp32"), (1, 3, "fp32")]
    assert sum("no bf16 instructions" in line for line in lines) == 1  # rank 0 says it; rank 1 does not repeat it
    assert scaling.summarize(res.results)["default"].precision == "fp32"


def test_one_process_trains_the_plain_model_as_the_baseline():
    res = L.launch(L.LaunchSpec(nproc_per_node=1, args=("--mode", "train", *SMALL, "--steps", "1", "--repeats", "1",
                                                         "--warmup", "1")), **QUIET)
    assert res.ok, res.error
    assert [(r["world_size"], r["ddp"]) for r in res.results] == [(1, False)]


def test_a_variant_with_an_unknown_sync_mode_is_refused():
    with pytest.raises(ValueError, match="sync='sometimes'"):
        Variant(sync="sometimes")
    with pytest.raises(ValueError, match="labels must differ"):
        scaling.measure_variants(2, [Variant("a"), Variant("a")])


def test_two_nodes_on_loopback_form_one_job():
    a, b = L.launch_nodes([L.LaunchSpec(nproc_per_node=1, nnodes=2, node_rank=i, timeout_s=120,
                                        args=("--mode", "grad-check", *SMALL)) for i in (0, 1)], on_line=None)
    assert a.ok and b.ok, (a.error, b.error)
    assert a.results[0]["world_size"] == 2 and {a.results[0]["rank"], b.results[0]["rank"]} == {0, 1}
    assert a.command[a.command.index("--rdzv-backend") + 1] == "c10d" and a.command[a.command.index("--nnodes") + 1] == "2"
    assert a.command[a.command.index("--rdzv-endpoint") + 1] == b.command[b.command.index("--rdzv-endpoint") + 1]


def test_a_crashing_rank_ends_the_launch_with_its_error():
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "crash", *SMALL), timeout_s=60), **QUIET)
    assert not res.ok and not res.timed_out and res.wall_s < 60
    assert "rank 1 failed on purpose" in res.error
    assert _orphans() == ""


def test_a_hanging_rank_is_stopped_at_the_time_limit_with_nothing_left():
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "hang", *SMALL, "--timeout-s", "600"), timeout_s=10),
                   **QUIET)
    assert res.timed_out and not res.ok and 10 <= res.wall_s < 40
    assert "time limit" in res.error
    assert _orphans() == ""


def test_a_port_in_use_is_refused_clearly_and_a_free_one_is_chosen():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert L.port_in_use(port)
        with pytest.raises(OSError, match=f"port {port} is in use.*master_port=None"):
            L.launch(L.LaunchSpec(master_port=port))
        assert L.free_port() != port


def test_launch_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="node_rank"):
        L.LaunchSpec(nnodes=2, node_rank=2)


def test_a_monitored_launch_shades_the_ranks_measured_steps_inside_it():
    # the launch's phase holds process start-up; the ranks' timed blocks inside it are the steady state
    from helpers.monitor import Monitor

    settings = scaling.WorkerSettings(image_size=32, dtype="fp32", steps=2, repeats=3, warmup=1)
    with Monitor(live=False, period_s=0.05) as mon:
        stats = scaling.measure_variants(2, [Variant("batch 4", 4)], settings=settings, monitor=mon, phase="2 ranks",
                                         on_line=None)
    assert set(stats) == {"batch 4"}
    phases = {p["name"]: p for p in mon.record.phases}
    launch, measured = phases["2 ranks"], phases["2 ranks: batch 4 measured"]
    assert launch["start_s"] < measured["start_s"] < measured["end_s"] <= launch["end_s"] + 0.05
    assert mon.record.steady_phases() == ("2 ranks: batch 4 measured",)
    assert mon.summary_text().startswith("steady state (measured steps): ")
    assert scaling.measured_spans([{"mode": "train", "label": "a", "measured_wall_s": [2.0, 5.0]},
                                   {"mode": "train", "label": "a", "measured_wall_s": [1.0, 4.0]},
                                   {"mode": "allreduce"}]) == {"a": (1.0, 5.0)}
    with pytest.raises(ValueError, match="ends"):
        mon.add_phase("backwards", 2.0, 1.0)
