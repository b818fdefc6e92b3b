#!/usr/bin/env python3
"""Export the executed notebooks of the latest full-scale run as HTML an instructor can present without a GPU.

    make export-html                                   # installs the export extra, then runs this
    python3 scripts/export_html.py                     # build/executed/*.ipynb → exports/*.html
    python3 scripts/export_html.py --from DIR --to DIR

Each export opens offline in any browser: every plotly figure is drawn as a static SVG (Kaleido, with Chromium),
live widgets are left out (their static figure follows them), nothing is fetched and no script runs. The first
lines of each say where and when it ran: the GPU named in the notebook's own output and the date of that GPU's
results file. ``tests/test_exports.py`` checks that every notebook has an export and that each names both.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
#: The page's style. An output's long lines (a printed summary, a traceback) wrap inside the page, breaking anywhere
#: if a word alone is too long, rather than run past a box an instructor cannot scroll on a projector or a print;
#: code keeps its lines. ``tests/test_exports_browser.py`` opens each export at 1280 px and fails on a cut block.
_STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45;color:#222}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}
.output_area pre{white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #ddd;padding:2px 6px;text-align:right}
.meta{background:#eef4fb;padding:.6em 1em;border-left:4px solid #1f77b4}img,svg{max-width:100%;height:auto}"""


def ran_on(nb: dict) -> str | None:
    """The GPU the notebook ran on, from its own printed environment report (``GPU     NVIDIA H100 … ×1, …``)."""
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = "".join(out.get("text", "")) if out.get("output_type") == "stream" else ""
            m = re.search(r"^GPU\s+(.+?) ×(\d+)", text, flags=re.M)
            if m:
                return f"{m.group(1)} ×{m.group(2)}"
    return None


def results_date(device: str, results_dir: Path) -> str | None:
    """The date of that GPU's results file (``results/<gpu-slug>.json``), the run these exports come from."""
    from helpers import env

    path = results_dir / f"{env.gpu_slug(device.split(' ×')[0])}.json"
    return json.loads(path.read_text()).get("date") if path.exists() else None


#: An absolute path up to one of the repository's own folders (the machine's checkout, whatever its name), and a
#: Python installation's site-packages: what a traceback or a "saved to" line would carry from the machine.
_MACHINE_PATH = re.compile(r"(?<![\w.~:/])/(?:[\w.@+-]+/)*?(?=(?:results|notebooks|runs|exports|build|helpers)/)")
_SITE = re.compile(r"(?<![\w.~:/])/(?:[\w.@+-]+/)+(?=site-packages/)")
_PYTHON = re.compile(r"(?<![\w.~:/])/(?:[\w.@+-]+/)+bin/(python[\d.]*)\b")  # a command line's interpreter
_TEMP = re.compile(r"(?<![\w.~:/])/tmp/[\w.@+-]+/")  # a run's temporary folder
_PROMPT = re.compile(r'<div class="prompt[^"]*">.*?</div>', flags=re.S)  # "In [ ]:" / "Out[ ]:"
_ANCHOR = re.compile(r'<a class="anchor-link" href="[^"]*">¶</a>')  # the "¶" after every heading


def scrub(body: str) -> str:
    """The exported HTML without the exporting or executing machine's paths (a path into the repository is shown
    from the repository, ``results/…``; a library's from ``site-packages/``), without the prompts of a notebook
    run elsewhere (they show as empty "In [ ]:" once exported) and without the headings' "¶" links."""
    body = _PROMPT.sub("", body)
    body = _ANCHOR.sub("", body)
    body = _SITE.sub("", body)
    body = _PYTHON.sub(r"\1", body)
    body = _TEMP.sub("$TMPDIR/", body)
    return _MACHINE_PATH.sub("", body)


_CELL = re.compile(r"<(td|th)>(.*?)</\1>", flags=re.S)
_DATE = re.compile(r"\d{4}-\d\d-\d\d")
_LONG_TOKEN = re.compile(r"\S{32,}")  # a kernel's name: 90 characters with no space to wrap at


def breakable_cells(body: str) -> str:
    """Table cells holding a long word (a CUDA kernel's mangled or templated name) may break it anywhere, as an
    output's long lines do: a table of fifteen columns then fits the page instead of running past it. Other cells
    keep their numbers whole. (At 16em, 03's ncu table of fifteen columns grew past a 1280 px page: the page then
    scrolled sideways. Its names break every few words at 6em; a page that fits comes first.)"""
    def mark(m: re.Match) -> str:
        text = html.unescape(re.sub(r"<[^>]+>", "", m.group(2)))
        if _DATE.fullmatch(text.strip()):  # the leaderboard's dates had wrapped at their hyphens, a day to a line
            return f'<{m.group(1)} style="white-space:nowrap">{m.group(2)}</{m.group(1)}>'
        if not _LONG_TOKEN.search(text):
            return m.group(0)
        return f'<{m.group(1)} style="overflow-wrap:anywhere;min-width:6em">{m.group(2)}</{m.group(1)}>'

    return _CELL.sub(mark, body)


