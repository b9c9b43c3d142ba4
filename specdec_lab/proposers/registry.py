"""The method registry and the method-spec grammar: a name -> how to build its proposer and which acceptance
rules it may use; a spec string -> that method with its parameters.

    generate(model, prompt, method="prompt_lookup", max_draft=4)
        -> METHODS["prompt_lookup"]                            # Method(proposer, config, rules)
        -> PromptLookupProposer(PromptLookupConfig(max_draft=4))
        -> rule: the method's default for the sampling mode, or the one asked for if the method has it

    spec     name[:key=value...]     e.g. "prompt_lookup:max_draft=4:draft_length=heuristic"
             values parse as bool (true/false), int, float, else str; a segment that is not key=value
             continues the previous value ("draft:draft=layer_skip:4" sets draft="layer_skip:4").
             `LOOP_PARAMS` (accept, temperature, top_k, top_p) configure the loop, the rest the proposer.

Every reader of methods goes through here: `generate`, the benchmark (`--methods`), the lab's dashboard
(a widget per `method_parameters` entry, help text from the config field's `param(help=...)`) and the
sweeps (a `method` parameter is a spec). `register_method` adds a method; all of them see it at once.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, is_dataclass

from ..accept.registry import AcceptRules
from ..sampling import Sampling
from .autoregressive import AutoregressiveProposer
from .base import Proposer
from .draft import DraftConfig, DraftProposer, LayerSkipConfig, LayerSkipProposer
from .eagle import EagleDecodeConfig, EagleProposer
from .hybrid import HybridConfig, HybridProposer
from .jacobi import JacobiConfig, JacobiProposer
from .lookahead import LookaheadConfig, LookaheadProposer
from .medusa import MedusaDecodeConfig, MedusaProposer
from .prompt_lookup import PromptLookupConfig, PromptLookupProposer
from .recycle import RecycleConfig, RecycleProposer

__all__ = [
    "BASELINE",
    "Method",
    "METHODS",
    "register_method",
    "get_method",
    "make_proposer",
    "LOOP_PARAMS",
    "MethodSpec",
    "MethodSpecError",
    "parse_method_spec",
    "check_method_spec",
    "Param",
    "method_parameters",
]


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


BASELINE = "autoregressive"  # the method every speedup is measured against (bench, lab, replay)

METHODS: dict[str, Method] = {
    "autoregressive": Method(AutoregressiveProposer),
    "prompt_lookup": Method(PromptLookupProposer, PromptLookupConfig),
    "draft": Method(DraftProposer, DraftConfig),
    "layer_skip": Method(LayerSkipProposer, LayerSkipConfig),
    "medusa": Method(MedusaProposer, MedusaDecodeConfig),
    "eagle": Method(EagleProposer, EagleDecodeConfig),
    "hybrid": Method(HybridProposer, HybridConfig),
    "jacobi": Method(JacobiProposer, JacobiConfig),
    "lookahead": Method(LookaheadProposer, LookaheadConfig),
    "recycle": Method(RecycleProposer, RecycleConfig),
}


def register_method(
    name: str, proposer: Callable[..., Proposer], config: type | None = None, rules: AcceptRules | None = None
) -> None:
    """Make `generate(..., method=name, **params)` build `proposer(config(**params))` (see `Method`)."""
    if not isinstance(name, str) or not name or any(c in name for c in ",:= \t\n"):
        raise ValueError(f"method name {name!r} must be non-empty, without ',', ':', '=' or spaces (specs are "
                         "'name:key=value,...')")  # fmt: skip
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


# ---- a method's parameters ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    """One field of a method's config dataclass, as a form (or a CLI's help) shows it.

    kind: "int" | "float" | "bool" for exactly those annotations, else "text" (str, unions such as
    `int | str`, objects): text is parsed back by the spec grammar (bool, int, float, else str).
    """

    name: str
    type: str  # the annotation as written, e.g. "int | str"
    default: object  # None where the field has no default
    help: str = ""  # the field's `param(help=...)` ("" when it has none)

    @property
    def kind(self) -> str:
        return self.type if self.type in ("int", "float", "bool") else "text"


def _annotation(t) -> str:
    return t.__name__ if isinstance(t, type) else str(t)  # `from __future__ import annotations`: a string


def method_parameters(name: str) -> list[Param]:
    """The parameters of registered method `name` (config dataclass fields); [] without config. The fields
    the config class declares itself come first, in order, then those it inherits (a shared sizing base such
    as `ChainLengthConfig`): what is particular to a method leads its list in the lab and in `--help`."""
    config = get_method(name).config
    if config is None:
        return []
    if not is_dataclass(config):
        raise ValueError(f"method {name!r}: its config {config!r} is not a dataclass, so its parameters are unknown")
    own = list(config.__dict__.get("__annotations__", {}))  # declared in the class itself, in its order
    params = []
    for f in sorted(fields(config), key=lambda f: own.index(f.name) if f.name in own else len(own)):  # stable
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = None
        params.append(Param(f.name, _annotation(f.type), default, f.metadata.get("help", "")))
    return params


# ---- the spec grammar -----------------------------------------------------------------------------------
LOOP_PARAMS = ("accept", "temperature", "top_k", "top_p")  # spec keys that configure the loop (`generate`)
_BOOLS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class MethodSpecError(ValueError):
    """A method spec that cannot run as written: unknown method or parameter, ill-typed value, unusable rule."""


@dataclass(frozen=True)
class MethodSpec:
    """`name[:key=value...]`; the spec string itself is the method's label (bench rows, sweep points)."""

    label: str
    name: str
    params: dict = field(default_factory=dict, hash=False)

    @property
    def loop(self) -> dict:
        """The keys that configure the loop (`LOOP_PARAMS`)."""
        return {k: v for k, v in self.params.items() if k in LOOP_PARAMS}

    @property
    def proposer(self) -> dict:
        """The keys that configure the method's proposer."""
        return {k: v for k, v in self.params.items() if k not in LOOP_PARAMS}


