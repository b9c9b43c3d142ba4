"""Teaching mode: a notebook presented as reveal.js slides, with nothing typed into the notebook for it.

nbconvert's slides exporter cuts a notebook where a cell's `metadata.slideshow.slide_type` says so; the
workbook's notebooks carry no slide types. Two nbconvert preprocessors fill the gap on nbconvert's own
in-memory copy (the committed notebook is never edited):

* `HeadingSlides`: every Markdown heading starts a slide (`#`, `##`) or a subslide (`###` and deeper).
  A Markdown cell whose heading comes after some prose is split at the heading first, so the prose stays
  on the slide it ends and the heading opens the next one. Headings inside fenced code are not headings.
  A cell that already has a slide type keeps it.
* `PlotlyForSlides`: the stored plotly figures are `application/vnd.plotly.v1+json` outputs, which only
  JupyterLab renders; for the slides each gets an HTML rendering that loads plotly.js through require.js
  (which the reveal template already loads) from a `plotly.min.js` written next to the slides.

`make slides NB=notebooks/00_getting_started.ipynb` runs, in effect,

    jupyter nbconvert --to slides NB --output-dir results/slides \\
        --SlidesExporter.preprocessors="['specdec_lab.lab.teaching.HeadingSlides',
                                         'specdec_lab.lab.teaching.PlotlyForSlides']" \\
        --SlidesExporter.reveal_url_prefix=reveal.js --SlidesExporter.require_js_url=require.js

with reveal.js and require.js fetched once from the npm registry into results/slides/ (no CDN needed).
"""

from __future__ import annotations

import json
import re

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode, from_dict
from traitlets import Bool, Int

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+\S")  # an ATX heading line: up to 3 spaces, 1-6 '#', a space
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # opens or closes a fenced code block


def heading_level(line: str) -> int:
    """1-6 for an ATX Markdown heading line ("## Title" → 2), 0 for any other line."""
    m = _HEADING.match(line)
    return len(m.group(1)) if m else 0


def split_at_headings(source: str) -> list[tuple[int, str]]:
    """Split Markdown at every heading outside fenced code: [(level of the heading that opens it, text)].

    The first chunk has level 0 when the text does not begin with a heading. Blank chunks are dropped.
    """
    chunks: list[tuple[int, list[str]]] = [(0, [])]
    fence = None  # the fence string that opened the current code block
    for line in source.splitlines(keepends=True):
        m = _FENCE.match(line)
        if m:
            marker = m.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
        level = heading_level(line) if fence is None and not m else 0
        if level:
            chunks.append((level, [line]))
        else:
            chunks[-1][1].append(line)
    return [(level, "".join(lines).strip("\n")) for level, lines in chunks if "".join(lines).strip()]


class HeadingSlides(Preprocessor):
    """Slide types from Markdown headings: `#`/`##` start a slide, deeper headings a subslide."""

    slide_level = Int(2, help="headings of this level or higher (fewer '#') start a slide; deeper ones a subslide").tag(
        config=True
    )
    overwrite = Bool(False, help="replace slide types already set in the notebook").tag(config=True)

    def slide_type(self, level: int) -> str:
        if level == 0:
            return "-"  # continues the current (sub)slide
        return "slide" if level <= self.slide_level else "subslide"

    def preprocess(self, nb: NotebookNode, resources: dict):
        cells = []
        for cell in nb.cells:
            explicit = cell.metadata.get("slideshow", {}).get("slide_type")
            if cell.cell_type != "markdown" or (explicit and not self.overwrite):
                cells.append(cell)
                continue
            chunks = split_at_headings(cell.source) or [(0, cell.source)]
            for i, (level, text) in enumerate(chunks):
                part = from_dict(
                    {"cell_type": "markdown", "metadata": json.loads(json.dumps(cell.metadata)), "source": text}
                )
                if "attachments" in cell:
                    part.attachments = cell.attachments
                if "id" in cell:  # nbformat ≥ 4.5: ids stay unique (and ≤ 64 characters)
                    part.id = cell.id if i == 0 else f"{cell.id[:58]}-s{i}"
                part.metadata["slideshow"] = {"slide_type": self.slide_type(level)}
                cells.append(part)
        nb.cells = cells
        return nb, resources


def plotly_slide_html(figure: dict, div_id: str, height: int = 480) -> str:
    """HTML for one plotly figure in the slides: plotly.js comes through require.js from ./plotly.min.js."""
    layout = {k: v for k, v in figure.get("layout", {}).items() if k != "width"}  # fill the slide's width
    figure = {**figure, "layout": layout}
    payload = json.dumps(figure).replace("</", "<\\/")  # a "</script>" inside a label must not end the tag
    layout_height = layout.get("height") or height
    return (
        f'<div id="{div_id}" class="plotly-graph-div" style="height:{layout_height}px; width:100%;"></div>\n'
        "<script>\n"
        # plotly.js 4 is not an AMD module (it sets window.Plotly): the shim hands that global to require.
        'require.config({paths: {plotly: "plotly.min"}, shim: {plotly: {exports: "Plotly"}}});\n'
        'require(["plotly"], function (Plotly) {\n'
        f"  var fig = {payload};\n"
        f'  Plotly.newPlot("{div_id}", fig.data, fig.layout || {{}}, {{responsive: true, displaylogo: false}});\n'
        "});\n"
        "</script>"
    )


class PlotlyForSlides(Preprocessor):
    """Give stored plotly figures an HTML rendering for the slides, and write plotly.min.js beside them."""

    write_plotlyjs = Bool(True, help="add plotly.min.js to the files nbconvert writes next to the slides").tag(
        config=True
    )

    def preprocess(self, nb: NotebookNode, resources: dict):
        count = 0
        for cell in nb.cells:
            for out in cell.get("outputs", []):
                data = out.get("data", {})
                if PLOTLY_MIME in data and "text/html" not in data:
                    data["text/html"] = plotly_slide_html(data[PLOTLY_MIME], div_id=f"specdec-slide-plot-{count}")
                    count += 1
        if count and self.write_plotlyjs:
            from plotly.offline import get_plotlyjs

            resources.setdefault("outputs", {})["plotly.min.js"] = get_plotlyjs().encode()
        return nb, resources
