"""Memorisation: the Medusa heads' accuracy on their training text against held-out text, epoch by epoch.

A head that reads h_t and must name x_{t+k+1} can learn the language ("after `def f(` comes a name") or
remember its training positions ("this h_t was followed by ` factor`"). Held-out accuracy measures only the
first; accuracy on the training rows measures both. So one short Medusa-1 run on a subset of the
self-distillation data records, before training and after every epoch, each head's top-1/top-5 on

    a fixed, evenly spread sample of its training rows        (seen: learned + memorised)
    the held-out rows (question_id % 10 == 0, never trained)  (learned)

and the gap between the two curves is the memorised part (`train.Medusa1Config.epoch_eval_rows`).

    python -m specdec_lab.train medusa-memorisation                 # -> data/medusa/memorisation.json
    python -m specdec_lab.train medusa-memorisation --epochs 4 --train-examples 120 --out results/mem.json

Same recipe as the shipped heads (K = 4, four residual blocks per head, W2 = the frozen LM head, lr 2e-3
with warmup and cosine decay; argmax labels by default, `--soft 0.5` for the shipped heads' soft targets,
which cost a second vocabulary projection per row) on a subset of the same data — a few hundred prompts
instead of 2610 — so it runs in minutes on a CPU; the shipped heads are not touched. Subsets are evenly
spread over the committed self-distillation sets (every prompt set and category in proportion). Hidden
states are cached under data/cache/ (gitignored) and reused by a rerun.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ..io import DATA_DIR, write_json
from ..medusa.heads import MedusaHeads
from .medusa1 import Medusa1Config, build_rows, train_medusa1

__all__ = ["MemorisationConfig", "spread", "memorisation_run", "main", "DEFAULT_OUT"]

DEFAULT_OUT = DATA_DIR / "medusa" / "memorisation.json"
DISTILL_DIRS = "data/distill/smollm2-135m,data/distill/smollm2-135m-extra,data/distill/smollm2-135m-docs"


@dataclass
class MemorisationConfig:
    train_examples: int = 240  # training prompts (evenly spread over the training split)
    heldout_examples: int = 60  # held-out prompts (evenly spread over the held-out split)
    epochs: int = 6  # full passes over the training rows
    num_heads: int = 4  # K
    num_layers: int = 4  # residual blocks per head (the shipped heads: 4)
    batch_size: int = 256  # rows per step
    lr: float = 2e-3  # AdamW peak, warmup then cosine to lr/10 (as the shipped heads)
    warmup_steps: int = 20
    soft: float = 0.0  # weight of the target's distribution in the targets (the shipped heads: 0.5)
    train_eval_rows: int = 4096  # training rows scored per epoch (a fixed, evenly spread sample)
    heldout_eval_rows: int = 4096  # cap on held-out rows scored per epoch
    holdout_every: int = 10  # held out: question_id % holdout_every == 0
    seed: int = 0


def spread(items: Sequence, n: int) -> list:
    """n items evenly spread over `items` (all of them if n <= 0 or n >= len(items))."""
    if n <= 0 or n >= len(items):
        return list(items)
    if n == 1:
        return [items[0]]
    return [items[round(i * (len(items) - 1) / (n - 1))] for i in range(n)]


def memorisation_run(
    lm, examples, cfg: MemorisationConfig | None = None, cache_path: str | Path | None = None, progress: bool = True
) -> dict:
    """Train fresh heads on a subset of `examples` (self-distillation data), scoring them per epoch on training
    and held-out rows. Returns a JSON-able record: config, data sizes, per-epoch accuracies, times."""
    from .distill import cache_hidden_states, split_heldout

    cfg = cfg or MemorisationConfig()
    train_all, held_all = split_heldout(sorted(examples, key=lambda e: e.question_id), every=cfg.holdout_every)
    train_ex, held_ex = spread(train_all, cfg.train_examples), spread(held_all, cfg.heldout_examples)
    if not train_ex or not held_ex:
        raise ValueError(f"need training and held-out examples, got {len(train_ex)} and {len(held_ex)}")
    t0 = time.perf_counter()
    cache = cache_hidden_states(lm, train_ex + held_ex, cache_path, progress=progress)
    hidden_seconds = time.perf_counter() - t0
    train_rows = build_rows(cache.subset([e.question_id for e in train_ex]), cfg.num_heads)
    held_rows = build_rows(cache.subset([e.question_id for e in held_ex]), cfg.num_heads)

    model = lm if isinstance(lm, torch.nn.Module) else lm.model  # a LoadedModel or the HF model itself
    torch.manual_seed(cfg.seed)
    heads = MedusaHeads.for_model(model, num_heads=cfg.num_heads, num_layers=cfg.num_layers)
    steps_per_epoch = max(len(train_rows) // cfg.batch_size, 1)  # the trainer reshuffles after these
    train_cfg = Medusa1Config(
        steps=cfg.epochs * steps_per_epoch,
        batch_size=cfg.batch_size,
        lr=cfg.lr,
        warmup_steps=min(cfg.warmup_steps, steps_per_epoch),
        soft=cfg.soft,
        log_every=max(steps_per_epoch // 4, 1),
        eval_rows=cfg.heldout_eval_rows,
        epoch_eval_rows=cfg.train_eval_rows,
        seed=cfg.seed,
    )
    log = train_medusa1(heads, train_rows, train_cfg, eval_rows=held_rows, progress=progress)
    return {
        "config": asdict(cfg),
        "training": {k: v for k, v in asdict(train_cfg).items() if k not in ("eval_every",)},
        "data": {
            "train_examples": len(train_ex),
            "heldout_examples": len(held_ex),
            "train_rows": len(train_rows),
            "heldout_rows": len(held_rows),
            "steps_per_epoch": steps_per_epoch,
            "categories": sorted({e.category for e in train_ex}),
        },
        "epochs": log.epochs,
        "loss": {"step": log.step, "loss": [round(x, 4) for x in log.loss]},
        "seconds": {"hidden_states": round(hidden_seconds, 1), "training": round(log.seconds, 1)},
    }


def main(argv: Sequence[str] | None = None) -> int:
    from ..machine import machine_info
    from ..models.load import load_model, model_record
    from .distill import load_distillation_data

    d = MemorisationConfig()
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.train medusa-memorisation",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--distill-dir", default=DISTILL_DIRS, help="self-distillation folders, comma-separated")
    p.add_argument("--train-examples", type=int, default=d.train_examples)
    p.add_argument("--heldout-examples", type=int, default=d.heldout_examples)
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--heads", type=int, default=d.num_heads)
    p.add_argument("--layers", type=int, default=d.num_layers)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--soft", type=float, default=d.soft)
    p.add_argument("--eval-rows", type=int, default=d.train_eval_rows, help="rows scored per epoch, each side")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--cache", default="data/cache/medusa-memorisation-hidden.safetensors")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cfg = MemorisationConfig(
        train_examples=args.train_examples,
        heldout_examples=args.heldout_examples,
        epochs=args.epochs,
        num_heads=args.heads,
        num_layers=args.layers,
        batch_size=args.batch_size,
        lr=args.lr,
        soft=args.soft,
        train_eval_rows=args.eval_rows,
        heldout_eval_rows=args.eval_rows,
    )
    examples = [e for folder in args.distill_dir.split(",") for e in load_distillation_data(folder.strip())]
    lm = load_model(args.model)
    record = {
        # the command as typed: `python -m specdec_lab.train medusa-memorisation` runs main(argv) with the
        # arguments after the subcommand
        "command": shlex.join(
            ["python", "-m", "specdec_lab.train", "medusa-memorisation", *(argv if argv is not None else sys.argv[1:])]
        ),
        "model": model_record(lm),
        "distill_dir": args.distill_dir,
        **memorisation_run(lm, examples, cfg, cache_path=args.cache, progress=not args.quiet),
        "machine": machine_info("cpu"),
    }
    write_json(args.out, record)
    last = record["epochs"][-1]
    print(
        f"wrote {args.out}: after {last['epoch']} epochs head 1 top-1 {last['train']['top1'][0]:.3f} on training "
        f"rows, {last['heldout']['top1'][0]:.3f} held-out",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
