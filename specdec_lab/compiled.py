"""A compiled verify step: the target's decoder body as one `torch.compile`d graph per bucket of node counts.

Decoding a 135M model on a CPU is bound by per-op overhead as much as by reading the weights: an eager
step launches hundreds of small ops through Python, transformers' mask and cache code, and FastLinear's kernel
dispatch. `torch.compile` (inductor, C++ on CPU) removes that overhead, but only for shapes it has seen:
every new number of nodes, every new cache length would be a new graph. So the compiled step is static:

    nodes     padded to a bucket B in BUCKETS = (1, 2, 4, 8, 16, 32, 64): the N real nodes first, then B − N
              dummies (token 0 at the root's position, each attending to its own slot only: finite, harmless)
    cache     the `KVCache`'s preallocated buffers (1, H_kv, C, D) at a fixed capacity C (a power of two,
              `capacity_for`): the B new K/V are written by index at slots [L, L+B), and attention runs over
              all C slots with a mask; the dummies' slots lie past the committed length + N, so `keep` and
              the next step never see them
    mask      built inside the graph from L (a 0-d tensor, not a constant: no recompile per step) and the
              (B, B) ancestor mask: slot j is visible to node i iff j < L or (j − L is an ancestor of i)

One graph per (bucket, capacity) serves every method (each layer's hidden states come out of it, and a
drafter's feature layers are picked outside): autoregressive is bucket 1, a
prompt-lookup chain of 5 is bucket 8, a Medusa tree of 40 bucket 64. The prefill (long, once per call)
stays eager and fills the same buffers, and so does everything that reads the cache (`keep`, a layer-skip
draft's `extend_from`): the compiled step is only another way of running `_body_forward`.

Which graph. Options measured on SmolLM2-135M (`python -m specdec_lab.step_variants --variants
fp32,fp32+compile` measures warm-up and step times; the numbers belong in results, not here): (a)
transformers' model with its StaticCache under torch.compile was not taken — its forward builds masks and
cache positions in Python per call and cannot keep a tree path's K/V in place; (b) regional compilation, one
decoder layer compiled once and called per layer with that layer's weights as inputs (tracing HF's layer
modules instead would guard on each one's `layer_idx` and recompile per layer): fast to compile, but a guard
check and a wrapper per call cost most of what compiling saves; (c) a compact gpt-fast-style forward over the
HF weights (Llama family: Llama, Mistral without a window, Qwen2) as one graph: the fastest step, but inductor
compiles all the unrolled layers of SmolLM2 so slowly that 7 buckets overrun the 2-minute warm-up budget
several times. Shipped: (c)'s forward compiled in blocks of `BLOCK` layers — one graph per block shape, reused
by every block — which keeps most of (c)'s step at a fraction of its compile time (`CompiledStep.block`, 0 =
the whole body).

Linear kernels. Inside the graph every linear runs the kernel FastLinear's measured plan names for the
bucket's row count (`fast_linear`): W @ x^T as an aten mm, or oneDNN's packed product through an opaque
custom op (`onednn_linear`; inductor's own oneDNN lowering accepts only frozen weights). Inductor's
`freezing=True` (weights as constants, prepacked by oneDNN for every row count) is an option of `CompiledStep`,
off by default; `cpp_wrapper` (a C++ wrapper around the kernels instead of the Python one: less Python per
call) is on by default on a CPU, and a graph it fails to compile is compiled again without it; `python -m
specdec_lab.compile_levers` times them, the whole-graph body and inductor's own products against the shipped
blocks in one loop, each with its compile seconds (results in data/curves/, not here).

Numerics: the compiled graph sums in other orders than eager (fused RMSNorm, its own RoPE and attention), so
its logits match eager's to fp32 rounding, not bit for bit; greedy outputs matched eager's in the tests.
Exactness holds within a mode, and with `exact_rows` (on by default for quantized weights, whose bf16
activations amplify last-bit differences) bit for bit: attention runs in a form whose per-row sums do not
depend on the bucket nor on where a node's ancestors lie in the cache, and every fp32 linear on a
row-invariant kernel (`row_invariance.py`), so every verified node's logits equal those of one-row decoding
along its path exactly, in chains and branching trees alike. Larger
trees than the largest bucket are cut to it by the loop (`Tree.truncate_nodes`).

Where compiling is not possible (no C++ compiler, an architecture outside the Llama family, a sliding
window), `compiled_step` raises `CompileUnavailable` with the reason and `generate(..., compile=True)` warns
and decodes eagerly; where torch.compile itself fails on a graph (an op or a toolchain inductor rejects), the
step warns once, records why in `CompiledStep.failed`, and `verify_tree` takes the eager path from then on.
"""

