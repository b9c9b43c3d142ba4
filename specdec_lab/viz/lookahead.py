"""Notebook 07 (Jacobi and Lookahead decoding): one lookahead step's tree and its mask.

Data in, `plotly.graph_objects.Figure` / DataFrame out; nothing here runs a model.

    node_kinds(tree, columns)                        "root" / "window" / "ngram" per node of a lookahead tree
    lookahead_tree_figure(tree, columns)             one lookahead step's tree: the (N − 1) x W window as a
                                                     grid (columns = n-grams in the making), the verification
                                                     trie hanging left of the root
    lookahead_mask_figure(tree, columns)             its attention mask, cells coloured by the key's branch,
                                                     branch boundaries drawn
    lookahead_step_figure(result, step)              a traced run's step (the slider's callback, via
                                                     `lookahead_step_callback(result, tokenizer)`)

The Jacobi trajectory is `viz/jacobi.py`; the pool over a decode is `viz/lookahead_pool.py`; the W x N x G
sweep's table (gathered by `python -m specdec_lab.sweep`) drawn and priced on other cost curves is
`viz/lookahead_sweep.py`.

A lookahead tree (`proposers/lookahead.py`): node 0 is the root = window cell (0, 0); window cell (l, i) is
node l·C + i for C columns (non-candidates); the verification trie's nodes (candidates) follow.
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..text import path_pieces, token_pieces, visible
from .figures import TEMPLATE

__all__ = [
    "node_kinds",
    "window_cell",
    "lookahead_tree_figure",
    "lookahead_mask_figure",
    "lookahead_step_figure",
    "lookahead_step_callback",
    "KIND_COLORS",
]

KIND_COLORS = {"root": "#ff7f0e", "window": "#9e9e9e", "ngram": "#1f77b4", "accepted": "#2ca02c"}


def _node_text(tree, tokenizer=None) -> list[str]:
    """Each node's text decoded along its own path (byte pieces grouped, whitespace visible)."""
    return [visible(p) for p in path_pieces(tree.tokens.tolist(), tree.parents.tolist(), tokenizer)]


def _need_steps(result) -> None:
    if not result.steps:
        raise ValueError("this result has no per-step trace: run generate(..., trace=True)")


# ---- one lookahead step: the tree and its mask -----------------------------------------------------
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
    texts = _node_text(tree, tokenizer)
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
        "accepted": "accepted n-gram token",
    }
    # one trace per legend entry, each in one colour, so the legend's swatch is its marks' colour
    groups = {kind: [n for n in range(len(tree)) if kinds[n] == kind and not (kind == "ngram" and n in on_path)]
              for kind in ("root", "window", "ngram")}  # fmt: skip
    groups["accepted"] = [n for n in range(len(tree)) if kinds[n] == "ngram" and n in on_path]
    for group, nodes in groups.items():
        kind = "ngram" if group == "accepted" else group
        if not nodes:
            continue
        hover = []
        for n in nodes:
            where = f"cell {window_cell(n, columns)}" if kind == "window" else kind
            hover.append(f"node {n} ({where}): {texts[n]!r}, position offset {depths[n]}")
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0] for n in nodes],
                y=[pos[n][1] for n in nodes],
                mode="markers+text",
                name=names[group],
                marker={
                    "size": 16,
                    "color": KIND_COLORS[group],
                    "symbol": "circle-open" if kind == "window" else "circle",
                    "line": {"width": 2 if kind == "window" else 1, "color": KIND_COLORS[group]},
                },
                text=[texts[n][:10] for n in nodes],
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
    default_title = f"one lookahead step: {len(tree)} nodes (the root, {windows} further window cells, {grams} n-grams)"
    fig.update_layout(
        title=title or default_title,
        template=TEMPLATE,
        width=min(950, max(520, 85 * (max(xs) - min(xs) + 3))),  # at most the output area of a laptop screen
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
    texts = _node_text(tree, tokenizer)
    code = {"root": 1, "window": 2, "ngram": 3}
    labels = []
    for n, kind in enumerate(kinds):
        tag = "r" if kind == "root" else f"w{window_cell(n, columns)}".replace(" ", "") if kind == "window" else "g"
        labels.append(f"{n} {tag}:{texts[n]}")
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
        template=TEMPLATE,
        width=min(950, max(size + 80, 620)),  # at most the output area of a laptop screen
        height=26 * len(labels) + 220,
        margin={"t": 190},
        xaxis={"type": "category", "side": "top", "tickangle": -60, "title": "key node"},
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
    before = result.prompt_tokens + [t for x in result.steps[:step] for t in x.emitted]
    emitted = "".join(token_pieces(s.emitted, tokenizer, before))
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
