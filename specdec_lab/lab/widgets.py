"""What every dashboard shares: the static snapshot of its default view, display helpers, and `Dashboard`.

Callbacks are plain methods/functions: pytest drives them without a browser (set the widgets' values, call
`dashboard.on_run()` / `redraw()`, read the output widgets).

    Dashboard(controls, callback, initial=...)   any controls wired to a plain callback that redraws on every
                                                  change (notebooks 01 and 02)
    Snapshot(*items)                              a dashboard's default view as ordinary output
    mime_bundle(item), output_record(item)        a figure / HTML / value as a display bundle or Output entry
    show_widget(widget, placeholder)              display a widget with a readable text/plain
    parse_ids("5 7 9")                            a token-id prompt typed into a text box (tokenizer-less models)

Stored notebooks. Widget state is stripped before committing (a FigureWidget embeds plotly.js, ~5 MB), so
a reader of the stored notebook sees no controls where a dashboard was. Every dashboard therefore
displays a `Snapshot` under its controls: its default view as ordinary output (HTML, a plotly figure),
which renders anywhere. In a live session the snapshot stays until the dashboard first redraws, and is
then replaced by a one-line note, so the live view and the copy never disagree on screen.
"""

from __future__ import annotations

import html as _html
import json
from collections.abc import Callable

__all__ = [
    "Dashboard",
    "Snapshot",
    "PLACEHOLDER",
    "LIVE_ONLY",
    "mime_bundle",
    "output_record",
    "show_widget",
    "parse_ids",
]


def parse_ids(text: str) -> list[int]:
    """Token ids typed as text ("5 7 9" or "5, 7, 9"): the prompt of a model without a tokenizer."""
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError as err:
        raise ValueError("this model has no tokenizer: type the prompt as token ids, e.g. '5 7 9 5 7'") from err


# ---- static snapshots of a dashboard's default view --------------------------------------------------------
def mime_bundle(item) -> dict:
    """A raw IPython mime bundle for a snapshot item: a plotly Figure, an HTML string, or anything else
    (dict, number: printed as text)."""
    import plotly.graph_objects as go

    if isinstance(item, go.Figure):
        bundle = item._repr_mimebundle_()  # what `display(fig)` publishes under the current plotly renderer
        if "application/vnd.plotly.v1+json" not in bundle:  # a renderer without the mimetype (e.g. "browser")
            bundle["application/vnd.plotly.v1+json"] = json.loads(item.to_json())
        bundle.setdefault("text/plain", "(plotly figure: open the notebook in Jupyter to see it)")
        return bundle
    if isinstance(item, str):
        return {"text/html": item, "text/plain": "(HTML output: open the notebook in Jupyter to see it)"}
    text = _html.escape(str(item))
    return {"text/html": f"<pre style='margin:2px 0'>{text}</pre>", "text/plain": str(item)}


def output_record(item) -> dict:
    """`item` as one entry of an `ipywidgets.Output`'s `outputs` (a display_data message).

    Why not `Output.append_display_data(fig)`: plotly figures display through `_ipython_display_`, which
    IPython's formatter runs as a side effect (the figure goes to whatever cell is current) and answers
    with an empty bundle, so the Output stays blank. Setting `outputs` also works from a background
    thread, where `with output:` capture does not.
    """
    return {"output_type": "display_data", "data": mime_bundle(item), "metadata": {}}


class Snapshot:
    """A dashboard's default view as ordinary output, displayed under its (live) controls.

    items: plotly Figures, HTML strings or printable values, shown in order after a caption. `display()`
    publishes them with display ids; `retire()` (called by the dashboard when it first redraws) replaces
    them with a one-line note, so a live session never shows a stale copy beside the live view.
    """

    CAPTION = (
        "<div class='sd-snapshot-caption' style='font-size:12px;color:#555;border-top:1px dashed #bbb;"
        "margin-top:4px;padding-top:2px'><b>Default view</b> (a static snapshot stored with the notebook, "
        "readable without a kernel{what}). {how}</div>"
    )

    def __init__(self, *items, what: str = "", how: str = "Change a control above to redraw it live."):
        self.items = items
        self.caption = self.CAPTION.format(what=f": {what}" if what else "", how=how)
        self.handles: list = []

    def display(self) -> None:
        from IPython.display import display

        self.handles = [display(mime_bundle(x), raw=True, display_id=True) for x in (self.caption, *self.items)]

    def retire(self) -> None:
        """Replace the snapshot by a short note (no-op if it was never displayed or is already gone)."""
        if not self.handles:
            return
        first, *rest = self.handles
        note = (
            "<i style='font-size:12px;color:#777'>(the static snapshot of the default view was here; "
            "the dashboard above is live)</i>"
        )
        first.update({"text/html": note, "text/plain": ""}, raw=True)
        for handle in rest:
            handle.update({"text/plain": ""}, raw=True)
        self.handles = []


def show_widget(widget, placeholder: str) -> None:
    """Display an ipywidget with a readable text/plain: what a reader of the stored notebook sees in its place
    (widget state is not stored) instead of `VBox(children=(...))`."""
    from IPython.display import display

    bundle = widget._repr_mimebundle_()
    bundle["text/plain"] = placeholder
    display(bundle, raw=True)


PLACEHOLDER = "[interactive dashboard: its controls appear when the notebook runs; the default view follows below]"
# what a stored notebook shows in place of a dashboard that has no snapshot (PLACEHOLDER promises one below)
LIVE_ONLY = "[interactive dashboard: its controls appear when the notebook runs]"


class Dashboard:
    """Controls that redraw an output on every change, and a snapshot of the default view.

    controls: {name: ipywidget}; callback(**{name: control.value}) returns one item or a tuple of items
    (plotly Figure, HTML string, printable value) shown in `self.output` after each change. initial: the
    items of the default view (usually computed by the notebook's plain cell just above), shown as a
    `Snapshot` until the first redraw. `redraw()` is the callback without a browser; `self.result` keeps
    the last result.
    """

    def __init__(self, controls: dict, callback: Callable, *, header: str = "", initial=None, what: str = ""):
        import ipywidgets as W

        self.controls, self.callback = controls, callback
        self.output = W.Output()
        self.status = W.HTML()
        self.result = None
        self.snapshot = None
        if initial is not None:
            self.snapshot = Snapshot(*(initial if isinstance(initial, tuple) else (initial,)), what=what)
        for control in controls.values():
            control.observe(self.redraw, names="value")
        parts = [W.HTML(header)] if header else []
        self.widget = W.VBox([*parts, W.HBox(list(controls.values())), self.status, self.output])
        self.widget.add_class("sd-dashboard")

    def values(self) -> dict:
        return {name: control.value for name, control in self.controls.items()}

    def redraw(self, _change=None):
        """Call the callback with the controls' values and show its result (or its error) in the output."""
        from IPython.display import display

        self.status.value = "<i>running…</i>"
        try:
            self.result = self.callback(**self.values())
        except ValueError as err:  # bad input: say so in the widget
            self.status.value = f"<pre class='sd-error' style='color:#b00'>{_html.escape(str(err))}</pre>"
            return None
        self.status.value = ""
        items = self.result if isinstance(self.result, tuple) else (self.result,)
        self.output.clear_output(wait=True)
        with self.output:
            for item in items:
                display(mime_bundle(item), raw=True)
        if self.snapshot is not None:
            self.snapshot.retire()
        return self.result

    def _ipython_display_(self):
        show_widget(self.widget, PLACEHOLDER)
        if self.snapshot is not None:
            self.snapshot.display()
