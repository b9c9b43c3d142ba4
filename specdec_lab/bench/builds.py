"""Builds in one benchmark run: our loop's methods on eager and compiled steps, fp32 and quantized weights.

    label    name[:key=value...][@build]          build = weights[+compile], weights in `quant.WEIGHTS`
             "hybrid@int4+compile"                 hybrid on int4 weights, verifying with the compiled step
             "prompt_lookup"                       no suffix: the loaded model's own build (--weights, --compile)

Why in one run: a speed ratio between two builds measured in two runs carries the machine's drift between
them (on a shared 2-core host it was ~2x between sessions), while rows of one run are rotated per prompt and
paired. Every build's methods are therefore runners of the same run, each on its build's model and step.

Exactness is per build: a quantized model is another model, so `hybrid@int4` is compared token for token
with `autoregressive@int4` (its `reference`), not with fp32. A build without its own autoregressive row is
compared with the run's baseline (`proposers.registry.BASELINE`), which then measures the build's drift.
Anchors (transformers, llama.cpp) run on what they load themselves: a build suffix on one is an error.

The models of the other weights come from the caller (`run_benchmark(..., models={"int4": lm})`; the CLI
loads them with the base model's options), so this module loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models.load import unwrap
from ..models.quant import WEIGHTS, weights_kind, weights_record
from ..proposers.registry import BASELINE
from .runner import BenchInputError

__all__ = ["Build", "BuildSet", "parse_build", "split_label"]


class BuildError(BenchInputError):
    """A build suffix that cannot run (unknown weights, a model not given)."""


@dataclass(frozen=True)
class Build:
    """One way to build the verify step: its weights' format and whether it is compiled (`step_variants`'
    curves and the bench's `@build` labels name the same thing)."""

    weights: str = "fp32"  # decoder linear weights: fp32, int8, int4 (`quant.WEIGHTS`)
    compile: bool = False  # verify with the compiled step (`specdec_lab.models.compiled`)

    @property
    def name(self) -> str:
        return self.weights + ("+compile" if self.compile else "")


def parse_build(text: str) -> Build:
    """'int4+compile' -> Build('int4', True); 'fp32' -> Build('fp32', False)."""
    parts = [p.strip() for p in text.strip().split("+")]
    weights, flags = parts[0], parts[1:]
    if weights not in WEIGHTS or any(f != "compile" for f in flags) or len(flags) > 1:
        raise BuildError(f"build {text!r}: expected weights[+compile] with weights one of {', '.join(WEIGHTS)}")
    return Build(weights, bool(flags))


def split_label(item: str) -> tuple[str, Build | None]:
    """'hybrid:max_nodes=8@int4+compile' -> ('hybrid:max_nodes=8', Build('int4', True)); no '@' -> (item, None)."""
    spec, at, build = item.partition("@")
    return spec, (parse_build(build) if at else None)


class BuildSet:
    """The builds a run's labels ask for: each label's model and compiled step, its exactness reference.

    base:   the loaded model's own build (what an unsuffixed label runs on)
    models: {weights: model} for every weights kind a label names (the base model's is added here)
    """

    def __init__(self, labels: list[str], base_model, base_compile: bool, models: dict | None = None):
        self.base = Build(weights_kind(base_model), base_compile)
        self.models = {self.base.weights: base_model, **{w: unwrap(m)[0] for w, m in (models or {}).items()}}
        self.of_label: dict[str, Build] = {}
        for label in labels:
            build = split_label(label)[1] or self.base  # labels come checked from `methods.parse_methods`
            if build.weights not in self.models:
                raise BuildError(f"{label!r} needs a model with {build.weights} weights: pass "
                                 f"models={{{build.weights!r}: ...}} (the CLI loads it)")  # fmt: skip
            if weights_kind(self.models[build.weights]) != build.weights:
                raise BuildError(f"models[{build.weights!r}] holds {weights_kind(self.models[build.weights])} weights")
            self.of_label[label] = build
        self.steps: dict[Build, object] = {}  # compiled builds -> their CompiledStep (`make_steps`)

    def model(self, label: str):
        return self.models[self.of_label[label].weights]

    def reference(self, label: str) -> str | None:
        """The label whose tokens `label`'s are compared with: its build's autoregressive, else the baseline."""
        build = self.of_label[label]
        own = BASELINE if build == self.base else f"{BASELINE}@{build.name}"
        if own in self.of_label:
            return own
        return BASELINE if BASELINE in self.of_label else None

    def make_steps(self, make) -> None:
        """A compiled step per compiled build: make(model) -> CompiledStep (raises on an unsupported model)."""
        for build in dict.fromkeys(self.of_label.values()):
            if build.compile:
                self.steps[build] = make(self.models[build.weights])

    def step(self, label: str):
        return self.steps.get(self.of_label[label])

    def record(self) -> dict:
        """{build label: its weights record, and a compiled build's row invariance (`CompiledStep.rows_record`)}
        for the builds beyond the base (the results' config)."""
        used = dict.fromkeys(self.of_label.values())
        record = {}
        for b in used:
            if b != self.base:
                step = self.steps.get(b)
                record[b.name] = {**weights_record(self.models[b.weights]), **(step.rows_record() if step else {})}
        return record
