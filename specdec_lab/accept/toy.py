"""The tree sampling rules side by side on a toy tree, computed exactly (notebook 11).

Everything here is exact: the toy models (`accept.exactness.TableLM`, a target and a noisy copy as the draft)
have a vocabulary of a few tokens, so `accept.exactness` enumerates every branch of a rule's randomness and
gives the emitted joint P(t_1..t_n) and the expected accepted drafts per step with no sampling noise.

    RULES                     the rules and the sibling draws each is exact for (typical: lossy, for contrast)
    compare_rules             per rule: E[accepted drafts per step], TV of the emitted joint from p
    joint_rows                the emitted joint of chosen rules beside autoregressive sampling's, per sequence
    residual_steps            one sibling set verified by hand: p before each sibling, its chance, the residual
    accepted_vs_temperature   E[accepted per step] of every rule as the temperature moves
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..sampling import Sampling, warp_probs
from .exactness import (
    BROKEN_RULES,
    TableLM,
    autoregressive_joint,
    propose,
    rule_joint,
    step_accepted,
    total_variation,
)
from .result import Acceptance
from .traversal import accept_traversal
from .tree_rules import accept_multi_draft, accept_one_hot, accept_without_replacement, residual, sibling_q
from .typical import accept_typical

__all__ = [
    "RuleCase",
    "RULES",
    "BROKEN",
    "TOY_SHAPE",
    "SMALL_SHAPE",
    "toy_models",
    "compare_rules",
    "joint_rows",
    "residual_steps",
    "accepted_vs_temperature",
]

# root -> a, b, c (three siblings); a -> d, e; b -> f: depth-2 sibling sets under two parents
TOY_SHAPE = ([-1, 0, 0, 0, 1, 1, 2], [True] * 7)
# root -> a, b; a -> c, d: small enough to enumerate sampled siblings at every temperature in seconds
SMALL_SHAPE = ([-1, 0, 0, 1, 1], [True] * 5)


@dataclass(frozen=True)
class RuleCase:
    """A rule on trees whose siblings were drawn as `draw` says (`Tree.sibling_draw`)."""

    name: str
    rule: object  # rule(tree, logits, sampling=..., coins=...) -> Acceptance
    draw: str
    exact: bool = True


def typical_with_coins(tree, logits, sampling: Sampling, coins=None, **kw) -> Acceptance:
    """`accept_typical`'s path with its bonus drawn through `coins` (so `accept.exactness` can enumerate it)."""
    acc = accept_typical(tree, logits, sampling)
    if coins is None or sampling.greedy:
        return acc
    return Acceptance(path=acc.path, bonus=coins.sample(warp_probs(logits[acc.path[-1]], sampling)))


typical_with_coins.__name__ = "typical"

RULES = [
    RuleCase("one_hot", accept_one_hot, "deterministic"),
    RuleCase("multi_draft", accept_multi_draft, "sampled"),
    RuleCase("without_replacement", accept_without_replacement, "without_replacement"),
    RuleCase("traversal", accept_traversal, "deterministic"),
    RuleCase("traversal", accept_traversal, "sampled"),
    RuleCase("typical", typical_with_coins, "deterministic", exact=False),
]
BROKEN = [
    RuleCase("no_renormalisation", BROKEN_RULES["no_renormalisation"], "sampled", exact=False),
    RuleCase("retries_rejected", BROKEN_RULES["retries_rejected"], "deterministic", exact=False),
    RuleCase("without_replacement_as_iid", BROKEN_RULES["without_replacement_as_iid"], "without_replacement", False),
]


def toy_models(vocab: int = 5, seed: int = 0, noise: float = 1.0) -> tuple[TableLM, TableLM]:
    """(target, draft): context-dependent random logits, the draft a noisy copy of the target."""
    target = TableLM(vocab, seed=seed)
    return target, TableLM(vocab, seed=seed + 1, base=target, noise=noise)


