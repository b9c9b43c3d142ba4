"""What-if on other hardware, re-decided: each method re-chooses its sizes under the other device's curve.

`replay.replay_bench` *re-prices* a recorded run: every step keeps the tree this CPU chose and only its price
changes. That answers "what would these decisions cost there?". A method that sizes its work from the cost
curve would decide differently on a flatter curve, so this module answers the other question, "what would
the method do there?": it calls the method's own sizing rule — the same code the proposer runs — with the
other curve, and prices the steps it would take.

    method                 rule (called as the proposer calls it)              size
    prompt lookup, draft,  `DraftLength.choose`: k* = argmax E[tokens | k, α̂] / price(k)   draft length k
    layer_skip
    medusa (tree="auto")   `trees.pick_budget` over `trees.tree_options` of the        tree nodes n
                           heads' calibrated accuracies (data/medusa/.../calibration.json)
    lookahead (W="auto")   `LookaheadBudget.width`: W* = argmax (1 + y_text + y_win·log2(1 + W)) / price   window W

Prices come from one `cost.StepCost` on the other curve (`StepCost.of`, never corrected), with this row's
own overheads per kind of step (its recorded accept seconds, the proposer's unpriced seconds and the call's
bookkeeping per step, all times the overhead scale), exactly as the run's StepCost learned them.

What is modelled, from each row's trace (`bench/trace.TraceStep`):
* chains — α̂, the maximum-likelihood per-token acceptance of the row's drafts (`replay.theory_prediction`'s);
  E[tokens/step | k] = (1 − α̂^{k+1}) / (1 − α̂); the draft model's seconds per drafted token (prompt lookup's
  search is per step, not per token);
* Medusa — E[L] of each candidate tree from the calibrated head accuracies, corrected per depth by what the
  run's trees accepted (its recorded `DepthCorrection` factors); the heads' cost proportional to the tree's
  depth, from the recorded drafting seconds at the recorded depth;
* Lookahead — y_text (accepted tokens per step credited to the text's n-grams) and y_win (to the window's,
  per log2(1 + W)) from the row's counts, the verified n-gram nodes per step ĝ as recorded.

Then, for the steps a decision governs, the row's tokens arrive at ρ·E(new size) per step, where
ρ = (tokens those steps emitted) / Σ_steps E(their recorded size) calibrates the model on what the row
accepted: at the recorded sizes the model reproduces the recorded steps, and the re-decided row on this
machine's own curve comes out near the re-priced one. Everything else (prefill, the steps no decision
touches, the call's bookkeeping) is priced as `replay.replay_row` prices it.

Assumed: acceptance does not depend on the size chosen beyond the model (i.i.d. acceptances for chains;
the heads' accuracies for trees; hits linear in log2(1 + W) for Lookahead); prompt lookup's steps without a
draft stay plain (the trace cannot tell "no n-gram matched" from "backed off"), while a draft model or Medusa
heads can always draft, so all their steps follow the new decision; Lookahead verifies as many n-gram nodes
as it did (on a flat curve it would verify more, so there it errs low); probes are left out. Methods without a
sizing rule (autoregressive, Jacobi, fixed sizes such as `draft_length=4` or `tree=chain:2`) are re-priced.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..cost.curve import CostCurve, ShapedCurve
from ..cost.step import StepCost
from ..cost.theory import expected_tokens_per_step
from ..proposers.draft import DraftProposer
from ..proposers.lookahead_budget import LookaheadBudget
from ..proposers.registry import BASELINE, make_proposer, parse_method_spec
from ..trees import pick_budget, tree_options
from .replay import (
    curve_from_traces,
    paired_rows,
    replay_row,
    replay_scales,
    theory_prediction,
    traced_rows,
)
from .trace import steps_of

__all__ = ["Decision", "redecide_row", "redecide_bench", "SIZE_NAMES", "main"]

SIZE_NAMES = {"chain": "draft length k", "tree": "tree nodes n", "window": "window W", "": "–"}


@dataclass
class Decision:
    """One row re-decided: the size kind ("chain", "tree", "window"; "" = no sizing rule: re-priced), the mean
    size the row used over the steps the decision governs (0 where it proposed nothing), the rule's choice
    under the curve, and the row's predicted seconds."""

    kind: str
    recorded: float | None
    chosen: float | None
    seconds: float


# ---- prices ---------------------------------------------------------------------------------------------
def _verify(curve, n: int, chain: bool | None) -> float:
    return curve.cost(n, chain) if isinstance(curve, ShapedCurve) else curve(n)


