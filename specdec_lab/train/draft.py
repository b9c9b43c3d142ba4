"""`python -m specdec_lab.train draft`: distil a 2-layer draft model from the target's own outputs.

Stages (each reuses what is on disk, like `train medusa`):
    1. self-distillation data  `specdec_lab.train.distill` shards (the target's greedy responses to
                               data/train_prompts.jsonl; the benchmark prompts are never trained on)
    2. drafting vocabulary     the `vocab_size` most frequent response tokens of the training split
    3. training                draft = target layers `base_layers` (+ LoRA deltas), shared frozen embeddings
                               and head; loss = cross-entropy of the target's greedy token at every response
                               position, softmax over the drafting vocabulary (the rows the proposer uses)
    4. held-out acceptance     question_id % 10 == 0: teacher-forced top-1 agreement with the target's token
                               (exactly the per-token α of greedy speculative decoding on the target's own
                               text), with the drafting vocabulary (+ prompt tokens) and with the full head
    5. --out                   draft.safetensors (trained tensors, fp16) + manifest.json

    python -m specdec_lab.train draft                          # the shipped draft (defaults)
    python -m specdec_lab.train draft --model tiny --steps 20  # smoke test on a tiny random model
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shlex
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, replace

import torch
from tqdm.auto import tqdm

from ..machine import machine_info, use_bf16
from ..models.draft_model import (
    DEFAULT_DRAFT,
    DRAFT_DIR,
    Draft,
    DraftSpec,
    build_draft,
    save_draft,
    trainable_parameters,
)
from ..models.load import model_record
from ._data import add_data_arguments, by_source, load_data, load_target

__all__ = ["TrainConfig", "TrainLog", "draft_vocabulary", "train_draft", "evaluate_draft", "main"]


@dataclass
class TrainConfig:
    steps: int = 1600  # optimizer steps (stops earlier when max_minutes runs out)
    batch_size: int = 8  # sequences (prompt + response) per step
    lr: float = 3e-3
    warmup_steps: int = 30
    weight_decay: float = 0.0
    max_minutes: float = 35.0  # wall-clock budget (the shipped draft's time: data/draft/README.md)
    bf16: bool | None = None  # autocast matmuls to bfloat16 (weights stay fp32); None: where bf16 is native
    prompt_weight: float = 1.0  # with target hidden states: loss weight of prompt positions (response = 1)
    seed: int = 0


@dataclass
class TrainLog:
    loss: list[float]
    accuracy: list[float]  # training-batch top-1 agreement (drafting vocabulary)
    seconds: float
    steps: int


def draft_vocabulary(examples, size: int, extra: list[int] = ()) -> torch.Tensor:
    """(size,) the most frequent response tokens of `examples` (frequency order) plus `extra` ids."""
    counts = Counter(t for e in examples for t in e.response_ids)
    ids = list(dict.fromkeys([*extra, *(t for t, _ in counts.most_common())]))[:size]
    return torch.tensor(ids, dtype=torch.long)


def _batch(examples, device, hidden=None, rows_of=None):
    """Right-padded (B, T) ids, attention mask, labels (-1 except at response positions) and, with a
    target hidden-state cache, the target's h_t (B, T, H) (zeros at padding)."""
    width = max(len(e.ids) for e in examples)
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    mask = torch.zeros(len(examples), width, dtype=torch.long)
    labels = torch.full((len(examples), width), -1, dtype=torch.long)
    target_h = None if hidden is None else torch.zeros(len(examples), width, hidden.hidden.shape[1])
    for i, e in enumerate(examples):
        n, p = len(e.ids), len(e.prompt_ids)
        ids[i, :n] = torch.tensor(e.ids)
        mask[i, :n] = 1
        labels[i, p - 1 : n - 1] = torch.tensor(e.response_ids)  # position t predicts token t+1
        if target_h is not None:
            h, cached_ids, _ = hidden.example(rows_of[e.question_id])
            assert cached_ids.tolist() == e.ids, "hidden-state cache does not match the distillation data"
            target_h[i, :n] = h.float()
    target_h = None if target_h is None else target_h.to(device)
    return ids.to(device), mask.to(device), labels.to(device), target_h


