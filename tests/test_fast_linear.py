"""FastLinear: same products as nn.Linear, same parameters, and every method stays exact with it on."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from specdec_lab.generate import generate
from specdec_lab.machine import machine
from specdec_lab.models import tiny_model
from specdec_lab.models.fast_linear import (
    MAX_ROWS,
    ONEDNN,
    PACKED_MAX_ROWS,
    FastLinear,
    linear_kind,
    match_linear,
    pack_weight,
    restore_linear,
    small_linear,
    use_fast_linear,
    uses_fast_linear,
)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 8, MAX_ROWS, MAX_ROWS + 1, 40])
@pytest.mark.parametrize("bias", [False, True])
def test_small_linear_equals_f_linear(rows, bias):
    gen = torch.Generator().manual_seed(rows)
    w = torch.randn(300, 48, generator=gen)
    b = torch.randn(300, generator=gen) if bias else None
    x = torch.randn(rows, 48, generator=gen)
    torch.testing.assert_close(small_linear(x, w, b), F.linear(x, w, b), rtol=1e-5, atol=1e-5)


needs_onednn = pytest.mark.skipif(not ONEDNN, reason="this torch build has no oneDNN packed linear")


@needs_onednn
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 7, 16, PACKED_MAX_ROWS, PACKED_MAX_ROWS + 1])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_small_linear_equals_f_linear(rows, bias):
    gen = torch.Generator().manual_seed(rows)
    w = torch.randn(300, 48, generator=gen)
    b = torch.randn(300, generator=gen) if bias else None
    x = torch.randn(2, rows, 48, generator=gen)[1]  # a strided view: no contiguity assumed
    out = small_linear(x, w, b, packed=pack_weight(w))
    torch.testing.assert_close(out, F.linear(x, w, b), rtol=1e-5, atol=1e-5)
    assert small_linear(x[None], w, b, packed=pack_weight(w)).shape == (1, rows, 300)


@needs_onednn
def test_packed_copy_follows_in_place_weight_changes():
    layer = use_fast_linear(nn.Sequential(nn.Linear(48, 30)))[0]
    x = torch.randn(5, 48)
    with torch.inference_mode():
        layer(x)
        first = layer.__dict__["_pack"]
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
        assert layer.__dict__["_pack"] is first  # reused while the weight is unchanged
        layer.load_state_dict({"weight": torch.randn(30, 48), "bias": torch.zeros(30)})  # copy_ in place
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
        assert layer.__dict__["_pack"] is not first


@needs_onednn
def test_packed_copy_is_never_saved_copied_or_made_when_off():
    import copy
    import pickle

    model = tiny_model(fast_linear=True)
    keys = set(model.state_dict())
    with torch.inference_mode():
        model(torch.arange(5)[None])  # 5 rows: every layer packs its weight
    assert sum("_pack" in m.__dict__ for m in model.modules()) > 0 and set(model.state_dict()) == keys
    clone = copy.deepcopy(model)
    assert not any("_pack" in m.__dict__ for m in clone.modules())
    assert not any("_pack" in m.__dict__ for m in pickle.loads(pickle.dumps(model)).modules())
    assert linear_kind(model) == "fast+onednn"
    use_fast_linear(model, pack=False)  # switching packing off drops the copies
    assert linear_kind(model) == "fast" and not any("_pack" in m.__dict__ for m in model.modules())
    with torch.inference_mode():
        model(torch.arange(5)[None])
    assert not any("_pack" in m.__dict__ for m in model.modules())


def test_linear_kind_and_match_linear():
    stock, fast = tiny_model(), tiny_model(fast_linear=True)
    assert linear_kind(stock) == "stock"
    assert linear_kind(fast) == ("fast+onednn" if ONEDNN else "fast")
    other = match_linear(tiny_model(seed=1), fast)
    assert linear_kind(other) == linear_kind(fast)
    assert linear_kind(match_linear(tiny_model(seed=1), stock)) == "stock"
    assert linear_kind(match_linear(tiny_model(seed=1), use_fast_linear(tiny_model(), pack=False))) == "fast"


def test_parametrized_weights_are_not_packed():
    from torch.nn.utils import parametrize

    class Double(nn.Module):
        def forward(self, w):
            return 2 * w

    layer = use_fast_linear(nn.Sequential(nn.Linear(48, 30)))[0]
    parametrize.register_parametrization(layer, "weight", Double())
    x = torch.randn(5, 48)
    with torch.inference_mode():
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight, layer.bias))
    assert "_pack" not in layer.__dict__


@pytest.mark.parametrize("shape", [(48,), (1, 1, 48), (2, 3, 48), (0, 48)])
def test_small_linear_shapes(shape):
    w = torch.randn(7, 48)
    x = torch.randn(*shape)
    out = small_linear(x, w)
    assert out.shape == (*shape[:-1], 7) and out.is_contiguous()
    torch.testing.assert_close(out, F.linear(x, w))


def test_small_linear_keeps_autograd():
    w = torch.randn(5, 4, requires_grad=True)
    small_linear(torch.randn(2, 4), w).sum().backward()
    assert w.grad is not None and w.grad.shape == w.shape


def test_swap_keeps_parameters_tying_and_keys():
    model = tiny_model()
    keys = set(model.state_dict())
    head, embed = model.get_output_embeddings().weight, model.get_input_embeddings().weight
    assert head is embed  # tied
    use_fast_linear(model)
    assert uses_fast_linear(model) and isinstance(model.get_output_embeddings(), FastLinear)
    assert model.get_output_embeddings().weight is embed  # still the same Parameter: still tied
    assert set(model.state_dict()) == keys
    assert all(isinstance(m, nn.Linear) for m in model.modules() if "proj" in type(m).__name__.lower())
    restore_linear(model)
    assert not uses_fast_linear(model)
    assert type(model.get_output_embeddings()) is nn.Linear and model.get_output_embeddings().weight is embed


def test_model_logits_match_stock():
    model = tiny_model(seed=3)
    ids = torch.randint(0, 256, (1, 6), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        ref = model(ids).logits
        use_fast_linear(model)
        for n in (1, 2, 6):  # the last n positions alone (few rows: the fast path) with the rest cached
            out = model(ids[:, -n:], cache=None if n == 6 else _cached(model, ids[:, :-n])).logits
            torch.testing.assert_close(out, ref[:, -n:], rtol=1e-4, atol=1e-4)


def _cached(model, prefix):
    return model(prefix, use_cache=True).past_key_values


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("method", ["prompt_lookup", "layer_skip"])
def test_methods_equal_autoregressive_with_fast_linear(seed, method):
    """With fast linear on, every method still reproduces greedy decoding (and stock decoding's output)."""
    stock = tiny_model(seed=seed)
    fast = tiny_model(seed=seed, fast_linear=True)
    base = torch.randint(0, 256, (6,), generator=torch.Generator().manual_seed(seed)).tolist()
    ids = base * 3  # repeats: prompt lookup finds matches
    ref = generate(stock, ids, max_new_tokens=40).tokens
    assert generate(fast, ids, max_new_tokens=40).tokens == ref
    params = {"n_layers": 1} if method == "layer_skip" else {}
    assert generate(fast, ids, method=method, max_new_tokens=40, draft_length=3, **params).tokens == ref


# ---- kernel plans: measured per machine, chosen per shape and row count ------------------------------
def test_choose_plan_takes_the_fastest_kernel_beyond_the_noise_margin():
    from specdec_lab.models.fast_linear import TUNE_ROWS, choose_plan, default_plan

    n = len(TUNE_ROWS)
    seconds = {"stock": [1.0] * n, "wx": [1.0] * n, "onednn": [1.0] * n}
    assert choose_plan(seconds) == default_plan(True)  # ties (and noise below the margin) keep the default
    seconds["stock"] = [0.5] + [2.0] * (n - 1)  # an AVX2 CPU where MKL's gemv wins at one row
    seconds["wx"] = [1.0, 1.0, 1.0, 0.99] + [1.0] * (n - 4)  # 1% faster at 4 rows: noise, not a choice
    plan = choose_plan(seconds)
    assert plan[1] == "stock" and plan[2] == "wx" and plan[4] == plan[5] == ("onednn" if ONEDNN else "wx")
    assert len(plan) == PACKED_MAX_ROWS + 1
    seconds["wx"] = [1.0] * (n - 1) + [0.5]  # fastest at 64 rows only: 48..63 keep the choice made at 48
    plan = choose_plan(seconds)
    assert plan[64] == "wx" and plan[63] == plan[48] != "wx"
    no_pack = choose_plan({**seconds, "onednn": [0.1] * n}, pack=False)
    assert "onednn" not in no_pack  # without packed copies oneDNN is never chosen, however fast


def test_plan_summary_names_runs():
    from specdec_lab.models.fast_linear import plan_summary

    plan = ("stock", "stock", "wx", *["onednn"] * 62)
    assert plan_summary(plan) == "1:stock 2:wx 3-64:onednn"


@pytest.mark.parametrize("kernel", ["stock", "wx", "onednn"])
@pytest.mark.parametrize("rows", [1, 2, 5])
def test_every_kernel_computes_f_linear(kernel, rows):
    gen = torch.Generator().manual_seed(rows)
    w, b, x = torch.randn(300, 48, generator=gen), torch.randn(300, generator=gen), torch.randn(rows, 48, generator=gen)
    packed = pack_weight(w) if ONEDNN else None
    torch.testing.assert_close(small_linear(x, w, b, packed=packed, kernel=kernel), F.linear(x, w, b))
    with pytest.raises(ValueError, match="unknown linear kernel"):
        small_linear(x, w, b, kernel="gemv")


def test_tune_linear_measures_once_per_machine_and_shape(tmp_path, monkeypatch):
    import json

    import specdec_lab.models.fast_linear as fl

    monkeypatch.setenv("SPECDEC_LAB_CACHE", str(tmp_path))
    model = tiny_model(fast_linear=True)
    ids = torch.arange(7)[None]
    with torch.inference_mode():
        ref = model(ids).logits
    plans = fl.tune_linear(model, reps=1)
    assert linear_kind(model) == "tuned" and set(plans) == set(fl.linear_plan(model))
    assert all(
        m.plan is not None and len(m.plan) == PACKED_MAX_ROWS + 1 for m in model.modules() if isinstance(m, FastLinear)
    )
    store = json.loads((tmp_path / "linear_plans.json").read_text())
    (machine_key,) = store
    assert machine().isa in machine_key and set(store[machine_key]) == set(plans)
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, ref, rtol=1e-4, atol=1e-4)

    def no_measuring(*args, **kwargs):
        raise AssertionError("measured again although the machine's plans are cached")

    monkeypatch.setattr(fl, "_measure", no_measuring)
    other = tiny_model(seed=1, fast_linear=True)
    assert fl.tune_linear(other) == plans  # same shapes, same machine: read from the cache
    assert linear_kind(match_linear(tiny_model(seed=2), other)) == "tuned"  # a draft follows a tuned target
    with pytest.raises(AssertionError, match="measured again"):
        fl.tune_linear(other, refresh=True)


def test_a_stock_plan_uses_torchs_kernel(monkeypatch):
    calls = []
    real = F.linear
    monkeypatch.setattr(F, "linear", lambda *a, **k: calls.append(1) or real(*a, **k))
    layer = use_fast_linear(nn.Sequential(nn.Linear(48, 30)))[0]
    layer.plan = ("stock",) * (PACKED_MAX_ROWS + 1)
    with torch.inference_mode():
        layer(torch.randn(1, 48))
    assert calls and layer.kernel_for(1) == "stock" and layer.kernel_for(PACKED_MAX_ROWS + 1) == "stock"
