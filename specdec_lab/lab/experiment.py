"""The speedup lab: one method against autoregressive decoding on one prompt, in one process, token by token.

    run_experiment(lm, prompt, "prompt_lookup:max_draft=4")      # -> LabResult
        warm-up: both methods, a few tokens each (first-call costs: allocator, cost-curve measurement,
                 draft loading — they would otherwise land on whichever runs first)
        method:  generate(..., trace=True)  — every step's tree, accepted path and emitted tokens
        baseline: generate(method="autoregressive") on the same ids, temperature and seed
    -> provenance of every emitted token, accepted length per step, tokens/s of both, speed-up,
       identical-to-baseline (the losslessness check; meaningful at temperature 0), and the size of the
       verify forward: tokens verified per forward (root included), of which candidates and non-candidates

Which of several runs was fastest (`fastest`) is decided as `course.compare` decides a sentence: speed-ups
within a relative tolerance of the best count as tied, since timings this close move on a re-run.

What each step's trace says (provenance of every token, the forward's size, the instructive step) is
`lab.trace_reading`; this module re-exports it.

Method specs are the registry's grammar ("name:key=value:...", `proposers.registry`), so a method added with
`register_method` runs here, in the dashboard and in sweeps without editing any of them. Notebook 08 runs
this; `python -m specdec_lab.sweep` executes notebook 08 once per grid point and reads `LabResult.to_dict()`
(or `experiment_record`).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from ..generate import GenerationResult, StepTrace, generate
from ..machine import machine
from ..models.load import prompt_ids, unwrap
from ..proposers.registry import BASELINE, METHODS, MethodSpec, check_method_spec, parse_method_spec
from .course import within_tol
from .trace_reading import PROVENANCE, forward_sizes, instructive_step, json_number, provenance

__all__ = [
    "LabResult",
    "RunSetup",
    "prepare",
    "run_experiment",
    "instructive_step",
    "experiment_record",
    "fastest",
    "slowest",
    "round_spread",
    "provenance",
    "forward_sizes",
    "PROVENANCE",
    "NOISY_SPREAD",
]

NOISY_SPREAD = 1.5  # baseline step times p90/median above this: the timings are flagged unreliable


# ---- one experiment ------------------------------------------------------------------------------------
@dataclass
class LabResult:
    """The method's and the baseline's runs on one prompt, and what the lab shows of them."""

    spec: str  # the method spec as given (its label)
    method: str  # the registered name
    params: dict  # proposer parameters from the spec
    temperature: float
    seed: int
    max_new_tokens: int
    result: GenerationResult  # the method's run (traced)
    baseline: GenerationResult | None  # None when stopped before the baseline ran
    baseline_method: str = BASELINE
    prompt: str | None = None  # the prompt text (None for token ids)
    extra: dict = field(default_factory=dict)  # caller's labels (prompt_id, category, ...)

    @property
    def stopped(self) -> bool:
        return self.result.stop_reason == "stopped" or (self.baseline is None or self.baseline.stop_reason == "stopped")

    @property
    def provenance(self) -> list[str]:
        return provenance(self.result.steps)

    @property
    def provenance_counts(self) -> dict[str, int]:
        counts = Counter(self.provenance)
        return {k: counts.get(k, 0) for k in PROVENANCE}

    @property
    def accepted_lengths(self) -> list[int]:
        """Draft tokens accepted per step (bonus excluded; 0 for a plain step)."""
        return [min(s.accepted, len(s.emitted)) for s in self.result.steps]

    @property
    def mean_accepted(self) -> float:
        return self.result.mean_accepted  # tokens per target forward, bonus included

    @property
    def tokens_per_s(self) -> float:
        return self.result.tokens_per_s

    @property
    def baseline_tokens_per_s(self) -> float:
        return self.baseline.tokens_per_s if self.baseline is not None else float("nan")

    @property
    def speedup(self) -> float:
        """Tokens/s of the method ÷ the baseline's (= time ratio when both emitted the same tokens)."""
        return self.tokens_per_s / self.baseline_tokens_per_s if self.baseline is not None else float("nan")

    @property
    def identical(self) -> bool | None:
        """Same tokens as the baseline (over the common length when a run was stopped); None without one."""
        if self.baseline is None:
            return None
        a, b = self.result.tokens, self.baseline.tokens
        if self.stopped:
            n = min(len(a), len(b))
            return a[:n] == b[:n]
        return a == b

    @property
    def baseline_step_ms(self) -> float:
        """Median wall time of one autoregressive step (ms): one target forward of one token."""
        if self.baseline is None or not self.baseline.steps:
            return float("nan")
        return 1e3 * statistics.median(_step_seconds(self.baseline))

    @property
    def timing_spread(self) -> float:
        """p90 / median of the baseline's step times: every step does the same work, so a spread well above
        1 (NOISY_SPREAD) means the CPU was busy with something else and the timings are unreliable."""
        if self.baseline is None or len(self.baseline.steps) < 4:
            return float("nan")
        times = sorted(_step_seconds(self.baseline))
        return times[int(0.9 * (len(times) - 1))] / statistics.median(times)

    @property
    def noisy(self) -> bool:
        return self.timing_spread > NOISY_SPREAD

    def to_dict(self, steps: bool = True) -> dict:
        """JSON-ready record (what the sweep runner stores per point); steps=False drops the traces."""
        base = self.baseline
        out = {
            "method": self.spec,
            "method_name": self.method,
            "params": dict(self.params),
            "baseline_method": self.baseline_method,
            "temperature": self.temperature,
            "seed": self.seed,
            "max_new_tokens": self.max_new_tokens,
            **self.extra,
            "speedup": json_number(self.speedup),
            "mean_accepted": json_number(self.mean_accepted),
            "tokens_per_s": json_number(self.tokens_per_s),
            "baseline_tokens_per_s": json_number(self.baseline_tokens_per_s),
            "identical": self.identical,
            "stopped": self.stopped,
            "baseline_step_ms": json_number(self.baseline_step_ms),
            "timing_spread": json_number(self.timing_spread),
            "noisy": self.noisy,
            "new_tokens": len(self.result.tokens),
            "baseline_new_tokens": None if base is None else len(base.tokens),
            "forwards": self.result.forwards,
            **forward_sizes(self.result.steps),
            "seconds": json_number(self.result.seconds),
            "baseline_seconds": None if base is None else json_number(base.seconds),
            "stop_reason": self.result.stop_reason,
            "provenance_counts": self.provenance_counts,
            "accepted_lengths": self.accepted_lengths,
            "prompt": self.prompt,
            "prompt_tokens": len(self.result.prompt_tokens),
            "text": self.result.text,
            "baseline_text": None if base is None else base.text,
            "tokens": list(self.result.tokens),
            "provenance": self.provenance,
            "proposer": _jsonable(self.result.proposer),
            "machine": machine().as_dict(),
        }
        if steps:
            out["steps"] = [_jsonable(asdict(s)) for s in self.result.steps]
        return out


