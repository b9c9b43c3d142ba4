"""Acceptance rules: given a verified tree and the target's logits at every node, which path survives.

Notation (Leviathan et al.): p = target distribution, q = draft distribution. `logits[i]` is the target's
p(. | context, path to node i), i.e. the distribution of the token that follows node i.

Every rule returns an `Acceptance`: the accepted path (tree node indices, root first, increasing) and the
bonus token — the token the target itself supplies after the last accepted node (its argmax under greedy,
a sample from p — or from the residual after a rejection — under sampling). A step therefore always emits
len(path) - 1 + 1 >= 1 tokens, so the loop can never stall.

Rules here:
* `accept_greedy` — exact for greedy decoding: output equals autoregressive argmax decoding.
* `accept_speculative` — exact speculative sampling on a chain (Leviathan et al. 2023, Chen et al. 2023):
  the emitted tokens are distributed exactly as sampling from the (warped) target p would make them.

Every rule accepts candidate nodes only (`Tree.candidate`): nodes verified for their logits alone are
never on a path. Which rules fit which method is the method's to say (`AcceptRules`): a chain rule given
a branching tree would be wrong, so `generate` refuses the pairing before decoding starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .sampling import GREEDY, Sampling, warp_probs
from .tree import Tree

__all__ = [
    "Acceptance",
    "accept_greedy",
    "accept_speculative",
    "chain_nodes",
    "ACCEPT_RULES",
    "get_accept_rule",
    "AcceptRules",
    "CHAIN_RULES",
    "GREEDY_ONLY",
]


@dataclass
class Acceptance:
    path: list[int]  # accepted node indices, root (0) first
    bonus: int  # token appended after the path's last node

    @property
    def accepted_draft(self) -> int:
        """Draft tokens accepted (the root is not a draft token)."""
        return len(self.path) - 1


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
                bonus = torch.multinomial(residual, 1, generator=generator)
                return Acceptance(path=chain[: i + 1], bonus=int(bonus))
    bonus = torch.multinomial(probs[-1], 1, generator=generator)
    return Acceptance(path=chain, bonus=int(bonus))


AcceptRule = Callable[..., Acceptance]

ACCEPT_RULES: dict[str, AcceptRule] = {"greedy": accept_greedy, "speculative": accept_speculative}


def get_accept_rule(rule: str | AcceptRule) -> AcceptRule:
    """A rule is called as rule(tree, logits, sampling=Sampling, generator=torch.Generator) -> Acceptance."""
    if callable(rule):
        return rule
    if rule not in ACCEPT_RULES:
        raise ValueError(f"unknown acceptance rule {rule!r}; known: {', '.join(sorted(ACCEPT_RULES))}")
    return ACCEPT_RULES[rule]


# ---- which rules a method may use -------------------------------------------------------------------
@dataclass(frozen=True)
class AcceptRules:
    """The acceptance rules one method can use, by name, and its default in each sampling mode.

    A rule is only exact for the trees it was written for: `speculative` handles a chain, so a proposer
    of branching trees must not get it. The method (registry entry, or a proposer's `accept_rules`) says
    which rules fit its trees, and `generate` refuses any other up front instead of failing mid-decoding.

    greedy:   the default at temperature 0
    sampled:  the default when sampling; None = the method cannot sample (no exact rule for its trees)
    optional: further rules it may be asked for by name (e.g. a lossy typical acceptance)
    """

    greedy: str = "greedy"
    sampled: str | None = "speculative"
    optional: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every rule this method can use, defaults first."""
        return tuple(dict.fromkeys(r for r in (self.greedy, self.sampled, *self.optional) if r is not None))

    def pick(self, accept: str | AcceptRule | None, sampling: Sampling, method: str) -> AcceptRule:
        """The rule `generate(accept=...)` runs for `method`: the mode's default when accept is None.

        A callable is taken as is (experiments: its caller vouches that it fits the method's trees).
        """
        if callable(accept):
            return accept
        if accept is None:
            accept = self.greedy if sampling.greedy else self.sampled
            if accept is None:
                raise ValueError(
                    f"method {method!r} cannot sample: it has no sampling acceptance rule for its trees "
                    f"(its rules: {', '.join(self.names)}); decode with temperature=0, or pass accept=<rule>"
                )
        rule = get_accept_rule(accept)  # an unknown name fails here, naming every known rule
        if accept not in self.names:
            raise ValueError(
                f"method {method!r} cannot use acceptance rule {accept!r}; its rules: {', '.join(self.names)}"
            )
        return rule


CHAIN_RULES = AcceptRules()  # chains: greedy, and exact speculative sampling
GREEDY_ONLY = AcceptRules(sampled=None)  # branching trees, until a multi-candidate sampling rule exists
