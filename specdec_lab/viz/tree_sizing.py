"""Figures of what a Medusa tree's size buys (notebook 05): the heads' accuracies, the expected accepted length
against the node budget, the predicted speed-up per cost curve, and the prediction against a measurement.

    accuracy_figure(acc)            a[h, i] heatmaps: independent and conditional
    tree_cost_curve_figure(curve)   viz.cost's t(n) figure with its token count named m (n is the tree's budget)
    expected_length_figure(...)     E[L] against the node budget: lines (greedy, DP) and points (Cartesian)
    budget_rate_figure(choices)     predicted speed-up against the budget per cost curve, the pick starred
    predicted_vs_measured_figure    measured mean accepted next to E[L] under each accuracy model

The trees themselves (rank paths, the greedy construction, one node linked to its mask row) are drawn by
`viz.tree_figures`. Everything returns a plain `go.Figure`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from .figures import TEMPLATE
from .tree_figures import HALO
from .trees import MAX_WIDTH

__all__ = [
    "accuracy_figure",
    "tree_cost_curve_figure",
    "expected_length_figure",
    "budget_rate_figure",
    "predicted_vs_measured_figure",
]


def accuracy_figure(acc, max_rank: int | None = None, title: str | None = None) -> go.Figure:
    """Heatmaps of a[h, i] (head h, rank i): the independent (marginal) model, and the conditional one
    when `acc` has it. `acc`: a HeadAccuracies (attributes top, conditional) or a (K, S) matrix."""
    import torch

    top = getattr(acc, "top", acc)
    cond = getattr(acc, "conditional", None)
    panels = {"independent: P(rank i right)": torch.as_tensor(top, dtype=torch.float64)}
    if cond is not None:
        # head h's row is conditioned on the heads before it (heads 1..h−1), never on head h itself
        cond = torch.as_tensor(cond, dtype=torch.float64)
        panels[f"conditional: given heads 1..h−1 had it in their top-{cond.shape[-1]}"] = cond
    k, s = panels[next(iter(panels))].shape
    s = min(s, max_rank or s)
    # one y axis for both panels: the heads' labels and title once, at the left, so the second panel's labels do not
    # overprint the first panel's last column
    fig = make_subplots(
        rows=1, cols=len(panels), subplot_titles=list(panels), shared_yaxes=True, horizontal_spacing=0.04
    )
    zmax = max(float(m[:, :s].max()) for m in panels.values())
    heads = [f"head {h} (x<sub>t+{h + 1}</sub>)" for h in range(1, k + 1)]
    ranks = [f"rank {i}" for i in range(s)]
    for col, (name, m) in enumerate(panels.items(), start=1):
        fig.add_trace(
            go.Heatmap(
                z=m[:, :s].tolist(),
                x=ranks,
                y=heads,
                zmin=0,
                zmax=zmax,
                colorscale="Blues",
                showscale=col == len(panels),
                colorbar={"title": {"text": "P(right)"}},
                texttemplate="%{z:.2f}",
                textfont={"size": 10},
                name=name,
                hovertemplate="%{y}, %{x}: %{z:.3f}<extra>" + name.split(":")[0] + "</extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(autorange="reversed", title_text="head h" if col == 1 else None, row=1, col=col)
        fig.update_xaxes(title_text="rank i of the head's candidates", row=1, col=col)
    fig.update_layout(
        title=title or "head accuracies a[h, i] from calibration",
        template=TEMPLATE,
        width=min(MAX_WIDTH - 10, 430 * len(panels) + 80),
        height=330,
    )
    return fig


def tree_cost_curve_figure(curve, title: str | None = None) -> go.Figure:
    """`viz.cost.cost_curve_figure` of a tree cost curve, its token count named m instead of n: in notebook 05 n is
    the tree's node budget, and a budget of n nodes verifies m = n + 1 tokens."""
    import re

    from .cost import cost_curve_figure

    fig = cost_curve_figure(curve, title=title)
    rename = lambda text: text if text is None else re.sub(r"\bn\b", "m", text)  # noqa: E731 - the word n only
    for trace in fig.data:
        trace.update(name=rename(trace.name), hovertemplate=rename(trace.hovertemplate))
    for note in fig.layout.annotations:  # the subplot titles
        note.text = rename(note.text)
    fig.for_each_xaxis(lambda ax: ax.update(title_text=rename(ax.title.text)))
    fig.for_each_yaxis(lambda ax: ax.update(title_text=rename(ax.title.text)))
    return fig


def expected_length_figure(
    lines: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    points: Mapping[str, tuple[float, float]] | None = None,
    title: str | None = None,
    points_name: str = "Cartesian trees",
    yaxis_title: str = "E[L]",
) -> go.Figure:
    """E[L] against the node budget: `lines` name -> (budgets, E[L]) (greedy, DP, ...), `points` name ->
    (nodes, E[L]) (e.g. each Cartesian tree at its size), named `points_name` in the legend. Where the traces are
    priced under different accuracy models, say so in the names and in `yaxis_title`."""
    fig = go.Figure()
    dashes = ["solid", "dot", "dash", "dashdot"]
    for i, (name, (xs, ys)) in enumerate(lines.items()):
        fig.add_trace(
            go.Scatter(
                x=list(xs),
                y=list(ys),
                mode="lines+markers" if len(xs) <= 40 else "lines",
                name=name,
                line={"dash": dashes[i % len(dashes)], "width": 2 + (i == 0)},
                marker={"size": 5},
                hovertemplate="%{x} nodes: E[L] = %{y:.3f}<extra>" + name + "</extra>",
            )
        )
    if points:
        # a point at the same size as an earlier one takes its label on the other side (no label on another)
        seen: dict = {}
        sides = []
        for n, _ in points.values():
            sides.append(("bottom right", "top left", "top right", "bottom left")[seen.get(n, 0) % 4])
            seen[n] = seen.get(n, 0) + 1
        fig.add_trace(
            go.Scatter(
                x=[n for n, _ in points.values()],
                y=[e for _, e in points.values()],
                mode="markers+text",
                text=list(points),
                textposition=sides,
                cliponaxis=False,  # a label near the plot's edge is drawn whole
                textfont={"size": 10},
                name=points_name,
                marker={"size": 10, "symbol": "x", "color": "#d62728"},
                hovertemplate="%{text}: %{x} nodes, E[L] = %{y:.3f}<extra></extra>",
            )
        )
    fig.update_layout(
        title=title or "expected tokens per step E[L] (bonus included) vs. node budget",
        template=TEMPLATE,
        xaxis_title="nodes below the root (budget n)",
        yaxis_title=yaxis_title,
        legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},  # below: long names leave the plot its width
        width=760,
        height=500,
    )
    return fig


