"""Timings that are compared, taken in one loop: every contender once per repeat, the order rotated.

Two timings taken at different moments on a shared machine differ by whatever load each moment saw, and
that can be more than the difference being measured (a whole cost curve comes out slower when a
neighbour starts a job). So timings that are compared are taken together:

    repeat 0:  a b c      repeat 1:  b c a      repeat 2:  c a b      ...

and each contender keeps the median of its repeats. A drift (another process, frequency scaling) then hits
all of them alike, and none always runs first (after the others warmed the caches) or last. `rotated_rounds`
is that loop; the rest time with it:

    times = interleaved({"cached": f, "recomputed": g}, repeats=7)          # name -> seconds per repeat
    cmp = compare_cost_curves(model, {"stock": use_stock, "fast": use_fast}, sizes=[1, 2, 4, 8])
    cmp.curves["fast"](4), cmp.fastest(4), cmp.noise.spread
    cmp = interleaved_curves({"eager": Contender(model), "compiled": Contender(model, step=step)}, sizes)

`spread_sentence(noise)` says in one neutral sentence how far the repeats agreed (`noise.TimingNoise`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from .curve import CostCurve, measure_cost_curve, summarize_times
from .noise import DEFAULT_THRESHOLD, TimingNoise, combine, relative_spread

__all__ = [
    "rotated",
    "rotated_rounds",
    "interleaved",
    "Comparison",
    "Contender",
    "interleaved_curves",
    "compare_cost_curves",
    "spread_sentence",
    "runs_sentence",
]


def rotated(names: Sequence[str], r: int) -> list[str]:
    """The order of repeat r: `names` shifted left by r (each name runs first equally often)."""
    names = list(names)
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def rotated_rounds(
    fns: Mapping[str, Callable[[], object]], repeats: int = 5, warmup: int = 1, progress: Callable | None = None
) -> dict[str, list]:
    """What each fn returns, once per repeat, in rotated order: {name: [result of repeat 0, ...]}.

    `warmup` rounds run first and are not kept (first calls allocate, pack weights, compile, fill caches).
    progress: a tqdm-like wrapper around the rounds.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    names = list(fns)
    kept: dict[str, list] = {name: [] for name in names}
    rounds = range(warmup + repeats)
    for r in progress(rounds, desc="rounds") if progress else rounds:
        for name in rotated(names, r):
            out = fns[name]()
            if r >= warmup:
                kept[name].append(out)
    return kept


def interleaved(
    fns: Mapping[str, Callable[[], object]], repeats: int = 5, warmup: int = 1, self_timed: bool = False
) -> dict[str, list[float]]:
    """Seconds of each fn, once per repeat, in rotated order: {name: [seconds of repeat 0, ...]}.

    Wall-clock seconds of the call, or with self_timed=True the seconds each call returns (a fn that times
    only part of its work, e.g. one forward after an untimed prefill). `warmup` untimed rounds run first.
    """

    def clocked(fn: Callable[[], object]) -> Callable[[], float]:
        def run() -> float:
            t0 = time.perf_counter()
            out = fn()
            return float(out) if self_timed else time.perf_counter() - t0

        return run

    return rotated_rounds({name: clocked(fn) for name, fn in fns.items()}, repeats, warmup)


@dataclass
class Comparison:
    """Cost curves of several setups of one model, measured in one interleaved loop.

    times[setup][n] = the seconds of one forward of n tokens, one per repeat.
    """

    sizes: list[int]
    times: dict[str, dict[int, list[float]]]
    context: int
    device: str = "cpu"

    @property
    def setups(self) -> list[str]:
        return list(self.times)

    @property
    def curves(self) -> dict[str, CostCurve]:
        """{setup: the median curve}."""
        return {
            s: CostCurve(sizes=list(self.sizes), seconds=summarize_times(t), device=self.device, context=self.context)
            for s, t in self.times.items()
        }

    def fastest(self, n: int) -> str:
        """The setup with the lowest median at size n."""
        return min(self.setups, key=lambda s: statistics.median(self.times[s][n]))

    def wins(self, setup: str) -> list[int]:
        """The sizes at which `setup` had the lowest median."""
        return [n for n in self.sizes if self.fastest(n) == setup]

    def ratio(self, a: str, b: str) -> list[float]:
        """t_a(n) / t_b(n) per size (medians): below 1 where a was faster."""
        ca, cb = self.curves[a], self.curves[b]
        return [x / y for x, y in zip(ca.seconds, cb.seconds, strict=True)]

    @property
    def noise(self) -> TimingNoise:
        """Spread of the repeats per size: the largest any setup saw (`noise.combine`)."""
        return combine(*(TimingNoise.of(t) for t in self.times.values()))


