"""One benchmark harness for every decoding method, with transformers' own `generate` as anchors.

    python -m specdec_lab.bench --model smollm2-135m --prompts data/prompts.jsonl \\
        --methods autoregressive,prompt_lookup,hf_generate,hf_prompt_lookup --max-new-tokens 128 --out r.json

    >>> results = run_benchmark(specdec_lab.tiny_model(), [[1, 2, 3, 1, 2]], "autoregressive,hf_generate",
    ...                         max_new_tokens=16, progress=False)
    >>> print(format_table(results))

runner.py defines what is run (`Runner`, `RunOutput`) and the anchors' registry (`ANCHORS`), hf.py
registers transformers' own generate there, methods.py parses method specs and builds runners (ours from
the proposer registry, `specdec_lab.proposers.METHODS`), harness.py runs and times them (resumable,
atomic writes), report.py aggregates and prints, __main__.py is the CLI. Prompts (`Prompt`, `load_prompts`)
come from `specdec_lab.io`, shared with self-distillation and the dashboards.
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
