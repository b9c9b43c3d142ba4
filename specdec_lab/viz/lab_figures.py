"""What the speedup lab shows of one `LabResult` (specdec_lab/lab/experiment.py): data in, HTML / figures out.

    provenance_html(lab, tokenizer)      the emitted text, each token coloured by how it was produced
    accepted_figure(lab)                 tokens per step, split by provenance, with the candidates offered
    numbers_html(lab), numbers_frame(lab) tokens/s of both runs, speed-up, mean accepted, identical
    lab_step_tree_figure(result, step)   one step's verified tree in the lab's colours, with its bonus token
    steps_slider_figure(lab, tokenizer)  every step's tree in one plotly figure with its own slider: works
                                         in a stored notebook with no kernel (lab/speedup.py's is ipywidgets)

Colours: accepted draft = green, bonus = blue (as in viz/tokens.py), plain step = gray; in the trees a rejected
draft is red, never the bonus's blue, and the bonus (the target's own token after the last accepted node) is a
node of its own, hung from that node by a dashed edge.
"""

from __future__ import annotations

import html as _html

import plotly.graph_objects as go

from ..text import PARTIAL, visible
from .decoding import step_tree_figure
from .figures import TEMPLATE, legend_below
from .tokens import COLORS, step_pieces

__all__ = ["PROVENANCE_COLORS", "TREE_COLORS", "provenance_html", "accepted_figure", "numbers_html", "numbers_frame",
           "lab_step_tree_figure", "steps_slider_figure"]  # fmt: skip

PROVENANCE_COLORS = {"accepted draft": COLORS["accepted"], "bonus": COLORS["target"], "plain step": "#e3e3e3"}
_BAR_COLORS = {"accepted draft": "#2ca02c", "bonus": "#1f77b4", "plain step": "#aaaaaa"}
# a step's tree: the bar colours of `accepted_figure`, plus the root and the drafts the target rejected
TREE_COLORS = {**_BAR_COLORS, "root": "#555555", "rejected draft": "#f4a3a3"}
TREE_LEGEND = ("accepted path", "rejected draft", "bonus", "plain step")  # the trace names a legend shows
_TITLES = {
    "accepted draft": "accepted draft token: proposed by the method, confirmed by the target",
    "bonus": "bonus token: the target's own, after the accepted path",
    "plain step": "plain step: nothing was proposed, an ordinary decoding step",
}


def _span(text: str, kind: str, title: str) -> str:
    shown = _html.escape(text).replace("\n", "↵<br>")
    if text.strip() == "" and "\n" not in text:
        shown = shown.replace(" ", "&nbsp;") or "&#8203;"
    style = f"background:{PROVENANCE_COLORS[kind]};border-radius:3px;padding:0 1px;"
    return f'<span class="lab-{kind.replace(" ", "-")}" style="{style}" title="{_html.escape(title)}">{shown}</span>'


def provenance_html(lab, tokenizer=None, legend: bool = True) -> str:
    """The method's output, one span per token coloured by provenance; hover: its step and id."""
    kinds = lab.provenance
    spans, i = [], 0
    pieces = step_pieces(lab.result, tokenizer)
    for s, step in enumerate(lab.result.steps):
        parts = []
        for j, tok in enumerate(step.emitted):
            kind = kinds[i]
            parts.append(_span(pieces[s][j] or PARTIAL, kind, f"step {s}: {kind} (id {tok})"))
            i += 1
        spans.append(f'<span class="lab-step" data-step="{s}">{"".join(parts)}</span>')
    body = (
        '<div class="lab-tokens" style="font-family:ui-monospace,monospace;font-size:13px;line-height:1.9;'
        f'white-space:normal;word-break:break-word">{"".join(spans)}</div>'
    )
    if not legend:
        return body
    counts = lab.provenance_counts
    items = " &nbsp;".join(_span(f"{k}: {counts[k]}", k, _TITLES[k]) for k in PROVENANCE_COLORS)
    head = f'<div class="lab-legend" style="font-size:12px;margin-bottom:4px">{items}</div>'
    return f"<div>{head}{body}</div>"


def accepted_figure(lab, title: str | None = None) -> go.Figure:
    """Stacked bars per step: accepted draft tokens + the bonus (or plain) token; diamonds: candidates offered."""
    steps = lab.result.steps
    x = list(range(len(steps)))
    kinds = lab.provenance
    per_step, i = [], 0
    for step in steps:
        per_step.append(kinds[i : i + len(step.emitted)])
        i += len(step.emitted)
    fig = go.Figure()
    for kind, color in _BAR_COLORS.items():
        fig.add_trace(go.Bar(x=x, y=[k.count(kind) for k in per_step], name=kind, marker_color=color))
    fig.add_trace(
        go.Scatter(x=x, y=[s.proposed for s in steps], mode="markers", name="candidates proposed",
                   marker={"symbol": "diamond-open", "size": 8, "color": "#444"})
    )  # fmt: skip
    mean = lab.mean_accepted
    fig.add_hline(y=mean, line={"dash": "dot", "color": "#d62728"}, annotation_text=f"mean {mean:.2f} tokens/step",
                  annotation_position="top left")  # fmt: skip
    fig.update_layout(
        title=title or f"{lab.spec}: tokens emitted per step (target forward)",
        template=TEMPLATE,
        barmode="stack",
        xaxis_title="step",
        yaxis_title="tokens",
        width=760,
        height=340,
        legend=legend_below(),
    )
    return fig


