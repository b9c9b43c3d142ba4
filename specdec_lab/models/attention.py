"""Grouped-query attention over the KV cache without copying it: an SDPA attention function for transformers.

SmolLM2 has 9 query heads sharing 3 K/V heads (GQA). transformers' `sdpa` attention passes the K/V heads to
torch's kernel as they are (`enable_gqa=True`) only when there is no attention mask; with a mask — every
forward of two or more tokens over a cache, i.e. every verification — it first expands them with
`repeat_kv`, which copies the whole cache, per layer, per forward:

    repeat_kv:  (1, 3, L, 64) -> (1, 9, L, 64)     two copies of 3·L·64 floats x 3, x 30 layers

(a CUDA restriction: there, masked GQA falls back to the math kernel). On CPU torch's flash kernel takes
GQA and a float mask together and computes the same numbers bit for bit (query head h reads K/V head
h // groups either way), so `gqa_sdpa_attention` skips the copy. It also converts a boolean mask to the
additive float mask once per forward instead of once per layer (torch's SDPA converts a boolean mask on
every call). Everything else — and every non-CPU device — is transformers' own `sdpa_attention_forward`.

The function is registered with transformers' public `AttentionInterface` under the name `ATTENTION`;
`use_gqa_attention(model)` selects it through `model.set_attn_implementation` (no class is patched).
What it saves is measured in notebooks 00 and 12 (results: data/bench/README.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

__all__ = ["ATTENTION", "gqa_sdpa_attention", "use_gqa_attention", "match_attention", "attention_kind"]

ATTENTION = "sdpa_gqa"


class _FloatMask:
    """The additive float version of the last boolean mask seen (one forward passes one mask to all layers)."""

    source: torch.Tensor | None = None
    converted: torch.Tensor | None = None

    @classmethod
    def of(cls, mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        if torch.compiler.is_compiling():  # traced (hf_generate_compiled): no state on the class, or every new
            # mask object would fail a guard and recompile the graph; inductor fuses the conversion anyway
            return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, torch.finfo(dtype).min)
        if mask is not cls.source or cls.converted is None or cls.converted.dtype != dtype:
            converted = torch.zeros(mask.shape, dtype=dtype, device=mask.device)
            cls.converted = converted.masked_fill_(~mask, torch.finfo(dtype).min)
            cls.source = mask
        return cls.converted


def gqa_sdpa_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # (B, H_q, n, D)
    key: torch.Tensor,  # (B, H_kv, L, D)
    value: torch.Tensor,  # (B, H_kv, L, D)
    attention_mask: torch.Tensor | None,  # (B or 1, 1, n, L) bool or additive float, or None
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, with masked GQA done inside the kernel on CPU (no repeat_kv copy)."""
    groups = getattr(module, "num_key_value_groups", 1)
    special = kwargs.get("position_bias") is not None or kwargs.get("softcap") is not None
    if query.device.type != "cpu" or groups == 1 or attention_mask is None or special:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    if attention_mask.dtype == torch.bool:
        attention_mask = _FloatMask.of(attention_mask, query.dtype)
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )  # (B, H_q, n, D)
    return out.transpose(1, 2).contiguous(), None  # (B, n, H_q, D), as transformers expects


AttentionInterface.register(ATTENTION, gqa_sdpa_attention)
AttentionMaskInterface.register(ATTENTION, sdpa_mask)  # the masks `sdpa` gets


def attention_kind(model) -> str:
    """The model's attention implementation name (e.g. "sdpa", "eager", ATTENTION)."""
    return str(model.config._attn_implementation)


def use_gqa_attention(model):
    """Switch a model that uses transformers' `sdpa` attention to `gqa_sdpa_attention`; others are left alone.

    Returns the model. Numerically identical to `sdpa`; only the K/V copies are gone.
    """
    if attention_kind(model) == "sdpa":
        model.set_attn_implementation(ATTENTION)
    return model


def match_attention(model, like):
    """Give `model` (a draft, an assistant) the attention implementation `like` (its target) runs."""
    if attention_kind(like) == ATTENTION:
        use_gqa_attention(model)
    return model
