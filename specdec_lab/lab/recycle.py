"""Reading a Token Recycling bench file (notebook 07 §7): recycle against prompt lookup, overall and by category.

Both methods draft for free (a lookup in the text, a walk in the successor table) but verify differently sized
trees, the cost model sizing each by what it accepts. Overall, paired-bootstrap intervals over the prompts
(`bench.report`): recycle's tokens/s over prompt lookup's (which orders them, by `batch_levers.side`), and its
tokens per step over prompt lookup's. A category holds a few prompts only, so its row is shown, never ordered in
words (`recycle_sentence`).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from ..bench.report import per_step_interval, speedup_interval
from .batch_levers import side

__all__ = ["recycle_frame", "recycle_sentence"]


def _rows(record: Mapping, method: str) -> list[dict]:
    return [r for r in record["rows"] if r["method"] == method]


def recycle_frame(record: Mapping, methods=("prompt_lookup", "recycle")) -> pd.DataFrame:
    """Rows: every category, then "all"; columns per method: its speed-up over autoregressive and its mean
    accepted (tokens per target forward, bonus included), from the file's summary."""
    summary = record["summary"]
    cats = sorted(summary["autoregressive"]["by_category"])
    out = {}
    for m in methods:
        s = summary[m]
        out[(m, "speed-up")] = [s["by_category"][c]["speedup"] for c in cats] + [s["speedup"]]
        out[(m, "mean accepted")] = [s["by_category"][c]["mean_accepted"] for c in cats] + [s["mean_accepted"]]
    frame = pd.DataFrame(out, index=[*cats, "all"])
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    frame.index.name = "category"
    return frame


def recycle_sentence(record: Mapping, a: str = "recycle", b: str = "prompt_lookup") -> str:
    """Markdown: a against b on the file's prompts — speed-ups over autoregressive with their intervals, and the
    order decided by the paired interval of a's speed over b's (holding 1: not told apart); a's tokens per step
    over b's with its interval (holding 1: within noise)."""
    s = record["summary"]
    sa, sb = s[a], s[b]
    lo_a, hi_a = sa["speedup_95"]
    lo_b, hi_b = sb["speedup_95"]
    speeds = f"{sa['speedup']:.2f}× [{lo_a:.2f}, {hi_a:.2f}] against {sb['speedup']:.2f}× [{lo_b:.2f}, {hi_b:.2f}]"
    paired = speedup_interval(_rows(record, a), _rows(record, b))  # a's tokens/s over b's, prompt by prompt
    if paired is None:
        order = "within" if not (hi_a < lo_b or hi_b < lo_a) else "faster" if lo_a > hi_b else "slower"
        why = "the intervals over autoregressive overlap" if order == "within" else "the intervals do not overlap"
    else:
        order = side(paired)
        why = f"{a} over {b} prompt by prompt: 95% interval {paired[0]:.2f}–{paired[1]:.2f}"
    if order == "within":
        speed = f"`{a}` and `{b}` **cannot be told apart** in speed on these prompts ({speeds}; {why})"
    else:
        speed = f"`{a}` is **{order}** than `{b}` on these prompts ({speeds}; {why})"
    ci = per_step_interval(_rows(record, a), _rows(record, b))
    ratio = sa["mean_accepted"] / sb["mean_accepted"]
    if ci is None:
        steps = f"its tokens per step are {ratio:.2f}× `{b}`'s (too few prompts for an interval)"
    else:
        word = {"faster": "more", "slower": "fewer", "within": "about as many (within noise: the interval holds 1)"}
        steps = (f"it emits **{word[side(ci)]}** tokens per step ({sa['mean_accepted']:.2f} against "
                 f"{sb['mean_accepted']:.2f}; ratio {ratio:.2f}, 95% interval {ci[0]:.2f}–{ci[1]:.2f})")  # fmt: skip
    n = record.get("prompts_done", len(_rows(record, a)))
    plain = {"faster": "faster than", "slower": "slower than", "within": "not told apart from"}[side((lo_a, hi_a))]
    return (
        f"Over the {n} prompts, {speed}; {steps}. Against plain decoding `{a}` is {plain} autoregressive "
        f"(its interval {lo_a:.2f}–{hi_a:.2f} {'holds' if lo_a <= 1 <= hi_a else 'excludes'} 1)."
    )