def numbers_frame(lab):
    """Method and baseline side by side: tokens, forwards, tokens/s, mean accepted; speed-up; identical."""
    import pandas as pd

    rows = {lab.spec: lab.result}
    if lab.baseline is not None:
        rows[f"{lab.baseline_method} (baseline)"] = lab.baseline
    frame = pd.DataFrame(
        {
            name: {
                "new tokens": len(r.tokens),
                "target forwards": r.forwards,
                "mean accepted": round(r.mean_accepted, 2),
                "tokens/s": round(r.tokens_per_s, 1),
                "stop": r.stop_reason,
            }
            for name, r in rows.items()
        }
    ).T
    return frame.rename_axis("run")


def numbers_html(lab) -> str:
    """One line: speed-up, both tokens/s, mean accepted, identical (and a note when a run was stopped)."""
    if lab.baseline is None:
        tail = "baseline not run (stopped)"
    else:
        same = {True: "identical to", False: "differs from"}[lab.identical]
        note = " (greedy: must be identical)" if lab.temperature == 0 else " (sampled: need not be)"
        tail = (
            f"<b>speed-up {lab.speedup:.2f}×</b> vs {lab.baseline_method} ({lab.baseline_tokens_per_s:.1f} tokens/s)"
            f"; output {same} the baseline's{note}"
        )
    stop = " · <b>stopped</b>" if lab.stopped else ""
    if lab.noisy:
        stop += (
            f"<br><span style='color:#555'>noisy timing: autoregressive steps took {lab.baseline_step_ms:.0f} ms"
            f" (median) and their p90 {lab.timing_spread:.1f}× that, though each does the same work — the CPU "
            "was busy with something else, so the speeds may move on a re-run</span>"
        )
    return (
        f'<div class="lab-numbers" style="font-size:13px;margin:4px 0">{_html.escape(lab.spec)}: '
        f"{len(lab.result.tokens)} tokens in {lab.result.forwards} forwards, mean accepted "
        f"{lab.mean_accepted:.2f}, {lab.tokens_per_s:.1f} tokens/s · {tail}{stop}</div>"
    )


MAX_HEIGHT = 720  # px: a deep chain's tree is squeezed vertically rather than drawn taller than a screen


def _wrapped_title(text: str, limit: int = 72) -> str:
    """The step's caption on two lines (what it verified; what it emitted), the emitted text shortened."""
    head, sep, emitted = text.partition(", emitted ")
    if not sep:
        return text
    if len(emitted) > limit:
        emitted = emitted[: limit - 1] + "…"
    return f"{head}<br>emitted {_html.escape(emitted, quote=False)}"


def _counted_title(text: str, s) -> str:
    """`viz.decoding.step_label`'s caption with its counts read as the lab names them: "1 node", not "1 nodes", and a
    step that proposed nothing called a plain step instead of "0 of 0 proposed accepted"."""
    n = len(s.tree_tokens)
    said = f"{n} nodes, {s.accepted} of {s.proposed} proposed accepted"
    nodes = f"{n} node{'s' * (n != 1)}"
    told = f"{nodes}, a plain step (nothing proposed)" if s.proposed == 0 else said.replace(f"{n} nodes", nodes, 1)
    return text.replace(said, told, 1) if text else text


