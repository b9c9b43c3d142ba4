"""Figures of serving (notebook 14): a serve.json policy and a serving bench's summary in, plotly figures out.

policy_figure(rows)                 each method's predicted speedup by batch size B, and the k it would serve
serving_figure(summary)             tokens/s against concurrency: vLLM's configs and our loop, one line each
serving_speedup_figure(summary)     the same over vLLM plain at each concurrency, with the rounds' ranges
acceptance_figure(vllm, ours)       acceptance by draft position: vLLM's counters beside our loop's traces
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.colors import qualitative

from .figures import TEMPLATE

__all__ = ["policy_figure", "serving_figure", "serving_speedup_figure", "acceptance_figure", "WIDTH"]

WIDTH = 900  # px: inside the 950 px output area
COLORS = {"none": "#444444", "ngram": qualitative.Plotly[0], "draft": qualitative.Plotly[1],
          "eagle3": qualitative.Plotly[2], "policy": qualitative.Plotly[3]}  # fmt: skip


def _legend_below() -> dict:
    return {"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0}


def policy_figure(rows: list[dict], title: str = "The policy: predicted speedup by batch size") -> go.Figure:
    """One line per method: its best predicted speedup at each B (1.0 where no k pays: it drafts nothing there),
    labelled with the k it would serve."""
    fig = go.Figure()
    methods = list(rows[0]["methods"])
    for method in methods:
        xs = [r["batch_size"] for r in rows]
        ys = [r["methods"][method]["speedup"] for r in rows]
        ks = [r["methods"][method]["k"] for r in rows]
        # each label on its own side of the point: the highest method's above, the lowest's below, any other to the
        # right (ties ordered by the legend), so labels of methods close at one B never sit on one another
        sides = []
        for r in rows:
            order = sorted(methods, key=lambda m: (-r["methods"][m]["speedup"], methods.index(m)))
            rank = order.index(method)
            sides.append("top center" if rank == 0 else "bottom center" if rank == len(order) - 1 else "middle right")
        fig.add_scatter(x=xs, y=ys, mode="lines+markers+text", name=method, text=[f"k={k}" for k in ks],
                        textposition=sides, cliponaxis=False, line={"color": COLORS.get(method)},
                        hovertemplate=f"{method}, B=%{{x}}: %{{y:.2f}}× (%{{text}})<extra></extra>")  # fmt: skip
    fig.add_hline(y=1.0, line={"dash": "dash", "color": "#888888"})
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=420, legend=_legend_below(),
                      xaxis={"title": "running requests B", "type": "log", "tickvals": [r["batch_size"] for r in rows]},
                      yaxis_title="predicted speedup over plain decoding")  # fmt: skip
    return fig


def _lines(summary: list[dict], value: str) -> dict[str, tuple[list, list, list]]:
    lines: dict[str, tuple[list, list, list]] = {}
    for r in summary:
        if r.get(value) is None:
            continue
        name = f"vLLM {r['config']}" if r["engine"] == "vllm" else f"{r['engine']}: {r['config']}"
        xs, ys, rng = lines.setdefault(name, ([], [], []))
        xs.append(r["concurrency"])
        ys.append(r[value])
        rng.append(r.get("speedup_range"))
    return lines


def serving_figure(summary: list[dict], title: str = "Throughput by concurrency") -> go.Figure:
    """Total new tokens per second against the number of concurrent requests, one line per engine config."""
    fig = go.Figure()
    for i, (name, (xs, ys, _)) in enumerate(_lines(summary, "tokens_per_s").items()):
        config = name.split()[-1]
        dash = None if name.startswith("vLLM") else "dot"
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=name,
                        line={"color": COLORS.get(config, qualitative.Plotly[(i + 4) % 10]), "dash": dash},
                        hovertemplate=f"{name}, c=%{{x}}: %{{y:.1f}} tokens/s<extra></extra>")  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=440, legend=_legend_below(),
                      xaxis={"title": "concurrent requests", "type": "log",
                             "tickvals": sorted({r["concurrency"] for r in summary})},
                      yaxis={"title": "new tokens per second (all requests)", "rangemode": "tozero"})  # fmt: skip
    return fig


def serving_speedup_figure(summary: list[dict], title: str = "Speedup over vLLM plain, by concurrency") -> go.Figure:
    """Each config's tokens/s over vLLM plain's at the same concurrency; error bars: the rounds' range."""
    fig = go.Figure()
    for i, (name, (xs, ys, rng)) in enumerate(_lines(summary, "speedup_vs_vllm_plain").items()):
        if name == "vLLM none":
            continue
        config = name.split()[-1]
        bars = None
        if all(r is not None for r in rng):
            bars = {"type": "data", "symmetric": False, "array": [hi - y for (_, hi), y in zip(rng, ys, strict=True)],
                    "arrayminus": [y - lo for (lo, _), y in zip(rng, ys, strict=True)]}  # fmt: skip
        fig.add_scatter(x=xs, y=ys, mode="lines+markers", name=name, error_y=bars,
                        line={"color": COLORS.get(config, qualitative.Plotly[(i + 4) % 10]),
                              "dash": None if name.startswith("vLLM") else "dot"},
                        hovertemplate=f"{name}, c=%{{x}}: %{{y:.2f}}×<extra></extra>")  # fmt: skip
    fig.add_hline(y=1.0, line={"dash": "dash", "color": "#888888"})
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=440, legend=_legend_below(),
                      xaxis={"title": "concurrent requests", "type": "log",
                             "tickvals": sorted({r["concurrency"] for r in summary})},
                      yaxis_title="tokens/s over vLLM plain")  # fmt: skip
    return fig


def acceptance_figure(vllm: dict[str, list[float]], ours: dict[str, list[float]],
                      title: str = "Acceptance by draft position: vLLM and our loop") -> go.Figure:  # fmt: skip
    """Bars per method and position i: D_i, the share of drafts (steps that drafted) accepted up to position i,
    vLLM (solid) beside our loop on the same prompts and k (hatched)."""
    fig = go.Figure()
    for method, rates in vllm.items():
        xs = [f"{method} · {i + 1}" for i in range(len(rates))]
        fig.add_bar(x=xs, y=rates, name=f"vLLM {method}", marker={"color": COLORS.get(method)},
                    hovertemplate="%{x}: %{y:.3f}<extra>vLLM</extra>")  # fmt: skip
        if method in ours:
            fig.add_bar(x=xs, y=ours[method][: len(rates)], name=f"ours {method}",
                        marker={"color": COLORS.get(method), "pattern": {"shape": "/"}, "opacity": 0.55},
                        hovertemplate="%{x}: %{y:.3f}<extra>ours</extra>")  # fmt: skip
    fig.update_layout(template=TEMPLATE, title=title, width=WIDTH, height=420, barmode="group",
                      legend=_legend_below(), xaxis_title="method · draft position",
                      yaxis={"title": "D_i: share of drafts accepted up to position i", "range": [0, 1]})  # fmt: skip
    return fig
