"""What a proposer carries from one `generate` call to the next, passed explicitly.

Proposers learn while they decode: the draft's acceptance estimate α̂ and its probe schedule, the cost
model's corrections of the measured curve (`cost.StepCost`). Kept across calls that is useful — a server's
second request starts where the first stopped, backed off from its first step if the draft has not been
paying — but kept *invisibly* it makes every measurement depend on what ran before it: a benchmark row on
the prompts before it, a lab run on its own warm-up.

So learning across calls happens only through a `Memory` the caller passes:

    generate(model, prompt, method="draft")                    # memory=None: fresh, every call independent
    mem = Memory()
    generate(model, p1, method="draft", memory=mem)            # learns ...
    generate(model, p2, method="draft", memory=mem)            # ... and goes on from there
    mem.summary()                                              # what it holds

A Memory is a dictionary of named slots; each proposer reads and writes only its own (`slot(key)`), keyed
by what it learned about (e.g. "draft:<draft name>"), and the loop keeps the cost model in "cost". Measured
facts about the machine (the verify curve, a kernel plan, a draft's step time on an empty cache) are not
learning and stay cached per process.
"""

from __future__ import annotations

from .cost.step import StepCost

__all__ = ["Memory"]


class Memory:
    """Named slots of what proposers learned across `generate` calls (module docstring)."""

    COST = "cost"  # the slot of the loop's StepCost

    def __init__(self):
        self.slots: dict[str, dict] = {}

    def slot(self, key: str) -> dict:
        """The dict a proposer keeps under `key` (created empty on first use)."""
        return self.slots.setdefault(key, {})

    def cost(self, model, step=None, rows: int = 1) -> StepCost:
        """The StepCost of `model` kept here (a new one, stored, the first time or for another model, or for
        another `compiled.CompiledStep` or number of rows verified together: each has its own curve)."""
        slot = self.slot(self.COST)
        if slot.get("model") is not model or slot.get("step") is not step or slot.get("rows", 1) != rows:
            slot.clear()
            slot.update(model=model, step=step, cost=StepCost(model, step=step, rows=rows))
            if rows != 1:  # a batch's step: its own curve (one sequence keeps the slot as it always was)
                slot["rows"] = rows
        return slot["cost"]

    def clear(self) -> None:
        self.slots.clear()

    def __contains__(self, key: str) -> bool:
        return key in self.slots

    def __len__(self) -> int:
        return len(self.slots)

    def summary(self) -> dict:
        """What each slot holds, in plain values (a bench result records it; the lab shows it)."""
        out = {}
        for key, slot in self.slots.items():
            items = {}
            for name, value in slot.items():
                if name in ("model", "step"):
                    continue
                summary = getattr(value, "summary", None)
                items[name] = summary() if callable(summary) else value if _plain(value) else type(value).__name__
            out[key] = items
        return out

    def __repr__(self) -> str:
        return f"Memory({', '.join(self.slots) or 'empty'})"


def _plain(value) -> bool:
    if isinstance(value, (str, int, float, bool, type(None))):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False
