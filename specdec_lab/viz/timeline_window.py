"""A window of a traced decode for notebook 00's first picture: the steps around one that accepted only part of its
draft, so the picture shows an all-accepted step, a rejected one and a partial one, not only the first steps.

    s = first_partial_step(result)                         # None: every step accepted all of its drafts or none
    first = window_start(s, count=6)                       # a few steps of context before it, step 0 skipped
    fig = timeline_window_figure(result, tokenizer, first, count=6)

`step_window` is the same decode seen from step `first` on: its prompt is the original prompt plus every token
emitted before that step, so each token is decoded in the context it had (`viz.tokens.node_pieces`). The figure
is `viz.timeline.timeline_figure` of that window, its rows labelled with their step numbers in the whole decode.
"""

from __future__ import annotations

import dataclasses
import re

import plotly.graph_objects as go

from ..text import visible
from .timeline import ROLE_NAMES, timeline_figure, timeline_rows

__all__ = ["is_partial", "first_partial_step", "window_start", "step_window", "timeline_window_figure"]

_STEP = re.compile(r"^step (\d+)")


def is_partial(step) -> bool:
    """Whether a step accepted some of its drafts and rejected the next one (0 < accepted < proposed)."""
    return 0 < step.accepted < step.proposed


def first_partial_step(result) -> int | None:
    """The index of the first step that accepted only part of its draft, or None where there is none."""
    steps = getattr(result, "steps", result)
    return next((i for i, step in enumerate(steps) if is_partial(step)), None)


def window_start(partial: int | None, count: int = 6, before: int = 2) -> int:
    """Where a window of `count` steps starts so that it shows `partial` after `before` steps of context (fewer
    where the decode has fewer before it), skipping step 0 when it can (its draft is copied from the chat
    template's own tokens). partial None: 0, the start of the decode."""
    if partial is None:
        return 0
    before = min(before, count - 1)
    return min(partial, max(1, partial - before))


def step_window(result, first: int, count: int | None = None):
    """The decode `result` (a GenerationResult with its trace) seen from step `first` on, `count` steps (None: all
    that are left): the tokens emitted before step `first` join the prompt."""
    steps = result.steps
    if not 0 <= first < len(steps):
        raise ValueError(f"step {first} is not in a decode of {len(steps)} steps")
    before = [t for s in steps[:first] for t in s.emitted]
    kept = steps[first:] if count is None else steps[first : first + count]
    emitted = [t for s in kept for t in s.emitted]
    return dataclasses.replace(
        result, prompt_tokens=list(result.prompt_tokens) + before, steps=list(kept), tokens=emitted, forwards=len(kept)
    )


def _renumber(value, first: int):
    if isinstance(value, str):
        return _STEP.sub(lambda m: f"step {int(m.group(1)) + first}", value)
    return value


def timeline_window_figure(
    result, tokenizer=None, first: int = 0, count: int = 6, *, title: str | None = None, width: int = 940
) -> go.Figure:
    """`timeline_figure` of steps first .. first + count − 1 of `result`, each row named by its step number in the
    whole decode (hover texts too)."""
    window = step_window(result, first, count)
    fig = timeline_figure(window, tokenizer, max_steps=count, title=title, width=width)
    for trace in fig.data:
        if trace.y is not None:
            trace.y = [_renumber(y, first) for y in trace.y]
        if getattr(trace, "hovertext", None) is not None and not isinstance(trace.hovertext, str):
            trace.hovertext = [_renumber(h, first) for h in trace.hovertext]
    names = [f"step {first + i}" for i in range(len(window.steps))]
    fig.update_yaxes(categoryarray=names)
    fig.update_yaxes(title_text="step (one target forward)", row=1, col=1)  # shared: the right panel's rows too
    # each token box whole (a long piece shrinks to fit its box rather than being cut short), in the order
    # timeline_figure fills its token traces: per row, its drafted nodes, then its bonus
    labels: dict[str, list[str]] = {role: [] for role in ROLE_NAMES}
    for r in timeline_rows(window, tokenizer, max_steps=count):
        for role, piece in r["drafted"]:
            labels[role].append(visible(piece))
        if r["bonus"] is not None:
            labels["target"].append(visible(r["bonus"]))
    by_name = {ROLE_NAMES[role]: texts for role, texts in labels.items()}
    for trace in fig.data:
        texts = by_name.get(trace.name)
        if texts is not None and trace.text is not None and len(trace.text) == len(texts):
            trace.text = texts
    return fig
