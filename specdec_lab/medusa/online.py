"""Medusa's tree size decided online: the startup cost model proposes a few trees, measured speed picks one.

`choose_budget` ranks node budgets n by E[L](n) / (t(n + 1) + heads), from the heads' calibration and a
verify cost curve measured once at startup. Both carry errors as large as the margins between neighbouring
budgets. On a shared 2-core VM, six back-to-back startup curves gave t(5)/t(4) between 1.00 and 1.15, while
a 4th node was predicted to add 4% to E[L]; so one process chose 3 nodes and the next 4. And the calibrated
E[L] ran ~9% above the measured accepted length. A tree chosen on one such curve is a coin flip between
trees that differ by 5–8% in speed.

So `tree="auto"` keeps the budgets whose predicted rate is within `margin` of the best (at most
`max_arms`) as *arms*, and measures each one's real rate while decoding:

    rate_a = Σ tokens emitted / Σ (drafting + verify + acceptance seconds)   over the steps that used arm a

Each step picks the arm with the highest upper confidence bound, rate_a + z·se_a (UCB). se_a is the
ratio estimator's standard error, sqrt(Var(tokens − rate·seconds) / n) / mean(seconds). Until every arm
has `min_steps` steps, the least-tried arm goes next. A worse arm is still tried now and then while its
bound reaches above the leader's. It drops out once enough steps show it is slower. Every arm is an exact
tree: the choice moves the speed, never the output. The statistics live with the heads (per process and
target), so a bench's later prompts decode with what the earlier ones measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["Arm", "OnlineBudget"]


@dataclass
class Arm:
    """One candidate tree and the running sums of its steps (tokens t_i, seconds s_i)."""

    budget: int  # nodes below the root
    paths: list  # its rank paths
    predicted_length: float  # E[L] under the calibrated accuracies
    predicted_rate: float  # tokens per second under the startup cost model
    steps: int = 0
    tokens: float = 0.0  # Σ t_i
    seconds: float = 0.0  # Σ s_i
    tt: float = 0.0  # Σ t_i²
    ss: float = 0.0  # Σ s_i²
    ts: float = 0.0  # Σ t_i s_i

    def observe(self, tokens: float, seconds: float) -> None:
        self.steps += 1
        self.tokens += tokens
        self.seconds += seconds
        self.tt += tokens * tokens
        self.ss += seconds * seconds
        self.ts += tokens * seconds

    @property
    def rate(self) -> float:
        """Measured tokens per second (the predicted rate before any step)."""
        return self.tokens / self.seconds if self.seconds > 0 else self.predicted_rate

    @property
    def mean_accepted(self) -> float | None:
        """Measured tokens per step, the bonus included (None before any step)."""
        return self.tokens / self.steps if self.steps else None

    def stderr(self) -> float:
        """Standard error of `rate` (delta method for a ratio of means); inf below two steps."""
        n = self.steps
        if n < 2 or self.seconds <= 0:
            return math.inf
        r = self.rate
        # mean of (t − r s)²; its mean is 0 by the definition of r, so this is its variance
        var = max((self.tt - 2 * r * self.ts + r * r * self.ss) / n, 0.0) * n / (n - 1)
        return math.sqrt(var / n) / (self.seconds / n)

    def to_dict(self) -> dict:
        return {"budget": self.budget, "paths": [list(p) for p in self.paths], "steps": self.steps,
                "predicted_length": round(self.predicted_length, 3),
                "mean_accepted": None if not self.steps else round(self.mean_accepted, 3),
                "predicted_rate": round(self.predicted_rate, 2), "rate": round(self.rate, 2)}  # fmt: skip


@dataclass
class OnlineBudget:
    """UCB over a few candidate trees (module docstring)."""

    arms: list[Arm]
    min_steps: int = 8  # steps each arm gets before the bounds decide
    z: float = 1.5  # width of the upper bound, in standard errors
    history: list[int] = field(default_factory=list, repr=False)  # arm index per step (tests, plots)

    @classmethod
    def from_choice(cls, choice, margin: float = 0.1, max_arms: int = 3, **kwargs) -> OnlineBudget:
        """Arms: the budgets of `choice.table` (a `BudgetChoice`) whose predicted rate is within `margin` of
        the best, at most `max_arms` of them, best first; `choice.trees` holds each budget's paths."""
        if not 0 <= margin < 1 or max_arms < 1:
            raise ValueError(f"need 0 <= margin < 1 and max_arms >= 1, got {margin}, {max_arms}")
        best = max(row["rate"] for row in choice.table)
        rows = sorted((r for r in choice.table if r["rate"] >= (1 - margin) * best), key=lambda r: -r["rate"])
        arms = [Arm(r["budget"], list(choice.trees[r["budget"]]), r["expected_length"], r["rate"]) for r in rows]
        return cls(arms[:max_arms], **kwargs)

    def pick(self) -> int:
        """Index of the arm for the next step."""
        fewest = min(range(len(self.arms)), key=lambda i: self.arms[i].steps)
        if self.arms[fewest].steps < self.min_steps:
            return fewest
        return max(range(len(self.arms)), key=lambda i: self.arms[i].rate + self.z * self.arms[i].stderr())

    def observe(self, arm: int, tokens: float, seconds: float) -> None:
        self.arms[arm].observe(tokens, seconds)
        self.history.append(arm)

    def leader(self) -> Arm:
        """The arm with the best measured rate (the startup model's best before any step)."""
        return max(self.arms, key=lambda a: a.rate)

    def to_dict(self) -> dict:
        return {"arms": [a.to_dict() for a in self.arms], "leader": self.leader().budget, "z": self.z}
