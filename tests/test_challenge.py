"""The final challenge's rules and harness (helpers/challenge), on a CPU with a tiny challenge: runs that follow
the rules pass; a changed network, fewer images, worse accuracy or other data are refused with the reason."""

from __future__ import annotations

import copy
import dataclasses
import re
import types
from xml.etree import ElementTree

import pytest
import torch

from helpers import bench, env, leaderboard, models, profiling, roofline, tables
from helpers.challenge.accuracy import accuracy_check, accuracy_margin, heldout_accuracy
from helpers.challenge.harness import Submission, judge
from helpers.challenge.harness import readable_table as harness_readable_table  # report's readable_table differs
from helpers.challenge.report import reflection, write_report
from helpers.challenge.step_roofline import step_costs, step_roofline
from helpers.inference import serve_sweep
from helpers.challenge.rules import SIZES, RuleBroken, Rules, same_function
from helpers.kernels.relu_pool_triton import fuse_relu_pool
from fakes import tiny_challenge, tiny_session

TINY, FAST = tiny_challenge()
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def session():
    return tiny_session(TINY)


@pytest.fixture(scope="module")
def baseline(session):
    return judge(Submission("baseline", dataclasses.replace(FAST, sync_each_step=True, item_each_step=True)), session)


def test_fit_sets_the_steps_so_every_run_sees_the_same_images():
    for batch, accum in ((16, 1), (8, 2), (64, 1)):
        cfg = TINY.fit(dataclasses.replace(FAST, batch_size=batch, grad_accum=accum, image_size=224))
        assert TINY.images_of(cfg) == TINY.images and cfg.image_size == TINY.image_size and cfg.steps >= 1
    with pytest.raises(RuleBroken, match=r"does not divide the 64 training images.*try batch_size 16 or 32"):
        TINY.fit(dataclasses.replace(FAST, batch_size=24))


def test_a_small_gpu_gets_a_sixth_of_the_images_at_the_baselines_batch(monkeypatch):
    from helpers.challenge import ladder
    from helpers.challenge.rules import SIZES, size_class

    monkeypatch.setattr(env, "gpu_memory_gib", lambda: 15.0)  # a T4 (or the t4 profile's limit)
    assert size_class("full") == "small-gpu" and size_class("smoke") == "smoke"
    monkeypatch.setattr(env, "gpu_memory_gib", lambda: 79.2)  # an H100
    assert size_class("full") == "gpu"
    monkeypatch.setattr(env, "gpu_memory_gib", lambda: None)  # full scale forced on a CPU: no crash, the full size
    assert size_class("full") == "gpu"
    large, small = Rules.at_scale("full", "gpu"), Rules.at_scale("full", "small-gpu")
    assert (large.images, large.final_batch) == (24_576, 256) and (small.images, small.final_batch) == (4_096, 32)
    assert small.heldout == large.heldout and small.image_size == large.image_size == 224
    assert "4,096 training images" in small.describe() and "24 GiB or less" in small.describe()
    for rules in (large, small):
        rungs = {r.name: r for r in ladder.ladder("full", rules)}
        ref = rules.fit(rungs["+ padded conv1"].submission.config)
        assert ref.batch_size == rules.final_batch and ref.warmup_steps + ref.steps == rules.images // rules.final_batch
        assert ref.lr == rules.final.final_lr and ref.lr_decay == rules.final.final_lr_decay
    big_rungs = {r.name: r for r in ladder.ladder("full", large)}
    assert big_rungs["+ batch size"].adds == "batch 256 with the learning rate doubled to 0.02, decayed linearly to zero"
    assert not big_rungs["+ batch size"].left_out
    small_batch = next(r for r in ladder.ladder("full", small) if r.name == "+ batch size")
    assert "too few steps" in small_batch.left_out and small_batch.adds.endswith("kept")
    for size in SIZES.values():  # every size's final batch divides its images: the reference solution fits
        assert size.images % size.final_batch == 0
    # the MFU asserted is the class's own (batch 32 in fp16 on the small one), with its reason beside it
    assert (large.final.mfu_target_pct, small.final.mfu_target_pct) == (26.0, 23.0)
    assert "batch 32" in small.final.why_mfu and "Triton" in large.final.why_mfu
    with pytest.raises(ValueError, match="no challenge size 'tiny'; the sizes are: gpu, small-gpu, smoke"):
        Rules.at_scale("full", "tiny")


