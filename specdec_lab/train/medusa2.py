"""Medusa-2: train the heads jointly with the backbone, without letting the backbone drift.

Fine-tuning the backbone makes h_t easier for the heads to read (higher head accuracy), but the backbone
is also the verifier: whatever it learns changes the text that speculative decoding produces. Medusa-2
(Cai et al. 2024, §3.2) therefore trains

    L = L_LM + lambda0(step) * L_Medusa-1,          L_Medusa-1 = sum_k 0.8^k CE(head k)

with three guards against drift and against random heads wrecking the backbone early on:
1. heads warm up first: `warmup_steps` of Medusa-1 (backbone frozen), then the joint phase;
2. lambda0 ramps from 0 to its maximum (sine schedule) in the joint phase, and the backbone's learning
   rate is much smaller than the heads' (the paper's alternative is LoRA adapters on the backbone);
3. self-distillation: L_LM = KL(p_orig || p_theta) against a frozen copy of the original model, so the
   backbone is pulled back to its own original next-token distribution, not to the (self-generated)
   text's one-hot labels (`lm_loss="ce"` uses those, for comparison).

`backbone_drift` measures how far the backbone went: mean KL(p_orig || p_theta) per response position,
and how often the two agree on the argmax (what greedy decoding would emit).

The backbone is every parameter except the input/output embeddings: they are tied in SmolLM2 and the
shared-LM-head heads project with the output embedding, which is meant to stay the frozen target's.
Runs on sequences (the backbone must run forward), so it is for tiny models and GPUs; on CPU the
notebook shows it on a tiny model.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..medusa.heads import IGNORE_INDEX, MedusaHeads, loss_weights, medusa_labels, medusa_loss
from .distill import DistillExample

__all__ = ["Medusa2Config", "Medusa2Log", "Drift", "backbone_drift", "train_medusa2", "lambda0_at"]


@dataclass
class Medusa2Config:
    warmup_steps: int = 50  # Medusa-1 phase: heads only, backbone frozen
    joint_steps: int = 100  # joint phase
    batch_size: int = 4  # sequences per step
    head_lr: float = 2e-3
    backbone_lr: float = 2e-5  # much smaller than the heads'
    lambda0: float = 0.2  # weight of the Medusa loss at the end of the ramp
    lambda0_ramp: int = 50  # joint steps over which lambda0 rises from 0 (sine schedule)
    lm_loss: str = "kl"  # "kl": KL to the frozen original (self-distillation); "ce": CE on the tokens
    decay: float = 0.8  # lambda_k = decay^k
    drift_every: int = 0  # also measure the drift every n joint steps (0: after warmup and at the end)
    seed: int = 0

    def __post_init__(self):
        if self.lm_loss not in ("kl", "ce"):
            raise ValueError(f"lm_loss must be 'kl' or 'ce', got {self.lm_loss!r}")


@dataclass
class Drift:
    kl: float  # mean KL(p_orig || p_theta) per response position, nats
    max_kl: float  # the worst position
    top1_agreement: float  # fraction of positions where the argmax is unchanged
    positions: int


@dataclass
class Medusa2Log:
    step: list[int] = field(default_factory=list)
    phase: list[str] = field(default_factory=list)  # "warmup" | "joint"
    lm_loss: list[float] = field(default_factory=list)  # 0 during warmup
    head_loss: list[list[float]] = field(default_factory=list)  # per head CE_k
    medusa_weight: list[float] = field(default_factory=list)  # 1 in warmup (Medusa-1), lambda0(step) after
    drift: list[dict] = field(default_factory=list)  # {"step", **Drift}
    seconds: float = 0.0


def lambda0_at(joint_step: int, cfg: Medusa2Config) -> float:
    """Sine ramp 0 -> lambda0 over the first `lambda0_ramp` joint steps, then flat."""
    x = min(1.0, (joint_step + 1) / max(cfg.lambda0_ramp, 1))
    return cfg.lambda0 * math.sin(0.5 * math.pi * x)


def _as_pairs(sequences) -> list[tuple[list[int], int]]:
    """DistillExample or (ids, prompt_length) -> (ids, prompt_length)."""
    return [(s.ids, len(s.prompt_ids)) if isinstance(s, DistillExample) else (list(s[0]), int(s[1])) for s in sequences]


def _batch(pairs: Sequence[tuple[list[int], int]], num_heads: int, device):
    """Right-padded (B, T) ids, attention mask and (B, T, K+1) labels (IGNORE_INDEX on padding)."""
    width = max(len(ids) for ids, _ in pairs)
    ids = torch.zeros(len(pairs), width, dtype=torch.long)
    mask = torch.zeros(len(pairs), width, dtype=torch.long)
    labels = torch.full((len(pairs), width, num_heads + 1), IGNORE_INDEX, dtype=torch.long)
    for i, (seq, prompt_length) in enumerate(pairs):
        t = torch.tensor(seq)
        ids[i, : len(seq)], mask[i, : len(seq)] = t, 1
        labels[i, : len(seq)] = medusa_labels(t, prompt_length, num_heads)
    return ids.to(device), mask.to(device), labels.to(device)


def _next_token_logits(model, ids, mask):
    """(B, T, V) logits and (B, T, H) last hidden states, with the decoder body and LM head run apart."""
    hidden = model.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
    return model.get_output_embeddings()(hidden), hidden


def _kl(logits_ref: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """(..., V) x2 -> (...,) KL(p_ref || p) in nats."""
    log_p, log_ref = F.log_softmax(logits.float(), -1), F.log_softmax(logits_ref.float(), -1)
    return (log_ref.exp() * (log_ref - log_p)).sum(-1)


@torch.no_grad()
def backbone_drift(model, reference, sequences, batch_size: int = 8) -> Drift:
    """How far `model`'s next-token distribution moved from `reference`'s, on response positions."""
    pairs = _as_pairs(sequences)
    device = next(model.parameters()).device
    kls, agree = [], 0
    for a in range(0, len(pairs), batch_size):
        ids, mask, labels = _batch(pairs[a : a + batch_size], 0, device)
        valid = labels[..., 0] != IGNORE_INDEX  # (B, T) positions that predict a response token
        logits, _ = _next_token_logits(model, ids, mask)
        ref, _ = _next_token_logits(reference, ids, mask)
        kls.append(_kl(ref[valid], logits[valid]))
        agree += int((ref[valid].argmax(-1) == logits[valid].argmax(-1)).sum())
    kl = torch.cat(kls)
    return Drift(kl=kl.mean().item(), max_kl=kl.max().item(), top1_agreement=agree / len(kl), positions=len(kl))


def train_medusa2(
    model,
    heads: MedusaHeads,
    sequences,
    cfg: Medusa2Config | None = None,
    reference=None,
    eval_sequences=None,
    progress: bool = True,
) -> Medusa2Log:
    """Medusa-2 on `sequences` (DistillExample or (ids, prompt_length)); `model` and `heads` are trained
    in place. reference: the frozen original (a deep copy of `model` is taken when None). Drift on
    `eval_sequences` (default: the training sequences) is measured after warmup and at the end."""
    cfg = cfg or Medusa2Config()
    pairs, k = _as_pairs(sequences), heads.num_heads
    eval_pairs = _as_pairs(eval_sequences) if eval_sequences is not None else pairs
    reference = reference if reference is not None else copy.deepcopy(model)
    reference.eval().requires_grad_(False)
    device = next(model.parameters()).device
    embeddings = {id(p) for m in (model.get_input_embeddings(), model.get_output_embeddings()) for p in m.parameters()}
    backbone = [p for p in model.parameters() if id(p) not in embeddings]
    flags = {id(p): p.requires_grad for p in model.parameters()}
    model.requires_grad_(False)
    head_opt = torch.optim.AdamW(list(heads.parameters()), lr=cfg.head_lr, weight_decay=0.0)
    body_opt = torch.optim.AdamW(backbone, lr=cfg.backbone_lr, weight_decay=0.0)
    weights = loss_weights(k, cfg.decay).to(device)
    gen = torch.Generator().manual_seed(cfg.seed)
    log, t0 = Medusa2Log(), time.perf_counter()
    total = cfg.warmup_steps + cfg.joint_steps
    bar = tqdm(range(total), desc="medusa-2", disable=not progress)
    try:
        for step in bar:
            joint = step >= cfg.warmup_steps
            if step == cfg.warmup_steps:  # warmup done: unfreeze the backbone (not the embeddings)
                for p in backbone:
                    p.requires_grad_(True)
                log.drift.append({"step": step, **asdict(backbone_drift(model, reference, eval_pairs))})
            pick = torch.randint(len(pairs), (cfg.batch_size,), generator=gen).tolist()
            ids, mask, labels = _batch([pairs[i] for i in pick], k, device)
            with torch.set_grad_enabled(joint):
                logits, hidden = _next_token_logits(model, ids, mask)  # (B, T, V), (B, T, H)
            med_logits = heads(hidden)  # (B, T, K, V)
            med_loss, per_head = medusa_loss(med_logits.flatten(0, 1), labels[..., 1:].flatten(0, 1), weights)
            lm_loss, lam = torch.zeros((), device=device), 1.0
            if joint:
                lam = lambda0_at(step - cfg.warmup_steps, cfg)
                valid = labels[..., 0] != IGNORE_INDEX  # (B, T)
                if cfg.lm_loss == "kl":
                    with torch.no_grad():
                        ref_logits, _ = _next_token_logits(reference, ids, mask)
                    lm_loss = _kl(ref_logits[valid], logits[valid]).mean()
                else:
                    lm_loss = F.cross_entropy(logits[valid].float(), labels[..., 0][valid])
            loss = lm_loss + lam * med_loss
            head_opt.zero_grad(set_to_none=True)
            body_opt.zero_grad(set_to_none=True)
            loss.backward()
            head_opt.step()
            if joint:
                body_opt.step()
            log.step.append(step + 1)
            log.phase.append("joint" if joint else "warmup")
            log.lm_loss.append(lm_loss.item())
            log.head_loss.append(per_head.detach().cpu().tolist())
            log.medusa_weight.append(lam)
            joint_done = step + 1 - cfg.warmup_steps
            if joint and cfg.drift_every and joint_done % cfg.drift_every == 0 and step + 1 < total:
                log.drift.append({"step": step + 1, **asdict(backbone_drift(model, reference, eval_pairs))})
            bar.set_postfix(phase=log.phase[-1], medusa=f"{med_loss.item():.3f}", lm=f"{lm_loss.item():.4f}")
        log.drift.append({"step": total, **asdict(backbone_drift(model, reference, eval_pairs))})
    finally:
        for p in model.parameters():
            p.requires_grad_(flags[id(p)])
        bar.close()
    log.seconds = time.perf_counter() - t0
    return log
