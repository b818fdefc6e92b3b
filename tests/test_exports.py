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
        # the banner says which numbers the run measured: not "every number" above a line quoting results/
        assert "except where a line says it quotes another notebook's figure or a script's" in page, stem
        assert "<script" not in page, f"{stem}.html runs a script: the exports are static"
        assert "application/vnd.plotly" not in page and "widget-view" not in page  # every figure drawn, no widget


def test_every_table_an_instructor_presents_reads_at_a_glance():
    from helpers.tables import unreadable_cells

    for page in sorted((ROOT / "exports").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        # each table with the notes under it (why a cell shows "—")
        for table in re.findall(r"<table.*?</table>(?:\s*<p class=\"table-note\".*?</p>)*", text, flags=re.S):
            assert unreadable_cells(table) == [], f"{page.name}: {unreadable_cells(table)}"


def test_every_ratio_an_export_prints_beside_its_figures_is_their_arithmetic():
    """03 printed "eager 0.704 ms, compiled 0.129 ms (5.4×)" and 06 "1.64 → 5.56 GiB (+240%)": a reader dividing
    the printed figures gets 5.46 and +239%. The notebook runs refuse such a cell now; the exports must agree too."""
    import html as html_lib

    from helpers.tables import arithmetic_disagreements

    for page in sorted((ROOT / "exports").glob("*.html")):
        text = html_lib.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
        assert arithmetic_disagreements(text) == [], f"{page.name}: {arithmetic_disagreements(text)}"


def test_an_export_carries_no_machine_paths_no_empty_prompts_and_no_heading_links():
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_html", ROOT / "scripts" / "export_html.py")
    export_html = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_html)
    html = ('<div class="prompt input_prompt">In&nbsp;[&nbsp;]:</div><h2 id="Setup">Setup'
            '<a class="anchor-link" href="#Setup">¶</a></h2><pre>saved to /work/main/results/h100.json\n'
            'File /opt/torch/.venv/lib/python3.12/site-packages/torch/nn/x.py:12\n'
            'trace in /home/ana/gpu-perf-lab/runs/01/trace.json; see https://example.org/a/results/b\n'
            'ncu --log-file /tmp/gpu-perf-lab-ncu-x1/ncu.csv /opt/torch/.venv/bin/python3 -m helpers.ncu_target</pre>')
    clean = export_html.scrub(html)
    assert "prompt" not in clean and "¶" not in clean and "/work" not in clean and "/home" not in clean
    assert "saved to results/h100.json" in clean and "File site-packages/torch/nn/x.py:12" in clean
    assert "trace in runs/01/trace.json" in clean and "https://example.org/a/results/b" in clean  # a URL stays
    assert "--log-file $TMPDIR/ncu.csv python3 -m helpers.ncu_target" in clean


