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
    oneDNN    layers (ms)    26     23     18     17     23     27     (weights packed once)
              LM head (ms)  5.0    4.6    3.9    3.6    3.9      -
    (* one row padded to two)

Two kernels, chosen by the number of rows:
* M <= 2: (W @ x^T)^T — a GEMM with the large matrix as the left operand streams W at ~30 GB/s. For a
  single row the matrix-vector path (gemv) is itself slow, so the row is duplicated (a 2-column GEMM).
* 3 <= M <= PACKED_MAX_ROWS: oneDNN's inner product on a copy of W reordered once into its blocked
  layout (`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's CPU freezing uses). Its cost
  hardly grows with M: a whole SmolLM2 forward of 16 tokens costs ~1.7× one token instead of ~2.6×.
  That flat curve is what makes verifying trees (Medusa, Lookahead, deeper drafts) cheap on a CPU.
  The price is memory: the packed copy doubles the weights' footprint (`use_fast_linear(pack=False)`
  keeps one copy and uses W @ x^T up to MAX_ROWS rows). Packed lazily, on the first call that needs
  it, and again whenever the weight changes in place (tracked by its version counter).
* Larger M (long prefills, training) and accelerators: `F.linear`, unchanged.

Numerics: every output is the same dot product; only the order of the floating-point sums inside the
kernels differs from `F.linear`'s, so values can differ in the last bits — as torch's own 1-row and
many-row paths already differ from each other. Exact speculative decoding compares the target's argmax
(or its distribution) at each node with what one-token decoding would give, so the same model must be
used for both; `bench` runs every method on one model object, and the exactness tests run with this on.

    model = use_fast_linear(model)   # every nn.Linear -> FastLinear (same Parameters: tying kept)
    restore_linear(model)            # back to stock nn.Linear

Swapping module instances is model surgery on one object (as quantization libraries do), not a patch
of a library class: other models in the process are untouched.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

__all__ = [
    "MAX_ROWS",
    "PACKED_MIN_ROWS",
    "PACKED_MAX_ROWS",
    "ONEDNN",
    "small_linear",
    "pack_weight",
    "FastLinear",
    "use_fast_linear",
    "restore_linear",
    "uses_fast_linear",
    "linear_kind",
    "match_linear",
]

MAX_ROWS = 16  # without a packed weight: up to this many rows W @ x^T wins on the CPUs measured
PACKED_MIN_ROWS = 3  # with one: 1-2 rows still take W @ x^T (oneDNN is slower there) ...
PACKED_MAX_ROWS = 64  # ... 3..64 rows take oneDNN; beyond, F.linear


def _onednn_available() -> bool:
    """oneDNN's packed inner product exists in this torch build and runs (x86 CPU builds)."""
    try:
        w = torch.ops.mkldnn._reorder_linear_weight(torch.ones(4, 8), PACKED_MIN_ROWS)
        out = torch.ops.mkldnn._linear_pointwise(torch.ones(3, 8), w, None, "none", [None], "")
        return bool(torch.backends.mkldnn.is_available() and torch.allclose(out, torch.full((3, 4), 8.0)))
    except (AttributeError, RuntimeError):
        return False


ONEDNN = _onednn_available()


def pack_weight(weight: torch.Tensor) -> torch.Tensor:
    """weight (N, K) fp32 -> oneDNN's blocked copy for `small_linear(..., packed=)` (same values)."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), 4)  # layout tuned for ~4-row inputs


def _rows(x: torch.Tensor) -> int:
    """Activation rows in x (..., K): the M of the product."""
    return x.numel() // x.shape[-1] if x.shape[-1] else 0


def _packed_path(x: torch.Tensor, rows: int) -> bool:
    """True when a product with this many rows of x takes the packed-weight (oneDNN) kernel."""
    return x.device.type == "cpu" and PACKED_MIN_ROWS <= rows <= PACKED_MAX_ROWS


def small_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, packed: torch.Tensor | None = None
) -> torch.Tensor:
    """x (..., K) @ weight (N, K)^T (+ bias) -> (..., N), the bandwidth-bound way for few rows on CPU.

    packed: `pack_weight(weight)`, if the caller keeps one (3..PACKED_MAX_ROWS rows then use oneDNN).
    Same result as `F.linear(x, weight, bias)` up to floating-point summation order; falls back to it on
    accelerators, for many rows, and whenever autograd needs a graph (training keeps torch's kernels).
    """
    rows = _rows(x)
    training = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    if x.device.type != "cpu" or rows == 0 or training:
        return F.linear(x, weight, bias)
    if packed is not None and _packed_path(x, rows):
        out = torch.ops.mkldnn._linear_pointwise(x.reshape(rows, x.shape[-1]), packed, bias, "none", [None], "")
        return out.reshape(*x.shape[:-1], weight.shape[0])  # (..., N)
    if rows > MAX_ROWS:
        return F.linear(x, weight, bias)
    x2 = x.reshape(rows, x.shape[-1])  # (M, K)
    if rows == 1:
        x2 = torch.cat([x2, x2])  # (2, K): a 2-column GEMM streams W ~3x faster than gemv here
    out = (weight @ x2.T).T[:rows]  # (M, N)
    if bias is not None:
        out = out + bias
    return out.contiguous().reshape(*x.shape[:-1], weight.shape[0])


_PACK_CACHE = ("_pack", "_pack_key")  # FastLinear's cache attributes: the packed copy and what it was made from


class FastLinear(nn.Linear):
    """`nn.Linear` whose forward is `small_linear` (identical parameters, state-dict keys and isinstance).

    `pack` (set by `use_fast_linear`): keep a oneDNN-packed copy of the weight for 3..PACKED_MAX_ROWS
    rows. The copy is a plain attribute (never saved, never copied) keyed by the weight's storage and
    version, so loading or editing weights in place repacks; parametrized weights are never packed.
    """

    pack: bool = True

    def _packed(self) -> torch.Tensor | None:
        w = self.weight
        if not (self.pack and ONEDNN and w.dtype == torch.float32 and w.device.type == "cpu"):
            return None
        if parametrize.is_parametrized(self, "weight"):  # recomputed on every access: nothing to keep
            return None
        key = (w.data_ptr(), w._version, tuple(w.shape))
        if self.__dict__.get("_pack_key") != key:
            self.__dict__["_pack"], self.__dict__["_pack_key"] = pack_weight(w), key
        return self.__dict__["_pack"]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wants_pack = _packed_path(x, _rows(x)) and not torch.is_grad_enabled()  # packed lazily, when needed
        return small_linear(x, self.weight, self.bias, packed=self._packed() if wants_pack else None)

    def drop_packed(self) -> None:
        """Forget the packed copy (it is rebuilt on the next call that needs it, if `pack` is on)."""
        for key in _PACK_CACHE:
            self.__dict__.pop(key, None)

    def __getstate__(self):  # copy.deepcopy / pickle: the packed copy is a cache, rebuilt on demand
        return {k: v for k, v in super().__getstate__().items() if k not in _PACK_CACHE}


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


def use_fast_linear(model: nn.Module, pack: bool = True) -> nn.Module:
    """Replace every plain `nn.Linear` in `model` by a `FastLinear` sharing its parameters (in place).

    pack=False: no oneDNN-packed weight copies (half the memory; 3+ rows cost more, see the module doc).
    Applies `pack` to FastLinear modules already there too.
    """
    _swap(model, nn.Linear, FastLinear)
    for m in model.modules():
        if isinstance(m, FastLinear):
            m.pack = pack
            if not pack:
                m.drop_packed()
    return model


def restore_linear(model: nn.Module) -> nn.Module:
    """Undo `use_fast_linear`: plain `nn.Linear` modules with the same parameters (in place)."""
    return _swap(model, FastLinear, nn.Linear)


def uses_fast_linear(model: nn.Module) -> bool:
    """True when any linear layer of `model` is a `FastLinear` (what `use_fast_linear` installs)."""
    return any(isinstance(m, FastLinear) for m in model.modules())


def match_linear(model: nn.Module, like: nn.Module) -> nn.Module:
    """Give `model` the linear kernels `like` runs (a draft or assistant decodes the way its target does)."""
    kind = linear_kind(like)
    if kind != "stock":
        use_fast_linear(model, pack=kind == "fast+onednn")
    return model


def linear_kind(model: nn.Module) -> str:
    """What the model runs: "stock", "fast" (W @ x^T only) or "fast+onednn" (packed weights for 3+ rows)."""
    fast = [m for m in model.modules() if isinstance(m, FastLinear)]
    if not fast:
        return "stock"
    return "fast+onednn" if ONEDNN and any(m.pack for m in fast) else "fast"
