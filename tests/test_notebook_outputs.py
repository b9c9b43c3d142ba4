"""The stored outputs are for readers (`shared/notebook-conventions.md`, "Hygiene", "Prose and numbers").

Read from the committed notebooks, without running them:
* every stored plotly figure fits the output area of a laptop screen with JupyterLab's file browser open
  (MAX_WIDTH px), so nothing is cut off;
* no widget view is stored without its widget state (it shows "Error displaying widget: model not found"
  once the notebook is trusted): the plain cell before a dashboard carries what a reader should see;
* no absolute path, no stored warning, no project bookkeeping ("target met").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
MAX_WIDTH = 950  # px: JupyterLab's output area in a 1400 px window with the file browser open
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
ABSOLUTE = re.compile(r"(?<![\w.~])/(?:work|home|root|tmp|usr|opt|Users)/[\w./-]+")
# an issue's acceptance bookkeeping ("target met", "gate: True"); notebook 13's speculation gate is a method's part
BOOKKEEPING = re.compile(
    r"\bNOT met\b|\btarget met\b|\b(?:quality|acceptance) gate\b|\bgate:? (?:True|False|pass|fail)"
    r"|>= ?0\.5: (?:True|False)",
    re.I,
)
WARNING = re.compile(r"\b\w*Warning\b|timings? (?:are )?unreliable", re.I)


def _outputs(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            yield i, out


def _text(out) -> str:
    if out.get("output_type") == "stream":
        return "".join(out.get("text", ""))
    data = out.get("data", {})
    return (
        "".join(data.get("text/plain", ""))
        + "".join(data.get("text/html", ""))
        + "".join(data.get("text/markdown", ""))
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_figures_fit_the_output_area(path):
    wide = []
    for i, out in _outputs(path):
        fig = out.get("data", {}).get(PLOTLY)
        if fig is not None:
            width = fig.get("layout", {}).get("width")
            if width is not None and width > MAX_WIDTH:
                title = fig.get("layout", {}).get("title") or {}
                wide.append(f"cell {i}: {width} px ({title.get('text', '') if isinstance(title, dict) else title})")
    assert not wide, f"{path.name}: figures wider than {MAX_WIDTH} px:\n  " + "\n  ".join(wide)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_widget_view_is_stored_without_its_state(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    has_state = bool(nb.get("metadata", {}).get("widgets"))
    views = [i for i, out in _outputs(path) if WIDGET_VIEW in out.get("data", {})]
    assert has_state or not views, f"{path.name}: widget views stored without widget state in cells {views}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_absolute_path_warning_or_bookkeeping(path):
    bad = []
    for i, out in _outputs(path):
        if out.get("output_type") == "error":
            bad.append(f"cell {i}: a stored error")
        text = _text(out)
        for pattern, what in ((ABSOLUTE, "absolute path"), (WARNING, "warning"), (BOOKKEEPING, "bookkeeping")):
            m = pattern.search(text)
            if m:
                bad.append(f"cell {i}: {what}: {text[max(0, m.start() - 40) : m.end() + 40]!r}")
    assert not bad, f"{path.name}:\n  " + "\n  ".join(bad)


def test_the_strip_step_drops_widget_views_and_keeps_the_placeholder():
    from specdec_lab.lab.stored import WIDGET_VIEW, drop_widget_views

    view = {WIDGET_VIEW: {"model_id": "x", "version_major": 2}}
    nb = {"cells": [{"cell_type": "code", "outputs": [{"data": {**view, "text/plain": "[dashboard]"}},
                                                      {"data": dict(view)}]}]}  # fmt: skip
    assert drop_widget_views(nb) == 2
    first, second = nb["cells"][0]["outputs"]
    assert first["data"] == {"text/plain": "[dashboard]"} and list(second["data"]) == ["text/plain"]


# ---- the "Runs in" line, machines named, stored tables, error-looking lines -------------------------------------
RUN_TIMES = Path(__file__).resolve().parents[1] / "notebooks" / "run_times.json"
STYLER_REPR = re.compile(r"<pandas\.io\.formats\.style\.Styler at 0x[0-9a-f]+>")
# a line that reads as an error: a traceback, or an exception's name followed by its message
ERROR_LINE = re.compile(r"^\s*(?:Traceback \(most recent call last\)|(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit):"
                        r"|(?:[A-Z]\w*)?Warning\b)", re.M)  # fmt: skip
# a default repr stored where a reader expects text: `<IPython.core.display.Markdown object>`, `<Foo at 0x7f…>`
OBJECT_REPR = re.compile(r"<[\w.]+ (?:object|at 0x[0-9a-fA-F]+)>")
THIS_MACHINE = re.compile(r"\bthis (?:CPU|machine)\b", re.I)
RAN_ON = re.compile(r"^Ran on: (?P<cpu>.+?) · torch ISA (?P<isa>\S+) · .+? · (?P<threads>\d+) threads · ")


def _stored(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_runs_in_line_is_the_stored_runs(path):
    """Every stored "Runs in" line says what notebooks/run_times.json says of this notebook: `make store` renders
    it from the run it stores (`lab.stored.render_runs_in`); a line from the run before fails here."""
    from specdec_lab.lab.course import runs_in
    from specdec_lab.lab.stored import runs_in_lines

    expected = runs_in(path.stem, RUN_TIMES)
    stale = [f"cell {i}: {line!r}" for i, line in runs_in_lines(_stored(path)) if line != expected]
    assert not stale, f"{path.name}: 'Runs in' disagrees with {RUN_TIMES.name} ({expected!r}):\n  " + "\n  ".join(stale)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_styled_table_stores_its_memory_address(path):
    """A pandas Styler's default text/plain is `<pandas.io.formats.style.Styler at 0x…>`; `course.start` makes it
    the table's text (`viz.tables.styler_text`)."""
    bad = [f"cell {i}" for i, out in _outputs(path)
           if STYLER_REPR.search("".join(out.get("data", {}).get("text/plain", "")))]  # fmt: skip
    assert not bad, f"{path.name}: Styler reprs stored as text/plain in " + ", ".join(bad)


