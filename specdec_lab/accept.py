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
* `accept_typical` — Medusa's typical acceptance (Cai et al. 2024, section 2.3.1) on any tree: accept a
  candidate x iff p(x) > min(ε, δ·exp(−H(p))). LOSSY: under sampling the output is NOT distributed as p
  (`losslessness.typical_drift` measures by how much). At temperature 0 it accepts what `accept_greedy`
  does. `typical_rule(epsilon, delta)` fixes its thresholds; `generate(accept="typical")` uses the defaults.
* the exact rules for branching trees, in `accept_tree.py` (registered here): `one_hot` (deterministic
  siblings: Medusa, Lookahead, EAGLE top-k), `multi_draft` (independently sampled siblings: SpecInfer),
  `without_replacement` (siblings sampled without replacement: RSD), and `exact`, which picks among them by
  the tree's `sibling_draw`.
* `accept_traversal` — Traversal Verification (arXiv 2505.12398, `accept_traversal.py`): leaf-to-root with
  sequence-level weights, exact on any tree and on chains (there block verification); by name, "traversal".

Every rule accepts candidate nodes only (`Tree.candidate`): nodes verified for their logits alone are
never on a path. Which rules fit which method is the method's to say (`AcceptRules`): a chain rule given
a branching tree would be wrong, so `generate` refuses the pairing before decoding starts.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .accept_traversal import accept_traversal
from .accept_tree import accept_exact, accept_multi_draft, accept_one_hot, accept_without_replacement
from .acceptance import Acceptance
from .sampling import GREEDY, Sampling, draw, warp_probs
from .tree import Tree

__all__ = [
    "Acceptance",
    "accept_greedy",
    "accept_speculative",
    "accept_typical",
    "accept_exact",
    "accept_one_hot",
    "accept_multi_draft",
    "accept_without_replacement",
    "accept_traversal",
    "typical_rule",
    "TypicalRule",
    "chain_nodes",
    "ACCEPT_RULES",
    "get_accept_rule",
    "AcceptRules",
    "CHAIN_RULES",
    "GREEDY_ONLY",
    "TREE_RULES",
]


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


# ---- typical acceptance (Medusa) --------------------------------------------------------------------
def _check_typical(epsilon: float, delta: float) -> None:
    # `not (a < x)` rather than `x <= a`: NaN fails every comparison, so it is refused too.
    def real(x) -> bool:
        return isinstance(x, numbers.Real) and not isinstance(x, bool)

    if not real(epsilon) or not (0.0 < epsilon <= 1.0):
        raise ValueError(f"epsilon (the hard threshold) must be a number in (0, 1], got {epsilon!r}")
    if not real(delta) or not (0.0 < delta < math.inf):
        raise ValueError(f"delta (the entropy-dependent threshold) must be a finite number > 0, got {delta!r}")


