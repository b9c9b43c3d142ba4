"""Accuracy models of rank-path trees: how often depth d's rank-i candidate is the target's token.

a[d, i] = P(depth d+1's rank-i candidate is the true token), measured on held-out text: "independent" (the
marginal, Medusa's model: every depth assumed independent of the others) or "conditional" (given that depths
1..d had the truth in their top-S; a drafter is more often right on text its earlier depths found easy). The
tree builders (`trees.build`) and the budget (`trees.budget`) take either as the (K, S) factor matrix.

`calibrate_from_ranks` turns the rank of the true token in each depth's candidate list (T positions x K
depths) into both models; a drafter's own calibration code (e.g. `train.medusa_calibration`) computes those ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["HeadAccuracies", "MISSING_RANK", "calibrate_from_ranks"]

MISSING_RANK = -1  # rank of a position whose label is missing; >= S means "not in the top-S"


@dataclass
class HeadAccuracies:
    """Per-depth, per-rank accuracy of a drafter (a head per depth for Medusa); row k is depth k+1, column i its
    rank-i candidate."""

    top: torch.Tensor  # (K, S) a[k, i] = P(head k+1's rank-i candidate is the true token)  (marginal)
    conditional: torch.Tensor | None = None  # (K, S) same, given heads 1..k had the truth in their top-S
    positions: int = 0  # calibration positions (with a label for head 1) these were measured on

    def __post_init__(self):
        self.top = torch.as_tensor(self.top, dtype=torch.float64)
        if self.top.ndim != 2:
            raise ValueError(f"top must be (K, S), got shape {tuple(self.top.shape)}")
        if self.conditional is not None:
            self.conditional = torch.as_tensor(self.conditional, dtype=torch.float64)
            if self.conditional.shape != self.top.shape:
                raise ValueError(
                    f"conditional must have top's shape {tuple(self.top.shape)}, got {tuple(self.conditional.shape)}"
                )

    @property
    def num_heads(self) -> int:
        return self.top.shape[0]

    @property
    def num_candidates(self) -> int:
        return self.top.shape[1]

    def model(self, kind: str = "independent") -> torch.Tensor:
        """The (K, S) factor matrix of `kind`: "independent" (marginal) or "conditional"."""
        if kind == "independent":
            return self.top
        if kind == "conditional":
            if self.conditional is None:
                raise ValueError("these accuracies have no conditional model (calibrate to measure it)")
            return self.conditional
        raise ValueError(f"unknown accuracy model {kind!r}: use 'independent' or 'conditional'")

    def to_dict(self) -> dict:
        cond = None if self.conditional is None else self.conditional.tolist()
        return {"top": self.top.tolist(), "conditional": cond, "positions": int(self.positions)}

    @classmethod
    def from_dict(cls, d: dict) -> HeadAccuracies:
        return cls(top=d["top"], conditional=d.get("conditional"), positions=d.get("positions", 0))


def calibrate_from_ranks(ranks: torch.Tensor, top: int) -> HeadAccuracies:
    """Accuracies from ranks (T, K): the true token's rank in head k+1's top-`top` list.

    ranks[t, k] in 0..top-1: found at that rank; >= top: not in the top list; < 0 (MISSING_RANK): no label,
    the row is left out of head k+1's statistics. The conditional row k uses only positions where heads
    1..k+1 all have labels and heads 1..k all had the true token in their top list.
    """
    ranks = torch.as_tensor(ranks)
    if ranks.ndim != 2 or ranks.dtype.is_floating_point or ranks.dtype == torch.bool:
        raise ValueError(f"ranks must be an integer (T, K) tensor, got {ranks.dtype} shape {tuple(ranks.shape)}")
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    ranks = ranks.long().cpu()
    t, k = ranks.shape
    present = ranks >= 0  # (T, K)
    hit = present & (ranks < top)  # (T, K) truth in the top list
    onehot = torch.zeros(t, k, top + 1, dtype=torch.float64)  # last column: "not in top" or missing
    onehot.scatter_(2, torch.where(hit, ranks, top)[..., None], 1.0)
    onehot = onehot[..., :top]  # (T, K, S)
    counts = present.sum(0).clamp(min=1).double()  # (K,)
    marginal = onehot.sum(0) / counts[:, None]  # (K, S)
    # condition for row j: labels 1..j+1 present and heads 1..j hit; a cumulative AND along the heads
    prev_hit = torch.cat([torch.ones(t, 1, dtype=torch.bool), hit[:, :-1].long().cumprod(1).bool()], dim=1)  # (T, K)
    cond_rows = prev_hit & present.long().cumprod(1).bool()  # (T, K)
    cond_counts = cond_rows.sum(0).clamp(min=1).double()  # (K,)
    conditional = (onehot * cond_rows[..., None]).sum(0) / cond_counts[:, None]  # (K, S)
    return HeadAccuracies(top=marginal, conditional=conditional, positions=int(present[:, 0].sum()))
