"""Linear layers for a few rows at a time, at memory bandwidth on CPUs.

Decoding multiplies a handful of activation rows x (M, K) — one token, or the few nodes of a draft tree
— by every weight matrix W (N, K) of the model. That is memory-bound: the time should be the time to
stream W once, whatever M is. On CPUs torch's `F.linear` (x @ W^T through MKL) is far from it for small
M, and not even monotonic. Measured here (2 cores, fp32; all 30 layers' matrices of SmolLM2-135M, each
read from DRAM, then the 49152 × 576 LM head):

    rows M                    1      2      3      4      8     16
    F.linear  layers (ms)    34     50     58     46     50     59
              LM head (ms)  9.3   21.3   31.3   16.5   17.2   19.0
    W @ x^T   layers (ms)    15*  13.5   21.9   20.7   34.5   41.9
              LM head (ms)  2.8*   2.8    4.2    4.0    7.3   13.1
    (* one row padded to two)

The same product computed as (W @ x^T)^T — a GEMM with the large matrix as the left operand — streams
W at ~30 GB/s. For a single row the matrix-vector path (gemv) is itself slow, so the row is duplicated
and the product taken as a two-column GEMM. From ~16 rows on (prefill, training) `F.linear` is as fast
or faster and is used unchanged.

Numerics: every output is the same dot product; only the order of the floating-point sums inside MKL
may differ from `F.linear`'s, so values can differ in the last bits — as torch's own 1-row and many-row
paths already differ from each other. Exact speculative decoding compares the target's argmax (or its
distribution) at each node with what one-token decoding would give, so the same model must be used for
both; `bench` runs every method on one model object, and the exactness tests run with this layer on.

    model = use_fast_linear(model)   # every nn.Linear -> FastLinear (same Parameters: tying kept)
    restore_linear(model)            # back to stock nn.Linear

Swapping module instances is model surgery on one object (as quantization libraries do), not a patch
of a library class: other models in the process are untouched.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["MAX_ROWS", "small_linear", "FastLinear", "use_fast_linear", "restore_linear", "uses_fast_linear"]

MAX_ROWS = 16  # up to this many rows the W @ x^T form wins on the CPUs measured; beyond, F.linear


def small_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x (..., K) @ weight (N, K)^T (+ bias) -> (..., N), the bandwidth-bound way for few rows on CPU.

    Same result as `F.linear(x, weight, bias)` up to floating-point summation order; falls back to it on
    accelerators, for many rows, and whenever autograd needs a graph (training keeps torch's kernels).
    """
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    training = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    if x.device.type != "cpu" or rows == 0 or rows > MAX_ROWS or training:
        return F.linear(x, weight, bias)
    x2 = x.reshape(rows, x.shape[-1])  # (M, K)
    if rows == 1:
        x2 = torch.cat([x2, x2])  # (2, K): a 2-column GEMM streams W ~3x faster than gemv here
    out = (weight @ x2.T).T[:rows]  # (M, N)
    if bias is not None:
        out = out + bias
    return out.contiguous().reshape(*x.shape[:-1], weight.shape[0])


class FastLinear(nn.Linear):
    """`nn.Linear` whose forward is `small_linear` (identical parameters, state-dict keys and isinstance)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return small_linear(x, self.weight, self.bias)


def _relink(cls: type[nn.Linear], linear: nn.Linear) -> nn.Linear:
    """A `cls` instance holding the very Parameter objects of `linear` (tied weights stay tied)."""
    new = cls.__new__(cls)
    nn.Module.__init__(new)
    new.in_features, new.out_features = linear.in_features, linear.out_features
    new.weight, new.bias = linear.weight, linear.bias
    new.train(linear.training)
    return new


def _swap(model: nn.Module, old: type[nn.Linear], new: type[nn.Linear]) -> nn.Module:
    """Replace every submodule of exactly type `old` by a `new` sharing its parameters (in place)."""
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is old:
                setattr(parent, name, _relink(new, child))
    return model


def use_fast_linear(model: nn.Module) -> nn.Module:
    """Replace every plain `nn.Linear` in `model` by a `FastLinear` sharing its parameters (in place)."""
    return _swap(model, nn.Linear, FastLinear)


def restore_linear(model: nn.Module) -> nn.Module:
    """Undo `use_fast_linear`: plain `nn.Linear` modules with the same parameters (in place)."""
    return _swap(model, FastLinear, nn.Linear)


def uses_fast_linear(model: nn.Module) -> bool:
    """True when any linear layer of `model` is a `FastLinear` (what `use_fast_linear` installs)."""
    return any(isinstance(m, FastLinear) for m in model.modules())
