"""The loop drawn from a real decode's trace: per step, draft → verify → accept, and the time of each phase.

    fig = timeline_figure(result, tokenizer, max_steps=8)     # a GenerationResult of generate(..., trace=True)

Left panel, one row per step (one target forward): the tokens the proposer drafted, in tree order (a chain: the
draft positions 1..k), green where the target accepted them and red where it rejected them, then the bonus token
the target supplies itself after the accepted path (blue). Right panel, the same rows: the step's wall time split
into its phases, `StepTrace.t_propose`, `t_verify` and `t_accept`, laid end to end as they ran. A step that
drafted nothing (the proposer found no match, or chose k = 0) shows its bonus token alone: one plain decoding
step. The colours are those of `viz.tokens` (the coloured text of the same decode).
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..text import visible
from .figures import TEMPLATE
from .tokens import COLORS, node_pieces, step_pieces, token_text

__all__ = ["timeline_figure", "timeline_rows", "PHASES"]

PHASES = (  # (StepTrace attribute, legend label, colour): the order a step runs them in
    ("t_propose", "propose (draft)", "#ffa15a"),
    ("t_verify", "verify (one target forward)", "#636efa"),
    ("t_accept", "accept", "#00cc96"),
)
ROLE_NAMES = {"accepted": "drafted, accepted", "rejected": "drafted, rejected", "target": "bonus (the target's)"}
BORDERS = {"accepted": "#2ca02c", "rejected": "#d62728", "target": "#1f77b4"}
LABEL_CHARS = 8  # a token's label inside its box is cut to this many characters (the hover shows it whole)


def _label(piece: str) -> str:
    text = visible(piece)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def timeline_rows(result, tokenizer=None, max_steps: int | None = 8) -> list[dict]:
    """Per step (the first `max_steps`; None: all): its drafted nodes as (role, text) in tree order, the bonus
    token's text (None where EOS cut the step before it), and the seconds of each phase.

    result: a GenerationResult with its trace, or a list of its `StepTrace`s (then each token is decoded on
    its own, without the context the result would give)."""
    steps = list(getattr(result, "steps", result))
    if max_steps is not None:
        steps = steps[:max_steps]
    has_context = hasattr(result, "prompt_tokens")
    emitted = step_pieces(result, tokenizer) if has_context else None
    rows = []
    for s, step in enumerate(steps):
        on_path = set(step.path)
        if has_context and tokenizer is not None:
            nodes = node_pieces(result, s, tokenizer)  # each node decoded along its own path
        else:
            nodes = [token_text(t, tokenizer) for t in step.tree_tokens]
        drafted = [("accepted" if i in on_path else "rejected", nodes[i]) for i in range(1, len(step.tree_tokens))]
        n_acc = min(step.accepted, len(step.emitted))
        bonus = None
        if len(step.emitted) > n_acc:  # EOS inside the accepted path ends the step without a bonus token
            bonus = emitted[s][n_acc] if emitted is not None else token_text(step.emitted[n_acc], tokenizer)
        rows.append(
            {
                "step": s,
                "drafted": drafted,
                "bonus": bonus,
                **{name: getattr(step, name) for name, _, _ in PHASES},
            }
        )
    return rows


def timeline_figure(
    result,
    tokenizer=None,
    *,
    max_steps: int | None = 8,
    title: str | None = None,
    width: int = 940,
) -> go.Figure:
    """Draft → verify → accept of the first `max_steps` steps of a traced decode (see the module docstring).

    result:    a GenerationResult (generate(..., trace=True), the default) or a list of its StepTraces
    tokenizer: to label tokens with their text (a LoadedModel's `.tokenizer`); without one, `[id]`
    width:     px; the default fits JupyterLab's output area with the file browser open
    """
    rows = timeline_rows(result, tokenizer, max_steps)
    if not rows:
        raise ValueError("no steps to draw: run generate(..., trace=True) and keep at least one step")
    names = [f"step {r['step']}" for r in rows]
    k_max = max(1, *(len(r["drafted"]) for r in rows))
    bonus_x = k_max + 1.5  # the bonus column, set apart from the drafted positions 1..k_max
    height = 190 + 34 * len(rows)  # px: the margins, and a row of token boxes per step
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        column_widths=[0.62, 0.38],
        horizontal_spacing=0.04,
        subplot_titles=("tokens drafted, then accepted or rejected, and the bonus", "wall time of each phase"),
    )
    boxes: dict[str, dict[str, list]] = {role: {"x": [], "y": [], "text": [], "hover": []} for role in ROLE_NAMES}
    for name, r in zip(names, rows, strict=True):
        for i, (role, piece) in enumerate(r["drafted"], start=1):
            box = boxes[role]
            box["x"].append(i)
            box["y"].append(name)
            box["text"].append(_label(piece))
            box["hover"].append(f"{name}, draft position {i}: {visible(piece)!r} {role}")
        if r["bonus"] is not None:
            box = boxes["target"]
            box["x"].append(bonus_x)
            box["y"].append(name)
            box["text"].append(_label(r["bonus"]))
            box["hover"].append(
                f"{name}: bonus {visible(r['bonus'])!r}, the target's own token after "
                f"{sum(role == 'accepted' for role, _ in r['drafted'])} accepted"
            )
    for role, box in boxes.items():
        fig.add_trace(
            go.Bar(
                x=[0.92] * len(box["x"]),
                base=[x - 0.46 for x in box["x"]],
                y=box["y"],
                orientation="h",
                name=ROLE_NAMES[role],
                legendgroup="tokens",
                marker={"color": COLORS[role], "line": {"color": BORDERS[role], "width": 1}},
                text=box["text"],
                textposition="inside",
                insidetextanchor="middle",
                textangle=0,
                textfont={"family": "monospace", "size": 11, "color": "#222"},
                hovertext=box["hover"],
                hoverinfo="text",
            ),
            row=1,
            col=1,
        )
    start = [0.0] * len(rows)  # ms: each phase starts where the one before it ended
    for attr, label, color in PHASES:
        ms = [r[attr] * 1e3 for r in rows]
        fig.add_trace(
            go.Bar(
                x=ms,
                base=start,
                y=names,
                orientation="h",
                name=label,
                legendgroup="phases",
                marker={"color": color},
                hovertemplate=f"%{{y}}: {label} %{{x:.2f}} ms<extra></extra>",
            ),
            row=1,
            col=2,
        )
        start = [a + b for a, b in zip(start, ms, strict=True)]
    fig.update_xaxes(
        tickvals=[*range(1, k_max + 1), bonus_x],
        ticktext=[*map(str, range(1, k_max + 1)), "bonus"],
        range=[0.4, bonus_x + 0.6],
        showgrid=False,
        row=1,
        col=1,
    )
    fig.update_xaxes(title_text="ms", rangemode="tozero", row=1, col=2)
    fig.update_yaxes(autorange="reversed", categoryorder="array", categoryarray=names)
    fig.update_layout(
        title=title or "The loop, step by step: draft → verify (one target forward) → accept",
        template=TEMPLATE,
        width=min(width, 950),
        height=height,
        barmode="overlay",  # every bar sits at its own base: token boxes at their position, phases end to end
        bargap=0.25,
        legend={"orientation": "h", "yanchor": "top", "y": -52 / (height - 80 - 110), "x": 0.0},  # 52 px below
        margin={"t": 80, "b": 110, "l": 70, "r": 20},
    )
    return fig
