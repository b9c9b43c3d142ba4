"""Methods as the harness sees them: a spec string, and a factory that builds a timed `run` callable.

    spec     name[:key=value...]     e.g. "prompt_lookup:max_draft=4:draft_length=heuristic"
                                     (values parsed as int, else float, else str; the string is the label);
                                     `accept=<rule>` picks one of the method's acceptance rules by name
                                     and temperature/top_k/top_p sample (e.g. "medusa:accept=typical:
                                     temperature=0.7"); the other keys configure its proposer
    factory  (model, eos_ids, **params) -> run          built once per benchmark: one-time setup goes here
    run      (prompt ids, max_new_tokens, seed) -> RunOutput                     the part that is timed

A name is looked up when a spec is parsed, in two registries: `specdec_lab.proposers.METHODS` (our loop;
whatever `register_method` added runs too) and `ANCHORS` (runner.py; transformers' own generate,
registered by hf.py). A new method therefore needs no edit here or in the harness.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..generate import generate
from ..proposers import METHODS, make_proposer
from ..sampling import Sampling
from .runner import ANCHORS, Runner, RunOutput

__all__ = [
    "BenchInputError",
    "MethodSpec",
    "build_runner",
    "known_methods",
    "parse_method_spec",
    "parse_methods",
]


# keys of a spec that configure the loop (`generate`), not the method's proposer
LOOP_PARAMS = ("accept", "temperature", "top_k", "top_p")


class BenchInputError(ValueError):
    """Bad benchmark input: prompts file, method spec, limit."""


@dataclass(frozen=True)
class MethodSpec:
    """`name[:key=value...]`; the spec string itself is the method's label in the results."""

    label: str
    name: str
    params: dict = field(default_factory=dict, hash=False)


def _value(text: str) -> bool | int | float | str:
    if text.lower() in ("true", "false"):  # remember=false, pool_from_prompt=true
        return text.lower() == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_method_spec(spec: str) -> MethodSpec:
    """'prompt_lookup:max_draft=4:draft_length=heuristic' -> MethodSpec(name, {max_draft: 4, ...}).

    A segment that is not `key=value` continues the previous value, so values may contain ':'
    (e.g. 'draft:draft=layer_skip:4' sets draft="layer_skip:4").
    """
    label = spec.strip()
    name, *segments = label.split(":")
    if not name:
        raise BenchInputError(f"method spec {spec!r} has no method name (format: name[:key=value...])")
    raw: dict[str, str] = {}
    for seg in segments:
        key, sep, value = seg.partition("=")
        if sep and key.isidentifier():
            if key in raw:
                raise BenchInputError(f"method spec {spec!r}: parameter {key!r} given twice")
            raw[key] = value
        elif raw:
            last = next(reversed(raw))
            raw[last] += ":" + seg
        else:
            raise BenchInputError(f"method spec {spec!r}: {seg!r} is not key=value; format: name[:key=value...]")
    return MethodSpec(label=label, name=name, params={k: _value(v) for k, v in raw.items()})


def known_methods() -> list[str]:
    """Every name a spec may use now: our registered methods and the anchors."""
    return sorted(set(METHODS) | set(ANCHORS))


def _factory(name: str) -> Callable[..., Runner]:
    if name in METHODS:
        return _loop_factory(name)
    if name in ANCHORS:
        return ANCHORS[name]
    raise BenchInputError(f"unknown method {name!r}; known methods: {', '.join(known_methods())}")


def _check_types(spec: MethodSpec, annotated) -> None:
    """Name a value of the wrong type (max_draft=x) here, not deep inside a proposer's arithmetic."""
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
            raise BenchInputError(f"method {spec.label!r}: {key}={value!r} is not a valid {kinds}")


def _check_params(spec: MethodSpec) -> None:
    """Reject unknown methods, parameters and ill-typed values before any model is loaded."""
    factory = _factory(spec.name)
    config = METHODS[spec.name].config if spec.name in METHODS else None
    _check_types(spec, config if config is not None else factory)
    if spec.name in METHODS:
        params = {k: v for k, v in spec.params.items() if k not in LOOP_PARAMS}
        loop = {k: v for k, v in spec.params.items() if k in LOOP_PARAMS}
        try:
            proposer = make_proposer(spec.name, **params)  # cheap: proposers measure nothing until start()
            sampling = Sampling(**{k: v for k, v in loop.items() if k != "accept"})
            # the rule asked for (or the mode's default) must be one the method has
            METHODS[spec.name].rules_of(proposer).pick(loop.get("accept"), sampling, spec.name)
        except (TypeError, ValueError) as err:
            raise BenchInputError(f"method {spec.label!r}: {err}") from None
        return
    sig = inspect.signature(factory)
    takes = [p.name for p in list(sig.parameters.values())[2:] if p.kind is not p.VAR_KEYWORD]
    open_ended = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    unknown = sorted(set(spec.params) - set(takes))
    if unknown and not open_ended:
        raise BenchInputError(
            f"method {spec.label!r}: unknown parameter(s) {', '.join(unknown)}; "
            f"{spec.name} takes: {', '.join(takes) or 'none'}"
        )


def parse_methods(methods: str | Sequence) -> list[MethodSpec]:
    """'a,b:k=v' (or a list of specs / MethodSpec) -> checked MethodSpecs with unique labels."""
    items = methods.split(",") if isinstance(methods, str) else list(methods)
    specs = [m if isinstance(m, MethodSpec) else parse_method_spec(m) for m in items if str(m).strip()]
    if not specs:
        raise BenchInputError(f"no methods given; known methods: {', '.join(known_methods())}")
    labels = [s.label for s in specs]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise BenchInputError(f"method(s) listed twice: {', '.join(dupes)}")
    for s in specs:
        _check_params(s)
    return specs


def _loop_factory(name: str) -> Callable[..., Runner]:
    """Our methods: `specdec_lab.generate` (greedy) on the bare model with token ids."""

    def factory(model, eos_ids: list[int], **params) -> Runner:
        def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
            # The bare model and ids (no tokenizer): no text decoding inside the timed call, as for HF.
            r = generate(
                model,
                ids,
                method=name,
                max_new_tokens=max_new_tokens,
                eos_token_id=eos_ids or None,
                seed=seed,
                trace=False,
                **params,
            )
            return RunOutput(tokens=r.tokens, forwards=r.forwards, stop_reason=r.stop_reason, info=r.proposer)

        return run

    return factory


def build_runner(spec: MethodSpec, model, eos_ids: list[int]) -> Runner:
    return _factory(spec.name)(model, eos_ids, **spec.params)
