"""Medusa's typical acceptance: greedy at temperature 0, candidates only, its extremes, and its (lossy) drift.

Typical acceptance keeps a candidate x iff p(x) > min(ε, δ·exp(−H(p))), so under sampling its output is
NOT distributed as p. The drift test measures that on the tiny target of test_speculative (vocabulary 12):
with deterministic drafts the reference defaults accept the draft's argmax every time, and the histogram of
the first two tokens is far from the exact joint, while the exact rule on the same drafts is within noise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import specdec_lab as S
from specdec_lab.accept import (
    ACCEPT_RULES,
    TREE_RULES,
    accept_exact,
    accept_greedy,
    accept_typical,
    get_accept_rule,
    typical_rule,
)
from specdec_lab.accept.losslessness import LogitsTable, chi_square, drift_baseline, typical_drift
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.trees.tree import Tree

FALSE_ALARM = 1e-3
V = 12
CONTEXT = [1, 2, 3]
T1 = Sampling(temperature=1.0)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: thousands of tiny ops on one thread


def _random_tree(gen: torch.Generator, vocab: int, logits: torch.Tensor | None = None, candidates: bool = True):
    """A random branching tree; with `logits`, about half the tokens are the parent's argmax (deep greedy paths)."""
    n = int(torch.randint(2, 14, (1,), generator=gen))
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
    tokens = torch.randint(0, vocab, (n,), generator=gen).tolist()
    if logits is not None:
        for i in range(1, n):
            if float(torch.rand((), generator=gen)) < 0.5:
                tokens[i] = int(logits[parents[i]].argmax())
    cand = None
    if candidates and float(torch.rand((), generator=gen)) < 0.5:  # some trees carry non-candidate nodes
        cand = [True] * n
        for i in range(1, n):
            cand[i] = cand[parents[i]] and float(torch.rand((), generator=gen)) < 0.8
    return Tree(torch.tensor(tokens), torch.tensor(parents), candidate=cand)


@pytest.fixture(scope="module")
def tables():
    """test_speculative's target (vocabulary 12) and a draft made by perturbing its layers."""
    target = S.tiny_model(vocab_size=V, seed=0)
    draft = S.tiny_model(vocab_size=V, seed=0)
    draft.load_state_dict(target.state_dict())
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in draft.named_parameters():
            if "layers" in name:
                p.add_(torch.randn(p.shape, generator=gen) * 0.3 * p.std())
    return LogitsTable(target, CONTEXT).fill(3), LogitsTable(draft, CONTEXT).fill(3)


# ---- temperature 0 = greedy -------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [1e-6, 0.09, 0.99])
def test_temperature_zero_equals_greedy_on_branching_trees(epsilon):
    """At T = 0 p is one-hot: typical accepts exactly accept_greedy's path and bonus (any ε < 1)."""
    gen = torch.Generator().manual_seed(0)
    branching = 0
    for _ in range(60):
        vocab = int(torch.randint(3, 9, (1,), generator=gen))  # small: repeated siblings happen too
        n_max = 14
        logits = torch.randn(n_max, vocab, generator=gen) * 2
        tree = _random_tree(gen, vocab, logits)
        logits = logits[: len(tree)]
        branching += not tree.is_chain
        a = accept_typical(tree, logits, sampling=Sampling(), epsilon=epsilon, delta=0.3)
        b = accept_greedy(tree, logits)
        assert (a.path, a.bonus) == (b.path, b.bonus), tree
    assert branching >= 40


def test_deepest_path_wins_then_likelihood_then_index():
    #      0
    #    / | \
    #   1  2  3        tokens 0, 1, 2 with p(. | root) ≈ (0.308, 0.385, 0.308): all pass a low threshold
    #   |
    #   4              token 0, p ≈ 1: deeper, so it wins over the more likely node 2
    logits = torch.full((5, 4), -30.0)
    logits[0, :3] = torch.tensor([0.4, 0.5, 0.4]).log()
    logits[1:, 0] = 0.0
    tree = Tree(torch.tensor([9, 0, 1, 2, 0]), torch.tensor([-1, 0, 0, 0, 1]))
    acc = accept_typical(tree, logits, sampling=T1, epsilon=0.01, delta=0.01)
    assert acc.path == [0, 1, 4]
    shallow = Tree(torch.tensor([9, 0, 1, 2]), torch.tensor([-1, 0, 0, 0]))
    assert accept_typical(shallow, logits[:4], sampling=T1, epsilon=0.01, delta=0.01).path == [0, 2]  # likelier
    tie = Tree(torch.tensor([9, 2, 0]), torch.tensor([-1, 0, 0]))  # p(2) == p(0): the lower index wins
    assert accept_typical(tie, logits[:3], sampling=T1, epsilon=0.01, delta=0.01).path == [0, 1]


# ---- candidates only ---------------------------------------------------------------------------------
def test_never_accepts_a_non_candidate():
    gen = torch.Generator().manual_seed(1)
    seen_non_candidates = 0
    for _ in range(60):
        tree = _random_tree(gen, V)
        logits = torch.randn(len(tree), V, generator=gen) * 2
        cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
        seen_non_candidates += not all(cand)
        for eps in (1e-9, 0.09):  # 1e-9: accept everything else
            acc = accept_typical(tree, logits, sampling=T1, generator=gen, epsilon=eps, delta=0.3)
            assert all(cand[i] for i in acc.path), (tree, acc)
    assert seen_non_candidates >= 10


