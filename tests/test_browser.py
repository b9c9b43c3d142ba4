"""The notebooks as a reader meets them: JupyterLab in a real browser (Debian's chromium, driven by playwright).

`jupyter lab` runs on 127.0.0.1 over a temporary copy of notebooks/ (`quick = True`; running cells never
rewrites a committed notebook or figure). Every other notebook as stored (`test_stored_notebook_renders`): its
figures drawn and readable (no axis title over a legend, no bare-digit log ticks, no piled labels), its tables
whole, and the notebook not marked modified by opening it. Notebooks 00 and 08: opened as stored, every stored
plotly figure renders and no dashboard shows as its repr; Run All from the Run menu runs every cell in order; a
plotly figure and the ipywidgets render; one widget moved changes the dashboard's output. The slides of 00
(`make slides`): reveal.js starts offline and draws the figures.
Screenshots go to results/browser/ (NN_stored.png and NN_stored_end.png as opened, NN_run_all.png,
NN_widget.png, 00_slides.png).

No browser is downloaded: playwright (the Python package only) drives /usr/bin/chromium, which `.ci/run`
installs with apt. The test skips only where playwright or chromium is missing. Chromium's background
networking is switched off: this machine's closed network refuses those connections.

    flock /tmp/specdec_heavy.lock timeout 900 pytest -q -m browser tests/test_browser.py
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
SCREENSHOTS = ROOT / "results" / "browser"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PLOTLY_MIME = "application/vnd.plotly.v1+json"
LAB_SETTINGS = ROOT / "notebooks" / "jupyterlab_settings.json"
SERVER_TIMEOUT_S = 120  # jupyter lab answering /api/status
LOAD_TIMEOUT_S = 120  # a notebook page rendered, its kernel idle
RUN_ALL_TIMEOUT_S = 900  # Run All in quick mode on a busy 2-core machine: only a hang should reach it
WIDGET_TIMEOUT_S = 180  # a dashboard's output reacting to one widget change

NB = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook on screen: every query is scoped to it
# notebook stem -> CSS selector of its dashboard's root widget (the last match in an output is used).
DASHBOARDS = {
    "00_getting_started": ".jupyter-widgets.widget-vbox:not(.widget-vbox .widget-vbox)",
    "08_speedup_lab": ".specdec-lab",
}


def _chromium() -> str:
    for candidate in (os.environ.get("SPECDEC_LAB_CHROMIUM"), "/usr/bin/chromium", shutil.which("chromium")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.skip("chromium not found at /usr/bin/chromium (install it: apt-get install chromium; .ci/run does)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _quick_copy(src: Path, dst: Path) -> None:
    """Copy a notebook with `quick = True` in its parameters cell and without jupytext pairing.

    Pairing is dropped so that jupytext never reloads the inputs from a twin (which would undo `quick`)
    nor writes one next to the copy. The stored outputs are kept as they are.
    """
    nb = nbformat.read(src, as_version=4)
    nb.metadata.pop("jupytext", None)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" in cell.metadata.get("tags", []):
            cell.source = re.sub(r"^quick(\s*:\s*bool)?\s*=\s*False\b", r"quick\1 = True", cell.source, flags=re.M)
    nbformat.write(nb, dst)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """`jupyter lab` over a temporary copy of notebooks/: (base url, token, root dir)."""
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "notebooks"
    root.mkdir()
    for nb in NOTEBOOKS.glob("[0-9]*.ipynb"):
        _quick_copy(nb, root / nb.name)
    (tmp / "data").symlink_to(ROOT / "data")  # notebooks may read ../data (never written)
    # Lab settings of its own: no news/update toasts over the page, every cell rendered (no windowing, so
    # off-screen figures render too), no workspace restored from another session.
    # The project's own (notebooks/jupyterlab_settings.json, which make setup installs as the venv's overrides).
    settings = tmp / "lab-settings"
    for plugin, value in json.loads(LAB_SETTINGS.read_text()).items():
        scope, name = plugin.split(":")
        path = settings / scope / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        JUPYTERLAB_WORKSPACES_DIR=str(tmp / "lab-workspaces"),
        JUPYTER_CONFIG_DIR=str(tmp / "jupyter-config"),
        SPECDEC_LAB_FIGURES=str(tmp / "figures"),
        # The notebooks' kernels get this worker's share of the cores, as tests/conftest.py gives the worker
        # itself: a 2-thread kernel beside another busy xdist worker on 2 cores stalls torch's OpenMP barriers.
        OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 2) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))),
    )
    port, token = _free_port(), "specdec-browser-test"
    log = (tmp / "jupyter-lab.log").open("w")
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", "--ip=127.0.0.1", f"--port={port}",
        f"--notebook-dir={root}", f"--IdentityProvider.token={token}",
        # window.jupyterapp: the test reads the kernel's status from it (it drives the UI through the DOM)
        "--LabApp.expose_app_in_browser=True",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, cwd=root, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            tail = (tmp / "jupyter-lab.log").read_text()[-3000:]
            pytest.fail(f"jupyter lab did not answer on {url} within {SERVER_TIMEOUT_S} s; its log:\n{tail}")
        time.sleep(0.5)
    yield url, token, root
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright missing (pip install playwright)")
    executable = _chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


# ---- page helpers ---------------------------------------------------------------------------------------
KERNEL_STATUS_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return k ? k.status : null;
}"""

