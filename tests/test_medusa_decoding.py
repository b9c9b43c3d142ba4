"""Medusa decoding through the one loop: exact greedy output, tree choice from costs, rules, bench specs."""

from __future__ import annotations

import random

import pytest
import torch

import specdec_lab as S
from specdec_lab import KVCache, Tree, prefill, verify_tree
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.medusa import MedusaHeads
from specdec_lab.models.quant import int8_kernel_works, quantize_rows
from specdec_lab.proposers.medusa import Drafter, MedusaDecodeConfig, MedusaProposer
from specdec_lab.trees import HeadAccuracies, cartesian_paths, parse_tree

PROMPT = [5, 17, 42, 7, 99, 3, 18, 64]


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=2, eos_token_id=None)


def random_heads(model, num_heads: int = 3, seed: int = 0) -> MedusaHeads:
    heads = MedusaHeads.for_model(model, num_heads=num_heads)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=g) * 0.05)
    return heads


def random_rank_paths(rng: random.Random, depth: int, width: int, nodes: int) -> list[tuple[int, ...]]:
    """A random prefix-closed set of rank paths (a random sparse Medusa tree)."""
    paths: set[tuple[int, ...]] = set()
    while len(paths) < nodes:
        parent = rng.choice([(), *sorted(paths)])
        if len(parent) < depth:
            paths.add((*parent, rng.randrange(width)))
    return sorted(paths, key=lambda p: (len(p), p))


@pytest.mark.parametrize("seed", range(4))
def test_greedy_medusa_equals_autoregressive_on_random_trees(target, seed):
    rng = random.Random(seed)
    heads = random_heads(target, seed=seed)
    ar = S.generate(target, PROMPT, max_new_tokens=40)
    for tree in ("chain:3", "cartesian:3,2", random_rank_paths(rng, depth=3, width=4, nodes=rng.randint(1, 12))):
        r = S.generate(target, PROMPT, method="medusa", max_new_tokens=40, heads=heads, tree=tree)
        assert r.tokens == ar.tokens, tree
        assert all(step.proposed == len(parse_tree(tree)) for step in r.steps[:-3])  # (the last: depth-cut)


def test_medusa_tree_logits_equal_each_path_run_alone(target):
    """Tree attention on a Medusa-shaped tree (Cartesian 3 x 2 x 2): every node equals its path run alone."""
    topk = torch.tensor([[11, 12, 13], [21, 22, 0], [31, 32, 0]])  # (D, s) candidates per depth
    tree = Tree.from_rank_paths(PROMPT[-1], cartesian_paths([3, 2, 2]), topk)
    cache = KVCache.for_model(target, capacity=64)
    prefill(target, cache, torch.tensor(PROMPT[:-1]))
    out = verify_tree(target, cache, tree)
    for node in range(len(tree)):
        ids = PROMPT[:-1] + tree.tokens[tree.path_to(node)].tolist()
        with torch.inference_mode():
            ref = target(input_ids=torch.tensor([ids])).logits[0, -1]
        torch.testing.assert_close(out.logits[node], ref, rtol=1e-4, atol=1e-4)


def test_auto_tree_follows_the_cost_curve(target):
    """The same calibration gives a small tree on a steep curve and tens of nodes on a flat one."""
    acc = HeadAccuracies(top=torch.tensor([[0.6 * 0.5**i * 0.7**k for i in range(8)] for k in range(3)]))
    heads = random_heads(target)
    chosen = {}
    for name, seconds in (("steep", [1.0, 1.3, 1.6, 1.9, 3.1, 5.5, 10.3]), ("flat", [1.0] * 7)):
        set_cost_curve(target, CostCurve(sizes=[1, 2, 3, 4, 8, 16, 33], seconds=seconds, tree=True))
        drafter = Drafter(heads=heads, source=None, vocab=None, accuracies=acc, head_seconds={1: 0.0, 2: 0.0, 3: 0.0})
        prop = MedusaProposer(MedusaDecodeConfig(heads=drafter, tree="auto", max_budget=32, accuracy="independent"))
        r = S.generate(target, PROMPT, max_new_tokens=12, proposer=prop)
        assert r.tokens == S.generate(target, PROMPT, max_new_tokens=12).tokens
        chosen[name] = prop.choice.budget
    assert chosen["steep"] <= 3 and chosen["flat"] >= 20
    set_cost_curve(target, CostCurve(sizes=[1], seconds=[1.0], tree=True))


def test_rules_and_errors(target):
    heads = random_heads(target)
    with pytest.raises(ValueError, match="cannot use acceptance rule 'speculative'"):
        S.generate(target, PROMPT, method="medusa", heads=heads, tree="chain:2", accept="speculative")
    r = S.generate(target, PROMPT, method="medusa", heads=heads, tree="chain:2", accept="typical",
                   temperature=0.7, seed=1, max_new_tokens=10)  # fmt: skip
    assert len(r.tokens) == 10  # typical (lossy) samples on trees
    with pytest.raises(ValueError, match="calibrat"):
        S.generate(target, PROMPT, method="medusa", heads=heads, tree="auto")
    with pytest.raises(ValueError, match="only 3"):
        S.generate(target, PROMPT, method="medusa", heads=heads, tree="chain:4")
    with pytest.raises(ValueError, match="chain:N"):
        MedusaDecodeConfig(tree="bush:3")
    with pytest.raises(ValueError, match="no Medusa heads"):
        S.generate(target, PROMPT, method="medusa", heads="/nonexistent/heads")


