"""How much lookahead pays on this machine: Lookahead decoding's W="auto" (lookahead.py).

Both of Lookahead's branches cost nodes in every verify forward. On a GPU a forward of 50 tokens costs
about what one of 1 does, so LADE verifies everything and runs a wide window; on a CPU it costs several
steps, and both must earn their nodes. Two choices, each maximising expected tokens per second priced by the
one cost model (`cost.StepCost.step(n, tree=True)`: the tree-mask verify curve, corrected by the loop's
timings, plus the loop's own time):

Per step, how many of the root's n-grams to verify (most recently added first, merged as a trie):

    k* = argmax_{0 <= k <= offered}  (1 + h_0 + ... + h_{k-1}) / price(1 + window cells + trie nodes of the first k)

(window cells: those after the root, (N − 1)·W − 1 for a full window, the root being its first cell.)

h_r the accepted tokens per step credited to the rank-r n-gram (the lowest-ranked one that offered the
accepted tokens), measured in the steps that verified rank r. k = 0 with no window is plain decoding,
k >= 1 with no window prompt-lookup-like verification of the pool.

Every `adapt_every` steps, the window width from {0, 1, 2, 4, ..., max_window}:

    W* = argmax_W  (1 + y_text + y_win · log2(1 + W)) / price(n_W + ĝ),   n_W = (N − 1)·W  (W >= 1),  1  (W = 0)

n_W the root and the window: the root is the window's first cell (lookahead.py), so a window of W adds
(N − 1)·W − 1 nodes after it, and the step's input is n_W + ĝ tokens (`LookaheadBudget.nodes`).

y_text the accepted tokens per step credited to n-grams of the text (prompt and output: hits the window
did not cause), y_win those credited to window n-grams per log2(1 + W) (the paper finds the step
compression grows about linearly in the log of the lookahead FLOPs), ĝ the verified trie nodes per step.

An estimate is refreshed only while its size is in use, so what was given up is tried again by probes
(`draft_length.Probes`, the exploration every sizer shares): while fewer n-grams are verified than offered,
the probe step verifies one more; while the window is off, a probe turns the narrowest window on for one
`adapt_every` period (after probe_every / 2 periods without a window). A failed probe doubles the wait.
Priors: h_r = 0.5 · 2^−r (about prompt lookup's for a match), y_text = 0.3, y_win = 0.1 (data/bench/README.md
has how they were chosen).
"""

from __future__ import annotations

import math

from ..cost.step import StepCost
from .draft_length import Probes

__all__ = ["Estimate", "LookaheadBudget"]


class Estimate:
    """An exponential moving average of what one choice yields, starting at its prior."""

    def __init__(self, prior: float, decay: float = 0.9):
        self.prior, self.decay, self.value = prior, decay, prior

    def observe(self, x: float) -> None:
        self.value = self.decay * self.value + (1 - self.decay) * x


class LookaheadBudget:
    """W="auto": the window width every few steps, and the n-grams to verify every step (module docstring)."""

    def __init__(self, cost: StepCost, N: int, G: int, max_window: int, adapt_every: int = 16,
                 probe_every: int = 16, probe_max: int = 128):  # fmt: skip
        self.cost, self.levels = cost, N - 1
        self.ladder = sorted({0, max_window} | {2**k for k in range(max_window.bit_length())})  # 0, 1, 2, 4, ...
        self.rank_hits = [Estimate(prior=0.5 * 0.5**r) for r in range(G)]  # h_r
        self.y_text = Estimate(prior=0.3)
        self.y_win = Estimate(prior=0.1)
        self.g_nodes = Estimate(prior=float(N - 1))  # ĝ; always observed
        self.gram_probes = Probes(probe_every, probe_max)  # steps verifying fewer n-grams than offered
        # The width is chosen once per adapt_every steps, and a window probe lasts that whole period: its schedule
        # counts periods, half as many as a one-step probe waits steps (so it probes at most as often in steps)
        periods = max(probe_every // 2, 1) if probe_every else 0
        self.width_probes = Probes(periods, max(probe_max // 2, periods))
        self.probing_width = False  # this adapt period's window is a probe
        self.probe_hit = False  # ... and its n-grams had tokens accepted

    def _price(self, nodes: float) -> float:
        return self.cost.step(max(int(round(nodes)), 1), tree=True)

    def grams(self, trie_nodes: list[int], window_nodes: int) -> int:
        """k*: trie_nodes[k] = nodes of the first k n-grams' trie (trie_nodes[0] = 0). Ties: fewer."""
        base, best, best_score, gain = 1 + window_nodes, 0, 0.0, 1.0
        for k, nodes in enumerate(trie_nodes):
            if k > 0:
                gain += self.rank_hits[k - 1].value
            score = gain / self._price(base + nodes)
            if score > best_score:
                best, best_score = k, score
        offered = len(trie_nodes) - 1
        if best < offered:
            if self.gram_probes.idle_step():
                best += 1  # probe: verify one more than pays, to refresh its rank's estimate
        else:
            self.gram_probes.drafting()
        return best

    def nodes(self, width: int, trie_nodes: float) -> float:
        """Tokens in one step's input: the root, a window of `width` columns (the root is its first cell, so it
        adds (N − 1)·width − 1 cells after it), and `trie_nodes` verified n-gram nodes."""
        return (self.levels * width if width > 0 else 1) + trie_nodes

    def scores(self) -> dict[int, float]:
        """{W: expected tokens per second} for each width of the ladder."""
        out = {}
        for w in self.ladder:
            tokens = 1 + self.y_text.value + self.y_win.value * math.log2(1 + w)
            out[w] = tokens / self._price(self.nodes(w, self.g_nodes.value))
        return out

    def width(self) -> int:
        """W* (ties go to the narrower window); while the window is off, now and then a probe of the narrowest."""
        if self.probing_width:  # the probe period ends: did the window's n-grams earn anything?
            self.probing_width = False
            self.width_probes.outcome(self.probe_hit)
        scores = self.scores()
        best = max(scores, key=lambda w: (scores[w], -w))
        if best == 0 and self.width_probes.idle_step():
            self.probing_width, self.probe_hit = True, False
            return self.ladder[1]
        if best > 0:
            self.width_probes.drafting()
        return best

    def observe(self, k: int, winner: int | None, accepted: int, credit: str | None, width: int, nodes: int) -> None:
        """One step: k n-grams verified, the rank that won (None: no hit) with its accepted tokens and their
        credit ("text" / "window"), the width of the full window that harvested (0: none), trie nodes verified."""
        for r, hits in enumerate(self.rank_hits[:k]):
            hits.observe(accepted if r == winner else 0.0)
        if self.gram_probes.probing:
            self.gram_probes.outcome(winner == k - 1)
        self.g_nodes.observe(nodes)
        self.y_text.observe(accepted if credit == "text" else 0.0)
        if width > 0:
            self.y_win.observe((accepted if credit == "window" else 0.0) / math.log2(1 + width))
            self.probe_hit |= credit == "window" and accepted > 0
