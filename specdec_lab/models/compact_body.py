"""The compact forward that `compiled.py` compiles: a Llama-family decoder body over the HF model's own
weights as plain ops, with the K/V cache written by slot and the tree mask built from the committed length.

`CompactBody` is the whole body (prologue → layers → epilogue); `decoder_layer` / `decoder_block` are what a
compiled block runs, so the whole body and the blocks of `CompiledStep.block` layers share one definition.

Linear kernels. Inside the graph every linear runs the kernel FastLinear's measured plan names for the
bucket's row count (`fast_linear`): W @ x^T as an aten mm, or oneDNN's packed product through an opaque
custom op (`onednn_linear`; inductor's own oneDNN lowering accepts only frozen weights).

Numerics: the compiled graph sums in other orders than eager (fused RMSNorm, its own RoPE and attention), so
its logits match eager's to fp32 rounding, not bit for bit; greedy outputs matched eager's in the tests.
Exactness holds within a mode, and with `exact_rows` (on by default for quantized weights, whose bf16
activations amplify last-bit differences) bit for bit: attention runs in a form whose per-row sums do not
depend on the bucket nor on where a node's ancestors lie in the cache, and every fp32 linear on a
row-invariant kernel (`row_invariance.py`), so every verified node's logits equal those of one-row decoding
along its path exactly, in chains and branching trees alike.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .fast_linear import FastLinear, small_linear
from .quant import COMPUTE, QuantLinear, quant_mm
from .row_invariance import FORMS

__all__ = ["FAMILY", "CompactBody", "CompileUnavailable", "check_family", "decoder_block", "decoder_layer", "slot_ones"]

FAMILY = ("llama", "mistral", "qwen2")  # config.model_type values whose layers `CompactBody` reproduces


class CompileUnavailable(RuntimeError):
    """torch.compile cannot serve this model here; the message says why (callers fall back to eager)."""


def check_family(model) -> None:
    """Raise `CompileUnavailable` naming why `CompactBody` cannot reproduce `model`'s layers."""
    config = model.config.get_text_config(decoder=True)
    kind = getattr(config, "model_type", "?")
    if kind not in FAMILY:
        raise CompileUnavailable(f"compiled step: {type(model).__name__} ({kind}) is not in the Llama family "
                                 f"{FAMILY} that the compact forward reproduces")  # fmt: skip
    if getattr(config, "use_sliding_window", kind == "mistral") and getattr(config, "sliding_window", None):
        raise CompileUnavailable(f"compiled step: {type(model).__name__} uses a sliding window")
    rope = (getattr(config, "rope_parameters", None) or {}).get("rope_type", "default")
    if rope in ("dynamic", "longrope"):
        raise CompileUnavailable(f"compiled step: rope_type {rope!r} changes with the sequence length")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise CompileUnavailable(f"compiled step: hidden_act {config.hidden_act!r} (the compact forward has silu)")


