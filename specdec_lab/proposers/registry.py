"""The method registry: a method name -> how to build its proposer, and which acceptance rules it may use.

    generate(model, prompt, method="prompt_lookup", max_draft=4)
        -> METHODS["prompt_lookup"]                            # Method(proposer, config, rules)
        -> PromptLookupProposer(PromptLookupConfig(max_draft=4))
        -> rule: the method's default for the sampling mode, or the one asked for if the method has it

`register_method` adds a method; `generate` and the benchmark (`python -m specdec_lab.bench --methods`)
read this registry when called, so a registered method runs by name in both without editing either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass

from ..accept import AcceptRules
from .autoregressive import AutoregressiveProposer
from .base import Proposer
from .draft import DraftConfig, DraftProposer, LayerSkipConfig, LayerSkipProposer
from .jacobi import JacobiConfig, JacobiProposer
from .lookahead import LookaheadConfig, LookaheadProposer
from .medusa import MedusaDecodeConfig, MedusaProposer
from .prompt_lookup import PromptLookupConfig, PromptLookupProposer

__all__ = ["Method", "METHODS", "register_method", "get_method", "make_proposer"]


@dataclass(frozen=True)
class Method:
    """One registry entry.

    proposer: builds the proposer, called with an instance of `config` (or nothing when config is None)
    config:   dataclass of the method's parameters (generate's and the bench spec's keyword arguments)
    rules:    the acceptance rules the method may use and its default per sampling mode; None = those its
              proposer declares (`Proposer.accept_rules`). Set it to register a variant with other rules
              (e.g. a lossy typical acceptance) on an existing proposer.
    """

    proposer: Callable[..., Proposer]
    config: type | None = None
    rules: AcceptRules | None = None

    def rules_of(self, proposer: Proposer) -> AcceptRules:
        """The rules in force for `proposer`, built by this method."""
        return self.rules if self.rules is not None else proposer.accept_rules


METHODS: dict[str, Method] = {
    "autoregressive": Method(AutoregressiveProposer),
    "prompt_lookup": Method(PromptLookupProposer, PromptLookupConfig),
    "draft": Method(DraftProposer, DraftConfig),
    "layer_skip": Method(LayerSkipProposer, LayerSkipConfig),
    "medusa": Method(MedusaProposer, MedusaDecodeConfig),
    "jacobi": Method(JacobiProposer, JacobiConfig),
    "lookahead": Method(LookaheadProposer, LookaheadConfig),
}


def register_method(
    name: str, proposer: Callable[..., Proposer], config: type | None = None, rules: AcceptRules | None = None
) -> None:
    """Make `generate(..., method=name, **params)` build `proposer(config(**params))` (see `Method`)."""
    if not isinstance(name, str) or not name or any(c in name for c in ",:= \t\n"):
        raise ValueError(f"method name {name!r} must be non-empty, without ',', ':', '=' or spaces (bench specs "
                         "are 'name:key=value,...')")  # fmt: skip
    METHODS[name] = Method(proposer, config, rules)


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def make_proposer(method: str, **params) -> Proposer:
    """Build a method's proposer from keyword parameters, rejecting unknown names and values clearly."""
    spec = get_method(method)
    if spec.config is None:
        if params:
            raise ValueError(f"method {method!r} takes no parameters, got: {', '.join(sorted(params))}")
        return spec.proposer()
    allowed = {f.name for f in fields(spec.config)} if is_dataclass(spec.config) else set(params)
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise ValueError(
            f"method {method!r} has no parameter(s) {', '.join(unknown)}; it takes: {', '.join(sorted(allowed))}"
        )
    return spec.proposer(spec.config(**params))
