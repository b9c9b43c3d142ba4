"""A control that redraws figures (`Explorer`), the node picker of notebook 04 (`node_explorer`), and the
sentences notebook 05 reads off its cost curve and its budget choice.

    Explorer(control, callback)     an ipywidgets control whose value change redraws callback(value)'s figures
    node_explorer(tree, ...)        Explorer over a node Dropdown, callback `viz.tree_figures.node_view`
    curve_shape(curve)              how t(n) runs against t(1), read off the measured values
    speedup_reason(choice)          why a BudgetChoice's predicted speed-up is above, below or at its E[L]

The callbacks are figure functions of `specdec_lab.viz` (data in, figures out): pytest calls them, or
`Explorer.show(value)`, without a browser. Notebooks 04-07 use `Explorer` for their sliders. The two sentences
are chosen by the numbers they state (`lab.course.compare`'s rule): a curve measured on another machine, with
a dip where this one climbs, gets the sentence that fits it.
"""

from __future__ import annotations

from collections.abc import Callable

import plotly.graph_objects as go

from ..viz.tree_figures import node_view
from ..viz.trees import node_labels
from .course import compare
from .widgets import show_widget

__all__ = ["Explorer", "node_explorer", "EXPLORER_PLACEHOLDER", "curve_shape", "speedup_reason"]

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


# ---- sentences of notebook 05 -------------------------------------------------------------------------
def curve_shape(curve, rel_tol: float = 0.02) -> str:
    """t(n)'s shape as a sentence, from the measured sizes of `curve` (a CostCurve): up to which size a forward
    costs no more than a single-token one (t(n) <= t(1) within `rel_tol`, checked size by size from the
    smallest), where it rises above t(1), and what the largest forward costs in single-token forwards."""
    one = curve(1)
    sizes = [n for n in curve.sizes if n > 1]
    if not sizes:
        raise ValueError(f"a cost curve measured at sizes {curve.sizes} has no size above 1 to describe")
    ratio = {n: t / one for n, t in zip(curve.sizes, curve.seconds, strict=True) if n > 1}
    cheap = []  # the sizes from 2 up whose forward costs no more than t(1), until the first that does
    for n in sizes:
        if ratio[n] > 1 + rel_tol:
            break
        cheap.append(n)
    last = sizes[-1]
    if len(cheap) == len(sizes):
        return (f"t(n) stays at or below t(1) (within {rel_tol:.0%}) at every measured size up to n = {last} "
                f"(t({last}) = {ratio[last]:.2f} t(1)): a flat curve, where extra tokens cost nothing.")  # fmt: skip
    rise = sizes[len(cheap)]
    stays = all(ratio[n] > 1 + rel_tol for n in sizes[len(cheap) :])
    above = f"above t(1) from n = {rise} on" if stays else f"above t(1) at n = {rise}"
    cost = f"a forward of {last} tokens costs {ratio[last]:.1f} single-token ones"
    if not cheap:
        return f"t(n) is {above} (t({rise}) = {ratio[rise]:.2f} t(1)); {cost}."
    below = any(ratio[n] < 1 - rel_tol for n in cheap)
    listed = ", ".join(f"t({n}) = {ratio[n]:.2f} t(1)" for n in cheap)
    return (f"t(n) {'dips below' if below else 'stays at'} t(1) up to n = {cheap[-1]} ({listed}): a forward of up to "
            f"{cheap[-1]} tokens costs no more than a single-token one. It is {above}; {cost}.")  # fmt: skip


def speedup_reason(choice, rel_tol: float = 0.01) -> str:
    """Why `choice` (a trees.BudgetChoice) predicts a speed-up above, below or equal to its tree's E[L].

    speed-up = E[L] · t_plain / t_step, so it exceeds E[L] exactly where a step of n + 1 tokens, heads included,
    is predicted to cost less than a plain single-token step: the price per token then falls below t(1), and
    tokens per second rise by more than tokens per step."""
    if choice.budget == 0:
        return "Plain decoding (n = 0) is predicted fastest: no tree, E[L] = 1 and a speed-up of 1× by definition."
    plain = choice.table[0]["verify_seconds"] + choice.table[0]["head_seconds"]  # n = 0: the root alone, no heads
    return compare(
        choice.speedup,
        choice.expected_length,
        "The predicted speed-up ({a:.2f}×) exceeds the tree's E[L] ({b:.2f}) because a step of {n} tokens, heads "
        "included, is predicted to take {step:.1f} ms, less than a single-token step ({plain:.1f} ms): the price per "
        "token falls below t(1), so tokens per second can rise by more than tokens per step.",
        "The predicted speed-up ({a:.2f}×) is below the tree's E[L] ({b:.2f}): a step of {n} tokens, heads included, "
        "is predicted to take {step:.1f} ms against {plain:.1f} ms for a single-token step, so part of the extra "
        "tokens per step goes to paying for the longer step.",
        within="The predicted speed-up ({a:.2f}×) is the tree's E[L] ({b:.2f}): a step of {n} tokens, heads included, "
        "is predicted to cost what a single-token step does ({step:.1f} against {plain:.1f} ms).",
        rel_tol=rel_tol,
        n=choice.budget + 1,
        step=choice.seconds * 1e3,
        plain=plain * 1e3,
    )