from __future__ import annotations

import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .fast_linear import FastLinear, small_linear
from .kv_cache import KVCache
from .quant import COMPUTE, QuantLinear, quant_mm
from .row_invariance import FORMS, attention_form, invariant_kernels

__all__ = ["BUCKETS", "CompileUnavailable", "CompiledStep", "compiled_step", "bucket_for", "capacity_for",
           "default_block"]  # fmt: skip

BUCKETS = (1, 2, 4, 8, 16, 32, 64)
RECOMPILE_LIMIT = 1024
BLOCK = 6  # decoder layers per compiled graph (module docstring: compile time against step time)
FAMILY = ("llama", "mistral", "qwen2")  # config.model_type values whose layers `CompactBody` reproduces


class CompileUnavailable(RuntimeError):
    """torch.compile cannot serve this model here; the message says why (callers fall back to eager)."""


def bucket_for(n: int, buckets: Sequence[int] = BUCKETS) -> int:
    """The smallest bucket holding n nodes."""
    for b in buckets:
        if n <= b:
            return b
    raise ValueError(f"{n} nodes exceed the largest bucket {buckets[-1]}")


def capacity_for(tokens: int, minimum: int = 256) -> int:
    """A cache capacity for `tokens` committed tokens plus the largest bucket: the next power of two (so a few
    graphs serve every prompt length)."""
    need, cap = tokens + BUCKETS[-1], minimum
    while cap < need:
        cap *= 2
    return cap


# ---- the compact forward ------------------------------------------------------------------------------
def _check_family(model) -> None:
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

    def __init__(self, model, fast_kernels: bool = True, attention: str = "bmm"):
        super().__init__()
        if attention not in FORMS:
            raise ValueError(f"attention must be one of {FORMS}; got {attention!r}")
        self.attention = attention  # how q·Kᵀ and p·V are computed (row_invariance.py)
        _check_family(model)
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
        return (weights, [lin.bias for lin in lins], self.packed[i], self.ln1[i], self.ln2[i], kernels)

    def prologue(self, tokens, positions, start, tree_mask, capacity: int):
        """-> x (B, H) embeddings, cos/sin (B, D) rotations, bias (B, C) additive mask, slots (B,)."""
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

    def forward(self, tokens, positions, start, tree_mask, ks: list[torch.Tensor], vs: list[torch.Tensor]):
        x, cos, sin, bias, slots = self.prologue(tokens, positions, start, tree_mask, ks[0].shape[2])
        hs = [x]
        for i in range(len(self.linears)):
            x = decoder_layer(x, cos, sin, bias, slots, ks[i], vs[i], *self.layer_args(i, x.shape[0]), self.dims)
            hs.append(x)
        return self.epilogue(x, hs)


def decoder_block(x, cos, sin, bias, slots, kcs, vcs, args: list, dims: tuple):
    """`decoder_layer` over consecutive layers; -> (x, [each layer's output])."""
    hs = []
    for kc, vc, a in zip(kcs, vcs, args, strict=True):
        x = decoder_layer(x, cos, sin, bias, slots, kc, vc, *a, dims)
        hs.append(x)
    return x, hs


def rms_norm(x, w, eps: float):
    """As LlamaRMSNorm: in fp32, then back to the model dtype."""
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _scales(lin: QuantLinear) -> torch.Tensor:
    return lin.scales if lin.fmt == "int8" else lin.scales_and_zeros


def _linear(x, weight, bias, packed, kernel: str):
    if kernel.startswith("int"):  # a QuantLinear's product (quant.QuantLinear.forward): codes, scales in `compute`
        fmt, compute = kernel.split(":")
        out = quant_mm(x.to(COMPUTE[compute]), fmt, weight, packed).to(x.dtype)
        return out if bias is None else out + bias.to(x.dtype)
    if kernel == "onednn":  # an opaque call: inductor's own oneDNN lowering wants frozen (constant) weights
        return onednn_linear(x, packed, weight.shape[0], bias)
    return small_linear(x, weight, bias, kernel=kernel)


