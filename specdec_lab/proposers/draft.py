"""Draft-model speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a small LM proposes k tokens.

Notation: p = target distribution, q = draft distribution, k = draft length.

The draft keeps its own KV cache (`KVCache`). Per loop step:

    propose:  feed the tokens the draft has not seen yet in ONE forward fused with the first draft step —
              the root; d_k + the bonus token when the whole chain was accepted; or, after steps that
              proposed nothing (k = 0 does not run the draft), every token emitted since; the first draft of a
              call feeds the whole prompt, so the draft's prefill is paid only if it drafts — then k − 1
              single tokens; each forward yields one draft token (argmax, or a sample from q kept for
              verification)
    update:   the draft wrote K/V for pending + d_1..d_{k−1}; keep the prefix that is still on the accepted
              path (pending + d_1..d_min(a, k−1)) and drop the rest — no recomputation

The draft's head evaluates only its drafting vocabulary (plus the prompt's tokens) when it has one
(`Draft.vocab`): q is zero elsewhere, which keeps speculative sampling exact. k is fixed, HF's +2/−1
heuristic, or chosen each step from the acceptance α̂ and the one cost model (`draft_length.DraftLength`
pricing on `cost.StepCost`, with the draft's own step time): k* = argmax E[L] / (k·t_draft + price(k+1)),
where k = 0 (a root-only tree, a plain autoregressive step) backs off where no draft pays — long contexts,
where the draft's own attention grows and α falls, or a poor draft — and probes now and then to come back
(after `probe_every` steps, the wait doubling after each failed probe). α̂, the probe schedule and the
measured step time live in the call's `Memory` (slot "draft:<name>"): fresh for every call unless the caller
passes one Memory to several calls, which then go on where the last stopped.

`method="layer_skip"` is the same proposer with the training-free draft made of the target's first layers; as
those layers are the target's own, the draft copies their K/V for committed tokens from the target's cache
(`KVCache.extend_from`) instead of running them again: its catch-up after a backed-off stretch is free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import torch

from ..kv_cache import KVCache
from ..models.draft_model import Draft, get_draft
from ..models.fast_linear import small_linear
from ..sampling import warp_probs
from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .chain_sizing import ChainLengthConfig, ChainSizing

__all__ = ["DraftConfig", "DraftProposer", "LayerSkipConfig", "LayerSkipProposer", "draft_step_seconds"]


@dataclass
class DraftConfig(ChainLengthConfig):
    """A draft model's chain: which draft and which of its head rows, sized as every model chain is
    (`ChainLengthConfig`: max_draft, draft_length, probes, α̂'s memory and prior)."""

    draft: str = param("default", '"default" (shipped distilled draft), "layer_skip:N", a draft folder, or a Draft')
    vocab: str = param("draft", '"draft": the draft\'s reduced head (+ prompt tokens); "full": the whole head')

    def __post_init__(self):
        if self.vocab not in ("draft", "full"):
            raise ValueError(f"vocab must be 'draft' or 'full', got {self.vocab!r}")
        super().__post_init__()  # validates max_draft, draft_length and the probe schedule


class DraftProposer(Proposer):
    name = "draft"

    def __init__(self, config: DraftConfig | None = None, **kwargs):
        self.config = config or DraftConfig(**kwargs)
        self.sizing = ChainSizing(self.config)  # k per step, the call's memory slot, the step time (`chain_sizing`)
        self.draft: Draft | None = None  # loaded in start(): building a proposer stays cheap
        self.cache: KVCache | None = None
        self.rows: torch.Tensor | None = None  # (M,) target ids of the head rows evaluated; None = all V
        self.head: torch.Tensor | None = None  # (M, H) those rows of the (tied) head
        self.seen = 0  # state.tokens[:seen] have K/V in the draft cache (committed)
        self.pending = 0  # tokens fed in the last proposal before the first draft token

    @property
    def length(self):
        """The chain-length rule (`draft_length.DraftLength`)."""
        return self.sizing.length

    @length.setter
    def length(self, value) -> None:
        self.sizing.length = value

    @property
    def counts(self) -> dict:
        return self.sizing.counts

    # ---- setup ------------------------------------------------------------------------------------
    def start(self, state: DecodeState, prompt=None) -> None:
        self.draft = get_draft(self.config.draft, state.model)
        model = self.draft.model
        prompt_ids = state.tokens[: state.prompt_length]
        self.rows = self.draft.head_rows(prompt_ids) if self.config.vocab == "draft" else None
        weight = model.get_output_embeddings().weight  # (V, H), tied to the embeddings
        self.head = weight if self.rows is None else weight[self.rows].contiguous()  # (M, H)
        self.cache = KVCache.for_model(model, capacity=len(state.tokens) + 256)
        # No prefill here: the first draft forward feeds every token the draft has not seen (the catch-up of
        # a backed-off stretch), so a call that starts backed off never pays for the draft's prefill.
        self.seen = 0
        if self.draft.step_seconds is None:  # a fact about the machine: measured once, on the empty cache
            self.draft.step_seconds = draft_step_seconds(self)
        # What this draft learned in earlier calls, when the caller passed a Memory that holds it (else a
        # fresh slot): α̂, the probe schedule and whether it was backed off — a call can start backed off from
        # its first step where the draft has not been paying, instead of re-learning that with failed drafts.
        self.sizing.start(state, f"draft:{self.draft.name}", self.draft.step_seconds)

    @torch.inference_mode()
    def _step(self, tokens: list[int]) -> torch.Tensor:
        """Feed tokens to the draft (appending K/V); return head logits (M,) after the last one."""
        device = self.head.device
        start = self.cache.get_seq_length()  # written entries, committed or not
        ids = torch.tensor([tokens], dtype=torch.long, device=device)  # (1, n)
        positions = torch.arange(start, start + len(tokens), device=device)[None]  # (1, n)
        body = self.draft.model.get_decoder()
        out = body(input_ids=ids, position_ids=positions, cache=self.cache, use_cache=True)
        return small_linear(self.draft.readout(out.last_hidden_state[0, -1]), self.head)  # (M,)

    # ---- the two calls of the loop ----------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, state: DecodeState) -> Tree:
        x = state.tokens[self.seen :]  # ≥ 1 token the draft has not seen: the root, and what it missed
        k = self.sizing.choose(state, len(x))  # (info: k, α̂, probe, fed — the first forward's tokens)
        if k == 0:
            # Backed off: a root-only tree, one plain decoding step. The draft does not run, so its cache
            # falls behind by the tokens emitted meanwhile; the next draft's first forward feeds them all.
            # α̂ stays as measured (no drift toward the tracker's prior, unlike prompt lookup's idle keys):
            # only probes refresh it, so they — not the prior meeting the cost threshold — decide when the
            # draft runs again.
            return Tree.root(state.root)
        if self.draft.shared_layers and state.cache is not None and len(x) > 1:
            # Layer skip: the draft's layers are the target's first ones, so the K/V of every token the target
            # has committed is already in the target's cache — copy it (the catch-up of a backed-off stretch,
            # the prompt at the first draft) and feed only the root: a probe costs one draft token, not a
            # forward of the draft's layers over everything it missed.
            self.cache.extend_from(state.cache, self.seen, state.cache_length)
            self.seen = state.cache_length
            x = state.tokens[self.seen :]  # the root
        sampling, greedy = state.sampling, state.sampling.greedy
        self.pending = len(x)
        drafts: list[int] = []
        q_rows: list[torch.Tensor] = []
        seconds: list[float] = []  # (k,) wall time of each draft forward and its sampling
        for _ in range(k):
            t0 = time.perf_counter()
            logits = self._step(x)  # (M,)
            if greedy:
                j = int(logits.argmax())
            else:
                q = warp_probs(logits, sampling)  # (M,) the same warping the target's p gets
                j = int(torch.multinomial(q, 1, generator=state.generator))
                q_rows.append(q)
            tok = j if self.rows is None else int(self.rows[j])
            drafts.append(tok)
            x = [tok]
            seconds.append(time.perf_counter() - t0)
        # t_draft for the cost rule: a moving average of the measured step time (a catch-up forward left out),
        # noted to the cost model as drafting, not loop overhead (`ChainSizing.drafted`)
        self.sizing.drafted(state, seconds, self.pending)
        probs = None
        if q_rows:
            vocab = self.draft.model.config.get_text_config(decoder=True).vocab_size
            probs = torch.zeros(k + 1, vocab, device=self.head.device)  # (k+1, V), row 0 (root) unused
            q = torch.stack(q_rows)  # (k, M)
            if self.rows is None:
                probs[1:] = q
            else:
                probs[1:, self.rows] = q  # q = 0 outside the drafting vocabulary
        return Tree.chain(state.root, drafts, draft_probs=probs, device=self.head.device)

    def update(self, state, tree, acceptance, output) -> None:
        k = len(tree) - 1
        if k == 0:  # backed off: nothing written to the draft cache; `seen` stays, the gap grows
            return
        a = acceptance.accepted_draft
        valid = self.pending + min(a, k - 1)  # written: pending + d_1..d_{k-1}; still on the path: this many
        self.cache.keep(list(range(valid)))
        self.seen += valid
        self.sizing.observe(k, a)

    def info(self) -> dict:
        return dict(self.sizing.last)

    def summary(self) -> dict:
        """`ChainSizing.summary`: steps, backed off, probes, drafted, accepted, rejected, α realised and α̂."""
        return self.sizing.summary()


def draft_step_seconds(proposer: DraftProposer, repeats: int = 7, warmup: int = 5) -> float:
    """Median seconds of one single-token draft step (body + head rows) on the proposer's cache."""
    times = []
    root = [0]
    for _ in range(repeats + warmup):
        t0 = time.perf_counter()
        proposer._step(root)
        times.append(time.perf_counter() - t0)
        proposer.cache.rollback()
    return sorted(times[warmup:])[len(times[warmup:]) // 2]


@dataclass
class LayerSkipConfig(ChainLengthConfig):
    """The target's first layers as the draft, sized as every model chain is (`ChainLengthConfig`), but
    starting from a low prior α̂."""

    n_layers: int = param(4, "the target's first n layers (+ its norm and head) draft")
    prior_alpha: float = param(
        0.1,
        "α̂ before any draft of the call. Low: the target's first layers, untrained to exit early, rarely "
        "agree with its last (data/bench/README.md), so cost mode starts backed off and probes its way in",
    )
    vocab: str = param(
        "draft",
        '"draft": the shipped drafting vocabulary when one fits the target\'s head (+ prompt tokens), '
        'else all rows; "full": the whole head',
    )


class LayerSkipProposer(DraftProposer):
    """Self-speculation (Draft & Verify; LayerSkip): the target's own first layers draft, no training."""

    name = "layer_skip"

    def __init__(self, config: LayerSkipConfig | None = None, **kwargs):
        config = config or LayerSkipConfig(**kwargs)
        super().__init__(
            DraftConfig(
                draft=f"layer_skip:{config.n_layers}",
                vocab=config.vocab,
                **{f.name: getattr(config, f.name) for f in fields(ChainLengthConfig)},
            )
        )
