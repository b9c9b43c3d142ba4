"""The drafting-vocabulary trade-off: what an M-row head costs a draft step, and what share of tokens it can name.

A drafter's step is its layer plus a head over M drafting-vocabulary rows. On a small target the head dominates:
SmolLM2-135M's tied head is 49,152 × 576, a fifth of the target's own multiply-adds per token. From the model
shapes alone (multiply-adds of the linear layers; the attention scores over the cache are left out on both sides,
as they are small next to these at a few hundred tokens of context):

    target per token    L · (q + k + v + o + MLP)  +  V·H                 q,o: H·H   k,v: H·(n_kv·d)   MLP: 3·H·I
    EAGLE-3 draft step  fc (F·H·H) + q,k,v over [e ; g] (2H inputs) + o + MLP  +  M·H
    c(M)                draft step / target per token                      (the theory's cost ratio c)

Coverage(M): the share of the target's greedy tokens on held-out text (the self-distillation responses held out
by question_id % 10 == 0) that lie among the M most frequent tokens of the training responses — a drafter
that scores only those rows can never propose the others, so its acceptance at a position is at most that.

`chain_speedup(alpha, c)` is the best chain length's speedup of the closed form (`theory.expected_speedup`),
used to show the two effects together: α scaled by coverage against c.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..cost.theory import expected_speedup

__all__ = ["target_macs", "draft_step_macs", "step_cost_ratio", "token_ranking", "coverage", "chain_speedup",
           "VocabTradeoff", "vocab_tradeoff", "DEFAULT_SIZES"]  # fmt: skip

DEFAULT_SIZES = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 49152)


def _shape(config) -> tuple[int, int, int, int, int, int]:
    """(H, I, L, V, q width, k/v width) of an HF text config (or a dict of one)."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    h, heads = int(get("hidden_size")), int(get("num_attention_heads"))
    d = int(get("head_dim", None) or h // heads)
    kv = int(get("num_key_value_heads", None) or heads)
    return h, int(get("intermediate_size")), int(get("num_hidden_layers")), int(get("vocab_size")), heads * d, kv * d


def target_macs(config) -> dict[str, int]:
    """{"layers", "head", "total"}: the target's multiply-adds per token (linear layers, module docstring)."""
    h, i, n_layers, v, q, kv = _shape(config)
    layer = h * q + 2 * h * kv + q * h + 3 * h * i
    return {"layers": n_layers * layer, "head": v * h, "total": n_layers * layer + v * h}


def draft_step_macs(config, m: int, variant: str = "eagle3", features: int = 3) -> dict[str, int]:
    """{"fc", "layer", "head", "total"}: one EAGLE draft step over an M-row head for a target of `config`."""
    h, i, _, _, q, kv = _shape(config)
    if variant == "eagle3":  # fc fuses F target features (once per true position; a draft step reuses h)
        fc, inputs = features * h * h, 2 * h  # q/k/v read [input_layernorm(e) ; hidden_norm(g)]
    else:  # eagle1: fc over [e ; f] is the layer's input
        fc, inputs = 2 * h * h, h
    layer = inputs * (q + 2 * kv) + q * h + 3 * h * i
    return {"fc": fc, "layer": layer, "head": m * h, "total": fc + layer + m * h}


def step_cost_ratio(config, m: int, variant: str = "eagle3", features: int = 3) -> float:
    """c(M) = one draft step's multiply-adds / the target's per token."""
    return draft_step_macs(config, m, variant, features)["total"] / target_macs(config)["total"]


def token_ranking(examples, vocab_size: int) -> torch.Tensor:
    """(V,) token ids by frequency among the examples' response tokens, most frequent first (ties by id)."""
    ids = torch.tensor([t for e in examples for t in e.response_ids], dtype=torch.long)
    counts = torch.bincount(ids, minlength=vocab_size).double()
    # stable sort on -count keeps ties in id order, so the ranking is the same on every machine
    return torch.sort(-counts, stable=True).indices


def coverage(ranking: torch.Tensor, tokens: torch.Tensor, sizes: Sequence[int]) -> list[float]:
    """Share of `tokens` (N,) among the first M ids of `ranking`, for each M in `sizes`."""
    rank = torch.empty_like(ranking)
    rank[ranking] = torch.arange(len(ranking))  # token id -> its rank
    r = rank[tokens]  # (N,)
    return [float((r < m).double().mean()) for m in sizes]


def chain_speedup(alpha: float, c: float, k_max: int = 16) -> tuple[float, int]:
    """(speedup, k) of the best chain length under the closed form (`theory.expected_speedup`)."""
    if alpha <= 0:
        return 1.0, 0
    best = max(((expected_speedup(min(alpha, 0.999), k, c), k) for k in range(1, k_max + 1)), default=(1.0, 0))
    return best if best[0] > 1.0 else (1.0, 0)


@dataclass
class VocabTradeoff:
    sizes: list[int]  # M
    c: list[float]  # c(M)
    coverage: list[float]  # coverage(M) on the held-out responses
    head_share: float  # the target's LM head / its per-token multiply-adds
    held_tokens: int  # held-out response tokens the coverage counts

    def at(self, m: int) -> dict:
        """The row of size m, or one interpolated in log M between its neighbours (a slider's value)."""
        import math

        if m in self.sizes:
            j = self.sizes.index(m)
            return {"M": m, "c": self.c[j], "coverage": self.coverage[j]}
        j = max(i for i, s in enumerate(self.sizes) if s < m)
        w = (math.log(m) - math.log(self.sizes[j])) / (math.log(self.sizes[j + 1]) - math.log(self.sizes[j]))
        lerp = lambda a: a[j] + w * (a[j + 1] - a[j])  # noqa: E731
        return {"M": m, "c": lerp(self.c), "coverage": lerp(self.coverage)}


def vocab_tradeoff(config, train_examples, held_examples, sizes: Sequence[int] = DEFAULT_SIZES,
                   variant: str = "eagle3") -> VocabTradeoff:  # fmt: skip
    """c(M) and coverage(M) for each M in `sizes` (module docstring)."""
    v = _shape(config)[3]
    sizes = [min(int(m), v) for m in sizes]
    ranking = token_ranking(train_examples, v)
    held = torch.tensor([t for e in held_examples for t in e.response_ids], dtype=torch.long)
    macs = target_macs(config)
    return VocabTradeoff(
        sizes=sizes,
        c=[step_cost_ratio(config, m, variant) for m in sizes],
        coverage=coverage(ranking, held, sizes),
        head_share=macs["head"] / macs["total"],
        held_tokens=len(held),
    )