def _step_seconds(result: GenerationResult) -> list[float]:
    return [s.t_propose + s.t_verify + s.t_accept for s in result.steps]


def _jsonable(obj):
    """Proposer summaries/info may hold tuples, numpy or torch scalars: make them plain JSON values."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        try:
            return _jsonable(obj.item())
        except (ValueError, RuntimeError):
            pass
    return str(obj)


# progress hook of run_experiment: (phase "warmup" | "method" | "baseline", step, trace, emitted) -> False stops
LabHook = Callable[[str, int, StepTrace | None, int], bool | None]


@dataclass
class RunSetup:
    """One method spec ready to run on one prompt: parsed and checked against the registry, the prompt
    tokenised (a text prompt goes into the chat template). `run(name, n)` generates with the method's own
    settings when `name` is the spec's method, else as the baseline does (its default rule, and the spec's
    sampling keys top_k / top_p, so both runs sample alike)."""

    model: object
    tokenizer: object
    prompt: object  # token ids (or the text, for a model without a tokenizer it is already ids)
    text: str | None  # the prompt text (None for token ids)
    parsed: MethodSpec
    params: dict  # proposer parameters from the spec
    loop: dict  # loop keys from the spec (accept, top_k, top_p; temperature removed)
    temperature: float
    seed: int

    def run(self, name: str, n: int, on_step=None) -> GenerationResult:
        own = {**self.loop, **self.params} if name == self.parsed.name else self.sampling
        return generate(self.model, self.prompt, method=name, max_new_tokens=n, on_step=on_step,
                        tokenizer=self.tokenizer, temperature=self.temperature, seed=self.seed, **own)  # fmt: skip

    @property
    def sampling(self) -> dict:
        return {k: v for k, v in self.loop.items() if k != "accept"}


def prepare(
    model, prompt, spec: str, *, temperature: float = 0.0, seed: int = 0, baseline: str = BASELINE,
    tokenizer=None, chat: bool | str = "auto"
) -> RunSetup:  # fmt: skip
    """Check `spec` and `baseline` against the registry and tokenise the prompt (`run_experiment`'s setup)."""
    model, tokenizer = unwrap(model, tokenizer)
    parsed = parse_method_spec(spec)
    if parsed.name not in METHODS:
        raise ValueError(
            f"method {parsed.name!r} is not a registered method (the lab needs our loop's traces); "
            f"registered: {', '.join(sorted(METHODS))}"
        )
    if baseline not in METHODS:
        raise ValueError(f"baseline {baseline!r} is not a registered method; registered: {', '.join(sorted(METHODS))}")
    parsed = check_method_spec(parsed)  # unknown keys, ill-typed values, unusable rules
    loop, params = parsed.loop, parsed.proposer
    if "temperature" in loop and float(loop.pop("temperature")) != float(temperature):
        raise ValueError(
            f"method spec {spec!r} sets temperature={parsed.params['temperature']} but temperature={temperature} "
            "was passed: give it once"
        )
    text = prompt if isinstance(prompt, str) else None
    if isinstance(prompt, str) and tokenizer is not None:
        prompt = prompt_ids(prompt, tokenizer, chat)
    return RunSetup(model, tokenizer, prompt, text, parsed, params, loop, float(temperature), seed)


def run_experiment(
    model,
    prompt,
    spec: str,
    *,
    temperature: float = 0.0,
    max_new_tokens: int = 64,
    seed: int = 0,
    baseline: str = BASELINE,
    on_step: LabHook | None = None,
    tokenizer=None,
    chat: bool | str = "auto",
    warmup_tokens: int = 8,
    extra: dict | None = None,
) -> LabResult:
    """Run `spec` (e.g. "draft:max_draft=4") and `baseline` on the same prompt; see the module docstring.

    model:   a LoadedModel (a text prompt goes into the chat template: chat="auto", `models.prompt_ids`) or a
             bare HF model + ids
    spec:    the bench's method spec; loop keys go to generate (accept: the method's run only; top_k,
             top_p: both runs). temperature may be in the spec too, but must agree with `temperature`
    on_step: progress/stop hook, called after every step of every run with its phase; returning False
             stops: the method's tokens so far are kept and the remaining runs are skipped
    warmup_tokens: a short untimed run of each method first (0: none)

    Every run — warm-ups included — starts from a fresh `Memory`: nothing one run learns (α̂, probe schedules,
    cost corrections) reaches the next, so the warm-up cannot change the run it precedes.
    """
    setup = prepare(model, prompt, spec, temperature=temperature, seed=seed, baseline=baseline,
                    tokenizer=tokenizer, chat=chat)  # fmt: skip
    parsed = setup.parsed
    state = {"stop": False}

    def hook(phase: str):
        def step_hook(step: int, trace: StepTrace | None, emitted: int):
            if on_step is not None and on_step(phase, step, trace, emitted) is False:
                state["stop"] = True
                return False
            return None

        return step_hook

    if warmup_tokens > 0:
        for name in (parsed.name, baseline):
            if not state["stop"]:
                setup.run(name, min(warmup_tokens, max_new_tokens), hook("warmup"))
    if state["stop"]:  # stopped during warm-up: nothing was measured
        ids = [int(t) for t in setup.prompt] if not isinstance(setup.prompt, str) else []
        result = GenerationResult([], ids, "", "stopped", parsed.name, 0.0, 0.0)
        base = None
    else:
        result = setup.run(parsed.name, max_new_tokens, hook("method"))
        base = None if state["stop"] else setup.run(baseline, max_new_tokens, hook("baseline"))
    return LabResult(
        spec=parsed.label,
        method=parsed.name,
        params=setup.params,
        temperature=float(temperature),
        seed=seed,
        max_new_tokens=max_new_tokens,
        result=result,
        baseline=base,
        baseline_method=baseline,
        prompt=setup.text,
        extra=dict(extra or {}),
    )


def experiment_record(results: Sequence[LabResult], steps: bool = False) -> dict:
    """One sweep point over one or more prompts: pooled numbers on top, each prompt's `to_dict` in "runs".

    tokens_per_s pools tokens and seconds over the prompts (long prompts weigh more, as in a benchmark);
    speedup = pooled method tokens/s ÷ pooled baseline tokens/s; identical = every prompt identical;
    verified_per_forward (and the other `forward_sizes`) average over every step of every prompt.
    """
    if not results:
        raise ValueError("experiment_record needs at least one LabResult")
    first = results[0]
    tokens = sum(len(r.result.tokens) for r in results)
    seconds = sum(r.result.seconds for r in results)
    forwards = sum(r.result.forwards for r in results)
    done = [r for r in results if r.baseline is not None]
    base_tokens = sum(len(r.baseline.tokens) for r in done)
    base_seconds = sum(r.baseline.seconds for r in done)
    tps = tokens / seconds if seconds > 0 else float("nan")
    base_tps = base_tokens / base_seconds if base_seconds > 0 else float("nan")
    counts = Counter()
    for r in results:
        counts.update(r.provenance_counts)
    runs = [r.to_dict(steps=steps) for r in results]
    for run in runs:
        run.pop("machine")
    return {
        "method": first.spec,
        "method_name": first.method,
        "params": dict(first.params),
        "baseline_method": first.baseline_method,
        "temperature": first.temperature,
        "seed": first.seed,
        "max_new_tokens": first.max_new_tokens,
        "prompts": len(results),
        "speedup": json_number(tps / base_tps) if done else None,
        "mean_accepted": json_number(tokens / max(forwards, 1)),
        "tokens_per_s": json_number(tps),
        "baseline_tokens_per_s": json_number(base_tps),
        "identical": all(r.identical for r in results) if len(done) == len(results) else None,
        "stopped": any(r.stopped for r in results),
        "timing_spread": json_number(
            max((x for r in results if not math.isnan(x := r.timing_spread)), default=math.nan)
        ),
        "noisy": any(r.noisy for r in results),
        "new_tokens": tokens,
        "forwards": forwards,
        **forward_sizes([s for r in results for s in r.result.steps]),
        "provenance_counts": {k: counts.get(k, 0) for k in PROVENANCE},
        "machine": machine().as_dict(),
        "runs": runs,
    }


def fastest(results: Sequence[LabResult], rel_tol: float = 0.0) -> list[LabResult]:
    """The runs whose speed-up is the highest, or within `rel_tol` of it by `course.compare`'s rule
    (|a − b| <= rel_tol · min(|a|, |b|): the larger at most (1 + rel_tol)× the smaller), fastest first (equal
    speed-ups in the order given): one run where the timings tell the fastest apart, several where they cannot.
    Runs without a speed-up (stopped before the baseline ran: NaN) are left out; none left: []."""
    return _extreme(results, rel_tol, highest=True)


def slowest(results: Sequence[LabResult], rel_tol: float = 0.0) -> list[LabResult]:
    """`fastest`'s mirror: the runs whose speed-up is the lowest, or within `rel_tol` of it by the same rule,
    slowest first; several where the timings cannot tell the slowest apart."""
    return _extreme(results, rel_tol, highest=False)


def _extreme(results: Sequence[LabResult], rel_tol: float, highest: bool) -> list[LabResult]:
    timed = [r for r in results if not math.isnan(r.speedup)]
    if not timed:
        return []
    end = (max if highest else min)(r.speedup for r in timed)
    tied = [r for r in timed if within_tol(r.speedup, end, rel_tol)]  # course.compare's reading of "within"
    return sorted(tied, key=lambda r: -r.speedup if highest else r.speedup)


def round_spread(results: Sequence[LabResult]) -> float:
    """The run's own timing noise: the largest relative gap between two rounds of one method (or of the shared
    baseline), max/min − 1, over the rounds `lab.compare.compare_methods` kept in `extra`; NaN where no run
    had two rounds."""
    series = [r.extra.get("round_seconds") or [] for r in results]
    series += [r.extra.get("baseline_round_seconds") or [] for r in results[:1]]
    gaps = [max(x) / min(x) - 1 for x in series if len(x) >= 2 and min(x) > 0]
    return max(gaps) if gaps else math.nan
