"""Anchors outside Python's stack: llama.cpp (through `llama-cpp-python`) on the same GGUF file.

    llamacpp                  plain greedy decoding: one `llama_decode` per new token
    llamacpp_prompt_lookup    its prompt lookup (`LlamaPromptLookupDecoding`: the last 1..2 tokens matched
                              earlier in the context, up to 10 following tokens verified in one forward)

They answer "how fast is a tuned C++ runtime on this machine and this file?". llama.cpp runs the GGUF's
own quantized weights (Q4_1 for the shipped model) with its own kernels, so its greedy output is its own:
it is compared with our autoregressive output like every method (`identical`, expected to differ, since
our model is the file de-quantized to fp32), and — the check that matters for a speculative method —
`llamacpp_prompt_lookup` with llama.cpp's plain decoding of the same prompt: each of its rows' "proposer"
record says `equals_plain` and `first_diff_plain` (None when `llamacpp` was not in the same benchmark).
They can differ: llama.cpp computes a batch of tokens (the prompt, a verified draft) with other kernels
than a single token, so its logits differ in the low bits between the two paths, and at a near-tie of the
top two the argmax flips — the same 1-row versus n-row rounding as in our bf16 verification.

Optional and outside CI: llama-cpp-python compiles llama.cpp when installed (`pip install
llama-cpp-python==0.3.36`, ~9 minutes on 2 cores; with its dependencies — a --no-deps install lacks
diskcache, which it imports). It is no pyproject extra: environment.yml carries every extra, and would build
it. Without it both anchors are skipped with a message (`unavailable`), never an error, so a method list
naming them runs everywhere.

Fairness. Every call starts from an empty KV cache (`Llama.reset()`): llama-cpp-python would otherwise
reuse the cached prefix of the previous call (the chat template's shared system prompt, or the whole
prompt on a repeat), a prefill the other methods pay. Threads: torch's intra-op count unless given. The
prompt's token ids are passed as they are (the GGUF's vocabulary is the tokenizer's), so no method
tokenizes inside its clock. Forwards are counted as for transformers' anchors: calls of `Llama.eval`, the
first of which is the prefill and also yields the first token.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .runner import Runner, RunOutput, register_anchor

__all__ = ["llamacpp", "llamacpp_prompt_lookup", "unavailable", "gguf_of"]

INSTALL = "pip install llama-cpp-python==0.3.36 (builds llama.cpp: ~9 minutes on 2 cores)"


def unavailable() -> str | None:
    """Why the llama.cpp anchors cannot run here, or None when they can."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as err:  # not installed, or a dependency (diskcache) missing
        return f"llama-cpp-python is not importable ({err}); {INSTALL}"
    return None


def gguf_of(model) -> Path:
    """The GGUF file a model was loaded from: `load_model` converts a GGUF once into an HF folder and
    records the source there (source.json)."""
    folder = Path(str(getattr(model.config, "_name_or_path", "") or "."))
    try:
        return Path(json.loads((folder / "source.json").read_text())["gguf"])
    except (OSError, KeyError, json.JSONDecodeError):
        raise FileNotFoundError(
            f"cannot tell which GGUF file the model came from (no source.json in {folder}); give it: llamacpp:gguf=PATH"
        ) from None


class _Agreement:
    """Plain and prompt-lookup outputs of the same prompt, matched whichever of the two ran first.

    The harness rotates the method order, so either may run first; a prompt-lookup run's record is
    completed (`equals_plain`) when the plain output of its prompt is known — the record is the row's, which
    is written after every method of the prompt has run."""

    def __init__(self):
        self.plain: dict[tuple, list[int]] = {}
        self.waiting: dict[tuple, list[tuple[dict, list[int]]]] = {}

    def plain_done(self, key: tuple, tokens: list[int]) -> None:
        self.plain[key] = tokens
        for record, theirs in self.waiting.pop(key, []):
            self._compare(record, theirs, tokens)

    def lookup_done(self, key: tuple, tokens: list[int], record: dict) -> None:
        if key in self.plain:
            self._compare(record, tokens, self.plain[key])
        else:
            record.update(equals_plain=None, first_diff_plain=None)
            self.waiting.setdefault(key, []).append((record, tokens))

    @staticmethod
    def _compare(record: dict, tokens: list[int], plain: list[int]) -> None:
        """equals_plain, and where not the first position that differs (a length difference counts)."""
        diff = next((i for i, (a, b) in enumerate(zip(plain, tokens, strict=False)) if a != b), None)
        if diff is None and len(plain) != len(tokens):
            diff = min(len(plain), len(tokens))
        record.update(equals_plain=diff is None, first_diff_plain=diff)


