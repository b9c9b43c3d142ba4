"""Token trees as pictures: a tidy layered drawing and a heatmap of the tree attention mask.

Both take a `specdec_lab.Tree` (plus an optional tokenizer for readable labels) or the networkx DiGraph
of `Tree.to_networkx(tokenizer)` (nodes carry `token`, `text`, `depth`, `candidate`).

networkx has no tidy-tree layout without graphviz, so `tidy_layout` is the classic one: leaves get
x = 0, 1, 2, ... in depth-first order, every parent sits at the centre of its children (midway between
its first and last child), and y = −depth (root on top).
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from ..text import visible
from .figures import TEMPLATE

__all__ = ["MAX_WIDTH", "tidy_layout", "node_labels", "tree_figure", "tree_mask_figure"]

MAX_WIDTH = 950  # px: JupyterLab's output area in a 1400 px window with the file browser open


def _graph(tree_or_graph, tokenizer=None):
    return tree_or_graph.to_networkx(tokenizer) if hasattr(tree_or_graph, "to_networkx") else tree_or_graph


def _root(graph):
    roots = [n for n, d in graph.in_degree() if d == 0]
    if len(roots) != 1:
        raise ValueError(f"expected a tree with one root, found {len(roots)} nodes without a parent")
    return roots[0]


def tidy_layout(tree_or_graph) -> dict:
    """{node: (x, y)}: leaves at x = 0, 1, ... in DFS order, parents centred over children, y = −depth."""
    import networkx as nx

    graph = _graph(tree_or_graph)
    root = _root(graph)
    order = list(nx.dfs_preorder_nodes(graph, root, sort_neighbors=sorted))  # parents before children
    depth = nx.shortest_path_length(graph, root)
    x: dict = {}
    next_leaf = 0
    for node in order:  # leaves, left to right
        if graph.out_degree(node) == 0:
            x[node], next_leaf = float(next_leaf), next_leaf + 1
    for node in reversed(order):  # children before parents
        kids = [x[c] for c in graph.successors(node)]
        if kids:
            x[node] = (min(kids) + max(kids)) / 2
    return {node: (x[node], -float(depth[node])) for node in order}


def node_labels(tree_or_graph, tokenizer=None) -> list[str]:
    """Unique labels "i:text" per node in index order, whitespace visible (`text.visible`: ▁ space, ↵ newline,
    · a byte its child completes), e.g. ["0:The", "1:▁cat", ...]. Text is decoded along each node's path."""
    graph = _graph(tree_or_graph, tokenizer)
    return [f"{i}:{visible(str(graph.nodes[i].get('text', i)))}" for i in sorted(graph.nodes)]


