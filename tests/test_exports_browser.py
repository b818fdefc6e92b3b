"""The HTML exports (exports/*.html) as an instructor opens them: offline, in a real browser (Debian's Chromium,
driven by Playwright, as in tests/test_browser.py) at a laptop's 1280 px. An export fails, saying where, on:

- a figure that did not draw: every figure the HTML embeds (the SVG images scripts/export_html.py writes, a plotly
  div) must decode and take room on the page, a plotly figure with at least one trace drawn; the figures in the
  HTML are counted against those drawn, and a plotly figure that did not draw is named by its title. The export's
  own line "exported with N static figures" must match the plotly figures on the page;
- a tick label (the rendered SVG's x and y ticks) reading NaN or Infinity, or a power of ten past 10^15
  (figure_check.MAX_DECADE): what a log axis stretched by a misplaced label shows;
- a console error or an uncaught page error;
- a request that leaves the file (anything but data:, blob:, about: or the export itself): aborted, and named by
  its URL. An export is one file an instructor copies alone, so another local file counts too;
- content wider than the page (the page scrolls sideways: the blocks reaching past its edge are named) and a
  ``pre``, table or output block whose content is cut by its box, hidden or behind a scroll bar (a projector, a
  screenshot and a print show it cut), named by tag and its first 80 characters.

One browser serves every export; a full-page screenshot of each goes to build/artifacts/exports/<name>.png for a
person to look at. The last test breaks each check on purpose, so a check that stopped seeing is caught too.
"""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path

import pytest

from helpers.figure_check import MAX_DECADE

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "build" / "artifacts" / "exports"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EXPORTS = sorted((ROOT / "exports").glob("*.html"))
VIEWPORT = {"width": 1280, "height": 800}  # a typical laptop
LOCAL = ("data:", "blob:", "about:")

pytestmark = [
    pytest.mark.slow,  # opens every export in a headless browser: `make test-slow`
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed: 'make test-slow' installs it "
                       "(scripts/ensure_browser.sh)"),
]

