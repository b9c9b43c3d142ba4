"""Notebook 07 (Jacobi and Lookahead decoding): its figures and tables, the pool recorder, and its sweep.

Data in, `plotly.graph_objects.Figure` / DataFrame out; only `run_sweep` runs a model (through the
benchmark harness), and `RecordingLookahead` is a `LookaheadProposer` whose `info()` also reports the pool.

    jacobi_frame(result), jacobi_figure(result)      the Jacobi trajectory: per step and block offset, was
                                                     the guess accepted, right behind a wrong one, or wrong
    node_kinds(tree, columns)                        "root" / "window" / "ngram" per node of a lookahead tree
    lookahead_tree_figure(tree, columns)             one lookahead step's tree: the (N − 1) x W window as a
                                                     grid (columns = n-grams in the making), the verification
                                                     trie hanging left of the root
    lookahead_mask_figure(tree, columns)             its attention mask, cells coloured by the key's branch,
                                                     branch boundaries drawn
    lookahead_step_figure(result, step)              a traced run's step (the slider's callback, via
                                                     `lookahead_step_callback(result, tokenizer)`)
    RecordingLookahead, pool_frame, pool_figure      the pool and its hits over a decode
    GridPoint, grid, run_sweep, sweep_frame,         the W x N x G sweep: one JSON per grid point (atomic,
    sweep_figure                                     skipped on resume when its parameters are identical)
    flat_curve, predicted_speedups, cost_figure      the same sweep on a measured and a flat cost curve

A lookahead tree (`proposers/lookahead.py`): node 0 is the root = window cell (0, 0); window cell (l, i) is
node l·C + i for C columns (non-candidates); the verification trie's nodes (candidates) follow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cost import CostCurve
from ..proposers.lookahead import TEXT, WINDOW, LookaheadProposer
from .tokens import token_text
from .trees import _readable

__all__ = [
    "jacobi_frame",
    "jacobi_figure",
    "JACOBI_STATES",
    "node_kinds",
    "window_cell",
    "lookahead_tree_figure",
    "lookahead_mask_figure",
    "lookahead_step_figure",
    "lookahead_step_callback",
    "KIND_COLORS",
    "RecordingLookahead",
    "pool_frame",
    "pool_figure",
    "GridPoint",
    "grid",
    "parse_ints",
    "traced_runner",
    "point_params",
    "point_path",
    "run_sweep",
    "sweep_frame",
    "sweep_figure",
    "flat_curve",
    "predicted_speedups",
    "cost_figure",
]

KIND_COLORS = {"root": "#ff7f0e", "window": "#9e9e9e", "ngram": "#1f77b4", "accepted": "#2ca02c"}


def _text(token: int, tokenizer=None) -> str:
    return _readable(token_text(int(token), tokenizer))


def _need_steps(result) -> None:
    if not result.steps:
        raise ValueError("this result has no per-step trace: run generate(..., trace=True)")


# ---- 1. the Jacobi trajectory -------------------------------------------------------------------------
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
                    "guess text": _text(guess, tokenizer),
                    "update text": _text(update, tokenizer),
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
        template="plotly_white",
        width=max(560, 70 * width + 260),
        height=max(320, 16 * steps + 160),
        xaxis={"title": "block offset after the root", "dtick": 1, "side": "top"},
        yaxis={"title": "step (one target forward)", "autorange": "reversed"},
    )
    return fig


# ---- 2. one lookahead step: the tree and its mask -----------------------------------------------------
def node_kinds(tree, columns: int) -> list[str]:
    """Kinds: "root" (node 0 = window cell (0, 0)), "window" (non-candidate cells) or "ngram" (verification trie)."""
    candidate = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
    if columns < 1 and not all(candidate):
        raise ValueError("a tree with window cells needs columns >= 1 (the step's info()['columns'])")
    return ["root"] + ["ngram" if c else "window" for c in candidate[1:]]


def window_cell(node: int, columns: int) -> tuple[int, int]:
    """(level, column) of window node `node`: cell (l, i) is node l·C + i."""
    return divmod(node, columns)


def _trie_layout(tree, kinds) -> dict[int, tuple[float, float]]:
    """Trie nodes left of the root: x = −(1 + leaf rank of their first leaf), y = −depth (as the window's
    column 0, itself a chain below the root)."""
    children: dict[int, list[int]] = {}
    for n, p in enumerate(tree.parents.tolist()):
        if n and kinds[n] == "ngram":
            children.setdefault(p, []).append(n)
    pos, leaf = {}, [0]

    def walk(node: int, depth: int) -> float:
        kids = children.get(node, [])
        if not kids:
            x = -1.0 - leaf[0]
            leaf[0] += 1
        else:
            x = max(walk(k, depth + 1) for k in kids)  # the first (rightmost) child's column
        pos[node] = (x, -float(depth))
        return x

    for k in children.get(0, []):
        walk(k, 1)
    return pos


def lookahead_tree_figure(tree, columns: int, tokenizer=None, path=None, title: str | None = None) -> go.Figure:
    """One lookahead step's tree. The window as a grid right of the root: cell (l, i) at x = i, y = −l
    (its position offset is l + i; a column reads top-down as the n-gram it will harvest); the verification
    trie left of the root, one n-gram per column, y = −offset. Colours: root, window (hollow, never
    accepted), verification n-grams; `path` (accepted node indices) in green."""
    kinds = node_kinds(tree, columns)
    depths = tree.depths.tolist()
    pos = {0: (0.0, 0.0)}
    for n, kind in enumerate(kinds):
        if kind == "window":
            level, col = window_cell(n, columns)
            pos[n] = (float(col), -float(level))
    pos.update(_trie_layout(tree, kinds))
    parents = tree.parents.tolist()
    fig = go.Figure()
    for kind, color, dash in (("window", KIND_COLORS["window"], "dot"), ("ngram", KIND_COLORS["ngram"], "solid")):
        ex, ey = [], []
        for n in range(1, len(tree)):
            if kinds[n] == kind:
                ex += [pos[parents[n]][0], pos[n][0], None]
                ey += [pos[parents[n]][1], pos[n][1], None]
        fig.add_trace(
            go.Scatter(
                x=ex,
                y=ey,
                mode="lines",
                line={"color": color, "width": 1.5, "dash": dash},
                hoverinfo="skip",
                showlegend=False,
            )
        )
    if path is not None and len(path) > 1:
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0] for n in path],
                y=[pos[n][1] for n in path],
                mode="lines",
                name="accepted path",
                line={"color": KIND_COLORS["accepted"], "width": 5},
                hoverinfo="skip",
            )
        )
    on_path = set(path or [])
    names = {
        "root": "root (last accepted token)",
        "window": "window cell (never accepted)",
        "ngram": "verification n-gram",
    }
    for kind in ("root", "window", "ngram"):
        nodes = [n for n in range(len(tree)) if kinds[n] == kind]
        if not nodes:
            continue
        hover = []
        for n in nodes:
            where = f"cell {window_cell(n, columns)}" if kind == "window" else kind
            hover.append(f"node {n} ({where}): {_text(tree.tokens[n], tokenizer)!r}, position offset {depths[n]}")
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0] for n in nodes],
                y=[pos[n][1] for n in nodes],
                mode="markers+text",
                name=names[kind],
                marker={
                    "size": 16,
                    "color": [
                        KIND_COLORS["accepted"] if n in on_path and kind == "ngram" else KIND_COLORS[kind]
                        for n in nodes
                    ],
                    "symbol": "circle-open" if kind == "window" else "circle",
                    "line": {"width": 2 if kind == "window" else 1, "color": KIND_COLORS[kind]},
                },
                text=[_text(tree.tokens[n], tokenizer)[:10] for n in nodes],
                textposition="top center",
                textfont={"size": 10},
                customdata=hover,
                hovertemplate="%{customdata}<extra></extra>",
            )
        )
    xs = [p[0] for p in pos.values()]
    levels = int(-min(p[1] for p in pos.values()))
    windows = sum(k == "window" for k in kinds)
    grams = sum(1 for n in range(1, len(tree)) if kinds[n] == "ngram" and parents[n] == 0)
    if windows:
        fig.add_annotation(
            x=(columns - 1) / 2, y=0.55, text="lookahead branch: the window", showarrow=False, font={"color": "#555"}
        )
    if grams:
        fig.add_annotation(
            x=min(xs) / 2 - 0.5,
            y=0.55,
            text="verification branch",
            showarrow=False,
            font={"color": KIND_COLORS["ngram"]},
        )
    fig.update_layout(
        title=title or f"one lookahead step: {len(tree)} nodes ({windows} window cells, {grams} n-grams verified)",
        template="plotly_white",
        width=max(520, 85 * (max(xs) - min(xs) + 3)),
        height=max(300, 95 * (levels + 2) + 60),
        legend={"orientation": "h", "y": -0.08},
        xaxis={"visible": False, "range": [min(xs) - 0.8, max(xs) + 0.8]},
        yaxis={
            "title": "level (window) / offset (n-grams)",
            "tickvals": [-d for d in range(levels + 1)],
            "ticktext": [str(d) for d in range(levels + 1)],
            "zeroline": False,
            "range": [-levels - 0.5, 0.9],
        },
    )
    return fig


def lookahead_mask_figure(
    tree, columns: int, tokenizer=None, cache_length: int = 0, title: str | None = None
) -> go.Figure:
    """The (N, N) tree attention mask of a lookahead step, row = query, column = key; a visible cell is
    coloured by the key's branch (root / window / n-gram), lines separate the branches. Labels
    "i r|w(l,i)|g:token" keep repeated tokens apart. cache_length > 0 prepends the (all-visible) prefix."""
    kinds = node_kinds(tree, columns)
    code = {"root": 1, "window": 2, "ngram": 3}
    labels = []
    for n, kind in enumerate(kinds):
        tag = "r" if kind == "root" else f"w{window_cell(n, columns)}".replace(" ", "") if kind == "window" else "g"
        labels.append(f"{n} {tag}:{_text(tree.tokens[n], tokenizer)}")
    mask = tree.mask.cpu().tolist()
    z = [[code[kinds[j]] if mask[i][j] else 0 for j in range(len(tree))] for i in range(len(tree))]
    cols, shift = list(labels), 0
    if cache_length > 0:
        cols, shift = [f"prefix ×{cache_length}"] + cols, 1
        z = [[1] + row for row in z]
    scale = [
        [0, "#f4f4f4"],
        [0.25, "#f4f4f4"],
        [0.25, KIND_COLORS["root"]],
        [0.5, KIND_COLORS["root"]],
        [0.5, KIND_COLORS["window"]],
        [0.75, KIND_COLORS["window"]],
        [0.75, KIND_COLORS["ngram"]],
        [1, KIND_COLORS["ngram"]],
    ]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=labels,
            zmin=-0.5,
            zmax=3.5,
            colorscale=scale,
            xgap=1,
            ygap=1,
            name="mask",
            colorbar={
                "tickvals": [0, 1, 2, 3],
                "ticktext": ["hidden", "root / prefix", "window", "n-gram"],
                "title": "key",
                "len": 0.5,
            },
            hovertemplate="query %{y} → key %{x}<extra></extra>",
        )
    )
    first_gram = next((n for n, k in enumerate(kinds) if k == "ngram"), len(tree))
    bounds = sorted({1, first_gram} - {len(tree)})
    for b in bounds:
        for x0, x1, y0, y1 in (
            (b + shift - 0.5, b + shift - 0.5, -0.5, len(tree) - 0.5),
            (-0.5, len(cols) - 0.5, b - 0.5, b - 0.5),
        ):
            fig.add_shape(type="line", x0=x0, x1=x1, y0=y0, y1=y1, line={"color": "#d62728", "width": 2})
    size = 26 * len(cols) + 200
    fig.update_layout(
        title={"text": title or "lookahead attention mask (row: query, column: key)", "y": 0.98, "yanchor": "top"},
        template="plotly_white",
        width=max(size + 80, 620),
        height=26 * len(labels) + 220,
        margin={"t": 190},
        xaxis={"type": "category", "side": "top", "tickangle": -60},
        yaxis={"type": "category", "autorange": "reversed", "title": "query node"},
    )
    return fig


def lookahead_step_figure(result, step: int, tokenizer=None) -> go.Figure:
    """The tree of `step` of a traced lookahead run (`lookahead_tree_figure`, its accepted path in green)."""
    _need_steps(result)
    if not 0 <= step < len(result.steps):
        raise IndexError(f"step {step} out of range: the result has steps 0..{len(result.steps) - 1}")
    s = result.steps[step]
    info = s.info
    emitted = "".join(token_text(t, tokenizer) for t in s.emitted)
    title = (
        f"step {step}: window {info.get('columns', 0)} columns x {info.get('levels', 0)} levels, "
        f"{info.get('grams', 0)} n-grams verified, {s.accepted} accepted, emitted {emitted!r}"
    )
    return lookahead_tree_figure(s.tree, info.get("columns", 0), tokenizer, path=s.path, title=title)


def lookahead_step_callback(result, tokenizer=None):
    """The slider's callback: `show_step(step) -> lookahead_step_figure(result, step, tokenizer)`."""

    def show_step(step: int) -> go.Figure:
        return lookahead_step_figure(result, step, tokenizer)

    return show_step