def _error_lines(text: str) -> list[str]:
    """Lines of `text` that start like an exception (`ValueError: …`, `Error: …`), a traceback or a warning; a line
    that quotes one (the match inside quotes or backticks, as prose about an error) is not one."""
    bad = []
    for m in ERROR_LINE.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1 :].split("\n", 1)[0]
        if not re.match(r"^\s*[`'\"“‘>]", line):
            bad.append(line.strip()[:120])
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_output_line_reads_as_an_error(path):
    """No stored stream or text line starts like an exception (`ValueError: …`, `Error: …`), a traceback or a
    warning: a notebook that shows that something raises prints its own sentence about it. A cell tagged
    `raises-exception` may show one; prose quoting one (in quotes or backticks) is not one."""
    nb = _stored(path)
    bad = []
    for i, out in _outputs(path):
        if "raises-exception" in nb["cells"][i].get("metadata", {}).get("tags", []):
            continue
        data = out.get("data", {})
        text = _text(out) if out.get("output_type") == "stream" else (
            "".join(data.get("text/plain", "")) + "\n" + "".join(data.get("text/markdown", "")))  # fmt: skip
        bad += [f"cell {i}: {line!r}" for line in _error_lines(text)]
    assert not bad, f"{path.name}: error-looking output lines:\n  " + "\n  ".join(bad)


def test_an_error_line_is_caught_and_quoted_prose_is_not():
    assert _error_lines("Traceback (most recent call last):\n  ...\nValueError: bad\n") == [
        "Traceback (most recent call last):", "ValueError: bad"]  # fmt: skip
    assert _error_lines("ok\nError: no such file\nUserWarning: slow") == ["Error: no such file", "UserWarning: slow"]
    assert _error_lines("`ValueError: k must be ≥ 1` is what it raises\nno Error here") == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_output_stores_an_object_repr_as_its_text(path):
    """No stored text/plain is a default repr (`<IPython.core.display.Markdown object>`, `<… at 0x…>`): a reader
    outside JupyterLab (a diff, nbval, a text viewer) sees that instead of the sentence. `make store` and
    `make strip-notebooks` give such outputs their markdown or HTML text (`lab.stored.readable_text_plain`)."""
    bad = []
    for i, out in _outputs(path):
        plain = "".join(out.get("data", {}).get("text/plain", ""))
        bad += [f"cell {i}: {m.group(0)}" for m in OBJECT_REPR.finditer(plain)]
    assert not bad, f"{path.name}: {len(bad)} object repr(s) stored as text/plain:\n  " + "\n  ".join(bad[:8])


