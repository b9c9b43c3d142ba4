"""The draft length of a model-chain proposer, shared by every proposer whose drafts cost a model step each.

A chain proposer that runs a model per draft token (a small draft, an EAGLE drafter) sizes its chain the same
way: k from `draft_length.DraftLength` (fixed, transformers' +2/−1 heuristic, or cost mode on the one cost
model with the draft's own step time t_draft), backed off (k = 0) where no draft pays, probing to come back.
What it learns lives in the call's `Memory` (slot "<kind>:<name>"): α̂, the probe schedule, the measured
step time — fresh for every call unless the caller passes one Memory to several calls.

    ChainLengthConfig  the config fields of that choice (a method's config dataclass inherits them)
    ChainSizing        the choice at run time: memory slot, step-time average, cost.note, counts, summary

t_draft is a moving average of the measured seconds per draft token, so k follows the machine's load and the
context; a first forward that caught up on more than two pending positions (after a backed-off stretch) is
left out: resuming costs it once, a draft token does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import DecodeState, param
from .draft_length import AcceptanceTracker, DraftLength, Probes

__all__ = ["ChainLengthConfig", "ChainSizing"]


@dataclass
class ChainLengthConfig:
    max_draft: int = param(8, "k_max")
    draft_length: int | str = param("cost", 'int (fixed k), "heuristic" (HF\'s +2/-1), "cost" (measured α, costs)')
    probe_every: int = param(16, "cost mode backed off (k = 0): draft one token after this many steps (0: never)")
    probe_max: int = param(128, "the wait doubling after each failed probe up to this (`draft_length.Probes`)")
    resume_confidence: float = param(
        1.0,
        "backed off, draft again only when k >= 1 pays at α̂ - z·sd (this z; 0: at α̂ itself), so one lucky "
        "probe does not restart a draft that has not been paying (`draft_length.DraftLength`)",
    )
    alpha_memory: float = param(
        0.98, "α̂ forgets geometrically: each observation weighs this much less per later one (memory ≈ 1/(1 − it))"
    )
    prior_alpha: float = param(
        0.5, "α̂ before any draft of the call (two observations' worth, decaying like them): where cost mode starts"
    )

    def __post_init__(self):
        if self.max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {self.max_draft}")
        self.length()  # validates draft_length and the probe schedule

    def length(self) -> DraftLength:
        """A fresh `DraftLength` with this config's rule, k_max and probe schedule."""
        return DraftLength(self.draft_length, k_max=self.max_draft, probes=Probes(self.probe_every, self.probe_max),
                           tracker=AcceptanceTracker(prior=self.prior_alpha, decay=self.alpha_memory),
                           resume_z=self.resume_confidence)  # fmt: skip


class ChainSizing:
    """k per step for a model-chain proposer. Call order: `start` once; per step `choose`, then (when it
    drafted) `drafted` with the seconds of each draft token, and `observe` after acceptance."""

    def __init__(self, config: ChainLengthConfig):
        self.length = config.length()
        self.memory: dict = {}
        self.counts = {"steps": 0, "backed_off": 0, "probes": 0, "drafted": 0, "accepted": 0, "rejected": 0}
        self.last: dict = {}  # this step's facts (`Proposer.info`)

    def start(self, state: DecodeState, key: str, step_seconds: float) -> None:
        """Take this drafter's slot of the call's Memory (α̂, probes, step time carried over when the caller
        passed one) and the call's cost model; `step_seconds`: t_draft measured on this machine."""
        self.memory = state.memory.slot(key)
        self.length.tracker = self.memory.setdefault("tracker", self.length.tracker)
        self.length.probes = self.memory.setdefault("probes", self.length.probes)
        self.length.start(state.cost)
        self.length.draft_step = self.memory.get("step_seconds", step_seconds)

    def choose(self, state: DecodeState, fed: int) -> int:
        """This step's k (0 = backed off). fed: positions the first draft forward would feed."""
        k = self.length.choose(state.max_depth)
        # k: the length chosen (0 = backed off); probe: a backed-off step drafting to re-measure; fed: positions of
        # the first draft forward (> 2 after a backed-off stretch: the catch-up)
        self.last = {"k": k, "alpha": round(self.length.tracker.alpha(None), 3), "probe": self.length.probing,
                     "fed": fed if k else 0}  # fmt: skip
        c = self.counts
        c["steps"] += 1
        c["backed_off"] += k == 0
        c["probes"] += self.length.probing
        c["drafted"] += k
        return k

    def drafted(self, state: DecodeState, seconds: list[float], fed: int) -> None:
        """The drafting of this step took `seconds` per draft token (the first one fed `fed` positions)."""
        steady = seconds if fed <= 2 else seconds[1:]
        if steady:
            self.length.draft_step = 0.8 * self.length.draft_step + 0.2 * sum(steady) / len(steady)
            self.memory["step_seconds"] = self.length.draft_step
        state.cost.note(sum(seconds))  # the proposer prices its drafting itself (k·t_draft): not loop overhead

    def observe(self, proposed: int, accepted: int) -> None:
        self.length.observe(None, proposed, accepted)
        self.last["accepted"] = accepted
        self.counts["accepted"] += accepted
        self.counts["rejected"] += accepted < proposed

    def summary(self) -> dict:
        """Steps, steps backed off (k = 0), probes, draft tokens proposed (`drafted`), accepted and chains cut
        short by a rejection (`rejected`); `alpha`: the call's realised per-token acceptance, accepted /
        (accepted + rejected); `alpha_hat`: the tracker's estimate at the end (recent steps weigh most)."""
        c = self.counts
        realised = c["accepted"] / (c["accepted"] + c["rejected"]) if c["accepted"] + c["rejected"] else None
        return {**c, "alpha": None if realised is None else round(realised, 3),
                "alpha_hat": round(self.length.tracker.alpha(None), 3)}  # fmt: skip