# ---- 3. the pool over a decode ------------------------------------------------------------------------
class RecordingLookahead(LookaheadProposer):
    """A LookaheadProposer whose `info()` also reports the pool after the step: `pool_keys` (first tokens),
    `pool_grams` (n-grams) and `pool_window` (of those, harvested from the window and not seen in the
    text). Decoding is unchanged: build it with a `LookaheadConfig` and pass `generate(proposer=...)`."""

    def info(self) -> dict:
        sources = [s for grams in self.pool.table.values() for s in grams.values()]
        return {
            **super().info(),
            "pool_keys": len(self.pool.table),
            "pool_grams": len(sources),
            "pool_window": sources.count(WINDOW),
        }


def pool_frame(result):
    """One row per step of a traced lookahead run: the window verified (cells), n-grams verified, accepted
    draft tokens credited to the text / the window, emitted tokens, and the pool (with `RecordingLookahead`)."""
    import pandas as pd

    _need_steps(result)
    rows = []
    for s, step in enumerate(result.steps):
        info = step.info
        if "credit" not in info:
            raise ValueError("not a lookahead trace: its steps' info has no 'credit' (method='lookahead')")
        a = info["accepted"]
        row = {
            "step": s,
            "root": step.tree_tokens[0],
            "W": info["W"],
            "window cells": step.extra,
            "n-grams verified": info["grams"],
            "n-gram nodes": step.proposed,
            "nodes": len(step.tree_tokens),
            "accepted": a,
            "accepted (text)": a if info["credit"] == TEXT else 0,
            "accepted (window)": a if info["credit"] == WINDOW else 0,
            "emitted": len(step.emitted),
        }
        if "pool_grams" in info:
            row |= {
                "pool n-grams": info["pool_grams"],
                "pool n-grams (window)": info["pool_window"],
                "pool keys": info["pool_keys"],
            }
        rows.append(row)
    frame = pd.DataFrame(rows).set_index("step")
    verified = (frame["n-grams verified"] > 0).cumsum()
    frame["hit rate so far"] = (frame["accepted"] > 0).cumsum() / verified.where(verified > 0)
    return frame