#: What stands where a live widget stood in a static page.
STATIC_PANEL_NOTE = {
    "output_type": "display_data", "metadata": {},
    "data": {"text/html": '<p class="static-panel-note" style="font-style:italic;margin:2px 0">A live panel stood here: '
                          "its controls run in the notebook, not in this page. What it showed when the notebook ran "
                          "follows.</p>",
             "text/plain": "A live panel stood here: its controls run in the notebook, not in this page."},
}


def static_outputs(nb: dict) -> int:
    """Replace every plotly figure by an SVG and drop live widgets; return how many figures were drawn."""
    import plotly.io as pio

    drawn = 0
    for cell in nb["cells"]:
        kept = []
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if PLOTLY in data:
                fig = pio.from_json(json.dumps(data[PLOTLY]))
                svg = fig.to_image(format="svg").decode()
                out["data"] = {"image/svg+xml": svg}
                drawn += 1
            elif WIDGET in data:
                # the live widget: its static figure is the next output. The prose above it asks for its controls
                # ("press Run"), which a static page has none of: say so where they stood
                kept.append(STATIC_PANEL_NOTE)
                continue
            kept.append(out)
        cell["outputs"] = kept
    nb.get("metadata", {}).pop("widgets", None)
    return drawn


def current_prose(nb: dict, source: Path) -> bool:
    """Give the executed ``nb`` the markdown of the notebook in the repository (``source``) when their code cells are
    the same, cell by cell: prose edited after the run is what a learner reads now, and the numbers it stands beside
    come from code that has not changed. Returns whether it did; with other code, the run's own prose stays."""
    if not source.exists():
        return False
    now = json.loads(source.read_text(encoding="utf-8"))

    def code(book):
        return [(c.get("id"), "".join(c["source"]).strip()) for c in book["cells"] if c["cell_type"] == "code"]

    if code(now) != code(nb):
        return False
    prose = {c.get("id"): c["source"] for c in now["cells"] if c["cell_type"] == "markdown"}
    ran = [c.get("id") for c in nb["cells"] if c["cell_type"] == "markdown"]
    if sorted(map(str, ran)) != sorted(map(str, prose)):
        return False
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell["source"] = prose[cell.get("id")]
    return True


#: What the banner says of the page's numbers. 03 said "every number here was measured in that run" above a line
#: that reads max-autotune's cost from results/ (a script measured it: a first call of minutes), and 02 quotes 01's
#: baseline: each such line names where its figure comes from.
PROVENANCE = ("Every number here was measured in that run, except where a line says it quotes another notebook's "
              "figure or a script's, recorded in results/.")


def export(path: Path, out_dir: Path, results_dir: Path) -> Path:
    import nbformat
    from nbconvert import HTMLExporter

    nb = json.loads(path.read_text())
    device = ran_on(nb)
    if device is None:
        raise SystemExit(f"{path.name}: no environment report with a GPU in its outputs: export a full-scale run "
                         "(scripts/gpu_test.py keeps them in build/executed/).")
    # the day the notebook ran (the notebook runs stamp it); an older run without the stamp: its results file's date
    date = nb.get("metadata", {}).get("gpu_perf_lab", {}).get("executed") or results_date(device, results_dir) \
        or "date unknown"
    current_prose(nb, ROOT / "notebooks" / path.name)
    figures = static_outputs(nb)
    body, _ = HTMLExporter(template_name="basic").from_notebook_node(nbformat.reads(json.dumps(nb), as_version=4))
    body = re.sub(r"<script\b.*?</script>", "", body, flags=re.S)  # nothing runs: the figures are SVG already
    body = breakable_cells(scrub(body))
    meta = (f"<p class='meta'>Executed at full scale on <b>{html.escape(device)}</b>, {html.escape(date)}; exported "
            f"with {figures} static figure{'' if figures == 1 else 's'} by scripts/export_html.py. {PROVENANCE}</p>")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(path.stem)} ({html.escape(device)}, "
            f"{html.escape(date)})</title><style>{_STYLE}</style></head><body>{meta}{body}</body></html>")
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / f"{path.stem}.html"
    dest.write_text(page, encoding="utf-8")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", default=str(ROOT / "build" / "executed"), help="executed notebooks")
    ap.add_argument("--to", dest="dst", default=str(ROOT / "exports"), help="where the HTML goes")
    args = ap.parse_args(argv)
    src = Path(args.src)
    books = sorted(src.glob("[0-9][0-9]_*.ipynb"))
    if not books:
        print(f"no executed notebooks in {src}: run the course at full scale first (make test-gpu).", file=sys.stderr)
        return 1
    for nb in books:
        dest = export(nb, Path(args.dst), ROOT / "results")
        print(f"{nb.name} → {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
