"""Gathering a sweep: one table of every point (CSV + JSON), the best point, and the headline figure.

    table.csv / table.json   one row per point of the spec: id, status (done / failed / pending), the grid
                             values, the other notebook parameters, the result's scalar keys, seconds (the
                             executed notebook's papermill duration), error (failed points)
    table.json also holds    name, notebook, metric, axes, counts, and `best`: the done point with the
                             highest metric, with its whole result
    <name>.html / .png       the metric against the grid axes: x = the first axis with more than one value,
                             a line per value of the second, facets for the third (columns) and fourth (rows);
                             HTML sharing one plotly.min.js in the out folder, PNG through kaleido (a warning,
                             not a failure, where no Chromium is found)

The table covers the spec's points only: other points in the same out folder (another grid, the quick
section) are left alone but not listed. Result keys that repeat a parameter (the notebook echoes `method`,
`temperature`) keep the parameter's column; nested values (the `machine` record) stay out of the flat rows
and are kept in table.json's `best.result`.
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path

from ..io import atomic_path, write_json
from .point import ERROR, FIGURES_ENV, NOTEBOOK, RESULT, env, first_line, point_dir, point_state
from .spec import Point, SweepSpec

__all__ = ["gather", "sweep_figure", "format_best", "short_labels"]


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _scalar(v) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _duration(folder: Path) -> float | None:
    """Seconds papermill recorded in the executed notebook (None when there is no notebook)."""
    meta = _read(folder / NOTEBOOK).get("metadata", {}).get("papermill", {})
    d = meta.get("duration")
    return round(d, 2) if _number(d) else None


def _rows(spec: SweepSpec, points: list[Point], out: Path) -> tuple[list[dict], dict[str, dict]]:
    rows, results = [], {}
    for p in points:
        folder = point_dir(out, p)
        status = point_state(folder)
        row = {"id": p.id, "status": status, **p.values}
        row.update({k: v for k, v in p.parameters.items() if k not in row})
        if status == "done":
            results[p.id] = result = _read(folder / RESULT)
            row.update({k: v for k, v in result.items() if k not in row and _scalar(v)})
        row["seconds"] = _duration(folder)
        if status == "failed":
            e = _read(folder / ERROR)
            row["error"] = f"{e.get('error')}: {first_line(e.get('message'))}"
        rows.append(row)
    return rows, results


def _columns(rows: list[dict]) -> list[str]:
    cols: list[str] = []
    for row in rows:
        cols += [k for k in row if k not in cols]
    tail = [c for c in ("seconds", "error") if c in cols]
    return [c for c in cols if c not in tail] + tail


def _csv_value(v) -> str:
    if isinstance(v, (list, dict)):
        return json.dumps(v)
    return "" if v is None else str(v)


def best_point(spec: SweepSpec, rows: list[dict], results: dict) -> dict | None:
    done = [r for r in rows if r["status"] == "done" and _number(r.get(spec.metric))]
    if not done:
        return None
    top = max(done, key=lambda r: r[spec.metric])
    return {
        "id": top["id"],
        "metric": spec.metric,
        "value": top[spec.metric],
        "values": {a: top[a] for a in spec.grid},
        "result": results.get(top["id"], {}),
    }


def format_best(best: dict | None, metric: str) -> str:
    if best is None:
        return f"best: no finished point has a numeric {metric!r}"
    at = ", ".join(f"{a}={v}" for a, v in best["values"].items())
    value = best["value"]
    return f"best {metric} = {value:.3g} at {at} ({best['id']})"


def short_labels(values: list) -> tuple[list[str], str]:
    """Category labels without the prefix they all share up to a ':' or '=' ("draft:draft_length=1" -> "1").

    -> (labels, the removed prefix + '…', or '' when nothing was removed).
    """
    texts = [json.dumps(v) if isinstance(v, list) else str(v) for v in values]
    if len(texts) < 2:
        return texts, ""
    prefix = os.path.commonprefix(texts)
    cut = max(prefix.rfind(":"), prefix.rfind("="))
    if cut < 0:
        return texts, ""
    return [t[cut + 1 :] or t for t in texts], prefix[: cut + 1] + "…"


def sweep_figure(spec: SweepSpec, rows: list[dict]):
    """The metric against the varying grid axes (module doc); None when no point has a numeric metric."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..viz.figures import TEMPLATE

    metric = spec.metric
    data = [r for r in rows if r["status"] == "done" and _number(r.get(metric))]
    if not data:
        return None
    axes = spec.varying or [next(iter(spec.grid))]
    x_axis, color_axes = axes[0], axes[1:2] + axes[4:]  # axes past the 4th join the line label
    col_axis = axes[2] if len(axes) > 2 else None
    row_axis = axes[3] if len(axes) > 3 else None
    xs = spec.grid[x_axis]
    numeric_x = all(_number(v) for v in xs)
    labels, prefix = short_labels(xs)
    label_of = {json.dumps(v): lab for v, lab in zip(xs, labels, strict=True)}
    cols = spec.grid[col_axis] if col_axis else [None]
    frows = spec.grid[row_axis] if row_axis else [None]

    def key(v) -> str:
        return json.dumps(v)

    fig = make_subplots(
        rows=len(frows),
        cols=len(cols),
        shared_yaxes=True,
        shared_xaxes=True,
        column_titles=[f"{col_axis}={c}" for c in cols] if col_axis else None,
        row_titles=[f"{row_axis}={r}" for r in frows] if row_axis else None,
        horizontal_spacing=0.04,
        vertical_spacing=0.08,
    )
    colors = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"
    ]  # fmt: skip
    line_keys: list[str] = []
    for i, rv in enumerate(frows, 1):
        for j, cv in enumerate(cols, 1):
            in_col = [r for r in data if col_axis is None or key(r[col_axis]) == key(cv)]
            cell = [r for r in in_col if row_axis is None or key(r[row_axis]) == key(rv)]
            lines: dict[str, list[dict]] = {}
            for r in cell:
                name = ", ".join(f"{a}={r[a]}" for a in color_axes) or metric
                lines.setdefault(name, []).append(r)
            for name, pts in lines.items():
                if name not in line_keys:
                    line_keys.append(name)
                pts.sort(key=lambda r: [key(v) for v in xs].index(key(r[x_axis])))
                fig.add_trace(
                    go.Scatter(
                        x=[r[x_axis] if numeric_x else label_of[key(r[x_axis])] for r in pts],
                        y=[r[metric] for r in pts],
                        mode="lines+markers",
                        name=name,
                        legendgroup=name,
                        line={"color": colors[line_keys.index(name) % len(colors)]},
                        customdata=[[r["id"]] for r in pts],
                        hovertemplate=f"{x_axis}=%{{x}}<br>{metric}=%{{y:.3f}}<br>%{{customdata[0]}}<extra>{name}</extra>",
                    ),
                    row=i,
                    col=j,
                )
    seen = set()
    for t in fig.data:  # one legend entry per line, however many facets it appears in
        t.showlegend = t.name not in seen
        seen.add(t.name)
    if not numeric_x:
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=labels)
    fig.update_xaxes(title_text=f"{x_axis} ({prefix})" if prefix else x_axis, row=len(frows))
    fig.update_yaxes(title_text=metric, col=1)
    if "speedup" in metric:
        fig.add_hline(y=1.0, line_dash="dot", line_color="gray", annotation_text="autoregressive")
    n = len(rows)
    fig.update_layout(
        title=f"{spec.name}: {metric} ({len(data)} of {n} points)",
        template=TEMPLATE,
        width=max(700, 380 * len(cols)),
        height=max(450, 330 * len(frows)),
        legend_title_text=", ".join(color_axes) or None,
        showlegend=bool(color_axes),  # one line: its name would only repeat the metric
    )
    return fig


