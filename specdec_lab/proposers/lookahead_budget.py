"""How much lookahead pays on this machine: Lookahead decoding's W="auto" (lookahead.py).

Both of Lookahead's branches cost nodes in every verify forward. On a GPU a forward of 50 tokens costs
about what one of 1 does, so LADE verifies everything and runs a wide window; on a CPU it costs several
steps, and both must earn their nodes. Two choices, each maximising expected tokens per second on the
measured tree verify cost curve t(n) (`cost.cost_curve_for(model, ..., tree=True)`):

Per step, how many of the root's n-grams to verify (most recently added first, merged as a trie):

    k* = argmax_{0 <= k <= offered}  (1 + h_0 + ... + h_{k-1}) / t(1 + window nodes + trie nodes of the first k)

h_r the accepted tokens per step credited to the rank-r n-gram (the lowest-ranked one that offered the
accepted tokens), measured in the steps that verified rank r. k = 0 with no window is plain decoding,
k >= 1 with no window prompt-lookup-like verification of the pool.

Every `adapt_every` steps, the window width from {0, 1, 2, 4, ..., max_window}:

    W* = argmax_W  (1 + y_text + y_win · log2(1 + W)) / t(1 + (N − 1)·W + ĝ)

y_text the accepted tokens per step credited to n-grams of the text (prompt and output: hits the window
did not cause), y_win those credited to window n-grams per log2(1 + W) (the paper finds the step
compression grows about linearly in the log of the lookahead FLOPs), ĝ the verified trie nodes per step.

An estimate that is not being measured (a rank not verified, the window's while W = 0) drifts back to its
prior, so what was given up is tried again later: the price of a stale "no" is bounded, as in
`cost.DraftLength`'s probes. Priors: h_r = 0.5 · 2^−r (about prompt lookup's for a match), y_text = 0.3,
y_win = 0.1 (what W = 4, N = 4 measured on SmolLM2-135M chat answers: ~0.08).
"""

from __future__ import annotations

import math

from ..cost import CostCurve

__all__ = ["Estimate", "LookaheadBudget"]


class Estimate:
    """An exponential moving average that drifts back to its prior while nothing is observed."""

    def __init__(self, prior: float, decay: float = 0.9, recover: float = 0.02):
        self.prior, self.decay, self.recover, self.value = prior, decay, recover, prior

    def observe(self, x: float) -> None:
        self.value = self.decay * self.value + (1 - self.decay) * x

    def idle(self) -> None:
        self.value += self.recover * (self.prior - self.value)


class LookaheadBudget:
    """W="auto": the window width every few steps, and the n-grams to verify every step (module docstring)."""

    def __init__(self, curve: CostCurve, N: int, G: int, max_window: int):
        self.curve, self.levels = curve, N - 1
        self.ladder = sorted({0, max_window} | {2**k for k in range(max_window.bit_length())})  # 0, 1, 2, 4, ...
        self.rank_hits = [Estimate(prior=0.5 * 0.5**r) for r in range(G)]  # h_r
        self.y_text = Estimate(prior=0.3)
        self.y_win = Estimate(prior=0.1)
        self.g_nodes = Estimate(prior=float(N - 1), recover=0.0)  # ĝ; always observed

    def grams(self, trie_nodes: list[int], window_nodes: int) -> int:
        """k*: trie_nodes[k] = nodes of the first k n-grams' trie (trie_nodes[0] = 0). Ties: fewer."""
        t, base, best, best_score, gain = self.curve, 1 + window_nodes, 0, 0.0, 1.0
        for k, nodes in enumerate(trie_nodes):
            if k > 0:
                gain += self.rank_hits[k - 1].value
            score = gain / t(base + nodes)
            if score > best_score:
                best, best_score = k, score
        return best

    def scores(self) -> dict[int, float]:
        """{W: expected tokens per second} for each width of the ladder."""
        out = {}
        for w in self.ladder:
            tokens = 1 + self.y_text.value + self.y_win.value * math.log2(1 + w)
            out[w] = tokens / self.curve(1 + self.levels * w + self.g_nodes.value)
        return out

    def width(self) -> int:
        """W*; ties go to the narrower window."""
        scores = self.scores()
        return max(scores, key=lambda w: (scores[w], -w))

    def observe(self, k: int, winner: int | None, accepted: int, credit: str | None, width: int, nodes: int) -> None:
        """One step: k n-grams verified, the rank that won (None: no hit) with its accepted tokens and their
        credit ("text" / "window"), the width of the full window that harvested (0: none), trie nodes verified."""
        for r, hits in enumerate(self.rank_hits):
            if r < k:
                hits.observe(accepted if r == winner else 0.0)
            else:
                hits.idle()
        self.g_nodes.observe(nodes)
        self.y_text.observe(accepted if credit == "text" else 0.0)
        if width > 0:
            self.y_win.observe((accepted if credit == "window" else 0.0) / math.log2(1 + width))
        else:
            self.y_win.idle()
