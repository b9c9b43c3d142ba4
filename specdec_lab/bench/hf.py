"""Anchors: transformers' own `model.generate()`, timed by the same harness as our loop.

They answer "is our loop's speed (and output) in line with the library everyone uses?". Each anchor is a
factory `(model, eos_ids, **params) -> run(ids, max_new_tokens, seed) -> RunOutput` registered into the
bench's `ANCHORS` (runner.py) at the bottom of this file; parameters after `eos_ids` are what a method spec
may set (`hf_prompt_lookup:prompt_lookup_num_tokens=4`). One-time setup (`hf_assisted` loads its draft)
goes in the factory.

`hf_generate_compiled` is `hf_generate` the way transformers makes decoding fast: a static KV cache
(`cache_implementation="static"`, preallocated at `max_cache_len` positions, so every decode step has the
same shapes) and its own `torch.compile` of the forward, which `generate` applies to the decode steps only
(the prefill stays eager). transformers compiles automatically only on accelerators
(`_valid_auto_compile_criteria`); on a CPU its `CompileConfig._compile_all_devices` flag forces it, which
is what its docs name for testing on CPU. The factory compiles (two short warm-up calls, outside every
clock) and each row's "proposer" record carries the seconds the compiling call took and how many graphs
were compiled inside the timed run (0 unless a prompt outgrew the cache).

Mean accepted for anchors: transformers does not report how many target forwards it ran, so we count
calls of the model with a forward pre-hook. Greedy `generate` calls it once per new token (its first call
is the prefill, which also yields the first token); assisted generation (prompt lookup) calls it once per
draft-and-verify step, the first of which is again also the prefill. Tokens / calls is therefore the same
quantity as our loop's tokens per verify forward (ours counts its separate prefill as no step).
"""

from __future__ import annotations

import time

import torch
from transformers import GenerationConfig

from ..machine import sync
from .runner import Runner, RunOutput, register_anchor

__all__ = ["NOTES", "hf_generate", "hf_generate_compiled", "hf_prompt_lookup", "hf_assisted"]

NOTES = {
    "timing": "wall time of the whole call (prefill included), device synchronized, measured outside every "
    "method alike; tokenization excluded; one warm-up run per method first; method order rotated per prompt",
    "speedup": "(sum of tokens / sum of seconds) of the method over the same for autoregressive",
    "mean_accepted": "tokens emitted per target forward, bonus included. Our methods: from the loop. hf_* "
    "anchors: tokens / model calls counted with a forward pre-hook (the first call is also the prefill, as "
    "our separate prefill is not counted): exactly 1.0 for hf_generate, derived for hf_prompt_lookup; "
    "hf_generate_compiled takes greedy decoding's one call per token (a hook would be compiled into its graph)",
    "compile": "hf_generate_compiled compiles in its factory (outside every clock); its rows' proposer record "
    "gives compile_seconds (the compiling warm-up call) and graphs_compiled during the timed run",
    "identical": "fraction of prompts whose output equals autoregressive's token for token; rows that differ "
    "give first_diff and the autoregressive top-1 minus top-2 logit gap there (tiny gap = float near-tie)",
}


def _hf_run(model, eos_ids: list[int], assistant_model=None, count: bool = True, **generation) -> Runner:
    """count: count model calls with a forward pre-hook; False (a compiled forward, which would trace the
    hook into its graph and recompile on every call) takes one call per new token, greedy decoding's count."""
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
        hook = model.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1)) if count else None
        try:
            out = model.generate(x, attention_mask=torch.ones_like(x), generation_config=config, **extra)
        finally:
            if hook is not None:
                hook.remove()
        tokens = out[0, len(ids) :].tolist()
        calls[0] = calls[0] if count else len(tokens)
        stop = "eos" if tokens and tokens[-1] in eos_ids else "max_new_tokens"
        return RunOutput(tokens=tokens, forwards=calls[0], stop_reason=stop)

    return run


def hf_generate(model, eos_ids: list[int]) -> Runner:
    """transformers greedy decoding: `model.generate(do_sample=False)`."""
    return _hf_run(model, eos_ids)


