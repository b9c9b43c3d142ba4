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

We run the decoder body and the LM head separately: the prefill needs no logits (the LM head of SmolLM2 is
21% of its weights), and the body's output is where hidden states come from.

Features for feature-level drafters (Medusa reads the last hidden state; EAGLE-3 fuses a low, a middle and
a high layer) come out of the same forward: `feature_layers` selects entries of transformers' own
`output_hidden_states=True` tuple, whose index convention we keep:

    layer 0        the token embeddings (the first decoder layer's input)
    layer l        the output of decoder layer l (1-based), the residual stream before the final norm
    layer L        (L = num_hidden_layers) the last layer, *after* the final norm: HF replaces
                   hidden_states[-1] with last_hidden_state, so it equals `TreeOutput.hidden`

With no layers asked for (the default) the model is not asked to record anything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .kv_cache import KVCache
from .tree import Tree

__all__ = [
    "TreeOutput",
    "PrefillOutput",
    "verify_tree",
    "prefill",
    "tree_attention_mask",
    "decoder_and_head",
    "check_feature_layers",
]


@dataclass
class TreeOutput:
    logits: torch.Tensor  # (N, V) target logits at every node: p(. | path to node)
    hidden: torch.Tensor  # (N, H) last hidden state (after the final norm) at every node
    features: torch.Tensor | None = None  # (N, F, H) hidden states of the F requested layers; None if none


@dataclass
class PrefillOutput:
    hidden: torch.Tensor  # (n, H) last hidden state (after the final norm) of every prefilled token
    features: torch.Tensor | None = None  # (n, F, H) hidden states of the F requested layers; None if none


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


def check_feature_layers(model, layers: Sequence[int] | Callable[[object], Sequence[int]]) -> tuple[int, ...]:
    """`layers` as a tuple, each checked to be a hidden-states index 0..L of `model` (see module docstring).

    `layers` may be a callable model -> indices, for a proposer whose layers depend on the target (EAGLE-3
    reads the inputs of layers (2, L//2, L-3)); it is called once, before the prefill.
    """
    if callable(layers):
        layers = layers(model)
    n_layers = model.config.get_text_config(decoder=True).num_hidden_layers
    layers = tuple(layers)
    bad = [layer for layer in layers if not (isinstance(layer, int) and 0 <= layer <= n_layers)]
    if bad:
        raise ValueError(
            f"feature layers {bad} are not hidden-state indices of this {n_layers}-layer model: use 0..{n_layers} "
            f"(0 = embeddings, l = output of decoder layer l, {n_layers} = last, after the final norm)"
        )
    return layers


def _body_forward(model, cache: KVCache, tokens, positions, mask, feature_layers: Sequence[int]):
    """-> (hidden (n, H), features (n, F, H) or None): one decoder-body forward appending to `cache`."""
    body, _ = decoder_and_head(model)
    out = body(
        input_ids=tokens[None],
        position_ids=positions,
        attention_mask=mask,
        cache=cache,
        use_cache=True,
        output_hidden_states=bool(feature_layers),  # recorded only when someone asked for layers
    )
    hidden = out.last_hidden_state[0]  # (n, H)
    if not feature_layers:
        return hidden, None
    features = torch.stack([out.hidden_states[layer][0] for layer in feature_layers], dim=1)  # (n, F, H)
    return hidden, features


@torch.inference_mode()
def verify_tree(model, cache: KVCache, tree: Tree, feature_layers: Sequence[int] = ()) -> TreeOutput:
    """Run the target on all tree nodes in one forward; the nodes' K/V are appended to `cache`.

    feature_layers: hidden-state indices (module docstring) whose states to return for every node as
    `TreeOutput.features` (N, F, H), in the order given.
    """
    _, head = decoder_and_head(model)
    length = cache.length
    device = next(model.parameters()).device
    tokens = tree.tokens.to(device)
    positions = tree.position_ids(length).to(device)[None]  # (1, N)
    mask = None if tree.is_chain else tree_attention_mask(tree, length, model.dtype).to(device)
    hidden, features = _body_forward(model, cache, tokens, positions, mask, feature_layers)
    logits = head(hidden).float()  # (N, V) — fp32 for comparisons and sampling whatever the model dtype
    return TreeOutput(logits=logits, hidden=hidden, features=features)


@torch.inference_mode()
def prefill(model, cache: KVCache, ids: torch.Tensor, feature_layers: Sequence[int] = ()) -> PrefillOutput:
    """Fill the cache with `ids` (1-D) and commit them; return their hidden states (and requested layers).

    No ids (a one-token prompt has nothing to prefill) gives empty (0, H) and (0, F, H) tensors.
    """
    device = next(model.parameters()).device
    if len(ids) == 0:
        width = model.get_input_embeddings().embedding_dim
        hidden = torch.zeros(0, width, device=device, dtype=model.dtype)  # (0, H)
        features = hidden[:, None].expand(0, len(feature_layers), width) if feature_layers else None
        return PrefillOutput(hidden=hidden, features=features)
    positions = torch.arange(cache.length, cache.length + len(ids), device=device)[None]  # (1, n)
    hidden, features = _body_forward(model, cache, ids.to(device), positions, None, feature_layers)
    cache.commit()
    return PrefillOutput(hidden=hidden, features=features)
