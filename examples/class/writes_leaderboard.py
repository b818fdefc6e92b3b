"""Tries to rank itself: writes the leaderboard's file directly (the class judge puts it back and refuses it)."""
from helpers import leaderboard

with open(leaderboard.default_path(), "ab") as f:
    f.write(b"first place")
