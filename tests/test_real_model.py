"""A few checks on the real SmolLM2-135M-Instruct (marked `real`: skipped when the model file is absent)."""

import pytest
import torch

from specdec_lab import ModelNotFoundError, generate, load_model

pytestmark = pytest.mark.real

PROMPTS = [
    "Summarize in one sentence: The library opens at nine. The library closes at five. "
    "On Sundays the library is closed, but the reading room stays open until noon.",
    "Write a Python function that returns the squares of a list of numbers.",
]


def test_model_shape(real_model):
    config = real_model.model.config
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (30, 576, 49152)
    assert real_model.model.dtype == torch.float32
    assert real_model.tokenizer.chat_template and real_model.tokenizer.eos_token == "<|im_end|>"


@pytest.mark.parametrize("prompt", PROMPTS)
def test_autoregressive_and_prompt_lookup_equal_hf_greedy(real_model, prompt):
    model, tokenizer = real_model
    ids = real_model.chat_ids(prompt)
    ar = generate(real_model, ids, max_new_tokens=48)
    with torch.inference_mode():
        hf = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=48,
            do_sample=False,
        )[0, len(ids) :].tolist()
    assert ar.tokens == hf
    pl = generate(real_model, ids, method="prompt_lookup", max_new_tokens=48, draft_length=4)
    assert pl.tokens == ar.tokens
    assert pl.text == tokenizer.decode(ar.tokens, skip_special_tokens=True)


def test_text_prompt_with_chat_template(real_model):
    res = generate(real_model, "What is the capital of France?", chat=True, max_new_tokens=12)
    assert "Paris" in res.text


def test_a_text_prompt_gets_the_chat_template_by_default(real_model):
    """The first call a user makes: an instruct model answers (chat="auto"); continuing the raw text of the
    same prompt (chat=False) is what made it end at once with <|im_end|> before."""
    from specdec_lab.io import eos_ids

    res = generate(real_model, "Write a haiku about autumn.", max_new_tokens=16)
    assert res.text.strip() and res.tokens[0] not in eos_ids(real_model.model, real_model.tokenizer)
    assert res.prompt_tokens == real_model.chat_ids("Write a haiku about autumn.")
    raw = generate(real_model, "Write a haiku about autumn.", chat=False, max_new_tokens=4)
    assert raw.prompt_tokens == real_model.tokenizer("Write a haiku about autumn.")["input_ids"]


def test_unknown_model_name_is_explained(tmp_path):
    with pytest.raises(ModelNotFoundError, match="shipped names"):
        load_model("smollm2-1.7b")
    with pytest.raises(ModelNotFoundError, match="Nothing is downloaded"):
        load_model(tmp_path / "missing-dir")


def test_cached_fp32_copy_equals_a_fresh_gguf_load(real_model):
    """load_model reads a de-quantized cache of the GGUF file: it must be bit-identical to transformers' load."""
    from transformers import AutoModelForCausalLM

    from specdec_lab import find_model_file

    path = find_model_file("smollm2-135m")
    fresh = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    cached = real_model.model.state_dict()
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tensor, cached[name]), name
