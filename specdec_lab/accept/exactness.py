"""The exact distribution of what a tree rule emits, by walking every branch of its randomness.

A decoding episode (propose a tree, verify it with a rule, repeat until n tokens are out) draws from two
sources only: the proposer's sibling draws and the rule's `Coins` (an acceptance Bernoulli, a categorical
bonus). `enumerate_outcomes` runs the episode once per branch of that randomness — replaying a script of
choices, branching at every new choice point — and sums each branch's probability into its outcome. The
result is the exact P(t_1..t_n) under the rule, to rounding, with no sampling noise: a rule is exact iff
its total variation from autoregressive sampling (`autoregressive_joint`) is zero. The episodes call the real
rules on real `Tree`s; only the randomness is replaced.

Toy models: `TableLM` gives context-dependent logits for any prefix (a fixed random function of the prefix);
a draft is a noisy copy of the target's table, so q overlaps p without equalling it. `propose` fills a tree
shape (parents, candidate flags) with tokens drawn as `Tree.sibling_draw` says: top-k of q in rank order
(deterministic), i.i.d. from q (sampled), or one after another from q without the earlier siblings.

Deliberately broken rules (`BROKEN_RULES`) show the test has teeth: no renormalisation of the residual, q
used in the ratio but ignored in the residual, a rejected sibling retried, siblings drawn without
replacement verified as if i.i.d., and two flaws of Traversal Verification (`accept_traversal`). (Ignoring
q altogether — the one-hot rule on sampled siblings — is not among them: it is exact, see `accept.tree_rules`.)
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence

import torch

from ..sampling import Sampling, warp_probs
from ..trees.tree import Tree
from .result import Acceptance
from .traversal import broken_traversal
from .tree_rules import Coins, residual, sibling_q

__all__ = [
    "ScriptedCoins",
    "enumerate_outcomes",
    "TableLM",
    "propose",
    "run_episode",
    "rule_joint",
    "step_accepted",
    "autoregressive_joint",
    "total_variation",
    "g_test",
    "BROKEN_RULES",
]


# ---- exhaustive randomness ----------------------------------------------------------------------------
class ScriptedCoins(Coins):
    """`Coins` that follow a script of option indices, take option 0 past its end, and record each choice.

    weight: the probability of the choices taken so far (their product); zero-probability options are
    never offered, a sure outcome is not a choice point.
    """

    def __init__(self, script: Sequence[int] = ()):
        super().__init__()
        self.script = list(script)
        self.taken: list[int] = []
        self.options: list[int] = []  # options offered at each choice point
        self.weight = 1.0

    def _choose(self, probs: list[float]) -> int:
        pos = len(self.taken)
        k = self.script[pos] if pos < len(self.script) else 0
        self.taken.append(k)
        self.options.append(len(probs))
        self.weight *= probs[k]
        return k

    def accept(self, p_x: float, q_x: float) -> bool:
        if p_x <= 0:
            return False
        a = 1.0 if q_x <= 0 else min(1.0, p_x / q_x)  # what u·q < p gives for u ~ U[0, 1)
        return a >= 1.0 or self._choose([a, 1.0 - a]) == 0

    def sample(self, probs: torch.Tensor) -> int:
        probs = probs.tolist()
        support = [v for v, pv in enumerate(probs) if pv > 0]
        if len(support) == 1:
            return support[0]
        total = sum(probs[v] for v in support)
        return support[self._choose([probs[v] / total for v in support])]


def enumerate_outcomes(run: Callable[[Coins], object]) -> dict:
    """{outcome: probability} of run(coins) over every branch of its randomness (depth-first replay)."""
    dist: dict = defaultdict(float)
    stack: list[list[int]] = [[]]
    while stack:
        script = stack.pop()
        coins = ScriptedCoins(script)
        dist[run(coins)] += coins.weight
        for pos in range(len(script), len(coins.taken)):  # new choice points: their other options
            stack.extend(coins.taken[:pos] + [alt] for alt in range(1, coins.options[pos]))
    return dict(dist)


# ---- toy models and proposer --------------------------------------------------------------------------
class TableLM:
    """Logits (V,) after any prefix: scale·N(0, 1) seeded by (seed, prefix); `base` + noise·N(0, 1) if given."""

    def __init__(self, vocab: int, seed: int, scale: float = 1.5, base: TableLM | None = None, noise: float = 1.0):
        self.vocab, self.seed, self.scale, self.base, self.noise = vocab, seed, scale, base, noise
        self.memo: dict[tuple[int, ...], torch.Tensor] = {}

    def __call__(self, prefix: tuple[int, ...]) -> torch.Tensor:
        if prefix not in self.memo:
            gen = torch.Generator().manual_seed(zlib.crc32(repr((self.seed, prefix)).encode()))
            z = torch.randn(self.vocab, generator=gen)
            self.memo[prefix] = z * self.scale if self.base is None else self.base(prefix) + self.noise * z
        return self.memo[prefix]

    def probs(self, prefix: tuple[int, ...], sampling: Sampling) -> torch.Tensor:
        """(V,) warp_probs(self(prefix), sampling), memoized."""
        key = (prefix, sampling)
        if key not in self.memo:
            self.memo[key] = warp_probs(self(prefix), sampling)
        return self.memo[key]


def propose(
    parents: Sequence[int],
    candidate: Sequence[bool],
    prefix: tuple[int, ...],
    draft: TableLM,
    sampling: Sampling,
    draw: str,
    coins: Coins,
    root: int = 0,
) -> Tree:
    """Fill the shape (parents in topological order, candidate flags) with draft tokens drawn as `draw` says.

    A node's q = warp(draft(prefix + its parent's path)). Deterministic: the r-th sibling is q's rank-r
    token (ties broken by the raw draft logits). Sampled: each sibling ~ q. Without replacement: ~ q without
    the earlier siblings; a sibling with no mass left to draw from is left out, with its subtree.
    """
    keep = {0: 0}  # shape node -> tree node
    tokens, tree_parents, cand, rows = [root], [-1], [True], [torch.zeros(draft.vocab)]
    paths: list[tuple[int, ...]] = [()]  # the tree node's tokens below the root
    earlier: dict[int, list[int]] = defaultdict(list)  # tree parent -> its children's tokens, draw order
    for i in range(1, len(parents)):
        if parents[i] not in keep:
            continue
        up = keep[parents[i]]
        q = draft.probs(prefix + paths[up], sampling)  # (V,)
        before = earlier[up]
        if draw == "deterministic":
            # rank by q, ties (q's zeros under greedy or top-p) by the raw draft logits, as a real top-k does:
            # otherwise a one-hot q at T = 0 makes every sibling after the first an arbitrary zero-q token
            by_logit = torch.sort(draft(prefix + paths[up]).double(), descending=True, stable=True).indices
            x = int(by_logit[torch.sort(q[by_logit], descending=True, stable=True).indices[len(before)]])
        elif draw == "sampled":
            x = coins.sample(q)
        else:
            rest = q.clone()
            rest[before] = 0.0
            if rest.sum() <= 0:
                continue
            x = coins.sample(rest)
        keep[i] = len(tokens)
        tokens.append(x)
        tree_parents.append(up)
        cand.append(bool(candidate[i]))
        rows.append(q)
        paths.append(paths[up] + (x,))
        before.append(x)
    return Tree(
        torch.tensor(tokens),
        torch.tensor(tree_parents),
        candidate=torch.tensor(cand),
        draft_probs=None if draw == "deterministic" else torch.stack(rows),
        sibling_draw=draw,
        meta={"paths": paths},
    )


def _depths(parents: Sequence[int]) -> list[int]:
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    return depth


def run_episode(
    rule: Callable[..., Acceptance],
    target: TableLM,
    draft: TableLM,
    sampling: Sampling,
    parents: Sequence[int],
    candidate: Sequence[bool],
    draw: str,
    n: int,
    coins: Coins,
) -> tuple[int, ...]:
    """The first n tokens of decoding with `rule`: each step proposes the shape cut to the depth the budget
    allows (a path of depth d emits d + 1 tokens, as in `generate`), verifies it, emits path + bonus."""
    depth = _depths(parents)
    emitted: list[int] = []
    while len(emitted) < n:
        kept = [i for i in range(len(parents)) if depth[i] <= n - len(emitted) - 1]  # a prefix: topological
        prefix = tuple(emitted)
        tree = propose([parents[i] for i in kept], [candidate[i] for i in kept], prefix, draft, sampling, draw, coins)
        logits = torch.stack([target(prefix + path) for path in tree.meta["paths"]])  # (N, V)
        acc = rule(tree, logits, sampling=sampling, coins=coins)
        emitted += tree.tokens[acc.path[1:]].tolist() + [acc.bonus]
    return tuple(emitted[:n])


def rule_joint(rule, target, draft, sampling, parents, candidate, draw, n) -> dict[tuple[int, ...], float]:
    """Exact {t_1..t_n: probability} under `rule` (every branch of drafts and coins enumerated)."""
    return enumerate_outcomes(
        lambda coins: run_episode(rule, target, draft, sampling, parents, candidate, draw, n, coins)
    )


def step_accepted(rule, target, draft, sampling, parents, candidate, draw) -> float:
    """Exact expected number of draft tokens one step accepts (the first step, whole shape)."""

    def accepted(coins: Coins) -> int:
        tree = propose(parents, candidate, (), draft, sampling, draw, coins)
        logits = torch.stack([target(path) for path in tree.meta["paths"]])  # (N, V)
        return rule(tree, logits, sampling=sampling, coins=coins).accepted_draft

    return sum(k * prob for k, prob in enumerate_outcomes(accepted).items())


def autoregressive_joint(target: TableLM, sampling: Sampling, n: int) -> dict[tuple[int, ...], float]:
    """Exact {t_1..t_n: Π_i p(t_i | t_<i)} of plain sampling from the warped target (zeros left out)."""
    joint = {}
    for seq in itertools.product(range(target.vocab), repeat=n):
        prob = 1.0
        for i, t in enumerate(seq):
            prob *= float(warp_probs(target(seq[:i]), sampling).double()[t])
            if prob == 0.0:
                break
        if prob > 0.0:
            joint[seq] = prob
    return joint


def total_variation(a: dict, b: dict) -> float:
    """½ Σ |a − b| over the union of outcomes."""
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


def g_test(counts: dict, probs: dict, min_expected: float = 5.0) -> dict:
    """G-test (likelihood ratio) of sampled `counts` {outcome: n} against `probs` {outcome: p}.

    Cells with expected count < min_expected are pooled (the pool merged into the smallest cell if it is
    itself too small). An outcome of probability 0 that occurred gives p_value 0. Returns {"g", "dof", "p_value"}.
    """
    from scipy.stats import chi2

    if any(n > 0 and probs.get(k, 0.0) <= 0 for k, n in counts.items()):
        return {"g": float("inf"), "dof": 0, "p_value": 0.0}
    total = sum(counts.values())
    cells = sorted(probs, key=lambda k: -probs[k])
    obs = [counts.get(k, 0) for k in cells]
    exp = [probs[k] * total for k in cells]
    big = [i for i, e in enumerate(exp) if e >= min_expected]
    o = [obs[i] for i in big] + [sum(obs) - sum(obs[i] for i in big)]
    e = [exp[i] for i in big] + [sum(exp) - sum(exp[i] for i in big)]
    if e[-1] < min_expected:  # too little pooled mass for a cell of its own: into the smallest
        o[-2] += o[-1]
        e[-2] += e[-1]
        o, e = o[:-1], e[:-1]
    g = 2.0 * sum(oi * math.log(oi / ei) for oi, ei in zip(o, e, strict=True) if oi > 0)
    dof = len(o) - 1
    return {"g": g, "dof": dof, "p_value": float(chi2.sf(g, dof)) if dof > 0 else 1.0}


# ---- deliberately broken rules (counterexamples) --------------------------------------------------------
def _broken(
    draw_as: str | None = None,
    renormalise: bool = True,
    retry: bool = False,
    one_hot_residual: bool = False,
    name: str = "",
):
    """A tree rule with one flaw. draw_as: verify as if siblings were drawn so ("sampled" on siblings drawn
    without replacement: i.i.d. q); renormalise=False: the next sibling is tested against the unnormalised
    residual; retry: a rejected sibling gets a second coin against the same, unreduced p; one_hot_residual:
    the ratio test uses q, the residual after a rejection ignores it (p(x) := 0, as if q were one-hot)."""

    def rule(tree: Tree, logits: torch.Tensor, sampling: Sampling, generator=None, coins=None, **_) -> Acceptance:
        coins = coins if coins is not None else Coins(generator, logits.device)
        draw = draw_as or tree.sibling_draw
        cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
        tokens = tree.tokens.tolist()
        node, path = 0, [0]
        while True:
            p = warp_probs(logits[node], sampling)  # (V,)
            earlier, accepted = [], None
            for c in tree.children[node]:
                x = tokens[c]
                if cand[c]:
                    q = sibling_q(tree, c, earlier, draw)
                    q_x = 1.0 if q is None else float(q[x])
                    if coins.accept(float(p[x]), q_x) or (retry and coins.accept(float(p[x]), q_x)):
                        accepted = c
                        break
                    if one_hot_residual:
                        p = residual(p, None, x)
                    elif renormalise:
                        p = residual(p, q, x)
                    else:
                        p = p.clone() if q is None else (p - q).clamp(min=0.0)
                        if q is None:
                            p[x] = 0.0
                earlier.append(x)
            if accepted is None:
                if float(p.sum()) <= 0:  # an unnormalised residual can run out of mass: as `residual`, keep p
                    p = warp_probs(logits[node], sampling)
                return Acceptance(path=path, bonus=coins.sample(p))
            node = accepted
            path.append(node)

    rule.__name__ = name
    return rule


BROKEN_RULES = {
    "no_renormalisation": _broken(renormalise=False, name="no_renormalisation"),
    "q_ignored_in_residual": _broken(one_hot_residual=True, name="q_ignored_in_residual"),
    "retries_rejected": _broken(retry=True, name="retries_rejected"),
    "without_replacement_as_iid": _broken(draw_as="sampled", name="without_replacement_as_iid"),
    "traversal_stale_weight": broken_traversal("stale_weight"),  # `accept_traversal`'s flaws
    "traversal_token_residual": broken_traversal("token_residual"),
}