def _step_cost(curve, overheads: dict[str, float]) -> StepCost:
    """The one cost model on the other curve, fixed (learn=False), with this row's overheads per step kind."""
    if isinstance(curve, ShapedCurve):
        cost = StepCost.of(curve.tree, learn=False, overheads=overheads)
        cost.curves[False] = curve.chain
        return cost
    return StepCost.of(curve, learn=False, overheads=overheads)


def _mean(xs, default: float = 0.0) -> float:
    xs = list(xs)
    return statistics.fmean(xs) if xs else default


class _Row:
    """A traced row's sums, split by what its steps did, and the scaled per-step overheads."""

    def __init__(self, row: dict, ds: float, os_: float):
        self.row, self.ds, self.os = row, ds, os_
        self.steps = steps_of(row)
        self.prefill = row["trace"]["prefill_seconds"]
        phases = sum(s.t_propose + s.t_verify + s.t_accept for s in self.steps)
        self.other = max(row["seconds"] - self.prefill - phases, 0.0)
        self.drafted = [s for s in self.steps if s.candidates > 0]
        self.plain = [s for s in self.steps if s.candidates == 0]
        self.per_step_other = os_ * self.other / max(len(self.steps), 1)

    def fixed(self) -> float:
        """Seconds no decision changes: prefill and the call's bookkeeping outside the phases, scaled."""
        return self.os * (self.prefill + self.other)

    def repriced(self, curve, steps) -> float:
        """`replay_row`'s price of these steps as recorded (verify on the curve, the rest scaled)."""
        return sum(_verify(curve, s.nodes, s.chain) + self.ds * s.t_propose + self.os * s.t_accept for s in steps)


# ---- chains: prompt lookup, draft models --------------------------------------------------------------------
def _chain(row: dict, proposer, curve, ds: float, os_: float) -> Decision | None:
    length = proposer.length
    if length.mode != "cost":
        return None  # a fixed k or the +2/−1 heuristic: nothing to re-decide
    r = _Row(row, ds, os_)
    alpha = theory_prediction([row], curve)["alpha"] if r.drafted else None
    if alpha is None:
        return None  # nothing was drafted: α unknown
    per_token = isinstance(proposer, DraftProposer)  # a draft model drafts token by token; lookup searches once
    drafted_tokens = sum(s.candidates for s in r.drafted)
    t_draft = ds * sum(s.t_propose for s in r.drafted) / drafted_tokens if per_token else 0.0
    search = 0.0 if per_token else ds * _mean(s.t_propose for s in r.drafted)
    accept = _mean(s.t_accept for s in r.drafted)
    own_chain = os_ * accept + search  # a step's own seconds besides the forward and the priced drafting
    own_root = os_ * _mean((s.t_accept for s in r.plain), accept) + ds * _mean(s.t_propose for s in r.plain)
    o = r.per_step_other
    cost = _step_cost(curve, {"root": own_root + o, "chain": own_chain + o})
    length.cost, length.draft_step = cost, t_draft
    length.tracker.set("replay", min(alpha, 1 - 1e-9), weight=1e9)
    k = length.choose(length.k_max, key="replay")
    # the governed steps: all of a draft model's (it can always draft), prompt lookup's drafted ones only
    governed, kept = (r.steps, []) if per_token else (r.drafted, r.plain)
    tokens = sum(s.emitted for s in governed)
    rho = sum(s.emitted for s in r.drafted) / sum(expected_tokens_per_step(alpha, s.candidates) for s in r.drafted)
    per_step = rho * expected_tokens_per_step(alpha, k) if k else 1.0
    phases = _verify(curve, k + 1, True) + (k * t_draft + own_chain if k else own_root)
    seconds = r.fixed() + r.repriced(curve, kept) + tokens / per_step * phases
    return Decision("chain", _mean(s.candidates for s in governed), float(k), seconds)


# ---- Medusa trees ------------------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _medusa_options(heads: str, accuracy: str, max_budget: int) -> tuple:
    """The candidate trees of `tree="auto"` (`trees.tree_options` of the calibrated accuracies): a function of
    the heads' calibration file alone, as `medusa.Drafter.tree_options` builds them."""
    from ..medusa import shipped_heads_path
    from ..trees.accuracy import HeadAccuracies

    folder = shipped_heads_path() if heads == "default" else Path(heads).expanduser()
    record = json.loads((folder / "calibration.json").read_text(encoding="utf-8"))
    acc = HeadAccuracies.from_dict(record).model(accuracy)
    return tuple(tree_options(acc, max_budget, max_depth=acc.shape[0]))


