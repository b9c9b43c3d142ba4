"""Notebook 13's figures (`specdec_lab.viz.batching`) on synthetic data: what each draws, inside the output area."""

from __future__ import annotations

import torch

from specdec_lab.cost import CostCurve
from specdec_lab.trees import HeadAccuracies
from specdec_lab.viz.batching import (
    WIDTH,
    cost_by_batch_figure,
    policy_view,
    ragged_figure,
    rows_mask_figure,
    speedup_by_batch_figure,
    throughput_latency_figure,
)

CURVES = {1: CostCurve([1, 2, 4, 8], [0.03, 0.031, 0.033, 0.04]), 8: CostCurve([1, 2, 4, 8], [0.05, 0.09, 0.17, 0.33])}
SUMMARY = [
    {"batch_size": b, "method": m, "tokens_per_s": tps, "speedup": s, "latency_median_s": lat}
    for b, m, tps, s, lat in [(1, "autoregressive", 25.0, 1.0, 5.0), (1, "hybrid", 40.0, 1.6, 3.2),
                              (8, "autoregressive", 80.0, 1.0, 12.0), (8, "hybrid", 78.0, 0.98, 12.5)]
]  # fmt: skip


def test_cost_by_batch_draws_a_step_and_a_per_token_line_per_batch_size():
    fig = cost_by_batch_figure(CURVES)
    assert [t.name for t in fig.data if t.showlegend is not False] == ["B = 1", "B = 8"]
    assert len(fig.data) == 4 and fig.layout.width <= WIDTH and fig.layout.template.layout.paper_bgcolor == "white"


def test_ragged_grid_shows_padding_blank():
    grid = [[(0, 3), (1, 1)], [(0, 2), None], [(2, 1), None]]  # row 1 finished, row 0 took prompt 2
    fig = ragged_figure(grid)
    z = fig.data[0].z
    assert [list(r) for r in z] == [[3, 2, 1], [1, None, None]]
    assert fig.data[0].text[1][1] == "padding" and fig.data[0].text[0][2] == "prompt 2"


def test_speedup_and_throughput_latency_figures():
    fig = speedup_by_batch_figure(SUMMARY, {"EAGLE-3 (published)": {1: 2.0, 8: 1.5}})
    assert {t.name for t in fig.data} == {"autoregressive", "hybrid", "EAGLE-3 (published)"}
    tl = throughput_latency_figure(SUMMARY)
    assert list(tl.data[1].x) == [3.2, 12.5] and list(tl.data[1].text) == ["B=1", "B=8"]


def test_policy_view_is_the_dashboards_callback():
    acc = HeadAccuracies(top=torch.tensor([[0.6, 0.1], [0.4, 0.1]])).model("independent")
    fig, row = policy_view(CURVES, 10, acc)  # B = 10: the nearest measured batch size at or below, 8
    assert row["batch_size"] == 8 and row["k_at_alpha_0.9"] < policy_view(CURVES, 1, acc)[1]["k_at_alpha_0.9"]
    assert fig.layout.title.text == "t(B, n) at B = 8"


def test_rows_mask_draws_one_panel_per_row():
    from specdec_lab.trees.tree import Tree
    from specdec_lab.verify import rows_attention_mask

    trees = [Tree(torch.tensor([1, 2, 3]), torch.tensor([-1, 0, 0])), Tree.root(4), None]
    _, _, mask = rows_attention_mask(trees, [2, 4, 3], torch.float32)
    fig = rows_mask_figure(mask, [2, 4, 3])
    assert len(fig.data) == 3 and fig.layout.width <= WIDTH
    assert [list(r) for r in fig.data[0].z[:3]] == [[1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 0, 1, 0, 0]]
    assert [list(r) for r in fig.data[2].z] == [[0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 1, 0]]


def test_the_width_plan_figure_highlights_the_chosen_width():
    from specdec_lab.cost.plan import best_width, width_rates
    from specdec_lab.viz.batching import width_plan_figure

    gains = [[1.0, 0.6, 0.36], [1.0, 0.6], [1.0]]
    price = {1: 0.03, 2: 0.031, 3: 0.05}.__getitem__
    n, _ = best_width(gains, price)
    fig = width_plan_figure(width_rates(gains, price), n)
    bar = fig.data[0]
    assert list(bar.x) == [1, 2, 3] and n == 2 and bar.marker.color[1] == "#d62728"
    assert fig.layout.title.text.endswith("(N* = 2, red)")
    assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text
