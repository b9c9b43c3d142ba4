"""A compiled verify step: the target's decoder body as one `torch.compile`d graph per bucket of node counts.

Decoding a 135M model on a CPU is bound by per-op overhead as much as by reading the weights: an eager
step launches hundreds of small ops through Python, transformers' mask and cache code, and FastLinear's kernel
dispatch. `torch.compile` (inductor, C++ on CPU) removes that overhead, but only for shapes it has seen:
every new number of nodes, every new cache length would be a new graph. So the compiled step is static:

    nodes     padded to a bucket B in BUCKETS = (1, 2, 4, 8, 16, 32, 64): the N real nodes first, then B − N
              dummies (token 0 at the root's position, each attending to its own slot only: finite, harmless)
    cache     the `KVCache`'s preallocated buffers (1, H_kv, C, D) at a fixed capacity C (a power of two,
              `capacity_for`): the B new K/V are written by index at slots [L, L+B), and attention runs over
              all C slots with a mask; the dummies' slots lie past the committed length + N, so `keep` and
              the next step never see them
    mask      built inside the graph from L (a 0-d tensor, not a constant: no recompile per step) and the
              (B, B) ancestor mask: slot j is visible to node i iff j < L or (j − L is an ancestor of i)

One graph per (bucket, capacity) serves every method (each layer's hidden states come out of it, and a
drafter's feature layers are picked outside): autoregressive is bucket 1, a
prompt-lookup chain of 5 is bucket 8, a Medusa tree of 40 bucket 64. The prefill (long, once per call)
stays eager and fills the same buffers, and so does everything that reads the cache (`keep`, a layer-skip
draft's `extend_from`): the compiled step is only another way of running `_body_forward`.

Which graph. Options measured on SmolLM2-135M (`python -m specdec_lab.bench.step_variants --variants
fp32,fp32+compile` measures warm-up and step times; the numbers belong in results, not here): (a)
transformers' model with its StaticCache under torch.compile was not taken — its forward builds masks and
cache positions in Python per call and cannot keep a tree path's K/V in place; (b) regional compilation, one
decoder layer compiled once and called per layer with that layer's weights as inputs (tracing HF's layer
modules instead would guard on each one's `layer_idx` and recompile per layer): fast to compile, but a guard
check and a wrapper per call cost most of what compiling saves; (c) a compact gpt-fast-style forward over the
HF weights (Llama family: Llama, Mistral without a window, Qwen2) as one graph: the fastest step, but inductor
compiles all the unrolled layers of SmolLM2 so slowly that 7 buckets overrun the 2-minute warm-up budget
several times. Shipped: (c)'s forward compiled in blocks of `BLOCK` layers — one graph per block shape, reused
by every block — which keeps most of (c)'s step at a fraction of its compile time (`CompiledStep.block`, 0 =
the whole body).

The graph's body, its linear kernels and its numerics (exact rows, bit for bit like one-row decoding) are
`compact_body.py`'s. Inductor's `freezing=True` (weights as constants, prepacked by oneDNN for every row count)
is an option of `CompiledStep`, off by default; `cpp_wrapper` (a C++ wrapper around the kernels instead of the
Python one: less Python per call) is on by default on a CPU, and a graph it fails to compile is compiled again
without it; `python -m specdec_lab.bench.compile_levers` times them, the whole-graph body and inductor's own products
against the shipped blocks in one loop, each with its compile seconds (results in data/curves/, not here). Trees
larger than the largest bucket are cut to it by the loop (`Tree.truncate_nodes`).

What a call costs besides its kernels (issue 57's profile, `python -m specdec_lab.bench.profile_step`): dynamo
evaluates every guard of a graph before running it — for a block, the shapes, dtypes and modes of hundreds of
weight tensors — several times a token. The step is static by contract (one model, its buffers, a bucket and a
capacity), so a call whose (bucket, capacity, grad mode) ran before runs under dynamo's
`skip_guard_eval_unsafe` stance, which checks only the guards that tell the cached graphs apart; where that
finds no graph (a guard it skipped mattered after all) the call is made again with every guard (`_call`). Each
block's per-layer arguments are built once per bucket, not per call. Inside the graph the K/V writes and the
attention's sums are written so that inductor touches only the B new rows of the cache and reads it once
(`compact_body.decoder_layer`, `_slot_ordered_pv`).

Where compiling is not possible (no C++ compiler, an architecture outside the Llama family, a sliding
window), `compiled_step` raises `CompileUnavailable` with the reason and `generate(..., compile=True)` warns
and decodes eagerly; where torch.compile itself fails on a graph (an op or a toolchain inductor rejects), the
step warns once, records why in `CompiledStep.failed`, and `verify_tree` takes the eager path from then on.
"""

