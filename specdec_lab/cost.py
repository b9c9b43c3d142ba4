"""The price of one loop step: the measured verify curve t(n), corrected online, plus the loop's own time.

Decoding a small model is memory-bound: one forward over n tokens costs far less than n forwards, but not
nothing, and on CPUs the curve is not even monotonic (2–3 tokens can take slower matmul paths than 4 or 8).
So every size a method picks — a chain's draft length, a tree's node budget, Lookahead's window — depends on
the machine, and every sizer asks the same object for its price (`StepCost`):

    price(n) = t̂(n) + ô(kind) + drafting

    t̂(n)      one verify forward of n tokens (root included): the curve t(n) measured on this device
               (`cost_curve_for`, a chain curve and a tree-mask curve), times load · shape(n), learned from
               every step the loop times
    ô(kind)    the loop's and the proposer's own seconds per step beyond the forward and beyond the
               proposer's priced drafting: accepting, keeping the path's K/V, emitting, building the tree,
               updating indices; learned per kind of step (a root-only step, a chain, a branching tree)
    drafting   what the proposer prices itself (k draft-model steps, the heads it must run), in seconds

A sizer maximises expected tokens per second, E[tokens | size] / price(size); the size "nothing" (one plain
step, price(1)) is always a candidate, so a proposer that is usually wrong backs off to plain decoding.
The loop reports every step (`StepCost.observe`), for every method; a proposer only asks. Why the loop's
own time belongs in the price: it does not shrink when the forward does, so on a faster CPU (or a GPU) it
is a larger share of a step, and a size that paid where forwards were slow can lose where they are fast.
"""

from __future__ import annotations

import statistics
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from . import curve_store
from .attention import attention_kind
from .device import sync
from .fast_linear import linear_kind
from .quant import weights_kind

__all__ = [
    "CostCurve",
    "flat_curve",
    "measure_cost_curve",
    "summarize_times",
    "cost_curve_for",
    "set_cost_curve",
    "StepCost",
    "STEP_KINDS",
]


@dataclass
class CostCurve:
    """Measured seconds of one verify forward by number of tokens in it."""

    sizes: list[int]
    seconds: list[float]
    device: str = "cpu"
    context: int = 0
    tree: bool = False  # measured on branching trees (a tree-attention mask) instead of chains

    def __call__(self, n: int) -> float:
        """t(n), linearly interpolated between measured sizes, extrapolated past the largest."""
        xs, ys = self.sizes, self.seconds
        if n <= xs[0]:
            return ys[0]
        for (x0, y0), (x1, y1) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
            if n <= x1:
                return y0 + (y1 - y0) * (n - x0) / (x1 - x0)
        slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2]) if len(xs) > 1 else 0.0
        return ys[-1] + max(slope, 0.0) * (n - xs[-1])

    def relative(self) -> list[float]:
        """t(n) / t(1) for each measured size."""
        return [s / self.seconds[0] for s in self.seconds]

    def to_dict(self) -> dict:
        return asdict(self)


def flat_curve(t1: float, up_to: int = 64, *, device: str = "flat", tree: bool = True) -> CostCurve:
    """t(n) = t1 for every n up to `up_to` (and past it): the textbook assumption, and nearly what a GPU shows
    for a small model, where a forward is bound by reading the weights and launching kernels until n is in
    the hundreds. `flat_curve(curve(1), max(curve.sizes))` flattens a measured curve at its own t(1)."""
    if not t1 > 0:
        raise ValueError(f"t1 must be a positive number of seconds, got {t1!r}")
    if up_to < 1:
        raise ValueError(f"up_to must be >= 1, got {up_to}")
    sizes = [1, up_to] if up_to > 1 else [1]
    return CostCurve(sizes=sizes, seconds=[float(t1)] * len(sizes), device=device, tree=tree)


DEFAULT_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16)