#: Runs in the page once it has loaded: every figure (decoded, drawn, its tick labels) and every block too wide.
INSPECT = r"""async ({maxDecade}) => {
  const clip = s => (s || '').replace(/\s+/g, ' ').trim().slice(0, 80);
  const name = e => e.tagName.toLowerCase() + (e.classList.length ? '.' + [...e.classList].join('.') : '');
  const deepest = els => {  // drop an element that holds another of the list: name the block that is too wide
    const holds = new Set();
    for (const e of els) for (let a = e.parentElement; a; a = a.parentElement) holds.add(a);
    return [...new Set(els)].filter(e => !holds.has(e));
  };
  const svgOf = img => {  // the SVG document an <img src="data:image/svg+xml..."> draws
    const comma = img.src.indexOf(',');
    const head = img.src.slice(0, comma), body = img.src.slice(comma + 1);
    if (!/^data:image\/svg\+xml/.test(head)) return null;
    try {
      const text = head.endsWith(';base64')
        ? new TextDecoder().decode(Uint8Array.from(atob(body), c => c.charCodeAt(0))) : decodeURIComponent(body);
      const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
      return doc.querySelector('parsererror') ? null : doc.documentElement;
    } catch (e) { return null; }
  };
  const label = text => [...text.childNodes].map(n =>  // a superscript (plotly's 10^n) as ^n
      n.nodeType === 1 && /^-/.test(n.getAttribute('dy') || '') ? '^' + n.textContent : n.textContent)
    .join('').replace(/\u200b/g, '').trim();
  const decade = s => {  // the power of ten a tick label shows, or null
    let m = s.match(/10\^([-−]?\d+)$/) || s.match(/\d[eE]([-+−]?\d+)$/);
    if (m) return Math.abs(parseInt(m[1].replace('−', '-'), 10));
    m = s.replace(/[,\s\u2009\u202f]/g, '').match(/^[-−]?(\d+)(\.\d*)?$/);
    return m ? m[1].replace(/^0+/, '').length - 1 : null;
  };

  await document.fonts.ready;
  const inFigure = e => e.parentElement && e.parentElement.closest('svg, .plotly-graph-div, .js-plotly-plot');
  const figures = [];
  for (const el of document.querySelectorAll('img, svg, .plotly-graph-div, .js-plotly-plot')) {
    if (inFigure(el)) continue;
    const why = [], tag = el.tagName.toLowerCase();
    let svg = null;
    if (tag === 'img') {
      el.loading = 'eager';
      try { await el.decode(); } catch (e) { why.push('the image does not decode'); }
      if (!why.length && !el.naturalWidth) why.push('the image is empty');
      svg = svgOf(el);
      if (/^data:image\/svg\+xml/.test(el.src) && !svg) why.push('its SVG does not parse');
    } else {
      svg = el instanceof SVGSVGElement ? el : el.querySelector('.main-svg');
      if (!svg) why.push('plotly drew no SVG in it (no script ran)');
    }
    const box = el.getBoundingClientRect();
    if (box.width < 1 || box.height < 1) why.push('it takes no room on the page');
    const plotly = (tag !== 'img' && tag !== 'svg') || !!(svg && svg.classList.contains('main-svg'));  // Kaleido's
    const scope = svg && tag !== 'img' && tag !== 'svg' ? el : svg;  // plotly.js draws a div's title in a 2nd SVG
    const title = scope && scope.querySelector('.gtitle') ? clip(scope.querySelector('.gtitle').textContent) : '';
    const ticks = [];
    if (svg && plotly) {
      const traces = [...scope.querySelectorAll('.trace, .heatmaplayer .hm')];  // a heatmap is an image in .hm
      const drawn = traces.filter(t => [...t.querySelectorAll('path')].some(p => {
        const d = (p.getAttribute('d') || '').trim();
        return d && !/^M0,0Z?$/.test(d) && !/NaN/.test(d);
      }) || t.querySelector('image') || [...t.querySelectorAll('text')].some(x => x.textContent.trim()));
      if (!drawn.length) why.push(traces.length ? `none of its ${traces.length} traces drew a mark` : 'no trace');
      for (const g of scope.querySelectorAll('g')) {
        if (!/^[xy]\d*tick$/.test(g.getAttribute('class') || '')) continue;
        const text = g.querySelector('text');
        const s = text ? label(text) : '';
        const d = decade(s);
        if (/NaN|Infinity|∞/.test(s) || (d !== null && d > maxDecade)) ticks.push(s);
      }
    }
    figures.push({tag, plotly, title: title || `untitled ${tag}`, why, ticks});
  }

  const page = document.scrollingElement, vw = page.clientWidth;
  const block = e => {  // the nearest block around an inline element
    while (e.parentElement && e.parentElement !== document.body && getComputedStyle(e).display.startsWith('inline'))
      e = e.parentElement;
    return e;
  };
  const cut = deepest([...document.querySelectorAll(
      'pre, table, .output_area, .output_subarea, .jp-OutputArea-output, .jp-RenderedText, .jp-RenderedHTMLCommon')]
    .filter(e => {
      if (e.scrollWidth <= e.clientWidth + 1) return false;
      const ox = getComputedStyle(e).overflowX;
      return ox !== 'visible' || e.getBoundingClientRect().left + e.scrollWidth > vw + 1;
    }));
  let past = [];
  if (page.scrollWidth > vw + 1) {
    for (const e of document.body.querySelectorAll('*')) {
      if (inFigure(e)) continue;
      const r = e.getBoundingClientRect();
      const spills = getComputedStyle(e).overflowX === 'visible' && r.left + e.scrollWidth > vw + 1;
      if (r.width > 0 && (r.right > vw + 1 || r.left < -1 || spills)) past.push(block(e));
    }
    past = deepest(past).filter(e => !cut.includes(e));  // a block already named below
  }
  const describe = e => ({what: name(e), text: clip(e.innerText || e.textContent), content_px: e.scrollWidth,
                          box_px: e.clientWidth, overflow: getComputedStyle(e).overflowX});
  return {figures, page_px: page.scrollWidth, viewport_px: vw, past: past.map(describe), cut: cut.map(describe)};
}"""


def embedded_figures(page: str) -> int:
    """Figures in the HTML itself, before any browser: images (the exporter's SVGs), inline SVGs, plotly divs."""
    return len(re.findall(r"<img\b|<svg\b|class=[\"'][^\"']*\bplotly-graph-div\b", page))


def console(message, errors: list[str], own: str) -> None:
    """Keep a console error, with the resource it is about (a failed load names only its URL there)."""
    if message.type == "error":
        at = message.location.get("url") or own
        errors.append(f"console error: {message.text}" + (f" ({at})" if at != own else ""))