# Text of each code cell's prompt: "[3]:", "[*]:", "[ ]:".
PROMPTS_JS = f"""() => Array.from(document.querySelectorAll('{NB} .jp-CodeCell .jp-InputArea-prompt'))
  .map(e => e.textContent.trim())"""

# (plotly's JupyterLab renderer makes the output element itself the plot: `.jp-OutputArea-output.js-plotly-plot`)
RENDERED_PLOTS_JS = f"""() => Array.from(document.querySelectorAll('{NB} .jp-OutputArea .js-plotly-plot'))
  .filter(e => e.querySelector('svg.main-svg')).length"""


def _wait(page, predicate_js: str, what: str, timeout_s: float, arg=None) -> None:
    try:
        page.wait_for_function(predicate_js, arg=arg, timeout=timeout_s * 1000, polling=500)
    except Exception as err:  # playwright's TimeoutError: say what never happened, keep a screenshot
        page.screenshot(path=SCREENSHOTS / "failure.png")
        raise AssertionError(
            f"timed out after {timeout_s:.0f} s waiting for {what} (see {SCREENSHOTS}/failure.png)"
        ) from err


def _kernel_idle(page, timeout_s: float) -> None:
    _wait(page, f"() => ({KERNEL_STATUS_JS})() === 'idle'", "the kernel to be idle", timeout_s)


