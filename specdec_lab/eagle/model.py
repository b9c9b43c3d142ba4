"""The EAGLE drafter: one decoder layer that drafts at the feature level from the target's own hidden states.

EAGLE-3 (Li et al. 2025; SafeAILab/EAGLE `eagle/model/cnets.py`, served by vLLM and SGLang as
`LlamaForCausalLMEagle3`). Notation: x_t the tokens, f_t the target's features at position t (read from
the verify forward the loop runs anyway), e(x) the target's token embedding (frozen, shared, never copied).

    g_t  = fc([f_t^low ; f_t^mid ; f_t^high])                  (3H -> H)  hidden states at the INPUTS of the
                                                                          target's layers (2, L//2, L-3)
    a_t  = [input_layernorm(e(x_{t+1})) ; hidden_norm(g_t)]     (2H)       q/k/v take 2H inputs
    h_t  = g_t + attn(a_t) ;  h_t <- h_t + mlp(post_attention_layernorm(h_t))
    p(x_{t+2}) = softmax( scatter_{d2t}( lm_head(norm(h_t)) ) )         drafting vocabulary, -inf elsewhere

Drafter position t pairs the target's features at t with the NEXT token x_{t+1} and predicts x_{t+2}. Its
pre-norm output h_t stands in for g_{t+1} at the next position, so a chain drafts on:
(h_t, d_1) -> d_2, (h_{t+1}, d_2) -> d_3, ... (`fc` applies only to the target's 3H features). Its rotary
position is t, its KV cache slot t.

EAGLE-1/2 (variant "eagle1"; `cnets1.py`): the feature is the target's last hidden state after the final norm
(the LM head's input, hidden-state index L), fused with the embedding by `fc` (2H -> H, with bias) over
[e(x_{t+1}) ; f_t]; the layer has no norm before attention (cnets1's layer 0). Departure: EAGLE-1 scores the
draft with the target's own full LM head; here both variants use EAGLE-3's `norm` + reduced `lm_head`, so a
comparison isolates what the drafter reads, and its drafting cost stays small.

Hidden-state indices follow transformers' `output_hidden_states` (`verify` module docstring): index i is the
input of layer i (0 = embeddings), L the output after the final norm. The engines' `eagle_aux_hidden_state_
layer_ids` disagree by one: vLLM reads id i as the input of layer i, SGLang (and SpecForge, llama.cpp's
converter) as the output of layer i. Their defaults agree: the inputs of layers (2, L//2, L-3). They read the
key from different places — vLLM's `_get_eagle3_aux_layers_from_config` (vllm/v1/worker/gpu_model_runner.py)
the top level first, SGLang's eagle worker `eagle_config` only — so `save` writes both, each in its reader's
convention: top level = our indices (vLLM), `eagle_config` = our indices − 1 (SGLang); and our own
unambiguous `feature_layers`.

The drafting vocabulary: `lm_head` has M rows; draft row j is target token j + d2t[j] (d2t: offsets, vLLM's
`draft_id_to_target_id`, SGLang's `hot_token_id` = d2t + arange); t2d is the (V,) bool mask of those target
tokens. Ids are kept sorted, so the columns of `target_logits[..., t2d]` are the draft rows in order (what
EAGLE-3's training restricts the target's distribution with).

Checkpoint: `model.safetensors` with `fc.weight`, `midlayer.{hidden_norm,input_layernorm,
post_attention_layernorm}.weight`, `midlayer.self_attn.{q,k,v,o}_proj.weight`, `midlayer.mlp.{gate,up,
down}_proj.weight`, `norm.weight`, `lm_head.weight`, `d2t`, `t2d` (eagle1: `fc.bias`, `layers.0.*`), and
`config.json`: the target's Llama config with num_hidden_layers 1, `draft_vocab_size`, `architectures`,
`tie_word_embeddings: false` (SGLang ties lm_head to the embeddings otherwise), `eagle_config`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding

from ..io import FILE_MODE, atomic_dir
from ..kv_cache import KVCache

__all__ = [
    "VARIANTS",
    "ARCHITECTURES",
    "EagleConfig",
    "EagleDrafter",
    "eagle3_layers",
    "random_drafter",
    "save_drafter",
    "load_drafter",
]

VARIANTS = ("eagle3", "eagle1")
ARCHITECTURES = {"eagle3": "LlamaForCausalLMEagle3", "eagle1": "LlamaForCausalLMEagle"}  # SGLang's class names
WEIGHTS, CONFIG = "model.safetensors", "config.json"
# what the drafter takes from the target's config: the layer's shape, its rope and norm, the vocabulary, the depth
TARGET_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
               "hidden_act", "rms_norm_eps", "rope_parameters", "rope_theta", "rope_scaling",
               "max_position_embeddings", "vocab_size", "num_hidden_layers")  # fmt: skip

LAYER_KEYS = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size")  # required


def eagle3_layers(num_layers: int) -> tuple[int, ...]:
    """EAGLE-3's three feature indices for an L-layer target: the inputs of layers (2, L//2, L-3).

    Where those are not three increasing inputs of layers (L < 7), three spread evenly over the inputs
    1..L-1 (0..L-1 below 4 layers; repeated when there are fewer than three).
    """
    low, mid, high = 2, num_layers // 2, num_layers - 3
    if 0 < low < mid < high < num_layers:
        return (low, mid, high)
    first = 1 if num_layers >= 4 else 0
    last = max(num_layers - 1, 0)
    return tuple(int(math.floor(first + (last - first) * j / 2 + 0.5)) for j in range(3))


def default_layers(variant: str, num_layers: int) -> tuple[int, ...]:
    return eagle3_layers(num_layers) if variant == "eagle3" else (num_layers,)


@dataclass
class EagleConfig:
    """What a drafter is: its variant, the target features it reads, its vocabulary size, the target's shape.

    target: the target's (text) config's `TARGET_KEYS` — the decoder layer takes its hidden size, heads, KV
    heads, head dim, MLP width, rope and norm eps from it (its num_hidden_layers is the TARGET's).
    """

    variant: str = "eagle3"
    feature_layers: tuple[int, ...] = ()  # () = the variant's default for the target's depth
    draft_vocab_size: int = 0  # rows of lm_head (M); 0 = the target's whole vocabulary
    target: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        self.feature_layers = tuple(int(i) for i in self.feature_layers) or default_layers(
            self.variant, self.num_target_layers
        )
        if self.variant == "eagle1" and len(self.feature_layers) != 1:
            raise ValueError(f"eagle1 reads one feature layer, got {self.feature_layers}")
        bad = [i for i in self.feature_layers if not 0 <= i <= self.num_target_layers]
        if bad:
            raise ValueError(f"feature layers {bad} are not hidden-state indices 0..{self.num_target_layers}")
        if not self.draft_vocab_size:
            self.draft_vocab_size = self.vocab_size
        self.target = {k: self.target[k] for k in TARGET_KEYS if self.target.get(k) is not None}

    @classmethod
    def for_target(cls, model, variant: str = "eagle3", draft_vocab_size: int = 0, feature_layers=()) -> EagleConfig:
        text = model.config.get_text_config(decoder=True)
        target = text.to_dict()
        missing = [k for k in LAYER_KEYS if target.get(k) is None]
        if missing:  # GPT-2 names them n_embd, n_head, n_inner, n_layer
            raise ValueError(f"EAGLE's drafter is a Llama decoder layer built from the target's config, which for "
                             f"{type(model).__name__} has no {', '.join(missing)}: EAGLE does not support this "
                             "architecture (it needs a Llama-style config: Llama, Qwen, Mistral, Gemma, Phi-3, "
                             "GPT-NeoX)")  # fmt: skip
        return cls(variant, tuple(feature_layers), draft_vocab_size, target)

    @property
    def num_target_layers(self) -> int:
        return int(self.target["num_hidden_layers"])

    @property
    def hidden_size(self) -> int:
        return int(self.target["hidden_size"])

    @property
    def vocab_size(self) -> int:
        return int(self.target["vocab_size"])

    def layer_config(self, attn_implementation: str | None = None) -> LlamaConfig:
        """A one-layer LlamaConfig of the target's shape (what the attention, MLP and rope are built from)."""
        config = LlamaConfig(**{**self.target, "num_hidden_layers": 1, "attention_bias": False, "mlp_bias": False})
        config._attn_implementation = attn_implementation or "sdpa"
        return config

    def to_json(self) -> dict:
        """config.json in the EAGLE-3 checkpoint layout (module docstring), plus our own `specdec_lab` block."""
        eagle = {"use_aux_hidden_state": self.variant == "eagle3"}
        engines = {}
        if self.variant == "eagle3":
            # SGLang reads eagle_config (id j = the output of layer j = our index j + 1); vLLM the top level first
            # (id i = the input of layer i = our index i): each gets the layers in its own convention
            eagle["eagle_aux_hidden_state_layer_ids"] = [i - 1 for i in self.feature_layers]
            engines["eagle_aux_hidden_state_layer_ids"] = list(self.feature_layers)
        return {
            **self.target,
            "architectures": [ARCHITECTURES[self.variant]],
            "model_type": "llama",
            "num_hidden_layers": 1,
            "vocab_size": self.vocab_size,
            "draft_vocab_size": self.draft_vocab_size,
            "tie_word_embeddings": False,
            "eagle_config": eagle,
            **engines,
            "specdec_lab": {
                "variant": self.variant,
                "feature_layers": list(self.feature_layers),
                "target_num_hidden_layers": self.num_target_layers,
            },  # fmt: skip
        }

    @classmethod
    def from_json(cls, record: dict, target_num_layers: int | None = None) -> EagleConfig:
        """Read our config.json, or another EAGLE checkpoint's (layers then from the top level: vLLM's convention,
        else from `eagle_config`, +1: SGLang's, else the default for `target_num_layers`)."""
        ours = record.get("specdec_lab", {})
        arch = (record.get("architectures") or [ARCHITECTURES["eagle3"]])[0]
        variant = ours.get("variant", "eagle1" if arch == ARCHITECTURES["eagle1"] else "eagle3")
        layers = ours.get("feature_layers") or record.get("eagle_aux_hidden_state_layer_ids") or [
            i + 1 for i in (record.get("eagle_config") or {}).get("eagle_aux_hidden_state_layer_ids", [])]  # fmt: skip
        num_layers = ours.get("target_num_hidden_layers", target_num_layers)
        if num_layers is None:
            raise ValueError("the checkpoint does not record its target's depth: pass target_num_layers")
        target = {k: record[k] for k in TARGET_KEYS if k in record} | {"num_hidden_layers": int(num_layers)}
        return cls(variant, tuple(layers), int(record.get("draft_vocab_size") or 0), target)


class EagleLayer(nn.Module):
    """The drafter's one decoder layer. eagle3: q/k/v over [input_layernorm(e) ; hidden_norm(g)] (2H),
    residual g; eagle1: over x = fc([e ; f]) itself (H), residual x. Then the usual MLP block."""

    def __init__(self, config: LlamaConfig, fused: bool):
        super().__init__()
        h = config.hidden_size
        self.fused = fused
        self.self_attn = LlamaAttention(config, layer_idx=0)  # transformers' attention: the target's kernel
        if fused:
            attn = self.self_attn
            attn.q_proj = nn.Linear(2 * h, attn.q_proj.out_features, bias=False)
            attn.k_proj = nn.Linear(2 * h, attn.k_proj.out_features, bias=False)
            attn.v_proj = nn.Linear(2 * h, attn.v_proj.out_features, bias=False)
            self.hidden_norm = LlamaRMSNorm(h, eps=config.rms_norm_eps)
            self.input_layernorm = LlamaRMSNorm(h, eps=config.rms_norm_eps)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, emb, hidden, rope, mask, cache) -> torch.Tensor:
        """emb, hidden: (1, n, H); rope: (cos, sin); mask: (1, 1, n, L+n) additive or None -> (1, n, H)."""
        residual = hidden
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(hidden)], dim=-1) if self.fused else hidden
        attn, _ = self.self_attn(x, position_embeddings=rope, attention_mask=mask, cache=cache)
        h = residual + attn
        return h + self.mlp(self.post_attention_layernorm(h))


