"""The compiled verify step (`specdec_lab.models.compiled`): bucket padding leaves real nodes' logits unchanged, and
compiled greedy decoding equals eager greedy decoding for every method (tiny models; the real model `real`).

Compiling costs seconds per bucket, so one module-scoped step serves every test of a model (the graphs are
compiled once, as a user's step would be)."""

import random
import warnings

import pytest
import torch

import specdec_lab as S
from specdec_lab.kv_cache import KVCache
from specdec_lab.models.compiled import (
    BUCKETS,
    CompileUnavailable,
    bucket_for,
    capacity_for,
    compiled_step,
    default_block,
)
from specdec_lab.trees.tree import Tree
from specdec_lab.verify import prefill, verify_tree

PROMPT = [5, 17, 42, 7, 99, 3, 5, 17, 42, 8, 1]


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=4, eos_token_id=None)


@pytest.fixture(scope="module")
def step(target):
    return compiled_step(target)


def random_tree(rng: random.Random, n: int) -> Tree:
    parents = [-1] + [rng.randrange(i) for i in range(1, n)]  # each node hangs under an earlier one
    return Tree(torch.tensor([rng.randrange(256) for _ in range(n)]), torch.tensor(parents))


def test_buckets_and_capacity():
    assert [bucket_for(n) for n in (1, 2, 3, 5, 9, 33, 64)] == [1, 2, 4, 8, 16, 64, 64]
    with pytest.raises(ValueError, match="largest bucket"):
        bucket_for(65)
    assert capacity_for(100) == 256 and capacity_for(200) == 512  # room for the largest bucket past the tokens
    assert default_block(30) == 6 and default_block(4) == 4 and default_block(7) == 7


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 31, 64])
def test_padded_bucket_leaves_real_nodes_logits_unchanged(target, step, n):
    """n real nodes padded to their bucket: logits, hidden states, features and the kept K/V equal eager's
    unpadded forward to fp32 rounding, and greedy picks are identical."""
    tree = random_tree(random.Random(n), n)
    ctx = torch.arange(20) * 7 % 256
    layers = (0, 2, 4)
    caches = [KVCache.for_model(target, capacity=step.capacity) for _ in range(2)]
    with torch.inference_mode():
        for cache in caches:
            prefill(target, cache, ctx)
        eager = verify_tree(target, caches[0], tree, layers)
        comp = verify_tree(target, caches[1], tree, layers, step=step)
    assert comp.logits.shape == eager.logits.shape == (n, 256)
    torch.testing.assert_close(comp.logits, eager.logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(comp.features, eager.features, rtol=1e-4, atol=1e-4)
    assert torch.equal(comp.logits.argmax(-1), eager.logits.argmax(-1))
    assert caches[1].layers[0].length == caches[0].layers[0].length == 20 + n  # the dummies are not written
    path = [0] + [i for i in range(1, n) if int(tree.parents[i]) == 0][:1]  # the root and its first child
    for cache in caches:
        cache.keep(path)
    for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(a.values, b.values, rtol=1e-4, atol=1e-5)


def test_padding_does_not_change_a_node(target, step):
    """The same 3 nodes alone (bucket 4, one dummy) and among 5 more (bucket 8): same logits within fp32."""
    rng = random.Random(0)
    tree = random_tree(rng, 8)
    sub = Tree(tree.tokens[:3], tree.parents[:3])
    outs = []
    for t in (sub, tree):
        cache = KVCache.for_model(target, capacity=step.capacity)
        with torch.inference_mode():
            prefill(target, cache, torch.arange(9))
            outs.append(verify_tree(target, cache, t, step=step).logits[:3])
    torch.testing.assert_close(outs[0], outs[1], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "method,params",
    [
        ("autoregressive", {}),
        ("prompt_lookup", {"draft_length": 4}),
        ("prompt_lookup", {}),
        ("lookahead", {"W": 4, "N": 3, "G": 3}),
        ("layer_skip", {"n_layers": 2, "draft_length": 3}),
    ],
)
def test_compiled_greedy_equals_eager(target, step, method, params):
    eager = S.generate(target, PROMPT, method=method, max_new_tokens=32, **params)
    comp = S.generate(target, PROMPT, method=method, max_new_tokens=32, compile=step, **params)
    assert comp.tokens == eager.tokens
    if method != "autoregressive":
        assert comp.forwards <= len(comp.tokens)


def test_compiled_medusa_and_eagle_equal_eager(target, step):
    from specdec_lab.eagle import random_drafter
    from specdec_lab.medusa import MedusaHeads

    heads = MedusaHeads.for_model(target, num_heads=3)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    drafter = random_drafter(target, "eagle3", vocab=torch.arange(256), seed=1)
    ar = S.generate(target, PROMPT, max_new_tokens=32).tokens
    for method, params in [("medusa", {"heads": heads, "tree": "cartesian:3,2"}),
                           ("eagle", {"weights": drafter, "draft_length": 3})]:  # fmt: skip
        comp = S.generate(target, PROMPT, method=method, max_new_tokens=32, compile=step, **params)
        assert comp.tokens == ar, method


def test_one_token_prompt_and_compile_time_apart(target, step):
    """A one-token prompt (nothing prefilled: the step allocates the cache) decodes as eager does; compiling
    is reported apart from decoding time."""
    eager = S.generate(target, [7], max_new_tokens=8)
    fresh = compiled_step(target, capacity=1024)  # a new capacity: its graphs compile in this call
    comp = S.generate(target, [7], max_new_tokens=8, compile=fresh)
    assert comp.tokens == eager.tokens
    assert comp.compile_seconds > 0 and (1, 1024) in fresh.compiled
    phases = sum(s.t_propose + s.t_verify + s.t_accept for s in comp.steps)  # on the decoding clock, too
    assert phases <= comp.seconds - comp.prefill_seconds + 1e-6  # with the compiling in a phase, it would not be
    again = S.generate(target, [7], max_new_tokens=8, compile=fresh)
    assert again.compile_seconds == 0 and again.tokens == eager.tokens


def test_cost_curve_goes_through_the_compiled_step(target, step):
    from specdec_lab.cost import cost_curve_for

    cost_curve_for(target, max_tokens=6, step=step)
    assert {(b, step.capacity) for b in (1, 2, 4, 8)} <= step.compiled


def test_unsupported_architecture_falls_back_to_eager_with_a_message():
    from transformers import GPT2Config, GPT2LMHeadModel

    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=64)).eval()
    with pytest.raises(CompileUnavailable, match="not in the Llama family"):
        compiled_step(gpt2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = S.generate(gpt2, [1, 2, 3], max_new_tokens=4, compile=True)
    assert any("decoding eagerly" in str(w.message) for w in caught)
    assert r.tokens == S.generate(gpt2, [1, 2, 3], max_new_tokens=4).tokens


def test_buckets_constant():
    assert BUCKETS == tuple(sorted(BUCKETS)) and BUCKETS[0] == 1


@pytest.mark.real
def test_real_model_compiled_equals_eager(real_model):
    """SmolLM2-135M: compiled plain decoding, prompt lookup, Medusa and EAGLE (shipped heads and drafter) equal
    eager plain decoding."""
    step = compiled_step(real_model.model)
    step.buckets = (1, 16)  # two graphs to compile instead of seven (padding is tested above at every size)
    step.cpp_wrapper = False  # the C++ wrapper compiles cold in minutes more; the tiny `step` above runs it
    ids = real_model.chat_ids("Repeat after me: the quick brown fox jumps over the lazy dog.")
    ar = S.generate(real_model, ids, max_new_tokens=24).tokens
    for method in ("autoregressive", "prompt_lookup", "medusa", "eagle"):
        r = S.generate(real_model, ids, method=method, max_new_tokens=24, compile=step)
        assert r.tokens == ar, method


def test_bench_compile_runs_our_loop_compiled(target, tmp_path):
    from specdec_lab.bench import BenchConfig, run_benchmark

    config = BenchConfig(methods="autoregressive,prompt_lookup", max_new_tokens=8, compile=True,
                         out=str(tmp_path / "r.json"))  # fmt: skip
    results = run_benchmark(target, [PROMPT, PROMPT[:6]], config=config, progress=False)
    assert results["config"]["compile"] is True and results["config"]["compile_seconds"] >= 0
    eager = run_benchmark(target, [PROMPT, PROMPT[:6]], config=BenchConfig(methods="autoregressive", max_new_tokens=8),
                          progress=False)  # fmt: skip
    tokens = [r["tokens"] for r in results["rows"] if r["method"] == "autoregressive"]
    assert tokens == [r["tokens"] for r in eager["rows"]]
    assert all(r["identical"] for r in results["rows"])  # prompt lookup (compiled) = autoregressive (compiled)


def test_a_failing_compile_warns_once_and_decodes_eagerly(target):
    def broken(*args):
        raise RuntimeError("inductor says no")

    fresh = compiled_step(target)
    fresh.cpp_wrapper = False  # the last resort: no other wrapper to try
    fresh._fns[0] = broken  # as if inductor rejected an op of the graph
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = S.generate(target, PROMPT, method="prompt_lookup", max_new_tokens=12, compile=fresh)
    assert sum("inductor says no" in str(w.message) for w in caught) == 1
    assert "RuntimeError" in fresh.failed
    assert r.tokens == S.generate(target, PROMPT, max_new_tokens=12).tokens


def test_a_failing_cpp_wrapper_compiles_again_with_the_python_one(target):
    def broken(*args):
        raise RuntimeError("cpp_wrapper says no")

    fresh = compiled_step(target)
    fresh.cpp_wrapper, fresh.buckets = True, (1, 4)
    fresh._fns[0] = broken  # as if the C++ wrapper's build failed on this toolchain
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = S.generate(target, PROMPT, method="prompt_lookup", max_new_tokens=12, compile=fresh)
    assert sum("cpp_wrapper says no" in str(w.message) for w in caught) == 1
    assert fresh.cpp_wrapper is False and fresh.failed is None and fresh.compiled  # compiled, Python wrapper
    assert r.tokens == S.generate(target, PROMPT, max_new_tokens=12).tokens


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_quantized_compiled_equals_quantized_eager(weights):
    """int8/int4 weights inside the compiled graph run the same kernels as `quant.QuantLinear` (one kernel at
    every row count), so compiled speculative decoding equals the quantized model's own eager decoding."""
    from specdec_lab.models.quant import quantize_model

    model = quantize_model(S.tiny_model(num_layers=2, hidden_size=64, eos_token_id=None), weights, compute="float32")
    step = compiled_step(model)
    eager = S.generate(model, PROMPT, max_new_tokens=24)
    for method in ("autoregressive", "prompt_lookup"):
        assert S.generate(model, PROMPT, method, max_new_tokens=24, compile=step).tokens == eager.tokens, method


def test_fused_int4_products_are_the_separate_layers_bit_for_bit():
    """The compiled step stacks int4 q/k/v (and gate/up) into one product (compact_body's `fuse`): the packed
    rows stack, so every output equals its own layer's, bit for bit — the stacked and separate steps agree on
    every node's logits, in bf16 too, and on the greedy decode."""
    import torch

    from specdec_lab.models.compact_body import CompactBody, _linear
    from specdec_lab.models.quant import quantize_model

    # N a whole number of the packing's 64-row blocks (q, k, v: 128, 64, 64; gate, up: 256), as SmolLM2's
    tiny = S.tiny_model(num_layers=2, hidden_size=128, num_heads=4, num_kv_heads=2, eos_token_id=None)
    model = quantize_model(tiny, "int4", head="q8_0", compute="bfloat16")
    fused, separate = CompactBody(model, fuse=True), CompactBody(model, fuse=False)
    assert all(f is not None for pair in fused.fused for f in pair) and fused.layer_args(0, 3)[5][1:3] == (
        "fused", "fused")  # fmt: skip
    odd = quantize_model(S.tiny_model(num_layers=1, hidden_size=64), "int4", compute="bfloat16")  # k, v: 32 rows
    assert CompactBody(odd, fuse=True).fused[0][0] is None  # a layout that does not stack stays separate
    h = torch.randn(3, 128, generator=torch.Generator().manual_seed(0))
    for i in range(2):
        a, b = fused.layer_args(i, 3), separate.layer_args(i, 3)
        qkv = _linear(h, a[0][0], None, a[2][0], a[5][0])
        sep = torch.cat([_linear(h, b[0][j], None, b[2][j], b[5][j]) for j in range(3)], dim=-1)
        assert torch.equal(qkv, sep)
    eager = S.generate(model, PROMPT, max_new_tokens=24)
    for fuse in (True, False):
        step = compiled_step(model, fuse=fuse)
        assert S.generate(model, PROMPT, "prompt_lookup", max_new_tokens=24, compile=step).tokens == eager.tokens


def test_compile_levers_time_every_option_in_one_loop(target):
    from specdec_lab.bench.compile_levers import measure_levers
    from specdec_lab.cost import CostCurve

    record = measure_levers(target, {"eager": None, "whole": {"block": 0}}, sizes=(1, 2), context=4, repeats=1)
    assert set(record) == {"eager", "whole"} and record["eager"]["compile_seconds"] == 0.0
    assert record["whole"]["options"] == {"block": 0} and record["whole"]["compile_seconds"] > 0
    curves = {name: CostCurve.from_dict(v) for name, v in record.items()}  # each lever's curve, in the record
    assert all(c.sizes == [1, 2] and c.context == 4 and min(c.seconds) > 0 for c in curves.values())


def test_a_call_seen_before_skips_guards_and_a_new_grad_mode_still_gets_its_graph(target, step):
    """`CompiledStep` runs a call whose (bucket, capacity, grad mode) it ran before with dynamo's guards skipped;
    the same call under another grad mode (a graph dynamo must tell apart) still finds or compiles its own, and
    every mode gives the same hidden states. The cache is written at exactly the new slots (the in-place write)."""
    tree = random_tree(random.Random(3), 5)
    ctx = torch.arange(12) * 5 % 256
    outs, modes = [], [torch.inference_mode, torch.no_grad, torch.inference_mode, torch.no_grad]
    for mode in modes:
        cache = KVCache.for_model(target, capacity=step.capacity)
        with mode():
            prefill(target, cache, ctx)
            before = cache.layers[0]._v.clone()
            hidden, _ = step.forward(cache, tree.tokens, 12 + tree.depths, tree.mask)
            outs.append(hidden.clone())
            after = cache.layers[0]._v.clone()
        changed = (before != after).any(-1).any(1)[0]  # (C,) slots whose values moved
        assert changed.nonzero().flatten().tolist() == list(range(12, 12 + 8))  # the bucket's 8 slots, no others
    assert len({sig[1:] for sig in step._seen if sig[0] == (8, step.capacity)}) >= 2  # both modes ran, each seen
    for out in outs[1:]:
        assert torch.equal(out, outs[0])
