"""Export a drafter for the serving engines: vLLM (`Eagle3LlamaForCausalLM`) and SGLang (`LlamaForCausalLMEagle3`).

`save_drafter` already writes the layout both load (`model.py` docstring), so export is that layout plus
the choices a serving engine cares about: the floating tensors in a half dtype (bfloat16 by default, as
the published EAGLE-3 checkpoints; both loaders copy into their own parameters, casting), and a check of
every tensor's name, shape and dtype against what the loaders read:

    vLLM   vllm/model_executor/models/llama_eagle3.py, `Eagle3LlamaForCausalLM.load_weights`: skips `t2d`;
           `d2t` -> `draft_id_to_target_id`, an int64 (draft_vocab_size,) parameter; other names but
           `lm_head.*` get `model.`; `LlamaModel.load_weights`: `midlayer.` -> `layers.0.`, q/k/v stacked
           into `qkv_proj` (input 2H: embeddings and hidden states concatenated), gate/up into
           `gate_up_proj`; `fc` is (H, 3H) when `eagle_config.use_aux_hidden_state`; `lm_head` is
           (draft_vocab_size, H); `embed_tokens` optional (the target's is shared when absent).
    SGLang python/sglang/srt/models/llama_eagle3.py, `LlamaForCausalLMEagle3.load_weights`: `d2t` ->
           `hot_token_id = d2t + arange`; skips `t2d`; other names as in the file or under `model.`
           (`model.fc`, `model.midlayer.*`, `model.norm`), `lm_head` (draft_vocab_size, H) unless
           `tie_word_embeddings` (we write false).

The layer-id conventions differ by one (`model.py` docstring); `config.json` carries both keys, each where
its engine reads it. `read_export` loads an export back for a target (it is `load_drafter`).

    python -m specdec_lab.eagle.export data/eagle/smollm2-135m /tmp/smollm2-135m-eagle3
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import torch

from .model import CONFIG, WEIGHTS, EagleConfig, EagleDrafter, load_drafter, save_drafter

__all__ = ["engine_tensors", "check_export", "export_drafter", "export_folder", "read_export"]

FLOAT = None  # any floating dtype: the loaders cast into their parameters


def engine_tensors(config: EagleConfig) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
    """{name: (shape, dtype or FLOAT)} of the tensors an EAGLE-3 checkpoint gives the loaders (module docstring)."""
    if config.variant != "eagle3":
        raise ValueError("the engines' EAGLE-3 loaders take variant 'eagle3' only")
    t = config.target
    h, m, v = config.hidden_size, config.draft_vocab_size, config.vocab_size
    d = int(t.get("head_dim") or h // t["num_attention_heads"])
    q, kv, inter = t["num_attention_heads"] * d, t["num_key_value_heads"] * d, t["intermediate_size"]
    layer = {
        "input_layernorm.weight": (h,), "hidden_norm.weight": (h,), "post_attention_layernorm.weight": (h,),
        "self_attn.q_proj.weight": (q, 2 * h), "self_attn.k_proj.weight": (kv, 2 * h),
        "self_attn.v_proj.weight": (kv, 2 * h), "self_attn.o_proj.weight": (h, q),
        "mlp.gate_proj.weight": (inter, h), "mlp.up_proj.weight": (inter, h), "mlp.down_proj.weight": (h, inter),
    }  # fmt: skip
    out = {"fc.weight": ((h, len(config.feature_layers) * h), FLOAT)}
    out |= {f"midlayer.{k}": (shape, FLOAT) for k, shape in layer.items()}
    out |= {"norm.weight": ((h,), FLOAT), "lm_head.weight": ((m, h), FLOAT)}
    return out | {"d2t": ((m,), torch.int64), "t2d": ((v,), torch.bool)}


def check_export(folder: str | os.PathLike) -> dict:
    """Raise unless `folder` holds exactly `engine_tensors` of its config.json; -> the config record."""
    from safetensors.torch import load_file

    folder = Path(folder)
    record = json.loads((folder / CONFIG).read_text())
    want = engine_tensors(EagleConfig.from_json(record))
    state = load_file(str(folder / WEIGHTS))
    problems = [f"missing {k}" for k in want.keys() - state.keys()] + [f"extra {k}" for k in state.keys() - want.keys()]
    for k in want.keys() & state.keys():
        shape, dtype = want[k]
        if tuple(state[k].shape) != shape:
            problems.append(f"{k}: shape {tuple(state[k].shape)}, the loaders expect {shape}")
        if dtype is None and not state[k].is_floating_point() or dtype is not None and state[k].dtype != dtype:
            problems.append(f"{k}: dtype {state[k].dtype}, the loaders expect {dtype or 'a floating dtype'}")
    if record.get("architectures") != ["LlamaForCausalLMEagle3"] or record.get("tie_word_embeddings") is not False:
        problems.append("config.json: architectures must be ['LlamaForCausalLMEagle3'], tie_word_embeddings false")
    if problems:
        raise ValueError(f"{folder} is not what vLLM / SGLang load: " + "; ".join(sorted(problems)))
    return record


def _must_be_new(folder: str | os.PathLike) -> Path:
    if Path(folder).exists():  # an atomic folder write never replaces a finished folder: say so, do not skip
        raise FileExistsError(f"{folder} exists: export into a new folder")
    return Path(folder)


def export_drafter(drafter: EagleDrafter, folder: str | os.PathLike, dtype: torch.dtype = torch.bfloat16) -> Path:
    """Write `drafter` for the engines (floating tensors in `dtype`) and check it; return the folder (new)."""
    _must_be_new(folder)
    save_drafter(drafter, folder, dtype=dtype)
    check_export(folder)
    return Path(folder)


def export_folder(src: str | os.PathLike, dst: str | os.PathLike, dtype: torch.dtype = torch.bfloat16) -> Path:
    """A saved drafter folder -> an export in `dst` (no target needed: files in, files out)."""
    from safetensors.torch import load_file, save_file

    from ..io import FILE_MODE, atomic_dir

    src, dst = Path(src), _must_be_new(dst)
    record = json.loads((src / CONFIG).read_text()) | {"torch_dtype": str(dtype).removeprefix("torch.")}
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in load_file(str(src / WEIGHTS)).items()}
    with atomic_dir(dst) as tmp:
        save_file(state, tmp / WEIGHTS, metadata={"format": "pt"})
        (tmp / CONFIG).write_text(json.dumps(record, indent=1))
        for f in (WEIGHTS, CONFIG):
            os.chmod(tmp / f, FILE_MODE)
    check_export(dst)
    return dst


def read_export(folder: str | os.PathLike, target) -> EagleDrafter:
    """An export read back for `target` (weights cast to the target's dtype)."""
    return load_drafter(folder, target)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.eagle.export", description=__doc__.split("\n")[0])
    p.add_argument("src", help="a drafter folder (python -m specdec_lab.train eagle --out ...)")
    p.add_argument("dst", help="the export folder (must not exist)")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = p.parse_args(argv)
    out = export_folder(args.src, args.dst, getattr(torch, args.dtype))
    print(f'wrote {out} (vLLM: --speculative-config \'{{"method": "eagle3", "model": "{out}"}}\')')
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
