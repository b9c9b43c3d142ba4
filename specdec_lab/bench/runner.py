"""What the harness runs: a `Runner` returning a `RunOutput`, and the registry of anchors that build one.

    factory  (model, eos_ids, **params) -> run          built once per benchmark: one-time setup goes here
    run      (prompt ids, max_new_tokens, seed) -> RunOutput                     the part that is timed

Our methods need no entry here: `loop_runner` runs any method of the proposer registry
(`specdec_lab.proposers.METHODS`) through `generate` — the one runner of our loop, for the benchmark (traced
or not), the lab's sweeps and notebooks. `ANCHORS` holds the other kind, implementations that are not our
loop (transformers' own `generate`: hf.py registers them). This module imports nothing else of the bench
but trace.py, so both methods.py and hf.py can import it.

Per-step traces. A run of our loop can also return its steps (`RunOutput.steps`) and prefill seconds; the
harness compacts them to one short list per loop step (`compact_steps`, `TRACE_FIELDS`: trace.py, re-exported
here) — what `specdec_lab.bench.replay` needs to re-time the run under another verify cost curve. Times are
rounded to microseconds; --no-traces leaves them out of the results file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..generate import generate
from ..proposers.registry import METHODS, MethodSpec, MethodSpecError
from .trace import TRACE_FIELDS, compact_steps  # the harness and the results file import them from here

__all__ = [
    "BenchInputError",
    "RunOutput",
    "Runner",
    "RunnerFactory",
    "ANCHORS",
    "register_anchor",
    "loop_runner",
    "TRACE_FIELDS",
    "compact_steps",
]


class BenchInputError(MethodSpecError):
    """Bad benchmark input: prompts file, method spec, build, limit."""


@dataclass
class RunOutput:
    """What one method run returns; the harness does the timing."""

    tokens: list[int]  # new tokens, EOS included when it stopped generation
    forwards: int | None  # target forwards that emitted tokens (prefill not counted); None if unknown
    stop_reason: str  # "eos" | "max_new_tokens" | "context"
    info: dict = field(default_factory=dict)  # what the method decided (our loop: the proposer's summary())
    steps: list | None = None  # traced runs of our loop: `StepTrace` per step (compacted outside the clock)
    prefill_seconds: float | None = None  # seconds before the first step (prefill + proposer start), traced runs


Runner = Callable[[list[int], int, int], RunOutput]  # (prompt ids, max_new_tokens, seed) -> RunOutput
RunnerFactory = Callable[..., Runner]  # (model, eos_ids, **params) -> Runner

ANCHORS: dict[str, RunnerFactory] = {}


def register_anchor(name: str, factory: RunnerFactory) -> None:
    """Make `--methods name[:key=value...]` run `factory(model, eos_ids, **params)`.

    Parameters after `eos_ids` in the factory's signature are what a method spec may set.
    """
    if name in METHODS:
        raise ValueError(f"{name!r} is already a method of our loop (specdec_lab.proposers.METHODS)")
    ANCHORS[name] = factory


def loop_runner(spec: MethodSpec, model, eos_ids: list[int], *, traced: bool = False, memory=None, step=None) -> Runner:
    """Our loop as every harness runs it: `generate` on the bare model with token ids (no text decoding inside
    the timed call, as for transformers' anchors), the spec's loop keys (accept, temperature, top_k, top_p)
    and proposer keys passed through. traced: keep every step (`GenerationResult.steps`) and the prefill
    seconds, what `replay` and the lab read; untraced runs do not sync the device between phases. memory: a
    `Memory` every run of this runner shares (proposers learn across them); None: every run starts fresh.
    step: a `compiled.CompiledStep` every run verifies with (`generate(compile=step)`); None: eager."""

    def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
        r = generate(model, ids, method=spec.name, max_new_tokens=max_new_tokens, eos_token_id=eos_ids or None,
                     seed=seed, trace=traced, memory=memory, compile=step or False, **spec.params)  # fmt: skip
        return RunOutput(tokens=r.tokens, forwards=r.forwards, stop_reason=r.stop_reason, info=r.proposer,
                         steps=r.steps if traced else None,
                         prefill_seconds=r.prefill_seconds if traced else None)  # fmt: skip

    return run
