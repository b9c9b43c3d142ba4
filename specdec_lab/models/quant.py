"""Weight-only quantized linear layers: int8 per output channel, int4 in groups of 32, on torch's CPU kernels.

A decoding step streams every weight once, so on a CPU its time is mostly bytes: 4 per fp32 weight, 1 in
int8, half a byte (plus an 8-byte scale and zero per 32) in int4. `QuantLinear` holds a (N, K) weight in one
of two formats and multiplies with torch's own weight-only kernels (no torchao needed):

* "int8": symmetric per output channel, W[n] ≈ s[n] * q[n], q in -127..127, s[n] = max|W[n]| / 127
  (`quantize_rows`, gpt-fast's int8), through `torch._weight_int8pack_mm` (`int8_mm`; Medusa's
  drafting scores and residual blocks use the same product).
* "int4": asymmetric per group of 32 inputs, W[n, k] = d * q + m with q in 0..15 — llama.cpp's Q4_1 —
  through `torch._convert_weight_to_int4pack_for_cpu` / `torch._weight_int4pack_mm_for_cpu`. torch's kernel
  de-quantizes (q - 8) * scale + zero, so Q4_1's (d, m) enter as scale = d, zero = m + 8 d (exact in fp32).
  The shipped GGUF stores every decoder linear in Q4_1: `load_model(weights="int4")` loads those very
  codes, scales and minima (`models.gguf.read_q4_1`) without requantising; models without Q4_1 data (tiny
  test models, HF folders) are quantized here by Q4_1's own rule (d = (max - min) / 15, m = min per group).

Activations: both kernels take fp32 or bf16 activations, with scales in the same dtype, and return that
dtype. Their bf16 path is the fast one — on an AVX-512 CPU the fp32 path is several times slower than the
fp32 weights it replaces — so `compute` (per format) is measured on this machine (`quant_plan`, cached like
`fast_linear`'s plans) and is bf16 wherever that path wins. In bf16, activations, the outputs and the
scales are rounded to bf16 (8-bit mantissa): Q4_1's fp16 scales then move by up to 2^-9 of themselves, so
the int4 model is the file's 4-bit codes with its block scales rounded to bf16 (compute="float32" keeps
them exact). The rest of the model (norms, attention, residuals) stays fp32; only each linear layer's
product is quantized.

Exactness. Speculative decoding is exact when verifying n rows rounds like decoding one. Both kernels
compute each output row from that row alone, with the same order of sums whatever the row count (tested:
1-row and n-row products are bit-identical), so the kernel is the same at every row count, never switched
by a plan as `fast_linear`'s fp32 kernels are. The rest of the model is not row-invariant by itself:
attention over 1 query and over n queries (and the fp32 LM head's per-row-count kernels) differ in the last
bits, as in fp32, and with bf16 activations the cast into each linear layer turns such a last-bit
difference into a bf16 step now and then. The compiled step closes that gap for quantized weights
(`CompiledStep.exact_rows`, `row_invariance.py`: row-invariant attention summed in cache-slot order, the
head pinned to one kernel): there every method's output, on chains and branching trees, equals the
quantized model's own autoregressive output by construction. Eager
quantized decoding keeps torch's SDPA kernel and equals it except at near-ties (the bench's `first_diff` /
`top2_gap` say where); with compute="float32" the differences stay at fp32's size.

LM head (SmolLM2: the tied embedding, 49,152 × 576 — in fp32 113 MB a step, more than all 30 int4 decoder layers
together). head="q8_0" holds the file's own Q8_0 blocks (`models.gguf.read_q8_0_head`: int8 codes, an fp16
scale per 32 inputs — what llama.cpp reads for this file), or blocks made by Q8_0's rule where the model has
none. torch has no block-scaled int8 kernel (`_weight_int8pack_mm` takes one scale per row), but its int4
kernel takes a scale and a zero per 32 inputs, so a Q8_0 code q in -128..127 is split into two 4-bit planes,
q = 16·hi + lo with hi in -8..7 and lo in 0..15, each a 32-block of the int4 layout:

    hi plane   code hi + 8, scale 16 d, zero 0     ->  (code − 8)·16 d + 0   = 16 d · hi
    lo plane   code lo,     scale d,    zero 8 d   ->  (code − 8)·d + 8 d    = d · lo

laid side by side along K (a (N, 2K) int4 weight) and multiplied by [x, x]: one int4 product whose sum over
2K inputs is Σ_k d q x_k, the file's weight. 2K/2 bytes of codes = the int8 bytes (28 MB) plus the scales.
In fp32 compute the head is the file's values up to summation order; in bf16, as for Q4_1, d is rounded to
bf16 (16 d and 8 d with it: powers of two). Like every QuantLinear it is row-invariant, so the compiled
step's exact rows need no pinned fp32 kernel for it. head="int8" quantizes per channel instead (requantised:
another rounding of the file's values); head="fp32" keeps the de-quantized fp32 weight. Quantized heads keep
the fp32 Parameter for the input embedding and for drafters that read `get_output_embeddings().weight`.

    model = quantize_model(model, "int4", q4_1=read_q4_1(path))   # every decoder linear -> QuantLinear
    weights_record(model)   # {"weights": "int4", "source": "gguf-q4_1", "compute": "bfloat16", "head": "fp32"}
"""

