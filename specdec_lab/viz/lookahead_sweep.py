"""Notebook 07: the W x N x G sweep of lookahead decoding, and the same sweep on another cost curve.

Only `run_sweep` runs a model, through the benchmark harness.

    GridPoint, grid, parse_ints         the grid (papermill-friendly "0,2,4" parameters)
    traced_runner                       a bench runner of our loop with a per-step trace (nodes, window cells)
    run_sweep, point_params, point_path one JSON per grid point (atomic, skipped on resume when its
                                        parameters are identical)
    sweep_frame, sweep_figure           the sweep's table and figure
    flat_curve, predicted_speedups,     the same sweep on a measured and a flat cost curve
    cost_figure
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..cost import CostCurve, flat_curve
from ..proposers.lookahead import TEXT, WINDOW

__all__ = [
    "GridPoint",
    "grid",
    "parse_ints",
    "traced_runner",
    "point_params",
    "point_path",
    "run_sweep",
    "sweep_frame",
    "sweep_figure",
    "flat_curve",
    "predicted_speedups",
    "cost_figure",
]


# ---- 1. the sweep -------------------------------------------------------------------------------------
TRACED = "traced"  # the bench anchor that runs our loop with a trace (its info gets per-step node counts)
SWEEP_FORMAT = 1  # bump when a record's content changes: older files then no longer match on resume


def traced_runner(model, eos_ids: list[int], method: str = "lookahead", **params):
    """Bench runner factory: `generate(method, trace=True, **params)`, with per-step `nodes` (tokens in the
    verify forward, root included) and `extra` (window cells) added to the proposer's summary. The trace
    costs microseconds per step (a StepTrace; device syncs are no-ops on a CPU)."""
    from ..bench.runner import RunOutput
    from ..generate import generate
    from ..proposers import make_proposer

    make_proposer(method, **params)  # a bad parameter fails here, before any timing

    def run(ids: list[int], max_new_tokens: int, seed: int) -> RunOutput:
        r = generate(
            model,
            ids,
            method=method,
            max_new_tokens=max_new_tokens,
            eos_token_id=eos_ids or None,
            seed=seed,
            trace=True,
            **params,
        )
        info = {**r.proposer, "nodes": [len(s.tree_tokens) for s in r.steps], "extra": [s.extra for s in r.steps]}
        return RunOutput(tokens=r.tokens, forwards=r.forwards, stop_reason=r.stop_reason, info=info)

    return run


def _register_traced() -> None:
    from ..bench.runner import ANCHORS, register_anchor

    if ANCHORS.get(TRACED) is not traced_runner:
        register_anchor(TRACED, traced_runner)


@dataclass(frozen=True)
class GridPoint:
    W: int
    N: int
    G: int

    @property
    def spec(self) -> str:
        """The benchmark method spec (and row label) of this point."""
        return f"{TRACED}:method=lookahead:W={self.W}:N={self.N}:G={self.G}"


def parse_ints(text: str | Iterable[int]) -> list[int]:
    """ "0,2,4" (a papermill-friendly parameter) or a list -> [0, 2, 4]."""
    if isinstance(text, str):
        return [int(t) for t in text.replace(" ", "").split(",") if t]
    return [int(t) for t in text]


def grid(Ws, Ns, Gs) -> list[GridPoint]:
    """Every (W, N, G), W fastest; W = 0 (no window, pool verification only) once per (N, G)."""
    return [GridPoint(w, n, g) for n in parse_ints(Ns) for g in parse_ints(Gs) for w in parse_ints(Ws)]


def point_params(point: GridPoint, prompts, max_new_tokens: int, model: str, seed: int = 0) -> dict:
    """Everything a point's result depends on; a stored record is reused only when these are identical."""
    ids = [[p.question_id, hashlib.sha256(json.dumps([p.text, p.ids]).encode()).hexdigest()[:12]] for p in prompts]
    return {
        "format": SWEEP_FORMAT,
        "W": point.W,
        "N": point.N,
        "G": point.G,
        "model": model,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "prompts": ids,
    }


def point_path(folder: str | Path, params: Mapping) -> Path:
    """`folder/W{W}_N{N}_G{G}_{hash of all params}.json`: other prompts, lengths or models never collide."""
    digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
    return Path(folder) / f"W{params['W']}_N{params['N']}_G{params['G']}_{digest}.json"


def _load(path: Path, params: Mapping) -> dict | None:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None  # absent or unreadable: run it (again)
    return record if record.get("params") == dict(params) else None


