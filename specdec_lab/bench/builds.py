"""Builds in one benchmark run: our loop's methods on eager and compiled steps, fp32 and quantized weights.

    label    name[:key=value...][@build]          build = weights[+head=H][+compile], weights in `quant.WEIGHTS`
             "hybrid@int4+compile"                 hybrid on int4 weights, verifying with the compiled step
             "autoregressive@int4+head=fp32"       int4 decoder layers, the LM head in fp32 (H in `quant.HEADS`;
                                                   without it a quantized build's head is the run's --head-weights)
             "autoregressive@int4+compile+unfused" the compiled step with q/k/v and gate/up as separate products
                                                   (by default a compiled int4 step stacks them: `compact_body`)
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
from ..models.quant import HEADS, WEIGHTS, weights_kind, weights_record
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
    head: str | None = None  # the LM head's format (`quant.HEADS`); None: the run's --head-weights
    fuse: bool = True  # a compiled step's stacked q/k/v and gate/up products ("+unfused": separate)

    @property
    def name(self) -> str:
        return self.model_key + ("+compile" if self.compile else "") + ("" if self.fuse else "+unfused")

    @property
    def model_key(self) -> str:
        """The model this build runs on: its weights, and its head where the label names one."""
        return self.weights + (f"+head={self.head}" if self.head else "")


def parse_build(text: str) -> Build:
    """'int4+compile' -> Build('int4', True); 'int4+head=fp32' -> Build('int4', False, 'fp32')."""
    parts = [p.strip() for p in text.strip().split("+")]
    weights, flags = parts[0], parts[1:]
    heads = [f.partition("=")[2] for f in flags if f.startswith("head=")]
    ok = (weights in WEIGHTS and all(f in ("compile", "unfused") or f.startswith("head=") for f in flags)
          and flags.count("compile") <= 1 and flags.count("unfused") <= (1 if "compile" in flags else 0)
          and len(heads) <= 1 and all(h in HEADS for h in heads) and not (heads and weights == "fp32"))  # fmt: skip
    if not ok:
        raise BuildError(f"build {text!r}: expected weights[+head=H][+compile[+unfused]] with weights one of "
                         f"{', '.join(WEIGHTS)}, H one of {', '.join(HEADS)} (a head only on int8/int4)")  # fmt: skip
    return Build(weights, "compile" in flags, heads[0] if heads else None, "unfused" not in flags)


def split_label(item: str) -> tuple[str, Build | None]:
    """'hybrid:max_nodes=8@int4+compile' -> ('hybrid:max_nodes=8', Build('int4', True)); no '@' -> (item, None)."""
    spec, at, build = item.partition("@")
    return spec, (parse_build(build) if at else None)


class BuildSet:
    """The builds a run's labels ask for: each label's model and compiled step, its exactness reference.

    base:   the loaded model's own build (what an unsuffixed label runs on)
    models: {build.model_key: model} for every model a label names ("int4", "int4+head=fp32"; the base
            model's is added here)
    """

    def __init__(self, labels: list[str], base_model, base_compile: bool, models: dict | None = None):
        self.base = Build(weights_kind(base_model), base_compile)
        self.models = {self.base.model_key: base_model, **{w: unwrap(m)[0] for w, m in (models or {}).items()}}
        self.of_label: dict[str, Build] = {}
        for label in labels:
            build = split_label(label)[1] or self.base  # labels come checked from `methods.parse_methods`
            key = build.model_key
            if key not in self.models:
                raise BuildError(f"{label!r} needs a model with {key} weights: pass "
                                 f"models={{{key!r}: ...}} (the CLI loads it)")  # fmt: skip
            held = weights_record(self.models[key])
            if held["weights"] != build.weights or (build.head and held["head"] != build.head):
                raise BuildError(f"models[{key!r}] holds {held['weights']} weights with a {held['head']} head")
            self.of_label[label] = build
        self.steps: dict[Build, object] = {}  # compiled builds -> their CompiledStep (`make_steps`)

    def model(self, label: str):
        return self.models[self.of_label[label].model_key]

    def reference(self, label: str) -> str | None:
        """The label whose tokens `label`'s are compared with: its build's autoregressive, else the baseline."""
        build = self.of_label[label]
        own = BASELINE if build == self.base else f"{BASELINE}@{build.name}"
        if own in self.of_label:
            return own
        return BASELINE if BASELINE in self.of_label else None

    def make_steps(self, make) -> None:
        """A compiled step per compiled build: make(model, fuse=) -> CompiledStep (raises on an unsupported model)."""
        for build in dict.fromkeys(self.of_label.values()):
            if build.compile:
                self.steps[build] = make(self.models[build.model_key], fuse=build.fuse)

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
                record[b.name] = {**weights_record(self.models[b.model_key]), **(step.rows_record() if step else {})}
        return record
