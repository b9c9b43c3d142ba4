"""Autoregressive decoding as a proposer that proposes nothing.

Verifying a root-only tree is one ordinary decoding step, so the shared loop with this proposer *is*
greedy (or sampled) autoregressive decoding with a KV cache: the baseline is measured by the same code
as every speculative method, and "equal to autoregressive" compares like with like.
"""

from __future__ import annotations

from .base import Proposer

__all__ = ["AutoregressiveProposer"]


class AutoregressiveProposer(Proposer):
    name = "autoregressive"
