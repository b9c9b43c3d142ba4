"""gqa_sdpa_attention: the numbers of transformers' `sdpa`, without its K/V copies; every method stays exact."""

from __future__ import annotations

import copy

import pytest
import torch

from specdec_lab import KVCache, Tree, generate, prefill, tiny_model, verify_tree
from specdec_lab.models.attention import ATTENTION, attention_kind, match_attention, use_gqa_attention
from specdec_lab.models.draft_model import layer_skip_draft


def _pair(num_kv_heads: int = 2):
    stock = tiny_model(num_layers=3, num_heads=4, num_kv_heads=num_kv_heads, seed=3)
    gqa = use_gqa_attention(copy.deepcopy(stock))
    return stock, gqa


def _verify(model, tree: Tree, context: torch.Tensor):
    cache = KVCache.for_model(model, capacity=64)
    prefill(model, cache, context)
    return verify_tree(model, cache, tree)


TREES = {
    "root": Tree.root(5),
    "chain": Tree.chain(5, [6, 7, 8]),  # HF builds a boolean causal mask: converted once per forward
    "tree": Tree([5, 6, 7, 8, 9, 10], [-1, 0, 0, 1, 1, 2]),  # our additive float tree mask
}


@pytest.mark.parametrize("shape", sorted(TREES))
def test_gqa_attention_equals_sdpa_bit_for_bit(shape):
    stock, gqa = _pair()
    assert attention_kind(stock) == "sdpa" and attention_kind(gqa) == ATTENTION
    context = torch.randint(0, 256, (17,), generator=torch.Generator().manual_seed(0))
    a, b = _verify(stock, TREES[shape], context), _verify(gqa, TREES[shape], context)
    assert torch.equal(a.logits, b.logits) and torch.equal(a.hidden, b.hidden)


def test_prefill_and_multi_head_kv_fall_back_to_sdpa():
    stock, gqa = _pair(num_kv_heads=4)  # no grouping: transformers' own function runs
    context = torch.randint(0, 256, (9,), generator=torch.Generator().manual_seed(1))
    tree = TREES["tree"]
    assert torch.equal(_verify(stock, tree, context).logits, _verify(gqa, tree, context).logits)


def test_only_sdpa_models_switch_and_drafts_follow_their_target():
    eager = tiny_model()
    eager.set_attn_implementation("eager")
    assert attention_kind(use_gqa_attention(eager)) == "eager"
    _, gqa = _pair()
    assert attention_kind(layer_skip_draft(gqa, 1).model) == ATTENTION
    plain = tiny_model()
    assert attention_kind(match_attention(plain, eager)) == "sdpa"
    assert attention_kind(match_attention(plain, gqa)) == ATTENTION


def test_match_kernels_gives_a_draft_both_kernels_of_its_target():
    from specdec_lab.models import match_kernels
    from specdec_lab.models.fast_linear import linear_kind, use_fast_linear

    _, gqa = _pair()
    target = use_fast_linear(gqa)
    draft = match_kernels(tiny_model(seed=1), target)
    assert attention_kind(draft) == ATTENTION and linear_kind(draft) == linear_kind(target) != "stock"


@pytest.mark.parametrize("method,params", [("prompt_lookup", {}), ("layer_skip", {"n_layers": 1, "draft_length": 3})])
def test_methods_stay_exact_with_gqa_attention(method, params):
    _, gqa = _pair()
    prompt = [3, 9, 4, 3, 9, 4, 3, 9, 4, 7, 1, 3, 9]
    ref = generate(gqa, prompt, max_new_tokens=40).tokens
    out = generate(gqa, prompt, method=method, max_new_tokens=40, **params)
    assert out.tokens == ref