def test_each_challenge_is_named_the_course_s_or_one_of_its_own_with_its_target():
    from helpers.challenge.accuracy import time_target

    for size in SIZES:
        rules = Rules.at_scale("smoke" if size == "smoke" else "full", size=size)
        course = time_target(rules).threshold
        assert rules.is_course and rules.challenge().startswith(f"the course's {size} challenge: {rules.images:,} ")
        assert rules.challenge(course).startswith(f"the course's {size} challenge: to {100 * course:.6g}% on "
                                                  f"{rules.to_target_heldout:,} held-out, at {rules.image_size}² ")
        assert rules.challenge(course - 0.01).endswith(", a target of its own")
        other = dataclasses.replace(rules, images=rules.images // 2)
        assert not other.is_course and other.challenge().startswith(f"rules of its own ({size!r})")
    assert len({Rules.at_scale("full", size=s).challenge() for s in SIZES}) == len(SIZES)


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
    assert not ok and why.startswith("it differs from the reference network on the same weights") and "logits" in why
    ok, why = same_function(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 16 * 16, 7)), ref, image_size=16)
    assert not ok and "returned (4, 7)" in why


def test_a_run_by_the_rules_passes_and_enters_the_leaderboard(session, baseline, tmp_path):
    assert not baseline.refused and baseline.images_seen == TINY.images and baseline.speedup is None
    # a ceiling that bounds (the leaderboard refuses MFU above 100% where one does): the session's 0.1 TFLOP/s did
    # not bound an AVX-512 CPU, which ran this at 111% of it and had the entry refused
    roomy = dataclasses.replace(session, ceilings=dataclasses.replace(session.ceilings, matmul_tflops=10.0))
    baseline = judge(Submission("baseline", dataclasses.replace(FAST, sync_each_step=True, item_each_step=True)), roomy)
    v = judge(Submission("fused kernel", FAST, build_model=fuse_relu_pool), roomy, baseline=baseline)
    assert not v.refused, v.reasons
    assert v.speedup == pytest.approx(v.img_per_s / baseline.img_per_s)
    assert v.mfu_pct == pytest.approx(100 * v.img_per_s / roomy.ceiling_img_per_s) and 0 < v.mfu_pct < 100
    assert v.nvml_util_pct is None and v.peak_mem_gb is None  # a CPU: none of these, and no pretending
    assert [p["name"] for p in v.monitor.phases][:3] == ["fused kernel: set-up", "fused kernel: warm-up",
                                                          "fused kernel: measured"]
    path = tmp_path / "board.sqlite"
    leaderboard.add(v.entry(path=path), path=path)  # sealed for the file it is added to
    assert list(leaderboard.entries(path=path)["name"]) == ["fused kernel"]


def test_a_changed_network_fewer_images_or_worse_accuracy_is_refused(session, baseline, tmp_path):
    def smaller(m):
        m.conv3 = torch.nn.Conv2d(128, 256, 1)  # a cheaper layer: not the reference's function
        return m

    v = judge(Submission("1×1 conv3", FAST, build_model=smaller), session, baseline=baseline)
    assert v.refused and v.reasons[0].startswith("same_function: it differs from the reference network")
    assert v.stopped == "before training" and v.train is None  # refused before training: not trained
    path = tmp_path / "board.sqlite"
    with pytest.raises(leaderboard.EntryRefused, match="same_function"):
        leaderboard.add(v.entry(path=path), path=path)
    half = dataclasses.replace(TINY.fit(FAST), steps=1)  # the harness's images, then fewer measured steps
    v = judge(Submission("half the images", half, fit=False), session, baseline=baseline)
    assert v.refused and "trained on 16 images; every run trains on 64" in v.reasons[0]
    # worse accuracy: against a baseline no run can match (the rule itself; judge takes only a baseline it made) ...
    ok, why = accuracy_check(0.5, TINY, types.SimpleNamespace(accuracy=1.0))
    assert not ok and why.startswith("held-out accuracy"), why
    with pytest.raises(RuleBroken, match="edited after judge made it"):  # ... which cannot be typed in
        judge(Submission("fast", FAST), session, baseline=dataclasses.replace(baseline, accuracy=1.0))


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


