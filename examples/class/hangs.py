"""Waits for ever in build_model (a deadlock, an input() left in): stopped at the time limit."""
import time

from helpers.challenge import ladder

config = ladder.reference_solution().config


def build_model(model):
    time.sleep(10**6)
    return model
