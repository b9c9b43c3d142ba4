"""Stored notebooks without dead widget views or object reprs: `python -m specdec_lab.lab.stored notebooks/*.ipynb`;
with `--run-times notebooks/run_times.json` (`make store`), each notebook's "Runs in" line rendered from that file.

A dashboard cell's output holds a widget view (`application/vnd.jupyter.widget-view+json`, a pointer to a
widget model) beside its text/plain placeholder (`widgets.show_widget`). The model lives in the kernel and in
`metadata.widgets`, which is stripped before committing (it embeds plotly.js, ~5 MB). Left in the file, the
view makes a *trusted* notebook show "Error displaying widget: model not found"; without it JupyterLab shows
the placeholder, and running the cell brings the live dashboard back. `make strip-notebooks` runs this.

The "Runs in" line. `course.start` prints how long the notebook ran in the last `make reproduce`, from
notebooks/run_times.json: but a notebook run *by* `make reproduce` reads the file before that run rewrites it,
so its own output quotes the run before. `make store` therefore renders the line again in every stored
notebook from the run_times.json of the very run it stores (`render_runs_in`): the stored line is true of the
stored run.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from ..io import atomic_path
from ..viz.tables import html_text

__all__ = [
    "WIDGET_VIEW",
    "OBJECT_REPR",
    "drop_widget_views",
    "merge_streams",
    "readable_text_plain",
    "render_runs_in",
    "runs_in_lines",
    "main",
]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RUNS_IN = "Runs in"  # how `course.runs_in` starts its line
# a default repr where a reader expects text: `<IPython.core.display.Markdown object>`, `<… at 0x7f…>`
OBJECT_REPR = re.compile(r"^<[\w.]+ (?:object|at 0x[0-9a-fA-F]+)>$")


def drop_widget_views(nb: dict) -> int:
    """Remove every widget view from the code cells' outputs (in place); return how many were removed.

    An output left with no other representation gets a text/plain note, so no output is ever empty.
    """
    removed = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data")
            if isinstance(data, dict) and WIDGET_VIEW in data:
                del data[WIDGET_VIEW]
                removed += 1
                if not data:
                    data["text/plain"] = "[interactive widget: it appears when the notebook runs]"
    return removed


def _joined(value) -> str:
    """A stored text field as one string: nbformat stores it as a string or as a list of lines."""
    return "".join(value) if isinstance(value, list) else value


def merge_streams(nb: dict) -> int:
    """Join consecutive stream outputs of one cell to the same stream (stdout after stdout) into one, as
    JupyterLab does when it opens a notebook: stored that way, the notebook on screen is the file, and opening
    it changes nothing. Returns how many outputs were merged away."""
    merged = 0
    for cell in nb.get("cells", []):
        outs = cell.get("outputs")
        if not outs:
            continue
        kept: list[dict] = []
        for o in outs:
            prev = kept[-1] if kept else None
            if (
                prev
                and o.get("output_type") == "stream" == prev.get("output_type")
                and o.get("name") == prev.get("name")
            ):
                prev["text"] = (_joined(prev["text"]) + _joined(o["text"])).splitlines(keepends=True)
                merged += 1
            else:
                kept.append(o)
        cell["outputs"] = kept
    return merged


def readable_text_plain(nb: dict) -> int:
    """Give every display output whose text/plain is a default object repr (`<IPython.core.display.Markdown
    object>`, what `display(Markdown(...))` stores) the text it shows instead: the markdown source, or the HTML's
    text. In place; return how many outputs changed. (text/plain is what a reader sees outside JupyterLab: a
    diff, `nbval`, a terminal, a text-only viewer.)"""
    changed = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            data = out.get("data")
            if not isinstance(data, dict) or "text/plain" not in data:
                continue
            if not OBJECT_REPR.match(_joined(data["text/plain"]).strip()):
                continue
            text = None
            if "text/markdown" in data:
                text = _joined(data["text/markdown"])
            elif "text/html" in data:
                text = html_text(_joined(data["text/html"]))
            if text and text.strip():
                data["text/plain"] = text.splitlines(keepends=True)  # as nbformat stores it: a list of lines
                changed += 1
    return changed


def runs_in_lines(nb: dict) -> list[tuple[int, str]]:
    """(cell index, line) of every stored stream line that `course.runs_in` printed ("Runs in ...")."""
    found = []
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") == "stream":
                text = _joined(out.get("text", ""))
                found += [(i, line) for line in text.splitlines() if line.startswith(RUNS_IN)]
    return found


def render_runs_in(nb: dict, stem: str, record: str | Path) -> int:
    """Render every stored "Runs in" line of notebook `stem` again from `record` (run_times.json), in place;
    return how many lines changed."""
    from .course import runs_in

    line = runs_in(stem, record)
    changed = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if out.get("output_type") != "stream":
                continue
            lines = _joined(out.get("text", "")).split("\n")
            new = [line if old.startswith(RUNS_IN) else old for old in lines]
            if new != lines:
                changed += sum(a != b for a, b in zip(new, lines, strict=True))
                out["text"] = "\n".join(new).splitlines(keepends=True)  # as nbformat stores it: a list of lines
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specdec_lab.lab.stored", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--run-times", type=Path, default=None, metavar="JSON",
                        help="render each notebook's 'Runs in' line from this run_times.json (make store)")  # fmt: skip
    args = parser.parse_args(argv)
    for path in args.notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        removed = drop_widget_views(nb)
        readable = readable_text_plain(nb) + merge_streams(nb)
        rendered = render_runs_in(nb, path.stem, args.run_times) if args.run_times is not None else 0
        if removed or readable or rendered:
            with atomic_path(path) as tmp:
                text = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"  # as nbformat writes
                Path(tmp).write_text(text, encoding="utf-8")
        if removed:
            print(f"{path}: {removed} widget view(s) dropped")
        if readable:
            print(f"{path}: {readable} object repr(s) given their text as text/plain, or stream outputs joined")
        if rendered:
            print(f"{path}: 'Runs in' line rendered from {args.run_times}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
