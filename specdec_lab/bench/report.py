"""Aggregation of benchmark rows, and the table the CLI prints.

Rates are ratios of sums, never means of per-prompt ratios: tokens/s = Σ tokens / Σ seconds, and
speedup = (Σ tokens / Σ seconds of a method) / (Σ tokens / Σ seconds of autoregressive) over the same
prompts. A mean of per-prompt speedups would let one short prompt with a lucky 5x outweigh long ones and
is biased upward (the mean of ratios of noisy times exceeds the ratio of means).

Every speedup carries a 95% interval from a paired bootstrap over prompts: resample the prompts with
replacement (a method's row and the baseline's row of one prompt stay together), recompute the ratio of
sums, take the 2.5% and 97.5% quantiles. On a shared machine one prompt's wall time moves between two runs
of the *same* decoder (data/bench/README.md), so a category of 8 prompts is uncertain by several percent:
the interval says whether a category below a floor is a measured loss or noise.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["summarize", "method_stats", "format_table", "speedup_interval", "per_step_interval", "by_build",
           "by_sampling", "against_best_single", "decode_rows"]  # fmt: skip

BOOTSTRAP = 2000  # resamples: enough that the 2.5% quantile hardly moves between seeds (data/bench/README.md)


def speedup_interval(
    rows: Sequence[dict], baseline_rows: Sequence[dict], level: float = 0.95, resamples: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, float] | None:
    """(low, high): paired-bootstrap interval of the ratio-of-sums speedup over the prompts both ran.

    None with fewer than 2 paired prompts. Deterministic for a given seed.
    """
    base = {r["question_id"]: r for r in baseline_rows}
    pairs = [  # (method tokens, method seconds, baseline tokens, baseline seconds), one per prompt
        (r["new_tokens"], r["seconds"], base[q]["new_tokens"], base[q]["seconds"])
        for r in rows
        if (q := r["question_id"]) in base
    ]
    if len(pairs) < 2:
        return None
    rng, n, ratios = random.Random(seed), len(pairs), []
    for _ in range(resamples):
        tm = sm = tb = sb = 0.0
        for i in rng.choices(range(n), k=n):
            a, b, c, d = pairs[i]
            tm, sm, tb, sb = tm + a, sm + b, tb + c, sb + d
        if sm > 0 and tb > 0 and sb > 0:
            ratios.append((tm / sm) / (tb / sb))
    if not ratios:
        return None
    ratios.sort()
    tail = (1.0 - level) / 2.0
    lo = ratios[int(tail * (len(ratios) - 1))]
    hi = ratios[int(round((1.0 - tail) * (len(ratios) - 1)))]
    return lo, hi


def per_step_interval(
    rows: Sequence[dict], baseline_rows: Sequence[dict], level: float = 0.95, resamples: int = BOOTSTRAP, seed: int = 0
) -> tuple[float, float] | None:
    """`speedup_interval` of tokens per target forward (the mean accepted) instead of tokens per second: the same
    paired bootstrap with each row's forwards in place of its seconds."""

    def per_forward(rs):
        return [{**r, "seconds": r["forwards"]} for r in rs]

    return speedup_interval(per_forward(rows), per_forward(baseline_rows), level, resamples, seed)


def method_stats(rows: Sequence[dict], baseline_rows: Sequence[dict] | None) -> dict:
    """Totals and rates for one method's rows (and the baseline's rows on the same prompts)."""
    tokens = sum(r["new_tokens"] for r in rows)
    seconds = sum(r["seconds"] for r in rows)
    rate = tokens / seconds if seconds > 0 else None
    forwards = [r["forwards"] for r in rows]
    known = forwards and all(f is not None for f in forwards) and sum(forwards) > 0
    speedup = interval = None
    if baseline_rows:
        base_seconds = sum(r["seconds"] for r in baseline_rows)
        base_rate = sum(r["new_tokens"] for r in baseline_rows) / base_seconds if base_seconds > 0 else None
        speedup = rate / base_rate if rate is not None and base_rate else None
        interval = speedup_interval(rows, baseline_rows) if speedup is not None else None
    same = [r["identical"] for r in rows if r["identical"] is not None]
    return {
        "prompts": len(rows),
        "new_tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": rate,
        "mean_accepted": tokens / sum(forwards) if known else None,
        "speedup": speedup,
        "speedup_95": list(interval) if interval else None,  # paired bootstrap over prompts
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
    ("speedup_95", "95% interval of the speedup (paired bootstrap over prompts)", "{0[0]:.2f}-{0[1]:.2f}"),
    ("tokens_per_s", "tokens/s", "{:.1f}"),
    ("mean_accepted", "mean accepted (tokens per target forward, bonus included)", "{:.2f}"),
    ("identical_to_autoregressive", "identical to autoregressive (fraction of prompts)", "{:.2f}"),
)


