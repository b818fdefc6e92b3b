"""The final challenge's rules and harness (helpers/challenge), on a CPU with a tiny challenge: runs that follow
the rules pass; a changed network, fewer images, worse accuracy or other data are refused with the reason."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from helpers import bench, leaderboard, models
from helpers.challenge.accuracy import accuracy_margin, heldout_accuracy
from helpers.challenge.harness import Session, Submission, judge
from helpers.challenge.rules import RuleBroken, Rules, same_function
from helpers.kernels.relu_pool_triton import fuse_relu_pool
from helpers.train import TrainConfig

TINY = Rules(images=64, image_size=16, dataset_size=256, heldout=64)
FAST = TrainConfig(batch_size=16, warmup_steps=1, data="gpu", image_size=16, dataset_size=256)


@pytest.fixture(scope="module")
def session():
    ceil = bench.Ceilings("test CPU", matmul_tflops=0.1, matmul_dtype="float32", matmul_n=64, copy_gb_per_s=1.0,
                          copy_bytes=1)
    return Session(TINY, ceil, bench.flops_per_image(models.ReferenceCNN(16), 16), "cpu")


@pytest.fixture(scope="module")
def baseline(session):
    return judge(Submission("baseline", dataclasses.replace(FAST, sync_each_step=True, item_each_step=True)), session)


def test_fit_sets_the_steps_so_every_run_sees_the_same_images():
    for batch, accum in ((16, 1), (8, 2), (64, 1)):
        cfg = TINY.fit(dataclasses.replace(FAST, batch_size=batch, grad_accum=accum, image_size=224))
        assert TINY.images_of(cfg) == TINY.images and cfg.image_size == TINY.image_size and cfg.steps >= 1
    with pytest.raises(RuleBroken, match=r"does not divide the 64 training images.*try batch_size 16 or 32"):
        TINY.fit(dataclasses.replace(FAST, batch_size=24))


def test_other_data_is_refused():
    with pytest.raises(RuleBroken, match="image_size=32.*same data"):
        TINY.check_data(dataclasses.replace(TINY.fit(FAST), image_size=32))


def test_same_function_passes_equivalent_networks_and_refuses_changed_ones():
    torch.manual_seed(0)
    ref = models.ReferenceCNN(16)
    same = fuse_relu_pool(models.pad_first_conv(copy.deepcopy(ref)))  # the same weights, other kernels
    ok, why = same_function(same.to(memory_format=torch.channels_last), ref, image_size=16)
    assert ok, why
    other = models.ReferenceCNN(16)  # other weights: another function
    ok, why = same_function(other, ref, image_size=16)
    assert not ok and "differ from the reference network's" in why
    ok, why = same_function(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 7)), ref, image_size=16)
    assert not ok and "returned (4, 7)" in why


def test_a_run_by_the_rules_passes_and_enters_the_leaderboard(session, baseline, tmp_path):
    assert not baseline.refused and baseline.images_seen == TINY.images and baseline.speedup is None
    v = judge(Submission("fused kernel", FAST, build_model=fuse_relu_pool), session, baseline=baseline)
    assert not v.refused, v.reasons
    assert v.speedup == pytest.approx(v.img_per_s / baseline.img_per_s)
    assert v.mfu_pct == pytest.approx(100 * v.img_per_s * session.flops_per_image / 0.1e12)
    assert v.nvml_util_pct is None and v.peak_mem_gb is None  # a CPU: none of these, and no pretending
    assert [p["name"] for p in v.monitor.phases][:3] == ["fused kernel: set-up", "fused kernel: warm-up",
                                                          "fused kernel: measured"]
    path = tmp_path / "board.sqlite"
    leaderboard.add(v.entry(), path=path)
    assert list(leaderboard.entries(path=path)["name"]) == ["fused kernel"]


def test_a_changed_network_fewer_images_or_worse_accuracy_is_refused(session, baseline, tmp_path):
    def smaller(m):
        m.conv3 = torch.nn.Conv2d(128, 256, 1)  # a cheaper layer: not the reference's function
        return m

    v = judge(Submission("1×1 conv3", FAST, build_model=smaller), session, baseline=baseline)
    assert v.refused and v.reasons[0].startswith("same_function: its logits differ")
    with pytest.raises(leaderboard.EntryRefused, match="same_function"):
        leaderboard.add(v.entry(), path=tmp_path / "board.sqlite")
    half = dataclasses.replace(TINY.fit(FAST), steps=1)  # the harness's images, then fewer measured steps
    v = judge(Submission("half the images", half, fit=False), session, baseline=baseline)
    assert v.refused and "trained on 16 images; every run trains on 64" in v.reasons[0]
    perfect = dataclasses.replace(baseline, accuracy=1.0)  # a baseline no run can match
    v = judge(Submission("fast", FAST), session, baseline=perfect)
    assert v.refused and v.reasons[0].startswith("accuracy_not_worse: held-out accuracy")


def test_heldout_accuracy_is_a_share_of_the_same_images_each_time_and_the_margin_shrinks_with_more():
    torch.manual_seed(0)
    m = models.ReferenceCNN(16)
    a = heldout_accuracy(m, image_size=16, n=64)
    assert 0 <= a <= 1 and a == heldout_accuracy(m, image_size=16, n=64)
    assert accuracy_margin(0.9, 4096) < accuracy_margin(0.9, 512) < 0.06


def _with_checks(v, **broken):
    checks = {k: (k not in broken, broken.get(k, "ok")) for k in leaderboard.CHECKS}
    return dataclasses.replace(v, checks=checks)


def test_spot_the_cheat_passes_the_harness_answer_and_says_what_a_wrong_one_missed(baseline):
    from helpers.exercises import nb06

    runs = {"run A": _with_checks(baseline), "run B": _with_checks(baseline, same_function="logits differ"),
            "run C": _with_checks(baseline, images_seen="trained on half")}
    right = {"run A": None, "run B": "same_function", "run C": "images_seen"}
    assert nb06.check_spot_the_cheat(right, runs).passed
    assert nb06.check_spot_the_cheat(..., runs).status == "not done"
    res = nb06.check_spot_the_cheat({**right, "run A": "same_function"}, runs)  # fast is not a crime
    assert not res.passed and "run A broke no rule" in res.message and res.value == right
    res = nb06.check_spot_the_cheat({**right, "run C": "accuracy_not_worse"}, runs)
    assert not res.passed and "run C broke images_seen, not accuracy_not_worse: trained on half" in res.message
    res = nb06.check_spot_the_cheat({**right, "run B": None}, runs)
    assert not res.passed and "run B broke same_function: logits differ" in res.message
    assert "not a rule" in nb06.check_spot_the_cheat({**right, "run B": "too fast"}, runs).message
    assert "one entry per run" in nb06.check_spot_the_cheat({"run A": None}, runs).message


class _Profile:
    def top_kernels(self, n):
        import pandas as pd

        return pd.DataFrame({"kind": ["convolution", "pooling", "convolution", "GEMM"],
                             "total_us": [300.0, 250.0, 200.0, 250.0]})


def test_read_the_profile_wants_the_largest_kind_summed_with_its_share():
    from helpers.exercises import nb06

    assert nb06.profile_solution(_Profile()) == ("convolution", 50.0)
    assert nb06.check_read_the_profile(("convolution", 47), _Profile()).passed
    res = nb06.check_read_the_profile(("pooling", 25), _Profile())  # the largest single row is not the largest kind
    assert not res.passed and "another kind takes more" in res.message
    res = nb06.check_read_the_profile(("convolution", 30), _Profile())  # one kernel's share, not the kind's
    assert not res.passed and "20 points too low" in res.message
    assert "fraction" in nb06.check_read_the_profile(("convolution", 0.5), _Profile()).message
    assert nb06.check_read_the_profile(..., _Profile()).status == "not done"