from __future__ import annotations

import time

import torch
from torch import nn

from ..io import cache_dir, write_json
from .fast_linear import _locked, _machine_key, _read, pack_weight, small_linear
from .gguf import BLOCK, Q4_1Blocks, Q8_0Blocks

__all__ = [
    "WEIGHTS",
    "GROUP",
    "COMPUTE",
    "check_weights",
    "quantize_q4_1",
    "QuantLinear",
    "quant_mm",
    "quantize_rows",
    "int8_mm",
    "int8_kernel_works",
    "quantize_model",
    "weights_kind",
    "weights_record",
    "float_state_dict",
    "measure_kernels",
    "quant_plan",
    "HEADS",
    "quantize_q8_0",
]

WEIGHTS = ("fp32", "int8", "int4")  # what `load_model(weights=)` and bench `--weights` accept
HEADS = ("fp32", "int8", "q8_0")  # what `quantize_model(head=)` accepts (`load_model(head_weights=)`: also "auto")
GROUP = BLOCK  # int4 group size along K: Q4_1's block of 32
COMPUTE = {"bfloat16": torch.bfloat16, "float32": torch.float32}  # activation dtype into the kernels
_INNER_K_TILES = 2  # int4 packing parameter (CPU layout; any of 2, 4, 8 gives the same values)


def check_weights(weights: str) -> str:
    """`weights` if it names a known format, else a ValueError listing them."""
    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHTS)}; got {weights!r}")
    return weights