def test_what_to_change_next_is_the_group_that_saves_most_at_its_roof_and_its_mfu_then():
    from helpers.exercises import nb06

    from fakes import next_change_case

    kernels, final, ceil = next_change_case()
    group, mfu = nb06.next_change_solution(kernels, final, ceil)
    assert group == "convolutions" and mfu == pytest.approx(28.0 * 25 / (25 - (15 - 6e12 / 450e12 * 1e3)))
    assert nb06.check_next_change(("convolutions", 30.2), kernels, final, ceil).passed
    far = nb06.check_next_change(("fully connected", 30.0), kernels, final, ceil)  # furthest from its roof, saves less
    assert not far.passed and "compare what each would save" in far.message and "50% of their roof" in far.message
    low = nb06.check_next_change(("convolutions", 28.0), kernels, final, ceil)  # the MFU it has now
    assert not low.passed and "too low" in low.message
    assert "fraction" in nb06.check_next_change(("convolutions", 0.3), kernels, final, ceil).message
    assert nb06.check_next_change(..., kernels, final, ceil).status == "not done"


# -- the final step on the roofline, the reflection, the report ---------------------------------------------------

def test_step_costs_count_the_flops_flop_counter_mode_counts():
    # FLOPs per training step from the shapes == FlopCounterMode's count of a real forward and backward, padded or not
    for model in (models.ReferenceCNN(16), models.pad_first_conv(models.ReferenceCNN(16), 8)):
        costs = step_costs(model, image_size=16, batch=2)
        counted = costs["convolutions"][0] + costs["fully connected (GEMM)"][0]
        assert counted == pytest.approx(2 * bench.flops_per_image(model, 16), rel=1e-9)
    padded = step_costs(models.pad_first_conv(models.ReferenceCNN(16), 8), image_size=16, batch=2)
    plain = step_costs(models.ReferenceCNN(16), image_size=16, batch=2)
    conv1 = 2 * 2 * (2 * 64 * 16 * 16 * 9)  # forward and weight gradient, no input gradient for the images
    assert padded["convolutions"][0] - plain["convolutions"][0] == pytest.approx(conv1 * (8 - 3))
    # the fused backward reads the input and the output gradient and writes the input gradient: about 2.25× forward
    fwd, bwd = plain["fused pool forward"][1], plain["fused pool backward"][1]
    assert bwd == pytest.approx(fwd * 9 / 5)
    # keeping the argmax: per output (4 inputs of 2 bytes) the forward writes 1 byte more (5·2 + 1 = 11 of them),
    # and the backward reads 2 + 1 bytes and writes 8 (11) instead of reading 8 + 2 and writing 8 (18)
    from helpers.kernels.relu_pool_triton import fuse_relu_pool

    argmax = step_costs(fuse_relu_pool(models.ReferenceCNN(16), keep="argmax"), image_size=16, batch=2)
    assert argmax["fused pool forward"][1] == pytest.approx(fwd * 11 / 10)
    assert argmax["fused pool backward"][1] == pytest.approx(fwd * 11 / 10)
    assert argmax["convolutions"] == plain["convolutions"]
    with pytest.raises(ValueError, match="3 convolutions, 2 linear layers"):
        step_costs(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3)), image_size=16, batch=2)