class CompactBody(nn.Module):
    """The decoder body of a Llama-family HF model over the same Parameter objects (no copy), as plain ops.

    forward(tokens (B,), positions (B,), start (), tree_mask (B, B) bool, ks, vs) -> (hidden (B, H), the
    L + 1 hidden states [(B, H)]); writes the B new K/V into ks[l], vs[l] (1, H_kv, C, D) at slots start + i.
    """

    def __init__(self, model, fast_kernels: bool = True, attention: str = "bmm", fuse: bool = True):
        super().__init__()
        if attention not in FORMS:
            raise ValueError(f"attention must be one of {FORMS}; got {attention!r}")
        self.attention = attention  # how q·Kᵀ and p·V are computed (row_invariance.py)
        check_family(model)
        config = model.config.get_text_config(decoder=True)
        body = model.get_decoder()
        self.embed = body.embed_tokens.weight  # (V, H)
        self.norm_w, self.eps = body.norm.weight, body.norm.variance_epsilon
        layers = body.layers
        self.ln1 = nn.ParameterList([layer.input_layernorm.weight for layer in layers])
        self.ln2 = nn.ParameterList([layer.post_attention_layernorm.weight for layer in layers])
        # per layer: q, k, v, o, gate, up, down, each run with the kernel its FastLinear plan names for the
        # bucket's row count (the plan measured on this machine), or F.linear for a stock nn.Linear
        self.linears = [[getattr(layer.self_attn, f"{p}_proj") for p in "qkvo"]
                        + [getattr(layer.mlp, f"{p}_proj") for p in ("gate", "up", "down")]
                        for layer in layers]  # fmt: skip
        self.fast_kernels = fast_kernels
        # oneDNN-packed copies made now (FastLinear caches them), outside the traced code; a QuantLinear's
        # "packed" slot carries its scales (and zeros), its weight slot its codes
        self.packed = [[_scales(lin) if isinstance(lin, QuantLinear)
                        else lin._packed() if fast_kernels and isinstance(lin, FastLinear) else None for lin in row]
                       for row in self.linears]  # fmt: skip
        # fused products (`fuse`): q/k/v in one int4 product, gate/up in one — torch's CPU int4 packing lays out
        # rows in blocks of N (64 where N allows), so where every layer's N is a whole number of blocks,
        # stacking the packed codes (and their scales) along N is the stacked layers' weight and every output is
        # bit-identical to its own layer's (checked once here: `_fused`); one kernel call instead of three (two)
        # saves the kernel's fixed cost per call
        self.fused = [(_fused(row[0:3]), _fused(row[4:6])) if fuse else (None, None) for row in self.linears]
        rotary = body.rotary_emb
        self.register_buffer("inv_freq", rotary.inv_freq.detach().clone(), persistent=False)  # (D/2,)
        self.rope_scale = float(getattr(rotary, "attention_scaling", 1.0))
        self.n_heads, self.n_kv = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.scaling = self.head_dim**-0.5

    def layer_args(self, i: int, rows: int) -> tuple:
        """Layer i's tensors and the kernels its linears run for `rows` rows, as `decoder_layer` takes them."""
        lins = self.linears[i]
        kernels = tuple(f"{lin.fmt}:{lin.compute}" if isinstance(lin, QuantLinear)  # the same kernel at every row count
                        else lin.kernel_for(rows) if self.fast_kernels and isinstance(lin, FastLinear) else "stock"
                        for lin in lins)  # fmt: skip
        packed = self.packed[i]
        kernels = tuple("stock" if k == "onednn" and p is None else k for k, p in zip(kernels, packed, strict=True))
        weights = [lin.qweight if isinstance(lin, QuantLinear) else lin.weight for lin in lins]
        packed = list(self.packed[i])
        for first, group, fused in ((0, 3, self.fused[i][0]), (4, 2, self.fused[i][1])):
            if fused is not None:  # the group's first slot runs the stacked product; the others say "fused"
                weights[first], packed[first] = fused
                kernels = kernels[: first + 1] + ("fused",) * (group - 1) + kernels[first + group :]
        return (weights, [lin.bias for lin in lins], packed, self.ln1[i], self.ln2[i], kernels)

    def prologue(self, tokens, positions, start, tree_mask, capacity: int):
        """-> x (B, H) embeddings, cos/sin (B, D) rotations, bias (B, C) additive mask, slots (B,).

        The ones block `_slot_ordered_pv` sums its normaliser with is not made here: a constant inside the
        graph would be folded away (module docstring of `slot_ones`); the caller passes it."""
        b = tokens.shape[0]
        x = F.embedding(tokens, self.embed)  # (B, H)
        freqs = positions[:, None].float() * self.inv_freq[None]  # (B, D/2)
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = (emb.cos() * self.rope_scale).to(x.dtype), (emb.sin() * self.rope_scale).to(x.dtype)  # (B, D)
        # visibility of cache slot j to node i: the committed prefix, or an ancestor among the new nodes
        slot = torch.arange(capacity, device=tokens.device)  # (C,)
        rel = slot - start  # (C,) index of slot j among the new nodes
        in_new = (rel >= 0) & (rel < b)
        anc = tree_mask[:, rel.clamp(0, b - 1)] & in_new[None]  # (B, C)
        allowed = (slot < start)[None] | anc
        bias = torch.zeros(b, capacity, dtype=x.dtype, device=x.device).masked_fill(~allowed, torch.finfo(x.dtype).min)
        slots = start + torch.arange(b, device=tokens.device)  # (B,)
        return x, cos, sin, bias, slots

    def epilogue(self, x, hs: list):
        """-> hidden (B, H) after the final norm, and every layer's states [embeddings, layer 1, ..., hidden]
        (HF's `hidden_states` convention, verify.py): feature layers are picked outside the graph, so one
        graph per bucket serves every drafter."""
        hidden = rms_norm(x, self.norm_w, self.eps)  # (B, H)
        return hidden, hs[:-1] + [hidden]

    @property
    def dims(self) -> tuple:
        return (self.n_heads, self.n_kv, self.head_dim, self.scaling, self.eps, self.attention)

    def forward(self, tokens, positions, start, tree_mask, ks: list[torch.Tensor], vs: list[torch.Tensor], ones):
        """ones: `slot_ones(C)`, an input (not a constant) so that the normaliser's sum stays in slot order."""
        x, cos, sin, bias, slots = self.prologue(tokens, positions, start, tree_mask, ks[0].shape[2])
        hs = [x]
        for i in range(len(self.linears)):
            x = decoder_layer(x, cos, sin, bias, slots, ones, ks[i], vs[i], *self.layer_args(i, x.shape[0]), self.dims)
            hs.append(x)
        return self.epilogue(x, hs)


