"""Dynamic Medusa trees: calibration of the heads' confidence, the best-first builder, exact greedy output."""

from __future__ import annotations

import pytest
import torch
from test_medusa_decoding import random_heads  # tests/ is on sys.path (pytest rootdir import)

import specdec_lab as S
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.proposers.medusa import Drafter, MedusaDecodeConfig, MedusaProposer
from specdec_lab.trees import DEFAULT_EDGES, HeadConfidence, confidence_from_probs, dynamic_tree

PROMPT = [5, 17, 42, 7, 99, 3, 18, 64]
STEEP = [1.0, 1.3, 1.6, 1.9, 3.1, 5.5, 10.3]
FLAT = [1.0] * 7
SIZES = [1, 2, 3, 4, 8, 16, 33]


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=2, eos_token_id=None)


def confidence(num_heads: int = 3, scale: float = 1.0) -> HeadConfidence:
    """c_k(p) = scale · mid-bin p, shrinking with depth: a plausible, monotone calibration."""
    mids = [(a + b) / 2 for a, b in zip(DEFAULT_EDGES, DEFAULT_EDGES[1:], strict=False)]
    acc = torch.tensor([[min(1.0, scale * m * 0.9**k) for m in mids] for k in range(num_heads)])
    return HeadConfidence(edges=DEFAULT_EDGES, accuracy=acc, positions=100)


def curve_list(seconds, n: int = 33) -> list[float]:
    c = CostCurve(sizes=SIZES, seconds=seconds, tree=True)
    return [float(c(i)) for i in range(1, n + 1)]


def head_fn(probs_per_head):
    calls = []

    def head(j):
        calls.append(j)
        p = probs_per_head[j]
        return p, [100 * (j + 1) + r for r in range(len(p))]

    return head, calls


def test_best_first_tree_is_prefix_closed_and_follows_the_curve():
    conf = confidence()
    sure = [[0.95, 0.03, 0.01, 0.01]] * 3
    head, _ = head_fn(sure)
    flat = dynamic_tree(head, conf, curve_list(FLAT), lambda d: 0.0, max_budget=32, max_depth=3)
    head, _ = head_fn(sure)
    steep = dynamic_tree(head, conf, curve_list(STEEP), lambda d: 0.0, max_budget=32, max_depth=3)
    assert len(steep.paths) < len(flat.paths)
    assert len(flat.paths) >= 20  # flat: every node with any value pays
    for t in (flat, steep):
        seen = {()}
        for path, parent in zip(t.paths, t.parents, strict=True):
            assert path[:-1] in seen  # parents first
            assert parent == (0 if len(path) == 1 else t.paths.index(path[:-1]) + 1)
            seen.add(path)
        assert t.tokens == [100 * len(p) + p[-1] for p in t.paths]
    assert steep.paths[:3] == [(0,), (0, 0), (0, 0, 0)]  # the sure chain first


def test_unsure_heads_give_a_plain_step_and_deeper_heads_are_not_computed():
    conf = confidence()
    unsure = [[0.05, 0.04, 0.03, 0.02]] * 3
    head, calls = head_fn(unsure)
    t = dynamic_tree(head, conf, curve_list(STEEP), lambda d: 0.01 * d, max_budget=32, max_depth=3)
    assert t.paths == [] and t.expected_length == 1.0
    assert calls == [0]  # head 2 and 3 never ran: no child of a depth-1 node could pay


def test_confidence_calibration_recovers_a_known_accuracy():
    g = torch.Generator().manual_seed(0)
    t, k, s = 20000, 2, 3
    probs = torch.rand(t, k, s, generator=g).sort(-1, descending=True).values  # (T, K, S)
    correct = torch.rand(t, k, s, generator=g) < probs * 0.5  # right with probability p / 2
    present = torch.ones(t, k, dtype=torch.bool)
    conf = confidence_from_probs(probs, correct, present)
    assert conf.accuracy.shape == (k, len(DEFAULT_EDGES) - 1) and conf.top == s
    assert (conf.accuracy.diff(dim=1) >= -1e-12).all()  # monotone
    assert abs(conf.value(0, 0.8) - 0.4) < 0.05 and abs(conf.value(0, 0.35) - 0.175) < 0.05
    back = HeadConfidence.from_dict(conf.to_dict())
    torch.testing.assert_close(back.accuracy, conf.accuracy)
    with pytest.raises(ValueError, match=r"\(T, K, S\)"):
        confidence_from_probs(probs[0], correct, present)
    with pytest.raises(ValueError, match="edges"):
        HeadConfidence(edges=[0.0, 0.7, 0.5, 1.0], accuracy=torch.zeros(1, 3))


@pytest.mark.parametrize("seconds", [STEEP, FLAT], ids=["steep", "flat"])
def test_greedy_dynamic_medusa_equals_autoregressive(target, seconds):
    set_cost_curve(target, CostCurve(sizes=SIZES, seconds=seconds, tree=True))
    try:
        drafter = Drafter(heads=random_heads(target), source=None, vocab=None, accuracies=None,
                          confidence=confidence(scale=3.0), head_seconds={1: 0.0})  # fmt: skip
        prop = MedusaProposer(MedusaDecodeConfig(heads=drafter, tree="dynamic", max_budget=16))
        r = S.generate(target, PROMPT, max_new_tokens=30, proposer=prop)
        assert r.tokens == S.generate(target, PROMPT, max_new_tokens=30).tokens
        summary = r.proposer
        assert summary["tree"] == "dynamic" and summary["expected_length"] >= 1.0
        if seconds is FLAT:
            assert summary["nodes"] > 4  # a flat curve grows the trees
    finally:
        set_cost_curve(target, CostCurve(sizes=[1], seconds=[1.0], tree=True))


def test_dynamic_needs_a_confidence_calibration(target):
    drafter = Drafter(heads=random_heads(target), source=None, vocab=None, accuracies=None)
    with pytest.raises(ValueError, match="confidence calibration"):
        S.generate(target, PROMPT, max_new_tokens=4, method="medusa", heads=drafter, tree="dynamic")


@pytest.mark.real
def test_real_model_dynamic_medusa_equals_autoregressive(real_model):
    ids = real_model.chat_ids("Write a Python function that returns the squares of a list of numbers.")
    ar = S.generate(real_model, ids, max_new_tokens=48)
    r = S.generate(real_model, ids, max_new_tokens=48, method="medusa", tree="dynamic")
    assert r.tokens == ar.tokens
    assert r.mean_accepted > 1.2