def decoder_layer(x, cos, sin, bias, slots, kc, vc, ws, bs, packed, ln1, ln2, kernels: tuple, dims: tuple):
    """One Llama decoder layer on B rows x (B, H); writes its K/V into kc, vc (1, H_kv, C, D) at `slots`.

    ws, bs, packed: the 7 linears' (q, k, v, o, gate, up, down) weights, biases, packed copies; kernels:
    the `fast_linear` kernel of each for B rows; dims: (heads, K/V heads, head dim, scaling, eps, attention
    form: "bmm" | "ordered" | "products", row_invariance.py).
    """
    n_heads, n_kv, d, scaling, eps, form = dims
    b, cap, g = x.shape[0], kc.shape[2], n_heads // n_kv
    lin = [lambda y, j=j: _linear(y, ws[j], bs[j], packed[j], kernels[j]) for j in range(7)]
    h = rms_norm(x, ln1, eps)
    q = lin[0](h).view(b, n_heads, d).transpose(0, 1)  # (Hq, B, D)
    k = lin[1](h).view(b, n_kv, d).transpose(0, 1)  # (Hkv, B, D)
    v = lin[2](h).view(b, n_kv, d).transpose(0, 1)
    q = q * cos + _rotate_half(q) * sin
    k = k * cos + _rotate_half(k) * sin
    kc[0].index_copy_(1, slots, k)  # the cache buffers are updated in place
    vc[0].index_copy_(1, slots, v)
    # grouped-query attention without copying K/V: the g query heads of a K/V head share its keys
    qg = q.reshape(n_kv, g * b, d)  # (Hkv, g·B, D); head h = kv·g + r
    scores = _attend(qg, kc[0].transpose(1, 2), form, g) * scaling  # (Hkv, g·B, C)
    scores = scores.view(n_kv, g, b, cap) + bias
    if form in ("ordered", "products"):  # softmax and p·V summed in slot order (row_invariance.py)
        o = _slot_ordered_pv(scores.view(n_kv, g * b, cap), vc[0])
    else:
        probs = torch.softmax(scores.float(), dim=-1).to(x.dtype).view(n_kv, g * b, cap)
        o = _attend(probs, vc[0], form, g)
    o = o.view(n_heads, b, d).transpose(0, 1).reshape(b, n_heads * d)
    x = x + lin[3](o)
    h = rms_norm(x, ln2, eps)
    return x + lin[6](F.silu(lin[4](h)) * lin[5](h))


def _attend(a, m, form: str, g: int):
    """a (Hkv, g·B, K) @ m (Hkv, K, N) -> (Hkv, g·B, N), summed so that a row's result does not depend on B
    where `form` asks for it (row_invariance.py): "ordered" runs one token's g rows as 2g (the kernel class
    of every tree), "products" sums elementwise products in inductor's own fixed-order loop."""
    if form == "products":
        return (a[:, :, :, None] * m[:, None, :, :]).sum(-2)  # (Hkv, g·B, K, 1) * (Hkv, 1, K, N), summed over K
    if form == "ordered" and a.shape[1] == g:
        return (torch.cat([a, a], 1) @ m)[:, :g].contiguous()
    return a @ m


def _slot_ordered_pv(scores, v):
    """softmax(scores) @ v with both sums over the C cache slots in slot order: scores (Hkv, R, C) with −inf
    at masked slots, v (Hkv, C, D) -> (Hkv, R, D).

    o = Σ_j e_j v_j / Σ_j e_j with e_j = exp(s_j − max s). Appending a ones column to v makes the
    normaliser the (D+1)-th output of the same reduction, which inductor runs as one sequential loop over j
    for each output (vectorised across outputs, not across slots). A masked slot adds an exact zero, so a
    tree node whose ancestors sit at slots (0, 2, 7) sums the same terms in the same order as one-row
    decoding with them at (0, 1, 2): the result does not depend on where the other branches' keys lie."""
    e = torch.exp(scores - scores.amax(-1, keepdim=True))  # (Hkv, R, C); the max is exact in any order
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], -1)  # (Hkv, C, D + 1)
    nd = (e[:, :, :, None] * v1[:, None, :, :]).sum(-2)  # (Hkv, R, D + 1): numerators, then the normaliser
    return nd[..., :-1] / nd[..., -1:]


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


