"""specdec_lab.viz.tree_figures, viz.tree_sizing and lab.trees: the tree notebooks' figures and widget callbacks,
without a browser.

Synthetic trees and accuracy matrices only (no model).
"""

from __future__ import annotations

import pytest
import torch

from specdec_lab import Tree
from specdec_lab.lab.trees import EXPLORER_PLACEHOLDER, Explorer, curve_shape, node_explorer, speedup_reason
from specdec_lab.trees import BudgetChoice, HeadAccuracies, choose_budget, greedy_steps, greedy_tree
from specdec_lab.viz.tree_figures import greedy_step_figure, node_view, rank_tree_figure, rank_tree_graph
from specdec_lab.viz.tree_sizing import (
    accuracy_figure,
    budget_rate_figure,
    expected_length_figure,
    predicted_vs_measured_figure,
)


@pytest.fixture
def tree() -> Tree:
    #        0
    #      /   \
    #     1     2
    #    / \     \
    #   3   4     5
    #   |
    #   6
    return Tree(torch.tensor([10, 11, 12, 13, 14, 15, 11]), torch.tensor([-1, 0, 0, 1, 1, 2, 3]))


@pytest.fixture
def acc() -> HeadAccuracies:
    top = torch.tensor([[0.5, 0.2, 0.1], [0.4, 0.15, 0.05], [0.3, 0.1, 0.05]])
    cond = torch.tensor([[0.5, 0.2, 0.1], [0.5, 0.15, 0.05], [0.45, 0.1, 0.05]])
    return HeadAccuracies(top=top, conditional=cond, positions=100)


def _trace(fig, name):
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace {name!r} in {[t.name for t in fig.data]}"
    return found[0]


# ---- node_view / explorers ----------------------------------------------------------------------------
def test_node_view_lights_the_path_and_the_mask_row(tree):
    tree_fig, mask_fig = node_view(tree, 6, cache_length=4)
    path = _trace(tree_fig, "ancestors of 6:11")
    assert len(path.x) == 4  # 0 -> 1 -> 3 -> 6
    assert _trace(tree_fig, "selected 6:11").x[0] == path.x[-1]
    row = _trace(mask_fig, "row 6:11")
    assert row.z[6] == [1, 1, 1, 0, 1, 0, 0, 1]  # prefix column, then nodes 0, 1, 3, 6
    assert all(r == [None] * 8 for i, r in enumerate(row.z) if i != 6)
    assert list(row.x) == list(mask_fig.data[0].x) and list(row.y) == list(mask_fig.data[0].y)


def test_node_view_of_the_root_and_without_prefix(tree):
    _, mask_fig = node_view(tree, 0)
    assert _trace(mask_fig, "row 0:10").z[0] == [1, 0, 0, 0, 0, 0, 0]


def test_node_view_rejects_a_node_outside_the_tree(tree):
    with pytest.raises(ValueError, match="0..6"):
        node_view(tree, 7)


def test_node_explorer_callback_follows_the_dropdown(tree):
    ex = node_explorer(tree, cache_length=2, show_initial=True)
    assert ex.control.value == 6 and ex.result is not None  # default: the last node, drawn at once
    ex.control.value = 4  # what a click does: the observer redraws
    tree_fig, mask_fig = ex.result
    assert _trace(mask_fig, "row 4:14").z[4] == [1, 1, 1, 0, 0, 1, 0, 0]
    assert _trace(tree_fig, "ancestors of 4:14").x is not None


def test_explorer_with_extras_and_no_initial_draw():
    import ipywidgets as w

    slider = w.IntSlider(value=1, min=1, max=3)
    calls = []

    def callback(v):
        calls.append(v)
        return rank_tree_figure([(0,)] * 1), {"v": v}

    ex = Explorer(slider, callback, header="<b>hi</b>", show_initial=False)
    assert ex.result is None and calls == []
    slider.value = 3
    assert calls == [3] and ex.result[1] == {"v": 3}
    # displayed, it publishes the widget with a readable text/plain (a stored notebook has no widget state)
    from unittest import mock

    with mock.patch("IPython.display.display") as shown:
        ex._ipython_display_()
    bundle = shown.call_args.args[0]
    assert bundle["text/plain"] == EXPLORER_PLACEHOLDER and "application/vnd.jupyter.widget-view+json" in bundle


# ---- rank-path trees ----------------------------------------------------------------------------------
def test_rank_tree_graph_orders_paths_parents_first():
    graph, ordered = rank_tree_graph([(1,), (0, 0), (0,), (0, 1), (0, 0, 0)])
    assert ordered == [(0,), (1,), (0, 0), (0, 1), (0, 0, 0)]
    assert sorted(graph.edges) == [(0, 1), (0, 2), (1, 3), (1, 4), (3, 5)]
    assert graph.nodes[4]["text"] == "1" and graph.nodes[5]["depth"] == 3


def test_rank_tree_graph_rejects_a_path_without_parent():
    with pytest.raises(ValueError, match="prefix-closed"):
        rank_tree_graph([(0,), (1, 0)])


