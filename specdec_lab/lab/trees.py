"""A control that redraws figures (`Explorer`), and the node picker of notebook 04 (`node_explorer`).

    Explorer(control, callback)     an ipywidgets control whose value change redraws callback(value)'s figures
    node_explorer(tree, ...)        Explorer over a node Dropdown, callback `viz.tree_figures.node_view`

The callbacks are figure functions of `specdec_lab.viz` (data in, figures out): pytest calls them, or
`Explorer.show(value)`, without a browser. Notebooks 04-07 use `Explorer` for their sliders.
"""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go

from ..viz.tree_figures import node_view
from ..viz.trees import node_labels
from .widgets import show_widget

__all__ = ["Explorer", "node_explorer", "EXPLORER_PLACEHOLDER"]

EXPLORER_PLACEHOLDER = "[interactive control: it appears when the notebook runs; its default view is the output above]"


class Explorer:
    """An ipywidgets control plus an Output: on a value change, `callback(value)` -> figure(s) (or a tuple
    with printable extras) is displayed there. `show(value)` is the same redraw without a browser; the last
    result is kept in `.result`."""

    def __init__(self, control, callback: Callable, header: str = "", show_initial: bool = True):
        import ipywidgets as w

        self.control, self.callback = control, callback
        self.output = w.Output()
        self.result = None
        control.observe(lambda change: self.show(change["new"]), names="value")
        parts = ([w.HTML(header)] if header else []) + [control, self.output]
        self.widget = w.VBox(parts)
        if show_initial:
            self.show(control.value)

    def show(self, value):
        from IPython.display import display

        self.result = self.callback(value)
        items = self.result if isinstance(self.result, tuple) else (self.result,)
        self.output.clear_output(wait=True)
        with self.output:
            for item in items:
                if isinstance(item, go.Figure):
                    display(item)
                else:
                    print(item)
        return self.result

    def _ipython_display_(self):
        # a stored notebook keeps no widget state: its reader sees this line, not `VBox(children=...)`
        show_widget(self.widget, EXPLORER_PLACEHOLDER)


def node_explorer(
    tree, tokenizer=None, cache_length: int = 0, node: int | None = None, show_initial: bool = False
) -> Explorer:
    """A node Dropdown ("i:token") linked to `node_view` (default selection: the last node). The notebook's
    plain cell shows the default view; show_initial=True also draws it inside the widget at once."""
    import ipywidgets as w

    labels = node_labels(tree, tokenizer)
    dropdown = w.Dropdown(
        options=[(label, i) for i, label in enumerate(labels)],
        value=len(tree) - 1 if node is None else int(node),
        description="node",
    )
    return Explorer(
        dropdown,
        lambda i: node_view(tree, i, tokenizer, cache_length),
        header="<b>Pick a node</b>: its path lights up in the tree and its row in the mask.",
        show_initial=show_initial,
    )