def _stored_plotly_outputs(path: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    return sum(PLOTLY_MIME in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


def _widget_reprs(page) -> list[str]:
    """Outputs showing a widget's repr, `VBox(children=(...))`: a stored dashboard without widget state."""
    reprs = page.locator(f"{NB} .jp-OutputArea-output", has_text=re.compile(r"^\s*[HV]Box\(children="))
    return [reprs.nth(i).inner_text()[:120] for i in range(reprs.count())]


def _open(page, lab, stem: str) -> None:
    """Open a notebook in a workspace of its own (no tabs restored from an earlier page)."""
    url, token, _ = lab
    page.goto(f"{url}/lab/workspaces/t{stem[:2]}/tree/{stem}.ipynb?token={token}", timeout=LOAD_TIMEOUT_S * 1000)
    page.wait_for_selector(f"{NB} .jp-Cell", timeout=LOAD_TIMEOUT_S * 1000)


def _shutdown_kernels(lab) -> None:
    """Stop the kernels the page started (a finished notebook's model must not stay in memory)."""
    url, token, _ = lab
    headers = {"Authorization": f"token {token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{url}/api/kernels", headers=headers), timeout=30) as r:
        kernels = json.load(r)
    for k in kernels:
        req = urllib.request.Request(f"{url}/api/kernels/{k['id']}", method="DELETE", headers=headers)
        urllib.request.urlopen(req, timeout=60).close()


def _dialog_text(page) -> str | None:
    dialog = page.locator(".jp-Dialog")
    return dialog.first.inner_text() if dialog.count() else None


# ---- the test ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stem", list(DASHBOARDS))
def test_notebook_in_jupyterlab(stem, lab, browser):
    assert (NOTEBOOKS / f"{stem}.ipynb").exists(), f"notebook {stem[:2]} is missing: notebooks/{stem}.ipynb"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    nn = stem[:2]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page_errors: list[str] = []
    page.on("pageerror", lambda err: page_errors.append(str(err)))
    try:
        # 1. As stored: every stored plotly figure renders (no kernel needed, no trust needed).
        _stored_view(page, lab, stem)
        _file_browser_open(page)
        page.wait_for_timeout(1000)  # plotly relayouts to the narrower area (responsive figures)
        stored_cut = page.evaluate(CUT_PLOTS_JS)  # asserted at the end, with the reprs
        stored_problems = _reader_problems(page, lab[2] / f"{stem}.ipynb")  # before Run All changes the notebook
        page.locator(f"{NB} .jp-Cell").last.scroll_into_view_if_needed()  # where the dashboard is
        page.screenshot(path=SCREENSHOTS / f"{nn}_stored_end.png")
        stored_reprs = _widget_reprs(page)  # asserted at the end: the live checks below run regardless
        _kernel_idle(page, LOAD_TIMEOUT_S)
        assert _dialog_text(page) is None, f"a dialog is open on the stored notebook: {_dialog_text(page)}"

        # 2. Run All from the Run menu; wait until every code cell ran in this kernel (prompts 1..n, none
        # queued) and the kernel is idle. A cell that raises stops Run All and leaves later prompts stale.
        n_code = len(page.evaluate(PROMPTS_JS))
        expected = [f"[{i}]:" for i in range(1, n_code + 1)]
        page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
        _wait(
            page,
            f"() => ({PROMPTS_JS})().some(p => p.includes('*')) || ({PROMPTS_JS})().join() === {expected!r}.join()",
            "Run All to queue the cells",
            LOAD_TIMEOUT_S,
        )
        done_js = f"""() => {{
          const prompts = ({PROMPTS_JS})();
          return !prompts.some(p => p.includes('*')) && ({KERNEL_STATUS_JS})() === 'idle';
        }}"""
        t0 = time.monotonic()
        _wait(page, done_js, "Run All to finish (no [*] left, kernel idle)", RUN_ALL_TIMEOUT_S)
        run_all_s = time.monotonic() - t0
        prompts = page.evaluate(PROMPTS_JS)
        if prompts != expected:
            errors = page.locator(f"{NB} .jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
            detail = "\n".join(errors.nth(i).inner_text()[-1500:] for i in range(errors.count()))
            page.screenshot(path=SCREENSHOTS / f"{nn}_run_all_failed.png")
            pytest.fail(f"Run All did not execute every cell in order: prompts {prompts}\nstderr outputs:\n{detail}")
        print(f"{stem}: Run All took {run_all_s:.0f} s over {n_code} code cells")

        # 3. After the run: a plotly figure and the ipywidgets render (no "Error displaying widget").
        assert page.evaluate(RENDERED_PLOTS_JS) >= 1, "no plotly figure rendered after Run All"
        widgets = page.locator(f"{NB} .jp-OutputArea .jupyter-widgets")
        assert widgets.count() >= 1, "no ipywidgets rendered after Run All"
        broken = page.locator(f"{NB} .jp-OutputArea-output", has_text="Error displaying widget")
        assert broken.count() == 0, f"a widget failed to render: {broken.first.inner_text()}"
        dashboard = page.locator(f"{NB} .jp-OutputArea {DASHBOARDS[stem]}").last
        dashboard.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOTS / f"{nn}_run_all.png")

        # 4. Move one widget and see the dashboard's output change (each notebook's gesture, below).
        GESTURES[stem](page, dashboard)
        _kernel_idle(page, WIDGET_TIMEOUT_S)
        dashboard.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOTS / f"{nn}_widget.png")
        assert _dialog_text(page) is None, f"a dialog opened: {_dialog_text(page)}"
        assert not page_errors, f"JavaScript errors on the page: {page_errors}"
        assert not stored_reprs, f"the stored notebook shows a dashboard as its repr: {stored_reprs}"
        assert not stored_cut, f"stored figures wider than the output area (cut off): {stored_cut}"
        assert not stored_problems, f"{stem}: what a reader cannot read as stored:\n  " + "\n  ".join(stored_problems)
    finally:
        page.close()
        _shutdown_kernels(lab)