def gather(spec: SweepSpec, points: list[Point], out: Path, *, quick: bool = False, figure: bool = True) -> dict:
    """Write table.csv, table.json and the figure into `out`; return the table (as table.json holds it)."""
    out = Path(out)
    rows, results = _rows(spec, points, out)
    columns = _columns(rows)
    counts = {s: sum(r["status"] == s for r in rows) for s in ("done", "failed", "pending")}
    try:
        notebook = str(spec.notebook.relative_to(Path.cwd()))
    except ValueError:
        notebook = str(spec.notebook)
    table = {
        "name": spec.name,
        "description": spec.description,
        "notebook": notebook,
        "quick": quick,
        "metric": spec.metric,
        "axes": spec.axes,
        "counts": counts,
        "best": best_point(spec, rows, results),
        "columns": columns,
        "rows": [{c: r.get(c) for c in columns} for r in rows],
    }
    with atomic_path(out / "table.csv") as tmp, open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerows([_csv_value(r.get(c)) for c in columns] for r in rows)
    if figure:
        fig = sweep_figure(spec, rows)
        if fig is not None:
            from ..viz.figures import save_figure

            with env(**{FIGURES_ENV: None}):  # the sweep's figure belongs in its out folder
                saved = save_figure(fig, f"{spec.name}_{spec.metric}", out)
            table["figure"] = {"html": saved.html.name, "png": saved.png.name if saved.png else None}
    write_json(out / "table.json", table)
    return table
