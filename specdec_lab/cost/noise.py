"""How far to trust a timing: the spread of repeated measurements, and a warning when it is large.

A cost curve t(n) is the median of a few timed forwards per size (`cost.measure_cost_curve`). On a quiet
machine the repeats agree within a few percent; when other processes keep the cores busy, torch's worker
threads wait on each other and single forwards take several times longer, at random: the curve comes out
slower and jagged, and every speed-up computed from it (or timed next to it) is off. The median hides
that, so we also keep the repeats and measure their spread:

    spread(n) = IQR(repeats of n) / median(repeats of n)       (relative interquartile range)
    spread    = median over sizes of spread(n)                  (one busy size does not decide alone)

and call the timings unreliable when the spread exceeds `threshold` (default 15%, well above what quiet runs
measure and well below a busy machine's: data/bench/README.md). The load average is reported beside it as
context only (it counts this process's own threads too, so it cannot decide on its own).

    curve, noise = measure_cost_curve_with_noise(model, sizes=[1, 2, 4, 8], repeats=5)
    noise.note()   # Markdown: a visible warning, or a one-line note of the measured spread
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from .curve import CostCurve, measure_cost_curve, summarize_times

__all__ = ["TimingNoise", "relative_spread", "measure_cost_curve_with_noise", "combine", "DEFAULT_THRESHOLD"]

DEFAULT_THRESHOLD = 0.15  # relative IQR above which timings are called unreliable


def relative_spread(samples: Sequence[float]) -> float:
    """IQR / median of repeated timings (0 for fewer than two samples, or a zero median)."""
    xs = sorted(float(x) for x in samples)
    if len(xs) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    med = statistics.median(xs)
    return (q3 - q1) / med if med > 0 else 0.0


def _load_per_core() -> float | None:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (OSError, AttributeError):  # not available on this platform
        return None


@dataclass
class TimingNoise:
    """Spread of repeated timings per size, summarized; `unreliable` when the summary exceeds the threshold."""

    per_size: dict[int, float]  # n -> IQR / median of its repeats
    repeats: int
    threshold: float = DEFAULT_THRESHOLD
    load_per_core: float | None = field(default_factory=_load_per_core)  # 1-min load average / cores

    @classmethod
    def of(cls, times: Mapping[int, Sequence[float]], threshold: float = DEFAULT_THRESHOLD) -> TimingNoise:
        """The spread of each size's repeats: times[n] = the seconds of size n, one per repeat."""
        per_size = {n: relative_spread(t) for n, t in times.items()}
        return cls(per_size=per_size, repeats=min(len(t) for t in times.values()), threshold=threshold)

    @property
    def spread(self) -> float:
        return statistics.median(self.per_size.values()) if self.per_size else 0.0

    @property
    def worst(self) -> tuple[int, float]:
        """(size, spread) of the noisiest size."""
        return max(self.per_size.items(), key=lambda kv: kv[1]) if self.per_size else (0, 0.0)

    def at(self, n: int) -> float:
        """Spread at size n; between measured sizes, the larger spread of the two an interpolated cost reads."""
        if n in self.per_size:
            return self.per_size[n]
        if not self.per_size:
            return 0.0
        below = [m for m in self.per_size if m < n]
        above = [m for m in self.per_size if m > n]
        near = ([max(below)] if below else []) + ([min(above)] if above else [])
        return max(self.per_size[m] for m in near)

    @property
    def unreliable(self) -> bool:
        return self.spread > self.threshold

    def message(self) -> str:
        """One sentence: the warning or the note (plain text)."""
        n, w = self.worst
        load = ""
        if self.load_per_core is not None:
            load = f"; load average {self.load_per_core:.1f} per core, this process included"
        # one decimal: a spread just under the threshold must not print as the threshold itself ("15%, under 15%")
        worst = f"worst {w:.1%} at n = {n}"
        detail = f"spread of the {self.repeats} repeats {self.spread:.1%} (IQR / median; {worst}{load})"
        rough = f" Only {self.repeats} repeats: a rough estimate." if self.repeats < 3 else ""
        if self.unreliable:
            return (
                f"Timings unreliable: the repeats disagree, the CPU is probably busy ({detail}); rerun on a "
                f"quiet machine before trusting these milliseconds or any speed-up measured next to them.{rough}"
            )
        return f"Timings look steady: {detail}, under the {self.threshold:.0%} at which this notebook warns.{rough}"

    def note(self):
        """IPython Markdown: a ⚠️ block quote when unreliable, otherwise a plain note of the measured spread."""
        from IPython.display import Markdown

        text = self.message()
        return Markdown(f"> ⚠️ **{text}**" if self.unreliable else f"*{text}*")

    def as_dict(self) -> dict:
        return {
            "spread": self.spread,
            "worst_size": self.worst[0],
            "worst_spread": self.worst[1],
            "repeats": self.repeats,
            "unreliable": self.unreliable,
            "load_per_core": self.load_per_core,
        }


def combine(*noises: TimingNoise) -> TimingNoise:
    """Several measurements taken together: per size, the largest spread any of them saw."""
    if not noises:
        raise ValueError("combine() needs at least one TimingNoise")
    per_size: dict[int, float] = {}
    for nz in noises:
        for n, s in nz.per_size.items():
            per_size[n] = max(per_size.get(n, 0.0), s)
    return TimingNoise(
        per_size=per_size,
        repeats=min(nz.repeats for nz in noises),
        threshold=noises[0].threshold,
        load_per_core=noises[-1].load_per_core,
    )


def measure_cost_curve_with_noise(
    model,
    sizes: Sequence[int],
    context: int = 64,
    repeats: int = 5,
    warmup: int = 2,
    tree: bool = False,
    threshold: float = DEFAULT_THRESHOLD,
) -> tuple[CostCurve, TimingNoise]:
    """`measure_cost_curve` with its repeats kept: the median curve, and the spread of the repeats.

    Each repeat is one `measure_cost_curve` pass over all sizes (interleaved, as there), the first after
    `warmup` untimed passes; the curve is the per-size median of the repeats, the same statistic
    `measure_cost_curve(repeats=...)` returns.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    passes = [
        measure_cost_curve(model, sizes=sizes, context=context, repeats=1, warmup=warmup if r == 0 else 0, tree=tree)
        for r in range(repeats)
    ]
    times = {n: [p.seconds[i] for p in passes] for i, n in enumerate(passes[0].sizes)}
    return replace(passes[0], seconds=summarize_times(times)), TimingNoise.of(times, threshold)
