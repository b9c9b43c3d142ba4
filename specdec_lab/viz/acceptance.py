"""Figures of the acceptance math and of measured acceptance (notebooks 01 and 02).

Notation: p = target, q = draft, α = Σ min(p, q), k = draft length, c = draft step / target step.
Data in, `plotly.graph_objects.Figure` out; `acceptance_by_position` turns traced generations into
per-position counts. `speedup_explorer` is the slider callback of notebook 01 (a plain function).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from ..accept.tree_rules import residual
from ..cost.theory import (
    accepted_length_pmf,
    expected_speedup,
    expected_tokens_per_step,
    optimal_k,
    simulate_tokens_per_step,
)
from .figures import TEMPLATE

__all__ = [
    "speedup_surface_figure",
    "speedup_curves_figure",
    "optimal_k_figure",
    "monte_carlo_figure",
    "speedup_explorer",
    "acceptance_by_position",
    "position_figure",
    "histogram_figure",
    "residual_figure",
    "vocabulary_labels",
    "alpha_temperature_figure",
]

COLORS = qualitative.Plotly  # one colour per curve, shared by that curve's markers (legend colour = mark colour)


def speedup_surface_figure(c: float = 0.05, k_max: int = 12, points: int = 50) -> go.Figure:
    """3-D surface of the expected speedup over (α, k) at cost ratio c, with the optimal-k ridge."""
    alphas = np.linspace(0.0, 0.98, points)
    ks = np.arange(0, k_max + 1)
    z = np.array([[expected_speedup(a, int(k), c) for a in alphas] for k in ks])  # (K, A)
    best = [optimal_k(a, c, k_max) for a in alphas]
    fig = go.Figure(go.Surface(x=alphas, y=ks, z=z, colorscale="Viridis", colorbar={"title": "speedup"}))
    fig.add_trace(
        go.Scatter3d(
            x=alphas, y=best, z=[expected_speedup(a, k, c) for a, k in zip(alphas, best, strict=True)],
            mode="lines", line={"color": "red", "width": 6}, name="optimal k",
        )
    )  # fmt: skip
    capped = [(a, k) for a, k in zip(alphas, best, strict=True) if k == k_max]  # the search's limit, not an optimum
    if capped:
        fig.add_trace(
            go.Scatter3d(
                x=[a for a, _ in capped], y=[k for _, k in capped], z=[expected_speedup(a, k, c) for a, k in capped],
                mode="markers", marker={"color": "black", "size": 4, "symbol": "diamond"},
                name=f"at the search cap: k* ≥ {k_max}",
            )
        )  # fmt: skip
    # The camera looks from the (α = 0, k = 0) corner, so the peak (high α, long drafts) stands at the back,
    # in full view, and the fixed axis ranges keep every corner of the surface inside the scene's box.
    fig.update_layout(
        template=TEMPLATE,
        title=f"Expected speedup (1 − α^(k+1)) / ((1 − α)(kc + 1)), c = {c}",
        scene={
            "xaxis": {"title": {"text": "α"}, "range": [0.0, 1.0]},
            "yaxis": {"title": {"text": "k"}, "range": [0, k_max]},
            "zaxis": {"title": {"text": "speedup"}, "range": [0.0, float(z.max()) * 1.05]},
            "camera": {"eye": {"x": -1.55, "y": -1.55, "z": 0.95}, "center": {"x": 0, "y": 0, "z": -0.1}},
            "aspectmode": "cube",
        },
        width=820,
        height=620,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        legend={"x": 0.0, "y": 1.0},
    )
    return fig


def speedup_curves_figure(alphas: Sequence[float] = (0.5, 0.7, 0.8, 0.9), c: float = 0.05, k_max: int = 16):
    """Speedup vs k for several α at cost ratio c; the optimum of each curve is marked."""
    ks = np.arange(0, k_max + 1)
    fig = go.Figure()
    for i, a in enumerate(alphas):
        color = COLORS[i % len(COLORS)]
        ys = [expected_speedup(a, int(k), c) for k in ks]
        fig.add_trace(go.Scatter(x=ks, y=ys, mode="lines+markers", name=f"α = {a:g}", line={"color": color},
                                 legendgroup=f"{a:g}"))  # fmt: skip
        k_best = optimal_k(a, c, k_max)
        fig.add_trace(
            go.Scatter(x=[k_best], y=[ys[k_best]], mode="markers", showlegend=False, legendgroup=f"{a:g}",
                       marker={"size": 14, "symbol": "star", "color": color}, hovertext=f"α = {a:g}: k* = {k_best}")
        )  # fmt: skip
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="autoregressive")
    fig.update_layout(
        title=f"Speedup vs draft length (c = {c}); ★ = optimal k",
        xaxis_title="k",
        yaxis_title="speedup",
        template=TEMPLATE,
    )
    return fig


def optimal_k_figure(k_max: int = 16, points: int = 40) -> go.Figure:
    """Heatmap of the optimal draft length k* over (α, c); 0 = don't speculate."""
    alphas = np.linspace(0.0, 0.98, points)
    cs = np.linspace(0.0, 0.5, points)
    z = np.array([[optimal_k(a, c, k_max) for a in alphas] for c in cs])
    ticks = sorted({0, k_max // 4, k_max // 2, 3 * k_max // 4, k_max})
    colorbar = {  # the top value is the search's cap: there the optimum lies at k_max or beyond
        "title": "k*",
        "tickvals": ticks,
        "ticktext": [f"≥ {t} (the search cap)" if t == k_max else str(t) for t in ticks],
    }
    fig = go.Figure(go.Heatmap(x=alphas, y=cs, z=z, colorscale="Blues", colorbar=colorbar))
    fig.update_layout(
        title=f"Optimal draft length k*(α, c), searched up to k = {k_max}",
        xaxis_title="α",
        yaxis_title="c = T_draft / T_target",
        template=TEMPLATE,
    )
    return fig


def monte_carlo_figure(ks: Sequence[int] = (1, 3, 5, 8), steps: int = 20_000, seed: int = 0) -> go.Figure:
    """Closed-form E[tokens per step] (lines) against Monte Carlo with i.i.d. acceptances (points ± 2 SE)."""
    alphas = np.linspace(0.0, 0.95, 11)
    fig = go.Figure()
    grid = np.linspace(0, 0.95, 96)
    for i, k in enumerate(ks):
        color = COLORS[i % len(COLORS)]  # a formula line and its simulated points share a colour
        ys = [expected_tokens_per_step(a, k) for a in grid]
        fig.add_trace(go.Scatter(x=grid, y=ys, mode="lines", name=f"k = {k} (formula)", line={"color": color},
                                 legendgroup=str(k)))  # fmt: skip
        sims = [simulate_tokens_per_step(a, k, steps, seed) for a in alphas]
        fig.add_trace(
            go.Scatter(
                x=alphas, y=[s.mean() for s in sims], mode="markers", name=f"k = {k} (simulated)",
                marker={"color": color}, legendgroup=str(k),
                error_y={"type": "data", "array": [2 * s.std() / np.sqrt(len(s)) for s in sims]},
            )
        )  # fmt: skip
    fig.update_layout(template=TEMPLATE, title="Tokens per target forward: formula vs simulation", xaxis_title="α",
                      yaxis_title="E[L] (tokens per target forward)")  # fmt: skip
    return fig


def speedup_explorer(alpha: float = 0.7, k: int = 4, c: float = 0.05, k_max: int = 16) -> tuple[go.Figure, dict]:
    """Slider callback: the distribution of accepted drafts at (α, k) and the speedup numbers."""
    pmf = accepted_length_pmf(alpha, k)
    fig = go.Figure(go.Bar(x=np.arange(k + 1) + 1, y=pmf, name="P(tokens emitted)"))
    fig.update_layout(template=TEMPLATE, 
        title=f"Tokens per step at α = {alpha:.2f}, k = {k}", xaxis_title="tokens emitted (bonus included)",
        yaxis_title="probability", height=320,
    )  # fmt: skip
    numbers = {
        "E[tokens per step]": round(expected_tokens_per_step(alpha, k), 3),
        "speedup": round(expected_speedup(alpha, k, c), 3),
        "optimal k": optimal_k(alpha, c, k_max),
        "speedup at optimal k": round(expected_speedup(alpha, optimal_k(alpha, c, k_max), c), 3),
    }
    return fig, numbers


def acceptance_by_position(results, k_max: int | None = None) -> dict[str, np.ndarray]:
    """Per draft position i = 1..k_max over traced generations: how often it was proposed, reached
    (all earlier drafts accepted), accepted; the conditional rate accepted/reached estimates α at i.
    """
    steps = [s for r in results for s in r.steps if s.proposed > 0]
    k_max = k_max or max((s.proposed for s in steps), default=0)
    proposed, reached, accepted = np.zeros(k_max, int), np.zeros(k_max, int), np.zeros(k_max, int)
    for s in steps:
        for i in range(min(s.proposed, k_max)):
            proposed[i] += 1
            if i <= s.accepted:
                reached[i] += 1
                accepted[i] += i < s.accepted
    rate = np.divide(accepted, reached, out=np.full(k_max, np.nan), where=reached > 0)
    pos = np.arange(1, k_max + 1)
    return {"position": pos, "proposed": proposed, "reached": reached, "accepted": accepted, "rate": rate}


def position_figure(stats: dict[str, np.ndarray], alpha: float) -> go.Figure:
    """Measured acceptance rate per draft position (± 2 SE) against the i.i.d. theory's constant α."""
    n, r = stats["reached"], stats["rate"]
    se = np.sqrt(np.clip(r * (1 - r), 0, None) / np.maximum(n, 1))
    fig = go.Figure(
        go.Scatter(x=stats["position"], y=r, mode="markers+lines", name="measured P(accept i | reached i), ±2 SE",
                   error_y={"type": "data", "array": 2 * se})
    )  # fmt: skip
    fig.add_hline(y=alpha, line_dash="dash", annotation_text=f"α (mean) = {alpha:.3f}")
    fig.update_layout(template=TEMPLATE, title="Acceptance rate by draft position", xaxis_title="draft position i",
                      yaxis_title="acceptance rate", yaxis_range=[0, 1])  # fmt: skip
    return fig


def histogram_figure(
    counts: np.ndarray, probs: np.ndarray, labels: Sequence[str] | Mapping[int, str], top: int = 20
) -> go.Figure:
    """Empirical frequencies of emitted tokens against the exact target probabilities (top tokens by p).

    labels: per token id (a sequence over the vocabulary, or a mapping holding at least the `top` ids).
    """
    order = np.argsort(-np.asarray(probs))[:top]
    freq = np.asarray(counts, float) / max(int(np.sum(counts)), 1)
    se = np.sqrt(probs[order] * (1 - probs[order]) / max(int(np.sum(counts)), 1))
    fig = go.Figure()
    fig.add_trace(go.Bar(x=[labels[i] for i in order], y=probs[order], name="target p (exact)"))
    fig.add_trace(go.Bar(x=[labels[i] for i in order], y=freq[order], name="speculative sampling (empirical)",
                         error_y={"type": "data", "array": 2 * se}))  # fmt: skip
    fig.update_layout(barmode="group", title="Next-token distribution: speculative sampling vs the target",
                      xaxis_title="token (▁ = space, ↵ = newline)", yaxis_title="probability",
                      template=TEMPLATE)  # fmt: skip
    return fig


def residual_figure(
    p: np.ndarray, q: np.ndarray, labels: Sequence[str] | Mapping[int, str], top: int = 10
) -> go.Figure:
    """One position of a real decode: the target's p and the draft's q (top panel), and the residual
    norm(max(p − q, 0)) a rejection resamples from (bottom panel; `accept.tree_rules.residual`, Leviathan et al.
    2023, Chen et al. 2023), over the `top` tokens by max(p, q), most likely under p first. The residual lives
    exactly where the target wants more than the draft offers; its mass before normalising is 1 − α.

    p, q:   (V,) distributions over the same vocabulary (after the same temperature / top-p)
    labels: per token id (a sequence over the vocabulary, or a mapping holding at least the shown ids)
    """
    p, q = np.asarray(p, float), np.asarray(q, float)
    shown = np.argsort(-np.maximum(p, q), kind="stable")[:top]
    shown = shown[np.argsort(-p[shown], kind="stable")]
    names = [labels[int(i)] for i in shown]
    r = residual(torch.from_numpy(p), torch.from_numpy(q), 0).numpy()  # the rules' own residual (x unused given q)
    alpha = float(np.minimum(p, q).sum())
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(
            f"target p and draft q; they overlap by α = Σ min(p, q) = {alpha:.2f}",
            "residual norm(max(p − q, 0)): where a rejected draft is replaced from",
        ),
    )
    for values, name, color in ((p, "target p", COLORS[0]), (q, "draft q", COLORS[1])):
        fig.add_trace(
            go.Bar(x=names, y=values[shown], name=name, marker={"color": color},
                   hovertemplate=f"%{{x}}: {name.split()[-1]} = %{{y:.3f}}<extra></extra>"),
            row=1, col=1,
        )  # fmt: skip
    fig.add_trace(
        go.Bar(x=names, y=r[shown], name="residual norm(max(p − q, 0))", marker={"color": COLORS[2]},
               hovertemplate="%{x}: residual = %{y:.3f}<extra></extra>"),
        row=2, col=1,
    )  # fmt: skip
    fig.update_yaxes(title_text="probability", rangemode="tozero")
    fig.update_xaxes(title_text="token (▁ = space, ↵ = newline)", row=2, col=1)
    fig.update_xaxes(title_text="token (as below)", showticklabels=True, row=1, col=1)  # the top panel's axis too
    fig.update_layout(
        barmode="group",
        title="Speculative sampling at one position: p, q and the residual",
        template=TEMPLATE,
        width=900,
        height=560,
        legend={"orientation": "h", "y": -0.28},
        margin={"t": 90, "b": 120},
    )
    return fig


def vocabulary_labels(tokenizer, ids: Iterable[int]) -> dict[int, str]:
    """{id: label} for single vocabulary entries (a listing of the vocabulary, not a text): the token's text
    with whitespace shown (`text.visible`: ▁ space, ↵ newline, ⇥ tab) and its id. A byte token, which holds
    only part of a UTF-8 character and decodes alone to "�", is labelled as such, by its id."""
    from ..text import visible

    out = {}
    for i in (int(t) for t in ids):
        piece = tokenizer.decode([i])
        out[i] = f"(byte of a character) {i}" if "\ufffd" in piece else f"{visible(piece, partial=False)} ({i})"
    return out


def alpha_temperature_figure(summary: Sequence[dict]) -> go.Figure:
    """α of a draft against the sampling temperature (`alpha_temperature.summarise` rows): the teacher-forced
    1 − TV (± 2 SE across prompts) and the realised accepted / reached (± 2 binomial SE)."""
    t = [r["temperature"] for r in summary]
    tv = [r["alpha_tv"] for r in summary]
    tv_se = [2 * (r["alpha_tv_se"] or 0.0) for r in summary]
    run = [r["alpha_run"] for r in summary]
    run_se = [
        2 * np.sqrt(r["alpha_run"] * (1 - r["alpha_run"]) / r["reached"]) if r["reached"] else 0.0 for r in summary
    ]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=t, y=tv, mode="lines+markers", name="α_TV: mean Σ min(p, q), teacher-forced (± 2 SE over prompts)",
                   error_y={"type": "data", "array": tv_se})
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=t, y=run, mode="markers", marker={"symbol": "diamond", "size": 10},
                   name="α_run: accepted / reached in the runs (± 2 binomial SE)",
                   error_y={"type": "data", "array": run_se})
    )  # fmt: skip
    fig.update_layout(template=TEMPLATE, 
        title="Draft acceptance rate against sampling temperature", xaxis_title="temperature T (0 = greedy)",
        yaxis_title="α", yaxis_range=[0, 1], height=420,
        legend={"x": 0.01, "y": 0.99, "bgcolor": "rgba(255,255,255,0.7)"},
    )  # fmt: skip
    return fig
