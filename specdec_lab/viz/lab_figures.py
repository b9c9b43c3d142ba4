"""What the speedup lab shows of one `LabResult` (specdec_lab/lab/experiment.py): data in, HTML / figures out.

    provenance_html(lab, tokenizer)      the emitted text, each token coloured by how it was produced
    accepted_figure(lab)                 tokens per step, split by provenance, with the candidates offered
    numbers_html(lab), numbers_frame(lab) tokens/s of both runs, speed-up, mean accepted, identical
    steps_slider_figure(lab, tokenizer)  every step's tree in one plotly figure with its own slider: works
                                         in a stored notebook with no kernel (lab/speedup.py's is ipywidgets)

Colours: accepted draft = green, bonus = blue (as in viz/tokens.py), plain step = gray.
"""

from __future__ import annotations

import html as _html

import plotly.graph_objects as go

from ..text import PARTIAL
from .decoding import step_tree_figure
from .figures import TEMPLATE
from .tokens import COLORS, step_pieces

__all__ = ["PROVENANCE_COLORS", "provenance_html", "accepted_figure", "numbers_html", "numbers_frame",
           "steps_slider_figure"]  # fmt: skip

PROVENANCE_COLORS = {"accepted draft": COLORS["accepted"], "bonus": COLORS["target"], "plain step": "#e3e3e3"}
_BAR_COLORS = {"accepted draft": "#2ca02c", "bonus": "#1f77b4", "plain step": "#aaaaaa"}
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
        legend={"orientation": "h", "y": -0.25},
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
        f = step_tree_figure(lab.result, s, tokenizer)
        for trace in f.data:
            trace.visible = s == step
            trace.showlegend = trace.name == "accepted path"
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
        legend={"orientation": "h", "y": 1.0, "yanchor": "bottom"},
    )
    fig.update_layout(template=TEMPLATE, **{k.replace(".", "_"): v for k, v in views[step].items()})
    return fig
