"""Which speculative config to serve, decided by the workbook's own cost model: the lab carried into the engine.

The engine runs a chain: k drafted tokens a step (`num_speculative_tokens`), verified in one forward. For each
method m the lab measures, in our loop on a few of the bench's prompts, a fixed chain of K tokens (`measure`):

    S_i   survival at depth i: the share of steps whose draft was accepted to position i (i = 1..K), over every
          step, so a proposer that found nothing to propose (prompt lookup without a match) counts as rejected
    f     the share of steps that drafted at all (1 for the model drafters)
    d     seconds of drafting per drafted token, as a fraction c of one target step at one row

Greedy acceptance at position i does not depend on k (a chain accepts up to its first miss), so the K-token run
prices every k <= K. With the target's measured step time t(B, n) for B rows of n tokens (`cost.measure_cost_curve`):

    E[L](k)       = 1 + sum_{i<=k} S_i                                  tokens a step emits, bonus included
    time(k, B)    = f (t(B, k+1) + k c t(B, 1)) + (1 - f) t(B, 1)       a drafting step, or a plain one
    speedup(k, B) = E[L](k) t(B, 1) / time(k, B)

Every method gets its best k at each measured B, or k = 0 where no speedup reaches `MARGIN` (a config that cannot
pay by more than the noise is not served). The engine runs one method, with k by the number of running requests
(vLLM's dynamic speculative decoding, `num_speculative_tokens_per_batch_size`: `schedule`), so the policy serves the
method with the best mean predicted speedup over the measured B (`pick_method`), with its k at every B — "propose
nothing" where it does not pay. The drafting cost is taken to scale with B as the target's one-token step does (a
small model's step, bound by the same reads): an approximation the serving bench checks. Given a serving bench's
results, `engine_corrections` scales each method's predictions at each B by what the engine measured there.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "OUR_METHOD",
    "NGRAM",
    "LabRun",
    "survival",
    "measure",
    "predicted_speedup",
    "engine_corrections",
    "choose",
    "schedule",
    "pick_method",
]

# vLLM method -> (our method, its params for a fixed chain of k tokens). Prompt lookup matches vLLM's ngram
# proposer's window (`prompt_lookup_min/max`); the draft scores its whole vocabulary, as the exported HF folder does.
NGRAM = {"min": 1, "max": 3}
MARGIN = 1.03  # a predicted speedup below this is within the noise: not served
MAX_BATCH = 1024  # the schedule's last range reaches this many running requests
OUR_METHOD = {
    "ngram": ("prompt_lookup", {"min_ngram": NGRAM["min"], "max_ngram": NGRAM["max"]}),
    "draft": ("draft", {"vocab": "full"}),
    "eagle3": ("eagle", {"tree": "chain"}),
}


def survival(steps: Sequence, k: int) -> list[float]:
    """S_1..S_k from a decode's step traces: the share of steps whose draft was accepted to depth i."""
    n = len(steps)
    return [sum(1 for s in steps if s.accepted >= i) / n if n else 0.0 for i in range(1, k + 1)]


@dataclass
class LabRun:
    """One method measured in our loop with a fixed chain of `k` tokens (module docstring)."""

    method: str  # vLLM's name
    k: int
    survival: list[float]  # S_1..S_k over all steps
    drafted: float  # f
    draft_cost: float  # c: drafting seconds per drafted token / one target step at one row
    steps: int
    tokens: int

    def to_dict(self) -> dict:
        return {"method": self.method, "k": self.k, "survival": [round(s, 4) for s in self.survival],
                "drafted": round(self.drafted, 4), "draft_cost": round(self.draft_cost, 4), "steps": self.steps,
                "tokens": self.tokens}  # fmt: skip


def measure(lm, prompts: Sequence[list[int]], method: str, k: int, max_new_tokens: int, step_seconds: float) -> LabRun:
    """Decode `prompts` (token ids) greedily with vLLM method `method`'s counterpart in our loop, a fixed chain of
    k tokens; step_seconds: one target step at one row (the unit of c)."""
    from ..generate import generate

    ours, params = OUR_METHOD[method]
    steps, tokens, drafting = [], 0, []
    for ids in prompts:
        result = generate(lm, ids, method=ours, max_new_tokens=max_new_tokens, draft_length=k, max_draft=k,
                          **params)  # fmt: skip
        steps += result.steps
        tokens += len(result.tokens)
        drafting += [s.t_propose / s.proposed for s in result.steps if s.proposed]
    drafted = sum(1 for s in steps if s.proposed) / max(len(steps), 1)
    cost = statistics.median(drafting) / step_seconds if drafting and method != "ngram" else 0.0
    return LabRun(method, k, survival(steps, k), drafted, cost, len(steps), tokens)