def quantize_q4_1(weight: torch.Tensor, group: int = GROUP) -> Q4_1Blocks:
    """(N, K) float -> Q4_1 by llama.cpp's rule (quantize_row_q4_1_ref): per group d = (max - min) / 15, m =
    min, q = round((w - m) / d) in 0..15. Scales are kept in fp32 (no file to be exact to)."""
    n, k = weight.shape
    if k % group:
        raise ValueError(f"int4 quantizes groups of {group} inputs; a ({n}, {k}) weight has {k}, not a multiple")
    w = weight.detach().float().reshape(n, k // group, group)  # (N, G, 32)
    lo, hi = w.amin(-1), w.amax(-1)  # (N, G)
    d = (hi - lo) / 15
    inv = torch.where(d > 0, 1 / d, torch.zeros_like(d))  # a constant group: q = 0, w = m exactly
    codes = torch.round((w - lo[..., None]) * inv[..., None]).clamp(0, 15).to(torch.uint8)
    return Q4_1Blocks(codes=codes.reshape(n, k), d=d, m=lo)


def quantize_q8_0(weight: torch.Tensor, group: int = GROUP) -> Q8_0Blocks:
    """(N, K) float -> Q8_0 by llama.cpp's rule (quantize_row_q8_0_ref): per group d = max|w| / 127 (stored
    fp16), q = round(w / d) in -127..127."""
    n, k = weight.shape
    if k % group:
        raise ValueError(f"Q8_0 quantizes groups of {group} inputs; a ({n}, {k}) weight has {k}, not a multiple")
    w = weight.detach().float().reshape(n, k // group, group)  # (N, G, 32)
    d = (w.abs().amax(-1) / 127).half()  # (N, G) fp16, as the file stores it
    df = d.float()
    inv = torch.where(df > 0, 1 / df, torch.zeros_like(df))
    codes = torch.round(w * inv[..., None]).clamp(-127, 127).to(torch.int8)
    return Q8_0Blocks(codes=codes.reshape(n, k), d=d)


class QuantLinear(nn.Module):
    """y = x @ dequant(W)^T (+ bias) with torch's weight-only int8 or int4 kernel; x (..., K) -> (..., N).

    Buffers: "int8": qweight (N, K) int8, scales (N,); "int4": qweight (N, K/2) uint8 packed for the CPU
    kernel, scales_and_zeros (K/32, N, 2); "q8_0": the int4 layout of twice the inputs (module doc: qweight
    (N, K) uint8, scales_and_zeros (2K/32, N, 2)). Scales are held in `compute`, the activations' dtype inside
    the kernel; inputs and outputs keep the caller's dtype (fp32). `weight`: only on a quantized LM head, the
    fp32 Parameter it was made from (tied to the input embedding), for code that reads the head's rows.
    """

    def __init__(self, in_features: int, out_features: int, fmt: str, compute: str = "bfloat16"):
        super().__init__()
        if fmt not in ("int8", "int4", "q8_0"):
            raise ValueError(f"QuantLinear holds int8, int4 or q8_0 weights; got {fmt!r}")
        if compute not in COMPUTE:
            raise ValueError(f"compute must be one of {', '.join(COMPUTE)}; got {compute!r}")
        self.in_features, self.out_features, self.fmt, self.compute = in_features, out_features, fmt, compute
        self.source = "requantised"  # or "gguf-q4_1": the file's own blocks
        self.register_parameter("bias", None)

    # ---- construction ---------------------------------------------------------------------------------
    @classmethod
    def from_linear(cls, linear: nn.Linear, fmt: str, compute: str = "bfloat16", keep_weight: bool = False):
        """Quantize an nn.Linear's fp32 weight (int8 per channel, int4 by Q4_1's rule); bias kept fp32."""
        n, k = linear.weight.shape
        if fmt == "int4":
            layer = cls.from_q4_1(quantize_q4_1(linear.weight), compute=compute)
        else:
            layer = cls(k, n, fmt, compute)
            q, scales = quantize_rows(linear.weight)  # (N, K) int8, (N,) fp32
            layer.register_buffer("qweight", q)
            layer.register_buffer("scales", scales.to(COMPUTE[compute]))
        layer._set_bias(linear.bias)
        if keep_weight:
            layer.weight = linear.weight  # the same Parameter: ties and drafters' reads keep working
        return layer.to(linear.weight.device)

    @classmethod
    def from_q4_1(cls, blocks: Q4_1Blocks, bias: torch.Tensor | None = None, compute: str = "bfloat16"):
        """An int4 layer holding exactly these Q4_1 codes, with scale = d, zero = m + 8 d (in `compute`)."""
        n, k = blocks.shape
        if k % GROUP:
            raise ValueError(f"int4 quantizes groups of {GROUP} inputs; a ({n}, {k}) weight has {k}, not a multiple")
        layer = cls(k, n, "int4", compute)
        codes = blocks.codes.to(torch.int32).contiguous()  # (N, K) 0..15
        packed = torch._convert_weight_to_int4pack_for_cpu(codes, _INNER_K_TILES)  # (N, K/2) uint8
        d, m = blocks.d.float(), blocks.m.float()  # (N, G): fp16 -> fp32 is exact
        sz = torch.stack([d, m + 8 * d], dim=-1).transpose(0, 1).contiguous()  # (G, N, 2) scale, zero
        layer.register_buffer("qweight", packed)
        layer.register_buffer("scales_and_zeros", sz.to(COMPUTE[compute]))
        layer._set_bias(bias)
        return layer

    @classmethod
    def from_q8_0(cls, blocks: Q8_0Blocks, compute: str = "bfloat16", weight: nn.Parameter | None = None):
        """A "q8_0" layer holding exactly these Q8_0 codes as two int4 planes (module doc); `weight`: the fp32
        Parameter to keep (a quantized head's tie to the input embedding)."""
        n, k = blocks.shape
        if k % GROUP:
            raise ValueError(f"Q8_0 holds groups of {GROUP} inputs; a ({n}, {k}) weight has {k}, not a multiple")
        layer = cls(k, n, "q8_0", compute)
        q = blocks.codes.to(torch.int32)  # (N, K) in -128..127
        hi = torch.div(q, 16, rounding_mode="floor")  # (N, K) in -8..7
        lo = q - 16 * hi  # (N, K) in 0..15
        codes = torch.cat([hi + 8, lo], dim=1).contiguous()  # (N, 2K) in 0..15
        packed = torch._convert_weight_to_int4pack_for_cpu(codes, _INNER_K_TILES)  # (N, K) uint8
        d = blocks.d.float()  # (N, G): fp16 -> fp32 is exact
        planes = torch.cat([torch.stack([16 * d, torch.zeros_like(d)], -1), torch.stack([d, 8 * d], -1)], dim=1)
        layer.register_buffer("qweight", packed)
        layer.register_buffer("scales_and_zeros", planes.transpose(0, 1).contiguous().to(COMPUTE[compute]))
        if weight is not None:
            layer.weight = weight
        return layer.to(weight.device) if weight is not None else layer

    def _set_bias(self, bias: torch.Tensor | None) -> None:
        self.bias = None if bias is None else nn.Parameter(bias.detach().float().clone(), requires_grad=False)

    # ---- the product ----------------------------------------------------------------------------------
    def _mm(self, x2: torch.Tensor, compute: torch.dtype) -> torch.Tensor:
        """x2 (M, K) in `compute` -> (M, N) in `compute`."""
        scales = self.scales if self.fmt == "int8" else self.scales_and_zeros
        return quant_mm(x2, self.fmt, self.qweight, scales.to(compute))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu":
            raise RuntimeError("QuantLinear runs torch's CPU weight-only kernels; load int8/int4 models on the CPU")
        x2 = x.reshape(-1, self.in_features).to(COMPUTE[self.compute])  # (M, K)
        out = self._mm(x2, COMPUTE[self.compute]).to(x.dtype)  # (M, N)
        if self.bias is not None:
            out = out + self.bias.to(x.dtype)
        return out.reshape(*x.shape[:-1], self.out_features)

    @torch.no_grad()
    def dequantize(self) -> torch.Tensor:
        """(N, K) fp32: the weight the kernel multiplies by (its scales as held), read back through the
        kernel itself in fp32 on the identity (exact: 1 * w + 0 * ... sums to w)."""
        eye = torch.eye(self.in_features, dtype=torch.float32, device=self.qweight.device)
        return self._mm(eye, torch.float32).T.contiguous()

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, {self.fmt}, compute={self.compute}, source={self.source}"


def quant_mm(x2: torch.Tensor, fmt: str, qweight: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x2 (M, K) @ dequant(W)^T -> (M, N) with torch's weight-only kernel for `fmt`; x2 and `scales` (int8: (N,),
    int4: scales and zeros (K/32, N, 2)) in the same dtype. QuantLinear and the compiled step both call it."""
    if fmt == "int8":
        return torch._weight_int8pack_mm(x2, qweight, scales)
    if fmt == "q8_0":  # two int4 planes side by side along K (module doc): [x, x] sums both
        x2 = torch.cat([x2, x2], dim=-1)  # (M, 2K)
    return torch._weight_int4pack_mm_for_cpu(x2, qweight, GROUP, scales)


def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, H) float -> (N, H) int8 and (N,) float32 scales, symmetric per row: W ≈ scales[:, None] * q."""
    w = weight.detach().float()
    scales = w.abs().amax(dim=1).clamp(min=1e-12) / 127.0  # (N,) a zero row keeps scale > 0
    q = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)  # (N, H)
    return q, scales


def int8_mm(x: torch.Tensor, q: torch.Tensor, scales_bf16: torch.Tensor) -> torch.Tensor:
    """(D, H) @ dequant(q)^T -> (D, N) in x's dtype: `quant_mm`'s int8 product on bf16 activations (its fast
    path: fp32 activations take a slow one on CPU)."""
    return quant_mm(x.to(torch.bfloat16), "int8", q, scales_bf16).to(x.dtype)


def int8_kernel_works(device: torch.device | str = "cpu") -> bool:
    """Whether this torch build runs the weight-only int8 kernel on `device` and gets the product right."""
    try:
        g = torch.Generator().manual_seed(0)
        w = torch.randn(64, 32, generator=g)
        x = torch.randn(2, 32, generator=g)
        q, s = quantize_rows(w)
        dev = torch.device(device)
        out = int8_mm(x.to(dev), q.to(dev), s.to(dev, torch.bfloat16)).cpu()
    except (RuntimeError, NotImplementedError, AttributeError):
        return False
    return bool(torch.allclose(out, x @ w.T, rtol=0.05, atol=0.1 * float((x @ w.T).abs().max())))


# ---- model surgery ----------------------------------------------------------------------------------
def quantize_model(
    model: nn.Module,
    weights: str,
    *,
    q4_1: dict[str, Q4_1Blocks] | None = None,
    head: str = "fp32",
    q8_0_head: Q8_0Blocks | None = None,
    compute: dict[str, str] | str | None = None,
) -> nn.Module:
    """Replace every linear layer of `model` (nn.Linear / FastLinear) but the LM head by a QuantLinear.

    weights: "fp32" (nothing changes), "int8" or "int4". q4_1: {module name: blocks} from the model's GGUF
    (`models.gguf.read_q4_1`); with "int4", a layer found there with the same shape takes the file's blocks,
    any other is requantised. head: "fp32" (kept), "q8_0" (`q8_0_head`, the file's blocks, where their shape
    fits; else Q8_0's rule) or "int8" (per channel; see the module doc). compute:
    the activation dtype ("bfloat16" | "float32") or {format: dtype}; None = measured (`quant_plan`).
    """
    check_weights(weights)
    if head not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEADS)}; got {head!r}")
    if weights == "fp32":
        return model
    plan = compute if compute is not None else quant_plan()["compute"]
    dtype_of = (lambda fmt: plan) if isinstance(plan, str) else (lambda fmt: plan[fmt])
    head_module = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    q4_1 = q4_1 or {}
    targets = [(n, m) for n, m in model.named_modules() if isinstance(m, nn.Linear) and m is not head_module]
    if weights == "int4":
        bad = [f"{n} ({m.out_features}x{m.in_features})" for n, m in targets if m.in_features % GROUP]
        if bad:
            raise ValueError(f"int4 quantizes groups of {GROUP} inputs; input sizes not a multiple: {bad[:3]}")
    swaps = []
    for name, lin in targets:
        blocks = q4_1.get(name) if weights == "int4" else None
        if blocks is not None and blocks.shape == tuple(lin.weight.shape):
            layer = QuantLinear.from_q4_1(blocks, bias=lin.bias, compute=dtype_of("int4"))
            layer.source = "gguf-q4_1"
        else:
            layer = QuantLinear.from_linear(lin, weights, compute=dtype_of(weights))
        swaps.append((name, layer))
    if head != "fp32" and isinstance(head_module, nn.Linear):
        if head == "int8":
            lm_head = QuantLinear.from_linear(head_module, "int8", dtype_of("int8"), keep_weight=True)
        else:
            own = q8_0_head is not None and q8_0_head.shape == tuple(head_module.weight.shape)
            blocks = q8_0_head if own else quantize_q8_0(head_module.weight)
            lm_head = QuantLinear.from_q8_0(blocks, dtype_of("int4"), weight=head_module.weight)
            lm_head.source = "gguf-q8_0" if own else "requantised"
        swaps.append((_name_of(model, head_module), lm_head))
    for name, layer in swaps:
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, child, layer)
    return model