_AGREEMENT: dict[str, _Agreement] = {}  # one per GGUF file: both anchors of a benchmark share it


def _runner(model, eos_ids: list[int], gguf: str, n_threads: int, n_ctx: int, draft=None) -> Runner:
    from llama_cpp import Llama

    path = gguf_of(model) if gguf == "auto" else Path(gguf)
    threads = n_threads or torch.get_num_threads()
    llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                draft_model=draft, verbose=False)  # fmt: skip
    calls = [0]
    evaluate = llm.eval

    def counted(tokens):  # this instance's eval only: generate() calls self.eval once per forward
        calls[0] += 1
        return evaluate(tokens)

    llm.eval = counted
    agreement = _AGREEMENT.setdefault(str(path.resolve()), _Agreement())
    stops = set(eos_ids)
    record = {"gguf": path.name, "n_threads": threads, "prompt_lookup": draft is not None}

    def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
        if len(ids) + max_new_tokens > n_ctx:
            raise ValueError(f"prompt + max_new_tokens = {len(ids) + max_new_tokens} exceeds n_ctx={n_ctx}")
        llm.reset()  # an empty KV cache: no prefix carried over from the previous call (module docstring)
        calls[0] = 0
        tokens: list[int] = []
        # greedy: top_k=1 and temp=0 select the argmax; no repetition penalty (llama.cpp's default is 1.1)
        for t in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            tokens.append(int(t))
            if t in stops or len(tokens) >= max_new_tokens:
                break
        stop = "eos" if tokens and tokens[-1] in stops else "max_new_tokens"
        info = dict(record)
        key = (tuple(ids), max_new_tokens)
        if draft is None:
            agreement.plain_done(key, tokens)
        else:
            agreement.lookup_done(key, tokens, info)
        return RunOutput(tokens=tokens, forwards=calls[0], stop_reason=stop, info=info)

    return run


def llamacpp(model, eos_ids: list[int], gguf: str = "auto", n_threads: int = 0, n_ctx: int = 2048) -> Runner:
    """llama.cpp greedy decoding of the model's GGUF file (gguf="auto": the file `model` was loaded from).
    n_threads: 0 = torch's intra-op thread count."""
    return _runner(model, eos_ids, gguf, n_threads, n_ctx)


def llamacpp_prompt_lookup(
    model,
    eos_ids: list[int],
    gguf: str = "auto",
    n_threads: int = 0,
    n_ctx: int = 2048,
    num_pred_tokens: int = 10,
    max_ngram_size: int = 2,
) -> Runner:
    """llama.cpp greedy decoding with llama-cpp-python's prompt lookup (its defaults: 10 tokens, 2-grams).
    Rows record `equals_plain`: whether the output equals `llamacpp`'s for the same prompt."""
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    draft = LlamaPromptLookupDecoding(max_ngram_size=max_ngram_size, num_pred_tokens=num_pred_tokens)
    return _runner(model, eos_ids, gguf, n_threads, n_ctx, draft=draft)


llamacpp.unavailable = unavailable  # methods.parse_methods skips an anchor whose `unavailable()` gives a reason
llamacpp_prompt_lookup.unavailable = unavailable
register_anchor("llamacpp", llamacpp)
register_anchor("llamacpp_prompt_lookup", llamacpp_prompt_lookup)
