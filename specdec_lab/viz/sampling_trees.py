"""Figures and tables of exact sampling on trees (notebook 11): residuals step by step, emitted joints, accepted
vs T, typical acceptance's speed against its fidelity, every method sampled on the real model.

Data in (what `accept.toy`, `accepted_temperature`, `typical_sweep` and `bench.report.by_sampling` return),
`plotly` figure or pandas frame out. Every figure has a title and its legend below the plot, so no legend covers
a line; lines that can coincide (two exact rules at T = 0) differ by dash and marker, so none hides another.
`residual_figure` is the slider callback of notebook 11 (a plain function of the step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from .figures import TEMPLATE

__all__ = ["residual_figure", "joint_figure", "accepted_temperature_figure", "typical_tradeoff_figure", "sweep_rate",
           "sampled_frame", "short_label", "mean_accepted_se", "rule_gap_text"]  # fmt: skip

WIDTH = 900
LEGEND_BELOW = dict(orientation="h", x=0, xanchor="left", y=-0.2, yanchor="top")  # outside the plot area
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
MARKERS = ("circle", "square-open", "diamond", "x-thin-open", "triangle-up-open", "star", "cross-thin-open")


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
    fig.update_layout(barmode="overlay", width=WIDTH, height=420, title=title, yaxis_title="probability",
                      xaxis_title="token id (the toy vocabulary)", yaxis_range=[0, 1], legend=LEGEND_BELOW,
                      template=TEMPLATE)  # fmt: skip
    return fig


def joint_figure(rows: Sequence[dict], names: Sequence[str], top: int = 12, title: str | None = None) -> go.Figure:
    """P(t_1..t_n) of each named rule beside autoregressive sampling's, the `top` likeliest sequences."""
    rows = list(rows)[:top]
    x = [" ".join(str(t) for t in r["sequence"]) for r in rows]
    fig = go.Figure()
    fig.add_bar(x=x, y=[r["autoregressive"] for r in rows], name="autoregressive (target)", marker_color="#444444")
    for i, name in enumerate(names):
        fig.add_bar(x=x, y=[r[name] for r in rows], name=name, marker_color=qualitative.Plotly[i % 10])
    title = title or f"exact probability of the {len(rows)} likeliest emitted sequences, each rule against p"
    fig.update_layout(template=TEMPLATE, barmode="group", width=WIDTH, height=460, title=title, legend=LEGEND_BELOW,
                      xaxis_title="emitted tokens t₁ t₂", yaxis_title="exact probability")  # fmt: skip
    return fig


