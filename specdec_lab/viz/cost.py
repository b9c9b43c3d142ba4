"""Figures of the measured verify cost curve t(n) (`specdec_lab.cost.CostCurve`).

Left panel: milliseconds of one verify forward over n tokens, and the cost per token t(n)/n.
Right panel (log-log): t(n)/t(1), the *break-even* line: verifying n tokens in one forward pays off only when a
step emits more than t(n)/t(1) tokens on average; the diagonal n is what n autoregressive forwards cost
(and the most a step of n verified tokens can emit). The gap between the two is the room for speed-up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cost.curve import CostCurve
from ..cost.theory import expected_tokens_per_step
from .figures import TEMPLATE

__all__ = ["cost_curve_figure", "cost_curves_figure", "chain_speedup_figure"]


def cost_curve_figure(curve: CostCurve, title: str | None = None) -> go.Figure:
    """Two panels: t(n) and t(n)/n in ms; t(n)/t(1) against n (break-even vs. n sequential forwards)."""
    n = list(curve.sizes)
    ms = [s * 1e3 for s in curve.seconds]
    rel = curve.relative()
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("time of one verify forward", "relative cost t(n) / t(1)"),
        horizontal_spacing=0.12,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=ms,
            mode="lines+markers",
            name="t(n): ms per forward",
            hovertemplate="n=%{x}: %{y:.1f} ms per forward<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=[m / k for m, k in zip(ms, n, strict=True)],
            mode="lines+markers",
            name="t(n)/n: ms per token",
            line={"dash": "dot"},
            hovertemplate="n=%{x}: %{y:.2f} ms per token<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=rel,
            mode="lines+markers",
            name="t(n)/t(1): break-even tokens per step",
            hovertemplate="n=%{x}: a step must emit > %{y:.2f} tokens to pay off<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=n,
            mode="lines",
            name="n: cost of n autoregressive forwards",
            line={"dash": "dash", "color": "gray"},
            hovertemplate="n=%{x}: %{y} sequential forwards<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(title_text="tokens verified in one forward (n)", rangemode="tozero", row=1, col=1)
    # The diagonal n climbs to the largest size while t(n)/t(1) stays a few units high: on linear axes one of
    # them is cut off or squashed flat. On log-log axes both fit whole, the diagonal stays a straight line, and
    # the gap between them (the room for speed-up) reads as a ratio at every n.
    low, high = min(min(rel), 1.0) / 1.25, max(n) * 1.25
    ticks = [2**i for i in range(int(math.log2(high)) + 1)]  # 1, 2, 4, ...: doublings read off directly
    log = {"type": "log", "tickvals": ticks, "ticktext": [str(t) for t in ticks]}
    fig.update_xaxes(title_text="n (log scale)", range=[math.log10(0.8), math.log10(high)], **log, row=1, col=2)
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="× t(1) (log scale)", range=[math.log10(low), math.log10(high)], **log, row=1, col=2)
    fig.update_layout(
        title=title or f"Verify cost on {curve.device} (context {curve.context} tokens)",
        template=TEMPLATE,
        width=940,  # fits JupyterLab's output area with the file browser open
        height=420,
        legend={"orientation": "h", "y": -0.2},
        margin={"t": 80, "b": 100},
    )
    return fig


def cost_curves_figure(curves: Mapping[str, CostCurve], title: str | None = None) -> go.Figure:
    """Several setups' curves (one colour each, both panels): t(n) in ms, and t(n)/t(1) — how a kernel
    choice moves the break-even line, not only the milliseconds."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("time of one verify forward", "relative cost t(n) / t(1)"),
        horizontal_spacing=0.12,
    )
    palette = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3")
    for i, (name, curve) in enumerate(curves.items()):
        color = palette[i % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=list(curve.sizes),
                y=[s * 1e3 for s in curve.seconds],
                mode="lines+markers",
                name=name,
                legendgroup=name,
                line={"color": color},
                hovertemplate=f"{name}<br>n=%{{x}}: %{{y:.1f}} ms<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=list(curve.sizes),
                y=curve.relative(),
                mode="lines+markers",
                name=name,
                legendgroup=name,
                showlegend=False,
                line={"color": color},
                hovertemplate=f"{name}<br>n=%{{x}}: %{{y:.2f}} × t(1)<extra></extra>",
            ),
            row=1,
            col=2,
        )
    first = next(iter(curves.values()))
    fig.update_xaxes(title_text="tokens verified in one forward (n)", rangemode="tozero")
    fig.update_yaxes(title_text="ms", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="× t(1)", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title=title or f"Verify cost by kernel setup on {first.device} (context {first.context} tokens)",
        template=TEMPLATE,
        width=940,
        height=440,
        legend={"orientation": "h", "y": -0.22},
        margin={"t": 80, "b": 110},
    )
    return fig


def chain_speedup_figure(
    curve: CostCurve, ks: Sequence[int] = (1, 2, 4, 8), alphas: Sequence[float] | None = None
) -> go.Figure:
    """Expected speed-up of chain drafts of length k over autoregressive decoding, against α.

    speed-up(α, k) = E[tokens | k, α] · t(1) / t(k + 1), with a free draft (prompt lookup costs ~0); it
    crosses 1 at the break-even acceptance rate of that k on this hardware.
    """
    alphas = list(alphas) if alphas is not None else [i / 100 for i in range(101)]
    fig = go.Figure()
    for k in ks:
        rel = curve(k + 1) / curve(1)
        fig.add_trace(
            go.Scatter(
                x=alphas,
                y=[expected_tokens_per_step(a, k) / rel for a in alphas],
                mode="lines",
                name=f"k = {k}",
                hovertemplate=f"k={k}, α=%{{x:.2f}}: ×%{{y:.2f}}<extra></extra>",
            )
        )
    fig.add_hline(
        y=1.0,
        line_dash="dash",
        line_color="gray",
        annotation_text="autoregressive",
        annotation_position="top left",
    )
    fig.update_layout(
        title="Expected speed-up of a free chain draft of k tokens (from the measured t(n))",
        xaxis_title="per-token acceptance rate α",
        yaxis_title="speed-up over autoregressive",
        template=TEMPLATE,
        width=800,
        height=420,
    )
    return fig
