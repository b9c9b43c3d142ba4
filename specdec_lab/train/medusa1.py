"""Medusa-1: train the heads on a frozen backbone, from cached hidden states; per-head accuracy.

With the backbone frozen, h_t is a constant of the data, so a training example is one *row*: the cached
h_t (H,) and its labels (x_{t+1}, ..., x_{t+K+1}). Rows are independent — no sequences, no padding, no
backbone forward — and a minibatch is just B random rows:

    z      = features(h)                      (B, K, H)   every head's residual block
    logits = z @ W_lm^T                       (B, K, V)   one matmul for all heads (shared variant)
    L      = sum_k lambda_k CE(logits_k, x_{t+k+1}),  lambda_k = 0.8^k

The (B*K, H) x (H, V) projection and the softmax over V = 49152 are ~all of the compute. Where bf16
matmuls are native (AVX512-BF16/AMX CPUs, recent GPUs) the projection runs in bfloat16 while the softmax
and the heads' weights stay fp32; elsewhere (AVX2 CPUs emulate bf16, many times slower) it runs in fp32:
`bf16=None`, the default, decides from `specdec_lab.machine`. For the shared variant the loss is
`frozen_head_loss`, which computes the gradient through the frozen W2 chunk by chunk instead of
materialising (B*K, V) logits for autograd.

Memorisation. An epoch is one pass over the shuffled rows (len(rows) // batch_size steps). With
`epoch_eval_rows > 0` and held-out rows given, the log records, before training and after every epoch, each
head's accuracy on a fixed, evenly spread sample of the *training* rows and on the held-out rows
(`TrainLog.epochs`): the gap between the two is what the heads have memorised rather than learned.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ..machine import use_bf16
from ..medusa.heads import IGNORE_INDEX, MedusaHeads, frozen_head_loss, loss_weights, medusa_labels, medusa_loss
from .distill import HiddenCache

__all__ = [
    "MedusaRows",
    "build_rows",
    "Medusa1Config",
    "TrainLog",
    "train_medusa1",
    "HeadAccuracy",
    "head_accuracy",
]


@dataclass
class MedusaRows:
    """Training rows: positions in the hidden-state cache and the labels of the base head (column 0) and heads
    1..K. Row i is h_t = source[position[i]]; head k's soft target is read at h_{t+k} = source[position[i] + k]
    (same example: its label x_{t+k+1} exists). Rows index the cache instead of copying h_t out of it."""

    source: torch.Tensor  # (P, H) fp16, every cached position's hidden state
    position: torch.Tensor  # (N,) int64 index of each row's h_t in source
    labels: torch.Tensor  # (N, K+1) int64, IGNORE_INDEX where a head has no target

    def __len__(self) -> int:
        return self.position.shape[0]

    def hidden(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, H) h_t for rows idx."""
        return self.source[self.position[idx]]

    def teacher_hidden(self, idx: torch.Tensor, num_heads: int) -> torch.Tensor:
        """(B, K, H) h_{t+k} for rows idx (zeros where a head has no target)."""
        valid = self.labels[idx, 1 : num_heads + 1] != IGNORE_INDEX  # (B, K)
        at = self.position[idx, None] + torch.arange(1, num_heads + 1)  # (B, K)
        return self.source[torch.where(valid, at, 0)] * valid[..., None].to(self.source.dtype)  # (B, K, H)


def build_rows(cache: HiddenCache, num_heads: int) -> MedusaRows:
    """Every position of every cached example at which at least one head 1..K has a response token."""
    position, labels = [], []
    for e in range(len(cache)):
        _, ids, prompt_length = cache.example(e)
        lab = medusa_labels(ids, prompt_length, num_heads)  # (T, K+1)
        keep = (lab[:, 1:] != IGNORE_INDEX).any(1)
        position.append(int(cache.offsets[e]) + torch.arange(len(ids))[keep])
        labels.append(lab[keep])
    return MedusaRows(cache.hidden, torch.cat(position), torch.cat(labels))


@dataclass
class Medusa1Config:
    steps: int = 600
    batch_size: int = 256  # rows per step
    lr: float = 2e-3  # AdamW, cosine decay to lr/10 after a linear warmup
    warmup_steps: int = 20
    weight_decay: float = 0.0
    decay: float = 0.8  # lambda_k = decay^k
    soft: float = 0.0  # weight of the target's own distribution at t+k in head k's target (0: hard labels)
    bf16: bool | None = None  # vocabulary projection in bfloat16; None: where bf16 is native (specdec_lab.machine)
    log_every: int = 10  # record the (smoothed) losses every n steps
    eval_every: int = 0  # evaluate on held-out rows every n steps (0: only at the end)
    eval_rows: int = 4096  # cap on held-out rows per evaluation
    epoch_eval_rows: int = 0  # >0: per epoch, accuracy on this many training rows and on the held-out rows
    seed: int = 0


