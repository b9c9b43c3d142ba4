"""Acceptance on a chain: greedy (exact for argmax decoding) and speculative sampling (exact in distribution).

Notation (Leviathan et al.): p = target distribution, q = draft distribution. `logits[i]` is the target's
p(. | context, path to node i), i.e. the distribution of the token that follows node i.

* `accept_greedy` — exact for greedy decoding: output equals autoregressive argmax decoding. Works on any
  tree: the longest root-to-node path whose every token is the target's argmax at its parent.
* `accept_speculative` — exact speculative sampling on a chain (Leviathan et al. 2023, Chen et al. 2023):
  the emitted tokens are distributed exactly as sampling from the (warped) target p would make them.

Both return an `Acceptance` (`result.py`); which rules a method may use is `registry.py`'s.
"""

from __future__ import annotations

import torch

from ..sampling import GREEDY, Sampling, draw, warp_probs
from ..trees.tree import Tree
from .result import Acceptance

__all__ = ["accept_greedy", "accept_speculative", "chain_nodes"]


def accept_greedy(tree: Tree, logits: torch.Tensor, **_) -> Acceptance:
    """Longest root-to-node path whose every token equals the target's argmax at its parent, plus bonus.

    logits: (N, V). Node i (i > 0, a candidate) is accepted iff its parent is accepted and
    tokens[i] == argmax p(. | parent). Siblings carry distinct tokens in a well-formed tree, so at most one
    child of an accepted node matches; if a proposer repeats a sibling, the first one wins. The deepest
    accepted node ends the path (lowest index among equals), and bonus = argmax p(. | that node).
    """
    pred = logits.argmax(dim=-1)  # (N,) the target's greedy token after each node
    if len(tree) == 1:
        return Acceptance(path=[0], bonus=int(pred[0]))
    parents = tree.parents
    match = tree.tokens[1:].to(pred.device) == pred[parents[1:].to(pred.device)]  # (N-1,)
    if tree.candidate is not None:
        match &= tree.candidate[1:].to(pred.device)
    match_l = [True] + match.tolist()
    parents_l = tree._parents_list
    accepted = [True] + [False] * (len(tree) - 1)
    best, best_depth = 0, 0
    depth = [0] * len(tree)
    for i in range(1, len(tree)):
        p = parents_l[i]
        depth[i] = depth[p] + 1
        if match_l[i] and accepted[p]:
            accepted[i] = True
            if depth[i] > best_depth:
                best, best_depth = i, depth[i]
    path = tree.path_to(best)
    return Acceptance(path=path, bonus=int(pred[best]))


def chain_nodes(tree: Tree) -> list[int]:
    """Node indices of the tree's candidate chain, root first (non-candidate nodes are skipped).

    Raises ValueError when a node has two candidate children: chain rules do not handle branching.
    """
    if tree.candidate is None and tree.is_chain:
        return list(range(len(tree)))
    cand = [True] * len(tree) if tree.candidate is None else tree.candidate.tolist()
    chain = [0]
    while True:
        kids = [c for c in tree.children[chain[-1]] if cand[c]]
        if not kids:
            return chain
        if len(kids) > 1:
            raise ValueError(
                f"node {chain[-1]} has {len(kids)} candidate children: the chain rule 'speculative' needs a "
                "chain (use a multi-candidate rule for trees, or greedy decoding)"
            )
        chain.append(kids[0])


def accept_speculative(
    tree: Tree,
    logits: torch.Tensor,
    sampling: Sampling = GREEDY,
    generator: torch.Generator | None = None,
    **_,
) -> Acceptance:
    """Exact speculative sampling along a chain x_1..x_k (Leviathan et al. 2023, Algorithm 1).

    logits: (N, V) target logits; p_i = warp(logits[parent of node i]) is the target's distribution of
    x_i, q_i = tree.draft_probs[i] the draft distribution x_i was drawn from (warped the same way by the
    proposer). `draft_probs=None` means a deterministic proposal: q_i = one-hot(x_i).

        for i = 1..k:  u ~ U[0, 1)
                       accept x_i  iff  u < min(1, p_i(x_i) / q_i(x_i))      (tested as u·q < p)
                       else: bonus ~ norm(max(0, p_i − q_i)); stop
        all accepted:  bonus ~ p_{k+1} = warp(logits[x_k])

    Then P(emit x) = q(x)·min(1, p/q) + (1 − α)·max(0, p − q)(x)/(1 − α) = min(p, q)(x) + max(0, p − q)(x)
    = p(x): the first emitted token is distributed as p, and by induction every later one too. A root-only
    tree is one step of plain sampling (bonus ~ p), so autoregressive sampling uses this rule as well.
    At temperature 0 p is one-hot and the rule reduces to `accept_greedy` on a chain.
    """
    chain = chain_nodes(tree)
    rows = torch.tensor(chain, device=logits.device)
    probs = warp_probs(logits[rows], sampling)  # (k+1, V) p after each chain node
    k = len(chain) - 1
    if k > 0:
        drafts = tree.tokens[chain[1:]].to(logits.device)  # (k,)
        p_x = probs[:-1].gather(1, drafts[:, None])[:, 0]  # (k,) p_i(x_i)
        if tree.draft_probs is None:
            q = None
            q_x = torch.ones_like(p_x)
        else:
            q = tree.draft_probs[chain[1:]].to(device=logits.device, dtype=probs.dtype)  # (k, V)
            q_x = q.gather(1, drafts[:, None])[:, 0]  # (k,) q_i(x_i)
        u = torch.rand(k, generator=generator, device=logits.device)
        ok = (u * q_x < p_x).tolist()
        for i, accepted in enumerate(ok):
            if not accepted:  # reject x_{i+1}: sample the bonus from the residual norm(max(0, p − q))
                if q is None:
                    residual = probs[i].clone()
                    residual[drafts[i]] = 0.0
                else:
                    residual = (probs[i] - q[i]).clamp_(min=0.0)
                if float(residual.sum()) <= 0.0:  # p == q up to rounding: rejection had probability 0
                    residual = probs[i]
                return Acceptance(path=chain[: i + 1], bonus=draw(residual, generator))
    return Acceptance(path=chain, bonus=draw(probs[-1], generator))