class EagleDrafter(nn.Module):
    """An EAGLE drafter for one target (module docstring). `embedding` (V, H) is the target's token embedding:
    used, never copied, saved or trained.

    fuse(features)                       (n, F, H) target features -> (n, H) the layer's hidden input
    forward(hidden, ids, positions, ...) (n, H), (n,), (n,) -> (n, H) pre-norm outputs, K/V appended to `cache`
    logits(h) / target_logits(h)         (..., M) drafting-vocabulary / (..., V) with -inf outside it
    """

    def __init__(self, config: EagleConfig, embedding: torch.Tensor, attn_implementation: str | None = None):
        super().__init__()
        self.config = config
        layer = config.layer_config(attn_implementation)
        h, m, v = config.hidden_size, config.draft_vocab_size, config.vocab_size
        if tuple(embedding.shape) != (v, h):
            raise ValueError(f"the target's embedding is {tuple(embedding.shape)}, the drafter expects ({v}, {h})")
        self.embedding = embedding.detach()  # (V, H) a plain tensor attribute: not a parameter, not saved
        self.eagle3 = config.variant == "eagle3"
        if self.eagle3:
            self.fc = nn.Linear(len(config.feature_layers) * h, h, bias=False)
            self.midlayer = EagleLayer(layer, fused=True)
        else:
            self.fc = nn.Linear(2 * h, h, bias=True)
            self.layers = nn.ModuleList([EagleLayer(layer, fused=False)])  # cnets1's names: layers.0.*
        self.norm = LlamaRMSNorm(h, eps=layer.rms_norm_eps)
        self.lm_head = nn.Linear(h, m, bias=False)
        self.rotary = LlamaRotaryEmbedding(layer)  # inv_freq is a non-persistent buffer: not in the checkpoint
        self.register_buffer("d2t", torch.zeros(m, dtype=torch.long))  # (M,) target id = j + d2t[j]
        self.register_buffer("t2d", torch.zeros(v, dtype=torch.bool))  # (V,) in the drafting vocabulary
        self._targets: torch.Tensor | None = None
        self.step_seconds: float | None = None  # one draft step on this machine, measured by the first proposer
        self.heldout_accuracy: tuple[float, ...] = ()  # top-1 = target's per draft position, from the manifest

    @property
    def layer(self) -> EagleLayer:
        return self.midlayer if self.eagle3 else self.layers[0]

    # ---- the drafting vocabulary ----------------------------------------------------------------------
    @torch.no_grad()
    def set_vocab(self, ids) -> None:
        """Draft row j <- the j-th smallest of `ids` (M distinct target ids): d2t, t2d."""
        ids = torch.as_tensor(ids, dtype=torch.long).unique()  # sorted
        if len(ids) != self.config.draft_vocab_size or int(ids[0]) < 0 or int(ids[-1]) >= self.config.vocab_size:
            raise ValueError(f"need {self.config.draft_vocab_size} distinct ids in [0, {self.config.vocab_size}), "
                             f"got {len(ids)}")  # fmt: skip
        self.d2t.copy_(ids.to(self.d2t.device) - torch.arange(len(ids), device=self.d2t.device))
        self.t2d.zero_()
        self.t2d[ids.to(self.t2d.device)] = True
        self._targets = None

    @property
    def target_ids(self) -> torch.Tensor:
        """(M,) the target token of each draft row: arange(M) + d2t."""
        if self._targets is None or self._targets.device != self.d2t.device:
            self._targets = torch.arange(len(self.d2t), device=self.d2t.device) + self.d2t
        return self._targets

    def to_target(self, rows: torch.Tensor) -> torch.Tensor:
        return rows + self.d2t[rows]

    # ---- forward --------------------------------------------------------------------------------------
    def fuse(self, features: torch.Tensor) -> torch.Tensor:
        """(n, F, H) target features -> (n, H): eagle3 fc over their concatenation (low; mid; high); eagle1
        the one feature itself (its fc also takes the embedding, in `forward`)."""
        n, f, h = features.shape
        return self.fc(features.reshape(n, f * h)) if self.eagle3 else features[:, 0]

    def forward(self, hidden: torch.Tensor, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache,
                allowed: torch.Tensor | None = None) -> torch.Tensor:  # fmt: skip
        """One drafter forward over n positions; their K/V are appended to `cache` (one layer).

        hidden (n, H): `fuse`d target features or the drafter's own earlier outputs; ids (n,): the token AFTER
        each position; positions (n,): rotary positions (= cache slots on a chain); allowed (n, L+n) bool:
        which cached and new entries each position sees (None: all of the cache and causal among the new —
        given explicitly for n > 1, as a causal kernel over a non-empty cache would align it wrongly).
        """
        n = len(ids)
        emb = F.embedding(ids, self.embedding).to(hidden.dtype)  # (n, H)
        if not self.eagle3:
            hidden = self.fc(torch.cat([emb, hidden], dim=-1))  # (n, H)
        if allowed is None and n > 1:
            start = cache.get_seq_length()
            allowed = torch.ones(n, start + n, dtype=torch.bool, device=hidden.device)
            allowed[:, start:] = torch.ones(n, n, dtype=torch.bool, device=hidden.device).tril()
        mask = None
        if allowed is not None:
            mask = torch.zeros(allowed.shape, dtype=hidden.dtype, device=hidden.device)
            mask = mask.masked_fill_(~allowed.to(hidden.device), torch.finfo(hidden.dtype).min)[None, None]
        rope = self.rotary(hidden[None], positions.to(hidden.device)[None])  # (cos, sin), each (1, n, D)
        return self.layer(emb[None], hidden[None], rope, mask, cache)[0]  # (n, H)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., M) logits over the drafting vocabulary (row j = target token j + d2t[j])."""
        return self.lm_head(self.norm(h))

    def target_logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., V): the drafting vocabulary's logits in their target columns, -inf elsewhere, so
        a softmax (after any warping) puts no mass outside the drafting vocabulary."""
        reduced = self.logits(h).float()  # (..., M)
        full = reduced.new_full((*reduced.shape[:-1], self.config.vocab_size), float("-inf"))
        full[..., self.target_ids] = reduced
        return full

    def new_cache(self, capacity: int = 256) -> KVCache:
        return KVCache(1, capacity=capacity)


# ---- building, saving, loading --------------------------------------------------------------------------
def _attn(target) -> str:
    return str(target.config._attn_implementation)


def random_drafter(target, variant: str = "eagle3", vocab=None, seed: int = 0, feature_layers=()) -> EagleDrafter:
    """An untrained drafter for `target` (tests; the starting point of training): torch's default init under
    `seed`, norms at 1. vocab: (M,) target ids; None = the shipped drafting vocabulary built for the target's
    head (`vocab.vocab_for`), else every token."""
    from ..models.vocab import vocab_for

    if vocab is None:
        vocab = vocab_for(target)
    weight = target.get_input_embeddings().weight
    ids = torch.arange(weight.shape[0]) if vocab is None else torch.as_tensor(vocab).unique().cpu()
    config = EagleConfig.for_target(target, variant, len(ids), feature_layers)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        drafter = EagleDrafter(config, weight, _attn(target))
    drafter.set_vocab(ids)
    return drafter.to(device=weight.device, dtype=weight.dtype).eval().requires_grad_(False)


def save_drafter(drafter: EagleDrafter, folder: str | os.PathLike, dtype: torch.dtype | None = None) -> Path:
    """Write `model.safetensors` + `config.json` (module docstring) atomically; return the folder.

    dtype: the floating tensors' dtype on disk (None: the drafter's own); d2t stays int64, t2d bool.
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    state = {k: v.detach().contiguous().cpu() for k, v in drafter.state_dict().items()}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    config = drafter.config.to_json()
    config["torch_dtype"] = str(dtype or drafter.lm_head.weight.dtype).removeprefix("torch.")
    with atomic_dir(folder) as tmp:
        save_file(state, tmp / WEIGHTS, metadata={"format": "pt"})
        (tmp / CONFIG).write_text(json.dumps(config, indent=1))
        for f in (WEIGHTS, CONFIG):
            os.chmod(tmp / f, FILE_MODE)  # safetensors writes 0600; the folder's files are readable like io's
    return folder