def test_the_committed_exports_carry_no_machine_paths_prompts_or_heading_links():
    for page in sorted((ROOT / "exports").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        assert "¶" not in text and 'class="prompt' not in text, f"{page.name}: run make export-html"
        leaked = re.findall(r"(?<![\w.~:/])/(?:home|root|work|tmp|opt|Users)/[^\s<\"']*", text)
        # a glob ("/opt/nvidia/nsight-systems/*/bin": where a tool is looked for on any machine) names no machine's files
        leaked = [path for path in leaked if "*" not in path]
        assert not leaked, f"{page.name} carries the machine's paths: {leaked[:3]}"


def _export_code_cells(page: str) -> dict[str, str]:
    """Each code cell of an export by its cell id: the source as the page shows it, tags taken off."""
    import html as html_lib

    cells = {}
    for m in re.finditer(r'<div class="cell border-box-sizing code_cell[^"]*" id="cell-id=([^"]+)">(.*?)</pre>',
                         page, flags=re.S):
        code = m.group(2).split("<pre>", 1)[-1]
        cells[m.group(1)] = html_lib.unescape(re.sub(r"<[^>]+>", "", code))
    return cells


def _lines(source: str) -> list[str]:
    return [line.rstrip() for line in source.strip("\n").splitlines()]


def test_every_export_shows_the_code_its_notebook_holds_now():
    """02's export showed two code cells that differed from the notebook: an instructor presenting it showed code
    the learner does not have. Every code cell of each export equals its notebook's, cell by cell."""
    import json

    for nb_path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        page = (ROOT / "exports" / f"{nb_path.stem}.html").read_text(encoding="utf-8")
        shown = _export_code_cells(page)
        want = {c["id"]: "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"}
        assert list(shown) == list(want), (f"{nb_path.stem}: the export's code cells are not the notebook's "
                                           f"(run the notebook at full scale, then make export-html)")
        stale = [cid for cid, src in want.items() if _lines(shown[cid]) != _lines(src)]
        assert not stale, (f"{nb_path.stem}.html shows other code than the notebook in cells {stale}: run the "
                           "notebook at full scale, then make export-html")


def test_an_export_takes_the_notebooks_prose_of_now_only_where_its_code_is_the_runs(tmp_path):
    """Prose fixed after a full-scale run reached the exports only with the next run: an instructor showed the old
    sentence beside the numbers. The export takes the repository's markdown when the code cells are the run's."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("export_html", ROOT / "scripts" / "export_html.py")
    export_html = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_html)

    def book(prose, code):
        return {"cells": [{"cell_type": "markdown", "id": "m", "source": prose, "metadata": {}},
                          {"cell_type": "code", "id": "c", "source": code, "metadata": {}, "outputs": []}]}

    source = tmp_path / "00_x.ipynb"
    source.write_text(json.dumps(book("Past the cores the sweep says which.", "print(1)\n")))
    ran = book("Past them, workers only take turns.", "print(1)")
    assert export_html.current_prose(ran, source) and ran["cells"][0]["source"] == "Past the cores the sweep says which."
    other = book("Past them, workers only take turns.", "print(2)")  # the code changed since the run: its prose stays
    assert not export_html.current_prose(other, source) and other["cells"][0]["source"].startswith("Past them")


def test_a_cell_with_a_kernels_long_name_may_break_and_numbers_stay_whole():
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_html", ROOT / "scripts" / "export_html.py")
    export_html = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_html)
    name = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64"
    out = export_html.breakable_cells(f"<tr><td>{name}</td><td>513,802,240</td><th>DRAM bytes written</th></tr>")
    assert f'<td style="overflow-wrap:anywhere;min-width:6em">{name}</td>' in out
    assert "<td>513,802,240</td>" in out and "<th>DRAM bytes written</th>" in out
    # a date keeps to one line (the leaderboard's had wrapped at its hyphens)
    assert export_html.breakable_cells("<td>2026-11-29</td>") == '<td style="white-space:nowrap">2026-11-29</td>'


def test_no_export_says_an_earlier_notebook_of_its_run_had_not_run():
    """02's export printed "01 has not run on this machine" though 01 had run on that GPU the same day: each call to
    the GPU node restored the results file from the repository, so 02 never saw 01's baseline, and its table lost
    the baseline row and the speed-ups over it. An export is the full course's run: what it compares with ran."""
    for page in sorted((ROOT / "exports").glob("*.html")):
        text = re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))
        # the sentence as printed, not the code's string that prints it (after a quote: `"01 has not run`)
        missing = re.findall(r"(?<![\"';])\b(\d\d) has not run on this machine", text)
        assert not missing, (f"{page.name} ran without {missing}'s figures: run those notebooks first, in the same "
                             "session and with the same results/ file, then make export-html")


def test_a_live_widget_becomes_a_note_saying_its_controls_run_in_the_notebook():
    import importlib.util

    spec = importlib.util.spec_from_file_location("export_html", ROOT / "scripts" / "export_html.py")
    export_html = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_html)
    widget = {"output_type": "display_data", "metadata": {},
              "data": {export_html.WIDGET: {"model_id": "abc", "version_major": 2, "version_minor": 0}}}
    chart = {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "the chart it drew"}}
    nb = {"metadata": {"widgets": {"state": {}}}, "cells": [{"cell_type": "code", "outputs": [widget, chart]}]}
    assert export_html.static_outputs(nb) == 0
    outs = nb["cells"][0]["outputs"]
    assert [o["data"].get("text/plain") for o in outs] == [export_html.STATIC_PANEL_NOTE["data"]["text/plain"],
                                                           "the chart it drew"]
    assert "widgets" not in nb["metadata"] and "controls run in the notebook" in outs[0]["data"]["text/html"]
