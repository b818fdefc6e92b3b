"""The HTML exports an instructor presents without a GPU (scripts/export_html.py, from the latest full-scale run):
one per notebook, each naming the GPU it ran on and the date, static (no script)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_notebook_has_an_export_that_names_its_device_and_date():
    notebooks = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    exports = sorted(p.stem for p in (ROOT / "exports").glob("*.html"))
    assert exports == notebooks, "run: make export-html (after make test-gpu on a GPU node)"
    for stem in notebooks:
        page = (ROOT / "exports" / f"{stem}.html").read_text(encoding="utf-8")
        meta = re.search(r"Executed at full scale on <b>(NVIDIA [^<]+ ×\d+)</b>, (\d{4}-\d{2}-\d{2});", page)
        assert meta, f"{stem}.html does not say which GPU it ran on and when"
        assert "<script" not in page, f"{stem}.html runs a script: the exports are static"
        assert "application/vnd.plotly" not in page and "widget-view" not in page  # every figure drawn, no widget


def test_every_table_an_instructor_presents_reads_at_a_glance():
    from helpers.tables import unreadable_cells

    for page in sorted((ROOT / "exports").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        # each table with the notes under it (why a cell shows "—")
        for table in re.findall(r"<table.*?</table>(?:\s*<p class=\"table-note\".*?</p>)*", text, flags=re.S):
            assert unreadable_cells(table) == [], f"{page.name}: {unreadable_cells(table)}"
