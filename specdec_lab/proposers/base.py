"""The proposer interface: the only thing that differs between speculative methods (besides acceptance).

The loop (`specdec_lab.generate`) calls, per step:
    tree = proposer.propose(state)                          # 1. a token tree rooted at state.root
    ... the target verifies the tree, a path is accepted ...
    proposer.update(state, tree, acceptance, output)        # 6. sync the proposer's own state

`state` is the loop's `DecodeState`; proposers read it and never write it. A proposer keeps whatever it
needs (its own KV cache, n-gram index, statistics) in its own attributes, created in `__init__` or `start`.

Two class attributes tell the loop what a proposer needs from it (an instance may set its own in
`__init__`, e.g. from its config):
    accept_rules    the acceptance rules that fit its trees (`AcceptRules`): greedy and chain speculative
                    sampling by default; a proposer of branching trees declares what it can use
    feature_layers  hidden-state indices of the target whose states it reads (`verify` module docstring);
                    they arrive in `start(prompt=...)` and `update(output=...)` as `.features` (n, F, H).
                    Empty by default: the target then records nothing extra. A method model -> indices
                    instead, where they depend on the target (EAGLE-3's (2, L//2, L-3)); the loop calls it
                    once, before the prefill
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field
from typing import TYPE_CHECKING

import torch

from ..accept.registry import CHAIN_RULES, AcceptRules
from ..cost.step import StepCost
from ..memory import Memory
from ..sampling import GREEDY, Sampling
from ..trees.tree import Tree

if TYPE_CHECKING:
    from ..accept.result import Acceptance
    from ..verify import PrefillOutput, TreeOutput

__all__ = ["DecodeState", "Proposer", "param"]


def param(default=MISSING, help: str = "", *, factory=None):
    """A method config's field with its help text, which forms and CLIs show (`registry.method_parameters`)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


@dataclass
class DecodeState:
    """What the loop knows; read-only for proposers.

    tokens:        prompt + generated tokens so far; tokens[-1] is the root of the next tree
    prompt_length: number of prompt tokens
    cache_length:  committed target KV entries (= len(tokens) - 1)
    max_depth:     deepest tree the loop will verify now (budget left in max_new_tokens and context)
    max_nodes:     most nodes one forward verifies (a compiled step's largest bucket; None: no limit). The
                   loop cuts larger trees to their first max_nodes nodes; a proposer that reads outputs
                   by its own node layout (Lookahead's window) sizes its tree to fit instead
    sampling:      temperature / top-k / top-p of this run (greedy by default)
    generator:     the run's torch.Generator, for proposers that sample
    model:         the target model (proposers that need it, e.g. Medusa heads or layer-skip, read it)
    verify_seconds: wall time of the last step's verify forward and its acceptance, set once that step is over
                   (after `update`; None before the first step ends)
    cache:         the target's KVCache, committed entries [0, cache_length) (read-only: a layer-skip draft
                   copies the K/V of the layers it shares with the target from it)
    cost:          the price of a step (`cost.StepCost`): every sizer asks it, `cost.prepare(n, tree)` in
                   `start`; the loop reports every step to it; a proposer notes its own drafting seconds
                   (`cost.note`) so that they are not counted as loop overhead
    memory:        what the caller lets proposers carry across calls (`memory.Memory`): a proposer reads and
                   writes its own slot; a fresh one per call unless `generate(memory=...)` was given
    """

    tokens: list[int]
    prompt_length: int
    cache_length: int
    max_depth: int
    max_nodes: int | None = None
    model: object = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    sampling: Sampling = GREEDY  # how the target samples; a sampling draft uses the same warping for q
    generator: torch.Generator | None = None  # the run's RNG (seeded by generate(seed=...))
    verify_seconds: float | None = None
    cache: object = None
    cost: StepCost | None = None  # None: a fresh StepCost of `model` (`__post_init__`)
    memory: Memory = field(default_factory=Memory)

    def __post_init__(self):
        if self.cost is None:
            self.cost = StepCost(self.model)

    @property
    def root(self) -> int:
        return self.tokens[-1]

    @property
    def generated(self) -> list[int]:
        return self.tokens[self.prompt_length :]


class Proposer:
    """Base proposer: proposes nothing (a root-only tree), which makes the loop plain autoregressive."""

    name = "autoregressive"
    accept_rules: AcceptRules = CHAIN_RULES  # a root-only tree is a chain
    feature_layers: tuple[int, ...] = ()

    def start(self, state: DecodeState, prompt: PrefillOutput | None = None) -> None:
        """Called once after the target's prefill of the prompt but its last token (the first root).

        prompt.hidden: (n-1, H) the target's last hidden states; prompt.features: (n-1, F, H) those of
        `feature_layers` (None when it asks for none).
        """

    def propose(self, state: DecodeState) -> Tree:
        return Tree.root(state.root)

    def update(self, state: DecodeState, tree: Tree, acceptance: Acceptance, output: TreeOutput) -> None:
        """Called after acceptance; `state.tokens` already holds the emitted tokens."""

    def info(self) -> dict:
        """Per-step facts worth tracing (e.g. the draft length chosen); shown by notebooks."""
        return {}

    def summary(self) -> dict:
        """What the proposer decided over the whole call (e.g. the tree it chose, the steps it backed off);
        kept in `GenerationResult.proposer` even without a trace, and recorded per row by the bench."""
        return {}
