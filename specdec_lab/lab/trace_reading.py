"""What a traced decode says, step by step: where every emitted token came from, how large each verify forward
was, and which step's tree teaches most. Read by the speedup lab (`lab.experiment`) and its figures.

Provenance of an emitted token, from its step's trace:
    "accepted draft"  proposed by the method and confirmed by the target (on the accepted path)
    "bonus"           the target's own token after the accepted path, in a step that proposed something
    "plain step"      the only token of a step whose tree had no candidate beyond the root: an ordinary
                      decoding step (autoregressive always; prompt lookup when nothing matched)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..generate import StepTrace

__all__ = ["PROVENANCE", "provenance", "instructive_step", "forward_sizes", "json_number"]

PROVENANCE = ("accepted draft", "bonus", "plain step")


def json_number(x: float) -> float | None:
    """A JSON-safe number: None for None or NaN, else rounded to 6 places."""
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 6)


def provenance(steps: Sequence[StepTrace]) -> list[str]:
    """One label of PROVENANCE per emitted token, in order (see the module docstring)."""
    out: list[str] = []
    for s in steps:
        if s.proposed == 0:
            out += ["plain step"] * len(s.emitted)
            continue
        n_acc = min(s.accepted, len(s.emitted))  # EOS may cut the path short
        out += ["accepted draft"] * n_acc + ["bonus"] * (len(s.emitted) - n_acc)
    return out


def instructive_step(steps: Sequence[StepTrace]) -> int:
    """The step whose tree teaches most (0 without steps): one where the target accepted some of the proposal
    and rejected the rest, so both outcomes show; among those the most draft tokens accepted, then the largest
    tree, then the earliest. Without such a step: the most accepted, then the largest tree."""
    if not steps:
        return 0

    def score(i: int) -> tuple:
        s = steps[i]
        accepted = min(s.accepted, len(s.emitted))
        return (0 < accepted < s.proposed, accepted, len(s.tree_tokens), -i)

    return max(range(len(steps)), key=score)


def forward_sizes(steps: Sequence[StepTrace]) -> dict[str, float | None]:
    """What one verify forward held, on average over `steps` (None without steps):

    verified_per_forward  tokens in the forward, root included (autoregressive = 1): the n of the cost t(n)
    proposed_per_forward  candidate nodes besides the root (the tokens offered for acceptance)
    extra_per_forward     non-candidate nodes (verified for their logits, never accepted: Lookahead's window)
    """
    n = len(steps)
    if n == 0:
        return {"verified_per_forward": None, "proposed_per_forward": None, "extra_per_forward": None}
    return {
        "verified_per_forward": json_number(sum(len(s.tree_tokens) for s in steps) / n),
        "proposed_per_forward": json_number(sum(s.proposed for s in steps) / n),
        "extra_per_forward": json_number(sum(s.extra for s in steps) / n),
    }
