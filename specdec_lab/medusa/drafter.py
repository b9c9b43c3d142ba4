"""Medusa heads ready to draft for one target: residual blocks, scores on the LM head's rows, costs measured.

`Drafter` is what `method="medusa"` (`proposers/medusa.py`) drafts with: the heads restricted to the drafting
vocabulary, their block kernel and weights (fp32 or int8, `projection.py`) chosen by timing on the device,
the seconds each depth costs (what `tree="auto"` prices heads at) — facts about the heads and the machine,
never what decoding learned. `get_drafter` resolves a heads argument once per process and target.
"""

from __future__ import annotations

import json
import statistics
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from ..machine import sync
from ..models.quant import int8_kernel_works, int8_mm, quantize_rows
from ..models.vocab import drafting_vocab
from ..trees import HeadAccuracies, HeadConfidence, TreeOption, tree_options
from .checkpoint import load_heads
from .heads import MedusaHeads
from .projection import WEIGHTS, RowScorer

__all__ = ["Drafter", "get_drafter", "CALIBRATION"]

CALIBRATION = "calibration.json"  # next to the heads' checkpoint
SHIPPED_VOCAB = "smollm2-135m"  # the shipped heads' drafting vocabulary (`specdec_lab.models.vocab`)


@dataclass
class Drafter:
    """Heads ready to draft for one target: weights restricted to the drafting vocabulary, costs measured."""

    heads: MedusaHeads
    source: Path | None  # the heads' folder (None for heads passed as an object)
    vocab: torch.Tensor | None  # (M0,) target ids the heads may propose; None = all V
    accuracies: HeadAccuracies | None  # calibration, when the heads' folder has one
    confidence: HeadConfidence | None = None  # c_k(p) for dynamic trees, when the calibration has it
    head_seconds: dict[int, float] = field(default_factory=dict)  # depth D -> seconds to draft D heads
    # How D heads' residual blocks run: "bmm" (one batched matmul of D matrix-vector products per layer) or
    # "mv" (D matrix-vector products in a loop). Same numbers; which is faster is the device's business
    # (a CPU's bmm of matrix-vector products can take a slow path), so `measure_heads` times both.
    block_kernel: str = "bmm"
    block_seconds: dict[str, float] = field(default_factory=dict)  # kernel -> seconds for all K heads
    # The heads' weights while drafting (their W1 and the shared W2's rows; `medusa/projection.py`): "fp32",
    # "int8" (weight-only: a quarter of the bytes, the drafter's approximation, never the target's) or "auto"
    # (`measure_heads` times both where the int8 kernel runs and keeps the faster).
    head_weights: str = "fp32"
    score_seconds: dict[str, float] = field(default_factory=dict)  # weights -> seconds to draft all K heads
    _quantized: dict = field(default_factory=dict, repr=False)  # "int8": LM head and W1, quantised once
    _options: dict = field(default_factory=dict, repr=False)  # (accuracy model, max budget) -> tree options

    def __post_init__(self):
        if self.head_weights not in ("auto", *WEIGHTS):
            raise ValueError(f"head_weights must be 'auto', 'fp32' or 'int8', got {self.head_weights!r}")

    def scorer(self, weight: torch.Tensor, rows: torch.Tensor | None, weights: str | None = None):
        """RowScorer of the heads' features on `rows` of `weight` (V, H), the shared W2; None when every head
        has its own W2."""
        if not self.heads.config.shared_lm_head:
            return None
        weights = weights or self.head_weights
        return RowScorer.build(weight, rows, "fp32" if weights == "auto" else weights, self._quantized)

    def blocks(self, h: torch.Tensor, depth: int) -> torch.Tensor:
        """(D, H) heads 1..depth's residual blocks on h (H,): x_k <- x_k + SiLU(W1_k x_k + b1_k), per layer."""
        heads = self.heads
        x = h.to(heads.w1.dtype)
        if self.block_kernel == "mv" or self.head_weights == "int8":
            return torch.stack([self.head_block(x, k) for k in range(depth)])  # (D, H)
        x = x[None].expand(depth, -1)  # (D, H) every head reads the same h_a
        for layer in range(heads.config.num_layers):
            w1, b1 = heads.w1[layer, :depth], heads.b1[layer, :depth]  # (D, H, H), (D, H)
            x = x + F.silu(torch.baddbmm(b1[:, :, None], w1, x[:, :, None])[:, :, 0])
        return x

    def head_block(self, x: torch.Tensor, head: int) -> torch.Tensor:
        """(H,) head `head` (0-based)'s residual blocks alone on x (H,), one matrix-vector product a layer
        (int8 weights: one weight-only int8 product a layer; the residual stream stays in x's dtype)."""
        heads = self.heads
        if self.head_weights == "int8":
            q, scales = self._int8_blocks()  # (L, K, H, H) int8, (L, K, H) bf16
            for layer in range(heads.config.num_layers):
                w1x = int8_mm(x[None], q[layer, head], scales[layer, head])[0]  # (H,) ≈ W1 x
                x = x + F.silu(w1x + heads.b1[layer, head])
            return x
        for layer in range(heads.config.num_layers):
            x = x + F.silu(torch.addmv(heads.b1[layer, head], heads.w1[layer, head], x))  # b1 + W1 x, one op
        return x

    def _int8_blocks(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The heads' W1 quantised per output row, once: (L, K, H, H) int8 and (L, K, H) bf16 scales."""
        if "blocks" not in self._quantized:
            w1 = self.heads.w1
            q, scales = quantize_rows(w1.reshape(-1, w1.shape[-1]))
            self._quantized["blocks"] = (q.view(w1.shape), scales.to(torch.bfloat16).view(w1.shape[:-1]))
        return self._quantized["blocks"]

    def tree_options(self, accuracy: str, max_budget: int) -> list[TreeOption]:
        """The candidate trees of `tree="auto"` under the calibrated accuracy model `accuracy`, every size up to
        `max_budget` at every depth the heads reach (`trees.tree_options`): a function of the calibration
        alone, built once per drafter; a run prices them on its cost model."""
        key = (accuracy, max_budget)
        if key not in self._options:
            acc = self.accuracies.model(accuracy)
            self._options[key] = tree_options(acc, max_budget, max_depth=min(acc.shape[0], self.heads.num_heads))
        return self._options[key]

    def rows(self, prompt: Sequence[int]) -> torch.Tensor | None:
        """(M,) sorted head rows to score: the drafting vocabulary ∪ the prompt's tokens; None = all."""
        if self.vocab is None:
            return None
        ids = sorted(set(self.vocab.tolist()) | set(prompt))
        return torch.tensor(ids, dtype=torch.long, device=self.vocab.device)

    @torch.inference_mode()
    def candidates(self, h: torch.Tensor, depth: int, width: int, score: RowScorer | None, rows) -> torch.Tensor:
        """(D, s) token ids: heads 1..depth's top-`width` on h (H,), scored by `score` (shared W2: one matmul
        for all D heads, the same rows) or by each head's own W2 (`score` None)."""
        heads = self.heads
        x = self.blocks(h, depth)  # (D, H) heads 1..D only
        if score is not None:
            logits = score(x)  # (D, M)
        else:
            logits = torch.einsum("dh,dvh->dv", x, heads.w2[:depth] if rows is None else heads.w2[:depth, rows])
        top = logits.topk(width, dim=-1).indices  # (D, s)
        return top if rows is None else rows[top]

    @torch.inference_mode()
    def head_top(self, h: torch.Tensor, head: int, width: int, score: RowScorer | None, rows) -> tuple[list, list]:
        """Head `head` (0-based) alone on h (H,): its top-`width` softmax probabilities over the scored rows
        and their token ids (a dynamic tree computes heads one at a time, only as deep as it goes)."""
        heads = self.heads
        x = self.head_block(h.to(heads.w1.dtype), head)  # (H,)
        if score is not None:
            logits = score(x[None])[0]  # (M,)
        else:
            logits = (heads.w2[head] if rows is None else heads.w2[head, rows]) @ x
        top = logits.float().softmax(-1).topk(width)
        ids = top.indices if rows is None else rows[top.indices]
        return top.values.tolist(), ids.tolist()

    @torch.inference_mode()
    def measure_heads(self, weight: torch.Tensor, rows, repeats: int = 7) -> dict[int, float]:
        """On this device: pick the faster block kernel (all K heads, both kernels timed); under
        head_weights="auto" the faster scorer (fp32 or int8, where the int8 kernel runs); then the median
        seconds of `candidates` for each depth 1..K (top-10). `weight` (V, H) is the shared W2."""
        h = torch.zeros(weight.shape[1], device=weight.device, dtype=weight.dtype)
        K = self.heads.num_heads
        for kernel in ("bmm", "mv"):
            self.block_kernel = kernel
            self.block_seconds[kernel] = _median_seconds(lambda: self.blocks(h, K), h.device, repeats)
        self.block_kernel = min(self.block_seconds, key=self.block_seconds.get)
        if self.head_weights == "auto":  # all K heads drafted both ways; the faster way is kept
            options = ["fp32"] + (["int8"] if self.heads.config.shared_lm_head and int8_kernel_works(h.device) else [])
            for weights in options:
                self.head_weights, score = weights, self.scorer(weight, rows, weights)
                self.score_seconds[weights] = _median_seconds(
                    lambda s=score: self.candidates(h, K, 10, s, rows), h.device, repeats
                )
            self.head_weights = min(self.score_seconds, key=self.score_seconds.get)
        score = self.scorer(weight, rows)
        for depth in range(1, K + 1):
            self.head_seconds[depth] = _median_seconds(
                lambda d=depth: self.candidates(h, d, 10, score, rows), h.device, repeats
            )
        return self.head_seconds


def _median_seconds(fn, device, repeats: int) -> float:
    """Median wall time of `fn()` over `repeats` calls, after two warm-up calls (device synchronised)."""
    times = []
    for _ in range(repeats + 2):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:])


