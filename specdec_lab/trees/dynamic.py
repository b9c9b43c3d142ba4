"""Dynamic trees: each step's tree from the drafter's own calibrated confidence, sized on the step cost.

A static tree (`trees.py`) spends its node budget the same way at every step: it is sized on the heads'
*average* accuracies. But a head's softmax probability for its candidate says how likely that candidate is
right at *this* step (EAGLE-2 makes the same observation for its draft's confidence). Raw probabilities are
not accuracies, so they are calibrated on held-out text (`calibration.py`):

    c_k(p) = P(head k's candidate is the target's token | its probability p, the path above it right)

(binned in p, made monotone). A node's value is the probability that the whole path to it is accepted,

    v(r_1..r_d) = Π_{j ≤ d} c_j(p_j[r_j])            (non-increasing along a path: every c ≤ 1)

so popping nodes in decreasing value (best-first) yields a prefix-closed tree at every size n, and the
expected accepted length of the first n nodes is E[L](n) = 1 + Σ v (the bonus counted). The step's tree is
the n that maximises the rate on this device's curve:

    n* = argmax_n  E[L](n) / (t(n + 1) + heads(depth))

On a steep (CPU) curve that is zero to a few nodes — more when the heads are sure, none when they are
not —; on a flat (GPU-like) curve, tens. The heads all read the same hidden state, so head j's candidates
are the children of *every* depth-(j−1) node; heads are computed lazily, head j + 1 only when a chosen
depth-j node's best possible child could still raise the rate.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .confidence import HeadConfidence

__all__ = ["StepTree", "dynamic_tree"]


@dataclass
class StepTree:
    """One step's dynamic tree: rank paths (parents first), the token of each, and what was expected."""

    paths: list[tuple[int, ...]]
    tokens: list[int]  # (n,) token of each path's node
    parents: list[int]  # (n,) parent node index (0 = root; nodes are 1..n in `paths` order)
    expected_length: float  # 1 + Σ values of the chosen nodes
    heads_run: int  # heads computed this step


def dynamic_tree(
    head: Callable[[int], tuple[Sequence[float], Sequence[int]]],
    confidence: HeadConfidence,
    verify_cost: Sequence[float],
    head_cost: Callable[[int], float],
    max_budget: int,
    max_depth: int,
) -> StepTree:
    """Best-first tree for one step.

    head(j):      (probs, tokens) of head j's (0-based) top-S candidates, computed on first use
    verify_cost:  t(n) for n = 1..max_budget+1 tokens, as a list (index n − 1)
    head_cost(d): seconds for computing heads 1..d
    """
    if max_depth < 1 or max_budget < 1:
        return StepTree([], [], [], 1.0, 0)
    computed: dict[int, tuple[list[float], list[int]]] = {}

    def get(j: int):
        if j not in computed:
            probs, tokens = head(j)
            computed[j] = (confidence.values(j, probs), list(tokens))
        return computed[j]

    vals, _ = get(0)
    frontier = [(-v, (r,)) for r, v in enumerate(vals)]  # max-heap on value
    heapq.heapify(frontier)
    chosen: list[tuple[tuple[int, ...], float]] = []
    expected, depth = 1.0, 0
    best_rate, best_n = 1.0 / verify_cost[0], 0  # n = 0: a plain step, no heads needed
    while frontier and len(chosen) < max_budget:
        neg, path = heapq.heappop(frontier)
        chosen.append((path, -neg))
        expected += -neg
        depth = max(depth, len(path))
        n = len(chosen)
        rate = expected / (verify_cost[n] + head_cost(depth))
        if rate > best_rate:
            best_rate, best_n = rate, n
        j = len(path)  # the children of `path` are head j's candidates (0-based)
        if j < max_depth and n < max_budget:
            if j not in computed:
                # compute head j only if its best conceivable child could still raise the rate
                bound = -neg * confidence.best(j)
                if (expected + bound) / (verify_cost[n + 1] + head_cost(j + 1)) <= best_rate:
                    continue
            child_vals, _ = get(j)
            for r, v in enumerate(child_vals):
                heapq.heappush(frontier, (neg * v, (*path, r)))  # -(value · c)
    chosen = chosen[:best_n]
    index = {(): 0} | {path: i for i, (path, _) in enumerate(chosen, start=1)}
    return StepTree(
        paths=[p for p, _ in chosen],
        tokens=[computed[len(p) - 1][1][p[-1]] for p, _ in chosen],
        parents=[index[p[:-1]] for p, _ in chosen],
        expected_length=1.0 + sum(v for _, v in chosen),
        heads_run=len(computed),
    )