def test_the_store_step_gives_markdown_and_html_outputs_their_text(tmp_path):
    from specdec_lab.lab.stored import main, readable_text_plain

    markdown = {"text/markdown": ["At B = 16 the step costs **2.4×**."],
                "text/plain": ["<IPython.core.display.Markdown object>"]}  # fmt: skip
    md = {"output_type": "display_data", "metadata": {}, "data": markdown}
    page = {"output_type": "display_data", "metadata": {},
            "data": {"text/html": "<style>p {}</style><p>tokens &amp; <b>steps</b></p><p>two</p>",
                     "text/plain": "<IPython.core.display.HTML object>"}}  # fmt: skip
    fine = {"output_type": "execute_result", "metadata": {}, "data": {"text/plain": "3"}}
    nb = {"cells": [{"cell_type": "code", "outputs": [md, page, fine]}]}
    assert readable_text_plain(nb) == 2
    assert md["data"]["text/plain"] == ["At B = 16 the step costs **2.4×**."]
    assert page["data"]["text/plain"] == ["tokens & steps\n", "two"]
    assert fine["data"]["text/plain"] == "3" and readable_text_plain(nb) == 0
    path = tmp_path / "05_x.ipynb"
    md["data"]["text/plain"] = "<IPython.core.display.Markdown object>"
    path.write_text(json.dumps(nb))
    assert main([str(path)]) == 0
    stored = json.loads(path.read_text())["cells"][0]["outputs"][0]["data"]["text/plain"]
    assert not OBJECT_REPR.search("".join(stored))


def _file_machine(value: str) -> dict | None:
    """The machine record of a data file a notebook parameter names (a bench .json, a sweep .csv)."""
    from specdec_lab.lab.provenance import table_machine

    file = (NOTEBOOKS[0].parent / value).resolve()
    if not file.is_file():
        return None
    if file.suffix == ".csv":
        return table_machine(file)
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return record.get("machine") if isinstance(record, dict) and isinstance(record.get("machine"), dict) else None


def _sections(nb: dict) -> dict[int, list[dict]]:
    """Cells per numbered section: a markdown cell '## N. …' opens section N, any other '## ' heading (checks,
    exercises, takeaways) ends it; cells outside numbered sections are left out."""
    out, current = {}, None
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            heading = re.findall(r"^## (.*)$", _source(cell), re.M)
            if heading:
                m = re.match(r"(\d+)\.", heading[-1])
                current = int(m.group(1)) if m else None
        if current is not None:
            out.setdefault(current, []).append(cell)
    return out


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_this_machine_is_said_only_of_this_machines_data(path):
    """A section that reads a data file measured on another machine than the notebook's own 'Ran on' (the file's
    `machine` record; a committed sweep table's logged one, `lab.provenance`) never calls it "this CPU" or "this
    machine", neither in its prose and outputs nor in the header's plan of that section ("(N) …")."""
    from specdec_lab.lab.provenance import same_machine

    nb = _stored(path)
    ran = next((m for _, out in _outputs(path) if (m := RAN_ON.match(_text(out)))), None)
    if ran is None:
        pytest.skip(f"{path.name}: no stored 'Ran on:' line")
    here = {"cpu": ran["cpu"], "isa": ran["isa"], "threads": int(ran["threads"])}
    params = next((_source(c) for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])), "")
    foreign = {}  # parameter name -> the other machine's record
    for name, value in re.findall(r"^(\w+)\s*:\s*str\s*=\s*\"([^\"]+\.(?:json|csv))\"", params, re.M):
        record = _file_machine(value)
        if record and not same_machine(record, here):
            foreign[name] = record
    bad = []
    header = _source(nb["cells"][0])
    for n, cells in _sections(nb).items():
        code = "\n".join(_source(c) for c in cells if c["cell_type"] == "code")
        names = [p for p in foreign if re.search(rf"\b{p}\b", code)]
        if not names:
            continue
        texts = [_source(c) for c in cells if c["cell_type"] == "markdown"]
        texts += [_text(o) for c in cells if c["cell_type"] == "code" for o in c.get("outputs", [])]
        plan = re.search(rf"\({n}\)(.*?)(?:\(\d+\)|$)", header, re.S)
        texts += [plan.group(1)] if plan else []
        bad += [f"section {n} ({', '.join(names)}): …{t[max(0, m.start() - 60) : m.end() + 20]!r}…"
                for t in texts for m in THIS_MACHINE.finditer(t)]  # fmt: skip
    assert not bad, f"{path.name}: 'this CPU/machine' over another machine's file:\n  " + "\n  ".join(bad)


