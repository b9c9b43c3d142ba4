"""`python -m specdec_lab.train eagle`: train an EAGLE-3 drafter on the target's self-distillation data.

Stages (each reuses what is on disk, like `train medusa` and `train draft`):
    1. data         the committed self-distillation folders (`distill.distill_sources`: prompt + the target's
                    greedy response), held out by question_id % 10 == 0
    2. teacher      per batch, ONE teacher-forced prefill of the frozen target: its hidden states at the
                    drafter's feature layers (2, L//2, L-3) and its distribution at every position, computed
                    on the fly (no multi-GB cache; a prefill costs a fraction of a generated token)
    3. training     EAGLE-3's training-time test (`train.eagle_ttt`: `ttt_steps` steps on its own outputs), soft
                    cross-entropy against the target's softmax restricted to the drafting vocabulary, loss
                    weights 0.8^i, AdamW (betas 0.9, 0.95; clip 0.5: the anchor's ds_config), warmup + cosine
    4. held-out     accuracy per draft position k = 1..K: the top-1 of the drafter unrolled on its own outputs
                    (tokens teacher-forced) equals the target's greedy token, over every response position —
                    the greedy acceptance of draft k given drafts 1..k-1 were accepted
    5. --out        model.safetensors + config.json (`save_drafter`: the layout vLLM and SGLang load),
                    manifest.json, curve.json (held-out accuracy against training tokens)

Resumable: every `checkpoint_every` steps the drafter, the optimizer and the position in the data are
written atomically to --checkpoint; a rerun with the same settings continues from there (the data order
is a function of the seed and the epoch, so a resumed run sees the batches an uninterrupted one would).

Departures from the anchor (SafeAILab/EAGLE eagle/traineagle3): `lm_head` starts from the target's LM-head
rows of the drafting vocabulary (`init_head`; the anchor starts it at random and trains for days on a GPU),
the learning rate is higher for CPU-sized runs, and the attention of step i sees all true entries (`ttt`).

    python -m specdec_lab.train eagle --max-tokens 20000            # a short run
    python -m specdec_lab.train eagle --model tiny --limit 12 ...   # smoke test on a tiny random model
"""

from __future__ import annotations

import argparse
import math
import os
import random
import shlex
import shutil
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..eagle import EagleDrafter, load_drafter, random_drafter, save_drafter
from ..io import atomic_path, write_json
from ..machine import machine_info
from ..models.load import model_record
from ._data import DISTILL_DIRS, PROMPTS, add_data_arguments, load_data, load_target
from .eagle_ttt import STEP_WEIGHT, accuracy, loss_rows, teacher, ttt_loss, unroll

__all__ = ["EagleTrainConfig", "batches", "init_drafter", "Trainer", "main"]

# resuming may change these (they do not change what a step computes)
FREE_ON_RESUME = ("epochs", "max_tokens", "max_minutes", "eval_every", "checkpoint_every", "eval_examples")


@dataclass
class EagleTrainConfig:
    variant: str = "eagle3"
    ttt_steps: int = 7  # K, the drafter's steps on its own outputs (EAGLE-3: 7)
    step_weight: float = STEP_WEIGHT  # loss weight of step i: step_weight**i
    batch_size: int = 8  # sequences (prompt + response) per optimizer step
    lr: float = 1e-3
    warmup_steps: int = 20
    weight_decay: float = 0.0
    grad_clip: float = 0.5
    epochs: float = 1.0
    max_tokens: int = 0  # stop after this many training tokens (response tokens at step 0); 0 = epochs only
    max_minutes: float = 0.0  # also stop after this much training time (the schedule decays by it); 0 = none
    eval_every: int = 50  # optimizer steps between held-out evaluations (the curve)
    eval_examples: int = 64  # held-out examples evaluated (evenly spread over the held-out set)
    checkpoint_every: int = 50
    init_head: bool = True  # lm_head <- the target's LM-head rows of the drafting vocabulary
    init_from: str = ""  # a drafter folder to continue from (a shorter run's --out); "" = a fresh drafter
    prompt_positions: bool = False  # also train on the prompts' tokens after the prefix all prompts share
    seed: int = 0


