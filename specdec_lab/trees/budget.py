"""The tree size that pays on this device: E[L] per second of a step, priced by the one cost model.

A bigger tree accepts more but costs more: one step costs price(n + 1) (verify n nodes + the root, and the
loop's own time: `cost.StepCost.step`) plus the drafter's cost for the tree's depth, so we maximise

    rate(n) = E[L](n) / (price(n + 1) + h(depth(n)))      over n = 0..max_budget

n = 0 is the root alone: plain decoding, E[L] = 1 and no heads. On a GPU, where t is flat up to tens of
tokens, this picks tens of nodes; on a CPU, where t grows with n, a handful. When h depends on the depth,
each n is also tried with shallower trees (depth caps 1..K), which can be faster for the same n.

The trees and their E[L] do not depend on the costs (`tree_options`, built once); the costs are learned
while decoding, so a proposer prices the same options again as they change (`pick_budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import torch

from .build import OptimalTables, as_factors, check_budget, depth_cap, greedy_steps, node_values
from .paths import RankPath, normalize_paths

__all__ = ["BudgetChoice", "TreeOption", "DepthCorrection", "tree_options", "pick_budget", "choose_budget"]


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
    options: dict = field(default_factory=dict, repr=False)  # budget -> its TreeOption (every row of the table)

    @property
    def trees(self) -> dict[int, list[RankPath]]:
        """budget -> its paths, for every row of the table."""
        return {n: list(opt.paths) for n, opt in self.options.items()}

    @property
    def speedup(self) -> float:
        """rate / rate of plain decoding (budget 0), both under the cost model."""
        return self.rate / self.table[0]["rate"] if self.table else float("nan")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["paths"] = [list(p) for p in self.paths]
        d.pop("options")
        return d


@dataclass(frozen=True)
class TreeOption:
    """One candidate tree for a budget: n nodes (below the root) built with depth cap `cap`."""

    budget: int
    depth: int  # the tree's own depth (= heads that must run)
    expected_length: float  # E[L] under the accuracy model, bonus included
    paths: tuple[RankPath, ...]
    by_depth: tuple[float, ...] = ()  # (D,) Σ of node values at depth d = P(accepted length >= d); E[L] = 1 + Σ

    def corrected(self, factors) -> float:
        """E[L] with depth d's acceptance scaled by factors[d - 1] (the last factor for deeper depths):
        1 + Σ_d ρ_d · P(accepted length >= d). No factors: the model's own E[L]."""
        if not factors:
            return self.expected_length
        return 1.0 + sum(v * factors[min(d, len(factors) - 1)] for d, v in enumerate(self.by_depth))


def tree_options(
    acc, max_budget: int = 64, builder: str | Callable = "greedy", max_depth: int | None = None, by_depth: bool = True
) -> list[TreeOption]:
    """Every candidate a budget choice weighs: for n = 0..max_budget the best n-node tree under each depth cap
    1..max_depth (by_depth; else the deepest cap only), with its E[L]. Costs do not enter: built once, the
    options are priced again whenever the cost model has learned (`pick_budget`)."""
    acc = as_factors(acc)
    depth = depth_cap(acc, max_depth)
    check_budget(max_budget)
    caps = range(1, depth + 1) if by_depth else [depth]
    build = {cap: _builder(builder, acc, max_budget, cap) for cap in caps if cap >= 1}
    options = [TreeOption(0, 0, 1.0, ())]
    for n in range(1, max_budget + 1):
        seen = set()
        for cap in build:
            paths = tuple(build[cap](n))
            if len(paths) < n or paths in seen:  # this cap holds fewer nodes, or the same tree as a smaller cap
                continue
            seen.add(paths)
            d = max(len(p) for p in paths)
            values = node_values(paths, acc)  # (N,); E[L] = 1 + their sum (`expected_length`)
            by_depth = tuple(sum(v for p, v in zip(paths, values.tolist(), strict=True) if len(p) == j)
                             for j in range(1, d + 1))  # fmt: skip
            options.append(TreeOption(n, d, 1.0 + float(values.sum()), paths, by_depth))
    return options


