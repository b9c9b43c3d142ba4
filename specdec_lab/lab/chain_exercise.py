"""Notebook 02's exercises on the acceptance rule, checked exactly on toy models (no real model needed).

    branch_reference(p, q)            (2, V): P(x drafted and accepted), P(rejected, then x from the residual)
    probe_rule(rule)                  one call of a chain rule on a real toy chain (None: the student's stub)
    chain_rule_tv(rule)               exact total variation of the rule's first n tokens from sampling p
    all_accepted_probability(rule)    exact P(the first step accepts its whole chain): what the bonus after
                                      an all-accepted chain carries
    guarded(fn, is_reference)         fn, recording every reference it runs, however it reached one
    is_library_rule(code)             whether a code object is one of `accept`'s rules (or their walkers)

A chain rule here has the library's tree-rule signature, rule(tree, logits, sampling, coins, **_), and draws every
random choice through `coins` (`accept.tree_rules.Coins`: `accept(p_x, q_x)`, `sample(probs)`), so
`accept.exactness` can walk every branch of its randomness: the emitted distribution comes out exact, with no
sampling noise, and a wrong rule is told apart from a right one by a total variation of 0 against one above it.
The toy target and draft are `accept.toy.toy_models` (context-dependent random logits over a few tokens, the
draft a noisy copy), sampled at temperature 1 from each one's two likeliest tokens (top-k 2, warped alike for p
and q), which keeps the branches few; the chain has k drafts and the first n = k + 1 tokens are compared, so a
step that accepts all k drafts emits its bonus as the n-th token. An exact rule comes out under `EXACT` (the
toy logits are float32); the flawed rules of `accept.exactness.BROKEN_RULES` and the usual slips (the bonus of
an all-accepted chain from the wrong p, a rejection resampled from p) land orders of magnitude above it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType

import torch

from ..accept.exactness import autoregressive_joint, enumerate_outcomes, propose, rule_joint, total_variation
from ..accept.toy import toy_models
from ..accept.tree_rules import Coins, residual
from ..cost.theory import acceptance_rate
from ..sampling import Sampling

__all__ = [
    "TOY_VOCAB",
    "TOY_SAMPLING",
    "EXACT",
    "branch_reference",
    "chain_shape",
    "probe_rule",
    "chain_rule_tv",
    "all_accepted_probability",
    "guarded",
    "is_library_rule",
    "is_branch_reference",
]

TOY_VOCAB = 4  # tokens of the toy models
TOY_SAMPLING = Sampling(temperature=1.0, top_k=2)  # two candidates per position: every branch walked in a blink
EXACT = 1e-6  # the total variation an exact rule stays under: float32 rounding of the toy logits, nothing more


def branch_reference(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """(2, V) float64: row 0 the probability that one step drafts x and accepts it, min(p, q)(x); row 1 that it
    rejects its draft and then draws x from the residual, (1 − α)·norm(max(p − q, 0))(x). The rows add up to p."""
    p, q = torch.as_tensor(p, dtype=torch.float64), torch.as_tensor(q, dtype=torch.float64)
    alpha = float(acceptance_rate(p, q))
    return torch.stack([torch.minimum(p, q), (1.0 - alpha) * residual(p, q, 0)])


def chain_shape(k: int) -> tuple[list[int], list[bool]]:
    """(parents, candidate flags) of a chain: the root and k drafts, each the child of the one before."""
    return list(range(-1, k)), [True] * (k + 1)


def _models(vocab: int, seed: int):
    return toy_models(vocab, seed=seed)


@contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one thread for the walk: its tensors have a few elements, and on a busy machine a (k + 1, V)
    softmax can wait milliseconds for the thread pool, thousands of times over."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def probe_rule(rule: Callable, k: int = 3, vocab: int = TOY_VOCAB, seed: int = 0, sampling: Sampling = TOY_SAMPLING):
    """What `rule` returns on one chain of k drafts from the toy draft (drawn with a seeded generator): an
    `Acceptance`, or None/`...` where the rule is still a stub. Call it before `chain_rule_tv`, which needs
    a rule that answers."""
    target, draft = _models(vocab, seed)
    coins = Coins(torch.Generator().manual_seed(seed))
    tree = propose(*chain_shape(k), (), draft, sampling, "sampled", coins)
    logits = torch.stack([target(path) for path in tree.meta["paths"]])  # (k + 1, V)
    return rule(tree, logits, sampling=sampling, coins=coins)


def chain_rule_tv(
    rule: Callable, k: int = 3, n: int | None = None, vocab: int = TOY_VOCAB, seed: int = 0,
    sampling: Sampling = TOY_SAMPLING,
) -> float:  # fmt: skip
    """Total variation between the exact distribution of the first n tokens (default k + 1) that decoding with
    `rule` on chains of k drafts emits and that of plain sampling from the toy target: 0 up to rounding for an
    exact rule."""
    n = k + 1 if n is None else n
    target, draft = _models(vocab, seed)
    with _one_thread():
        joint = rule_joint(rule, target, draft, sampling, *chain_shape(k), "sampled", n)
        return total_variation(joint, autoregressive_joint(target, sampling, n))


def all_accepted_probability(
    rule: Callable, k: int = 3, vocab: int = TOY_VOCAB, seed: int = 0, sampling: Sampling = TOY_SAMPLING
) -> float:
    """Exact probability that the first step accepts all k drafts of its chain under `rule` (then its bonus is
    drawn from the target's p after the last draft)."""
    target, draft = _models(vocab, seed)

    def whole(coins: Coins) -> bool:
        tree = propose(*chain_shape(k), (), draft, sampling, "sampled", coins)
        logits = torch.stack([target(path) for path in tree.meta["paths"]])
        return rule(tree, logits, sampling=sampling, coins=coins).accepted_draft == k

    with _one_thread():
        return enumerate_outcomes(whole).get(True, 0.0)


def guarded(fn: Callable, is_reference: Callable[[CodeType], bool]) -> tuple[Callable, list[str]]:
    """(wrapper, ran): `fn` wrapped so that each call records, in `ran`, the qualified name of every function
    it runs, at any depth, whose code `is_reference` picks. It watches code, not names: a reference reached
    through an alias, an import, a registry (`accept.ACCEPT_RULES[...]`) or a private helper is recorded all the
    same. `sys.setprofile` is on only for the duration of a call of `fn` (the previous profiler is put back)."""
    ran: list[str] = []

    def profile(frame, event, arg) -> None:
        if event == "call" and is_reference(frame.f_code):
            ran.append(frame.f_code.co_qualname)

    def wrapper(*args, **kwargs):
        previous = sys.getprofile()
        sys.setprofile(profile)
        try:
            return fn(*args, **kwargs)
        finally:
            sys.setprofile(previous)

    return wrapper, ran


_ACCEPT_DIR = str(Path(Coins.__init__.__code__.co_filename).parent)  # the `accept` package's folder, as code names it
_RULE_WALKERS = {"_walk", "_walk_one_hot", "_rule", "visit", "typical_with_coins"}  # what the rules hand a step to


def is_library_rule(code: CodeType) -> bool:
    """Whether `code` is one of the `accept` package's acceptance rules (`accept_*`, a `TypicalRule` call) or
    the walkers they delegate to; `Coins`, `residual`, `Acceptance` and `warp_probs` are not rules."""
    if str(Path(code.co_filename).parent) != _ACCEPT_DIR:
        return False
    return (
        code.co_name.startswith("accept_")
        or code.co_name in _RULE_WALKERS
        or code.co_qualname == "TypicalRule.__call__"
    )


_BRANCH_CODES = {branch_reference.__code__, residual.__code__, acceptance_rate.__code__}


def is_branch_reference(code: CodeType) -> bool:
    """Whether `code` is `branch_reference` or a library function it is built from (`residual`, `acceptance_rate`)."""
    return code in _BRANCH_CODES
