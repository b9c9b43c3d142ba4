"""Calibrate Medusa heads: how often head k's rank-i candidate is the target's token k + 1 positions ahead.

The accuracy models (`trees.HeadAccuracies`): a[k, i] = P(head k+1's rank-i candidate is right), marginal
("independent", Medusa's model) or given that heads 1..k had the truth in their top-S ("conditional");
`specdec_lab.trees` builds and sizes trees from either. The confidence model of dynamic trees
(`trees.HeadConfidence`, c_k(p)) is calibrated on the same text.

    python -m specdec_lab.train medusa-calibrate                  # shipped heads, held-out distillation data
    python -m specdec_lab.train medusa-calibrate --examples 100 --out data/medusa/smollm2-135m/calibration.json

Calibration text is the target's own greedy responses (the self-distillation data), held-out split only
(question_id % 10 == 0: the heads never trained on it) — never the benchmark's prompts (`data/prompts.jsonl`),
so a tree sized on it is not fitted to the benchmark. Teacher forcing: one forward per example gives the
target's last hidden state at every position, the heads read it, and the rank of the true token in each
head's sorted logits goes into `trees.calibrate_from_ranks` (independent and conditional accuracy models).

The result is written next to the heads (`calibration.json`), where `method="medusa", tree="auto"` reads it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from ..io import write_json
from ..medusa.drafter import SHIPPED_VOCAB
from ..medusa.heads import IGNORE_INDEX, MedusaHeads, medusa_labels
from ..models.vocab import drafting_vocab
from ..trees.accuracy import MISSING_RANK, HeadAccuracies, calibrate_from_ranks
from ..trees.confidence import confidence_from_probs

__all__ = [
    "HeadAccuracies",
    "MISSING_RANK",
    "calibrate_from_ranks",
    "true_ranks",
    "calibrate",
    "head_ranks",
    "head_confidence",
    "calibrate_heads",
    "calibrate_confidence",
    "main",
]


@torch.no_grad()
def true_ranks(head_logits: torch.Tensor, labels: torch.Tensor, top: int = 10, chunk_rows: int = 1024):
    """(T, K) rank of each label in its head's top-`top` logits (`top` if absent, MISSING_RANK if no label)."""
    if head_logits.ndim != 3:
        raise ValueError(f"head_logits must be (T, K, V), got shape {tuple(head_logits.shape)}")
    t, k, v = head_logits.shape
    if labels.shape != (t, k):
        raise ValueError(
            f"labels must be (T, K) = {(t, k)}, got {tuple(labels.shape)} "
            "(from medusa_labels' (T, K+1), drop the base column: labels[:, 1:])"
        )
    if not 1 <= top <= v:
        raise ValueError(f"top must be in 1..V = 1..{v}, got {top}")
    ranks = torch.empty(t, k, dtype=torch.long)
    for a in range(0, t, chunk_rows):  # topk over (chunk, K, V) at a time bounds the memory
        cand = head_logits[a : a + chunk_rows].topk(top, dim=-1).indices  # (B, K, S)
        lab = labels[a : a + chunk_rows].to(cand.device)  # (B, K)
        match = cand == lab[..., None]  # (B, K, S)
        rank = torch.where(match.any(-1), match.int().argmax(-1), top)  # (B, K)
        ranks[a : a + chunk_rows] = torch.where(lab == IGNORE_INDEX, MISSING_RANK, rank).cpu()
    return ranks


def calibrate(head_logits: torch.Tensor, labels: torch.Tensor, top: int = 10, chunk_rows: int = 1024):
    """HeadAccuracies from head logits (T, K, V) and labels (T, K) (IGNORE_INDEX = -100 where missing)."""
    return calibrate_from_ranks(true_ranks(head_logits, labels, top, chunk_rows), top)


@torch.inference_mode()
def head_ranks(model, heads: MedusaHeads, ids: Sequence[int], prompt_length: int, top: int = 10, chunk: int = 64):
    """(T, K) rank of the true token among each head's candidates (`top` = not in the top); IGNORE rows -1.

    One teacher-forced forward over ids; positions without a label for a head (inside the prompt, past the
    end) get -1, which `calibrate_from_ranks` leaves out of that head's statistic.
    """
    device = next(model.parameters()).device
    x = torch.tensor([list(ids)], device=device)
    hidden = model.get_decoder()(input_ids=x).last_hidden_state[0]  # (T, H) after the final norm
    labels = medusa_labels(torch.tensor(list(ids)), prompt_length, heads.num_heads)[:, 1:].to(device)  # (T, K)
    ranks = torch.full(labels.shape, MISSING_RANK, dtype=torch.long)  # (T, K)
    rows = (labels != IGNORE_INDEX).any(dim=1).nonzero().flatten()  # positions with any label
    for a in range(0, len(rows), chunk):  # the (C, K, V) head logits of a chunk at a time
        r = rows[a : a + chunk]
        ranks[r.cpu()] = true_ranks(heads(hidden[r]), labels[r], top)
    return ranks


