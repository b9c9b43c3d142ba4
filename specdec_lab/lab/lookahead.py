"""Lookahead decoding observed (notebook 07): a proposer that reports its n-gram pool after every step.

    RecordingLookahead(LookaheadConfig(W=4, N=4, G=4))   pass as generate(proposer=...); decodes exactly as
                                                         `LookaheadProposer` does
    viz.lookahead_pool.pool_frame(result)                its trace as one row per step (pool size included)

It lives here, not in viz: it decodes (a proposer subclass), and viz only draws what a decode returned.
"""

from __future__ import annotations

from ..proposers.lookahead import WINDOW, LookaheadProposer

__all__ = ["RecordingLookahead"]


class RecordingLookahead(LookaheadProposer):
    """A LookaheadProposer whose `info()` also reports the pool after the step: `pool_keys` (first tokens),
    `pool_grams` (n-grams) and `pool_window` (of those, harvested from the window and not seen in the
    text). Decoding is unchanged: build it with a `LookaheadConfig` and pass `generate(proposer=...)`."""

    def info(self) -> dict:
        sources = [s for grams in self.pool.table.values() for s in grams.values()]
        return {
            **super().info(),
            "pool_keys": len(self.pool.table),
            "pool_grams": len(sources),
            "pool_window": sources.count(WINDOW),
        }