from __future__ import annotations

import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..kv_cache import KVCache
from .compact_body import CompactBody, CompileUnavailable, check_family, decoder_block, slot_ones
from .quant import QuantLinear
from .row_invariance import attention_form, invariant_kernels

__all__ = ["BUCKETS", "CompileUnavailable", "CompiledStep", "compiled_step", "bucket_for", "capacity_for",
           "default_block"]  # fmt: skip

BUCKETS = (1, 2, 4, 8, 16, 32, 64)
RECOMPILE_LIMIT = 1024
BLOCK = 6  # decoder layers per compiled graph (module docstring: compile time against step time)


def bucket_for(n: int, buckets: Sequence[int] = BUCKETS) -> int:
    """The smallest bucket holding n nodes."""
    for b in buckets:
        if n <= b:
            return b
    raise ValueError(f"{n} nodes exceed the largest bucket {buckets[-1]}")


def capacity_for(tokens: int, minimum: int = 256) -> int:
    """A cache capacity for `tokens` committed tokens plus the largest bucket: the next power of two (so a few
    graphs serve every prompt length)."""
    need, cap = tokens + BUCKETS[-1], minimum
    while cap < need:
        cap *= 2
    return cap


# ---- the step -----------------------------------------------------------------------------------------
@dataclass
class CompiledStep:
    """The compiled verify step of one model: one graph per bucket and cache capacity, compiled when first
    called (or by `warm_up`). Pass it to `generate(..., compile=step)` / `verify_tree(..., step=step)`.

    capacity: the cache capacity the step's caches start with (`generate` and the cost curve use it, so one
    set of graphs serves every prompt up to it; a longer one gets the next power of two and new graphs).
    block: decoder layers per compiled graph (module docstring); 0 compiles the whole body as one graph.

    compile_seconds: seconds spent in calls that compiled a new graph (warm-ups and first calls), kept apart
    from decoding time; `compiled` holds the (bucket, capacity) pairs compiled so far.
    """

    model: object
    freezing: bool = False
    fast_kernels: bool = True
    block: int = 0
    capacity: int = 512
    # inductor's C++ wrapper around the kernels instead of its Python one; None = on for a CPU model (less
    # Python per call). A graph that fails to compile with it is compiled once more without it.
    cpp_wrapper: bool | None = None
    # verify n rows exactly as one (row_invariance.py): attention in a row-invariant form and every fp32
    # linear on one kernel at every row count; None = on for quantized weights (bf16 amplifies last bits)
    exact_rows: bool | None = None
    attention: str = "bmm"  # with exact_rows: "bmm" = measured when first called ("ordered" or "products")
    kernels_invariant: bool = False  # with exact_rows: every linear's kernel checked row-invariant here
    fuse: bool = True  # int4 q/k/v in one product, gate/up in one (compact_body.py; outputs bit-identical)
    failed: str | None = None  # why compiling failed (then every call raises CompileUnavailable: eager path)
    buckets: tuple[int, ...] = BUCKETS
    compile_seconds: float = 0.0
    compiled: set = field(default_factory=set)
    _fns: dict = field(default_factory=dict, repr=False)
    _ones: dict = field(default_factory=dict, repr=False)  # (capacity, dtype, device) -> slot_ones
    _seen: set = field(default_factory=set, repr=False)  # call signatures run before (`forward`: guards skipped)

    def _fn(self):
        if not self._fns:
            self.attention = self._attention()
            body = CompactBody(self.model, self.fast_kernels, self.attention, self.fuse).eval()
            if self.cpp_wrapper is None:
                self.cpp_wrapper = next(self.model.parameters()).device.type == "cpu"
            options = {"freezing": self.freezing, "cpp_wrapper": self.cpp_wrapper}
            if not self.block:
                self._fns[0] = torch.compile(body, fullgraph=True, dynamic=False, options=options)
            else:
                k = self.block
                if len(body.linears) % k:
                    raise ValueError(f"block={k} does not divide the {len(body.linears)} layers")
                blk = torch.compile(decoder_block, fullgraph=True, dynamic=False, options=options)
                prologue = torch.compile(body.prologue, fullgraph=True, dynamic=False)

                block_args: dict = {}  # (first layer, rows) -> the block's layer_args: the plans are fixed by now

                def run(tokens, positions, start, tree_mask, ks, vs, ones):
                    x, cos, sin, bias, slots = prologue(tokens, positions, start, tree_mask, ks[0].shape[2])
                    hs = [x]
                    for i in range(0, len(ks), k):
                        args = block_args.get((i, x.shape[0]))
                        if args is None:
                            args = block_args[i, x.shape[0]] = [body.layer_args(j, x.shape[0]) for j in range(i, i + k)]
                        x, h = blk(x, cos, sin, bias, slots, ones, ks[i : i + k], vs[i : i + k], args, body.dims)
                        hs += h
                    return body.epilogue(x, hs)

                self._fns[0] = run
        return self._fns[0]

    def _attention(self) -> str:
        """The attention form; with exact_rows also pins the fp32 linears to their row-invariant kernel."""
        if self.exact_rows is None:
            self.exact_rows = any(isinstance(m, QuantLinear) for m in self.model.modules())
        if not self.exact_rows:
            return "bmm"
        self.kernels_invariant = invariant_kernels(self.model, self.buckets)
        if not self.kernels_invariant:
            warnings.warn("exact_rows: a linear layer has no row-invariant kernel here (oneDNN packing off or "
                          "unavailable, a stock nn.Linear, or a shape whose kernel is not); its outputs may differ "
                          "in the last bits between 1 and n rows", stacklevel=3)  # fmt: skip
        if self.attention != "bmm":  # a form the caller chose (the tests run both)
            return self.attention
        config = self.model.config.get_text_config(decoder=True)
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        groups = config.num_attention_heads // config.num_key_value_heads
        capacities = [self.capacity * 2**i for i in range(3)]  # the step's caches and two doublings
        return attention_form(config.num_key_value_heads, groups, d, capacities, self.buckets)

    def rows_record(self) -> dict:
        """What the results record of the step's row invariance (row_invariance.py)."""
        self._fn()
        return {"exact_rows": bool(self.exact_rows), "attention": self.attention,
                "kernels_invariant": self.kernels_invariant, "fused": self.fuse}  # fmt: skip

    @property
    def max_nodes(self) -> int:
        """The most nodes one call verifies: the largest bucket (the loop cuts larger trees to it)."""
        return self.buckets[-1]

    def forward(self, cache: KVCache, tokens, positions, tree_mask, feature_layers: Sequence[int] = ()):
        """The N nodes (tokens (N,), positions (N,), tree_mask (N, N) bool: ancestors incl. self) through the
        bucket's graph; appends their K/V to `cache` like `_body_forward`. -> (hidden (N, H), features)."""
        if self.failed:
            raise CompileUnavailable(self.failed)
        n = len(tokens)
        b = bucket_for(n, self.buckets)
        layers_ = cache.layers
        start = layers_[0].length
        if start + b > layers_[0].capacity or not layers_[0].is_initialized:
            self._prepare(cache, start + b)
        pad = b - n
        dev = layers_[0]._k.device
        tokens = tokens.to(dev)
        positions = positions.to(dev)
        if pad:  # dummies: token 0 at the first node's position, seeing only their own slot
            tokens = torch.cat([tokens, tokens.new_zeros(pad)])
            positions = torch.cat([positions, positions[:1].expand(pad)])
            full = torch.eye(b, dtype=torch.bool, device=dev)
            full[:n, :n] = tree_mask
            tree_mask = full
        key = (b, layers_[0].capacity)
        t0 = time.perf_counter() if key not in self.compiled else None
        # one graph per bucket x capacity, for every model in the process: more than dynamo's
        # default of 8 compiled variants of one function (CompactBody.forward)
        limits = {"recompile_limit": RECOMPILE_LIMIT, "accumulated_recompile_limit": RECOMPILE_LIMIT}
        args = (tokens, positions, torch.tensor(start, device=dev), tree_mask.to(dev), [layer._k for layer in layers_],
                [layer._v for layer in layers_], self._ones_for(layers_[0]._v))  # fmt: skip
        # a call like one made before (bucket, capacity, grad mode): dynamo checks only the guards that tell
        # its cached graphs apart (shapes, modes), not the hundreds of tensor guards of the weights (the
        # static-step contract: the same model and buffers call by call) — a few hundred µs a token
        sig = (key, torch.is_inference_mode_enabled(), torch.is_grad_enabled())
        try:
            with torch._dynamo.config.patch(**limits):
                hidden, states = self._call(args, skip_guards=sig in self._seen)
        except Exception as err:  # an op or a toolchain inductor rejects: say so once, then eager (verify_tree)
            if t0 is None:
                raise  # a graph that compiled and ran before: a real error
            if self.cpp_wrapper and not self.compiled:  # the C++ wrapper is the newer path: try without it
                warnings.warn(f"compiled step: the C++ wrapper failed ({type(err).__name__}: {str(err)[:200]}); "
                              "compiling with the Python wrapper", stacklevel=2)  # fmt: skip
                self.cpp_wrapper, self._fns = False, {}
                return self.forward(cache, tokens[:n], positions[:n], tree_mask[:n, :n], feature_layers)
            self.failed = f"compiled step: torch.compile failed ({type(err).__name__}: {str(err)[:300]})"
            warnings.warn(f"{self.failed}; decoding eagerly", stacklevel=2)
            raise CompileUnavailable(self.failed) from err
        if t0 is not None:
            self.compile_seconds += time.perf_counter() - t0
            self.compiled.add(key)
        self._seen.add(sig)
        for layer in layers_:  # the real nodes are written; the dummies' slots lie past the new length
            layer.length = start + n
        if not feature_layers:
            return hidden[:n], None
        return hidden[:n], torch.stack([states[layer][:n] for layer in feature_layers], dim=1)  # (N, F, H)

    def _call(self, args: tuple, skip_guards: bool):
        """The compiled body on `args`; skip_guards: with dynamo's `skip_guard_eval_unsafe` stance, and where
        that finds no graph for the call after all (a guard it skipped mattered), once more with every guard."""
        if skip_guards:
            try:
                with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
                    return self._fn()(*args)
            except RuntimeError as err:
                if "skip_guard_eval_unsafe" not in str(err):
                    raise
        return self._fn()(*args)

    def _ones_for(self, v: torch.Tensor) -> torch.Tensor:
        """The (C, ONES) ones block for a V cache buffer v (1, H_kv, C, D) (`compact_body.slot_ones`), made once
        per capacity, dtype and device."""
        key = (v.shape[2], v.dtype, v.device)
        if key not in self._ones:
            self._ones[key] = slot_ones(v.shape[2], v.dtype, v.device)
        return self._ones[key]

    def _prepare(self, cache: KVCache, needed: int) -> None:
        """Allocate (an empty prompt: nothing prefilled) or grow the buffers to a power-of-two capacity."""
        config = self.model.config.get_text_config(decoder=True)
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        ref = next(self.model.parameters())
        for layer in cache.layers:
            if not layer.is_initialized:
                layer.capacity = max(layer.capacity, capacity_for(needed - BUCKETS[-1]))
                empty = torch.empty(1, config.num_key_value_heads, 0, d, dtype=ref.dtype, device=ref.device)
                layer.lazy_initialization(empty, empty)
            if needed > layer.capacity:
                layer._grow(capacity_for(needed - BUCKETS[-1]))

    @torch.inference_mode()
    def warm_up(self, buckets: Sequence[int] | None = None, capacity: int | None = None) -> float:
        """Compile the graphs of `buckets` (default: all) at `capacity` (default: the step's) now; -> seconds."""
        capacity = capacity or self.capacity
        t0 = time.perf_counter()
        for b in buckets or self.buckets:
            cache = KVCache.for_model(self.model, capacity=capacity)
            self.forward(cache, torch.zeros(b, dtype=torch.long), torch.arange(b),
                         torch.ones(b, b, dtype=torch.bool).tril())  # fmt: skip
        return time.perf_counter() - t0


def default_block(num_layers: int, target: int = BLOCK) -> int:
    """The divisor of `num_layers` nearest `target` (ties: the larger): layers per compiled graph."""
    return min((k for k in range(1, num_layers + 1) if num_layers % k == 0), key=lambda k: (abs(k - target), -k))


def compiled_step(model, block: int | None = None, capacity: int = 512, fuse: bool = True) -> CompiledStep:
    """A `CompiledStep` for `model`, or `CompileUnavailable` saying why not (architecture, compiler).

    block: layers per compiled graph; None = `default_block` (the divisor of the layer count nearest BLOCK).
    """
    check_family(model)
    if next(model.parameters()).device.type == "cpu" and shutil.which("g++") is None and shutil.which("c++") is None:
        raise CompileUnavailable("compiled step: no C++ compiler (g++/c++) on PATH for inductor's CPU kernels")
    layers = model.config.get_text_config(decoder=True).num_hidden_layers
    block = default_block(layers) if block is None else block
    return CompiledStep(model=model, block=block, capacity=capacity, fuse=fuse)