def _hidden(draft: Draft, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return draft.model.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state


@torch.inference_mode()
def fit_readout(draft: Draft, examples, hidden, ridge: float = 1e-3) -> None:
    """Initialize the adapter A by least squares ("tuned lens", Belrose et al. 2023): the linear map from
    the draft's final hidden state x to the target's, y = h_t, over every position of `examples`:

        A^T = argmin_W ||X W − Y||² + λ||W||²  = (XᵀX + λI)⁻¹ XᵀY,   λ = ridge · tr(XᵀX) / H

    Then E (A x) ≈ E y = the target's logits before any training: the early-exit features are read out in
    the target's coordinates, and distillation starts from a draft that already agrees with the target part of the time.
    """
    device = next(draft.model.parameters()).device
    rows_of = {int(q): i for i, q in enumerate(hidden.question_ids)}
    size = draft.model.config.hidden_size
    xtx = torch.zeros(size, size, dtype=torch.float64, device=device)
    xty = torch.zeros(size, size, dtype=torch.float64, device=device)
    for e in examples:
        ids, mask, _, target_h = _batch([e], device, hidden, rows_of)
        x, y = _hidden(draft, ids, mask)[0].double(), target_h[0].double()  # (T, H) each
        xtx += x.T @ x
        xty += x.T @ y
    lam = ridge * torch.trace(xtx) / size
    w = torch.linalg.solve(xtx + lam * torch.eye(size, dtype=torch.float64, device=device), xty)  # (H, H)
    draft.adapter.data.copy_(w.T.to(draft.adapter.dtype))


def train_draft(draft: Draft, examples, config: TrainConfig, hidden=None, progress: bool = True) -> TrainLog:
    """Distil over the drafting vocabulary's rows, AdamW with warmup and cosine decay.

    Without `hidden`: cross-entropy of the target's greedy token at every response position.
    With `hidden` (a `distill.HiddenCache` of the target's last hidden states): KL(p || q) to the target's
    full distribution p_t = softmax(E_rows h_t) at every position, prompt positions weighted by
    `config.prompt_weight` — soft labels carry more than the argmax, and the prompt adds positions.
    """
    device = next(draft.model.parameters()).device
    bf16 = use_bf16(config.bf16, device)  # emulated bf16 (AVX2 CPUs) is many times slower than fp32
    rows = draft.vocab.to(device)  # (N,)
    index = torch.full((draft.model.config.vocab_size,), -1, dtype=torch.long, device=device)
    index[rows] = torch.arange(len(rows), device=device)  # target id -> drafting-vocabulary column
    head = draft.model.get_output_embeddings().weight  # (V, H), frozen
    params = trainable_parameters(draft)
    opt = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    rng = random.Random(config.seed)
    order = sorted(examples, key=lambda e: len(e.ids))  # length buckets: little padding per batch
    batches = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    rows_of = None if hidden is None else {int(q): i for i, q in enumerate(hidden.question_ids)}
    log = TrainLog(loss=[], accuracy=[], seconds=0.0, steps=0)
    draft.model.train()
    t0 = time.perf_counter()
    bar = tqdm(range(config.steps), desc="draft distillation", unit="step", disable=not progress)
    for step in bar:
        # cosine decay to 0 over the steps or the time budget, whichever runs out first
        progress = min(1.0, max(step / config.steps, (time.perf_counter() - t0) / (config.max_minutes * 60)))
        lr = config.lr * min(1.0, (step + 1) / config.warmup_steps) * 0.5 * (1 + math.cos(math.pi * progress))
        for g in opt.param_groups:
            g["lr"] = lr
        ids, mask, labels, target_h = _batch(rng.choice(batches), device, hidden, rows_of)
        target = index[labels.clamp(min=0)]  # (B, T) column in the drafting vocabulary, -1 if outside
        response = (labels >= 0) & (target >= 0)  # (B, T)
        if target_h is None:
            keep, weight = response, None
        else:  # every real position but the last of each sequence (nothing follows it)
            keep = mask.bool() & (mask.cumsum(1) < mask.sum(1, keepdim=True))
            weight = torch.where(response, 1.0, config.prompt_weight)[keep]  # (n,)
        w_rows = head[rows]  # (N, H)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            h = _hidden(draft, ids, mask)  # (B, T, H)
            logits = draft.readout(h[keep]) @ w_rows.T  # (n, N): only the rows the proposer evaluates
            if target_h is not None:
                with torch.no_grad():
                    p = (target_h[keep] @ w_rows.T).float().softmax(-1)  # (n, N) target p on those rows
        logq = logits.float().log_softmax(-1)
        if target_h is None:
            loss = torch.nn.functional.nll_loss(logq, target[keep])
        else:
            loss = (weight * (p * (p.clamp_min(1e-12).log() - logq)).sum(-1)).sum() / weight.sum()  # KL(p||q)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        log.loss.append(float(loss.detach()))
        hits = logits.detach().argmax(-1)[response[keep]] == target[keep & response]
        log.accuracy.append(float(hits.float().mean()) if len(hits) else 0.0)
        log.steps = step + 1
        recent = log.accuracy[-20:]
        bar.set_postfix(loss=f"{log.loss[-1]:.3f}", acc=f"{sum(recent) / len(recent):.3f}")
        if time.perf_counter() - t0 > config.max_minutes * 60:
            break
    bar.close()
    draft.model.eval()
    log.seconds = time.perf_counter() - t0
    return log


@torch.inference_mode()
def evaluate_draft(draft: Draft, examples) -> dict:
    """Held-out teacher-forced top-1 agreement with the target's greedy token (= greedy per-token α).

    "draft_vocab": argmax over the drafting vocabulary plus the prompt's tokens (what the proposer does);
    "full_vocab": argmax over the whole head (what transformers' assisted generation sees).
    """
    device = next(draft.model.parameters()).device
    head = draft.model.get_output_embeddings().weight
    hits_sub = hits_full = covered = total = 0
    for e in examples:
        ids, mask, labels, _ = _batch([e], device)
        h = draft.readout(_hidden(draft, ids, mask)[0])  # (T, H)
        pos = (labels[0] >= 0).nonzero().flatten()
        gold = labels[0, pos]
        full = h[pos] @ head.T  # (n, V)
        rows = draft.head_rows(e.prompt_ids)
        sub = rows[(h[pos] @ head[rows].T).argmax(-1)]
        hits_sub += int((sub == gold).sum())
        hits_full += int((full.argmax(-1) == gold).sum())
        covered += int(torch.isin(gold, rows).sum())
        total += len(gold)
    return {
        "alpha_greedy_draft_vocab": round(hits_sub / total, 4),
        "alpha_greedy_full_vocab": round(hits_full / total, 4),
        "vocab_coverage": round(covered / total, 4),
        "positions": total,
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.train draft",
        description="Distil a draft LM (target layers + LoRA, shared embeddings) on self-distilled text.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_data_arguments(p)
    p.add_argument("--cache", default=None,
                   help="target hidden-state cache (default data/cache/<model>-hidden.safetensors, shared with "
                   "`train medusa`; computed if missing): soft "
                   "labels and the tuned-lens init; '' = hard labels only")  # fmt: skip
    p.add_argument("--base-layers", default="0,1", help="target layers the draft's layers start from")
    p.add_argument("--lora-rank", type=int, default=64, help="rank of the trained deltas (0: full layers)")
    p.add_argument("--vocab-size", type=int, default=8192, help="drafting vocabulary size")
    for f in TrainConfig.__dataclass_fields__.values():
        flag = f"--{f.name.replace('_', '-')}"
        if f.type.startswith("bool"):  # bool, or bool | None (None: decided by specdec_lab.machine)
            p.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default)
        else:
            p.add_argument(flag, type=type(f.default), default=f.default)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--out", default=str(DRAFT_DIR / DEFAULT_DRAFT), help="output folder")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def main(argv: list[str] | None = None) -> int:
    from . import distill

    args = build_parser().parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    command = "python -m specdec_lab.train draft " + shlex.join(argv if argv is not None else sys.argv[1:])
    lm, sources = load_target(args, tiny_layers=3)

    # 1. self-distillation data (shared with other trainers; resumable; one folder per prompt set)
    examples, stats = load_data(args, lm, sources, progress=not args.quiet)
    train_ex, held_ex = distill.split_heldout(examples, args.holdout_every)

    # 2. vocabulary  3. training
    vocab = draft_vocabulary(train_ex, args.vocab_size or lm.model.config.vocab_size)
    spec = DraftSpec(base_layers=[int(x) for x in args.base_layers.split(",")], lora_rank=args.lora_rank,
                     lora_alpha=float(max(args.lora_rank, 1)), vocab_size=len(vocab))  # fmt: skip
    draft = build_draft(lm.model, spec, vocab=vocab, name=str(args.out))
    config = TrainConfig(**{k: getattr(args, k) for k in TrainConfig.__dataclass_fields__})
    config = replace(config, bf16=use_bf16(config.bf16, next(draft.model.parameters()).device))  # recorded
    t_start = time.perf_counter()
    hidden = None
    if args.cache:
        hidden = distill.cache_hidden_states(lm, examples, args.cache, progress=not args.quiet)
    untrained = evaluate_draft(draft, held_ex)
    if hidden is not None and draft.adapter is not None:
        fit_readout(draft, train_ex, hidden)
    before = evaluate_draft(draft, held_ex)
    log = train_draft(draft, train_ex, config, hidden=hidden, progress=not args.quiet)

    # 4. held-out acceptance  5. write
    after = evaluate_draft(draft, held_ex)
    after_by_set = {name: evaluate_draft(draft, group) for name, group in by_source(sources, held_ex).items()}
    manifest = {
        "command": command,
        "target": model_record(lm),
        "data": {
            "prompts": args.prompts if args.model != "tiny" else "random token prompts",
            "distill_dir": args.distill_dir,
            **stats,
            "train_examples": len(train_ex),
            "heldout_examples": len(held_ex),
            "heldout_rule": f"question_id % {args.holdout_every} == 0",
        },
        "training": {**asdict(config), "steps_done": log.steps, "wall_seconds": round(log.seconds, 1),
                     "final_loss": round(sum(log.loss[-20:]) / len(log.loss[-20:]), 4),
                     "loss_curve": [round(x, 3) for x in log.loss[:: max(1, len(log.loss) // 50)]]},
        "heldout_untrained": untrained,
        "heldout_before_training": before,
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "heldout": after,
        "heldout_by_set": after_by_set,
        "machine": machine_info(next(draft.model.parameters()).device),
    }  # fmt: skip
    out = save_draft(draft, args.out, manifest)
    size = sum(f.stat().st_size for f in out.iterdir())
    print(f"wrote {out} ({size / 1e6:.2f} MB) after {log.steps} steps in {log.seconds:.0f} s; "
          f"held-out greedy α: {before['alpha_greedy_draft_vocab']} -> {after['alpha_greedy_draft_vocab']} "
          f"(full head {after['alpha_greedy_full_vocab']})", file=sys.stderr)  # fmt: skip
    print(json.dumps(after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