def _record(bench: dict, point: GridPoint, params: dict) -> dict:
    from ..proposers.registry import BASELINE

    label = point.spec
    s, base = bench["summary"][label], bench["summary"][BASELINE]
    rows = [r for r in bench["rows"] if r["method"] == label]
    base_rows = {r["question_id"]: r for r in bench["rows"] if r["method"] == BASELINE}
    nodes = [n for r in rows for n in r["proposer"]["nodes"]]
    extra = [e for r in rows for e in r["proposer"]["extra"]]
    return {
        "params": params,
        "label": label,
        "speedup": s["speedup"],
        "tokens_per_s": s["tokens_per_s"],
        "baseline_tokens_per_s": base["tokens_per_s"],
        "mean_accepted": s["mean_accepted"],
        "identical": s["identical_to_autoregressive"],
        "new_tokens": s["new_tokens"],
        "seconds": s["seconds"],
        "forwards": sum(r["forwards"] for r in rows),
        "nodes_per_step": sum(nodes) / max(len(nodes), 1),
        "window_nodes_per_step": sum(extra) / max(len(extra), 1),
        "accepted_text": sum(r["proposer"][TEXT] for r in rows),
        "accepted_window": sum(r["proposer"][WINDOW] for r in rows),
        "per_prompt": [
            {
                "question_id": r["question_id"],
                "seconds": r["seconds"],
                "baseline_seconds": base_rows[r["question_id"]]["seconds"],
                "new_tokens": r["new_tokens"],
                "forwards": r["forwards"],
                "identical": r["identical"],
                "nodes": r["proposer"]["nodes"],
                "extra": r["proposer"]["extra"],
            }
            for r in rows
        ],
        "machine": {k: bench["machine"].get(k) for k in ("cpu", "isa", "cores", "torch_threads", "device_name")},
    }


def run_sweep(
    lm,
    prompts,
    points: Sequence[GridPoint],
    folder: str | Path,
    max_new_tokens: int = 48,
    seed: int = 0,
    progress: bool = False,
) -> tuple[list[dict], list[GridPoint]]:
    """Measure every grid point not stored yet; return (a record per point in order, the points run now).

    One `run_benchmark` over autoregressive plus the missing points (warm-up per method, method order
    rotated per prompt, every output checked against autoregressive): each point is timed next to the
    autoregressive runs of the same benchmark, and its record (speed-up, mean accepted, verify nodes per
    step, ...) is written atomically to `point_path(folder, params)`. A point whose file holds identical
    params is loaded instead (resume); anything else about it is measured again.
    """
    from ..bench import run_benchmark
    from ..io import as_prompts, write_json
    from ..models import LoadedModel

    prompts = as_prompts(prompts)
    model = lm.name if isinstance(lm, LoadedModel) else type(lm).__name__
    params = {p: point_params(p, prompts, max_new_tokens, model, seed) for p in points}
    records = {p: _load(point_path(folder, params[p]), params[p]) for p in points}
    todo = [p for p in points if records[p] is None]
    if todo:
        _register_traced()
        bench = run_benchmark(
            lm,
            prompts,
            methods=["autoregressive"] + [p.spec for p in todo],
            max_new_tokens=max_new_tokens,
            seed=seed,
            progress=progress,
        )
        for p in todo:
            records[p] = _record(bench, p, params[p])
            write_json(point_path(folder, params[p]), records[p])
    return [records[p] for p in points], todo


def sweep_frame(records: Sequence[Mapping]):
    """The sweep's table, indexed by (W, N, G)."""
    import pandas as pd

    rows = {}
    for r in records:
        p = r["params"]
        rows[(p["W"], p["N"], p["G"])] = {
            "speed-up vs autoregressive": r["speedup"],
            "tokens/s": r["tokens_per_s"],
            "autoregressive tokens/s": r["baseline_tokens_per_s"],
            "mean accepted": r["mean_accepted"],
            "tokens verified / forward": r["nodes_per_step"],
            "window cells / forward": r["window_nodes_per_step"],
            "accepted: text n-grams": r["accepted_text"],
            "accepted: window n-grams": r["accepted_window"],
            "identical to autoregressive": r["identical"],
        }
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index = pd.MultiIndex.from_tuples(frame.index, names=["W", "N", "G"])
    return frame


