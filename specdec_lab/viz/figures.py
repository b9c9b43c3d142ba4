"""Saving figures for the repo's `figures/` folder: stable HTML always, a static PNG when possible.

HTML uses `include_plotlyjs="directory"` (one shared `plotly.min.js` next to the files, ~7 KB per figure,
works offline) and a fixed `div_id` derived from the name, so re-running a notebook rewrites identical
bytes when the data did not change. PNG export goes through kaleido, which needs a Chromium (Debian's
`/usr/bin/chromium`, installed by `make setup` when run as root); without one we warn and keep the HTML.
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["TEMPLATE", "legend_below", "save_figure", "SavedFigure"]

TEMPLATE = "plotly_white"  # the one plotly template of every figure (the viz functions; notebooks set it as default)


def _readable_log_ticks() -> None:
    """Log axes of every figure label their minor ticks with the whole value ("200", "5k"), not plotly's bare
    digits ("2", "5", which stand for 20 and 50 after "10"): set on the one template, so every figure has it."""
    import plotly.io as pio

    layout = pio.templates[TEMPLATE].layout
    for axis in (layout.xaxis, layout.yaxis):
        axis.minorloglabels = "complete"


_readable_log_ticks()


def legend_below(**extra) -> dict:
    """A horizontal legend under the whole figure (measured from the figure's bottom edge, not the plot area's):
    plotly makes room for it below the x-axis title, so no axis title runs through it, whatever the height."""
    return {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left", **extra}


@dataclass
class SavedFigure:
    html: Path
    png: Path | None  # None when the static export was skipped or failed

    def __str__(self) -> str:
        return f"{self.html}" + (f" + {self.png.name}" if self.png else " (no PNG)")


def _div_id(stem: str) -> str:
    return "fig-" + re.sub(r"[^A-Za-z0-9_-]+", "-", stem)


@contextmanager
def _quiet_loggers(*prefixes: str):
    """Raise the existing loggers under the named prefixes to CRITICAL for the block, then restore them.

    kaleido's browser driver (choreographer) logs a full traceback to stderr for a message it then ignores; in a
    notebook that lands in the stored output as an error-looking block although the PNG was written. Only
    loggers the libraries already made are touched: creating one here would hand them a plain `logging.Logger`
    where they expect their own class (logistro's, with extra levels). A failed export still raises."""
    manager = logging.Logger.manager
    loggers = [lg for name, lg in list(manager.loggerDict.items())
               if isinstance(lg, logging.Logger) and name.split(".")[0] in prefixes]  # fmt: skip
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _write_png(fig, path: Path, width: int | None, height: int | None, scale: float) -> None:
    """Static export through kaleido (a separate function so tests can make it fail)."""
    try:  # import the exporter first, so that its loggers exist (and are its own class) before they are quieted
        import choreographer  # noqa: F401
        import kaleido  # noqa: F401
    except ImportError:
        pass  # write_image raises its own clear error below
    with _quiet_loggers("choreographer", "kaleido", "logistro"):
        fig.write_image(path, format="png", width=width, height=height, scale=scale)


def save_figure(
    fig,
    name: str,
    folder: str | Path = "figures",
    *,
    png: bool = True,
    width: int | None = None,
    height: int | None = None,
    scale: float = 2.0,
) -> SavedFigure:
    """Write `folder/name.html` (and `folder/name.png` unless png=False or kaleido fails); return the paths.

    name:   file stem ("00_cost_curve"; a trailing .html/.png is dropped)
    folder: created if missing; notebooks run from notebooks/ and pass "../figures". The environment
            variable SPECDEC_LAB_FIGURES overrides it: CI's nbval run re-executes notebooks with default
            parameters and must not rewrite the committed figures with its own (noisy) timings.
    width, height: PNG size in px (default: the figure's layout size, else kaleido's 700x500); scale 2 = crisp
    """
    stem = Path(name).name
    for suffix in (".html", ".png"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    out = Path(os.environ.get("SPECDEC_LAB_FIGURES") or folder)
    out.mkdir(parents=True, exist_ok=True)
    html = out / f"{stem}.html"
    fig.write_html(html, include_plotlyjs="directory", div_id=_div_id(stem), full_html=True)
    png_path: Path | None = None
    if png:
        png_path = out / f"{stem}.png"
        try:
            _write_png(fig, png_path, width, height, scale)
        except Exception as err:  # kaleido/Chromium missing or broken: the HTML is what matters
            warnings.warn(
                f"static PNG export of {stem!r} failed ({type(err).__name__}: {err}); kept {html}. "
                "kaleido needs a Chromium: apt-get install -y chromium",
                RuntimeWarning,
                stacklevel=2,
            )
            png_path.unlink(missing_ok=True)
            png_path = None
    return SavedFigure(html=html, png=png_path)
