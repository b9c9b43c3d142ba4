"""The per-step trace a bench row carries, and the one record every analysis reads it through.

A traced row of our loop holds its prefill seconds and one short list per loop step, the fields of
`TraceStep` in order (`TRACE_FIELDS`, also written to the results file as "trace_fields"):

    row["trace"] = {"prefill_seconds": seconds, "steps": [[nodes, candidates, emitted, t_propose, t_verify,
                                                           t_accept, chain], ...]}

    compact_steps(result.steps)  `generate`'s StepTrace per step -> the stored lists (the harness writes them)
    steps_of(row)                the stored lists -> `TraceStep` per step (replay, redecide, decompose read them)

Lists, not dicts, keep a traced row small (--no-traces leaves it out); the record gives the columns their
names, so no reader counts indices. Files written before `chain` existed hold six columns: their steps read
with chain None, which every analysis prices as it priced them before (`ShapedCurve.cost` takes None as a tree).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..generate import StepTrace

__all__ = ["TraceStep", "TRACE_FIELDS", "compact_steps", "steps_of"]


class TraceStep(NamedTuple):
    """One loop step of a traced bench row; its fields in order are the columns of a stored step."""

    # nodes      tree size verified in the step's forward, root included (1 = a plain autoregressive step)
    # candidates nodes besides the root that could be accepted (`StepTrace.proposed`; Lookahead's Jacobi
    #            window is verified but never accepted, so nodes - 1 - candidates of it are "extra")
    # emitted    tokens the step emitted (accepted drafts + bonus, cut at EOS)
    # t_*        seconds of the step's phases (`generate`'s loop: propose, verify forward, accept + keep +
    #            proposer update), rounded to microseconds
    # chain      True if the tree was a chain (verified with the model's own causal mask), False if it needed a
    #            tree mask (`verify_tree`): the two cost differently for the same n on some kernels. Stored as
    #            1 / 0; None for a six-column step, written before the field
    nodes: int
    candidates: int
    emitted: int
    t_propose: float
    t_verify: float
    t_accept: float
    chain: bool | None = None

    @classmethod
    def of_step(cls, s: StepTrace) -> TraceStep:
        """One `generate` step, compacted: sizes counted, times rounded to microseconds."""
        return cls(
            nodes=len(s.tree_tokens),
            candidates=s.proposed,
            emitted=len(s.emitted),
            t_propose=round(s.t_propose, 6),
            t_verify=round(s.t_verify, 6),
            t_accept=round(s.t_accept, 6),
            chain=all(p == i - 1 for i, p in enumerate(s.tree_parents)),
        )

    @classmethod
    def of(cls, stored: Sequence) -> TraceStep:
        """A stored step (a list in `TRACE_FIELDS` order) -> the record; six columns read with chain None."""
        if len(stored) < len(cls._fields):
            return cls(*stored)  # written before `chain` existed: its default
        return cls(*stored[:-1], bool(stored[-1]))  # chain, the last column, stored as 0 / 1

    def stored(self) -> list:
        """The list a results file holds: the fields in order, chain as 0 / 1."""
        return list(self._replace(chain=int(self.chain)))


TRACE_FIELDS = TraceStep._fields


def compact_steps(steps: Sequence[StepTrace]) -> list[list]:
    """`GenerationResult.steps` (StepTrace) -> one short list per step, in `TRACE_FIELDS` order."""
    return [TraceStep.of_step(s).stored() for s in steps]


def steps_of(row: dict) -> list[TraceStep]:
    """A traced row's steps, each read as a `TraceStep`."""
    return [TraceStep.of(s) for s in row["trace"]["steps"]]
