"""Stored notebooks without dead widget views: `python -m specdec_lab.lab.stored notebooks/*.ipynb`.

A dashboard cell's output holds a widget view (`application/vnd.jupyter.widget-view+json`, a pointer to a
widget model) beside its text/plain placeholder (`widgets.show_widget`). The model lives in the kernel and in
`metadata.widgets`, which is stripped before committing (it embeds plotly.js, ~5 MB). Left in the file, the
view makes a *trusted* notebook show "Error displaying widget: model not found"; without it JupyterLab shows
the placeholder, and running the cell brings the live dashboard back. `make strip-notebooks` runs this.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..io import atomic_path

__all__ = ["WIDGET_VIEW", "drop_widget_views", "main"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specdec_lab.lab.stored", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    args = parser.parse_args(argv)
    for path in args.notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        if removed := drop_widget_views(nb):
            with atomic_path(path) as tmp:
                text = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"  # as nbformat writes
                Path(tmp).write_text(text, encoding="utf-8")
            print(f"{path}: {removed} widget view(s) dropped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
