"""One width per batch step: how many tokens each row of a batch may verify, chosen once for the whole forward.

A batched forward pads every row to the widest row's tree (`verify.rows_attention_mask`: B rows × N nodes), so its
price is t(B, N) with N the largest tree, not each row's own size. Rows that size their trees alone each price
t(B, n_b) for their own n_b; one row asking for 6 nodes while seven ask for 2 makes all eight pay t(8, 6). The
planner looks at the step as the forward will run it (how SGLang and vLLM size a batch's speculation: one budget
for the step, the rows filling it by their expected gain; vLLM `AdaptiveVerificationManager.get_num_tokens`):

    each row b has proposed its tree (its own sizer's size n_b, capped at one deeper than the last step's N*),
    nodes in order, parents before children
    g_bj  = P(node j of row b is accepted)          # the product of its ancestors' conditional survival (below);
                                                    # node 0 is the root: g_b0 = 1 (the bonus, always emitted)
    E_b(N) = Σ_{j < min(N, n_b)} g_bj               # tokens row b emits if cut to its first N nodes (bonus counts)
    N*    = argmax_N  Σ_b E_b(N) / price(N)          # N = 1 (every row plain) is always a candidate

where price(N) is t̂(B, N) plus the step's own overhead, the same for every N (the rows have drafted already:
that is spent whatever N is), and every row's tree is cut to its first N* nodes (`Tree.truncate_nodes`: a parent
precedes its children, so a prefix is a tree). The next step's paid drafts are capped one deeper than N*, so a drafter
that pays per token (EAGLE's chain, Medusa's heads) drafts little where little pays, and after a plain step
nothing but in every few steps (one draft: does it pay again?); warm-up and probe steps are uncapped. A cut is
decided before the forward, like any `max_depth` cut: greedy rows emit the target's argmax chain whatever the
tree, and the sampling rules stay exact in distribution.

Survival is learned on the batch itself, per node position, from every verified tree (a table, `Survival`):
a node at depth d that is its parent's r-th child is accepted with probability s(d, r) given its parent was. Its
labels are censored — a node the planner cuts is never verified, so its s is never corrected — hence an optimistic
start (a Beta(1, 1) prior: s = ½), no cut in the first `warmup` steps, and one uncut step every `probe_every`.
What it does not know: which row's draft is better (a long prompt-lookup match and a short one at the same depth
look alike); each row's own sizer already spent that knowledge in choosing n_b.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..trees.tree import Tree

__all__ = ["Survival", "WidthPlanner", "best_width", "width_rates"]

MAX_DEPTH, MAX_RANK = 16, 8  # survival keys are capped: deeper or later nodes share the last cell


@dataclass
class Survival:
    """s(d, r): P(a depth-d node that is its parent's r-th child is accepted | its parent was), learned per step."""

    hits: dict[tuple[int, int], float] = field(default_factory=dict)
    offers: dict[tuple[int, int], float] = field(default_factory=dict)
    prior: tuple[float, float] = (1.0, 1.0)  # Beta(a, b): s = ½ unlabelled (optimistic: cut nodes get no labels)

    @staticmethod
    def keys(tree: Tree) -> list[tuple[int, int]]:
        """(depth, sibling rank) of every node (the root (0, 0)), capped at MAX_DEPTH and MAX_RANK."""
        parents = tree.parents.tolist()
        depth, rank, children = [0] * len(parents), [0] * len(parents), [0] * len(parents)
        for i, p in enumerate(parents[1:], start=1):
            depth[i], rank[i] = depth[p] + 1, children[p]
            children[p] += 1
        return [(min(d, MAX_DEPTH), min(r, MAX_RANK)) for d, r in zip(depth, rank, strict=True)]

    def s(self, key: tuple[int, int]) -> float:
        a, b = self.prior
        return (self.hits.get(key, 0.0) + a) / (self.offers.get(key, 0.0) + a + b)

    def gains(self, tree: Tree) -> list[float]:
        """g_j for every node (the root 1): P(node j is on the accepted path), its ancestors' s multiplied down.
        A node that cannot be accepted (a Lookahead window: candidate False) gains 0 (its subtree too)."""
        parents, keys = tree.parents.tolist(), self.keys(tree)
        cand = tree.candidate.tolist() if tree.candidate is not None else None
        g = [1.0] * len(parents)
        for i, p in enumerate(parents[1:], start=1):
            g[i] = 0.0 if cand is not None and not cand[i] else g[p] * self.s(keys[i])
        return g

    def record(self, tree: Tree, path: Sequence[int]) -> None:
        """A verified `tree` whose accepted path (root first) was `path`: every node whose parent was accepted is
        one offer of its (d, r), and a hit if it was accepted too."""
        on_path = set(path)
        cand = tree.candidate.tolist() if tree.candidate is not None else None
        for i, (p, key) in enumerate(zip(tree.parents.tolist(), self.keys(tree), strict=True)):
            if i == 0 or p not in on_path or (cand is not None and not cand[i]):
                continue
            self.offers[key] = self.offers.get(key, 0.0) + 1.0
            if i in on_path:
                self.hits[key] = self.hits.get(key, 0.0) + 1.0


def width_rates(gains: Sequence[Sequence[float]], price: Callable[[int], float]) -> dict[int, tuple[float, float]]:
    """{N: (Σ_b E_b(N), price(N))} for N = 1 … the largest tree, where gains[b] is row b's g_j in node order (the
    root's 1 first) and price(N) the seconds of a step whose forward runs N nodes per row (module docstring)."""
    widest = max((len(g) for g in gains), default=1)
    cums = []
    for g in gains:  # cum[k] = E_b(k): tokens from the first k nodes (root's 1 = the bonus of a plain step)
        cum, total = [0.0], 0.0
        for x in g:
            total += x
            cum.append(total)
        cums.append(cum)
    return {n: (sum(cum[min(n, len(cum) - 1)] for cum in cums), price(n)) for n in range(1, widest + 1)}


def best_width(gains: Sequence[Sequence[float]], price: Callable[[int], float]) -> tuple[int, float]:
    """N* = argmax_N Σ_b E_b(N) / price(N) (`width_rates`); a smaller N wins a tie. -> (N*, its expected tokens
    per second)."""
    best, best_rate = 1, -1.0
    for n, (tokens, seconds) in width_rates(gains, price).items():
        rate = tokens / seconds
        if rate > best_rate * (1 + 1e-9):
            best, best_rate = n, rate
    return best, best_rate


@dataclass
class WidthPlanner:
    """The batch's width, step by step (module docstring): `cut(trees, price)` before the forward, `record(tree,
    path)` for each row after its acceptance."""

    warmup: int = 8  # steps run uncut first (labels for every position the rows' own sizers offer)
    probe_every: int = 16  # then one uncut step in every this many (the cut positions' labels refreshed)
    retry_every: int = 4  # after a plain step, one draft per row allowed in every this many steps (else none)
    survival: Survival = field(default_factory=Survival)
    steps: int = 0
    widths: list[int] = field(default_factory=list)  # the width each step ran (N* or the widest tree uncut)
    cut_steps: int = 0  # steps where N* was below the widest tree

    def probing(self, step: int | None = None) -> bool:
        """Whether step `step` (1-based; default: the next) runs uncut and uncapped: warm-up or a probe."""
        step = self.steps + 1 if step is None else step
        return step <= self.warmup or step % self.probe_every == 0

    def depth_cap(self) -> int | None:
        """The deepest paid draft worth making in the next step (the loop caps only drafters that price their drafts:
        prompt lookup's are free): one deeper than the width the last step ran (N* − 1 + 1), so a drafter that pays
        per token (EAGLE's chain, Medusa's heads) drafts little where little pays, and the
        position just past the width keeps being labelled. After a plain step (N* = 1) nothing is drafted (0) but
        in every `retry_every`-th step (1: is one draft worth it again?). None (no cap) in warm-up and probe steps."""
        if self.probing() or not self.widths:
            return None
        if self.widths[-1] > 1:
            return self.widths[-1]
        return 1 if (self.steps + 1) % self.retry_every == 0 else 0

    def cut(self, trees: Sequence[Tree | None], price: Callable[[int], float]) -> list[Tree | None]:
        """Every row's tree cut to the step's width N* (None rows stay None); uncut in warm-up and probe steps."""
        probe = self.probing()
        self.steps += 1
        live = [t for t in trees if t is not None]
        widest = max((len(t) for t in live), default=1)
        # a window verified for its logits, not for acceptance (Lookahead's, Jacobi's: candidate False) is the
        # proposer's own machinery and is never cut: such steps run as proposed
        fixed = any(t.candidate is not None and not bool(t.candidate.all()) for t in live)
        if probe or widest == 1 or fixed:
            self.widths.append(widest)
            return list(trees)
        n, _ = best_width([self.survival.gains(t) for t in live], price)
        self.widths.append(n)
        if n >= widest:
            return list(trees)
        self.cut_steps += 1
        return [None if t is None else t.truncate_nodes(n) for t in trees]

    def record(self, tree: Tree, path: Sequence[int]) -> None:
        self.survival.record(tree, path)

    def summary(self) -> dict:
        """Steps, the share cut below the widest tree, the mean width run."""
        return {"steps": self.steps, "cut": round(self.cut_steps / self.steps, 3) if self.steps else None,
                "mean_width": round(sum(self.widths) / len(self.widths), 3) if self.widths else None}  # fmt: skip