def load_drafter(folder: str | os.PathLike, target) -> EagleDrafter:
    """Read a drafter saved by `save_drafter` (or an EAGLE-3 checkpoint of the same layout) for `target`."""
    from safetensors.torch import load_file

    folder = Path(folder)
    text = target.config.get_text_config(decoder=True)
    config = EagleConfig.from_json(json.loads((folder / CONFIG).read_text()), text.num_hidden_layers)
    if (config.hidden_size, config.vocab_size, config.num_target_layers) != (
        text.hidden_size, text.vocab_size, text.num_hidden_layers,
    ):  # fmt: skip
        raise ValueError(f"{folder} was made for a target of hidden size {config.hidden_size}, vocabulary "
                         f"{config.vocab_size}, {config.num_target_layers} layers; this target has "
                         f"{text.hidden_size}, {text.vocab_size}, {text.num_hidden_layers}")  # fmt: skip
    weight = target.get_input_embeddings().weight
    drafter = EagleDrafter(config, weight, _attn(target))
    state = load_file(str(folder / WEIGHTS))
    state.pop("embed_tokens.weight", None)  # some checkpoints carry the target's embedding: ours is shared
    drafter.load_state_dict(state, strict=True)
    manifest = folder / "manifest.json"  # written by the trainer; absent in an engine's checkpoint
    if manifest.is_file():
        drafter.heldout_accuracy = tuple(json.loads(manifest.read_text()).get("heldout_accuracy_by_position", ()))
    return drafter.to(device=weight.device, dtype=weight.dtype).eval().requires_grad_(False)
