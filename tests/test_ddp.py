"""05_ddp's engine on a CPU: torchrun from Python with two gloo ranks, two "nodes" on 127.0.0.1, and launches that
fail (a crash, a hang, a port in use) ending within a bounded time with no process left behind.

A launch costs seconds of start-up (torchrun, then every rank imports torch and DDP): the tests that read what two
ranks did share one launch that runs every mode they read (``two_ranks``), one rank alone runs in this process, and
the launch that hangs waits out its time limit while the others run beside it (``beside_a_hang``)."""

from __future__ import annotations

import json
import socket
import threading
import types

import pytest

from helpers.ddp import Variant, overlap, scaling
from helpers.ddp import launch as L
from helpers.models import ReferenceCNN

pytestmark = pytest.mark.slow  # launches groups of gloo ranks: `make test-slow`

QUIET = dict(on_line=None)
SMALL = ("--image-size", "32", "--batch", "4")
VARIANTS = [Variant("synced", 4), Variant("local", 4, sync="none"), Variant("accumulated", 4, accumulate=2, sync="last")]
PHASE = "2 ranks"


def _orphans() -> str:
    return "\n".join(L.leftover_processes())


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One launch of two gloo ranks, under a monitor, running the gradient check, the sampler, the train variants
    (traced) and the all-reduce. bf16 is asked for on a CPU limited to AVX2 (it runs as fp32, said once), and the
    time box is almost nothing: every rank stops after the minimum of three timed blocks, together."""
    from helpers.monitor import Monitor

    traces = tmp_path_factory.mktemp("traces")
    settings = scaling.WorkerSettings(image_size=32, dtype="bf16", steps=1, repeats=10, warmup=1, timeout_s=120)
    lines: list[str] = []
    with pytest.MonkeyPatch.context() as mp:  # what the ranks inherit (the autouse _isolate comes after this)
        mp.setenv("HELPERS_SCALE", "smoke")
        mp.setenv("HELPERS_TIMEBOX_FACTOR", "1e-6")
        mp.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
        with Monitor(live=False, period_s=0.05) as mon:
            res = scaling.run_worker(2, "grad-check,sampler,train,allreduce", settings=settings, extra=(
                "--batch", "4", "--dataset-size", "8", "--profile-dir", str(traces),
                "--variants", scaling.variants_json(VARIANTS)), on_line=lines.append, monitor=mon, phase=PHASE)
    return types.SimpleNamespace(res=res, lines=lines, mon=mon, traces=traces,
                                 of=lambda mode: [r for r in res.results if r["mode"] == mode])


def test_ddp_gradients_equal_one_process_on_the_global_batch(two_ranks):
    checks = two_ranks.of("grad-check")
    assert [r["rank"] for r in checks] == [0, 1]
    assert all(r["world_size"] == 2 and r["max_relative_grad_difference"] < 1e-4 for r in checks)


def test_set_epoch_reshuffles_and_its_absence_repeats_the_first_epoch(two_ranks):
    orders = two_ranks.of("sampler")
    assert len(orders) == 2
    for r in orders:
        first, second = r["without_set_epoch"]
        assert first == second  # the same order every epoch
        assert r["with_set_epoch"][0] != r["with_set_epoch"][1]
    shards = [set(r["with_set_epoch"][0]) for r in orders]
    assert shards[0].isdisjoint(shards[1]) and shards[0] | shards[1] == set(range(8))  # each sample once per epoch


def test_train_variants_allreduce_and_traces_in_one_launch(two_ranks):
    train, tmp_path = two_ranks.of("train"), two_ranks.traces
    assert sorted((r["rank"], r["label"]) for r in train) == [(k, v.label) for k in (0, 1) for v in
                                                              sorted(VARIANTS, key=lambda v: v.label)]
    assert all(r["ddp"] and r["global_img_per_s"] == pytest.approx(2 * r["img_per_s"]) for r in train)
    assert {r["images_per_step"] for r in train if r["label"] == "accumulated"} == {8}
    reduce = two_ranks.of("allreduce")
    assert len(reduce) == 2 and all(r["bytes"] == 4 * sum(p.numel() for p in ReferenceCNN(32).parameters())
                                    for r in reduce)
    # results are parsed, not printed
    assert not any(line.startswith((L.RESULT_PREFIX, "USDT:")) for line in two_ranks.lines)
    stats = scaling.summarize(two_ranks.res.results)
    assert set(stats) == {"synced", "local", "accumulated"}
    slowest = max(r["step_ms_median"] for r in train if r["label"] == "synced")
    # the slowest rank's step, to the hundredth its line prints (worker.step_line), and the img/s of that figure
    shown = round(slowest, 2)
    assert stats["synced"].step_ms == shown and stats["synced"].global_img_per_s == pytest.approx(2 * 4e3 / shown)
    # the profiler traces HTA reads: one per rank, with the process group's rank in them, but no GPU kernels here
    traces = sorted(p.name for p in tmp_path.iterdir())
    assert traces == ["rank0.json", "rank1.json"]
    assert json.loads((tmp_path / "rank1.json").read_text())["distributedInfo"]["rank"] == 1
    assert not overlap.has_gpu_kernels(tmp_path)
    with pytest.raises(ValueError, match="no GPU kernels"):
        overlap.hta_overlap(tmp_path)


def test_ranks_agree_to_stop_at_the_time_box_and_run_what_the_hardware_has(two_ranks):
    # every rank stops after the minimum of three timed blocks, together (a rank that went on would wait at the
    # barrier for one that stopped); bf16 on a CPU limited to AVX2 runs as fp32, said once
    assert sorted((r["rank"], r["label"], r["timed_blocks"], r["precision"]) for r in two_ranks.of("train")) == [
        (k, v.label, 3, "fp32") for k in (0, 1) for v in sorted(VARIANTS, key=lambda v: v.label)]
    assert sum("no bf16 instructions" in line for line in two_ranks.lines) == 1  # rank 0 says it; rank 1 does not
    assert {s.precision for s in scaling.summarize(two_ranks.res.results).values()} == {"fp32"}


def test_a_monitored_launch_shades_the_ranks_measured_steps_inside_it(two_ranks):
    # the launch's phase holds process start-up; the ranks' timed blocks of each variant inside it are the steady state
    mon = two_ranks.mon
    assert set(scaling.summarize(two_ranks.res.results)) == {v.label for v in VARIANTS}
    phases = {p["name"]: p for p in mon.record.phases}
    launch, steady = phases[PHASE], tuple(f"{PHASE}: {v.label} measured" for v in VARIANTS)
    for name in steady:
        measured = phases[name]
        assert launch["start_s"] < measured["start_s"] < measured["end_s"] <= launch["end_s"] + 0.05, name
    assert mon.record.steady_phases() == steady
    assert mon.summary_text().startswith("steady state (measured steps): ")
    assert scaling.measured_spans([{"mode": "train", "label": "a", "measured_wall_s": [2.0, 5.0]},
                                   {"mode": "train", "label": "a", "measured_wall_s": [1.0, 4.0]},
                                   {"mode": "allreduce"}]) == {"a": (1.0, 5.0)}
    with pytest.raises(ValueError, match="ends"):
        mon.add_phase("backwards", 2.0, 1.0)


def test_one_process_trains_the_plain_model_as_the_baseline(monkeypatch, capfd):
    # the worker's main in this process, as torchrun starts it for one rank (torchrun itself: the launches here)
    from helpers.ddp import worker

    for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(L.free_port())}.items():
        monkeypatch.setenv(name, value)
    assert worker.main(["--mode", "train", *SMALL, "--steps", "1", "--repeats", "1", "--warmup", "1"]) == 0
    results = L.parse_results(capfd.readouterr().out.splitlines())
    assert [(r["world_size"], r["ddp"]) for r in results] == [(1, False)]


def test_a_variant_with_an_unknown_sync_mode_is_refused():
    with pytest.raises(ValueError, match="sync='sometimes'"):
        Variant(sync="sometimes")
    with pytest.raises(ValueError, match="labels must differ"):
        scaling.measure_variants(2, [Variant("a"), Variant("a")])


@pytest.fixture(scope="module")
def beside_a_hang():
    """A launch whose rank 1 hangs, and beside it (its 10 s limit is mostly waiting) one whose rank 1 crashes and two
    nodes on loopback; then the processes of any of them left once all have returned."""
    hang: dict[str, L.LaunchResult] = {}
    spec = L.LaunchSpec(nproc_per_node=2, args=("--mode", "hang", *SMALL, "--timeout-s", "600"), timeout_s=10)
    background = threading.Thread(target=lambda: hang.update(res=L.launch(spec, **QUIET)))
    background.start()
    try:
        crash = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "crash", *SMALL), timeout_s=60), **QUIET)
        nodes = L.launch_nodes([L.LaunchSpec(nproc_per_node=1, nnodes=2, node_rank=i, timeout_s=120,
                                             args=("--mode", "grad-check", *SMALL)) for i in (0, 1)], on_line=None)
    finally:
        background.join()
    return types.SimpleNamespace(crash=crash, nodes=nodes, hang=hang["res"], orphans=_orphans())


def test_two_nodes_on_loopback_form_one_job(beside_a_hang):
    a, b = beside_a_hang.nodes
    assert a.ok and b.ok, (a.error, b.error)
    assert a.results[0]["world_size"] == 2 and {a.results[0]["rank"], b.results[0]["rank"]} == {0, 1}
    assert a.command[a.command.index("--rdzv-backend") + 1] == "c10d" and a.command[a.command.index("--nnodes") + 1] == "2"
    assert a.command[a.command.index("--rdzv-endpoint") + 1] == b.command[b.command.index("--rdzv-endpoint") + 1]


def test_a_crashing_rank_ends_the_launch_with_its_error(beside_a_hang):
    res = beside_a_hang.crash
    assert not res.ok and not res.timed_out and res.wall_s < 60
    assert "rank 1 failed on purpose" in res.error
    assert beside_a_hang.orphans == ""


def test_a_hanging_rank_is_stopped_at_the_time_limit_with_nothing_left(beside_a_hang):
    res = beside_a_hang.hang
    assert res.timed_out and not res.ok and 10 <= res.wall_s < 40
    assert "time limit" in res.error
    assert beside_a_hang.orphans == ""


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
