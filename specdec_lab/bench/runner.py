"""What the harness runs: a `Runner` returning a `RunOutput`, and the registry of anchors that build one.

    factory  (model, eos_ids, **params) -> run          built once per benchmark: one-time setup goes here
    run      (prompt ids, max_new_tokens, seed) -> RunOutput                     the part that is timed

Our methods need no entry here: `loop_runner` runs any method of the proposer registry
(`specdec_lab.proposers.METHODS`) through `generate` — the one runner of our loop, for the benchmark (traced
or not), the lab's sweeps and notebooks. `ANCHORS` holds the other kind, implementations that are not our
loop (transformers' own `generate`: hf.py registers them). This module imports nothing else of the bench,
so both methods.py and hf.py can import it.

Per-step traces. A run of our loop can also return its steps, compacted to one short list per loop step
(`TRACE_FIELDS`: nodes verified incl. the root, candidate nodes, tokens emitted, the seconds of propose /
verify / accept, and whether the tree was a chain) plus its prefill seconds: what `specdec_lab.bench.replay`
needs to re-time the run under another verify cost curve. Times are rounded to microseconds; a
128-step row adds ~9 kB to the (indented) results file, --no-traces leaves it out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..generate import generate
from ..proposers.registry import METHODS, MethodSpec, MethodSpecError

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

# one loop step in a results file: [nodes, candidates, emitted, t_propose, t_verify, t_accept, chain]
#   nodes      tree size verified in the step's forward, root included (1 = a plain autoregressive step)
#   candidates nodes besides the root that could be accepted (`StepTrace.proposed`; Lookahead's Jacobi
#              window is verified but never accepted, so nodes - 1 - candidates of it are "extra")
#   emitted    tokens the step emitted (accepted drafts + bonus, cut at EOS)
#   t_*        seconds of the step's phases (`generate`'s loop: propose, verify forward, accept + keep +
#              proposer update), rounded to microseconds
#   chain      1 if the tree was a chain (verified with the model's own causal mask), 0 if it needed a tree
#              mask (`verify_tree`): the two cost differently for the same n on some kernels
TRACE_FIELDS = ("nodes", "candidates", "emitted", "t_propose", "t_verify", "t_accept", "chain")


def compact_steps(steps: Sequence) -> list[list]:
    """`GenerationResult.steps` (StepTrace) -> one short list per step, in `TRACE_FIELDS` order."""
    return [
        [
            len(s.tree_tokens),
            s.proposed,
            len(s.emitted),
            round(s.t_propose, 6),
            round(s.t_verify, 6),
            round(s.t_accept, 6),
            int(all(p == i - 1 for i, p in enumerate(s.tree_parents))),
        ]  # fmt: skip
        for s in steps
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
