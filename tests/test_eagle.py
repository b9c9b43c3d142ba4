"""EAGLE: greedy `method="eagle"` equals autoregressive, the drafter's cache stays a recompute of the committed
prefix, the drafting vocabulary's d2t / t2d, feature layers, weights errors, and the EAGLE-3 checkpoint names."""

from __future__ import annotations

import json

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept import Acceptance
from specdec_lab.cost import CostCurve, StepCost
from specdec_lab.eagle import TRAIN_COMMAND, EagleDrafter, eagle3_layers, load_drafter, random_drafter, save_drafter
from specdec_lab.kv_cache import KVCache
from specdec_lab.memory import Memory
from specdec_lab.proposers import DecodeState, EagleProposer
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.trees import expanded_tree
from specdec_lab.verify import check_feature_layers, prefill, verify_tree

PROMPTS = [[5, 17, 42, 7, 99, 3], [1, 2, 3, 1, 2, 3, 1, 2], [200, 9]]
VOCAB = torch.arange(3, 256, 3)  # a reduced drafting vocabulary (85 of 256 ids)

# The names (and shapes) of an EAGLE-3 checkpoint: SafeAILab/EAGLE eagle/model/cnets.py `Model`, the keys
# vLLM's llama_eagle3.py and SGLang's llama_eagle3.py load (midlayer.* -> layers.0 / midlayer; d2t; t2d skipped).
EAGLE3_KEYS = {
    "fc.weight",
    "midlayer.hidden_norm.weight",
    "midlayer.input_layernorm.weight",
    "midlayer.post_attention_layernorm.weight",
    "midlayer.self_attn.q_proj.weight",
    "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight",
    "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight",
    "midlayer.mlp.down_proj.weight",
    "norm.weight",
    "lm_head.weight",
    "d2t",
    "t2d",
}


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=4, eos_token_id=None)


@pytest.fixture(scope="module")
def small():
    """A 12-token vocabulary: an untrained drafter's guesses are then right often enough to accept some."""
    return S.tiny_model(vocab_size=12, num_layers=4, eos_token_id=None, seed=3)


@pytest.fixture(scope="module")
def drafters(target):
    return {v: random_drafter(target, v, vocab=VOCAB, seed=1) for v in ("eagle3", "eagle1")}


@pytest.mark.parametrize("variant", ["eagle3", "eagle1"])
@pytest.mark.parametrize("draft_length", [1, 4, "cost"])
def test_greedy_eagle_equals_autoregressive(target, drafters, variant, draft_length):
    for prompt in PROMPTS:
        ar = S.generate(target, prompt, max_new_tokens=24)
        r = S.generate(target, prompt, method="eagle", weights=drafters[variant], draft_length=draft_length,
                       max_new_tokens=24)  # fmt: skip
        assert r.tokens == ar.tokens
        assert r.forwards <= ar.forwards


@pytest.mark.parametrize("variant", ["eagle3", "eagle1"])
def test_greedy_equality_with_accepted_drafts(small, variant):
    """Where drafts are accepted (a small vocabulary), the output is still the target's greedy text."""
    accepted = 0
    for seed, prompt in enumerate([[1, 2, 3, 4], [5, 6, 7, 8, 9, 10], [11, 0]]):
        drafter = random_drafter(small, variant, seed=seed)
        ar = S.generate(small, prompt, max_new_tokens=30)
        r = S.generate(small, prompt, method="eagle", weights=drafter, draft_length=3, max_new_tokens=30)
        assert r.tokens == ar.tokens
        accepted += r.proposer["accepted"]
    assert accepted > 0  # not vacuous: some paths went beyond the root


def test_one_token_prompt_and_weights_random(target):
    ar = S.generate(target, [7], max_new_tokens=10)
    r = S.generate(target, [7], method="eagle", weights="random", draft_length=2, max_new_tokens=10)
    assert r.tokens == ar.tokens


def test_sampling_runs_and_drafts_inside_the_vocabulary(target, drafters):
    r = S.generate(target, PROMPTS[0], method="eagle", weights=drafters["eagle3"], draft_length=3,
                   max_new_tokens=16, temperature=0.9, seed=0)  # fmt: skip
    assert len(r.tokens) == 16
    drafted = [t for s in r.steps for t in s.tree_tokens[1:]]
    assert drafted and set(drafted) <= set(VOCAB.tolist())