def pool_figure(frame, title: str | None = None) -> go.Figure:
    """Three panels over the steps: the pool (n-grams from the text and from the window), the accepted
    draft tokens by credit with the n-grams verified, and the running hit rate (steps with an accepted
    n-gram token / steps that verified any)."""
    has_pool = "pool n-grams" in frame
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        row_heights=[0.35, 0.4, 0.25],
        subplot_titles=("the pool", "accepted draft tokens per step, and n-grams verified", "hit rate so far"),
    )
    x = list(frame.index)
    if has_pool:
        text = frame["pool n-grams"] - frame["pool n-grams (window)"]
        fig.add_trace(
            go.Scatter(x=x, y=text, name="pool: text n-grams", stackgroup="pool", line={"color": "#8c564b"}),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=frame["pool n-grams (window)"],
                name="pool: window n-grams",
                stackgroup="pool",
                line={"color": KIND_COLORS["window"]},
            ),
            row=1,
            col=1,
        )
    for col, color in (("accepted (text)", "#8c564b"), ("accepted (window)", KIND_COLORS["window"])):
        fig.add_trace(go.Bar(x=x, y=frame[col], name=col, marker_color=color), row=2, col=1)
    fig.add_trace(
        go.Scatter(
            x=x,
            y=frame["n-grams verified"],
            mode="markers",
            name="n-grams verified (root's)",
            marker={"color": KIND_COLORS["ngram"], "symbol": "line-ew-open", "size": 10},
        ),
        row=2,
        col=1,
    )
    fig.add_trace(
        go.Scatter(x=x, y=frame["hit rate so far"], mode="lines", name="hit rate", line={"color": "#2ca02c"}),
        row=3,
        col=1,
    )
    fig.update_layout(
        title=title or f"pool and hits over {len(frame)} steps",
        template="plotly_white",
        barmode="stack",
        width=900,
        height=700,
        legend={"orientation": "h", "y": -0.08},
    )
    fig.update_yaxes(title_text="n-grams", row=1, col=1)
    fig.update_yaxes(title_text="tokens", row=2, col=1)
    fig.update_yaxes(range=[0, 1.05], row=3, col=1)
    fig.update_xaxes(title_text="step", row=3, col=1)
    return fig