def _graphs() -> int:
    """Graphs dynamo has compiled in this process so far (its own counter)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def hf_generate_compiled(
    model, eos_ids: list[int], max_cache_len: int = 512, mode: str = "auto", fullgraph: bool = True
) -> Runner:
    """transformers greedy decoding with its static cache and compiled forward (module docstring).

    max_cache_len: positions preallocated in the static cache (prompt + new tokens must fit, else
    transformers reallocates a larger one and the forward recompiles: counted in `graphs_compiled`).
    512 holds every shipped prompt (at most ~250 tokens in the chat template) plus 128 new tokens; a longer
    cache costs more per step, since attention reads all of it under a mask.
    mode: torch.compile's mode; "auto" = transformers' default "reduce-overhead" (CUDA graphs) on CUDA,
    "default" elsewhere (CUDA graphs do not exist on a CPU). fullgraph: one graph for the whole forward,
    an error instead of a silent graph break (static shapes: `dynamic=False`).
    """
    from transformers import CompileConfig

    device = next(model.parameters()).device
    if mode == "auto":
        mode = "reduce-overhead" if device.type == "cuda" else "default"
    compile_config = CompileConfig(fullgraph=fullgraph, dynamic=False, mode=mode)
    compile_config._compile_all_devices = True  # transformers' switch for compiling off accelerators
    generate = _hf_run(model, eos_ids, count=False, cache_implementation="static", compile_config=compile_config,
                       max_cache_len=max_cache_len)  # fmt: skip
    state = {"compile_seconds": None, "mode": mode, "max_cache_len": max_cache_len}

    def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
        before = _graphs()
        out = generate(ids, max_new_tokens, seed)
        out.info = {**state, "graphs_compiled": _graphs() - before}
        return out

    # Compile now, outside every clock: the first call traces and compiles the decode step (inductor: C++
    # on a CPU), the second, a prompt of another length, reuses it. min_new_tokens keeps EOS from ending a
    # warm-up before its first decode step; the compiled forward is the same (cached on the model).
    warm = _hf_run(model, eos_ids, count=False, cache_implementation="static", compile_config=compile_config,
                   max_cache_len=max_cache_len, min_new_tokens=4)  # fmt: skip
    vocab = model.config.get_text_config().vocab_size
    try:
        for n in (11, 5):
            before, t0 = _graphs(), time.perf_counter()
            warm([(7 * i + 3) % vocab for i in range(n)], 4, 0)
            sync(device)
            if state["compile_seconds"] is None:
                state["compile_seconds"] = round(time.perf_counter() - t0, 3)
                state["graphs_at_compile"] = _graphs() - before
    except Exception as err:  # noqa: BLE001 - any backend failure (no C++ compiler, an op inductor lacks)
        raise RuntimeError(
            f"hf_generate_compiled: torch.compile of the model's forward failed ({type(err).__name__}: {err}). "
            "It needs a working C++ compiler on a CPU (inductor); hf_generate is the eager anchor."
        ) from err
    return run


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

    from ..models.draft_model import export_hf, get_draft
    from ..models.load import match_kernels

    folder = export_hf(get_draft(draft, model))
    device = next(model.parameters()).device
    assistant = AutoModelForCausalLM.from_pretrained(folder, dtype=model.dtype).to(device).eval()
    match_kernels(assistant, model)  # the assistant runs the same kernels as the target (and our draft)
    assistant.generation_config.num_assistant_tokens = num_assistant_tokens
    assistant.generation_config.num_assistant_tokens_schedule = num_assistant_tokens_schedule
    assistant.generation_config.assistant_confidence_threshold = assistant_confidence_threshold
    return _hf_run(model, eos_ids, assistant_model=assistant)


register_anchor("hf_generate", hf_generate)
register_anchor("hf_generate_compiled", hf_generate_compiled)
register_anchor("hf_prompt_lookup", hf_prompt_lookup)
register_anchor("hf_assisted", hf_assisted)
