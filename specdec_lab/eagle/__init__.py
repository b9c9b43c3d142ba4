"""EAGLE (Li et al. 2024, 2025): a one-layer drafter that drafts at the feature level from the target's hidden states.

    model.py       EagleConfig, EagleDrafter (EAGLE-3: three target layers fused by `fc`; EAGLE-1/2: the last
                   one), the drafting vocabulary's d2t / t2d, random init, save / load in the EAGLE-3 layout
    export.py      the layout vLLM and SGLang load, checked against their loaders (`python -m
                   specdec_lab.eagle.export`)
    vocab_cost.py  the drafting-vocabulary trade-off: what an M-row head costs a step, what share it covers

Decoding with a drafter is `method="eagle"` (`specdec_lab/proposers/eagle.py`). Shipped weights live under
`data/eagle/<target>/`; `python -m specdec_lab.train eagle` trains them (its training-time test and the
lineage of runs are in `specdec_lab.train`; `specdec_lab.lab.drafter_accuracy` compares drafters).
"""

from ..io import DATA_DIR
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
SHIPPED_DIR = DATA_DIR / "eagle"
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
