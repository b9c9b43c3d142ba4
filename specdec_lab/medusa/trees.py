"""Medusa trees: rank paths, head accuracies, expected accepted length, optimal trees, hardware-aware size.

Rank paths. Medusa's heads run once per step on the root's hidden state; head d proposes its top-S tokens
for depth d. A tree node is named by its *rank path* (r_1, ..., r_d): its depth-j token is head j's rank-r_j
candidate, and its parent is (r_1, ..., r_{d-1}). FasterDecoding ships trees as lists of such paths
(`medusa_choices`, e.g. `[[0], [0, 0], [1], [0, 1], ...]`), which `Tree.from_rank_paths` turns into a
`Tree`. The root (the empty path) is implicit. A set of paths is a tree iff it is prefix-closed.

Expected accepted length. Under greedy verification a node is accepted iff every token on its path is the
target's token, and siblings carry distinct tokens, so at most one node per depth is accepted and the
number of accepted draft tokens is Σ_v 1[v accepted]. With a[d, i] = P(head d+1's rank-i candidate is the
true token) and heads assumed independent (Medusa's model), P(v accepted) = Π_d a[d, r_d], hence

    E[L] = 1 + Σ_{v in tree} Π_{d=1..depth(v)} a[d-1, r_d]          (the 1 is the bonus token)

`calibrate` measures a from held-out (logits, labels); its `conditional` variant replaces a[d] by
P(head d+1 rank i | heads 1..d had the true token in their top-S), which undoes part of the independence
assumption (a head is more often right on text its predecessors found easy).

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

Hardware-aware size (`choose_budget`). A bigger tree accepts more but costs more: one step costs
t(n + 1) (verify n nodes + the root, a measured `CostCurve`) plus the heads' cost, so we maximise

    rate(n) = E[L](n) / (t(n + 1) + h(depth(n)))      over n = 0..max_budget

n = 0 is the root alone: plain decoding, E[L] = 1 and no heads. On a GPU, where t is flat up to tens of
tokens, this picks tens of nodes; on a CPU, where t grows with n, a handful. When h depends on the depth,
each n is also tried with shallower trees (depth caps 1..K), which can be faster for the same n.
"""

from __future__ import annotations

import ast
import heapq
import itertools
import json
import math
import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ..io import atomic_path, write_json
from .calibration import HeadAccuracies  # the accuracy model trees are built on (re-exported)

__all__ = [
    "RankPath",
    "cartesian_paths",
    "cartesian_size",
    "check_paths",
    "normalize_paths",
    "read_choices",
    "write_choices",
    "HeadAccuracies",
    "node_values",
    "expected_length",
    "greedy_tree",
    "greedy_steps",
    "optimal_tree",
    "brute_force_tree",
    "BudgetChoice",
    "choose_budget",
]

RankPath = tuple[int, ...]  # a rank path (r_1, ..., r_d); () is the root


# ---- rank paths -------------------------------------------------------------------------------------
def _check_tops(tops: Sequence[int]) -> list[int]:
    tops = [operator.index(s) for s in tops]
    if any(s < 1 for s in tops):
        raise ValueError(f"tops must be positive candidate counts per depth, got {tops}")
    return tops


def cartesian_paths(tops: Sequence[int]) -> list[RankPath]:
    """Every rank path of the full tree whose depth-d nodes are the top-`tops[d-1]` of head d.

    Sorted by (len, path): parents come before children. len = Σ_d Π_{j<=d} tops[j] (`cartesian_size`).
    """
    tops = _check_tops(tops)
    return [p for d in range(1, len(tops) + 1) for p in itertools.product(*(range(s) for s in tops[:d]))]


def cartesian_size(tops: Sequence[int]) -> dict:
    """{"nodes": nodes excluding the root, "paths": root-to-leaf paths (= leaves)} of the Cartesian tree."""
    tops = _check_tops(tops)
    widths = list(itertools.accumulate(tops, operator.mul))  # nodes at depth d = Π_{j<=d} tops[j]
    return {"nodes": sum(widths), "paths": widths[-1] if widths else 0}


def check_paths(paths: Sequence[Sequence[int]]) -> None:
    """Raise ValueError unless `paths` are non-empty rank paths of non-negative ints, distinct, prefix-closed."""
    seen: set[RankPath] = set()
    for path in paths:
        if isinstance(path, (str, bytes)) or not isinstance(path, Sequence):
            raise ValueError(f"a rank path must be a list or tuple of ints, got {path!r}")
        if len(path) == 0:
            raise ValueError("empty rank path: the root is implicit, list only the nodes below it")
        for r in path:
            if isinstance(r, bool) or not isinstance(r, int) or r < 0:
                raise ValueError(f"rank path {list(path)} has {r!r}: ranks must be non-negative ints")
        key = tuple(path)
        if key in seen:
            raise ValueError(f"rank path {list(path)} appears twice")
        seen.add(key)
    for key in seen:
        if len(key) > 1 and key[:-1] not in seen:
            raise ValueError(f"rank path {list(key)} has no parent {list(key[:-1])}: paths must be prefix-closed")


