"""Exact sampling on branching trees: the emitted sequence's EXACT distribution equals autoregressive sampling.

Design. A table target over a tiny vocabulary (logits a fixed random function of the whole prefix) and a
draft that is a noisy copy of it; toy trees with sibling sets at depth 1 and 2 and a non-candidate node (as
Lookahead's window) placed between candidates; siblings drawn deterministically (top-k of q), i.i.d. from q,
or without replacement. Decoding runs until n tokens are out (each step's tree cut to the depth the budget
allows, as `generate` does); n = 3 reaches the depth-2 sibling sets. `accept.exactness.rule_joint` walks every
branch of the drafts' and the rule's randomness, so P(t_1..t_n) under the rule is computed exactly, not
sampled: an exact rule's total variation from Π p(t_i | t_<i) is float32 rounding (EXACT_TV), a broken
rule's is orders of magnitude above (BROKEN_TV). No false alarms, no seeds to tune.

The rules' own randomness (`Coins` on a torch.Generator) is checked apart by a G-test on sampled episodes
(fixed seeds; false-alarm rate FALSE_ALARM per test).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from specdec_lab.accept import ACCEPT_RULES, CHAIN_RULES, TREE_RULES, accept_greedy, get_accept_rule
from specdec_lab.accept.exactness import (
    BROKEN_RULES,
    TableLM,
    autoregressive_joint,
    enumerate_outcomes,
    g_test,
    propose,
    rule_joint,
    run_episode,
    step_accepted,
    total_variation,
)
from specdec_lab.accept.traversal import accept_traversal
from specdec_lab.accept.tree_rules import (
    Coins,
    accept_exact,
    accept_multi_draft,
    accept_one_hot,
    accept_without_replacement,
)
from specdec_lab.sampling import Sampling
from specdec_lab.trees.tree import MalformedTreeError, Tree

EXACT_TV = 1e-6  # float32 rounding of p and q; measured exact rules sit near 1e-8
BROKEN_TV = 1e-2
FALSE_ALARM = 1e-3

SETTINGS = {
    "t1": Sampling(temperature=1.0),
    "t0.7-top_p0.9": Sampling(temperature=0.7, top_p=0.9),
    "t1.3-top_k3": Sampling(temperature=1.3, top_k=3),
    "t0.5": Sampling(temperature=0.5),
}

# root -> a, w, b (w a non-candidate between candidates); a -> c, d. Depth-2 siblings under a.
SHAPE = ([-1, 0, 0, 0, 1, 1], [True, True, False, True, True, True])
# Deterministic draws are cheap to enumerate: a wider tree, with a non-candidate subtree and siblings at
# depth 2 under two parents. root -> 1, 2(nc), 3, 4; 1 -> 5, 6; 3 -> 7; 2 -> 8(nc).
WIDE = ([-1, 0, 0, 0, 0, 1, 1, 3, 2], [True, True, False, True, True, True, True, True, False])
CHAIN = ([-1, 0, 1], [True, True, True])
SHAPE_NAMES = {id(SHAPE): "shape", id(WIDE): "wide", id(CHAIN): "chain"}


def case_id(value) -> str | None:
    """Readable test ids: shapes by name, strings and numbers as they are."""
    return SHAPE_NAMES.get(id(value)) if isinstance(value, tuple) else str(value)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: thousands of tiny ops on one thread


def models(vocab: int):
    target = TableLM(vocab, seed=0)
    return target, TableLM(vocab, seed=1, base=target, noise=1.0)


def tv_from_autoregressive(rule, vocab, setting, shape, draw, n) -> float:
    target, draft = models(vocab)
    sampling = SETTINGS[setting]
    joint = rule_joint(rule, target, draft, sampling, *shape, draw, n)
    assert abs(sum(joint.values()) - 1.0) < 1e-9  # every branch walked
    return total_variation(joint, autoregressive_joint(target, sampling, n))


def test_toy_models_are_context_dependent_and_overlapping():
    target, draft = models(4)
    s = SETTINGS["t1"]
    assert not torch.allclose(target.probs((), s), target.probs((1,), s), atol=0.05)
    overlap = float(torch.minimum(target.probs((), s), draft.probs((), s)).sum())  # α of one draft token
    assert 0.3 < overlap < 0.95


# ---- exact rules: exact distribution --------------------------------------------------------------------
CASES = [  # (draw, vocab, shape, setting, n): n = 3 reaches the depth-2 sibling sets
    *[("deterministic", 5, WIDE, s, 3) for s in SETTINGS],
    ("sampled", 4, SHAPE, "t1", 2),
    ("sampled", 4, SHAPE, "t0.7-top_p0.9", 3),
    ("sampled", 4, SHAPE, "t1.3-top_k3", 3),
    ("sampled", 4, CHAIN, "t0.5", 3),  # a chain: multi-draft is chain speculative sampling
    ("without_replacement", 4, SHAPE, "t1", 2),
    ("without_replacement", 4, SHAPE, "t0.7-top_p0.9", 3),
    ("without_replacement", 4, SHAPE, "t1.3-top_k3", 3),
]


@pytest.mark.parametrize("draw, vocab, shape, setting, n", CASES, ids=case_id)
def test_exact_rule_emits_the_autoregressive_distribution(draw, vocab, shape, setting, n):
    assert tv_from_autoregressive(accept_exact, vocab, setting, shape, draw, n) < EXACT_TV


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_one_hot_tree_rule_is_lossless_eagle_issue_329(setting):
    """SafeAILab/EAGLE#329 (open; #221, #183 before it) says EAGLE's sampled verification — q taken as 1
    for its top-k siblings, accept x with probability p(x), else p(x) := 0 and renormalise — is not lossless.
    On deterministic top-k siblings (EAGLE-2/3's `topK_genrate`, Medusa, SGLang) it is: the exact joint of
    the first three tokens equals autoregressive sampling at every temperature and top-p/top-k here.
    The rule is `accept_one_hot`; a top-k sibling set is a function of the path, so q is one-hot."""
    assert tv_from_autoregressive(accept_one_hot, 5, setting, WIDE, "deterministic", 3) < EXACT_TV


@pytest.mark.parametrize("draw", ["sampled", "without_replacement"])
def test_one_hot_rule_is_exact_on_sampled_siblings_but_accepts_less(draw):
    """Ignoring q is not what breaks exactness: conditioned on the drawn siblings, q is one-hot. Using q
    (min(1, p/q) ≥ p) is what accepts more."""
    target, draft = models(4)
    s = SETTINGS["t1.3-top_k3"]
    assert tv_from_autoregressive(accept_one_hot, 4, "t1.3-top_k3", SHAPE, draw, 2) < EXACT_TV
    one_hot = step_accepted(accept_one_hot, target, draft, s, *SHAPE, draw)
    with_q = step_accepted(accept_exact, target, draft, s, *SHAPE, draw)
    assert with_q > one_hot + 0.1


def test_without_replacement_accepts_more_than_iid_siblings():
    target, draft = models(4)
    s = SETTINGS["t1"]
    iid = step_accepted(accept_multi_draft, target, draft, s, *SHAPE, "sampled")
    distinct = step_accepted(accept_without_replacement, target, draft, s, *SHAPE, "without_replacement")
    assert distinct > iid


# ---- broken variants fail the same test ----------------------------------------------------------------
BROKEN_CASES = [
    ("no_renormalisation", "deterministic", 5, WIDE, "t1"),
    ("no_renormalisation", "sampled", 4, SHAPE, "t1"),
    ("no_renormalisation", "without_replacement", 4, SHAPE, "t1.3-top_k3"),
    ("retries_rejected", "deterministic", 5, WIDE, "t0.7-top_p0.9"),
    ("retries_rejected", "sampled", 4, SHAPE, "t1.3-top_k3"),
    ("retries_rejected", "without_replacement", 4, SHAPE, "t1"),
    ("q_ignored_in_residual", "sampled", 4, SHAPE, "t1"),
    ("q_ignored_in_residual", "without_replacement", 4, SHAPE, "t1.3-top_k3"),
    ("without_replacement_as_iid", "without_replacement", 4, SHAPE, "t1"),
]


@pytest.mark.parametrize("name, draw, vocab, shape, setting", BROKEN_CASES, ids=case_id)
def test_broken_rule_fails(name, draw, vocab, shape, setting):
    assert tv_from_autoregressive(BROKEN_RULES[name], vocab, setting, shape, draw, 2) > BROKEN_TV


# ---- Traversal Verification (arXiv 2505.12398): exact, and what it adds on the same trees ----------------
TRAVERSAL_CASES = [  # n = 3: depth-2 paths, where sequence-level weights differ from per-token ones
    ("deterministic", 5, WIDE, "t0.7-top_p0.9"),
    ("deterministic", 5, WIDE, "t1.3-top_k3"),
    ("sampled", 4, SHAPE, "t0.7-top_p0.9"),
    ("sampled", 4, CHAIN, "t1"),  # a chain: block verification
    ("sampled", 4, CHAIN, "t0.5"),
    ("without_replacement", 4, SHAPE, "t0.7-top_p0.9"),
    ("without_replacement", 4, SHAPE, "t1.3-top_k3"),
]


@pytest.mark.parametrize("draw, vocab, shape, setting", TRAVERSAL_CASES, ids=case_id)
def test_traversal_emits_the_autoregressive_distribution(draw, vocab, shape, setting):
    assert tv_from_autoregressive(accept_traversal, vocab, setting, shape, draw, 3) < EXACT_TV


@pytest.mark.parametrize(
    "name, draw, vocab, shape, setting",
    [
        ("traversal_stale_weight", "sampled", 4, CHAIN, "t1"),
        ("traversal_stale_weight", "without_replacement", 4, SHAPE, "t0.7-top_p0.9"),
        ("traversal_token_residual", "sampled", 4, CHAIN, "t0.5"),
        ("traversal_token_residual", "deterministic", 5, WIDE, "t1"),
    ],  # fmt: skip
    ids=case_id,
)
def test_broken_traversal_fails(name, draw, vocab, shape, setting):
    assert tv_from_autoregressive(BROKEN_RULES[name], vocab, setting, shape, draw, 3) > BROKEN_TV


GAIN_CASES = [("sampled", SHAPE), ("without_replacement", SHAPE), ("sampled", CHAIN)]


@pytest.mark.parametrize("setting", ["t1", "t0.7-top_p0.9"])
def test_traversal_accepts_at_least_the_per_node_rule_on_the_same_trees(setting):
    """Exact E[accepted drafts] of one step, both rules on the same enumerated trees (`step_accepted`): equal on
    deterministic siblings (both accept the longest path the target's sample follows), never lower with
    sampled ones, higher on a sampled chain (block verification's gain)."""
    target, draft = models(4)
    s = SETTINGS[setting]
    gains = {}
    for draw, shape in GAIN_CASES:
        per_node = step_accepted(accept_exact, target, draft, s, *shape, draw)
        gains[draw, SHAPE_NAMES[id(shape)]] = step_accepted(accept_traversal, target, draft, s, *shape, draw) - per_node
    assert min(gains.values()) > -1e-9, gains
    assert gains["sampled", "chain"] > 1e-3, gains
    wide = models(5)
    same = [step_accepted(rule, *wide, s, *WIDE, "deterministic") for rule in (accept_exact, accept_traversal)]
    assert abs(same[0] - same[1]) < EXACT_TV  # float32 rounding (the per-node rule works in float32)


def test_traversal_at_temperature_zero_accepts_what_greedy_does():
    target, draft = models(5)
    gen = torch.Generator().manual_seed(0)
    for trial in range(20):
        prefix = tuple(torch.randint(0, 5, (trial % 3,), generator=gen).tolist())
        tree = propose(*WIDE, prefix, draft, SETTINGS["t1"], "deterministic", Coins(gen))
        logits = torch.stack([target(prefix + path) for path in tree.meta["paths"]])
        a, b = accept_traversal(tree, logits, sampling=Sampling(), generator=gen), accept_greedy(tree, logits)
        assert (a.path, a.bonus) == (b.path, b.bonus)


def test_traversal_is_a_named_rule_for_chains_and_trees():
    t1 = SETTINGS["t1"]
    assert ACCEPT_RULES["traversal"] is accept_traversal
    assert TREE_RULES.pick("traversal", t1, "medusa") is accept_traversal
    assert CHAIN_RULES.pick("traversal", t1, "draft") is accept_traversal


# ---- the rules' real randomness ------------------------------------------------------------------------
def sampled_counts(rule, draw, setting, trials, seed, n=2) -> tuple[Counter, dict]:
    target, draft = models(4)
    sampling = SETTINGS[setting]
    coins = Coins(torch.Generator().manual_seed(seed))
    counts = Counter(run_episode(rule, target, draft, sampling, *SHAPE, draw, n, coins) for _ in range(trials))
    return counts, autoregressive_joint(target, sampling, n)


@pytest.mark.parametrize("rule, n", [(accept_exact, 2), (accept_traversal, 3)], ids=["exact", "traversal"])
@pytest.mark.parametrize("draw", ["deterministic", "sampled", "without_replacement"])
def test_sampled_episodes_pass_a_g_test(draw, rule, n):
    counts, exact = sampled_counts(rule, draw, "t1", trials=3000, seed=7, n=n)
    result = g_test(counts, exact)
    assert result["dof"] >= 8 and result["p_value"] > FALSE_ALARM, result


@pytest.mark.parametrize("name, draw", [("retries_rejected", "deterministic"), ("no_renormalisation", "sampled")])
def test_broken_rule_fails_the_g_test(name, draw):
    counts, exact = sampled_counts(BROKEN_RULES[name], draw, "t1", trials=3000, seed=8)
    assert g_test(counts, exact)["p_value"] < FALSE_ALARM


# ---- structure and registry ----------------------------------------------------------------------------
def test_temperature_zero_accepts_what_greedy_does():
    target, draft = models(5)
    gen = torch.Generator().manual_seed(0)
    coins = Coins(gen)
    for trial in range(20):
        prefix = tuple(torch.randint(0, 5, (trial % 3,), generator=gen).tolist())
        tree = propose(*WIDE, prefix, draft, SETTINGS["t1"], "deterministic", coins)
        logits = torch.stack([target(prefix + path) for path in tree.meta["paths"]])
        a, b = accept_exact(tree, logits, sampling=Sampling(), generator=gen), accept_greedy(tree, logits)
        assert (a.path, a.bonus) == (b.path, b.bonus)


def test_rules_refuse_trees_drawn_otherwise():
    target, draft = models(4)
    coins = Coins(torch.Generator().manual_seed(0))
    det = propose(*SHAPE, (), draft, SETTINGS["t1"], "deterministic", coins)
    wor = propose(*SHAPE, (), draft, SETTINGS["t1"], "without_replacement", coins)
    logits = torch.zeros(len(det), 4)
    with pytest.raises(ValueError, match="sampled siblings"):
        accept_multi_draft(det, logits, sampling=SETTINGS["t1"])
    with pytest.raises(ValueError, match="sampled siblings"):
        accept_multi_draft(wor, torch.zeros(len(wor), 4), sampling=SETTINGS["t1"])
    accept_one_hot(wor, torch.zeros(len(wor), 4), sampling=SETTINGS["t1"])  # exact on any draw


def test_tree_carries_its_sibling_draw():
    tokens, parents = torch.tensor([0, 1, 2]), torch.tensor([-1, 0, 0])
    q = torch.full((3, 4), 0.25)
    assert Tree(tokens, parents).sibling_draw == "deterministic"
    assert Tree(tokens, parents, draft_probs=q).sibling_draw == "sampled"
    assert Tree.chain(0, [1, 2], draft_probs=q).sibling_draw == "sampled"
    tree = Tree(tokens, parents, draft_probs=q, sibling_draw="without_replacement")
    assert tree.truncate_depth(0).sibling_draw == "without_replacement"
    with pytest.raises(MalformedTreeError, match="one of"):
        Tree(tokens, parents, sibling_draw="top-k")
    with pytest.raises(MalformedTreeError, match="need their q"):
        Tree(tokens, parents, sibling_draw="sampled")
    with pytest.raises(MalformedTreeError, match="need their q"):
        Tree(tokens, parents, draft_probs=q, sibling_draw="deterministic")
    with pytest.raises(MalformedTreeError, match=r"\(N=3, V\)"):
        Tree(tokens, parents, draft_probs=q[:2])


def test_registry_names_the_tree_rules():
    for name, rule in [("exact", accept_exact), ("one_hot", accept_one_hot), ("multi_draft", accept_multi_draft),
                       ("without_replacement", accept_without_replacement)]:  # fmt: skip
        assert ACCEPT_RULES[name] is rule and get_accept_rule(name) is rule


@pytest.mark.parametrize("setting", ["t1", "t0.7-top_p0.9", "t1.3-top_k3"])
def test_one_hot_walk_on_scalars_equals_the_residual_walk(setting):
    """`accept_one_hot`'s fast walk (one read of p(x) per sibling set, residual built only for the bonus) has
    exactly the outcome distribution of the general walk with one-hot residuals, duplicate siblings and a
    non-candidate sibling included."""
    from specdec_lab.accept.tree_rules import _walk, _walk_one_hot

    # root -> 2, 2 (duplicate), 3 (non-candidate), 4; first 2 -> 1, 1 (duplicate); 4 -> 5
    tree = Tree(torch.tensor([0, 2, 2, 3, 4, 1, 1, 5]), torch.tensor([-1, 0, 0, 0, 0, 1, 1, 4]),
                candidate=torch.tensor([True, True, True, False, True, True, True, True]))  # fmt: skip
    s = SETTINGS[setting]

    def outcome(walk):
        return lambda coins: (lambda acc: (tuple(acc.path), acc.bonus))(walk(coins))

    for seed in range(10):
        logits = torch.randn(len(tree), 6, generator=torch.Generator().manual_seed(seed)) * 2
        general = enumerate_outcomes(outcome(lambda c, x=logits: _walk(tree, x, s, c, "deterministic")))
        fast = enumerate_outcomes(outcome(lambda c, x=logits: _walk_one_hot(tree, x, s, c)))
        assert total_variation(general, fast) < EXACT_TV