def _medusa(row: dict, proposer, curve, ds: float, os_: float) -> Decision | None:
    cfg = proposer.config
    if cfg.tree != "auto" or not isinstance(cfg.heads, str):
        return None  # a fixed tree (or dynamic trees): nothing to re-decide here
    r = _Row(row, ds, os_)
    options = list(_medusa_options(cfg.heads, cfg.accuracy, cfg.max_budget))
    factors = list((row.get("proposer") or {}).get("correction") or [])
    best = {}  # budget -> the largest corrected E[L] a tree of that size reaches (the recorded steps' E)
    for opt in options:
        best[opt.budget] = max(best.get(opt.budget, 0.0), opt.corrected(factors))
    depth = max(int((row.get("proposer") or {}).get("depth") or 1), 1)
    per_head = ds * _mean(s.t_propose for s in r.drafted) / depth if r.drafted else 0.0
    accept = _mean(s.t_accept for s in r.drafted)
    own_tree = os_ * accept
    own_root = os_ * _mean((s.t_accept for s in r.plain), accept) + ds * _mean(s.t_propose for s in r.plain)
    o = r.per_step_other
    cost = _step_cost(curve, {"root": own_root + o, "chain": own_tree + o, "tree": own_tree + o})
    choice = pick_budget(options, lambda n: cost.step(n, tree=True), lambda d: per_head * d, factors)
    recorded = [best.get(s.nodes - 1, 1.0) for s in r.drafted]
    rho = sum(s.emitted for s in r.drafted) / sum(recorded) if r.drafted else 1.0
    tokens = sum(s.emitted for s in r.steps)
    per_step = rho * choice.expected_length if choice.budget else 1.0
    n = choice.budget + 1
    price = (_verify(curve, n, choice.depth == n - 1) + per_head * choice.depth + own_tree
             if choice.budget else _verify(curve, 1, True) + own_root)  # fmt: skip
    seconds = r.fixed() + tokens / per_step * price
    return Decision("tree", _mean(s.nodes - 1 for s in r.steps), float(choice.budget), seconds)


# ---- Lookahead's window ------------------------------------------------------------------------------------
def _lookahead(row: dict, proposer, curve, ds: float, os_: float) -> Decision | None:
    cfg = proposer.config
    if cfg.W != "auto":
        return None
    r = _Row(row, ds, os_)
    levels = cfg.N - 1
    # A windowed step's input is (N − 1)·W window cells (the root is the window's first) + the trie's nodes; a
    # step without a window is the root + the trie's nodes (`LookaheadBudget.nodes`).
    widths = [(s.nodes - s.candidates) / levels if s.nodes - s.candidates > 1 else 0.0 for s in r.steps]
    counts = row.get("proposer") or {}
    steps = len(r.steps)
    y_text = counts.get("text", 0) / steps
    window_log = sum(math.log2(1 + w) for w in widths if w > 0)
    y_win = counts.get("window", 0) / window_log if window_log else counts.get("y_win", 0.1)
    g = _mean(s.candidates for s in r.steps)
    own = os_ * _mean(s.t_accept for s in r.steps) + ds * _mean(s.t_propose for s in r.steps)
    o = r.per_step_other
    budget = LookaheadBudget(_step_cost(curve, {"root": own + o, "chain": own + o, "tree": own + o}), cfg.N, cfg.G,
                             cfg.max_window, cfg.adapt_every, cfg.probe_every, cfg.probe_max)  # fmt: skip
    budget.y_text.value, budget.y_win.value, budget.g_nodes.value = y_text, y_win, g
    width = budget.width()

    def expected(w: float) -> float:
        return 1 + y_text + y_win * math.log2(1 + w)

    tokens = sum(s.emitted for s in r.steps)
    rho = tokens / sum(expected(w) for w in widths)
    nodes = max(int(round(budget.nodes(width, g))), 1)
    price = _verify(curve, nodes, False) + own
    seconds = r.fixed() + tokens / (rho * expected(width)) * price
    return Decision("window", _mean(widths), float(width), seconds)


_RULES = {"prompt_lookup": _chain, "draft": _chain, "layer_skip": _chain, "medusa": _medusa, "lookahead": _lookahead}


def redecide_row(row: dict, curve, draft_scale: float = 1.0, overhead_scale: float = 1.0) -> Decision:
    """Predicted seconds of one traced row with its sizes re-chosen under `curve` (module docstring); rows
    of methods without a sizing rule are re-priced (`replay.replay_row`)."""
    if not row.get("trace"):
        raise ValueError(f"row {row.get('method')!r} / {row.get('question_id')!r} has no trace to re-decide")
    spec = parse_method_spec(row["method"])
    rule = _RULES.get(spec.name)
    decision = None
    if rule is not None and row["trace"]["steps"]:
        decision = rule(row, make_proposer(spec.name, **spec.proposer), curve, draft_scale, overhead_scale)
    if decision is None:
        decision = Decision("", None, None, replay_row(row, curve, draft_scale, overhead_scale))
    return decision


