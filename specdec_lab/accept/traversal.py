"""Traversal Verification: leaf-to-root, sequence-level acceptance on a tree (Weng et al., arXiv 2505.12398).

The top-down rules of `accept.tree_rules` decide one token at a time: a node is tried only if its parent was
accepted, with probability min(1, p/q) of its own token. Traversal Verification tries whole paths instead,
deepest first (post-order DFS, leftmost first), with a sequence-level probability, and falls back towards the
root one node at a time. On a chain it is block verification (Sun et al., arXiv 2403.10444), which is
optimal among exact chain rules; the paper extends it to trees and proves it lossless. Only the paper's
abstract and summaries of it could be read here, not its algorithm box: the rule below is derived from its
description (post-order, sequence-level weights min(1, a·p/q), a rejected node's parent updated to the
residual max(0, a·p − q) with weight S/(S + 1 − a)) and the proof is ours, checked by exact enumeration in
tests/test_tree_sampling.py.

The rule. Every node u carries a weight a(u) (the root's is 1) and a target row p_u (at first
warp(logits[u])). A candidate child c of u whose token x was drawn from q_c (`accept.tree_rules.sibling_q`: the
row, the row without earlier siblings, or one-hot) gets the sequence-level weight

    a(c) = min(1, a(u) · p_u(x) / q_c(x))         (a chain: min(1, Π p/q) with the min taken at every prefix)

and the walk at u is

    for each candidate child c_j in index order:
        traverse c_j's subtree; if it accepted a node, that path is the answer
        else (c_j and all below it rejected):  S = Σ_v max(0, a·p_u − q_j)(v)
                                               p_u := max(0, a·p_u − q_j) / S,   a := S / (S + 1 − a)
    all children rejected: u itself is accepted with probability a  -> path to u, bonus ~ p_u
                           else u is rejected (its parent updates as above)

so the first leaf tried is the deepest-leftmost one, with the whole path's probability; a rejection moves
one step towards the root, leaving the rejected node's siblings (and their subtrees) still to try.

Why it is exact. Claim: for a node u with weight a and row p, whose children are drawn as `sibling_draw`
says, the walk at u accepts u-or-below with probability a and then emits a continuation whose first token y
has probability a·p(y) (and whose later tokens follow the target, by induction on depth); it rejects u
with probability 1 − a. A leaf: accept with probability a, bonus ~ p. With children, induct on the siblings
as in `accept.tree_rules`: let sibling j start with (a_j, p_j) and x_j ~ q_j. By the claim one level down, c_j's
subtree is accepted with probability q_j(x)·min(1, a_j·p_j(x)/q_j(x)) = min(q_j, a_j·p_j)(x) for x_j = x,
continuing from (u, x) correctly; it is rejected with probability Σ_x max(0, q_j − a_j·p_j)(x) = 1 − a_j + S_j
(since Σ min(q_j, a_j p_j) = a_j − S_j). Neither (a_{j+1}, p_{j+1}) nor the next sibling's q_{j+1} depends on
x_j's value beyond what q_j already conditioned on, so by induction the rest of the walk accepts with first
token y with probability a_{j+1}·p_{j+1}(y) = S_j/(1 − a_j + S_j) · max(0, a_j p_j − q_j)(y)/S_j. Summed:

    P(first token y) = min(q_j, a_j p_j)(y) + (1 − a_j + S_j) · max(0, a_j p_j − q_j)(y) / (1 − a_j + S_j)
                     = a_j · p_j(y),
    P(u rejected)    = (1 − a_j + S_j) · (1 − a_{j+1}) = (1 − a_j + S_j) · (1 − a_j)/(1 − a_j + S_j) = 1 − a_j.

At the root a = 1: it is never rejected (a stays S/S = 1), and the step emits exactly what autoregressive
sampling from p would. Non-candidate children are skipped (a, p unchanged; their tokens still count as drawn
for `without_replacement`). The proof needs what `accept.tree_rules`'s does: a sibling set is drawn before and
independently of the verification's coins, and q_j is x_j's distribution given the siblings before it.

What it adds. Where q is one-hot (deterministic siblings) a(c) = a(u)·p(x) ≤ a(u) and the walk emits the
longest tree path the target's sample follows, as `accept_one_hot` does: the same expected accepted length
(both are optimal there). With sampled siblings, a path whose later tokens are under-drafted (p/q > 1)
makes up for an earlier over-drafted one, and a rejected parent's subtree is no longer lost: the gain is
measured by `accept.exactness.step_accepted` on the same trees (tests/test_tree_sampling.py).

Broken variants (`accept.exactness.BROKEN_RULES`, each fails the exact test): the weight not updated after a
rejection (`traversal_stale_weight`), and the per-token residual max(0, p − q) instead of the weighted one
(`traversal_token_residual`).
"""

