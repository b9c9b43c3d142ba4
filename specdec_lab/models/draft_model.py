"""Draft models for the target: a distilled 2-layer LM, and the training-free layer-skip view.

A draft is an ordinary HF `LlamaForCausalLM` with the target's tokenizer, hidden size and (shared, frozen)
embeddings; the LM head is tied to them, as in the target. What differs is depth:

    target  embed ─ 30 layers ─ norm ─ head(E)           SmolLM2-135M
    trained embed ─ L layers  ─ norm ─ head(E)           layers initialized from target layers, distilled
    skip    embed ─ target layers[:L] ─ target norm ─ head(E)   (training-free self-speculation)

Drafting vocabulary (EAGLE-3's trick). The head E (49152 × 576) is 21% of the target's weights and the
biggest single cost of a 2-layer draft step. `Draft.vocab` lists the N most frequent target tokens of the
distillation data; the proposer evaluates only those rows of the head (plus the prompt's own tokens, so
copied names stay reachable) and sets q = 0 elsewhere. Speculative sampling stays exact: q only needs to
be a distribution. The saved model is still a full-vocab HF LM (`export_hf`), which transformers' assisted
generation can use as is: same weights, it just pays for the whole head every draft step.

On disk (`data/draft/<name>/`, a few MB): only what training changed — low-rank deltas (or full tensors) of
the L layers, the final norm and the vocabulary — plus `manifest.json`. Everything else is rebuilt from
the target at load time; `export_hf` writes a complete HF folder into the cache when one is wanted.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import weakref
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils import parametrize

from ..io import DATA_DIR, atomic_dir, atomic_path, cache_dir, write_json
from .load import match_kernels
from .quant import float_state_dict
from .vocab import vocab_for

__all__ = [
    "DRAFT_DIR",
    "DraftSpec",
    "Draft",
    "LowRankDelta",
    "build_draft",
    "layer_skip_draft",
    "save_draft",
    "load_draft",
    "get_draft",
    "export_hf",
]

DRAFT_DIR = DATA_DIR / "draft"
DEFAULT_DRAFT = "smollm2-135m-2l"  # folder under DRAFT_DIR
WEIGHTS, MANIFEST = "draft.safetensors", "manifest.json"


@dataclass
class DraftSpec:
    """Architecture of a trained draft, relative to its target."""

    base_layers: list[int] = field(default_factory=lambda: [0, 1])  # target layers the draft starts from
    lora_rank: int = 64  # > 0: train (and store) W = W_target + B·A, rank r; 0: train full layer weights
    lora_alpha: float = 64.0  # delta scale alpha / r (LoRA convention)
    vocab_size: int = 8192  # drafting vocabulary (most frequent distilled tokens); 0 = the full vocabulary
    adapter: bool = True  # a trained H x H readout before the tied head: logits = E (A h), A starts at I

    @property
    def n_layers(self) -> int:
        return len(self.base_layers)


@dataclass(eq=False)
class Draft:
    """A draft LM ready to propose for one target.

    model:   HF LlamaForCausalLM (L layers); embeddings/LM head shared with the target (tied)
    vocab:   (N,) target token ids the draft may propose (frequency order); None = the full vocabulary
    adapter: (H, H) readout A applied to the final hidden state before the head, or None (identity)
    """

    model: nn.Module
    vocab: torch.Tensor | None
    name: str
    adapter: torch.Tensor | None = None
    spec: DraftSpec | None = None  # None for the layer-skip view (nothing trained)
    manifest: dict = field(default_factory=dict)
    step_seconds: float | None = None  # one draft step on an empty cache, measured once by the first proposer
    shared_layers: int = 0  # layer skip: its layers ARE the target's first n, so their K/V for tokens the target
    # has committed is copied from the target's cache (`KVCache.extend_from`), never recomputed

    @property
    def n_layers(self) -> int:
        return self.model.config.num_hidden_layers

    def readout(self, hidden: torch.Tensor) -> torch.Tensor:
        """(..., H) final hidden state -> (..., H) vector the tied head scores: A h (h without adapter)."""
        return hidden if self.adapter is None else hidden @ self.adapter.T

    @torch.inference_mode()
    def logits(self, ids: torch.Tensor, extra: list[int] | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, T, V) the proposer's logits: its head rows (vocab ∪ extra), −inf elsewhere."""
        hidden = self.readout(self.model.get_decoder()(input_ids=ids).last_hidden_state)  # (B, T, H)
        weight = self.model.get_output_embeddings().weight  # (V, H)
        rows = self.head_rows(extra)
        if rows is None:
            return hidden @ weight.T
        out = hidden.new_full((*hidden.shape[:-1], weight.shape[0]), float("-inf"))
        out[..., rows] = hidden @ weight[rows].T
        return out

    def head_rows(self, extra: list[int] | None = None) -> torch.Tensor | None:
        """Sorted target ids of the head rows to evaluate: vocab ∪ extra (e.g. prompt tokens); None = all."""
        if self.vocab is None:
            return None
        ids = self.vocab.tolist() + list(extra or [])
        return torch.tensor(sorted(set(ids)), dtype=torch.long, device=self.vocab.device)


