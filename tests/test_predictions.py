"""The predictions 01, 04 and 05 begin with: a blank one is not done, a wrong form fails and says what form is due,
one made after the measurement started fails, one made in time passes with the prediction beside the measurement;
no input makes a check raise."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
import time
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest
import torch

from helpers.ddp import scaling
from helpers.exercises import nb01, nb02, nb03, nb04, nb05, nb06
from helpers.exercises.predictions import Prediction
from helpers.memory.anatomy import GIB, Anatomy
from helpers.train import TrainConfig, TrainResult

NAN, INF = float("nan"), float("inf")

#: What learners type where a number is due, and then some: none may make a check raise.
BATTERY = {"None": None, "a number in a string": "48", "an empty string": "", "a list": [1, 2], "a dict": {},
           "NaN": NAN, "inf": INF, "a bool": True, "10**400": 10**400, "a tensor": torch.ones(3),
           "an object": object(), "-inf": -INF, "a negative number": -3, "Ellipsis": ..., "bytes": b"48",
           "a numpy bool": np.bool_(True), "a complex": 1 + 2j, "a class": int, "a function": len,
           "a 0-d bool tensor": torch.tensor(True), "10**5000": 10**5000}


# -- what each notebook measured, as its measurement returns it -------------------------------------------------

def _baseline(data_wait_share: float) -> TrainResult:
    return TrainResult(config=TrainConfig(), device="cpu", precision="fp32", img_per_s=300.0, step_ms_median=100.0,
                       step_ms_p95=110.0, data_wait_share=data_wait_share, phase_ms={"data": 83.2, "compute": 16.8},
                       peak_allocated_gib=None, loss=2.0, accuracy=0.1, steps=12, wall_s=1.2)


def _anatomy(activations_gib: float, weights_gib: float) -> Anatomy:
    return Anatomy("SGD + momentum, fp32", params=int(weights_gib * GIB), grads=int(weights_gib * GIB),
                   optimizer_state=int(weights_gib * GIB), activations=int(activations_gib * GIB),
                   peak_forward=None, peak_backward=None, peak_optimizer=None, allocated_after=None,
                   reserved_after=None, nvml_used_after=None)


def _scaling_table(big: int, small: int, efficiency: dict[int, float]):
    """scaling.scaling_table of one and two ranks at each batch, with two ranks at ``efficiency[batch]`` %."""
    def stats(batch, world, step_ms):
        return scaling.RunStats(f"batch {batch}", world, batch, batch, step_ms, step_ms, step_ms, world > 1)

    one = {f"batch {b}": stats(b, 1, 10.0) for b in (big, small)}
    two = {f"batch {b}": stats(b, 2, 10.0 * 100 / efficiency[b]) for b in (big, small)}
    return scaling.scaling_table({1: one, 2: two})


@dataclasses.dataclass(frozen=True)
class Case:
    """One notebook's prediction: how to make one, what was measured, and the check run on both."""

    notebook: str
    fields: tuple[str, ...]
    good: dict[str, float]  # a prediction in the right form
    shown: tuple[str, ...]  # how the good prediction and the measurement read in the passed message
    form: str  # what a wrong form's message says is due
    predict: Callable[..., Prediction]
    check: Callable[[Any, Any], Any]  # (prediction, started) -> CheckResult
    cell: str = ""  # the prediction's cell, where its message sends the learner: "NN-pred-2" unless given

    def __post_init__(self) -> None:
        if not self.cell:
            object.__setattr__(self, "cell", f"{self.notebook}-pred-2")  # frozen: set once, here


#: A loader grid as 02 measures it: the main process alone at best 500 img/s, four workers 3,000.
_GRID = pd.DataFrame([{"batch_size": 32, "num_workers": 0, "pin_memory": False, "img_per_s": 500.0},
                      {"batch_size": 32, "num_workers": 4, "pin_memory": True, "img_per_s": 3000.0},
                      {"batch_size": 256, "num_workers": 0, "pin_memory": True, "img_per_s": 450.0}])