def batches(examples, size: int, epoch: int, seed: int) -> list[list]:
    """The epoch's batches: examples sorted by length (little padding), cut into `size`, shuffled by (seed, epoch)."""
    order = sorted(examples, key=lambda e: (len(e.ids), e.question_id))
    out = [order[i : i + size] for i in range(0, len(order), size)]
    random.Random(seed * 1_000_003 + epoch).shuffle(out)
    return out


class Trainer:
    """State of one training run: drafter, optimizer, position in the data, the curve. `run()` trains until the
    planned tokens, checkpointing (atomic) on the way; `Trainer(...)` resumes from `checkpoint` if it exists."""

    def __init__(self, target, drafter: EagleDrafter, train_ex, held_ex, config: EagleTrainConfig,
                 checkpoint: str | Path | None = None, progress: bool = True):  # fmt: skip
        self.target, self.d, self.cfg = target.eval().requires_grad_(False), drafter, config
        self.train_ex, self.progress = train_ex, progress
        self.checkpoint = Path(checkpoint) if checkpoint else None
        step = max(1, len(held_ex) // max(config.eval_examples, 1))
        spread = held_ex[::step][: config.eval_examples]  # evenly over the held-out set
        self.held = [teacher(target, drafter, spread[j : j + 8]) for j in range(0, len(spread), 8)]
        # teacher-forced text: prompt tokens count from the end of the prefix every training prompt shares (the
        # system turn: the same few dozen tokens in each example would weigh as much as all of the rest)
        self.prompt_from = (len(os.path.commonprefix([e.prompt_ids for e in train_ex]))  # element-wise on lists
                            if config.prompt_positions else None)  # fmt: skip
        self.params = [p for p in drafter.parameters()]
        drafter.train().requires_grad_(True)
        self.opt = torch.optim.AdamW(self.params, lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay)
        self.step, self.tokens, self.positions, self.seconds, self.curve = 0, 0, 0, 0.0, []
        tokens_per_epoch = sum(len(e.response_ids) for e in train_ex)
        planned = config.epochs * tokens_per_epoch
        self.planned = min(planned, config.max_tokens) if config.max_tokens else planned
        self.batches_per_epoch = math.ceil(len(train_ex) / config.batch_size)
        if self.checkpoint is not None and self.checkpoint.is_file():
            self._load()

    # ---- checkpoints ---------------------------------------------------------------------------
    def _load(self) -> None:
        state = torch.load(self.checkpoint, weights_only=False)
        old, new = state["config"], asdict(self.cfg)
        changed = [k for k in new if k not in FREE_ON_RESUME and old.get(k) != new[k]]
        if changed:
            raise SystemExit(f"{self.checkpoint} was made with other settings ({', '.join(changed)}): delete it "
                             "or pass another --checkpoint")  # fmt: skip
        self.d.load_state_dict(state["drafter"])
        self.opt.load_state_dict(state["optimizer"])
        self.step, self.tokens, self.seconds = state["step"], state["tokens"], state["seconds"]
        self.positions = state.get("positions", self.tokens)  # checkpoints before prompt positions: the same
        self.curve = state["curve"]

    def save_checkpoint(self) -> None:
        if self.checkpoint is None:
            return
        state = {"config": asdict(self.cfg), "drafter": self.d.state_dict(), "optimizer": self.opt.state_dict(),
                 "step": self.step, "tokens": self.tokens, "positions": self.positions, "seconds": self.seconds,
                 "curve": self.curve}  # fmt: skip
        with atomic_path(self.checkpoint) as tmp:
            torch.save(state, tmp)

    # ---- evaluation ----------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> list[float]:
        """Held-out accuracy per draft position 1..K (module docstring, stage 4)."""
        self.d.eval()
        hits = [0] * self.cfg.ttt_steps
        total = [0] * self.cfg.ttt_steps
        for t in self.held:
            h, n = accuracy(self.d, t, self.cfg.ttt_steps)
            hits, total = [a + b for a, b in zip(hits, h, strict=True)], [a + b for a, b in zip(total, n, strict=True)]
        self.d.train()
        return [round(a / max(b, 1), 4) for a, b in zip(hits, total, strict=True)]

    def _record(self, loss: float | None) -> None:
        self.curve.append({"step": self.step, "tokens": self.tokens, "positions": self.positions,
                           "train_seconds": round(self.seconds, 1),
                           "loss": None if loss is None else round(loss, 4), "accuracy": self.evaluate()})  # fmt: skip

    # ---- training ------------------------------------------------------------------------------
    def lr(self) -> float:
        """Linear warmup, then cosine decay to 0 over the planned tokens or `max_minutes`, whichever runs out first."""
        progress = min(1.0, self.tokens / max(self.planned, 1))
        if self.cfg.max_minutes:
            progress = min(1.0, max(progress, self.seconds / (60 * self.cfg.max_minutes)))
        warmup = min(1.0, (self.step + 1) / self.cfg.warmup_steps)
        return self.cfg.lr * warmup * 0.5 * (1 + math.cos(math.pi * progress))

    def train_step(self, examples) -> float:
        t0 = time.perf_counter()
        t = teacher(self.target, self.d, examples, self.prompt_from)
        for g in self.opt.param_groups:
            g["lr"] = self.lr()
        in_vocab = self.d.t2d[t.greedy]  # (B, T)
        k = self.cfg.ttt_steps
        run = unroll(self.d, t.features, t.ids, k, rows=loss_rows(t.valid, in_vocab, k))  # the head at loss rows only
        loss, _ = ttt_loss(run, t.p, t.valid, in_vocab, self.cfg.step_weight)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, self.cfg.grad_clip)
        self.opt.step()
        self.step += 1
        self.tokens += t.tokens
        self.positions += t.positions
        self.seconds += time.perf_counter() - t0
        return float(loss.detach())

    def done(self) -> bool:
        out_of_time = self.cfg.max_minutes and self.seconds >= 60 * self.cfg.max_minutes
        return (
            bool(out_of_time)
            or self.tokens >= self.planned
            or self.step >= math.ceil(self.cfg.epochs * self.batches_per_epoch)
        )

    def run(self, stop_after: int | None = None, session_seconds: float | None = None) -> None:
        """Train until `done()`, then checkpoint; or stop early, checkpointed for a later resume, after `stop_after`
        more steps (an interruption, for tests) or `session_seconds` of this call (a run in several sittings)."""
        if not self.curve and self.held:
            self._record(None)  # the untrained drafter
        bar = tqdm(total=int(self.planned), initial=self.tokens, desc="eagle training", unit="tok",
                   disable=not self.progress)  # fmt: skip
        loss, last = None, self.step + (stop_after if stop_after is not None else 1 << 62)
        until = time.perf_counter() + (session_seconds if session_seconds is not None else float("inf"))
        while not self.done() and self.step < last and time.perf_counter() < until:
            epoch, index = divmod(self.step, self.batches_per_epoch)
            loss = self.train_step(batches(self.train_ex, self.cfg.batch_size, epoch, self.cfg.seed)[index])
            bar.update(self.tokens - bar.n)
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{self.tokens / max(self.seconds, 1e-9):.0f}")
            if self.held and self.step % self.cfg.eval_every == 0:
                self._record(loss)
                bar.set_postfix(loss=f"{loss:.3f}", acc1=self.curve[-1]["accuracy"][0])
            if self.step % self.cfg.checkpoint_every == 0:
                self.save_checkpoint()
        bar.close()
        if not self.done():
            self.save_checkpoint()
            return
        if self.held and (not self.curve or self.curve[-1]["step"] != self.step):
            self._record(loss)
        self.save_checkpoint()
        self.d.eval().requires_grad_(False)


