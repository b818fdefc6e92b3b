import pytest

from helpers.exercises import common, nb00, nb01
from helpers.exercises.nb01 import BaselineAnalysis, BaselineEvidence

# A GPU-like baseline: data dominates, compute is a sixth of a step, the roofline is far away.
GPU_EVIDENCE = BaselineEvidence(
    util_pct=40.0, util_source="nvml", img_per_s=500.0,
    phase_ms={"data": 45.0, "h2d": 3.0, "compute": 10.0, "other": 6.0}, ceiling_img_per_s=66_000.0,
)
# A CPU-like baseline: compute dominates.
CPU_EVIDENCE = BaselineEvidence(
    util_pct=70.0, util_source="host", img_per_s=90.0,
    phase_ms={"data": 4.0, "h2d": 0.0, "compute": 160.0, "other": 2.0}, ceiling_img_per_s=150.0,
)


# -- 00: ceiling ---------------------------------------------------------------------------------------
def test_reference_ceiling_passes_its_check():
    res = nb00.check_ceiling_img_per_s(nb00.ceiling_img_per_s, seed=1)
    assert res.passed and res.value is nb00.ceiling_img_per_s


def test_unsolved_ceiling_is_not_done_and_carries_the_reference():
    def todo(a, b):
        raise NotImplementedError

    res = nb00.check_ceiling_img_per_s(todo)
    assert res.status == "not done" and not res
    assert res.value is nb00.ceiling_img_per_s
    assert "carries on with the reference" in res.message


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda t, g: t / g, "10^-3"),                  # forgot the units
        (lambda t, g: g * 1e9 / (t * 1e12), "upside down"),
        (lambda t, g: "fast", "return the number"),
        (lambda t, g: 1 / 0, "ZeroDivisionError"),
        (lambda t, g: t * 1e12 / (g * 1e9) * 3, "expected"),  # counted backward twice
    ],
)
def test_wrong_ceilings_are_rejected_with_a_hint(wrong, hint):
    res = nb00.check_ceiling_img_per_s(wrong, seed=0)
    assert res.status == "failed"
    assert hint in res.message
    assert res.value is nb00.ceiling_img_per_s


def test_a_hard_coded_answer_fails():
    res = nb00.check_ceiling_img_per_s(lambda t, g: 66_335.0, seed=2)
    assert res.status == "failed"


def test_check_results_render():
    res = nb00.check_ceiling_img_per_s(nb00.ceiling_img_per_s)
    assert str(res).startswith("✓") and "passed" in res._repr_html_()


# -- 01: baseline analysis -----------------------------------------------------------------------------
@pytest.mark.parametrize("evidence", [GPU_EVIDENCE, CPU_EVIDENCE])
def test_reference_analysis_passes_on_any_evidence(evidence):
    ref = nb01.baseline_analysis(evidence)
    res = nb01.check_baseline_analysis(ref, evidence)
    assert res.passed, res.message


def test_the_reference_reading_divides_the_phases_as_printed():
    # 01 read 4.15 beside phases printed to the hundredth (38.49 ÷ 9.26 is 4.16); here 38.48 ÷ 9.26, as printed
    evidence = nb01.BaselineEvidence(util_pct=18.0, util_source="nvml", img_per_s=651.0, ceiling_img_per_s=65_340.0,
                                     phase_ms={"data": 26.4749, "h2d": 2.7549, "compute": 9.2649, "other": 0.0})
    assert round(evidence.speedup_if_only_compute(), 2) == 4.15
    assert nb01.baseline_analysis(evidence).speedup_if_only_compute_x == 4.16  # 38.48 ÷ 9.26 = 4.156


def test_a_good_learner_answer_passes():
    # read from the printed numbers: step 64 ms over compute 10 ms, 66,000 over 500 img/s, both rounded
    answer = BaselineAnalysis(gpu_util_pct=35, bottlenecks=["data_loading", "compute"], speedup_if_only_compute_x=6,
                              speedup_at_ceiling_x=130)
    res = nb01.check_baseline_analysis(answer, GPU_EVIDENCE)
    assert res.passed and res.value is answer


