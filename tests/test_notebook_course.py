"""Every numbered notebook is a lesson (notebooks/README.md, "The course layer"): a header with learning objectives
and prerequisites, a short setup cell whose first output names the machine, questions with folded answers, 3-5
exercises (stub, solution, check), takeaways and further reading from the checked list; student copies keep the
stubs and checks and drop every solution, and a student's check fails on the stub and passes on the solution."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from specdec_lab.lab.course import ExerciseError

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
READING = {row["url"] for row in csv.DictReader((ROOT / "data" / "literature" / "reading.csv").open())}
ROLES = ("exercise", "solution", "check")
SETUP_LINES = 12


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(cell: dict) -> str:
    return "".join(cell["source"])


def tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


def markdown(path: Path) -> str:
    return "\n".join(text(c) for c in cells(path) if c["cell_type"] == "markdown")


def section(md: str, heading: str) -> str:
    """The Markdown under the first heading containing `heading`, up to the next heading of any level."""
    m = re.search(rf"^#+ [^\n]*{re.escape(heading)}[^\n]*\n(.*?)(?=^#+ |\Z)", md, flags=re.M | re.S)
    return m.group(1) if m else ""


def bullets(block: str) -> list[str]:
    return re.findall(r"^\s*[-*] .+", block, flags=re.M)


def exercises(path: Path) -> dict[int, dict[str, list[dict]]]:
    """{N: {role: [cells]}} for the cells tagged exercise-N (role: markdown, exercise, solution, check)."""
    out: dict[int, dict[str, list[dict]]] = {}
    for c in cells(path):
        for t in tags(c):
            if m := re.fullmatch(r"exercise-(\d+)", t):
                role = "markdown" if c["cell_type"] == "markdown" else next((r for r in ROLES if r in tags(c)), "?")
                out.setdefault(int(m.group(1)), {}).setdefault(role, []).append(c)
    return out


def test_notebooks_are_found():
    assert len(NOTEBOOKS) >= 13


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_header_states_objectives_and_prerequisites(path):
    first = text(cells(path)[0])
    assert re.match(rf"# {path.stem[:2]} ", first), (
        f"{path.name}: the first cell starts with '# {path.stem[:2]} · Title'"
    )
    objectives = bullets(section(first, "Learning objectives"))
    assert 3 <= len(objectives) <= 5, f"{path.name}: 3-5 learning objectives in the first cell, got {len(objectives)}"
    assert "Prerequisites" in first, f"{path.name}: the first cell names its prerequisites"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_setup_cell_is_short_and_starts_the_notebook(path):
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    i = next(i for i, c in enumerate(code) if "parameters" in tags(c))
    setup = code[i + 1]
    lines = [x for x in text(setup).splitlines() if x.strip() and not x.strip().startswith("#")]
    assert len(lines) <= SETUP_LINES, f"{path.name}: the setup cell has {len(lines)} lines (at most {SETUP_LINES})"
    assert "start(" in text(setup), f"{path.name}: the setup cell calls specdec_lab.lab.course.start(...)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_questions_have_folded_answers(path):
    block = section(markdown(path), "Check your understanding")
    assert 2 <= block.count("<details>") == block.count("</details>"), (
        f"{path.name}: 'Check your understanding' needs 2-3 questions with answers in <details>...</details>"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_exercises_have_a_stub_a_solution_and_a_check(path):
    found = exercises(path)
    assert 3 <= len(found) <= 5, f"{path.name}: 3-5 exercises (cells tagged exercise-N), got {sorted(found)}"
    assert sorted(found) == list(range(1, len(found) + 1)), f"{path.name}: exercises numbered 1..n, got {sorted(found)}"
    for n, roles in found.items():
        counts = {r: len(roles.get(r, [])) for r in ("markdown", *ROLES)}
        assert counts == dict.fromkeys(counts, 1), f"{path.name} exercise {n}: one cell of each role, got {counts}"
        assert re.search(rf"^#+ Exercise {n}\b.*★", text(roles["markdown"][0]), flags=re.M), (
            f"{path.name} exercise {n}: its Markdown starts '### Exercise {n} ★ — title' (★ to ★★★)"
        )
        assert "check(" in text(roles["check"][0]), f"{path.name} exercise {n}: the check cell calls check(...)"
        assert "..." in text(roles["exercise"][0]), f"{path.name} exercise {n}: the stub leaves `...` to fill in"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_takeaways_and_further_reading(path):
    md = markdown(path)
    assert 3 <= len(bullets(section(md, "Takeaways"))) <= 5, f"{path.name}: 3-5 takeaways"
    links = re.findall(r"\]\((https?://[^)\s]+)\)", section(md, "Further reading"))
    assert len(links) >= 2, f"{path.name}: 'Further reading' with at least 2 links"
    unchecked = sorted(set(links) - READING)
    assert not unchecked, f"{path.name}: links not in data/literature/reading.csv (add them, checked): {unchecked}"


def test_the_notation_is_defined_once_in_00():
    notation = section(markdown(NOTEBOOKS[0]), "Notation")
    for symbol in ("p", "q", "α", "k", "c", "τ", "L", "E[L]", "mean accepted"):
        assert re.search(rf"\|\s*\$?{re.escape(symbol)}\$?\s*\|", notation) or f"| {symbol}" in notation, symbol


# ---- student copies ---------------------------------------------------------------------------------------------
def student_copy(path: Path):
    """What `make student` writes for one notebook (specdec_lab/lab/teacher.py, StudentCopy)."""
    import nbformat

    from specdec_lab.lab.teacher import student_copy as copy

    return copy(nbformat.read(path, as_version=4))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_student_copy_keeps_stubs_and_checks_and_no_solution(path):
    copy = student_copy(path)
    solutions = [text(c) for c in cells(path) if "solution" in tags(c)]
    sources = "\n".join(c.source for c in copy.cells)
    assert not any("solution" in c.metadata.get("tags", []) for c in copy.cells)
    assert not [s for s in solutions if s.strip() in sources], f"{path.name}: a solution's source is left"
    kept = [c for c in copy.cells if {"exercise", "check"} & set(c.metadata.get("tags", []))]
    assert len(kept) == 2 * len(exercises(path))


PICTURES = ("application/vnd.plotly.v1+json", "image/png", "image/svg+xml", "image/jpeg")


def pictures(cell) -> list:
    return [o for o in cell.get("outputs", []) if any(m in o.get("data", {}) for m in PICTURES)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_student_copy_shows_the_opening_picture_and_gives_no_answer_away(path):
    """Issue 56: a student sees the notebook's opening picture before running anything; what answers a question
    (check and exercise outputs, the output under "Predict, then run", printed numbers, computed sentences) is
    cleared, and every kept output is a picture."""
    stored, copy = cells(path), student_copy(path).cells
    first = next((c for c in stored if pictures(c)), None)
    assert first is not None, f"{path.name}: no stored picture at all"
    if not {"exercise", "check", "prediction", "solution"} & set(tags(first)):
        same = [c for c in copy if c.get("id") == first.get("id") and c.cell_type == "code"]
        assert same and pictures(same[0]), f"{path.name}: the opening picture (cell {stored.index(first)}) is cleared"
    for c in copy:
        if c.cell_type != "code":
            continue
        assert c.execution_count is None
        assert len(pictures(c)) == len(c.get("outputs", [])), f"{path.name}: a non-picture output is kept"
        if {"exercise", "check", "prediction"} & set(c.metadata.get("tags", [])):
            assert not c.get("outputs"), f"{path.name}: an answer's output is kept: {c.source[:60]!r}"


def test_every_predict_then_run_prompt_has_its_answer_cell_tagged():
    """The cell that answers a notebook's "Predict, then run" prompt is tagged `prediction` (the student copy
    clears its output)."""
    missing = []
    for path in NOTEBOOKS:
        cs = cells(path)
        prompts = [i for i, c in enumerate(cs) if c["cell_type"] == "markdown" and "Predict, then run" in text(c)]
        if prompts and not any("prediction" in tags(c) for c in cs[prompts[0] :]):
            missing.append(path.stem)
    assert not missing, f"no cell tagged `prediction` after the Predict-then-run prompt in {missing}"


def test_a_students_check_fails_on_the_stub_and_passes_on_the_solution():
    """Notebook 01's first exercise (no model: it runs in a fresh namespace): the student copy's stub, then its
    check, raises ExerciseError; with the teacher's solution in between, the check passes."""
    path = next(p for p in NOTEBOOKS if p.stem.startswith("01_"))
    ex = exercises(path)[1]
    stub, solution, check = (text(ex[r][0]) for r in ROLES)
    with pytest.raises(ExerciseError):
        exec(compile(stub + "\n" + check, "student", "exec"), {})  # noqa: S102 - the notebook's own cells
    exec(compile("\n".join([stub, solution, check]), "teacher", "exec"), {})  # noqa: S102


# ---- one machine behind every stored output -------------------------------------------------------------------
def first_output(path: Path) -> str:
    for c in cells(path):
        for o in c.get("outputs", []):
            t = o.get("text") or o.get("data", {}).get("text/plain") or ""
            t = "".join(t) if isinstance(t, list) else t
            if t.strip():
                return t.strip().splitlines()[0]
    return ""


def test_every_stored_notebook_names_one_machine():
    """Each notebook's first output is its `Ran on: …` line, and every notebook ran on the same machine (the
    date aside): a reader compares numbers across notebooks."""
    lines = {p.stem: first_output(p) for p in NOTEBOOKS}
    missing = [s for s, line in lines.items() if not line.startswith("Ran on: ")]
    assert not missing, f"no 'Ran on:' first output (run make reproduce, then make store): {missing}"
    machines = {re.sub(r" · \d{4}-\d\d-\d\d$", "", line) for line in lines.values()}
    assert len(machines) == 1, "stored outputs from several machines (make reproduce && make store):\n" + "\n".join(
        f"  {s}: {line}" for s, line in lines.items()
    )
