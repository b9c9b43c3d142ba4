"""Anchors: transformers' own `model.generate()`, timed by the same harness as our loop.

They answer "is our loop's speed (and output) in line with the library everyone uses?". Each anchor is a
factory `(model, eos_ids, **params) -> run(ids, max_new_tokens, seed) -> RunOutput` registered into the
bench's `ANCHORS` (runner.py) at the bottom of this file; parameters after `eos_ids` are what a method spec
may set (`hf_prompt_lookup:prompt_lookup_num_tokens=4`). One-time setup (`hf_assisted` loads its draft)
goes in the factory.

Mean accepted for anchors: transformers does not report how many target forwards it ran, so we count
calls of the model with a forward pre-hook. Greedy `generate` calls it once per new token (its first call
is the prefill, which also yields the first token); assisted generation (prompt lookup) calls it once per
draft-and-verify step, the first of which is again also the prefill. Tokens / calls is therefore the same
quantity as our loop's tokens per verify forward (ours counts its separate prefill as no step).
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig

from .runner import Runner, RunOutput, register_anchor

__all__ = ["NOTES", "hf_generate", "hf_prompt_lookup", "hf_assisted"]

NOTES = {
    "timing": "wall time of the whole call (prefill included), device synchronized, measured outside every "
    "method alike; tokenization excluded; one warm-up run per method first; method order rotated per prompt",
    "speedup": "(sum of tokens / sum of seconds) of the method over the same for autoregressive",
    "mean_accepted": "tokens emitted per target forward, bonus included. Our methods: from the loop. hf_* "
    "anchors: tokens / model calls counted with a forward pre-hook (the first call is also the prefill, as "
    "our separate prefill is not counted): exactly 1.0 for hf_generate, derived for hf_prompt_lookup",
    "identical": "fraction of prompts whose output equals autoregressive's token for token; rows that differ "
    "give first_diff and the autoregressive top-1 minus top-2 logit gap there (tiny gap = float near-tie)",
}


def _hf_run(model, eos_ids: list[int], assistant_model=None, **generation) -> Runner:
    extra = {} if assistant_model is None else {"assistant_model": assistant_model}

    def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
        # Greedy, explicitly: transformers fills fields we leave unset from the model's generation_config.
        config = GenerationConfig(
            do_sample=False,
            num_beams=1,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos_ids or None,  # the same EOS set our loop stops at
            pad_token_id=eos_ids[0] if eos_ids else 0,  # batch of one: never used, but silences a warning
            **generation,
        )
        device = next(model.parameters()).device
        x = torch.tensor([ids], device=device)
        calls = [0]
        hook = model.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
        try:
            out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=config, **extra)
        finally:
            hook.remove()
        tokens = out[0, len(ids) :].tolist()
        stop = "eos" if tokens and tokens[-1] in eos_ids else "max_new_tokens"
        return RunOutput(tokens=tokens, forwards=calls[0], stop_reason=stop)

    return run


def hf_generate(model, eos_ids: list[int]) -> Runner:
    """transformers greedy decoding: `model.generate(do_sample=False)`."""
    return _hf_run(model, eos_ids)


def hf_prompt_lookup(
    model, eos_ids: list[int], prompt_lookup_num_tokens: int = 10, max_matching_ngram_size: int = 2
) -> Runner:
    """transformers prompt lookup decoding: `model.generate(prompt_lookup_num_tokens=10)`, greedy."""
    return _hf_run(
        model,
        eos_ids,
        prompt_lookup_num_tokens=prompt_lookup_num_tokens,
        max_matching_ngram_size=max_matching_ngram_size,
    )


def hf_assisted(
    model,
    eos_ids: list[int],
    draft: str = "default",
    num_assistant_tokens: int = 20,
    num_assistant_tokens_schedule: str = "constant",
    assistant_confidence_threshold: float = 0.4,
) -> Runner:
    """transformers assisted generation, `model.generate(assistant_model=draft)`, greedy, with the same draft
    weights as our `draft` method (exported as a standalone full-vocabulary HF model and loaded back).
    Defaults are transformers' own for an assistant (20 tokens, constant schedule, confidence 0.4)."""
    from transformers import AutoModelForCausalLM

    from ..draft_model import export_hf, get_draft
    from ..models import match_kernels

    folder = export_hf(get_draft(draft, model))
    device = next(model.parameters()).device
    assistant = AutoModelForCausalLM.from_pretrained(folder, dtype=model.dtype).to(device).eval()
    match_kernels(assistant, model)  # the assistant runs the same kernels as the target (and our draft)
    assistant.generation_config.num_assistant_tokens = num_assistant_tokens
    assistant.generation_config.num_assistant_tokens_schedule = num_assistant_tokens_schedule
    assistant.generation_config.assistant_confidence_threshold = assistant_confidence_threshold
    return _hf_run(model, eos_ids, assistant_model=assistant)


register_anchor("hf_generate", hf_generate)
register_anchor("hf_prompt_lookup", hf_prompt_lookup)
register_anchor("hf_assisted", hf_assisted)
