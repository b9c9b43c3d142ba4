"""Figures and HTML for tree decoding (notebook 06, Medusa): per-step trees, emitted text by step, the
auto-chosen tree budget, the speed table, and the drift of typical acceptance.

Data in, `plotly.graph_objects.Figure` / HTML / DataFrame out; nothing here calls a model.

    step_tree_figure(result, step, tokenizer)   one step's verified tree, accepted path highlighted (the
                                                slider's callback, via `step_callback(result, tokenizer)`)
    steps_html(result, tokenizer)               the emitted text, one colour per step (bold = accepted draft)
    budget_figure(choice)                       E[L](n) and predicted speed-up per node budget n (`BudgetChoice`)
    speed_table(summary)                        `run_benchmark(...)["summary"]` as a table
    drift_frame(drifts, floors), drift_figure   `typical_drift` vs `drift_baseline` (noise floor) per ε and T

Notation: p = target, q = draft; "mean accepted" = tokens emitted per target forward, bonus included.
"""

from __future__ import annotations

import html as _html
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..text import PARTIAL, token_pieces
from .figures import TEMPLATE, legend_below
from .tokens import step_pieces
from .trees import tree_figure

__all__ = [
    "step_tree_figure",
    "step_callback",
    "step_label",
    "steps_html",
    "show_steps",
    "budget_figure",
    "speed_table",
    "drift_frame",
    "drift_figure",
    "STEP_COLORS",
]

# pastel backgrounds cycled over steps (neighbouring steps always differ)
STEP_COLORS = ("#fde2b8", "#c7ecc5", "#cfe0fb", "#f7c9e3", "#e2d5f7", "#d4f1ef")


def _check_step(result, step: int) -> None:
    if not result.steps:
        raise ValueError("this result has no per-step trace: run generate(..., trace=True)")
    if not 0 <= step < len(result.steps):
        raise IndexError(f"step {step} out of range: the result has steps 0..{len(result.steps) - 1}")


def step_label(result, step: int, tokenizer=None) -> str:
    """'step s (of steps 0–N): n nodes, a of k proposed accepted, emitted "…"' for one step of a traced
    GenerationResult. Steps are counted from 0, as the trace, the sliders and `trace_table` count them, and the
    range is spelled out so that "step 1" of 31 steps never reads as "1/30" beside "of 31"."""
    _check_step(result, step)
    s = result.steps[step]
    before = result.prompt_tokens + [t for x in result.steps[:step] for t in x.emitted]
    text = "".join(token_pieces(s.emitted, tokenizer, before))
    return (
        f"step {step} (of steps 0–{len(result.steps) - 1}): {len(s.tree_tokens)} nodes, {s.accepted} of {s.proposed} "
        f"proposed accepted, emitted {text!r}"
        + (" (a byte of a character a later token completes)" if s.emitted and not text else "")
    )


def step_tree_figure(result, step: int = 0, tokenizer=None) -> go.Figure:
    """The tree verified at `step` (its root is the last accepted token) with the accepted path in green.

    The slider's callback in notebook 06; raises IndexError for a step the result does not have.
    """
    _check_step(result, step)
    s = result.steps[step]
    fig = tree_figure(s.tree, tokenizer, path=s.path, title=step_label(result, step, tokenizer))
    fig.update_layout(template=TEMPLATE, title_font_size=13)
    return fig


def step_callback(result, tokenizer=None):
    """The slider's callback: `show_step(step) -> step_tree_figure(result, step, tokenizer)`.

    A named plain function (ipywidgets' `interact` needs a `__name__`, which `functools.partial` lacks):
    `interact(step_callback(result, tok), step=IntSlider(...))`.
    """

    def show_step(step: int) -> go.Figure:
        return step_tree_figure(result, step, tokenizer)

    return show_step