def problems(browser, path: Path, *, screenshot: Path | None = None) -> list[str]:
    """What is wrong with the HTML file at ``path`` opened offline in ``browser``; [] when nothing is."""
    context = browser.new_context(viewport=VIEWPORT, offline=True, service_workers="block")
    own = path.resolve().as_uri()
    left: dict[str, None] = {}  # requests that leave the file, in order, once each
    errors: list[str] = []

    def local(url: str) -> bool:
        return url.startswith(LOCAL) or url.split("#")[0] == own

    def route(r) -> None:
        if local(r.request.url):
            r.continue_()
        else:
            left[r.request.url] = None
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.on("request", lambda r: None if local(r.url) else left.setdefault(r.url))
    page.on("websocket", lambda ws: left.setdefault(ws.url))
    page.on("console", lambda m: console(m, errors, own))
    page.on("pageerror", lambda e: errors.append(f"uncaught page error: {e}"))
    try:
        page.goto(own, wait_until="load")
        found = page.evaluate(INSPECT, {"maxDecade": MAX_DECADE})
        if screenshot is not None:
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
    finally:
        context.close()

    out = []
    html = path.read_text(encoding="utf-8")
    figures = found["figures"]
    failed = [f for f in figures if f["why"]]
    embedded = embedded_figures(html)
    if failed or embedded != len(figures):
        out.append(f"{len(figures) - len(failed)} of {embedded} figures in the HTML drew; not drawn: " + "; ".join(
            f"figure {figures.index(f) + 1}, '{f['title']}' ({', '.join(f['why'])})" for f in failed))
    claimed = re.search(r"exported with (\d+) static figures?\b", html)
    plotly = sum(f["plotly"] for f in figures)
    if claimed and int(claimed.group(1)) != plotly:
        out.append(f"the export says it drew {claimed.group(1)} figures; the page holds {plotly} plotly figures")
    for i, f in enumerate(figures, 1):
        if f["ticks"]:
            out.append(f"figure {i}, '{f['title']}', has tick labels no reader can use (NaN, Infinity or past "
                       f"10^{MAX_DECADE}): " + ", ".join(f["ticks"]))
    out += errors
    out += [f"a request leaves the file: {url}" for url in left]
    if found["page_px"] > found["viewport_px"] + 1:
        out.append(f"the page is {found['page_px']} px wide at {found['viewport_px']} px: it scrolls sideways")
    for e in found["past"] + found["cut"]:
        what = "reaches past the page's edge" if e["overflow"] == "visible" else "is cut by its box"
        out.append(f"<{e['what']}> {what} ({e['content_px']} px of content in {e['box_px']} px, overflow-x "
                   f"{e['overflow']}): \"{e['text']}\"")
    return out


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage"],
        )
        try:
            yield b
        finally:
            b.close()


@pytest.mark.parametrize("path", EXPORTS, ids=[p.name for p in EXPORTS])
def test_an_export_draws_every_figure_offline_without_errors_and_fits_a_laptop(browser, path):
    found = problems(browser, path, screenshot=ARTIFACTS / f"{path.stem}.png")
    assert not found, f"{path.name} (screenshot: build/artifacts/exports/{path.stem}.png):\n- " + "\n- ".join(found)


def _figure(title: str, trace: str, ticks: list[str]) -> str:
    """A plotly-like SVG (the classes Kaleido writes) as the exporter embeds it: a base64 data: image."""
    xticks = "".join(f'<g class="xtick"><text>{t}</text></g>' for t in ticks)
    svg = (f'<svg class="main-svg" xmlns="http://www.w3.org/2000/svg" width="300" height="200">'
           f'<g class="cartesianlayer"><g class="trace scatter">{trace}</g></g><g class="xaxislayer-above">{xticks}</g>'
           f'<g class="infolayer"><g class="g-gtitle"><text class="gtitle">{title}</text></g></g></svg>')
    return f'<img src="data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()}">'