# ---- construction -----------------------------------------------------------------------------------
def _shell(target, n_layers: int) -> nn.Module:
    """An HF LM like the target with n_layers fresh layers; embeddings and head shared with the target."""
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(target.config)
    config.num_hidden_layers = n_layers
    if getattr(config, "layer_types", None) is not None:
        config.layer_types = config.layer_types[:n_layers]
    config.tie_word_embeddings = True
    with torch.random.fork_rng(devices=[]):
        model = AutoModelForCausalLM.from_config(config)
    model.set_input_embeddings(target.get_input_embeddings())  # shared module: no copy, no training
    model.set_output_embeddings(target.get_output_embeddings())
    match_kernels(model, target)  # decode the draft the way the target decodes
    return model.to(device=next(target.parameters()).device, dtype=target.dtype).eval()


def layer_skip_draft(target, n_layers: int = 4) -> Draft:
    """Training-free self-speculation: the target's first n layers, its final norm and its own head.

    Shares every module with the target (zero memory). SmolLM2 was not trained for early exit, so its
    early layers predict the target's token poorly (measured α is small): the baseline a trained draft beats.
    Its drafting vocabulary is the shipped one built for a head of the target's size (`vocab.vocab_for`), or
    None: scoring 8k rows instead of all V makes each draft step, and so each probe, a fraction of the cost.
    """
    src = target.get_decoder()
    name = decoder_layers_name(src)
    layers = getattr(src, name)
    if not 1 <= n_layers < len(layers):
        raise ValueError(f"layer skip needs 1 <= n_layers < {len(layers)}, got {n_layers}")
    model = _shell(target, n_layers)
    body = model.get_decoder()
    # Every other part of the body is the target's own module too: the final norm (norm, ln_f, final_layer_norm),
    # learned position embeddings (GPT-2's wpe), the rotary tables. layer_idx 0..n-1: the cache slots match.
    for child, module in src.named_children():
        setattr(body, child, nn.ModuleList(layers[:n_layers]) if child == name else module)
    return Draft(model=model, vocab=vocab_for(target), name=f"layer_skip:{n_layers}", shared_layers=n_layers)


def decoder_layers_name(body) -> str:
    """The attribute of an HF decoder body holding its layers ("layers"; GPT-2's "h"): its one ModuleList child
    with num_hidden_layers entries."""
    n = body.config.get_text_config(decoder=True).num_hidden_layers
    names = [k for k, m in body.named_children() if isinstance(m, nn.ModuleList) and len(m) == n]
    if len(names) != 1:
        raise ValueError(f"cannot tell the decoder layers of {type(body).__name__}: {n}-module lists {names}")
    return names[0]


class LowRankDelta(nn.Module):
    """Parametrization W = W0 + (alpha / r) · B A with W0 frozen (LoRA); B starts at 0 so W starts at W0."""

    def __init__(self, weight: torch.Tensor, rank: int, alpha: float):
        super().__init__()
        out_f, in_f = weight.shape
        self.scale = alpha / rank
        self.A = nn.Parameter(torch.randn(rank, in_f, dtype=weight.dtype, device=weight.device) / in_f**0.5)
        self.B = nn.Parameter(torch.zeros(out_f, rank, dtype=weight.dtype, device=weight.device))

    def forward(self, w0: torch.Tensor) -> torch.Tensor:
        return w0 + self.scale * (self.B @ self.A)  # (out, in)


