"""The text a stored notebook keeps as `text/plain` for what it shows as a table, markdown or HTML.

IPython shows a `Styler` as HTML and, for text/plain, as its default repr, `<pandas.io.formats.style.Styler
at 0x7f…>`: a memory address, which is all a reader of the stored notebook sees in a text view (GitHub's
diff, nbval, a terminal). `styler_text` renders the same cells as text instead — the Styler's own formatting
(precision, `format`, `hide`), columns aligned, the caption above. `display(Markdown(...))` and
`display(HTML(...))` store `<IPython.core.display.Markdown object>` the same way; their text is the markdown
source and the HTML's visible text (`html_text`). `course.start` registers all three as IPython's text/plain
formatters (`register_readable_text`), so the text is what the kernel itself emits: a re-run (nbval) yields
the same text/plain as the stored file, and `lab.stored.readable_text_plain` has only older files to mend.
"""

from __future__ import annotations

import html
import re

__all__ = ["styler_text", "html_text", "register_readable_text"]

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


def html_text(markup: str) -> str:
    """The text a reader sees in an HTML snippet: tags dropped, entities decoded, blank runs collapsed."""
    markup = re.sub(r"(?is)<(style|script)\b.*?</\1>", "", markup)
    markup = re.sub(r"(?i)<br\s*/?>|</(?:p|div|tr|li|h\d)>", "\n", markup)
    text = html.unescape(re.sub(r"<[^>]+>", "", markup))
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def register_readable_text() -> bool:
    """Make IPython's text/plain of every pandas Styler its cells (`styler_text`), of every `Markdown` its
    source and of every `HTML` its visible text (`html_text`), where an IPython kernel runs; return whether
    they were registered. (`for_type` is IPython's own API for a type's formatter: nothing is patched.)"""
    try:
        from IPython import get_ipython
        from IPython.display import HTML, Markdown
        from pandas.io.formats.style import Styler
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    formatter = shell.display_formatter.formatters["text/plain"]
    formatter.for_type(Styler, lambda obj, printer, cycle: printer.text(styler_text(obj)))
    formatter.for_type(Markdown, lambda obj, printer, cycle: printer.text(obj.data or ""))
    formatter.for_type(HTML, lambda obj, printer, cycle: printer.text(html_text(obj.data or "")))
    return True