def test_non_candidate_below_accepted_path_is_skipped():
    """A deeper non-candidate chain (Lookahead's window) never extends the path."""
    tree = Tree(
        torch.tensor([5, 1, 2, 3, 4]), torch.tensor([-1, 0, 1, 2, 3]), candidate=[True, True, False, False, False]
    )
    acc = accept_typical(tree, torch.zeros(5, V), sampling=T1, epsilon=1e-9, delta=0.3)
    assert acc.path == [0, 1]


# ---- the extremes ----------------------------------------------------------------------------------
def test_threshold_one_rejects_everything_and_bonus_follows_p(tables):
    """ε = 1, δ = 1e6: min(1, 1e6·exp(−H)) = 1 (exp(H) ≤ 12 here) and p(x) > 1 never holds."""
    target, _ = tables
    top = int(target(()).argmax())
    draft = [top, int(target((top,)).argmax())]  # the target's own top tokens: greedy would accept both
    logits = torch.stack([target(()), target((draft[0],)), target(tuple(draft))])  # (3, V)
    tree = Tree.chain(CONTEXT[-1], draft)
    gen = torch.Generator().manual_seed(4)
    draws = [accept_typical(tree, logits, sampling=T1, generator=gen, epsilon=1.0, delta=1e6) for _ in range(2000)]
    assert all(a.path == [0] for a in draws)
    counts = np.bincount([a.bonus for a in draws], minlength=V)
    assert chi_square(counts, warp_probs(target(()), T1).double().numpy())["p_value"] > FALSE_ALARM


def test_tiny_epsilon_accepts_every_candidate_with_positive_p():
    gen = torch.Generator().manual_seed(2)
    for _ in range(40):
        tree = _random_tree(gen, V)
        logits = torch.randn(len(tree), V, generator=gen) * 2  # every p(x) > 1e-9 at T = 1
        acc = accept_typical(tree, logits, sampling=T1, generator=gen, epsilon=1e-9, delta=0.3)
        cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
        deepest = max(int(d) for d, c in zip(tree.depths, cand, strict=True) if c)
        assert len(acc.path) - 1 == deepest
    # p = 0 (outside top-k) is still rejected, however low the threshold
    logits = torch.arange(V, dtype=torch.float).repeat(3, 1)  # (3, V) token V-1 most likely
    chain = Tree.chain(0, [V - 1, 0])  # token 0 is outside the top 6
    acc = accept_typical(chain, logits, sampling=Sampling(temperature=1.0, top_k=6), epsilon=1e-9, delta=0.3)
    assert acc.path == [0, 1]


# ---- lossy, and measured ---------------------------------------------------------------------------
def test_typical_drift_is_far_above_the_exact_noise_floor(tables):
    target, draft = tables
    drift = typical_drift(target, draft, T1, epsilon=0.09, delta=0.3, k=2, trials=1500, n=2, seed=7)
    floor = drift_baseline(target, draft, T1, k=2, trials=1500, n=2, seed=7)
    assert floor["chi2"]["p_value"] > FALSE_ALARM, floor  # the exact rule passes on the same drafts
    assert drift["chi2"]["p_value"] < FALSE_ALARM, drift  # typical acceptance does not: it is lossy
    assert drift["tv"] > 3 * floor["tv"] and drift["tv"] > 0.3, (drift, floor)
    assert drift["kl"] > 10 * floor["kl"]
    assert drift["trials"] == floor["trials"] == 1500
    assert (drift["epsilon"], drift["delta"], drift["temperature"]) == (0.09, 0.3, 1.0)


# ---- parameters and registration --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": 1.5}, "epsilon"),
        ({"epsilon": -0.1}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": -1.0}, "delta"),
        ({"delta": math.inf}, "delta"),
    ],
)
def test_bad_thresholds_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        typical_rule(**kwargs)
    with pytest.raises(ValueError, match=name):
        accept_typical(Tree.root(0), torch.zeros(1, V), sampling=T1, **kwargs)


def test_rule_object_and_registration():
    rule = typical_rule(0.2, 0.5)
    assert rule.__name__ == "typical(epsilon=0.2, delta=0.5)" and "epsilon=0.2" in repr(rule)
    tree = Tree.chain(0, [3, 4])
    logits = torch.randn(3, V)
    gen_a, gen_b = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    a = rule(tree, logits, sampling=T1, generator=gen_a)
    b = accept_typical(tree, logits, sampling=T1, generator=gen_b, epsilon=0.2, delta=0.5)
    assert (a.path, a.bonus) == (b.path, b.bonus)
    assert ACCEPT_RULES["typical"] is accept_typical and get_accept_rule("typical") is accept_typical
    assert TREE_RULES.pick(None, Sampling(), "medusa") is accept_greedy
    assert TREE_RULES.pick("typical", T1, "medusa") is accept_typical
    assert TREE_RULES.pick(None, T1, "medusa") is accept_exact  # the exact tree rule by default
    with pytest.raises(ValueError, match="cannot use"):
        TREE_RULES.pick("speculative", T1, "medusa")
