"""The dashboards of notebooks 00–02 (`specdec_lab.lab.widgets`, `lab.prompt_lookup`), driven without a
browser: a control change redraws, the picker follows the text box, and the static snapshot of the default
view is replaced once the live view redraws."""

from __future__ import annotations

import pytest
import torch

from specdec_lab import tiny_model
from specdec_lab.io import load_prompts

pytest.importorskip("ipywidgets")


def _ids(length: int = 30) -> str:
    base = torch.randint(0, 256, (2,), generator=torch.Generator().manual_seed(3)).tolist()
    return " ".join(map(str, (base * length)[:length]))


class _Handle:
    """Stands in for IPython's DisplayHandle: records updates."""

    def __init__(self, bundle):
        self.bundle, self.updates = bundle, []

    def update(self, obj, raw=False):
        self.updates.append(obj)


@pytest.fixture
def shown(monkeypatch):
    """Capture what `IPython.display.display` publishes (bundles), with fake display handles."""
    import IPython.display

    out: list = []

    def fake_display(*objs, raw=False, display_id=None, **kwargs):
        for obj in objs:
            out.append(obj)
        return _Handle(objs[0]) if display_id else None

    monkeypatch.setattr(IPython.display, "display", fake_display)
    return out


def test_prompt_lookup_picker_follows_the_text_box():
    from specdec_lab.lab.prompt_lookup import PromptLookupDashboard

    prompts = load_prompts()[:3]
    dash = PromptLookupDashboard(tiny_model(), prompts=prompts, initial_prompt=prompts[2].text)
    assert dash.picker.value == prompts[2].text  # not "(type your own prompt)" while the box holds a prompt
    dash.prompt.value = "something else"
    assert dash.picker.value == "" and dash.picker.label == dash.OWN_PROMPT
    dash.prompt.value = prompts[0].text
    assert dash.picker.value == prompts[0].text


def test_prompt_lookup_reruns_on_a_control_change_and_retires_the_snapshot(shown):
    from specdec_lab.lab.prompt_lookup import PromptLookupDashboard, run_prompt_lookup

    model = tiny_model()
    first = run_prompt_lookup(model, _ids(), max_draft=10, max_new_tokens=16)
    dash = PromptLookupDashboard(model, max_new_tokens=16, initial_prompt=_ids(), initial_run=first)
    assert dash.output.value == ""  # the default view is the snapshot below the controls
    dash._ipython_display_()
    widget_bundle = shown[0]
    assert "application/vnd.jupyter.widget-view+json" in widget_bundle
    assert "VBox" not in widget_bundle["text/plain"]  # a readable placeholder in stored notebooks
    snapshot_html = "".join(b.get("text/html", "") for b in shown[1:])
    assert "Default view" in snapshot_html and "sd-accepted" in snapshot_html and "max_draft 10" in snapshot_html

    dash.max_draft.value = 3  # no button: the change alone reruns
    assert dash.last is not first and all(s.proposed <= 3 for s in dash.last.result.steps)
    assert "max_draft 3" in dash.output.value and "sd-accepted" in dash.output.value
    assert dash.snapshot.handles == []  # retired: the live view replaced the copy
    assert dash.widget.children[3].children[0]._dom_classes == ("sd-max-draft",)


def test_generic_dashboard_redraws_and_reports_bad_input(shown):
    import ipywidgets as w
    import plotly.graph_objects as go

    from specdec_lab.lab.widgets import Dashboard

    def view(n):
        if n < 0:
            raise ValueError("n must be >= 0")
        return go.Figure(go.Bar(y=list(range(n)))), {"n": n}

    slider = w.IntSlider(value=2, min=-1, max=5)
    dash = Dashboard({"n": slider}, view, initial=view(2), what="n = 2")
    dash._ipython_display_()
    assert any("application/vnd.plotly.v1+json" in b for b in shown[1:])  # the figure is in the snapshot
    slider.value = 4
    fig, numbers = dash.result
    assert numbers == {"n": 4} and len(fig.data[0].y) == 4
    assert dash.snapshot.handles == []
    slider.value = -1
    assert "n must be" in dash.status.value


def test_no_stored_notebook_shows_a_widget_repr():
    """A reader of a stored notebook (no widget state) sees placeholders, never `VBox(children=(...))`."""
    import re
    from pathlib import Path

    import nbformat

    bad = []
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            for out in cell.get("outputs", []):
                text = out.get("data", {}).get("text/plain", "")
                if re.match(r"\s*[HV]Box\(children=", "".join(text)):
                    bad.append(f"{path.name} cell {i}")
    assert not bad, f"stored widget reprs (re-execute these notebooks): {bad}"
