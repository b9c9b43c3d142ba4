"""Medusa's tree="auto" on the one cost model: the candidate trees built once and priced again as the cost model
learns (`trees.tree_options` / `pick_budget`), and probes where nothing pays."""

from __future__ import annotations

import pytest
import torch

import specdec_lab as S
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.medusa import MedusaHeads
from specdec_lab.proposers.medusa import Drafter, MedusaDecodeConfig, MedusaProposer
from specdec_lab.trees import HeadAccuracies, choose_budget, pick_budget, tree_options

PROMPT = [5, 17, 42, 7, 99, 3, 18, 64]
ACC = HeadAccuracies(top=torch.tensor([[0.6 * 0.5**i * 0.7**k for i in range(4)] for k in range(3)]))


def test_options_priced_later_equal_a_choice_made_at_once():
    curve = CostCurve(sizes=[1, 2, 3, 4, 5, 6], seconds=[1.0, 1.02, 1.1, 1.2, 1.35, 1.5], tree=True)
    heads = {1: 0.01, 2: 0.02, 3: 0.03}.get
    for by_depth, head_cost in ((True, heads), (False, 0.01)):
        once = choose_budget(ACC, curve, max_budget=5, head_cost=head_cost)
        options = tree_options(ACC, max_budget=5, by_depth=by_depth)
        later = pick_budget(options, curve, head_cost)
        assert (later.budget, later.paths, later.table) == (once.budget, once.paths, once.table)
    assert [o.budget for o in options] == sorted(o.budget for o in options) and options[0].expected_length == 1.0


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=2, eos_token_id=None)


@pytest.fixture(scope="module")
def drafter(target):
    heads = MedusaHeads.for_model(target, num_heads=3)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    return Drafter(heads=heads, source=None, vocab=None, accuracies=ACC, head_seconds={1: 0.0, 2: 0.0, 3: 0.0})


def test_auto_tree_is_exact_and_counts_the_budgets_it_verified(target, drafter):
    set_cost_curve(target, CostCurve(sizes=[1, 2, 3, 4, 5, 6], seconds=[1.0, 1.02, 1.1, 1.2, 1.35, 1.5], tree=True))
    try:
        ar = S.generate(target, PROMPT, max_new_tokens=40)
        prop = MedusaProposer(MedusaDecodeConfig(heads=drafter, tree="auto", max_budget=5, accuracy="independent",
                                                 adapt_every=4))  # fmt: skip
        r = S.generate(target, PROMPT, max_new_tokens=40, proposer=prop)
        assert r.tokens == ar.tokens
        budgets = r.proposer["budgets"]  # nodes verified -> steps
        assert sum(budgets.values()) == sum(s.proposed > 0 for s in r.steps) and r.proposer["budget"] > 0
        assert {int(n) for n in budgets} <= {row["budget"] for row in prop.choice.table}
    finally:
        set_cost_curve(target, CostCurve(sizes=[1], seconds=[1.0], tree=True))


def test_where_no_tree_pays_it_probes_the_smallest(target, drafter):
    """A curve on which every tree costs double a plain step: budget 0, and every probe_every-th step (the
    wait doubling while probes fail) one node is verified anyway. The output stays autoregressive's."""
    set_cost_curve(target, CostCurve(sizes=[1, 2, 6], seconds=[1.0, 2.0, 6.0], tree=True))
    try:
        prop = MedusaProposer(MedusaDecodeConfig(heads=drafter, tree="auto", max_budget=5, accuracy="independent",
                                                 probe_every=4, probe_max=8))  # fmt: skip
        r = S.generate(target, PROMPT, max_new_tokens=40, proposer=prop)
        assert r.tokens == S.generate(target, PROMPT, max_new_tokens=40).tokens
        assert r.proposer["budget"] == 0
        probes = [i for i, s in enumerate(r.steps) if s.proposed]
        assert probes and all(r.steps[i].proposed == 1 and r.steps[i].info["probe"] for i in probes)
        assert r.proposer["probes"] == len(probes) and probes[0] == 3  # the 4th idle step is the first probe
    finally:
        set_cost_curve(target, CostCurve(sizes=[1], seconds=[1.0], tree=True))
    with pytest.raises(ValueError, match="adapt_every"):
        MedusaDecodeConfig(adapt_every=0)


def test_what_the_trees_accept_corrects_their_expected_length():
    """A run whose text is easier than the calibration (every tree accepted to its full depth): ρ_d > 1, E[L]
    corrected upwards, and on the same prices a larger tree pays; ρ = 1 before any evidence."""
    from specdec_lab.trees import DepthCorrection

    options = tree_options(ACC, max_budget=5)
    assert all(o.expected_length == pytest.approx(1 + sum(o.by_depth)) for o in options)
    correction = DepthCorrection(decay=1.0)
    assert correction.factors() == [] and options[3].corrected([]) == options[3].expected_length
    chain = next(o for o in options if o.depth == 2)  # the smallest tree two deep
    for _ in range(50):
        correction.observe(chain.by_depth, accepted=2)
    factors = correction.factors()
    assert len(factors) == 2 and factors[0] > 1.05 and factors[1] > 2  # predicted 0.9 and a deep node's ~0.2
    assert chain.corrected(factors) > chain.expected_length
    curve = CostCurve(sizes=[1, 2, 6], seconds=[1.0, 1.15, 1.75], tree=True)
    plain, easy = pick_budget(options, curve), pick_budget(options, curve, factors=factors)
    assert easy.budget > plain.budget and easy.expected_length > plain.expected_length
    correction.observe(chain.by_depth[:1], accepted=0)  # a tree of depth 1 updates depth 1 only
    assert correction.factors()[1] == factors[1] and correction.factors()[0] < factors[0]
