"""EAGLE-3 export for the serving engines (`specdec_lab.eagle.export`): the names, shapes and dtypes vLLM's and
SGLang's loaders read, the config keys they read, and a re-loaded export that decodes like the drafter."""

from __future__ import annotations

import json

import pytest
import torch

import specdec_lab as S
from specdec_lab.eagle import random_drafter, save_drafter
from specdec_lab.eagle.export import check_export, engine_tensors, export_drafter, export_folder, read_export
from specdec_lab.train.eagle_ttt import unroll

VOCAB = torch.arange(3, 256, 3)

# What the loaders take, written out from their code (not from our model): vLLM
# vllm/model_executor/models/llama_eagle3.py `Eagle3LlamaForCausalLM.load_weights` + `LlamaModel.load_weights`
# (midlayer. -> layers.0., q/k/v -> qkv_proj of input 2H, gate/up -> gate_up_proj, d2t -> the int64
# draft_id_to_target_id, t2d skipped), SGLang python/sglang/srt/models/llama_eagle3.py
# `LlamaForCausalLMEagle3.load_weights` (d2t -> hot_token_id, t2d skipped, the rest under model.).
# tiny target: H 64, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 256; drafting vocabulary 85.
LOADER_TENSORS = {
    "fc.weight": ((64, 192), "float"),
    "midlayer.input_layernorm.weight": ((64,), "float"),
    "midlayer.hidden_norm.weight": ((64,), "float"),
    "midlayer.post_attention_layernorm.weight": ((64,), "float"),
    "midlayer.self_attn.q_proj.weight": ((64, 128), "float"),
    "midlayer.self_attn.k_proj.weight": ((32, 128), "float"),
    "midlayer.self_attn.v_proj.weight": ((32, 128), "float"),
    "midlayer.self_attn.o_proj.weight": ((64, 64), "float"),
    "midlayer.mlp.gate_proj.weight": ((128, 64), "float"),
    "midlayer.mlp.up_proj.weight": ((128, 64), "float"),
    "midlayer.mlp.down_proj.weight": ((64, 128), "float"),
    "norm.weight": ((64,), "float"),
    "lm_head.weight": ((85, 64), "float"),
    "d2t": ((85,), torch.int64),
    "t2d": ((256,), torch.bool),
}


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=8, eos_token_id=None)


@pytest.fixture(scope="module")
def drafter(target):
    return random_drafter(target, vocab=VOCAB, seed=4)


def test_names_shapes_dtypes_match_the_loaders(target, drafter, tmp_path):
    from safetensors.torch import load_file

    want = {k: (shape, None if kind == "float" else kind) for k, (shape, kind) in LOADER_TENSORS.items()}
    assert engine_tensors(drafter.config) == want
    folder = export_drafter(drafter, tmp_path / "export")
    state = load_file(str(folder / "model.safetensors"))
    assert set(state) == set(LOADER_TENSORS)
    for k, (shape, kind) in LOADER_TENSORS.items():
        assert tuple(state[k].shape) == shape, k
        assert state[k].dtype == (torch.bfloat16 if kind == "float" else kind), k
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"] and config["torch_dtype"] == "bfloat16"
    assert config["draft_vocab_size"] == 85 and config["vocab_size"] == 256 and config["hidden_size"] == 64
    assert config["num_hidden_layers"] == 1 and config["tie_word_embeddings"] is False
    assert config["eagle_config"]["use_aux_hidden_state"] is True
    # the inputs of layers (2, L//2, L-3) = (2, 4, 5): vLLM's ids as they are, SGLang's one lower
    assert config["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    # d2t as the engines use it: target id = draft id + d2t (vLLM's draft_id_to_target_id, SGLang's hot_token_id)
    assert torch.equal(state["d2t"] + torch.arange(85), VOCAB)
    assert torch.equal(state["t2d"].nonzero().flatten(), VOCAB)


def test_check_export_names_what_is_wrong(drafter, tmp_path):
    from safetensors.torch import load_file, save_file

    folder = export_drafter(drafter, tmp_path / "e")
    state = load_file(str(folder / "model.safetensors"))
    state["d2t"] = state["d2t"].int()
    del state["midlayer.hidden_norm.weight"]
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(ValueError) as error:
        check_export(folder)
    assert "missing midlayer.hidden_norm.weight" in str(error.value) and "d2t: dtype torch.int32" in str(error.value)
    with pytest.raises(FileExistsError):
        export_drafter(drafter, folder)


def test_reloaded_export_decodes_identically(target, drafter, tmp_path):
    folder = export_drafter(drafter, tmp_path / "export")
    loaded = read_export(folder, target)
    rounded = random_drafter(target, vocab=VOCAB, seed=4)  # the drafter with its weights rounded to bfloat16
    with torch.no_grad():
        for p in rounded.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    for k, v in rounded.state_dict().items():
        assert torch.equal(loaded.state_dict()[k], v), k
    ids = torch.tensor([[5, 17, 42, 7, 99, 3, 11, 12]])
    features = torch.randn(1, 8, 3, 64)
    with torch.no_grad():
        a, b = unroll(loaded, features, ids, 3), unroll(rounded, features, ids, 3)
    assert all(torch.equal(x, y) for x, y in zip(a.logits, b.logits, strict=True))
    runs = [S.generate(target, [5, 17, 42, 7], method="eagle", weights=w, draft_length=3, max_new_tokens=16)
            for w in (loaded, str(folder), rounded)]  # fmt: skip
    ar = S.generate(target, [5, 17, 42, 7], max_new_tokens=16)
    assert runs[0].tokens == runs[1].tokens == runs[2].tokens == ar.tokens
    assert [s.tree_tokens for s in runs[0].steps] == [s.tree_tokens for s in runs[2].steps]  # the same drafts


def test_export_folder_from_a_saved_drafter(target, drafter, tmp_path):
    saved = save_drafter(drafter, tmp_path / "saved")  # fp32, as training writes it
    out = export_folder(saved, tmp_path / "export", torch.float16)
    assert check_export(out)["torch_dtype"] == "float16"
    loaded = read_export(out, target)
    torch.testing.assert_close(loaded.lm_head.weight, drafter.lm_head.weight, atol=1e-2, rtol=1e-3)


def test_export_files_are_world_readable(drafter, tmp_path):
    folder = export_drafter(drafter, tmp_path / "export")
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in folder.iterdir())
