"""Teaching mode: slide types from headings, plotly figures in slides, `make reset-notebooks` (no browser)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbconvert import SlidesExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
from traitlets.config import Config

from specdec_lab.lab.teaching import (
    PLOTLY_MIME,
    HeadingSlides,
    PlotlyForSlides,
    heading_level,
    plotly_slide_html,
    split_at_headings,
)

ROOT = Path(__file__).resolve().parents[1]


def _slide_types(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.metadata.get("slideshow", {}).get("slide_type", "")) for c in nb.cells]


def test_heading_level():
    assert [heading_level(s) for s in ("# T", "## 2. A", "### x", "###### deep", "   ## indented")] == [1, 2, 3, 6, 2]
    assert [heading_level(s) for s in ("#no space", "    ## code block", "text # not", "####### seven", "")] == [0] * 5


def test_split_at_headings_keeps_prose_and_skips_fenced_code():
    source = "Some prose.\n\n## 2. Next\nbody\n```python\n# a comment, not a heading\n```\n### 2.1 Sub\nmore\n"
    assert split_at_headings(source) == [
        (0, "Some prose."),
        (2, "## 2. Next\nbody\n```python\n# a comment, not a heading\n```"),
        (3, "### 2.1 Sub\nmore"),
    ]
    assert split_at_headings("# Title\ntext") == [(1, "# Title\ntext")]
    assert split_at_headings("~~~\n# inside\n~~~\n") == [(0, "~~~\n# inside\n~~~")]
    assert split_at_headings("\n\n") == []


def _notebook():
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell("# Title\nintro"),
        new_code_cell("x = 1"),
        new_markdown_cell("prose only"),
        new_markdown_cell("closing words of section 1\n\n## 2. Second\ntext"),
        new_markdown_cell("### 2.1 Detail"),
        new_markdown_cell("## Kept", metadata={"slideshow": {"slide_type": "skip"}}),
    ]
    return nb


def test_heading_slides_assigns_types_and_splits_cells():
    nb = _notebook()
    ids_before = [c.id for c in nb.cells]
    out, _ = HeadingSlides().preprocess(nb, {})
    assert _slide_types(out) == [
        ("markdown", "slide"),
        ("code", ""),  # code cells continue their slide
        ("markdown", "-"),
        ("markdown", "-"),  # the prose before "## 2." stays on slide 1 ...
        ("markdown", "slide"),  # ... and the heading opens slide 2
        ("markdown", "subslide"),
        ("markdown", "skip"),  # an explicit slide type is kept
    ]
    assert [c.source for c in out.cells][3:5] == ["closing words of section 1", "## 2. Second\ntext"]
    ids = [c.id for c in out.cells]
    assert len(set(ids)) == len(ids) and set(ids_before) <= set(ids)
    nbformat.validate(out)


def test_heading_slides_options():
    out, _ = HeadingSlides(slide_level=1, overwrite=True).preprocess(_notebook(), {})
    types = [t for _, t in _slide_types(out)]
    assert types == ["slide", "", "-", "-", "subslide", "subslide", "subslide"]


def test_plotly_for_slides_adds_html_and_plotlyjs():
    nb = _notebook()
    figure = {"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4], "name": "</script>"}], "layout": {"height": 300}}
    nb.cells[1].outputs = [new_output("display_data", data={PLOTLY_MIME: figure, "text/plain": "Figure"})]
    out, resources = PlotlyForSlides().preprocess(nb, {})
    html = out.cells[1].outputs[0].data["text/html"]
    assert html == plotly_slide_html(figure, "specdec-slide-plot-0")
    assert (
        'require(["plotly"]' in html
        and 'paths: {plotly: "plotly.min"}' in html
        and 'exports: "Plotly"' in html
        and "height:300px" in html
    )
    assert "</script>" not in html.split("<script>", 1)[1][: -len("</script>")]  # the label cannot close the tag
    assert resources["outputs"]["plotly.min.js"].startswith(b"/**")  # plotly.js, written next to the slides


def test_plotly_for_slides_without_figures_writes_nothing():
    out, resources = PlotlyForSlides().preprocess(_notebook(), {})
    assert "outputs" not in resources


def test_slides_export_one_section_per_heading():
    """The whole path `make slides` takes: nbconvert's exporter with both preprocessors, local reveal.js."""
    nb = _notebook()
    nb.cells[1].outputs = [new_output("display_data", data={PLOTLY_MIME: {"data": [], "layout": {}}})]
    c = Config()
    c.SlidesExporter.preprocessors = [
        "specdec_lab.lab.teaching.HeadingSlides",
        "specdec_lab.lab.teaching.PlotlyForSlides",
    ]
    c.SlidesExporter.reveal_url_prefix = "reveal.js"
    c.SlidesExporter.require_js_url = "require.js"
    body, resources = SlidesExporter(config=c).from_notebook_node(nb)
    # reveal: one outer <section> per slide (Title, "## 2."), holding one inner <section> per subslide
    # ("### 2.1" opens the second one in slide 2); the skipped cell is gone.
    slides = body.split('<div class="slides">', 1)[1]
    assert slides.count("<section>") == 2 + 3
    assert "Kept" not in slides
    assert 'src="reveal.js/dist/reveal.js"' in body or '"reveal.js/dist/reveal.js"' in body
    assert 'src="require.js"' in body
    assert 'require(["plotly"]' in body and "plotly.min.js" in resources["outputs"]


def test_slides_of_a_shipped_notebook():
    """Notebook 00 as slides: a slide per numbered section, and its stored figures kept."""
    path = ROOT / "notebooks" / "00_getting_started.ipynb"
    nb = nbformat.read(path, as_version=4)
    headings = [
        line for c in nb.cells if c.cell_type == "markdown" for level, line in split_at_headings(c.source) if level
    ]
    figures = sum(PLOTLY_MIME in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
    c = Config()
    c.SlidesExporter.preprocessors = [
        "specdec_lab.lab.teaching.HeadingSlides",
        "specdec_lab.lab.teaching.PlotlyForSlides",
    ]
    body, _ = SlidesExporter(config=c).from_notebook_node(nb)
    assert len(headings) >= 6 and figures >= 1
    assert body.split('<div class="slides">', 1)[1].count("<section>") >= len(headings)
    assert len(re.findall(r'Plotly\.newPlot\("specdec-slide-plot-\d+"', body)) == figures
    assert nbformat.read(path, as_version=4) == nb  # nothing written back


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("make") is None, reason="needs git and make")
def test_reset_notebooks_restores_committed_notebooks(tmp_path):
    """`make reset-notebooks` asks for CONFIRM=1, then restores notebooks/ from git (in a throwaway clone)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    shutil.copy(ROOT / "Makefile", clone / "Makefile")  # the working tree's targets, on committed notebooks
    nb = sorted((clone / "notebooks").glob("[0-9]*.ipynb"))[0]
    committed = nb.read_text()
    nb.write_text(committed + "\n")  # an edit made in class
    refused = subprocess.run(["make", "-C", str(clone), "reset-notebooks"], capture_output=True, text=True)
    assert refused.returncode != 0 and "CONFIRM=1" in refused.stdout
    assert nb.read_text() != committed
    subprocess.run(["make", "-C", str(clone), "reset-notebooks", "CONFIRM=1"], check=True, capture_output=True)
    assert nb.read_text() == committed
