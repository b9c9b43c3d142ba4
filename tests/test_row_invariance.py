"""Row invariance (`specdec_lab.row_invariance`): with `exact_rows`, the compiled step verifies n rows bit for
bit as one-row decoding computes them, so quantized speculative decoding equals quantized autoregressive
decoding by construction, for chains and branching trees. Central tests: a chain's logits, hidden states and
kept K/V from one forward = the one-row steps, and each node of a branching tree = one-row decoding along
its path, exactly (torch.equal, not a tolerance)."""

import pytest
import torch

import specdec_lab as S
from specdec_lab.compiled import compiled_step
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.eagle import random_drafter
from specdec_lab.kv_cache import KVCache
from specdec_lab.medusa import MedusaHeads
from specdec_lab.quant import quantize_model
from specdec_lab.row_invariance import FORMS, attention_form, bmm_rows_agree, invariant_kernels, onednn_rows_agree
from specdec_lab.tree import Tree
from specdec_lab.verify import prefill, verify_tree

CONTEXT = torch.arange(20) * 7 % 256
LAYERS = (0, 1, 2)


def int4_model():
    model = S.tiny_model(num_layers=2, hidden_size=64, eos_token_id=None, fast_linear=True)
    return quantize_model(model, "int4", compute="bfloat16")


# WRAPPER: these steps wrap inductor's kernels in its Python wrapper, not the C++ one of a CPU's default: what
# is tested is the kernels' rounding, which the wrapper (the code that calls them) does not touch, and the C++
# wrapper's cold compile costs minutes more in CI (test_compile.py covers it).
BRANCHING = [-1, 0, 0, 1, 2, 3, 4, 2]  # a second branch's nodes have ancestors at slots (0, 2, 7), not adjacent


@pytest.fixture(scope="module", params=["ordered", "products"])
def step(request):
    step = compiled_step(int4_model())
    step.exact_rows, step.attention = True, request.param
    step.cpp_wrapper = False  # WRAPPER: the same kernels, a faster cold compile
    step.buckets = (1, 4, 16)  # fewer graphs to compile; every bucket size is padded alike (test_compile.py)
    return step


def one_row_path(step, tokens: list[int]):
    """Decode `tokens` one row at a time after CONTEXT: -> (logits (n, V), features (n, F, H), cache)."""
    cache = KVCache.for_model(step.model, capacity=step.capacity)
    prefill(step.model, cache, CONTEXT)
    logits, feats = [], []
    for t in tokens:
        out = verify_tree(step.model, cache, Tree.root(t), LAYERS, step=step)
        cache.keep([0])
        logits.append(out.logits[0])
        feats.append(out.features[0])
    return torch.stack(logits), torch.stack(feats), cache


def test_forms_and_checks_are_measured():
    assert attention_form(2, 2, 16, [256], (1, 2, 4, 8)) in FORMS[1:]
    assert isinstance(bmm_rows_agree(3, 3, 64, 512, (1, 2, 8)), bool)
    assert isinstance(onednn_rows_agree(64, 32, (1, 2, 4)), bool)


@torch.inference_mode()
def test_chain_verified_at_once_equals_one_row_steps_bit_for_bit(step):
    chain = [11, 200, 3, 3, 90, 41, 7]
    one_logits, one_feats, one_cache = one_row_path(step, chain)
    cache = KVCache.for_model(step.model, capacity=step.capacity)
    prefill(step.model, cache, CONTEXT)
    out = verify_tree(step.model, cache, Tree.chain(chain[0], chain[1:]), LAYERS, step=step)
    assert torch.equal(out.logits, one_logits) and torch.equal(out.features, one_feats)
    cache.keep(list(range(len(chain))))  # the kept K/V = the one-row steps' K/V
    for mine, theirs in zip(cache.layers, one_cache.layers, strict=True):
        assert torch.equal(mine.keys, theirs.keys) and torch.equal(mine.values, theirs.values)


@torch.inference_mode()
def test_branching_tree_node_equals_one_row_decoding_of_its_path(step):
    """Every node of a branching tree verified at once (bucket 16: 8 nodes and 8 dummies) has the logits and
    features one-row decoding computes along its path: the node's ancestors lie at other cache slots than
    in that decoding, and the slot-ordered sums add the other branches' masked slots as exact zeros."""
    tree = Tree(torch.tensor([11, 200, 3, 57, 90, 41, 7, 128]), torch.tensor(BRANCHING))
    cache = KVCache.for_model(step.model, capacity=step.capacity)
    prefill(step.model, cache, CONTEXT)
    out = verify_tree(step.model, cache, tree, LAYERS, step=step)
    for node in range(len(tree)):
        path = tree.tokens[tree.path_to(node)].tolist()
        logits, feats, _ = one_row_path(step, path)
        assert torch.equal(out.logits[node], logits[-1]) and torch.equal(out.features[node], feats[-1]), node


