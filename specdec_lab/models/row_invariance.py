"""Row invariance: verifying n rows rounds exactly like decoding one, so reduced precision stays lossless.

Speculative decoding is exact when the target's logits for a node equal, bit for bit, the logits one-token
decoding computes at that position. A forward over n rows computes the same dot products as n one-row
forwards, but a kernel may sum them in another order for another row count (a gemv for one row, a blocked
gemm for many), so the two differ in the last bits. In fp32 that flips an argmax only at near-exact ties.
With weight-only int4/int8 kernels on bf16 activations (`quant`), every linear layer's input is rounded to
bf16 (8-bit mantissa): a last-bit fp32 difference in the residual stream moves an activation by a whole
bf16 step now and then, and 30 layers amplify that to logit differences of ~0.1 — quantized speculative
decoding then departs from quantized autoregressive decoding on about a third of long outputs.

Where each op of the compiled step stands (measured on this machine's kernels by `attention_form` and by
the tests; the checks are cheap and rerun on every machine, since BLAS libraries differ):

    op                          one row vs n rows
    int4 / int8 weight-only mm  identical: each output row from its own row, one order of sums (quant.py)
    RMSNorm, RoPE, the max      identical: per-row ops (the softmax's max is exact in any order)
    attention q·Kᵀ              bmm with M = g·B rows (g query heads per K/V head): MKL sums M = g (one
                                token) in another order than M ≥ 2g, and agrees with itself for every
                                M ≥ 2g  ->  one token's queries are duplicated to 2 rows (the kernel
                                class of every tree); each score is one dot product over the head dim,
                                summed alike at every slot
    softmax sum and p·V         summed over the cache slots, in vector lanes and blocks chosen by slot
                                index: a tree node whose ancestors sit at slots (0, 2, 7) sums the same
                                terms in another grouping than one-row decoding with them at (0, 1, 2)
                                ->  both sums as one reduction in slot order (the normaliser is p·V's
                                extra ones column), where a masked slot adds an exact zero
                                ("ordered"); where this BLAS's bmm does not agree with itself, q·Kᵀ too
                                as elementwise products summed by inductor's fixed-order loop ("products")
    fp32 linears (the LM head   FastLinear's tuned plan switches kernels with the row count (wx for 1–2
    of a quantized model;       rows, oneDNN beyond, on this machine); oneDNN's packed inner product is
    every linear in fp32)       row-invariant at 1–64 rows for most shapes -> `invariant_kernels` pins
                                the plans to it and checks each shape (SmolLM2's K = 1536 down_proj sums
                                one row apart from two or more: fp32 stays exact at fp32 rounding only)

With those, the compiled step's hidden states, logits and kept K/V for every node of a verified tree equal
the one-row steps along its path bit for bit (`tests/test_row_invariance.py`), so every method on
quantized weights — chains (prompt lookup, a draft model) and branching trees (Medusa, Lookahead, EAGLE,
the hybrid) — equals quantized autoregressive decoding by construction, not only away from near-ties.
`CompiledStep(exact_rows=True)` on fp32 weights pins its linears too, and warns where a shape's kernel is
not row-invariant. The eager path keeps torch's SDPA kernel, whose per-row sums depend on the query count:
eager quantized builds report their match rate.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from .fast_linear import PACKED_MAX_ROWS, FastLinear, pack_weight, small_linear
from .quant import QuantLinear

__all__ = ["FORMS", "attention_form", "bmm_rows_agree", "onednn_rows_agree", "invariant_kernels"]

FORMS = ("bmm", "ordered", "products")  # how the compiled step computes attention (module docstring)


def bmm_rows_agree(
    kv_heads: int, groups: int, head_dim: int, capacity: int, buckets: Sequence[int], seed: int = 0
) -> bool:
    """Whether torch's batched matmul gives a query row the same bits at M = 2g rows as at every M = g·B
    (B in `buckets`, B ≥ 2), for both attention products at this cache capacity and K/V head count (the
    batch: one K/V head alone takes another kernel), on random data in ~1 ms."""
    gen = torch.Generator().manual_seed(seed)
    h, b_max = kv_heads, max(buckets)
    q = torch.randn(h, groups * b_max, head_dim, generator=gen)  # (Hkv, g·B, D)
    k = torch.randn(h, capacity, head_dim, generator=gen)  # (Hkv, C, D)
    p = torch.softmax(torch.randn(h, groups * b_max, capacity, generator=gen), -1)  # (Hkv, g·B, C)

    def first_rows(a, other, b):  # the first node's g rows of a (Hkv, g, B, ·) product
        rows = a.view(h, groups, b_max, -1)[:, :, :b].reshape(h, groups * b, -1)
        return (rows @ other).view(h, groups, b, -1)[:, :, 0]

    for a, other in ((q, k.transpose(1, 2)), (p, k)):
        ref = first_rows(a, other, 2)
        if any(not torch.equal(first_rows(a, other, b), ref) for b in buckets if b > 2):
            return False
    return True


def attention_form(kv_heads: int, groups: int, head_dim: int, capacities: Sequence[int], buckets: Sequence[int]) -> str:
    """ "ordered" where this BLAS's bmm agrees with itself from 2g rows up at every capacity, else "products"
    (both sum softmax and p·V in slot order; module docstring)."""
    agree = all(bmm_rows_agree(kv_heads, groups, head_dim, c, buckets) for c in capacities)
    return "ordered" if agree else "products"


def onednn_rows_agree(out_features: int, in_features: int, rows: Sequence[int], seed: int = 0) -> bool:
    """Whether oneDNN's packed product gives a row the same bits at every row count in `rows` for a weight
    of this shape (random data). On this machine it does for most shapes at 1–64 rows; a long reduction
    (K = 1536, SmolLM2's down_proj) sums one row in another order than two or more."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(out_features, in_features, generator=gen) * 0.05
    x = torch.randn(max(rows), in_features, generator=gen)
    packed = pack_weight(w)
    ref = small_linear(x[:1], w, packed=packed, kernel="onednn")  # (1, N)
    return all(torch.equal(small_linear(x[:m], w, packed=packed, kernel="onednn")[:1], ref) for m in rows)


def invariant_kernels(model: nn.Module, rows: Sequence[int] = (1, 2, 4, 8, 16, 32, 64)) -> bool:
    """Pin every FastLinear of `model` (the fp32 LM head of a quantized model; every linear of an fp32 one)
    to oneDNN's packed product at every row count 1..64 — the tuned plans switch kernels with the row
    count — and check that this kernel is row-invariant at `rows` for each shape. -> whether every linear
    layer is now row-invariant (QuantLinears already are); False where oneDNN or packing is unavailable, a
    stock nn.Linear remains, or a shape's oneDNN product is not row-invariant on this machine."""
    ok, checked = True, {}
    for m in model.modules():
        if isinstance(m, FastLinear):
            if m._packed() is None:  # no oneDNN copy for this layer (FastLinear's own rule): its kernel varies
                ok = False
                continue
            m.plan = ("stock",) + ("onednn",) * PACKED_MAX_ROWS  # index = rows; 0 rows runs nothing
            shape = tuple(m.weight.shape)
            if shape not in checked:
                checked[shape] = onednn_rows_agree(*shape, rows)
            ok = ok and checked[shape]
        elif isinstance(m, nn.Linear) and not isinstance(m, QuantLinear):
            ok = False
    return ok
