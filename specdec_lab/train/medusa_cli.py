"""`python -m specdec_lab.train medusa`: self-distil, cache hidden states, train Medusa-1 heads, ship them.

Each stage reuses what earlier runs left on disk, so a rerun (or a run after an interruption) only does
what is missing:
    1. self-distillation data   --distill-dir  (shards; resumable)           committed under data/distill/
    2. hidden states            --cache        (safetensors, fp16)           data/cache/ (gitignored)
    3. Medusa-1 training        frozen backbone, rows of cached h_t
    4. held-out accuracy        prompts with question_id % --holdout-every == 0 never trained on
    5. --out                    medusa_config.json + medusa_heads.safetensors (fp16), manifest.json,
                                train_log.json (loss curves); --export-published writes FasterDecoding's layout

The shipped heads were made with the defaults (the three prompt sets, four residual blocks per head,
soft targets at weight 0.5, 2000 steps of 256 rows, two threads; times and accuracies: data/medusa/README.md):
    python -m specdec_lab.train medusa
`--model tiny` runs every stage on a tiny random Llama with random token prompts (smoke tests).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from ..io import write_json
from ..machine import machine_info, use_bf16
from ..models.load import model_record
from ._data import add_data_arguments, by_source, load_data, load_target

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.train medusa",
        description="Train Medusa-1 heads on self-distilled data (frozen backbone, cached hidden states).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_data_arguments(p)
    p.add_argument("--cache", default=None, help="hidden-state cache (default data/cache/<model>-hidden.safetensors)")
    p.add_argument("--heads", type=int, default=4, help="K, number of Medusa heads")
    p.add_argument("--layers", type=int, default=4, help="residual blocks per head (the paper: 1)")
    p.add_argument("--separate-w2", action="store_true", help="one trainable W2 per head (not shared)")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=256, help="rows (positions) per step")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--decay", type=float, default=0.8, help="loss weights lambda_k = decay^k")
    p.add_argument(
        "--soft", type=float, default=0.5, help="weight of the target's distribution in the targets (0: argmax labels)"
    )
    p.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "bf16", "fp32"],
        help="vocabulary projection dtype; auto: bf16 where native on this CPU/GPU, else fp32 (specdec_lab.machine)",
    )
    p.add_argument("--eval-every", type=int, default=400, help="held-out accuracy every N steps")
    p.add_argument(
        "--train-fraction",
        type=float,
        default=1.0,
        help="train on this fraction of the training prompts (data-scaling runs)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--out", default="data/medusa/smollm2-135m", help="output directory for the heads")
    p.add_argument("--export-published", default="", help="also write FasterDecoding's layout here")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def _cache_seconds(path: str) -> float | None:
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        seconds = (f.metadata() or {}).get("seconds")
    return float(seconds) if seconds is not None else None


def main(argv: list[str] | None = None) -> int:
    from ..medusa import MedusaHeads, checkpoint_bytes, save_heads, save_medusa_layout
    from . import distill
    from .medusa1 import Medusa1Config, build_rows, head_accuracy, train_medusa1

    args = build_parser().parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    command = "python -m specdec_lab.train medusa " + shlex.join(argv if argv is not None else sys.argv[1:])
    progress = not args.quiet
    lm, sources = load_target(args)

    # 1. self-distillation data (resumable shards, one folder per prompt set)
    examples, data_stats = load_data(args, lm, sources, progress=progress)
    train_ex, held_ex = distill.split_heldout(examples, args.holdout_every)
    if not 0.0 < args.train_fraction <= 1.0:
        raise SystemExit(f"--train-fraction must be in (0, 1], got {args.train_fraction}")
    f = args.train_fraction  # keep an evenly spread subset (every prompt set in proportion)
    train_ex = [x for i, x in enumerate(train_ex) if int((i + 1) * f) > int(i * f)] or train_ex[:1]

    # 2. hidden states, cached (recomputed only when the model or the data changed)
    t0 = time.perf_counter()
    cache = distill.cache_hidden_states(lm, examples, args.cache, progress=progress)
    cache_seconds = _cache_seconds(args.cache) or time.perf_counter() - t0
    train_rows = build_rows(cache.subset([e.question_id for e in train_ex]), args.heads)
    held_rows = build_rows(cache.subset([e.question_id for e in held_ex]), args.heads)
    print(
        f"data: {len(train_ex)} train / {len(held_ex)} held-out examples, {len(train_rows)} / {len(held_rows)} rows",
        file=sys.stderr,
    )

    # 3. Medusa-1
    heads = MedusaHeads.for_model(
        lm.model,
        num_heads=args.heads,
        num_layers=args.layers,
        shared_lm_head=not args.separate_w2,
        base_model=model_record(lm)["name"],
    )
    cfg = Medusa1Config(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        decay=args.decay,
        soft=args.soft,
        bf16=use_bf16({"auto": None, "bf16": True, "fp32": False}[args.precision], heads.w1.device),
        eval_every=args.eval_every,
        seed=args.seed,
    )
    log = train_medusa1(heads, train_rows, cfg, eval_rows=held_rows, progress=progress)

    # 4. held-out accuracy on every held-out row (fp32 projection), overall and per prompt set
    acc = head_accuracy(heads, held_rows)
    for k, (t1, t5) in enumerate(zip(acc.top1, acc.top5, strict=True), start=1):
        print(f"head {k}: top-1 {t1:.3f}  top-5 {t5:.3f}", file=sys.stderr)
    per_set = {
        name: head_accuracy(heads, build_rows(cache.subset([e.question_id for e in group]), args.heads)).as_dict()
        for name, group in by_source(sources, held_ex).items()
    }

    # 5. write
    out = Path(args.out)
    manifest = {
        "command": command,
        "model": model_record(lm),
        "data": {
            "prompts": args.prompts if args.model != "tiny" else "random token prompts",
            "distill_dir": args.distill_dir,
            **data_stats,
            "train_examples": len(train_ex),
            "train_fraction": args.train_fraction,
            "heldout_examples": len(held_ex),
            "heldout_rule": f"question_id % {args.holdout_every} == 0",
            "train_rows": len(train_rows),
            "heldout_rows": len(held_rows),
            "hidden_cache": args.cache,
            "hidden_cache_seconds": round(cache_seconds, 1),
        },
        "heads": asdict(heads.config),
        "training": {
            **asdict(cfg),
            "wall_seconds": round(log.seconds, 1),
            "final_loss": round(log.loss[-1], 4),
            "final_head_loss": [round(x, 4) for x in log.head_loss[-1]],
        },
        "heldout_accuracy": acc.as_dict(),
        "heldout_accuracy_by_set": per_set,
        "machine": machine_info(heads.w1.device),
    }
    save_heads(heads, out, dtype=torch.float16, metadata={"manifest": "manifest.json"})
    manifest["size_bytes"] = checkpoint_bytes(out)
    write_json(out / "train_log.json", log.as_dict(), indent=None)
    write_json(out / "manifest.json", manifest)
    if args.export_published:
        save_medusa_layout(heads, args.export_published, base_model=args.model)
    print(f"wrote {out} ({manifest['size_bytes'] / 1e6:.2f} MB) in {log.seconds:.0f} s of training", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