CASES = [
    Case("01", ("waiting_for_data_pct",), {"waiting_for_data_pct": 40}, ("40.0%", "83.2%", "43.2 percentage points"),
         "a share in % from 0 to 100", nb01.predict,
         lambda p, started: nb01.check_prediction(p, _baseline(0.832), started=started)),
    Case("02", ("fastest_over_no_workers_x",), {"fastest_over_no_workers_x": 2}, ("2×", "6×", "4× below"),
         "how many times, a number above 0", nb02.predict,
         lambda p, started: nb02.check_prediction(p, _GRID, started=started), cell="02-06"),
    Case("03", ("convolution_share_pct",), {"convolution_share_pct": 70}, ("70.0%", "44.0%", "26.0 percentage points"),
         "a share in % from 0 to 100", nb03.predict,
         lambda p, started: nb03.check_prediction(p, pd.Series({"convolution": 0.44, "pooling": 0.3, "GEMM": 0.26}),
                                                  started=started)),
    Case("04", ("activations_over_weights_x",), {"activations_over_weights_x": 2}, ("2×", "8.5×", "6.5× below"),
         "how many times, a number above 0", nb04.predict,
         lambda p, started: nb04.check_prediction(p, _anatomy(3.4, 0.4), started=started)),
    Case("05", ("big_batch_efficiency_pct", "small_batch_efficiency_pct"),
         {"big_batch_efficiency_pct": 90, "small_batch_efficiency_pct": 85}, ("90.0%", "97.0%", "85.0%", "71.0%"),
         "a share in % from 0 to 100", nb05.predict,
         lambda p, started: nb05.check_prediction(p, _scaling_table(256, 32, {256: 97.0, 32: 71.0}), started=started,
                                                  big=256, small=32, on_gpus=True)),
    Case("06", ("top_rung_speedup_x",), {"top_rung_speedup_x": 10}, ("10×", "31.1×", "3.11 times your prediction"),
         "how many times, a number above 0", nb06.predict,
         lambda p, started: nb06.check_prediction(p, SimpleNamespace(speedup=31.1, speedup_bound=60.0),
                                                  started=started)),
]
IDS = [c.notebook for c in CASES]


def _in_time(case: Case, prediction: Any):
    """The check of ``prediction`` (made before this call) against a measurement that starts now."""
    return case.check(prediction, nb01.measuring("the measurement"))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_blank_prediction_is_not_done_and_names_its_cell(case):
    for blank in (case.predict(), None):
        res = _in_time(case, blank)
        assert res.status == "not done", res
        assert f"[{case.cell}]" in res.message and "checks.predict(" in res.message
    if len(case.fields) > 1:  # half filled in: the rest is named
        res = _in_time(case, case.predict(**{case.fields[0]: 50}))
        assert res.status == "not done" and case.fields[1] in res.message, res


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("wrong", ["48", NAN, True, [1, 2], -5, 10**400, torch.ones(3)],
                         ids=["string", "NaN", "bool", "list", "negative", "huge", "tensor"])
def test_a_wrong_form_fails_and_says_what_form_is_due(case, wrong):
    answers = {**case.good, case.fields[-1]: wrong}
    res = _in_time(case, case.predict(**answers))
    assert res.status == "failed", res
    assert case.fields[-1] in res.message and case.form in res.message and "you gave" in res.message, res.message
    assert f"[{case.cell}]" in res.message


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_something_other_than_a_prediction_fails_and_says_how_to_make_one(case):
    for wrong in ("48", 48, [48], nb01.predict(waiting_for_data_pct=5) if case.notebook != "01"
                  else nb04.predict(activations_over_weights_x=2)):
        res = _in_time(case, wrong)
        assert res.status == "failed" and "checks.predict(" in res.message, res


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_prediction_made_after_the_measurement_started_fails(case):
    started = nb01.measuring("the measurement")
    time.sleep(0.01)  # a clock of coarse resolution would otherwise read the same moment twice
    res = case.check(case.predict(**case.good), started)
    assert res.status == "failed", res
    assert "after the measurement started" in res.message and "first" in res.message
    assert f"[{case.cell}]" in res.message and "run the notebook on from that cell" in res.message


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_prediction_made_in_time_passes_beside_the_measurement(case):
    prediction = case.predict(**case.good)
    time.sleep(0.01)
    res = _in_time(case, prediction)
    assert res.status == "passed", res
    for text in case.shown:
        assert text in res.message, (text, res.message)
    assert res.value == {k: float(v) for k, v in case.good.items()}


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_far_off_prediction_passes_too(case):
    res = _in_time(case, case.predict(**{f: 100 if f.endswith("_pct") else 1000 for f in case.fields}))
    assert res.status == "passed" and "above it" in res.message, res


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("label", list(BATTERY))
def test_no_input_makes_a_check_raise(case, label):
    value = BATTERY[label]
    for prediction in (value, case.predict(**{f: value for f in case.fields}),
                       case.predict(**{**case.good, case.fields[0]: value})):
        res = _in_time(case, prediction)  # must not raise
        assert res.status in ("not done", "failed"), res
        assert str(res) and res._repr_html_()


