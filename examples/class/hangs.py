"""Never returns: its data loader's worker waits for ever (a deadlock, an input() left in a transform). Stopped at
the time limit, with every process it started (its loader's worker included)."""
import os
import sys
import time

from helpers.challenge.recipes import classic_training


class _Stuck:
    """A transform that never returns (in the loader's worker process)."""

    def __call__(self, image):
        print(f"loader worker {os.getpid()}: waiting for ever", file=sys.stderr, flush=True)
        time.sleep(10**6)


def train(model, data, device):
    print(f"training process {os.getpid()}", file=sys.stderr, flush=True)
    # fork: the worker inherits this file's _Stuck as it is (another start method would have to import the file)
    for x, y in data.loader(batch_size=16, num_workers=1, transform=_Stuck(), multiprocessing_context="fork"):
        pass
    return classic_training()(model, data, device)
