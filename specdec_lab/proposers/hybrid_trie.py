"""The hybrid proposer's candidate trie: several sources' drafts merged into one token tree, valued, cut to size.

Every source names candidates as (parent node, token) with a raw estimate r of the chance that the token is the
target's given that the path to its parent was accepted: prompt lookup a prior per matched n-gram length,
Medusa a head's calibrated confidence c_j(p), EAGLE its drafter's probability p. Two sources that propose the
same token under the same parent make one node (a trie), which then carries both estimates.

Values. Each source's raw estimates are corrected by what this run's verifies accepted of that source
(`Calibration`, one factor ρ per source and key: a lookup's n-gram length, a model's depth):

    c_s(u) = min(1, ρ_s,key · r_s(u))                       calibrated conditional acceptance, one source
    c(u)   = 1 − Π_s (1 − c_s(u))                           several sources agreeing: independent evidence
    c(u)  <- min(c(u), 1 − Σ c of its more confident siblings)     (mutually exclusive tokens: at most one is
                                                            right; the surest keeps its estimate, the rest share
                                                            what it leaves)
    v(u)   = v(parent) · c(u),   v(root) = 1                P(the path to u is accepted)

v never grows along a path (c <= 1), so the n most valuable nodes form a prefix-closed tree for every n and
E[L](n) = 1 + Σ of their values (bonus included). `Trie.choose` picks the n that pays most per second,

    n* = argmax_n  E[L](n) / (price(n + 1) + drafting)          price: the one cost model (`cost.StepCost`),
                                                                a chain's curve or a tree's as the n nodes are

where drafting is what the sources cost this step (spent whatever n is). `best_rate` prices a list of values
the same way; the proposer uses it on the trie plus a source's expected chain to decide whether running that
source can pay before it runs (`hybrid.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["Calibration", "Node", "Trie", "best_rate"]


class Calibration:
    """ρ per key: how much more (or less) a source's candidates are accepted than its raw estimates say.

    Over the candidates whose parent was accepted (the condition r is about), decayed per step in which
    the key was seen:

        A <- γ·A + Σ 1[accepted]        P <- γ·P + Σ r          ρ = (A + w) / (P + w)

    1 before any evidence (w pseudo-events on both sides), the observed ratio once evidence outweighs them.
    A lookup's r is a constant prior per n-gram length, so ρ·r is then its α̂ per length; a model's r is
    already calibrated on held-out text (Medusa) or its own probability (EAGLE), and ρ follows the text at hand.
    """

    def __init__(self, decay: dict[str, float] | float = 0.9, weight: float = 2.0):
        self.decay, self.weight = decay, weight
        self.accepted: dict[tuple, float] = {}
        self.predicted: dict[tuple, float] = {}

    def factor(self, key: tuple) -> float:
        a, p = self.accepted.get(key, 0.0), self.predicted.get(key, 0.0)
        return (a + self.weight) / (p + self.weight)

    def observe(self, observations: Sequence[tuple[tuple, float, bool]]) -> None:
        """One verified step: (key, raw estimate, accepted) per candidate whose parent was accepted."""
        seen = {key for key, _, _ in observations}
        for key in seen:
            gamma = self.decay.get(key[0], 0.9) if isinstance(self.decay, dict) else self.decay
            self.accepted[key] = gamma * self.accepted.get(key, 0.0)
            self.predicted[key] = gamma * self.predicted.get(key, 0.0)
        for key, raw, accepted in observations:
            self.accepted[key] += float(accepted)
            self.predicted[key] += raw

    def summary(self) -> dict:
        return {":".join(map(str, k)): round(self.factor(k), 3) for k in sorted(self.accepted, key=str)}


@dataclass
class Node:
    """A trie node: its token, parent and depth; each proposing source's (calibration key, raw estimate); the
    sources whose best candidate under this parent it is (their `top`: what a source's expected chain tracks)."""

    token: int
    parent: int  # -1 for the root
    depth: int
    raw: dict[str, tuple[tuple, float]] = field(default_factory=dict)
    top: set[str] = field(default_factory=set)
    value: float = 1.0

    @property
    def label(self) -> str:
        """The sources that proposed it, e.g. "medusa+prompt_lookup" (one name per accepted token)."""
        return "+".join(sorted(self.raw))


class Trie:
    """Candidate nodes of one step, merged by (parent, token); node 0 is the root (module docstring)."""

    def __init__(self, root: int):
        self.nodes = [Node(root, -1, 0)]
        self.index: dict[tuple[int, int], int] = {}  # (parent, token) -> node
        self.children: list[list[int]] = [[]]

    def __len__(self) -> int:
        return len(self.nodes) - 1  # candidates, the root excluded

    def add(self, parent: int, token: int, source: str, key: tuple, raw: float, top: bool = False) -> int:
        """The node of `token` under `parent` (created if new), with `source`'s estimate; -> its index."""
        at = self.index.get((parent, token))
        if at is None:
            at = len(self.nodes)
            self.nodes.append(Node(token, parent, self.nodes[parent].depth + 1))
            self.children.append([])
            self.children[parent].append(at)
            self.index[parent, token] = at
        node = self.nodes[at]
        if source not in node.raw or node.raw[source][1] < raw:  # a source naming it twice: its best estimate
            node.raw[source] = (key, raw)
        if top:
            node.top.add(source)
        return at

    def add_chain(self, tokens: Sequence[int], source: str, key: tuple, raw: float, parent: int = 0) -> list[int]:
        """A chain of tokens below `parent`, each with the same key and estimate (a lookup's continuation)."""
        added = []
        for token in tokens:
            parent = self.add(parent, int(token), source, key, raw, top=True)
            added.append(parent)
        return added

    def evaluate(self, calibration: Calibration, scale: float = 1.0) -> None:
        """Every node's value v (module docstring), parents before children (creation order), times `scale`
        (the tree's own correction: what the merged values still miss, e.g. two sources' correlated guesses)."""
        conditional = [1.0] * len(self.nodes)
        for kids in self.children:
            if not kids:
                continue
            cs = []
            for k in kids:
                miss = 1.0
                for key, raw in self.nodes[k].raw.values():
                    miss *= 1.0 - min(1.0, calibration.factor(key) * raw)
                cs.append(1.0 - miss)
            # Not a proportional rescaling: a confident lookup chain contested by a head's unsure guess would
            # lose value at every depth below it (its first node's c is a factor of all of them).
            left = 1.0
            for i in sorted(range(len(kids)), key=lambda i: -cs[i]):
                conditional[kids[i]] = min(cs[i], left)
                left -= conditional[kids[i]]
        for u in range(1, len(self.nodes)):
            node = self.nodes[u]
            node.value = self.nodes[node.parent].value * conditional[u]
        if scale != 1.0:  # after the products: a parent's value is scaled once, not once per depth
            for node in self.nodes[1:]:
                node.value *= scale

    def ranked(self) -> list[int]:
        """Candidates by decreasing value (ties: creation order, so a parent precedes its children)."""
        return sorted(range(1, len(self.nodes)), key=lambda u: (-self.nodes[u].value, u))

    def best(self, depth: int) -> int | None:
        """The most valuable node at `depth` (0: the root), or None."""
        at = [u for u, n in enumerate(self.nodes) if n.depth == depth]
        return max(at, key=lambda u: (self.nodes[u].value, -u)) if at else None

    def choose(self, chain_price: Sequence[float], tree_price: Sequence[float], drafting: float, max_budget: int,
               max_depth: int) -> tuple[list[int], float, float]:  # fmt: skip
        """(nodes kept, in creation order; E[L]; rate) for the n maximising E[L](n) / (price(n + 1) + drafting):
        price from the chain curve while the n best nodes form a chain, else from the tree curve. Nodes deeper
        than `max_depth` are left out (their descendants too: they are deeper still)."""
        order = [u for u in self.ranked() if self.nodes[u].depth <= max_depth][:max_budget]
        best_n, best_e = 0, 1.0
        best = 1.0 / (chain_price[0] + drafting)
        expected, per_depth, chain = 1.0, {}, True
        for n, u in enumerate(order, start=1):
            expected += self.nodes[u].value
            d = self.nodes[u].depth
            per_depth[d] = per_depth.get(d, 0) + 1
            chain = chain and per_depth[d] == 1
            rate = expected / ((chain_price if chain else tree_price)[n] + drafting)
            if rate > best:
                best, best_n, best_e = rate, n, expected
        return sorted(order[:best_n]), best_e, best


def best_rate(values: Sequence[float], price: Sequence[float], drafting: float, max_budget: int) -> float:
    """max_n (1 + Σ of the n largest values) / (price[n] + drafting), n = 0..max_budget: what a set of node
    values is worth per second (the tree's curve: `Trie.choose` is exact about chains, this is an estimate)."""
    best, expected = 1.0 / (price[0] + drafting), 1.0
    for n, v in enumerate(sorted(values, reverse=True)[:max_budget], start=1):
        expected += v
        best = max(best, expected / (price[n] + drafting))
    return best