class _StepProfile(profiling.ProfileResult):
    """Two profiled steps of a GPU run: per step 3 ms of convolutions, 1 ms of each fused kernel, 1 ms of GEMM,
    and 2 ms of elementwise kernels (which go unplaced)."""

    def __init__(self):
        super().__init__(prof=None, active_steps=2)

    def top_kernels(self, n):
        import pandas as pd

        names = ["sm90_xmma_fprop_implicit_gemm", "relu_maxpool_fwd_kernel", "relu_maxpool_bwd_kernel",
                 "nvjet_tst_128x64", "triton_poi_fused_add_0"]
        us = [6000.0, 2000.0, 2000.0, 2000.0, 4000.0]
        return pd.DataFrame({"kernel": names, "kind": [profiling.kernel_kind(k) for k in names], "total_us": us})


def test_step_roofline_groups_the_kernels_and_says_what_it_left_off():
    model = models.pad_first_conv(models.ReferenceCNN(16), 8)
    k = step_roofline(_StepProfile(), model, image_size=16, batch=2)
    assert [p.name for p in k.points] == ["convolutions", "fully connected (GEMM)", "fused pool forward",
                                          "fused pool backward"]
    assert {p.name: p.ms for p in k.points} == pytest.approx({"convolutions": 3.0, "fully connected (GEMM)": 1.0,
                                                              "fused pool forward": 1.0, "fused pool backward": 1.0})
    assert k.step_kernel_ms == pytest.approx(8.0) and k.unplaced == pytest.approx({"elementwise": 25.0})
    assert k.shares["convolutions"] == pytest.approx(37.5)
    ceil = bench.Ceilings("test GPU", matmul_tflops=1.0, matmul_dtype="bfloat16", matmul_n=64, copy_gb_per_s=1.0,
                          copy_bytes=1)
    t = k.table(ceil)
    pool = t.set_index("kernels").loc["fused pool forward"]
    assert pool["bound"] == "memory"
    # kept as the table shows it, the achieved rate over FLOP/byte as shown: three figures of the bytes moved
    assert pool["GB/s moved"] == pytest.approx(step_costs(model, image_size=16, batch=2)["fused pool forward"][1] / 1e-3 / 1e9,
                                               rel=1e-2)
    # on the memory roof: bytes/s over bandwidth, to the rounding of the shown rates the share is computed from
    assert pool["% of roof"] == pytest.approx(100 * pool["GB/s moved"] / 1.0, rel=1e-2)
    assert set(k.readable(ceil).shown.index) == set(t["kernels"])
    # the convolutions' row counts conv1's zero channels: said under the table, with their share of its FLOPs
    plain = step_costs(models.ReferenceCNN(16), image_size=16, batch=2)["convolutions"][0]
    padded = step_costs(model, image_size=16, batch=2)["convolutions"][0]
    said = [n for n in k.readable(ceil).notes if n.startswith("convolutions: the FLOPs the hardware does")]
    assert len(said) == 1 and f"{tables.percent(100 * (1 - plain / padded))}% of them" in said[0], said
    assert "padded from 3 to 8" in said[0]
    unpadded = step_roofline(_StepProfile(), models.ReferenceCNN(16), image_size=16, batch=2)
    assert unpadded.notes == () and not any("zero input channels" in n for n in unpadded.readable(ceil).notes)
    over = t.set_index("kernels")["% of roof"].loc[lambda x: x > 100].index.tolist()
    notes = " ".join(k.readable(ceil).notes)
    assert ("Above 100%" in notes) == bool(over) and all(name in notes for name in over)
    slow = bench.Ceilings("test GPU", matmul_tflops=1.0, matmul_dtype="bfloat16", matmul_n=64,
                          copy_gb_per_s=1e-6, copy_bytes=1)  # a roof every kernel passes: the note says why
    assert "the bandwidth one copy kernel reached" in " ".join(k.readable(slow).notes)
    fast = bench.Ceilings("test GPU", matmul_tflops=1e6, matmul_dtype="bfloat16", matmul_n=64, copy_gb_per_s=1e6,
                          copy_bytes=1)
    assert not any("Above 100%" in n for n in k.readable(fast).notes)


def _run(v, name, img_per_s, mfu):
    return dataclasses.replace(v, name=name, img_per_s=img_per_s, mfu_pct=mfu)


