"""Weight-only int8 / int4: the layers compute what they hold, 1 row rounds like n rows, the GGUF's own Q4_1
blocks load exactly, and quantized speculative decoding equals quantized autoregressive decoding."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import specdec_lab as S
from specdec_lab.medusa import MedusaHeads
from specdec_lab.models.draft_model import DraftSpec, build_draft, layer_skip_draft
from specdec_lab.models.gguf import Q4_1Blocks, Q8_0Blocks, unpack_q4_1, unpack_q8_0
from specdec_lab.models.quant import (
    QuantLinear,
    check_weights,
    float_state_dict,
    quantize_model,
    quantize_q4_1,
    quantize_q8_0,
    weights_kind,
    weights_record,
)

PROMPT = [5, 17, 42, 7, 99, 3, 18, 64, 5, 17, 42]  # a repeat inside, so prompt lookup has something to copy
FORMATS = [("int8", "bfloat16"), ("int8", "float32"), ("int4", "bfloat16"), ("int4", "float32")]


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: thousands of tiny ops on one thread


def _linear(n=96, k=64, bias=True, seed=0) -> nn.Linear:
    g = torch.Generator().manual_seed(seed)
    lin = nn.Linear(k, n, bias=bias)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(n, k, generator=g) * 0.1)
        if bias:
            lin.bias.copy_(torch.randn(n, generator=g))
    return lin


@pytest.mark.parametrize(("fmt", "compute"), FORMATS)
def test_layer_computes_its_dequantized_weight(fmt, compute):
    lin = _linear()
    q = QuantLinear.from_linear(lin, fmt, compute=compute)
    w = q.dequantize()  # (N, K) what the kernel multiplies by
    w0 = lin.weight.detach()
    rows_range = (
        w0.abs().amax(1, keepdim=True) * 2 if fmt == "int8" else w0.amax(1, keepdim=True) - w0.amin(1, keepdim=True)
    )
    step = rows_range / (254 if fmt == "int8" else 15)  # one code step (at least a group's, for int4)
    scales = w0.abs().max() * 2**-8 if compute == "bfloat16" else 0  # scales (and zeros) rounded to bf16
    assert ((w - w0).abs() <= 0.5 * step + scales + 1e-6).all()  # rounding moves a weight half a step at most
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(1))
    ref = (x @ w.T + lin.bias).detach()
    tol = 1e-4 if compute == "float32" else 3e-2 * float(ref.abs().max())  # bf16 activations and outputs
    with torch.no_grad():
        y = q(x)
    assert y.shape == (3, 5, 96) and y.dtype == torch.float32
    assert (y - ref).abs().max() <= tol


@pytest.mark.parametrize(("fmt", "compute"), FORMATS)
def test_one_row_rounds_like_many(fmt, compute):
    """Each output row depends on its own input row only, summed in the same order: bit-identical."""
    q = QuantLinear.from_linear(_linear(n=192, k=576, bias=False), fmt, compute=compute)
    x = torch.randn(64, 576, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = q(x)
        for n in (1, 2, 3, 7, 16, 33, 64):
            assert torch.equal(q(x[:n]), full[:n])
        assert torch.equal(torch.cat([q(x[i : i + 1]) for i in range(64)]), full)


def test_q4_1_blocks_load_exactly():
    """Q4_1's (d, m) enter torch's (q - 8) * scale + zero as scale = d, zero = m + 8d: the same weights."""
    g = torch.Generator().manual_seed(3)
    codes = torch.randint(0, 16, (48, 64), generator=g, dtype=torch.uint8)
    d = (torch.rand(48, 2, generator=g) * 0.01).half()
    m = (-torch.rand(48, 2, generator=g) * 0.08).half()
    blocks = Q4_1Blocks(codes=codes, d=d, m=m)
    q = QuantLinear.from_q4_1(blocks, compute="float32")
    assert torch.equal(q.dequantize(), blocks.dequantize())
    qb = QuantLinear.from_q4_1(blocks, compute="bfloat16")  # scales rounded to bf16: close, not equal
    assert torch.allclose(qb.dequantize(), blocks.dequantize(), atol=float(d.float().max()) * 8 * 2**-8)


def test_unpack_q4_1_reads_ggml_block_layout():
    """A hand-built block: fp16 d, fp16 m, then 16 bytes with element i in the low and i + 16 in the high nibble."""
    q = np.arange(32) % 16
    raw = np.zeros((1, 20), dtype=np.uint8)
    raw[0, 0:2] = np.frombuffer(np.float16(0.5).tobytes(), np.uint8)
    raw[0, 2:4] = np.frombuffer(np.float16(-1.0).tobytes(), np.uint8)
    raw[0, 4:] = q[:16] | (q[16:] << 4)
    b = unpack_q4_1(raw, 1, 32)
    assert b.codes.tolist() == [q.tolist()]
    assert b.dequantize().tolist() == [(0.5 * q - 1.0).tolist()]


def test_q8_0_blocks_load_exactly_as_two_int4_planes():
    """A Q8_0 code q = 16·hi + lo runs as two int4 planes (quant's module doc): in fp32 the layer is the blocks'
    weight bit for bit, -128 included; in bf16 it is the codes times bf16-rounded scales, also exactly."""
    g = torch.Generator().manual_seed(4)
    codes = torch.randint(-128, 128, (48, 96), generator=g, dtype=torch.int8)
    codes[0, :4] = torch.tensor([-128, 127, 0, -1], dtype=torch.int8)
    d = (torch.rand(48, 3, generator=g) * 0.01 + 1e-4).half()
    blocks = Q8_0Blocks(codes=codes, d=d)
    assert torch.equal(QuantLinear.from_q8_0(blocks, compute="float32").dequantize(), blocks.dequantize())
    rounded = Q8_0Blocks(codes=codes, d=d.float().to(torch.bfloat16).float())
    assert torch.equal(QuantLinear.from_q8_0(blocks, compute="bfloat16").dequantize(), rounded.dequantize())
    x = torch.randn(5, 96, generator=g)
    with torch.no_grad():
        y = QuantLinear.from_q8_0(blocks, compute="float32")(x)
    assert torch.allclose(y, x @ blocks.dequantize().T, atol=1e-5)


def test_unpack_q8_0_reads_ggml_block_layout():
    """A hand-built block_q8_0: fp16 d, then 32 int8 codes."""
    q = np.arange(-16, 16, dtype=np.int8)
    raw = np.zeros((1, 34), dtype=np.uint8)
    raw[0, 0:2] = np.frombuffer(np.float16(0.25).tobytes(), np.uint8)
    raw[0, 2:] = q.view(np.uint8)
    b = unpack_q8_0(raw, 1, 32)
    assert b.codes.tolist() == [q.tolist()] and b.dequantize().tolist() == [(0.25 * q).tolist()]


def test_q8_0_follows_its_rule_and_rounds_one_row_like_many():
    w = _linear(n=192, k=576, bias=False).weight.detach()
    b = quantize_q8_0(w)
    assert int(b.codes.abs().max()) <= 127 and b.d.dtype == torch.float16
    assert ((b.dequantize() - w).abs() <= b.d.float().repeat_interleave(32, 1) / 2 + 1e-6).all()
    q = QuantLinear.from_q8_0(b, compute="bfloat16")
    x = torch.randn(64, 576, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = q(x)
        assert torch.equal(torch.cat([q(x[i : i + 1]) for i in range(64)]), full)


def test_requantised_int4_follows_q4_1s_rule():
    w = _linear(n=8, k=64, bias=False).weight.detach()
    b = quantize_q4_1(w)
    assert int(b.codes.max()) <= 15
    assert torch.allclose(b.m, w.view(8, 2, 32).amin(-1)) and (b.codes.view(8, 2, 32).amin(-1) == 0).all()
    assert ((b.dequantize() - w).abs() <= b.d.repeat_interleave(32, 1) / 2 + 1e-6).all()


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="fp32, int8, int4"):
        check_weights("int3")
    with pytest.raises(ValueError, match="fp32, int8, int4"):
        S.load_model("smollm2-135m", weights="int3")  # refused before anything is loaded
    with pytest.raises(ValueError, match="groups of 32"):
        QuantLinear.from_linear(nn.Linear(40, 8), "int4")
    with pytest.raises(ValueError, match="groups of 32"):
        quantize_model(S.tiny_model(hidden_size=48, num_heads=4, num_kv_heads=2), "int4", compute="bfloat16")
    with pytest.raises(ValueError, match="device='cpu'"):
        S.load_model("smollm2-135m", weights="int8", device="meta")
    with pytest.raises(ValueError, match="head_weights must be 'auto' or one of fp32, int8, q8_0"):
        S.load_model("smollm2-135m", weights="int4", head_weights="int4")
    with pytest.raises(ValueError, match="head must be one of fp32, int8, q8_0"):
        quantize_model(S.tiny_model(num_layers=1), "int4", head="q4", compute="bfloat16")


@pytest.fixture(scope="module", params=["int8", "int4"])
def qtarget(request):
    model = S.tiny_model(num_layers=4, eos_token_id=None)
    return quantize_model(model, request.param, compute="bfloat16")


def test_quantized_model_records_its_format(qtarget):
    fmt = weights_kind(qtarget)
    assert fmt in ("int8", "int4")
    assert isinstance(qtarget.get_output_embeddings(), nn.Linear)  # the tied head stays fp32
    assert weights_record(qtarget) == {"weights": fmt, "source": "requantised", "compute": "bfloat16", "head": "fp32"}
    assert sum(isinstance(m, QuantLinear) for m in qtarget.modules()) == 4 * 7
    head8 = quantize_model(S.tiny_model(num_layers=1), fmt, head="int8", compute="bfloat16")
    assert weights_record(head8)["head"] == "int8"
    assert head8.lm_head.weight is head8.model.embed_tokens.weight  # still tied, for drafters that read it
    head_q8 = quantize_model(S.tiny_model(num_layers=1), fmt, head="q8_0", compute="bfloat16")
    assert weights_record(head_q8)["head"] == "q8_0" and head_q8.lm_head.source == "requantised"  # Q8_0's rule
    assert head_q8.lm_head.weight is head_q8.model.embed_tokens.weight


def test_a_q8_0_head_keeps_every_method_exact():
    """The Q8_0 head is row-invariant like every QuantLinear: speculative output = the build's autoregressive."""
    model = quantize_model(S.tiny_model(num_layers=4, eos_token_id=None), "int4", head="q8_0", compute="bfloat16")
    ar = S.generate(model, PROMPT, max_new_tokens=40)
    assert S.generate(model, PROMPT, method="prompt_lookup", max_new_tokens=40, draft_length=4).tokens == ar.tokens
    heads = MedusaHeads.for_model(model, num_heads=3)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    md = S.generate(model, PROMPT, method="medusa", max_new_tokens=40, heads=heads, tree="cartesian:3,2")
    assert md.tokens == ar.tokens


def test_quantized_speculative_equals_quantized_autoregressive(qtarget):
    ar = S.generate(qtarget, PROMPT, max_new_tokens=40)
    pl = S.generate(qtarget, PROMPT, method="prompt_lookup", max_new_tokens=40, draft_length=4)
    assert pl.tokens == ar.tokens
    heads = MedusaHeads.for_model(qtarget, num_heads=3)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    for tree in ("chain:3", "cartesian:3,2"):
        md = S.generate(qtarget, PROMPT, method="medusa", max_new_tokens=40, heads=heads, tree=tree)
        assert md.tokens == ar.tokens, tree
    for draft in (layer_skip_draft(qtarget, 2), build_draft(qtarget, DraftSpec(base_layers=[0, 3], lora_rank=0))):
        dr = S.generate(qtarget, PROMPT, method="draft", draft=draft, draft_length=3, max_new_tokens=40)
        assert dr.tokens == ar.tokens


def test_float_state_dict_dequantizes(qtarget):
    layer = qtarget.model.layers[0]
    state = float_state_dict(layer)
    assert torch.equal(state["mlp.up_proj.weight"], layer.mlp.up_proj.dequantize())
    assert not any("qweight" in k for k in state)


# ---- the real model -------------------------------------------------------------------------------------
@pytest.mark.real
def test_real_int4_holds_the_files_q4_1_blocks(real_model):
    """The int4 model's decoder linears are the GGUF's own Q4_1 tensors (fp32 kernel dtype: bit-exact); all 210
    are loaded from the file, and the first and last layers' 14 are read back through the kernel (the read-back
    runs the slow fp32 kernel on an identity matrix: every layer would take minutes)."""
    import copy

    from specdec_lab.models import find_model_file
    from specdec_lab.models.gguf import read_q4_1

    fp32 = real_model.model
    blocks = read_q4_1(find_model_file("smollm2-135m"))
    assert len(blocks) == 30 * 7
    q = quantize_model(copy.deepcopy(fp32), "int4", q4_1=blocks, compute="float32")
    assert weights_record(q)["source"] == "gguf-q4_1"
    fp = dict(fp32.named_modules())
    quantized = {name: m for name, m in q.named_modules() if isinstance(m, QuantLinear)}
    assert len(quantized) == 30 * 7 and all(m.source == "gguf-q4_1" for m in quantized.values())
    for name, m in quantized.items():
        if ".layers.0." in name or ".layers.29." in name:
            assert torch.equal(m.dequantize(), fp[name].weight), name


@pytest.mark.real
def test_real_q8_0_head_holds_the_files_blocks(real_model):
    """The GGUF's tied head (`token_embd.weight`, Q8_0) read as stored: its de-quantized values are the fp32
    model's embedding bit for bit, and a q8_0 head in fp32 compute multiplies by exactly them."""
    from specdec_lab.models import find_model_file
    from specdec_lab.models.gguf import read_q8_0_head

    blocks = read_q8_0_head(find_model_file("smollm2-135m"))
    emb = real_model.model.get_input_embeddings().weight.detach()
    assert blocks is not None and blocks.shape == tuple(emb.shape)
    assert torch.equal(blocks.dequantize(), emb)
    head = QuantLinear.from_q8_0(blocks, compute="float32")
    x = torch.randn(2, emb.shape[1], generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        assert torch.allclose(head(x), x @ emb.T, rtol=1e-5, atol=1e-4)


NEAR_TIE = 0.5  # logits: what bf16 rounding of the linear layers' inputs moves (module doc of quant)


@pytest.mark.real
@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_real_quantized_speculative_equals_autoregressive_but_at_near_ties(weights):
    """With bf16 activations the model is not row-invariant (attention), so a method may leave the quantized
    model's own greedy output where two tokens tie to within bf16 rounding — never anywhere else."""
    from specdec_lab.bench.harness import first_diff, top2_gap
    from specdec_lab.proposers.medusa import MedusaDecodeConfig, MedusaProposer

    lm = S.load_model("smollm2-135m", weights=weights)
    assert weights_kind(lm.model) == weights
    ids = lm.chat_ids("Write a Python function that returns the squares of a list of numbers.")
    ar = S.generate(lm, ids, max_new_tokens=48)
    runs = {
        "prompt_lookup": S.generate(lm, ids, method="prompt_lookup", max_new_tokens=48, draft_length=4),
        "medusa": S.generate(lm, ids, max_new_tokens=48, proposer=MedusaProposer(MedusaDecodeConfig(max_budget=16))),
        "draft": S.generate(lm, ids, method="draft", max_new_tokens=48),
    }
    for method, r in runs.items():
        assert r.mean_accepted > 1.0, method  # speculation happened: more than one token per forward
        diff = first_diff(ar.tokens, r.tokens)
        if diff is not None:
            assert top2_gap(lm.model, ids, ar.tokens, diff) < NEAR_TIE, (method, diff)


def test_the_faster_activation_dtype_is_chosen_per_format():
    from specdec_lab.models.quant import _choose_compute

    fast, slow = [1e-4] * 7, [9e-4] * 5 + [None, None]  # the slow path is not measured past 16 rows
    one = {"int8:bfloat16": fast, "int8:float32": slow, "int4:bfloat16": slow[:5] + [1, 1], "int4:float32": fast}
    measured = {"rows": [1, 2, 4, 8, 16, 32, 64], "seconds": {"576x576": one}}
    assert _choose_compute(measured) == {"int8": "bfloat16", "int4": "float32"}


def test_step_bytes_count_what_a_step_reads():
    """`cost.memory_wall.step_bytes`: the head's and the layers' stored bytes, the embedding row not counted —
    a Q8_0 head reads its int8 codes (as two int4 planes) and its bf16 scales and zeros, a quarter-and-a-bit of
    fp32's bytes."""
    from specdec_lab.cost.memory_wall import step_bytes

    fp32 = S.tiny_model(num_layers=1)
    v, h = fp32.config.vocab_size, fp32.config.hidden_size
    parts = step_bytes(fp32, by_part=True)
    assert parts["head"] == v * h * 4 and step_bytes(fp32) == sum(parts.values())
    q8 = quantize_model(S.tiny_model(num_layers=1), "int4", head="q8_0", compute="bfloat16")
    assert step_bytes(q8, by_part=True)["head"] == v * h + (2 * h // 32) * v * 2 * 2  # codes + scales and zeros
    assert step_bytes(q8, by_part=True)["layers"] < parts["layers"] / 4
