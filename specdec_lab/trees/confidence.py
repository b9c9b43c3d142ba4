"""Calibrated confidence: the chance that a drafter's candidate is right, given the probability it gave it.

A drafter's softmax probability p for its candidate says how likely that candidate is right at *this* step
(EAGLE-2 builds its dynamic trees on the same observation), but raw probabilities are not accuracies. So they
are calibrated on held-out text, per depth k:

    c_k(p) = P(depth k's candidate is the target's token | its probability p, the path above it right)

binned in p (fine near 0, where most candidates are), each bin (right + 1) / (seen + 2), then fitted
non-decreasing in p (pool-adjacent-violators). Every c <= 1, so a path's value Π c never grows along it,
which is what lets `trees.dynamic` build a prefix-closed tree best-first.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["DEFAULT_EDGES", "HeadConfidence", "confidence_from_probs"]

# probability bins: fine near 0 (most candidates), coarser above
DEFAULT_EDGES = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0)


@dataclass
class HeadConfidence:
    """c_k(p): per depth (a Medusa head, an EAGLE step), the calibrated accuracy of a candidate with softmax
    probability p (binned)."""

    edges: Sequence[float]  # (B+1,) bin edges from 0 to 1
    accuracy: torch.Tensor  # (K, B) P(right | p in bin b, the path above right); non-decreasing in b
    positions: int = 0  # calibration positions
    top: int = 4  # candidates per head (top-S) it was calibrated on: the width a dynamic tree considers

    def __post_init__(self):
        self.edges = [float(e) for e in self.edges]
        self.accuracy = torch.as_tensor(self.accuracy, dtype=torch.float64)
        if self.accuracy.ndim != 2 or self.accuracy.shape[1] != len(self.edges) - 1:
            raise ValueError(f"accuracy must be (K, {len(self.edges) - 1}) for {len(self.edges)} edges, "
                             f"got {tuple(self.accuracy.shape)}")  # fmt: skip
        if self.edges[0] != 0.0 or self.edges[-1] != 1.0 or sorted(self.edges) != self.edges:
            raise ValueError(f"edges must increase from 0 to 1, got {self.edges}")
        self._inner = self.edges[1:-1]  # bin b holds edges[b] < p <= edges[b+1] (torch.bucketize's convention)
        self._rows = self.accuracy.tolist()  # python lists: a step looks up a handful of values, no tensors

    @property
    def num_heads(self) -> int:
        return self.accuracy.shape[0]

    def value(self, head: int, p: float) -> float:
        """c_head(p) for one probability (head 0-based)."""
        return self._rows[head][bisect.bisect_left(self._inner, float(p))]

    def values(self, head: int, probs: Sequence[float]) -> list[float]:
        return [self._rows[head][bisect.bisect_left(self._inner, float(p))] for p in probs]

    def best(self, head: int) -> float:
        """The largest c_head: a bound on any candidate of that head."""
        return max(self._rows[head])

    def to_dict(self) -> dict:
        return {"edges": list(self.edges), "accuracy": self.accuracy.tolist(), "positions": int(self.positions),
                "top": int(self.top)}  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict) -> HeadConfidence:
        return cls(edges=d["edges"], accuracy=d["accuracy"], positions=d.get("positions", 0), top=d.get("top", 4))


def _monotone(y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Weighted isotonic (non-decreasing) fit of y (B,) by pool-adjacent-violators."""
    blocks: list[list[float]] = []  # [mean, weight, count]
    for yi, wi in zip(y.tolist(), w.tolist(), strict=True):
        blocks.append([yi, wi, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return torch.tensor([m for m, _, c in blocks for _ in range(c)], dtype=torch.float64)


def confidence_from_probs(
    probs: torch.Tensor, correct: torch.Tensor, present: torch.Tensor, edges: Sequence[float] = DEFAULT_EDGES
) -> HeadConfidence:
    """Calibrate c_k(p) from observations.

    probs:   (T, K, S) each head's top-S softmax probabilities (over the vocabulary it drafts from)
    correct: (T, K, S) whether that candidate is the true token
    present: (T, K) the position has a label for the head
    Head k's statistic uses the positions where heads 1..k−1 had the truth in their top-S (the path above can
    be right), as the conditional accuracies do. Each bin: (right + 1) / (seen + 2), then a monotone fit.
    """
    probs = torch.as_tensor(probs).double()
    correct, present = torch.as_tensor(correct).bool(), torch.as_tensor(present).bool()
    if probs.ndim != 3 or correct.shape != probs.shape or present.shape != probs.shape[:2]:
        raise ValueError(f"probs/correct must be (T, K, S) and present (T, K); got {tuple(probs.shape)}, "
                         f"{tuple(correct.shape)}, {tuple(present.shape)}")  # fmt: skip
    t, k, _ = probs.shape
    hit = correct.any(-1) & present  # (T, K)
    above = torch.cat([torch.ones(t, 1, dtype=torch.bool), hit[:, :-1].long().cumprod(1).bool()], dim=1)  # (T, K)
    inner = torch.tensor(list(edges)[1:-1], dtype=torch.float64)
    n_bins = len(edges) - 1
    acc = torch.zeros(k, n_bins, dtype=torch.float64)
    for head in range(k):
        rows = above[:, head] & present[:, head]  # (T,)
        p, c = probs[rows, head].flatten(), correct[rows, head].flatten().double()
        b = torch.bucketize(p, inner)
        seen = torch.bincount(b, minlength=n_bins).double()
        right = torch.bincount(b, weights=c, minlength=n_bins)
        acc[head] = _monotone((right + 1) / (seen + 2), seen + 2)
    return HeadConfidence(edges=edges, accuracy=acc, positions=int(present[:, 0].sum()), top=probs.shape[2])