# target -> {heads argument: Drafter}; weakly keyed like draft_model._LOADED (a freed model's entries go too)
_DRAFTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def get_drafter(heads: str | MedusaHeads, target, vocab: str = "auto", head_weights: str = "auto") -> Drafter:
    """Resolve a heads argument ("default", a folder, or MedusaHeads) for `target`, once per process."""
    from . import shipped_heads_path

    if isinstance(heads, Drafter):
        return heads
    if isinstance(heads, MedusaHeads):
        return Drafter(heads=heads, source=None, vocab=None, accuracies=None, head_weights=head_weights)
    key = (str(heads), vocab, head_weights)
    loaded = _DRAFTERS.setdefault(target, {})
    if key not in loaded:
        folder = shipped_heads_path() if heads == "default" else Path(heads).expanduser()
        if not folder.is_dir():
            raise ValueError(f"no Medusa heads at {folder}: pass heads='default', a heads folder, or MedusaHeads")
        device = next(target.parameters()).device
        loaded_heads = load_heads(folder, target, dtype=target.dtype, device=device)
        if loaded_heads.config.vocab_size != target.get_output_embeddings().weight.shape[0]:
            raise ValueError(f"heads at {folder} are for a vocabulary of {loaded_heads.config.vocab_size}, "
                             f"the target has {target.get_output_embeddings().weight.shape[0]}")  # fmt: skip
        use_draft_vocab = vocab == "draft" or (vocab == "auto" and heads == "default")
        calib = folder / CALIBRATION
        record = json.loads(calib.read_text()) if calib.exists() else None
        loaded[key] = Drafter(
            heads=loaded_heads,
            source=folder,
            vocab=drafting_vocab(SHIPPED_VOCAB, device) if use_draft_vocab else None,
            accuracies=HeadAccuracies.from_dict(record) if record else None,
            confidence=HeadConfidence.from_dict(record["confidence"]) if record and record.get("confidence") else None,
            head_weights=head_weights,
        )
    return loaded[key]
