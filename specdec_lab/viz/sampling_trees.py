"""Figures of exact sampling on trees (notebook 11): residuals step by step, emitted joints, accepted vs T,
typical acceptance's speed against its fidelity.

Data in (what `tree_rules_toy`, `accepted_temperature` and `typical_sweep` return), `plotly` figure out.
`residual_figure` is the slider callback of notebook 11 (a plain function of the step).
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.colors import qualitative

from .figures import TEMPLATE

__all__ = ["residual_figure", "joint_figure", "accepted_temperature_figure", "typical_tradeoff_figure", "sweep_rate"]

WIDTH = 900


def residual_figure(steps: dict, step: int = 0) -> go.Figure:
    """The target's residual before sibling `step` is tried (the last step: what the bonus is drawn from),
    beside the original p; the siblings already rejected are marked, the one being tried is highlighted."""
    data = steps["steps"][step]
    vocab = len(data["residual"])
    labels = [f"token {v}" for v in range(vocab)]
    tried = steps["tokens"][:step]
    colours = ["#bbbbbb"] * vocab
    for x in tried:
        colours[x] = "#d62728"  # rejected: its mass went to the others
    if data["token"] is not None:
        colours[data["token"]] = "#2ca02c"
    fig = go.Figure()
    fig.add_bar(x=labels, y=steps["p"], name="p (before any sibling)", marker_color="rgba(0,0,0,0)",
                marker_line=dict(color="#444444", width=1.5))  # fmt: skip
    fig.add_bar(x=labels, y=data["residual"], name="residual now", marker_color=colours)
    if data["token"] is None:
        title = f"after {len(tried)} rejected sibling(s): the bonus is drawn from this residual"
    else:
        title = (f"sibling {step + 1}: token {data['token']}, accepted with probability "
                 f"{data['accept']:.3f} (red: rejected before, green: tried now)")  # fmt: skip
    fig.update_layout(barmode="overlay", width=WIDTH, height=380, title=title, yaxis_title="probability",
                      yaxis_range=[0, 1], legend=dict(x=0.7, y=0.98), template=TEMPLATE)  # fmt: skip
    return fig


def joint_figure(rows: Sequence[dict], names: Sequence[str], top: int = 12) -> go.Figure:
    """P(t_1..t_n) of each named rule beside autoregressive sampling's, the `top` likeliest sequences."""
    rows = list(rows)[:top]
    x = [" ".join(str(t) for t in r["sequence"]) for r in rows]
    fig = go.Figure()
    fig.add_bar(x=x, y=[r["autoregressive"] for r in rows], name="autoregressive (target)", marker_color="#444444")
    for i, name in enumerate(names):
        fig.add_bar(x=x, y=[r[name] for r in rows], name=name, marker_color=qualitative.Plotly[i % 10])
    fig.update_layout(template=TEMPLATE, barmode="group", width=WIDTH, height=420, xaxis_title="emitted tokens t₁ t₂",
                      yaxis_title="exact probability", legend=dict(x=0.55, y=0.98))  # fmt: skip
    return fig


def accepted_temperature_figure(rows: Sequence[dict], key: Sequence[str], value: str, title: str) -> go.Figure:
    """One line per distinct `key` tuple (e.g. rule and siblings) of `value` against temperature."""
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        series.setdefault(" · ".join(str(r[k]) for k in key), []).append((r["temperature"], r[value]))
    fig = go.Figure()
    for i, (name, pts) in enumerate(series.items()):
        pts.sort()
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=name,
                        line=dict(color=qualitative.Plotly[i % 10]))  # fmt: skip
    fig.update_layout(width=WIDTH, height=420, title=title, xaxis_title="temperature T", yaxis_title=value,
                      legend=dict(x=0.01, y=0.01, yanchor="bottom"), template=TEMPLATE)  # fmt: skip
    return fig


def sweep_rate(sweep: dict) -> str:
    """The rate a typical sweep's rules compare by: the decode rate (prefill taken out) where the sweep recorded
    it, since sampled texts differ in length; else tokens/s (sweeps recorded before it was)."""
    rows = sweep["rows"]
    return "decode_tokens_per_s" if all("decode_tokens_per_s" in r for r in rows) else "tokens_per_s"


def typical_tradeoff_figure(sweep: dict) -> go.Figure:
    """Speed against autoregressive sampling vs TV of the first emitted token from p: typical at every ε, the
    exact rule (whose TV is the sampling noise floor, drawn as a dashed line). Speed by `sweep_rate`."""
    rows = sweep["rows"]
    key = sweep_rate(sweep)
    ar = next(r for r in rows if r["rule"] == "autoregressive")[key]
    exact = next(r for r in rows if r["rule"] == "exact")
    typical = [r for r in rows if r.get("epsilon") is not None]
    fig = go.Figure()
    speed = [r[key] / ar for r in typical]
    fig.add_scatter(x=[r["tv"] for r in typical], y=speed, mode="lines+markers+text",
                    text=[f"ε={r['epsilon']:g}" for r in typical], textposition="top center", name="typical",
                    error_x=dict(array=[1.96 * r["tv_sem"] for r in typical]),
                    line=dict(color=qualitative.Plotly[1]))  # fmt: skip
    fig.add_scatter(x=[exact["tv"]], y=[exact[key] / ar], mode="markers", name="exact (one-hot)",
                    marker=dict(size=12, symbol="diamond", color=qualitative.Plotly[0]),
                    error_x=dict(array=[1.96 * exact["tv_sem"]]))  # fmt: skip
    fig.add_vline(x=exact["tv"], line_dash="dash", line_color=qualitative.Plotly[0])
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888888")
    fig.update_layout(width=WIDTH, height=440, xaxis_title="TV(first emitted token, p)  (exact rule: noise floor)",
                      yaxis_title=("decode " if key != "tokens_per_s" else "") + "speed / autoregressive sampling",
                      legend=dict(x=0.01, y=0.99), template=TEMPLATE)  # fmt: skip
    return fig
