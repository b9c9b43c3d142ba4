"""Several methods on one prompt, side by side (`lab.compare.compare_methods`): a table and one figure.

    comparison_frame(labs)    per method and the baseline: tokens, target forwards, tokens per step, draft tokens
                              proposed and accepted per step, tokens/s, speedup, identical to the baseline
    comparison_figure(labs)   four panels: tokens emitted against target forwards (the slope is tokens per step)
                              and against seconds (the slope is tokens/s), how many draft tokens each step
                              accepted, and the speedup over the baseline

Colours: one per method (plotly's qualitative palette, the same in every panel); the baseline gray, dotted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import accumulate

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from .figures import TEMPLATE

__all__ = ["comparison_frame", "comparison_figure"]

BASELINE_COLOR = "#7f7f7f"


def _accepted(result) -> list[int]:
    """Draft tokens accepted per step (bonus excluded; 0 for a plain step)."""
    return [min(s.accepted, len(s.emitted)) for s in result.steps]


def comparison_frame(labs: Sequence) -> pd.DataFrame:
    """One row per method, then the shared baseline (module docstring)."""
    rows = {}
    runs = [(lab.spec, lab.result) for lab in labs]
    base = labs[0].baseline if labs else None
    if base is not None:
        runs.append((f"{labs[0].baseline_method} (baseline)", base))
    for name, r in runs:
        steps = max(r.forwards, 1)
        rows[name] = {
            "new tokens": len(r.tokens),
            "target forwards": r.forwards,
            "tokens per step": len(r.tokens) / steps,
            "proposed per step": sum(s.proposed for s in r.steps) / steps,
            "accepted per step": sum(_accepted(r)) / steps,
            "tokens/s": r.tokens_per_s,
            "speedup": r.tokens_per_s / base.tokens_per_s if base is not None else float("nan"),
            "identical": (r.tokens == base.tokens) if base is not None else None,
        }
    return pd.DataFrame(rows).T.rename_axis("method")


def comparison_figure(labs: Sequence, title: str | None = None) -> go.Figure:
    """The four panels of the module docstring, one colour per method, the baseline gray and dotted."""
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.1, vertical_spacing=0.16, subplot_titles=(
        "tokens emitted vs target forwards", "tokens emitted vs seconds",
        "draft tokens accepted per step (share of steps)", "speedup over the baseline"))  # fmt: skip
    base = labs[0].baseline if labs else None
    runs = [(lab.spec, lab.result, qualitative.Plotly[i % len(qualitative.Plotly)]) for i, lab in enumerate(labs)]
    if base is not None:
        runs.append((labs[0].baseline_method, base, BASELINE_COLOR))
    most = max((max(_accepted(r), default=0) for _, r, _ in runs), default=0)
    for name, r, color in runs:
        is_base = r is base
        line = dict(color=color, width=2, dash="dot" if is_base else "solid")
        tokens = [0, *accumulate(len(s.emitted) for s in r.steps)]
        seconds = [r.seconds - sum(s.t_propose + s.t_verify + s.t_accept for s in r.steps)]  # prefill, first
        seconds += [seconds[0] + t for t in accumulate(s.t_propose + s.t_verify + s.t_accept for s in r.steps)]
        common = dict(name=name, legendgroup=name, line=line, mode="lines")
        fig.add_scatter(x=list(range(len(tokens))), y=tokens, row=1, col=1, **common,
                        hovertemplate=f"{name}<br>after %{{x}} forwards: %{{y}} tokens<extra></extra>")  # fmt: skip
        fig.add_scatter(x=seconds, y=tokens, row=1, col=2, showlegend=False, **common,
                        hovertemplate=f"{name}<br>%{{x:.2f}} s: %{{y}} tokens<extra></extra>")  # fmt: skip
        if not is_base:
            counts = Counter(_accepted(r))
            n = max(len(r.steps), 1)
            fig.add_bar(x=list(range(most + 1)), y=[counts.get(a, 0) / n for a in range(most + 1)], name=name,
                        legendgroup=name, showlegend=False, marker_color=color, row=2, col=1,
                        hovertemplate=f"{name}<br>%{{x}} accepted: %{{y:.0%}} of steps<extra></extra>")  # fmt: skip
            speedup = r.tokens_per_s / base.tokens_per_s if base is not None else float("nan")
            fig.add_bar(x=[name], y=[speedup], name=name, legendgroup=name, showlegend=False, marker_color=color,
                        text=[f"{speedup:.2f}×"], textposition="outside", row=2, col=2,
                        hovertemplate=f"{name}: %{{y:.2f}}x (%{{customdata:.1f}} tokens/s)<extra></extra>",
                        customdata=[r.tokens_per_s])  # fmt: skip
    fig.add_hline(y=1.0, line=dict(dash="dot", color=BASELINE_COLOR), row=2, col=2)
    fig.update_xaxes(title_text="target forwards (steps)", row=1, col=1)
    fig.update_xaxes(title_text="seconds (a curve starts after its prefill)", row=1, col=2)
    fig.update_xaxes(title_text="draft tokens accepted in the step", dtick=1, row=2, col=1)
    fig.update_xaxes(title_text="method", row=2, col=2)
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    fig.update_yaxes(title_text="tokens", row=1, col=2)
    fig.update_yaxes(title_text="share of steps", tickformat=".0%", row=2, col=1)
    fig.update_yaxes(title_text="speedup (×)", row=2, col=2)
    top = max((lab.speedup for lab in labs if lab.speedup == lab.speedup), default=1.0)
    fig.update_yaxes(range=[0, max(top, 1.0) * 1.25], row=2, col=2)
    fig.update_layout(title=title or "The same prompt, several methods", template=TEMPLATE, barmode="group",
                      width=900, height=680, legend=dict(orientation="h", y=-0.12, x=0))  # fmt: skip
    return fig