def steps_html(result, tokenizer=None, *, legend: bool = True) -> str:
    """The emitted tokens as HTML, each step (one target forward) on its own background colour.

    Accepted draft tokens are bold and underlined, the target's bonus token plain; hover shows the step.
    """
    if not result.steps and result.tokens:
        raise ValueError("this result has no per-step trace: run generate(..., trace=True)")
    parts = []
    pieces = step_pieces(result, tokenizer)
    for i, s in enumerate(result.steps):
        color = STEP_COLORS[i % len(STEP_COLORS)]
        n_acc = min(s.accepted, len(s.emitted))
        spans = []
        for j, tok in enumerate(s.emitted):
            drafted = j < n_acc
            style = f"background:{color};" + ("font-weight:bold;text-decoration:underline;" if drafted else "")
            text = pieces[i][j] or PARTIAL
            shown = _html.escape(text).replace("\n", "↵<br>")
            if text.strip() == "" and "\n" not in text:
                shown = shown.replace(" ", "&nbsp;") or "&#8203;"
            title = f"step {i}: {'accepted draft' if drafted else 'bonus (target)'} token, id {tok}"
            spans.append(f'<span class="sd-tok" style="{style}" title="{_html.escape(title)}">{shown}</span>')
        parts.append(f'<span class="sd-step" data-step="{i}">{"".join(spans)}</span>')
    body = (
        '<div class="sd-steps" style="font-family:ui-monospace,monospace;font-size:13px;line-height:1.9;'
        f'white-space:normal;word-break:break-word">{"".join(parts)}</div>'
    )
    head = ""
    if legend:
        head = (
            '<div style="font-size:12px;margin-bottom:4px">one colour per step (target forward); '
            "<b><u>bold underlined</u></b> = accepted draft token, plain = the target's bonus token; "
            f"{len(result.tokens)} tokens in {result.forwards} forwards, mean accepted "
            f"{result.mean_accepted:.2f}</div>"
        )
    return f"<div>{head}{body}</div>"


def show_steps(result, tokenizer=None, **kwargs):
    """`steps_html` as an `IPython.display.HTML` object."""
    from IPython.display import HTML

    return HTML(steps_html(result, tokenizer, **kwargs))


def budget_figure(choice, title: str | None = None) -> go.Figure:
    """How `tree="auto"` chose: per node budget n, E[L](n) (left) and the predicted speed-up (right).

    choice: a `trees.BudgetChoice` (its `table`: one row per budget with expected_length and rate);
    the chosen budget is marked. Speed-up = rate(n) / rate(0), rate = E[L] / (t(n + 1) + heads).
    """
    table = list(choice.table)
    if not table:
        raise ValueError("this BudgetChoice has no table to draw")
    n = [row["budget"] for row in table]
    el = [row["expected_length"] for row in table]
    base = table[0]["rate"]
    speedup = [row["rate"] / base for row in table]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("E[L]: tokens per step (bonus included)", "predicted speed-up vs plain decoding"),
        horizontal_spacing=0.12,
    )
    fig.add_trace(go.Scatter(x=n, y=el, mode="lines+markers", name="E[L](n)"), row=1, col=1)
    fig.add_trace(go.Scatter(x=n, y=speedup, mode="lines+markers", name="speed-up(n)"), row=1, col=2)
    i = n.index(choice.budget)
    for col, y in ((1, el[i]), (2, speedup[i])):
        fig.add_trace(
            go.Scatter(
                x=[choice.budget],
                y=[y],
                mode="markers",
                marker={"size": 14, "color": "#d62728", "symbol": "star"},
                name=f"chosen: n = {choice.budget}",
                showlegend=col == 1,
            ),
            row=1,
            col=col,
        )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", row=1, col=2)
    fig.update_xaxes(title_text="node budget n (below the root)")
    fig.update_yaxes(title_text="E[L] (tokens per step)", row=1, col=1)
    fig.update_yaxes(title_text="predicted speed-up (×)", row=1, col=2)
    fig.update_layout(
        title=title
        or f"tree='auto': n = {choice.budget} nodes, depth {choice.depth}, E[L] = {choice.expected_length:.2f}",
        template=TEMPLATE,
        width=900,
        height=380,
        legend=legend_below(),
    )
    return fig


