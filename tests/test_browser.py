"""The notebooks as a reader meets them: JupyterLab in a real browser (Debian's chromium, driven by playwright).

`jupyter lab` runs on 127.0.0.1 over a temporary copy of notebooks/ (`quick = True`; running cells never
rewrites a committed notebook or figure). Notebooks 00 and 08: opened as stored, every stored plotly
figure renders and no dashboard shows as its repr; Run All from the Run menu runs every cell in order; a
plotly figure and the ipywidgets render; one widget moved changes the dashboard's output. Notebooks
01-03: as stored. The slides of 00 (`make slides`): reveal.js starts offline and draws the figures.
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
    stored plotly figure drawn and none cut off by the output area, no widget reprs, no page errors."""
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
    finally:
        page.close()
        _shutdown_kernels(lab)


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
