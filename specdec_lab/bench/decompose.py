"""Why a method's speedup is what it is: the measured speedup as a product of factors, from the bench's traces.

A traced bench row (`bench/trace.TraceStep`) times every loop step's three phases — propose, verify,
accept — and the row's total seconds (prefill and the call's bookkeeping outside the phases included).
Pooled over a method's rows and the autoregressive rows on the same prompts:

    τ       = tokens / steps                      mean tokens per step, bonus counted (autoregressive: 1)
    t(1)    = autoregressive verify seconds / its steps      one plain forward, at the bench's contexts
    r       = method's verify seconds / its steps / t(1)     t(n)/t(1): the verify forward of the trees it used
    c       = method's propose seconds / its steps / t(1)    the cost ratio: the proposer's own time per step
    o       = (accept + prefill + the rest) / steps / t(1)   the loop's own time per step (o_AR for the baseline,
                                                             whose propose seconds count here too)

Then, exactly (every second of both runs is in one term),

    speedup = (τ / τ_AR) · (1 + o_AR) / (r + c + o)

and the waterfall reads it as four steps, each a factor:

    ideal          τ / τ_AR              every step as cheap as one plain step
    × verify       1 / r                 a forward of n tokens costs r plain forwards
    × proposer     r / (r + c)           plus drafting (a draft model, Medusa's heads, an n-gram search)
    × loop         (r + c)·(1 + o_AR) / (r + c + o)
                                         plus what the loop does around them (accepting, keeping the path's
                                         K/V, prefill, bookkeeping), net of the baseline's own
    = measured     (tokens / seconds of the method) / (tokens / seconds of autoregressive)

The textbook walltime factor of speculative decoding, (1 − α^{k+1}) / ((1 − α)(k·c + 1)) (Leviathan et al. 2023),
is this product with r = 1 and o = o_AR = 0 (c there per draft token); the waterfall shows which of those
assumptions a measured run breaks, and by how much.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ..proposers.registry import BASELINE
from .trace import steps_of

__all__ = ["Waterfall", "decompose", "decompose_bench", "FACTORS"]

FACTORS = ("verify", "proposer", "loop")  # the multiplicative steps from the ideal τ to the measurement


@dataclass
class _Pool:
    """Sums over a set of traced rows (one method's, on some prompts)."""

    tokens: int
    steps: int
    seconds: float
    verify: float
    propose: float
    nodes: int

    @classmethod
    def of(cls, rows: Sequence[dict]) -> _Pool:
        steps = [s for r in rows for s in steps_of(r)]
        return cls(
            tokens=sum(r["new_tokens"] for r in rows),
            steps=len(steps),
            seconds=sum(r["seconds"] for r in rows),
            verify=sum(s.t_verify for s in steps),
            propose=sum(s.t_propose for s in steps),
            nodes=sum(s.nodes for s in steps),
        )


@dataclass
class Waterfall:
    """One method's speedup, decomposed (module docstring). Levels: ideal → after verify → after proposer →
    measured; factors multiply: ideal · verify · proposer · loop = measured."""

    method: str
    prompts: int
    tau: float  # tokens per step, bonus included (relative to the baseline's, which is 1 for autoregressive)
    t1: float  # seconds of one plain verify forward (the baseline's mean)
    r: float  # t(n)/t(1): the method's mean verify seconds per step over t1
    c: float  # the proposer's seconds per step over t1
    o: float  # the loop's own seconds per step over t1
    o_baseline: float  # the baseline's own seconds per step (propose, accept, prefill, rest) over t1
    mean_nodes: float  # tokens per verify forward, root included (the n of t(n))
    measured: float  # (tokens / seconds) / (baseline tokens / seconds)

    @property
    def factors(self) -> dict[str, float]:
        """{"ideal": τ, "verify": 1/r, "proposer": r/(r + c), "loop": (r + c)(1 + o_AR)/(r + c + o)}."""
        r, c = self.r, self.c
        return {
            "ideal": self.tau,
            "verify": 1.0 / r,
            "proposer": r / (r + c),
            "loop": (r + c) * (1.0 + self.o_baseline) / (r + c + self.o),
        }

    @property
    def levels(self) -> dict[str, float]:
        """The speedup after each step: ideal, after verify, after proposer, measured (= the product)."""
        f = self.factors
        ideal = f["ideal"]
        verify = ideal * f["verify"]
        proposer = verify * f["proposer"]
        return {"ideal": ideal, "verify": verify, "proposer": proposer, "measured": proposer * f["loop"]}

    def as_dict(self) -> dict:
        return asdict(self) | {f"factor_{k}": v for k, v in self.factors.items()}


def decompose(rows: Sequence[dict], baseline_rows: Sequence[dict], method: str | None = None) -> Waterfall:
    """The waterfall of one method's traced rows against the baseline's traced rows on the same prompts
    (pooled: sums over rows, as the bench's own speedup is a ratio of sums)."""
    if not rows or not baseline_rows:
        raise ValueError("decompose needs traced rows of the method and of the baseline")
    if any(not r.get("trace") for r in (*rows, *baseline_rows)):
        raise ValueError("every row needs a step trace (a bench run with traces, the default)")
    m, b = _Pool.of(rows), _Pool.of(baseline_rows)
    t1 = b.verify / b.steps
    tau_b = b.tokens / b.steps
    return Waterfall(
        method=method or rows[0]["method"],
        prompts=len(rows),
        tau=(m.tokens / m.steps) / tau_b,
        t1=t1,
        r=m.verify / m.steps / t1,
        c=m.propose / m.steps / t1,
        o=(m.seconds - m.verify - m.propose) / m.steps / t1,
        o_baseline=(b.seconds - b.verify) / b.steps / t1,
        mean_nodes=m.nodes / m.steps,
        measured=(m.tokens / m.seconds) / (b.tokens / b.seconds),
    )


def decompose_bench(
    results: dict, methods: Sequence[str] | None = None, baseline: str = BASELINE, category: str | None = None
) -> list[Waterfall]:
    """`decompose` for each method of a traced bench results dict (default: every traced method but the
    baseline, in the results' order), each against the baseline's rows on that method's prompts."""
    rows = [r for r in results.get("rows", []) if r.get("trace") and (category is None or r["category"] == category)]
    base = {r["question_id"]: r for r in rows if r["method"] == baseline}
    if not base:
        raise ValueError(f"no traced {baseline!r} rows to decompose against")
    order = methods or [m for m in results.get("methods", []) if m != baseline]
    out = []
    for method in order:
        mine = [r for r in rows if r["method"] == method and r["question_id"] in base]
        if mine:
            out.append(decompose(mine, [base[r["question_id"]] for r in mine], method))
    return out
