"""EAGLE (Li et al. 2024, 2025): a one-layer drafter that drafts at the feature level from the target's hidden states.

    model.py   EagleConfig, EagleDrafter (EAGLE-3: three target layers fused by `fc`; EAGLE-1/2: the last one),
               the drafting vocabulary's d2t / t2d, random init, save / load in the EAGLE-3 checkpoint layout
    ttt.py     EAGLE-3's training-time test: the drafter unrolled on its own outputs, batched, and its loss
               (used by `python -m specdec_lab.train eagle`; decoding never imports it)
    export.py  the layout vLLM and SGLang load, checked against their loaders; `python -m specdec_lab.eagle.export`
    lineage.py the chain of training runs behind a drafter folder (`continues` in each manifest), one curve

Decoding with a drafter is `method="eagle"` (`specdec_lab/proposers/eagle.py`). Shipped weights live under
`data/eagle/<target>/`; `python -m specdec_lab.train eagle` trains them (never imported by decoding).
"""

from pathlib import Path

from .model import (
    ARCHITECTURES,
    VARIANTS,
    EagleConfig,
    EagleDrafter,
    eagle3_layers,
    load_drafter,
    random_drafter,
    save_drafter,
)

# data/eagle/<name>/ in the repository (weights are data, not package files)
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "data" / "eagle"
TRAIN_COMMAND = "python -m specdec_lab.train eagle"

__all__ = [
    "ARCHITECTURES",
    "VARIANTS",
    "EagleConfig",
    "EagleDrafter",
    "eagle3_layers",
    "load_drafter",
    "random_drafter",
    "save_drafter",
    "SHIPPED_DIR",
    "TRAIN_COMMAND",
]
