"""Medusa (Cai et al. 2024): extra decoding heads on the target's last hidden state.

    heads.py       MedusaConfig, MedusaHeads (separate or shared-LM-head W2), labels, loss weights, loss
    checkpoint.py  our safetensors + JSON format, and FasterDecoding's published `medusa_lm_head` layout
    drafter.py     the heads ready to draft for one target (kernels, int8 or fp32, costs measured)
    projection.py  drafting's scores on the LM head's rows, fp32 or weight-only int8 (`models.quant.int8_mm`)

Decoding with the heads is `method="medusa"` (`specdec_lab/proposers/medusa.py`); the trees it verifies are
built and sized by the generic `specdec_lab.trees`. Training (Medusa-1 and -2), calibration and the
memorisation study read the self-distillation data and live in `specdec_lab.train` (`train medusa`,
`train medusa-calibrate`, `train medusa-memorisation`).

Shipped heads for SmolLM2-135M-Instruct: `data/medusa/smollm2-135m/` (`load_shipped_heads`).
"""

from pathlib import Path

from ..io import DATA_DIR
from .checkpoint import checkpoint_bytes, load_heads, load_medusa_layout, save_heads, save_medusa_layout
from .heads import IGNORE_INDEX, MedusaConfig, MedusaHeads, frozen_head_loss, loss_weights, medusa_labels, medusa_loss

# data/medusa/<name>/ in the repository (the heads are data, not package files)
SHIPPED_DIR = DATA_DIR / "medusa"


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
