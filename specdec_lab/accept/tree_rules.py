"""Exact speculative sampling on branching trees: one recursion, three ways siblings are drawn.

Notation as in `accept/`: p = the target's (warped) distribution of the next token, q = the distribution a
draft token was drawn from. A step walks down from the root over candidate children only (`Tree.candidate`),
in index order; at an accepted node u with target residual p (at first p = warp(logits[u])) and candidate
children c_1..c_m carrying tokens x_1..x_m:

    for j = 1..m:   q_j = the distribution x_j had given everything above it and the siblings drawn before it
                    accept x_j with probability min(1, p(x_j) / q_j(x_j))        (tested as u·q_j(x_j) < p(x_j))
                      -> u := c_j, p := warp(logits[c_j]), continue with c_j's children
                    else p := norm(max(0, p − q_j))                              (the residual)
    all rejected:   bonus ~ p; the step ends                                     (a leaf: bonus ~ warp(logits[u]))

Why it is exact. Let E_j be the token this loop emits at u when it starts at sibling j with residual p_j.
Claim: P(E_j = y) = p_j(y) for every y. For j = m + 1 it is the bonus. For j ≤ m, x_j ~ q_j and the coin
is independent of the later siblings, and p_{j+1} = norm(max(0, p_j − q_j)) depends on the siblings before
x_j only (through q_j), not on x_j's value; so whatever x_j was, E_{j+1} ~ p_{j+1} (induction, with x_{j+1}'s
own conditional q_{j+1}), and

    P(E_j = y) = q_j(y)·min(1, p_j(y)/q_j(y)) + (1 − β)·p_{j+1}(y)
               = min(p_j, q_j)(y) + max(0, p_j − q_j)(y) = p_j(y),      β = Σ_v min(p_j, q_j)(v)

(Leviathan et al. 2023's lemma, applied once per sibling). Hence the first token a step emits after u
follows p(· | context, path to u); once x_j is accepted the walk restarts one level down with the target's
fresh p(· | ..., x_j) and c_j's sibling set, drawn given its path, so by induction on depth every token the
step emits — and, the next step's tree depending on the past only, every later one — is distributed as
autoregressive sampling from p. Invariants this needs of a proposer: (1) a sibling set is drawn after and
given everything above it, never from the verification's own randomness; (2) `Tree.sibling_draw` says how,
so q_j is known:

* `accept_one_hot` — "deterministic" siblings (Medusa / EAGLE-2/3 / SGLang top-k, n-gram pool matches):
  q_j = one-hot(x_j). Then min(1, p/q) = p(x_j) and max(0, p − e_{x_j}) is p with x_j set to 0, so after a
  rejection p(x_j) := 0 and p is renormalised by 1 − p(x_j). Telescoping, sibling j is emitted with probability
  Π_{i<j}(1 − p_i(x_i))·p_j(x_j) = p(x_j): every sibling with exactly its target probability, the bonus from p
  restricted to the non-siblings. A repeated token meets p = 0 at its second copy: never accepted twice.
  SGLang's kernel draws one coin per level and accepts the first j with u ≤ Σ_{i≤j} p(x_i) — the same
  distribution, written as an inverse CDF (it relies on distinct siblings: a duplicate would add p(x) twice).
  The rule is exact for siblings drawn in ANY way, sampled ones included: conditioning on the whole drawn
  sibling set (allowed: it is independent of the coins) makes every q_j one-hot. What q buys is acceptance,
  min(1, p/q) ≥ p, not exactness.
* `accept_multi_draft` — "sampled" siblings, each drawn independently from its own q row (SpecInfer's
  multi-step speculative sampling, arXiv 2305.09781, Algorithm 2; i.i.d. when the rows agree): independent
  draws make q_j the row itself. SpecInfer tries the children in random order; i.i.d. siblings are
  exchangeable, so index order is the same rule.
* `accept_without_replacement` — siblings drawn one after another from the parent's q without replacement
  (Recursive Speculative Decoding, arXiv 2402.14160; EAGLE-1's `cart_candidates_prob`): q_j = q with every
  earlier sibling's token removed and renormalised — earlier non-candidates included, they were drawn too.
  A rejected x_i already has residual mass 0 (rejection needs p(x_i) < q_i(x_i)), so removing it from q moves
  q_j towards p_j: more is accepted than with i.i.d. siblings.

What breaks exactness is a q_j that is not x_j's distribution given what the rule conditions on: the
multi-draft ratio on siblings drawn without replacement (their later q is not the row), a ratio test with q
followed by the one-hot residual, a residual left unnormalised, a rejected sibling tried again
(`accept.exactness.BROKEN_RULES`; tests/test_tree_sampling.py measures each).

`accept_exact` dispatches on `tree.sibling_draw`. `multi_draft` and `without_replacement` refuse a tree drawn
otherwise (each would use a wrong q_j); `one_hot` takes any tree. At temperature 0 p is
one-hot and each rule accepts exactly what `accept_greedy` does. The randomness goes through `Coins`, so
`accept.exactness.enumerate_outcomes` can walk every branch and compute the emitted distribution exactly.
"""