def test_the_store_step_renders_the_runs_in_line_from_the_stored_run(tmp_path):
    from specdec_lab.lab.stored import main, render_runs_in, runs_in_lines

    record = tmp_path / "run_times.json"
    record.write_text('{"machine": "M", "seconds": {"05_x": 100.0}}')
    stale = "Runs in about 1 min with its defaults (the last `make reproduce`: M).\n"
    nb = {"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": ["Ran on: X\n", stale]}]}]}  # fmt: skip
    assert render_runs_in(nb, "05_x", record) == 1
    assert runs_in_lines(nb) == [(0, "Runs in about 1.7 min with its defaults (the last `make reproduce`: M).")]
    assert nb["cells"][0]["outputs"][0]["text"][0] == "Ran on: X\n"
    assert render_runs_in(nb, "05_x", record) == 0  # rendered already: nothing changes
    path = tmp_path / "05_x.ipynb"
    nb["cells"][0]["outputs"][0]["text"][1] = stale
    path.write_text(json.dumps(nb))
    assert main([str(path), "--run-times", str(record)]) == 0
    assert runs_in_lines(json.loads(path.read_text()))[0][1].startswith("Runs in about 1.7 min")


def test_the_one_template_labels_log_ticks_with_their_value_and_legends_below_clear_the_axis_title():
    """What the browser test checks in the page, at its source: every figure on the one template labels a log
    axis's minor ticks with the whole value ("200", not "2" after "100"), and a legend placed with
    `viz.figures.legend_below` is measured from the figure's bottom edge (plotly makes room under the x-axis
    title), not from the plot area's (where a taller tick label or title runs into it)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    from specdec_lab.viz.figures import TEMPLATE, legend_below

    fig = go.Figure(go.Scatter(x=[100, 2000], y=[1, 2]), layout={"template": TEMPLATE, "xaxis_type": "log"})
    assert pio.templates[TEMPLATE].layout.xaxis.minorloglabels == "complete"
    assert fig.layout.template.layout.yaxis.minorloglabels == "complete"
    legend = go.Figure(layout={"legend": legend_below(traceorder="normal")}).layout.legend
    assert (legend.orientation, legend.yref, legend.y, legend.yanchor, legend.traceorder) == (
        "h", "container", 0, "bottom", "normal")  # fmt: skip


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stream_outputs_are_stored_joined_as_jupyterlab_shows_them(path):
    """Two stdout outputs in a row are one on screen: JupyterLab joins them on opening, which shifts every later
    output of the cell and marks the notebook modified. `make store` joins them (lab.stored.merge_streams)."""
    split = []
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        outs = cell.get("outputs", [])
        for a, b in zip(outs, outs[1:], strict=False):
            if a.get("output_type") == "stream" == b.get("output_type") and a.get("name") == b.get("name"):
                split.append(i)
    assert not split, f"{path.name}: consecutive stream outputs in cells {sorted(set(split))}"


def test_merge_streams_joins_one_stream_and_keeps_the_others_apart():
    from specdec_lab.lab.stored import merge_streams

    def out(name, text):
        return {"output_type": "stream", "name": name, "text": text}

    nb = {
        "cells": [{"outputs": [out("stdout", "a\n"), out("stdout", ["b\n"]), out("stderr", "c\n"), out("stdout", "d")]}]
    }
    assert merge_streams(nb) == 1
    outs = nb["cells"][0]["outputs"]
    assert [o["name"] for o in outs] == ["stdout", "stderr", "stdout"] and "".join(outs[0]["text"]) == "a\nb\n"
