"""Closed-form acceptance math of speculative decoding (Leviathan et al. 2023; Chen et al. 2023).

Notation: p = target distribution, q = draft distribution, α = E[Σ_x min(p(x), q(x))] the per-token
acceptance rate (= 1 − TV(p, q)), k = draft length, c = cost of one draft step / one target step, L = the tokens
one step emits (accepted drafts plus the bonus token, 1 ≤ L ≤ k + 1): notebook 00's table.

Derivations (each function states the one it implements):

* Acceptance of one token. Speculative sampling accepts x ~ q with probability min(1, p(x)/q(x)), so
      P(accept) = Σ_x q(x) · min(1, p(x)/q(x)) = Σ_x min(p(x), q(x)) = 1 − TV(p, q) = α.
* Tokens per step. With i.i.d. acceptances the number of accepted drafts j is a geometric variable
  truncated at k: P(j) = α^j (1 − α) for j < k, P(k) = α^k. Every step also emits the bonus token,
  so L = j + 1 and   E[L] = Σ_{j=0..k} α^j = (1 − α^{k+1}) / (1 − α).
* Speedup. A step costs k draft steps and one target forward: (k·c + 1) target-step units, so
      speedup = (1 − α^{k+1}) / ((1 − α)(k·c + 1)).
  That assumes verifying k + 1 tokens costs what one token costs. The *measured* form replaces the
  unit costs with seconds: T_step(k) = k·T_draft + T_verify(k + 1), and speculation wins when
      m·T_target > k·T_draft + T_verify(k + 1),     m = E[L]
  (the condition of the seed: m tokens in the time autoregressive decoding makes one per T_target).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = [
    "acceptance_rate",
    "tv_distance",
    "expected_tokens_per_step",
    "accepted_length_pmf",
    "expected_speedup",
    "optimal_k",
    "measured_speedup",
    "speculation_pays",
    "simulate_tokens_per_step",
    "simulate_acceptance",
]


def _check(alpha: float, k: int) -> None:
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")


def acceptance_rate(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """α = Σ_x min(p(x), q(x)) over the last dim: (..., V), (..., V) -> (...)."""
    return torch.minimum(p, q).sum(-1)


def tv_distance(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """TV(p, q) = ½ Σ_x |p(x) − q(x)| = 1 − α over the last dim."""
    return 0.5 * (p - q).abs().sum(-1)


def expected_tokens_per_step(alpha: float, k: int) -> float:
    """E[tokens emitted per target forward] for a chain of k drafts: (1 − α^{k+1}) / (1 − α).

    Includes the bonus token: k = 0 gives 1 (plain decoding), α = 1 gives k + 1, α = 0 gives 1.
    """
    _check(alpha, k)
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def accepted_length_pmf(alpha: float, k: int) -> np.ndarray:
    """(k+1,) P(j accepted drafts) for j = 0..k (so L = j + 1): α^j (1 − α) for j < k, α^k for j = k."""
    _check(alpha, k)
    pmf = np.array([alpha**j * (1.0 - alpha) for j in range(k + 1)])
    pmf[k] = alpha**k
    return pmf


def expected_speedup(alpha: float, k: int, c: float) -> float:
    """Wall-time speedup over autoregressive decoding: (1 − α^{k+1}) / ((1 − α)(k·c + 1)).

    c = T_draft / T_target; assumes verifying k + 1 tokens costs one target step (see `measured_speedup`).
    """
    if c < 0:
        raise ValueError(f"c must be >= 0, got {c}")
    return expected_tokens_per_step(alpha, k) / (k * c + 1.0)


def optimal_k(alpha: float, c: float, k_max: int = 32, verify_cost: Callable[[int], float] | None = None) -> int:
    """argmax_k of the speedup over k in [0, k_max] (ties -> shorter; k = 0 means "don't speculate").

    verify_cost(n): optional cost of verifying n tokens relative to one target step (default 1 for all n,
    the textbook assumption); with it the objective is E[L] / (k·c + verify_cost(k + 1)).
    c and verify_cost may be in any one unit instead — seconds, say: the argmax does not depend on it
    (`DraftLength` passes a measured draft step and `StepCost.step` as they are).
    There is no closed form for the integer optimum, but the objective is unimodal in k, so a scan is exact.
    Near-ties within a relative 1e-9 (float rounding of measured costs) go to the shorter draft.
    """
    _check(alpha, 0)
    vc = verify_cost or (lambda n: 1.0)
    best_k, best = 0, 1.0 / vc(1)
    for k in range(1, k_max + 1):
        rate = expected_tokens_per_step(alpha, k) / (k * c + vc(k + 1))
        if rate > best * (1 + 1e-9):
            best_k, best = k, rate
    return best_k


def measured_speedup(
    alpha: float, k: int, t_target: float, t_draft: float, t_verify: float | Callable[[int], float]
) -> float:
    """Speedup from measured seconds: m·T_target / (k·T_draft + T_verify(k + 1)), m = E[L].

    t_target: one autoregressive step; t_draft: one draft step; t_verify: seconds of verifying k + 1
    tokens (a number, or a function of the token count such as a `CostCurve`).
    """
    tv = t_verify(k + 1) if callable(t_verify) else t_verify
    return expected_tokens_per_step(alpha, k) * t_target / (k * t_draft + tv)


def speculation_pays(
    alpha: float, k: int, t_target: float, t_draft: float, t_verify: float | Callable[[int], float]
) -> bool:
    """The seed's condition, measured form: m·T_target > k·T_draft + T_verify(k + 1)."""
    return measured_speedup(alpha, k, t_target, t_draft, t_verify) > 1.0


def simulate_tokens_per_step(alpha: float, k: int, steps: int = 100_000, seed: int = 0) -> np.ndarray:
    """Monte Carlo: tokens emitted by `steps` independent steps with i.i.d. Bernoulli(α) acceptances.

    Each step accepts drafts until the first rejection (at most k), then adds the bonus token.
    """
    _check(alpha, k)
    rng = np.random.default_rng(seed)
    ok = rng.random((steps, k)) < alpha  # (steps, k)
    accepted = np.where(ok.all(1), k, np.argmin(ok, axis=1)) if k > 0 else np.zeros(steps, dtype=int)
    return accepted + 1


def simulate_acceptance(p: np.ndarray, q: np.ndarray, trials: int = 100_000, seed: int = 0) -> dict:
    """Monte Carlo of one speculative-sampling step on explicit distributions p, q (V,).

    Draw x ~ q, accept with probability min(1, p(x)/q(x)), else draw from norm(max(0, p − q)). Returns
    the acceptance frequency (→ α) and the histogram of emitted tokens (→ p: the rule is lossless).
    """
    rng = np.random.default_rng(seed)
    p, q = np.asarray(p, float), np.asarray(q, float)
    x = rng.choice(len(q), size=trials, p=q)
    ratio = np.minimum(1.0, p[x] / np.maximum(q[x], 1e-300))
    accept = rng.random(trials) < ratio
    residual = np.maximum(p - q, 0.0)
    residual = residual / residual.sum() if residual.sum() > 0 else p
    out = np.where(accept, x, rng.choice(len(p), size=trials, p=residual))
    return {
        "acceptance": float(accept.mean()),
        "alpha": float(np.minimum(p, q).sum()),
        "histogram": np.bincount(out, minlength=len(p)) / trials,
    }
