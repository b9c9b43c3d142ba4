"""Everything fitted from data: self-distillation, the draft model, Medusa's heads, EAGLE's drafter, their
calibration and the records of their runs. Decoding never imports this package (tests/test_layers.py).

    distill.py              the target's own greedy answers to a prompt set, and a cache of its hidden states
    _data.py                what every trainer's command line shares: the target, its prompts, their data
    draft.py                `train draft`: distil a 2-layer draft model
    medusa1.py              Medusa-1: the heads on a frozen backbone, from cached hidden states
    medusa2.py              Medusa-2: heads and backbone jointly, without letting the backbone drift
    medusa_cli.py           `train medusa`: self-distil, cache hidden states, train Medusa-1 heads, ship them
    medusa_calibration.py   `train medusa-calibrate`: the heads' accuracies and confidence on held-out text
    medusa_memorisation.py  `train medusa-memorisation`: training-text against held-out accuracy, epoch by epoch
    eagle_ttt.py            EAGLE-3's training-time test: the drafter unrolled on its own outputs, and its loss
    eagle.py                `train eagle`: train an EAGLE-3 drafter on the self-distillation data
    lineage.py              `train lineage`: the chain of runs behind a drafter folder, stitched into one curve

    python -m specdec_lab.train medusa --steps 600 --out data/medusa/smollm2-135m
    python -m specdec_lab.train <subcommand> --help
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["SUBCOMMANDS", "subcommands", "main"]

# subcommand -> the module of this package whose `main(argv) -> int` it runs
SUBCOMMANDS = {
    "draft": "draft",
    "eagle": "eagle",
    "lineage": "lineage",
    "medusa": "medusa_cli",
    "medusa-calibrate": "medusa_calibration",
    "medusa-memorisation": "medusa_memorisation",
}


def subcommands() -> list[str]:
    """Names of the available subcommands."""
    return sorted(SUBCOMMANDS)


def _usage() -> str:
    names = "\n".join(f"    {n}" for n in subcommands())
    return f"usage: python -m specdec_lab.train <subcommand> [options]\n\nsubcommands:\n{names}\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage(), end="")
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"unknown subcommand {name!r}\n\n{_usage()}", end="", file=sys.stderr)
        return 2
    module = importlib.import_module(f"{__name__}.{SUBCOMMANDS[name]}")
    return int(module.main(rest) or 0)
