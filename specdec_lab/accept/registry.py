"""The acceptance rules by name, and which of them a method may use (`AcceptRules`).

Every rule is called as rule(tree, logits, sampling=Sampling, generator=torch.Generator) -> `Acceptance`.
A rule is only exact for the trees it was written for: a chain rule given a branching tree would be wrong,
so each method names the rules that fit its trees and `generate` refuses any other before decoding starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..sampling import Sampling
from .chain import accept_greedy, accept_speculative
from .result import Acceptance
from .traversal import accept_traversal
from .tree_rules import accept_exact, accept_multi_draft, accept_one_hot, accept_without_replacement
from .typical import accept_typical

__all__ = ["ACCEPT_RULES", "CHAIN_RULES", "GREEDY_ONLY", "TREE_RULES", "AcceptRule", "AcceptRules", "get_accept_rule"]

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
# the tree's sibling draw (`tree_rules.py`); by name, Traversal Verification (exact) and the lossy typical acceptance.
TREE_RULES = AcceptRules(greedy="greedy", sampled="exact", optional=("traversal", "typical"))
