"""Sampling configuration shared by the target and every draft: the same warping applies to p and q.

Speculative sampling is exact only if the draft's q and the target's p are the *same kind* of distribution
as the one plain sampling would use: temperature, top-k and top-p are applied identically to both before
any ratio p/q is formed (Leviathan et al. 2023, appendix A.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Sampling", "warp_probs", "draw", "GREEDY"]


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

TOP_P_PREFILTER = 256  # top-p first looks among this many most likely tokens; the full sort only if short


def _top_p_prefiltered(logits: torch.Tensor, top_p: float) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(..., V) top-p probabilities from the TOP_P_PREFILTER largest logits alone, and (...,) which rows that
    was right for; None when no row can be done so.

    The nucleus (most likely tokens until their mass reaches top_p) lies inside the k largest whenever those
    k already hold top_p of the mass: then sorting all V tokens (a large share of a CPU step at V ~ 50k) is
    wasted, and `torch.topk` of k plus a softmax give the same set and the same renormalised values. A row
    whose top k hold less (a very flat p) is flagged: the caller sorts that row in full.
    """
    k = TOP_P_PREFILTER
    if logits.shape[-1] <= k:
        return None
    probs = logits.softmax(-1)  # (..., V)
    top, order = probs.topk(k, dim=-1)  # (..., k) descending
    cum = top.cumsum(-1)
    ok = cum[..., -1] >= top_p  # (...,) the nucleus fits in the top k
    keep = (cum - top) < top_p  # as the full sort: keep a token until the mass before it reaches top_p
    kept = top * keep
    out = torch.zeros_like(probs)
    return out.scatter_(-1, order, kept / kept.sum(-1, keepdim=True)), ok


def _top_p_sorted(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """(..., V) top-p probabilities by a full sort (any row)."""
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    cum = sorted_logits.softmax(-1).cumsum(-1)  # (..., V)
    drop_sorted = cum - sorted_logits.softmax(-1) >= top_p  # keep until the mass reaches top_p
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf")).softmax(-1)


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
        fast = _top_p_prefiltered(logits, sampling.top_p)
        if fast is None:
            return _top_p_sorted(logits, sampling.top_p)
        probs, ok = fast
        if not bool(ok.all()):  # the rows whose nucleus is wider than the prefilter: sorted in full
            flat, wide = probs.reshape(-1, probs.shape[-1]), (~ok).reshape(-1).nonzero()[:, 0]
            flat[wide] = _top_p_sorted(logits.reshape(-1, logits.shape[-1])[wide], sampling.top_p)
        return probs
    return logits.softmax(-1)


def draw(probs: torch.Tensor, generator: torch.Generator | None = None) -> int:
    """One token from probs (V,) (non-negative, not necessarily normalised): inverse CDF, one uniform.

    The same distribution as `torch.multinomial(probs, 1)`, which on a CPU validates and normalises all V
    entries every call (about as long as a small tree's acceptance); here one cumulative sum and a binary
    search. The sum runs in float64 so that a token of tiny probability keeps its share. A token of
    probability 0 adds nothing to the sum, so the first index whose cumulative sum exceeds u is never one.
    """
    cdf = probs.double().cumsum(-1)  # (V,)
    u = torch.rand((), generator=generator, device=probs.device, dtype=torch.float64) * cdf[-1]
    i = int(torch.searchsorted(cdf, u[None], right=True).clamp_(max=probs.shape[-1] - 1))
    if float(probs[i]) <= 0:  # u rounded up to the total (probability ~1e-16): the last token with mass
        i = int(probs.nonzero()[-1])
    return i
