"""EAGLE (Li et al. 2024, 2025): a one-layer drafter that drafts at the feature level from the target's hidden states.

    model.py   EagleConfig, EagleDrafter (EAGLE-3: three target layers fused by `fc`; EAGLE-1/2: the last one),
               the drafting vocabulary's d2t / t2d, random init, save / load in the EAGLE-3 checkpoint layout

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