def accept_typical(
    tree: Tree,
    logits: torch.Tensor,
    sampling: Sampling = GREEDY,
    generator: torch.Generator | None = None,
    epsilon: float = 0.09,
    delta: float = 0.3,
    **_,
) -> Acceptance:
    """Medusa's typical acceptance (Cai et al. 2024, section 2.3.1) on any tree. LOSSY: not exact.

    The emitted tokens are NOT distributed as p: a plausible draft token is kept whatever its probability
    (a deterministic draft's argmax, once above the threshold, is emitted every time instead of with
    probability p(x)). Use `accept_speculative` when the output must follow p; `losslessness.typical_drift`
    measures the deviation.

    logits: (N, V) target logits. For every candidate node i > 0 with parent j, p_j = warp(logits[j]) (the
    configured temperature, top-k and top-p) and

        accept x_i  iff  p_j(x_i) > min(ε, δ·exp(−H(p_j))),    H(p) = −Σ_v p(v) log p(v)   (0·log 0 = 0)

    ε is a hard threshold ("a token this likely is fine"), δ·exp(−H) an entropy-dependent one: the flatter
    p, the more continuations count as typical (the criterion is Hewitt et al. 2022's η-sampling cutoff).
    A node is on an accepted path iff it and all its ancestors are accepted; only candidates
    (`Tree.candidate`) are considered, so branching trees are walked whole. The path kept is the deepest
    accepted node's; among equally deep ones the highest likelihood Σ log p_j(x_i) along the path wins
    (as in the reference), then the lowest index. The bonus is argmax p at the path's end when greedy,
    else a sample from p there (with `generator`).

    Temperature 0: p is one-hot, H = 0, the threshold is min(ε, δ) and p(x) ∈ {0, 1}, so for any ε < 1 a
    node is accepted iff x == argmax: exactly `accept_greedy`'s path and bonus (the reference branches to
    greedy outright; here it falls out of the rule). ε = 1 with δ ≥ 1 makes the threshold 1 at any
    temperature: nothing is ever accepted.

    Defaults ε = 0.09, δ = 0.3 are the reference's (FasterDecoding/Medusa, `medusa_generate`:
    posterior_threshold = ε = 0.09, posterior_alpha = δ = 0.3, "recommended to be sqrt(posterior_threshold)").
    The paper agrees: section 3.3.2 sets "α = √ϵ" after Hewitt et al. (its α is the δ of section 2.3.1)
    and sweeps ε from 0.01 to 0.25. Beware: later versions of the reference's utils.py give the helpers
    `evaluate_posterior`/`generate_candidates` the swapped defaults posterior_threshold=0.3,
    posterior_alpha=0.09 (δ ≠ sqrt(ε)); `medusa_generate` still passes 0.09 and 0.3.

    Where this differs from the reference (medusa/model/utils.py, `evaluate_posterior`):
    * the bonus. The paper applies greedy decoding to the first token; the later code samples it from the
      typical-truncated p (`get_typical_one_token`: tokens with p < threshold removed). We sample it from p
      itself, so the only deviation from exact sampling is the acceptance test.
    * p is warped by top-k/top-p too (the reference uses softmax(logits / T) alone), and H uses 0·log 0 = 0
      where the reference adds 1e-5 inside the log.
    * the reference ranks fixed root-to-leaf candidate paths; walking the tree's candidate nodes gives the
      same longest accepted prefix, with trees of any shape.
    """
    _check_typical(epsilon, delta)
    n = len(tree)
    cand = [True] * n if tree.candidate is None else tree.candidate.tolist()
    nodes = [i for i in range(n) if cand[i]]  # candidates, root first; a candidate's parent is one
    probs = warp_probs(logits[torch.tensor(nodes, device=logits.device)], sampling)  # (C, V) p after each
    best_row = 0
    if len(nodes) > 1:
        row_of = {node: r for r, node in enumerate(nodes)}
        parents_l = tree._parents_list
        kids = nodes[1:]
        prow = torch.tensor([row_of[parents_l[i]] for i in kids], device=logits.device)  # (C-1,) parent's row
        x = tree.tokens[kids].to(logits.device)  # (C-1,) the candidate tokens
        entropy = -torch.special.xlogy(probs, probs).sum(-1)  # (C,) H(p_j), 0·log 0 = 0
        threshold = (delta * torch.exp(-entropy)).clamp(max=epsilon)  # (C,) min(ε, δ·exp(−H))
        p_x = probs[prow, x]  # (C-1,) p_j(x_i)
        ok = (p_x > threshold[prow]).tolist()
        logp = torch.log(p_x).tolist()  # finite wherever ok: p_x > threshold > 0
        # Walk down in topological order: a node is accepted iff it passes and its parent was accepted.
        accepted = [True] + [False] * len(kids)
        depth, loglik = [0] * len(nodes), [0.0] * len(nodes)
        for r, (pr, passes) in enumerate(zip(prow.tolist(), ok, strict=True), start=1):
            if not (passes and accepted[pr]):
                continue
            accepted[r] = True
            depth[r], loglik[r] = depth[pr] + 1, loglik[pr] + logp[r - 1]
            # Deepest first, then most likely; strict > keeps the lowest index among exact ties.
            if (depth[r], loglik[r]) > (depth[best_row], loglik[best_row]):
                best_row = r
    p_end = probs[best_row]  # (V,) p after the path's last node
    if sampling.greedy:
        bonus = int(p_end.argmax())  # one-hot of logits.argmax: the same token accept_greedy picks
    else:
        bonus = draw(p_end, generator)
    return Acceptance(path=tree.path_to(nodes[best_row]), bonus=bonus)


@dataclass(frozen=True)
class TypicalRule:
    """`accept_typical` with fixed thresholds: a rule callable like any other (see `typical_rule`)."""

    epsilon: float = 0.09
    delta: float = 0.3

    def __post_init__(self):
        _check_typical(self.epsilon, self.delta)

    @property
    def __name__(self) -> str:  # rules are named by __name__ (test ids, traces)
        return f"typical(epsilon={self.epsilon:g}, delta={self.delta:g})"

    def __call__(self, tree: Tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, **_):
        return accept_typical(tree, logits, sampling, generator, epsilon=self.epsilon, delta=self.delta)


def typical_rule(epsilon: float = 0.09, delta: float = 0.3) -> TypicalRule:
    """Medusa typical acceptance with thresholds ε (hard, in (0, 1]) and δ (entropy-dependent, > 0). LOSSY.

    Defaults are the reference `medusa_generate`'s: ε = 0.09, δ = 0.3 = sqrt(ε), the paper's δ = sqrt(ε).
    Larger ε and δ raise the threshold: fewer acceptances, output closer to p; smaller ones accept longer
    paths, further from p (see `accept_typical`).
    Pass the result as `generate(accept=...)`; bad values raise ValueError here, before any decoding.
    """
    return TypicalRule(epsilon, delta)


AcceptRule = Callable[..., Acceptance]

ACCEPT_RULES: dict[str, AcceptRule] = {
    "greedy": accept_greedy,
    "speculative": accept_speculative,
    "typical": accept_typical,  # lossy (Medusa); its defaults ε = 0.09, δ = 0.3
    "exact": accept_exact,  # exact on any tree: the rule below that fits tree.sibling_draw
    "one_hot": accept_one_hot,  # deterministic siblings
    "multi_draft": accept_multi_draft,  # independently sampled siblings (SpecInfer)
    "without_replacement": accept_without_replacement,  # siblings sampled without replacement (RSD)
    "traversal": accept_traversal,  # exact on any tree, leaf-to-root (Traversal Verification)
}


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


CHAIN_RULES = AcceptRules(optional=("traversal",))  # chains: greedy, exact speculative sampling; block verification
GREEDY_ONLY = AcceptRules(sampled=None)  # a method whose trees no sampling rule is known to fit
# Tree methods (Medusa, Lookahead): greedy at temperature 0; when sampling, `exact` — the tree rule that fits
# the tree's sibling draw (`accept_tree`); by name, Traversal Verification (exact) and the lossy typical acceptance.
TREE_RULES = AcceptRules(greedy="greedy", sampled="exact", optional=("traversal", "typical"))