def format_table(results: dict, greedy_runs: Sequence[dict] = ()) -> str:
    """One block per metric: rows = methods, columns = overall + each category; then the sampled labels against
    sampled autoregressive (greedy speed-ups from `greedy_runs` where this run has none) and the hybrid
    against the best single method of each category."""
    summary = results["summary"]
    labels = list(summary)
    cats = categories(results["rows"])
    cols = ["overall", *cats]
    width = max(11, *(len(c) + 1 for c in cols))
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
    sampled = by_sampling(results, greedy_runs=greedy_runs)
    if sampled:
        lines += ["", "sampled methods against autoregressive sampled alike (speed-up [95%], worst category, "
                  "kept of the greedy speed-up)"]  # fmt: skip
        lines += [_sampled_line(r, lw) for r in sampled]
        decoded = [r for r in sampled if r["decode_speedup"] is not None]
        if decoded:
            lines += ["", "the same, decode alone (each prompt's traced prefill taken out: sampled texts differ in "
                      "length)"]  # fmt: skip
            lines += [_sampled_line(r, lw, decode=True) for r in decoded]
    best = against_best_single(results)
    if best and best["categories"]:
        lines += ["", f"{best['method']} against the best single method of each category (its speed-up, the best's "
                  "[95%]; meets: not below the best's lower bound)"]  # fmt: skip
        for cat, c in best["categories"].items():
            ci = "[{0[0]:.2f}, {0[1]:.2f}]".format(c["best_95"]) if c["best_95"] else ""
            lines.append(f"{cat.ljust(lw)}{c['speedup']:.2f}x  best {c['best']} {c['best_speedup']:.2f}x {ci}  "
                         f"{'meets' if c['meets'] else 'below'}")  # fmt: skip
    return "\n".join(lines)


def _sampled_line(r: dict, lw: int, decode: bool = False) -> str:
    """One `by_sampling` record as a table line: speed-up [95%], worst category, kept of the greedy speed-up;
    decode: the same from its `decode_*` fields."""
    p = "decode_" if decode else ""
    speedup, ci95 = r[p + "speedup"], r[p + "speedup_95"]
    greedy = r["greedy_decode_speedup" if decode else "greedy_speedup"]
    if speedup is None:
        return f"{r['method'].ljust(lw)}-"
    ci = f"[{ci95[0]:.2f}, {ci95[1]:.2f}]" if ci95 else ""
    kept = f"{r[p + 'kept']:.0%} of {greedy:.2f}x" if r[p + "kept"] is not None else "-"
    worst = f"{r[p + 'worst_category']} {r[p + 'worst_speedup']:.2f}x" if r[p + "worst_speedup"] is not None else "-"
    return f"{r['method'].ljust(lw)}{speedup:.2f}x {ci}  worst {worst}  kept {kept}"


