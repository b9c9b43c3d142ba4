"""Figures and widget callbacks for the tree notebooks (04 tree attention, 05 optimized Medusa trees).

    node_view(tree, node)           the tree with node's root path lit + the mask with node's row lit (linked)
    rank_tree_graph(paths)          rank paths -> networkx DiGraph (text = rank, depth, path)
    rank_tree_figure(paths, acc)    a Medusa tree drawn compactly, nodes coloured by their value Π a
    greedy_step_figure(steps, i)    the greedy construction after step i, the node it added highlighted

What a tree's size buys (head accuracies, E[L] and the predicted speed-up by budget) is `viz.tree_sizing`.
Everything returns plain `go.Figure`s (or a tuple of them): pytest drives the callbacks without a browser.
The ipywidgets control that redraws them (`Explorer`, `node_explorer`) is `specdec_lab.lab.trees`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from .figures import TEMPLATE
from .trees import MAX_WIDTH, node_labels, tidy_layout, tree_figure, tree_mask_figure

__all__ = [
    "node_view",
    "rank_tree_graph",
    "rank_tree_figure",
    "greedy_step_figure",
]

HIGHLIGHT = "#ff7f0e"
HALO = "0 0 3px white, 0 0 3px white, 0 0 3px white, 0 0 3px white"  # CSS text-shadow: a white halo behind a label
MAY_ATTEND = "#1f77b4"  # tree_mask_figure's colour of a 1 (may attend)


# ---- 04: one node, linked across the tree drawing and the mask -----------------------------------------
def node_view(tree, node: int, tokenizer=None, cache_length: int = 0) -> tuple[go.Figure, go.Figure]:
    """(tree figure, mask figure) with `node` selected, in one colour code across both: blue = a node / a key
    it may attend to, orange = the selection. The tree draws the root path of `node` (line, its nodes and a
    ring on `node`) in orange; the mask keeps blue for "may attend" in every row and lays an orange band
    (pale where it may not attend, outlined) under the selected row."""
    n = len(tree)
    if not 0 <= int(node) < n:
        raise ValueError(f"node must be in 0..{n - 1}, got {node}")
    node = int(node)
    label = node_labels(tree, tokenizer)[node]
    path = tree.path_to(node)
    tree_fig = tree_figure(tree, tokenizer, path=path, title=f"node {label}: the path it sees (root → node)")
    tree_fig.update_traces(selector={"name": "accepted path"}, name=f"ancestors of {label}", line_color=HIGHLIGHT)
    on_path = set(path)
    nodes_trace = next(t for t in tree_fig.data if t.name == "nodes")  # node i is point i (sorted indices)
    nodes_trace.marker.color = [HIGHLIGHT if i in on_path else c for i, c in enumerate(nodes_trace.marker.color)]
    pos = tidy_layout(tree)
    tree_fig.add_trace(
        go.Scatter(
            x=[pos[node][0]],
            y=[pos[node][1]],
            mode="markers",
            name=f"selected {label}",
            marker={"size": 22, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": HIGHLIGHT}},
            hoverinfo="skip",
        )
    )
    tree_fig.update_layout(template=TEMPLATE, showlegend=True)
    mask_fig = tree_mask_figure(
        tree, tokenizer, cache_length=cache_length, title=f"mask row of {label} (orange band): blue = may attend"
    )
    row = tree.mask[node].to(int).tolist()
    if cache_length > 0:
        row = [1] + row
    z = [[None] * len(row) for _ in range(n)]
    z[node] = row
    base = mask_fig.data[0]
    mask_fig.add_trace(
        go.Heatmap(
            z=z,
            x=list(base.x),
            y=list(base.y),
            zmin=0,
            zmax=1,
            colorscale=[[0, "#fde3cc"], [1, MAY_ATTEND]],  # the base's blue for 1: one meaning per colour
            showscale=False,
            xgap=1,
            ygap=1,
            name=f"row {label}",
            hovertemplate="query %{y} → key %{x}: %{z}<extra></extra>",
        )
    )
    mask_fig.add_shape(  # outline the selected row (categorical axes: cells sit at integer positions)
        type="rect",
        x0=-0.5,
        x1=len(row) - 0.5,
        y0=node - 0.5,
        y1=node + 0.5,
        line={"color": HIGHLIGHT, "width": 3},
        fillcolor="rgba(0,0,0,0)",
    )
    return tree_fig, mask_fig


# ---- 05: Medusa trees as rank paths ---------------------------------------------------------------------
def _sorted_paths(paths) -> list[tuple[int, ...]]:
    paths = sorted({tuple(int(r) for r in p) for p in paths}, key=lambda p: (len(p), p))
    known = set(paths) | {()}
    missing = [p for p in paths if p[:-1] not in known]
    if missing:
        raise ValueError(f"rank paths must be prefix-closed: {list(missing[0])} has no parent")
    return paths


def rank_tree_graph(paths: Sequence[Sequence[int]]):
    """networkx DiGraph of a rank-path tree: node 0 = root, then the paths sorted by (depth, path); node
    attributes text (the rank at its depth, "root"), depth, path, candidate. Returns (graph, ordered paths)."""
    import networkx as nx

    ordered = _sorted_paths(paths)
    index = {(): 0}
    graph = nx.DiGraph()
    graph.add_node(0, text="root", token="", depth=0, path=(), candidate=True)
    for i, p in enumerate(ordered, start=1):
        index[p] = i
        graph.add_node(i, text=str(p[-1]), token=str(list(p)), depth=len(p), path=p, candidate=True)
        graph.add_edge(index[p[:-1]], i)
    return graph, ordered


def _path_values(ordered, acc) -> list[float]:
    import torch

    a = torch.as_tensor(acc, dtype=torch.float64).tolist()
    out = []
    for p in ordered:
        v = 1.0
        for d, r in enumerate(p):
            v *= a[d][r] if r < len(a[d]) else 0.0
        out.append(v)
    return out


def rank_tree_figure(
    paths: Sequence[Sequence[int]],
    acc=None,
    highlight: Sequence[int] | None = None,
    title: str | None = None,
) -> go.Figure:
    """A rank-path tree drawn with `tidy_layout`; node text = its rank among its head's candidates.

    acc: (K, S) accuracies: nodes are coloured by their value Π_d a[d-1, r_d] (= P(node accepted), its
         share of E[L]); highlight: a rank path to ring in orange (e.g. the node greedy just added).
    """
    graph, ordered = rank_tree_graph(paths)
    pos = tidy_layout(graph)
    nodes = sorted(graph.nodes)
    ex, ey = [], []
    for a, b in sorted(graph.edges):
        ex += [pos[a][0], pos[b][0], None]
        ey += [pos[a][1], pos[b][1], None]
    values = [1.0] + (_path_values(ordered, acc) if acc is not None else [1.0] * len(ordered))
    small = len(nodes) <= 32  # text labels only where they fit
    fig = go.Figure(
        go.Scatter(x=ex, y=ey, mode="lines", name="edges", line={"color": "#aaa", "width": 1}, hoverinfo="skip")
    )
    marker = {"size": 14 if small else 10, "line": {"width": 1, "color": "#333"}}
    if acc is not None:
        marker |= {
            "color": values[1:],
            "colorscale": "Blues",
            "cmin": 0,
            "cmax": max(values[1:], default=1.0),
            "colorbar": {"title": {"text": "P(acc.)", "side": "right"}, "thickness": 12, "len": 0.9},
        }
    else:
        marker["color"] = "#1f77b4"
    if highlight is not None:  # the ring first: the nodes and their rank labels are drawn over it, not under it
        target = tuple(int(r) for r in highlight)
        if target not in ordered:
            raise ValueError(f"highlight {list(target)} is not a node of the tree")
        n = ordered.index(target) + 1
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0]],
                y=[pos[n][1]],
                mode="markers",
                name=f"added {tuple(target)}",
                marker={"size": 24, "color": "rgba(0,0,0,0)", "line": {"width": 3, "color": HIGHLIGHT}},
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[pos[n][0] for n in nodes[1:]],
            y=[pos[n][1] for n in nodes[1:]],
            mode="markers+text" if small else "markers",
            text=[graph.nodes[n]["text"] for n in nodes[1:]],
            textposition="middle right",
            textfont={"size": 10, "shadow": HALO},  # a label stays legible where an edge or the ring crosses it
            name="nodes",
            marker=marker,
            customdata=[[str(list(ordered[n - 1])), values[n]] for n in nodes[1:]],
            hovertemplate="rank path %{customdata[0]}<br>value %{customdata[1]:.4f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=[pos[0][0]],
            y=[pos[0][1]],
            mode="markers",
            name="root",
            marker={"size": 14, "color": "#333", "symbol": "square"},
            hovertemplate="root (last accepted token)<extra></extra>",
        )
    )
    depth = max((len(p) for p in ordered), default=0)
    leaves = max(x for x, _ in pos.values()) + 1
    fig.update_layout(
        title=title or f"rank-path tree: {len(ordered)} nodes, depth {depth}",
        template=TEMPLATE,
        showlegend=highlight is not None,
        legend={"orientation": "h", "y": -0.08},
        width=int(min(MAX_WIDTH, max(520, (34 if small else 22) * leaves + 200))),  # colourbar inside
        height=max(300, 90 * (depth + 2)),
        xaxis={"visible": False, "range": [-1, leaves + 0.5]},
        yaxis={
            "title": "depth (= head)",
            "tickvals": [-d for d in range(depth + 1)],
            "ticktext": [str(d) for d in range(depth + 1)],
            "zeroline": False,
        },
    )
    return fig


def greedy_step_figure(steps: Sequence[Mapping], step: int, acc=None) -> go.Figure:
    """The greedy tree after `step` additions (`trees.greedy_steps` output), the added node ringed."""
    if not 1 <= step <= len(steps):
        raise ValueError(f"step must be in 1..{len(steps)}, got {step}")
    st = steps[step - 1]
    return rank_tree_figure(
        [s["path"] for s in steps[:step]],
        acc=acc,
        highlight=st["path"],
        title=(
            f"greedy step {step}: added {tuple(st['path'])} (gain {st['gain']:.4f}), E[L] = {st['expected_length']:.3f}"
        ),
    )