@torch.inference_mode()
def head_confidence(model, heads: MedusaHeads, ids: Sequence[int], prompt_length: int, rows=None, top: int = 4,
                    chunk: int = 64):  # fmt: skip
    """Observations for `dynamic.confidence_from_probs` from one teacher-forced forward over ids.

    Returns probs (T, K, S): each head's top-S softmax probabilities over `rows` (the vocabulary it drafts
    from at decode time, e.g. the drafting vocabulary ∪ the prompt's tokens; None = all), correct (T, K, S):
    whether each is the true token, present (T, K): the head has a label there.
    """
    device = next(model.parameters()).device
    hidden = model.get_decoder()(input_ids=torch.tensor([list(ids)], device=device)).last_hidden_state[0]  # (T, H)
    labels = medusa_labels(torch.tensor(list(ids)), prompt_length, heads.num_heads)[:, 1:].to(device)  # (T, K)
    present = labels != IGNORE_INDEX  # (T, K)
    keep = present.any(dim=1).nonzero().flatten()  # positions with any label
    probs, correct = [], []
    for a in range(0, len(keep), chunk):
        r = keep[a : a + chunk]
        x = heads.features(hidden[r])  # (C, K, H)
        if heads.config.shared_lm_head:  # project onto the scored rows only
            w = heads.lm_head_weight if rows is None else heads.lm_head_weight[rows]  # (M, H)
            logits = x.to(w.dtype) @ w.T  # (C, K, M)
        else:
            logits = heads.project(x) if rows is None else heads.project(x)[..., rows]  # (C, K, M)
        p = logits.float().softmax(-1).topk(top, dim=-1)  # (C, K, S)
        ids_top = p.indices if rows is None else rows[p.indices]
        probs.append(p.values.cpu())
        correct.append((ids_top == labels[r][..., None]).cpu())
    return torch.cat(probs), torch.cat(correct), present[keep].cpu()


def calibrate_confidence(model, heads: MedusaHeads, examples, vocab=None, top: int = 4, progress: bool = True):
    """HeadConfidence (c_k(p) for dynamic trees) of `heads` on DistillExamples, scored on the drafting
    vocabulary `vocab` (target ids) ∪ each prompt's tokens, as `method="medusa"` scores them."""
    from tqdm.auto import tqdm

    obs = []
    for e in tqdm(examples, desc="calibrating confidence", disable=not progress):
        rows = None
        if vocab is not None:
            rows = torch.tensor(sorted(set(vocab.tolist()) | set(e.prompt_ids)), device=vocab.device)
        obs.append(head_confidence(model, heads, e.ids, len(e.prompt_ids), rows=rows, top=top))
    probs, correct, present = (torch.cat(x) for x in zip(*obs, strict=True))
    return confidence_from_probs(probs, correct, present)


def calibrate_heads(model, heads: MedusaHeads, examples, top: int = 10, progress: bool = True) -> HeadAccuracies:
    """Accuracies of `heads` on DistillExamples (prompt_ids, response_ids) by teacher forcing."""
    from tqdm.auto import tqdm

    ranks = [
        head_ranks(model, heads, e.ids, len(e.prompt_ids), top=top)
        for e in tqdm(examples, desc="calibrating heads", disable=not progress)
    ]
    return calibrate_from_ranks(torch.cat(ranks), top=top)


def main(argv: Sequence[str] | None = None) -> int:
    from ..medusa import load_heads, shipped_heads_path
    from ..models.load import load_model
    from . import distill

    parser = argparse.ArgumentParser(
        prog="python -m specdec_lab.train medusa-calibrate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--heads", default=str(shipped_heads_path()), help="heads folder (default: shipped)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--distill", default="data/distill/smollm2-135m,data/distill/smollm2-135m-extra,"
                        "data/distill/smollm2-135m-docs", help="comma-separated distillation directories")  # fmt: skip
    parser.add_argument("--examples", type=int, default=0, help="held-out examples used, evenly spaced (0: all)")
    parser.add_argument("--top", type=int, default=10, help="candidate ranks per head")
    parser.add_argument("--out", default=None, help="default: <heads>/calibration.json")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)

    examples = []
    for folder in args.distill.split(","):
        examples += distill.load_distillation_data(folder)
    _, held = distill.split_heldout(sorted(examples, key=lambda e: e.question_id))
    if 0 < args.examples < len(held):  # evenly spaced over the held-out list (all sources, all categories)
        held = [held[round(i * (len(held) - 1) / (args.examples - 1))] for i in range(args.examples)]
    lm = load_model(args.model)
    heads = load_heads(args.heads, lm.model)
    t0 = time.perf_counter()
    acc = calibrate_heads(lm.model, heads, held, top=args.top, progress=not args.quiet)
    # c_k(p) for dynamic trees, on the vocabulary the heads draft from (the shipped draft's, as get_drafter does)
    shipped = Path(args.heads).resolve() == shipped_heads_path().resolve()
    vocab = drafting_vocab(SHIPPED_VOCAB) if shipped else None
    confidence = calibrate_confidence(lm.model, heads, held, vocab=vocab, progress=not args.quiet)
    out = Path(args.out or Path(args.heads) / "calibration.json")
    record = acc.to_dict()
    record["confidence"] = confidence.to_dict()
    record["source"] = {
        "distill": args.distill,
        "split": "held-out (question_id % 10 == 0)",
        "examples": len(held),
        "seconds": round(time.perf_counter() - t0, 1),
        "command": "python -m specdec_lab.train medusa-calibrate "
        + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    write_json(out, record)
    top1 = " ".join(f"{a:.3f}" for a in acc.top[:, 0].tolist())
    print(f"wrote {out}: {acc.positions} positions; head top-1 accuracy {top1}")
    return 0
