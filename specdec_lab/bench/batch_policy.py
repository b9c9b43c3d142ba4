"""How much to speculate at batch B, decided by the one cost model and printed beside what serving engines ship.

    python -m specdec_lab.bench.batch_policy --batch-size 1,2,4,8,16 --out data/curves/batch_policy-<isa>.json

measures t(B, n) — one forward over B sequences of n tokens each (`cost.measure_cost_curve(rows=B)`) — and asks
the sizers the loop uses what they choose on each curve: a chain's draft length k* for a few acceptance rates α
(free drafts, as prompt lookup's; `cost.theory.optimal_k` on `StepCost.step`), and Medusa's tree budget n* for the
shipped heads' calibrated accuracies (`trees.choose_budget`). While a step is bound by reading the weights, widening
it is nearly free and the choices stay large; once B × n makes it compute-bound, they shrink to proposing nothing.

Published policies beside them (`PUBLISHED`): vLLM's dynamic speculative decoding maps the number of running requests
to a draft length (its documented EAGLE-3 example), and SGLang's adaptive mode picks its step tier from the
accepted-length EMA rather than the batch size.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ..cost.curve import CostCurve, measure_cost_curve
from ..cost.step import StepCost
from ..cost.theory import optimal_k
from ..io import positive_int, write_json
from ..machine import machine_info

__all__ = ["PUBLISHED", "ALPHAS", "measure_batch_curves", "chosen_sizes", "main"]

ALPHAS = (0.5, 0.7, 0.9)  # acceptance rates a chain is sized for
SIZES = (1, 2, 3, 4, 6, 8, 12, 16)

PUBLISHED = [
    {
        "system": "vLLM, dynamic speculative decoding",
        "setting": "EAGLE-3 drafter for Llama-3.1-8B-Instruct (documented example config)",
        "rule": "draft length k by running requests: 1-16 -> 5, 17-32 -> 4, 33-64 -> 3, 65-128 -> 1, 129-512 -> 0",
        "k_by_batch": [[1, 16, 5], [17, 32, 4], [33, 64, 3], [65, 128, 1], [129, 512, 0]],
        "source": "https://github.com/vllm-project/vllm/blob/015a47e1282c9ef40d706ee3463cb699e04e93c0/docs/features/"
        "speculative_decoding/dynamic_speculative_decoding.md",
    },
    {
        "system": "SGLang, adaptive speculative decoding",
        "setting": "EAGLE, topk 1",
        "rule": "speculative_num_steps among tiers [1, 3, 7], from the accepted length's EMA (round(EMA) + 1), "
        "whatever the batch size",
        "k_by_batch": None,
        "source": "https://github.com/sgl-project/sglang/blob/369fa46b1151bb3e8b73ddd17fee059fad72dd2f/docs/"
        "advanced_features/adaptive_speculative_decoding.md",
    },
]


def published_k(batch: int) -> int | None:
    """vLLM's documented draft length at `batch` running requests (`PUBLISHED[0]`)."""
    return next((k for lo, hi, k in PUBLISHED[0]["k_by_batch"] if lo <= batch <= hi), None)


def measure_batch_curves(model, batch_sizes: Sequence[int], sizes: Sequence[int] = SIZES, repeats: int = 5,
                         context: int = 64, tree: bool = True) -> dict[int, CostCurve]:  # fmt: skip
    """{B: t(B, n)}: the step's seconds at every batch size (paired statistic, as the loop's own curves)."""
    return {b: measure_cost_curve(model, sizes=sizes, context=context, repeats=repeats, tree=tree,
                                  statistic="paired", rows=b) for b in batch_sizes}  # fmt: skip


def chosen_sizes(curves: dict[int, CostCurve], accuracies=None, alphas: Sequence[float] = ALPHAS) -> list[dict]:
    """Per batch size: t(B, 1), t(B, 8)/t(B, 1), the draft length k* a chain of free drafts picks at each α, and
    (given the heads' accuracies) Medusa's tree nodes n*; beside vLLM's documented k at that many requests."""
    from ..trees import choose_budget

    rows = []
    for b, curve in sorted(curves.items()):
        price = StepCost.of(curve, learn=False).step  # the sizers' price of a step of n tokens
        cap = max(curve.sizes) - 1
        row = {"batch_size": b, "t1_ms": round(curve(1) * 1e3, 2), "t8_over_t1": round(curve(8) / curve(1), 3)}
        row |= {f"k_at_alpha_{a:g}": optimal_k(a, 0.0, cap, verify_cost=price) for a in alphas}
        if accuracies is not None:
            row["medusa_nodes"] = choose_budget(accuracies, price, max_budget=cap).budget
        row["vllm_k"] = published_k(b)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.batch_policy", description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", default="1,2,4,8,16", help="comma-separated batch sizes")
    p.add_argument("--repeats", type=positive_int, default=5, help="timed passes per curve (paired statistic)")
    p.add_argument("--out", default="results/batch_policy.json")
    a = p.parse_args(argv)
    try:
        sizes = [int(s) for s in a.batch_size.split(",") if s.strip()]
        if not sizes or min(sizes) < 1:
            raise ValueError(f"--batch-size takes whole numbers >= 1, got {a.batch_size!r}")
    except ValueError as err:
        print(f"specdec_lab.bench.batch_policy: error: {err}", file=sys.stderr)
        return 2
    from ..medusa.drafter import get_drafter
    from ..models.load import load_model

    lm = load_model("smollm2-135m")
    curves = measure_batch_curves(lm.model, sizes, repeats=a.repeats)
    drafter = get_drafter("default", lm.model)
    acc = drafter.accuracies.model("independent") if drafter.accuracies is not None else None
    table = chosen_sizes(curves, acc)
    write_json(a.out, {"format": "specdec_lab.bench.batch_policy/1", "machine": machine_info(), "repeats": a.repeats,
                       "curves": {str(b): c.to_dict() for b, c in curves.items()}, "chosen": table,
                       "published": PUBLISHED})  # fmt: skip
    for row in table:
        print(row)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