def _stored_view(page, lab, stem: str) -> None:
    """Open `stem` as stored, wait until every stored plotly figure has drawn, screenshot NN_stored.png."""
    _open(page, lab, stem)
    stored = _stored_plotly_outputs(lab[2] / f"{stem}.ipynb")
    _wait(page, f"() => ({RENDERED_PLOTS_JS})() >= {stored}", f"{stored} stored plotly figures", LOAD_TIMEOUT_S)
    if stored:
        page.locator(f"{NB} .jp-OutputArea .js-plotly-plot").first.scroll_into_view_if_needed()
    page.screenshot(path=SCREENSHOTS / f"{stem[:2]}_stored.png")


# Stored figures wider than the output area they are drawn in (cut off on the right): "title: W px > A px".
CUT_PLOTS_JS = f"""() => Array.from(document.querySelectorAll('{NB} .jp-OutputArea .js-plotly-plot'))
  .map(p => [p, p.closest('.jp-OutputArea-child'), p.querySelector('svg.main-svg')])
  .filter(([p, area, svg]) => svg && area
          && svg.getBoundingClientRect().right > area.getBoundingClientRect().right + 2)
  .map(([p, area, svg]) => `${{(p.querySelector('.gtitle') || {{}}).textContent || '(untitled)'}}: `
       + `${{Math.round(svg.getBoundingClientRect().width)}} px, `
       + `${{Math.round(svg.getBoundingClientRect().right - area.getBoundingClientRect().right)}} px cut`)"""


def _file_browser_open(page) -> None:
    """Show the file browser in the left sidebar, as a reader working in JupyterLab has it."""
    if not page.locator(".jp-FileBrowser:visible").count():
        page.locator(".jp-SideBar.jp-mod-left [data-id='filebrowser']").first.click()
        _wait(page, "() => !!document.querySelector('.jp-FileBrowser') && "
              "document.querySelector('.jp-FileBrowser').offsetWidth > 0", "the file browser", 30)  # fmt: skip


# The notebooks the Run All test above does not open (it checks 00's and 08's stored view itself, before its
# run saves over their copy).
STORED = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9]*.ipynb") if p.stem not in DASHBOARDS)


