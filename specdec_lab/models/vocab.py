"""Drafting vocabularies: the target tokens a drafter scores, shipped as data files.

A drafter's last step projects its features onto the target's LM head; for SmolLM2-135M that head is 49,152
rows × 576, the largest single cost of a small draft step. Scoring only the most frequent tokens of the
target's own answers (EAGLE-3's reduced vocabulary; our distilled draft and the Medusa heads do it too) cuts
that cost by the vocabulary's ratio, and costs acceptance only where the target's token is outside it: the
target verifies every node, so the output never changes. Drafters add the prompt's own tokens at run time,
so names and code copied from the prompt stay reachable.

    data/vocab/<target>.json   {"target", "target_vocab_size", "size", "source", "ids": [most frequent first]}

`drafting_vocab(name)` reads one; `write_vocab` writes one (atomically); `vocab_for(model)` finds the shipped
one built for a model's head (same number of rows), for drafters that are not shipped with one (layer
skip). Decoding reads the file and never loads a draft model or training data to get a vocabulary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import torch

from ..io import DATA_DIR, write_json

__all__ = ["VOCAB_DIR", "vocab_path", "drafting_vocab", "vocab_for", "write_vocab"]

VOCAB_DIR = DATA_DIR / "vocab"


def vocab_path(name: str) -> Path:
    """The shipped vocabulary file of target `name` (e.g. "smollm2-135m")."""
    return VOCAB_DIR / f"{name}.json"


def drafting_vocab(name: str = "smollm2-135m", device: torch.device | str = "cpu") -> torch.Tensor:
    """(M,) target token ids of `name`'s drafting vocabulary, most frequent first."""
    path = vocab_path(name) if os.sep not in name and not name.endswith(".json") else Path(name)
    if not path.is_file():
        shipped = sorted(p.stem for p in VOCAB_DIR.glob("*.json"))
        raise FileNotFoundError(f"no drafting vocabulary at {path}; shipped: {', '.join(shipped) or 'none'}")
    record = json.loads(path.read_text(encoding="utf-8"))
    ids = record.get("ids") if isinstance(record, dict) else None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and i >= 0 for i in ids):
        raise ValueError(f"{path}: 'ids' must be a non-empty list of non-negative token ids")
    return torch.tensor(ids, dtype=torch.long, device=device)


def vocab_for(model) -> torch.Tensor | None:
    """(M,) the shipped drafting vocabulary built for a head of `model`'s size (its rows), or None if none is.

    Matching on the head's row count (recorded as "target_vocab_size") keeps a vocabulary built for SmolLM2
    off a tiny test model or another tokenizer, where its ids would mean other tokens or not exist.
    """
    rows = model.get_output_embeddings().weight.shape[0]
    device = model.get_output_embeddings().weight.device
    for path in sorted(VOCAB_DIR.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and record.get("target_vocab_size") == rows:
            return drafting_vocab(str(path), device)
    return None


def write_vocab(
    path: str | os.PathLike, ids: Sequence[int] | torch.Tensor, target: str, source: str, target_vocab_size: int
) -> Path:
    """Write a drafting vocabulary file (one id list, most frequent first) atomically."""
    ids = [int(i) for i in (ids.tolist() if isinstance(ids, torch.Tensor) else ids)]
    if max(ids) >= target_vocab_size:
        raise ValueError(f"token id {max(ids)} is outside a vocabulary of {target_vocab_size}")
    record = {"target": target, "target_vocab_size": target_vocab_size, "size": len(ids), "source": source,
              "ids": ids}  # fmt: skip
    return write_json(path, record, indent=None)