@dataclass(frozen=True)
class Contender:
    """One setup whose cost curve is compared: `model` after `install()` (a function that switches it in
    place, e.g. to other kernels), its verify run by `step` (a `compiled.CompiledStep` of it) when given."""

    model: object
    install: Callable[[], object] | None = None
    step: object = None

    def one_pass(self, sizes: Sequence[int], context: int) -> CostCurve:
        """`cost.measure_cost_curve` with repeats=1: a fresh cache holding `context` tokens (untimed), then
        one timed forward per size."""
        if self.install is not None:
            self.install()
        return measure_cost_curve(self.model, sizes=sizes, context=context, repeats=1, warmup=0, step=self.step)


def interleaved_curves(
    contenders: Mapping[str, Contender],
    sizes: Sequence[int],
    context: int = 64,
    repeats: int = 7,
    warmup: int = 1,
    progress: Callable | None = None,
) -> Comparison:
    """Cost curves of several setups on one device, in one loop: each repeat runs one pass over all sizes per
    contender (`Contender.one_pass`), the contenders' order rotated (`rotated_rounds`; its `warmup` rounds
    also compile a compiled step's buckets). An installing contender leaves its model in the setup that ran
    last: install the one you want after.
    """
    passes = rotated_rounds(
        {name: partial(c.one_pass, sizes, context) for name, c in contenders.items()}, repeats, warmup, progress
    )
    times = {name: {n: [p.seconds[i] for p in ps] for i, n in enumerate(sizes)} for name, ps in passes.items()}
    device = next(iter(passes.values()))[-1].device
    return Comparison(sizes=list(sizes), times=times, context=context, device=device)


def compare_cost_curves(
    model,
    setups: Mapping[str, Callable[[], object]],
    sizes: Sequence[int],
    context: int = 64,
    repeats: int = 7,
    warmup: int = 1,
) -> Comparison:
    """Cost curves of `model` under each setup (a function that switches the model to it, in place), interleaved.

    Each repeat installs every setup in rotated order and times one pass over all sizes (`interleaved_curves`;
    the prefill of `context` tokens is not timed). The first `warmup` rounds are untimed. The model is left in
    the setup that ran last: install the one you want after.
    """
    return interleaved_curves(
        {name: Contender(model, install=install) for name, install in setups.items()}, sizes, context, repeats, warmup
    )


def spread_sentence(noise: TimingNoise) -> str:
    """One neutral sentence on how far the repeats agreed, for a notebook's rendered prose.

    Above the noise threshold it says the machine was busy and what a rerun would give; it never declares
    the numbers void (they are still the medians of what was measured).
    """
    n, worst = noise.worst
    detail = f"median relative interquartile range over the sizes; the noisiest, n = {n}: {worst:.0%}"
    if noise.unreliable:
        return (
            f"The {noise.repeats} repeats of each size spread by {noise.spread:.0%} ({detail}): the machine was "
            "busy while they ran, so differences of that order are noise here; a rerun on a quiet machine "
            "(or with fewer threads than free cores) gives a cleaner picture."
        )
    return f"The {noise.repeats} repeats of each size agree to within {noise.spread:.0%} ({detail})."


def runs_sentence(times: Mapping[str, Sequence[float]], threshold: float = DEFAULT_THRESHOLD) -> str:
    """`spread_sentence` for a few whole runs per contender (`interleaved`'s result): how far each one's
    runs agreed (relative interquartile range), and what that means for the ratio of their medians."""
    spreads = {name: relative_spread(t) for name, t in times.items()}
    runs = min(len(t) for t in times.values())
    if runs < 2:
        return "One run of each: the ratio is a single sample, rougher than a median of several."
    name, worst = max(spreads.items(), key=lambda kv: kv[1])
    if worst > threshold:
        return (
            f"The {runs} runs of “{name}” spread by {worst:.0%} (relative interquartile range): the machine was "
            "busy while they ran, so a ratio of the medians is uncertain by about that much either way; a rerun "
            "on a quiet machine gives a tighter one."
        )
    return f"The {runs} runs of each agree to within {worst:.0%} (relative interquartile range; the widest: “{name}”)."
