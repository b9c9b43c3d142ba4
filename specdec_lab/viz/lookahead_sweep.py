"""Notebook 07: the W x N x G sweep of lookahead decoding, drawn from its table, and priced on other cost curves.

The sweep itself is `python -m specdec_lab.sweep data/sweeps/lookahead_wng.yaml`: notebook 08 once per grid
point (`specdec_lab/sweep/`), each point's record from `lab.experiment.experiment_record`, gathered into
`table.csv` / `table.json` (committed as `data/sweeps/tables/lookahead_wng.csv`). That table is the data
in; nothing here runs a model.

    sweep_frame(rows)                   the finished points, indexed by (W, N, G), columns named for readers
    sweep_figure(frame)                 speed-up, mean accepted and tokens verified per forward against W
    predicted_speedups(frame, curves)   each point priced on other cost curves (e.g. `cost.flat_curve`)
    cost_figure(frame, curves)          the curves, and measured vs predicted speed-up per point
    paper_sizes_figure(results)         a bench results file: tokens per step and speed-up per prompt, the paper's
                                        W = 15, N = 5, G = 15 beside W="auto" (`lab.lookahead.paper_sizes_frame`)

Every figure fits a 950 px output area (JupyterLab in a laptop window with its file browser open), legends
included.
"""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cost.curve import CostCurve
from .figures import TEMPLATE, legend_below

__all__ = ["COLUMNS", "sweep_frame", "sweep_figure", "predicted_speedups", "cost_figure", "paper_sizes_figure"]

# the sweep table's column (a key of the point's record) -> its name in the frame
COLUMNS = {
    "speedup": "speed-up vs autoregressive",
    "tokens_per_s": "tokens/s",
    "baseline_tokens_per_s": "autoregressive tokens/s",
    "mean_accepted": "mean accepted",
    "verified_per_forward": "tokens verified / forward",
    "proposed_per_forward": "n-gram nodes / forward",
    "extra_per_forward": "window cells / forward",
    "identical": "identical to autoregressive",
    "noisy": "timings noisy",
}
AXES = ("W", "N", "G")


# ---- 1. the sweep -------------------------------------------------------------------------------------
def sweep_frame(rows):
    """The sweep's finished points as a DataFrame indexed by (W, N, G), columns renamed by `COLUMNS`.

    rows: the gathered table — `pandas.read_csv(table.csv)`, or table.json's "rows" (a list of dicts). Points
    whose status is not "done" (failed, pending) are left out.
    """
    import pandas as pd

    table = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if "status" in table:
        table = table[table["status"] == "done"]
    missing = [c for c in (*AXES, *COLUMNS) if c not in table]
    if missing:
        raise ValueError(
            f"the sweep table has no column {', '.join(missing)}: not a W x N x G lookahead table, or gathered "
            "before the lab recorded it (run `python -m specdec_lab.sweep data/sweeps/lookahead_wng.yaml` again)"
        )
    frame = table[[*AXES, *COLUMNS]].astype({a: int for a in AXES} | {"identical": bool, "noisy": bool})
    frame = frame.rename(columns=COLUMNS)
    return frame.set_index(list(AXES)).sort_index()


def _series(frame):
    """[(name, W values, row positions)] per (N, G) of a sweep frame."""
    out = []
    for (n, g), part in frame.groupby(level=["N", "G"], sort=True):
        out.append((f"N = {n}, G = {g}", [str(w) for w in part.index.get_level_values("W")], part))
    return out


def _no_window(frame) -> str:
    return " (W = 0: pool verification only, no window)" if 0 in frame.index.get_level_values("W") else ""


def sweep_figure(frame, title: str | None = None) -> go.Figure:
    """Three panels against W, one bar per (N, G): speed-up over autoregressive (measured), mean accepted
    (tokens emitted per forward), tokens verified per forward."""
    panels = (
        ("speed-up vs autoregressive", "speed-up (measured)"),
        ("mean accepted", "mean accepted"),
        ("tokens verified / forward", "tokens verified per forward"),
    )
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels], horizontal_spacing=0.07)
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
               "#17becf")  # fmt: skip
    for k, (name, ws, part) in enumerate(_series(frame)):
        for c, (col, _) in enumerate(panels, start=1):
            fig.add_trace(
                go.Bar(
                    x=ws,
                    y=part[col].tolist(),
                    name=name,
                    legendgroup=name,
                    showlegend=c == 1,
                    marker_color=palette[k % len(palette)],
                    hovertemplate=f"{name}, W=%{{x}}: %{{y:.2f}}<extra>{col}</extra>",
                ),
                row=1,
                col=c,
            )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=1)
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=2)
    fig.update_xaxes(title_text="window width W", type="category")
    units = ("× autoregressive", "mean accepted τ<br>(tokens per forward, bonus incl.)", "tokens verified per forward")
    for c, unit in enumerate(units, start=1):
        fig.update_yaxes(title_text=unit, row=1, col=c)
    fig.update_layout(
        title=title or f"Lookahead decoding sweep{_no_window(frame)}",
        template=TEMPLATE,
        barmode="group",
        width=940,
        height=460,
        margin={"l": 50, "r": 20},
        legend={"orientation": "h", "y": -0.22, "x": 0},
    )
    return fig


