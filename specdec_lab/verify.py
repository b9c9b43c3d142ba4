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

Sliding windows. A 4D mask reaches every layer as given, window or not, so the tree mask carries the window
itself: node i sees key k only if pos(i) − pos(k) < W (transformers' `sliding_window_overlay`, on positions,
which is what decoding the node's path alone would see). A model with one window for all its layers (Mistral,
Phi-3) gets that windowed mask; a model that mixes local and global layers (Gemma 2/3, Qwen2/3 with
`use_sliding_window`) declares `config.layer_types` and takes a dict {layer type: mask}, one mask per kind
(`tree_attention_masks`). Final-logit soft-capping (Gemma 2/3: c·tanh(z/c)) lives in the *ForCausalLM
forward, not in the head we call, so `lm_logits` applies it.

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

from .kv_cache import KVCache, RowsCache
from .trees.tree import Tree

__all__ = [
    "TreeOutput",
    "PrefillOutput",
    "verify_tree",
    "verify_rows",
    "rows_attention_mask",
    "prefill",
    "tree_attention_mask",
    "tree_attention_masks",
    "lm_logits",
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


def tree_attention_mask(
    tree: Tree, cache_length: int, dtype: torch.dtype, sliding_window: int | None = None
) -> torch.Tensor:
    """(1, 1, N, L+N) additive float mask: every node sees the prefix and its own ancestors.

    sliding_window W: a node also sees only keys less than W positions back (pos(i) − pos(k) < W), as a
    window layer decoding the node's own path would.
    """
    n = len(tree)
    allowed = torch.cat(
        [torch.ones(n, cache_length, dtype=torch.bool, device=tree.device), tree.mask], dim=1
    )  # (N, L+N)
    if sliding_window is not None:
        q_pos = tree.position_ids(cache_length).to(tree.device)  # (N,) L + depth
        k_pos = torch.cat([torch.arange(cache_length, device=tree.device), q_pos])  # (L+N,) slot j holds position j
        allowed &= (q_pos[:, None] - k_pos[None, :]) < sliding_window
    mask = torch.zeros(n, cache_length + n, dtype=dtype, device=tree.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[None, None]


def tree_attention_masks(model, tree: Tree, cache_length: int) -> torch.Tensor | dict[str, torch.Tensor]:
    """The mask argument a verify forward passes `model`: one (1, 1, N, L+N) mask, or one per layer type.

    Layers of one kind (no window, or one window everywhere: Llama, Mistral, Phi-3, GPT-2) share one mask;
    a model that declares `layer_types` with window layers gets {"full_attention": …, "sliding_attention": …}
    (its forward takes that dict as its own mask mapping). Anything else raises a ValueError naming it.
    """
    config = model.config.get_text_config(decoder=True)
    arch = type(model).__name__
    if getattr(config, "use_bidirectional_attention", False):
        raise ValueError(f"{arch} is configured with bidirectional attention: not a causal LM, no tree to verify")
    window = getattr(config, "sliding_window", None)
    kinds = set(getattr(config, "layer_types", None) or ())
    unknown = kinds - {"full_attention", "sliding_attention"}
    if unknown:
        raise ValueError(f"{arch} has attention layers of type {sorted(unknown)}: tree masks are built for full "
                         "and sliding-window attention only")  # fmt: skip
    dtype = model.dtype
    if "sliding_attention" in kinds:
        if window is None:
            raise ValueError(f"{arch} declares sliding-window layers but no config.sliding_window")
        return {kind: tree_attention_mask(tree, cache_length, dtype, window if kind == "sliding_attention" else None)
                for kind in kinds}  # fmt: skip
    if kinds == {"full_attention"}:
        window = None  # the layer types say no layer windows (Qwen2/3 keep sliding_window only when used)
    return tree_attention_mask(tree, cache_length, dtype, window)


def lm_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """(..., H) last hidden states -> (..., V) fp32 logits, as the model's own forward makes them: the LM head,
    then final-logit soft-capping c·tanh(z/c) where the config has it (Gemma 2/3)."""
    _, head = decoder_and_head(model)
    logits = head(hidden).float()
    cap = getattr(model.config.get_text_config(decoder=True), "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


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
def verify_tree(model, cache: KVCache, tree: Tree, feature_layers: Sequence[int] = (), step=None) -> TreeOutput:
    """Run the target on all tree nodes in one forward; the nodes' K/V are appended to `cache`.

    feature_layers: hidden-state indices (module docstring) whose states to return for every node as
    `TreeOutput.features` (N, F, H), in the order given.
    step: a `CompiledStep` of `model` runs the body instead (the tree padded to a bucket, `compiled.py`).
    """
    length = cache.length
    device = next(model.parameters()).device
    tokens = tree.tokens.to(device)
    positions = tree.position_ids(length).to(device)[None]  # (1, N)
    if step is not None and not step.failed:
        try:
            hidden, features = step.forward(cache, tokens, positions[0], tree.mask, feature_layers)
            return TreeOutput(logits=lm_logits(model, hidden), hidden=hidden, features=features)
        except RuntimeError:  # CompileUnavailable: it warned why once and set `failed`; eager serves from now on
            if not step.failed:
                raise
    mask = None
    if not tree.is_chain:
        mask = tree_attention_masks(model, tree, length)
        mask = {k: m.to(device) for k, m in mask.items()} if isinstance(mask, dict) else mask.to(device)
    hidden, features = _body_forward(model, cache, tokens, positions, mask, feature_layers)
    logits = lm_logits(model, hidden)  # (N, V) — fp32 for comparisons and sampling whatever the model dtype
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


# ---- rows: one forward over the trees of B sequences ------------------------------------------------------------
def rows_attention_mask(trees: Sequence[Tree | None], lengths: Sequence[int], dtype: torch.dtype, device=None):
    """-> (tokens (B, N), positions (B, N), mask (B, 1, N, S)) for one forward over B rows' trees, N = the largest
    tree, S = max L_b + N slots: row b's node i sees the row's committed slots [0, L_b) and its ancestors at
    slots L_b + j (`tree.mask`), at position L_b + depth. A row's padding nodes (its tree is smaller, or it has
    none: None) sit at position L_b and see only their own slot, so every softmax has a term; their K/V land past
    the row's committed length and are dropped (`keep`, `rollback`)."""
    n = max((len(t) for t in trees if t is not None), default=1)
    span = max(lengths) + n
    b = len(trees)
    tokens = torch.zeros(b, n, dtype=torch.long)
    positions = torch.tensor(lengths, dtype=torch.long)[:, None].repeat(1, n)  # (B, N)
    allowed = torch.zeros(b, n, span, dtype=torch.bool)  # (B, N, S)
    for row, (tree, length) in enumerate(zip(trees, lengths, strict=True)):
        m = 0 if tree is None else len(tree)
        if m:
            tokens[row, :m] = tree.tokens.cpu()
            positions[row, :m] = tree.position_ids(length).cpu()
            allowed[row, :m, :length] = True
            allowed[row, :m, length : length + m] = tree.mask.cpu()
        pad = torch.arange(m, n)
        allowed[row, pad, length + pad] = True  # a padding node sees its own slot only
    mask = torch.zeros(b, 1, n, span, dtype=dtype).masked_fill_(~allowed[:, None], torch.finfo(dtype).min)
    return tokens.to(device), positions.to(device), mask.to(device)


@torch.inference_mode()
def verify_rows(
    model, cache: RowsCache, trees: Sequence[Tree | None], feature_layers: Sequence[int] = (), logits: bool = True
) -> list[TreeOutput | None]:
    """`verify_tree` for B rows in one target forward: row b's tree at its own cache length (ragged rows), each
    row's nodes appended to its own cache (`cache.row(b)`, then kept per row with `keep(path)`); a row without a
    tree (None: finished, or waiting for a prompt) takes part as padding only and is left as it was.
    -> one TreeOutput per row (None where it had no tree). Full-attention models only (no sliding windows).
    logits=False skips the LM head (a prefill needs only the hidden states): the outputs' logits are None.
    One row is `verify_tree` on that row's cache (a chain then needs no mask: SDPA's faster path)."""
    config = model.config.get_text_config(decoder=True)
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        raise ValueError(f"{type(model).__name__} has sliding-window layers: verify rows one at a time (batch 1)")
    if len(trees) == 1 and trees[0] is not None and logits:
        return [verify_tree(model, cache.row(0), trees[0], feature_layers)]
    device = next(model.parameters()).device
    lengths = cache.lengths
    tokens, positions, mask = rows_attention_mask(trees, lengths, model.dtype, device)
    body, _ = decoder_and_head(model)
    out = body(input_ids=tokens, position_ids=positions, attention_mask=mask, cache=cache.batch(), use_cache=True,
               output_hidden_states=bool(feature_layers))  # fmt: skip
    sizes = [0 if t is None else len(t) for t in trees]
    hidden = torch.cat([out.last_hidden_state[b, :m] for b, m in enumerate(sizes)])  # (Σ N_b, H): real nodes only
    heads = lm_logits(model, hidden).split(sizes) if logits else [None] * len(sizes)  # real nodes only
    outputs: list[TreeOutput | None] = []
    for b, m in enumerate(sizes):
        if m == 0:
            cache.row(b).rollback()  # its padding entries go
            outputs.append(None)
            continue
        features = None
        if feature_layers:
            features = torch.stack([out.hidden_states[layer][b, :m] for layer in feature_layers], dim=1)  # (N, F, H)
        outputs.append(TreeOutput(logits=heads[b], hidden=out.last_hidden_state[b, :m], features=features))
    return outputs