def by_build(results: dict, baseline: str = "autoregressive") -> list[dict]:
    """One record per label of a run with builds (`builds`: "hybrid@int4+compile"): method, build, tokens/s,
    speed-up over the run's baseline (fp32 eager autoregressive when that is the loaded model) and over its
    own build's autoregressive (`speedup_own`, with its interval), mean accepted, identical to its reference.

    Anchors (labels of no build of ours) get build "anchor"; an unsuffixed label, the loaded model's build. A
    build is named by what the run's record says it held (`_held_name`): a file from before the Q8_0 head and
    the stacked products shows its quantized builds as "int4+head=fp32+compile+unfused", not under the name
    today's default build has.
    """
    from ..proposers import METHODS  # our loop's methods (the package registers them); other labels: anchors
    from .builds import split_label  # (builds imports the bench's runner; report stays importable alone)

    cfg = results["config"]
    base = _held_name(cfg, cfg.get("weights") or "fp32", bool(cfg.get("compile")), None, True, base=True)
    labels, rows = results["methods"], results["rows"]
    records = []
    for label in labels:
        name, build = split_label(label)
        own = f"{baseline}@{build.name}" if build is not None else baseline
        mine = [r for r in rows if r["method"] == label]
        ref = [r for r in rows if r["method"] == own] if own in labels else None
        stats = method_stats(mine, ref)
        summary = results["summary"][label]
        anchor = name.split(":", 1)[0] not in METHODS
        records.append({
            "label": label,  # the run's own name for it (its rows' "method")
            "method": name,
            "build": (_held_name(cfg, build.weights, build.compile, build.head, build.fuse) if build is not None
                      else "anchor" if anchor else base),  # fmt: skip
            "tokens_per_s": summary["tokens_per_s"],
            "speedup": summary["speedup"],
            "speedup_own": stats["speedup"],
            "speedup_own_95": stats["speedup_95"],
            "mean_accepted": summary["mean_accepted"],
            "identical": summary["identical_to_autoregressive"],
        })  # fmt: skip
    return records


def _held_name(cfg: dict, weights: str, compile_: bool, head: str | None, fuse: bool, base: bool = False) -> str:
    """A build's name with the head and stacking its run held (`builds.Build.name`): the record's head where
    the label names none (a quantized build's default head was fp32 before it became q8_0), and "+unfused"
    for a compiled quantized build whose record predates stacked products (no "fused" field)."""
    from .builds import Build  # (builds imports the bench's runner; report stays importable alone)

    if weights == "fp32":
        return Build(weights, compile_).name
    key = weights + ("+compile" if compile_ else "")
    record = cfg.get("quant") if base else (cfg.get("builds") or {}).get(key) or {}
    held = head or (record or {}).get("head")
    if compile_ and fuse and not base and record and "fused" not in record:
        fuse = False  # compiled before q/k/v and gate/up were stacked
    return Build(weights, compile_, None if held in (None, "q8_0") else held, fuse).name


SAMPLING_KEYS = ("temperature", "top_k", "top_p")  # what draws a token; `accept` picks the rule that checks it


def _sampling(label: str) -> tuple[str, dict, dict, str]:
    """'medusa:accept=typical:temperature=0.7@int4' -> ('medusa', {accept: typical}, {temperature: 0.7}, 'int4')."""
    from ..proposers.registry import parse_method_spec  # (the grammar only; report stays importable alone)
    from .builds import split_label

    text, build = split_label(label)
    build = build.name if build is not None else ""
    spec = parse_method_spec(text)
    draw = {k: v for k, v in spec.params.items() if k in SAMPLING_KEYS}
    rest = {k: v for k, v in spec.params.items() if k not in SAMPLING_KEYS}
    if not float(draw.get("temperature") or 0.0) > 0.0:
        draw = {}  # temperature 0 is greedy whatever top-k / top-p say
    return spec.name, rest, draw, build


def _greedy_twin(parsed: dict, name: str, rest: dict, build: str, baseline: str) -> tuple[str, str] | None:
    """(greedy label, its greedy baseline) of a run for a sampled label's (name, params, build), `accept` aside."""
    same = {k: v for k, v in rest.items() if k != "accept"}
    greedy = next((x for x, (n, r, d, b) in parsed.items() if n == name and not d and b == build
                   and {k: v for k, v in r.items() if k != "accept"} == same), None)  # fmt: skip
    ref = next((x for x, (n, r, d, b) in parsed.items() if n == baseline and not d and b == build), None)
    return (greedy, ref) if greedy is not None and ref is not None else None


def decode_rows(rows: Sequence[dict]) -> list[dict] | None:
    """The rows with `seconds` less the prefill their trace recorded: the decode alone (None when a row has no
    traced prefill, e.g. a run without --traces).

    Why a sampled comparison needs it: sampled methods emit texts of different lengths from one prompt (each
    consumes the random stream its own way, and EOS comes when it comes), while the prompt's prefill is the same
    work for every method. In Σ tokens / Σ seconds that prefill is spread over different token counts: a method
    whose draw stopped after 7 tokens pays a whole prefill for them, one that ran to 128 hardly notices it. On
    a category of long prompts and short answers (rag) that alone moves a ratio by several percent. Greedy
    methods emit the same tokens, so there the prefill weighs alike.
    """
    out = []
    for r in rows:
        prefill = (r.get("trace") or {}).get("prefill_seconds")
        if prefill is None or r["seconds"] is None:
            return None
        out.append(r | {"seconds": max(r["seconds"] - prefill, 1e-9)})
    return out