def test_reflection_names_the_change_that_paid_most_and_what_to_try_next(session, baseline):
    # MFU is img/s over one ceiling: 1% per 100 img/s here. data multiplies img/s most, batch adds the most
    runs = [_run(baseline, "baseline", 100.0, 1.0), _run(baseline, "+ data", 300.0, 3.0),
            _run(baseline, "+ batch", 550.0, 5.5)]
    r = reflection(runs, None, session)
    assert r.paid_most.startswith("By factor, data paid the most (3.0× the img/s of the run before it); by amount, "
                                  "batch (+250 img/s, +2.5 MFU points)"), r.paid_most
    one = reflection(runs[:2], None, session).paid_most  # one change: the most by both measures
    assert one.startswith("data paid the most, by factor and by amount: 3.0× the img/s of the run before it, +200 "
                          "img/s, +2.0 MFU points"), one
    refused = _with_checks(_run(baseline, "+ cheat", 9000.0, 90.0), images_seen="half")
    assert reflection([*runs, refused], None, session).paid_most.startswith("By factor, data")  # refused: not counted
    # the points are the MFUs as the comparison table prints them: 06 read "+9.5 MFU points" beside 14.0 and 23.4
    printed = [_run(baseline, "baseline", 100.0, 13.96), _run(baseline, "+ batch", 170.0, 23.44)]
    assert "+9.4 MFU points" in reflection(printed, None, session).paid_most
    k = step_roofline(_StepProfile(), models.ReferenceCNN(16), image_size=16, batch=2)
    r = reflection(runs, k, session)
    assert r.biggest_bottleneck.startswith("convolutions take 3.00 ms per step, 37.5% of the top rung's kernel time (8.00 ms)")
    assert "elementwise 25.0%" in r.try_next
    with pytest.raises(ValueError, match="compares runs"):
        reflection(runs[:1], None, session)


def test_the_report_is_one_offline_file_with_this_sessions_numbers(session, baseline, tmp_path):
    final = judge(Submission("final", dataclasses.replace(FAST, batch_size=32)), session, baseline=baseline,
                  profile=True)
    assert final.checks["images_seen"][0], final.checks  # the steps profiled after judging are not the run's images
    model = models.ReferenceCNN(16)
    kernels = step_roofline(final.profile, model, image_size=16, batch=32)
    sweep = serve_sweep(model, image_size=16, batches=(1, 2), samples=100)
    path = write_report(session, [baseline, final], kernels=kernels, serving=sweep, p99_target_ms=1e3,
                        path=tmp_path / "sub" / "report.html", author="A. Learner")
    page = path.read_text()
    assert "<script" not in page and "src=" not in page  # nothing to fetch, nothing to run: it opens offline
    assert page.count("http") == page.count('xmlns="http://www.w3.org/2000/svg"')
    for svg_text in re.findall(r"<svg.*?</svg>", page, flags=re.S):
        ElementTree.fromstring(svg_text)  # every chart is well-formed
    assert page.count("<svg") >= 6  # MFU bars, utilisation, img/s, a timeline, the roofline, latency
    # the timeline and the roofline in the notebooks' colours: a row, and a kind of kernel, keeps its colour
    charts = {c.get("aria-label"): c for c in map(ElementTree.fromstring, re.findall(r"<svg.*?</svg>", page, flags=re.S))}
    timeline = next(c for t, c in charts.items() if t.startswith("final: profiled steps"))
    rows = final.profile.timeline_rows(max_per_row=600)
    fills = {r.get("fill") for r in timeline.iter(f"{SVG}rect") if r.find(f"{SVG}title") is not None}
    assert fills == {profiling.TIMELINE_COLORS[row] for row, items in rows.items() if items}
    roof = next(c for t, c in charts.items() if t.startswith("Roofline of"))
    by_kind = roofline.kind_colors(p.kind for p in kernels.points)
    assert [c.get("fill") for c in roof.iter(f"{SVG}circle")] == [by_kind[p.kind] for p in kernels.points]
    for text in ("A. Learner", f"{final.img_per_s:,.0f}", f"{baseline.img_per_s:,.0f}", "The baseline", "Reflection",
                 "The change that paid most", "What to try next", "Within a p99 of 1000 ms", env.today()):
        assert text in page, text
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]  # no temporary file left behind
    mfu = tables.percent(final.mfu_pct)  # one rounding: the verdict, the table, the chart and the report's text
    assert f"MFU {mfu}%" in str(final) and mfu in set(harness_readable_table([baseline, final]).shown["MFU %"])
    assert f">{mfu}%<" in page
    # the utilisation chart says where the timed steps were: after them the record runs on (held-out, profiling)
    assert re.search(r"utilisation over the run, timed steps \d+\.\d–\d+\.\d s \(shaded", page)
    # the speed-up too: the verdict's line and the table print the same digits (06 read "8.35×" above 8.3)
    shown_x = harness_readable_table([baseline, final]).shown["speed-up ×"].iloc[-1]
    assert f"{shown_x}×" in str(final) and shown_x == tables.sig(final.speedup_shown)
    # from the two img/s as printed: a reader's division gives it (06 read "7.76×" beside 5,591 and 721 img/s)
    assert shown_x == tables.sig(tables.as_shown(f"{final.img_per_s:,.0f}") / tables.as_shown(f"{baseline.img_per_s:,.0f}"))
    with pytest.raises(ValueError, match="compares runs"):
        write_report(session, [baseline], path=tmp_path / "r.html")


