"""The optimizer state sharded across two gloo ranks on a CPU: DDP, DDP + ZeRO, FSDP2 (helpers.gpt.sharded).

One launch (``two_ranks``, about 15 s on a 2-core CPU: torchrun, then each rank imports torch and runs the three
variants) serves every slow test; how the launcher reads the ranks' lines is tested without a launch.
"""

from __future__ import annotations

import pytest

from helpers.ddp.launch import LaunchResult, leftover_processes
from helpers.gpt import sharded
from helpers.gpt.model import GPTConfig


@pytest.fixture(scope="module")
def two_ranks():
    return sharded.measure_sharding(2, cfg=GPTConfig.smoke(), steps=2, batch_per_rank=2, timeout_s=240)


@pytest.mark.slow
def test_zero_keeps_about_half_of_ddps_optimizer_state_per_rank(two_ranks):
    ddp, zero = two_ranks.variant("ddp"), two_ranks.variant("zero")
    assert ddp.error is None and zero.error is None
    n = GPTConfig.smoke().param_count(non_embedding=False)
    # DDP: every rank keeps both fp32 moments of every parameter: 8 bytes × 119,104 = 952,832 on each rank
    assert ddp.optimizer_state_bytes == (8 * n, 8 * n)
    # ZeRO keeps each parameter's moments on one rank only: the ranks' shares add up to one DDP rank's state
    assert sum(zero.optimizer_state_bytes) == 8 * n
    # Measured 2026-11-27: 491,520 and 461,312 bytes (51.6% and 48.4%). Not exactly half: ZeRO assigns whole
    # parameters (largest first, to the least-loaded rank), and the tiny model's 15 tensors do not split evenly.
    assert all(0.4 < z / (8 * n) < 0.6 for z in zero.optimizer_state_bytes)
    assert 0.5 <= two_ranks.state_ratio("zero") < 0.6
    # the weights and gradients are not sharded by ZeRO stage 1: full on every rank, as under DDP
    assert zero.param_bytes == ddp.param_bytes == (4 * n, 4 * n)


@pytest.mark.slow
def test_every_variant_trains_as_one_process_on_the_global_batch(two_ranks):
    for v in two_ranks.variants:
        if v.error:  # a variant this torch cannot run on gloo says why in one line, and the others still ran
            assert v.variant == "fsdp2" and "\n" not in v.error
            continue
        assert [r.rank for r in v.ranks] == [0, 1], v.variant
        for r in v.ranks:
            # measured 2026-11-27 in two launches on a 2-core AMD EPYC, every variant: losses within 9.5e-7 and 0,
            # weights within 6.0e-8 and 1.2e-7 of one process's (fp32 sums in another order). On a 2-core Intel Xeon
            # (2026-11-29) DDP's weights were 1.9e-5 off: AdamW divides each gradient by its own root mean square,
            # so a weight whose gradient is near zero moves by a good part of lr whatever the gradient's last bits
            # say, and another summation order can move it differently. The bound is a tenth of one step's largest
            # move (lr = 1e-3): a rank that updated the wrong weights, or missed an all-reduce, moves them by ~lr.
            assert len(r.losses) == 2 and r.max_loss_diff < 1e-5, v.variant
            assert r.max_param_diff_vs_reference < 0.1 * sharded._LR, v.variant
            assert r.max_param_diff_vs_rank0 == 0.0, v.variant  # the ranks' weights are the same, bit for bit
    assert not leftover_processes("helpers.gpt.sharded")


@pytest.mark.slow
def test_fsdp2_shards_weights_gradients_and_state(two_ranks):
    fsdp = two_ranks.variant("fsdp2")
    if fsdp.error:
        pytest.skip(f"FSDP2 did not run on gloo with this torch: {fsdp.error}")
    n = GPTConfig.smoke().param_count(non_embedding=False)
    # every tensor of the tiny model has an even first dimension: each rank holds exactly half (measured)
    assert fsdp.optimizer_state_bytes == (4 * n, 4 * n)
    assert fsdp.param_bytes == (2 * n, 2 * n)
    assert all(r.grad_bytes == 2 * n for r in fsdp.ranks)


def _line(variant, rank, state, **extra):
    return {"variant": variant, "rank": rank, "world_size": 2, "optimizer_state_bytes": state,
            "step_counter_bytes": 4, "param_bytes": 8, "grad_bytes": 8, "losses": [1.0], "reference_losses": [1.0],
            "max_param_diff_vs_reference": 0.0, "max_param_diff_vs_rank0": 0.0, **extra}


def test_the_launcher_reads_each_ranks_lines_and_a_variant_that_failed(monkeypatch):
    results = (_line("ddp", 0, 100), _line("ddp", 1, 100), _line("zero", 0, 60), _line("zero", 1, 40),
               {"variant": "fsdp2", "rank": 0, "error": "RuntimeError: no reduce_scatter on gloo"},
               {"variant": "fsdp2", "rank": 1, "error": "RuntimeError: no reduce_scatter on gloo"})
    seen = {}

    def fake_launch(spec, *, on_line=None):
        seen["spec"] = spec
        return LaunchResult(("torchrun",), 0, False, 1.0, (), results)

    monkeypatch.setattr(sharded, "launch", fake_launch)
    r = sharded.measure_sharding(2)
    assert seen["spec"].module == "helpers.gpt.sharded" and seen["spec"].nproc_per_node == 2
    assert r.variant("zero").optimizer_state_bytes == (60, 40)
    assert r.state_ratio("zero", "ddp") == 0.6  # the larger rank sets what a job needs
    assert r.variant("fsdp2").ranks == () and r.variant("fsdp2").error == "RuntimeError: no reduce_scatter on gloo"
    assert any(row.get("error") for row in r.as_rows())

    monkeypatch.setattr(sharded, "launch", lambda spec, on_line=None: LaunchResult(
        ("torchrun",), 1, False, 1.0, ("ValueError: rank 1 broke",), ()))
    with pytest.raises(RuntimeError, match="ValueError: rank 1 broke"):
        sharded.measure_sharding(2)
    with pytest.raises(ValueError, match="use some of ddp, zero, fsdp2"):
        sharded.measure_sharding(2, variants=("zero3",))