@torch.inference_mode()
def measure_cost_curve(
    model,
    sizes: Sequence[int] = DEFAULT_SIZES,
    context: int = 64,
    repeats: int = 5,
    warmup: int = 2,
    tree: bool = False,
    statistic: str = "median",
    step=None,
) -> CostCurve:
    """Time one cached forward of n tokens (after `context` cached tokens) for each n; median of repeats.

    Sizes are interleaved within each repeat so slow drifts (frequency scaling, other load) hit all alike.
    tree: verify branching trees (two branches from the root, n ≥ 3) rather than chains. A chain runs with
    the model's own causal mask; a tree needs an explicit mask, which attention kernels may handle more
    slowly — tree methods (Medusa) size their trees on this curve.
    statistic: "median" of the repeats; "min", the cost without interference (other load only ever adds
    time); or "paired": t(n) = median over repeats of t_r(n) / t_r(sizes[0]), times the median
    t(sizes[0]) — each repeat's sizes run back to back, so a ratio within one repeat cancels whatever load
    that repeat saw. Sizing decides on such ratios (are 5 tokens worth a few % more accepted than 4?), and
    on a shared machine a ratio of two independent minima or medians moves by more than that margin.
    step: a `compiled.CompiledStep` of `model`: time the compiled verify (the loop's, at its cache capacity).
    """
    if statistic not in ("median", "min", "paired"):
        raise ValueError(f"statistic must be 'median', 'min' or 'paired', got {statistic!r}")
    from .kv_cache import KVCache
    from .tree import Tree
    from .verify import prefill, verify_tree

    device = next(model.parameters()).device
    vocab = model.config.get_text_config(decoder=True).vocab_size
    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, vocab, (context,), generator=gen)
    capacity = context + max(sizes) + 8
    cache = KVCache.for_model(model, capacity=max(step.capacity, capacity) if step is not None else capacity)
    prefill(model, cache, ctx)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(warmup + repeats):
        for n in sizes:
            toks = torch.randint(0, vocab, (n,), generator=gen)
            if tree:  # node i's parent is i − 2: two branches from the root, so the mask is not causal
                shape = Tree(toks, torch.tensor([-1] + [max(i - 2, 0) for i in range(1, n)]))
            else:
                shape = Tree.chain(int(toks[0]), toks[1:])
            sync(device)
            t0 = time.perf_counter()
            verify_tree(model, cache, shape, step=step)
            sync(device)
            if rep >= warmup:
                times[n].append(time.perf_counter() - t0)
            cache.rollback()
    return CostCurve(
        sizes=list(sizes),
        seconds=summarize_times(times, statistic),
        device=str(device),
        context=context,
        tree=tree,
    )


def summarize_times(times: dict[int, list[float]], statistic: str = "median") -> list[float]:
    """t(n) for each size n (in `times`' order) from its repeats; times[n][r] is repeat r (`measure_cost_curve`)."""
    sizes = list(times)
    if statistic == "paired":  # median within-repeat ratio to the first size, times that size's median
        base = times[sizes[0]]
        t0 = statistics.median(base)
        return [t0 * statistics.median(t / b for t, b in zip(times[n], base, strict=True)) for n in sizes]
    return [(statistics.median if statistic == "median" else min)(times[n]) for n in sizes]


# model -> {setup key: curve}. Weakly keyed by the model object itself: a freed model's entries go with it,
# so a new model that happens to get the freed one's id() can never be handed the old model's curve.
_CURVES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _setup_key(model, step=None) -> tuple:
    # the same model moved to another device or dtype, given other linear or attention kernels, int8/int4
    # weights (`quant`), or run by a compiled step has another curve (these change its shape, not just its
    # scale); fp32 eager keeps the key it always had
    key = (str(next(model.parameters()).device), model.dtype, linear_kind(model), attention_kind(model))
    if (weights := weights_kind(model)) != "fp32":
        key = (*key, weights)
    return key if step is None else (*key, f"compiled:block={step.block}:capacity={step.capacity}")


def set_cost_curve(model, curve: CostCurve, step=None) -> None:
    """Use an already measured curve for `model` (e.g. one a notebook just plotted) instead of re-measuring."""
    _CURVES.setdefault(model, {})[(*_setup_key(model, step), curve.tree)] = curve


TREE_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)


