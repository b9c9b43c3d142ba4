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
