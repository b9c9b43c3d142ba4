"""What the harness runs: a `Runner` returning a `RunOutput`, and the registry of anchors that build one.

    factory  (model, eos_ids, **params) -> run          built once per benchmark: one-time setup goes here
    run      (prompt ids, max_new_tokens, seed) -> RunOutput                     the part that is timed

Our methods need no entry here: methods.py builds their runners from the proposer registry
(`specdec_lab.proposers.METHODS`) when asked. `ANCHORS` holds the other kind, implementations that are
not our loop (transformers' own `generate`: hf.py registers them). This module imports nothing else of
the bench, so both methods.py and hf.py can import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..proposers import METHODS

__all__ = ["RunOutput", "Runner", "RunnerFactory", "ANCHORS", "register_anchor"]


@dataclass
class RunOutput:
    """What one method run returns; the harness does the timing."""

    tokens: list[int]  # new tokens, EOS included when it stopped generation
    forwards: int | None  # target forwards that emitted tokens (prefill not counted); None if unknown
    stop_reason: str  # "eos" | "max_new_tokens" | "context"
    info: dict = field(default_factory=dict)  # what the method decided (our loop: the proposer's summary())


Runner = Callable[[list[int], int, int], RunOutput]  # (prompt ids, max_new_tokens, seed) -> RunOutput
RunnerFactory = Callable[..., Runner]  # (model, eos_ids, **params) -> Runner

ANCHORS: dict[str, RunnerFactory] = {}


def register_anchor(name: str, factory: RunnerFactory) -> None:
    """Make `--methods name[:key=value...]` run `factory(model, eos_ids, **params)`.

    Parameters after `eos_ids` in the factory's signature are what a method spec may set.
    """
    if name in METHODS:
        raise ValueError(f"{name!r} is already a method of our loop (specdec_lab.proposers.METHODS)")
    ANCHORS[name] = factory
