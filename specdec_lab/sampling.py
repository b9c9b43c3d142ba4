"""Sampling configuration shared by the target and every draft: the same warping applies to p and q.

Speculative sampling is exact only if the draft's q and the target's p are the *same kind* of distribution
as the one plain sampling would use: temperature, top-k and top-p are applied identically to both before
any ratio p/q is formed (Leviathan et al. 2023, appendix A.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Sampling", "warp_probs", "GREEDY"]


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 = greedy (argmax)
    top_k: int | None = None  # keep the k most likely tokens
    top_p: float | None = None  # keep the smallest set with cumulative probability >= top_p

    def __post_init__(self):
        if not (isinstance(self.temperature, (int, float)) and self.temperature >= 0):
            raise ValueError(f"temperature must be a number >= 0, got {self.temperature!r}")
        if self.top_k is not None and (not isinstance(self.top_k, int) or self.top_k < 1):
            raise ValueError(f"top_k must be a positive integer or None, got {self.top_k!r}")
        if self.top_p is not None and not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] or None, got {self.top_p!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


GREEDY = Sampling()


def warp_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """(..., V) logits -> (..., V) probabilities after temperature, top-k, then top-p (fp32).

    Greedy (temperature 0) gives the one-hot distribution of the argmax.
    """
    logits = logits.float()
    if sampling.greedy:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = logits / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p is not None and sampling.top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = sorted_logits.softmax(-1).cumsum(-1)  # (..., V)
        drop_sorted = cum - sorted_logits.softmax(-1) >= sampling.top_p  # keep until the mass reaches top_p
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits.softmax(-1)