def _name_of(model: nn.Module, module: nn.Module) -> str:
    return next(n for n, m in model.named_modules() if m is module)


def _quant_modules(model: nn.Module) -> list[QuantLinear]:
    return [m for m in model.modules() if isinstance(m, QuantLinear)]


def weights_kind(model: nn.Module) -> str:
    """The decoder's weights: "fp32" (no quantized layer), else the format of the decoder's quantized layers."""
    kinds = {m.fmt for m in _quant_modules(model) if getattr(m, "weight", None) is None}
    return kinds.pop() if len(kinds) == 1 else ("fp32" if not kinds else "+".join(sorted(kinds)))


def weights_record(model: nn.Module) -> dict:
    """What a result records about the weights: format, where they came from, kernel dtype, head."""
    mods = _quant_modules(model)
    body = [m for m in mods if getattr(m, "weight", None) is None]
    head = next((m for m in mods if getattr(m, "weight", None) is not None), None)
    return {
        "weights": weights_kind(model),
        "source": "+".join(sorted({m.source for m in body})) or None,
        "compute": "+".join(sorted({m.compute for m in mods})) or None,
        "head": head.fmt if head is not None else "fp32",
    }


def float_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """`module.state_dict()` with every QuantLinear's weight de-quantized to fp32 under "<name>.weight"
    (what code that copies layers into an fp32 model, e.g. a draft built from the target, reads)."""
    state = {k: v for k, v in module.state_dict().items()}
    for name, m in module.named_modules():
        if isinstance(m, QuantLinear):
            prefix = f"{name}." if name else ""
            for key in ("qweight", "scales", "scales_and_zeros"):
                state.pop(prefix + key, None)
            state[prefix + "weight"] = m.dequantize()
    return state


