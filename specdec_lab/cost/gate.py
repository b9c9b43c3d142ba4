"""Whether a batch's rows may speculate this step: measured, not assumed.

Every row sizes its drafts on t(B, n), the target's forward over B rows of n tokens (`StepCost(rows=B)`). That
price leaves out what grows with B outside the forward: each row's proposer and acceptance run one after the
other in Python, each row's K/V is written at its own length, and one row's wide tree pads every other row to
its width. At a small batch those are a small share of a step; at a large one they can eat what the accepted
drafts save, while every row's own sizer still sees a draft that pays.

The gate measures both modes on the batch itself. A step "speculates" when rows may propose (each to its own
sizer's size) and is "plain" when every row's depth is capped at 0 (one token per row: batched autoregressive
decoding through the same loop). The schedule, in steps:

    repeat:  probe: speculate, plain, speculate, plain, ... (2 × probe steps)    # a paired A/B
             the mode that emitted more tokens per second × run       # run = 8, 16, 32, then `every`

Alternating step by step pairs the two modes on the same stretch of text (a mode measured on the opening
steps alone would see the prompt's easy continuations), so the worse mode costs about probe / (2·probe + every)
of the steps once the runs have grown. They start short because the opening is the least typical stretch: rows
copying from their prompts accept more in their first steps than later. A mode's rate = tokens emitted /
seconds over its probe steps (propose → accept; prefills are outside a step), weighted 2/3 against 1/3 for the
probes before: the text and each row's α drift. The first step of a probe is not counted: the first step at B
rows measures t(B, n). Greedy output does not depend on the
gate: a plain step verifies a tree of one node.

What it cannot see: a plain step is batched autoregressive decoding only for a drafter that costs nothing when it
proposes nothing (prompt lookup). EAGLE's and Medusa's drafters still follow every accepted token, and a
speculating step right after a plain one pays the drafter's catch-up, so the alternating probe under-rates
speculation for them. `generate_batch` leaves the gate off unless asked (`gate=True`); notebook 13 §6 and
`data/bench/README.md` hold what it did on the batched bench.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SpeculationGate"]

MODES = ("speculate", "plain")


@dataclass
class SpeculationGate:
    """The schedule (module docstring): `open()` before a step, `record(tokens, seconds)` after it."""

    probe: int = 4  # steps of each mode in a probe (alternating)
    every: int = 64  # steps of the better mode between two probes, once the runs have grown to it
    first: int = 8  # the first run's steps (doubled after each probe up to `every`)
    rate: dict[str, float] = field(default_factory=dict)  # mode -> tokens/s, the newest probes averaged
    steps: dict[str, int] = field(default_factory=lambda: dict.fromkeys(MODES, 0))  # steps run in each mode
    _step: int = 0  # steps into the current phase
    _probing: bool = True  # the current phase is a probe (else the better mode's run)
    _mode: str = "speculate"
    _run: int = 0  # steps of the current run of the better mode
    _sums: dict[str, list[float]] = field(default_factory=dict)  # mode -> [tokens, seconds] of this probe

    def __post_init__(self):
        if self.probe < 1 or self.every < 1 or self.first < 1:
            raise ValueError(f"SpeculationGate needs probe, every and first >= 1, got probe={self.probe}, "
                             f"every={self.every}, first={self.first}")  # fmt: skip

    def open(self) -> bool:
        """May the rows speculate in the next step?"""
        if self._probing:
            self._mode = MODES[self._step % 2]
        return self._mode == "speculate"

    def record(self, tokens: int, seconds: float) -> None:
        """The step just run emitted `tokens` (all rows) in `seconds` (propose → accept)."""
        self.steps[self._mode] += 1
        if self._probing and self._step > 0:  # a probe's first step is not counted (module docstring)
            acc = self._sums.setdefault(self._mode, [0.0, 0.0])
            acc[0], acc[1] = acc[0] + tokens, acc[1] + seconds
        self._step += 1
        if self._probing and self._step == 2 * self.probe:
            for mode, (tok, sec) in self._sums.items():
                if sec > 0:
                    old = self.rate.get(mode)
                    self.rate[mode] = tok / sec if old is None else (2 * tok / sec + old) / 3
            self._sums = {}
            # a tie, or a mode not measured yet (probe = 1), speculates
            self._mode = max(MODES, key=lambda m: (self.rate.get(m, float("inf")), m == "speculate"))
            self._probing, self._step = False, 0
            self._run = min(self.every, 2 * self._run if self._run else self.first)
        elif not self._probing and self._step == self._run:
            self._probing, self._step = True, 0

    def summary(self) -> dict:
        """Steps per mode, the share that speculated and each mode's last measured tokens/s."""
        total = sum(self.steps.values())
        return {"steps": dict(self.steps), "speculated": round(self.steps["speculate"] / total, 3) if total else None,
                "tokens_per_s": {m: round(r, 2) for m, r in self.rate.items()}}  # fmt: skip
