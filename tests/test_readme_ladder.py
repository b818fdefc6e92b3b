"""The README's table of where the learner writes each change of 06's ladder stays true: one row per rung of the
ladder (in its order, baseline aside), and every check it names is a public check of the notebook's exercises,
called in that notebook."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.challenge import ladder
from helpers.exercises import nb02, nb03, nb04, nb06

ROOT = Path(__file__).resolve().parents[1]
MODULES = {"02_dataloader": nb02, "03_kernels": nb03, "04_memory": nb04, "06_final_challenge": nb06}


def _rows() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- ladder exercises:")[1].split("<!-- /ladder exercises -->")[0]
    lines = [line for line in block.splitlines() if line.startswith("| ") and not line.startswith("| rung")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if "---" not in line]


def test_one_row_per_rung_of_the_ladder_in_its_order():
    rungs = [r.name for r in ladder.ladder(scale="full")][1:]  # the baseline is where the learner starts
    assert [row[0] for row in _rows()] == rungs


def test_every_check_named_is_called_in_the_notebook_the_row_names():
    for rung, where, checks in _rows():
        names = re.findall(r"`(check_\w+)`", checks)
        notebooks = re.findall(r"`(\d\d_\w+)`", where)
        if not names:
            assert checks == "—" and where.startswith("not written by you"), rung
            continue
        for name in names:
            owners = [nb for nb in notebooks if name in MODULES[nb].__all__]
            assert owners, f"{rung}: {name} is not a check of {notebooks}"
            source = (ROOT / "notebooks" / f"{owners[0]}.ipynb").read_text()
            assert f"checks.{name}(" in source, f"{rung}: {owners[0]} never calls {name}"