def _series(frame):
    """[(name, W values, row positions)] per (N, G) of a sweep frame."""
    out = []
    for (n, g), part in frame.groupby(level=["N", "G"], sort=True):
        out.append((f"N = {n}, G = {g}", [str(w) for w in part.index.get_level_values("W")], part))
    return out


def sweep_figure(frame, title: str | None = None) -> go.Figure:
    """Three panels against W, one bar per (N, G): speed-up over autoregressive (measured), mean accepted
    (tokens emitted per forward), tokens verified per forward."""
    panels = (
        ("speed-up vs autoregressive", "speed-up (measured)"),
        ("mean accepted", "mean accepted"),
        ("tokens verified / forward", "tokens verified per forward"),
    )
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels], horizontal_spacing=0.08)
    palette = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
    for k, (name, ws, part) in enumerate(_series(frame)):
        for c, (col, _) in enumerate(panels, start=1):
            fig.add_trace(
                go.Bar(
                    x=ws,
                    y=part[col].tolist(),
                    name=name,
                    legendgroup=name,
                    showlegend=c == 1,
                    marker_color=palette[k % len(palette)],
                    hovertemplate=f"{name}, W=%{{x}}: %{{y:.2f}}<extra>{col}</extra>",
                ),
                row=1,
                col=c,
            )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=1)
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=2)
    fig.update_xaxes(title_text="window width W", type="category")
    fig.update_layout(
        title=title or "Lookahead decoding sweep (greedy; W = 0: pool verification only, no window)",
        template="plotly_white",
        barmode="group",
        width=1050,
        height=420,
        legend={"orientation": "h", "y": -0.25},
    )
    return fig


# ---- 2. the same sweep on another cost curve ----------------------------------------------------------
def predicted_speedups(frame, curves: Mapping[str, CostCurve]):
    """For each curve, predicted speed-up = mean accepted / (t(n̄) / t(1)), n̄ the measured tokens verified
    per forward (the root included); a copy of `frame` with one column per curve."""
    out = frame.copy()
    for name, curve in curves.items():
        rel = [curve(n) / curve(1) for n in frame["tokens verified / forward"]]
        out[f"predicted ({name})"] = frame["mean accepted"] / rel
        out[f"t(n̄)/t(1) ({name})"] = rel
    return out


def cost_figure(frame, curves: Mapping[str, CostCurve], title: str | None = None) -> go.Figure:
    """Left: t(n)/t(1) of each curve, the sweep's points at their tokens per forward. Right: per grid point
    the measured speed-up and the predicted one on each curve (`predicted_speedups`)."""
    pred = predicted_speedups(frame, curves)
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.4, 0.6],
        horizontal_spacing=0.1,
        subplot_titles=("relative cost of a forward t(n)/t(1)", "speed-up: measured vs predicted"),
    )
    palette = ("#d62728", "#1f77b4", "#9467bd", "#8c564b")
    top = max(max(c.sizes) for c in curves.values())
    ns = sorted({1, top, *(n for c in curves.values() for n in c.sizes)})
    labels = [f"W={w} N={n} G={g}" for w, n, g in frame.index]
    fig.add_trace(
        go.Bar(x=labels, y=frame["speed-up vs autoregressive"], name="measured", marker_color="#7f7f7f"), row=1, col=2
    )
    for k, (name, curve) in enumerate(curves.items()):
        color = palette[k % len(palette)]
        fig.add_trace(
            go.Scatter(
                x=ns,
                y=[curve(n) / curve(1) for n in ns],
                mode="lines",
                name=f"t(n)/t(1): {name}",
                line={"color": color},
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=frame["tokens verified / forward"],
                y=pred[f"t(n̄)/t(1) ({name})"],
                mode="markers",
                marker={"color": color, "size": 9},
                text=labels,
                showlegend=False,
                hovertemplate="%{text}: n̄ = %{x:.1f}, ×%{y:.2f}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Bar(x=labels, y=pred[f"predicted ({name})"], name=f"predicted on {name}", marker_color=color),
            row=1,
            col=2,
        )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", row=1, col=2)
    fig.update_xaxes(title_text="tokens in one forward n", row=1, col=1)
    fig.update_yaxes(title_text="× t(1)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="speed-up over autoregressive", rangemode="tozero", row=1, col=2)
    fig.update_layout(
        title=title or "Where a forward of n tokens costs what one costs, the same tokens per step pay",
        template="plotly_white",
        barmode="group",
        width=1100,
        height=440,
        legend={"orientation": "h", "y": -0.3},
    )
    return fig
