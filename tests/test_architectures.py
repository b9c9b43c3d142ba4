"""The architecture matrix: the loop, tree attention and every method on the causal LMs a user is likely to bring.

Each family is a tiny random config built here (no downloads): vocabulary 96, 2–4 layers, hidden 64, GQA where
the family has it, weights drawn with a large init so that greedy choices are not fp32 ties. Per family:

(a) tree attention = per-path decoding: `verify_tree` on a branching tree after a prefill gives, at every node,
    the logits a plain forward (no cache) over prompt + that node's root-to-node path gives at its last token;
(b) greedy equivalence: every method that runs on the family emits autoregressive greedy's tokens;
(c) sampling runs (one call at T = 0.7).

Sliding windows are set *smaller* than the contexts used (Mistral, Phi-3, Gemma 2/3, Qwen2's window layers), so the
tree mask must compose with the window (`verify.tree_attention_mask`), not merely survive it. The support matrix in
data/README.md ("The target model and other architectures") is this file's table.
"""

from __future__ import annotations

import pytest
import torch

import specdec_lab as S
from specdec_lab.eagle import random_drafter
from specdec_lab.kv_cache import KVCache
from specdec_lab.medusa import MedusaHeads
from specdec_lab.models.draft_model import Draft
from specdec_lab.proposers.medusa import Drafter
from specdec_lab.trees.tree import Tree
from specdec_lab.verify import lm_logits, prefill, tree_attention_mask, tree_attention_masks, verify_tree

V = 96
WINDOW = 8  # sliding windows, well below the contexts below (prompt 24 + up to 24 new tokens)
INIT = 0.25


def _common(**kw):
    return dict(vocab_size=V, initializer_range=INIT, bos_token_id=None, eos_token_id=None, pad_token_id=None, **kw)


def _llama_like(**kw):
    return _common(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=256, **kw)  # fmt: skip


def _config(arch: str):
    import transformers as T

    if arch == "llama":
        return T.LlamaConfig(**_llama_like(tie_word_embeddings=True))
    if arch == "qwen2":  # windows on the upper layers (max_window_layers), the lower ones full
        return T.Qwen2Config(**_llama_like(use_sliding_window=True, sliding_window=WINDOW, max_window_layers=2,
                                           tie_word_embeddings=False))  # fmt: skip
    if arch == "qwen3":
        return T.Qwen3Config(**_llama_like(head_dim=16, tie_word_embeddings=True))
    if arch == "mistral":
        return T.MistralConfig(**_llama_like(sliding_window=WINDOW, tie_word_embeddings=False))
    if arch == "gemma2":  # local/global layers alternate; attention and final logits soft-capped
        return T.Gemma2Config(**_llama_like(head_dim=16, sliding_window=WINDOW, query_pre_attn_scalar=16,
                                            hidden_activation="gelu_pytorch_tanh"))  # fmt: skip
    if arch == "gemma3":  # five local layers per global one: with 4 layers, three local, then one global
        return T.Gemma3TextConfig(**_llama_like(head_dim=16, sliding_window=WINDOW, query_pre_attn_scalar=16,
                                                final_logit_softcapping=30.0))  # fmt: skip
    if arch == "phi3":
        return T.Phi3Config(**_llama_like(sliding_window=WINDOW, tie_word_embeddings=False))
    if arch == "gpt_neox":  # partial rotary, parallel residual, untied head
        shape = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4)
        return T.GPTNeoXConfig(**_common(**shape, max_position_embeddings=256, rotary_pct=0.5))
    if arch == "gpt2":  # learned absolute positions
        return T.GPT2Config(**_common(n_embd=64, n_layer=4, n_head=4, n_positions=256))
    raise KeyError(arch)


