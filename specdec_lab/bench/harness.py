"""Running and timing: every method on every prompt, back to back, resumable.

    for each prompt (in file order):
        for each method (order rotated by one per prompt, so slow drift — thermal, other load — does not
                         always hit the same method):
            sync; t0; tokens = method(prompt ids); sync; t1
        (with repeats R > 1 the rotated round runs R times, shifted by one each time, and each method keeps
         its fastest run: timing noise on a shared machine only ever adds time, as timeit assumes)
        compare every output with autoregressive's; where one differs, measure the AR top-2 logit gap there
        append one row per method (our loop's rows with their per-step trace), write results.json atomically

Methods (ours through `specdec_lab.generate`, transformers' anchors from `ANCHORS`) come from
methods.py as `run(ids, max_new_tokens, seed) -> RunOutput` callables; this file only runs and times them.

Every method is timed the same way, from outside (tokenization and text decoding excluded for all), so
our loop and transformers' are compared like with like. Warm-up runs every method once before any clock
is read: first-call costs (allocator, kernel selection, prompt lookup's cost-curve measurement) would
otherwise land on whichever method runs first.

Traces (`traces=True`, the default; CLI --no-traces): our loop's runs keep a `StepTrace` per step and each
of their rows records it compacted (`runner.TRACE_FIELDS`: nodes, candidates, emitted, t_propose, t_verify,
t_accept, chain per step) with the prefill seconds, under "trace"; `specdec_lab.bench.replay` re-times a run from
it. The clock is read from outside as always. Tracing adds the per-step bookkeeping (a few short lists per
step, negligible beside a CPU step; compacted after the clock stops) to every method of our loop
alike, autoregressive included, and the anchors nothing. On CUDA it also synchronizes the device per phase
(what the phase timings need), which can cost more: compare a --no-traces run there before quoting
speedups. Files written without traces load as before (their rows have no "trace").

Memory (`memory="fresh"`, the default; CLI --memory). Every run of our loop starts from nothing it learned
before (`generate(memory=None)`), so a row never depends on the rows before it — which the paired bootstrap
of report.py assumes. `memory="method"` gives each method one `Memory` for the whole benchmark (warm-up
included): α̂, probe schedules and cost corrections carry from prompt to prompt, as a server would see them.
The policy is recorded in the results' config, and a run resumes only under the same one.
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from ..cost.memory_wall import machine_bandwidth, memory_wall
from ..cost.timing import rotated
from ..io import Prompt, as_prompts, eos_ids, first_per_category
from ..machine import machine_info, sync
from ..memory import Memory
from ..models.attention import attention_kind
from ..models.fast_linear import linear_kind, linear_plan
from ..models.load import model_name, prompt_ids, unwrap
from ..models.quant import weights_kind, weights_record
from ..proposers.registry import BASELINE
from .builds import BuildSet
from .methods import BenchInputError, build_runner, parse_methods
from .results_file import Results, ResumeError, resume_rows
from .runner import Runner, RunOutput, compact_steps

__all__ = [
    "BenchConfig",
    "ResumeError",
    "machine_info",
    "run_benchmark",
]


# ---- configuration ----------------------------------------------------------------------------------
@dataclass
class BenchConfig:
    """Everything that defines a run (= the CLI arguments). Recorded in results.json under "config".

    Fields in `results_file.RESUME_IGNORES` may change between a run and its resumption; any other difference
    (or a different machine) makes `run_benchmark` refuse to resume, since rows measured under two
    configurations would be aggregated as one.
    """

    methods: str | Sequence = "autoregressive,prompt_lookup,hf_generate,hf_prompt_lookup"
    max_new_tokens: int = 128
    limit: int | None = None  # first N prompts only
    per_category: int | None = None  # first N prompts of each category (a stratified quick run)
    seed: int = 0
    out: str | None = None  # results.json path; None = keep in memory only
    fresh: bool = False  # ignore (and overwrite) existing results in `out`
    warmup_tokens: int = 8  # length of the one warm-up run per method
    model: str | None = None  # what was loaded; filled from the model when None
    prompts: str | None = None  # prompts file; None for prompts given programmatically
    device: str | None = None  # filled from the model when None
    dtype: str | None = None  # filled from the model when None
    linear: str | None = None  # `fast_linear.linear_kind`: "tuned" (default), "fast+onednn", "fast", "stock"
    attention: str | None = None  # the model's attention implementation: "sdpa_gqa" (default) or "sdpa"
    weights: str | None = None  # decoder weights, `quant.weights_kind`: "fp32", "int8" or "int4"; from the model
    head_weights: str | None = None  # the LM head's: "fp32", "int8" or "q8_0"; filled from the model
    traces: bool = True  # record our loop's per-step trace in each row (module docstring)
    repeats: int = 1  # rounds per prompt; each (prompt, method) keeps its fastest run (module docstring)
    memory: str = "fresh"  # "fresh": every run of our loop starts from nothing it learned before (rows are
    # independent); "method": one `Memory` per method, carried from each prompt (and repeat) to the next
    compile: bool = False  # our loop verifies with a compiled step (`specdec_lab.models.compiled`); anchors unchanged


MEMORY_POLICIES = ("fresh", "method")


# ---- prompts ----------------------------------------------------------------------------------------
def _ids(p: Prompt, tokenizer) -> list[int]:
    """A prompt's ids; text goes into the model's chat template (`models.prompt_ids`, chat="auto")."""
    try:
        return prompt_ids(p, tokenizer)
    except ValueError as err:
        raise BenchInputError(f"prompt {p.question_id!r}: {err}") from None


def _prompts_digest(prompts: list[Prompt]) -> str:
    """Identity of the whole prompt set (before --limit), so a resumed run is known to use the same one."""
    blob = json.dumps([[p.question_id, p.category, p.text, p.ids] for p in prompts], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


# ---- measurement helpers ----------------------------------------------------------------------------
def first_diff(reference: list[int], other: list[int]) -> int | None:
    """First position where two token lists differ (a length difference counts); None if equal."""
    for i, (a, b) in enumerate(zip(reference, other, strict=False)):
        if a != b:
            return i
    return None if len(reference) == len(other) else min(len(reference), len(other))


@torch.inference_mode()
def top2_gap(model, prompt_ids: list[int], ar_tokens: list[int], position: int) -> float | None:
    """Top-1 minus top-2 target logit where autoregressive chose ar_tokens[position].

    One plain forward over prompt + ar_tokens[:position]. A gap near float rounding (~1e-4 for fp32)
    means the methods disagree on a near-tie — numerics, not a bug; a large gap means a bug.
    """
    if position >= len(ar_tokens):
        return None  # AR had already stopped: there is no AR choice to compare against
    device = next(model.parameters()).device
    x = torch.tensor([prompt_ids + ar_tokens[:position]], device=device)
    logits = model(input_ids=x, use_cache=False, logits_to_keep=1).logits[0, -1].float()
    top = logits.topk(2).values
    return float(top[0] - top[1])


def _timed(run: Runner, ids: list[int], max_new_tokens: int, seed: int, device) -> tuple[RunOutput, float]:
    gc.collect()  # garbage of the previous method must not be collected on this one's clock (cheap: frozen)
    torch.manual_seed(seed)  # HF draws from the global RNG; our loop from its own seeded generator
    sync(device)
    t0 = time.perf_counter()
    out = run(ids, max_new_tokens, seed)
    sync(device)
    return out, time.perf_counter() - t0


def _trace(r: RunOutput) -> dict | None:
    """The row's "trace": prefill seconds and one short list per step (`runner.TRACE_FIELDS`); None for
    untraced runs (anchors, --no-traces)."""
    if r.steps is None:
        return None
    return {"prefill_seconds": round(r.prefill_seconds or 0.0, 6), "steps": compact_steps(r.steps)}


# ---- the benchmark ----------------------------------------------------------------------------------
def run_benchmark(
    lm,
    prompts: Sequence,
    methods: str | Sequence | None = None,
    config: BenchConfig | None = None,
    *,
    progress: bool = True,
    eos_token_id: int | Sequence[int] | None = None,
    models: dict | None = None,
    **overrides,
) -> dict:
    """Run every method on every prompt; return (and write to config.out) the results dict.

    lm:       a LoadedModel (text prompts are chat-templated with its tokenizer) or a bare HF causal LM
    prompts:  Prompt records (e.g. from `io.load_prompts`), texts, or token-id lists (for tokenizer-less models)
    methods:  "a,b:key=value" or a list of specs; overrides config.methods
    config:   BenchConfig; keyword `overrides` replace its fields (e.g. max_new_tokens=16, out="r.json")
    models:   {weights: model} for labels with another build's weights ("hybrid@int4+compile": `builds`)

    With config.out set and the file present, prompts already done for every method are skipped (unless
    config.fresh); a file from a different configuration or machine raises ResumeError.
    """
    config = replace(config or BenchConfig(), **overrides)
    if methods is not None:
        config = replace(config, methods=methods)
    if not isinstance(config.max_new_tokens, int) or config.max_new_tokens < 1:
        raise BenchInputError(f"max_new_tokens must be a positive integer, got {config.max_new_tokens!r}")
    if not isinstance(config.repeats, int) or config.repeats < 1:
        raise BenchInputError(f"repeats must be a positive integer, got {config.repeats!r}")
    if config.memory not in MEMORY_POLICIES:
        raise BenchInputError(f"memory must be one of {', '.join(MEMORY_POLICIES)}, got {config.memory!r}")
    if config.limit is not None and config.limit < 1:
        raise BenchInputError(f"limit must be >= 1, got {config.limit}")
    specs = parse_methods(config.methods)
    labels = [s.label for s in specs]
    model, tokenizer = unwrap(lm)
    device = next(model.parameters()).device
    all_prompts = as_prompts(prompts)
    selected = first_per_category(all_prompts, config.per_category) if config.per_category else all_prompts
    selected = selected[: config.limit] if config.limit else selected

    record = asdict(config)  # "config" in results.json: all CLI args, with what the model says filled in
    record.update(
        methods=labels,
        model=config.model or model_name(lm),
        device=str(device),
        dtype=str(model.dtype).removeprefix("torch."),
        linear=linear_kind(model),
        linear_plan=linear_plan(model),  # {shape: kernel per row count}, measured on this machine when "tuned"
        attention=attention_kind(model),
        weights=weights_kind(model),
        head_weights=weights_record(model)["head"],
        quant=weights_record(model),  # where the weights came from (GGUF Q4_1 or requantised), kernel dtype, head
        prompts_sha256=_prompts_digest(all_prompts),
    )
    builds = BuildSet(labels, model, config.compile, models)
    builds.make_steps(_compiled_step)
    record.update(compile_seconds=None, builds=builds.record())
    machine = machine_info(device)
    out = Path(config.out) if config.out else None
    rows = resume_rows(out, record, machine, labels) if out and out.exists() and not config.fresh else []
    results = Results(record, machine, labels, len(all_prompts), rows, out)
    if device.type == "cpu":  # the floor of a step that reads every fp32 weight once (specdec_lab.cost.memory_wall)
        results.memory_wall = memory_wall(model, bandwidth=machine_bandwidth())
    done = {r["question_id"] for r in rows}
    todo = [(i, p) for i, p in enumerate(selected) if p.question_id not in done]
    if todo:
        torch.manual_seed(config.seed)
        eos = eos_ids(model, tokenizer, eos_token_id)
        memory = (lambda: Memory()) if config.memory == "method" else (lambda: None)
        runners = {s.label: build_runner(s, builds.model(s.label), eos, traced=config.traces, memory=memory(),
                                         step=builds.step(s.label)) for s in specs}  # fmt: skip
        ids = {p.question_id: _ids(p, tokenizer) for _, p in todo}  # tokenized before any clock starts
        if builds.steps:  # one cache capacity for every prompt, and all its buckets compiled now
            from ..models.compiled import capacity_for

            capacity = capacity_for(max(map(len, ids.values())) + config.max_new_tokens)
            seconds = {}
            for build, step in builds.steps.items():
                step.capacity = max(step.capacity, capacity)
                seconds[build.name] = round(step.warm_up(), 1)
            # the base build's seconds as before; every compiled build's under compile_seconds_by_build
            record.update(compile_seconds=seconds.get(builds.base.name, sum(seconds.values())),
                          compile_seconds_by_build=seconds, compile_capacity=capacity)  # fmt: skip
        # Everything alive now (torch, transformers, the model) stays alive: freezing it takes it out of
        # the collector's walks, so the gc.collect() before each timed run costs ~ms instead of ~0.5 s.
        gc.collect()
        gc.freeze()
        try:
            _run_prompts(results, runners, todo, ids, builds, config, progress, done=len(selected) - len(todo))
        finally:
            gc.unfreeze()
    return results.save()


def _compiled_step(model, fuse: bool = True):
    """The compiled step a compiled build asks for; a model it cannot serve is an input error."""
    from ..models.compiled import CompileUnavailable, compiled_step

    try:
        return compiled_step(model, fuse=fuse)
    except CompileUnavailable as err:
        raise BenchInputError(f"--compile: {err}") from None


def _run_prompts(
    results: Results,
    runners: dict[str, Runner],
    todo: list,
    ids: dict,
    builds: BuildSet,
    config: BenchConfig,
    progress: bool,
    done: int,
) -> None:
    from tqdm.auto import tqdm

    device = next(builds.model(results.labels[0]).parameters()).device
    labels = results.labels
    # Warm-up: one short run of every method (first-call costs, cost-curve measurement); not recorded.
    warm = ids[todo[0][1].question_id]
    for label in labels:
        _timed(runners[label], warm, min(config.warmup_tokens, config.max_new_tokens), config.seed, device)

    with tqdm(total=done + len(todo), initial=done, desc="bench", unit="prompt", disable=not progress) as bar:
        for index, p in todo:
            x = ids[p.question_id]
            n, seed = config.max_new_tokens, config.seed
            outs: dict[str, tuple[RunOutput, float]] = {}  # label -> its fastest run and that run's seconds
            times: dict[str, list[float]] = {label: [] for label in labels}
            for round_ in range(config.repeats):
                for label in rotated(labels, index + round_):  # each method runs first equally often
                    r, seconds = _timed(runners[label], x, n, seed, device)
                    times[label].append(seconds)
                    if label not in outs or seconds < outs[label][1]:
                        outs[label] = (r, seconds)
            for label in labels:  # rows in the order given, whatever order they ran in
                r, seconds = outs[label]
                ref = builds.reference(label)  # its build's autoregressive (`builds`)
                ar = outs[ref][0].tokens if ref is not None else None
                diff = first_diff(ar, r.tokens) if ar is not None else None
                results.rows.append(
                    {
                        "question_id": p.question_id,
                        "category": p.category,
                        "method": label,
                        "prompt_tokens": len(x),
                        "new_tokens": len(r.tokens),
                        "seconds": seconds,
                        "tokens_per_s": len(r.tokens) / seconds if seconds > 0 else None,
                        "forwards": r.forwards,
                        "mean_accepted": len(r.tokens) / r.forwards if r.forwards else None,
                        "stop_reason": r.stop_reason,
                        "identical": (diff is None) if ar is not None else None,
                        "first_diff": diff,
                        "top2_gap": top2_gap(builds.model(ref), x, ar, diff) if diff is not None else None,
                        "proposer": r.info,
                        "tokens": r.tokens,
                    }
                )
                if ref is not None and ref != BASELINE:
                    results.rows[-1]["reference"] = ref
                if config.repeats > 1:
                    results.rows[-1]["seconds_runs"] = [round(t, 6) for t in times[label]]
                trace = _trace(r)  # of the kept (fastest) run
                if trace is not None:
                    results.rows[-1]["trace"] = trace
            results.save()
            bar.update(1)