# ---- the drafter's cache after keep ----------------------------------------------------------------------
def _recompute(target, drafter, tokens, m):
    """The drafter's K/V and inputs for committed positions 0..m-1, from scratch: f_t and x_{t+1}."""
    layers = drafter.config.feature_layers
    feats = prefill(target, KVCache.for_model(target), torch.tensor(tokens[:m]), layers).features  # (m, F, H)
    cache = drafter.new_cache()
    with torch.inference_mode():
        drafter(drafter.fuse(feats), torch.tensor(tokens[1 : m + 1]), torch.arange(m), cache)
    return cache.layers[0].keys[0], cache.layers[0].values[0], feats  # (H_kv, m, D), (m, F, H)


@pytest.mark.parametrize("variant", ["eagle3", "eagle1"])
def test_drafter_cache_after_keep_equals_recompute(target, drafters, variant):
    """Drive the proposer by hand through chains cut at every depth (and backed-off steps): after each update
    its committed K/V and its pending features equal a fresh forward over the committed tokens."""
    drafter = drafters[variant]
    prop = EagleProposer(weights=drafter, draft_length=4)
    prompt = PROMPTS[0]
    cache = KVCache.for_model(target)
    layers = check_feature_layers(target, prop.feature_layers)
    out = prefill(target, cache, torch.tensor(prompt[:-1]), layers)
    state = DecodeState(tokens=list(prompt), prompt_length=len(prompt), cache_length=cache.length, max_depth=64,
                        model=target, cache=cache)  # fmt: skip
    prop.start(state, out)
    # (k, accepted): every cut of a 4-chain, backed-off steps (k = 0) whose features wait, a catch-up after them
    for k, a in [(4, 2), (4, 0), (0, 0), (0, 0), (3, 3), (4, 4), (2, 1), (4, 1)]:
        prop.sizing.length.mode = k
        tree = prop.propose(state)
        assert len(tree) - 1 == k
        vout = verify_tree(target, cache, tree, layers)
        path = list(range(a + 1))
        bonus = int(torch.randint(0, 256, (), generator=torch.Generator().manual_seed(k * 10 + a)))  # any token
        cache.keep(path)
        state.tokens += tree.tokens[1 : a + 1].tolist() + [bonus]
        state.cache_length = cache.length
        prop.update(state, tree, Acceptance(path, bonus), vout)
        keys, values, feats = _recompute(target, drafter, state.tokens, state.cache_length)
        seen = prop.seen
        assert prop.cache.length == seen == prop.cache.layers[0].length  # nothing uncommitted is left
        torch.testing.assert_close(prop.cache.layers[0].keys[0], keys[:, :seen], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(prop.cache.layers[0].values[0], values[:, :seen], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(torch.cat(prop.pending), feats[seen:], atol=1e-4, rtol=1e-4)  # the hidden input
    assert prop.seen > len(prompt)  # the drafter caught up past the prompt


# ---- the drafting vocabulary ------------------------------------------------------------------------------
def test_d2t_t2d_round_trip_and_minus_inf_before_softmax(target):
    ids = torch.randperm(256, generator=torch.Generator().manual_seed(0))[:40]  # unsorted on purpose
    d = random_drafter(target, "eagle3", vocab=ids)
    sorted_ids = ids.sort().values
    assert d.d2t.dtype == torch.long and d.t2d.dtype == torch.bool and d.t2d.shape == (256,)
    assert torch.equal(torch.arange(40) + d.d2t, sorted_ids)  # draft row j -> target j + d2t[j]
    assert torch.equal(d.t2d.nonzero()[:, 0], sorted_ids)
    assert torch.equal(d.to_target(torch.arange(40)), sorted_ids)
    h = torch.randn(3, 64)
    full = d.target_logits(h)  # (3, V)
    assert full.shape == (3, 256)
    assert torch.isfinite(full[:, d.t2d]).all() and torch.isneginf(full[:, ~d.t2d]).all()
    torch.testing.assert_close(full[:, d.t2d], d.logits(h))  # t2d's columns are the draft rows, in order
    for sampling in (Sampling(temperature=1.0), Sampling(temperature=0.7, top_k=10, top_p=0.9)):
        q = warp_probs(full, sampling)
        torch.testing.assert_close(q.sum(-1), torch.ones(3))  # the reduced vocabulary's q sums to 1
        assert (q[:, ~d.t2d] == 0).all()


def test_feature_layers():
    assert eagle3_layers(30) == (2, 15, 27)  # SmolLM2-135M: the inputs of layers 2, 15 and 27
    assert eagle3_layers(32) == (2, 16, 29)
    for n in range(1, 12):
        layers = eagle3_layers(n)
        assert len(layers) == 3 and list(layers) == sorted(layers) and all(0 <= i < max(n, 1) for i in layers)
        if n >= 3:
            assert len(set(layers)) == 3
    assert eagle3_layers(4) == (1, 2, 3)


def test_feature_layers_reach_the_loop(target, drafters):
    assert drafters["eagle3"].config.feature_layers == (1, 2, 3)
    assert drafters["eagle1"].config.feature_layers == (4,)  # the last hidden state, after the final norm
    prop = EagleProposer(weights=drafters["eagle3"])
    assert check_feature_layers(target, prop.feature_layers) == (1, 2, 3)


def test_missing_weights_folder_names_it_and_the_training_command(target, tmp_path):
    folder = tmp_path / "no-drafter-here"
    with pytest.raises(FileNotFoundError) as err:
        S.generate(target, PROMPTS[0], method="eagle", weights=str(folder), max_new_tokens=4)
    assert str(folder) in str(err.value) and TRAIN_COMMAND in str(err.value)


# ---- checkpoint -----------------------------------------------------------------------------------------------
def test_state_dict_has_the_eagle3_names_and_shapes(target, drafters):
    d = drafters["eagle3"]
    state = d.state_dict()
    assert set(state) == EAGLE3_KEYS  # the target's embedding is shared, not part of the drafter
    h, m, v = 64, len(VOCAB), 256
    kv = target.config.num_key_value_heads * target.config.head_dim
    assert state["fc.weight"].shape == (h, 3 * h)
    assert state["midlayer.self_attn.q_proj.weight"].shape == (target.config.num_attention_heads * 16, 2 * h)
    assert state["midlayer.self_attn.k_proj.weight"].shape == (kv, 2 * h)
    assert state["midlayer.self_attn.v_proj.weight"].shape == (kv, 2 * h)
    assert state["lm_head.weight"].shape == (m, h)
    assert state["d2t"].shape == (m,) and state["t2d"].shape == (v,)
    assert d.embedding.data_ptr() == target.get_input_embeddings().weight.data_ptr()  # used, not copied
    eagle1 = set(drafters["eagle1"].state_dict())
    assert {"fc.weight", "fc.bias", "layers.0.self_attn.q_proj.weight", "norm.weight", "lm_head.weight"} <= eagle1


@pytest.mark.parametrize("variant", ["eagle3", "eagle1"])
def test_save_load_round_trip(target, drafters, variant, tmp_path):
    d = drafters[variant]
    folder = save_drafter(d, tmp_path / variant)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == [{"eagle3": "LlamaForCausalLMEagle3", "eagle1": "LlamaForCausalLMEagle"}[variant]]
    assert config["num_hidden_layers"] == 1 and config["draft_vocab_size"] == len(VOCAB)
    assert config["vocab_size"] == 256 and config["tie_word_embeddings"] is False
    assert config["eagle_config"]["use_aux_hidden_state"] == (variant == "eagle3")
    if variant == "eagle3":  # vLLM reads the top level (input of layer i), SGLang eagle_config (output of layer j)
        assert config["eagle_aux_hidden_state_layer_ids"] == list(d.config.feature_layers)
        assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [i - 1 for i in d.config.feature_layers]
    loaded = load_drafter(folder, target)
    assert isinstance(loaded, EagleDrafter) and loaded.config == d.config
    for k, v in d.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    a = S.generate(target, PROMPTS[0], method="eagle", weights=d, draft_length=3, max_new_tokens=12)
    b = S.generate(target, PROMPTS[0], method="eagle", weights=str(folder), draft_length=3, max_new_tokens=12)
    assert [s.tree_tokens for s in a.steps] == [s.tree_tokens for s in b.steps]  # same drafts, same output


def test_load_rejects_another_target(target, drafters, tmp_path):
    folder = save_drafter(drafters["eagle3"], tmp_path / "d")
    with pytest.raises(ValueError, match="made for a target"):
        load_drafter(folder, S.tiny_model(num_layers=2))


# ---- dynamic trees (EAGLE-2) ------------------------------------------------------------------------------
def flat_cost(target) -> Memory:
    """A Memory whose cost model prices every tree size alike (a GPU-like flat curve): trees grow."""
    memory = Memory()
    memory.slot(Memory.COST).update(model=target, cost=StepCost.of(CostCurve(sizes=[1, 64], seconds=[1.0, 1.0]),
                                                                   learn=False))  # fmt: skip
    return memory


@pytest.mark.parametrize("variant", ["eagle3", "eagle1"])
def test_dynamic_tree_greedy_equals_autoregressive(small, variant):
    accepted, branching = 0, 0
    for seed, prompt in enumerate([[1, 2, 3, 4], [5, 6, 7, 8, 9, 10], [11, 0]]):
        drafter = random_drafter(small, variant, seed=seed)
        ar = S.generate(small, prompt, max_new_tokens=30)
        r = S.generate(small, prompt, method="eagle", weights=drafter, tree="dynamic", max_budget=12, width=3,
                       max_new_tokens=30, memory=flat_cost(small))  # fmt: skip
        assert r.tokens == ar.tokens
        accepted += sum(s.accepted for s in r.steps)
        branching += sum(not s.tree.is_chain for s in r.steps)
    assert accepted > 0 and branching > 0  # real trees, some of their nodes accepted


def test_dynamic_tree_of_width_one_is_the_greedy_chain(target, drafters):
    """width 1: each level expands its one best node, which is the chain's next greedy draft."""
    drafter = random_drafter(target, "eagle3", vocab=VOCAB, seed=1)
    drafter.step_seconds = 0.0  # free drafting: the flat curve then takes every level (as the chain does)
    chain = S.generate(target, PROMPTS[0], method="eagle", weights=drafter, draft_length=5,
                       max_new_tokens=12, memory=flat_cost(target))  # fmt: skip
    tree = S.generate(target, PROMPTS[0], method="eagle", weights=drafter, tree="dynamic", width=1,
                      max_draft=5, max_budget=5, max_new_tokens=12, memory=flat_cost(target))  # fmt: skip
    assert [s.tree_tokens for s in tree.steps] == [s.tree_tokens for s in chain.steps]


def test_tree_nodes_equal_their_path_drafted_as_a_chain(target, drafters):
    """Every expanded node's drafter output (tree attention over its ancestors' entries) equals drafting its
    path as a chain from a fresh recompute of the committed prefix."""
    drafter = random_drafter(target, "eagle3", vocab=VOCAB, seed=1)
    drafter.step_seconds = 0.0  # free drafting: the flat curve then expands every level it may
    prop = EagleProposer(weights=drafter, tree="dynamic", width=3, max_budget=30)
    prompt = PROMPTS[0]
    cache = KVCache.for_model(target)
    layers = check_feature_layers(target, prop.feature_layers)
    out = prefill(target, cache, torch.tensor(prompt[:-1]), layers)
    state = DecodeState(tokens=list(prompt), prompt_length=len(prompt), cache_length=cache.length, max_depth=8,
                        model=target, cache=cache, cost=flat_cost(target).cost(target))  # fmt: skip
    prop.start(state, out)
    prop.propose(state)
    tok, par, dep, outs = prop.expanded
    expanded = [u for u in outs if u]
    assert len(expanded) >= 3 and max(dep[u] for u in expanded) >= 2
    m = state.cache_length
    keys, values, feats = _recompute(target, drafter, state.tokens, m)
    with torch.inference_mode():
        for u in expanded:
            path = []
            while u:
                path.append(u)
                u = par[u]
            path.reverse()
            fresh = drafter.new_cache()
            h = drafter(drafter.fuse(feats), torch.tensor(state.tokens[1 : m + 1]), torch.arange(m), fresh)[-1]
            for j, w in enumerate(path):
                h = drafter(h[None], torch.tensor([tok[w]]), torch.tensor([m + j]), fresh)[0]
            torch.testing.assert_close(h, outs[path[-1]], atol=1e-4, rtol=1e-4)


def test_expanded_tree_is_prefix_closed_and_follows_the_curve():
    children = {}

    def expand(level):  # node u's candidates: probabilities that depend on the node
        out = []
        for u in level:
            probs = [0.6 / (1 + u % 3), 0.25, 0.1]
            out.append((probs, [100 + u, 200 + u, 300 + u]))
            children[u] = probs
        return out

    flat = [1.0] * 40
    step = expanded_tree(expand, flat, lambda calls: 0.0, max_budget=20, max_depth=6, width=2)
    assert len(step.tokens) == 20 and step.heads_run >= 3
    assert all(p < i for i, p in enumerate(step.parents, start=1))  # parents first: a valid tree order
    assert step.expected_length > 1
    steep = [1.0 + 10.0 * n for n in range(40)]  # every extra node costs far more than it could gain
    assert expanded_tree(expand, steep, lambda calls: 0.0, max_budget=20, max_depth=6, width=2).tokens == []
