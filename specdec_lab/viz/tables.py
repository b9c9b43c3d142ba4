"""A styled table's text: what a stored notebook keeps as the `text/plain` of a pandas `Styler`.

IPython shows a `Styler` as HTML and, for text/plain, as its default repr, `<pandas.io.formats.style.Styler
at 0x7f…>`: a memory address, which is all a reader of the stored notebook sees in a text view (GitHub's
diff, nbval, a terminal). `styler_text` renders the same cells as text instead — the Styler's own formatting
(precision, `format`, `hide`), columns aligned, the caption above — and `course.start` registers it as
IPython's text/plain formatter for every Styler a notebook displays.
"""

from __future__ import annotations

__all__ = ["styler_text", "register_styler_text"]

_SEP = "\x1f"  # a delimiter no formatted cell contains


def styler_text(styler) -> str:
    """The Styler's formatted cells as aligned text (numbers right-aligned), the caption on the first line."""
    rows = [line.split(_SEP) for line in styler.to_string(delimiter=_SEP).splitlines() if line.strip(_SEP + " ")]
    width = max((len(r) for r in rows), default=0)
    rows = [r + [""] * (width - len(r)) for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(width)]
    body = "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)
    caption = styler.caption
    if isinstance(caption, tuple | list):  # (long, short) captions: the long one
        caption = caption[0]
    return f"{caption}\n{body}" if caption else body


def register_styler_text() -> bool:
    """Make `styler_text` IPython's text/plain for every pandas Styler (where an IPython kernel runs); return
    whether it was registered."""
    try:
        from IPython import get_ipython
        from pandas.io.formats.style import Styler
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    formatter = shell.display_formatter.formatters["text/plain"]
    formatter.for_type(Styler, lambda obj, printer, cycle: printer.text(styler_text(obj)))
    return True
