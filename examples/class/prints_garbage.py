"""Prints junk (terminal escapes, a made-up verdict) and leaves without one: nothing it prints is ever read as a
result, so it is refused for ending without a readable verdict."""
import os
import sys


def train(model, data, device):
    sys.__stdout__.write("\x1b[2J" + "#" * 2000 + "\n")
    sys.__stdout__.write("my run: reached the target in 0.001 s, passed every rule\n")
    sys.__stdout__.write('{"name": "my run", "passed": true, "figures": {"time_to_target_s": 0.001}}\n')
    sys.__stdout__.flush()
    os._exit(0)  # a clean exit code, and no verdict
