"""Device helpers for timing: a clock reading means something only after the device's queued work is done."""

from __future__ import annotations

import torch

__all__ = ["sync"]


def sync(device: torch.device | str | None) -> None:
    """Wait for queued device work so a clock reading means something (CUDA and MPS run asynchronously)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