from __future__ import annotations

import torch

from ..sampling import GREEDY, Sampling, draw, warp_probs
from ..trees.tree import Tree
from .result import Acceptance

__all__ = [
    "Coins",
    "accept_one_hot",
    "accept_multi_draft",
    "accept_without_replacement",
    "accept_exact",
    "sibling_q",
    "residual",
]


class Coins:
    """The randomness of a rule: a Bernoulli acceptance and a categorical draw, from `generator`.

    The two calls are all a rule may draw; `accept.exactness.Enumerator` implements them by branching.
    """

    def __init__(self, generator: torch.Generator | None = None, device: torch.device | str = "cpu"):
        self.generator, self.device = generator, device

    def accept(self, p_x: float, q_x: float) -> bool:
        """True with probability min(1, p_x / q_x) (u·q < p; q_x = 0 accepts whenever p_x > 0)."""
        u = float(torch.rand((), generator=self.generator, device=self.device))
        return u * q_x < p_x

    def sample(self, probs: torch.Tensor) -> int:
        """A draw from probs (V,) (not necessarily normalised)."""
        return draw(probs, self.generator)


def sibling_q(tree: Tree, node: int, earlier: list[int], draw: str) -> torch.Tensor | None:
    """(V,) q_j, the distribution node's token had given the siblings drawn before it (None: one-hot).

    earlier: tokens of the siblings before `node` in index order (candidates or not).
    """
    if draw == "deterministic":
        return None
    q = tree.draft_probs[node].float()  # (V,)
    if draw == "sampled" or not earlier:
        return q
    q = q.clone()
    q[torch.tensor(earlier, device=q.device)] = 0.0  # without replacement: earlier draws removed ...
    total = q.sum()
    return q / total if total > 0 else q  # ... and renormalised (mass 0 left: no later sibling can be drawn)


def residual(p: torch.Tensor, q: torch.Tensor | None, x: int) -> torch.Tensor:
    """(V,) norm(max(0, p − q)) after x ~ q was rejected; q None = one-hot at x (p with x set to 0).

    A residual of mass 0 means p == q up to rounding (the rejection had probability 0): p is kept.
    """
    if q is None:
        r = p.clone()
        r[x] = 0.0
    else:
        r = (p - q).clamp_(min=0.0)
    total = r.sum()
    return r / total if total > 0 else p


def _walk(tree: Tree, logits: torch.Tensor, sampling: Sampling, coins: Coins, draw: str) -> Acceptance:
    """The recursion of the module docstring, with q_j from `sibling_q(..., draw)`."""
    cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
    tokens = tree.tokens.tolist()
    node, path = 0, [0]
    while True:
        p = warp_probs(logits[node], sampling)  # (V,) target's next-token distribution after node
        earlier: list[int] = []  # tokens of the siblings tried or skipped so far (draw order)
        accepted = None
        for c in tree.children[node]:
            x = tokens[c]
            if cand[c]:
                q = sibling_q(tree, c, earlier, draw)
                if coins.accept(float(p[x]), 1.0 if q is None else float(q[x])):
                    accepted = c
                    break
                p = residual(p, q, x)
            earlier.append(x)
        if accepted is None:
            return Acceptance(path=path, bonus=coins.sample(p))
        node = accepted
        path.append(node)


