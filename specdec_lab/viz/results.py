"""Tables and figures of bench results (notebook 09): speedup per method and category, replay projections.

Data in (a bench results dict, `replay.replay_bench` tables), pandas frames and plotly figures out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from ..bench.report import categories
from .figures import TEMPLATE, legend_below

__all__ = [
    "machine_label",
    "speedup_frame",
    "stat_frame",
    "category_figure",
    "replay_figure",
    "ranking_frame",
    "ranking_figure",
    "whatif_frame",
    "waterfall_frame",
    "waterfall_figure",
    "measured_rows",
    "ranking_text",
    "gap_interval",
]

ANCHOR_PREFIX = "hf_"


def ranking_text(values: Mapping[str, float], spread: Mapping[str, float] | float = 0.0) -> str:
    """Names ordered by value, highest first: 'a > b ≈ c > d', where ≈ joins neighbours whose values are within
    the noise — |x − y| ≤ s · min(|x|, |y|), s the larger of the two names' relative spreads (a float: one for all):
    the course's one reading of "within", `lab.course.within_tol` (the larger at most (1 + s)× the smaller; not
    `math.isclose`'s max, which lets in more), written out here because `viz` never imports `lab`.
    A tie within a run's own spread is written as a tie, never as an order."""
    order = sorted(values, key=lambda m: -values[m])
    if not order:
        return ""
    s = spread if isinstance(spread, Mapping) else dict.fromkeys(order, float(spread))
    out = order[0]
    for prev, m in zip(order, order[1:], strict=False):
        tol = max(s.get(prev, 0.0), s.get(m, 0.0))
        out += (" ≈ " if abs(values[prev] - values[m]) <= tol * min(abs(values[prev]), abs(values[m])) else " > ") + m
    return out