@pytest.mark.parametrize("stem", STORED)
def test_stored_notebook_renders(stem, lab, browser):
    """Every notebook as a reader browsing it sees it, in a 1400 px window with the file browser open: every
    stored plotly figure drawn and none cut off by the output area, no widget reprs, no page errors; and in every
    figure no axis title over the legend, log-axis ticks that state their value, no labels piled on one another; no
    HTML table cut off or with a header cut; the notebook not marked modified by opening it (`_reader_problems`)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page_errors: list[str] = []
    page.on("pageerror", lambda err: page_errors.append(str(err)))
    try:
        _stored_view(page, lab, stem)
        _file_browser_open(page)
        page.wait_for_timeout(1000)  # plotly relayouts to the narrower area (responsive figures)
        cut = page.evaluate(CUT_PLOTS_JS)
        assert not cut, f"stored figures wider than the output area (cut off): {cut}"
        assert not _widget_reprs(page), f"a stored dashboard shows as its repr: {_widget_reprs(page)}"
        assert not page_errors, f"JavaScript errors on the page: {page_errors}"
        problems = _reader_problems(page, lab[2] / f"{stem}.ipynb")
        assert not problems, f"{stem}: what a reader cannot read as stored:\n  " + "\n  ".join(problems)
    finally:
        page.close()
        _shutdown_kernels(lab)


# ---- what a reader cannot read (evaluated in the page over the stored view) ----------------------------------
# Each check returns "cell N, figure 'title': what overlaps / what is wrong" strings. `where(el)` names the cell
# (its index among the notebook's cells, as the .ipynb counts them) and the figure's title.
WHERE_JS = f"""(el) => {{
  const cells = Array.from(document.querySelectorAll('{NB} .jp-Cell'));
  const cell = cells.indexOf(el.closest('.jp-Cell'));
  const plot = el.closest('.js-plotly-plot');
  const title = plot ? ((plot.querySelector('.gtitle') || {{}}).textContent || '(untitled)') : null;
  return `cell ${{cell}}` + (title !== null ? `, figure '${{title}}'` : '');
}}"""
BOX_JS = """(a, b) => {
  const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
  const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
  return w > 0 && h > 0 ? w * h : 0;
}"""
PLOTS_JS = f"Array.from(document.querySelectorAll('{NB} .jp-OutputArea .js-plotly-plot'))"

# (a) an axis title (g-xtitle, g-ytitle, g-y2title, ...) drawn over the legend's box
TITLE_OVER_LEGEND_JS = f"""() => {{
  const where = {WHERE_JS}, overlap = {BOX_JS}, found = [];
  for (const plot of {PLOTS_JS}) {{
    for (const legend of plot.querySelectorAll('g.legend')) {{
      const bg = legend.querySelector('rect.bg') || legend;
      const lb = bg.getBoundingClientRect();
      if (lb.width < 1 || lb.height < 1) continue;
      for (const t of plot.querySelectorAll('.infolayer g[class^="g-"][class$="title"]:not(.g-gtitle) text')) {{
        const tb = t.getBoundingClientRect();
        if (t.textContent.trim() && overlap(tb, lb) > 4)
          found.push(`${{where(plot)}}: axis title '${{t.textContent.trim()}}' overlaps the legend`);
      }}
    }}
  }}
  return found;
}}"""

# (b) tick labels of log axes: each states its own value (no "2 | 5" standing for 20 and 50: the label read as a
# number, with an SI prefix or a 10^n form, is the tick's value within 3 %) in at most 4 significant digits.
LOG_TICKS_JS = f"""() => {{
  const where = {WHERE_JS}, found = [];
  const si = {{'': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, m: 1e-3, 'µ': 1e-6, u: 1e-6, n: 1e-9, p: 1e-12}};
  const readings = (text) => {{
    const t = text.replace(/\\u2212/g, '-').replace(/,/g, '').replace(/<[^>]*>/g, (m) => m === '<sup>' ? '^' : '')
      .replace(/[\\s\\u2009\\u202f]/g, '');
    let m = t.match(/^(?:(-?[\\d.]+)[×x·*])?10\\^(-?\\d+)/);
    if (m) return [(m[1] ? parseFloat(m[1]) : 1) * Math.pow(10, parseInt(m[2]))];
    m = t.match(/^(-?\\d*\\.?\\d+(?:e[-+]?\\d+)?)([kMGTmµunp]?)/);
    if (!m) return null;
    const x = parseFloat(m[1]);
    return m[2] ? [x * si[m[2]], x] : [x];  // 'm' may be a unit (metres, minutes), not milli
  }};
  const sig = (text) => {{
    const m = text.replace(/\\u2212/g, '-').replace(/,/g, '').match(/\\d*\\.?\\d+/);
    return m ? m[0].replace('.', '').replace(/^0+/, '').replace(/0+$/, '').length : 0;
  }};
  for (const plot of {PLOTS_JS}) {{
    const full = plot._fullLayout;
    if (!full) continue;
    for (const ax of Object.values(full).filter(a => a && a._id && a.type === 'log' && a.visible !== false)) {{
      const bad = [];
      for (const v of ax._vals || []) {{
        const text = String(v.text || '').trim();
        if (!text) continue;
        const value = Math.pow(10, v.x), read = readings(text);
        const right = read && read.some(r => Math.abs(r - value) <= 0.03 * Math.abs(value));
        if (!right || (sig(text) > 4 && !/\\^|<sup>/.test(text))) bad.push(text.replace(/<[^>]*>/g, ''));
      }}
      if (bad.length)
        found.push(`${{where(plot)}}: log axis ${{ax._id}} ('${{(ax.title && ax.title.text) || ''}}') has tick labels `
                   + `that do not state their value: ${{bad.join(' | ')}}`);
    }}
  }}
  return found;
}}"""

# (c) text labels (annotations, scatter text) piled on one another: two boxes sharing over 30 % of the smaller
PILED_LABELS_JS = f"""() => {{
  const where = {WHERE_JS}, overlap = {BOX_JS}, found = [];
  for (const plot of {PLOTS_JS}) {{
    const labels = Array.from(plot.querySelectorAll('.annotation-text, .textpoint text'))
      .filter(e => e.textContent.trim() && getComputedStyle(e).visibility !== 'hidden'
                   && getComputedStyle(e).opacity !== '0' && !e.closest('[style*="opacity: 0"]'))
      .map(e => [e, e.getBoundingClientRect()]).filter(([e, b]) => b.width > 0 && b.height > 0);
    const piled = [];
    for (let i = 0; i < labels.length; i++)
      for (let j = i + 1; j < labels.length; j++) {{
        const [a, ab] = labels[i], [b, bb] = labels[j];
        const o = overlap(ab, bb);
        if (o > 0.3 * Math.min(ab.width * ab.height, bb.width * bb.height))
          piled.push(`'${{a.textContent.trim()}}' on '${{b.textContent.trim()}}'`);
      }}
    if (piled.length)
      found.push(`${{where(plot)}}: ${{piled.length}} piled label pair(s): ${{piled.slice(0, 6).join(', ')}}`
                 + (piled.length > 6 ? ', …' : ''));
  }}
  return found;
}}"""

# (d) HTML tables: none wider than its output area unless a box between them scrolls sideways; no header cut
# with an ellipsis (typed "…" or CSS text-overflow)
TABLES_JS = f"""() => {{
  const where = {WHERE_JS}, found = [];
  for (const table of document.querySelectorAll('{NB} .jp-OutputArea-output table')) {{
    const area = table.closest('.jp-OutputArea-child');
    if (!area) continue;
    const caption = (table.querySelector('caption') || {{}}).textContent || '';
    const name = `${{where(table)}}, table${{caption ? " '" + caption.trim().slice(0, 60) + "'" : ''}}`;
    const right = area.getBoundingClientRect().right;
    if (table.getBoundingClientRect().right > right + 2) {{
      let scrolls = false;
      for (let e = table.parentElement; e && e !== area.parentElement; e = e.parentElement) {{
        const ox = getComputedStyle(e).overflowX;
        if ((ox === 'auto' || ox === 'scroll') && e.getBoundingClientRect().right <= right + 2) scrolls = true;
      }}
      if (!scrolls) found.push(`${{name}}: ${{Math.round(table.getBoundingClientRect().width)}} px wide, `
                               + `cut at the output area's edge (no horizontal scroll)`);
    }}
    for (const th of table.querySelectorAll('th')) {{
      const text = th.textContent.trim();
      if (text.includes('…') || text.endsWith('...') || th.scrollWidth > th.clientWidth + 1)
        found.push(`${{name}}: column header cut: '${{text}}'`);
    }}
  }}
  return found;
}}"""

# (e) the notebook is not modified by opening it (JupyterLab's dirty flag: an unsaved-changes dot on the tab)
DIRTY_JS = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const model = w && w.context && w.context.model;
  const tab = !!document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.jp-mod-dirty');
  return { model: !!(model && model.dirty), tab };
}"""