def accepted_temperature_figure(rows: Sequence[dict], key: Sequence[str], value: str, title: str,
                                y_title: str | None = None) -> go.Figure:  # fmt: skip
    """One line per distinct `key` tuple (e.g. rule and siblings) of `value` against temperature, each with its
    own colour, dash and marker (two rules can give the same values: neither line hides the other)."""
    series: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        series.setdefault(" · ".join(str(r[k]) for k in key), []).append((r["temperature"], r[value]))
    fig = go.Figure()
    for i, (name, pts) in enumerate(series.items()):
        pts.sort()
        fig.add_scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers", name=name,
                        line=dict(color=qualitative.Plotly[i % 10], dash=DASHES[i % len(DASHES)], width=2),
                        marker=dict(symbol=MARKERS[i % len(MARKERS)], size=9 + 2 * (i % 3)))  # fmt: skip
    fig.update_layout(width=WIDTH, height=460 + 18 * (len(series) // 3), title=title, xaxis_title="temperature T",
                      yaxis_title=y_title or value, legend=LEGEND_BELOW, template=TEMPLATE)  # fmt: skip
    return fig


def sweep_rate(sweep: dict) -> str:
    """The rate a typical sweep's rules compare by: the decode rate (prefill taken out) where the sweep recorded
    it, since sampled texts differ in length; else tokens/s (sweeps recorded before it was)."""
    rows = sweep["rows"]
    return "decode_tokens_per_s" if all("decode_tokens_per_s" in r for r in rows) else "tokens_per_s"


def typical_tradeoff_figure(sweep: dict, title: str | None = None) -> go.Figure:
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
    fig.update_layout(width=WIDTH, height=480, xaxis_title="TV(first emitted token, p)  (exact rule: noise floor)",
                      title=title or "typical acceptance: speed against the distance from the target's distribution",
                      yaxis_title=("decode " if key != "tokens_per_s" else "") + "speed / autoregressive sampling",
                      legend=LEGEND_BELOW, template=TEMPLATE)  # fmt: skip
    return fig


# ---- every method sampled on the real model: a table that fits the output area -------------------------------
DRAW_KEYS = ("temperature=", "top_p=", "top_k=")  # a label's sampling parameters: the same on every row of a table


def short_label(label: str) -> str:
    """A bench label without its sampling parameters ("medusa:accept=typical:temperature=0.7:top_p=0.9" ->
    "medusa:accept=typical"): a table of one draw states them once, in its heading."""
    return ":".join(part for part in label.split(":") if not part.startswith(DRAW_KEYS))


def _ratio(value: float | None) -> str:
    return "–" if value is None or value != value else f"{value:.2f}"


def _with_interval(value: float | None, interval: Sequence[float] | None) -> str:
    if value is None or value != value:
        return "–"
    return f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else f"{value:.2f}"


def sampled_frame(records: Sequence[dict], decode: bool = False) -> pd.DataFrame:
    """`bench.report.by_sampling`'s records as a table narrow enough for a notebook's output area, every number
    rounded (a string, so nothing shows unrounded): rows = methods (`short_label`), columns = the speed-up over
    autoregressive sampling with its 95% interval, the worst category and its speed-up with its interval, the
    greedy speed-up, the share of it kept and (not on the decode alone) mean accepted, greedy in brackets.
    decode: the same on the decode alone (the `decode_*` fields: each prompt's traced prefill taken out)."""
    pre = "decode_" if decode else ""
    rows = {}
    for r in records:
        row = {
            "speed-up [95%]": _with_interval(r[f"{pre}speedup"], r[f"{pre}speedup_95"]),
            "worst category": r[f"{pre}worst_category"] or "–",
            "there [95%]": _with_interval(r[f"{pre}worst_speedup"], r[f"{pre}worst_speedup_95"]),
            "greedy": _ratio(r["greedy_decode_speedup" if decode else "greedy_speedup"]),
            "kept": "–" if r[f"{pre}kept"] is None else f"{r[f'{pre}kept']:.0%}",
        }
        if not decode:
            sampled, greedy = r["mean_accepted"], r["greedy_mean_accepted"]
            row["mean accepted (greedy)"] = _ratio(sampled) + ("" if greedy is None else f" ({greedy:.2f})")
        rows[short_label(r["method"])] = row
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")


def mean_accepted_se(mean_accepted: float, forwards: int) -> float:
    """The standard error of a mean accepted (tokens per target forward) from the counts behind it: each step's
    accepted drafts taken as a geometric count with the measured mean m = mean − 1 (the chain's model, every
    next depth accepted with the same chance; variance m(1 + m), at least that of the count truncated at the
    tree's depth), the `forwards` steps as independent."""
    m = max(mean_accepted - 1.0, 0.0)
    return math.sqrt(m * (1.0 + m) / max(forwards, 1))


def rule_gap_text(
    rows: Sequence[dict], method: str, rule: str, base: str, *, z: float = 2.0, labels: dict[str, str] | None = None
) -> str:
    """The sentence on `rule`'s mean accepted minus `base`'s for `method` at each T > 0 (`accepted_temperature`'s
    rows: mean_accepted and forwards per method, rule and temperature), read against the spread of the counts
    (`mean_accepted_se`, the two rules' standard errors combined): a gap counts only beyond z standard errors,
    at one T or summed over every T (where each T's gap has the same sign); otherwise it is within noise.
    labels: how the sentence names a rule (default: its name)."""
    name = {rule: rule, base: base} | (labels or {})
    at = {(r["method"], r["rule"], r["temperature"]): r for r in rows}
    temps = sorted(t for m, r, t in at if m == method and r == rule and t > 0 and (method, base, t) in at)
    if not temps:
        return ""
    gaps, ses = {}, {}
    for t in temps:
        a, b = at[method, rule, t], at[method, base, t]
        gaps[t] = a["mean_accepted"] - b["mean_accepted"]
        ses[t] = math.hypot(mean_accepted_se(a["mean_accepted"], a["forwards"]),
                            mean_accepted_se(b["mean_accepted"], b["forwards"]))  # fmt: skip
    total, total_se = sum(gaps.values()), math.sqrt(sum(s * s for s in ses.values()))
    beyond = [t for t in temps if abs(gaps[t]) > z * ses[t]]
    same_sign = all(g > 0 for g in gaps.values()) or all(g < 0 for g in gaps.values())
    mixed = any(g > 0 for g in gaps.values()) and any(g < 0 for g in gaps.values())
    text = (
        f"The mean accepted of {name[rule]} minus that of {name[base]} is "
        + ", ".join(f"{gaps[t]:+.2f} ± {z * ses[t]:.2f} at T = {t:g}" for t in temps)
        + f" tokens per forward (± {z:g} standard errors from the counts: each step's accepted drafts taken as a "
        "geometric count with the measured mean, the steps as independent)."
    )
    if same_sign and abs(total) > z * total_se:
        side = "above" if total > 0 else "below"
        return text + (
            f" The gaps have the same sign at every T and their sum, {total:+.2f}, is beyond {z:g} standard errors "
            f"({z * total_se:.2f}): in this file {name[rule]} sits {side} {name[base]}"
            + (f", beyond the spread at T = {', '.join(f'{t:g}' for t in beyond)} alone too." if beyond else ".")
        )
    if beyond:
        return text + (
            f" Beyond the spread at T = {', '.join(f'{t:g}' for t in beyond)}"
            + (", within it elsewhere" if len(beyond) < len(temps) else "")
            + (", and the gaps change sign" if mixed else "")
            + f": no order over the temperatures (summed, {total:+.2f} against {z * total_se:.2f})."
        )
    return text + (
        " Every gap is within its spread"
        + (f", and so is their sum ({total:+.2f} against {z * total_se:.2f}) although they share a sign"
           if same_sign else ", and the gaps change sign" if mixed else "")
        + f": within noise, no order between {name[rule]} and {name[base]} in this file."
    )  # fmt: skip