def compare_rules(
    target: TableLM,
    draft: TableLM,
    sampling: Sampling,
    cases: Sequence[RuleCase] = RULES,
    shape=TOY_SHAPE,
    n: int = 2,
) -> list[dict]:
    """Per case: E[accepted drafts in one step] on the whole shape, and the TV of the first n emitted tokens'
    exact joint from autoregressive sampling (0 up to float rounding for an exact rule)."""
    reference = autoregressive_joint(target, sampling, n)
    rows = []
    for case in cases:
        joint = rule_joint(case.rule, target, draft, sampling, *shape, case.draw, n)
        rows.append({
            "rule": case.name,
            "siblings": case.draw,
            "exact": case.exact,
            "accepted_per_step": step_accepted(case.rule, target, draft, sampling, *shape, case.draw)
            if case in RULES else None,  # a broken rule's acceptance means nothing
            "tv": total_variation(joint, reference),
        })  # fmt: skip
    return rows


def joint_rows(
    target: TableLM, draft: TableLM, sampling: Sampling, cases: Sequence[RuleCase], shape=TOY_SHAPE, n: int = 2
) -> list[dict]:
    """One row per sequence t_1..t_n with P > 0 somewhere: autoregressive's P and every case's, by name."""
    joints = {"autoregressive": autoregressive_joint(target, sampling, n)}
    for case in cases:
        joints[f"{case.name} ({case.draw})"] = rule_joint(case.rule, target, draft, sampling, *shape, case.draw, n)
    seqs = sorted(set().union(*joints.values()), key=lambda s: -joints["autoregressive"].get(s, 0.0))
    return [{"sequence": s} | {name: j.get(s, 0.0) for name, j in joints.items()} for s in seqs]


def residual_steps(target: TableLM, draft: TableLM, sampling: Sampling, draw: str = "deterministic", width: int = 3,
                   coins=None) -> dict:  # fmt: skip
    """The root's sibling set of a `width`-sibling tree, verified by hand: before sibling j, the residual p_j,
    the sibling's token x_j, its q_j(x_j) and its chance of acceptance min(1, p_j(x_j)/q_j(x_j)); after the
    last rejection, the residual the bonus is drawn from. Deterministic siblings are q's top tokens; sampled
    ones need `coins` (a `Coins`) to draw them.

    Returns {"tokens": [x_1..x_m], "p": (V,) list, "q": (V,) list, "steps": [{"step", "residual", "token",
    "q_x", "accept"}], with m + 1 steps, the last one's token None (the bonus's distribution)}.
    """
    shape = ([-1] + [0] * width, [True] * (width + 1))
    tree = propose(*shape, (), draft, sampling, draw, coins)
    p = target.probs((), sampling)  # (V,)
    tokens = tree.tokens[1:].tolist()
    steps, earlier = [], []
    for j, x in enumerate(tokens, start=1):
        q = sibling_q(tree, j, earlier, draw)  # None: one-hot
        q_x = 1.0 if q is None else float(q[x])
        chance = 1.0 if q_x <= 0 else min(1.0, float(p[x]) / q_x)
        steps.append({"step": j - 1, "residual": p.tolist(), "token": x, "q_x": q_x, "accept": chance})
        p = residual(p, q, x)
        earlier.append(x)
    steps.append({"step": len(tokens), "residual": p.tolist(), "token": None, "q_x": None, "accept": None})
    return {"tokens": tokens, "p": target.probs((), sampling).tolist(), "q": draft.probs((), sampling).tolist(),
            "steps": steps}  # fmt: skip


def accepted_vs_temperature(
    pairs: Sequence[tuple[TableLM, TableLM]],
    temperatures: Sequence[float],
    cases: Sequence[RuleCase] = RULES,
    shape=SMALL_SHAPE,
    top_p: float | None = None,
) -> list[dict]:
    """Exact E[accepted drafts per step] of every case at every temperature, averaged over (target, draft)
    pairs (each a different first context: one pair's root alone says more about its argmax than about T).
    Rows: rule, siblings, temperature, accepted."""
    rows = []
    for t in temperatures:
        sampling = Sampling(temperature=float(t), top_p=top_p)
        for case in cases:
            if sampling.greedy and case.draw != "deterministic":
                continue  # at T = 0 q is one-hot: sampled siblings are the deterministic ones
            values = [step_accepted(case.rule, tg, dr, sampling, *shape, case.draw) for tg, dr in pairs]
            rows.append({"rule": case.name, "siblings": case.draw, "temperature": float(t),
                         "accepted": sum(values) / len(values)})  # fmt: skip
    return rows