def _what_opening_changed(page, stored: Path) -> list[str]:
    """What the page's notebook model holds that the file does not, per output ("cell 4 output 1: + image/png").

    (jupyterlab-plotly's renderer writes a PNG snapshot of every figure it draws into the output's data, if the
    output has none: that alone marks a notebook with plotly figures modified as soon as it is drawn.)"""
    model = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.toJSON()")
    nb = json.loads(stored.read_text(encoding="utf-8"))
    changes = [f"notebook metadata: {sorted(set(model['metadata']) ^ set(nb['metadata']))}"] * (
        set(model["metadata"]) != set(nb["metadata"])
    )
    for i, (live, disk) in enumerate(zip(model["cells"], nb["cells"], strict=False)):
        outs = list(zip(live.get("outputs", []), disk.get("outputs", []), strict=False))
        for j, (a, b) in enumerate(outs):
            added, dropped = (
                set(a.get("data", {})) - set(b.get("data", {})),
                set(b.get("data", {})) - set(a.get("data", {})),
            )
            if added or dropped:
                changes.append(
                    f"cell {i} output {j}: " + " ".join([*(f"+ {k}" for k in added), *(f"- {k}" for k in dropped)])
                )
        if len(live.get("outputs", [])) != len(disk.get("outputs", [])):
            changes.append(
                f"cell {i}: {len(disk.get('outputs', []))} outputs stored, {len(live.get('outputs', []))} shown"
            )
    return changes