def redecide_bench(
    results: dict,
    curve: CostCurve | ShapedCurve,
    reference=None,
    draft_scale: float | None = None,
    overhead_scale: float | None = None,
    category: str | None = None,
    baseline: str = BASELINE,
) -> list[dict]:
    """Per method: the measured speedup, the re-priced one (`replay.replay_bench`'s) and the re-decided one,
    with the mean size recorded and the mean size chosen. Scales as in `replay_bench` (default t'(1)/t(1)).

    Returns [{method, prompts, size (what is sized), recorded_size, chosen_size, measured_speedup,
    repriced_speedup, predicted_speedup, predicted_seconds}], methods in the results' order."""
    if isinstance(curve, Mapping):
        raise TypeError("redecide_bench takes one curve (a CostCurve or ShapedCurve), not one per prompt")
    ds, os_ = replay_scales(curve, results, reference, draft_scale, overhead_scale)
    out = []
    for method, mine, ref in paired_rows(results, baseline, category):
        tok, tok_b = sum(r["new_tokens"] for r in mine), sum(r["new_tokens"] for r in ref)
        base_seconds = sum(replay_row(r, curve, ds, os_) for r in ref)
        decisions = [redecide_row(r, curve, ds, os_) for r in mine]
        repriced = sum(replay_row(r, curve, ds, os_) for r in mine)
        predicted = sum(d.seconds for d in decisions)
        sized = [d for d in decisions if d.kind]
        out.append(
            {
                "method": method,
                "prompts": len(mine),
                "size": SIZE_NAMES[sized[0].kind if sized else ""],
                "recorded_size": _mean((d.recorded for d in sized), math.nan) if sized else None,
                "chosen_size": _mean((d.chosen for d in sized), math.nan) if sized else None,
                "measured_speedup": (tok / sum(r["seconds"] for r in mine)) / (tok_b / sum(r["seconds"] for r in ref)),
                "repriced_speedup": (tok / repriced) / (tok_b / base_seconds),
                "predicted_speedup": (tok / predicted) / (tok_b / base_seconds),
                "predicted_seconds": predicted,
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """python -m specdec_lab.bench.redecide RESULTS.json [--curve CURVE.json | --curve "1:0.006,64:0.0064"]

    Per method: the size the run used, the size its rule re-chooses, and the re-priced and re-decided speedups,
    under the run's own curve, a flat one at its t(1), and --curve (a file of `python -m specdec_lab.cost.curve_file`).
    """
    import argparse
    import sys

    from ..cost.curve import curve_from_points, flat_curve
    from ..cost.curve_file import load_curve_file

    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.redecide", description=main.__doc__.splitlines()[0])
    p.add_argument("results", help="a bench results JSON written with traces (the default)")
    p.add_argument("--curve", help='a curve file (.json) or a device\'s verify cost "n:seconds,..." (n = 1 required)')
    a = p.parse_args(argv)
    results = json.loads(Path(a.results).read_text(encoding="utf-8"))
    if not traced_rows(results):
        print(f"specdec_lab.bench.redecide: error: {a.results} has no step traces", file=sys.stderr)
        return 2
    own = curve_from_traces(results)
    curves = {"the run's own curve": own, "flat t(n) = t(1)": flat_curve(own(1))}
    if a.curve:
        try:
            if a.curve.endswith(".json"):
                curves[a.curve] = load_curve_file(a.curve)
            else:
                points = [(int(n), float(t)) for n, t in (x.split(":") for x in a.curve.split(",") if x.strip())]
                curves["--curve"] = curve_from_points(points)
        except (ValueError, OSError) as err:
            print(f"specdec_lab.bench.redecide: error: --curve {a.curve!r}: {err}", file=sys.stderr)
            return 2
    for name, curve in curves.items():
        print(f"\nunder {name}\n{'method':<18}{'size':<16}{'used':>7}{'chosen':>8}{'measured':>10}{'re-priced':>11}"
              f"{'re-decided':>12}")  # fmt: skip
        for r in redecide_bench(results, curve, reference=own):
            used, chosen = (f"{r[k]:.1f}" if r[k] is not None else "–" for k in ("recorded_size", "chosen_size"))
            print(f"{r['method']:<18}{r['size']:<16}{used:>7}{chosen:>8}{r['measured_speedup']:>9.3f}x"
                  f"{r['repriced_speedup']:>10.3f}x{r['predicted_speedup']:>11.3f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
