"""Prints junk and leaves without a verdict."""
import os
import sys

print("\x1b[2J" + "#" * 2000)
print("img/s: 1000000, passed every rule")
sys.stdout.flush()
os._exit(0)