def decoder_block(x, cos, sin, bias, slots, ones, kcs, vcs, args: list, dims: tuple):
    """`decoder_layer` over consecutive layers; -> (x, [each layer's output])."""
    hs = []
    for kc, vc, a in zip(kcs, vcs, args, strict=True):
        x = decoder_layer(x, cos, sin, bias, slots, ones, kc, vc, *a, dims)
        hs.append(x)
    return x, hs


def rms_norm(x, w, eps: float):
    """As LlamaRMSNorm: in fp32, then back to the model dtype."""
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _fused(lins) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(stacked codes, stacked scales and zeros) of int4 QuantLinears sharing inputs and compute dtype, no bias;
    None where the group cannot be stacked (another format, a bias, fp32 layers)."""
    if not all(isinstance(m, QuantLinear) and m.fmt == "int4" and m.bias is None for m in lins):
        return None
    if len({m.compute for m in lins}) != 1 or len({m.in_features for m in lins}) != 1:
        return None
    codes = torch.cat([m.qweight for m in lins], dim=0)  # (ΣN, K/2): packed rows stack (whole blocks of N)
    scales = torch.cat([m.scales_and_zeros for m in lins], dim=1)  # (K/32, ΣN, 2)
    x = torch.randn(2, lins[0].in_features, generator=torch.Generator().manual_seed(0)).to(COMPUTE[lins[0].compute])
    with torch.no_grad():
        same = torch.equal(quant_mm(x, "int4", codes, scales), torch.cat([m._mm(x, x.dtype) for m in lins], dim=-1))
    return (codes, scales) if same else None  # a layout that does not stack (N not whole blocks): separate


def _scales(lin: QuantLinear) -> torch.Tensor:
    return lin.scales if lin.fmt == "int8" else lin.scales_and_zeros


def _linear(x, weight, bias, packed, kernel: str):
    if kernel.split(":")[0] in ("int8", "int4", "q8_0"):  # a QuantLinear's product: codes, scales in `compute`
        fmt, compute = kernel.split(":")
        out = quant_mm(x.to(COMPUTE[compute]), fmt, weight, packed).to(x.dtype)
        return out if bias is None else out + bias.to(x.dtype)
    if kernel == "onednn":  # an opaque call: inductor's own oneDNN lowering wants frozen (constant) weights
        return onednn_linear(x, packed, weight.shape[0], bias)
    return small_linear(x, weight, bias, kernel=kernel)


def decoder_layer(x, cos, sin, bias, slots, ones, kc, vc, ws, bs, packed, ln1, ln2, kernels: tuple, dims: tuple):
    """One Llama decoder layer on B rows x (B, H); writes its K/V into kc, vc (1, H_kv, C, D) at `slots`.

    ones: `slot_ones(C)` (the slot-ordered forms' normaliser, `_slot_ordered_pv`).
    ws, bs, packed: the 7 linears' (q, k, v, o, gate, up, down) weights, biases, packed copies; kernels:
    the `fast_linear` kernel of each for B rows; dims: (heads, K/V heads, head dim, scaling, eps, attention
    form: "bmm" | "ordered" | "products", row_invariance.py).
    """
    n_heads, n_kv, d, scaling, eps, form = dims
    b, cap, g = x.shape[0], kc.shape[2], n_heads // n_kv
    lin = [lambda y, j=j: _linear(y, ws[j], bs[j], packed[j], kernels[j]) for j in range(7)]
    h = rms_norm(x, ln1, eps)
    if kernels[1] == "fused":  # one product for q, k, v (CompactBody's `fuse`)
        q, k, v = lin[0](h).split([n_heads * d, n_kv * d, n_kv * d], dim=-1)
    else:
        q, k, v = lin[0](h), lin[1](h), lin[2](h)
    q = q.reshape(b, n_heads, d).transpose(0, 1)  # (Hq, B, D)
    k = k.reshape(b, n_kv, d).transpose(0, 1)  # (Hkv, B, D)
    v = v.reshape(b, n_kv, d).transpose(0, 1)
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    # the cache buffers are updated in place. Written on the 4-d buffer, not on its view kc[0]: inductor
    # re-inplaces the functionalized copy of a graph input it can see whole, but wrote kc[0].index_copy_ as
    # clone the whole layer's cache, scatter the B rows, copy it back — passes over C slots, not B
    kc.index_copy_(2, slots, k[None])
    vc.index_copy_(2, slots, v[None])
    # grouped-query attention without copying K/V: the g query heads of a K/V head share its keys
    qg = q.reshape(n_kv, g * b, d)  # (Hkv, g·B, D); head h = kv·g + r
    scores = _attend(qg, kc[0].transpose(1, 2), form, g) * scaling  # (Hkv, g·B, C)
    scores = scores.view(n_kv, g, b, cap) + bias
    if form in ("ordered", "products"):  # softmax and p·V summed in slot order (row_invariance.py)
        o = _slot_ordered_pv(scores.view(n_kv, g * b, cap), vc[0], ones)
    else:
        probs = torch.softmax(scores.float(), dim=-1).to(x.dtype).view(n_kv, g * b, cap)
        o = _attend(probs, vc[0], form, g)
    o = o.view(n_heads, b, d).transpose(0, 1).reshape(b, n_heads * d)
    x = x + lin[3](o)
    h = rms_norm(x, ln2, eps)
    if kernels[5] == "fused":  # one product for gate and up
        gate, up = lin[4](h).chunk(2, dim=-1)
    else:
        gate, up = lin[4](h), lin[5](h)
    return x + lin[6](F.silu(gate) * up)


def _attend(a, m, form: str, g: int):
    """a (Hkv, g·B, K) @ m (Hkv, K, N) -> (Hkv, g·B, N), summed so that a row's result does not depend on B
    where `form` asks for it (row_invariance.py): "ordered" runs one token's g rows as 2g (the kernel class
    of every tree), "products" sums elementwise products in inductor's own fixed-order loop."""
    if form == "products":
        return (a[:, :, :, None] * m[:, None, :, :]).sum(-2)  # (Hkv, g·B, K, 1) * (Hkv, 1, K, N), summed over K
    if form == "ordered" and a.shape[1] == g:
        return (torch.cat([a, a], 1) @ m)[:, :g].contiguous()
    return a @ m


