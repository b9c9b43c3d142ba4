"""Figures of speculation in a batch (notebook 13): data in (curves, a BatchResult's grid, a batched bench's summary),
plotly figures out.

    cost_by_batch_figure(curves)            t(B, n): a step's seconds by tokens per row, one line per batch size B
    ragged_figure(grid)                     rows × steps, each cell the tokens a row emitted (padding blank)
    speedup_by_batch_figure(summary, ...)   speedup over batched autoregressive against B, published rows beside
    throughput_latency_figure(summary)      total tokens/s against median request latency, one line per method
    rows_mask_figure(mask, lengths)         one batched verify's attention mask, one panel per row
    policy_view(curves, b, accuracies)      what the sizers choose at batch size b (a dashboard's callback)
    width_plan_figure(rates, chosen)        one batch step's width: expected tokens per second by nodes per row N
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from .figures import TEMPLATE

__all__ = ["cost_by_batch_figure", "ragged_figure", "speedup_by_batch_figure", "throughput_latency_figure",
           "rows_mask_figure", "policy_view", "width_plan_figure", "log_ticks", "WIDTH"]  # fmt: skip

WIDTH = 900  # px: inside the 950 px output area


def cost_by_batch_figure(curves: dict, title: str = "The price of a step: t(B, n)") -> go.Figure:
    """One line per batch size B: seconds of one forward over B rows of n tokens each, against n; and dashed, the
    seconds per token verified (t / (B·n)), which falls while the step is bound by reading the weights."""
    fig = go.Figure()
    for i, (b, curve) in enumerate(sorted(curves.items())):
        color = qualitative.Plotly[i % 10]
        ms = [t * 1e3 for t in curve.seconds]
        fig.add_scatter(x=curve.sizes, y=ms, mode="lines+markers", name=f"B = {b}", line={"color": color},
                        hovertemplate=f"B={b}, n=%{{x}}: %{{y:.1f}} ms per step<extra></extra>")  # fmt: skip
        fig.add_scatter(x=curve.sizes, y=[t / (b * n) for t, n in zip(ms, curve.sizes, strict=True)], yaxis="y2",
                        mode="lines", line={"color": color, "dash": "dot"}, showlegend=False,
                        hovertemplate=f"B={b}, n=%{{x}}: %{{y:.2f}} ms per token<extra></extra>")  # fmt: skip
    per_token = [t * 1e3 / (b * n) for b, c in curves.items() for t, n in zip(c.seconds, c.sizes, strict=True)]
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=440, xaxis_title="tokens per row n",
                      yaxis={"title": "ms per step (solid)", "rangemode": "tozero"},
                      yaxis2={"title": {"text": "ms per token (dotted)", "standoff": 4}, "overlaying": "y",
                              "side": "right", "type": "log", **log_ticks(per_token)},
                      margin={"r": 80}, legend={"orientation": "h", "x": 0, "y": -0.24})  # fmt: skip
    return fig


def log_ticks(values: list[float]) -> dict:
    """Readable ticks for a log axis over `values` (ms): 1-2-5 steps inside their range, each written as a
    plain number of ms (no SI prefixes, no bare mantissas such as plotly's "2|3|5|8" between decades)."""
    import math

    positive = [v for v in values if v > 0]
    if not positive:
        return {}
    lo, hi = min(positive), max(positive)
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5)]  # fmt: skip
    inside = [t for t in ticks if lo / 1.5 <= t <= hi * 1.5] or [lo, hi]
    return {"tickmode": "array", "tickvals": inside, "ticktext": [f"{t:g} ms" for t in inside]}


def ragged_figure(grid: list, title: str = "Ragged acceptance: tokens each row emitted per step") -> go.Figure:
    """Rows × steps of a batch: a cell is the tokens the row emitted in that step (accepted drafts + bonus), blank
    where the row was padding (finished, or waiting for a prompt); the hover names the prompt."""
    rows = len(grid[0]) if grid else 0
    z = [[cell[1] if cell else None for cell in (step[r] for step in grid)] for r in range(rows)]
    text = [[f"prompt {cell[0]}" if cell else "padding" for cell in (step[r] for step in grid)] for r in range(rows)]
    fig = go.Figure(go.Heatmap(z=z, text=text, colorscale="Blues", zmin=0, colorbar={"title": "tokens"},
                               hovertemplate="row %{y}, step %{x}: %{z} tokens (%{text})<extra></extra>"))  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=160 + 30 * rows, xaxis_title="step",
                      yaxis={"title": "row", "dtick": 1, "autorange": "reversed"},
                      plot_bgcolor="#eeeeee")  # fmt: skip
    return fig