@pytest.mark.parametrize(
    "method,params",
    [("prompt_lookup", {}), ("lookahead", {}), ("layer_skip", {"n_layers": 1, "draft_length": 3}), ("medusa", {}),
     ("eagle", {})],
)  # fmt: skip
def test_quantized_speculative_equals_quantized_autoregressive(step, method, params):
    """(lookahead's default pool proposes trees past the largest bucket: the loop cuts them to it)"""
    prompt = [5, 17, 42, 7, 99, 3, 5, 17, 42, 8, 1]
    if method == "medusa":  # random heads (top-k trees of 3 × 2 nodes)
        params = {"heads": MedusaHeads.for_model(step.model, num_heads=3), "tree": "cartesian:3,2"}
        with torch.no_grad():
            params["heads"].w1.copy_(torch.randn(params["heads"].w1.shape, generator=torch.Generator().manual_seed(0)))
    if method == "eagle":  # a random EAGLE-3 drafter (dynamic trees)
        params = {"weights": random_drafter(step.model, "eagle3", vocab=torch.arange(256), seed=1), "draft_length": 3}
    ar = S.generate(step.model, prompt, max_new_tokens=32, compile=step).tokens
    assert S.generate(step.model, prompt, method, max_new_tokens=32, compile=step, **params).tokens == ar


def test_exact_rows_defaults_on_for_quantized_weights_and_pins_the_head():
    model = int4_model()
    step = compiled_step(model)
    step.buckets = (1, 2)
    record = step.rows_record()
    assert record["exact_rows"] is True and record["attention"] in FORMS[1:]
    head = model.get_output_embeddings()
    assert set(head.plan[1:]) == {"onednn"} and record["kernels_invariant"] == invariant_kernels(model)
    fp32 = compiled_step(S.tiny_model(num_layers=2, eos_token_id=None))
    assert fp32.rows_record() == {"exact_rows": False, "attention": "bmm", "kernels_invariant": False}


@pytest.mark.real
def test_real_int4_compiled_verifies_like_one_row_decoding():
    """SmolLM2-135M with the file's Q4_1 weights: every node of a branching tree has the logits of one-row
    decoding along its path, bit for bit, with exact rows, and not without them (the broken variant: plain
    bmm attention and the tuned head plan); prompt lookup (chains) and lookahead (trees) = autoregressive."""
    lm = S.load_model("smollm2-135m", weights="int4", compile=True)
    step = lm.step
    step.buckets, step.cpp_wrapper = (1, 8), False  # WRAPPER
    for tree in (False, True):  # a pinned curve (conftest's `real_model`): the sizes do not matter here
        set_cost_curve(lm.model, CostCurve(sizes=[1, 2, 4, 8], seconds=[0.03, 0.031, 0.04, 0.045], tree=tree), step)
    ids = torch.tensor(lm.chat_ids("Name three rivers in Europe and one fact about each."))
    chain = S.generate(lm, ids, max_new_tokens=8, compile=step).tokens
    root = int(ids[-1])
    # the greedy path on nodes 0-1-3-5, another branch 2-4-6 and 2-7 (parents in BRANCHING)
    tree = Tree(torch.tensor([root, chain[0], chain[3], chain[1], chain[4], chain[2], chain[5], chain[6]]),
                torch.tensor(BRANCHING))  # fmt: skip

    def fresh():  # a cache holding the prompt but its last token (the root)
        cache = KVCache.for_model(lm.model, capacity=step.capacity)
        prefill(lm.model, cache, ids[:-1])
        return cache

    out = verify_tree(lm.model, fresh(), tree, step=step)
    for leaf in tree.leaves():  # one-row decoding of each leaf's path gives every node on it
        one_cache, path = fresh(), tree.path_to(leaf)
        for node in path:
            row = verify_tree(lm.model, one_cache, Tree.root(int(tree.tokens[node])), step=step).logits[0]
            one_cache.keep([0])
            assert torch.equal(out.logits[node], row), node
    plain = compiled_step(lm.model)  # the broken variant: torch's bmm attention, one query row as it comes
    plain.exact_rows, plain.buckets, plain.cpp_wrapper = False, (1, 8), False
    out = verify_tree(lm.model, fresh(), tree, step=plain)
    assert not torch.equal(out.logits[0], verify_tree(lm.model, fresh(), Tree.root(root), step=plain).logits[0])
    ar = S.generate(lm, ids, max_new_tokens=48, compile=step).tokens
    for method in ("prompt_lookup", "lookahead"):
        assert S.generate(lm, ids, method, max_new_tokens=48, compile=step).tokens == ar, method


def test_lookahead_window_wider_than_the_largest_bucket_is_refused(step):
    """The window's last level is read back by node index, so it is never cut: W="auto" picks widths that fit
    the step's largest bucket (above), a fixed W that cannot fit is a clear error."""
    with pytest.raises(ValueError, match="W=8 columns"):
        S.generate(step.model, [5, 17, 42, 7], "lookahead", max_new_tokens=4, compile=step, W=8)