def _slot_ordered_pv(scores, v, ones):
    """softmax(scores) @ v with both sums over the C cache slots in slot order: scores (Hkv, R, C) with −inf
    at masked slots, v (Hkv, C, D), ones `slot_ones(C)` (C, ONES) -> (Hkv, R, D).

    o = Σ_j e_j v_j / Σ_j e_j with e_j = exp(s_j − max s). Inductor runs each reduction as one sequential loop
    over j for each output (vectorised across the D outputs, not across slots), so a masked slot adds an
    exact zero and a tree node whose ancestors sit at slots (0, 2, 7) sums the same terms in the same order as
    one-row decoding with them at (0, 1, 2): the result does not depend on where the other branches' keys
    lie. The normaliser Σ_j e_j must be summed the same way: as Σ_j e_j · 1 over a (C, ONES) block of ones
    (a vector's width of outputs), whose loop is the numerators' loop. Summed as `e.sum(-1)` — or over a
    ones constant, which inductor folds into that — it would be vectorised across slots, a lane per slot
    residue, and a node's terms would meet in another order than one-row decoding's. (Appending the ones
    column to v instead, `torch.cat([v, 1])`, costs a copy of the whole V cache per layer and call.)"""
    e = torch.exp(scores - scores.amax(-1, keepdim=True))  # (Hkv, R, C); the max is exact in any order
    num = (e[:, :, :, None] * v[:, None, :, :]).sum(-2)  # (Hkv, R, D)
    den = (e[:, :, :, None] * ones[None, None]).sum(-2)[..., :1]  # (Hkv, R, 1): lane 0 of ONES equal sums
    return num / den


ONES = 16  # columns of the normaliser's ones block: one AVX-512 vector of fp32 (two of AVX2)


def slot_ones(capacity: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The (C, ONES) ones block `_slot_ordered_pv` sums the softmax normaliser with; pass it into a compiled
    graph as an input — created inside the graph it is a constant that inductor folds away."""
    return torch.ones(capacity, ONES, dtype=dtype, device=device)


@torch.library.custom_op("specdec_lab::onednn_linear", mutates_args=())
def onednn_linear(x: torch.Tensor, packed: torch.Tensor, out_features: int, bias: torch.Tensor | None) -> torch.Tensor:
    """x (M, K) @ W^T with W's oneDNN-packed copy (`fast_linear.pack_weight`) -> (M, N)."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [None], "")


@onednn_linear.register_fake
def _(x, packed, out_features, bias):
    return x.new_empty(x.shape[0], out_features)


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)
