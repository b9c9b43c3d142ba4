"""Figures for Medusa heads: the architecture, per-head accuracy against the paper, loss curves, memorisation
(training vs held-out accuracy per epoch), Medusa-2 drift.

Data in (configs, `TrainLog`, `HeadAccuracy`, `Medusa2Log`), `plotly.graph_objects.Figure` out; nothing
here runs a model. `update_loss_figure` is the live-plot callback (works on a `go.FigureWidget`);
`specdec_lab.lab.medusa.MedusaTrainingDashboard` wires it to a few sliders and a button.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..medusa.heads import MedusaConfig
from ..train.medusa1 import HeadAccuracy, TrainLog
from ..train.medusa2 import Medusa2Log
from .figures import TEMPLATE

__all__ = [
    "PAPER_VICUNA_7B_TOP1",
    "PAPER_VICUNA_7B_SOURCE",
    "architecture_figure",
    "head_accuracy_figure",
    "loss_figure",
    "update_loss_figure",
    "ablation_figure",
    "memorisation_figure",
    "medusa2_figure",
]

# The Medusa paper's Vicuna-7B Medusa-1 heads, top-1 accuracy of heads 1-4 (Cai et al. 2024, arXiv 2401.10774).
# Which table or figure of the paper they were read from was not recorded when they were added, and could not be
# checked since (data/literature/published.csv holds the paper's speed-ups, read from its §3.1 text, not these);
# PAPER_VICUNA_7B_SOURCE says so wherever they are shown.
PAPER_VICUNA_7B_TOP1 = (0.56, 0.32, 0.20, 0.15)
PAPER_VICUNA_7B_SOURCE = (
    "Medusa paper (Cai et al. 2024, [arXiv 2401.10774](https://arxiv.org/abs/2401.10774)); the table or figure "
    "these values come from could not be checked"
)
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _box(fig: go.Figure, x: float, y: float, text: str, color: str, w: float = 1.5, h: float = 0.5) -> None:
    fig.add_shape(
        type="rect",
        x0=x - w / 2,
        x1=x + w / 2,
        y0=y - h / 2,
        y1=y + h / 2,
        fillcolor=color,
        line={"color": "#444", "width": 1},
        layer="below",
    )
    fig.add_annotation(x=x, y=y, text=text, showarrow=False, font={"size": 11})


def _arrow(fig: go.Figure, x0: float, y0: float, x1: float, y1: float) -> None:
    fig.add_annotation(
        x=x1,
        y=y1,
        ax=x0,
        ay=y0,
        xref="x",
        yref="y",
        axref="x",
        ayref="y",
        text="",
        showarrow=True,
        arrowhead=2,
        arrowsize=1,
        arrowwidth=1.2,
        arrowcolor="#555",
    )


def architecture_figure(config: MedusaConfig, backbone_layers: int | None = None) -> go.Figure:
    """Block diagram: backbone -> h_t -> base LM head (x_{t+1}) and K residual heads (x_{t+k+1})."""
    k_heads = config.num_heads
    fig = go.Figure()
    layers = f"{backbone_layers} layers" if backbone_layers else "decoder"
    _box(fig, 0, 0, f"<b>target backbone</b><br>{layers} (frozen)", "#e8e8e8", w=1.8, h=0.9)
    _box(fig, 2.2, 0, f"h<sub>t</sub> ({config.hidden_size})", "#fff5cc", w=1.1)
    _arrow(fig, 0.9, 0, 1.65, 0)
    rows = [1.2 * (i - k_heads / 2) for i in range(k_heads + 1)]  # row 0: the base head
    shared_y = sum(rows[1:]) / k_heads
    for i, y in enumerate(rows):
        target = "x<sub>t+1</sub>" if i == 0 else f"x<sub>t+{i + 1}</sub>"
        if i == 0:
            _box(fig, 6.2, y, f"<b>LM head</b> = head 0 ({config.vocab_size} x {config.hidden_size})", "#d9ead3", w=2.4)
            fig.add_shape(type="line", x0=2.2, y0=-0.25, x1=2.2, y1=y, line={"color": "#555", "width": 1.2})
            _arrow(fig, 2.2, y, 5.0, y)  # an elbow under the heads: h_t -> LM head
        else:
            _arrow(fig, 2.75, 0, 3.15, y)
            blocks = f" x{config.num_layers}" if config.num_layers > 1 else ""
            _box(fig, 4.3, y, f"<b>head {i}</b>: h + SiLU(W1 h + b){blocks}", "#cfe2f3", w=2.3)
            if config.shared_lm_head:
                _arrow(fig, 5.45, y, 6.5, shared_y)
            else:
                _box(
                    fig,
                    6.8,
                    y,
                    f"W2<sup>({i})</sup> ({config.vocab_size} x {config.hidden_size})",
                    "#f4cccc",
                    w=2.0,
                )
                _arrow(fig, 5.45, y, 5.8, y)
        _box(fig, 9.2, y, f"softmax -> {target}", "#ffffff", w=1.6)
        if i == 0 or not config.shared_lm_head:
            _arrow(fig, 7.8 if i else 7.4, y, 8.4, y)
    if config.shared_lm_head:
        text = "<b>W2 = LM head</b><br>shared, frozen<br>one matmul for all K"
        _box(fig, 7.3, shared_y, text, "#d9ead3", w=1.6, h=1.0)
        for y in rows[1:]:
            _arrow(fig, 8.1, shared_y, 8.4, y)
    variant = "W2 shared with the LM head" if config.shared_lm_head else "a separate W2 per head"
    fig.update_layout(
        template=TEMPLATE,
        title=f"Medusa heads: K = {k_heads} on the last hidden state, {variant}",
        xaxis={"visible": False, "range": [-1.2, 10.2]},
        yaxis={"visible": False, "range": [min(rows) - 0.8, max(rows) + 0.8]},
        height=160 + 90 * k_heads,
        width=940,  # fits JupyterLab's output area with the file browser open (~950 px)
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        showlegend=False,
    )
    return fig


def head_accuracy_figure(
    results: Mapping[str, HeadAccuracy],
    paper: tuple[float, ...] | None = PAPER_VICUNA_7B_TOP1,
    title: str = "",
) -> go.Figure:
    """Top-1 (solid) and top-5 (dotted) accuracy against head index, per result, plus the paper's top-1."""
    fig = go.Figure()
    for i, (name, acc) in enumerate(results.items()):
        heads = list(range(1, len(acc.top1) + 1))
        color = COLORS[i % len(COLORS)]
        fig.add_trace(
            go.Scatter(
                x=heads,
                y=acc.top1,
                mode="lines+markers",
                name=f"{name}: top-1",
                line={"color": color},
                hovertemplate="head %{x}: top-1 %{y:.3f}<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=heads,
                y=acc.top5,
                mode="lines+markers",
                name=f"{name}: top-5",
                line={"color": color, "dash": "dot"},
                hovertemplate="head %{x}: top-5 %{y:.3f}<extra></extra>",
            )
        )
    if paper:
        fig.add_trace(
            go.Scatter(
                x=list(range(1, len(paper) + 1)),
                y=list(paper),
                mode="lines+markers",
                name="Medusa paper (Cai et al. 2024), Vicuna-7B: top-1 (source table unchecked)",
                line={"color": "#444", "dash": "dash"},
                marker={"symbol": "square"},
            )
        )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "Medusa head accuracy on held-out self-distilled text: head k predicts x_{t+k+1}",
        xaxis={"title": "head k", "dtick": 1},
        yaxis={"title": "accuracy", "range": [0, 1]},
        height=420,
        width=820,
        legend={"x": 1.02, "y": 1},
    )
    return fig