def test_the_checks_catch_a_page_that_breaks_each_of_them(browser, tmp_path):
    line = '<path class="js-line" d="M0,100L100,50L200,80"/>'
    page = tmp_path / "broken.html"
    page.write_text(
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<link rel='stylesheet' href='https://fonts.example.invalid/face.css'></head><body>"
        "<p>exported with 5 static figures</p>"
        + _figure("drawn well", line, ["1", "10", "1,000,000,000,000,000"])
        + _figure("no data", '<path class="js-line" d="M0,0Z"/>', ["0", "1"])
        + _figure("stretched axis", line, ["1", "10\u200b<tspan dy='-0.6em'>57</tspan>",
                                           "NaN×10<tspan dy='-0.6em'>Infinity</tspan>", "1e+20", "12345678901234567"])
        + "<img src='data:image/svg+xml;base64,bm90IGFuIFNWRw=='>"  # "not an SVG"
        + "<img src='neighbour.png'>"
        + "<div class='plotly-graph-div' style='height: 300px'></div>"  # plotly.js never ran
        + "<script>console.error('a failing cell'); fetch('http://tracker.example.invalid/hit').catch(() => 0);"
        "setTimeout(() => { throw new Error('kaput'); });</script>"
        + "<pre style='overflow-x: hidden; width: 300px'>" + "hidden summary " * 40 + "</pre>"
        + "<pre>" + "wide summary " * 200 + "</pre>"
        + "<table style='width: 300px'><tr><td>short</td></tr></table></body></html>", encoding="utf-8")
    found = "\n".join(problems(browser, page))
    assert "2 of 6 figures in the HTML drew" in found, found
    assert "figure 2, 'no data' (none of its 1 traces drew a mark)" in found and "'drawn well'" not in found, found
    assert "its SVG does not parse" in found and "figure 4, 'untitled img' (the image does not decode" in found, found
    assert "figure 6, 'untitled div' (plotly drew no SVG in it (no script ran))" in found, found
    assert "the export says it drew 5 figures; the page holds 4 plotly figures" in found, found
    assert "figure 3, 'stretched axis', has tick labels" in found, found
    assert "10^57, NaN×10^Infinity, 1e+20, 12345678901234567" in found, found
    assert "1,000,000,000,000,000" not in found  # 10^15: the largest a tick may show
    assert "console error: a failing cell" in found and "uncaught page error: kaput" in found, found
    for url in ("https://fonts.example.invalid/face.css", "http://tracker.example.invalid/hit", "neighbour.png"):
        assert re.search(f"a request leaves the file: \\S*{re.escape(url)}", found), (url, found)
    assert "<pre> is cut by its box" in found and '"hidden summary hidden summary' in found, found
    assert "<pre> reaches past the page's edge" in found and '"wide summary wide summary' in found, found
    assert "scrolls sideways" in found and "short" not in found, found


def test_a_fresh_export_wraps_a_long_summary_and_draws_a_log_axis_figure(browser, tmp_path):
    """What the next full-scale export holds, made here without a GPU: a printed summary wider than the page and the
    roofline (a log axis with its ridge labelled), through scripts/export_html.py and then the checks above."""
    pytest.importorskip("kaleido", reason="the export extra draws the figures: pip install -e '.[export]'")
    import importlib.util
    import json

    import nbformat

    from helpers.bench import Ceilings
    from helpers.roofline import RooflinePoint, roofline_figure

    spec = importlib.util.spec_from_file_location("export_html", ROOT / "scripts" / "export_html.py")
    export_html = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(export_html)
    ceil = Ceilings(device_name="NVIDIA H100 80GB HBM3", matmul_tflops=797.0, matmul_dtype="bfloat16", matmul_n=8192,
                    copy_gb_per_s=3023.0, copy_bytes=2**30)
    points = [RooflinePoint("conv1", 44.4e9, 1.72e9, "convolution", 4.48),
              RooflinePoint("relu", 0.82e9, 3.29e9, "elementwise", 1.09)]
    fig = roofline_figure(points, ceil)
    summary = "GPU     NVIDIA H100 80GB HBM3 ×1\n" + "steady state: GPU utilisation 97%, SM activity 91% | " * 12
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(summary)\nfig.show()", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text=summary + "\n"),
        nbformat.v4.new_output("display_data", data={export_html.PLOTLY: json.loads(fig.to_json())})])])
    src = tmp_path / "03_kernels.ipynb"
    src.write_text(nbformat.writes(nb), encoding="utf-8")
    page = export_html.export(src, tmp_path / "exports", tmp_path / "results")
    found = problems(browser, page, screenshot=ARTIFACTS / "fresh-export.png")
    assert not found, "a fresh export (build/artifacts/exports/fresh-export.png):\n- " + "\n- ".join(found)
