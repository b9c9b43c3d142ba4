"""Medusa's typical acceptance (Cai et al. 2024, section 2.3.1) on any tree. LOSSY.

Accept a candidate x iff p(x) > min(ε, δ·exp(−H(p))): under sampling the output is NOT distributed as p
(`losslessness.typical_drift` measures by how much). At temperature 0 it accepts what `accept_greedy`
does. `typical_rule(epsilon, delta)` fixes its thresholds; `generate(accept="typical")` uses the defaults.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from ..sampling import GREEDY, Sampling, draw, warp_probs
from ..trees.tree import Tree
from .result import Acceptance

__all__ = ["TypicalRule", "accept_typical", "typical_rule"]


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
