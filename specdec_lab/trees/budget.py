"""The tree size that pays on this device: E[L] per second of a step, priced by the one cost model.

Hardware-aware size (`choose_budget`). A bigger tree accepts more but costs more: one step costs
t(n + 1) (verify n nodes + the root, a measured `CostCurve`) plus the heads' cost, so we maximise

    rate(n) = E[L](n) / (t(n + 1) + h(depth(n)))      over n = 0..max_budget

n = 0 is the root alone: plain decoding, E[L] = 1 and no heads. On a GPU, where t is flat up to tens of
tokens, this picks tens of nodes; on a CPU, where t grows with n, a handful. When h depends on the depth,
each n is also tried with shallower trees (depth caps 1..K), which can be faster for the same n.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import torch

from .build import OptimalTables, as_factors, check_budget, depth_cap, expected_length, greedy_steps
from .paths import RankPath, normalize_paths

__all__ = ["BudgetChoice", "choose_budget"]


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
    acc = as_factors(acc)
    depth = depth_cap(acc, max_depth)
    check_budget(max_budget)
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
        tables = OptimalTables(acc, max_budget, cap)
        return lambda n: tables.paths(min(n, tables.n))
    if callable(builder):
        return lambda n: normalize_paths(builder(acc, n, cap))
    raise ValueError(f"unknown builder {builder!r}: use 'greedy', 'optimal' or a callable (acc, n, max_depth)")
