"""Medusa trees: rank paths, choices files, calibration, E[L], greedy = DP = brute force, budget choice."""

from __future__ import annotations

import json
import math

import pytest
import torch

from specdec_lab.cost import CostCurve
from specdec_lab.train.medusa_calibration import calibrate
from specdec_lab.trees import (
    MISSING_RANK,
    HeadAccuracies,
    brute_force_tree,
    calibrate_from_ranks,
    cartesian_paths,
    cartesian_size,
    check_paths,
    choose_budget,
    expected_length,
    greedy_steps,
    greedy_tree,
    node_values,
    normalize_paths,
    optimal_tree,
    read_choices,
    write_choices,
)
from specdec_lab.trees.tree import Tree


def _plausible(k: int = 4, s: int = 10) -> torch.Tensor:
    """a[k, i] = 0.6 · 0.5^i · 0.7^k: head 1's top-1 right 60% of the time, each later head 0.7x as good."""
    return 0.6 * 0.5 ** torch.arange(s).double()[None, :] * 0.7 ** torch.arange(k).double()[:, None]


# ---- rank paths --------------------------------------------------------------------------------------
def test_cartesian_paths_and_size():
    paths = cartesian_paths([2, 3])
    assert paths[:2] == [(0,), (1,)] and len(paths) == 2 + 6
    assert paths == normalize_paths(paths)  # sorted, prefix-closed
    assert cartesian_size([2, 3]) == {"nodes": 8, "paths": 6}
    assert cartesian_size([8] * 4) == {"nodes": 4680, "paths": 4096}
    assert len(cartesian_paths([8] * 4)) == 4680
    with pytest.raises(ValueError, match="positive"):
        cartesian_paths([2, 0])


@pytest.mark.parametrize(
    "paths, message",
    [
        ([[0], [0, 1], [1, 1]], "no parent"),
        ([[0], [0]], "twice"),
        ([[0], [-1]], "non-negative"),
        ([[0], [0.5]], "non-negative"),
        ([[0], [True]], "non-negative"),
        ([[]], "root is implicit"),
        ([0, 1], "list or tuple"),
    ],
)
def test_check_paths_errors(paths, message):
    with pytest.raises(ValueError, match=message):
        normalize_paths(paths)


def test_normalize_and_tree():
    paths = normalize_paths([[1], [0, 0], [0], [0, 1]])
    assert paths == [(0,), (1,), (0, 0), (0, 1)]
    check_paths(paths)
    topk = torch.tensor([[10, 11], [20, 21]])  # (D, S) candidates per depth
    tree = Tree.from_rank_paths(5, paths, topk)
    assert tree.tokens.tolist() == [5, 10, 11, 20, 21] and tree.parents.tolist() == [-1, 0, 0, 1, 1]


# ---- choices files -----------------------------------------------------------------------------------
def test_choices_json_round_trip(tmp_path):
    choices = [[0], [1], [0, 0], [0, 1], [0, 0, 0]]
    write_choices(tmp_path / "plain.json", choices)
    assert json.loads((tmp_path / "plain.json").read_text()) == choices
    assert read_choices(tmp_path / "plain.json") == normalize_paths(choices)
    write_choices(tmp_path / "named.json", choices, name="mine")
    assert read_choices(tmp_path / "named.json") == normalize_paths(choices)
    assert read_choices(tmp_path / "named.json", name="mine") == normalize_paths(choices)
    with pytest.raises(ValueError, match="not 'other'"):
        read_choices(tmp_path / "named.json", name="other")
    with pytest.raises(ValueError, match="no parent"):
        write_choices(tmp_path / "bad.json", [[0, 0]])
    assert not (tmp_path / "bad.json").exists()


def test_choices_python_round_trip_and_no_exec(tmp_path):
    choices = [(0,), (1,), (0, 0)]
    write_choices(tmp_path / "mc.py", choices, name="mc_test")
    assert read_choices(tmp_path / "mc.py") == choices
    marker = tmp_path / "executed"
    source = (
        "import os\n"
        f"open({str(marker)!r}, 'w').close()\n"  # would run if the file were exec'd
        "__all__ = ['mc_sim_7b_63', 'vicuna_7b_stage2']\n"
        "mc_sim_7b_63 = [[0], [0, 0], [1], [0, 1]]\n"
        "vicuna_7b_stage2: list = [[0], [1], [2]]\n"
        "derived = sorted(mc_sim_7b_63)\n"  # not a literal: skipped
    )
    (tmp_path / "medusa_choices.py").write_text(source)
    assert read_choices(tmp_path / "medusa_choices.py", name="vicuna_7b_stage2") == [(0,), (1,), (2,)]
    assert read_choices(tmp_path / "medusa_choices.py", name="mc_sim_7b_63") == [(0,), (1,), (0, 0), (0, 1)]
    with pytest.raises(ValueError, match="mc_sim_7b_63.*vicuna_7b_stage2"):
        read_choices(tmp_path / "medusa_choices.py")
    with pytest.raises(ValueError, match="no assignment named 'nope'"):
        read_choices(tmp_path / "medusa_choices.py", name="nope")
    assert not marker.exists()