ARCHS = ["llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "gpt_neox", "gpt2"]


def build(arch: str, seed: int = 0):
    from transformers import AutoModelForCausalLM

    config = _config(arch)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    return model.eval()


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def models():
    cache: dict = {}

    def get(arch):
        if arch not in cache:
            cache[arch] = build(arch)
        return cache[arch]

    yield get
    cache.clear()
    import gc

    gc.collect()  # the models (and the drafts cached per target) die here, not inside a later test's gc


PROMPT = [(7 * i + 3) % V for i in range(10)] * 2 + [5, 9, 11, 13]  # 24 tokens, a repeat: lookup matches


# ---- (a) tree attention = per-path decoding -------------------------------------------------------------------
#   0 ─ 1 ─ 3 ─ 6
#   │   └── 4
#   └── 2 ─ 5
TREE_PARENTS = [-1, 0, 0, 1, 1, 2, 3]
TREE_TOKENS = [13, 40, 41, 42, 43, 44, 45]


@pytest.mark.parametrize("arch", ARCHS)
def test_tree_attention_equals_per_path_decoding(models, arch):
    model = models(arch)
    prompt = PROMPT[:-1]  # the tree's root is the last prompt token
    tree = Tree(torch.tensor(TREE_TOKENS), torch.tensor(TREE_PARENTS))
    cache = KVCache.for_model(model, capacity=64)
    prefill(model, cache, torch.tensor(prompt))
    out = verify_tree(model, cache, tree)
    with torch.inference_mode():
        for node in range(len(tree)):
            path, i = [], node
            while i >= 0:
                path.insert(0, TREE_TOKENS[i])
                i = TREE_PARENTS[i]
            ref = model(torch.tensor([prompt + path])).logits[0, -1].float()
            torch.testing.assert_close(out.logits[node], ref, atol=1e-4, rtol=1e-4, msg=f"{arch} node {node}")


@pytest.mark.parametrize("arch", ["qwen2", "mistral", "gemma2", "gemma3", "phi3"])
def test_the_window_matters(models, arch):
    """The windows are below the context here: a tree mask without them gives other logits (so the test above
    checks the window composition, not a window too wide to act)."""
    model = models(arch)
    tree = Tree(torch.tensor(TREE_TOKENS), torch.tensor(TREE_PARENTS))
    cache = KVCache.for_model(model, capacity=64)
    prefill(model, cache, torch.tensor(PROMPT[:-1]))
    length = cache.length
    windowed = verify_tree(model, cache, tree).logits
    cache.rollback()
    mask = tree_attention_mask(tree, length, model.dtype)  # no window
    kinds = set(getattr(model.config, "layer_types", None) or ())
    with torch.inference_mode():
        hidden = model.get_decoder()(input_ids=tree.tokens[None], position_ids=tree.position_ids(length)[None],
                                     attention_mask={k: mask for k in kinds} if kinds else mask, cache=cache,
                                     use_cache=True).last_hidden_state[0]  # fmt: skip
        assert not torch.allclose(lm_logits(model, hidden), windowed, atol=1e-3)


def test_unsupported_attention_is_named():
    model = build("gemma3")
    model.config.use_bidirectional_attention = True
    tree = Tree(torch.tensor(TREE_TOKENS), torch.tensor(TREE_PARENTS))
    with pytest.raises(ValueError, match="Gemma3ForCausalLM is configured with bidirectional attention"):
        tree_attention_masks(model, tree, 4)
    model = build("llama")
    model.config.layer_types = ["chunked_attention"] * 4
    with pytest.raises(ValueError, match=r"LlamaForCausalLM has attention layers of type \['chunked_attention'\]"):
        tree_attention_masks(model, tree, 4)


# ---- (b) greedy equivalence for every method ------------------------------------------------------------------
N_NEW = 16


def _flat_costs(model):
    """Flat cost curves: every draft and tree pays, so each method really speculates (and none is measured)."""
    from specdec_lab.cost import CostCurve, set_cost_curve

    for tree in (False, True):
        set_cost_curve(model, CostCurve(sizes=[1, 64], seconds=[1.0, 1.0], tree=tree))
    return model


def _medusa(model) -> Drafter:
    heads = MedusaHeads.for_model(model, num_heads=2)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    return Drafter(heads=heads, source=None, vocab=None, accuracies=None, head_seconds={1: 0.0, 2: 0.0})


def _draft(arch: str) -> Draft:
    """A smaller random model of the same family and vocabulary (2 layers, another seed)."""
    from transformers import AutoModelForCausalLM

    config = _config(arch)
    config.num_hidden_layers = 2
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = config.layer_types[:1] + config.layer_types[-1:]  # one of each kind where there are two
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        model = AutoModelForCausalLM.from_config(config)
    return Draft(model=model.eval(), vocab=None, name=f"tiny-{arch}")


def _eagle(model):
    drafter = random_drafter(model, "eagle3", vocab=torch.arange(V), seed=1)
    drafter.step_seconds = 0.0
    return drafter


METHODS = {  # name -> arch -> generate keyword arguments
    "prompt_lookup": lambda arch, model: dict(method="prompt_lookup", draft_length=3),
    "lookahead": lambda arch, model: dict(method="lookahead", W=2, N=3, G=3),
    "jacobi": lambda arch, model: dict(method="jacobi", n=4),
    "medusa": lambda arch, model: dict(
        method="medusa", tree="cartesian:3,2", heads=_medusa(model), vocab="full", accuracy="independent"
    ),  # fmt: skip
    "draft": lambda arch, model: dict(method="draft", draft=_draft(arch), draft_length=3),
    "layer_skip": lambda arch, model: dict(method="layer_skip", n_layers=2, draft_length=3, vocab="full"),
    "eagle": lambda arch, model: dict(method="eagle", weights=_eagle(model), tree="dynamic", max_budget=6, width=3),
}
UNSUPPORTED = {  # (arch, method) -> the ValueError's message (a regex)
    ("gpt2", "eagle"): "EAGLE does not support this architecture",  # its drafter is a Llama layer: no n_embd etc.
}


@pytest.fixture(scope="module")
def reference(models):
    out = {}

    def get(arch):
        if arch not in out:
            out[arch] = S.generate(_flat_costs(models(arch)), PROMPT, max_new_tokens=N_NEW).tokens
        return out[arch]

    return get


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_equals_autoregressive(models, reference, arch, method):
    model = models(arch)
    if (arch, method) in UNSUPPORTED:
        with pytest.raises(ValueError, match=UNSUPPORTED[arch, method]):
            S.generate(model, PROMPT, max_new_tokens=N_NEW, **METHODS[method](arch, model))
        return
    ref = reference(arch)
    res = S.generate(model, PROMPT, max_new_tokens=N_NEW, **METHODS[method](arch, model))
    assert res.tokens == ref
    assert sum(s.proposed for s in res.steps) > 0, "nothing was drafted: the equality would prove nothing"


# ---- (c) sampling runs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_sampling_runs(models, arch):
    model = _flat_costs(models(arch))
    res = S.generate(model, PROMPT, max_new_tokens=8, temperature=0.7, seed=0, **METHODS["medusa"](arch, model))
    assert len(res.tokens) == 8 and all(0 <= t < V for t in res.tokens)
    assert any(not s.tree.is_chain for s in res.steps)  # branching trees were verified under sampling


# ---- kernels: FastLinear and the GQA attention give the same logits -------------------------------------------
@pytest.mark.parametrize("arch", ARCHS)
def test_swapped_kernels_keep_the_logits(models, arch):
    """`load_model`'s kernels (FastLinear for every nn.Linear, the copy-free GQA attention for `sdpa` models) on a
    tree forward: the same logits as the stock model. GPT-2's Conv1D layers are not nn.Linear: left alone."""
    import copy

    from specdec_lab.models.attention import use_gqa_attention
    from specdec_lab.models.fast_linear import use_fast_linear

    model = models(arch)
    fast = use_gqa_attention(use_fast_linear(copy.deepcopy(model)))
    tree = Tree(torch.tensor(TREE_TOKENS), torch.tensor(TREE_PARENTS))
    outs = []
    for m in (model, fast):
        cache = KVCache.for_model(m, capacity=64)
        prefill(m, cache, torch.tensor(PROMPT[:-1]))
        outs.append(verify_tree(m, cache, tree).logits)
    torch.testing.assert_close(outs[1], outs[0], atol=1e-4, rtol=1e-4)
