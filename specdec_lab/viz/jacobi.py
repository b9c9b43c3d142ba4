"""Notebook 07's first figure: the Jacobi trajectory of a traced `generate(method="jacobi")` run.

Data in, `plotly.graph_objects.Figure` / DataFrame out; nothing here runs a model.

    jacobi_frame(result)     one row per (step, block offset): the guess before and after the step's Jacobi
                             update, whether greedy decoding emits it there, whether it was accepted
    jacobi_figure(result)    the same as a heatmap step x offset: accepted, right behind a wrong guess, wrong

Jacobi iteration (`proposers/jacobi.py`) guesses a block of k future tokens and refines all of them in one
forward: a guess is accepted only while every guess before it was right, so a right token sitting behind a
wrong one is wasted work until the wrong one is fixed — the yellow cells of the figure.
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..text import token_pieces, visible
from .figures import TEMPLATE
from .lookahead import KIND_COLORS, _need_steps

__all__ = ["jacobi_frame", "jacobi_figure", "JACOBI_STATES"]

# cell states of the trajectory heatmap (z values)
JACOBI_STATES = {0: "wrong guess", 1: "right guess behind a wrong one (not accepted)", 2: "accepted"}


def jacobi_frame(result, tokenizer=None):
    """One row per (step, block offset) of a traced `generate(method="jacobi")` run.

    offset j = 1..k after the step's root; `guess` / `update` are the block before and after the step's
    Jacobi update (`info()["before"]`, `["after"]`), `unchanged` = the update left the guess as it was,
    `right` = the guess is the token greedy decoding emits there (read from the output), `accepted` =
    inside the greedily accepted prefix; `state` is the heatmap's code (`JACOBI_STATES`).
    """
    import pandas as pd

    _need_steps(result)
    rows, emitted = [], 0
    for s, step in enumerate(result.steps):
        info = step.info
        if "before" not in info:
            raise ValueError("not a Jacobi trace: its steps' info has no 'before' block (method='jacobi')")
        context = result.prompt_tokens + result.tokens[:emitted]
        guesses = [visible(p) for p in token_pieces(info["before"], tokenizer, context, final=False)]
        updates = [visible(p) for p in token_pieces(info["after"], tokenizer, context, final=False)]
        for j, (guess, update) in enumerate(zip(info["before"], info["after"], strict=True)):
            index = emitted + j  # the new-token index this offset stands for
            right = index < len(result.tokens) and result.tokens[index] == guess
            accepted = j < info["accepted"]
            rows.append(
                {
                    "step": s,
                    "offset": j + 1,
                    "guess": guess,
                    "update": update,
                    "guess text": guesses[j],
                    "update text": updates[j],
                    "unchanged": bool(info["converged"][j]),
                    "right": right,
                    "accepted": accepted,
                    "state": 2 if accepted else 1 if right else 0,
                }
            )
        emitted += len(step.emitted)
    return pd.DataFrame(rows)


def jacobi_figure(result, tokenizer=None, title: str | None = None) -> go.Figure:
    """Heatmap step x block offset of a Jacobi run: green = accepted, yellow = the right token already sat
    there but a guess before it was wrong (so it could not be accepted), gray = wrong; hover shows the
    guess, the update and whether the update left it unchanged."""
    frame = jacobi_frame(result, tokenizer)
    steps, width = len(result.steps), int(frame["offset"].max())
    z = [[None] * width for _ in range(steps)]
    text = [[""] * width for _ in range(steps)]
    hover = [[""] * width for _ in range(steps)]
    for r in frame.to_dict("records"):
        s, j = r["step"], r["offset"] - 1
        z[s][j] = r["state"]
        text[s][j] = r["guess text"][:8]  # shortened
        hover[s][j] = (
            f"step {s}, offset {r['offset']}: guess {r['guess text']!r} -> update {r['update text']!r}"
            f"{' (unchanged)' if r['unchanged'] else ''}<br>{JACOBI_STATES[r['state']]}"
        )
    third = 1 / 3
    scale = [[0, "#e6e6e6"], [third, "#e6e6e6"], [third, "#ffd27f"], [2 * third, "#ffd27f"]]
    scale += [[2 * third, KIND_COLORS["accepted"]], [1, KIND_COLORS["accepted"]]]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(1, width + 1)),
            y=list(range(steps)),
            text=text,
            customdata=hover,
            texttemplate="%{text}",
            textfont={"size": 9},
            zmin=-0.5,
            zmax=2.5,
            colorscale=scale,
            xgap=1,
            ygap=1,
            name="trajectory",
            hovertemplate="%{customdata}<extra></extra>",
            colorbar={
                "tickvals": [0, 1, 2],
                "ticktext": ["wrong", "right, prefix wrong", "accepted"],
                "title": "guess",
                "len": 0.5,
            },
        )
    )
    accepted = int(frame["accepted"].sum())
    fig.update_layout(
        title=title
        or (
            f"Jacobi trajectory: {steps} steps, {accepted} guesses accepted, "
            f"{int((frame['state'] == 1).sum())} right but behind a wrong one"
        ),
        template=TEMPLATE,
        width=min(950, max(560, 70 * width + 260)),  # at most the output area of a laptop screen
        height=max(320, 16 * steps + 160),
        xaxis={"title": "block offset after the root", "dtick": 1, "side": "top"},
        yaxis={"title": "step (one target forward)", "autorange": "reversed"},
    )
    return fig