def budget_rate_figure(choices: Mapping[str, object], title: str | None = None) -> go.Figure:
    """Predicted speed-up rate(n) / rate(0) against the budget n for each `BudgetChoice` (one per cost
    curve), the chosen budget starred."""
    fig = go.Figure()
    palette = qualitative.Plotly  # the star takes its curve's colour
    stars = []  # drawn after every curve: another curve's line may pass through a star's label, never over it
    for i, (name, choice) in enumerate(choices.items()):
        color = palette[i % len(palette)]
        table = choice.table
        trace = go.Scatter(
            x=[r["budget"] for r in table],
            y=[r["speedup"] for r in table],
            mode="lines",
            name=name,
            line={"color": color},
            customdata=[[r["expected_length"], r["depth"]] for r in table],
            hovertemplate="n = %{x}: speed-up %{y:.2f}, E[L] %{customdata[0]:.2f}, depth %{customdata[1]}"
            "<extra>" + name + "</extra>",
        )
        fig.add_trace(trace)
        pick = next(r for r in table if r["budget"] == choice.budget)
        stars.append(
            go.Scatter(
                x=[pick["budget"]],
                y=[pick["speedup"]],
                mode="markers+text",
                text=[f"n = {pick['budget']}"],
                textposition="top center",
                marker={"size": 14, "symbol": "star", "color": color},
                textfont={"color": color, "shadow": HALO},  # a white halo: legible over another curve's line
                name=f"{name}: chosen",
                hovertemplate="chosen n = %{x}: speed-up %{y:.2f}<extra></extra>",
            )
        )
    for star in stars:
        fig.add_trace(star)
    fig.add_hline(
        y=1.0,
        line={"dash": "dash", "color": "gray"},
        annotation_text="plain decoding (1×)",
        annotation_position="bottom right",
        annotation_font_color="gray",
    )
    fig.update_layout(
        title=title or "predicted speed-up E[L](n) / (t(n+1) + heads) ÷ plain decoding",
        template=TEMPLATE,
        xaxis_title="node budget n",
        yaxis_title="speed-up over plain decoding (predicted)",
        legend={"orientation": "h", "x": 0, "y": -0.2, "yanchor": "top"},  # below: long names leave the plot its width
        width=760,
        height=500,
    )
    return fig


def predicted_vs_measured_figure(rows: Sequence[Mapping], title: str | None = None) -> go.Figure:
    """Grouped bars per tree: rows of {"tree", "measured", "independent", "conditional"} (mean tokens per
    forward, bonus included); a row's optional "interval" (lo, hi), the measurement's 95% interval over the prompts
    decoded (notebook 05's bootstrap), draws an error bar on its measured bar. A long tree name is broken into
    lines (`_wrap`), so the ticks stay horizontal and leave the bars their height."""
    trees = [_wrap(r["tree"]) for r in rows]
    if len(set(trees)) < len(trees):  # wrapping merged two names (it collapses runs of spaces): keep them whole
        trees = [r["tree"] for r in rows]
    fig = go.Figure()
    for key, color in (("measured", "#333333"), ("independent", "#1f77b4"), ("conditional", "#ff7f0e")):
        if all(key in r for r in rows):
            name = "measured τ (tokens / forwards)" if key == "measured" else f"predicted E[L], {key} model"
            error = None
            if key == "measured" and all("interval" in r for r in rows):
                name += ", 95% interval over prompts"
                error = {"type": "data", "symmetric": False, "color": "#999999",
                         "array": [r["interval"][1] - r["measured"] for r in rows],
                         "arrayminus": [r["measured"] - r["interval"][0] for r in rows]}  # fmt: skip
            fig.add_trace(go.Bar(x=trees, y=[r[key] for r in rows], name=name, marker_color=color, error_y=error))
    fig.update_layout(
        title=title or "tokens per target forward: predicted E[L] vs. measured τ",
        template=TEMPLATE,
        barmode="group",
        xaxis_title="tree decoded (section 6)",
        yaxis_title="tokens per target forward",
        legend={"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},  # above the bars: they keep the width
        margin={"t": 150},  # the title, then up to three legend rows
        width=700,
        height=500,
    )
    return fig


def _wrap(name: str, width: int = 24) -> str:
    """A tick label in lines of at most about `width` characters (plotly's <br>): a new line before each " = " that
    joins two names (notebook 05's "chain:1 = this run's curve's choice (n = 1)"), none inside parentheses."""
    import re
    import textwrap

    kept = re.sub(r"\([^()]*\)", lambda m: m.group(0).replace(" ", "\u00a0"), name)  # textwrap splits ASCII spaces only
    lines = ["<br>".join(textwrap.wrap(part, width)) or part for part in kept.split(" = ")]
    return "<br>= ".join(lines).replace("\u00a0", " ")
