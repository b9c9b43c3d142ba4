"""Figures of notebooks 03 and 04 fit JupyterLab's output area (≤ 950 px) and their legends match their marks."""

from __future__ import annotations

import torch

from specdec_lab import Tree
from specdec_lab.medusa import MedusaConfig
from specdec_lab.viz.medusa import architecture_figure, memorisation_figure
from specdec_lab.viz.tree_figures import HIGHLIGHT, node_view
from specdec_lab.viz.trees import MAX_WIDTH, tree_figure, tree_mask_figure


def _wide_tree(leaves: int) -> Tree:
    """A root with `leaves` children: one leaf per x position, the widest drawing for its size."""
    return Tree(torch.arange(leaves + 1), torch.tensor([-1] + [0] * leaves))


def test_tree_figures_stay_within_the_output_area():
    for leaves in (3, 12, 40, 200):
        fig = tree_figure(_wide_tree(leaves), path=[0, 1])
        assert fig.layout.width <= MAX_WIDTH
        nodes = next(t for t in fig.data if t.name == "nodes")
        assert nodes.mode == ("markers+text" if leaves <= 12 else "markers")  # text only where it fits
    assert tree_figure(_wide_tree(3)).layout.width < MAX_WIDTH  # small trees keep their natural size
    for n in (7, 60):
        assert tree_mask_figure(_wide_tree(n), cache_length=4).layout.width <= MAX_WIDTH


def test_legends_name_only_single_coloured_marks():
    fig = tree_figure(_wide_tree(4), path=[0, 2])
    nodes = next(t for t in fig.data if t.name == "nodes")
    assert nodes.showlegend is False and len(set(nodes.marker.color)) > 1  # several colours: no one swatch
    path = next(t for t in fig.data if t.name == "accepted path")
    assert {nodes.marker.color[i] for i in (0, 2)} == {path.line.color}  # the path's nodes wear its colour


def test_node_view_uses_one_colour_code():
    tree = Tree(torch.tensor([10, 11, 12, 13]), torch.tensor([-1, 0, 0, 1]))
    tree_fig, mask_fig = node_view(tree, 3, cache_length=2)
    nodes = next(t for t in tree_fig.data if t.name == "nodes")
    assert [nodes.marker.color[i] for i in (0, 1, 3)] == [HIGHLIGHT] * 3  # the selected path, as its line
    assert nodes.marker.color[2] != HIGHLIGHT
    base, row = mask_fig.data[0], mask_fig.data[1]
    assert base.colorscale[-1][1] == row.colorscale[-1][1]  # "may attend" is the same blue in every row
    assert "blue = may attend" in mask_fig.layout.title.text
    assert mask_fig.layout.shapes[0].line.color == HIGHLIGHT  # the selected row, outlined


def test_medusa_figures_fit():
    assert architecture_figure(MedusaConfig(576, 49152, 4, num_layers=4), 30).layout.width <= MAX_WIDTH
    acc = {"top1": [0.3, 0.2], "top5": [0.5, 0.4], "loss": [3.0, 4.0], "count": [9, 9], "base_top1": 1.0}
    epochs = [{"epoch": e, "step": 10 * e, "train": acc, "heldout": acc} for e in range(3)]
    fig = memorisation_figure(epochs)
    assert fig.layout.width <= MAX_WIDTH and len(fig.data) == 4  # 2 heads x (training, held-out)
    assert fig.data[0].line.color == fig.data[1].line.color and fig.data[1].line.dash == "dash"