from __future__ import annotations

import torch

from ..sampling import GREEDY, Sampling, warp_probs
from ..trees.tree import Tree
from .result import Acceptance
from .tree_rules import Coins, sibling_q

__all__ = ["accept_traversal"]


def _walk(tree: Tree, probs: torch.Tensor, coins: Coins, flaw: str | None = None) -> Acceptance:
    """The recursion of the module docstring over (N, V) float64 target rows; flaw names a broken variant."""
    cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
    tokens, draw = tree.tokens.tolist(), tree.sibling_draw

    def visit(u: int, a: float) -> tuple[list[int], int] | None:
        """Accepted (path from u down, bonus), or None when u and its whole subtree are rejected."""
        p = probs[u]  # (V,) the target's row at u, updated after each rejected child
        earlier: list[int] = []  # tokens of u's children so far (draw order), for q_j
        for c in tree.children[u]:
            x = tokens[c]
            if cand[c]:
                q = sibling_q(tree, c, earlier, draw)  # (V,) or None = one-hot at x
                q_x = 1.0 if q is None else float(q[x])
                ap_x = a * float(p[x])
                w = min(1.0, ap_x / q_x) if q_x > 0 else float(ap_x > 0)  # sequence-level weight of c
                got = visit(c, w)
                if got is not None:
                    return [u, *got[0]], got[1]
                # c's subtree rejected: the residual at u, weighted by a (the per-token rule's is a = 1)
                scale = 1.0 if flaw == "token_residual" else a
                r = scale * p
                r = r.clone() if q is None else (r - q.double()).clamp_(min=0.0)
                if q is None:
                    r[x] = max(0.0, scale * float(p[x]) - 1.0)  # one-hot q: only x loses mass
                s = float(r.sum())
                if s > 0:
                    p = r / s
                if flaw != "stale_weight" and s + (1.0 - a) > 0:  # else a = 1, S = 0: p == q, never rejected
                    a = s / (s + (1.0 - a))
            earlier.append(x)
        if coins.accept(a, 1.0):  # u itself, with every child rejected: probability a
            return [u], coins.sample(p)
        return None

    path, bonus = visit(0, 1.0)  # the root's weight stays 1: it is always accepted
    return Acceptance(path=path, bonus=bonus)


def accept_traversal(
    tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, coins=None, **_
) -> Acceptance:
    """Traversal Verification (arXiv 2505.12398) on a tree of any `sibling_draw`: leaf-to-root, with
    sequence-level weights min(1, a(parent)·p/q); exact (module docstring). On a chain: block verification.

    logits: (N, V) target logits. Returns the accepted path (candidates only) and the bonus token.
    At temperature 0 p is one-hot and it accepts what `accept_greedy` does.
    """
    coins = coins if coins is not None else Coins(generator, logits.device)
    probs = warp_probs(logits, sampling).double()  # (N, V)
    return _walk(tree, probs, coins)


def broken_traversal(flaw: str):
    """Traversal with one flaw, for the tests: "stale_weight" or "token_residual" (module docstring)."""

    def rule(tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, coins=None, **_):
        coins = coins if coins is not None else Coins(generator, logits.device)
        return _walk(tree, warp_probs(logits, sampling).double(), coins, flaw)

    rule.__name__ = f"traversal_{flaw}"
    return rule
