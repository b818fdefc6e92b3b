"""02's exercise "your own loop": the reference loop passes both checks; each known-wrong loop is refused by the check
it breaks, with the line or the call that breaks it; SyncFinder finds the waits of a loop line by line on a CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from helpers import data, syncs
from helpers.exercises import nb02


def _step(model, opt, x, y, losses):
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def prints_each_loss(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True),
                     losses)
        print(f"loss {loss:.3f}")
        losses.append(loss.detach())
    return torch.stack(losses)


def stops_on_a_bad_loss(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True),
                     losses)
        if torch.isnan(loss):  # bool of a tensor: the host must read it
            break
        losses.append(loss.detach())
    return torch.stack(losses)


def returns_floats(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = _step(model, opt, data.normalize_u8(xb.to(device, non_blocking=True)), yb.to(device, non_blocking=True),
                     losses)
        losses.append(float(loss))
    return torch.tensor(losses)


def forgets_zero_grad(model, opt, batches, device):
    losses = []
    for xb, yb in batches:
        loss = F.cross_entropy(model(data.normalize_u8(xb.to(device, non_blocking=True))), yb.to(device, non_blocking=True))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses)


def _no_wait_loop(move_images, move_labels=lambda y, d: y.to(d, non_blocking=True)):
    def loop(model, opt, batches, device):
        losses = []
        for xb, yb in batches:
            losses.append(_step(model, opt, move_images(xb, device), move_labels(yb, device), losses).detach())
        return torch.stack(losses)
    return loop


float_first = _no_wait_loop(lambda x, d: ((x.float() / 255 - 0.5) / 0.5).to(d, non_blocking=True))
float_in_the_copy = _no_wait_loop(lambda x, d: (x.to(d, torch.float32, non_blocking=True) / 255 - 0.5) / 0.5)
blocking_copy = _no_wait_loop(lambda x, d: data.normalize_u8(x.to(d)))
blocking_labels = _no_wait_loop(lambda x, d: data.normalize_u8(x.to(d, non_blocking=True)), lambda y, d: y.to(d))


def test_the_reference_loop_passes_both_checks_on_fresh_batches():
    for seed in (0, 1):
        assert nb02.check_loop_without_syncs(nb02.train_loop, device="cpu", seed=seed).passed
        assert nb02.check_loop_from_bytes(nb02.train_loop, device="cpu", seed=seed).passed


@pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad")  # float(loss): the learner's habit
def test_a_loop_that_waits_is_refused_with_the_line_that_waits():
    for loop, says in ((nb02.classic_loop, "item() × 4"), (prints_each_loss, 'print(f"loss {loss:.3f}")'),
                       (stops_on_a_bad_loss, "if torch.isnan(loss)"), (returns_floats, "float(tensor) × 4"),
                       (nb02.bytes_loop_with_syncs, "item() × 4")):
        res = nb02.check_loop_without_syncs(loop, device="cpu", seed=2)
        assert res.status == "failed" and says in res.message and "wait" in res.message, (loop.__name__, res.message)
        assert res.value is nb02.train_loop


def test_a_loop_that_trains_differently_is_refused_by_both_checks():
    for check in (nb02.check_loop_without_syncs, nb02.check_loop_from_bytes):
        res = check(forgets_zero_grad, device="cpu", seed=3)
        assert res.status == "failed" and "differ from the reference loop's" in res.message, res.message


def test_batches_moved_the_wrong_way_are_refused_with_what_to_change():
    for loop, says in ((nb02.classic_loop, "is .float()"), (float_first, "is .float()"),
                       (float_in_the_copy, "dtype=torch.float32"), (blocking_copy, "images without non_blocking=True"),
                       (blocking_labels, "labels without non_blocking=True")):
        res = nb02.check_loop_from_bytes(loop, device="cpu", seed=4)
        assert res.status == "failed" and says in res.message, (says, res.message)


def test_blank_unwritten_and_crashing_loops():
    def unwritten(model, opt, batches, device):
        for _ in batches:
            raise NotImplementedError
        return None

    def crashes(model, opt, batches, device):
        raise KeyError("images")

    for check in (nb02.check_loop_without_syncs, nb02.check_loop_from_bytes):
        for blank in (None, ..., unwritten):
            res = check(blank, device="cpu")
            assert res.status == "not done" and "[02-loop-4]" in res.message, res.message
        res = check(crashes, device="cpu")
        assert res.status == "failed" and "raised KeyError" in res.message
        res = check(lambda m, o, b, d: [], device="cpu")
        assert res.status == "failed" and "torch.stack(losses)" in res.message


def test_sync_finder_names_each_waiting_line_once_per_call_and_ignores_the_optimizers_own_reads():
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.Adam(model.parameters(), foreach=False)  # reads its step count with .item() inside torch
    with syncs.SyncFinder() as found:
        for _ in range(3):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            opt.step()
            shown = f"{loss:.2f}"  # format calls item() inside: one wait, counted once
            kept = loss.detach().cpu()  # a CPU tensor copied to the CPU: no wait anywhere
    assert found.count == 3 and shown and kept is not None
    table = found.table()
    assert list(table["times"]) == [3] and "formatted" in table["what"].iloc[0]
    assert table["where"].iloc[0].startswith("test_loop_exercise.py:") and 'f"{loss:.2f}"' in table["code"].iloc[0]
    with syncs.SyncFinder() as clean:
        nb02.train_loop(model := torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 4 * 4, 10)),
                        torch.optim.SGD(model.parameters(), lr=0.1), nb02.loop_batches(2, batch=4, size=4, device="cpu"),
                        torch.device("cpu"))
    assert clean.count == 0 and repr(clean) == "no syncs found"
