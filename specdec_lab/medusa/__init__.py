"""Medusa (Cai et al. 2024): extra decoding heads on the target's last hidden state, and their training.

    heads.py       MedusaConfig, MedusaHeads (separate or shared-LM-head W2), labels, loss weights, loss
    checkpoint.py  our safetensors + JSON format, and FasterDecoding's published `medusa_lm_head` layout
    drafter.py     the heads ready to draft for one target (kernels, int8 or fp32, costs measured)
    projection.py  drafting's scores on the LM head's rows, fp32 or weight-only int8
    calibration.py the heads' accuracies and confidence on held-out text (`python -m specdec_lab.medusa calibrate`)
    train.py       Medusa-1 on cached hidden states (frozen backbone), per-head top-1/top-5 accuracy
    medusa2.py     Medusa-2: joint training with self-distillation (KL) and the backbone-drift measure

Decoding with the heads is `method="medusa"` (`specdec_lab/proposers/medusa.py`); the trees it verifies are
built and sized by the generic `specdec_lab.trees`. This package's import runs only what decoding needs:
calibration and training (which read the self-distillation data) are imported from their own modules.

Shipped heads for SmolLM2-135M-Instruct: `data/medusa/smollm2-135m/` (`load_shipped_heads`).
"""

from pathlib import Path

from .checkpoint import checkpoint_bytes, load_heads, load_medusa_layout, save_heads, save_medusa_layout
from .heads import (
    IGNORE_INDEX,
    MedusaConfig,
    MedusaHeads,
    frozen_head_loss,
    loss_weights,
    medusa_labels,
    medusa_loss,
)

# data/medusa/<name>/ in the repository (the heads are data, not package files)
SHIPPED_DIR = Path(__file__).resolve().parents[2] / "data" / "medusa"


def shipped_heads_path(name: str = "smollm2-135m") -> Path:
    """Directory of the heads shipped for a model (see its manifest.json for how they were trained)."""
    return SHIPPED_DIR / name


def load_shipped_heads(target, name: str = "smollm2-135m", **kw) -> MedusaHeads:
    """The shipped heads for `name`, attached to `target` (the HF model or its LM-head weight)."""
    return load_heads(shipped_heads_path(name), target, **kw)


__all__ = [
    "MedusaConfig",
    "MedusaHeads",
    "IGNORE_INDEX",
    "medusa_labels",
    "loss_weights",
    "medusa_loss",
    "frozen_head_loss",
    "save_heads",
    "load_heads",
    "save_medusa_layout",
    "load_medusa_layout",
    "checkpoint_bytes",
    "SHIPPED_DIR",
    "shipped_heads_path",
    "load_shipped_heads",
]
