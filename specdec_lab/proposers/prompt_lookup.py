"""Prompt lookup decoding (Saxena 2023; transformers' `prompt_lookup_num_tokens`): draft by copying.

If the last n tokens of the context occurred before, propose the tokens that followed that earlier
occurrence. It needs no model, costs microseconds, and shines wherever the output copies the input
(summaries, code edits, retrieval answers, quotations).

Differences from transformers' implementation, each for speed:
* an incremental n-gram index (dict per n, updated with each new token) instead of re-scanning the whole
  context with `unfold` every step;
* the longest n-gram (up to `max_ngram`) wins, and among its occurrences the most recent;
* the draft length is chosen per step (`draft_length.DraftLength`): by default from the one cost model
  (`cost.StepCost`: the measured verify curve, corrected by the loop's timings, plus the loop's own time)
  and the acceptance rate observed for matches of that n-gram length, so on text that does not repeat it
  proposes nothing and costs what autoregressive decoding costs; backed off, it probes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .draft_length import AcceptanceTracker, DraftLength, Probes

__all__ = ["PromptLookupConfig", "PromptLookupProposer", "ngram_priors"]


@dataclass
class PromptLookupConfig:
    max_ngram: int = param(3, "longest suffix n-gram searched for")
    min_ngram: int = param(1, "shortest")
    max_draft: int = param(10, "k_max, the longest chain proposed")
    draft_length: int | str = param("cost", 'int (fixed), "heuristic" (HF\'s +2/-1) or "cost" (measured curve)')
    probe_every: int = param(16, "cost mode backed off: propose one token after this many steps (0: never)")
    probe_max: int = param(128, "the wait doubling after each failed probe up to this (`draft_length.Probes`)")
    alpha_memory: float = param(
        0.7,
        "α̂ per n-gram length forgets this fast: each observation weighs this much less "
        "per later one (matches come and go with the text)",
    )

    def __post_init__(self):
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {self.min_ngram}, {self.max_ngram}")
        if self.max_draft < 1:
            raise ValueError(f"max_draft must be >= 1, got {self.max_draft}")
        Probes(self.probe_every, self.probe_max)  # validates the probe schedule


def ngram_priors(min_ngram: int, max_ngram: int) -> dict[int, float]:
    """Prior acceptance per matched n-gram length: a 3-gram match predicts its continuation far better than a
    1-gram one, so it is trusted more before any evidence arrives (0.25, 0.4, 0.55 for n = 1, 2, 3: an unproven
    1-gram match is not worth a long verify on a CPU's curve; data/bench/README.md)."""
    return {n: min(0.8, 0.1 + 0.15 * n) for n in range(min_ngram, max_ngram + 1)}


class PromptLookupProposer(Proposer):
    name = "prompt_lookup"

    def __init__(self, config: PromptLookupConfig | None = None, **kwargs):
        self.config = config or PromptLookupConfig(**kwargs)
        cfg = self.config
        priors = ngram_priors(cfg.min_ngram, cfg.max_ngram)
        self.length = DraftLength(cfg.draft_length, k_max=cfg.max_draft, tracker=AcceptanceTracker(priors=priors,
                                  decay=cfg.alpha_memory), probes=Probes(cfg.probe_every, cfg.probe_max))  # fmt: skip
        # index[n][ngram] = end position of that n-gram's most recent occurrence
        self.index: dict[int, dict[tuple[int, ...], int]] = {
            n: {} for n in range(self.config.min_ngram, self.config.max_ngram + 1)
        }
        self.indexed = 0  # n-grams ending at positions < indexed are in the index
        self._last: dict = {}

    def start(self, state: DecodeState, prompt=None) -> None:
        self.length.start(state.cost)

    def _index_until(self, tokens: list[int], end: int) -> None:
        """Add n-grams ending at positions [self.indexed, end) to the index."""
        for j in range(self.indexed, end):
            for n, table in self.index.items():
                if j - n + 1 >= 0:
                    table[tuple(tokens[j - n + 1 : j + 1])] = j
        self.indexed = max(self.indexed, end)

    def matches(self, tokens: list[int]) -> list[tuple[int, list[int]]]:
        """[(n, continuation)] for every suffix n-gram length seen earlier, longest first (each its most recent
        occurrence's continuation, at most max_draft tokens); shorter matches may continue differently."""
        last = len(tokens) - 1
        self._index_until(tokens, last)  # not the suffix itself: it would match itself
        found = []
        for n in sorted(self.index, reverse=True):
            if n > len(tokens):
                continue
            j = self.index[n].get(tuple(tokens[last - n + 1 :]))
            if j is not None:
                found.append((n, tokens[j + 1 : j + 1 + self.config.max_draft]))
        return found

    def match(self, tokens: list[int]) -> tuple[int, list[int]]:
        """(n, continuation) for the longest suffix n-gram seen earlier; (0, []) when none."""
        found = self.matches(tokens)
        return found[0] if found else (0, [])

    def propose(self, state: DecodeState) -> Tree:
        n, continuation = self.match(state.tokens)
        k = self.length.choose(min(len(continuation), state.max_depth), key=n) if continuation else 0
        self._last = {"ngram": n, "available": len(continuation), "k": k, "probe": self.length.probing}
        if k == 0:
            return Tree.root(state.root)
        return Tree.chain(state.root, continuation[:k])

    def update(self, state, tree, acceptance, output) -> None:
        k = len(tree) - 1
        if k > 0:
            self.length.observe(self._last["ngram"], k, acceptance.accepted_draft)

    def info(self) -> dict:
        return dict(self._last)