def test_bench_specs_take_a_rule_and_sampling():
    from specdec_lab.bench.methods import BenchInputError, parse_methods

    specs = parse_methods("medusa,medusa:accept=typical,medusa:accept=typical:temperature=0.7")
    assert specs[1].params == {"accept": "typical"}
    with pytest.raises(BenchInputError, match="cannot use acceptance rule 'typical'"):
        parse_methods("draft:accept=typical")
    assert parse_methods("medusa:temperature=0.7")[0].params == {"temperature": 0.7}  # exact tree rule by default


@pytest.mark.parametrize("tree, warp", [("cartesian:3,2", {}), ("chain:3", {"top_p": 0.9, "top_k": 20})])
def test_medusa_samples_with_the_exact_tree_rule(target, tree, warp):
    """At temperature > 0 Medusa's deterministic top-s siblings get the exact one-hot rule by default
    (`accept_exact`; its losslessness: tests/test_tree_sampling.py). A seed reproduces a run; seeds differ."""
    kw = dict(method="medusa", heads=random_heads(target), tree=tree, max_new_tokens=12, temperature=0.7, **warp)
    runs = [S.generate(target, PROMPT, seed=seed, **kw).tokens for seed in (1, 1, 2, 3)]
    assert all(len(r) == 12 for r in runs) and runs[0] == runs[1]
    assert len({tuple(r) for r in runs}) > 1  # it samples


@pytest.mark.real
def test_real_model_medusa_equals_autoregressive(real_model):
    prompt = "Write a Python function that returns the squares of a list of numbers."
    ids = real_model.chat_ids(prompt)
    ar = S.generate(real_model, ids, max_new_tokens=48)
    for tree in ("auto", [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]):
        prop = MedusaProposer(MedusaDecodeConfig(tree=tree, max_budget=16))
        r = S.generate(real_model, ids, max_new_tokens=48, proposer=prop)
        assert r.tokens == ar.tokens
        assert r.mean_accepted > 1.2  # the shipped heads are right often enough to matter


def test_head_block_kernels_agree_and_the_faster_is_kept(target):
    """The heads' residual blocks as one bmm or as a loop of mv give the same candidates; `measure_heads`
    times both and keeps the faster (recorded in the proposer's summary)."""
    heads = random_heads(target, num_heads=3, seed=1)
    drafter = Drafter(heads=heads, source=None, vocab=None, accuracies=None)
    weight = target.get_output_embeddings().weight.detach()
    h = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(0))
    out = {}
    for kernel in ("bmm", "mv"):
        drafter.block_kernel = kernel
        torch.testing.assert_close(drafter.blocks(h, 3), Drafter(heads, None, None, None).blocks(h, 3))
        out[kernel] = drafter.candidates(h, 3, 4, drafter.scorer(weight, None), None)
    assert torch.equal(out["bmm"], out["mv"])
    drafter.measure_heads(weight, None, repeats=1)
    assert set(drafter.block_seconds) == {"bmm", "mv"}
    assert drafter.block_kernel == min(drafter.block_seconds, key=drafter.block_seconds.get)
    r = S.generate(target, PROMPT, method="medusa", max_new_tokens=8, heads=drafter, tree="chain:2")
    assert r.proposer["block_kernel"] == drafter.block_kernel


@pytest.mark.skipif(not int8_kernel_works(), reason="this torch build has no weight-only int8 kernel")
def test_int8_head_weights_draft_close_to_fp32_and_decode_exactly(target):
    """head_weights="int8" (W1 and the shared W2's rows weight-only int8, the drafter's approximation): the
    heads' features and logits stay within ~1% of fp32's, greedy output still equals autoregressive, and
    "auto" keeps whichever way of drafting `measure_heads` timed faster (recorded in the summary)."""
    heads = random_heads(target, num_heads=3, seed=2)
    weight = target.get_output_embeddings().weight.detach()
    h = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(1))
    fp32 = Drafter(heads=heads, source=None, vocab=None, accuracies=None, head_weights="fp32")
    int8 = Drafter(heads=heads, source=None, vocab=None, accuracies=None, head_weights="int8")
    x32, x8 = fp32.blocks(h, 3), int8.blocks(h, 3)  # (3, H)
    assert ((x8 - x32).norm() / x32.norm()).item() < 0.02
    rows = torch.arange(0, weight.shape[0], 2)  # a drafting vocabulary: every other row
    l32, l8 = fp32.scorer(weight, rows)(x32), int8.scorer(weight, rows)(x32)  # (3, M)
    assert l8.dtype == torch.float32 and ((l8 - l32).norm() / l32.norm()).item() < 0.02
    assert int8.scorer(weight, rows).rows == len(rows)
    ar = S.generate(target, PROMPT, max_new_tokens=32)
    r = S.generate(target, PROMPT, method="medusa", max_new_tokens=32, heads=int8, tree="cartesian:2,2,1")
    assert r.tokens == ar.tokens and r.proposer["head_weights"] == "int8"
    auto = Drafter(heads=heads, source=None, vocab=None, accuracies=None, head_weights="auto")
    auto.measure_heads(weight, rows, repeats=1)
    assert set(auto.score_seconds) == {"fp32", "int8"}
    assert auto.head_weights == min(auto.score_seconds, key=auto.score_seconds.get)
    with pytest.raises(ValueError, match="head_weights must be"):
        MedusaDecodeConfig(head_weights="int4")


def test_quantize_rows_round_trips_within_half_a_step():
    w = torch.randn(50, 40, generator=torch.Generator().manual_seed(0))
    w[3] = 0.0  # an all-zero row keeps a positive scale
    q, scales = quantize_rows(w)
    assert q.dtype == torch.int8 and q.shape == w.shape and scales.shape == (50,) and bool((scales > 0).all())
    assert bool(((q.float() * scales[:, None] - w).abs() <= scales[:, None] / 2 + 1e-7).all())
    assert int(q.abs().max()) == 127