def normalize_paths(paths: Sequence[Sequence[int]]) -> list[RankPath]:
    """Validated (`check_paths`) tuples sorted by (len, path): parents before children."""
    paths = _tuples(paths)
    return sorted(paths, key=lambda p: (len(p), p))


def _tuples(paths) -> list[RankPath]:
    """Validated paths as tuples of plain ints, in the order given."""
    paths = [tuple(_rank(r, p) for r in p) for p in _listed(paths)]
    check_paths(paths)
    return paths


def _rank(r, path) -> int:
    """r as a plain int (numpy / 0-d torch integers too); bools and non-integers are a ValueError."""
    if isinstance(r, bool):
        raise ValueError(f"rank path {list(path)} has {r!r}: ranks must be non-negative ints")
    try:
        return operator.index(r)
    except TypeError:
        raise ValueError(f"rank path {list(path)} has {r!r}: ranks must be non-negative ints") from None


def _listed(paths) -> list:
    if isinstance(paths, (str, bytes)) or not isinstance(paths, Sequence):
        raise ValueError(f"expected a list of rank paths, got {type(paths).__name__}")
    out = []
    for p in paths:
        if isinstance(p, (str, bytes)) or not isinstance(p, Sequence):
            raise ValueError(f"a rank path must be a list or tuple of ints, got {p!r}")
        out.append(p)
    return out


def read_choices(path: str | os.PathLike, name: str | None = None) -> list[RankPath]:
    """Rank paths from a JSON file or a FasterDecoding-style `medusa_choices.py`, normalized.

    JSON: a list of lists, or {"name": ..., "choices": [...]}. Python (`.py`): top-level assignments such as
    `mc_sim_7b_63 = [[0], [0, 0], ...]`, parsed with `ast` and read with `ast.literal_eval` (the file is never
    executed). With several list assignments, `name` picks one; without it, there must be exactly one.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"choices file not found: {path}")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        found = _python_choices(text, path)
        if name is not None:
            if name not in found:
                raise ValueError(f"{path}: no assignment named {name!r}; it defines {sorted(found)}")
            choices = found[name]
        elif len(found) == 1:
            choices = next(iter(found.values()))
        else:
            raise ValueError(f"{path}: {len(found)} choice lists {sorted(found)}; pass name= to pick one")
    else:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
        if isinstance(obj, dict):
            if "choices" not in obj:
                raise ValueError(f"{path}: a JSON object needs a 'choices' key, got keys {sorted(obj)}")
            if name is not None and obj.get("name") not in (None, name):
                raise ValueError(f"{path}: holds choices named {obj.get('name')!r}, not {name!r}")
            choices = obj["choices"]
        else:
            choices = obj
    try:
        return normalize_paths(choices)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def _python_choices(text: str, path: Path) -> dict[str, list]:
    """name -> literal list value of every top-level `name = [...]` (non-literal values are skipped)."""
    try:
        module = ast.parse(text, filename=str(path))
    except SyntaxError as err:
        raise ValueError(f"{path}: not valid Python ({err.msg} at line {err.lineno})") from None
    found: dict[str, list] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name):
            continue
        try:
            literal = ast.literal_eval(value)  # literals only: no names, calls or attribute access
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(literal, (list, tuple)) and all(isinstance(p, (list, tuple)) for p in literal):
            found[target.id] = list(literal)  # a list of rank paths (skips e.g. __all__ = ["..."])
    if not found:
        raise ValueError(f"{path}: no top-level `name = [[...], ...]` assignment found")
    return found


def write_choices(path: str | os.PathLike, choices: Sequence[Sequence[int]], name: str | None = None) -> Path:
    """Write normalized rank paths atomically: JSON ({"name", "choices"} when named, else a list of lists),
    or, for a `.py` path, FasterDecoding's `name = [[0], [0, 0], ...]` (name defaults to "medusa_choices")."""
    lists = [list(p) for p in normalize_paths(choices)]
    path = Path(path)
    if path.suffix == ".py":
        name = name or "medusa_choices"
        if not name.isidentifier():
            raise ValueError(f"name {name!r} is not a Python identifier")
        with atomic_path(path) as tmp:
            tmp.write_text(f"{name} = {lists!r}\n", encoding="utf-8")
        return path
    return write_json(path, lists if name is None else {"name": name, "choices": lists}, indent=None)


# ---- expected accepted length ------------------------------------------------------------------------
def _as_acc(acc, at_most_one: bool = False) -> torch.Tensor:
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


def _depth_cap(acc: torch.Tensor, max_depth: int | None) -> int:
    k = acc.shape[0]
    if max_depth is None:
        return k
    if not 0 <= max_depth <= k:
        raise ValueError(f"max_depth must be in 0..{k} (acc has {k} heads), got {max_depth}")
    return max_depth


def node_values(paths: Sequence[Sequence[int]], acc) -> torch.Tensor:
    """(N,) Π_d acc[d-1, r_d] of each path, in the order given; ranks >= S contribute 0."""
    acc = _as_acc(acc)
    paths = _tuples(paths)
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
    acc = _as_acc(acc, at_most_one=True)
    depth = _depth_cap(acc, max_depth)
    _check_budget(budget)
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


