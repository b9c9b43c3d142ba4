"""Medusa (Cai et al. 2024): extra decoding heads on the target's last hidden state, and their training.

    heads.py       MedusaConfig, MedusaHeads (separate or shared-LM-head W2), labels, loss weights, loss
    checkpoint.py  our safetensors + JSON format, and FasterDecoding's published `medusa_lm_head` layout
    train.py       Medusa-1 on cached hidden states (frozen backbone), per-head top-1/top-5 accuracy
    medusa2.py     Medusa-2: joint training with self-distillation (KL) and the backbone-drift measure
    calibration.py head accuracies a[k, i] (independent and conditional models), measured on held-out text
    trees.py       rank-path trees (medusa_choices), E[L], greedy / optimal (DP) trees, hardware-aware budget
    drafter.py     the heads ready to draft for one target (kernels, int8 or fp32, costs measured)
    online.py      the near-best trees timed while decoding (UCB on measured tokens per second)
    projection.py  drafting's scores on the LM head's rows, fp32 or weight-only int8
    dynamic.py     each step's tree from the heads' calibrated confidence (EAGLE-2 style)

Decoding with the heads is `method="medusa"` (`specdec_lab/proposers/medusa.py`).

Shipped heads for SmolLM2-135M-Instruct: `data/medusa/smollm2-135m/` (`load_shipped_heads`).
"""

from pathlib import Path

from .calibration import HeadAccuracies, calibrate_from_ranks
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
from .medusa2 import Drift, Medusa2Config, Medusa2Log, backbone_drift, lambda0_at, train_medusa2
from .train import HeadAccuracy, Medusa1Config, MedusaRows, TrainLog, build_rows, head_accuracy, train_medusa1
from .trees import (
    BudgetChoice,
    cartesian_paths,
    cartesian_size,
    choose_budget,
    expected_length,
    greedy_tree,
    optimal_tree,
    read_choices,
    write_choices,
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
    "MedusaRows",
    "build_rows",
    "Medusa1Config",
    "TrainLog",
    "train_medusa1",
    "HeadAccuracy",
    "head_accuracy",
    "Medusa2Config",
    "Medusa2Log",
    "Drift",
    "backbone_drift",
    "train_medusa2",
    "lambda0_at",
    "HeadAccuracies",
    "calibrate_from_ranks",
    "BudgetChoice",
    "cartesian_paths",
    "cartesian_size",
    "choose_budget",
    "expected_length",
    "greedy_tree",
    "optimal_tree",
    "read_choices",
    "write_choices",
    "SHIPPED_DIR",
    "shipped_heads_path",
    "load_shipped_heads",
]
