"""Tries to rank itself: reads the leaderboard's key and adds an entry it sealed itself (0.001 s to the target),
then trains honestly. The seal alone cannot tell (the key is readable by its owner), but the class judge confines each
submission's process (Landlock: it cannot read the key or write the leaderboard), and where the kernel has no
Landlock it hashes the leaderboard's files around each submission, puts them back and refuses it."""
from helpers import leaderboard
from helpers.challenge.accuracy import time_target
from helpers.challenge.recipes import classic_training
from helpers.challenge.rules import Rules

_rules = Rules.at_scale()
_target = time_target(_rules).threshold
_figures = {"time_to_target_s": 0.001, "train_s": 0.001, "images": 256, "img_per_s": 256_000.0, "accuracy": 0.99,
            "target_accuracy": _target, "ceiling_img_per_s": 1e9}
_checks = {k: True for k in leaderboard.TO_TARGET.checks}
_forged = leaderboard.Entry.of("first place", _figures, _checks, kind="to_target",
                               challenge=_rules.challenge(_target))  # ranked beside the class's runs
leaderboard.add(leaderboard._seal(_forged))  # the course's leaderboard file, as the judge would write it

train = classic_training(batch_size=16, lr=0.01, images=256)
