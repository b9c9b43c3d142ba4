"""Tables and figures of bench results (notebook 09): speedup per method and category, replay projections.

Data in (a bench results dict, `replay.replay_bench` tables), pandas frames and plotly figures out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from ..bench.report import categories

__all__ = ["speedup_frame", "stat_frame", "category_figure", "replay_figure", "ranking_frame", "ranking_figure"]

ANCHOR_PREFIX = "hf_"


def stat_frame(results: dict, key: str, methods: Sequence[str] | None = None) -> pd.DataFrame:
    """rows = methods, columns = each category then "overall": the summary's `key` (e.g. "speedup")."""
    summary = results["summary"]
    cats = categories(results["rows"])
    methods = [m for m in (methods or list(summary)) if m in summary]
    data = {m: [summary[m]["by_category"].get(c, {}).get(key) for c in cats] + [summary[m][key]] for m in methods}
    return pd.DataFrame.from_dict(data, orient="index", columns=[*cats, "overall"], dtype=float)


def speedup_frame(results: dict, methods: Sequence[str] | None = None) -> pd.DataFrame:
    """Speedup over autoregressive (ratio of Σ tokens / Σ seconds) per method and category."""
    return stat_frame(results, "speedup", methods)


def category_figure(frames: Mapping[str, pd.DataFrame], title: str) -> go.Figure:
    """One bar group per category, one bar per method, from several speedup frames ({source: frame}); anchors
    (transformers' generate, hf_*) hatched. A dotted line at 1 = autoregressive."""
    fig = go.Figure()
    for source, frame in frames.items():
        for method, row in frame.iterrows():
            if method == "autoregressive":
                continue
            anchor = str(method).startswith(ANCHOR_PREFIX)
            fig.add_bar(
                name=f"{method} ({source})" if len(frames) > 1 else str(method),
                x=list(frame.columns),
                y=row.values,
                marker_pattern_shape="/" if anchor else "",
                hovertemplate=f"{method}<br>%{{x}}: %{{y:.2f}}x<extra>{source}</extra>",
            )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="autoregressive", annotation_position="top left")
    fig.update_layout(barmode="group", title=title, yaxis_title="speedup over autoregressive", height=480,
                      width=1000, legend_title="method")  # fmt: skip
    return fig


def replay_figure(tables: Mapping[str, Sequence[dict]], band: float = 0.05) -> go.Figure:
    """Predicted vs measured speedup per method, one marker set per curve ({curve name: replay table});
    the diagonal and a ±band corridor."""
    fig = go.Figure()
    top = max(max(r["measured_speedup"], r["predicted_speedup"]) for t in tables.values() for r in t) * 1.1
    xs = [0, top]
    fig.add_scatter(x=xs, y=[x * (1 + band) for x in xs], mode="lines", line=dict(width=0), showlegend=False,
                    hoverinfo="skip")  # fmt: skip
    fig.add_scatter(x=xs, y=[x * (1 - band) for x in xs], mode="lines", line=dict(width=0), fill="tonexty",
                    fillcolor="rgba(0,128,0,0.12)", name=f"±{band:.0%}", hoverinfo="skip")  # fmt: skip
    fig.add_scatter(x=xs, y=xs, mode="lines", line=dict(dash="dot", color="gray"), name="predicted = measured")
    for name, table in tables.items():
        fig.add_scatter(
            x=[r["measured_speedup"] for r in table],
            y=[r["predicted_speedup"] for r in table],
            mode="markers+text",
            text=[r["method"] for r in table],
            textposition="top center",
            name=name,
            marker=dict(size=10),
        )
    fig.update_layout(title="Replay: predicted vs measured speedup over autoregressive",
                      xaxis_title="measured speedup", yaxis_title="predicted speedup (replay)",
                      xaxis_range=[0, top], yaxis_range=[0, top], height=520, width=720)  # fmt: skip
    return fig


def ranking_frame(
    measured: Mapping[str, float], projected: Mapping[str, Mapping[str, float]], baseline: str = "autoregressive"
) -> pd.DataFrame:
    """Methods with their measured speedup and rank here, and each projection's speedup and rank (1 = fastest;
    the baseline, 1.00 everywhere, keeps its row but is not ranked)."""
    frame = pd.DataFrame({"measured here": pd.Series(measured)})
    for name, speedups in projected.items():
        frame[name] = pd.Series(speedups)
    ranks = frame.drop(index=baseline, errors="ignore").rank(ascending=False, method="min").astype("Int64")
    for col in list(frame.columns):
        frame[f"rank: {col}"] = ranks[col]
    return frame.sort_values("measured here", ascending=False)


def ranking_figure(frame: pd.DataFrame, title: str) -> go.Figure:
    """Horizontal bars: the measured speedup and each projection's, per method, best (here) on top."""
    fig = go.Figure()
    cols = [c for c in frame.columns if not c.startswith("rank: ")]
    order = list(frame.index)[::-1]
    for col in cols:
        fig.add_bar(name=col, y=order, x=frame.loc[order, col], orientation="h",
                    hovertemplate=f"%{{y}}: %{{x:.2f}}x<extra>{col}</extra>")  # fmt: skip
    fig.add_vline(x=1.0, line_dash="dot")
    fig.update_layout(barmode="group", title=title, xaxis_title="speedup over autoregressive", height=460,
                      width=900)  # fmt: skip
    return fig
