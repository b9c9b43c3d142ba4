"""Notebook 07: the n-gram pool over a lookahead decode, and its hits.

Data in, figure / DataFrame out. The pool columns come from a decode with
`specdec_lab.lab.lookahead.RecordingLookahead` (the library's proposer, reporting its pool after each step).

    pool_frame(result)          one row per step of a traced run: window, n-grams verified, accepted by credit
    pool_figure(frame)          the pool, the accepted draft tokens and the running hit rate over the steps
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..proposers.lookahead import TEXT, WINDOW
from .figures import TEMPLATE, legend_below
from .lookahead import KIND_COLORS, _need_steps

__all__ = ["pool_frame", "pool_figure"]


def pool_frame(result):
    """One row per step of a traced lookahead run: the window verified (cells), n-grams verified, accepted
    draft tokens credited to the text / the window, emitted tokens, and the pool (with `RecordingLookahead`)."""
    import pandas as pd

    _need_steps(result)
    rows = []
    for s, step in enumerate(result.steps):
        info = step.info
        if "credit" not in info:
            raise ValueError("not a lookahead trace: its steps' info has no 'credit' (method='lookahead')")
        a = info["accepted"]
        row = {
            "step": s,
            "root": step.tree_tokens[0],
            "W": info["W"],
            "window cells": step.extra,
            "n-grams verified": info["grams"],
            "n-gram nodes": step.proposed,
            "nodes": len(step.tree_tokens),
            "accepted": a,
            "accepted (text)": a if info["credit"] == TEXT else 0,
            "accepted (window)": a if info["credit"] == WINDOW else 0,
            "emitted": len(step.emitted),
        }
        if "pool_grams" in info:
            row |= {
                "pool n-grams": info["pool_grams"],
                "pool n-grams (window)": info["pool_window"],
                "pool keys": info["pool_keys"],
            }
        rows.append(row)
    frame = pd.DataFrame(rows).set_index("step")
    verified = (frame["n-grams verified"] > 0).cumsum()
    frame["hit rate so far"] = (frame["accepted"] > 0).cumsum() / verified.where(verified > 0)
    return frame


def pool_figure(frame, title: str | None = None) -> go.Figure:
    """Three panels over the steps: the pool (n-grams from the text and from the window), the accepted
    draft tokens by credit with the n-grams verified, and the running hit rate (steps with an accepted
    n-gram token / steps that verified any)."""
    has_pool = "pool n-grams" in frame
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        row_heights=[0.35, 0.4, 0.25],
        subplot_titles=("the pool", "accepted draft tokens per step, and n-grams verified", "hit rate so far"),
    )
    x = list(frame.index)
    if has_pool:
        text = frame["pool n-grams"] - frame["pool n-grams (window)"]
        fig.add_trace(
            go.Scatter(x=x, y=text, name="pool: text n-grams", stackgroup="pool", line={"color": "#8c564b"}),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=frame["pool n-grams (window)"],
                name="pool: window n-grams",
                stackgroup="pool",
                line={"color": KIND_COLORS["window"]},
            ),
            row=1,
            col=1,
        )
    for col, color in (("accepted (text)", "#8c564b"), ("accepted (window)", KIND_COLORS["window"])):
        fig.add_trace(go.Bar(x=x, y=frame[col], name=col, marker_color=color), row=2, col=1)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=frame["n-grams verified"],
            mode="markers",
            name="n-grams verified (root's)",
            marker={"color": KIND_COLORS["ngram"], "symbol": "line-ew-open", "size": 10},
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=x, y=frame["hit rate so far"], mode="lines", name="hit rate", line={"color": "#2ca02c"}),
        row=3,
        col=1,
    )
    fig.update_layout(
        title=title or f"pool and hits over {len(frame)} steps",
        template=TEMPLATE,
        barmode="stack",
        width=900,
        height=700,
        legend=legend_below(),
    )
    fig.update_yaxes(title_text="n-grams", row=1, col=1)
    fig.update_yaxes(title_text="tokens", row=2, col=1)
    fig.update_yaxes(title_text="hit rate", range=[0, 1.05], row=3, col=1)
    fig.update_xaxes(title_text="step", row=3, col=1)
    return fig