def _check_budget(budget: int) -> None:
    if operator.index(budget) < 0:
        raise ValueError(f"budget must be >= 0 nodes, got {budget}")


def _capacity(s: int, depth: int) -> int:
    return cartesian_size([s] * depth)["nodes"] if depth else 0


class _OptimalTables:
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
    acc = _as_acc(acc)
    depth = _depth_cap(acc, max_depth)
    _check_budget(budget)
    tables = _OptimalTables(acc, budget, depth)
    return tables.paths(tables.n)


def brute_force_tree(acc, budget: int, max_depth: int | None = None) -> list[RankPath]:
    """The best tree by enumerating every subtree of min(budget, available) nodes. Tiny cases only."""
    acc = _as_acc(acc)
    depth = _depth_cap(acc, max_depth)
    _check_budget(budget)
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


# ---- hardware-aware budget ---------------------------------------------------------------------------
@dataclass
class BudgetChoice:
    """The node budget that maximises E[L] / step seconds, and the table it was chosen from."""

    budget: int  # nodes below the root (0: plain decoding)
    paths: list[RankPath]
    expected_length: float  # E[L], bonus token included
    seconds: float  # predicted seconds per step: verify(budget + 1) + heads
    rate: float  # expected_length / seconds (tokens per second under the model)
    depth: int = 0  # the tree's depth (= heads that must run)
    table: list[dict] = field(default_factory=list)  # per budget: budget, depth, expected_length, ..., rate
    trees: dict = field(default_factory=dict, repr=False)  # budget -> its paths (every row of the table)

    @property
    def speedup(self) -> float:
        """rate / rate of plain decoding (budget 0), both under the cost model."""
        return self.rate / self.table[0]["rate"] if self.table else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["paths"] = [list(p) for p in self.paths]
        d.pop("trees")
        return d


def choose_budget(
    acc,
    verify_cost: Callable[[int], float],
    max_budget: int = 64,
    head_cost: Callable[[int], float] | float = 0.0,
    builder: str | Callable = "greedy",
    max_depth: int | None = None,
) -> BudgetChoice:
    """argmax over n = 0..max_budget of E[L](tree_n) / (verify_cost(n + 1) + heads); ties -> smaller n.

    verify_cost: t(n) seconds of one verify forward of n tokens (e.g. a `CostCurve`).
    head_cost: seconds for running the heads a tree of depth D needs, `head_cost(D)`, or a constant per
    step; a root-only tree runs no heads. When it is a callable, each n is also tried with depth caps
    1..max_depth and the fastest kept (ties -> shallower).
    builder: "greedy", "optimal", or a callable (acc, n, max_depth) -> paths.
    """
    acc = _as_acc(acc)
    depth = _depth_cap(acc, max_depth)
    _check_budget(max_budget)
    caps = range(1, depth + 1) if callable(head_cost) else [depth]
    build = {cap: _builder(builder, acc, max_budget, cap) for cap in caps if cap >= 1}

    def heads(d: int) -> float:
        if d == 0:
            return 0.0
        return float(head_cost(d)) if callable(head_cost) else float(head_cost)

    table, trees = [], {}
    for n in range(max_budget + 1):
        best = None
        for cap in build if n else [0]:
            paths = build[cap](n) if n else []
            if len(paths) < n:  # this cap holds fewer nodes: the same tree as a smaller budget
                continue
            d = max((len(p) for p in paths), default=0)
            e = expected_length(paths, acc)
            verify, head = float(verify_cost(n + 1)), heads(d)
            row = {"budget": n, "depth": d, "expected_length": e, "verify_seconds": verify, "head_seconds": head}
            row["rate"] = e / (verify + head)
            if best is None or row["rate"] > best[0]["rate"]:
                best = (row, paths)
        if best is not None:
            table.append(best[0])
            trees[n] = best[1]
    for row in table:
        row["speedup"] = row["rate"] / table[0]["rate"]
    pick = max(table, key=lambda r: (r["rate"], -r["budget"]))  # ties -> smaller n
    return BudgetChoice(
        budget=pick["budget"],
        paths=trees[pick["budget"]],
        expected_length=pick["expected_length"],
        seconds=pick["verify_seconds"] + pick["head_seconds"],
        rate=pick["rate"],
        depth=pick["depth"],
        table=table,
        trees=trees,
    )


def _builder(builder, acc: torch.Tensor, max_budget: int, cap: int) -> Callable[[int], list[RankPath]]:
    """n -> paths for n <= max_budget, sharing work across n (greedy: prefixes; DP: one table)."""
    if builder == "greedy":
        order = [st["path"] for st in greedy_steps(acc, max_budget, cap)]
        return lambda n: normalize_paths(order[:n])
    if builder == "optimal":
        tables = _OptimalTables(acc, max_budget, cap)
        return lambda n: tables.paths(min(n, tables.n))
    if callable(builder):
        return lambda n: normalize_paths(builder(acc, n, cap))
    raise ValueError(f"unknown builder {builder!r}: use 'greedy', 'optimal' or a callable (acc, n, max_depth)")