def speed_table(summary: Mapping[str, Mapping], baseline: str = "autoregressive"):
    """`run_benchmark(...)["summary"]` -> DataFrame: tokens/s, mean accepted, speed-up, identical output, and the
    prompts with the new tokens summed over them (the bench's `new_tokens` is that sum: a prompt that ends at its
    end-of-text token contributes fewer than max_new_tokens). Each column keeps its own dtype: counts stay ints."""
    import pandas as pd

    rows = {}
    for label, s in summary.items():
        rows[label] = {
            "tokens/s": s["tokens_per_s"],
            "mean accepted": s["mean_accepted"],
            f"speed-up vs {baseline}": s.get("speedup"),
            "identical to autoregressive": s.get("identical_to_autoregressive"),
            "prompts": s.get("prompts"),
            "new tokens (all prompts)": s.get("new_tokens"),
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")


def drift_frame(drifts: Sequence[Mapping], floors: Mapping[float, Mapping]):
    """One row per (temperature, ε): TV and KL of typical acceptance, and the exact rule's noise floor.

    drifts: `typical_drift(...)` results; floors: temperature -> `drift_baseline(...)` at the same trials.
    """
    import pandas as pd

    rows = []
    for d in drifts:
        floor = floors[d["temperature"]]
        rows.append(
            {
                "temperature": d["temperature"],
                "epsilon": d["epsilon"],
                "delta": round(d["delta"], 4),
                "TV": d["tv"],
                "TV floor (exact rule)": floor["tv"],
                "KL (nats)": d["kl"],
                "KL floor": floor["kl"],
                "chi2 p-value": d["chi2"]["p_value"],
                "trials": d["trials"],
            }
        )
    return pd.DataFrame(rows).set_index(["temperature", "epsilon"]).sort_index()


def drift_figure(frame, title: str | None = None) -> go.Figure:
    """TV (left) and KL (right) of typical acceptance against ε, a line per temperature; dashed: the floor."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("total variation from exact sampling", "KL(empirical ‖ exact), nats"),
        horizontal_spacing=0.12,
    )
    palette = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for i, temp in enumerate(sorted(frame.index.get_level_values("temperature").unique())):
        sub = frame.xs(temp, level="temperature")
        eps = list(sub.index)
        color = palette[i % len(palette)]
        for col, (value, floor) in enumerate((("TV", "TV floor (exact rule)"), ("KL (nats)", "KL floor")), start=1):
            fig.add_trace(
                go.Scatter(
                    x=eps,
                    y=list(sub[value]),
                    mode="lines+markers",
                    line={"color": color},
                    name=f"typical, T = {temp:g}",
                    legendgroup=f"t{temp}",
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
            fig.add_trace(
                go.Scatter(
                    x=eps,
                    y=list(sub[floor]),
                    mode="lines",
                    line={"color": color, "dash": "dash"},
                    name=f"exact rule (noise floor), T = {temp:g}",
                    legendgroup=f"t{temp}",
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
    # Ticks at the measured ε only: plotly's default log ticks label the minor steps too ("0.01, 2, 5, 0.1, 2").
    eps = sorted(frame.index.get_level_values("epsilon").unique())
    fig.update_xaxes(title_text="ε (δ = √ε)", type="log", tickvals=eps, ticktext=[f"{e:g}" for e in eps])
    fig.update_yaxes(title_text="TV (0: identical, 1: disjoint)", row=1, col=1)
    fig.update_yaxes(title_text="KL (nats)", row=1, col=2)
    fig.update_layout(
        title=title or "typical acceptance is lossy: distance of its first tokens from exact sampling",
        template=TEMPLATE,
        width=900,
        height=400,
        legend={"orientation": "h", "y": -0.25},
    )
    return fig