# ---- calibration -------------------------------------------------------------------------------------
def test_calibrate_from_ranks_counts():
    # 4 positions, 2 heads, top 2; ranks: 0/1 found, 2 = not in top-2, MISSING_RANK = no label
    ranks = torch.tensor([[0, 1], [1, 0], [2, 0], [0, MISSING_RANK]])
    acc = calibrate_from_ranks(ranks, top=2)
    assert acc.positions == 4 and acc.top.shape == (2, 2)
    assert torch.allclose(acc.top, torch.tensor([[2 / 4, 1 / 4], [2 / 3, 1 / 3]], dtype=torch.float64))
    # head 2 given head 1 in its top-2 (with head 2's label present): rows 0 and 1 -> ranks 1, 0
    assert torch.allclose(acc.conditional, torch.tensor([[2 / 4, 1 / 4], [1 / 2, 1 / 2]], dtype=torch.float64))
    back = HeadAccuracies.from_dict(json.loads(json.dumps(acc.to_dict())))
    assert torch.equal(back.top, acc.top) and torch.equal(back.model("conditional"), acc.conditional)
    with pytest.raises(ValueError, match="unknown accuracy model"):
        acc.model("joint")


def test_calibrate_matches_ranks_and_chunks():
    gen = torch.Generator().manual_seed(0)
    t, k, v, s = 37, 3, 50, 4
    logits = torch.randn(t, k, v, generator=gen)
    order = logits.argsort(-1, descending=True)  # (T, K, V)
    want = torch.randint(0, 7, (t, k), generator=gen)  # ranks 4..6 fall outside the top-4
    labels = order.gather(-1, want[..., None]).squeeze(-1)  # the token at that rank
    labels[3, 1] = -100
    labels[5, 0] = -100
    expected = torch.where(want >= s, s, want)
    expected[3, 1] = expected[5, 0] = MISSING_RANK
    ref = calibrate_from_ranks(expected, s)
    for chunk in (1, 5, 1000):
        got = calibrate(logits, labels, top=s, chunk_rows=chunk)
        assert torch.allclose(got.top, ref.top) and torch.allclose(got.conditional, ref.conditional)
    with pytest.raises(ValueError, match="labels\\[:, 1:\\]"):
        calibrate(logits, torch.zeros(t, k + 1, dtype=torch.long))


# ---- expected length and trees -----------------------------------------------------------------------
def test_expected_length_formula():
    acc = torch.tensor([[0.5, 0.2], [0.4, 0.1]])
    paths = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 5)]  # rank 5 >= S contributes 0
    vals = node_values(paths, acc)
    assert torch.allclose(vals, torch.tensor([0.5, 0.2, 0.2, 0.05, 0.08, 0.0], dtype=torch.float64))
    assert expected_length(paths, acc) == pytest.approx(1 + 1.03)
    assert expected_length([], acc) == 1.0
    with pytest.raises(ValueError, match="deeper than the 2 heads"):
        expected_length([(0,), (0, 0), (0, 0, 0)], acc)


def test_sanity_chain_wins():
    acc = torch.tensor([[0.9, 0.05], [0.8, 0.1]])
    for build in (greedy_tree, optimal_tree, brute_force_tree):
        assert build(acc, 2) == [(0,), (0, 0)]
    assert greedy_tree(acc, 2, max_depth=1) == [(0,), (1,)]


def _random_acc(gen, k, s, kind):
    acc = torch.rand(k, s, generator=gen, dtype=torch.float64)
    if kind == "normalized":  # each head's ranks are exclusive events: Σ_i a[k, i] <= 1
        acc = acc / (acc.sum(1, keepdim=True) + torch.rand(k, 1, generator=gen, dtype=torch.float64))
    elif kind == "ties":  # many exact ties and zeros exercise the tie-breaking
        acc = (acc * 3).floor() / 2
    return acc


