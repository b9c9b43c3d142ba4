"""Notebook 00's helpers: timed runs that keep what each run produced (so the prose can split the very run the
table shows), that run's time split into its parts, and which categories of a committed benchmark file are
the lowest and highest beyond the spread between their prompts."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from specdec_lab.cost.timing import rotated_rounds

__all__ = ["timed_runs", "median_run", "RunSplit", "split_run", "CategoryExtremes", "category_extremes"]


def timed_runs(
    fns: Mapping[str, Callable[[], object]], repeats: int, warmup: int = 0
) -> tuple[dict[str, list[float]], dict[str, list[object]]]:
    """`timing.interleaved`, but each call's result is kept too: ({name: [wall seconds]}, {name: [result]}),
    repeat by repeat in the same order (the calls rotated as `rotated_rounds` does)."""
    import time

    def clocked(fn: Callable[[], object]) -> Callable[[], tuple[float, object]]:
        def call() -> tuple[float, object]:
            t0 = time.perf_counter()
            out = fn()
            return time.perf_counter() - t0, out

        return call

    kept = rotated_rounds({name: clocked(fn) for name, fn in fns.items()}, repeats, warmup)
    return ({name: [s for s, _ in runs] for name, runs in kept.items()},
            {name: [r for _, r in runs] for name, runs in kept.items()})  # fmt: skip


def median_run(seconds: Sequence[float], results: Sequence[object]) -> tuple[int, object]:
    """(index, result) of the run whose seconds are the median: with an odd count exactly the median run,
    with an even count the run nearest the median (the faster one on a tie)."""
    if not seconds or len(seconds) != len(results):
        raise ValueError(f"need as many results as timings, got {len(seconds)} and {len(results)}")
    mid = statistics.median(seconds)
    i = min(range(len(seconds)), key=lambda j: (abs(seconds[j] - mid), seconds[j]))
    return i, results[i]


@dataclass(frozen=True)
class RunSplit:
    """One decode's own time, split into parts that add up to it (seconds, from its trace)."""

    seconds: float  # the run's whole time on the loop's clock
    prefill: float  # the prompt's one forward
    verify: float  # its verify forwards, each over the k + 1 tokens of its step
    at_t1: float  # as many forwards at the curve's t(1)
    loop: float  # the loop's time outside the forwards (propose, accept, cache, bookkeeping)
    forwards: int
    sizes: tuple[int, ...]  # the sizes its forwards verified
    band: float  # the widest repeat spread of t(1) and those sizes: what "within noise" means for verify vs at_t1

    @property
    def extra(self) -> float:
        """What the forwards cost beyond as many single-token forwards (negative: less)."""
        return self.verify - self.at_t1

    @property
    def extra_rel(self) -> float:
        """|extra| over the smaller of verify and at_t1: the reading `course.compare` tests against `band`."""
        return abs(self.extra) / min(self.verify, self.at_t1) if min(self.verify, self.at_t1) > 0 else 0.0


def split_run(result, curve, noise) -> RunSplit:
    """Split a `GenerationResult` with a trace: prefill, verify forwards (against as many at t(1) of `curve`),
    and the loop's own time; `noise` (a `TimingNoise`) gives the band for verify against t(1)."""
    verify = sum(s.t_verify for s in result.steps)
    sizes = tuple(sorted({len(s.tree_tokens) for s in result.steps}))
    return RunSplit(
        seconds=result.seconds,
        prefill=result.prefill_seconds,
        verify=verify,
        at_t1=result.forwards * curve(1),
        loop=result.seconds - result.prefill_seconds - verify,
        forwards=result.forwards,
        sizes=sizes,
        band=max(noise.at(n) for n in (1, *sizes)),
    )


@dataclass(frozen=True)
class CategoryExtremes:
    """Each category's mean accepted (ratio of sums over its prompts) and the categories that may be the lowest
    and the highest: those that are the lowest (highest) in more than `tail` of a bootstrap over each
    category's prompts. One name: told apart from the rest; several: the prompts' spread cannot order them."""

    values: dict[str, float]
    lowest: list[str]  # sorted by value, lowest first
    highest: list[str]  # sorted by value, highest first
    prompts: dict[str, int]  # prompts per category
    tail: float
    resamples: int


def category_extremes(
    rows: Sequence[dict], method: str, level: float = 0.95, resamples: int = 2000, seed: int = 0
) -> CategoryExtremes:
    """The lowest and highest categories of `method`'s mean accepted (tokens / target forwards, summed over a
    category's prompts) in a benchmark file's `rows`, beyond the spread between prompts: each resample draws
    every category's prompts with replacement and notes which category came lowest and highest. A category is
    a candidate where it comes lowest (highest) in more than (1 − level) / 2 of the resamples. Deterministic
    for a given seed."""
    by_cat: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["method"] == method and r.get("forwards"):
            by_cat.setdefault(r["category"], []).append((float(r["new_tokens"]), float(r["forwards"])))
    if len(by_cat) < 2:
        raise ValueError(f"{method!r}: need two categories or more, got {sorted(by_cat)}")
    values = {c: sum(t for t, _ in ps) / sum(f for _, f in ps) for c, ps in by_cat.items()}
    rng = random.Random(seed)
    low = dict.fromkeys(by_cat, 0)
    high = dict.fromkeys(by_cat, 0)
    for _ in range(resamples):
        drawn = {}
        for c, ps in by_cat.items():
            picks = rng.choices(ps, k=len(ps))
            drawn[c] = sum(t for t, _ in picks) / sum(f for _, f in picks)
        low[min(drawn, key=drawn.get)] += 1
        high[max(drawn, key=drawn.get)] += 1
    tail = (1.0 - level) / 2.0
    lowest = sorted((c for c in by_cat if low[c] > tail * resamples), key=values.get)
    highest = sorted((c for c in by_cat if high[c] > tail * resamples), key=values.get, reverse=True)
    # the category with the extreme value itself is always a candidate (a bootstrap can miss it only by chance)
    lowest = sorted({*lowest, min(values, key=values.get)}, key=values.get)
    highest = sorted({*highest, max(values, key=values.get)}, key=values.get, reverse=True)
    prompts = {c: len(ps) for c, ps in by_cat.items()}
    return CategoryExtremes(values, lowest, highest, prompts, tail, resamples)