def test_empty_analysis_is_not_done():
    res = nb01.check_baseline_analysis(BaselineAnalysis(), GPU_EVIDENCE)
    assert res.status == "not done"
    assert res.value == nb01.baseline_analysis(GPU_EVIDENCE)
    assert nb01.check_baseline_analysis(BaselineAnalysis(40, ["data_loading"], 6.4), GPU_EVIDENCE).status == "not done"


@pytest.mark.parametrize(
    "answer, says",
    [
        (BaselineAnalysis(90, ["data_loading"], 6.4, 132), "monitor measured 40%"),
        (BaselineAnalysis(40, ["compute", "data_loading"], 6.4, 132), "'data_loading' takes the largest share"),
        (BaselineAnalysis(40, ["dataloader"], 6.4, 132), "not bottleneck names"),
        (BaselineAnalysis(40, ["data_loading"], 1.5, 132), "speedup_if_only_compute_x = 1.5 is 77% too low"),
        (BaselineAnalysis(40, ["data_loading"], 100, 132), "is 1462% too high"),  # a guess between the two
        (BaselineAnalysis(40, ["data_loading"], 6.4, 100), "speedup_at_ceiling_x = 100 is 24% too low"),
        # the two quantities swapped: each is refused, and the message says which figure it was
        (BaselineAnalysis(40, ["data_loading"], 132, 6.4), "That is the compute ceiling's figure"),
        (BaselineAnalysis(40, ["data_loading"], 6.4, 6.4), "That is the figure with only the compute left"),
    ],
)
def test_wrong_analyses_say_what_the_measurements_show(answer, says):
    res = nb01.check_baseline_analysis(answer, GPU_EVIDENCE)
    assert res.status == "failed"
    assert says in res.message, res.message


def test_evidence_figures():
    assert GPU_EVIDENCE.speedup_if_only_compute() == pytest.approx(64 / 10)
    assert GPU_EVIDENCE.speedup_at_ceiling() == pytest.approx(132)
    assert GPU_EVIDENCE.ranked_bottlenecks()[0] == "data_loading"
    assert CPU_EVIDENCE.ranked_bottlenecks()[0] == "compute"


def test_targets_are_asserted_only_at_full_scale():
    targets = [common.Target("speedup", 5.0, "tuned vs baseline"),
               common.Target("bound_speedup", 9.0, "bound by the node's CPU", required=False)]
    figures = {"speedup": 4.0, "bound_speedup": 7.0}
    table = common.check_targets(figures, targets, scale="smoke")  # a CPU run informs, never fails
    assert list(table.met) == [False, False] and not table.asserted.any()
    with pytest.raises(AssertionError, match=r"speedup = 4, wanted ≥ 5 \(tuned vs baseline\)") as err:
        common.check_targets(figures, targets, scale="full")
    assert "bound_speedup" not in str(err.value)  # not required: shown, not asserted
    ok = common.check_targets({"speedup": 5.5, "bound_speedup": 7.0}, targets, scale="full")
    assert list(ok.met) == [True, False] and list(ok.asserted) == [True, False]
    with pytest.raises(KeyError, match="no figure named 'speedup'"):
        common.check_targets({}, targets, scale="full")


def test_every_check_names_its_notebook():
    # "05 · predict the efficiency of two GPUs", "06.1 · spot the cheat": a learner sees which notebook a result is from
    import ast
    from pathlib import Path

    folder = Path(nb01.__file__).parent
    names = {}
    for path in sorted(folder.glob("nb[0-9][0-9].py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["name"]
                    and isinstance(node.value, ast.Constant)):
                names.setdefault(path.stem[2:], []).append(node.value.value)
    assert set(names) == {p.stem[2:] for p in folder.glob("nb[0-9][0-9].py")}  # every notebook's checks were found
    for number, found in names.items():
        for name in found:
            assert name.startswith(f"{number} · ") or name.startswith(f"{number}.") and " · " in name, name
