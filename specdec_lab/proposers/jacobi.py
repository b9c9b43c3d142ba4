"""Jacobi decoding (Santilli et al. 2023; Song et al. 2021): greedy decoding as a fixed-point iteration.

Greedy decoding solves n equations one after the other,

    y_j = argmax p(. | x, y_1 .. y_{j-1}),    j = 1..n.

Jacobi iteration solves them all at once: guess a block g = (g_1 .. g_n), run ONE causal forward over
[root, g_1 .. g_n] and replace every guess by the target's argmax at its parent,

    g'_j = argmax p(. | x, root, g_1 .. g_{j-1}).

g'_1 is always right (its context is all real tokens), so each iteration fixes at least one token and n
iterations reach the greedy answer. A guess whose whole prefix is already right is right too: that is
exactly greedy acceptance of the chain root -> g_1 -> ... -> g_n (accepted prefix g_1..g_a, bonus g'_{a+1}).

So Jacobi decoding is the shared loop with this proposer: propose the chain [root | g]; the loop's verify
forward is the Jacobi update; after acceptance the target's argmaxes at the positions past the emitted
tokens (`output.logits`, nothing recomputed) become the next iterate, and new positions at the block's end
get fresh guesses (tokens copied from the prompt at random, as Lookahead decoding initialises its window).

A pretrained model that was not trained for it (CLLMs are) rarely converges more than one position per
iteration: tokens after a wrong guess are predicted from a wrong context. `info()` records the trajectory
(each step's block before and after the update, and which positions it left unchanged) for a heatmap.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..trees.tree import Tree
from .base import DecodeState, Proposer, param

__all__ = ["JacobiConfig", "JacobiProposer"]


@dataclass
class JacobiConfig:
    n: int = param(8, "block length: future tokens guessed, and refined, every step")
    init: str = param(
        "prompt",
        'fresh guesses: "prompt" (tokens of the prompt at random, LADE\'s choice) or "repeat" (copies of the '
        "last token; Santilli et al. start from padding)",
    )
    seed: int = param(0, "of the fresh guesses (greedy output does not depend on them, only the speed)")

    def __post_init__(self):
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"n (the Jacobi block length) must be an integer >= 1, got {self.n!r}")
        if self.init not in ("prompt", "repeat"):
            raise ValueError(f"init must be 'prompt' or 'repeat', got {self.init!r}")


class JacobiProposer(Proposer):
    name = "jacobi"

    def __init__(self, config: JacobiConfig | None = None, **kwargs):
        self.config = config or JacobiConfig(**kwargs)
        self.rng = random.Random(self.config.seed)
        self.block: list[int] = []  # the current iterate: guesses for the n tokens after the root
        self.prompt: list[int] = []
        self._last: dict = {}
        self.counts = {"steps": 0, "proposed": 0, "accepted": 0, "converged": 0}

    def _fresh(self, state: DecodeState) -> int:
        return self.rng.choice(self.prompt) if self.config.init == "prompt" else state.root

    def start(self, state: DecodeState, prompt=None) -> None:
        self.prompt = state.tokens[: state.prompt_length]
        self.block = [self._fresh(state) for _ in range(self.config.n)]

    def propose(self, state: DecodeState) -> Tree:
        k = min(self.config.n, state.max_depth)  # the loop's budget: a path of depth d emits d + 1 tokens
        return Tree.chain(state.root, self.block[:k])

    def update(self, state, tree, acceptance, output) -> None:
        k = len(tree) - 1
        pred = output.logits[: k + 1].argmax(dim=-1).tolist()  # pred[j]: the target's token after node j
        a = acceptance.accepted_draft
        before, after = self.block[:k], pred[:k]  # the iterate at offsets 1..k from the root, before / after
        converged = [g == y for g, y in zip(before, after, strict=True)]  # positions the update left unchanged
        # The loop emitted g_1..g_a and the bonus pred[a], so the new root sits at offset a + 1 and the
        # updated guesses for offsets a + 2 .. k + 1 (pred[a + 1 .. k]) are the next iterate's first
        # positions; guesses never proposed (k < n near the end of the budget) follow; new ones fill up.
        block = pred[a + 1 : k + 1] + self.block[k + 1 :]
        self.block = (block + [self._fresh(state) for _ in range(self.config.n)])[: self.config.n]
        self._last = {"before": before, "after": after, "converged": converged, "accepted": a}
        self.counts["steps"] += 1
        self.counts["proposed"] += k
        self.counts["accepted"] += a
        self.counts["converged"] += sum(converged)

    def info(self) -> dict:
        """This step's Jacobi update: `before` and `after` (the block at offsets 1..k from the root),
        `converged` (positions where they agree), `accepted` (the greedily accepted prefix length)."""
        return dict(self._last)

    def summary(self) -> dict:
        return dict(self.counts)