def cost_curve_for(model, max_tokens: int = 16, tree: bool = False, step=None) -> CostCurve:
    """The model's cost curve up to `max_tokens`, measured once per process per model object, device, dtype and
    kernels (a fact about the machine, like the kernel plan: no decoding writes to it).

    tree=True: the curve of branching trees (`measure_cost_curve`). A later call that asks for more tokens
    than the stored curve reaches measures it again up to the new size (extrapolating past the measured
    sizes would guess exactly where tree methods decide). With `SPECDEC_LAB_CURVE_CACHE` set, the processes
    of one job share a measurement through that folder (`curve_store`; the test and notebook checks do).
    step: a `compiled.CompiledStep`: the curve of the compiled verify (its buckets make it a staircase).
    """
    curves = _CURVES.setdefault(model, {})
    key = (*_setup_key(model, step), tree)
    if key not in curves or max(curves[key].sizes) < max_tokens:
        how = {"repeats": 15, "statistic": "paired", "context": 64}
        stored_as = curve_store.curve_key(model, key, **how)
        stored = curve_store.load_curve(stored_as, max_tokens)  # another process's measurement (opt-in)
        if stored is not None:
            curves[key] = CostCurve(**stored)
        else:
            sizes = sorted({n for n in (TREE_SIZES if tree else DEFAULT_SIZES) if n <= max_tokens} | {max_tokens})
            # Paired ratios (`measure_cost_curve`): what a run decides on is how much dearer n tokens are than
            # one, and `StepCost` corrects each size only slowly from the loop's own timings.
            curves[key] = measure_cost_curve(model, sizes=sizes, tree=tree, step=step, **how)
            curve_store.store_curve(stored_as, curves[key].to_dict())
    return curves[key]


STEP_KINDS = ("root", "chain", "tree")  # a root-only step (plain decoding), a chain, a branching tree


def step_kind(n: int, tree: bool) -> str:
    """The kind of a step that verifies n tokens (root included): root-only, a chain, or a branching tree."""
    return "root" if n <= 1 else "tree" if tree else "chain"


