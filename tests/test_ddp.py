"""05_ddp's engine on a CPU: torchrun from Python with two gloo ranks, two "nodes" on 127.0.0.1, and launches that
fail (a crash, a hang, a port in use) ending within a bounded time with no process left behind."""

from __future__ import annotations

import socket
import subprocess

import pytest

from helpers.ddp import launch as L

QUIET = dict(on_line=None)
SMALL = ("--image-size", "32", "--batch", "4")


def _orphans() -> str:
    out = subprocess.run(["pgrep", "-af", "helpers.ddp.worker"], capture_output=True, text=True).stdout
    return "\n".join(line for line in out.splitlines() if "pgrep" not in line)


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


def test_train_mode_reports_every_rank():
    lines = []
    res = L.launch(L.LaunchSpec(nproc_per_node=2, args=("--mode", "train", *SMALL, "--steps", "2", "--warmup", "1",
                                                         "--dtype", "fp32")), on_line=lines.append)
    assert res.ok, res.error
    assert all(r["img_per_s"] > 0 and r["global_img_per_s"] == pytest.approx(2 * r["img_per_s"]) for r in res.results)
    assert not any(line.startswith(L.RESULT_PREFIX) for line in lines)  # results are parsed, not printed


def test_two_nodes_on_loopback_form_one_job():
    a, b = L.launch_nodes([L.LaunchSpec(nproc_per_node=1, nnodes=2, node_rank=i, timeout_s=120,
                                        args=("--mode", "grad-check", *SMALL)) for i in (0, 1)], on_line=None)
    assert a.ok and b.ok, (a.error, b.error)
    assert a.results[0]["world_size"] == 2 and b.results[0]["rank"] == 1
    assert "--rdzv-backend" in a.command and a.command[a.command.index("--node-rank") + 1] == "0"


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