@dataclass
class TrainLog:
    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)  # weighted total, mean over the last log_every steps
    head_loss: list[list[float]] = field(default_factory=list)  # per head CE_k, same averaging
    lr: list[float] = field(default_factory=list)
    evals: list[dict] = field(default_factory=list)  # {"step", "top1", "top5", ...}
    epochs: list[dict] = field(default_factory=list)  # {"epoch", "step", "train": {...}, "heldout": {...}}
    seconds: float = 0.0  # wall time of the training loop (evaluations included)

    def as_dict(self) -> dict:
        return {
            "step": self.step,
            "loss": [round(x, 4) for x in self.loss],
            "head_loss": [[round(x, 4) for x in row] for row in self.head_loss],
            "lr": self.lr,
            "evals": self.evals,
            "epochs": self.epochs,
            "seconds": round(self.seconds, 1),
        }


def lr_at(step: int, cfg: Medusa1Config) -> float:
    """Linear warmup, then cosine from lr down to lr/10."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(cfg.steps - cfg.warmup_steps, 1)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def _frozen_weight(heads: MedusaHeads, bf16: bool) -> torch.Tensor | None:
    """The shared (frozen) W2 in the projection's dtype — a bf16 copy made once per run instead of once per
    step by autocast — or None for separate, trained W2s."""
    if not heads.config.shared_lm_head:
        return None
    w = heads.lm_head_weight.detach()
    return w.to(torch.bfloat16) if bf16 else w


def _logits(heads: MedusaHeads, h: torch.Tensor, bf16: bool, w_frozen: torch.Tensor | None = None) -> torch.Tensor:
    z = heads.features(h)  # (B, K, H) fp32
    if w_frozen is not None:  # shared W2 (bf16 or fp32): (B*K, H) x (H, V), one matmul
        return (z.to(w_frozen.dtype).reshape(-1, z.shape[-1]) @ w_frozen.T).view(*z.shape[:-1], -1)
    if not bf16:
        return heads.project(z)
    with torch.autocast(device_type=z.device.type, dtype=torch.bfloat16):
        return heads.project(z)  # (B, K, V) bf16


def train_medusa1(
    heads: MedusaHeads,
    rows: MedusaRows,
    cfg: Medusa1Config | None = None,
    eval_rows: MedusaRows | None = None,
    progress: bool = True,
    callback=None,
) -> TrainLog:
    """Train `heads` in place on `rows` (frozen backbone: hidden states are data). Returns the loss log.

    callback(log) is called after every logged step (live plots); it may return True to stop early.
    """
    cfg = cfg or Medusa1Config()
    k = heads.num_heads
    if rows.labels.shape[1] < k + 1:
        raise ValueError(f"rows carry labels for {rows.labels.shape[1] - 1} heads, the model has {k}")
    if cfg.soft and not heads.config.shared_lm_head:
        raise ValueError("soft targets (soft > 0) are implemented for the shared-LM-head variant only")
    if not 0.0 <= cfg.soft <= 1.0:
        raise ValueError(f"soft must be in [0, 1], got {cfg.soft}")
    device = heads.w1.device
    bf16 = use_bf16(cfg.bf16, device)
    weights = loss_weights(k, cfg.decay).to(device)
    params = [p for p in heads.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98))
    w_frozen = _frozen_weight(heads, bf16)
    gen = torch.Generator().manual_seed(cfg.seed)
    order, pos = torch.randperm(len(rows), generator=gen), 0
    log, run_loss, run_heads, seen = TrainLog(), 0.0, torch.zeros(k), 0
    t0 = time.perf_counter()
    per_epoch = cfg.epoch_eval_rows > 0 and eval_rows is not None

    def epoch_eval(epoch: int, step: int) -> None:  # the same training sample every epoch (evenly spread rows)
        train = head_accuracy(heads, rows, max_rows=cfg.epoch_eval_rows, bf16=bf16)
        held = head_accuracy(heads, eval_rows, max_rows=cfg.eval_rows, bf16=bf16)
        log.epochs.append({"epoch": epoch, "step": step, "train": train.as_dict(), "heldout": held.as_dict()})
        heads.train()

    if per_epoch:
        epoch_eval(0, 0)  # untrained: every head is still the LM head
    heads.train()
    bar = tqdm(range(cfg.steps), desc="medusa-1", disable=not progress)
    for step in bar:
        if pos + cfg.batch_size > len(order):  # new epoch
            order, pos = torch.randperm(len(rows), generator=gen), 0
        idx = order[pos : pos + cfg.batch_size]
        pos += cfg.batch_size
        h = rows.hidden(idx).to(device, torch.float32)  # (B, H)
        labels = rows.labels[idx, 1 : k + 1].to(device)  # (B, K)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        if w_frozen is not None:  # shared W2: fused, chunked CE through the frozen projection
            teacher = rows.teacher_hidden(idx, k).to(device) if cfg.soft else None  # (B, K, H)
            loss, per_head = frozen_head_loss(heads.features(h), w_frozen, labels, weights, teacher, cfg.soft)
        else:
            loss, per_head = medusa_loss(_logits(heads, h, bf16), labels, weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        run_loss, run_heads, seen = run_loss + loss.item(), run_heads + per_head.detach().cpu(), seen + 1
        last = step == cfg.steps - 1
        if (step + 1) % cfg.log_every == 0 or last:
            log.step.append(step + 1)
            log.loss.append(run_loss / seen)
            log.head_loss.append((run_heads / seen).tolist())
            log.lr.append(lr_at(step, cfg))
            bar.set_postfix(loss=f"{run_loss / seen:.3f}")
            run_loss, run_heads, seen = 0.0, torch.zeros(k), 0
        if eval_rows is not None and ((cfg.eval_every and (step + 1) % cfg.eval_every == 0) or last):
            acc = head_accuracy(heads, eval_rows, max_rows=cfg.eval_rows, bf16=bf16)
            log.evals.append({"step": step + 1, **acc.as_dict()})
            heads.train()
        if per_epoch and pos + cfg.batch_size > len(order):  # this step ended an epoch (the next reshuffles)
            epoch_eval(len(log.epochs), step + 1)
        if callback is not None and ((step + 1) % cfg.log_every == 0 or last) and callback(log):
            break
    bar.close()
    heads.eval()
    log.seconds = time.perf_counter() - t0
    return log


@dataclass
class HeadAccuracy:
    """Per-head top-1 / top-5 accuracy on held-out rows; index 0 is head 1."""

    top1: list[float]
    top5: list[float]
    loss: list[float]  # per-head CE
    count: list[int]  # rows with a label, per head
    base_top1: float  # the LM head's own top-1 on x_{t+1} (~1.0 on greedy self-distilled text)

    def as_dict(self) -> dict:
        r = lambda xs: [round(x, 4) for x in xs]  # noqa: E731
        return {
            "top1": r(self.top1),
            "top5": r(self.top5),
            "loss": r(self.loss),
            "count": self.count,
            "base_top1": round(self.base_top1, 4),
        }


@torch.no_grad()
def head_accuracy(
    heads: MedusaHeads,
    rows: MedusaRows,
    lm_head_weight: torch.Tensor | None = None,
    batch_size: int = 512,
    max_rows: int | None = None,
    bf16: bool | None = False,
) -> HeadAccuracy:
    """Top-1/top-5 of each head against its label x_{t+k+1}, plus the base head's top-1.

    lm_head_weight: the target's LM head, for the base-head column (the shared variant already has it).
    bf16: logits in bfloat16 (same argmax up to rare ties); False (default) fp32, the same numbers on every
    machine; None: bf16 where it is native.
    """
    heads.eval()
    k = heads.num_heads
    base_w = heads.lm_head_weight if lm_head_weight is None else lm_head_weight
    n = len(rows) if max_rows is None else min(len(rows), max_rows)
    pick = torch.linspace(0, len(rows) - 1, n).round().long()  # evenly spread over all examples
    hit1, hit5, ce, count, base_hit, base_n = torch.zeros(k), torch.zeros(k), torch.zeros(k), torch.zeros(k), 0, 0
    device = heads.w1.device
    bf16 = use_bf16(bf16, device)
    w_frozen = _frozen_weight(heads, bf16)
    for a in range(0, n, batch_size):
        idx = pick[a : a + batch_size]
        h = rows.hidden(idx).to(device, torch.float32)  # (B, H)
        labels = rows.labels[idx, : k + 1].to(device)  # (B, K+1)
        logits = _logits(heads, h, bf16, w_frozen).float()  # (B, K, V)
        lab = labels[:, 1:]
        valid = lab != IGNORE_INDEX
        top5 = logits.topk(5, dim=-1).indices  # (B, K, 5)
        hit1 += ((top5[..., 0] == lab) & valid).sum(0).cpu()
        hit5 += ((top5 == lab[..., None]).any(-1) & valid).sum(0).cpu()
        _, per_head = medusa_loss(logits, lab, torch.ones(k))
        ce += per_head.cpu() * valid.sum(0).cpu()
        count += valid.sum(0).cpu()
        if base_w is not None:
            base_valid = labels[:, 0] != IGNORE_INDEX
            base_pred = (h @ base_w.to(h.dtype).T).argmax(-1)
            base_hit += int(((base_pred == labels[:, 0]) & base_valid).sum())
            base_n += int(base_valid.sum())
    count_ = count.clamp(min=1)
    return HeadAccuracy(
        top1=(hit1 / count_).tolist(),
        top5=(hit5 / count_).tolist(),
        loss=(ce / count_).tolist(),
        count=[int(c) for c in count],
        base_top1=base_hit / max(base_n, 1) if base_w is not None else float("nan"),
    )