def _reader_problems(page, stored: Path) -> list[str]:
    """Every check above over the notebook on screen: one line per problem, naming the cell and the figure."""
    problems = []
    for what, js in (
        ("axis title over the legend", TITLE_OVER_LEGEND_JS),
        ("unreadable log ticks", LOG_TICKS_JS),
        ("piled labels", PILED_LABELS_JS),
        ("table cut", TABLES_JS),
    ):
        problems += [f"{what}: {p}" for p in page.evaluate(js)]
    dirty = page.evaluate(DIRTY_JS)
    # jupyterlab-plotly's renderer writes its own PNG snapshot into every plotly output it draws (its
    # `Plotly.toImage(...).then(... r.setData({data: {...r.data, "image/png": ...}}))`, whenever the snapshot
    # differs from what is stored — always, since it is drawn at the page's size): that alone marks the tab
    # modified, whatever the file holds, and storing a PNG would not stop it. Anything else the page changed is ours.
    changed = _what_opening_changed(page, stored) if dirty["model"] or dirty["tab"] else []
    ours = [c for c in changed if not re.fullmatch(r"cell \d+ output \d+: \+ image/png", c)]
    if ours or ((dirty["model"] or dirty["tab"]) and not changed):
        problems.append(f"marked modified right after opening (model dirty: {dirty['model']}, tab: {dirty['tab']}); "
                        f"the page's model differs from the file in: {'; '.join(ours[:8]) or 'no output data'}"
                        + (f" (+{len(ours) - 8} more)" if len(ours) > 8 else ""))  # fmt: skip
    return problems


# ---- dashboard gestures ------------------------------------------------------------------------------------
# Probes: what a dashboard shows that only the kernel changes (never the controls' own readouts).
TEXTBOXES_JS = "(root) => Array.from(root.querySelectorAll('textarea')).map(t => t.value).join('\\n')"
HTML_OUTPUTS_JS = """(root) => Array.from(root.querySelectorAll('.widget-html-content, .widget-htmlmath-content'))
  .map(e => e.innerHTML).join('\\n')"""
OUTPUT_AREAS_JS = "(root) => Array.from(root.querySelectorAll('.jp-OutputArea')).map(e => e.innerHTML).join('\\n')"
# A run is over when its status no longer says "running…" and its Run/Generate button is enabled again.
RUN_OVER_JS = """(root) => !root.innerText.includes('running…') && Array.from(root.querySelectorAll('button'))
  .filter(b => /^\\s*(run|generate)\\s*$/i.test(b.innerText)).every(b => !b.disabled)"""


def _wait_changed(page, dashboard, probe_js: str, before: str, what: str, run_over: bool = False) -> None:
    over = f"({RUN_OVER_JS})(root)" if run_over else "true"
    _wait(
        page,
        f"([root, before]) => ({probe_js})(root) !== before && {over}",
        what,
        WIDGET_TIMEOUT_S,
        arg=[dashboard.element_handle(), before],
    )


def _pick_another(select) -> None:
    """Choose an option of a dropdown other than the current one (the last such option)."""
    current = select.input_value()
    values = select.evaluate("(s) => Array.from(s.options).map(o => o.value)")
    select.select_option(value=next(v for v in reversed(values) if v != current))


def _step_slider(page, slider) -> None:
    """Move a slider one step from the keyboard, as a reader does: focus its handle, press an arrow key."""
    readout = slider.locator(".widget-readout").inner_text().strip()
    handle = slider.locator(".noUi-handle")
    handle.focus()
    handle.press("ArrowLeft" if readout not in ("", "0") else "ArrowRight")


def _gesture_00(page, dashboard) -> None:
    # The prompt picker: the kernel's callback puts another shipped prompt into the text box (and, if the
    # dashboard reruns on every change, decodes it) ...
    text_before, output_before = dashboard.evaluate(TEXTBOXES_JS), dashboard.evaluate(HTML_OUTPUTS_JS)
    _pick_another(dashboard.locator("select").first)
    _wait_changed(page, dashboard, TEXTBOXES_JS, text_before, "the picked prompt to fill the text box", run_over=True)
    # ... and Generate decodes it: new coloured tokens and numbers in the dashboard's output.
    if dashboard.evaluate(HTML_OUTPUTS_JS) == output_before:
        dashboard.locator("button", has_text=re.compile(r"generate", re.I)).first.click()
    _wait_changed(page, dashboard, HTML_OUTPUTS_JS, output_before, "a new decoding in the output", run_over=True)


# plotly figures drawn inside a dashboard (its Output widgets)
DASHBOARD_PLOTS_JS = """(root) => Array.from(root.querySelectorAll('.js-plotly-plot'))
  .filter(e => e.querySelector('svg.main-svg')).length"""