def loss_figure(log: TrainLog | None = None, num_heads: int = 4, title: str = "Medusa-1 training") -> go.Figure:
    """Per-head CE and the weighted total against the step (empty traces when `log` is None)."""
    fig = go.Figure()
    for k in range(num_heads):
        fig.add_trace(go.Scatter(x=[], y=[], mode="lines", name=f"head {k + 1} CE", line={"color": COLORS[k % 8]}))
    fig.add_trace(go.Scatter(x=[], y=[], mode="lines", name="weighted total", line={"color": "#444", "dash": "dot"}))
    fig.update_layout(
        template=TEMPLATE, title=title, xaxis={"title": "step"}, yaxis={"title": "loss (nats)"}, height=400, width=820
    )
    if log is not None:
        update_loss_figure(fig, log)
    return fig


def update_loss_figure(fig, log: TrainLog) -> bool:
    """Refresh `loss_figure`'s traces from `log` (the live-plot callback; returns False = keep training)."""
    num_heads = len(fig.data) - 1
    with fig.batch_update() if isinstance(fig, go.FigureWidget) else nullcontext():
        for k in range(num_heads):
            fig.data[k].x = log.step
            fig.data[k].y = [row[k] for row in log.head_loss]
        fig.data[num_heads].x = log.step
        fig.data[num_heads].y = log.loss
    return False


