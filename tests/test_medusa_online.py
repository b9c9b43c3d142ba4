"""Medusa's tree chosen online among near-best trees (`medusa/online.py`): estimates, the bandit, the loop."""

from __future__ import annotations

import math
import random

import pytest
import torch

import specdec_lab as S
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.medusa import MedusaHeads
from specdec_lab.medusa.online import Arm, OnlineBudget
from specdec_lab.proposers.medusa import Drafter, MedusaDecodeConfig, MedusaProposer
from specdec_lab.trees import HeadAccuracies, choose_budget

PROMPT = [5, 17, 42, 7, 99, 3, 18, 64]


def test_arm_rate_and_its_standard_error_match_the_direct_formulas():
    rng = random.Random(0)
    pairs = [(rng.choice([1, 1, 2, 3]), 0.06 + 0.02 * rng.random()) for _ in range(200)]
    arm = Arm(budget=2, paths=[(0,), (0, 0)], predicted_length=1.5, predicted_rate=20.0)
    assert arm.rate == 20.0 and arm.stderr() == math.inf  # before any step: the prediction, no bound
    for t, s in pairs:
        arm.observe(t, s)
    T, Sec, n = sum(t for t, _ in pairs), sum(s for _, s in pairs), len(pairs)
    r = T / Sec
    resid = [t - r * s for t, s in pairs]  # delta method: Var(r) ≈ Var(t - r s) / (n mean(s)^2)
    se = math.sqrt(sum(x * x for x in resid) / (n - 1) / n) / (Sec / n)
    assert arm.rate == pytest.approx(r) and arm.stderr() == pytest.approx(se, rel=1e-9)
    assert arm.mean_accepted == pytest.approx(T / n)


def test_arms_are_the_budgets_within_the_margin_best_first():
    acc = HeadAccuracies(top=torch.tensor([[0.6 * 0.5**i * 0.7**k for i in range(4)] for k in range(3)]))
    curve = CostCurve(sizes=[1, 2, 3, 4, 5, 6], seconds=[1.0, 1.02, 1.1, 1.2, 1.35, 1.5], tree=True)
    choice = choose_budget(acc, curve, max_budget=5)
    online = OnlineBudget.from_choice(choice, margin=0.1, max_arms=3)
    best = max(row["rate"] for row in choice.table)
    assert online.arms[0].budget == choice.budget and 1 < len(online.arms) <= 3
    assert all(a.predicted_rate >= 0.9 * best for a in online.arms)
    assert [a.predicted_rate for a in online.arms] == sorted((a.predicted_rate for a in online.arms), reverse=True)
    for arm in online.arms:
        assert arm.paths == list(choice.trees[arm.budget]) and len(arm.paths) == arm.budget
    assert len(OnlineBudget.from_choice(choice, margin=0.0).arms) == 1
    with pytest.raises(ValueError, match="margin"):
        OnlineBudget.from_choice(choice, margin=1.0)


def _simulate(online: OnlineBudget, rates: list[float], steps: int, seed: int) -> list[int]:
    """Steps with noisy tokens (1-3 per step) and seconds (±20%) whose true rate is rates[arm]."""
    rng = random.Random(seed)
    for _ in range(steps):
        a = online.pick()
        tokens = rng.choice([1, 2, 3])  # mean 2
        seconds = 2.0 / rates[a] * rng.uniform(0.8, 1.2)
        online.observe(a, tokens, seconds)
    return [online.history.count(i) for i in range(len(rates))]


@pytest.mark.parametrize("seed", range(3))
def test_the_measured_fastest_arm_wins_even_when_the_model_ranked_it_last(seed):
    """The startup model's ranking (predicted rates) is wrong: the third arm is really 8% faster. After
    3000 noisy steps the bandit has found it and spends most steps on it."""
    arms = [Arm(b, [(0,)] * 0, 1.5, pr) for b, pr in ((3, 21.0), (4, 20.5), (2, 20.0))]
    online = OnlineBudget(arms)
    counts = _simulate(online, rates=[18.0, 17.0, 19.5], steps=3000, seed=seed)
    assert online.leader().budget == 2
    assert counts[2] > 0.6 * 3000 and min(counts) >= online.min_steps


def test_online_tree_through_generate_is_exact_and_reports_its_arms():
    target = S.tiny_model(num_layers=2, eos_token_id=None)
    heads = MedusaHeads.for_model(target, num_heads=3)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    acc = HeadAccuracies(top=torch.tensor([[0.6 * 0.5**i * 0.7**k for i in range(4)] for k in range(3)]))
    set_cost_curve(target, CostCurve(sizes=[1, 2, 3, 4, 5, 6], seconds=[1.0, 1.02, 1.1, 1.2, 1.35, 1.5], tree=True))
    drafter = Drafter(heads=heads, source=None, vocab=None, accuracies=acc, head_seconds={1: 0.0, 2: 0.0, 3: 0.0})
    ar = S.generate(target, PROMPT, max_new_tokens=40)
    prop = MedusaProposer(MedusaDecodeConfig(heads=drafter, tree="auto", max_budget=5, arms=3, accuracy="independent"))
    r = S.generate(target, PROMPT, max_new_tokens=40, proposer=prop)
    assert r.tokens == ar.tokens
    online = r.proposer["online"]
    assert len(online["arms"]) > 1 and sum(a["steps"] for a in online["arms"]) == len(r.steps)
    assert {s.info["arm"] for s in r.steps} <= {a["budget"] for a in online["arms"]}
    # the arms' statistics stay with the heads: a second prompt continues them
    r2 = S.generate(target, PROMPT[:5], max_new_tokens=20, proposer=MedusaProposer(prop.config))
    assert sum(a["steps"] for a in r2.proposer["online"]["arms"]) == len(r.steps) + len(r2.steps)
    one = MedusaProposer(MedusaDecodeConfig(heads=drafter, tree="auto", max_budget=5, arms=1, accuracy="independent"))
    r3 = S.generate(target, PROMPT, max_new_tokens=40, proposer=one)
    assert r3.tokens == ar.tokens and "online" not in r3.proposer
    assert all(s.proposed == one.choice.budget for s in r3.steps[1:-3])
    with pytest.raises(ValueError, match="arms must be"):
        MedusaDecodeConfig(arms=0)
    set_cost_curve(target, CostCurve(sizes=[1], seconds=[1.0], tree=True))
