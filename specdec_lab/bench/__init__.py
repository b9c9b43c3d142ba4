"""One benchmark harness for every decoding method, with transformers' own `generate` as anchors.

    python -m specdec_lab.bench --model smollm2-135m --prompts data/prompts.jsonl \\
        --methods autoregressive,prompt_lookup,hf_generate,hf_prompt_lookup --max-new-tokens 128 --out r.json

    >>> results = run_benchmark(specdec_lab.tiny_model(), [[1, 2, 3, 1, 2]], "autoregressive,hf_generate",
    ...                         max_new_tokens=16, progress=False)
    >>> print(format_table(results))

The run:
    runner.py        what is run (`Runner`, `RunOutput`) and the anchors' registry (`ANCHORS`)
    hf.py            transformers' own generate (and assisted generation) as anchors
    llamacpp.py      llama.cpp through llama-cpp-python on the same GGUF file (optional)
    methods.py       method specs, and runners built from the proposer registry (`proposers.METHODS`)
    builds.py        `method@build`: eager or compiled steps, fp32 or quantized weights, in one run
    harness.py       runs and times them, every method on every prompt back to back (resumable, atomic)
    results_file.py  what a run writes after every prompt, and what a resumed run may keep
    report.py        aggregation, intervals, the table the CLI prints; __main__.py is the CLI
Its analysis (each a CLI, `python -m specdec_lab.bench.<name>`):
    trace.py         the per-step trace a bench row carries, one record (`TraceStep`) that the three below read
    replay.py        a recorded run re-timed under another device's cost curve
    redecide.py      the same, each method re-choosing its sizes under that curve
    decompose.py     a method's speedup as a product of factors, from the traces
    step_variants.py the verify step built four ways (eager / compiled, fp32 / int8 / int4) as cost curves
    compile_levers.py the compiled step's options against the memory wall, in one timing loop
    device_check.py  what a borrowed accelerator should run, as one command and one results file
    literature.py    published results, one row per (method, paper, setting), each checked at its source
    readme.py        the README's generated blocks (headline table, notebook run times), rendered from files
Prompts (`Prompt`, `load_prompts`) come from `specdec_lab.io`, shared with self-distillation and the dashboards.
"""

from .harness import BenchConfig, ResumeError, machine_info, run_benchmark
from .hf import NOTES  # importing hf registers the anchors
from .methods import BenchInputError, known_methods, parse_methods
from .report import format_table, method_stats, speedup_interval, summarize
from .runner import ANCHORS, Runner, RunOutput, register_anchor

__all__ = [
    "BenchConfig",
    "BenchInputError",
    "ResumeError",
    "RunOutput",
    "known_methods",
    "machine_info",
    "parse_methods",
    "run_benchmark",
    "ANCHORS",
    "NOTES",
    "Runner",
    "register_anchor",
    "format_table",
    "method_stats",
    "speedup_interval",
    "summarize",
]
