"""An OpenAI-compatible client for the served model, standard library only: token ids in, token ids and timings out.

Prompts go as token ids (`prompt: [ids]`), the ids our own loop decodes from (chat template applied by us), so both
engines see the same sequence: no tokenizer or template of the server's can differ. `return_token_ids` gives the
new tokens' ids back (vLLM's extension), one delta per streamed chunk.

Timings of one streamed request (what vLLM's own serving benchmark reports):
    TTFT  time to first token: request sent -> first chunk with a token
    ITL   inter-token latency: each later chunk's gap, shared by the tokens it carries (a speculative step emits
          several tokens in one chunk, so a chunk gap over n tokens counts n gaps of gap / n)

Acceptance (vLLM's Prometheus counters, scraped before and after a run; `acceptance`):
    vllm:spec_decode_num_drafts_total                          steps that drafted
    vllm:spec_decode_num_draft_tokens_total                    tokens drafted
    vllm:spec_decode_num_accepted_tokens_per_pos_total{position=i}   drafts whose position i was accepted
so the rate at position i is accepted_i / drafts: the chance a step's draft survives to depth i + 1, the bonus
not counted — `survival` of our loop's traces in the same terms (`serve.policy.survival`).
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from dataclasses import dataclass, field

__all__ = ["Completion", "complete", "scrape_metrics", "parse_metrics", "acceptance"]

MODEL = "target"  # the name `engine.ServerConfig` serves the target under


@dataclass
class Completion:
    tokens: list[int]  # new token ids (EOS kept when it ended the answer)
    finish_reason: str | None
    sent: float  # perf_counter() when the request left
    ttft: float  # seconds to the first token
    done: float  # seconds to the last chunk
    itl: list[float] = field(default_factory=list)  # seconds between tokens (len(tokens) - 1 values)


def complete(url: str, prompt: list[int], max_tokens: int, timeout: float = 600.0) -> Completion:
    """One greedy streamed completion of `prompt` (token ids): -> its tokens and timings."""
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "stream": True,
            "return_token_ids": True, "skip_special_tokens": False}  # fmt: skip
    request = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    tokens: list[int] = []
    itl: list[float] = []
    finish, ttft, last = None, float("nan"), 0.0
    sent = time.perf_counter()
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            choice = json.loads(line[5:])["choices"][0]
            now = time.perf_counter() - sent
            new = choice.get("token_ids") or []
            if new:
                if not tokens:
                    ttft = now
                else:
                    itl += [(now - last) / len(new)] * len(new)
                tokens += new
                last = now
            finish = choice.get("finish_reason") or finish
    return Completion(tokens, finish, sent, ttft, time.perf_counter() - sent, itl)


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def scrape_metrics(url: str) -> dict[str, float]:
    """vLLM's /metrics as {name{labels}: value}."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return parse_metrics(r.read().decode())


def parse_metrics(text: str) -> dict[str, float]:
    """Prometheus text format (one sample a line, `#` comments) -> {name{labels}: value}."""
    out = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def _position(key: str) -> int | None:
    m = re.search(r'position="(\d+)"', key)
    return int(m.group(1)) if m else None


def acceptance(before: dict[str, float], after: dict[str, float]) -> dict:
    """The speculation counters' growth between two scrapes: drafts, draft tokens, accepted per position and
    its rate (accepted_i / drafts), mean accepted per step (bonus included: 1 + accepted / drafts)."""

    def grew(prefix: str) -> dict[str, float]:
        return {k: after[k] - before.get(k, 0.0) for k in after if k.split("{")[0] == prefix}

    drafts = sum(grew("vllm:spec_decode_num_drafts_total").values())
    tokens = sum(grew("vllm:spec_decode_num_draft_tokens_total").values())
    per_pos: dict[int, float] = {}
    for k, v in grew("vllm:spec_decode_num_accepted_tokens_per_pos_total").items():
        pos = _position(k)
        if pos is not None:
            per_pos[pos] = per_pos.get(pos, 0.0) + v
    accepted = [int(per_pos[i]) for i in sorted(per_pos)]
    return {"drafts": int(drafts), "draft_tokens": int(tokens), "accepted_per_position": accepted,
            "rate_per_position": [round(a / drafts, 4) for a in accepted] if drafts else [],
            "mean_accepted": round(1 + sum(accepted) / drafts, 4) if drafts else None}  # fmt: skip