def test_rank_tree_figure_colours_by_value(acc):
    paths = greedy_tree(acc, 6)
    fig = rank_tree_figure(paths, acc=acc.top, highlight=paths[-1])
    nodes = _trace(fig, "nodes")
    assert len(nodes.x) == 6
    assert max(nodes.marker.color) == pytest.approx(0.5)  # the rank-0 child of the root
    assert any(t.name.startswith("added") for t in fig.data)
    with pytest.raises(ValueError, match="not a node"):
        rank_tree_figure(paths, highlight=(2, 2, 2))


def test_big_rank_tree_has_no_text_and_a_bounded_width(acc):
    fig = rank_tree_figure(greedy_tree(acc, 39), acc=acc.top)
    assert _trace(fig, "nodes").mode == "markers"
    assert fig.layout.width <= 1400


def test_greedy_step_figure_titles_the_running_expected_length(acc):
    steps = greedy_steps(acc.top, 5)
    fig = greedy_step_figure(steps, 3, acc.top)
    assert f"{steps[2]['expected_length']:.3f}" in fig.layout.title.text
    assert len(_trace(fig, "nodes").x) == 3
    with pytest.raises(ValueError, match="1..5"):
        greedy_step_figure(steps, 0)


# ---- accuracy, E[L], budget, predicted vs measured -----------------------------------------------------
def test_accuracy_figure_two_panels_or_one(acc):
    fig = accuracy_figure(acc, max_rank=2)
    assert len(fig.data) == 2 and len(fig.data[0].x) == 2
    assert fig.data[1].z[1][0] == pytest.approx(0.5)  # conditional head 2, rank 0
    assert len(accuracy_figure(acc.top).data) == 1


def test_expected_length_figure_lines_and_points():
    fig = expected_length_figure({"greedy": ([1, 2], [1.5, 1.7]), "DP": ([1, 2], [1.5, 1.7])}, {"2x2": (6, 1.9)})
    assert [t.name for t in fig.data] == ["greedy", "DP", "Cartesian trees"]
    assert list(fig.data[2].text) == ["2x2"]


def test_budget_rate_figure_stars_each_choice(acc):
    steep = choose_budget(acc.top, lambda n: 1.0 + 0.5 * (n - 1), max_budget=8)
    flat = choose_budget(acc.top, lambda n: 1.0, max_budget=8)
    assert isinstance(steep, BudgetChoice) and flat.budget > steep.budget
    fig = budget_rate_figure({"steep": steep, "flat": flat})
    star = _trace(fig, "flat: chosen")
    assert star.x[0] == flat.budget and star.y[0] == pytest.approx(flat.speedup)


def test_predicted_vs_measured_figure_groups_three_bars():
    rows = [{"tree": "chain:1", "measured": 1.4, "independent": 1.42, "conditional": 1.42}]
    fig = predicted_vs_measured_figure(rows)
    assert len(fig.data) == 3 and fig.layout.barmode == "group"


# ---- notebook 05's sentences ----------------------------------------------------------------------------
def _curve(seconds):
    from specdec_lab.cost import CostCurve

    return CostCurve(sizes=[1, 2, 4, 8, 16][: len(seconds)], seconds=seconds, tree=True)


def test_curve_shape_follows_a_dip_and_never_says_climbs_there():
    text = curve_shape(_curve([1.0, 0.9, 0.9, 1.2, 2.0]))
    assert text.startswith("t(n) dips below t(1) up to n = 4") and "t(2) = 0.90 t(1)" in text
    assert "above t(1) from n = 8 on" in text and "16 tokens costs 2.0 single-token ones" in text


def test_curve_shape_of_a_rising_a_flat_and_a_bumpy_curve():
    assert curve_shape(_curve([1.0, 1.3, 1.6, 2.0])).startswith("t(n) is above t(1) from n = 2 on (t(2) = 1.30 t(1))")
    assert "a flat curve" in curve_shape(_curve([1.0, 1.01, 0.99, 1.0]))
    bumpy = curve_shape(_curve([1.0, 1.0, 1.3, 1.0]))  # above t(1) at 4, back at 8: not "from n = 4 on"
    assert bumpy.startswith("t(n) stays at t(1) up to n = 2") and "above t(1) at n = 4;" in bumpy
    with pytest.raises(ValueError, match="no size above 1"):
        curve_shape(_curve([1.0]))


def test_speedup_reason_turns_with_the_step_price(acc):
    cheap = choose_budget(
        acc.top, lambda n: 1.0 if n == 1 else 0.9 + 0.5 * max(n - 4, 0), max_budget=8
    )  # t(2..4) < t(1)
    assert cheap.speedup > cheap.expected_length
    reason = speedup_reason(cheap)
    assert "exceeds the tree's E[L]" in reason and "the price per token falls below t(1)" in reason
    dear = choose_budget(acc.top, lambda n: 1.0 + 0.1 * (n - 1), max_budget=8)
    assert dear.budget > 0 and dear.speedup < dear.expected_length
    assert "is below the tree's E[L]" in speedup_reason(dear)
    plain = choose_budget(acc.top, lambda n: 1.0 + 10.0 * (n - 1), max_budget=8)  # nothing pays: n = 0, E[L] = 1
    assert plain.budget == 0 and speedup_reason(plain).startswith("Plain decoding (n = 0) is predicted fastest")
    free = choose_budget(acc.top, lambda n: 1.0, max_budget=8)  # flat, no heads: speed-up = E[L]
    assert "is the tree's E[L]" in speedup_reason(free)