def _worst(per_cat: dict) -> tuple[str | None, float | None, list | None]:
    """(category, speed-up, its interval) of the lowest category speed-up."""
    worst = min(per_cat, key=lambda c: per_cat[c]["speedup"] or float("inf")) if per_cat else None
    return (worst, per_cat[worst]["speedup"], per_cat[worst]["speedup_95"]) if worst else (None, None, None)


def by_sampling(results: dict, baseline: str = "autoregressive", greedy_runs: Sequence[dict] = ()) -> list[dict]:
    """One record per sampled label of a run (temperature > 0): its speed-up over `baseline` sampled with the
    same temperature / top-k / top-p (and on the same build), overall with its interval and per category, and
    what it keeps of its greedy speed-up (`kept` = sampled speed-up / greedy speed-up of the label with the same
    name and parameters, `accept` aside, at temperature 0) where the run has that label too, else where the
    first of `greedy_runs` that has it does (`greedy_run`: that run's --out). A greedy speed-up from another
    run counts only the prompts this run decoded, so the two ratios rest on the same prompts; both are ratios
    within their own run, which is what makes runs of one machine kind comparable at all.

    This is the comparison that matters at T > 0: a sampled method against sampled plain decoding, whose step
    also pays for the draw, not against greedy plain decoding. Labels without a sampled baseline are left out.

    The `decode_*` fields repeat speed-up, worst category and kept on the decode alone (`decode_rows`: seconds
    less each prompt's traced prefill, in the greedy run too), None without traces: the sampled texts differ in
    length, and the prefill spread over them is not the method's cost.
    """
    labels, rows = results.get("methods") or list(results["summary"]), results["rows"]
    parsed = {label: _sampling(label) for label in labels}
    others = [(run, {x: _sampling(x) for x in run.get("methods") or list(run["summary"])}) for run in greedy_runs]
    records = []
    for label, (name, rest, draw, build) in parsed.items():
        if not draw or name == baseline:
            continue
        ref = next((x for x, (n, r, d, b) in parsed.items() if n == baseline and d == draw and b == build), None)
        if ref is None:
            continue
        stats = summarize(rows, [ref, label], baseline=ref)[label]  # overall and per category against `ref`
        per_cat = stats["by_category"]
        dec = decode_rows([r for r in rows if r["method"] in (ref, label)])
        d = summarize(dec, [ref, label], baseline=ref)[label] if dec else None  # the same, decode alone
        greedy, g, g_dec, source = None, None, None, None
        mine = {r["question_id"] for r in rows if r["method"] == label}  # the prompts this run sampled
        for run, run_parsed in [(results, parsed), *others]:
            twin = _greedy_twin(run_parsed, name, rest, build, baseline)
            if twin is None:
                continue
            pick = [r for r in run["rows"] if r["question_id"] in mine]
            g_rows, g_base = [r for r in pick if r["method"] == twin[0]], [r for r in pick if r["method"] == twin[1]]
            g = method_stats(g_rows, g_base)
            if not g["prompts"]:
                g = None
                continue
            g_dec_rows, g_dec_base = decode_rows(g_rows), decode_rows(g_base)
            g_dec = method_stats(g_dec_rows, g_dec_base) if g_dec_rows and g_dec_base else None
            greedy, source = twin[0], (None if run is results else run.get("config", {}).get("out"))
            break
        worst, worst_speedup, worst_95 = _worst(per_cat)
        d_worst, d_worst_speedup, d_worst_95 = _worst(d["by_category"]) if d else (None, None, None)
        records.append({
            "method": label,
            "baseline": ref,
            "rule": rest.get("accept", "default"),  # the default at T > 0 is the exact rule for the proposer
            "draw": draw,  # temperature, top_k, top_p as the label sets them
            "tokens_per_s": stats["tokens_per_s"],
            "mean_accepted": stats["mean_accepted"],
            "speedup": stats["speedup"],
            "speedup_95": stats["speedup_95"],
            "by_category": {c: st["speedup"] for c, st in per_cat.items()},
            "worst_category": worst,
            "worst_speedup": worst_speedup,
            "worst_speedup_95": worst_95,
            "greedy": greedy,
            "greedy_run": source,  # None: this run; else the other run's --out
            "greedy_speedup": g["speedup"] if g else None,
            "greedy_mean_accepted": g["mean_accepted"] if g else None,
            "kept": stats["speedup"] / g["speedup"] if g and g["speedup"] and stats["speedup"] else None,
            "decode_speedup": d["speedup"] if d else None,
            "decode_speedup_95": d["speedup_95"] if d else None,
            "decode_worst_category": d_worst,
            "decode_worst_speedup": d_worst_speedup,
            "decode_worst_speedup_95": d_worst_95,
            "greedy_decode_speedup": g_dec["speedup"] if g_dec else None,
            "decode_kept": d["speedup"] / g_dec["speedup"] if d and g_dec and g_dec["speedup"] and d["speedup"]
                           else None,
        })  # fmt: skip
    return records