def test_the_report_is_a_hand_in_naming_who_what_changed_and_their_own_words(session, baseline, tmp_path):
    from helpers.challenge.report import changes_from

    final = judge(Submission("final", dataclasses.replace(FAST, batch_size=32)), session, baseline=baseline)
    reference = Submission("reference", FAST, build_model=fuse_relu_pool)
    mine = Submission("mine", dataclasses.replace(FAST, batch_size=32, lr=0.05))
    assert changes_from(reference, reference) == []
    words = changes_from(mine, reference)
    assert "batch_size 32, the reference 16" in words and any(w.startswith("lr 0.05, the reference") for w in words)
    assert any(w.startswith("build_model none (the reference network as it is), the reference fuse_relu_pool")
               for w in words)
    page = write_report(session, [baseline, final], path=tmp_path / "a.html", author="Ada", submission=mine,
                        reference=reference, own_words="Batch size paid most.\n\nNext: the <pool>.").read_text()
    assert "Handed in by:</b> Ada" in page and "batch_size 32, the reference 16" in page
    assert "Batch size paid most." in page and "the &lt;pool&gt;." in page  # their words, escaped, as paragraphs
    assert page.index("In my own words") < page.index("Starting points, generated")
    blank = write_report(session, [baseline, final], path=tmp_path / "b.html", submission=reference,
                         reference=reference).read_text()
    # a template handed in as it is says so where an instructor looks first
    assert "No name given" in blank and "is the reference solution, unchanged" in blank and "Not written yet" in blank


def test_the_report_holds_back_what_to_try_next_until_the_learner_s_own_answer_passes(session, baseline, tmp_path):
    from helpers.challenge.report import NEXT_HELD_BACK, reflection
    from helpers.challenge.to_target import judge_training, training_table
    from helpers.challenge.accuracy import AccuracyTarget
    from helpers.challenge.recipes import classic_training

    final = judge(Submission("final", dataclasses.replace(FAST, batch_size=32)), session, baseline=baseline)
    r = reflection([baseline, final], None, session)
    answer = r.try_next
    held = write_report(session, [baseline, final], path=tmp_path / "h.html", next_change_shown=False).read_text()
    shown = write_report(session, [baseline, final], path=tmp_path / "s.html").read_text()
    import html

    assert html.escape(NEXT_HELD_BACK) in held and html.escape(answer) not in held and html.escape(answer) in shown
    assert html.escape(r.biggest_bottleneck) not in held and html.escape(r.biggest_bottleneck) in shown
    # the learner's own training and code, above the ladder
    easy = AccuracyTarget("t", (0.02, 0.04), device="test", date="today")
    mine = judge_training(classic_training(batch_size=16, images=32), session, easy)
    page = write_report(session, [baseline, final], path=tmp_path / "o.html", own_training=training_table([mine]),
                        own_code="def my_training(model, data, device): ...").read_text()
    assert page.index("My training, judged to the target") < page.index("The baseline")
    assert "def my_training(model, data, device): ..." in page


