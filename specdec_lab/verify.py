"""One target forward over every node of a token tree (tree attention), through public HF inputs only.

Inputs the model receives, for a tree of N nodes and L committed cache entries:
    input_ids      (1, N)           the node tokens
    position_ids   (1, N)           L + depth  (siblings share a position)
    attention_mask (1, 1, N, L+N)   0 where node i may attend, -inf elsewhere:
                                    [ zeros(N, L) | where(tree.mask, 0, -inf) ]
    cache          KVCache          gets the N new entries appended at slots [L, L+N)

transformers 5.x hands a 4D mask to the attention kernel unchanged, so no model class is patched. A
chain (including the root-only tree of autoregressive decoding) needs no custom mask: the model's own
causal mask is then exactly the tree mask, and SDPA takes its faster mask-free path.

We run the decoder body and the LM head separately so that callers can ask for logits of a subset of
nodes (the prefill needs none; the LM head of SmolLM2 is 21% of its weights).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .kv_cache import KVCache
from .tree import Tree

__all__ = ["TreeOutput", "verify_tree", "prefill", "tree_attention_mask", "decoder_and_head"]


@dataclass
class TreeOutput:
    logits: torch.Tensor  # (N, V) target logits at every node: p(. | path to node)
    hidden: torch.Tensor  # (N, H) last hidden state (after the final norm) at every node


def decoder_and_head(model):
    """(decoder body, LM head) of an HF causal LM, via its public accessors."""
    return model.get_decoder(), model.get_output_embeddings()


def tree_attention_mask(tree: Tree, cache_length: int, dtype: torch.dtype) -> torch.Tensor:
    """(1, 1, N, L+N) additive float mask: every node sees the prefix and its own ancestors."""
    n = len(tree)
    allowed = torch.cat(
        [torch.ones(n, cache_length, dtype=torch.bool, device=tree.device), tree.mask], dim=1
    )  # (N, L+N)
    mask = torch.zeros(n, cache_length + n, dtype=dtype, device=tree.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


@torch.inference_mode()
def verify_tree(model, cache: KVCache, tree: Tree, logits_for: torch.Tensor | None = None) -> TreeOutput:
    """Run the target on all tree nodes in one forward; the nodes' K/V are appended to `cache`.

    `logits_for` optionally restricts the LM head to some node indices (others get no logits row).
    """
    body, head = decoder_and_head(model)
    length = cache.length
    device = next(model.parameters()).device
    tokens = tree.tokens.to(device)
    positions = tree.position_ids(length).to(device)[None]  # (1, N)
    mask = None if tree.is_chain else tree_attention_mask(tree, length, model.dtype).to(device)
    out = body(
        input_ids=tokens[None],
        position_ids=positions,
        attention_mask=mask,
        cache=cache,
        use_cache=True,
    )
    hidden = out.last_hidden_state[0]  # (N, H)
    picked = hidden if logits_for is None else hidden[logits_for]
    logits = head(picked).float()  # (N, V) — fp32 for comparisons and sampling whatever the model dtype
    return TreeOutput(logits=logits, hidden=hidden)


@torch.inference_mode()
def prefill(model, cache: KVCache, ids: torch.Tensor) -> torch.Tensor | None:
    """Fill the cache with `ids` (1-D) and commit them; return their last hidden states (n, H)."""
    if len(ids) == 0:
        return None
    body, _ = decoder_and_head(model)
    device = next(model.parameters()).device
    positions = torch.arange(cache.length, cache.length + len(ids), device=device)[None]
    out = body(input_ids=ids.to(device)[None], position_ids=positions, cache=cache, use_cache=True)
    cache.commit()
    return out.last_hidden_state[0]