def test_greedy_dp_brute_force_agree():
    gen = torch.Generator().manual_seed(0)
    cases, non_monotone = 0, 0
    for trial in range(60):
        k, s = 1 + trial % 3, 1 + (trial // 3) % 3
        acc = _random_acc(gen, k, s, ("uniform", "normalized", "ties")[trial % 3])
        non_monotone += bool(s > 1 and (acc[:, 1] > acc[:, 0]).any())
        for budget in range(7):
            for depth in {None, max(1, k - 1)}:
                g, o, b = (f(acc, budget, depth) for f in (greedy_tree, optimal_tree, brute_force_tree))
                eg, eo, eb = (expected_length(p, acc) for p in (g, o, b))
                assert len(g) == len(o) == len(b) <= budget
                assert max(len(p) for p in g + [()]) <= (depth or k)
                assert abs(eg - eb) < 1e-9 and abs(eo - eb) < 1e-9, (acc, budget, depth, g, o, b)
                cases += 1
    assert cases > 500 and non_monotone > 10


def test_greedy_steps():
    acc = _plausible(3, 4)
    steps = greedy_steps(acc, 12)
    gains = [st["gain"] for st in steps]
    assert gains == sorted(gains, reverse=True)  # factors <= 1: values never increase along the order
    assert steps[-1]["expected_length"] == pytest.approx(expected_length(greedy_tree(acc, 12), acc))
    assert [st["path"] for st in steps[:3]] == [(0,), (1,), (0, 0)]
    assert len(greedy_steps(acc, 10**6)) == cartesian_size([4] * 3)["nodes"]  # stops when all are in
    with pytest.raises(ValueError, match="optimal_tree"):
        greedy_tree(torch.tensor([[0.5, 1.5]]), 1)


def test_dp_exact_where_greedy_is_not():
    # A factor > 1 (a weight, not a probability) lets a poor node lead to a rich grandchild: the product
    # argument for greedy breaks, the DP does not. Best 3 nodes: the chain, 0.5 + 0.05 + 0.5 = 1.05.
    acc = torch.tensor([[0.5, 0.45], [0.1, 0.0], [10.0, 0.0]], dtype=torch.float64)
    chain = [(0,), (0, 0), (0, 0, 0)]
    assert optimal_tree(acc, 3) == brute_force_tree(acc, 3) == chain
    assert expected_length(chain, acc) == pytest.approx(2.05)
    greedy_like = [(0,), (1,), (0, 0)]  # what "largest frontier value first" picks: 0.5, 0.45, 0.05
    assert expected_length(greedy_like, acc) == pytest.approx(2.0)
    gen = torch.Generator().manual_seed(1)
    for _ in range(20):
        acc = 2 * torch.rand(3, 2, generator=gen, dtype=torch.float64)
        for budget in (3, 5):
            eo, eb = (expected_length(f(acc, budget), acc) for f in (optimal_tree, brute_force_tree))
            assert abs(eo - eb) < 1e-9


def test_tree_limits():
    acc = _plausible(4, 10)
    assert len(optimal_tree(acc, 64)) == 64
    assert optimal_tree(acc, 0) == greedy_tree(acc, 0) == []
    assert len(optimal_tree(torch.full((2, 2), 0.5), 100)) == 6  # all 2 + 4 nodes
    with pytest.raises(ValueError, match="tiny cases"):
        brute_force_tree(acc, 4)
    with pytest.raises(ValueError, match="max_depth"):
        greedy_tree(acc, 4, max_depth=5)


# ---- hardware-aware budget ---------------------------------------------------------------------------
def test_choose_budget_steep_vs_flat():
    acc = _plausible(4, 10)
    steep = CostCurve(sizes=[1, 2], seconds=[1.0, 1.3])  # t(n) = 1 + 0.3 (n - 1), extrapolated
    flat = CostCurve(sizes=[1, 65], seconds=[1.0, 1.0])
    small = choose_budget(acc, steep)
    assert small.budget <= 3 and len(small.paths) == small.budget
    assert small.table[0] == {
        "budget": 0,
        "depth": 0,
        "expected_length": 1.0,
        "verify_seconds": 1.0,
        "head_seconds": 0.0,
        "rate": 1.0,
        "speedup": 1.0,
    }
    big = choose_budget(acc, flat)
    assert big.budget > 20 and big.rate == pytest.approx(big.expected_length)
    for builder in ("optimal", lambda a, n, d: optimal_tree(a, n, d)):
        other = choose_budget(acc, flat, builder=builder)
        assert other.expected_length == pytest.approx(big.expected_length, abs=1e-9)
    json.dumps(big.to_dict())


def test_choose_budget_head_cost():
    acc = _plausible(4, 10)
    flat = lambda n: 1.0  # noqa: E731
    # a constant head cost per step: the root-only tree pays none, so small gains no longer pay off
    assert choose_budget(torch.full((2, 3), 0.01), flat, head_cost=0.5).budget == 0
    # heads priced by depth: deep trees cost more, so the chosen tree is shallower than the free one
    free = choose_budget(acc, flat, max_budget=32)
    priced = choose_budget(acc, flat, max_budget=32, head_cost=lambda d: 0.2 * d)
    assert priced.depth < free.depth
    assert max(len(p) for p in priced.paths) == priced.depth
    assert priced.seconds == pytest.approx(1.0 + 0.2 * priced.depth)
    assert math.isclose(priced.rate, priced.expected_length / priced.seconds)
    with pytest.raises(ValueError, match="unknown builder"):
        choose_budget(acc, flat, builder="beam")
