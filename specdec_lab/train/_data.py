"""What every trainer shares: the target, its prompt sets and their self-distillation data (CLI plumbing).

The training data is a list of sources, one (prompt file, shard directory) pair each, given as two
comma-separated lists of the same length:

    --prompts     data/train_prompts.jsonl,data/train_prompts_extra.jsonl
    --distill-dir data/distill/smollm2-135m,data/distill/smollm2-135m-extra

so adding a prompt set never invalidates the shards already generated for another (`distill.distill_sources`).
`--model tiny` swaps in a tiny random Llama with random token prompts (smoke tests of every stage).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

__all__ = [
    "PROMPTS",
    "DISTILL_DIRS",
    "hidden_cache_path",
    "add_data_arguments",
    "load_target",
    "load_data",
    "by_source",
]

PROMPTS = "data/train_prompts.jsonl,data/train_prompts_extra.jsonl,data/train_prompts_docs.jsonl"
DISTILL_DIRS = "data/distill/smollm2-135m,data/distill/smollm2-135m-extra,data/distill/smollm2-135m-docs"


def hidden_cache_path(model: str) -> str:
    """Default `--cache` of a target: one file per model name, so a smoke test on `tiny` never overwrites the
    real target's cache (data/cache/smollm2-135m-hidden.safetensors)."""
    return f"data/cache/{Path(model).stem}-hidden.safetensors"


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="smollm2-135m", help="target: shipped name, HF dir, .gguf, or 'tiny'")
    p.add_argument("--prompts", default=PROMPTS, help="Spec-Bench jsonl prompt sets, comma-separated")
    p.add_argument("--distill-dir", default=DISTILL_DIRS, help="self-distillation shard folders, one per prompt set")
    p.add_argument("--limit", type=int, default=0, help="use only the first N prompts of each set (0: all)")
    p.add_argument("--max-new-tokens", type=int, default=128, help="response length of the target")
    p.add_argument("--gen-batch-size", type=int, default=16, help="prompts per generate() batch")
    p.add_argument("--holdout-every", type=int, default=10, help="hold out question_id %% N == 0")


def _split(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


def load_target(args: argparse.Namespace, tiny_layers: int = 2):
    """(LoadedModel, [(Prompts, shard dir), ...]) for `args` (see `add_data_arguments`); resolves a
    `--cache` left at None to `hidden_cache_path(args.model)`."""
    from ..io import Prompt, load_prompts
    from ..models.load import LoadedModel, load_model, tiny_model

    dirs = _split(args.distill_dir)
    if getattr(args, "cache", "") is None:
        args.cache = hidden_cache_path(args.model)
    if args.model == "tiny":
        gen = torch.Generator().manual_seed(getattr(args, "seed", 0))
        n = args.limit or 40
        prompts = [Prompt(i + 1, "", ids=torch.randint(4, 256, (8,), generator=gen).tolist()) for i in range(n)]
        model = tiny_model(eos_token_id=3, num_layers=tiny_layers)
        return LoadedModel(model, None, "tiny", "tiny_model()"), [(prompts, dirs[0])]
    files = _split(args.prompts)
    if len(files) != len(dirs):
        raise SystemExit(f"--prompts names {len(files)} prompt sets, --distill-dir {len(dirs)} folders: give one each")
    sources = [(load_prompts(f)[: args.limit or None], d) for f, d in zip(files, dirs, strict=True)]
    return load_model(args.model), sources


def load_data(args: argparse.Namespace, lm, sources, progress: bool = True):
    """(examples, stats): every source's self-distillation data, generated where missing (resumable)."""
    from .distill import distill_sources

    return distill_sources(
        lm, sources, max_new_tokens=args.max_new_tokens, batch_size=args.gen_batch_size, progress=progress
    )


def by_source(sources, examples) -> dict[str, list]:
    """{prompt set name (its shard folder's name): the examples of that set}, in `sources` order.

    Held-out accuracy per set matters: template-made prompts share templates with their training split,
    so their held-out numbers read higher than those of the hand-written or real-prose sets.
    """
    owner = {}
    for prompts, out_dir in sources:
        for prompt in prompts:
            owner[int(prompt.question_id)] = Path(out_dir).name
    groups: dict[str, list] = {Path(d).name: [] for _, d in sources}
    for e in examples:
        groups[owner[e.question_id]].append(e)
    return {name: group for name, group in groups.items() if group}
