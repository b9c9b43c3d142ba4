"""The teacher's kit (`make teacher`, specdec_lab/lab/teacher.py): a syllabus whose minutes come from the measured
run times, an answer key holding every solution, slides with no code and no exercise cells."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from specdec_lab.lab import teacher

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def load(paths):
    return {p.stem: nbformat.read(p, as_version=4) for p in paths}


def test_the_syllabus_has_both_paths_and_takes_run_times_per_section_when_recorded():
    nbs = load(NOTEBOOKS)
    stem = NOTEBOOKS[0].stem
    _, secs = teacher.sections(nbs[stem])
    heavy = secs[3].heading
    run_times = {"machine": "M", "date": "D", "seconds": {s: 60.0 for s in nbs}, "sections": {stem: {heavy: 600.0}}}
    text = teacher.syllabus_markdown(nbs, run_times, teacher.KitConfig())
    assert "## The 2-hour path: 00 → 01 → 02" in text and "## The one-day path" in text
    assert "Run times measured on: M" in text
    row = next(line for line in text.splitlines() if line.startswith(f"| {heavy}"))
    assert "| 10.0 |" in row, row  # the recorded 600 s of that section, in minutes
    assert "measured per section" in text
    # without a per-section record the notebook's total is shared, and the syllabus says so
    plain = teacher.syllabus_markdown(nbs, {"seconds": {s: 60.0 for s in nbs}}, teacher.KitConfig())
    assert "shared among sections by code cells" in plain


def test_the_2_hour_path_fits_by_pre_reading_or_says_it_does_not():
    nbs = load(NOTEBOOKS)
    run_times = json.loads((ROOT / "notebooks/run_times.json").read_text())
    text = teacher.syllabus_markdown(nbs, run_times, teacher.KitConfig())
    line = next(x for x in text.splitlines() if x.startswith("In class "))
    if "⏩" in text:
        import re

        left = float(re.search(r"only run in the room: (\d+) min in class", text).group(1))
        assert left <= 120, text[:2000]
    assert line


def test_the_answer_key_holds_every_solution():
    nbs = load(NOTEBOOKS)
    key = teacher.answer_key_markdown(nbs)
    for nb in nbs.values():
        for c in nb.cells:
            if "solution" in c.metadata.get("tags", []):
                assert c.source.strip() in key


@pytest.mark.slow
def test_slides_hide_code_and_exercises(tmp_path):
    path = next(p for p in NOTEBOOKS if p.stem.startswith("01_"))
    nb = nbformat.read(path, as_version=4)
    teacher.write_slides(nb, tmp_path / "01.slides.html", local_js=None)
    html = (tmp_path / "01.slides.html").read_text(encoding="utf-8")
    import html as h

    longest = [max(c.source.splitlines(), key=len) for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert longest and not [line for line in longest if h.escape(line, quote=False) in html or line in html]
    assert "Exercise 1" in html  # the exercises' statements (markdown) stay on the slides


def test_a_kit_without_run_times_says_what_writes_them(tmp_path):
    with pytest.raises(SystemExit, match="make reproduce"):
        teacher.build(teacher.KitConfig(run_times=tmp_path / "none.json", out=tmp_path / "kit", slides=False))