def tree_figure(
    tree_or_graph, tokenizer=None, path: Sequence[int] | None = None, title: str | None = None
) -> go.Figure:
    """The tree drawn with `tidy_layout`: an "edges" line trace, a "nodes" marker+text trace, and, when
    `path` (accepted node indices) is given, an "accepted path" trace over it. Non-candidate nodes
    (e.g. Lookahead's Jacobi window) are drawn hollow and gray.

    At most MAX_WIDTH px wide: leaves are 110 px apart where that fits, closer (smaller labels) where it does
    not, and labelled on hover only once they are too close for text. The legend names only the path: the
    nodes' colours differ (on the path / candidate / not), so one "nodes" swatch would show the wrong one."""
    graph = _graph(tree_or_graph, tokenizer)
    pos = tidy_layout(graph)
    nodes = sorted(graph.nodes)
    ex, ey = [], []
    for a, b in sorted(graph.edges):
        ex += [pos[a][0], pos[b][0], None]
        ey += [pos[a][1], pos[b][1], None]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(x=ex, y=ey, mode="lines", name="edges", line={"color": "#999", "width": 1.5}, hoverinfo="skip")
    )
    if path:
        path = list(path)
        fig.add_trace(
            go.Scatter(
                x=[pos[n][0] for n in path],
                y=[pos[n][1] for n in path],
                mode="lines",
                name="accepted path",
                line={"color": "#2ca02c", "width": 5},
                hoverinfo="skip",
            )
        )
    on_path = set(path or [])
    colors, symbols = [], []
    for n in nodes:
        cand = graph.nodes[n].get("candidate", True)
        colors.append("#2ca02c" if n in on_path else ("#1f77b4" if cand else "#aaaaaa"))
        symbols.append("circle" if cand else "circle-open")
    labels = node_labels(graph)
    depth = int(max(-y for _, y in pos.values()))
    max_x = max(x for x, _ in pos.values())
    width = int(min(MAX_WIDTH, max(420, 110 * (max_x + 2))))
    spacing = (width - 120) / (max_x + 1.5)  # px between neighbouring leaves (margins and the y axis aside)
    fig.add_trace(
        go.Scatter(
            x=[pos[n][0] for n in nodes],
            y=[pos[n][1] for n in nodes],
            mode="markers+text" if spacing >= 45 else "markers",  # text only where it fits beside the node
            name="nodes",
            showlegend=False,
            textfont={"size": 12 if spacing >= 90 else 10},
            marker={
                "size": 14 if spacing >= 70 else 11,
                "color": colors,
                "symbol": symbols,
                "line": {"width": 1, "color": "#333"},
            },
            text=[visible(str(graph.nodes[n].get("text", n))) for n in nodes],
            textposition="middle right",
            customdata=[[labels[i], graph.nodes[n].get("token", ""), -pos[n][1]] for i, n in enumerate(nodes)],
            hovertemplate="node %{customdata[0]}<br>token id %{customdata[1]}<br>depth %{customdata[2]}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title or f"token tree: {len(nodes)} nodes, depth {depth}",
        template=TEMPLATE,
        showlegend=bool(path),
        width=width,
        height=max(260, 90 * (depth + 2)),
        xaxis={"visible": False, "range": [-0.5, max_x + 1.0]},  # room for the labels right of the nodes
        legend={"orientation": "h", "y": -0.05},
        yaxis={
            "title": "depth",
            "tickvals": [-d for d in range(depth + 1)],
            "ticktext": [str(d) for d in range(depth + 1)],
            "zeroline": False,
        },
    )
    return fig


def tree_mask_figure(tree, tokenizer=None, mask=None, cache_length: int = 0, title: str | None = None) -> go.Figure:
    """Heatmap of the (N, N) tree attention mask: row i = query node, column j = key node, 1 = may attend.

    mask:         a mask to draw instead of `tree.mask` (e.g. one derived by hand), same shape
    cache_length: if > 0, prepend one column standing for the L cached prefix tokens (all visible)
    Axis labels are "i:token" so repeated tokens stay distinct on the categorical axes.
    """
    import torch

    m = tree.mask if mask is None else torch.as_tensor(mask)
    z = m.to(torch.int64).cpu().tolist()
    labels = node_labels(tree, tokenizer)
    cols = list(labels)
    if cache_length > 0:
        cols = [f"prefix ×{cache_length}"] + cols
        z = [[1] + row for row in z]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=cols,
            y=labels,
            zmin=0,
            zmax=1,
            colorscale=[[0, "#f4f4f4"], [1, "#1f77b4"]],
            showscale=False,
            xgap=1,
            ygap=1,
            name="mask",
            hovertemplate="query %{y} → key %{x}: %{z}<extra></extra>",
        )
    )
    cell = min(28, (MAX_WIDTH - 200) / len(cols))  # px per cell: 28, less for a mask too wide for MAX_WIDTH
    fig.update_layout(
        title=title or "tree attention mask (row: query node, column: key node)",
        template=TEMPLATE,
        width=int(min(MAX_WIDTH, max(cell * len(cols) + 200, 560))),
        margin={"t": 140},
        height=int(cell * len(labels) + 180),
        xaxis={"type": "category", "side": "top", "tickangle": -45},
        yaxis={"type": "category", "autorange": "reversed", "title": "query node"},
    )
    return fig