# ---- 2. the same sweep on another cost curve ----------------------------------------------------------
def predicted_speedups(frame, curves: Mapping[str, CostCurve]):
    """For each curve, predicted speed-up = mean accepted / (t(n̄) / t(1)), n̄ the measured tokens verified
    per forward (the root included); a copy of `frame` with one column per curve."""
    out = frame.copy()
    for name, curve in curves.items():
        rel = [curve(n) / curve(1) for n in frame["tokens verified / forward"]]
        out[f"predicted ({name})"] = frame["mean accepted"] / rel
        out[f"t(n̄)/t(1) ({name})"] = rel
    return out


def cost_figure(
    frame, curves: Mapping[str, CostCurve], title: str | None = None, measured: str = "measured"
) -> go.Figure:
    """Left: t(n)/t(1) of each curve, the sweep's points at their tokens per forward. Right: per grid point
    the measured speed-up and the predicted one on each curve (`predicted_speedups`). `measured` names the
    measured bars (the sweep file's machine, which need not be the one whose curve is drawn)."""
    pred = predicted_speedups(frame, curves)
    fig = make_subplots(  # two rows: the bar groups (one per grid point) get the whole width
        rows=2,
        cols=1,
        row_heights=[0.38, 0.62],
        vertical_spacing=0.15,
        subplot_titles=("relative cost of a forward t(n)/t(1)", "speed-up: measured vs predicted"),
    )
    palette = ("#d62728", "#1f77b4", "#9467bd", "#8c564b")
    top = max(max(c.sizes) for c in curves.values())
    ns = sorted({1, top, *(n for c in curves.values() for n in c.sizes)})
    labels = [f"W={w} N={n} G={g}" for w, n, g in frame.index]
    fig.add_trace(
        go.Bar(x=labels, y=frame["speed-up vs autoregressive"], name=measured, marker_color="#7f7f7f"), row=2, col=1
    )
    for k, (name, curve) in enumerate(curves.items()):
        color = palette[k % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=ns,
                y=[curve(n) / curve(1) for n in ns],
                mode="lines",
                name=f"t(n)/t(1): {name}",
                line={"color": color},
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=frame["tokens verified / forward"],
                y=pred[f"t(n̄)/t(1) ({name})"],
                mode="markers",
                marker={"color": color, "size": 9},
                text=labels,
                name=f"grid points on {name}",
                showlegend=False,
                hovertemplate="%{text}: n̄ = %{x:.1f}, ×%{y:.2f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(x=labels, y=pred[f"predicted ({name})"], name=f"predicted on {name}", marker_color=color),
            row=2,
            col=1,
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=2, col=1)
    fig.update_xaxes(title_text="tokens in one forward n", row=1, col=1)
    fig.update_xaxes(title_text="grid point (W, N, G)", tickangle=-60, tickfont={"size": 9}, row=2, col=1)
    fig.update_yaxes(title_text="× t(1)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="speed-up", rangemode="tozero", row=2, col=1)
    fig.update_layout(
        title=title or "Where a forward of n tokens costs what one costs, the same tokens per step pay",
        template=TEMPLATE,
        barmode="group",
        width=940,
        height=800,
        margin={"l": 60, "r": 20},
        legend=legend_below(),
    )
    return fig


# ---- 3. the paper's sizes beside this machine's, from a bench results file -----------------------------
def paper_sizes_figure(results: dict, title: str | None = None) -> go.Figure:
    """Per prompt (x: its category), one bar per lookahead method of a bench results file: tokens per step
    (mean accepted, bonus included; left) and speed-up over autoregressive on that prompt (right). The title names
    the CPU the bench ran on (its `machine` record), which need not be the one drawing the figure."""
    rows = results["rows"]
    base = {r["question_id"]: float(r["tokens_per_s"]) for r in rows if r["method"] == "autoregressive"}
    prompts = list(dict.fromkeys((r["question_id"], r["category"]) for r in rows))
    labels = [f"{cat} ({qid})" for qid, cat in prompts]
    methods = [m for m in results["methods"] if m.startswith("lookahead")]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("tokens per step", "speed-up vs autoregressive"),
                        horizontal_spacing=0.1)  # fmt: skip
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for k, method in enumerate(methods):
        by_prompt = {r["question_id"]: r for r in rows if r["method"] == method}
        color = palette[k % len(palette)]
        per_step = [float(by_prompt[q]["mean_accepted"]) if q in by_prompt else None for q, _ in prompts]
        speedup = [float(by_prompt[q]["tokens_per_s"]) / base[q] if q in by_prompt and q in base else None
                   for q, _ in prompts]  # fmt: skip
        for col, ys in ((1, per_step), (2, speedup)):
            fig.add_trace(
                go.Bar(x=labels, y=ys, name=method, legendgroup=method, showlegend=col == 1, marker_color=color,
                       hovertemplate=f"{method}, %{{x}}: %{{y:.2f}}<extra></extra>"),
                row=1, col=col,
            )  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=2)
    fig.update_xaxes(tickangle=-35, title_text="prompt: category (question id)")
    fig.update_yaxes(title_text="mean accepted τ<br>(tokens per forward, bonus incl.)", row=1, col=1)
    fig.update_yaxes(title_text="× autoregressive", row=1, col=2)
    where = (results.get("machine") or {}).get("cpu") or "a CPU"  # the bench's machine, not the one drawing it
    fig.update_layout(
        title=title or f"Lookahead on {where}: the paper's sizes beside the sizes it chooses",
        template=TEMPLATE,
        barmode="group",
        width=900,
        height=440,
        legend=legend_below(),
    )
    return fig
