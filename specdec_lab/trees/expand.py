"""Dynamic trees from a drafter whose candidates depend on the node: expand the best nodes level by level.

`dynamic.py` serves drafters whose depth-d candidates are the same under every depth-(d−1) node (Medusa's
heads all read one hidden state). An autoregressive drafter (EAGLE, a small draft model) conditions on the
path: node u's children come from running the drafter on u. EAGLE-2 (Li et al. 2024) grows such a tree by
the drafter's confidence: a node's value is the probability that the whole path to it is accepted,

    v(u) = Π_{w on the path root -> u} c(p_w)          (c: a calibration of the drafter's probability p, or p
                                                        itself — EAGLE-2 finds its draft well calibrated)

    level 0 = [root]
    for d = 1, 2, ...:   one drafter call on `level` -> top-`width` children of each (value v(parent)·c(p))
                         level = the `width` best new nodes (the ones worth expanding next)
    keep the n best nodes over all levels (prefix-closed: c <= 1, so a child never outvalues its parent)

and sizes it on the one cost model instead of a fixed node count: with E[L](n) = 1 + Σ of the n best values,

    n* = argmax_n  E[L](n) / (t(n + 1) + expansions · t_expand)

A level is expanded only while its best conceivable gain (every one of its `width` nodes' children right,
values bounded by their parents') could still raise that rate.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from .dynamic import StepTree

__all__ = ["expanded_tree"]


def expanded_tree(
    expand: Callable[[list[int]], Sequence[tuple[Sequence[float], Sequence[int]]]],
    verify_cost: Sequence[float],
    expand_cost: Callable[[int], float],
    max_budget: int,
    max_depth: int,
    width: int,
    confidence: Callable[[float], float] | None = None,
) -> StepTree:
    """Best nodes of a level-by-level expanded tree for one step.

    expand(nodes):   for each node (0 = root, else 1-based in creation order) its top candidates as
                     (probs, tokens), best first; one drafter call per level
    verify_cost:     t(n) for n = 1..max_budget+1 tokens (index n − 1)
    expand_cost(e):  seconds of e drafter calls
    confidence:      p -> c(p) (None: p itself)
    Returns the chosen nodes (`StepTree.paths` hold each node's creation index path from the root).
    """
    if max_depth < 1 or max_budget < 1 or width < 1:
        return StepTree([], [], [], 1.0, 0)
    calib = confidence or (lambda p: p)
    tokens: list[int] = []  # node i+1's token
    parents: list[int] = []  # node i+1's parent (0 = root)
    values: list[float] = []  # node i+1's value
    depth_of: list[int] = []
    level, level_value = [0], {0: 1.0}
    calls, best_rate, chosen = 0, 1.0 / verify_cost[0], []
    for depth in range(1, max_depth + 1):
        children = expand(level)
        calls += 1
        new = []
        for node, (probs, toks) in zip(level, children, strict=True):
            for p, tok in list(zip(probs, toks, strict=True))[:width]:
                tokens.append(int(tok))
                parents.append(node)
                values.append(level_value[node] * calib(float(p)))
                depth_of.append(depth)
                new.append(len(tokens))
        # the n best nodes so far (ties: earlier nodes first, so parents precede their children)
        order = heapq.nsmallest(max_budget, range(len(values)), key=lambda i: (-values[i], i))
        expected = 1.0
        for n, i in enumerate(order, start=1):
            expected += values[i]
            rate = expected / (verify_cost[n] + expand_cost(calls))
            if rate > best_rate:
                best_rate, chosen = rate, order[:n]
        level = heapq.nsmallest(width, new, key=lambda u: (-values[u - 1], u))
        level_value = {u: values[u - 1] for u in level}
        if depth == max_depth or not level:
            break
        # expand the next level only if its best conceivable nodes (values up to their parents') could pay
        gain = sorted((level_value[u] for u in level for _ in range(width)), reverse=True)
        n0 = min(len(order), max_budget)
        bound = 1.0 + sum(values[i] for i in order[:n0])
        could = 0.0
        for j, g in enumerate(gain, start=1):
            if n0 + j > max_budget:
                break
            bound += g
            could = max(could, bound / (verify_cost[n0 + j] + expand_cost(calls + 1)))
        if could <= best_rate:
            break
    keep = sorted(chosen)  # creation order: parents before children
    index = {0: 0} | {node + 1: j for j, node in enumerate(keep, start=1)}

    def path(u: int) -> tuple[int, ...]:
        out = []
        while u:
            out.append(u)
            u = parents[u - 1]
        return tuple(reversed(out))

    return StepTree(
        paths=[path(i + 1) for i in keep],
        tokens=[tokens[i] for i in keep],
        parents=[index[parents[i]] for i in keep],
        expected_length=1.0 + sum(values[i] for i in keep),
        heads_run=calls,
    )
