"""Medusa heads (Cai et al. 2024): K extra decoding heads on the target's last hidden state.

The base LM head ("head 0") reads h_t, the last hidden state after token t, and predicts x_{t+1}.
Medusa head k = 1..K reads the same h_t and predicts x_{t+k+1}, the token k positions after that one:

    p_t^(k) = softmax(W2^(k) . (SiLU(W1^(k) . h_t + b1^(k)) + h_t))          one residual block
    (num_layers > 1 stacks more blocks: x <- x + SiLU(W1 x + b1), then W2)

Two variants:
* separate W2^(k) per head, each (V, H) and trainable (the paper's; FasterDecoding initialises it from the
  LM head). For SmolLM2 that is 49152 x 576 = 28M parameters per head: 57 MB fp16 each.
* W2 shared with the target's frozen LM head (`shared_lm_head=True`): a head is then only its residual
  block (576 x 576 + 576 = 0.66 MB fp16), and all K heads' logits come from ONE matmul
  (N, K, H) @ (H, V) -> (N, K, V), since the projection is the same matrix for every head.

W1 starts at zero, so SiLU(0) = 0 and every head starts out as a copy of the base head (it predicts
x_{t+1}); training moves each one forward by k tokens. Parameters are stacked over (layer, head) so the
residual blocks of all heads also run as one batched matmul.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..models.fast_linear import small_linear

__all__ = [
    "MedusaConfig",
    "MedusaHeads",
    "IGNORE_INDEX",
    "medusa_labels",
    "loss_weights",
    "medusa_loss",
    "weighted_head_loss",
    "FrozenHeadCE",
    "frozen_head_loss",
]

IGNORE_INDEX = -100  # label of positions without a target (prompt tokens, past the end), as in HF/PyTorch


@dataclass
class MedusaConfig:
    hidden_size: int  # H, the target's hidden size
    vocab_size: int  # V
    num_heads: int = 4  # K
    num_layers: int = 1  # residual blocks per head
    shared_lm_head: bool = True  # W2 = the target's frozen LM head (else one trainable W2 per head)
    base_model: str = ""  # the target these heads were trained on (informational)

    def __post_init__(self):
        if self.num_heads < 1 or self.num_layers < 1:
            raise ValueError(f"need num_heads >= 1 and num_layers >= 1, got {self.num_heads}, {self.num_layers}")


class MedusaHeads(nn.Module):
    """K Medusa heads. `heads(h)`: (..., H) hidden states -> (..., K, V) logits of heads 1..K.

    lm_head_weight: the target's (V, H) output embedding. Required for the shared variant, where it is
    held as a non-persistent buffer sharing the target's storage (never copied, never saved, never
    trained); for the separate variant it initialises every W2 (a random init is used without it).
    """

    def __init__(self, config: MedusaConfig, lm_head_weight: torch.Tensor | None = None):
        super().__init__()
        self.config = config
        k, n, h, v = config.num_heads, config.num_layers, config.hidden_size, config.vocab_size
        if lm_head_weight is not None and tuple(lm_head_weight.shape) != (v, h):
            raise ValueError(f"lm_head_weight has shape {tuple(lm_head_weight.shape)}, expected {(v, h)}")
        self.w1 = nn.Parameter(torch.zeros(n, k, h, h))  # (layers, K, H_out, H_in), nn.Linear layout
        self.b1 = nn.Parameter(torch.zeros(n, k, h))  # (layers, K, H)
        if config.shared_lm_head:
            if lm_head_weight is None:
                raise ValueError("the shared-LM-head variant needs the target's lm_head_weight (V, H)")
            self.register_buffer("lm_head_weight", lm_head_weight.detach(), persistent=False)
            self.register_parameter("w2", None)
        else:
            init = lm_head_weight.detach().float() if lm_head_weight is not None else torch.randn(v, h) * 0.02
            self.w2 = nn.Parameter(init[None].repeat(k, 1, 1))  # (K, V, H)
            self.register_buffer("lm_head_weight", None, persistent=False)

    @classmethod
    def for_model(
        cls, model, num_heads: int = 4, num_layers: int = 1, shared_lm_head: bool = True, base_model: str = ""
    ) -> MedusaHeads:
        """Fresh heads sized for an HF causal LM (its output embedding is the shared/initial W2)."""
        text = model.config.get_text_config(decoder=True)
        weight = model.get_output_embeddings().weight
        config = MedusaConfig(
            hidden_size=text.hidden_size,
            vocab_size=weight.shape[0],
            num_heads=num_heads,
            num_layers=num_layers,
            shared_lm_head=shared_lm_head,
            base_model=base_model or getattr(model.config, "name_or_path", "") or "",
        )
        heads = cls(config, weight)
        return heads.to(device=weight.device)

    @property
    def num_heads(self) -> int:
        return self.config.num_heads

    def features(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., K, H): every head's residual stack applied to the same h_t."""
        x = h.to(self.w1.dtype).unsqueeze(-2).expand(*h.shape[:-1], self.num_heads, h.shape[-1])
        for layer in range(self.config.num_layers):
            # x_k <- x_k + SiLU(W1_k x_k + b1_k), all K heads in one batched matmul
            x = x + F.silu(torch.einsum("...ki,koi->...ko", x, self.w1[layer]) + self.b1[layer])
        return x

    def project(self, x: torch.Tensor) -> torch.Tensor:
        """(..., K, H) -> (..., K, V) logits."""
        if self.config.shared_lm_head:
            # one (N*K, H) x (H, V) matmul for all K heads: the same W2. Flattened by hand: a batched
            # (..., K, H) @ (H, V) can make torch broadcast W2 into a bmm, copying it per row (slow).
            # Few rows (decoding) take `small_linear`'s bandwidth-bound path on CPU.
            w = self.lm_head_weight.to(x.dtype)
            return small_linear(x.reshape(-1, x.shape[-1]), w).view(*x.shape[:-1], w.shape[0])
        return torch.einsum("...kh,kvh->...kv", x, self.w2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., K, V): logits of heads 1..K (head k predicts x_{t+k+1})."""
        return self.project(self.features(h))

    def head_logits(self, h: torch.Tensor, k: int) -> torch.Tensor:
        """(..., H) -> (..., V): head k (1-based) alone, with plain per-head matmuls (the reference)."""
        x = h.to(self.w1.dtype)
        for layer in range(self.config.num_layers):
            x = x + F.silu(F.linear(x, self.w1[layer, k - 1], self.b1[layer, k - 1]))
        w2 = self.lm_head_weight.to(x.dtype) if self.config.shared_lm_head else self.w2[k - 1]
        return F.linear(x, w2)

    def extra_repr(self) -> str:
        c = self.config
        return f"K={c.num_heads}, layers={c.num_layers}, H={c.hidden_size}, V={c.vocab_size}, shared={c.shared_lm_head}"


def medusa_labels(ids: torch.Tensor, prompt_length: int, num_heads: int) -> torch.Tensor:
    """(T,) token ids -> (T, K+1) labels: column k is head k's target at every position t.

    labels[t, k] = ids[t + k + 1]   (k = 0: the base LM head's next token; k >= 1: Medusa head k)
    IGNORE_INDEX where t + k + 1 is past the end or inside the prompt (only the response is the target's
    own text, so only it is trained on).
    """
    t = ids.shape[0]
    labels = torch.full((t, num_heads + 1), IGNORE_INDEX, dtype=torch.long)
    for k in range(num_heads + 1):
        first = max(prompt_length - k - 1, 0)  # smallest t with t + k + 1 >= prompt_length
        if first < t - k - 1:
            labels[first : t - k - 1, k] = ids[first + k + 1 :]
    return labels


def loss_weights(num_heads: int, decay: float = 0.8) -> torch.Tensor:
    """(K,) lambda_k = decay^k for heads k = 1..K (Medusa-1's loss weights; the paper's 0.8^k).

    Later heads see a harder task and noisier gradients, so they count less. FasterDecoding's code uses
    decay^(k-1) (head 1 weighted 1.0): the same up to an overall factor, which Adam ignores.
    """
    return torch.tensor([decay**k for k in range(1, num_heads + 1)])


def weighted_head_loss(ce: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor):
    """(N, K) per-row CE (0 where ignored) -> (sum_k lambda_k CE_k, per-head mean CE_k (K,))."""
    counts = (labels != IGNORE_INDEX).sum(0).clamp(min=1)  # (K,)
    per_head = ce.sum(0) / counts  # (K,)
    return (weights.to(per_head) * per_head).sum(), per_head


def medusa_loss(logits: torch.Tensor, labels: torch.Tensor, weights: torch.Tensor):
    """L = sum_k lambda_k CE_k. logits (N, K, V), labels (N, K), weights (K,) -> (L, per-head CE (K,)).

    CE_k is the mean over positions where head k has a label; cross-entropy runs in fp32 whatever the
    logits' dtype (a bf16 log-softmax over 49k entries loses too much).
    """
    n, k, v = logits.shape
    ce = F.cross_entropy(
        logits.reshape(n * k, v).float(), labels.reshape(n * k), ignore_index=IGNORE_INDEX, reduction="none"
    ).view(n, k)  # (N, K), 0 where ignored
    return weighted_head_loss(ce, labels, weights)


class FrozenHeadCE(torch.autograd.Function):
    """Per-row cross-entropy of features z (M, H) through a frozen projection W (V, H): fused, chunked.

    Since W is frozen, the only gradient is dCE/dz = (softmax(z W^T) - t) W, with t the target
    distribution, which needs nothing but the chunk's logits: we compute it right in the forward, chunk by
    chunk, and keep only that (M, H) result. The (M, V) logits never exist at once and never enter autograd
    (no saved logits, no separate log-softmax backward, no zero-filled (M, V) gradient) — on CPU that
    memory traffic costs as much as the matmuls. Rows labelled IGNORE_INDEX get CE 0 and no gradient.
    Matmuls run in W's dtype (bf16 for speed), the softmax in fp32. Same idea as Liger's fused linear
    cross-entropy.

    Soft targets (self-distillation of the whole distribution, not just its argmax): with `teacher`
    (M, H) hidden states, t = (1 - beta) onehot(y) + beta softmax(teacher W^T) and the loss is the
    cross-entropy against that mixture, lse(z W^T) - sum_v t_v (z W^T)_v.
    """

    @staticmethod
    def forward(ctx, z, w, labels, teacher=None, beta: float = 0.0, chunk: int = 512):
        ce = torch.zeros(z.shape[0], dtype=torch.float32, device=z.device)  # (M,)
        grad = torch.zeros(z.shape, dtype=torch.float32, device=z.device)  # (M, H)
        soft = teacher is not None and beta > 0
        for a in range(0, z.shape[0], chunk):
            y = labels[a : a + chunk]
            valid = y != IGNORE_INDEX
            y = y.clamp(min=0)
            rows = torch.arange(len(y), device=y.device)
            logits = (z[a : a + chunk].to(w.dtype) @ w.T).float()  # (C, V)
            picked = logits.gather(1, y[:, None])[:, 0]  # (C,) logit of the label
            if soft:
                pt = torch.softmax((teacher[a : a + chunk].to(w.dtype) @ w.T).float(), dim=-1)  # (C, V)
                picked = (1 - beta) * picked + beta * (pt * logits).sum(-1)  # (C,) sum_v t_v logit_v
            top = logits.amax(dim=-1, keepdim=True)  # (C, 1)
            p = logits.sub_(top).exp_()  # (C, V) exp(logit - max), in place: one pass, no copies
            total = p.sum(dim=-1, keepdim=True)  # (C, 1)
            ce[a : a + chunk] = torch.where(valid, (top + total.log())[:, 0] - picked, 0.0)  # lse - <t, logit>
            p.div_(total)  # softmax
            if soft:
                p.sub_(pt, alpha=beta)
                p[rows, y] -= 1.0 - beta  # softmax - t
            else:
                p[rows, y] -= 1.0  # softmax - onehot
            p.mul_(valid[:, None])
            grad[a : a + chunk] = (p.to(w.dtype) @ w).float()  # (C, H)
        ctx.save_for_backward(grad)
        return ce

    @staticmethod
    def backward(ctx, grad_ce: torch.Tensor):
        (grad,) = ctx.saved_tensors
        return (grad * grad_ce[:, None]).to(grad_ce.dtype), None, None, None, None, None


def frozen_head_loss(
    z: torch.Tensor,
    w: torch.Tensor,
    labels: torch.Tensor,
    weights: torch.Tensor,
    teacher: torch.Tensor | None = None,
    beta: float = 0.0,
):
    """`medusa_loss` for heads whose W2 is frozen: z (N, K, H) features -> (L, per-head CE (K,)).

    teacher (N, K, H): the target's hidden state h_{t+k} whose LM-head distribution is head k's soft
    target (mixed in with weight beta; see FrozenHeadCE).
    """
    n, k, h = z.shape
    t = None if teacher is None else teacher.reshape(n * k, h)
    ce = FrozenHeadCE.apply(z.reshape(n * k, h), w, labels.reshape(n * k), t, beta).view(n, k)
    return weighted_head_loss(ce, labels, weights)