def pick_budget(
    options: list[TreeOption],
    verify_cost: Callable[[int], float],
    head_cost: Callable[[int], float] | float = 0.0,
    factors: Sequence[float] = (),
) -> BudgetChoice:
    """argmax over the options of E[L] / (verify_cost(n + 1) + heads(depth)); per n the fastest depth (ties ->
    shallower), overall ties -> smaller n. A root-only tree runs no heads. factors: ρ_d per depth, how much more
    (or less) is accepted than the accuracy model says (`DepthCorrection`); E[L] is corrected by them."""

    def heads(d: int) -> float:
        if d == 0:
            return 0.0
        return float(head_cost(d)) if callable(head_cost) else float(head_cost)

    best: dict[int, tuple[dict, TreeOption]] = {}
    verify = {}
    for opt in options:
        n = opt.budget
        if n not in verify:
            verify[n] = float(verify_cost(n + 1))
        head, e = heads(opt.depth), opt.corrected(factors)
        row = {"budget": n, "depth": opt.depth, "expected_length": e, "verify_seconds": verify[n],
               "head_seconds": head, "rate": e / (verify[n] + head)}  # fmt: skip
        if n not in best or row["rate"] > best[n][0]["rate"]:
            best[n] = (row, opt)
    table = [best[n][0] for n in sorted(best)]
    for row in table:
        row["speedup"] = row["rate"] / table[0]["rate"]
    pick = max(table, key=lambda r: (r["rate"], -r["budget"]))  # ties -> smaller n
    return BudgetChoice(
        budget=pick["budget"],
        paths=list(best[pick["budget"]][1].paths),
        expected_length=pick["expected_length"],
        seconds=pick["verify_seconds"] + pick["head_seconds"],
        rate=pick["rate"],
        depth=pick["depth"],
        table=table,
        options={n: opt for n, (_, opt) in best.items()},
    )


class DepthCorrection:
    """ρ_d: how much more (or less) the verified trees accept at depth d than the accuracy model predicts.

    The accuracies are calibrated on held-out text, and a run's own text is easier or harder: the chance that
    the accepted length reaches depth d moves with it. After every verified tree,

        A_d <- γ·A_d + 1[accepted >= d]        P_d <- γ·P_d + Σ_{nodes v at depth d} value(v)

    for the depths the tree had, and ρ_d = (A_d + w) / (P_d + w): 1 before any evidence (w pseudo-events on
    both sides), the observed ratio once it outweighs them; deeper depths not observed yet take the deepest
    observed ρ. It is the tree's analogue of a chain's α̂ (`draft_length.AcceptanceTracker`): what was
    accepted corrects the model the sizes are chosen on.
    """

    def __init__(self, decay: float = 0.95, weight: float = 1.0):
        self.decay, self.weight = decay, weight
        self.accepted: list[float] = []  # A_d, depth d = index + 1
        self.predicted: list[float] = []  # P_d

    def observe(self, by_depth: Sequence[float], accepted: int) -> None:
        """A tree whose depth-d nodes sum to by_depth[d - 1] (P(accepted length >= d)) accepted `accepted`."""
        for d, p in enumerate(by_depth):
            if d == len(self.accepted):
                self.accepted.append(0.0)
                self.predicted.append(0.0)
            self.accepted[d] = self.decay * self.accepted[d] + (1.0 if accepted > d else 0.0)
            self.predicted[d] = self.decay * self.predicted[d] + p

    def factors(self) -> list[float]:
        return [(a + self.weight) / (p + self.weight) for a, p in zip(self.accepted, self.predicted, strict=True)]


def choose_budget(
    acc,
    verify_cost: Callable[[int], float],
    max_budget: int = 64,
    head_cost: Callable[[int], float] | float = 0.0,
    builder: str | Callable = "greedy",
    max_depth: int | None = None,
) -> BudgetChoice:
    """argmax over n = 0..max_budget of E[L](tree_n) / (verify_cost(n + 1) + heads); ties -> smaller n.

    verify_cost: seconds of a step verifying n tokens, root included (e.g. `StepCost.step`, or a `CostCurve`).
    head_cost: seconds for running the heads a tree of depth D needs, `head_cost(D)`, or a constant per
    step; a root-only tree runs no heads. When it is a callable, each n is also tried with depth caps
    1..max_depth and the fastest kept (ties -> shallower).
    builder: "greedy", "optimal", or a callable (acc, n, max_depth) -> paths.
    """
    options = tree_options(acc, max_budget, builder, max_depth, by_depth=callable(head_cost))
    return pick_budget(options, verify_cost, head_cost)


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