def ablation_figure(results: Mapping[str, HeadAccuracy], title: str = "") -> go.Figure:
    """Grouped bars: held-out top-1 per head for each setting (e.g. each lambda_k schedule)."""
    fig = go.Figure()
    top = max((max(acc.top1) for acc in results.values()), default=0.0)
    for i, (name, acc) in enumerate(results.items()):
        heads = [f"head {k}" for k in range(1, len(acc.top1) + 1)]
        fig.add_trace(
            go.Bar(
                x=heads,
                y=acc.top1,
                name=name,
                marker_color=COLORS[i % 8],
                text=[f"{v:.3f}" for v in acc.top1],
                textposition="outside",
            )
        )
    fig.update_layout(
        template=TEMPLATE,
        title=title or "loss weights lambda_k: held-out top-1 per head",
        barmode="group",
        xaxis={"title": "Medusa head k (drafts the token k + 1 places ahead)"},
        yaxis={"title": "top-1 accuracy", "range": [0, min(1.0, 1.3 * top + 0.05)]},  # room for the labels
        height=400,
        width=820,
    )
    return fig


def memorisation_figure(epochs: list[dict], metric: str = "top1", title: str = "") -> go.Figure:
    """Accuracy per epoch on the training rows (solid) and on held-out rows (dashed), one colour per head.

    epochs: `TrainLog.epochs` (or the "epochs" of `train.medusa_memorisation`'s record): {"epoch", "train",
    "heldout"}, each side a `HeadAccuracy.as_dict()`. The gap between a head's two lines is what it memorised.
    """
    fig = go.Figure()
    x = [e["epoch"] for e in epochs]
    num_heads = len(epochs[0]["train"][metric]) if epochs else 0
    for k in range(num_heads):
        color = COLORS[k % len(COLORS)]
        for side, dash, label in (("train", "solid", "training rows"), ("heldout", "dash", "held-out")):
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=[e[side][metric][k] for e in epochs],
                    mode="lines+markers",
                    name=f"head {k + 1}: {label}",
                    line={"color": color, "dash": dash},
                    legendgroup=f"head {k + 1}",
                    hovertemplate=f"head {k + 1}, {label}, epoch %{{x}}: %{{y:.3f}}<extra></extra>",
                )
            )
    name = {"top1": "top-1", "top5": "top-5"}.get(metric, metric)
    fig.update_layout(
        title=title or f"Medusa-1 heads: {name} on training rows (solid) vs held-out rows (dashed), per epoch",
        xaxis={"title": "epoch (0: untrained, each head = the LM head)", "dtick": 1},
        yaxis={"title": f"{name} accuracy", "rangemode": "tozero"},
        template=TEMPLATE,
        height=440,
        width=860,
    )
    return fig


def medusa2_figure(logs: Mapping[str, Medusa2Log]) -> go.Figure:
    """Left: Medusa loss (sum over heads) per step; right: backbone drift KL(p_orig || p) when measured."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Medusa heads: sum of CE_k", "backbone drift"),
        horizontal_spacing=0.12,
    )
    for i, (name, log) in enumerate(logs.items()):
        color = COLORS[i % 8]
        fig.add_trace(
            go.Scatter(
                x=log.step,
                y=[sum(r) for r in log.head_loss],
                mode="lines",
                name=name,
                line={"color": color},
                legendgroup=name,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[d["step"] for d in log.drift],
                y=[d["kl"] for d in log.drift],
                mode="lines+markers",
                name=f"{name}: KL",
                line={"color": color},
                legendgroup=name,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
        warm = log.phase.count("warmup")
        if warm and i == 0:
            for col in (1, 2):
                fig.add_vline(x=warm, line={"dash": "dot", "color": "#888"}, row=1, col=col)
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="nats", row=1, col=1)
    fig.update_yaxes(title_text="mean KL(p_orig || p) per position, nats", row=1, col=2)
    fig.update_layout(
        template=TEMPLATE,
        title="Medusa-2 on a tiny model: warmup (heads only) | joint phase",
        height=440,
        width=940,
        legend={"orientation": "h", "y": -0.2},  # under the panels: both keep their width
    )
    return fig
