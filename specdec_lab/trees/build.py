"""Static trees for an accuracy model: expected accepted length, and the best tree of n nodes.

Expected accepted length. Under greedy verification a node is accepted iff every token on its path is the
target's token, and siblings carry distinct tokens, so at most one node per depth is accepted and the
number of accepted draft tokens is Σ_v 1[v accepted]. With a[d, i] = P(depth d+1's rank-i candidate is the
true token) and depths assumed independent (Medusa's model; `trees.accuracy`), P(v accepted) = Π_d a[d, r_d],
hence

    E[L] = 1 + Σ_{v in tree} Π_{d=1..depth(v)} a[d-1, r_d]          (the 1 is the bonus token)

a is measured on held-out text (`trees.accuracy`); its `conditional` variant replaces a[d] by
P(depth d+1 rank i | depths 1..d had the true token in their top-S), which undoes part of the independence
assumption (a drafter is more often right on text its earlier depths found easy).

Best tree for n nodes. Call v's value Π a along its path: its marginal gain in E[L].

* Greedy (`greedy_tree`) adds, n times, the frontier node (a child of a chosen node) of largest value. It is
  *exact* here: each factor is <= 1, so a child's value never exceeds its parent's. Order all nodes by
  (value desc, depth asc, path asc): every parent precedes its children, so the first n nodes of that order
  are prefix-closed, and being the n largest values they beat every n-node set, trees included. Greedy
  picks exactly them (the next node of the order always has its parent chosen, so it is on the frontier).
* Dynamic programming (`optimal_tree`, as in Sequoia) needs no such argument. A node's value is its
  parent's times a[d, r], so the best m-node subtree below a depth-d node depends only on (d, m):

      F(D, 0) = 0,  F(D, m > 0) = -inf                                   (D = max depth: no children)
      F(d, m) = max over m_0 + ... + m_{S-1} = m  of  Σ_{i: m_i >= 1} a[d, i] · (1 + F(d+1, m_i - 1))

  a 0/1 knapsack over the S children ranks, O(D·S·n²); E[L] = 1 + F(0, n). It stays exact for any
  nonnegative factors (weights > 1 included, where greedy is not), and cross-checks greedy in the tests.
* `brute_force_tree` enumerates every subtree; for tiny cases only, as the reference.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Sequence

import torch

from .accuracy import HeadAccuracies
from .paths import RankPath, as_rank_paths, cartesian_size, normalize_paths

__all__ = [
    "as_factors",
    "depth_cap",
    "check_budget",
    "OptimalTables",
    "node_values",
    "expected_length",
    "greedy_steps",
    "greedy_tree",
    "optimal_tree",
    "brute_force_tree",
]


# ---- expected accepted length ------------------------------------------------------------------------
def as_factors(acc, at_most_one: bool = False) -> torch.Tensor:
    """(K, S) float64 factor matrix from a tensor, nested list, or HeadAccuracies (its independent model)."""
    if isinstance(acc, HeadAccuracies):
        acc = acc.top
    acc = torch.as_tensor(acc, dtype=torch.float64).cpu()
    if acc.ndim != 2:
        raise ValueError(f"acc must be a (K, S) matrix (heads x ranks), got shape {tuple(acc.shape)}")
    if not torch.isfinite(acc).all() or (acc < 0).any():
        raise ValueError("acc must be finite and non-negative")
    if at_most_one and (acc > 1 + 1e-12).any():
        raise ValueError(
            f"acc has entries > 1 (max {acc.max().item():.3g}): greedy is exact only for probabilities; "
            "use optimal_tree"
        )
    return acc


def depth_cap(acc: torch.Tensor, max_depth: int | None) -> int:
    k = acc.shape[0]
    if max_depth is None:
        return k
    if not 0 <= max_depth <= k:
        raise ValueError(f"max_depth must be in 0..{k} (acc has {k} heads), got {max_depth}")
    return max_depth


def node_values(paths: Sequence[Sequence[int]], acc) -> torch.Tensor:
    """(N,) Π_d acc[d-1, r_d] of each path, in the order given; ranks >= S contribute 0."""
    acc = as_factors(acc)
    paths = as_rank_paths(paths)
    k, s = acc.shape
    table = acc.tolist()
    out = []
    for p in paths:
        if len(p) > k:
            raise ValueError(f"rank path {list(p)} is deeper than the {k} heads in acc")
        value = 1.0
        for d, r in enumerate(p):
            value *= table[d][r] if r < s else 0.0
        out.append(value)
    return torch.tensor(out, dtype=torch.float64)


def expected_length(paths: Sequence[Sequence[int]], acc) -> float:
    """E[L] = 1 + Σ_nodes Π_d acc[d-1, r_d]: mean tokens per step, the bonus token included."""
    return 1.0 + float(node_values(paths, acc).sum())


# ---- trees for a node budget -------------------------------------------------------------------------
def greedy_steps(acc, budget: int, max_depth: int | None = None) -> list[dict]:
    """The greedy construction, one dict per node added: step, path, gain (its value), expected_length.

    The heap key (-value, depth, path) makes ties deterministic: shorter paths, then lexicographic.
    """
    acc = as_factors(acc, at_most_one=True)
    depth = depth_cap(acc, max_depth)
    check_budget(budget)
    table, s = acc.tolist(), acc.shape[1]
    frontier = [(-table[0][i], 1, (i,)) for i in range(s)] if depth >= 1 else []
    heapq.heapify(frontier)
    steps, total = [], 1.0
    while frontier and len(steps) < budget:
        neg, d, path = heapq.heappop(frontier)
        total += -neg
        steps.append({"step": len(steps) + 1, "path": path, "gain": -neg, "expected_length": total})
        if d < depth:
            for i in range(s):
                heapq.heappush(frontier, (neg * table[d][i], d + 1, path + (i,)))  # -(value · a[d, i])
    return steps


def greedy_tree(acc, budget: int, max_depth: int | None = None) -> list[RankPath]:
    """The `budget` nodes of largest value (exact for factors <= 1; see the module doc), sorted."""
    return normalize_paths([st["path"] for st in greedy_steps(acc, budget, max_depth)])


def check_budget(budget: int) -> None:
    if operator.index(budget) < 0:
        raise ValueError(f"budget must be >= 0 nodes, got {budget}")


def _capacity(s: int, depth: int) -> int:
    return cartesian_size([s] * depth)["nodes"] if depth else 0


class OptimalTables:
    """F(d, m) and the knapsack choices for all m <= budget, so any size <= budget reconstructs cheaply."""

    def __init__(self, acc: torch.Tensor, budget: int, depth: int):
        table, s = acc.tolist(), acc.shape[1]
        self.s, self.depth = s, depth
        self.n = n = min(budget, _capacity(s, depth))
        neg = -math.inf
        f_next = [0.0] + [neg] * n  # F(D, ·): a depth-D node has no children
        self.f: list[list[float]] = [f_next]
        self.choice: list[list[list[int]]] = []  # choice[d][i][m]: nodes given to child i at total m
        for d in range(depth - 1, -1, -1):
            g = [0.0] + [neg] * n  # best over children 0..i-1 with exactly m nodes
            picks = []
            for i in range(s):
                child = [neg] + [  # child i with j >= 1 nodes: a[d, i] · (1 + F(d+1, j-1))
                    table[d][i] * (1.0 + f_next[j - 1]) if f_next[j - 1] > neg else neg for j in range(1, n + 1)
                ]
                new, pick = list(g), [0] * (n + 1)
                for m in range(1, n + 1):
                    for j in range(1, m + 1):
                        if g[m - j] > neg and child[j] > neg and g[m - j] + child[j] > new[m]:
                            new[m], pick[m] = g[m - j] + child[j], j
                g = new
                picks.append(pick)
            self.choice.insert(0, picks)
            self.f.insert(0, g)
            f_next = g

    def value(self, m: int) -> float:
        """1 + F(0, m) = E[L] of the best m-node tree."""
        return 1.0 + self.f[0][m]

    def paths(self, m: int) -> list[RankPath]:
        out: list[RankPath] = []

        def walk(d: int, m: int, prefix: RankPath) -> None:
            if m == 0:  # (exactly m nodes: a depth-D node always gets m = 0)
                return
            for i in range(self.s - 1, -1, -1):  # undo the knapsack: last child first
                j = self.choice[d][i][m]
                if j:
                    out.append(prefix + (i,))
                    walk(d + 1, j - 1, prefix + (i,))
                    m -= j

        walk(0, m, ())
        return normalize_paths(out)


def optimal_tree(acc, budget: int, max_depth: int | None = None) -> list[RankPath]:
    """The exact best tree of min(budget, available) nodes by dynamic programming (module doc).

    Works for any non-negative factors; its E[L] is `expected_length(paths, acc)` (= 1 + F(0, n)).
    """
    acc = as_factors(acc)
    depth = depth_cap(acc, max_depth)
    check_budget(budget)
    tables = OptimalTables(acc, budget, depth)
    return tables.paths(tables.n)


def brute_force_tree(acc, budget: int, max_depth: int | None = None) -> list[RankPath]:
    """The best tree by enumerating every subtree of min(budget, available) nodes. Tiny cases only."""
    acc = as_factors(acc)
    depth = depth_cap(acc, max_depth)
    check_budget(budget)
    s = acc.shape[1]
    total = _capacity(s, depth)
    if total > 64 or budget > 8:
        raise ValueError(
            f"brute force is for tiny cases (<= 64 candidate nodes, budget <= 8); got {total} nodes "
            f"(S={s}, depth {depth}) and budget {budget}: use optimal_tree"
        )
    n = min(budget, total)
    table = acc.tolist()
    best: list = [-1.0, []]

    def grow(chosen: list[RankPath], value: float, frontier: list[tuple[RankPath, float]]) -> None:
        # each subtree is built once: a node is picked from the frontier only after the earlier-listed ones
        # were skipped for good, and the frontier then gains the picked node's children at the end
        if len(chosen) == n:
            if value > best[0]:
                best[0], best[1] = value, list(chosen)
            return
        for idx, (path, v) in enumerate(frontier):
            kids = [(path + (i,), v * table[len(path)][i]) for i in range(s)] if len(path) < depth else []
            chosen.append(path)
            grow(chosen, value + v, frontier[idx + 1 :] + kids)
            chosen.pop()

    grow([], 0.0, [((i,), table[0][i]) for i in range(s)] if depth else [])
    return normalize_paths(best[1])