# ---- 4. the sweep -------------------------------------------------------------------------------------
TRACED = "traced"  # the bench anchor that runs our loop with a trace (its info gets per-step node counts)
SWEEP_FORMAT = 1  # bump when a record's content changes: older files then no longer match on resume


def traced_runner(model, eos_ids: list[int], method: str = "lookahead", **params):
    """Bench runner factory: `generate(method, trace=True, **params)`, with per-step `nodes` (tokens in the
    verify forward, root included) and `extra` (window cells) added to the proposer's summary. The trace
    costs microseconds per step (a StepTrace; device syncs are no-ops on a CPU)."""
    from ..bench.runner import RunOutput
    from ..generate import generate
    from ..proposers import make_proposer

    make_proposer(method, **params)  # a bad parameter fails here, before any timing

    def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
        r = generate(
            model,
            ids,
            method=method,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos_ids or None,
            seed=seed,
            trace=True,
            **params,
        )
        info = {**r.proposer, "nodes": [len(s.tree_tokens) for s in r.steps], "extra": [s.extra for s in r.steps]}
        return RunOutput(tokens=r.tokens, forwards=r.forwards, stop_reason=r.stop_reason, info=info)

    return run


def _register_traced() -> None:
    from ..bench.runner import ANCHORS, register_anchor

    if ANCHORS.get(TRACED) is not traced_runner:
        register_anchor(TRACED, traced_runner)


