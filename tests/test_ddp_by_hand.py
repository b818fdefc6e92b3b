"""Data parallelism by hand (05): each step of the reference file passes against DDP on two gloo ranks, a file not
written yet is "not done", and known-wrong answers are refused with what they did."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.ddp import by_hand
from helpers.ddp import launch as L
from helpers.exercises import nb05

pytestmark = pytest.mark.slow  # launches groups of gloo ranks: `make test-slow`

SOLUTION = nb05.SYNC_SOLUTION

SKELETON = '''
def sync_each(model):
    raise NotImplementedError("average every gradient over the ranks")


def sync_bucketed(model, bucket_mb):
    raise NotImplementedError("the same, in buckets")


class Overlapped:
    def __init__(self, model, bucket_mb):
        raise NotImplementedError("start each bucket's all-reduce from a hook")
'''


def _variant(old: str, new: str) -> str:
    assert SOLUTION.count(old) == 1, old
    return SOLUTION.replace(old, new)


#: (step, the file, what the refusal must say)
WRONG = {
    "sums without dividing": ("each", _variant("            p.grad /= world\n", ""),
                              "(its largest value is 2× DDP's)"),
    "averages the weights' gradients only": ("each", _variant("        if p.grad is not None:\n            dist.all_reduce(p.grad)",
                                                              "        if p.grad is not None and p.dim() > 1:\n            dist.all_reduce(p.grad)"),
                                             "bias's gradient differs from DDP's"),
    "takes rank 0's gradients": ("each", _variant("            dist.all_reduce(p.grad)  # a sum, by default\n            p.grad /= world",
                                                  "            dist.broadcast(p.grad, src=0)"),
                                 "it called dist.all_reduce not once in a step"),
    "one all-reduce per gradient": ("bucketed", _variant("def sync_bucketed(model, bucket_mb):\n",
                                                         "def sync_bucketed(model, bucket_mb):\n    return sync_each(model)\n"),
                                    "all-reduces for 10 gradients: nothing was packed"),
    "one bucket whatever its size": ("bucketed", _variant("    for bucket in _buckets([p for p in model.parameters() if p.grad is not None], bucket_mb):",
                                                          "    for bucket in [[p for p in model.parameters() if p.grad is not None]]:"),
                                     "more than a bucket of 1 MB"),
    "never writes the mean back": ("bucketed", _variant("        flat /= world\n        offset = 0\n        for p in bucket:\n            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))\n            offset += p.numel()\n\n\nclass",
                                                        "        flat /= world\n\n\nclass"),
                                   "gradient differs from DDP's"),
    "everything after backward": ("overlapped", _variant("                p.register_post_accumulate_grad_hook(lambda p, i=i: self._ready(i))",
                                                         "                pass"),
                                  "every all-reduce ran after backward had finished"),
    "waits inside backward": ("overlapped", _variant(  # each bucket all-reduced in its hook, waited for there
        "            self.pending.append((dist.all_reduce(flat, async_op=True), flat, bucket))",
        "            dist.all_reduce(flat)\n            self.pending.append((_Done(), flat, bucket))") + (
        "\n\nclass _Done:\n    def wait(self):\n        pass\n"), "wait for themselves (async_op=False)"),
    "forgets the mean": ("overlapped", _variant("            handle.wait()\n            flat /= self.world\n",
                                                "            handle.wait()\n"),
                         "(its largest value is 2× DDP's)"),
}
# "everything after backward" leaves finish() with nothing pending: give it the after-backward all-reduces
WRONG["everything after backward"] = ("overlapped", WRONG["everything after backward"][1].replace(
    "    def finish(self):\n        \"\"\"After backward: wait for each bucket, write its mean back into the gradients.\"\"\"\n",
    "    def finish(self):\n        \"\"\"After backward: wait for each bucket, write its mean back into the gradients.\"\"\"\n"
    "        for i in range(len(self.buckets)):\n            self.ready[i] = len(self.buckets[i]) - 1\n"
    "            self._ready(i)\n"), WRONG["everything after backward"][2])


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> dict[str, nb05.CheckResult]:
    """The check's verdict on the reference's three steps and on each known-wrong file, all run in one launch of two
    gloo ranks (tests/workers_in_one_launch.py: each job forked from ranks that started once, about 12 s saved a
    job); the job's ranks get the arguments the check gives them (by_hand.arguments). One check below launches
    its own ranks, end to end."""
    tmp = tmp_path_factory.mktemp("by_hand")
    jobs = [(f"reference {step}", step, SOLUTION) for step in by_hand.STEPS]
    jobs += [(wrong, step, text) for wrong, (step, text, _) in WRONG.items()]
    paths, specs = [], []
    for i, (_, step, text) in enumerate(jobs):
        path = tmp / "files" / str(i) / "my_sync.py"
        path.parent.mkdir(parents=True)
        path.write_text(text)
        paths.append(path)
        specs.append(json.dumps({"module": "helpers.ddp.by_hand", "argv": list(by_hand.arguments(path, step))}))
    logs = tmp / "logs"
    logs.mkdir()
    driver = Path(__file__).with_name("workers_in_one_launch.py")
    node = L.launch(L.LaunchSpec(nproc_per_node=2, script=str(driver), timeout_s=600,
                                 args=("-", str(tmp / "out"), str(logs), "60", *specs)), on_line=None)
    assert node.ok, node.error
    verdicts = {}
    for i, (label, step, _) in enumerate(jobs):
        rcs = [(logs / f"{i}.rank{r}.rc").read_text() for r in (0, 1)]
        lines = tuple(line for r in (0, 1) for line in (logs / f"{i}.rank{r}.log").read_text().splitlines())
        timed_out = "timeout" in rcs
        res = L.LaunchResult(node.command, None if timed_out else max(abs(int(rc)) for rc in rcs), timed_out,
                             node.wall_s, lines, L.parse_results(lines))
        verdicts[label] = nb05._sync_verdict(paths[i], step, res)
    return verdicts


@pytest.mark.parametrize("step", ["each", "bucketed", "overlapped"])
def test_the_reference_passes_each_step_against_ddp(launched, step):
    res = launched[f"reference {step}"]
    assert res.passed and res.value.name == "my_sync.py", res.message


def test_the_check_launches_its_own_ranks_end_to_end(tmp_path):
    path = tmp_path / "my_sync.py"
    path.write_text(SOLUTION)
    res = nb05.check_sync(path, "overlapped")
    assert res.passed and res.value == path and "started during backward" in res.message, res.message


def test_a_file_not_written_yet_is_not_done_and_carries_on_with_the_reference(tmp_path):
    assert nb05.check_sync(tmp_path / "missing.py", "each").status == "not done"
    path = tmp_path / "my_sync.py"
    path.write_text(SKELETON)
    res = nb05.check_sync(path, "bucketed")
    assert res.status == "not done" and "sync_bucketed(model, bucket_mb)" in res.message
    assert res.value.read_text() == SOLUTION


@pytest.mark.parametrize("wrong", list(WRONG))
def test_known_wrong_answers_are_refused_with_what_they_did(launched, wrong):
    res = launched[wrong]
    assert res.status == "failed" and WRONG[wrong][2] in res.message, res.message
    assert res.value.read_text() == SOLUTION  # the reference, to carry on with


def test_several_steps_in_one_launch_each_report_their_own_timing_and_calls(tmp_path):
    """05's timing table: the three steps timed one after another in one process group (by_hand.run_steps)."""
    path = tmp_path / "my_sync.py"
    path.write_text(SOLUTION)
    res = by_hand.run_steps({step: path for step in by_hand.STEPS}, time_steps=True, timeout_s=300)
    assert res.ok, res.error
    for step in by_hand.STEPS:
        mine = [r for r in res.results if r.get("step") == step]
        assert sorted(r["rank"] for r in mine) == [0, 1] and all(r["ok"] for r in mine), mine
        assert mine[0]["ms_mine"] > 0 and mine[0]["ms_ddp"] > 0
    each, bucketed = ([r for r in res.results if r.get("step") == s and r["rank"] == 0][0] for s in ("each", "bucketed"))
    assert each["calls"][-1] > bucketed["calls"][-1]  # counted apart: one all-reduce a tensor against one a bucket
    with pytest.raises(ValueError, match="each, bucketed, overlapped"):
        by_hand.run_steps({"each": path, "ring": path})