def init_drafter(target, config: EagleTrainConfig) -> EagleDrafter:
    """The drafter training starts from: the one in `init_from` (its variant must match), else an untrained one
    over the shipped drafting vocabulary (`vocab.vocab_for`; every token if none fits), with `lm_head` from the
    target's head rows when `init_head`."""
    if config.init_from:
        d = load_drafter(config.init_from, target)
        if d.config.variant != config.variant:
            raise SystemExit(
                f"--init-from {config.init_from} holds an {d.config.variant} drafter, not {config.variant}"
            )
        return d.float()
    d = random_drafter(target, config.variant, seed=config.seed)
    if config.init_head:
        with torch.no_grad():
            d.lm_head.weight.copy_(target.get_output_embeddings().weight[d.target_ids])
    return d


# ---- command line --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.train eagle", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    add_data_arguments(p)
    p.set_defaults(
        prompts=PROMPTS + ",data/train_prompts_extra2.jsonl",
        distill_dir=DISTILL_DIRS + ",data/distill/smollm2-135m-extra2",
    )  # all four sets: 508k tokens
    for f in fields(EagleTrainConfig):
        flag = f"--{f.name.replace('_', '-')}"
        if f.type == "bool":
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default)
    p.add_argument("--checkpoint", default=None, help="resumable state (default data/cache/eagle-<model>.pt)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--out", default="data/eagle/smollm2-135m", help="output folder (replaced when done)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--session-minutes", type=float, default=None,
                   help="stop this process after this long, checkpointed; rerun the same command to go on")  # fmt: skip
    return p


