"""Every method samples exactly, end to end: the first tokens `generate` emits follow the target's own
autoregressive distribution, for every method and its kinds of trees.

Design. A tiny random Llama with a vocabulary of V = 8 tokens is the target, so the first N_TOKENS tokens
after the prompt have V^N_TOKENS possible values and their exact joint P(t_1..t_n) = Π p(t_i | prompt, t_<i)
is computed by enumerating the target's conditionals (one forward per prefix, warped as generation warps).
Each case runs `generate(..., max_new_tokens=N_TOKENS, temperature=T, top_p=..., seed=s)` for RUNS seeds
and compares the histogram of the emitted (t_1..t_n) with that joint by a G-test (`accept.exactness.g_test`,
cells with expected count < 5 pooled). With N_TOKENS = 3 the first step's tree keeps depth 2, so siblings
below an accepted node are verified too. Every method drafts for sure (fixed draft lengths, a flat cost curve
on which every tree pays), and each case checks that it drafted, accepted drafts and, for tree methods,
verified sibling sets: a test that passes because nothing was proposed would prove nothing.

False alarms: a case whose first RUNS seeds reject at FALSE_ALARM is run again on the next RUNS seeds (an
independent sample) and fails only if that rejects too, so a correct method fails a case with probability
FALSE_ALARM² while a broken rule, rejected by orders of magnitude, fails both; seeds are fixed, so a run is
reproducible. (With 20 cases at one stage, a family-wise false alarm of ~2% did happen: lookahead at T = 1,
p = 0.00095, after the bonus draw's use of the generator changed; the same case on seeds 250–499: p = 0.62.)
Power: a broken rule (a rejected sibling retried, given to `generate` as a callable only
here) fails through the same harness.

Sibling draws, as declared by each proposer (`Tree.sibling_draw`) and so verified by `accept="exact"`:
draft and layer_skip chains are sampled (q carried); prompt lookup proposes one chain, the most recent
match of the longest suffix n-gram (deterministic: q one-hot); Medusa's top-s siblings, Lookahead's pool
n-grams and EAGLE-2's dynamic tree are deterministic (one-hot rule); an EAGLE chain is sampled; the hybrid's
merged trie of lookup chains, Medusa's top-s and EAGLE-2's expansion is deterministic (one-hot rule); Token
Recycling's walk of its successor table is deterministic (one-hot rule).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept.exactness import BROKEN_RULES, g_test
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.eagle import random_drafter
from specdec_lab.medusa import MedusaHeads
from specdec_lab.models.draft_model import Draft
from specdec_lab.proposers.medusa import Drafter
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.trees import DEFAULT_EDGES, HeadAccuracies, HeadConfidence

V = 8
PROMPT = [1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2, 6, 1, 2]  # 2 followed by 3..6: lookup matches, pool n-grams branch
N_TOKENS = 3
RUNS = 250
FALSE_ALARM = 1e-3
SETTINGS = {"t0.7-top_p0.9": Sampling(temperature=0.7, top_p=0.9), "t1": Sampling(temperature=1.0)}


@pytest.fixture(scope="module")
def target():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # thousands of tiny forwards: one thread wastes nothing on a shared machine
    model = S.tiny_model(vocab_size=V, num_layers=4, eos_token_id=None, seed=2)
    for tree in (False, True):  # flat cost curves: every draft and tree pays, the methods always draft
        set_cost_curve(model, CostCurve(sizes=[1, 64], seconds=[1.0, 1.0], tree=tree))
    yield model
    torch.set_num_threads(threads)


def perturbed(model, noise: float = 0.3, seed: int = 5):
    """A copy of `model` with relative Gaussian noise on its layers: q close to p, not equal."""
    draft = S.tiny_model(vocab_size=V, num_layers=4, eos_token_id=None, seed=2)
    draft.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in draft.named_parameters():
            if "layers" in name:
                p.add_(torch.randn(p.shape, generator=gen) * noise * p.std())
    return draft


def medusa_drafter(model) -> Drafter:
    """Random heads with an accuracy table (tree="auto") and a confidence calibration (tree="dynamic")."""
    heads = MedusaHeads.for_model(model, num_heads=2)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    accuracies = HeadAccuracies(top=torch.tensor([[0.6 * 0.5**i * 0.7**k for i in range(3)] for k in range(2)]))
    mids = [(a + b) / 2 for a, b in zip(DEFAULT_EDGES, DEFAULT_EDGES[1:], strict=False)]
    confidence = HeadConfidence(edges=DEFAULT_EDGES, accuracy=torch.tensor([[min(1.0, 2 * m) for m in mids]] * 2),
                                positions=100)  # fmt: skip
    return Drafter(heads=heads, source=None, vocab=None, accuracies=accuracies, confidence=confidence,
                   head_seconds={1: 0.0, 2: 0.0})  # fmt: skip


@pytest.fixture(scope="module")
def methods(target):
    """name -> (generate keyword arguments, whether its trees branch)."""
    draft = Draft(model=perturbed(target), vocab=None, name="tiny-perturbed")
    medusa = dict(heads=medusa_drafter(target), vocab="full", accuracy="independent")
    eagle = random_drafter(target, "eagle3", vocab=torch.arange(V), seed=1)
    eagle.step_seconds = 0.0  # drafting priced free: EAGLE-2's trees always grow
    both = dict(heads=medusa["heads"], weights=eagle)  # the hybrid drafts from all four sources
    hybrid = dict(method="hybrid", sources="prompt_lookup+recycle+medusa+eagle", max_budget=6, width=3, **both)
    return {
        "draft": (dict(method="draft", draft=draft, draft_length=2), False),
        "layer_skip": (dict(method="layer_skip", n_layers=2, draft_length=2, vocab="full"), False),
        "prompt_lookup": (dict(method="prompt_lookup", draft_length=2), False),
        "medusa_static": (dict(method="medusa", tree="cartesian:3,2", **medusa), True),
        "medusa_online": (dict(method="medusa", tree="auto", max_budget=6, **medusa), True),
        "medusa_dynamic": (dict(method="medusa", tree="dynamic", max_budget=6, **medusa), True),
        "lookahead": (dict(method="lookahead", W=2, N=3, G=3), True),
        "eagle_chain": (dict(method="eagle", weights=eagle, draft_length=2), False),
        "eagle_dynamic": (dict(method="eagle", weights=eagle, tree="dynamic", max_budget=6, width=3), True),
        "hybrid": (hybrid, True),
        "recycle": (dict(method="recycle", max_budget=6), True),
    }


@torch.no_grad()
def autoregressive_joint(model, prompt: list[int], sampling: Sampling, n: int) -> dict[tuple[int, ...], float]:
    """Exact {t_1..t_n: Π p(t_i | prompt, t_<i)}: one batched forward per length over every live prefix."""
    joint = {(): 1.0}
    for _ in range(n):
        seqs = list(joint)
        ids = torch.tensor([prompt + list(s) for s in seqs])  # (B, L)
        probs = warp_probs(model(ids).logits[:, -1], sampling).double()  # (B, V)
        joint = {
            s + (t,): joint[s] * float(probs[b, t]) for b, s in enumerate(seqs) for t in range(V) if probs[b, t] > 0
        }
    return joint


def sample_runs(model, kwargs: dict, sampling: Sampling, runs: int = RUNS, first_seed: int = 0) -> tuple[Counter, dict]:
    """Histogram of the first N_TOKENS tokens over `runs` seeded runs, and what was drafted on the way."""
    counts: Counter = Counter()
    drafted = {"proposed": 0, "accepted": 0, "branching": 0}
    for seed in range(first_seed, first_seed + runs):
        r = S.generate(model, PROMPT, max_new_tokens=N_TOKENS, temperature=sampling.temperature,
                       top_p=sampling.top_p, seed=seed, **kwargs)  # fmt: skip
        counts[tuple(r.tokens)] += 1
        for step in r.steps:
            drafted["proposed"] += step.proposed
            drafted["accepted"] += len(step.path) - 1
            cand = step.tree_candidate or [True] * len(step.tree_parents)
            parents = [p for p, c in zip(step.tree_parents[1:], cand[1:], strict=True) if c]
            drafted["branching"] += len(parents) > len(set(parents))  # a node with two candidate children
    return counts, drafted


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize(
    "name",
    [
        "draft",
        "layer_skip",
        "prompt_lookup",
        "medusa_static",
        "medusa_online",
        "medusa_dynamic",
        "lookahead",
        "eagle_chain",
        "eagle_dynamic",
        "hybrid",
        "recycle",
    ],  # fmt: skip
)
def test_method_emits_the_autoregressive_distribution(target, methods, name, setting):
    kwargs, branches = methods[name]
    sampling = SETTINGS[setting]
    counts, drafted = sample_runs(target, kwargs, sampling)
    assert drafted["proposed"] > 0 and drafted["accepted"] > 0, drafted  # the rule was exercised
    if branches:
        assert drafted["branching"] > 0, drafted  # sibling sets were verified
    joint = autoregressive_joint(target, PROMPT, sampling, N_TOKENS)
    result = g_test(counts, joint)
    if result["p_value"] <= FALSE_ALARM:  # the second stage (module docstring): an independent sample
        result = {"first_stage": result, **g_test(sample_runs(target, kwargs, sampling, first_seed=RUNS)[0], joint)}
    assert result["dof"] >= 4 and result["p_value"] > FALSE_ALARM, result


def test_a_broken_rule_fails_the_same_harness(target, methods):
    """The one-hot rule that gives a rejected sibling a second coin against the same p (so it is emitted with
    probability about 2p(x) instead of p(x)), given to `generate` as a callable: Medusa's top-s trees through it
    no longer sample from p."""
    kwargs, _ = methods["medusa_static"]
    sampling = SETTINGS["t1"]
    counts, _ = sample_runs(target, dict(kwargs, accept=BROKEN_RULES["retries_rejected"]), sampling, runs=2 * RUNS)
    assert g_test(counts, autoregressive_joint(target, PROMPT, sampling, N_TOKENS))["p_value"] < FALSE_ALARM
