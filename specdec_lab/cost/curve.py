"""The verify cost curve t(n): seconds of one target forward over n tokens, measured on this device.

Decoding a small model is memory-bound: one forward over n tokens costs far less than n forwards, but not
nothing, and on CPUs the curve is not even monotonic (2–3 tokens can take slower matmul paths than 4 or 8).
`cost_curve_for` measures it once per process per model and setup (kernels, weights, compiled step), for
chains and for branching trees (a tree mask), and `step.StepCost` prices every step on it.
"""

from __future__ import annotations

import math
import statistics
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from ..machine import sync
from ..models.attention import attention_kind
from ..models.fast_linear import linear_kind
from ..models.quant import weights_kind
from . import curve_store

__all__ = [
    "CostCurve",
    "CurveInputError",
    "ShapedCurve",
    "curve_from_points",
    "flat_curve",
    "measure_cost_curve",
    "summarize_times",
    "cost_curve_for",
    "set_cost_curve",
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
        """The curve as JSON: {"sizes": [n, ...], "seconds": [t(n), ...], "device", "context", "tree"}."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping, *, device: str = "cpu", context: int = 0, tree: bool = False) -> CostCurve:
        """The curve `to_dict` wrote, checked as `curve_from_points` checks one given by hand (n = 1 among the
        sizes, positive seconds, sizes sorted). Other keys are ignored: a record may carry its curve's fields
        beside its own. Also reads the older shape {"points": {"1": seconds, ...}} (a curve file, written or by
        hand, and the step-variants and compile-levers records in data/curves); device, context and tree take
        the values given here where `d` has none (older records keep them at their top level).
        """
        if not isinstance(d, Mapping):
            raise CurveInputError(
                f'a cost curve is a JSON object, {{"sizes": [n, ...], "seconds": [t(n), ...]}} (`CostCurve.to_dict`) '
                f'or {{"points": {{"1": seconds, ...}}}}; got {type(d).__name__}'
            )
        if "sizes" in d or "seconds" in d:
            sizes, seconds = d.get("sizes"), d.get("seconds")
            if not isinstance(sizes, list) or not isinstance(seconds, list) or len(sizes) != len(seconds):
                raise CurveInputError(
                    f'"sizes" and "seconds" must be lists of equal length, one time per size; got {sizes!r} and '
                    f"{seconds!r}: write both lists (`CostCurve.to_dict`)"
                )
            points = list(zip(sizes, seconds, strict=True))
        elif isinstance(d.get("points"), Mapping):
            try:  # JSON keys are strings
                points = [(int(n), t) for n, t in d["points"].items()]
            except (TypeError, ValueError):
                raise CurveInputError(
                    f'token counts must be whole numbers, got {sorted(map(str, d["points"]))}: key "points" by '
                    '"1", "2", ...'
                ) from None
        else:
            raise CurveInputError(
                f'a cost curve needs "sizes" and "seconds" (`CostCurve.to_dict`) or "points": {{n: seconds}} with '
                f"n = 1 among them; got the keys {sorted(map(str, d))}: add one of the two"
            )
        curve = curve_from_points(points)
        curve.device = str(d.get("device", device))
        curve.context = int(d.get("context", context))
        curve.tree = bool(d.get("tree", tree))
        return curve


class CurveInputError(ValueError):
    """A cost curve given by hand or read from JSON that cannot be one (no points, n < 1, a non-positive time,
    no t(1), ...)."""


def curve_from_points(points: Mapping[int, float] | Sequence[tuple[int, float]], device: str = "user") -> CostCurve:
    """A verify cost curve from measured points {n: seconds} (or [(n, seconds), ...]), e.g. a GPU's.

    n = number of tokens (tree nodes, root included) in one verify forward; it must include n = 1 (one
    autoregressive step: the replay's baseline and the drafting scale). Between points t(n) is
    interpolated linearly, past the last one extrapolated (`CostCurve.__call__`).
    """
    items = list(points.items()) if isinstance(points, Mapping) else list(points)
    if not items:
        raise CurveInputError("a cost curve needs at least one point (n=1: the seconds of a one-token forward)")
    sizes, seconds = [], []
    for item in items:
        try:
            n, t = item
        except (TypeError, ValueError):
            raise CurveInputError(f"each point is (tokens, seconds); got {item!r}") from None
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise CurveInputError(f"token counts must be whole numbers >= 1, got {n!r}")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise CurveInputError(f"t({n}) must be a positive number of seconds, got {t!r}")
        if n in sizes:
            raise CurveInputError(f"t({n}) given twice")
        sizes.append(n)
        seconds.append(float(t))
    if 1 not in sizes:
        raise CurveInputError(f"the curve must include n=1 (a one-token forward); got sizes {sorted(sizes)}")
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    return CostCurve(sizes=[sizes[i] for i in order], seconds=[seconds[i] for i in order], device=device, tree=True)


@dataclass
class ShapedCurve:
    """Two verify cost curves, for chains (the model's causal mask) and for trees (an explicit tree mask):
    a step is priced on the one its shape ran with. Called as t(n) it is the tree curve."""

    chain: CostCurve
    tree: CostCurve

    def __call__(self, n: int) -> float:
        return self.tree(n)

    def cost(self, n: int, chain: bool | None) -> float:
        return self.chain(n) if chain else self.tree(n)


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
    rows: int = 1,
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
    rows: time one forward over that many sequences, each verifying n tokens after `context` of its own
    (`verify.verify_rows`): the price of a step of a batch, t(rows, n) — bound by the weights' bytes at few rows ×
    tokens, by compute at many.
    """
    if statistic not in ("median", "min", "paired"):
        raise ValueError(f"statistic must be 'median', 'min' or 'paired', got {statistic!r}")
    from ..kv_cache import KVCache, RowsCache
    from ..trees.tree import Tree
    from ..verify import prefill, verify_rows, verify_tree

    device = next(model.parameters()).device
    vocab = model.config.get_text_config(decoder=True).vocab_size
    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, vocab, (context,), generator=gen)
    capacity = context + max(sizes) + 8
    if rows > 1:
        if step is not None:
            raise ValueError("a compiled step verifies one sequence: measure rows > 1 eagerly (step=None)")
        batch = RowsCache(model, rows, capacity)
        for b in range(rows):
            prefill(model, batch.row(b), ctx)
    else:
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
            if rows > 1:
                verify_rows(model, batch, [shape] * rows)
            else:
                verify_tree(model, cache, shape, step=step)
            sync(device)
            if rep >= warmup:
                times[n].append(time.perf_counter() - t0)
            for c in batch.rows if rows > 1 else [cache]:
                c.rollback()
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


def _setup_key(model, step=None, rows: int = 1) -> tuple:
    # the same model moved to another device or dtype, given other linear or attention kernels, int8/int4
    # weights (`quant`), run by a compiled step, or verifying several sequences at once has another curve (these
    # change its shape, not just its scale); fp32 eager, one sequence, keeps the key it always had
    key = (str(next(model.parameters()).device), model.dtype, linear_kind(model), attention_kind(model))
    if (weights := weights_kind(model)) != "fp32":
        key = (*key, weights)
    if rows > 1:
        key = (*key, f"rows={rows}")
    return key if step is None else (*key, f"compiled:block={step.block}:capacity={step.capacity}")


def set_cost_curve(model, curve: CostCurve, step=None, rows: int = 1) -> None:
    """Use an already measured curve for `model` (e.g. one a notebook just plotted) instead of re-measuring."""
    _CURVES.setdefault(model, {})[(*_setup_key(model, step, rows), curve.tree)] = curve


TREE_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)


def _stored_curve(key: str, max_tokens: int) -> CostCurve | None:
    """The curve `curve_store` keeps under `key`, if caching is on and it reaches `max_tokens`."""
    stored = curve_store.load_curve(key)
    try:
        curve = CostCurve.from_dict(stored) if stored is not None else None
    except CurveInputError:  # a damaged entry, like an unreadable one: measured again and replaced
        return None
    return curve if curve is not None and max(curve.sizes) >= max_tokens else None


def cost_curve_for(model, max_tokens: int = 16, tree: bool = False, step=None, rows: int = 1) -> CostCurve:
    """The model's cost curve up to `max_tokens`, measured once per process per model object, device, dtype and
    kernels (a fact about the machine, like the kernel plan: no decoding writes to it).

    tree=True: the curve of branching trees (`measure_cost_curve`). A later call that asks for more tokens
    than the stored curve reaches measures it again up to the new size (extrapolating past the measured
    sizes would guess exactly where tree methods decide). With `SPECDEC_LAB_CURVE_CACHE` set, the processes
    of one job share a measurement through that folder (`curve_store`; the test and notebook checks do).
    step: a `compiled.CompiledStep`: the curve of the compiled verify (its buckets make it a staircase).
    rows: the curve of a batch's step, `rows` sequences verifying n tokens each (`measure_cost_curve`).
    """
    curves = _CURVES.setdefault(model, {})
    key = (*_setup_key(model, step, rows), tree)
    if key not in curves or max(curves[key].sizes) < max_tokens:
        how = {"repeats": 15, "statistic": "paired", "context": 64}
        stored_as = curve_store.curve_key(model, key, **how)
        stored = _stored_curve(stored_as, max_tokens)  # another process's measurement (opt-in)
        if stored is not None:
            curves[key] = stored
        else:
            sizes = sorted({n for n in (TREE_SIZES if tree else DEFAULT_SIZES) if n <= max_tokens} | {max_tokens})
            # Paired ratios (`measure_cost_curve`): what a run decides on is how much dearer n tokens are than
            # one, and `StepCost` corrects each size only slowly from the loop's own timings.
            curves[key] = measure_cost_curve(model, sizes=sizes, tree=tree, step=step, rows=rows, **how)
            curve_store.store_curve(stored_as, curves[key].to_dict())
    return curves[key]
