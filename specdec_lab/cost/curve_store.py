"""Measured cost curves kept on disk, so the processes of one job measure the machine once, not once each.

`cost.cost_curve_for` measures a model's verify curve once per process (a tree curve up to 64 tokens is a
few hundred forwards). A test suite, a notebook run or a sweep starts many processes on the same machine,
each asking the same question; with `SPECDEC_LAB_CURVE_CACHE=<folder>` set they share the first answer.
Unset (the default), nothing is read or written: every process measures for itself.

What a curve depends on is its key: the machine (CPU, torch ISA, torch threads, torch version), the model's
shapes (not its weights: timing depends on sizes and kernels only), device, dtype, the linear and attention
kernels, the mask kind (chain or tree) and how it was measured (context, repeats, statistic). A stored curve
that reaches fewer tokens than asked is measured again and replaced. Entries are JSON files written
atomically, so processes racing on one key each write a whole curve and the last one wins.

Curves are ratios within paired repeats (`cost.measure_cost_curve`, statistic "paired"), which cancel the
load a measurement saw; the load *now* is what `cost.StepCost` learns online from every step anyway.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..io import write_json
from ..machine import machine

__all__ = ["ENV", "curve_key", "load_curve", "store_curve"]

ENV = "SPECDEC_LAB_CURVE_CACHE"
_SHAPE_FIELDS = ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "head_dim", "vocab_size", "tie_word_embeddings")  # fmt: skip


def _folder() -> Path | None:
    where = os.environ.get(ENV, "").strip()
    return Path(where) if where else None


def curve_key(model, setup: tuple, **how) -> str:
    """A file name for the curve of `model` under `setup` (device, dtype, kernels, tree?) measured `how`."""
    m = machine()
    config = model.config.get_text_config(decoder=True).to_dict()
    facts = {
        "machine": [m.cpu, m.arch, m.isa, m.threads, m.torch],
        "shapes": {f: config.get(f) for f in _SHAPE_FIELDS},
        "setup": [str(s) for s in setup],
        "how": how,
    }
    return hashlib.sha1(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:20]


def load_curve(key: str) -> dict | None:
    """The curve stored under `key` (`CostCurve.to_dict`'s JSON, read back by `CostCurve.from_dict`) when
    caching is on; None when it is off or nothing readable is stored."""
    folder = _folder()
    path = folder / f"{key}.json" if folder else None
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):  # a file another process is replacing, or a damaged one: re-measure
        return None


def store_curve(key: str, curve: dict) -> None:
    """Keep `curve` (`CostCurve.to_dict`) under `key` when caching is on (atomically: a reader sees the old
    file or the new one)."""
    folder = _folder()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / f"{key}.json", curve)
