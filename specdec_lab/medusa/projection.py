"""Scoring the heads' outputs on the LM head's rows while drafting: fp32, or int8 weight-only.

(The same int8 scheme serves the heads' residual blocks W1 under "int8": `Drafter.head_block`.)

A shared-W2 head's logits are x (D, H) @ W[rows]^T: D heads' features against the M rows of the target's LM
head that drafting may propose (the drafting vocabulary plus the prompt's tokens). For D = 1..4 rows this
is memory-bound: the time is the time to stream W[rows] once, M x H x 4 bytes in fp32 (8k rows x 576: 19 MB,
more than the heads' own residual blocks).

"int8" stores W[rows] as int8 with one scale per row (symmetric, per-output-channel, as gpt-fast's
weight-only int8) and multiplies with the int8 weight-only product every quantized layer uses
(`models.quant.int8_mm`: torch's `_weight_int8pack_mm` on bf16 activations): a quarter of the bytes.
Row v's logit becomes s_v * (q_v . x) with q_v = round(W_v / s_v), s_v = max|W_v| / 127, so each logit
moves by at most ~0.4% of |W_v| |x|: candidates whose logits were that close can swap ranks. Only which
tokens are *proposed* changes: the target verifies every node in fp32, so the output is exactly the same —
this is the drafter's approximation, never the target's. Whether it pays is the device's business:
`Drafter.measure_heads` times both scorers on this device and keeps the faster
(`MedusaDecodeConfig.head_weights="auto"`); where the int8 kernel is missing or fails, fp32 is used.

    scorer = RowScorer.build(lm_head_weight, rows, "int8", cache)   # (M,) rows, quantised once per model
    logits = scorer(x)                                            # (D, H) -> (D, M) float32
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..models.fast_linear import small_linear
from ..models.quant import int8_mm, quantize_rows

__all__ = ["RowScorer", "WEIGHTS"]

WEIGHTS = ("fp32", "int8")  # how a RowScorer holds W[rows]


@dataclass
class RowScorer:
    """x (D, H) -> (D, M) logits on M chosen rows of a (V, H) projection, fp32 or int8 weight-only."""

    weights: str  # "fp32" | "int8"
    weight: torch.Tensor | None = None  # (M, H) fp32: W[rows]
    q: torch.Tensor | None = None  # (M, H) int8
    scales: torch.Tensor | None = None  # (M,) bf16 (what the int8 kernel multiplies with)

    @classmethod
    def build(cls, weight: torch.Tensor, rows: torch.Tensor | None, weights: str, cache: dict) -> RowScorer:
        """Scorer for `rows` (None = all) of `weight` (V, H). "int8" quantises the whole of `weight` once
        and keeps it in `cache` (the drafter's, per model), so a new prompt's rows are an index, not a pass
        over the matrix."""
        if weights not in WEIGHTS:
            raise ValueError(f"head weights must be one of {WEIGHTS}, got {weights!r}")
        if weights == "fp32":
            return cls("fp32", weight=weight if rows is None else weight[rows].contiguous())
        if "int8" not in cache:
            q, scales = quantize_rows(weight)
            cache["int8"] = (q, scales.to(torch.bfloat16))
        q, scales = cache["int8"]
        if rows is not None:
            q, scales = q[rows].contiguous(), scales[rows].contiguous()
        return cls("int8", q=q, scales=scales)

    @property
    def rows(self) -> int:
        return (self.weight if self.weight is not None else self.q).shape[0]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(D, H) -> (D, M) float32 logits."""
        if self.weights == "int8":
            return int8_mm(x, self.q, self.scales).float()
        return small_linear(x.to(self.weight.dtype), self.weight).float()