def predicted_speedup(run: LabRun, k: int, t) -> float:
    """speedup(k, B) of the module docstring on one batch size's curve t(n) (seconds of a step of n tokens)."""
    if not 1 <= k <= run.k:
        raise ValueError(f"k must be in 1..{run.k} (the lab measured {run.k} positions), got {k}")
    expected = 1 + sum(run.survival[:k])
    time = run.drafted * (t(k + 1) + k * run.draft_cost * t(1)) + (1 - run.drafted) * t(1)
    return expected * t(1) / time


def engine_corrections(runs: Sequence[LabRun], curves: dict, serving: dict) -> dict[str, dict[int, float]]:
    """{method: {B: measured / predicted}} from a serving bench's record (`bench.serving`): each fixed-k config's
    tokens/s over vLLM plain's at concurrency B = c, over what `predicted_speedup` gives for the same k on t(B, ·).

    Our t(B, n) prices our loop's forward; the engine's step also runs its own drafting, rejection sampling and
    scheduling, which the curve does not see. As the loop corrects its cost model by its own timings, the policy
    takes the engine's measured ratio as a factor on every k of that method at that B (the factor is measured at
    one k and applied to all: an approximation the next bench run checks)."""
    plain = {r["concurrency"]: r["tokens_per_s"] for r in serving["vllm"] if r["config"] == "none"}
    k = serving["config"]["k"]
    out: dict[str, dict[int, float]] = {}
    for run in runs:
        for r in serving["vllm"]:
            b = r["concurrency"]
            if r["config"] == run.method and b in plain and b in curves and k <= run.k:
                predicted = predicted_speedup(run, k, curves[b])
                out.setdefault(run.method, {})[b] = round(r["tokens_per_s"] / plain[b] / predicted, 4)
    return out


def choose(runs: Sequence[LabRun], curves: dict, margin: float = MARGIN, corrections: dict | None = None) -> list[dict]:
    """Per batch size B of `curves` ({B: t(B, ·)}): every method's best k and its predicted speedup (k = 0 and 1.0
    where no k reaches `margin`), and the best method at that B ("none" where none pays). corrections: the
    engine's factors (`engine_corrections`), applied to the method's every k at that B."""
    rows = []
    for b, t in sorted(curves.items()):
        row: dict = {"batch_size": b, "methods": {}}
        for run in runs:
            factor = (corrections or {}).get(run.method, {}).get(b, 1.0)
            price = {k: predicted_speedup(run, k, t) * factor for k in range(1, run.k + 1)}
            best = max(price, key=price.get)
            row["methods"][run.method] = {"k": best, "speedup": round(price[best], 3)} if price[best] >= margin else \
                {"k": 0, "speedup": 1.0, "best_k": best, "best_speedup": round(price[best], 3)}  # fmt: skip
        name, pick = max(row["methods"].items(), key=lambda kv: kv[1]["speedup"], default=("none", {"k": 0}))
        row["choice"] = {"method": name, "k": pick["k"], "speedup": pick["speedup"]} if pick["k"] else \
            {"method": "none", "k": 0, "speedup": 1.0}  # fmt: skip
        rows.append(row)
    return rows


def schedule(rows: Sequence[dict], method: str, max_batch: int = MAX_BATCH) -> list[list[int]]:
    """vLLM's `num_speculative_tokens_per_batch_size` for `method` from `choose`'s rows: each measured B's k holds
    from B up to the next measured B − 1 (the last up to `max_batch`), so k = 0 where speculation does not pay."""
    sizes = [r["batch_size"] for r in rows]
    if not sizes or sizes[0] != 1:
        raise ValueError(f"the schedule needs batch size 1 measured (vLLM's first range starts at 1), got {sizes}")
    ends = [b - 1 for b in sizes[1:]] + [max(max_batch, sizes[-1])]
    return [[b, end, r["methods"][method]["k"]] for b, end, r in zip(sizes, ends, rows, strict=True)]


def pick_method(rows: Sequence[dict]) -> tuple[str, float]:
    """The method to serve at every batch size: the largest mean over B of its predicted speedup under its own
    schedule (1.0 where it drafts nothing); ("none", 1.0) when no method pays at any B."""
    methods = list(rows[0]["methods"]) if rows else []
    mean = {m: statistics.fmean(r["methods"][m]["speedup"] for r in rows) for m in methods}
    best = max(mean, key=mean.get, default=None)
    if best is None or mean[best] <= 1.0:
        return "none", 1.0
    return best, round(mean[best], 3)
