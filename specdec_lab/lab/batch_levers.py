"""Reading a batched bench's ratios by their repeats (notebook 13, sections 5 and 7): one rule for "faster",
"slower" and "within noise".

A ratio of tokens/s (a method over plain batched decoding, or the planner on over off) is measured once per
repeat, each repeat paired with its baseline's. The rule, for every comparison in the notebook:

    band  = how far a ratio moved where nothing differed: a no-effect control's repeats (`no_effect_band`),
            0 where the file has none
    side  = "faster"  if every repeat's ratio > 1 + band
            "slower"  if every repeat's ratio < 1 / (1 + band)
            "within"  otherwise (repeats on both sides of 1, or inside the control's band): a tie is a tie

A no-effect control is a pair the lever did not touch: in `--levers off,plan` a method whose planner cut no step and
whose off and plan runs decoded alike (`planner_controls`). Its plan / off ratio would be 1 on a quiet machine; how
far its repeats moved from 1 is what the run's noise alone does to such a ratio.

    sides = split_by_side({"hybrid at B = 8": [1.01, 1.13], ...}, band)   # {"faster": [...], "slower": [...], ...}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["SIDES", "no_effect_band", "planner_controls", "side", "split_by_side", "repeat_ratios"]

SIDES = ("faster", "slower", "within")


def side(ratios: Sequence[float], band: float = 0.0) -> str:
    """'faster' where every ratio exceeds 1 + band, 'slower' where every one lies below 1 / (1 + band), else
    'within' (the repeats straddle 1, or some lie inside the no-effect band)."""
    if not ratios:
        raise ValueError("side needs at least one repeat's ratio")
    if band < 0:
        raise ValueError(f"a noise band is not negative, got {band!r}")
    if min(ratios) > 1.0 + band:
        return "faster"
    if max(ratios) < 1.0 / (1.0 + band):
        return "slower"
    return "within"


def split_by_side(entries: Mapping[str, Sequence[float]], band: float = 0.0) -> dict[str, list[str]]:
    """{label: its repeats' ratios} -> {"faster": [labels], "slower": [labels], "within": [labels]}, in the
    entries' order (`side` for each)."""
    out: dict[str, list[str]] = {s: [] for s in SIDES}
    for label, ratios in entries.items():
        out[side(ratios, band)].append(label)
    return out


def no_effect_band(controls: Iterable[Sequence[float]]) -> float:
    """How far a ratio moved where nothing differed: the largest max(r, 1/r) − 1 over every repeat's ratio r of
    every control (symmetric, so a control at 0.96 and 1.11 gives 0.11); 0.0 without controls."""
    return max((max(r, 1.0 / r) - 1.0 for ratios in controls for r in ratios), default=0.0)


def repeat_ratios(on: Sequence[float], off: Sequence[float]) -> list[float]:
    """Each repeat's tokens/s over its paired baseline's (the two lists in repeat order)."""
    if len(on) != len(off) or not on:
        raise ValueError(f"paired repeats needed, got {len(on)} and {len(off)}")
    return [x / y for x, y in zip(on, off, strict=True)]


def planner_controls(runs: Iterable[Mapping], tol: float = 1e-9) -> dict[tuple[int, str], list[float]]:
    """The (B, method) pairs of a `--levers off,plan` bench's `runs` where the planner changed nothing — it cut no
    step, and the off and plan runs have the same mean accepted and nodes per step — with their plan / off ratio
    per repeat: the file's own no-effect controls."""
    by_key = {(r["batch_size"], r["method"], r.get("levers", "off")): r for r in runs if "error" not in r}
    out = {}
    for (b, m, lv), on in sorted(by_key.items()):
        off = by_key.get((b, m, "off"))
        plan = on.get("plan") or {}
        if lv != "plan" or off is None or plan.get("cut") is None or plan["cut"] > 0:
            continue
        alike = all(
            on.get(key) is not None and off.get(key) is not None and abs(on[key] - off[key]) <= tol
            for key in ("mean_accepted", "nodes_per_step")
        )
        if alike:
            out[(b, m)] = repeat_ratios(on["repeat_tokens_per_s"], off["repeat_tokens_per_s"])
    return out
