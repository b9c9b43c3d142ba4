"""How many tokens a chain proposer drafts: the acceptance estimate, the choice on the one cost model, probes.

A chain of k draft tokens with per-token acceptance α emits, in expectation (bonus token included;
Leviathan et al. 2023, eq. 1),

    E[tokens | k, α] = (1 − α^{k+1}) / (1 − α)

and costs one step priced by `cost.StepCost`: t̂(k + 1) + ô + k·t_draft (t_draft: one draft step, 0 for
free drafts such as prompt lookup). Cost mode picks

    k* = argmax_{0 <= k <= k_max}  E[tokens | k, α̂] / price(k),          price(0) = t̂(1) + ô(root)

so k = 0 — a root-only tree, one plain decoding step — wins wherever no draft pays: the proposer backs off.

    AcceptanceTracker  α̂ per key (e.g. the n-gram length that matched), from what was accepted
    Probes             backed off, when to draft one token anyway, to refresh α̂ (the one exploration policy)
    DraftLength        fixed k, transformers' +2/−1 heuristic, or cost mode with back-off, probes and resuming
"""

from __future__ import annotations

import math

from ..cost.step import StepCost
from ..cost.theory import expected_tokens_per_step, optimal_k

__all__ = ["AcceptanceTracker", "Probes", "DraftLength"]


class AcceptanceTracker:
    """Per-token acceptance α, estimated online, per key.

    A chain of k drafts with a accepted is a truncated geometric observation: a successes, and one failure
    if a < k; the estimate is successes / (successes + failures). Counts decay geometrically by `decay` per
    observation (recent text matters most; memory ≈ 1 / (1 − decay) observations). The prior enters as
    pseudo-counts (prior·w successes, (1 − prior)·w failures, w = prior_weight) that decay like any
    observation, so α̂ follows what was accepted: a draft whose tokens are all rejected drives α̂ toward 0,
    not toward a floor the prior would otherwise hold up.
    """

    def __init__(self, prior: float = 0.5, prior_weight: float = 2.0, decay: float = 0.9, priors: dict | None = None):
        if not 0.0 <= prior <= 1.0 or prior_weight < 0 or not 0.0 < decay <= 1.0:
            raise ValueError(f"need 0 <= prior <= 1, prior_weight >= 0, 0 < decay <= 1; got {prior}, "
                             f"{prior_weight}, {decay}")  # fmt: skip
        self.prior, self.prior_weight, self.decay = prior, prior_weight, decay
        self.priors = priors or {}  # per-key prior α (e.g. longer n-gram matches are more trustworthy)
        self.successes: dict = {}
        self.failures: dict = {}

    def _counts(self, key) -> tuple[float, float]:
        if key not in self.successes:
            p = self.priors.get(key, self.prior)
            return p * self.prior_weight, (1.0 - p) * self.prior_weight
        return self.successes[key], self.failures[key]

    def set(self, key, alpha: float, weight: float) -> None:
        """Start `key` at α̂ = alpha with `weight` observations' worth of evidence (tests, a known draft)."""
        self.successes[key], self.failures[key] = alpha * weight, (1.0 - alpha) * weight

    def alpha(self, key=None) -> float:
        s, f = self._counts(key)
        return s / (s + f) if s + f > 0 else self.priors.get(key, self.prior)

    def evidence(self, key=None) -> float:
        """The (decayed) observations behind α̂, the prior's pseudo-counts included."""
        return sum(self._counts(key))

    def lower_bound(self, key=None, z: float = 1.0) -> float:
        """α̂ − z·sd: a lower confidence bound on α (normal approximation, n = `evidence` observations).
        One accepted token after many rejected ones moves α̂, hardly the bound."""
        a, n = self.alpha(key), self.evidence(key)
        if n <= 0:
            return a
        return max(0.0, a - z * math.sqrt(a * (1.0 - a) / n))

    def summary(self) -> dict:
        """α̂ and its evidence per key seen so far (keys as text)."""
        return {str(k): {"alpha": round(self.alpha(k), 3), "evidence": round(self.evidence(k), 2)}
                for k in self.successes}  # fmt: skip

    def observe(self, key, proposed: int, accepted: int) -> None:
        if proposed <= 0:
            return
        s, f = self._counts(key)
        self.successes[key] = s * self.decay + accepted
        self.failures[key] = f * self.decay + (1.0 if accepted < proposed else 0.0)