class StepCost:
    """The price of one loop step on one model, for every sizer (module docstring): one per `generate` call,
    or carried across calls in a `Memory`.

        step(n, tree, drafting) = t̂(n) + ô(kind) + drafting,      t̂(n) = t(n) · load · shape(n)

    `load` (how busy the machine is now) follows every observed verify: a moving average of observed /
    (t(n) · shape(n)). `shape(n)` (how the context has changed size n's cost relative to the others: longer
    contexts raise multi-token verifies more than one-token ones) follows only size n's own verifies, slowly;
    a size not observed yet takes the nearest observed size's shape. Why two factors and not one ratio per
    size: a size that stops being verified would keep whatever ratio a burst of foreign load left it, and a
    2-token verify could look cheaper than a 1-token one for the rest of a run; a new size starts from the
    shape it was priced at and moves a few % per verify, so one noisy probe cannot reorder the sizes.

    ô(kind) starts at the root-only steps' overhead (0 before any step) and follows that kind's steps.
    `StepCost.of(curve)` prices on a given curve instead of a measured one (learn=False: never corrected).
    """

    def __init__(self, model=None, *, learn: bool = True, step=None):
        self.model = model
        self.compiled = step  # a `compiled.CompiledStep` the loop verifies with: its curve is the one to price
        self.learn = learn
        self.curves: dict[bool, CostCurve] = {}  # tree? -> the measured curve
        self.load = 1.0
        self.shape: dict[tuple[bool, int], float] = {}  # (tree?, n) -> shape(n)
        self.overheads: dict[str, float] = {}  # kind -> ô
        self.steps = 0  # steps observed
        self.load_decay, self.shape_decay, self.overhead_decay = 0.6, 0.97, 0.9
        self._drafting = 0.0  # seconds the proposer priced itself in the step in flight (`note`)

    @classmethod
    def of(cls, curve: CostCurve, *, learn: bool = True, overheads: dict[str, float] | None = None) -> StepCost:
        """Prices from a given curve (for chains and trees alike) and overheads; learn=False ignores every
        observation (tests, what-if notebooks: the prices stay exactly the curve's)."""
        cost = cls(learn=learn)
        cost.curves = {False: curve, True: curve}
        cost.overheads = dict(overheads or {})
        return cost

    # ---- the curves ---------------------------------------------------------------------------------
    def prepare(self, max_tokens: int, tree: bool = False) -> CostCurve:
        """Make sure the curve of `tree` kind reaches `max_tokens` (measured now, in the proposer's `start`,
        never in the middle of decoding); a fixed StepCost keeps its curve. A compiled step verifies at most
        its largest bucket (the loop cuts larger trees to it), so its curve stops there."""
        if self.compiled is not None:
            max_tokens = min(max_tokens, self.compiled.max_nodes)
        if self.model is not None and (tree not in self.curves or max(self.curves[tree].sizes) < max_tokens):
            self.curves[tree] = cost_curve_for(self.model, max_tokens=max_tokens, tree=tree, step=self.compiled)
        return self.curve(tree)

    def curve(self, tree: bool = False) -> CostCurve:
        """The measured curve of that kind (the other kind's when only that one was measured: t(1) is the
        same forward, and a chain curve prices a tree better than nothing)."""
        if tree in self.curves:
            return self.curves[tree]
        if (not tree) in self.curves:
            return self.curves[not tree]
        raise RuntimeError("no cost curve yet: the proposer's start() must call StepCost.prepare(max_tokens)")

    # ---- prices -------------------------------------------------------------------------------------
    def _shape(self, tree: bool, n: int) -> float:
        """shape(n): size n's own, else the nearest observed size's of the same kind (ties: the larger), else 1."""
        if (tree, n) in self.shape:
            return self.shape[tree, n]
        sizes = [m for t, m in self.shape if t == tree]
        if not sizes:
            return 1.0
        return self.shape[tree, min(sizes, key=lambda m: (abs(m - n), -m))]

    def verify(self, n: int, tree: bool = False) -> float:
        """t̂(n): seconds of one verify forward of n tokens, the root included (n = 1: a plain step)."""
        tree = tree and n > 1
        return self.curve(tree)(n) * self.load * self._shape(tree, n)

    def overhead(self, kind: str) -> float:
        """ô(kind): the loop's and the proposer's own seconds per step of that kind (`STEP_KINDS`)."""
        return self.overheads.get(kind, self.overheads.get("root", 0.0))

    def step(self, n: int, tree: bool = False, drafting: float = 0.0) -> float:
        """Seconds of a step verifying n tokens (root included) whose proposer priced its drafting at
        `drafting` seconds: t̂(n) + ô(kind) + drafting."""
        return self.verify(n, tree) + self.overhead(step_kind(n, tree)) + drafting

    # ---- what the loop reports ----------------------------------------------------------------------
    def note(self, seconds: float) -> None:
        """The proposer drafted for `seconds` this step, work it prices itself (its `drafting`): the loop
        leaves it out of the overhead it learns."""
        self._drafting += seconds

    def observe(self, n: int, tree: bool, verify: float, other: float) -> None:
        """One step: n tokens verified in `verify` seconds (forward and acceptance); `other`: the rest of the
        step's wall time (propose, keep, emit, update, the loop's bookkeeping and hooks). The loop reports
        every step, just before it asks the proposer for the next."""
        drafting, self._drafting = self._drafting, 0.0
        if not self.learn:
            return
        self.steps += 1
        kind = step_kind(n, tree)
        own = max(other - drafting, 0.0)
        o = self.overheads.get(kind)
        self.overheads[kind] = own if o is None else self.overhead_decay * o + (1 - self.overhead_decay) * own
        tree = tree and n > 1
        if not self.curves or verify <= 0:
            return
        ratio = min(max(verify / self.curve(tree)(n), 0.25), 4.0)  # a hiccup (page fault, other load) is clipped
        a, b = self.load_decay, self.shape_decay
        shape = self._shape(tree, n)
        self.load = a * self.load + (1 - a) * ratio / shape
        self.shape[tree, n] = b * shape + (1 - b) * ratio / self.load

    def summary(self) -> dict:
        """The corrections learned so far (what a bench row or a Memory shows)."""
        return {"steps": self.steps, "load": round(self.load, 3),
                "overhead_ms": {k: round(v * 1e3, 3) for k, v in self.overheads.items()}}  # fmt: skip