def test_climb_says_a_rung_this_size_leaves_out_instead_of_running_it(session, baseline, capsys):
    from helpers.challenge.ladder import Rung, climb

    rung = Rung("+ batch size", "the baseline's batch and learning rate, kept", Submission("+ batch size", FAST),
                left_out="too few steps for a larger batch")
    assert climb([rung], session, baseline=baseline) == []
    assert "+ batch size: left out here (the batch stays 16: too few steps for a larger batch)" in capsys.readouterr().out


def test_mfu_is_shown_over_the_data_sheets_peak_beside_the_measured_ceiling(session):
    """MFU read 27.8% against the measured ceiling while the notebook cited PaLM's definition (the data sheet's
    dense peak), by which it was about 22.7%: every verdict now carries both, and its table and text show both."""
    sheet = dataclasses.replace(session.ceilings, bounds=True, matmul_tflops=1e-3, datasheet_tflops=2e-3,
                                datasheet_gpu="NVIDIA Example")
    gpu_like = dataclasses.replace(session, ceilings=sheet)
    base = judge(Submission("baseline", FAST), gpu_like)
    assert base.datasheet_mfu_pct == pytest.approx(base.mfu_pct / 2)
    assert f"({tables.percent(base.datasheet_mfu_pct)}% of the NVIDIA Example data sheet's peak)" in str(base)
    shown = harness_readable_table([base]).shown
    assert shown.loc["baseline", "MFU of data sheet %"] == tables.percent(base.datasheet_mfu_pct)
    unknown = judge(Submission("no sheet", FAST), dataclasses.replace(session, ceilings=dataclasses.replace(
        sheet, datasheet_tflops=None, datasheet_gpu=None)))
    table = harness_readable_table([unknown])
    assert unknown.datasheet_mfu_pct is None and table.shown.loc["no sheet", "MFU of data sheet %"] == "—"
    assert any("knows no data sheet figure for this GPU" in n for n in table.notes)


def test_on_a_cpu_mfu_and_the_bound_are_not_printed_as_bounds_and_the_leaderboard_follows(session, tmp_path):
    """06's smoke runs printed "MFU 142%" and "2.48× the baseline (at most 1.75× here)": a CPU's ceiling bounds
    nothing. Where it does not (bench.Ceilings.bounds), neither is printed as one, and the leaderboard's range check
    on MFU follows the same rule."""
    assert bench.measure_ceilings("cpu").bounds is False
    loose = dataclasses.replace(session, ceilings=dataclasses.replace(session.ceilings, bounds=False, matmul_tflops=1e-6))
    base = judge(Submission("baseline", FAST), loose)
    run = judge(Submission("run", dataclasses.replace(FAST, batch_size=32)), loose, baseline=base)
    assert run.mfu_pct > 100 and run.speedup_bound is None and not run.bounded  # the ceiling did not bound it
    text = str(run)
    assert "MFU not meaningful on a CPU" in text and "at most" not in text
    table = harness_readable_table([base, run])
    assert set(table.shown["MFU %"]) == {"—"} and any("data sheet): not meaningful on this CPU" in n for n in table.notes)
    path = tmp_path / "board.sqlite"
    added = leaderboard.add(run.entry(path=path), path=path)  # an honest CPU run is not refused for MFU > 100%
    assert added.written
    tight = dataclasses.replace(loose, ceilings=dataclasses.replace(loose.ceilings, bounds=True))
    bounded = judge(Submission("run", dataclasses.replace(FAST, batch_size=32)), tight,
                    baseline=judge(Submission("baseline", FAST), tight))  # a baseline of the same session
    assert bounded.mfu_pct > 100 and "at most" in str(bounded)
    with pytest.raises(leaderboard.EntryRefused, match="mfu_pct=.* is outside what a run can measure"):
        leaderboard.add(bounded.entry("bounded", path=path), path=path)  # where a bound holds, past it is refused