def against_best_single(results: dict, label: str = "hybrid", singles: Sequence[str] | None = None) -> dict | None:
    """`label` (a combining proposer) against the best single method of each category, the test of a hybrid:
    is it at least the best single proposer of the category minus that one's 95% interval, i.e. not
    measurably slower than what a user who knew the category would have picked?

    singles: the methods it is compared with; default every other label of our loop's methods in the run,
    greedy and on the same build, the baseline and `label`'s own method (another configuration of it, e.g.
    hybrid:sources=…, is not a single proposer) aside. -> {"method", "categories": {category: {"best",
    "best_speedup", "best_95", "speedup", "meets"}}, "meets_all"}, or None when the run lacks `label` or singles.
    """
    from ..proposers import METHODS  # our loop's methods; other labels are anchors

    summary, baseline = results["summary"], "autoregressive"
    if label not in summary:
        return None
    if singles is None:
        parsed = {x: _sampling(x) for x in summary}  # (name, params, draw, build) in the labels' own grammar
        own, build = parsed[label][0], parsed[label][3]
        singles = [x for x, (name, _, draw, b) in parsed.items()
                   if name not in (baseline, own) and name in METHODS and b == build and not draw]  # fmt: skip
    if not singles:
        return None
    cats = {}
    for cat, mine in summary[label]["by_category"].items():
        stats = {s: summary[s]["by_category"].get(cat, {}) for s in singles}
        best = max((s for s in singles if stats[s].get("speedup") is not None),
                   key=lambda s: stats[s]["speedup"], default=None)  # fmt: skip
        if best is None or mine.get("speedup") is None:
            continue
        floor = (stats[best].get("speedup_95") or [stats[best]["speedup"]])[0]  # the best one's lower bound
        cats[cat] = {"best": best, "best_speedup": stats[best]["speedup"], "best_95": stats[best].get("speedup_95"),
                     "speedup": mine["speedup"], "meets": mine["speedup"] >= floor}  # fmt: skip
    return {"method": label, "singles": list(singles), "categories": cats,
            "meets_all": bool(cats) and all(c["meets"] for c in cats.values())}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m specdec_lab.bench.report RUN.json [--greedy-from OTHER.json ...]`: the CLI's table of a saved run,
    with the greedy speed-ups of its sampled labels taken from other runs where it has none."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.report", description=main.__doc__)
    p.add_argument("run", help="a bench results JSON (--out of python -m specdec_lab.bench)")
    p.add_argument("--greedy-from", nargs="*", default=[], metavar="RUN",
                   help="runs of the same machine kind to read greedy speed-ups from (first match wins)")  # fmt: skip
    args = p.parse_args(argv)
    runs = []
    for path in [args.run, *args.greedy_from]:
        try:
            with open(path) as f:
                runs.append(json.load(f))
        except (OSError, ValueError) as e:
            p.error(f"cannot read bench results {path!r}: {e}")
    mine, others = runs[0], runs[1:]
    isa = mine.get("machine", {}).get("isa")
    for path, run in zip(args.greedy_from, others, strict=True):
        if run.get("machine", {}).get("isa") != isa:
            p.error(f"{path} ran on {run.get('machine', {}).get('isa')}, {args.run} on {isa}: "
                    "ratios of different machine kinds do not compare")  # fmt: skip
    print(format_table(mine, greedy_runs=others))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
