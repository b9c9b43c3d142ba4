"""One benchmark harness for every decoding method, with transformers' own `generate` as anchors.

    python -m specdec_lab.bench --model smollm2-135m --prompts data/prompts.jsonl \\
        --methods autoregressive,prompt_lookup,hf_generate,hf_prompt_lookup --max-new-tokens 128 --out r.json

    >>> results = run_benchmark(specdec_lab.tiny_model(), [[1, 2, 3, 1, 2]], "autoregressive,hf_generate",
    ...                         max_new_tokens=16, progress=False)
    >>> print(format_table(results))

methods.py parses method specs and builds runners, harness.py runs and times them (resumable, atomic
writes), report.py aggregates and prints, hf.py holds the anchors (`HF_RUNNERS`), __main__.py is the CLI.
"""

from .harness import (
    BenchConfig,
    Prompt,
    ResumeError,
    load_prompts,
    machine_info,
    run_benchmark,
    write_json_atomic,
)
from .hf import HF_RUNNERS
from .methods import BenchInputError, MethodSpec, RunOutput, known_methods, parse_method_spec, parse_methods
from .report import format_table, method_stats, summarize

__all__ = [
    "BenchConfig",
    "BenchInputError",
    "MethodSpec",
    "Prompt",
    "ResumeError",
    "RunOutput",
    "known_methods",
    "load_prompts",
    "machine_info",
    "parse_method_spec",
    "parse_methods",
    "run_benchmark",
    "write_json_atomic",
    "HF_RUNNERS",
    "format_table",
    "method_stats",
    "summarize",
]
