"""CLI: python -m specdec_lab.bench --methods autoregressive,prompt_lookup,hf_generate --limit 4 --out r.json

Builds in one run: `--methods autoregressive,hybrid,autoregressive@int4+compile,hybrid@int4+compile` runs our
methods on other weights and/or the compiled step too (`builds`); the CLI loads each weights kind named once.

Input is checked before the model is loaded (method names and parameters, prompts file, --limit), so a
typo fails in a second, not after loading. Results are written after every prompt; rerunning the same
command resumes, --fresh starts over.
"""

from __future__ import annotations

import argparse
import sys

import torch

from ..io import PromptError, load_prompts, positive_int
from ..models.attention import ATTENTION
from ..models.load import ModelNotFoundError, load_model
from ..models.quant import HEADS, WEIGHTS
from .builds import split_label
from .harness import BenchConfig, ResumeError, run_benchmark
from .methods import BenchInputError, known_methods, parse_methods
from .report import format_table

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def parse_args(argv: list[str] | None = None) -> tuple[BenchConfig, bool]:
    """-> (config, no_progress)."""
    d = BenchConfig()
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.bench",
        description="Benchmark decoding methods (ours, and transformers' generate as anchors).",
        epilog=f"methods: {', '.join(known_methods())}. Rerunning with the same --out resumes.",
    )
    p.add_argument("--model", default="smollm2-135m", help="shipped model name, HF folder or .gguf file")
    p.add_argument("--prompts", default="data/prompts.jsonl", help="question.jsonl: question_id, category, turns")
    p.add_argument(
        "--methods",
        default=d.methods,
        help="comma-separated name[:key=value...][@build], e.g. prompt_lookup:max_draft=4:draft_length=heuristic; "
        "@build (weights[+compile], e.g. hybrid@int4+compile) runs one of our methods on that build in the same "
        "run, compared with autoregressive@build",
    )
    p.add_argument("--max-new-tokens", type=positive_int, default=d.max_new_tokens)
    p.add_argument("--limit", type=positive_int, default=None, help="first N prompts only")
    p.add_argument("--per-category", type=positive_int, default=None, help="first N prompts of each category")
    p.add_argument("--out", default="results/bench.json", help="results JSON (written after every prompt)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:1, ...")
    p.add_argument("--dtype", default="float32", choices=sorted(DTYPES))
    p.add_argument("--linear", default="tuned", choices=["tuned", "fast+onednn", "fast", "stock"],
                   help="tuned: FastLinear with the kernel per shape and row count measured on this machine (cached; "
                   "models.fast_linear.tune_linear); fast+onednn: FastLinear's default plan (W x^T for 1-2 rows, "
                   "oneDNN-packed weights for 3-64); fast: W x^T only, no packed copies (half the memory); stock: "
                   "torch's nn.Linear. Every method, baselines included, runs on the same model")  # fmt: skip
    p.add_argument("--attention", default=ATTENTION, choices=[ATTENTION, "sdpa"],
                   help=f"{ATTENTION}: SDPA with grouped-query attention inside the kernel also under a mask (no K/V "
                   "copies; specdec_lab.models.attention); sdpa: transformers' own")  # fmt: skip
    p.add_argument("--weights", default="fp32", choices=list(WEIGHTS),
                   help="decoder linear weights: fp32, or weight-only int8 (per channel) / int4 (groups of 32; "
                   "the shipped GGUF's own Q4_1) on torch's CPU kernels (specdec_lab.models.quant)")  # fmt: skip
    p.add_argument("--head-weights", default="auto", choices=["auto", *HEADS],
                   help="the LM head (tied embedding) with --weights int8/int4: q8_0 (the file's own Q8_0 blocks; "
                        "auto), fp32 (their de-quantized values), int8 (per channel)")  # fmt: skip
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--warmup-tokens", type=positive_int, default=d.warmup_tokens)
    p.add_argument("--traces", action=argparse.BooleanOptionalAction, default=d.traces,
                   help="record our loop's per-step trace in each row (tree size, tokens emitted, phase seconds; "
                   "what specdec_lab.bench.replay re-times); --no-traces for smaller files")  # fmt: skip
    p.add_argument("--repeats", type=positive_int, default=d.repeats,
                   help="run every prompt's methods N times (rotated each round) and keep each method's fastest "
                   "run: noise on a shared machine only adds time. N times slower; rows record every run's "
                   "seconds")  # fmt: skip
    p.add_argument("--memory", default=d.memory, choices=["fresh", "method"],
                   help="fresh: every run of our methods starts from nothing learned before (rows independent); "
                   "method: one Memory per method carried across prompts (alpha, probe schedule, cost "
                   "corrections), as a server would. Recorded in the results")  # fmt: skip
    p.add_argument("--compile", action="store_true",
                   help="our loop verifies with the target's compiled body (models.compiled: torch.compile, "
                   "nodes padded to buckets); all buckets are compiled before the runs, their seconds recorded as "
                   "compile_seconds")  # fmt: skip
    p.add_argument("--fresh", action="store_true", help="overwrite --out instead of resuming from it")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    config = BenchConfig(
        methods=a.methods,
        max_new_tokens=a.max_new_tokens,
        limit=a.limit,
        per_category=a.per_category,
        seed=a.seed,
        out=a.out,
        fresh=a.fresh,
        warmup_tokens=a.warmup_tokens,
        model=a.model,
        prompts=a.prompts,
        device=a.device,
        dtype=a.dtype,
        linear=a.linear,
        attention=a.attention,
        weights=a.weights,
        head_weights=a.head_weights,
        traces=a.traces,
        repeats=a.repeats,
        memory=a.memory,
        compile=a.compile,
    )
    return config, a.no_progress


def main(argv: list[str] | None = None) -> int:
    config, no_progress = parse_args(argv)

    def fail(msg: str) -> int:
        print(f"specdec_lab.bench: error: {msg}", file=sys.stderr)
        return 2

    try:
        specs = parse_methods(config.methods)
        prompts = load_prompts(config.prompts)
        if torch.device(config.device).type == "cuda" and not torch.cuda.is_available():
            return fail(f"--device {config.device}: CUDA is not available on this machine")

        def load(weights: str, head: str | None = None):
            return load_model(
                config.model,
                device=config.device,
                dtype=DTYPES[config.dtype],
                fast_linear=config.linear != "stock",
                pack_weights=config.linear in ("tuned", "fast+onednn"),
                tune_kernels=config.linear == "tuned",
                attn_implementation=None if config.attention == ATTENTION else config.attention,
                weights=weights,
                head_weights=(head or config.head_weights) if weights != "fp32" else "fp32",
            )

        lm = load(config.weights)
        # labels with another build's model ("hybrid@int4+compile", "autoregressive@int4+head=fp32"): that model
        # too, with the same options
        others = {b.model_key: b for s in specs if (b := split_label(s.label)[1]) is not None}
        models = {k: load(b.weights, b.head) for k, b in sorted(others.items()) if k != config.weights}
        results = run_benchmark(lm, prompts, config=config, progress=not no_progress, models=models)
    except (BenchInputError, PromptError, ResumeError, FileNotFoundError, ModelNotFoundError) as err:
        return fail(str(err))
    except KeyboardInterrupt:
        msg = f"interrupted: finished prompts are in {config.out}; rerun the same command to resume"
        print(f"\n{msg}", file=sys.stderr)
        return 130
    print(format_table(results))
    print(f"\nwrote {config.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