def gap_interval(
    rows: Sequence[dict],
    baseline_rows: Sequence[dict],
    predict,
    resamples: int = 500,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """(low, high): the paired-bootstrap interval of predict(rows) / measured speedup − 1 over the prompts.

    Each resample draws prompts with replacement (a prompt's method row and baseline row together) and recomputes
    both sides on it: `predict(resampled method rows)` and the measured ratio-of-sums speedup. Why: a prediction
    fitted to the same rows moves with them, so the measured speedup's own interval overstates how uncertain the
    gap is; this is the gap's own spread, from what a results file has (one row per prompt) even where it records
    no interval. None with fewer than 2 paired prompts."""
    import random

    base = {r["question_id"]: r for r in baseline_rows}
    pairs = [(r, base[r["question_id"]]) for r in rows if r["question_id"] in base]
    if len(pairs) < 2:
        return None

    def rate(rs):
        return sum(r["new_tokens"] for r in rs) / sum(r["seconds"] for r in rs)

    rng, gaps = random.Random(seed), []
    for _ in range(resamples):
        sample = rng.choices(pairs, k=len(pairs))
        mine = [m for m, _ in sample]
        predicted = predict(mine)
        if predicted is not None:
            gaps.append(predicted / (rate(mine) / rate([b for _, b in sample])) - 1.0)
    if not gaps:
        return None
    gaps.sort()
    tail = (1.0 - level) / 2.0
    return gaps[int(tail * (len(gaps) - 1))], gaps[int(round((1.0 - tail) * (len(gaps) - 1)))]


def machine_label(machine: Mapping) -> str:
    """'AMD EPYC (AVX2, 2 threads)': the machine a results file names (its `machine` record). Every figure and
    table drawn from a file carries it, since the notebook's own 'Ran on:' line may name another machine."""
    cpu = machine.get("cpu") or machine.get("device_name") or "unknown CPU"
    threads = machine.get("torch_threads")
    details = [d for d in (machine.get("isa"), f"{threads} threads" if threads else None) if d]
    return f"{cpu} ({', '.join(details)})" if details else str(cpu)


def stat_frame(results: dict, key: str, methods: Sequence[str] | None = None) -> pd.DataFrame:
    """rows = methods, columns = each category then "overall": the summary's `key` (e.g. "speedup")."""
    summary = results["summary"]
    cats = categories(results["rows"])
    methods = [m for m in (methods or list(summary)) if m in summary]
    data = {m: [summary[m]["by_category"].get(c, {}).get(key) for c in cats] + [summary[m][key]] for m in methods}
    return pd.DataFrame.from_dict(data, orient="index", columns=[*cats, "overall"], dtype=float)


def speedup_frame(results: dict, methods: Sequence[str] | None = None) -> pd.DataFrame:
    """Speedup over autoregressive (ratio of Σ tokens / Σ seconds) per method and category."""
    return stat_frame(results, "speedup", methods)


def category_figure(frames: Mapping[str, pd.DataFrame], title: str) -> go.Figure:
    """One bar group per category, one bar per method, from several speedup frames ({source: frame}); anchors
    (transformers' generate, hf_*) hatched. A dotted line at 1 = autoregressive."""
    fig = go.Figure()
    for source, frame in frames.items():
        for method, row in frame.iterrows():
            if method == "autoregressive":
                continue
            anchor = str(method).startswith(ANCHOR_PREFIX)
            fig.add_bar(
                name=f"{method} ({source})" if len(frames) > 1 else str(method),
                x=list(frame.columns),
                y=row.values,
                marker_pattern_shape="/" if anchor else "",
                hovertemplate=f"{method}<br>%{{x}}: %{{y:.2f}}x<extra>{source}</extra>",
            )
    fig.add_hline(y=1.0, line_dash="dot", annotation_text="autoregressive", annotation_position="top left")
    fig.update_layout(barmode="group", title=title, yaxis_title="speedup over autoregressive", height=520,
                      width=900, legend=dict(orientation="h", y=-0.15, x=0, title_text="method"),
                      margin=dict(r=20), template=TEMPLATE)  # fmt: skip
    return fig


SYMBOLS = ("circle", "square-open", "diamond-open", "x-thin-open", "triangle-up-open", "star-open", "cross-thin-open")


def replay_figure(tables: Mapping[str, Sequence[dict]], band: float = 0.05, title: str | None = None) -> go.Figure:
    """How far each curve's replay lands from the measurement, per method: predicted / measured − 1, one marker
    symbol per curve ({curve name: replay table}), the ±band corridor shaded. Hover: both speedups. `title`:
    the default names no machine; a notebook reading a results file adds the machine the file records."""
    fig = go.Figure()
    methods = list(dict.fromkeys(r["method"] for t in tables.values() for r in t))
    fig.add_hrect(y0=-band, y1=band, fillcolor="rgba(0,128,0,0.12)", line_width=0)
    fig.add_hline(y=0, line=dict(dash="dot", color="gray"))
    for i, (name, table) in enumerate(tables.items()):
        fig.add_scatter(
            x=[r["method"] for r in table],
            y=[r["predicted_speedup"] / r["measured_speedup"] - 1 for r in table],
            customdata=[[r["measured_speedup"], r["predicted_speedup"]] for r in table],
            mode="markers",
            name=name,
            marker=dict(symbol=SYMBOLS[i % len(SYMBOLS)], size=11, line=dict(width=2)),
            hovertemplate=f"{name}<br>%{{x}}: measured %{{customdata[0]:.3f}}x, predicted %{{customdata[1]:.3f}}x"
            "<extra></extra>",
        )
    title = title or f"Replay: predicted / measured speedup − 1, per method and curve (shaded: ±{band:.0%})"
    fig.update_layout(title=title, xaxis=dict(categoryorder="array", categoryarray=methods),
                      yaxis=dict(title="predicted / measured − 1", tickformat="+.0%", zeroline=False),
                      height=480, width=900, legend=dict(orientation="h", y=-0.18, x=0), template=TEMPLATE)  # fmt: skip
    return fig


def ranking_frame(
    measured: Mapping[str, float],
    projected: Mapping[str, Mapping[str, float]],
    baseline: str = "autoregressive",
    label: str = "measured here",
) -> pd.DataFrame:
    """Methods with their measured speedup (column `label`: a notebook reading another machine's file names that
    machine in its caption and calls the column "measured") and rank, and each projection's speedup and rank
    (1 = fastest; the baseline, 1.00 everywhere, keeps its row but is not ranked)."""
    frame = pd.DataFrame({label: pd.Series(measured)})
    for name, speedups in projected.items():
        frame[name] = pd.Series(speedups)
    ranks = frame.drop(index=baseline, errors="ignore").rank(ascending=False, method="min").astype("Int64")
    for col in list(frame.columns):
        frame[f"rank: {col}"] = ranks[col]
    return frame.sort_values(label, ascending=False)


def ranking_figure(frame: pd.DataFrame, title: str) -> go.Figure:
    """Horizontal bars: the measured speedup and each projection's, per method, best (here) on top."""
    fig = go.Figure()
    cols = [c for c in frame.columns if not c.startswith("rank: ")]
    order = list(frame.index)[::-1]
    for col in cols:
        fig.add_bar(name=col, y=order, x=frame.loc[order, col], orientation="h",
                    hovertemplate=f"%{{y}}: %{{x:.2f}}x<extra>{col}</extra>")  # fmt: skip
    fig.add_vline(x=1.0, line_dash="dot")
    fig.update_layout(template=TEMPLATE, barmode="group", title=title, xaxis_title="speedup over autoregressive",
                      height=120 + 28 * len(order) * max(len(cols), 2), width=900,
                      legend=legend_below(traceorder="normal"))  # fmt: skip
    return fig


# ---- what-if: re-priced and re-decided ----------------------------------------------------------------------
def whatif_frame(tables: Mapping[str, Sequence[dict]], label: str = "measured here") -> pd.DataFrame:
    """{curve name: `redecide.redecide_bench` table} -> rows = methods; columns (curve, quantity): the size the
    run used and the one re-chosen, the re-priced speedup and the re-decided one; first the measured speedup
    (under `label`, as in `ranking_frame`)."""
    first = next(iter(tables.values()))
    data = {(label, "speedup"): {r["method"]: r["measured_speedup"] for r in first},
            (label, "what is sized"): {r["method"]: r["size"] for r in first},
            (label, "size used"): {r["method"]: r["recorded_size"] for r in first}}  # fmt: skip
    for name, table in tables.items():
        data[(name, "size chosen")] = {r["method"]: r["chosen_size"] for r in table}
        data[(name, "re-priced")] = {r["method"]: r["repriced_speedup"] for r in table}
        data[(name, "re-decided")] = {r["method"]: r["predicted_speedup"] for r in table}
    frame = pd.DataFrame(data)
    frame.columns = pd.MultiIndex.from_tuples(frame.columns)
    return frame


# ---- why the speedup is what it is: the waterfall ----------------------------------------------------------
STEP_LABELS = ("ideal τ", "verify", "proposer", "loop", "measured")


def waterfall_frame(waterfalls: Sequence) -> pd.DataFrame:
    """One row per method (`decompose.Waterfall`): τ, r = t(n)/t(1), c, o and the baseline's o, the factors, the
    measured speedup (= the product of the factors)."""
    rows = {}
    for w in waterfalls:
        f = w.factors
        rows[w.method] = {"τ (tokens/step)": w.tau, "nodes/forward": w.mean_nodes, "r = t(n)/t(1)": w.r,
                          "c_step (proposer/t(1))": w.c, "o (loop/t(1))": w.o, "o_AR": w.o_baseline,
                          "× verify": f["verify"], "× proposer": f["proposer"], "× loop": f["loop"],
                          "measured": w.measured}  # fmt: skip
    return pd.DataFrame(rows).T


def waterfall_figure(waterfalls: Sequence, title: str | None = None) -> go.Figure:
    """One waterfall per method, side by side: the ideal τ, the three factors as steps down (or up), the
    measured speedup as the total. Bar text: levels on the ends, factors on the steps."""
    x_method, x_step, measure, y, text, hover = [], [], [], [], [], []
    for w in waterfalls:
        lv, f = w.levels, w.factors
        steps = (
            ("absolute", lv["ideal"], f"{lv['ideal']:.2f}", f"τ = {w.tau:.2f} tokens per step"),
            ("relative", lv["verify"] - lv["ideal"], f"×{f['verify']:.2f}",
             f"1/r: a forward of {w.mean_nodes:.1f} tokens costs r = {w.r:.2f} plain forwards"),
            ("relative", lv["proposer"] - lv["verify"], f"×{f['proposer']:.2f}",
             f"r/(r + c_step): the proposer's own time c_step = {w.c:.3f}·t(1) per step"),
            ("relative", lv["measured"] - lv["proposer"], f"×{f['loop']:.2f}",
             "(r + c_step)(1 + o_AR)/(r + c_step + o): "
             f"the loop's own o = {w.o:.3f}·t(1), the baseline's {w.o_baseline:.3f}"),
            ("total", 0.0, f"{lv['measured']:.2f}", "measured speedup"),
        )  # fmt: skip
        for label, (kind, value, label_text, note) in zip(STEP_LABELS, steps, strict=True):
            x_method.append(w.method)
            x_step.append(label)
            measure.append(kind)
            y.append(value)
            text.append(label_text)
            hover.append(f"{w.method} · {label}<br>{note}")
    fig = go.Figure(
        go.Waterfall(
            x=[x_method, x_step], measure=measure, y=y, text=text, textposition="outside", hovertext=hover,
            hoverinfo="text", connector=dict(line=dict(color="#999", width=1)),
            increasing=dict(marker_color="#2ca02c"), decreasing=dict(marker_color="#d62728"),
            totals=dict(marker_color="#1f77b4"),
        )
    )  # fmt: skip
    fig.add_hline(y=1.0, line=dict(dash="dot", color="gray"), annotation_text="autoregressive",
                  annotation_position="bottom right")  # fmt: skip
    top = max(w.levels["ideal"] for w in waterfalls) if waterfalls else 1.0
    fig.update_layout(template=TEMPLATE, title=title or "From the ideal τ to the measured speedup, per method",
                      yaxis=dict(title="speedup over autoregressive", range=[0, top * 1.2]),
                      xaxis=dict(tickangle=-45), showlegend=False, height=500, width=900)  # fmt: skip
    return fig


DRAFTS = {  # what proposes, per method of ours (the `draft` column of the published table)
    "prompt_lookup": "n-grams of the prompt and output",
    "draft": "a distilled small LM (shipped)",
    "layer_skip": "the target's first layers",
    "medusa": "Medusa heads (shipped)",
    "lookahead": "n-gram pool + Jacobi window",
    "jacobi": "Jacobi iteration",
}


def measured_rows(waterfalls: Sequence, *, model: str, hardware: str, task: str, source: str) -> pd.DataFrame:
    """Our measurements as rows of `literature.summary_table`'s columns (paper: "measured here"; α/τ: our τ, the
    mean tokens per step with the bonus counted, the convention of EAGLE's τ), to show beside the published."""
    return pd.DataFrame(
        [{"method": w.method, "paper": "measured here", "model": model, "draft": DRAFTS.get(w.method, ""),
          "hardware": hardware, "task": task, "α/τ": f"τ {w.tau:.2f}", "speedup": w.measured, "source": source}
         for w in waterfalls]
    )  # fmt: skip