def lab_step_tree_figure(result, step: int = 0, tokenizer=None) -> go.Figure:
    """`step`'s verified tree (`viz.decoding.step_tree_figure`) in the lab's colours: the root (the last token
    already emitted) dark gray, the accepted drafts green on the accepted path, the drafts the target rejected
    red, non-candidate nodes (a lookahead window) hollow gray; and the token the target emitted itself after the
    last accepted node — the bonus, blue; a plain step's only token, gray — drawn as a node of its own under
    that node (a dashed edge, in a column right of the tree), so no rejected draft wears the bonus's colour. A
    step cut short by an end-of-text token inside the accepted path emits no bonus and draws none."""
    fig = step_tree_figure(result, step, tokenizer)
    s = result.steps[step]
    fig.layout.title.text = _counted_title(fig.layout.title.text, s)
    path = list(s.path)
    candidate = s.tree_candidate or [True] * len(s.tree_tokens)
    nodes = next(t for t in fig.data if t.name == "nodes")
    colors = []
    for n in range(len(s.tree_tokens)):
        if n == 0:
            colors.append(TREE_COLORS["root"])
        elif n in path:
            colors.append(TREE_COLORS["accepted draft"])
        else:
            colors.append(TREE_COLORS["rejected draft"] if candidate[n] else "#ffffff")
    nodes.marker.color = colors
    nodes.customdata = [
        [*row[:2], row[2], "root" if n == 0 else "accepted" if n in path else "rejected" if candidate[n] else
         "never a candidate"] for n, row in enumerate(nodes.customdata)
    ]  # fmt: skip
    nodes.hovertemplate = (
        "node %{customdata[0]} (%{customdata[3]})<br>token id %{customdata[1]}<br>depth %{customdata[2]}<extra></extra>"
    )
    if any(candidate[n] and n not in path for n in range(1, len(s.tree_tokens))):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="rejected draft", hoverinfo="skip",
                                 marker={"size": 12, "color": TREE_COLORS["rejected draft"],
                                         "line": {"width": 1, "color": "#333"}}))  # fmt: skip
    last = path[-1] if path else 0
    bonus_at = len(path) - 1  # emitted = the accepted drafts (path[1:]) and then the bonus
    if bonus_at < len(s.emitted):
        kind = "plain step" if s.proposed == 0 else "bonus"
        xs = [x for x in nodes.x if x is not None]
        ys = dict(zip(range(len(nodes.x)), nodes.y, strict=True))
        x0, y0, bx, by = nodes.x[last], ys[last], max(xs) + 1.0, ys[last] - 1.0
        text = step_pieces(result, tokenizer)[step][bonus_at] or PARTIAL
        edge = {"color": TREE_COLORS[kind], "width": 2, "dash": "dash"}
        fig.add_trace(go.Scatter(x=[x0, bx], y=[y0, by], mode="lines", name="bonus edge", showlegend=False, line=edge,
                                 hoverinfo="skip"))  # fmt: skip
        fig.add_trace(go.Scatter(
            x=[bx], y=[by], mode="markers+text", name=kind, text=[visible(text)], textposition="middle right",
            marker={"size": 14, "color": TREE_COLORS[kind], "symbol": "diamond", "line": {"width": 1, "color": "#333"}},
            hovertemplate=(f"{kind}: the target's own token after node {last}, id {s.emitted[bonus_at]}"
                           "<extra></extra>"),
        ))  # fmt: skip
        depth = int(round(-by))
        ticks = sorted({*fig.layout.yaxis.tickvals, -depth})
        fig.update_layout(
            template=TEMPLATE,
            xaxis={"range": [fig.layout.xaxis.range[0], bx + 1.0]},
            yaxis={"tickvals": ticks, "ticktext": [str(-t) for t in ticks]},
            height=max(fig.layout.height, 90 * (depth + 2)),
        )
    fig.update_layout(template=TEMPLATE, showlegend=True)
    return fig


def steps_slider_figure(lab, tokenizer=None, step: int = 0, max_steps: int = 64) -> go.Figure:
    """Each step's tree (`step_tree_figure`) in one figure; a plotly slider shows one step at a time.

    Only the first `max_steps` steps are included (the stored HTML grows with every trace). At most the
    output area's width (the trees' own limit) and MAX_HEIGHT px high; the caption on two lines."""
    steps = lab.result.steps[:max_steps]
    if not steps:
        raise ValueError("this result has no steps to draw (stopped before the first step?)")
    step = min(max(step, 0), len(steps) - 1)
    fig, owner, views = go.Figure(), [], []
    for s in range(len(steps)):
        f = lab_step_tree_figure(lab.result, s, tokenizer)
        for trace in f.data:
            trace.visible = s == step
            trace.showlegend = trace.name in TREE_LEGEND
            fig.add_trace(trace)
            owner.append(s)
        lay = f.layout
        views.append(
            {
                "title.text": _wrapped_title(lay.title.text),
                "xaxis.range": list(lay.xaxis.range),
                "yaxis.tickvals": list(lay.yaxis.tickvals),
                "yaxis.ticktext": list(lay.yaxis.ticktext),
                "yaxis.range": [min(lay.yaxis.tickvals) - 0.5, 0.5],
                "_size": (lay.width, lay.height),
            }
        )
    sizes = [v.pop("_size") for v in views]
    slider = [
        {"label": str(s), "method": "update", "args": [{"visible": [o == s for o in owner]}, views[s]]}
        for s in range(len(steps))
    ]
    fig.update_layout(
        template=TEMPLATE,
        width=max(620, *(w for w, _ in sizes)),  # the caption's two lines need the room; the trees cap their own
        height=min(max(h for _, h in sizes), MAX_HEIGHT) + 110,
        margin={"t": 110},
        sliders=[{"active": step, "steps": slider, "currentvalue": {"prefix": "step "}, "pad": {"t": 40}}],
        xaxis={"visible": False},
        yaxis_title_text="depth (tokens after the root)",
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom"},
    )
    fig.update_layout(template=TEMPLATE, **{k.replace(".", "_"): v for k, v in views[step].items()})
    return fig
