"""Hardware cost of verification, and draft lengths chosen from it.

Decoding a small model is memory-bound: one forward over n tokens costs far less than n forwards, but
not nothing, and on CPUs the curve is not even monotonic (2–3 tokens can take slower matmul paths than
4 or 8). So the draft length that maximizes speed depends on the machine. We *measure* the curve
t(n) = seconds for one verify forward of n tokens on the model at hand, and pick the chain length k that
maximizes expected tokens per second:

    k* = argmax_k  E[tokens | k, α] / t(k + 1),     E[tokens | k, α] = (1 − α^{k+1}) / (1 − α)

(the expected tokens per step of a chain with per-token acceptance α, bonus token included; Leviathan et
al. 2023, eq. 1). k = 0 (no draft: one autoregressive step) is always a candidate, so a proposer that is
usually wrong backs off to plain decoding instead of paying for failed verification.
"""

from __future__ import annotations

import math
import statistics
import time
import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from .attention import attention_kind
from .device import sync
from .fast_linear import linear_kind
from .theory import optimal_k

__all__ = [
    "CostCurve",
    "flat_curve",
    "measure_cost_curve",
    "cost_curve_for",
    "set_cost_curve",
    "AcceptanceTracker",
    "DraftLength",
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

    def best_chain_length(self, alpha: float, k_max: int, draft_step: float = 0.0, t=None) -> int:
        """argmax over k in [0, k_max] of E[tokens | k, α] / (k·t_draft + t(k+1)) (ties -> shorter).

        draft_step: seconds of one draft step (0 for free drafts such as prompt lookup; a draft model's
        measured step time otherwise, so c = t_draft / t(1) enters as in `theory.measured_speedup`).
        t: the verify cost t(n) to use (default: this curve; `DraftLength` passes its online-corrected one).
        """
        return optimal_k(alpha, draft_step, k_max, verify_cost=t or self)  # in seconds: same argmax

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
) -> CostCurve:
    """Time one cached forward of n tokens (after `context` cached tokens) for each n; median of repeats.

    Sizes are interleaved within each repeat so slow drifts (frequency scaling, other load) hit all alike.
    tree: verify branching trees (two branches from the root, n ≥ 3) rather than chains. A chain runs with
    the model's own causal mask; a tree needs an explicit mask, which attention kernels may handle more
    slowly — tree methods (Medusa) size their trees on this curve.
    statistic: "median" of the repeats; "min", the cost without interference (other load only ever adds
    time); or "paired": t(n) = median over repeats of t_r(n) / t_r(sizes[0]), times the median
    t(sizes[0]) — each repeat's sizes run back to back, so a ratio within one repeat cancels whatever load
    that repeat saw. A curve measured once and used for a whole run (Medusa's tree size) decides on such
    ratios (are 5 tokens worth 4% more accepted than 4?): on a shared 2-core VM, six back-to-back
    measurements of t(5)/t(4) gave 1.00–1.15 from minima, 1.06–1.15 from medians, 1.12–1.17 paired.
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
    cache = KVCache.for_model(model, capacity=context + max(sizes) + 8)
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
            verify_tree(model, cache, shape)
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


def _setup_key(model) -> tuple:
    # the same model moved to another device or dtype, or given other linear or attention kernels, has
    # another curve (the kernels change its shape, not just its scale)
    return (str(next(model.parameters()).device), model.dtype, linear_kind(model), attention_kind(model))


def set_cost_curve(model, curve: CostCurve) -> None:
    """Use an already measured curve for `model` (e.g. one a notebook just plotted) instead of re-measuring."""
    _CURVES.setdefault(model, {})[(*_setup_key(model), curve.tree)] = curve


TREE_SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64)


def cost_curve_for(model, max_tokens: int = 16, tree: bool = False) -> CostCurve:
    """The model's cost curve, measured once per process per model object, device, dtype and kernels.

    tree=True: the curve of branching trees (`measure_cost_curve`), up to max_tokens (tree methods ask for
    larger sizes than chains do).
    """
    curves = _CURVES.setdefault(model, {})
    key = (*_setup_key(model), tree)
    if key not in curves:  # a curve that stops short of max_tokens is extrapolated (CostCurve.__call__)
        sizes = sorted({n for n in (TREE_SIZES if tree else DEFAULT_SIZES) if n <= max_tokens} | {max_tokens})
        # Paired ratios (see `measure_cost_curve`): what a run decides on is how much dearer n tokens are than
        # one, and a chain's curve is the prior `DraftLength` corrects only slowly (its shape(n)), so a noisy
        # t(2)/t(1) measured at startup could keep a draft backed off (or drafting) for a whole run.
        curves[key] = measure_cost_curve(model, sizes=sizes, repeats=15, tree=tree, statistic="paired")
    return curves[key]


class AcceptanceTracker:
    """Per-token acceptance rate α, estimated online, per key (e.g. the n-gram length that matched).

    A chain of k drafts with a accepted is a truncated geometric observation: a successes and one failure
    if a < k. Counts decay geometrically (recent text matters most); a prior keeps early estimates sane.
    While a key is not tried its estimate drifts back toward the prior, so a proposer that backed off
    tries again later (text that did not repeat may start to).
    """

    def __init__(
        self,
        prior: float = 0.5,
        prior_weight: float = 2.0,
        decay: float = 0.7,
        recover: float = 0.05,
        priors: dict | None = None,
    ):
        self.prior, self.prior_weight, self.decay, self.recover = prior, prior_weight, decay, recover
        self.priors = priors or {}  # per-key prior α (e.g. longer n-gram matches are more trustworthy)
        self.successes: dict = {}
        self.failures: dict = {}

    def alpha(self, key=None) -> float:
        s, f = self.successes.get(key, 0.0), self.failures.get(key, 0.0)
        prior = self.priors.get(key, self.prior)
        return (s + prior * self.prior_weight) / (s + f + self.prior_weight)

    def lower_bound(self, key=None, z: float = 1.0) -> float:
        """α̂ − z·sd: a lower confidence bound on α (normal approximation). The estimate stands on the decayed
        counts plus the prior's pseudo-counts, n = s + f + prior_weight observations; sd = sqrt(α̂(1 − α̂)/n).
        One accepted token after many rejected ones moves α̂, hardly the bound."""
        a = self.alpha(key)
        n = self.successes.get(key, 0.0) + self.failures.get(key, 0.0) + self.prior_weight
        return max(0.0, a - z * math.sqrt(a * (1.0 - a) / n))

    def observe(self, key, proposed: int, accepted: int) -> None:
        if proposed <= 0:
            return
        s = self.successes.get(key, 0.0) * self.decay + accepted
        f = self.failures.get(key, 0.0) * self.decay + (1.0 if accepted < proposed else 0.0)
        self.successes[key], self.failures[key] = s, f

    def idle(self, key) -> None:
        """One step in which `key` could have been tried but was not: forget a little."""
        if key in self.successes:
            keep = 1.0 - self.recover
            self.successes[key] *= keep
            self.failures[key] *= keep


class DraftLength:
    """How many draft tokens to propose: fixed, HF's +2/−1 heuristic, or cost-aware (default).

    mode = int k        -> always k (capped by what the proposer has)
    mode = "heuristic"  -> transformers' rule: start at `initial`; +2 after a fully accepted draft, −1
                           (not below 1) otherwise
    mode = "cost"       -> k* = argmax_k E[tokens | k, α̂] / (k·t_draft + t̂(k+1)) with α̂ from
                           `AcceptanceTracker`, t_draft the proposer's measured draft step (0 for free
                           drafts) and t̂ the measured `CostCurve`, corrected (below); k = 0 scores 1 / t̂(1)
                           and wins where no draft pays: it backs off to plain decoding, and probes

    The measured curve is taken at a short context (64 tokens) on an idle machine; the loop's own verify
    timings (`observe_verify`) correct it as decoding goes (longer contexts raise the cost of multi-token
    verifies more than that of one token: attention over the cache grows with both). Without the correction
    a long prompt made cost mode pick k = 3 where k = 1 pays.

    The correction has two parts, t̂(n) = t(n) · load · shape(n). `load`, a moving average over every
    observed verify of observed / (measured · shape), is how busy the machine is now; `shape(n)` (the
    nearest observed size's for sizes not seen yet) is what remains for size n, and moves slowly. Why not
    one ratio per size: a size that stops being verified keeps its last ratio, so while drafting (only
    2-token verifies) the 1-token ratio stayed as a burst of foreign load had left it, a 2-token verify
    looked cheaper than a 1-token one, and a draft accepting 19% ran for 60 steps (a bench prompt, qa).
    shape(n) of a size not seen before starts from the shape it was priced at and moves 3% per verify,
    so a single probe's timing (one noisy forward) cannot reorder the sizes.

    Backing off and probing. The estimates that made cost mode stop (α̂, a draft model's step time) are
    refreshed only by drafting, so while backed off it probes: the `probe_interval`-th consecutive k = 0
    choice proposes one token instead. The interval starts at `probe_every`, doubles after each failed
    probe (its token rejected) up to `probe_max`, and is reset by an accepted probe or by the rule choosing
    k ≥ 1 again. Why it grows: a probe costs a draft step (a model draft also catches up on the skipped
    tokens, in one forward) and a 2-token verify instead of 1, and text that defeats a draft tends to go on
    defeating it (a whole answer of prose), so a fixed interval N costs ~1/N of the steps for as long as
    the text lasts; doubling gets to probe_max after a few failures, where the overhead is ~1/probe_max.
    The price, noticing late that the text turned predictable, is bounded by probe_max steps, and the
    first probes come soon, so one unlucky measurement (a step timed while the machine was busy) cannot
    switch a proposer off for long.

    Resuming. Once backed off, the rule resumes drafting only when k ≥ 1 pays at a lower confidence bound
    on α, α̂ − z·sd (`AcceptanceTracker.lower_bound`, z = `resume_z`); while drafting it uses α̂ itself. The
    asymmetry is hysteresis: with z = 0, one accepted probe after a run of rejections lifted α̂ just over
    the threshold, the draft ran a few steps, failed, backed off, and the next accepted probe started it
    again — each round paying draft steps for nothing. With z ≥ 1 an accepted probe only brings the next
    probe forward; a few accepted in a row resume. Model drafts (a failed token costs a draft forward) use
    z = 1; prompt lookup, whose drafts are free, uses 0.
    """

    def __init__(
        self,
        mode: int | str = "cost",
        k_max: int = 10,
        initial: int = 4,
        tracker: AcceptanceTracker | None = None,
        probe_every: int = 16,
        probe_max: int = 128,
        resume_z: float = 0.0,
    ):
        if isinstance(mode, str) and mode not in ("cost", "heuristic"):
            raise ValueError(f"draft_length must be an int, 'cost' or 'heuristic', got {mode!r}")
        if isinstance(mode, int) and mode < 0:
            raise ValueError(f"draft_length must be >= 0, got {mode}")
        if k_max < 1:
            raise ValueError(f"max_draft must be >= 1, got {k_max}")
        if probe_every < 0 or (probe_every and probe_max < probe_every):
            raise ValueError(f"need 0 <= probe_every <= probe_max, got {probe_every}, {probe_max}")
        self.mode, self.k_max = mode, k_max
        self.k_heuristic = initial
        self.tracker = tracker or AcceptanceTracker()
        self.curve: CostCurve | None = None
        self.draft_step = 0.0  # seconds per draft step; a draft-model proposer keeps it measured
        self.probe_every, self.probe_max = probe_every, probe_max  # probe_every = 0: never probe
        self.probe_interval = probe_every  # the wait now: doubles after a failed probe (class docstring)
        self.idle_run = 0  # consecutive cost-mode choices of k = 0 (a probe ends the run)
        self.probing = False  # the last choice was a probe; its outcome (`observe`) sets the next wait
        if resume_z < 0:
            raise ValueError(f"resume_confidence must be >= 0, got {resume_z}")
        self.resume_z = resume_z  # z of the bound on α that resuming from a back-off must pay with
        self.backed_off = False  # the rule's last own choice (probes aside) was k = 0
        # t̂(n) = t(n) · load · shape(n) (class docstring): load, how busy the machine is now, follows every
        # verify of any size; shape(n), how the context has changed size n's cost relative to the others,
        # follows only size n's own verifies, slowly.
        self.load = 1.0
        self.shape: dict[int, float] = {}
        self.load_decay, self.shape_decay = 0.6, 0.97

    def observe_verify(self, n: int, seconds: float | None) -> None:
        """One verify forward of n tokens took `seconds` (the loop's timing): refine t̂(n)."""
        if self.curve is None or not seconds or seconds <= 0:
            return
        ratio = min(max(seconds / self.curve(n), 0.25), 4.0)  # a hiccup (page fault, other load) is clipped
        a, b = self.load_decay, self.shape_decay
        self.load = a * self.load + (1 - a) * ratio / self._shape(n)
        # A size seen for the first time starts from the shape it was priced at (the nearest size's), not
        # from its first residual: one noisy probe would otherwise fix how a 2-token verify compares with a
        # 1-token one — a fast probe made 2 tokens look cheaper than 1, and a draft accepting 19% ran on.
        self.shape[n] = b * self.shape.get(n, self._shape(n)) + (1 - b) * ratio / self.load

    def _shape(self, n: int) -> float:
        """shape(n): size n's own, else the nearest observed size's (ties: the larger), else 1."""
        if not self.shape:
            return 1.0
        near = n if n in self.shape else min(self.shape, key=lambda m: (abs(m - n), -m))
        return self.shape[near]

    def verify_cost(self, n: int) -> float:
        """t̂(n) = t(n) · load · shape(n): the measured curve, corrected by what the loop has observed."""
        assert self.curve is not None
        return self.curve(n) * self.load * self._shape(n)

    def start(self, model) -> None:
        if self.mode == "cost" and self.curve is None:
            self.curve = cost_curve_for(model, max_tokens=self.k_max + 1)

    def choose(self, available: int, key=None) -> int:
        cap = min(available, self.k_max)
        if isinstance(self.mode, int):
            return min(self.mode, cap)
        if self.mode == "heuristic":
            return min(self.k_heuristic, cap)
        assert self.curve is not None, "DraftLength.start(model) measures the cost curve first"
        self.probing = False
        alpha = self.tracker.alpha(key)
        if self.backed_off and self.resume_z:
            alpha = self.tracker.lower_bound(key, self.resume_z)  # resuming: α must pay at its bound
        k = self.curve.best_chain_length(alpha, cap, self.draft_step, t=self.verify_cost)
        if k > 0:
            self.probe_interval = self.probe_every  # drafting pays again: a later back-off probes early
            self.backed_off = False
        elif cap > 0:
            self.backed_off = True
            self.idle_run += 1
            if self.probe_every and self.idle_run >= self.probe_interval:
                k, self.probing = 1, True  # probe: refresh α̂ and the step time (class docstring)
        if k > 0:
            self.idle_run = 0
        return k

    def observe(self, key, proposed: int, accepted: int) -> None:
        self.tracker.observe(key, proposed, accepted)
        if self.probing and proposed > 0:  # the probe's outcome sets the wait before the next one
            self.probing = False
            failed = accepted < proposed
            self.probe_interval = min(2 * self.probe_interval, self.probe_max) if failed else self.probe_every
        if proposed > 0 and self.mode == "heuristic":
            self.k_heuristic = self.k_heuristic + 2 if accepted == proposed else max(1, self.k_heuristic - 1)
