"""Saving and loading Medusa heads: our format, and the published (FasterDecoding) layout.

Ours — a directory with
    medusa_config.json          MedusaConfig fields + "format" + free-form metadata (e.g. the training manifest)
    medusa_heads.safetensors    w1 (layers, K, H, H), b1 (layers, K, H), and w2 (K, V, H) for the separate variant
The shared variant stores no W2 at all (it is the target's LM head), which is what makes it small.

Published — FasterDecoding/Medusa's `medusa_lm_head` (also read by TensorRT-LLM, TGI, vLLM):
    config.json                      {"medusa_num_heads", "medusa_num_layers", "base_model_name_or_path", ...}
    medusa_lm_head.safetensors       (or the older medusa_lm_head.pt) — the state dict of
                                     ModuleList([Sequential(ResBlock x layers, Linear(H, V, bias=False))] x K):
        "{k}.{l}.linear.weight" (H, H), "{k}.{l}.linear.bias" (H,)   residual block l of head k (0-based)
        "{k}.{layers}.weight" (V, H)                                  that head's W2
Every head carries its own W2 there, so exporting the shared variant writes K copies of the LM head
(K x 57 MB fp16 for SmolLM2). Loading detects heads whose W2 all equal the target's LM head and gives back
the shared variant. Note: FasterDecoding's MedusaModel builds its stack as `[ResBlock(H)] * layers`, one
block object repeated, so its heads with layers > 1 tie their blocks; ours are independent (identical
for the usual layers = 1).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict
from pathlib import Path

import torch

from ..io import atomic_path, write_json
from .heads import MedusaConfig, MedusaHeads

__all__ = ["save_heads", "load_heads", "save_medusa_layout", "load_medusa_layout", "checkpoint_bytes"]

FORMAT = "specdec_lab.medusa/1"
CONFIG_FILE, WEIGHTS_FILE = "medusa_config.json", "medusa_heads.safetensors"
PUBLISHED_CONFIG, PUBLISHED_WEIGHTS, PUBLISHED_PT = "config.json", "medusa_lm_head.safetensors", "medusa_lm_head.pt"


def _lm_head_weight(target) -> torch.Tensor | None:
    """Accept an HF model, a (V, H) tensor or None."""
    if target is None or isinstance(target, torch.Tensor):
        return target
    return target.get_output_embeddings().weight


# ---- our format ---------------------------------------------------------------------------------------
def save_heads(
    heads: MedusaHeads, path: str | os.PathLike, dtype: torch.dtype = torch.float16, metadata: dict | None = None
) -> Path:
    """Write `heads` to the directory `path` in our format (fp16 by default); returns the directory."""
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {"w1": heads.w1, "b1": heads.b1} | ({} if heads.w2 is None else {"w2": heads.w2})
    tensors = {k: v.detach().to("cpu", dtype).contiguous() for k, v in tensors.items()}
    with atomic_path(out / WEIGHTS_FILE) as tmp:
        save_file(tensors, tmp, metadata={"format": FORMAT})
    config = {"format": FORMAT, **asdict(heads.config), "dtype": str(dtype).removeprefix("torch.")}
    config["metadata"] = metadata or {}
    write_json(out / CONFIG_FILE, config)
    return out


def load_heads(path: str | os.PathLike, target=None, dtype: torch.dtype = torch.float32, device=None) -> MedusaHeads:
    """Load heads saved by `save_heads` or in the published layout (detected from the files present).

    target: the HF model (or its (V, H) LM-head weight) the heads run on; the shared variant needs it.
    """
    folder = Path(path)
    if not (folder / CONFIG_FILE).is_file():
        if (folder / PUBLISHED_CONFIG).is_file():
            return load_medusa_layout(folder, target, dtype=dtype, device=device)
        raise FileNotFoundError(f"{folder} has neither {CONFIG_FILE} (ours) nor {PUBLISHED_CONFIG} (published)")
    from safetensors.torch import load_file

    raw = json.loads((folder / CONFIG_FILE).read_text())
    if raw.get("format") != FORMAT:
        raise ValueError(f"{folder / CONFIG_FILE}: unknown format {raw.get('format')!r}, expected {FORMAT!r}")
    config = MedusaConfig(**{k: raw[k] for k in MedusaConfig.__dataclass_fields__ if k in raw})
    weight = _lm_head_weight(target)
    heads = MedusaHeads(config, weight)
    state = load_file(str(folder / WEIGHTS_FILE))
    with torch.no_grad():
        for name, value in state.items():
            getattr(heads, name).copy_(value)
    return heads.to(device=device if device is not None else heads.w1.device, dtype=dtype)


def checkpoint_bytes(path: str | os.PathLike) -> int:
    """Size on disk of a checkpoint directory (all files)."""
    return sum(p.stat().st_size for p in Path(path).iterdir() if p.is_file())


# ---- the published (FasterDecoding) layout -----------------------------------------------------------
def save_medusa_layout(
    heads: MedusaHeads, path: str | os.PathLike, dtype: torch.dtype = torch.float16, base_model: str | None = None
) -> Path:
    """Write `heads` as FasterDecoding's config.json + medusa_lm_head.safetensors (W2 materialised).

    With num_layers > 1 the file holds every block of every head (independent blocks, as ours are), but
    FasterDecoding's own MedusaModel ties repeated blocks (module doc): loading the file there keeps only
    the last block of each head. A warning says so; readers with independent blocks load it exactly.
    """
    from safetensors.torch import save_file

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    c = heads.config
    if c.num_layers > 1:
        warnings.warn(
            f"these heads have {c.num_layers} independent residual blocks each; FasterDecoding's MedusaModel "
            f"builds `[ResBlock] * medusa_num_layers` (one tied block) and would keep only the last block",
            stacklevel=2,
        )
    state = {}
    for k in range(c.num_heads):
        for layer in range(c.num_layers):
            state[f"{k}.{layer}.linear.weight"] = heads.w1[layer, k]
            state[f"{k}.{layer}.linear.bias"] = heads.b1[layer, k]
        state[f"{k}.{c.num_layers}.weight"] = heads.lm_head_weight if c.shared_lm_head else heads.w2[k]
    # clone: the shared variant's W2 is the same tensor K times; safetensors refuses shared storage
    state = {k: v.detach().to("cpu", dtype).clone().contiguous() for k, v in state.items()}
    with atomic_path(out / PUBLISHED_WEIGHTS) as tmp:
        save_file(state, tmp, metadata={"format": "pt"})
    config = {
        "medusa_num_heads": c.num_heads,
        "medusa_num_layers": c.num_layers,
        "base_model_name_or_path": base_model if base_model is not None else c.base_model,
        "hidden_size": c.hidden_size,
        "vocab_size": c.vocab_size,
    }
    write_json(out / PUBLISHED_CONFIG, config, indent=2)
    return out


def _published_state(folder: Path) -> dict[str, torch.Tensor]:
    if (folder / PUBLISHED_WEIGHTS).is_file():
        from safetensors.torch import load_file

        state = load_file(str(folder / PUBLISHED_WEIGHTS))
    elif (folder / PUBLISHED_PT).is_file():
        state = torch.load(folder / PUBLISHED_PT, map_location="cpu", weights_only=True)
    else:
        raise FileNotFoundError(f"{folder} has no {PUBLISHED_WEIGHTS} or {PUBLISHED_PT}")
    # some trainers save the whole MedusaModel's heads under a "medusa_head." prefix
    return {k.removeprefix("medusa_head."): v for k, v in state.items()}


def load_medusa_layout(
    path: str | os.PathLike,
    target=None,
    shared: bool | None = None,
    dtype: torch.dtype = torch.float32,
    device=None,
) -> MedusaHeads:
    """Load FasterDecoding-layout heads. shared=None: the shared variant iff a target is given and every
    head's W2 equals its LM head (to fp16 rounding); True/False force the variant."""
    folder = Path(path)
    raw = json.loads((folder / PUBLISHED_CONFIG).read_text())
    k_heads, layers = int(raw["medusa_num_heads"]), int(raw.get("medusa_num_layers", 1))
    state = _published_state(folder)
    w1 = torch.stack([torch.stack([state[f"{k}.{n}.linear.weight"] for k in range(k_heads)]) for n in range(layers)])
    b1 = torch.stack([torch.stack([state[f"{k}.{n}.linear.bias"] for k in range(k_heads)]) for n in range(layers)])
    w2 = torch.stack([state[f"{k}.{layers}.weight"] for k in range(k_heads)])  # (K, V, H)
    weight = _lm_head_weight(target)
    if shared is None:
        shared = weight is not None and all(
            torch.allclose(w.float(), weight.detach().float().cpu(), rtol=1e-3, atol=1e-3) for w in w2
        )
    config = MedusaConfig(
        hidden_size=w2.shape[2],
        vocab_size=w2.shape[1],
        num_heads=k_heads,
        num_layers=layers,
        shared_lm_head=shared,
        base_model=raw.get("base_model_name_or_path", ""),
    )
    heads = MedusaHeads(config, weight if shared else None)
    with torch.no_grad():
        heads.w1.copy_(w1)
        heads.b1.copy_(b1)
        if not shared:
            heads.w2.copy_(w2)
    return heads.to(device=device if device is not None else heads.w1.device, dtype=dtype)
