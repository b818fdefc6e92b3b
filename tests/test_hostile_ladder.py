"""The ladder's judge (helpers.challenge.harness) against submissions that try to steer what it ranks: the held-out
accuracy is the reference network's forward on the trained weights, whatever the submission's own forward answers;
every ranked figure is derived again from the raw measurements judge took, so a record or a verdict changed after
judging is refused."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from helpers import data as _data
from helpers import leaderboard
from helpers.challenge import harness
from helpers.challenge.harness import Submission, judge

from test_judging import FAST, TINY, baseline, session  # noqa: F401 - the same tiny challenge and its fixtures

pytestmark = pytest.mark.slow  # judges hostile rungs in sandboxed child processes: `make test-slow`


class _AnswersWithLabels(nn.Module):
    """Honest on the check's batches; in evaluation mode, on a batch of the held-out set's size (the evaluation's
    one batch here), it answers with the held-out labels it regenerated from the data helpers, in their order: its
    own forward would score 100%."""

    def __init__(self, m: nn.Module, heldout: int, task: _data.Task) -> None:
        super().__init__()
        self.m = m
        self.__dict__["labels"] = torch.as_tensor(_data.heldout_images(heldout, task=task)[1])

    def forward(self, x):
        if self.training or x.shape[0] != len(self.labels):
            return self.m(x)
        return 100 * nn.functional.one_hot(self.labels, 10).float().to(x.device)


class _Frozen(nn.Module):
    """Trains, but answers in evaluation mode on large batches with the starting weights it kept aside."""

    def __init__(self, m: nn.Module) -> None:
        super().__init__()
        self.m = m
        self.__dict__["start"] = _copy(m)  # not a submodule: the harness's mapping never sees it

    def forward(self, x):
        if not self.training and x.shape[0] > 64:
            return self.start(x)
        return self.m(x)


def _copy(m):
    import copy

    return copy.deepcopy(m)


def test_the_heldout_accuracy_is_the_reference_forward_on_the_trained_weights_not_the_submissions_answer(
        session, baseline):
    rules = session.rules
    assert rules.heldout > 16  # the check before training runs 16 images: the cheat is honest there
    cheat = judge(Submission("labels", FAST, build_model=lambda m: _AnswersWithLabels(m, rules.heldout, rules.task)),
                  session, baseline=baseline)
    assert not cheat.stopped, cheat.reasons
    # its own forward would have scored 100%; the judge never asked it
    assert cheat.accuracy < 0.9
    assert cheat.accuracy == pytest.approx(baseline.accuracy, abs=0.3)


def test_a_network_that_keeps_its_start_weights_for_the_evaluation_is_judged_on_the_weights_it_trained(
        session, baseline, monkeypatch):
    seen = []
    real = harness.heldout_accuracy
    monkeypatch.setattr(harness, "heldout_accuracy", lambda net, **k: seen.append(net) or real(net, **k))
    v = judge(Submission("frozen", FAST, build_model=_Frozen), session, baseline=baseline)
    assert len(seen) == 1 and not isinstance(seen[0], _Frozen)
    trained = dict(seen[0].named_parameters())
    start = harness.start_model(session.rules)
    moved = [n for n, p in start.named_parameters() if not torch.equal(p, trained[n].detach().cpu())]
    assert moved, "the evaluated network holds the start weights, not the trained ones"


def test_every_ranked_figure_is_derived_again_from_the_raw_measurements(session, baseline, tmp_path):
    v = judge(Submission("mine", FAST), session, baseline=baseline)
    rec = harness._RECORDED[v.token]
    raw = rec.raw
    assert raw.images == v.config.steps * v.config.batch_size  # the measured steps, warm-up left out
    entry = v.entry(path=tmp_path / "board.sqlite")
    assert entry.figures["img_per_s"] == pytest.approx(raw.images / raw.seconds, rel=1e-12)
    base = harness._RECORDED[baseline.token].raw
    assert entry.figures["speedup"] == pytest.approx((raw.images / raw.seconds) / (base.images / base.seconds))
    assert entry.figures["baseline_img_per_s"] == pytest.approx(base.images / base.seconds)


@pytest.mark.parametrize("figure", ["img_per_s", "speedup", "mfu_pct", "baseline_img_per_s"])
def test_a_record_whose_figures_no_longer_follow_from_its_raw_measurements_is_refused(session, baseline, figure,
                                                                                      tmp_path):
    v = judge(Submission("mine", FAST), session, baseline=baseline)
    rec = harness._RECORDED[v.token]
    figures = dict(rec.figures)
    figures[figure] = figures[figure] * 3
    # the record and the verdict changed together: each agrees with the other, neither with the raw measurements
    harness._RECORDED[v.token] = dataclasses.replace(rec, figures=tuple(figures.items()))
    edited = dataclasses.replace(v, **{k: figures[k] for k in ("img_per_s", "mfu_pct", "baseline_img_per_s")},
                                 speedup=figures["speedup"])
    with pytest.raises(leaderboard.EntryRefused, match="do not follow from the images, seconds and ceiling"):
        edited.entry(path=tmp_path / "board.sqlite")


def test_raw_measurements_changed_with_the_figures_still_disagree_with_the_baselines_own_record(session, baseline,
                                                                                                tmp_path):
    # a forged baseline raw record (a tenth of its images) makes every speed-up ten times larger: the baseline's
    # raw measurements are judge's record of the baseline, read by its token, not a copy a verdict carries
    v = judge(Submission("mine", FAST), session, baseline=baseline)
    forged = dataclasses.replace(baseline, img_per_s=baseline.img_per_s / 10)
    with pytest.raises(harness.RuleBroken, match="no longer match what judge measured"):
        judge(Submission("mine", FAST), session, baseline=forged)
    assert harness._RECORDED[v.token].raw.baseline == harness._RECORDED[baseline.token].raw
