"""Aggregation of benchmark rows, and the table the CLI prints.

Rates are ratios of sums, never means of per-prompt ratios: tokens/s = Σ tokens / Σ seconds, and
speedup = (Σ tokens / Σ seconds of a method) / (Σ tokens / Σ seconds of autoregressive) over the same
prompts. A mean of per-prompt speedups would let one short prompt with a lucky 5x outweigh long ones and
is biased upward (the mean of ratios of noisy times exceeds the ratio of means).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["summarize", "method_stats", "format_table"]


def method_stats(rows: Sequence[dict], baseline_rows: Sequence[dict] | None) -> dict:
    """Totals and rates for one method's rows (and the baseline's rows on the same prompts)."""
    tokens = sum(r["new_tokens"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    rate = tokens / seconds if seconds > 0 else None
    forwards = [r["forwards"] for r in rows]
    known = forwards and all(f is not None for f in forwards) and sum(forwards) > 0
    speedup = None
    if baseline_rows:
        base_seconds = sum(r["seconds"] for r in baseline_rows)
        base_rate = sum(r["new_tokens"] for r in baseline_rows) / base_seconds if base_seconds > 0 else None
        speedup = rate / base_rate if rate is not None and base_rate else None
    same = [r["identical"] for r in rows if r["identical"] is not None]
    return {
        "prompts": len(rows),
        "new_tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": rate,
        "mean_accepted": tokens / sum(forwards) if known else None,
        "speedup": speedup,
        "identical_to_autoregressive": sum(same) / len(same) if same else None,
    }


def categories(rows: Sequence[dict]) -> list[str]:
    """Categories in first-seen order (the prompt file's order)."""
    return list(dict.fromkeys(r["category"] for r in rows))


def summarize(rows: Sequence[dict], labels: Sequence[str], baseline: str = "autoregressive") -> dict:
    """{label: {overall stats..., "by_category": {category: stats}}} for every method label."""
    base = [r for r in rows if r["method"] == baseline] if baseline in labels else None
    summary = {}
    for label in labels:
        mine = [r for r in rows if r["method"] == label]
        stats = method_stats(mine, base)
        stats["by_category"] = {
            cat: method_stats(
                [r for r in mine if r["category"] == cat],
                [r for r in base if r["category"] == cat] if base is not None else None,
            )
            for cat in categories(mine)
        }
        summary[label] = stats
    return summary


_METRICS = (
    ("speedup", "speedup over autoregressive (Σ tokens / Σ seconds, ratio)", "{:.2f}x"),
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("mean_accepted", "mean accepted (tokens per target forward, bonus included)", "{:.2f}"),
    ("identical_to_autoregressive", "identical to autoregressive (fraction of prompts)", "{:.2f}"),
)


def format_table(results: dict) -> str:
    """One block per metric: rows = methods, columns = overall + each category."""
    summary = results["summary"]
    labels = list(summary)
    cats = categories(results["rows"])
    cols = ["overall", *cats]
    width = max(8, *(len(c) + 1 for c in cols))
    lw = max(len("method"), *(len(label) for label in labels)) + 2
    cfg, machine = results["config"], results["machine"]
    lines = [
        f"{results['prompts_done']}/{results['prompts_total']} prompts; {cfg['model']} on {cfg['device']} "
        f"({machine['device_name']}, torch threads: {machine['torch_threads']}), {cfg['dtype']}, "
        f"max_new_tokens={cfg['max_new_tokens']}"
    ]
    for key, title, fmt in _METRICS:
        lines += ["", title, "method".ljust(lw) + "".join(c.rjust(width) for c in cols)]
        for label in labels:
            cells = [summary[label]] + [summary[label]["by_category"].get(c, {}) for c in cats]
            vals = [fmt.format(c[key]) if c.get(key) is not None else "-" for c in cells]
            lines.append(label.ljust(lw) + "".join(v.rjust(width) for v in vals))
    return "\n".join(lines)