# ---- the step -----------------------------------------------------------------------------------------
@dataclass
class CompiledStep:
    """The compiled verify step of one model: one graph per bucket and cache capacity, compiled when first
    called (or by `warm_up`). Pass it to `generate(..., compile=step)` / `verify_tree(..., step=step)`.

    capacity: the cache capacity the step's caches start with (`generate` and the cost curve use it, so one
    set of graphs serves every prompt up to it; a longer one gets the next power of two and new graphs).
    block: decoder layers per compiled graph (module docstring); 0 compiles the whole body as one graph.

    compile_seconds: seconds spent in calls that compiled a new graph (warm-ups and first calls), kept apart
    from decoding time; `compiled` holds the (bucket, capacity) pairs compiled so far.
    """

    model: object
    freezing: bool = False
    fast_kernels: bool = True
    block: int = 0
    capacity: int = 512
    # inductor's C++ wrapper around the kernels instead of its Python one; None = on for a CPU model (less
    # Python per call). A graph that fails to compile with it is compiled once more without it.
    cpp_wrapper: bool | None = None
    # verify n rows exactly as one (row_invariance.py): attention in a row-invariant form and every fp32
    # linear on one kernel at every row count; None = on for quantized weights (bf16 amplifies last bits)
    exact_rows: bool | None = None
    attention: str = "bmm"  # with exact_rows: "bmm" = measured when first called ("ordered" or "products")
    kernels_invariant: bool = False  # with exact_rows: every linear's kernel checked row-invariant here
    failed: str | None = None  # why compiling failed (then every call raises CompileUnavailable: eager path)
    buckets: tuple[int, ...] = BUCKETS
    compile_seconds: float = 0.0
    compiled: set = field(default_factory=set)
    _fns: dict = field(default_factory=dict, repr=False)

    def _fn(self):
        if not self._fns:
            self.attention = self._attention()
            body = CompactBody(self.model, self.fast_kernels, self.attention).eval()
            if self.cpp_wrapper is None:
                self.cpp_wrapper = next(self.model.parameters()).device.type == "cpu"
            options = {"freezing": self.freezing, "cpp_wrapper": self.cpp_wrapper}
            if not self.block:
                self._fns[0] = torch.compile(body, fullgraph=True, dynamic=False, options=options)
            else:
                k = self.block
                if len(body.linears) % k:
                    raise ValueError(f"block={k} does not divide the {len(body.linears)} layers")
                blk = torch.compile(decoder_block, fullgraph=True, dynamic=False, options=options)
                prologue = torch.compile(body.prologue, fullgraph=True, dynamic=False)

                def run(tokens, positions, start, tree_mask, ks, vs):
                    x, cos, sin, bias, slots = prologue(tokens, positions, start, tree_mask, ks[0].shape[2])
                    hs = [x]
                    for i in range(0, len(ks), k):
                        args = [body.layer_args(j, x.shape[0]) for j in range(i, i + k)]
                        x, h = blk(x, cos, sin, bias, slots, ks[i : i + k], vs[i : i + k], args, body.dims)
                        hs += h
                    return body.epilogue(x, hs)

                self._fns[0] = run
        return self._fns[0]

    def _attention(self) -> str:
        """The attention form; with exact_rows also pins the fp32 linears to their row-invariant kernel."""
        if self.exact_rows is None:
            self.exact_rows = any(isinstance(m, QuantLinear) for m in self.model.modules())
        if not self.exact_rows:
            return "bmm"
        self.kernels_invariant = invariant_kernels(self.model, self.buckets)
        if not self.kernels_invariant:
            warnings.warn("exact_rows: a linear layer has no row-invariant kernel here (oneDNN packing off or "
                          "unavailable, a stock nn.Linear, or a shape whose kernel is not); its outputs may differ "
                          "in the last bits between 1 and n rows", stacklevel=3)  # fmt: skip
        if self.attention != "bmm":  # a form the caller chose (the tests run both)
            return self.attention
        config = self.model.config.get_text_config(decoder=True)
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        groups = config.num_attention_heads // config.num_key_value_heads
        capacities = [self.capacity * 2**i for i in range(3)]  # the step's caches and two doublings
        return attention_form(config.num_key_value_heads, groups, d, capacities, self.buckets)

    def rows_record(self) -> dict:
        """What the results record of the step's row invariance (row_invariance.py)."""
        self._fn()
        return {"exact_rows": bool(self.exact_rows), "attention": self.attention,
                "kernels_invariant": self.kernels_invariant}  # fmt: skip

    @property
    def max_nodes(self) -> int:
        """The most nodes one call verifies: the largest bucket (the loop cuts larger trees to it)."""
        return self.buckets[-1]

    def forward(self, cache: KVCache, tokens, positions, tree_mask, feature_layers: Sequence[int] = ()):
        """The N nodes (tokens (N,), positions (N,), tree_mask (N, N) bool: ancestors incl. self) through the
        bucket's graph; appends their K/V to `cache` like `_body_forward`. -> (hidden (N, H), features)."""
        if self.failed:
            raise CompileUnavailable(self.failed)
        n = len(tokens)
        b = bucket_for(n, self.buckets)
        layers_ = cache.layers
        start = layers_[0].length
        if start + b > layers_[0].capacity or not layers_[0].is_initialized:
            self._prepare(cache, start + b)
        pad = b - n
        dev = layers_[0]._k.device
        tokens = tokens.to(dev)
        positions = positions.to(dev)
        if pad:  # dummies: token 0 at the first node's position, seeing only their own slot
            tokens = torch.cat([tokens, tokens.new_zeros(pad)])
            positions = torch.cat([positions, positions[:1].expand(pad)])
            full = torch.eye(b, dtype=torch.bool, device=dev)
            full[:n, :n] = tree_mask
            tree_mask = full
        key = (b, layers_[0].capacity)
        t0 = time.perf_counter() if key not in self.compiled else None
        # one graph per bucket x capacity, for every model in the process: more than dynamo's
        # default of 8 compiled variants of one function (CompactBody.forward)
        limits = {"recompile_limit": RECOMPILE_LIMIT, "accumulated_recompile_limit": RECOMPILE_LIMIT}
        args = (tokens, positions, torch.tensor(start, device=dev), tree_mask.to(dev),
                [layer._k for layer in layers_], [layer._v for layer in layers_])  # fmt: skip
        try:
            with torch._dynamo.config.patch(**limits):
                hidden, states = self._fn()(*args)
        except Exception as err:  # an op or a toolchain inductor rejects: say so once, then eager (verify_tree)
            if t0 is None:
                raise  # a graph that compiled and ran before: a real error
            if self.cpp_wrapper and not self.compiled:  # the C++ wrapper is the newer path: try without it
                warnings.warn(f"compiled step: the C++ wrapper failed ({type(err).__name__}: {str(err)[:200]}); "
                              "compiling with the Python wrapper", stacklevel=2)  # fmt: skip
                self.cpp_wrapper, self._fns = False, {}
                return self.forward(cache, tokens[:n], positions[:n], tree_mask[:n, :n], feature_layers)
            self.failed = f"compiled step: torch.compile failed ({type(err).__name__}: {str(err)[:300]})"
            warnings.warn(f"{self.failed}; decoding eagerly", stacklevel=2)
            raise CompileUnavailable(self.failed) from err
        if t0 is not None:
            self.compile_seconds += time.perf_counter() - t0
            self.compiled.add(key)
        for layer in layers_:  # the real nodes are written; the dummies' slots lie past the new length
            layer.length = start + n
            layer._set_views()
        if not feature_layers:
            return hidden[:n], None
        return hidden[:n], torch.stack([states[layer][:n] for layer in feature_layers], dim=1)  # (N, F, H)

    def _prepare(self, cache: KVCache, needed: int) -> None:
        """Allocate (an empty prompt: nothing prefilled) or grow the buffers to a power-of-two capacity."""
        config = self.model.config.get_text_config(decoder=True)
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        ref = next(self.model.parameters())
        for layer in cache.layers:
            if not layer.is_initialized:
                layer.capacity = max(layer.capacity, capacity_for(needed - BUCKETS[-1]))
                empty = torch.empty(1, config.num_key_value_heads, 0, d, dtype=ref.dtype, device=ref.device)
                layer.lazy_initialization(empty, empty)
                layer._set_views()
            if needed > layer.capacity:
                layer._grow(capacity_for(needed - BUCKETS[-1]))

    @torch.inference_mode()
    def warm_up(self, buckets: Sequence[int] | None = None, capacity: int | None = None) -> float:
        """Compile the graphs of `buckets` (default: all) at `capacity` (default: the step's) now; -> seconds."""
        capacity = capacity or self.capacity
        t0 = time.perf_counter()
        for b in buckets or self.buckets:
            cache = KVCache.for_model(self.model, capacity=capacity)
            self.forward(cache, torch.zeros(b, dtype=torch.long), torch.arange(b),
                         torch.ones(b, b, dtype=torch.bool).tril())  # fmt: skip
        return time.perf_counter() - t0


def default_block(num_layers: int, target: int = BLOCK) -> int:
    """The divisor of `num_layers` nearest `target` (ties: the larger): layers per compiled graph."""
    return min((k for k in range(1, num_layers + 1) if num_layers % k == 0), key=lambda k: (abs(k - target), -k))


def compiled_step(model, block: int | None = None, capacity: int = 512) -> CompiledStep:
    """A `CompiledStep` for `model`, or `CompileUnavailable` saying why not (architecture, compiler).

    block: layers per compiled graph; None = `default_block` (the divisor of the layer count nearest BLOCK).
    """
    _check_family(model)
    if next(model.parameters()).device.type == "cpu" and shutil.which("g++") is None and shutil.which("c++") is None:
        raise CompileUnavailable("compiled step: no C++ compiler (g++/c++) on PATH for inductor's CPU kernels")
    layers = model.config.get_text_config(decoder=True).num_hidden_layers
    return CompiledStep(model=model, block=default_block(layers) if block is None else block, capacity=capacity)