def _walk_one_hot(tree: Tree, logits: torch.Tensor, sampling: Sampling, coins: Coins) -> Acceptance:
    """`_walk` for q one-hot, on scalars: the same coins with the same probabilities, one read per level.

    With q_j = one-hot(x_j) the residual after rejecting x_1..x_{j-1} is p with those tokens zeroed, divided by
    what is left, so sibling j's test needs only p(x_j) / (Σp − Σ_{i<j} p(x_i)) (0 for a token already
    rejected: its mass was removed). One gather reads every sibling's p(x) and Σp for the whole level (no
    (V,) residual per sibling, no host read per sibling); the bonus's residual is built once, when the walk
    stops. p is computed only for the nodes the walk reaches.
    """
    cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
    tokens = tree.tokens.tolist()
    node, path = 0, [0]
    while True:
        p = warp_probs(logits[node], sampling)  # (V,) target's next-token distribution after node
        kids = [c for c in tree.children[node] if cand[c]]
        rejected: list[int] = []  # tokens tried and rejected at this level
        accepted = None
        if kids:
            xs = [tokens[c] for c in kids]
            idx = torch.tensor(xs, device=p.device)
            *p_xs, left = torch.cat([p[idx], p.sum()[None]]).tolist()  # p(x_j) for every sibling, and Σp
            for c, x, p_x in zip(kids, xs, p_xs, strict=True):
                p_j = 0.0 if x in rejected or left <= 0 else p_x / left  # the residual's p_j(x_j)
                if coins.accept(p_j, 1.0):
                    accepted = c
                    break
                if x not in rejected:
                    rejected.append(x)
                    left -= p_x
        if accepted is None:
            if rejected:
                r = p.clone()
                r[torch.tensor(rejected, device=p.device)] = 0.0
                p = r if float(r.sum()) > 0 else p  # mass 0: the rejections had probability 0 (as `residual`)
            return Acceptance(path=path, bonus=coins.sample(p))
        node = accepted
        path.append(node)


def _rule(tree, logits, sampling, generator, coins, draw: str, name: str) -> Acceptance:
    if draw != "deterministic" and tree.sibling_draw != draw:
        raise ValueError(
            f"rule {name!r} is exact for {draw} siblings, this tree's are {tree.sibling_draw} "
            "(accept='exact' picks the rule from the tree)"
        )
    coins = coins if coins is not None else Coins(generator, logits.device)
    if draw == "deterministic":
        return _walk_one_hot(tree, logits, sampling, coins)
    return _walk(tree, logits, sampling, coins, draw)


def accept_one_hot(tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, coins=None, **_):
    """Exact sampling on a tree of deterministic siblings (q one-hot): accept x with probability p(x), else
    p(x) := 0, renormalise, try the next sibling; bonus from the final residual. Derivation: module docstring.
    Exact on sampled siblings too (their q unused), accepting less there than the rule that uses q.

    logits: (N, V) target logits. Returns the accepted path (candidates only) and the bonus token.
    """
    return _rule(tree, logits, sampling, generator, coins, "deterministic", "one_hot")


def accept_multi_draft(tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, coins=None, **_):
    """SpecInfer's multi-step speculative sampling on a tree of independently sampled siblings: accept x_j
    with probability min(1, p(x_j)/q_j(x_j)), else p := norm(max(0, p − q_j)); bonus from the final residual.

    q_j = tree.draft_probs[c_j] (N, V). Derivation: module docstring.
    """
    return _rule(tree, logits, sampling, generator, coins, "sampled", "multi_draft")


def accept_without_replacement(
    tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, coins=None, **_
):
    """Recursive rejection sampling (RSD) on siblings drawn without replacement: as `accept_multi_draft`, with
    q_j = the parent's q without the earlier siblings' tokens, renormalised. Derivation: module docstring.
    """
    return _rule(tree, logits, sampling, generator, coins, "without_replacement", "without_replacement")


_BY_DRAW = {
    "deterministic": accept_one_hot,
    "sampled": accept_multi_draft,
    "without_replacement": accept_without_replacement,
}


def accept_exact(tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, coins=None, **_):
    """The exact rule for the way this tree's siblings were drawn (`tree.sibling_draw`).

    On a chain it is exact speculative sampling (`accept_speculative`'s distribution); on any tree at
    temperature 0 it accepts what `accept_greedy` does.
    """
    return _BY_DRAW[tree.sibling_draw](tree, logits, sampling=sampling, generator=generator, coins=coins)