def _value(text: str) -> bool | int | float | str:
    if text.lower() in ("true", "false"):  # pool_from_prompt=false
        return text.lower() == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_method_spec(spec: str | MethodSpec) -> MethodSpec:
    """'prompt_lookup:max_draft=4:draft_length=heuristic' -> MethodSpec(name, {max_draft: 4, ...}).

    Only the grammar is checked here; `check_method_spec` checks a spec against the registry.
    """
    if isinstance(spec, MethodSpec):
        return spec
    label = spec.strip()
    name, *segments = label.split(":")
    if not name:
        raise MethodSpecError(f"method spec {spec!r} has no method name (format: name[:key=value...])")
    raw: dict[str, str] = {}
    for seg in segments:
        key, sep, value = seg.partition("=")
        if sep and key.isidentifier():
            if key in raw:
                raise MethodSpecError(f"method spec {spec!r}: parameter {key!r} given twice")
            raw[key] = value
        elif raw:
            last = next(reversed(raw))
            raw[last] += ":" + seg
        else:
            raise MethodSpecError(f"method spec {spec!r}: {seg!r} is not key=value; format: name[:key=value...]")
    return MethodSpec(label=label, name=name, params={k: _value(v) for k, v in raw.items()})


def _coerce(spec: MethodSpec, kinds: dict[str, str]) -> MethodSpec:
    """Bool fields given as 1/0/yes/no (the grammar reads only true/false as bools)."""
    params = dict(spec.params)
    for key, value in params.items():
        if kinds.get(key) == "bool" and not isinstance(value, bool):
            if str(value).lower() not in _BOOLS:
                raise MethodSpecError(f"method spec {spec.label!r}: {key}={value!r} is not a bool (true/false)")
            params[key] = _BOOLS[str(value).lower()]
    return MethodSpec(label=spec.label, name=spec.name, params=params)


def check_types(spec: MethodSpec, annotated) -> None:
    """Name a value of the wrong type (max_draft=x) here, not deep inside a proposer's arithmetic.

    annotated: the config dataclass (or a function) whose annotations give each key's type."""
    try:
        hints = typing.get_type_hints(annotated)
    except (NameError, TypeError):  # annotations we cannot resolve: leave the check to the method
        return
    for key, value in spec.params.items():
        allowed = tuple(a for a in typing.get_args(hints.get(key)) or (hints.get(key),) if isinstance(a, type))
        if float in allowed:
            allowed += (int,)
        if allowed and not isinstance(value, allowed):
            kinds = " or ".join(a.__name__ for a in allowed)
            raise MethodSpecError(f"method {spec.label!r}: {key}={value!r} is not a valid {kinds}")


def check_method_spec(spec: str | MethodSpec) -> MethodSpec:
    """Parse `spec` and check it against the registry: a registered method, known parameters of the right
    types, and an acceptance rule (asked for, or the sampling mode's default) the method has. Returns the
    spec with bool fields coerced. Cheap: proposers measure nothing until `start`."""
    spec = parse_method_spec(spec)
    if spec.name not in METHODS:
        raise MethodSpecError(f"unknown method {spec.name!r}; known methods: {', '.join(sorted(METHODS))}")
    method = METHODS[spec.name]
    if method.config is not None and is_dataclass(method.config):
        spec = _coerce(spec, {p.name: p.kind for p in method_parameters(spec.name)})
        check_types(spec, method.config)
    try:
        proposer = make_proposer(spec.name, **spec.proposer)
        loop = spec.loop
        sampling = Sampling(**{k: v for k, v in loop.items() if k != "accept"})
        method.rules_of(proposer).pick(loop.get("accept"), sampling, spec.name)
    except (TypeError, ValueError) as err:
        raise MethodSpecError(f"method {spec.label!r}: {err}") from None
    return spec
