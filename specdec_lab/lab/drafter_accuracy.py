"""Accuracy per draft position of three learned proposers on the same held-out text: token draft, Medusa, EAGLE.

Why a feature-level drafter (EAGLE) should draft further than independent heads (Medusa) on one hidden state,
and what it costs against a token draft that re-reads the true tokens: measured on ONE set of examples, the
target's self-distillation data held out by question_id % 10 == 0, a fixed evenly spread subset.

Draft position k = 1..K after the root x_{t+1} (the target's own next token) is the token x_{t+k+1}. Its
accuracy is `train.eagle_ttt.accuracy`'s definition for all three: the proposer's top-1 equals the target's greedy
token there, with drafts 1..k-1 teacher-forced (the greedy acceptance of draft k given the earlier ones were
accepted), over every response token x_{t+k+1}:

    draft   the 2-layer token draft's step on the true prefix x_0..x_{t+k}: with its earlier drafts
            teacher-forced it sees exactly the target's context, so its k-th step is its next-token guess
    medusa  head k on h_t (the target's last hidden state after x_t): it never sees x_{t+2}..x_{t+k}
    eagle   the drafter's step k-1 of the training-time test: the target's features f_t, then its own
            outputs for f_{t+1}.., with the true tokens x_{t+1}..x_{t+k} as its token inputs

Each proposer scores the rows it scores when decoding: the draft and the heads their drafting vocabulary plus
the example's prompt tokens (`Draft.head_rows`, `medusa.Drafter.rows`), EAGLE its own (d2t) vocabulary.

    python -m specdec_lab.lab.drafter_accuracy                       # data/eagle/position_accuracy.json
    python -m specdec_lab.lab.drafter_accuracy --weights /tmp/eagle-20/smollm2-135m --examples 48
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..eagle.model import EagleDrafter
from ..train.eagle_ttt import accuracy, shifted, teacher

__all__ = ["SOURCES", "held_out_subset", "position_accuracy", "main"]

SOURCES = ("draft", "medusa", "eagle")  # the proposers compared, in the figure's order
DISTILL_DIRS = (
    "data/distill/smollm2-135m,data/distill/smollm2-135m-extra,data/distill/smollm2-135m-docs,"
    "data/distill/smollm2-135m-extra2"
)  # the four sets `train eagle` reads
OUT = "data/eagle/position_accuracy.json"


def held_out_subset(examples: Sequence, n: int, every: int = 10) -> list:
    """`n` held-out examples (question_id % every == 0), evenly spread over the held-out set (as `train eagle`'s
    evaluation picks them): the same subset for every proposer and every run."""
    from ..train.distill import split_heldout

    _, held = split_heldout(examples, every)
    step = max(1, len(held) // max(n, 1))
    return held[::step][:n]


class _LastHidden:
    """Forward hook on the target's decoder: keeps its last hidden state (after the final norm), which teacher's
    one prefill computes anyway and the Medusa heads read — no second target forward."""

    def __init__(self, decoder):
        self.value, self.handle = None, decoder.register_forward_hook(self)

    def __call__(self, module, args, output):
        self.value = output.last_hidden_state

    def close(self):
        self.handle.remove()


def _top1(h: torch.Tensor, weight: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """(n, H) vectors -> (n,) target ids of their top-1 over `rows` of the head `weight` (V, H) (None: all)."""
    if rows is None:
        return (h @ weight.T).argmax(-1)
    return rows[(h @ weight[rows].T).argmax(-1)]


@torch.no_grad()
def _batch_hits(target, drafter: EagleDrafter | None, draft, heads, examples, k: int) -> dict[str, tuple[list, list]]:
    """{source: (hits per position, positions per position)} for one batch of examples."""
    hook = _LastHidden(target.get_decoder())
    try:
        if drafter is None:  # the teacher wants a drafter only for its vocabulary and feature layers
            raise ValueError("position_accuracy needs an EAGLE drafter")
        t = teacher(target, drafter, examples)
    finally:
        hook.close()
    last = hook.value  # (B, T, H)
    greedy = t.greedy  # (B, T) row u: the target's greedy token after x_u
    masks = [shifted(t.valid, 1 + j, False) for j in range(1, k + 1)]  # index t: x_{t+j+1} is a response token
    out: dict[str, tuple[list, list]] = {}
    totals = [int(m.sum()) for m in masks]
    e_hits, e_total = accuracy(drafter, t, k)
    assert e_total == totals, (e_total, totals)
    out["eagle"] = (e_hits, e_total)
    if draft is not None:
        body = draft.model.get_decoder()
        hidden = draft.readout(body(input_ids=t.ids).last_hidden_state)  # (B, T, H) right padding: causal is enough
        weight = draft.model.get_output_embeddings().weight
        pred = torch.zeros_like(t.ids)  # (B, T) row u: the draft's guess for x_{u+1}
        for b, e in enumerate(examples):
            read = shifted(t.valid[b : b + 1], 1, False)[0]  # rows whose next token is a response token
            pred[b, read] = _top1(hidden[b, read], weight, draft.head_rows(e.prompt_ids))
        # position j at index t: the draft's guess for x_{t+j+1} is row t+j (teacher-forced prefix)
        out["draft"] = ([int(((shifted(pred, j) == shifted(greedy, j)) & m).sum()) for j, m in
                         zip(range(1, k + 1), masks, strict=True)], totals)  # fmt: skip
    if heads is not None:
        h, weight, n = heads.heads, target.get_output_embeddings().weight, heads.heads.num_heads
        hits = [0] * k
        for b, e in enumerate(examples):
            rows = heads.rows(e.prompt_ids)
            feats = h.features(last[b].to(h.w1.dtype))  # (T, K, H) every head's residual block at every index
            for j in range(1, min(k, n) + 1):  # head j at index t predicts x_{t+j+1}
                m = masks[j - 1][b]
                guess = _top1(feats[m, j - 1], weight.to(feats.dtype), rows)  # (n,)
                hits[j - 1] += int((guess == shifted(greedy, j)[b, m]).sum())
        out["medusa"] = (hits, totals)
    return out


def position_accuracy(target, drafter: EagleDrafter, draft=None, heads=None, examples: Sequence = (),
                      positions: int = 5, batch_size: int = 8, progress: bool = True) -> dict:  # fmt: skip
    """Accuracy per draft position 1..`positions` of each proposer given (module docstring) on `examples`.

    target: the HF model; drafter: an `EagleDrafter`; draft: a `draft_model.Draft` or None; heads: a
    `medusa.Drafter` (heads + their drafting vocabulary) or None. Returns {"positions": [1..K], "sources":
    {name: {"accuracy": [..], "hits": [..], "count": [..]}}, "examples": n, "tokens": response tokens scored}.
    Medusa positions beyond its heads are None.
    """
    k = positions
    sums = {s: ([0] * k, [0] * k) for s in SOURCES}
    examples = list(examples)
    bar = tqdm(total=len(examples), desc="position accuracy", unit="ex", disable=not progress)
    for i in range(0, len(examples), batch_size):
        batch = examples[i : i + batch_size]
        for name, (hits, count) in _batch_hits(target, drafter, draft, heads, batch, k).items():
            sums[name] = ([a + b for a, b in zip(sums[name][0], hits, strict=True)],
                          [a + b for a, b in zip(sums[name][1], count, strict=True)])  # fmt: skip
        bar.update(len(batch))
    bar.close()
    n_heads = heads.heads.num_heads if heads is not None else 0
    sources = {}
    for name in SOURCES:
        if name == "draft" and draft is None or name == "medusa" and heads is None:
            continue
        hits, count = sums[name]
        acc = [round(h / max(c, 1), 4) for h, c in zip(hits, count, strict=True)]
        if name == "medusa":
            acc = [a if j < n_heads else None for j, a in enumerate(acc)]
        sources[name] = {"accuracy": acc, "hits": hits, "count": count}
    return {"positions": list(range(1, k + 1)), "sources": sources, "examples": len(examples),
            "tokens": sum(len(e.response_ids) for e in examples)}  # fmt: skip


# ---- command line --------------------------------------------------------------------------------------
def _weights_record(weights: str, folder: Path) -> dict:
    """What a drafter folder was trained with, in terms that hold on any machine (no absolute paths)."""
    # a folder outside the repository is named by its last two components (never this machine's path)
    record: dict = {"folder": weights if not Path(weights).is_absolute() else "/".join(folder.parts[-2:])}
    manifest = folder / "manifest.json"
    if manifest.is_file():
        m = json.loads(manifest.read_text())
        record |= {"command": m.get("command"), "tokens_seen": m.get("tokens_seen"), "steps": m.get("steps"),
                   "heldout_accuracy_by_position": m.get("heldout_accuracy_by_position")}  # fmt: skip
    return record


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.lab.drafter_accuracy", description=__doc__.split("\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    p.add_argument("--model", default="smollm2-135m", help="target: shipped name, HF dir or .gguf")
    p.add_argument("--weights", default="data/eagle/smollm2-135m", help="the EAGLE drafter folder")
    p.add_argument("--draft", default="default", help="the token draft (`draft_model.get_draft`)")
    p.add_argument("--heads", default="default", help="the Medusa heads (`medusa.drafter.get_drafter`)")
    p.add_argument("--distill-dir", default=DISTILL_DIRS, help="self-distillation shard folders, comma-separated")
    p.add_argument("--examples", type=int, default=48, help="held-out examples (question_id %% 10 == 0), spread")
    p.add_argument("--positions", type=int, default=5, help="draft positions K")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--out", default=OUT)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    from ..io import write_json
    from ..machine import machine_info
    from ..medusa.drafter import get_drafter
    from ..models.draft_model import get_draft
    from ..models.load import load_model, model_record
    from ..proposers.eagle import get_eagle_drafter, weights_folder
    from ..train.distill import load_distillation_data

    args = build_parser().parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    lm = load_model(args.model)
    folder = weights_folder(args.weights)
    drafter = get_eagle_drafter(str(folder), lm.model)
    draft = get_draft(args.draft, lm.model)
    heads = get_drafter(args.heads, lm.model)
    examples = [e for d in args.distill_dir.split(",") if d.strip() for e in load_distillation_data(d.strip())]
    subset = held_out_subset(sorted(examples, key=lambda e: e.question_id), args.examples)
    result = position_accuracy(lm.model, drafter, draft, heads, subset, args.positions, args.batch_size,
                               progress=not args.quiet)  # fmt: skip
    record = {
        "command": "python -m specdec_lab.lab.drafter_accuracy "
        + shlex.join(argv if argv is not None else sys.argv[1:]),
        "target": model_record(lm),
        "weights": {
            "eagle": _weights_record(args.weights, folder),
            "draft": draft.name,
            "medusa": heads.source.name if heads.source is not None else "MedusaHeads",
        },  # fmt: skip
        "data": {
            "distill_dir": args.distill_dir,
            "heldout_rule": "question_id % 10 == 0",
            "question_ids": [e.question_id for e in subset],
        },  # fmt: skip
        **result,
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine_info("cpu"),
    }
    write_json(args.out, record)
    acc = {name: s["accuracy"] for name, s in result["sources"].items()}
    print(f"wrote {args.out} in {record['seconds']:.0f} s: {acc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
