"""Methods as the harness sees them: a spec string, and a factory that builds a timed `run` callable.

    spec     name[:key=value...]     the registry's grammar (`specdec_lab.proposers.registry`), e.g.
                                     "prompt_lookup:max_draft=4:draft_length=heuristic"; the string is the label
    factory  (model, eos_ids, **params) -> run          built once per benchmark: one-time setup goes here
    run      (prompt ids, max_new_tokens, seed) -> RunOutput                     the part that is timed

A name is looked up when a spec is parsed, in two registries: `specdec_lab.proposers.METHODS` (our loop;
whatever `register_method` added runs too; `runner.loop_runner` runs it) and `ANCHORS` (runner.py;
transformers' own generate, registered by hf.py; llama.cpp, registered by llamacpp.py). A new method therefore
needs no edit here or in the harness.

An anchor that cannot run on this machine (llama.cpp without llama-cpp-python installed) is skipped when the
methods are parsed, with a warning that says why (`AnchorSkipped`), so a method list naming an optional anchor
runs everywhere: the anchor's factory says so by an `unavailable()` attribute returning a reason.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence

from ..proposers.registry import (
    METHODS,
    MethodSpec,
    MethodSpecError,
    check_method_spec,
    check_types,
    parse_method_spec,
)
from . import llamacpp  # noqa: F401  (registers the llama.cpp anchors)
from .builds import split_label
from .runner import ANCHORS, BenchInputError, Runner, loop_runner

__all__ = [
    "AnchorSkipped",
    "BenchInputError",
    "MethodSpec",
    "build_runner",
    "known_methods",
    "parse_method_spec",
    "parse_methods",
    "unavailable",
]


class AnchorSkipped(UserWarning):
    """An optional anchor cannot run here (its library is not installed); the others run without it."""


def unavailable(name: str) -> str | None:
    """Why anchor `name` cannot run on this machine, or None (our methods and most anchors always can)."""
    check = getattr(ANCHORS.get(name), "unavailable", None)
    return check() if check is not None else None


def known_methods() -> list[str]:
    """Every name a spec may use now: our registered methods and the anchors."""
    return sorted(set(METHODS) | set(ANCHORS))


def _check(spec: MethodSpec) -> MethodSpec:
    """Reject unknown methods, parameters and ill-typed values before any model is loaded."""
    if spec.name in METHODS:
        try:
            return check_method_spec(spec)
        except MethodSpecError as err:
            raise BenchInputError(str(err)) from None
    if spec.name not in ANCHORS:
        raise BenchInputError(f"unknown method {spec.name!r}; known methods: {', '.join(known_methods())}")
    factory = ANCHORS[spec.name]
    try:
        check_types(spec, factory)
    except MethodSpecError as err:
        raise BenchInputError(str(err)) from None
    sig = inspect.signature(factory)
    takes = [p.name for p in list(sig.parameters.values())[2:] if p.kind is not p.VAR_KEYWORD]
    open_ended = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    unknown = sorted(set(spec.params) - set(takes))
    if unknown and not open_ended:
        raise BenchInputError(
            f"method {spec.label!r}: unknown parameter(s) {', '.join(unknown)}; "
            f"{spec.name} takes: {', '.join(takes) or 'none'}"
        )
    return spec


def _parse_one(item: str | MethodSpec) -> MethodSpec:
    """One spec; a build suffix (`builds`: "hybrid@int4+compile") stays in the label, out of the params."""
    if isinstance(item, MethodSpec):
        return item
    text, build = split_label(item.strip())
    spec = parse_method_spec(text)
    if build is None:
        return spec
    if spec.name not in METHODS:
        raise BenchInputError(f"{item.strip()!r}: a build suffix runs our loop's methods only; "
                              f"{spec.name} loads its own model")  # fmt: skip
    return MethodSpec(label=item.strip(), name=spec.name, params=spec.params)


def parse_methods(methods: str | Sequence) -> list[MethodSpec]:
    """'a,b:k=v' (or a list of specs / MethodSpec) -> checked MethodSpecs with unique labels."""
    items = methods.split(",") if isinstance(methods, str) else list(methods)
    try:
        specs = [_parse_one(m) for m in items if str(m if isinstance(m, str) else m.label).strip()]
    except MethodSpecError as err:
        raise BenchInputError(str(err)) from None
    if not specs:
        raise BenchInputError(f"no methods given; known methods: {', '.join(known_methods())}")
    labels = [s.label for s in specs]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise BenchInputError(f"method(s) listed twice: {', '.join(dupes)}")
    checked, skipped = [], []
    for s in specs:
        checked.append(_check(s))
        reason = unavailable(s.name)
        if reason is not None:
            warnings.warn(f"skipping {s.label}: {reason}", AnchorSkipped, stacklevel=2)
            skipped.append(checked.pop())
    if not checked:
        raise BenchInputError(f"no method can run here: {', '.join(s.label for s in skipped)} skipped")
    return checked


def build_runner(spec: MethodSpec, model, eos_ids: list[int], traced: bool = False, memory=None, step=None) -> Runner:
    """The spec's runner: our loop (`runner.loop_runner`, traced or not, with `memory` carried across its runs
    when given, verifying with the compiled `step` when given) or an anchor's factory."""
    if spec.name in METHODS:
        return loop_runner(spec, model, eos_ids, traced=traced, memory=memory, step=step)
    return ANCHORS[spec.name](model, eos_ids, **spec.params)