def test_a_step_that_is_not_one_of_the_three_is_refused_with_the_three():
    with pytest.raises(ValueError, match="each, bucketed, overlapped"):
        nb05.check_sync("x.py", "ring")


def _handed_out() -> str:
    """The file 05's %%writefile cell hands out, as the learner first runs it."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "05_ddp.ipynb").read_text())
    cell = next(c for c in nb["cells"] if c.get("id") == "05-hand-2")
    return "".join(cell["source"]).split("\n", 1)[1]  # without the %%writefile line


def test_a_step_still_as_handed_out_is_not_done_without_starting_ranks(tmp_path, monkeypatch):
    """05 at full scale spent 42 s starting gloo ranks three times to learn that the handed-out file raises
    NotImplementedError: that is known from the file itself."""
    from helpers.ddp import by_hand

    def no_ranks(*a, **k):
        raise AssertionError("ranks started for a step still as handed out")

    path = tmp_path / "my_sync.py"
    path.write_text(_handed_out())
    monkeypatch.setattr(by_hand, "run", no_ranks)
    for step in ("each", "bucketed", "overlapped"):
        res = nb05.check_sync(path, step)
        assert res.status == "not done" and by_hand.STEPS[step] in res.message and res.value.read_text() == SOLUTION


@pytest.mark.parametrize("written", [
    "def sync_each(model):\n    if model is None:\n        raise NotImplementedError\n    return None\n",
    "def sync_each(model):\n    import torch.distributed as dist\n    raise NotImplementedError\n",
    "sync_each = print\n",
])
def test_a_step_the_learner_has_touched_is_run_not_guessed(tmp_path, written):
    path = tmp_path / "my_sync.py"
    path.write_text(written)
    assert not nb05._still_handed_out(path, "each")
    path.write_text(_handed_out())
    assert nb05._still_handed_out(path, "each") and nb05._still_handed_out(path, "overlapped")
    path.write_text("def sync_each(model:\n")  # does not parse: the ranks say so
    assert not nb05._still_handed_out(path, "each")