def _linears(model) -> dict[str, nn.Linear]:
    """The decoder layers' linear maps by state-dict prefix ("layers.0.self_attn.q_proj", ...)."""
    body = model.get_decoder()
    return {
        f"layers.{i}.{name}": mod
        for i, layer in enumerate(body.layers)
        for name, mod in layer.named_modules()
        if isinstance(mod, nn.Linear)
    }


def build_draft(target, spec: DraftSpec, vocab: torch.Tensor | None = None, name: str = "draft") -> Draft:
    """A trainable draft: copies of target layers `spec.base_layers` (+ LoRA deltas if lora_rank > 0)."""
    src = target.get_decoder()
    model = _shell(target, spec.n_layers)
    model.requires_grad_(False)  # embeddings/head are the target's: never trained (`trainable_parameters`)
    body = model.get_decoder()
    for i, j in enumerate(spec.base_layers):
        body.layers[i].load_state_dict(float_state_dict(src.layers[j]))  # an int8/int4 target: de-quantized
    body.norm.load_state_dict(src.norm.state_dict())  # trained too: the draft's last layer is not layer 30
    if spec.lora_rank > 0:
        for mod in _linears(model).values():
            mod.weight.requires_grad_(False)
            delta = LowRankDelta(mod.weight, spec.lora_rank, spec.lora_alpha)
            parametrize.register_parametrization(mod, "weight", delta)
    adapter = None
    if spec.adapter:
        w = body.norm.weight
        adapter = nn.Parameter(torch.eye(model.config.hidden_size, device=w.device, dtype=w.dtype))
    return Draft(model=model, vocab=vocab, name=name, spec=spec, adapter=adapter)


def trainable_parameters(draft: Draft) -> list[nn.Parameter]:
    """What distillation trains: the deltas (or whole layers) and the final norm; never embeddings/head."""
    model = draft.model
    shared = {id(p) for p in model.get_input_embeddings().parameters()}
    if draft.spec is not None and draft.spec.lora_rank > 0:
        named = list(model.named_parameters())
        deltas = [p for n, p in named if "parametrizations" in n and n.endswith((".A", ".B"))]
        others = [p for n, p in named if "layernorm" in n or n.endswith("norm.weight")]
        params = deltas + others
    else:
        params = [p for p in model.get_decoder().parameters() if id(p) not in shared]
    if draft.adapter is not None:
        params.append(draft.adapter)
    for p in params:
        p.requires_grad_(True)
    return params


# ---- storage ----------------------------------------------------------------------------------------
def _payload(draft: Draft) -> dict[str, torch.Tensor]:
    """Trained tensors only (fp16): deltas or layer weights, norms, vocabulary."""
    body = draft.model.get_decoder()
    out: dict[str, torch.Tensor] = {}
    lora = draft.spec is not None and draft.spec.lora_rank > 0
    for key, mod in _linears(draft.model).items():
        if lora:
            delta = mod.parametrizations["weight"][0]
            out[f"{key}.lora_A"], out[f"{key}.lora_B"] = delta.A.detach(), delta.B.detach()
        else:
            out[f"{key}.weight"] = mod.weight.detach()
    for name, p in body.named_parameters():
        if "norm" in name:  # input/post-attention layernorms and the final norm
            out[name] = p.detach()
    if draft.adapter is not None:
        out["adapter"] = draft.adapter.detach()
    out = {k: v.to(torch.float16).contiguous().cpu() for k, v in out.items()}
    if draft.vocab is not None:
        out["vocab"] = draft.vocab.to(torch.int32).cpu()
    return out


def save_draft(draft: Draft, folder: str | os.PathLike, manifest: dict) -> Path:
    """Write draft.safetensors (trained tensors, fp16) and manifest.json (spec + training record)."""
    from safetensors.torch import save_file

    folder = Path(folder)
    with atomic_path(folder / WEIGHTS) as tmp:
        save_file(_payload(draft), tmp, metadata={"format": "pt"})
    write_json(folder / MANIFEST, {**manifest, "spec": asdict(draft.spec)})  # last: marks a complete draft
    return folder