@dataclass(frozen=True)
class GridPoint:
    W: int
    N: int
    G: int

    @property
    def spec(self) -> str:
        """The benchmark method spec (and row label) of this point."""
        return f"{TRACED}:method=lookahead:W={self.W}:N={self.N}:G={self.G}"


def parse_ints(text: str | Iterable[int]) -> list[int]:
    """ "0,2,4" (a papermill-friendly parameter) or a list -> [0, 2, 4]."""
    if isinstance(text, str):
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    return [int(t) for t in text]


def grid(Ws, Ns, Gs) -> list[GridPoint]:
    """Every (W, N, G), W fastest; W = 0 (no window, pool verification only) once per (N, G)."""
    return [GridPoint(w, n, g) for n in parse_ints(Ns) for g in parse_ints(Gs) for w in parse_ints(Ws)]


def point_params(point: GridPoint, prompts, max_new_tokens: int, model: str, seed: int = 0) -> dict:
    """Everything a point's result depends on; a stored record is reused only when these are identical."""
    ids = [[p.question_id, hashlib.sha256(json.dumps([p.text, p.ids]).encode()).hexdigest()[:12]] for p in prompts]
    return {
        "format": SWEEP_FORMAT,
        "W": point.W,
        "N": point.N,
        "G": point.G,
        "model": model,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "prompts": ids,
    }


