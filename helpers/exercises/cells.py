"""A cell named in a check's message the way a learner can find it: JupyterLab does not show a cell's id, so each
``[02-07]`` gets the heading of the section it is in::

    from helpers.exercises.cells import name_cells
    name_cells("from your grid [02-07]")   # 'from your grid [02-07] (under "Predict, then measure: the loader grid")'

The headings are read from the notebooks beside the package (``notebooks/``); where they are not there (the package
installed on its own), the id is left as it is.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

__all__ = ["name_cells", "section_of"]

_NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
_CELL = re.compile(r"\[(\d\d)-([\w-]+)\](?! \(under )")


@functools.lru_cache(maxsize=16)
def _sections(path: str, mtime: float) -> dict[str, str]:
    """Each cell's id → the heading of the section it is in (a heading cell's own), markdown marks taken out."""
    out, current = {}, ""
    for cell in json.loads(Path(path).read_text())["cells"]:
        if cell.get("cell_type") == "markdown":
            heading = next((line for line in "".join(cell["source"]).splitlines() if line.startswith("#")), None)
            if heading:
                current = re.sub(r"[`*]", "", heading.lstrip("#")).strip()
        out[cell.get("id")] = current
    return out


def section_of(cell_id: str) -> str | None:
    """The heading of the section cell ``cell_id`` (such as ``"02-07"``) is in, or None where it cannot be read."""
    path = next(iter(sorted(_NOTEBOOKS.glob(f"{cell_id[:2]}_*.ipynb"))), None)
    if path is None:
        return None
    try:
        return _sections(str(path), path.stat().st_mtime).get(cell_id) or None
    except (OSError, ValueError, KeyError):
        return None


def name_cells(text: str) -> str:
    """``text`` with each ``[NN-id]`` followed by the section it is in (once: a text already named stays as it is)."""
    def named(m: re.Match) -> str:
        heading = section_of(f"{m.group(1)}-{m.group(2)}")
        return f'{m.group(0)} (under "{heading}")' if heading else m.group(0)

    return _CELL.sub(named, text)