def _replace_dir(d: EagleDrafter, out: Path, files: dict) -> None:
    """Write the drafter and `files` ({name: json}) into a fresh folder, then swap it in for `out`."""
    new = out.with_name(out.name + ".new")
    shutil.rmtree(new, ignore_errors=True)
    save_drafter(d, new)
    for name, obj in files.items():
        write_json(new / name, obj)
    old = out.with_name(out.name + ".old")
    if out.exists():
        out.rename(old)
    new.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    from . import distill

    args = build_parser().parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    command = "python -m specdec_lab.train eagle " + shlex.join(argv if argv is not None else sys.argv[1:])
    lm, sources = load_target(args, tiny_layers=4)
    examples, stats = load_data(args, lm, sources, progress=not args.quiet)
    train_ex, held_ex = distill.split_heldout(examples, args.holdout_every)
    config = EagleTrainConfig(**{f.name: getattr(args, f.name) for f in fields(EagleTrainConfig)})
    checkpoint = args.checkpoint or f"data/cache/eagle-{Path(args.model).stem}.pt"
    t0 = time.perf_counter()
    trainer = Trainer(lm.model, init_drafter(lm.model, config), train_ex, held_ex, config, checkpoint,
                      progress=not args.quiet)  # fmt: skip
    trainer.run(session_seconds=None if args.session_minutes is None else 60 * args.session_minutes)
    if not trainer.done():
        print(f"stopped after --session-minutes at step {trainer.step} ({trainer.tokens} tokens), checkpointed in "
              f"{checkpoint}: rerun the same command to go on", file=sys.stderr)  # fmt: skip
        return 0
    final = trainer.curve[-1]["accuracy"] if trainer.curve else []
    manifest = {
        "command": command,
        "target": model_record(lm),
        "data": {"prompts": args.prompts if args.model != "tiny" else "random token prompts",
                 "distill_dir": args.distill_dir, **stats, "train_examples": len(train_ex),
                 "train_tokens_per_epoch": sum(len(e.response_ids) for e in train_ex),
                 "heldout_examples_evaluated": sum(len(t.ids) for t in trainer.held),
                 "heldout_rule": f"question_id % {args.holdout_every} == 0"},
        "config": asdict(config),
        "drafter": {"variant": config.variant, "feature_layers": list(trainer.d.config.feature_layers),
                    "draft_vocab_size": trainer.d.config.draft_vocab_size},
        "steps": trainer.step,
        "tokens_seen": trainer.tokens,
        "positions_seen": trainer.positions,  # loss positions of step 0: > tokens_seen with --prompt-positions
        "prompt_positions_from": trainer.prompt_from,
        "train_seconds": round(trainer.seconds, 1),
        "train_tokens_per_second": round(trainer.tokens / max(trainer.seconds, 1e-9), 1),
        "total_seconds": round(time.perf_counter() - t0, 1),
        "heldout_accuracy_by_position": final,
        "machine": machine_info(trainer.d.lm_head.weight.device),
    }  # fmt: skip
    curve = {"x": "training tokens", "positions": list(range(1, config.ttt_steps + 1)), "points": trainer.curve}
    _replace_dir(trainer.d, Path(args.out), {"manifest.json": manifest, "curve.json": curve})
    print(
        f"wrote {args.out}: {trainer.step} steps, {trainer.tokens} tokens in {trainer.seconds:.0f} s; "
        f"held-out accuracy by position {final}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