def test_numpy_scalars_and_0d_tensors_are_numbers():
    for number in (np.float32(40), np.int64(40), torch.tensor(40.0), np.array(40.0)):
        res = _in_time(CASES[0], nb01.predict(waiting_for_data_pct=number))
        assert res.passed and "40.0%" in res.message, res


def test_a_figure_not_measured_here_is_said_so_not_compared():
    case = next(c for c in CASES if c.notebook == "05")
    prediction, mine = case.predict(**case.good), nb01.predict(waiting_for_data_pct=40)
    started = nb05.measuring("the scaling launches")
    res = nb05.check_prediction(prediction, None, started=started, big=8, small=2, on_gpus=False)  # a one-GPU node
    assert res.passed and "Not measured here" in res.message and "two GPUs" in res.message, res
    res = nb01.check_prediction(mine, _baseline(NAN), started=started)  # a run its time box cut short
    assert res.passed and "Not measured here" in res.message and "%" not in res.message.split("Not measured")[0]


def test_on_a_cpu_05_says_its_ranks_are_not_gpus():
    case = next(c for c in CASES if c.notebook == "05")
    prediction = case.predict(**case.good)
    table = _scaling_table(8, 2, {8: 60.0, 2: 45.0})
    res = nb05.check_prediction(prediction, table, started=nb05.measuring("the scaling launches"), big=8, small=2,
                                on_gpus=False)
    assert res.passed and "Two ranks' efficiency at 8 images each" in res.message and "gloo ranks" in res.message


def test_when_a_prediction_was_made_cannot_be_set():
    with pytest.raises(TypeError):
        Prediction({"waiting_for_data_pct": 40}, made_at=0.0)  # noqa: the field is not an argument
    assert "made_at" not in repr(nb01.predict(waiting_for_data_pct=40))  # a repr a learner reads, no clock reading


def test_the_comparison_is_the_measurements_own():
    # the same prediction against two measurements: the message follows what was measured
    prediction = nb04.predict(activations_over_weights_x=2)
    started = nb04.measuring("the anatomy")
    low = nb04.check_prediction(prediction, _anatomy(0.2, 0.4), started=started)
    high = nb04.check_prediction(prediction, _anatomy(4.0, 0.4), started=started)
    assert "measured 0.5×" in low.message and "weights are the larger part" in low.message
    assert "measured 10×" in high.message and "activations are the larger part" in high.message


def test_a_prediction_cannot_be_changed_after_it_was_made():
    """Its answers are read-only, and a tensor or array given as an answer is copied when the prediction is made: a
    fill_() after the measurement changes nothing."""
    import numpy as np
    import torch

    guess = torch.tensor(2.0)
    prediction = nb04.predict(activations_over_weights_x=guess)
    with pytest.raises(TypeError):
        prediction.answers["activations_over_weights_x"] = 8.5
    guess.fill_(8.5)
    started = nb04.measuring("the anatomy")
    res = nb04.check_prediction(prediction, _anatomy(3.4, 0.4), started=started)
    assert res.passed and "you predicted 2×" in res.message, res.message
    arr = np.array(60.0)
    made = nb01.predict(waiting_for_data_pct=arr)
    arr.fill(83.2)
    res = nb01.check_prediction(made, _baseline(0.832), started=nb01.measuring("the run"))
    assert "you predicted 60.0%" in res.message, res.message


@pytest.mark.parametrize("started", [None, 3.0, "now", object()])
def test_a_start_that_is_not_a_measuring_mark_fails_without_raising(started):
    res = nb01.check_prediction(nb01.predict(waiting_for_data_pct=40), _baseline(0.5), started=started)
    assert res.status == "failed" and "checks.measuring" in res.message, res.message
