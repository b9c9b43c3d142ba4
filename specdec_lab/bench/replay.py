"""What-if on other hardware: re-time a recorded bench run under another device's verify cost curve t(n).

A traced bench row (`bench/harness.py`, `trace.TraceStep`) holds, for every loop step, the number of
tree nodes n its target forward verified and the seconds of its three phases. A replay keeps everything
the run decided — trees, accepted paths, tokens — and swaps the hardware's price list:

    T'(row)  = s_o·prefill + Σ_steps [ t'(n_step) + s_d·t_propose + s_o·t_accept ] + s_o·other
    other    = measured seconds − (prefill + Σ_steps phases)     (the call's bookkeeping outside the phases)
    speedup' = (Σ tokens / Σ T' of the method) / (Σ tokens / Σ T' of autoregressive),  over the same prompts

(a ratio of sums, as the bench's own speedup). Under the curve the run was measured on and s = 1 the
replay reproduces the measured time up to how well t(n) stands for the recorded verify seconds.

Scales. s_d prices drafting, s_o the rest (acceptance, KV compaction, proposer updates, prefill). Both
default to s = t'(1)/t(1), the ratio of one-token forwards on the two devices: the assumption is that the
work around the verify forward is model compute of the same kind (a draft model, the target's first
layers, Medusa heads) and speeds up like a one-token target step. Host-side Python (prompt lookup's
n-gram search, the loop's bookkeeping) would not speed up on a GPU: pass draft_scale=1, overhead_scale=1 to
price it unchanged — the two settings bracket what the other device would do.

What a replay cannot predict: methods that size their work from this machine's curve (prompt lookup's and
the drafts' draft lengths, Medusa's tree budget, Lookahead's window) would decide differently on another
device. The replay *re-prices* these decisions there; on a flatter curve, where bigger trees cost little
more, a method would choose larger trees, so for those methods the re-priced projection errs low.
`redecide.redecide_bench` answers the other question: each method's own sizing rule re-decides under the
other curve, and those steps are priced.

Which t(n) is "this machine's". The verify seconds of a run depend on the context length (attention over
the cache grows as the answer does), on the mask (a chain runs without one, a tree needs one) and on
load, so a curve measured once at a 64-token context (`cost.cost_curve_for`) is not the mean cost the
bench paid. `curve_from_traces` takes t(n) from the run itself: the mean recorded verify seconds of every
size n, pooled over all methods and prompts (the mean, not the median: a replay sums them). That is the
curve the run was measured on, and the one to check the replay against; `measure_bench_curve` measures a
separate one on the model at the bench's median context, reported beside it. A chain is verified with the
model's own causal mask and a tree with an explicit mask, which some kernels run slower at the same n:
`shaped_curve_from_traces` keeps one curve per shape (`ShapedCurve`; the trace records each step's).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from ..cost.curve import CostCurve, ShapedCurve, curve_from_points, flat_curve, measure_cost_curve
from ..cost.theory import expected_tokens_per_step
from ..proposers.registry import BASELINE
from .trace import TraceStep, steps_of

__all__ = [
    "traced_rows",
    "paired_rows",
    "replay_scales",
    "curve_from_traces",
    "shaped_curve_from_traces",
    "curves_by_prompt",
    "measure_bench_curve",
    "replay_row",
    "replay_bench",
    "theory_prediction",
    "theory_speedup",
]


def traced_rows(results: dict) -> list[dict]:
    """The rows that carry a per-step trace (our loop's, from a bench run with traces on)."""
    return [r for r in results.get("rows", []) if r.get("trace")]


def curve_from_traces(results: dict, statistic: str = "mean", shape: str | None = None, question_id=None) -> CostCurve:
    """t(n) taken from the run itself: the recorded verify seconds of every tree size n, pooled over all
    traced rows (every method and prompt). "mean" (default) is what sums of steps are made of; "median"
    is less sensitive to a busy moment. shape "chain" / "tree": only steps verified without / with a tree
    mask (one-node steps count for both); None: all steps. question_id: that prompt's rows only (its context
    lengths: every method on a prompt sees the same ones)."""
    if statistic not in ("mean", "median"):
        raise ValueError(f"statistic must be 'mean' or 'median', got {statistic!r}")
    if shape not in (None, "chain", "tree"):
        raise ValueError(f"shape must be None, 'chain' or 'tree', got {shape!r}")
    rows = [r for r in traced_rows(results) if question_id is None or r["question_id"] == question_id]
    by_size: dict[int, list[float]] = {}
    for r in rows:
        for s in steps_of(r):
            if shape is None or s.nodes == 1 or s.chain is None or s.chain == (shape == "chain"):
                by_size.setdefault(s.nodes, []).append(s.t_verify)
    if 1 not in by_size:
        raise ValueError("the results hold no traced one-token steps: run the bench with traces (the default)")
    agg = statistics.fmean if statistic == "mean" else statistics.median
    sizes = sorted(by_size)
    context = statistics.median(r["prompt_tokens"] + r["new_tokens"] / 2 for r in rows)
    return CostCurve(sizes, [agg(by_size[n]) for n in sizes], device="bench trace", context=int(context),
                     tree=shape != "chain")  # fmt: skip


def shaped_curve_from_traces(results: dict, statistic: str = "mean", question_id=None) -> ShapedCurve:
    """`curve_from_traces` for chain steps and for tree steps separately (module docstring)."""
    return ShapedCurve(
        curve_from_traces(results, statistic, "chain", question_id),
        curve_from_traces(results, statistic, "tree", question_id),
    )


def curves_by_prompt(results: dict, shaped: bool = True, statistic: str = "mean") -> dict:
    """{question_id: the run's own curve on that prompt} (`shaped_curve_from_traces` or `curve_from_traces`);
    `replay_bench` prices each row on its prompt's curve when given this mapping."""
    fit = shaped_curve_from_traces if shaped else curve_from_traces
    ids = dict.fromkeys(r["question_id"] for r in traced_rows(results))
    return {q: fit(results, statistic=statistic, question_id=q) for q in ids}


def _curve_of(curve, row: dict):
    """The curve to price `row` on: its prompt's from a {question_id: curve} mapping, else `curve` itself."""
    if not isinstance(curve, Mapping):
        return curve
    if row["question_id"] not in curve:
        raise ValueError(f"no curve for prompt {row['question_id']!r} in the mapping given")
    return curve[row["question_id"]]


def _verify_cost(curve, step: TraceStep) -> float:
    return curve.cost(step.nodes, step.chain) if isinstance(curve, ShapedCurve) else curve(step.nodes)


def measure_bench_curve(model, results: dict, repeats: int = 5) -> CostCurve:
    """A separately measured tree curve at the bench's median context (prompt + half the answer), over
    the tree sizes the run verified (capped at 64). Median of `repeats`; on the model as loaded."""
    rows = traced_rows(results)
    seen = {s.nodes for r in rows for s in steps_of(r)}
    sizes = sorted({1, *(n for n in seen if n <= 64)})
    context = int(statistics.median(r["prompt_tokens"] + r["new_tokens"] / 2 for r in rows))
    return measure_cost_curve(model, sizes=sizes, context=context, repeats=repeats, tree=True)


# ---- replay -----------------------------------------------------------------------------------------
def replay_row(row: dict, curve, draft_scale: float = 1.0, overhead_scale: float = 1.0) -> float:
    """Predicted seconds of one traced row under verify cost `curve` (module docstring: T'(row))."""
    trace = row.get("trace")
    if not trace:
        raise ValueError(f"row {row.get('method')!r} / {row.get('question_id')!r} has no trace to replay")
    steps = steps_of(row)
    prefill = trace["prefill_seconds"]
    phases = sum(s.t_propose + s.t_verify + s.t_accept for s in steps)
    other = max(row["seconds"] - prefill - phases, 0.0)  # rounding of the phases can make it -1e-6
    verify = sum(_verify_cost(curve, s) for s in steps)
    drafting = sum(s.t_propose for s in steps)
    accepting = sum(s.t_accept for s in steps)
    return verify + draft_scale * drafting + overhead_scale * (prefill + accepting + other)


def replay_scales(curve, results: dict, reference, draft_scale: float | None, overhead_scale: float | None):
    """(draft scale, overhead scale) for replaying `results` under `curve`: each the given value, else
    s = t'(1)/t(1) against `reference` (default `curve_from_traces`); s = 1 for {question_id: curve}."""
    if isinstance(curve, Mapping):
        s = 1.0
    else:
        reference = reference if reference is not None else curve_from_traces(results)
        s = curve(1) / reference(1)
    return (s if draft_scale is None else draft_scale), (s if overhead_scale is None else overhead_scale)


def paired_rows(results: dict, baseline: str = BASELINE, category: str | None = None):
    """Yield (method, its traced rows, the baseline's rows on the same prompts) per method, in the results'
    order; methods without traced rows on the baseline's prompts (anchors) are skipped."""
    rows = [r for r in traced_rows(results) if category is None or r["category"] == category]
    base = {r["question_id"]: r for r in rows if r["method"] == baseline}
    if not base:
        raise ValueError(f"no traced {baseline!r} rows to compare with")
    for method in results.get("methods", sorted({r["method"] for r in rows})):
        mine = [r for r in rows if r["method"] == method and r["question_id"] in base]
        if mine:
            yield method, mine, [base[r["question_id"]] for r in mine]


def replay_bench(
    results: dict,
    curve,
    reference=None,
    draft_scale: float | None = None,
    overhead_scale: float | None = None,
    category: str | None = None,
    baseline: str = BASELINE,
) -> list[dict]:
    """Per method (traced rows only): measured and predicted speedup over `baseline` on the same prompts.

    curve:     the verify cost t'(n) to replay under (a CostCurve, a `ShapedCurve` or any n -> seconds
               callable), or {question_id: curve} (`curves_by_prompt`: this machine's, so s = 1)
    reference: this machine's t(n), for the default scales s = t'(1)/t(1) (default: `curve_from_traces`)
    category:  only that category's prompts
    Returns [{method, prompts, mean_accepted, mean_nodes, measured_speedup, predicted_speedup, ratio,
    measured_seconds, predicted_seconds}], methods in the results' order; ratio = predicted / measured.
    """
    ds, os_ = replay_scales(curve, results, reference, draft_scale, overhead_scale)
    out = []
    for method, mine, ref in paired_rows(results, baseline, category):
        tok, tok_b = sum(r["new_tokens"] for r in mine), sum(r["new_tokens"] for r in ref)
        meas, meas_b = sum(r["seconds"] for r in mine), sum(r["seconds"] for r in ref)
        pred = sum(replay_row(r, _curve_of(curve, r), ds, os_) for r in mine)
        pred_b = sum(replay_row(r, _curve_of(curve, r), ds, os_) for r in ref)
        steps = [st for r in mine for st in steps_of(r)]
        measured = (tok / meas) / (tok_b / meas_b)
        predicted = (tok / pred) / (tok_b / pred_b)
        out.append(
            {
                "method": method,
                "prompts": len(mine),
                "mean_accepted": tok / sum(r["forwards"] for r in mine),
                "mean_nodes": statistics.fmean(st.nodes for st in steps) if steps else None,
                "measured_speedup": measured,
                "predicted_speedup": predicted,
                "ratio": predicted / measured,
                "measured_seconds": meas,
                "predicted_seconds": pred,
            }
        )
    return out


# ---- the closed-form theory -------------------------------------------------------------------------
def _chain_alpha(steps: list[TraceStep]) -> float | None:
    """Per-token acceptance α̂ by maximum likelihood under the theory's model (i.i.d. acceptances, a chain
    of k drafts accepting a truncated-geometric number): α̂ = Σ accepted / (Σ accepted + #steps rejected)."""
    drafted = [s for s in steps if s.candidates > 0]
    if not drafted:
        return None
    accepted = sum(min(s.emitted - 1, s.candidates) for s in drafted)
    rejected = sum(1 for s in drafted if s.emitted - 1 < s.candidates)
    return accepted / (accepted + rejected) if accepted + rejected else None


def theory_prediction(rows: Sequence[dict], curve, tree_expected_length: float | None = None) -> dict | None:
    """The theory's prediction for one method's traced rows (`theory.py`, measured form):

        speedup = E[tokens per step] · t(1) / (mean drafting seconds per step + mean t(n_step))

    with E[tokens per step] = mean over steps of (1 − α̂^{k+1}) / (1 − α̂) (`expected_tokens_per_step`),
    k the step's draft length and α̂ the maximum-likelihood per-token acceptance of the trace (chains);
    a tree method passes its own predicted E[L] (Medusa: `expected_length` from calibrated head
    accuracies) as tree_expected_length. Overheads outside the two costs are the theory's blind spot.
    Returns {"alpha", "tokens_per_step", "speedup"} (alpha None for trees), None without traced steps.
    """
    steps = [s for r in rows if r.get("trace") for s in steps_of(r)]
    if not steps:
        return None
    alpha = None
    if tree_expected_length is not None:
        tokens = tree_expected_length
    else:
        alpha = _chain_alpha(steps)
        if alpha is None:  # nothing was ever drafted: plain decoding
            tokens = 1.0
        else:
            tokens = statistics.fmean(expected_tokens_per_step(alpha, s.candidates) for s in steps)
    cost = statistics.fmean(s.t_propose + _verify_cost(curve, s) for s in steps)
    return {"alpha": alpha, "tokens_per_step": tokens, "speedup": tokens * curve(1) / cost}


def theory_speedup(rows: Sequence[dict], curve, tree_expected_length: float | None = None) -> float | None:
    """`theory_prediction(...)["speedup"]`."""
    out = theory_prediction(rows, curve, tree_expected_length)
    return None if out is None else out["speedup"]


# ---- CLI --------------------------------------------------------------------------------------------
def _print_table(name: str, table: list[dict]) -> None:
    print(f"\n{name}\n{'method':<18}{'measured':>10}{'predicted':>11}{'ratio':>8}{'mean acc':>10}{'nodes':>7}")
    for r in table:
        print(f"{r['method']:<18}{r['measured_speedup']:>9.3f}x{r['predicted_speedup']:>10.3f}x{r['ratio']:>8.3f}"
              f"{r['mean_accepted']:>10.2f}{r['mean_nodes']:>7.1f}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """python -m specdec_lab.bench.replay RESULTS.json [--curve "1:0.006,64:0.0064"] [--measure CURVES.json]

    Prints the replay under the run's own curve (`curve_from_traces`), a flat one, and --curve if given
    (`python -m specdec_lab.bench.redecide` prints the re-decided projection beside the re-priced one).
    --measure: also measure `measure_bench_curve` and `cost_curve_for(tree=True)` on the results' model
    (loaded as the bench loaded it) and write them to CURVES.json (notebook 09 reads that file).
    """
    import argparse
    import json
    import sys
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.replay", description=main.__doc__.splitlines()[0])
    p.add_argument("results", help="a bench results JSON written with traces (the default)")
    p.add_argument("--curve", help='a device\'s verify cost, "n:seconds,..." (n = 1 required)')
    p.add_argument("--measure", help="measure this machine's curves on the results' model and write them here")
    a = p.parse_args(argv)
    results = json.loads(Path(a.results).read_text(encoding="utf-8"))
    if not traced_rows(results):
        msg = f"{a.results} has no step traces (rerun the bench with --traces)"
        print(f"specdec_lab.bench.replay: error: {msg}", file=sys.stderr)
        return 2
    own = curve_from_traces(results)
    curves = {
        "the run's own curve (recorded verify seconds)": own,
        "the run's own curves, chains and trees apart": shaped_curve_from_traces(results),
        "the run's own curves per prompt, chains and trees apart": curves_by_prompt(results),
        "flat t(n) = t(1)": flat_curve(own(1)),
    }
    if a.curve:
        try:
            points = [(int(n), float(t)) for n, t in (x.split(":") for x in a.curve.split(",") if x.strip())]
            curves["--curve"] = curve_from_points(points)
        except ValueError as err:
            print(f"specdec_lab.bench.replay: error: --curve {a.curve!r}: {err}", file=sys.stderr)
            return 2
    if a.measure:
        import torch

        from ..cost.curve import cost_curve_for
        from ..io import write_json
        from ..machine import machine_info
        from ..models.load import load_model

        cfg = results["config"]
        lm = load_model(cfg["model"], device=cfg["device"], dtype=getattr(torch, cfg["dtype"]))
        largest = max(s.nodes for r in traced_rows(results) for s in steps_of(r))
        measured = {
            "bench context": measure_bench_curve(lm.model, results),
            "context 64 (min)": cost_curve_for(lm.model, max_tokens=min(max(largest, 2), 64), tree=True),
        }
        write_json(a.measure, {"results": a.results, "machine": machine_info(cfg["device"]),
                               "curves": {k: c.to_dict() for k, c in measured.items()}})  # fmt: skip
        curves |= measured
        print(f"wrote {a.measure}")
    for name, curve in curves.items():  # this machine's curves: drafting and bookkeeping as recorded (scale 1)
        scale = None if name == "--curve" else 1.0
        _print_table(f"replay under {name}", replay_bench(results, curve, reference=own, draft_scale=scale,
                                                          overhead_scale=scale))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