class Probes:
    """Backed off, when to draft anyway: the one exploration policy of every sizer.

    The estimates that made a sizer stop (α̂, a draft's step time, the price of a bigger tree) are refreshed
    only by proposing, so while it proposes nothing it probes: the `interval`-th consecutive idle step
    proposes the smallest size instead. The interval starts at `every`, doubles after each failed probe up
    to `most`, and is reset by an accepted probe or by the rule choosing to draft again. Why it grows: text
    that defeats a draft tends to go on defeating it, so a fixed interval N costs ~1/N of the steps for as
    long as the text lasts; doubling gets to `most` after a few failures. The price, noticing late that the
    text turned predictable, is bounded by `most` steps. every = 0: never probe.
    """

    def __init__(self, every: int = 16, most: int = 128):
        if every < 0 or (every and most < every):
            raise ValueError(f"need 0 <= probe_every <= probe_max, got {every}, {most}")
        self.every, self.most = every, most
        self.interval = every  # the wait now
        self.idle = 0  # consecutive idle (nothing proposed) steps since the last probe or draft
        self.probing = False  # the last choice was a probe; its outcome sets the next wait
        self.backed_off = False  # the sizer's last own choice (probes aside) was nothing

    def idle_step(self) -> bool:
        """One step at which the sizer chose nothing; True if this step should probe instead."""
        self.backed_off = True
        self.idle += 1
        if self.every and self.idle >= self.interval:
            self.idle, self.probing = 0, True
            return True
        return False

    def drafting(self) -> None:
        """The rule chose to propose on its own: a later back-off probes early again."""
        self.interval, self.idle, self.probing, self.backed_off = self.every, 0, False, False

    def outcome(self, accepted: bool) -> None:
        """The probe's tokens were accepted (or not): reset or double the wait."""
        if self.probing:
            self.probing = False
            self.interval = self.every if accepted else min(2 * self.interval, self.most)

    def summary(self) -> dict:
        return {"interval": self.interval, "idle": self.idle, "backed_off": self.backed_off}


class DraftLength:
    """How many draft tokens to propose: fixed, HF's +2/−1 heuristic, or cost-aware (default).

    mode = int k        -> always k (capped by what the proposer has)
    mode = "heuristic"  -> transformers' rule: start at `initial`; +2 after a fully accepted draft, −1
                           (not below 1) otherwise
    mode = "cost"       -> k* (module docstring) with α̂ from the tracker and prices from the call's
                           `StepCost`; backed off (k* = 0) it probes on the `Probes` schedule

    Resuming. Once backed off, the rule drafts again only when k >= 1 pays at a lower confidence bound on α,
    α̂ − z·sd (z = `resume_z`); while drafting it uses α̂ itself. The asymmetry is hysteresis: with z = 0 one
    accepted probe after a run of rejections lifts α̂ just over the threshold, the draft runs a few steps,
    fails, backs off, and the next accepted probe starts it again — each round paying draft steps for
    nothing. With z >= 1 an accepted probe only brings the next probe forward; a few in a row resume. Model
    drafts (a rejected token costs a draft forward) use z = 1; prompt lookup, whose drafts are free, 0.
    """

    def __init__(
        self,
        mode: int | str = "cost",
        k_max: int = 10,
        initial: int = 4,
        tracker: AcceptanceTracker | None = None,
        probes: Probes | None = None,
        resume_z: float = 0.0,
        cost: StepCost | None = None,
    ):
        if isinstance(mode, str) and mode not in ("cost", "heuristic"):
            raise ValueError(f"draft_length must be an int, 'cost' or 'heuristic', got {mode!r}")
        if isinstance(mode, int) and mode < 0:
            raise ValueError(f"draft_length must be >= 0, got {mode}")
        if k_max < 1:
            raise ValueError(f"max_draft must be >= 1, got {k_max}")
        if resume_z < 0:
            raise ValueError(f"resume_confidence must be >= 0, got {resume_z}")
        self.mode, self.k_max, self.k_heuristic = mode, k_max, initial
        self.tracker = tracker or AcceptanceTracker()
        self.probes = probes or Probes()
        self.resume_z = resume_z
        self.cost = cost  # the prices; `start` takes the call's StepCost unless one was given
        self.draft_step = 0.0  # seconds per draft step; a draft-model proposer keeps it measured

    @property
    def probing(self) -> bool:
        """This step's choice is a probe."""
        return self.probes.probing

    @property
    def backed_off(self) -> bool:
        """The rule's last own choice (probes aside) was k = 0."""
        return self.probes.backed_off

    def start(self, cost: StepCost) -> None:
        """Cost mode: price on `cost` (the loop's, `DecodeState.cost`), its chain curve measured up to k_max + 1."""
        if self.mode == "cost":
            self.cost = self.cost or cost
            self.cost.prepare(self.k_max + 1)

    def score(self, k: int, alpha: float) -> float:
        """Expected tokens per second of a k-token chain: E[tokens | k, α] / (t̂(k+1) + ô + k·t_draft)."""
        return expected_tokens_per_step(alpha, k) / self.cost.step(k + 1, drafting=k * self.draft_step)

    def choose(self, available: int, key=None) -> int:
        cap = min(available, self.k_max)
        if isinstance(self.mode, int):
            return min(self.mode, cap)
        if self.mode == "heuristic":
            return min(self.k_heuristic, cap)
        assert self.cost is not None, "DraftLength.start(cost) comes first"
        self.probes.probing = False
        alpha = self.tracker.alpha(key)
        if self.backed_off and self.resume_z:
            alpha = self.tracker.lower_bound(key, self.resume_z)  # resuming: α must pay at its bound
        k = optimal_k(alpha, self.draft_step, cap, verify_cost=self.cost.step) if cap else 0  # ties: shorter
        if k > 0:
            self.probes.drafting()
        elif cap > 0:
            if self.probes.idle_step():
                k = 1  # probe: refresh α̂ and the step time
        return k

    def observe(self, key, proposed: int, accepted: int) -> None:
        self.tracker.observe(key, proposed, accepted)
        if proposed > 0:
            self.probes.outcome(accepted == proposed)
        if proposed > 0 and self.mode == "heuristic":
            self.k_heuristic = self.k_heuristic + 2 if accepted == proposed else max(1, self.k_heuristic - 1)