def speedup_by_batch_figure(
    summary: list[dict], published: dict | None = None, title: str = "Speedup over batched autoregressive, by B"
) -> go.Figure:
    """One line per method: tokens/s over batched autoregressive's at the same B (a batched bench's summary rows);
    `published`: {label: {B: speedup}} drawn dashed (another model and device: its shape, not its level)."""
    fig = go.Figure()
    methods = list(dict.fromkeys(r["method"] for r in summary if r.get("speedup") is not None))
    for i, m in enumerate(methods):
        pts = sorted((r["batch_size"], r["speedup"]) for r in summary if r["method"] == m and r.get("speedup"))
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=m,
                        line={"color": qualitative.Plotly[i % 10]})  # fmt: skip
    for label, points in (published or {}).items():
        pts = sorted(points.items())
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=label,
                        line={"dash": "dash", "color": "#888888"})  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dot", line_color="#444444")
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=440,
                      xaxis={"title": "batch size B", "type": "log", "dtick": 0.30103},
                      yaxis_title="speedup", legend={"orientation": "h", "y": -0.2})  # fmt: skip
    return fig


def throughput_latency_figure(summary: list[dict], title: str = "Throughput against latency") -> go.Figure:
    """One line per method through its batch sizes: total tokens/s against the median request latency (the first
    method's points labelled with their B, every point's hover naming it; the labels of every line would pile on
    each other where the lines meet): larger batches buy throughput with latency."""
    fig = go.Figure()
    methods = list(dict.fromkeys(r["method"] for r in summary if r.get("tokens_per_s")))
    for i, m in enumerate(methods):
        pts = sorted((r["batch_size"], r["latency_median_s"], r["tokens_per_s"]) for r in summary
                     if r["method"] == m and r.get("tokens_per_s"))  # fmt: skip
        # the B labels once, on the first method's line (every line runs through the same batch sizes in order)
        fig.add_scatter(x=[p[1] for p in pts], y=[p[2] for p in pts], mode="lines+markers+text" if i == 0 else
                        "lines+markers", name=m, text=[f"B={p[0]}" for p in pts], textposition="top center",
                        line={"color": qualitative.Plotly[i % 10]},
                        hovertemplate=f"{m}, %{{text}}: %{{y:.1f}} tokens/s, median latency %{{x:.1f}} s"
                        "<extra></extra>")  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=460, xaxis_title="median latency (s)",
                      yaxis_title="total tokens/s", legend={"orientation": "h", "y": -0.2})  # fmt: skip
    return fig


def rows_mask_figure(mask, lengths, title: str = "One forward over every row: who sees what") -> go.Figure:
    """The (B, 1, N, S) additive mask of `verify.rows_attention_mask` as B panels, nodes × cache slots: a dark cell is
    a slot the node attends to (the row's committed prefix, its ancestors in its own tree, or, for a padding node,
    its own slot alone), a dashed line each row's committed length."""
    from plotly.subplots import make_subplots

    b = mask.shape[0]
    fig = make_subplots(rows=1, cols=b, subplot_titles=[f"row {r} (P_b = {lengths[r]})" for r in range(b)],
                        horizontal_spacing=0.06)  # fmt: skip
    for r in range(b):
        seen = (mask[r, 0] == 0).int().tolist()  # (N, S) 1 where the node attends
        cells = go.Heatmap(z=seen, colorscale=[[0, "#f4f4f4"], [1, "#1f4e99"]], showscale=False,
                           hovertemplate="node %{y}, slot %{x}: %{z}<extra></extra>")  # fmt: skip
        fig.add_trace(cells, row=1, col=r + 1)
        fig.add_vline(x=lengths[r] - 0.5, line_dash="dash", line_color="#d62728", row=1, col=r + 1)
        fig.update_yaxes(autorange="reversed", dtick=1, row=1, col=r + 1, title_text="node")
        fig.update_xaxes(title_text="cache slot", row=1, col=r + 1)
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=330)
    return fig


def policy_view(curves: dict, b: int, accuracies=None) -> tuple[go.Figure, dict]:
    """What the sizers choose at batch size `b` (the nearest measured B at or below it): its curve, and the row of
    `bench.batch_policy.chosen_sizes` (draft lengths by α, Medusa's tree nodes, vLLM's documented k)."""
    from ..bench.batch_policy import chosen_sizes

    at = max((x for x in curves if x <= b), default=min(curves))
    row = chosen_sizes({at: curves[at]}, accuracies)[0]
    fig = cost_by_batch_figure({at: curves[at]}, title=f"t(B, n) at B = {at}")
    return fig, row


def width_plan_figure(rates: dict, chosen: int, title: str = "One width for the step: tokens/s by N") -> go.Figure:
    """Bars: the batch's expected tokens per second if every row is cut to its first N nodes (`cost.plan.width_rates`:
    {N: (expected tokens, seconds)}), the chosen width N* highlighted; hover gives both terms."""
    ns = sorted(rates)
    rate = [rates[n][0] / rates[n][1] for n in ns]
    fig = go.Figure()
    fig.add_bar(x=ns, y=rate, marker_color=["#d62728" if n == chosen else "#1f77b4" for n in ns], showlegend=False,
                customdata=[[rates[n][0], rates[n][1] * 1e3] for n in ns],
                hovertemplate="N=%{x}: %{customdata[0]:.2f} tokens in %{customdata[1]:.1f} ms = %{y:.1f} tokens/s"
                "<extra></extra>")  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=f"{title} (N* = {chosen}, red)", width=WIDTH, height=380,
                      xaxis={"title": "nodes per row N (the forward's width)", "dtick": 1},
                      yaxis_title="expected tokens per second")  # fmt: skip
    return fig
