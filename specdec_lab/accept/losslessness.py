"""Losslessness, checked empirically: speculative sampling emits tokens distributed exactly as the target's.

Notation: p = target distribution, q = draft distribution (both after the same temperature/top-k/top-p).

The experiment (used by tests/test_speculative.py and notebook 02): fix a context; run many independent
speculative "episodes" that draft k tokens from q, verify them with the library's acceptance rule
(`accept_speculative`), and continue until n tokens are emitted; histogram the first n emitted tokens and
compare with the exact joint P(t_1..t_n) = Π_i p(t_i | context, t_<i) by a chi-square test.

Model outputs are memoized per prefix (`LogitsTable`), so thousands of episodes cost a few forwards: on a
tiny vocabulary every prefix up to a depth is computed in one batched forward (`fill`); on the real model
prefixes are computed lazily as episodes reach them. The episodes call the real rule on real `Tree`s;
only the models' forwards are cached.

Two deliberately broken rules show that the test has teeth: `accept_without_ratio` (accept every draft
token: the output follows q) and `accept_resample_from_p` (the right ratio, but a rejection resamples from
p instead of the residual norm(max(0, p − q)): the output over-weights tokens where q > p).

A rule that is lossy by design is measured, not just rejected: `typical_drift` runs Medusa's typical
acceptance (`accept.typical_rule`) on deterministic drafts and reports how far its first n tokens are
from the exact joint (total variation, KL, chi-square); `drift_baseline` reports the same numbers for the
exact `accept_speculative` with the same trials: its TV is the sampling-noise floor, and a drift is only
meaningful above it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..sampling import Sampling, warp_probs
from ..trees.tree import Tree
from .chain import accept_speculative, chain_nodes
from .result import Acceptance
from .typical import typical_rule

__all__ = [
    "LogitsTable",
    "exact_joint",
    "simulate_emitted",
    "chi_square",
    "accept_without_ratio",
    "accept_resample_from_p",
    "typical_drift",
    "drift_baseline",
]


class LogitsTable:
    """Memoized next-token logits (V,) of `model` after context + prefix, for any prefix tuple.

    forward: (B, T) ids -> (B, T, V) logits; default `model(ids).logits`. A draft passes
    `Draft.logits` (its readout and drafting vocabulary: exactly the q the proposer samples from).
    """

    def __init__(self, model, context: Sequence[int], forward: Callable | None = None):
        self.model = model
        self.forward = forward or (lambda ids: model(ids).logits)
        self.context = list(context)
        self.device = next(model.parameters()).device
        self.vocab = model.config.get_text_config(decoder=True).vocab_size
        self.table: dict[tuple[int, ...], torch.Tensor] = {}

    @torch.inference_mode()
    def fill(self, depth: int, batch: int = 1024) -> LogitsTable:
        """Compute every prefix of length <= depth at once (V^depth sequences: tiny vocabularies only)."""
        prefixes = list(itertools.product(range(self.vocab), repeat=depth))
        for i in range(0, len(prefixes), batch):
            chunk = torch.tensor([self.context + list(p) for p in prefixes[i : i + batch]], device=self.device)
            logits = self.forward(chunk)[:, len(self.context) - 1 :].float()  # (B, depth+1, V)
            for row, prefix in zip(logits, prefixes[i : i + batch], strict=True):
                for d in range(depth + 1):
                    self.table.setdefault(prefix[:d], row[d])
        return self

    @torch.inference_mode()
    def prefetch(self, prefixes, batch: int = 64) -> LogitsTable:
        """Compute the given prefixes (all of one length) in batched forwards instead of one by one."""
        todo = [tuple(p) for p in prefixes if tuple(p) not in self.table]
        for i in range(0, len(todo), batch):
            chunk = torch.tensor([self.context + list(p) for p in todo[i : i + batch]], device=self.device)
            for prefix, row in zip(todo[i : i + batch], self.forward(chunk)[:, -1].float(), strict=True):
                self.table[prefix] = row
        return self

    @torch.inference_mode()
    def __call__(self, prefix: tuple[int, ...]) -> torch.Tensor:
        if prefix not in self.table:
            ids = torch.tensor([self.context + list(prefix)], device=self.device)
            self.table[prefix] = self.forward(ids)[0, -1].float()
        return self.table[prefix]


def exact_joint(target: LogitsTable, sampling: Sampling, n: int = 1) -> np.ndarray:
    """(V^n,) exact P(t_1..t_n) of plain sampling from the (warped) target, flattened row-major."""
    joint = warp_probs(target(()), sampling).double().cpu().numpy()  # (V,)
    for d in range(1, n):
        nxt = np.stack(
            [
                warp_probs(target(prefix), sampling).double().cpu().numpy()
                for prefix in itertools.product(range(target.vocab), repeat=d)
            ]
        )  # (V^d, V)
        joint = (joint[:, None] * nxt).reshape(-1)
    return joint


def simulate_emitted(
    target: LogitsTable,
    draft: LogitsTable,
    sampling: Sampling,
    k: int = 2,
    trials: int = 10_000,
    n: int = 1,
    rule: Callable[..., Acceptance] = accept_speculative,
    seed: int = 0,
    deterministic: bool = False,
) -> np.ndarray:
    """(V^n,) counts of the first n tokens emitted by `trials` speculative episodes (chains of k drafts).

    deterministic: the draft proposes its argmax and sends no q (`draft_probs=None`: q is one-hot), as
    prompt lookup or a greedy draft does; sampling must still be exact.
    """
    gen = torch.Generator(device=target.device).manual_seed(seed)
    vocab = target.vocab
    counts = np.zeros(vocab**n, dtype=np.int64)
    q_memo: dict[tuple[int, ...], torch.Tensor] = {}  # the proposer's side: q per prefix, warped once

    def q_of(prefix: tuple[int, ...]) -> torch.Tensor:
        if prefix not in q_memo:
            q_memo[prefix] = warp_probs(draft(prefix), sampling)  # (V,)
        return q_memo[prefix]

    zero = torch.zeros(vocab, device=target.device)
    for _ in range(trials):
        emitted: list[int] = []
        while len(emitted) < n:
            prefix = tuple(emitted)
            drafts: list[int] = []
            q_rows = [zero]  # row 0 (root) unused
            for _ in range(k):
                q = q_of(prefix + tuple(drafts))
                x = q.argmax() if deterministic else torch.multinomial(q, 1, generator=gen)
                drafts.append(int(x))
                q_rows.append(q)
            root = emitted[-1] if emitted else target.context[-1]
            probs = None if deterministic else torch.stack(q_rows)  # (k+1, V) q rows, row 0 unused
            tree = Tree.chain(root, drafts, draft_probs=probs)
            logits = torch.stack([target(prefix + tuple(drafts[:j])) for j in range(k + 1)])  # (k+1, V)
            acc = rule(tree, logits, sampling=sampling, generator=gen)
            emitted += drafts[: acc.accepted_draft] + [acc.bonus]
        counts[np.ravel_multi_index(tuple(emitted[:n]), (vocab,) * n)] += 1
    return counts


def chi_square(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> dict:
    """Pearson chi-square goodness of fit of `counts` to `probs`; cells with expected < min_expected pooled.

    Returns {"stat", "dof", "p_value"}; reject "counts ~ probs" at false-alarm rate a when p_value < a.
    A count in a cell of probability 0 is an impossible outcome: p_value = 0.
    """
    from scipy.stats import chi2

    counts, probs = np.asarray(counts, float), np.asarray(probs, float)
    total = counts.sum()
    if counts[probs <= 0].sum() > 0:
        return {"stat": float("inf"), "dof": 0, "p_value": 0.0}
    expected = probs * total
    big = expected >= min_expected
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] < min_expected:  # too little pooled mass to be its own cell: merge it into the smallest cell
        small = int(np.argmin(exp[:-1]))
        obs[small] += obs[-1]
        exp[small] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = len(obs) - 1
    return {"stat": stat, "dof": dof, "p_value": float(chi2.sf(stat, dof)) if dof > 0 else 1.0}


# ---- deliberately broken rules (counterexamples for the test) -------------------------------------
def accept_without_ratio(tree: Tree, logits: torch.Tensor, sampling: Sampling, generator=None, **_) -> Acceptance:
    """BROKEN: accept every draft token whose target probability is > 0; bonus ~ p. Output follows q."""
    chain = chain_nodes(tree)
    probs = warp_probs(logits[torch.tensor(chain, device=logits.device)], sampling)  # (k+1, V)
    for i, node in enumerate(chain[1:]):
        if probs[i, tree.tokens[node]] <= 0:
            return Acceptance(path=chain[: i + 1], bonus=int(torch.multinomial(probs[i], 1, generator=generator)))
    return Acceptance(path=chain, bonus=int(torch.multinomial(probs[-1], 1, generator=generator)))


def accept_resample_from_p(tree: Tree, logits: torch.Tensor, sampling: Sampling, generator=None, **_) -> Acceptance:
    """BROKEN: the right acceptance ratio min(1, p/q), but a rejection resamples from p, not the residual."""
    chain = chain_nodes(tree)
    probs = warp_probs(logits[torch.tensor(chain, device=logits.device)], sampling)  # (k+1, V)
    for i, node in enumerate(chain[1:]):
        x = tree.tokens[node]
        p_x, q_x = float(probs[i, x]), float(tree.draft_probs[node, x])
        if float(torch.rand((), generator=generator, device=logits.device)) * q_x >= p_x:
            return Acceptance(path=chain[: i + 1], bonus=int(torch.multinomial(probs[i], 1, generator=generator)))
    return Acceptance(path=chain, bonus=int(torch.multinomial(probs[-1], 1, generator=generator)))


# ---- measuring a lossy rule -------------------------------------------------------------------------
def _drift(counts: np.ndarray, exact: np.ndarray, floor: float = 1e-12) -> dict:
    """Distances of the empirical joint (counts / trials) from the exact one.

    tv:  ½ Σ |emp − exact|, in [0, 1].
    kl:  KL(emp ‖ exact) = Σ emp log(emp / exact), in nats; cells with emp = 0 contribute 0 and exact is
         floored at `floor` (1e-12) so an outcome of probability 0 gives a huge, finite number.
    kl_exact_vs_empirical: KL(exact ‖ emp), with emp floored at half a count (0.5 / trials) where no trial
         landed: a continuity correction, so the number says "mass the rule under-samples", not "∞".
    chi2: `chi_square(counts, exact)`.
    """
    counts = np.asarray(counts, dtype=np.float64)
    trials = counts.sum()
    emp = counts / trials  # (V^n,)
    seen = emp > 0
    kl = float(np.sum(emp[seen] * np.log(emp[seen] / np.maximum(exact[seen], floor))))
    emp_floored = np.maximum(emp, 0.5 / trials)
    live = exact > 0
    kl_rev = float(np.sum(exact[live] * np.log(exact[live] / emp_floored[live])))
    return {
        "tv": float(0.5 * np.abs(emp - exact).sum()),
        "kl": kl,
        "kl_exact_vs_empirical": kl_rev,
        "chi2": chi_square(counts, exact),
        "trials": int(trials),
    }


def typical_drift(
    target: LogitsTable,
    draft: LogitsTable,
    sampling: Sampling,
    epsilon: float = 0.09,
    delta: float = 0.3,
    k: int = 2,
    trials: int = 3000,
    n: int = 2,
    seed: int = 0,
) -> dict:
    """How far Medusa's typical acceptance (LOSSY by design) moves the first n tokens away from p.

    Runs `simulate_emitted` with `typical_rule(epsilon, delta)` on deterministic chains of k drafts (the
    draft's argmax, as Medusa heads propose their top candidates; no q is needed) and compares the
    histogram of the first n emitted tokens with `exact_joint(target, sampling, n)`.

    Returns {"tv", "kl", "kl_exact_vs_empirical", "chi2", "trials", "rule", "epsilon", "delta", "temperature"}
    (see `_drift` for the definitions and floors). Compare with `drift_baseline(...)` at the same trials:
    the exact rule's TV is the noise floor of this many trials.
    """
    rule = typical_rule(epsilon, delta)  # validates ε and δ before any episode runs
    counts = simulate_emitted(
        target, draft, sampling, k=k, trials=trials, n=n, rule=rule, seed=seed, deterministic=True
    )
    result = _drift(counts, exact_joint(target, sampling, n))
    return result | {"rule": rule.__name__, "epsilon": epsilon, "delta": delta, "temperature": sampling.temperature}


def drift_baseline(
    target: LogitsTable,
    draft: LogitsTable,
    sampling: Sampling,
    k: int = 2,
    trials: int = 3000,
    n: int = 2,
    seed: int = 0,
) -> dict:
    """`typical_drift`'s numbers for the exact `accept_speculative` (same drafts, same trials).

    The rule is exact, so its TV and KL are pure sampling noise (TV shrinks like 1/sqrt(trials)) and its
    chi-square p-value is uniform: the floor a lossy rule's drift must clear to mean anything.
    """
    counts = simulate_emitted(
        target, draft, sampling, k=k, trials=trials, n=n, rule=accept_speculative, seed=seed, deterministic=True
    )
    result = _drift(counts, exact_joint(target, sampling, n))
    return result | {"rule": "speculative", "temperature": sampling.temperature}