def point_path(folder: str | Path, params: Mapping) -> Path:
    """`folder/W{W}_N{N}_G{G}_{hash of all params}.json`: other prompts, lengths or models never collide."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    return Path(folder) / f"W{params['W']}_N{params['N']}_G{params['G']}_{digest}.json"


def _load(path: Path, params: Mapping) -> dict | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None  # absent or unreadable: run it (again)
    return record if record.get("params") == dict(params) else None


def _record(bench: dict, point: GridPoint, params: dict) -> dict:
    from ..bench.harness import BASELINE

    label = point.spec
    s, base = bench["summary"][label], bench["summary"][BASELINE]
    rows = [r for r in bench["rows"] if r["method"] == label]
    base_rows = {r["question_id"]: r for r in bench["rows"] if r["method"] == BASELINE}
    nodes = [n for r in rows for n in r["proposer"]["nodes"]]
    extra = [e for r in rows for e in r["proposer"]["extra"]]
    return {
        "params": params,
        "label": label,
        "speedup": s["speedup"],
        "tokens_per_s": s["tokens_per_s"],
        "baseline_tokens_per_s": base["tokens_per_s"],
        "mean_accepted": s["mean_accepted"],
        "identical": s["identical_to_autoregressive"],
        "new_tokens": s["new_tokens"],
        "seconds": s["seconds"],
        "forwards": sum(r["forwards"] for r in rows),
        "nodes_per_step": sum(nodes) / max(len(nodes), 1),
        "window_nodes_per_step": sum(extra) / max(len(extra), 1),
        "accepted_text": sum(r["proposer"][TEXT] for r in rows),
        "accepted_window": sum(r["proposer"][WINDOW] for r in rows),
        "per_prompt": [
            {
                "question_id": r["question_id"],
                "seconds": r["seconds"],
                "baseline_seconds": base_rows[r["question_id"]]["seconds"],
                "new_tokens": r["new_tokens"],
                "forwards": r["forwards"],
                "identical": r["identical"],
                "nodes": r["proposer"]["nodes"],
                "extra": r["proposer"]["extra"],
            }
            for r in rows
        ],
        "machine": {k: bench["machine"].get(k) for k in ("cpu", "isa", "cores", "torch_threads", "device_name")},
    }


def run_sweep(
    lm,
    prompts,
    points: Sequence[GridPoint],
    folder: str | Path,
    max_new_tokens: int = 48,
    seed: int = 0,
    progress: bool = False,
) -> tuple[list[dict], list[GridPoint]]:
    """Measure every grid point not stored yet; return (a record per point in order, the points run now).

    One `run_benchmark` over autoregressive plus the missing points (warm-up per method, method order
    rotated per prompt, every output checked against autoregressive): each point is timed next to the
    autoregressive runs of the same benchmark, and its record (speed-up, mean accepted, verify nodes per
    step, ...) is written atomically to `point_path(folder, params)`. A point whose file holds identical
    params is loaded instead (resume); anything else about it is measured again.
    """
    from ..bench import run_benchmark
    from ..io import as_prompts, write_json
    from ..models import LoadedModel

    prompts = as_prompts(prompts)
    model = lm.name if isinstance(lm, LoadedModel) else type(lm).__name__
    params = {p: point_params(p, prompts, max_new_tokens, model, seed) for p in points}
    records = {p: _load(point_path(folder, params[p]), params[p]) for p in points}
    todo = [p for p in points if records[p] is None]
    if todo:
        _register_traced()
        bench = run_benchmark(
            lm,
            prompts,
            methods=["autoregressive"] + [p.spec for p in todo],
            max_new_tokens=max_new_tokens,
            seed=seed,
            progress=progress,
        )
        for p in todo:
            records[p] = _record(bench, p, params[p])
            write_json(point_path(folder, params[p]), records[p])
    return [records[p] for p in points], todo


def sweep_frame(records: Sequence[Mapping]):
    """The sweep's table, indexed by (W, N, G)."""
    import pandas as pd

    rows = {}
    for r in records:
        p = r["params"]
        rows[(p["W"], p["N"], p["G"])] = {
            "speed-up vs autoregressive": r["speedup"],
            "tokens/s": r["tokens_per_s"],
            "autoregressive tokens/s": r["baseline_tokens_per_s"],
            "mean accepted": r["mean_accepted"],
            "tokens verified / forward": r["nodes_per_step"],
            "window cells / forward": r["window_nodes_per_step"],
            "accepted: text n-grams": r["accepted_text"],
            "accepted: window n-grams": r["accepted_window"],
            "identical to autoregressive": r["identical"],
        }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["W", "N", "G"])
    return frame


def _series(frame):
    """[(name, W values, row positions)] per (N, G) of a sweep frame."""
    out = []
    for (n, g), part in frame.groupby(level=["N", "G"], sort=True):
        out.append((f"N = {n}, G = {g}", [str(w) for w in part.index.get_level_values("W")], part))
    return out


