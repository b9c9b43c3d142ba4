"""Figures of notebook 10 (EAGLE): accuracy per draft position, the drafting-vocabulary trade-off, training curves.

Data in (the `lab.drafter_accuracy` record, an `eagle.vocab_cost.VocabTradeoff`, a training curve), plotly out; every
figure at most `MAX_WIDTH` px wide with its legend inside. The slider's callback (`vocab_callback`) is a plain
function of M, tested without a browser.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..eagle.vocab_cost import VocabTradeoff, chain_speedup
from .figures import TEMPLATE
from .trees import MAX_WIDTH

__all__ = ["SOURCE_LABELS", "position_accuracy_figure", "vocab_tradeoff_figure", "vocab_point", "vocab_callback",
           "training_figure", "lineage_figure", "speed_rows", "source_html"]  # fmt: skip

SOURCE_LABELS = {
    "draft": "2-layer token draft (true tokens)",
    "medusa": "Medusa head j (one hidden state)",
    "eagle": "EAGLE-3 drafter (its own features)",
}
COLORS = {"draft": "#1f77b4", "medusa": "#ff7f0e", "eagle": "#2ca02c"}


def position_accuracy_figure(record: Mapping, title: str | None = None) -> go.Figure:
    """One line per proposer: accuracy (top-1 = the target's greedy token, earlier drafts teacher-forced) against
    draft position j, from an `lab.drafter_accuracy` record."""
    fig = go.Figure()
    k = record["positions"]
    for name, s in record["sources"].items():
        fig.add_trace(go.Scatter(
            x=k, y=s["accuracy"], mode="lines+markers", name=SOURCE_LABELS.get(name, name),
            line={"color": COLORS.get(name)}, marker={"color": COLORS.get(name), "size": 8},
            hovertemplate="position %{x}: %{y:.3f}<extra>" + name + "</extra>",
        ))  # fmt: skip
    fig.update_layout(
        title=title or f"accuracy per draft position: {record['examples']} held-out examples, same tokens for all",
        template=TEMPLATE, width=760, height=460,
        xaxis={"title": "draft position j", "dtick": 1},
        yaxis={"title": "top-1 = the target's greedy token", "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.2},
    )  # fmt: skip
    return fig


def vocab_tradeoff_figure(t: VocabTradeoff, m: int | None = None, shipped: int | None = None) -> go.Figure:
    """c_MAC(M) (left axis) and coverage(M) (right axis) against the drafting vocabulary's size M (log axis);
    a dotted line at the shipped size, a dashed one at `m` (the slider's value)."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=t.sizes, y=t.c, mode="lines+markers", name="draft step cost c_MAC(M)",
                             line={"color": "#d62728"}, marker={"color": "#d62728"}), secondary_y=False)  # fmt: skip
    fig.add_trace(go.Scatter(x=t.sizes, y=t.coverage, mode="lines+markers", name="coverage(M) of the greedy tokens",
                             line={"color": "#1f77b4"}, marker={"color": "#1f77b4"}), secondary_y=True)  # fmt: skip
    for x, dash, label, shift in ((shipped, "dot", "shipped", -12), (m, "dash", "M", 12)):
        if x and not (label == "M" and x == shipped):
            fig.add_vline(x=x, line={"dash": dash, "color": "#555", "width": 1})
            # annotations on a log axis take log10(x) (shapes take x itself)
            fig.add_annotation(x=math.log10(x), y=0.5, yref="paper", text=f"{label} = {x:,}", showarrow=False,
                               xshift=shift, textangle=-90, font={"size": 11})  # fmt: skip
    fig.update_layout(
        title="the drafting vocabulary: a draft step's cost against the tokens it can name",
        template=TEMPLATE, width=820, height=470, margin={"t": 60},
        legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    fig.update_xaxes(type="log", dtick="D2", title="drafting vocabulary size M (most frequent tokens first)")
    fig.update_yaxes(title="c_MAC = draft step / target token (multiply-adds)", rangemode="tozero", secondary_y=False,
                     color="#d62728")  # fmt: skip
    fig.update_yaxes(title="coverage", range=[0, 1.02], dtick=0.2, tickformat=".0%", showgrid=False, secondary_y=True,
                     color="#1f77b4")  # fmt: skip
    return fig


def vocab_point(t: VocabTradeoff, m: int, alpha: float) -> str:
    """Markdown for size M: c_MAC, coverage, and the closed form's best chain at α·coverage(M) (α: acceptance with
    every token nameable)."""
    row = t.at(m)
    speed, k = chain_speedup(alpha * row["coverage"], row["c"])
    chain = f"best chain k = {k}, {speed:.2f}× by the closed form" if k else "no chain pays by the closed form"
    return (f"M = {m:,}: c_MAC = {row['c']:.3f}, coverage = {row['coverage']:.3f}; at an acceptance "
            f"α = {alpha * row['coverage']:.2f} (the assumed `alpha` = {alpha:.2f}, times the coverage): "
            f"{chain}.")  # fmt: skip


def vocab_callback(t: VocabTradeoff, alpha: float, shipped: int | None = None):
    """The slider's callback: `show_vocab(M) -> (figure, markdown)`. A named plain function (ipywidgets needs a
    `__name__`)."""

    def show_vocab(m: int):
        return vocab_tradeoff_figure(t, m, shipped), vocab_point(t, m, alpha)

    return show_vocab


def training_figure(live: Sequence[Mapping], curve: Mapping, positions: Sequence[int] = (1, 2, 3),
                    title: str | None = None) -> go.Figure:  # fmt: skip
    """Left: the training loss against training tokens — the live run's training batches, its loss on a fixed
    held-out batch (`held_loss`, when given) and the recorded run's training-batch loss at its evaluation points
    (comparable with the live training batches, not with the held-out batch); right: the recorded
    run's held-out accuracy at draft positions `positions` against training tokens."""
    titles = ("training loss (TTT, weighted over steps)", "recorded run: held-out accuracy")
    fig = make_subplots(cols=2, subplot_titles=titles, horizontal_spacing=0.12)
    rec = [p for p in curve["points"] if p.get("loss") is not None]
    fig.add_trace(go.Scatter(x=[p["tokens"] for p in rec], y=[p["loss"] for p in rec], mode="lines+markers",
                             name="recorded run: its training batch (as the dotted line)", line={"color": "#7f7f7f"},
                             marker={"color": "#7f7f7f"}),
                  row=1, col=1)  # fmt: skip
    fig.add_trace(go.Scatter(x=[p["tokens"] for p in live], y=[p["loss"] for p in live], mode="lines+markers",
                             name="live run: its training batch", line={"color": "#ff9896", "dash": "dot"},
                             marker={"color": "#ff9896"}), row=1, col=1)  # fmt: skip
    held = [p for p in live if p.get("held_loss") is not None]
    if held:
        fig.add_trace(go.Scatter(x=[p["tokens"] for p in held], y=[p["held_loss"] for p in held],
                                 mode="lines+markers", name="live run: fixed held-out batch",
                                 line={"color": "#d62728"}, marker={"color": "#d62728"}), row=1, col=1)  # fmt: skip
    palette = ["#2ca02c", "#98df8a", "#c7e9c0", "#bcbd22", "#dbdb8d", "#17becf", "#9edae5"]
    tokens = [p["tokens"] for p in curve["points"]]
    for j, k in enumerate(positions):
        i, color = curve["positions"].index(k), palette[j % len(palette)]
        fig.add_trace(go.Scatter(x=tokens, y=[p["accuracy"][i] for p in curve["points"]], mode="lines+markers",
                                 name=f"position {k}", line={"color": color}, marker={"color": color}),
                      row=1, col=2)  # fmt: skip
    fig.update_xaxes(title="training tokens", type="log", dtick="D2", row=1, col=1)
    fig.update_xaxes(title="training tokens", row=1, col=2)
    fig.update_yaxes(title="loss", row=1, col=1)
    fig.update_yaxes(title="accuracy", rangemode="tozero", row=1, col=2)
    fig.update_layout(template=TEMPLATE, width=MAX_WIDTH, height=460, legend={"orientation": "h", "y": -0.2},
                      title=title or "training the drafter: a short live run beside the recorded one")  # fmt: skip
    return fig


def lineage_figure(runs: Sequence, points: Sequence[Mapping], positions: Sequence[int] = (1, 2, 3)) -> go.Figure:
    """Held-out accuracy at draft positions `positions` against the drafter's total training tokens, over every
    run that made it (`train.lineage`: `runs` oldest first, `points` from `stitched_curve`); a dotted line and
    the run's settings where each run starts."""
    fig = go.Figure()
    palette = ["#2ca02c", "#98df8a", "#bcbd22", "#17becf", "#9edae5"]
    for j, k in enumerate(positions):
        pts = [p for p in points if len(p["accuracy"]) >= k]
        color = palette[j % len(palette)]
        fig.add_trace(go.Scatter(x=[p["tokens"] for p in pts], y=[p["accuracy"][k - 1] for p in pts],
                                 mode="lines+markers", name=f"position {k}", line={"color": color},
                                 marker={"color": color}))  # fmt: skip
    for i, run in enumerate(runs):
        fig.add_vline(x=run.tokens_before, line={"color": "#bbbbbb", "dash": "dot"})
        fig.add_annotation(x=run.tokens_before, y=1.0, yref="paper", text=f"run {i + 1}", showarrow=False,
                           xanchor="left", yanchor="top", hovertext=f"{run.folder}: {run.settings}")  # fmt: skip
    fig.update_xaxes(title="training tokens seen by the drafter (all runs)")
    fig.update_yaxes(title="held-out accuracy", rangemode="tozero")
    fig.update_layout(template=TEMPLATE, width=MAX_WIDTH, height=380, legend={"orientation": "h", "y": -0.25},
                      title="the shipped drafter's training, run by run")  # fmt: skip
    return fig


def speed_rows(results: Mapping, methods: Sequence[str] | None = None) -> list[dict]:
    """Rows of a bench results file's summary: method, prompts, mean accepted, tokens/s, speedup, identical."""
    rows = []
    for name, s in results["summary"].items():
        if methods and name not in methods:
            continue
        rows.append({"method": name, "prompts": s.get("prompts"), "mean accepted": s.get("mean_accepted"),
                     "tokens/s": s.get("tokens_per_s"), "speedup": s.get("speedup"),
                     "identical": s.get("identical_to_autoregressive")})  # fmt: skip
    return rows


# ---- the hybrid's sources in the text -----------------------------------------------------------------------
SOURCE_COLORS = {"prompt_lookup": "#aec7e8", "medusa": "#ffbb78", "eagle": "#98df8a"}
# a token two or more sources proposed (the trie merged them): each combination its own colour, so the legend
# tells them apart; a combination not listed here gets MIXED_COLOR
COMBINED_COLORS = {
    frozenset({"eagle", "medusa"}): "#dbdb8d",
    frozenset({"eagle", "prompt_lookup"}): "#7fd4c1",
    frozenset({"medusa", "prompt_lookup"}): "#c5b0d5",
    frozenset({"eagle", "medusa", "prompt_lookup"}): "#f7b6d2",
}
MIXED_COLOR = "#d9d9d9"


def _source_color(label: str) -> str:
    if label in SOURCE_COLORS:
        return SOURCE_COLORS[label]
    if "+" in label:
        return COMBINED_COLORS.get(frozenset(label.split("+")), MIXED_COLOR)
    return "#eeeeee"


def source_html(result, tokenizer=None, legend: bool = True) -> str:
    """The emitted text as HTML, each accepted draft token on the colour of the source(s) that proposed it
    (`StepTrace.info["accepted_sources"]`, one label per accepted draft: "prompt_lookup", "medusa+eagle", ...);
    the target's bonus token of each step plain. Token text by `text.token_pieces` (never per-token decode)."""
    import html

    from ..text import token_pieces

    if not result.steps and result.tokens:
        raise ValueError("this result has no per-step trace: run generate(..., trace=True)")
    pieces = token_pieces(result.tokens, tokenizer, context=result.prompt_tokens)
    spans, i, seen = [], 0, {}
    for n, s in enumerate(result.steps):
        labels = list(s.info.get("accepted_sources", []))
        for j, _ in enumerate(s.emitted):
            if i >= len(pieces):
                break
            text = html.escape(pieces[i]).replace("\n", "↵<br>")
            if j < min(s.accepted, len(labels)):
                label = labels[j]
                key = "+".join(sorted(label.split("+")))  # one legend entry per combination, however spelled
                seen[key] = seen.get(key, 0) + 1
                spans.append(f'<span style="background:{_source_color(label)}" title="step {n}: {label}">{text}</span>')
            else:
                spans.append(f'<span title="step {n}: the target\'s token">{text}</span>')
            i += 1
    body = "<div style='font-family:monospace;white-space:pre-wrap;line-height:1.6'>" + "".join(spans) + "</div>"
    if not legend:
        return body
    keys = sorted(seen, key=lambda k: (k not in SOURCE_COLORS, k))
    swatches = " ".join(f'<span style="background:{_source_color(k)};padding:0 4px">{html.escape(k)}</span>'
                        for k in keys)  # fmt: skip
    return body + f"<div style='margin-top:6px'>accepted drafts by source: {swatches or 'none'}; plain: the " \
                  "target's own token of each step</div>"  # fmt: skip
