"""Linear layers for a few rows at a time, with the kernel for each row count measured on this CPU.

Decoding multiplies a handful of activation rows x (M, K) — one token, or the few nodes of a draft tree
— by every weight matrix W (N, K) of the model. That is memory-bound: the time should be the time to
stream W once, whatever M is. On CPUs torch's `F.linear` (x @ W^T through MKL) is often far from it for
small M, and not even monotonic in M. Three kernels compute the same product:

* "stock":  `F.linear` (MKL's gemv for one row, gemm otherwise).
* "wx":     (W @ x^T)^T — a GEMM with the large matrix as the left operand streams W at full bandwidth on
            many CPUs; a single row is duplicated (a 2-column GEMM), since the gemv path is itself slow.
* "onednn": oneDNN's inner product on a copy of W reordered once into its blocked layout
            (`torch.ops.mkldnn._reorder_linear_weight`, what torch.compile's CPU freezing uses). Its cost
            hardly grows with M, which is what makes verifying trees cheap on a CPU. The price is memory:
            the packed copy doubles the weights' footprint (`use_fast_linear(pack=False)` keeps one copy).

Which is fastest for 1, 2, ... 64 rows differs between CPUs — on some AVX-512 machines "wx" wins at one
row, on some AVX2 machines MKL's gemv does — so each `FastLinear` carries a *plan*: the kernel per row
count. `use_fast_linear` installs the default plan (wx for 1-2 rows, oneDNN for 3-64, stock beyond);
`tune_linear(model)` measures every kernel on the model's own matrices, grouped by shape, at a ladder of
row counts, and installs the fastest per shape and row count. Measurements are cached per machine (CPU,
torch ISA, threads, torch version) in `cache_dir()/linear_plans.json`, so a process pays for them once
per machine; `load_model` tunes by default. Larger M (long prefills, training), autograd and accelerators
always take `F.linear`.

Numerics: every kernel computes the same dot products; only the order of the floating-point sums inside
the kernels differs, so values can differ in the last bits — as torch's own 1-row and many-row paths
already differ from each other. Exact speculative decoding compares the target's argmax (or its
distribution) at each node with what one-token decoding would give, so the same model must be used for
both; `bench` runs every method on one model object, and the exactness tests run with this on.

    model = use_fast_linear(model)   # every nn.Linear -> FastLinear (same Parameters: tying kept)
    tune_linear(model)               # measured kernel per shape and row count (cached per machine)
    restore_linear(model)            # back to stock nn.Linear

Swapping module instances is model surgery on one object (as quantization libraries do), not a patch
of a library class: other models in the process are untouched.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrize

from ..io import cache_dir, write_json
from ..machine import machine

__all__ = [
    "KERNELS",
    "MAX_ROWS",
    "PACKED_MIN_ROWS",
    "PACKED_MAX_ROWS",
    "TUNE_ROWS",
    "ONEDNN",
    "small_linear",
    "pack_weight",
    "default_plan",
    "choose_plan",
    "plan_summary",
    "FastLinear",
    "use_fast_linear",
    "restore_linear",
    "uses_fast_linear",
    "tune_linear",
    "linear_plan",
    "linear_kind",
    "match_linear",
]

KERNELS = ("stock", "wx", "onednn")
MAX_ROWS = 16  # default plan without a packed weight: up to this many rows W @ x^T, beyond F.linear
PACKED_MIN_ROWS = 3  # default plan with one: 1-2 rows take W @ x^T ...
PACKED_MAX_ROWS = 64  # ... 3..64 rows oneDNN; plans cover 1..64 rows, more always take F.linear
TUNE_ROWS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # row counts measured; others use the next lower one
_MARGIN = 0.03  # a measured kernel replaces the default only when faster by more than this (noise)


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


def default_plan(pack: bool) -> tuple[str, ...]:
    """Kernel per row count (index = rows, 0..PACKED_MAX_ROWS) before any measurement."""
    plan = ["stock"]  # index 0: no rows, nothing to compute
    for rows in range(1, PACKED_MAX_ROWS + 1):
        if rows < PACKED_MIN_ROWS:
            plan.append("wx")
        elif pack and ONEDNN:
            plan.append("onednn")
        else:
            plan.append("wx" if rows <= MAX_ROWS else "stock")
    return tuple(plan)


_DEFAULT = {True: default_plan(True), False: default_plan(False)}


def _rows(x: torch.Tensor) -> int:
    """Activation rows in x (..., K): the M of the product."""
    return x.numel() // x.shape[-1] if x.shape[-1] else 0


def small_linear(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    packed: torch.Tensor | None = None,
    kernel: str | None = None,
) -> torch.Tensor:
    """x (..., K) @ weight (N, K)^T (+ bias) -> (..., N) with one of KERNELS.

    kernel: "stock" | "wx" | "onednn"; None = the default plan for this many rows. "onednn" needs
    `packed` (= `pack_weight(weight)`) and falls back to the unpacked default without it. Same result as
    `F.linear(x, weight, bias)` up to floating-point summation order; always `F.linear` on accelerators,
    beyond PACKED_MAX_ROWS rows, and whenever autograd needs a graph (training keeps torch's kernels).
    """
    rows = _rows(x)
    training = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    if x.device.type != "cpu" or rows == 0 or rows > PACKED_MAX_ROWS or training:
        return F.linear(x, weight, bias)
    if kernel is None:
        kernel = _DEFAULT[packed is not None][rows]
    if kernel == "onednn" and packed is None:
        kernel = _DEFAULT[False][rows]
    if kernel == "stock":
        return F.linear(x, weight, bias)
    x2 = x.reshape(rows, x.shape[-1])  # (M, K)
    if kernel == "onednn":
        out = torch.ops.mkldnn._linear_pointwise(x2, packed, bias, "none", [None], "")  # (M, N)
        return out.reshape(*x.shape[:-1], weight.shape[0])
    if kernel != "wx":
        raise ValueError(f"unknown linear kernel {kernel!r}; known: {', '.join(KERNELS)}")
    if rows == 1:
        x2 = torch.cat([x2, x2])  # (2, K): a 2-column GEMM streams W faster than gemv on many CPUs
    out = (weight @ x2.T).T[:rows]  # (M, N)
    if bias is not None:
        out = out + bias
    return out.contiguous().reshape(*x.shape[:-1], weight.shape[0])


_PACK_CACHE = ("_pack", "_pack_key")  # FastLinear's cache attributes: the packed copy and what it was made from


class FastLinear(nn.Linear):
    """`nn.Linear` whose forward is `small_linear` with the kernel its plan names for the row count.

    `pack` (set by `use_fast_linear`): allow a oneDNN-packed copy of the weight. The copy is a plain
    attribute (never saved, never copied), made on the first call whose plan needs it and keyed by the
    weight's storage and version, so loading or editing weights in place repacks; parametrized weights
    are never packed. `plan` (set by `tune_linear`): kernel per row count; None = `default_plan(pack)`.
    """

    pack: bool = True
    plan: tuple[str, ...] | None = None

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

    def kernel_for(self, rows: int) -> str:
        """The kernel this layer runs for `rows` rows (CPU, no autograd)."""
        plan = self.plan or _DEFAULT[self.pack and ONEDNN]
        return plan[rows] if rows < len(plan) else "stock"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kernel = self.kernel_for(_rows(x))
        if kernel == "onednn" and torch.compiler.is_compiling():  # traced (hf_generate_compiled): the packed
            kernel = "wx"  # copy's cache cannot be traced; W x^T can (F.linear there measured slower still)
        packed = self._packed() if kernel == "onednn" and not torch.is_grad_enabled() else None
        return small_linear(x, self.weight, self.bias, packed=packed, kernel=kernel)

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


def _fast_modules(model: nn.Module) -> list[FastLinear]:
    return [m for m in model.modules() if isinstance(m, FastLinear)]


def use_fast_linear(model: nn.Module, pack: bool = True) -> nn.Module:
    """Replace every plain `nn.Linear` in `model` by a `FastLinear` sharing its parameters (in place).

    pack=False: no oneDNN-packed weight copies (half the memory; 3+ rows cost more, see the module doc).
    Applies `pack` to FastLinear modules already there too, with their default plan (see `tune_linear`).
    """
    _swap(model, nn.Linear, FastLinear)
    for m in _fast_modules(model):
        m.pack, m.plan = pack, None
        if not pack:
            m.drop_packed()
    return model


def restore_linear(model: nn.Module) -> nn.Module:
    """Undo `use_fast_linear`: plain `nn.Linear` modules with the same parameters (in place)."""
    return _swap(model, FastLinear, nn.Linear)


def uses_fast_linear(model: nn.Module) -> bool:
    """True when any linear layer of `model` is a `FastLinear` (what `use_fast_linear` installs)."""
    return bool(_fast_modules(model))


# ---- measured plans ---------------------------------------------------------------------------------
def choose_plan(seconds: dict[str, list[float]], rows=TUNE_ROWS, pack: bool = True) -> tuple[str, ...]:
    """Kernel per row count from measured times: seconds[kernel][i] = time of one pass at rows[i].

    At each measured row count the fastest allowed kernel wins if it beats the default plan's kernel by
    more than _MARGIN (else the default stays: noise never flips a choice); unmeasured row counts take the
    choice of the next lower measured one.
    """
    allowed = [k for k in KERNELS if k in seconds and (k != "onednn" or (pack and ONEDNN))]
    default = _DEFAULT[pack and ONEDNN]
    at: dict[int, str] = {}
    for i, r in enumerate(rows):
        best = min(allowed, key=lambda k: seconds[k][i])
        base = default[r] if default[r] in allowed else best
        at[r] = best if seconds[best][i] < (1 - _MARGIN) * seconds[base][i] else base
    lower = [max(s for s in rows if s <= m) for m in range(1, PACKED_MAX_ROWS + 1)]
    return ("stock", *(at[s] for s in lower))


def plan_summary(plan: tuple[str, ...]) -> str:
    """'1:stock 2:wx 3-64:onednn' — runs of equal kernels (for records and printouts)."""
    parts, start = [], 1
    for m in range(2, len(plan) + 1):
        if m == len(plan) or plan[m] != plan[start]:
            parts.append(f"{start}{'' if m - 1 == start else f'-{m - 1}'}:{plan[start]}")
            start = m
    return " ".join(parts)


def _shape_key(m: nn.Linear) -> str:
    return f"{m.out_features}x{m.in_features}{'+bias' if m.bias is not None else ''}"


@torch.inference_mode()
def _measure(mods: list[FastLinear], rows=TUNE_ROWS, reps: int = 5) -> dict[str, list[float]]:
    """Best-of-`reps` seconds of one pass over `mods` (all of one shape) per kernel and row count.

    A pass runs every matrix of the shape once, as a forward does: for a real model the weights stream
    from DRAM, which is what decoding pays. Kernels are rotated so none always runs first.
    """
    kernels = [k for k in KERNELS if k != "onednn" or ONEDNN]
    packs = [pack_weight(m.weight) if ONEDNN else None for m in mods]
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(r, mods[0].in_features, generator=gen) for r in rows]
    best = {k: [float("inf")] * len(rows) for k in kernels}
    for rep in range(reps + 1):  # round 0 warms up (first touches, oneDNN primitive creation)
        for i, x in enumerate(xs):
            for k in kernels[rep % len(kernels) :] + kernels[: rep % len(kernels)]:
                t0 = time.perf_counter()
                for m, p in zip(mods, packs, strict=True):
                    small_linear(x, m.weight, m.bias, packed=p, kernel=k)
                if rep:
                    best[k][i] = min(best[k][i], time.perf_counter() - t0)
    return best


def _plans_file() -> Path:
    return cache_dir() / "linear_plans.json"


def _machine_key() -> str:
    m = machine()
    return f"{m.cpu} | {m.arch} | {m.isa} | {m.threads} threads | torch {m.torch}"


@contextlib.contextmanager
def _locked(path: Path):
    """Exclusive lock beside `path`: parallel processes (pytest workers) measure one at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def tune_linear(model: nn.Module, refresh: bool = False, reps: int = 5) -> dict[str, str]:
    """Measure the kernels on `model`'s own matrices and give every FastLinear the fastest per row count.

    Measurements are cached per machine and shape in `cache_dir()/linear_plans.json` (refresh=True
    measures again, e.g. after one was taken on a busy machine). Layers that are not fp32 on the CPU keep
    their default plan. Returns {shape: plan summary} for records.
    """
    groups: dict[str, list[FastLinear]] = {}
    for m in _fast_modules(model):
        if m.weight.device.type == "cpu" and m.weight.dtype == torch.float32:
            groups.setdefault(_shape_key(m), []).append(m)
    if not groups:
        return {}
    path, key = _plans_file(), _machine_key()
    with _locked(path):
        store = _read(path)  # read under the lock: another process may just have measured
        mine = store.setdefault(key, {})
        todo = [s for s in groups if refresh or mine.get(s, {}).get("rows") != list(TUNE_ROWS)]
        for s in todo:
            mine[s] = {"rows": list(TUNE_ROWS), "seconds": _measure(groups[s], reps=reps)}
        if todo:
            write_json(path, store)
    out = {}
    for s, mods in groups.items():
        for m in mods:
            m.plan = choose_plan(mine[s]["seconds"], pack=m.pack)
            if "onednn" not in m.plan:
                m.drop_packed()
        out[s] = plan_summary(mods[0].plan)
    return out


def linear_plan(model: nn.Module) -> dict[str, str]:
    """{shape: plan summary} of the FastLinear layers (what a record should say about the kernels)."""
    return {_shape_key(m): plan_summary(m.plan or _DEFAULT[m.pack and ONEDNN]) for m in _fast_modules(model)}


def linear_kind(model: nn.Module) -> str:
    """What the model runs: "stock", "tuned" (measured plans), "fast+onednn" or "fast" (default plans)."""
    fast = _fast_modules(model)
    if not fast:
        return "stock"
    if any(m.plan is not None for m in fast):
        return "tuned"
    return "fast+onednn" if ONEDNN and any(m.pack for m in fast) else "fast"


def match_linear(model: nn.Module, like: nn.Module) -> nn.Module:
    """Give `model` the linear kernels `like` runs (a draft or assistant decodes the way its target does)."""
    kind = linear_kind(like)
    if kind != "stock":
        use_fast_linear(model, pack=any(m.pack for m in _fast_modules(like)))
    if kind == "tuned":
        tune_linear(model)
    return model