def _gesture_08(page, dashboard) -> None:
    # The run shown: its tokens-per-step plot and its step's tree are drawn inside the dashboard ...
    _wait(page, f"(root) => ({DASHBOARD_PLOTS_JS})(root) >= 2", "the dashboard's two plotly figures", WIDGET_TIMEOUT_S,
          arg=dashboard.element_handle())  # fmt: skip
    # ... the step slider: the kernel redraws the tree of another step of the shown run (no new run) ...
    before = dashboard.evaluate(OUTPUT_AREAS_JS)
    step = dashboard.locator(".widget-slider", has=page.locator(".widget-label", has_text=re.compile(r"^\s*step\s*$")))
    _step_slider(page, step.last if step.count() else dashboard.locator(".widget-slider").last)
    _wait_changed(page, dashboard, OUTPUT_AREAS_JS, before, "the step slider to redraw the step's tree")
    _wait(page, f"(root) => ({DASHBOARD_PLOTS_JS})(root) >= 2", "the redrawn tree", WIDGET_TIMEOUT_S,
          arg=dashboard.element_handle())  # fmt: skip
    # ... and another prompt, Run (method, then autoregressive, in a background thread): a new run shown.
    text_before = dashboard.evaluate(TEXTBOXES_JS)
    _pick_another(dashboard.locator("select").first)
    _wait_changed(page, dashboard, TEXTBOXES_JS, text_before, "the picked prompt to fill the text box")
    output_before = dashboard.evaluate(HTML_OUTPUTS_JS)
    dashboard.locator("button", has_text=re.compile(r"^\s*run\s*$", re.I)).first.click()
    _wait_changed(page, dashboard, HTML_OUTPUTS_JS, output_before, "Run to show a new run", run_over=True)


GESTURES = {"00_getting_started": _gesture_00, "08_speedup_lab": _gesture_08}


def test_slides_in_browser(browser, tmp_path):
    """`make slides` (teaching mode): the reveal.js deck of notebook 00 opens offline and shows its figures."""
    out = tmp_path / "slides"
    out.mkdir()
    cached = ROOT / "results" / "slides"  # the scripts an earlier `make slides` fetched: link, don't refetch
    if list(cached.glob(".js-*")):
        for asset in (
            *cached.glob(".js-*"),
            *(cached / name for name in ("reveal.js", "mathjax", "require.js", "jquery.min.js")),
        ):
            (out / asset.name).symlink_to(asset)
    nb = "notebooks/00_getting_started.ipynb"
    # -o: never remake the setup stamp from inside a test
    make = ["make", "-C", str(ROOT), "-o", ".venv/.stamp", "slides", f"NB={nb}", f"SLIDES_DIR={out}"]
    done = subprocess.run(make, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"make slides failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if not list(out.glob(".js-*")):
        pytest.skip(f"npm could not fetch reveal.js (make slides fell back to the CDNs):\n{done.stdout}")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    figures = _stored_plotly_outputs(ROOT / nb)
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page_errors: list[str] = []
    page.on("pageerror", lambda err: page_errors.append(str(err)))
    try:
        page.goto((out / "00_getting_started.slides.html").as_uri())
        _wait(page, "() => document.querySelector('.reveal.ready') !== null", "reveal.js to start", LOAD_TIMEOUT_S)
        slides = page.evaluate("document.querySelectorAll('.reveal .slides > section').length")
        assert slides >= 6, f"only {slides} slides: expected one per section heading"
        _wait(
            page,
            f"() => document.querySelectorAll('.js-plotly-plot svg.main-svg').length >= {figures}",
            f"{figures} plotly figures in the slides",
            LOAD_TIMEOUT_S,
        )
        target = page.evaluate("""() => {
          const s = document.querySelector('.js-plotly-plot').closest('.slides > section');
          return Array.from(document.querySelectorAll('.slides > section')).indexOf(s);
        }""")
        for _ in range(target):  # move there the way a presenter does
            page.keyboard.press("ArrowRight")
        _wait(
            page,
            f"() => Array.from(document.querySelectorAll('.slides > section')).indexOf("
            f"document.querySelector('.slides > section.present')) === {target}",
            f"slide {target} to be shown",
            30,
        )
        page.locator(".js-plotly-plot").first.scroll_into_view_if_needed()
        page.screenshot(path=SCREENSHOTS / "00_slides.png")
        assert not page_errors, f"JavaScript errors in the slides: {page_errors}"
    finally:
        page.close()