def load_draft(folder: str | os.PathLike, target) -> Draft:
    """Rebuild a saved draft on top of `target`: base layers + stored deltas, norms, vocabulary."""
    from safetensors.torch import load_file

    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(
            f"no draft at {folder} (expected {MANIFEST} and {WEIGHTS}); train one with "
            "`python -m specdec_lab.train draft` or pass a layer-skip draft (draft='layer_skip:4')"
        )
    manifest = json.loads((folder / MANIFEST).read_text())
    spec = DraftSpec(**manifest["spec"])
    tensors = load_file(folder / WEIGHTS)
    draft = build_draft(target, DraftSpec(**{**asdict(spec), "lora_rank": 0}), name=folder.name)
    draft.spec = spec
    dtype = target.dtype
    with torch.no_grad():
        for key, mod in _linears(draft.model).items():
            if spec.lora_rank > 0:
                a, b = tensors[f"{key}.lora_A"].to(dtype), tensors[f"{key}.lora_B"].to(dtype)
                scale = spec.lora_alpha / spec.lora_rank
                mod.weight += scale * (b @ a).to(mod.weight.device)  # merged once: no per-step cost
            else:
                mod.weight.copy_(tensors[f"{key}.weight"])
        for name, p in draft.model.get_decoder().named_parameters():
            if name in tensors:
                p.copy_(tensors[name])
    device = next(target.parameters()).device
    draft.vocab = tensors["vocab"].long().to(device) if "vocab" in tensors else None
    draft.adapter = tensors["adapter"].to(device=device, dtype=dtype) if "adapter" in tensors else None
    draft.manifest = manifest
    draft.model.requires_grad_(False)
    return draft


# target -> {draft argument: Draft}. Weakly keyed by the target object: a freed target's drafts go with it,
# so a new target that happens to get the freed one's id() can never be handed a draft built on the old one.
_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_draft(draft: str | os.PathLike | Draft, target) -> Draft:
    """Resolve a draft argument, once per process and target.

    "default"        the shipped distilled draft (data/draft/smollm2-135m-2l)
    "layer_skip:N"   the target's first N layers (training-free)
    a folder path    a saved draft (manifest.json + draft.safetensors)
    a Draft          used as is
    """
    if isinstance(draft, Draft):
        return draft
    loaded = _LOADED.setdefault(target, {})
    text = str(draft)
    if text not in loaded:
        if text.startswith("layer_skip"):
            _, _, n = text.partition(":")
            loaded[text] = layer_skip_draft(target, int(n) if n else 4)
        else:
            folder = DRAFT_DIR / DEFAULT_DRAFT if text == "default" else Path(text).expanduser()
            if not folder.is_dir() and (DRAFT_DIR / text).is_dir():
                folder = DRAFT_DIR / text
            loaded[text] = load_draft(folder, target)
    return loaded[text]


def export_hf(draft: Draft, folder: str | os.PathLike | None = None, tokenizer=None) -> Path:
    """Write the draft as a complete, standalone HF model folder (full vocabulary); return it.

    Default location: the cache (`specdec_lab.io.cache_dir()`), keyed by the draft's weights, so this
    runs once. `AutoModelForCausalLM.from_pretrained(folder)` then loads it anywhere (e.g. as
    transformers' `assistant_model`).
    """
    if folder is None:
        digest = hashlib.sha256()
        for k, v in sorted(draft.model.state_dict().items()):
            if "embed" not in k and "lm_head" not in k:
                digest.update(k.encode() + v.detach().float().cpu().numpy().tobytes())
        folder = cache_dir() / f"draft-{draft.name.replace(':', '_')}-{digest.hexdigest()[:12]}"
    folder = Path(folder)
    if (folder / "config.json").is_file():
        return folder
    with atomic_dir(folder) as tmp:
        model = draft.model
        if draft.adapter is not None:  # fold the readout into an untied head: logits = (E A) h
            from transformers import AutoModelForCausalLM

            config = copy.deepcopy(model.config)
            config.tie_word_embeddings = False
            with torch.random.fork_rng(devices=[]):
                model = AutoModelForCausalLM.from_config(config).to(draft.model.dtype)
            state = dict(draft.model.state_dict())
            embed = draft.model.get_input_embeddings().weight.detach()
            state["lm_head.weight"] = embed @ draft.adapter.detach()  # (V, H): row v = A^T e_v
            model.load_state_dict(state)
        model.save_pretrained(tmp)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if draft.vocab is not None:
            (tmp / "draft_vocab.json").write_text(json.dumps(draft.vocab.tolist()))
    return folder
