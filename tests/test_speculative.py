"""Exact speculative sampling: the emitted tokens follow the target's distribution, and broken rules fail.

Statistical design. A tiny target (vocabulary 12) and a draft made by perturbing its layers give
context-dependent p and q with α between ~0.1 and ~0.7 depending on the prefix. Each test runs many
independent episodes of drafting k = 2 tokens, verifying them with the rule under test and continuing
until two tokens are emitted, and compares the joint histogram of (t_1, t_2) with the exact
P(t_1, t_2) = p(t_1) p(t_2 | t_1) by Pearson's chi-square (cells with expected count < 5 pooled).

False-alarm rate: a correct rule fails a test with probability FALSE_ALARM = 1e-3 (per test; < 1% for the
whole file). Seeds are fixed, so a run is reproducible: these tests are not flaky by construction. The
broken rules' p-values are astronomically small (< 1e-30 at these sizes), so the power is ample.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import specdec_lab as S
from specdec_lab.accept import accept_greedy, accept_speculative
from specdec_lab.accept.losslessness import (
    LogitsTable,
    accept_resample_from_p,
    accept_without_ratio,
    chi_square,
    exact_joint,
    simulate_emitted,
)
from specdec_lab.cost.theory import acceptance_rate
from specdec_lab.models.draft_model import Draft
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.trees.tree import Tree

FALSE_ALARM = 1e-3
V = 12
CONTEXT = [1, 2, 3]
SETTINGS = {
    "t1": Sampling(temperature=1.0),
    "t0.8-top_p0.9": Sampling(temperature=0.8, top_p=0.9),
    "t1.3-top_k6": Sampling(temperature=1.3, top_k=6),
}


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: thousands of tiny ops on one thread


def _perturbed(model, noise: float, seed: int):
    """A copy of `model` whose layer weights got relative Gaussian noise: q close to, but not, p."""
    draft = S.tiny_model(vocab_size=V, seed=0)
    draft.load_state_dict(model.state_dict())
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in draft.named_parameters():
            if "layers" in name:
                p.add_(torch.randn(p.shape, generator=gen) * noise * p.std())
    return draft


@pytest.fixture(scope="module")
def models():
    target = S.tiny_model(vocab_size=V, seed=0)
    return target, _perturbed(target, 0.3, seed=5)


@pytest.fixture(scope="module")
def tables(models):
    target, draft = models
    with torch.random.fork_rng(devices=[]):
        torch.set_num_threads(1)
        return LogitsTable(target, CONTEXT).fill(3), LogitsTable(draft, CONTEXT).fill(3)


def test_distributions_are_context_dependent_and_overlap(tables):
    target, draft = tables
    s = SETTINGS["t1"]
    prefixes = [(), (0,), (0, 1), (5,)]
    alphas = [float(acceptance_rate(warp_probs(target(p), s), warp_probs(draft(p), s))) for p in prefixes]
    assert 0.05 < min(alphas) and max(alphas) < 0.95  # neither identical nor disjoint
    assert not torch.allclose(warp_probs(target(()), s), warp_probs(target((1,)), s), atol=0.05)


@pytest.mark.parametrize("name", list(SETTINGS))
def test_speculative_sampling_matches_target(tables, name):
    target, draft = tables
    sampling = SETTINGS[name]
    counts = simulate_emitted(target, draft, sampling, k=2, trials=3000, n=2, seed=11)
    result = chi_square(counts, exact_joint(target, sampling, n=2))
    assert result["dof"] >= 5
    assert result["p_value"] > FALSE_ALARM, result


def test_deterministic_draft_is_exact(tables):
    """draft_probs=None (one-hot q: prompt lookup, greedy drafts) under sampling: still p."""
    target, draft = tables
    sampling = SETTINGS["t1"]
    counts = simulate_emitted(target, draft, sampling, k=2, trials=2000, n=2, seed=12, deterministic=True)
    assert chi_square(counts, exact_joint(target, sampling, n=2))["p_value"] > FALSE_ALARM


@pytest.mark.parametrize("rule", [accept_without_ratio, accept_resample_from_p], ids=lambda r: r.__name__)
@pytest.mark.parametrize("name", ["t1", "t0.8-top_p0.9"])
def test_broken_rules_fail(tables, rule, name):
    target, draft = tables
    sampling = SETTINGS[name]
    counts = simulate_emitted(target, draft, sampling, k=2, trials=1500, n=2, rule=rule, seed=13)
    assert chi_square(counts, exact_joint(target, sampling, n=2))["p_value"] < FALSE_ALARM


def test_root_only_tree_samples_from_p(tables):
    """A root-only tree is one step of plain sampling: this is how autoregressive sampling runs."""
    target, _ = tables
    sampling = SETTINGS["t1.3-top_k6"]
    gen = torch.Generator().manual_seed(3)
    logits = target(())[None]  # (1, V)
    root = Tree.root(CONTEXT[-1])
    draws = [accept_speculative(root, logits, sampling=sampling, generator=gen) for _ in range(3000)]
    assert all(a.path == [0] for a in draws)
    counts = np.bincount([a.bonus for a in draws], minlength=V)
    assert chi_square(counts, exact_joint(target, sampling, n=1))["p_value"] > FALSE_ALARM


def test_temperature_zero_reduces_to_greedy(tables):
    target, draft = tables
    gen = torch.Generator().manual_seed(0)
    for trial in range(30):
        drafts = torch.randint(0, V, (3,), generator=gen).tolist()
        if trial % 3 == 0:  # make some prefixes right
            drafts[0] = int(target(()).argmax())
        logits = torch.stack([target(tuple(drafts[:j])) for j in range(4)])
        tree = Tree.chain(CONTEXT[-1], drafts)
        a, b = accept_speculative(tree, logits, sampling=Sampling()), accept_greedy(tree, logits)
        assert (a.path, a.bonus) == (b.path, b.bonus)


def test_branching_tree_is_rejected():
    tree = Tree(torch.tensor([1, 2, 3]), torch.tensor([-1, 0, 0]))
    with pytest.raises(ValueError, match="chain"):
        accept_speculative(tree, torch.zeros(3, V), sampling=SETTINGS["t1"])


def test_generate_draft_method_is_exact_end_to_end(models, tables):
    """The whole loop (draft proposer with a reduced vocabulary, q = 0 outside it) samples like the target."""
    target, draft_model = models
    exact = exact_joint(tables[0], SETTINGS["t0.8-top_p0.9"], n=2)
    draft = Draft(model=draft_model, vocab=torch.arange(0, V, 2), name="tiny-even-tokens")  # half the vocab
    counts = np.zeros(V * V, dtype=np.int64)
    for seed in range(700):
        r = S.generate(
            target, CONTEXT, method="draft", draft=draft, draft_length=2, max_new_tokens=2,
            temperature=0.8, top_p=0.9, seed=seed, trace=False,
        )  # fmt: skip
        counts[r.tokens[0] * V + r.tokens[1]] += 1
    assert chi_square(counts, exact)["p_value"] > FALSE_ALARM
    odd = sum(counts.reshape(V, V)[t].sum() for t in range(1, V, 2))
    assert odd > 0  # tokens the draft can never propose are still emitted (via the residual / bonus)