def sweep_figure(frame, title: str | None = None) -> go.Figure:
    """Three panels against W, one bar per (N, G): speed-up over autoregressive (measured), mean accepted
    (tokens emitted per forward), tokens verified per forward."""
    panels = (
        ("speed-up vs autoregressive", "speed-up (measured)"),
        ("mean accepted", "mean accepted"),
        ("tokens verified / forward", "tokens verified per forward"),
    )
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels], horizontal_spacing=0.08)
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    for k, (name, ws, part) in enumerate(_series(frame)):
        for c, (col, _) in enumerate(panels, start=1):
            fig.add_trace(
                go.Bar(
                    x=ws,
                    y=part[col].tolist(),
                    name=name,
                    legendgroup=name,
                    showlegend=c == 1,
                    marker_color=palette[k % len(palette)],
                    hovertemplate=f"{name}, W=%{{x}}: %{{y:.2f}}<extra>{col}</extra>",
                ),
                row=1,
                col=c,
            )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=1)
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=2)
    fig.update_xaxes(title_text="window width W", type="category")
    fig.update_layout(
        title=title or "Lookahead decoding sweep (greedy; W = 0: pool verification only, no window)",
        template="plotly_white",
        barmode="group",
        width=1050,
        height=420,
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


# ---- 5. the same sweep on another cost curve ----------------------------------------------------------
def flat_curve(curve: CostCurve, up_to: int | None = None) -> CostCurve:
    """A GPU-like curve: every forward up to `up_to` tokens (default: the curve's largest) costs t(1)."""
    top = up_to or max(curve.sizes)
    return CostCurve(sizes=[1, top], seconds=[curve.seconds[0]] * 2, device="flat", context=curve.context, tree=True)


def predicted_speedups(frame, curves: Mapping[str, CostCurve]):
    """For each curve, predicted speed-up = mean accepted / (t(n̄) / t(1)), n̄ the measured tokens verified
    per forward (the root included); a copy of `frame` with one column per curve."""
    out = frame.copy()
    for name, curve in curves.items():
        rel = [curve(n) / curve(1) for n in frame["tokens verified / forward"]]
        out[f"predicted ({name})"] = frame["mean accepted"] / rel
        out[f"t(n̄)/t(1) ({name})"] = rel
    return out


def cost_figure(frame, curves: Mapping[str, CostCurve], title: str | None = None) -> go.Figure:
    """Left: t(n)/t(1) of each curve, the sweep's points at their tokens per forward. Right: per grid point
    the measured speed-up and the predicted one on each curve (`predicted_speedups`)."""
    pred = predicted_speedups(frame, curves)
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.4, 0.6],
        horizontal_spacing=0.1,
        subplot_titles=("relative cost of a forward t(n)/t(1)", "speed-up: measured vs predicted"),
    )
    palette = ("#d62728", "#1f77b4", "#9467bd", "#8c564b")
    top = max(max(c.sizes) for c in curves.values())
    ns = sorted({1, top, *(n for c in curves.values() for n in c.sizes)})
    labels = [f"W={w} N={n} G={g}" for w, n, g in frame.index]
    fig.add_trace(
        go.Bar(x=labels, y=frame["speed-up vs autoregressive"], name="measured", marker_color="#7f7f7f"), row=1, col=2
    )
    for k, (name, curve) in enumerate(curves.items()):
        color = palette[k % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=ns,
                y=[curve(n) / curve(1) for n in ns],
                mode="lines",
                name=f"t(n)/t(1): {name}",
                line={"color": color},
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=frame["tokens verified / forward"],
                y=pred[f"t(n̄)/t(1) ({name})"],
                mode="markers",
                marker={"color": color, "size": 9},
                text=labels,
                showlegend=False,
                hovertemplate="%{text}: n̄ = %{x:.1f}, ×%{y:.2f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(x=labels, y=pred[f"predicted ({name})"], name=f"predicted on {name}", marker_color=color),
            row=1,
            col=2,
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=2)
    fig.update_xaxes(title_text="tokens in one forward n", row=1, col=1)
    fig.update_yaxes(title_text="× t(1)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="speed-up over autoregressive", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title=title or "Where a forward of n tokens costs what one costs, the same tokens per step pay",
        template="plotly_white",
        barmode="group",
        width=1100,
        height=440,
        legend={"orientation": "h", "y": -0.3},
    )
    return fig
