"""Row invariance (`specdec_lab.row_invariance`): with `exact_rows`, the compiled step verifies n rows bit for
bit as one-row decoding computes them, so quantized speculative decoding equals quantized autoregressive
decoding by construction for chains. Central test: a chain's logits, hidden states and kept K/V from one
forward = the one-row steps, exactly (torch.equal, not a tolerance)."""

import pytest
import torch

import specdec_lab as S
from specdec_lab.compiled import compiled_step
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.kv_cache import KVCache
from specdec_lab.quant import quantize_model
from specdec_lab.row_invariance import FORMS, attention_form, bmm_rows_agree, invariant_kernels, onednn_rows_agree
from specdec_lab.tree import Tree
from specdec_lab.verify import prefill, verify_tree

CONTEXT = torch.arange(20) * 7 % 256
LAYERS = (0, 1, 2)


def int4_model():
    model = S.tiny_model(num_layers=2, hidden_size=64, eos_token_id=None, fast_linear=True)
    return quantize_model(model, "int4", compute="bfloat16")


@pytest.fixture(scope="module", params=["padded", "products"])
def step(request):
    step = compiled_step(int4_model())
    step.exact_rows, step.attention = True, request.param
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


@pytest.mark.parametrize(
    "method,params",
    [("prompt_lookup", {}), ("lookahead", {}), ("layer_skip", {"n_layers": 1, "draft_length": 3})],
)
def test_quantized_speculative_equals_quantized_autoregressive(step, method, params):
    """(lookahead's default pool proposes trees past the largest bucket: the loop cuts them to it)"""
    prompt = [5, 17, 42, 7, 99, 3, 5, 17, 42, 8, 1]
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
    """SmolLM2-135M with the file's Q4_1 weights: a chain's logits = the one-row steps' bit for bit with exact
    rows, and not without them (the broken variant: plain bmm attention and the tuned head plan)."""
    lm = S.load_model("smollm2-135m", weights="int4", compile=True)
    step = lm.step
    step.buckets = (1, 8)
    for tree in (False, True):  # a pinned curve (conftest's `real_model`): the sizes do not matter here
        set_cost_curve(lm.model, CostCurve(sizes=[1, 2, 4, 8], seconds=[0.03, 0.031, 0.04, 0.045], tree=tree), step)
    ids = torch.tensor(lm.chat_ids("Name three rivers in Europe and one fact about each."))
    chain = S.generate(lm, ids, max_new_tokens=8, compile=step).tokens
    root, chain_tree = int(ids[-1]), Tree.chain(int(ids[-1]), chain[:7])

    def fresh():  # a cache holding the prompt but its last token (the root)
        cache = KVCache.for_model(lm.model, capacity=step.capacity)
        prefill(lm.model, cache, ids[:-1])
        return cache

    out = verify_tree(lm.model, fresh(), chain_tree, step=step)
    one_cache, one_rows = fresh(), []
    for t in [root] + chain[:7]:
        one_rows.append(verify_tree(lm.model, one_cache, Tree.root(t), step=step).logits[0])
        one_cache.keep([0])
    assert torch.equal(out.logits, torch.stack(one_rows))
    plain = compiled_step(lm.model)  # the broken variant: torch's bmm attention, one query row as it comes
    plain.exact_rows, plain.buckets = False, (1, 8)
    out = verify_tree(lm.model, fresh(), chain_tree, step=plain)
    assert not torch.equal(out.logits[0], verify_tree(lm.model, fresh(), Tree.root(root), step=plain).logits[0])
    assert S.generate(lm, ids, "prompt_lookup", max_new_tokens=48, compile=step).tokens == S.generate(
        lm, ids, max_new_tokens=48, compile=step).tokens  # fmt: skip