# ---- which activation dtype, measured per machine ---------------------------------------------------
def _plans_file():
    return cache_dir() / "quant_plans.json"


SHAPES = ((576, 576), (1536, 576), (576, 1536))  # SmolLM2-135M's decoder shapes (N, K)
ROWS = (1, 2, 4, 8, 16, 32, 64)
_SLOW_ROWS = 16  # the fp32-activation paths are measured up to here only (they are slow beyond: None after)


@torch.inference_mode()
def measure_kernels(shapes=SHAPES, rows=ROWS, reps: int = 3, layers: int = 16) -> dict:
    """Median seconds per matrix of every kernel at every row count: fp32 FastLinear's three kernels and
    int8/int4 with fp32 or bf16 activations. `layers` distinct random matrices per shape are run in turn,
    as a forward does (weights stream from memory, not cache); kernels rotate so none always runs first."""
    gen = torch.Generator().manual_seed(0)
    out: dict[str, dict] = {}
    for n, k in shapes:
        ws = [torch.randn(n, k, generator=gen) * 0.02 for _ in range(layers)]
        lins = [nn.Linear(k, n, bias=False) for _ in range(layers)]
        for lin, w in zip(lins, ws, strict=True):
            lin.weight.data = w
        packs = [pack_weight(w) for w in ws]
        fns = {
            "fp32:stock": lambda x, i, ws=ws: small_linear(x, ws[i], kernel="stock"),
            "fp32:wx": lambda x, i, ws=ws: small_linear(x, ws[i], kernel="wx"),
            "fp32:onednn": lambda x, i, ws=ws, p=packs: small_linear(x, ws[i], packed=p[i], kernel="onednn"),
        }
        for fmt in ("int8", "int4"):
            for c in COMPUTE:
                q = [QuantLinear.from_linear(lin, fmt, compute=c) for lin in lins]
                fns[f"{fmt}:{c}"] = lambda x, i, q=q: q[i](x)
        names = list(fns)
        times: dict[str, list[list[float]]] = {name: [[] for _ in rows] for name in names}
        for rep in range(reps + 1):  # round 0 warms up
            for j, r in enumerate(rows):
                x = torch.randn(r, k, generator=gen)
                for name in names[rep % len(names) :] + names[: rep % len(names)]:
                    if name.endswith("float32") and name.startswith("int") and r > _SLOW_ROWS:
                        continue
                    t0 = time.perf_counter()
                    for i in range(layers):
                        fns[name](x, i)
                    if rep:
                        times[name][j].append((time.perf_counter() - t0) / layers)
        out[f"{n}x{k}"] = {name: [sorted(t)[len(t) // 2] if t else None for t in ts] for name, ts in times.items()}
    return {"rows": list(rows), "seconds": out}


def _choose_compute(measured: dict) -> dict[str, str]:
    """Per format, the activation dtype with the smaller total time over 1..16 rows and all shapes."""
    rows = measured["rows"]
    idx = [i for i, r in enumerate(rows) if r <= 16]
    choice = {}
    for fmt in ("int8", "int4"):
        total = {c: sum(s[f"{fmt}:{c}"][i] for s in measured["seconds"].values() for i in idx) for c in COMPUTE}
        choice[fmt] = min(total, key=total.get)
    return choice


def quant_plan(refresh: bool = False) -> dict:
    """{"compute": {"int8": dtype, "int4": dtype}, "rows", "seconds"} for this machine: measured once
    (`measure_kernels`, about a minute) and cached in `cache_dir()/quant_plans.json` per machine."""
    path, key = _plans_file(), _machine_key()
    with _locked(path):
        store = _read(path)
        if refresh or key not in store:
            store[key] = measure_kernels()
            write_json(path, store)
    return {"compute": _choose_compute(store[key]), **store[key]}
