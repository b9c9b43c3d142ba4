"""The teacher's kit: `make teacher` writes, from the stored notebooks and notebooks/run_times.json,

    results/teacher/syllabus.md        a 2-hour path (00 → 01 → 02) and a one-day path, minutes per section
    results/teacher/answer_key.md      every exercise: its task, the worked solution, the check's stored output
    results/teacher/slides/NN.slides.html   reveal.js slides, code and exercise cells hidden (`teaching.py`)
    results/teacher/student/NN.ipynb   student copies: no solutions; the pictures kept, the answers cleared

Minutes per section: the run time is measured (each cell's papermill duration in the last `make reproduce`,
summed per `##` section into run_times.json's "sections"); reading and exercise time are planning assumptions,
stated in the syllabus and set in `KitConfig` — a teacher edits them there, not in the output.

Student copies (also `make student`): a student must see the pictures that set up a question before running
anything (the opening "loop in one picture", the cost curves), so figures stay; what gives an answer away goes:
every solution cell, the outputs of the exercise and check cells, the output that answers the notebook's
"Predict, then run" prompt (tag `prediction`), and every non-picture output (printed numbers, computed sentences).
Widget views are dropped too: they need a running kernel to draw.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode

from ..bench.readme import cells_by_section
from .teaching import PLOTLY_MIME

PICTURES = (PLOTLY_MIME, "image/png", "image/svg+xml", "image/jpeg")
ANSWER_TAGS = {"exercise", "check", "prediction"}  # outputs that give an answer away (solutions are removed whole)
_STARS = re.compile(r"^###\s+Exercise\s+(\d+)\s+(★+)\s*[—-]?\s*(.*)$", re.M)


@dataclass
class KitConfig:
    """The syllabus's planning assumptions (the run times are measured, these are not)."""

    notebooks: Path = Path("notebooks")
    out: Path = Path("results/teacher")
    run_times: Path = Path("notebooks/run_times.json")
    words_per_minute: float = 100.0  # reading aloud and discussing the prose of a notebook in class
    minutes_per_code_cell: float = 0.5  # reading a code cell (its run time is measured apart)
    minutes_per_star: dict[int, float] = field(default_factory=lambda: {1: 5.0, 2: 10.0, 3: 20.0})
    short_path: tuple[str, ...] = ("00", "01", "02")  # the 2-hour introduction
    short_minutes: float = 120.0
    day_minutes: float = 360.0  # a teaching day: six hours in the room
    slides: bool = True
    local_js: str | None = None  # a folder holding reveal.js, require.js, jquery.min.js, mathjax/ (make slides-js)


# ---- student copies ------------------------------------------------------------------------------------------
def tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def is_picture(output) -> bool:
    return any(m in output.get("data", {}) for m in PICTURES)


class StudentCopy(Preprocessor):
    """Solutions out; keep picture outputs, clear everything that answers a question (module docstring)."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        nb.cells = [c for c in nb.cells if "solution" not in tags(c)]
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            cell.execution_count = None
            keep = not (ANSWER_TAGS & tags(cell))
            cell.outputs = [o for o in cell.outputs if keep and is_picture(o)]
            for o in cell.outputs:
                if o.get("output_type") == "execute_result":
                    o["execution_count"] = None
        nb.metadata.pop("widgets", None)
        return nb, resources


def student_copy(nb: NotebookNode) -> NotebookNode:
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))  # a copy: the stored notebook is never edited
    return StudentCopy().preprocess(nb, {})[0]


# ---- the syllabus ------------------------------------------------------------------------------------------------
@dataclass
class Section:
    heading: str
    words: int = 0
    code_cells: int = 0
    stars: list[int] = field(default_factory=list)  # one entry per exercise: its ★ count
    run_seconds: float = 0.0


def _text(cell) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def sections(nb: NotebookNode) -> tuple[str, list[Section]]:
    """(title, the `##` sections in order, by `bench.readme.cells_by_section`: the names the run-time record
    uses); prose before the first `##` is the "Introduction"."""
    title, out = "", []
    for heading, cell in cells_by_section(nb.cells):
        if not out or out[-1].heading != heading:
            out.append(Section(heading))
        text = _text(cell)
        if cell.cell_type == "markdown":
            title = title or next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), "")
            out[-1].words += len(re.findall(r"\w+", text))
            out[-1].stars += [len(m.group(2)) for m in _STARS.finditer(text)]
        elif cell.cell_type == "code" and "solution" not in tags(cell):
            out[-1].code_cells += 1
    return title, [s for s in out if s.words or s.code_cells]


def section_run_seconds(run_times: dict, stem: str, secs: list[Section]) -> str:
    """Fill each section's measured run seconds from run_times.json; returns how they were measured."""
    per_section = run_times.get("sections", {}).get(stem)
    if per_section:
        for s in secs:
            s.run_seconds = float(per_section.get(s.heading, 0.0))
        return "measured per section"
    total = float(run_times.get("seconds", {}).get(stem, 0.0))
    code = sum(s.code_cells for s in secs) or 1
    for s in secs:  # no per-section record yet: the notebook's measured total, shared by code cells
        s.run_seconds = total * s.code_cells / code
    return "the notebook's measured total, shared among sections by code cells"


HOMEWORK_SECTIONS = ("Further reading",)  # links to follow after class: never timed in the room
IN_THE_ROOM = ("Introduction", "Exercises", "Check your understanding", *HOMEWORK_SECTIONS)  # never pre-read


def minutes(s: Section, cfg: KitConfig, exercises: bool = True) -> float:
    if s.heading in HOMEWORK_SECTIONS:
        return 0.0
    m = s.words / cfg.words_per_minute + s.code_cells * cfg.minutes_per_code_cell + s.run_seconds / 60
    return m + (sum(cfg.minutes_per_star.get(n, 20.0) for n in s.stars) if exercises else 0.0)


def syllabus_markdown(nbs: dict[str, NotebookNode], run_times: dict, cfg: KitConfig) -> str:
    rows, totals = [], {}
    for stem, nb in nbs.items():
        title, secs = sections(nb)
        how = section_run_seconds(run_times, stem, secs)
        totals[stem] = (title, secs, how)
    ids = {stem[:2]: stem for stem in nbs}

    def class_minutes(stem: str) -> tuple[float, float]:
        """(minutes in class with the ★ exercises, minutes of ★★/★★★ homework)"""
        _, secs, _ = totals[stem]
        room = sum(minutes(s, cfg, exercises=False) for s in secs)
        room += sum(cfg.minutes_per_star[1] for s in secs for n in s.stars if n == 1)
        home = sum(cfg.minutes_per_star.get(n, 20.0) for s in secs for n in s.stars if n > 1)
        return room, home

    w = rows.append
    w("# Syllabus: speculative decoding, the specdec_lab course\n")
    stars = ", ".join(f"{'★' * n} {m:g} min" for n, m in sorted(cfg.minutes_per_star.items()))
    w(
        f"Run times measured on: {run_times.get('machine', 'unknown')} ({run_times.get('date', 'no date')}); on a "
        "slower machine scale the *run* column. Planning assumptions (not measured; "
        f"`specdec_lab.lab.teacher.KitConfig`): prose at {cfg.words_per_minute:g} words a minute read and "
        f"discussed, {cfg.minutes_per_code_cell:g} min to read a code cell, exercises {stars}. In class: ★ "
        "exercises; ★★ and ★★★ are homework. Further reading is homework.\n"
    )

    short = [ids[i] for i in cfg.short_path if i in ids]
    room = sum(class_minutes(s)[0] for s in short)
    home = sum(class_minutes(s)[1] for s in short)
    # over the time: the sections with the most prose become reading before class (their runs stay in class),
    # the longest first, until what is left fits
    reading = sorted(
        ((s.words / cfg.words_per_minute, stem, s.heading) for stem in short for s in totals[stem][1]
         if s.heading not in IN_THE_ROOM and not s.stars),
        reverse=True,
    )  # fmt: skip
    pre_read, trimmed = set(), room
    for m, stem, heading in reading:
        if trimmed <= cfg.short_minutes:
            break
        pre_read.add((stem, heading))
        trimmed -= m
    w(f"## The 2-hour path: {' → '.join(s[:2] for s in short)}\n")
    w(f"In class {room:.0f} min with every section read in the room, homework {home:.0f} min.")
    if pre_read:
        w(f"To fit {cfg.short_minutes:.0f} min the sections marked ⏩ ({len(pre_read)}) are read before class and")
        w(f"only run in the room: {trimmed:.0f} min in class.")
    w("\n")
    for stem in short:
        title, secs, how = totals[stem]
        w(f"### {title}\n\n| section | in class (min) | of which run (min) | exercises |\n|---|---:|---:|---|")
        for s in secs:
            m = minutes(s, cfg, exercises=False) + sum(cfg.minutes_per_star[1] for n in s.stars if n == 1)
            flag = " ⏩" if (stem, s.heading) in pre_read else ""
            if flag:
                m -= s.words / cfg.words_per_minute
            w(f"| {s.heading}{flag} | {m:.0f} | {s.run_seconds / 60:.1f} | {' '.join('★' * n for n in s.stars)} |")
        w(f"\nRun times: {how}.\n")

    w(f"## The one-day path ({cfg.day_minutes / 60:g} hours in the room)\n")
    w("| notebook | in class (min) | homework (min) | cumulative (min) | |\n|---|---:|---:|---:|---|")
    cum = 0.0
    for stem in nbs:
        title, _, _ = totals[stem]
        r, h = class_minutes(stem)
        fits = cum + r <= cfg.day_minutes
        cum += r if fits else 0.0
        w(f"| {title} | {r:.0f} | {h:.0f} | {cum:.0f} | {'the day' if fits else 'further study'} |")
    w("\nNotebooks are taken in order; one that would overrun the day moves to further study and the next is tried.")
    return "\n".join(rows) + "\n"


# ---- the answer key -------------------------------------------------------------------------------------------
def _output_text(cell) -> str:
    parts = []
    for o in cell.get("outputs", []):
        t = o.get("text") or o.get("data", {}).get("text/plain") or ""
        parts.append(t if isinstance(t, str) else "".join(t))
    return "".join(parts).strip()


def answer_key_markdown(nbs: dict[str, NotebookNode]) -> str:
    out = ["# Answer key\n", "Each exercise: the task, the worked solution, and what its check printed (stored run).\n"]
    for nb in nbs.values():
        title, _ = sections(nb)
        found: dict[int, dict[str, str]] = {}
        for cell in nb.cells:
            n = next((int(t.split("-")[1]) for t in tags(cell) if re.fullmatch(r"exercise-\d+", t)), None)
            if n is None:
                continue
            role = next((r for r in ("solution", "check", "exercise") if r in tags(cell)), "task")
            part = found.setdefault(n, {})
            part[role] = _text(cell).strip() if cell.cell_type == "markdown" or role != "check" else _output_text(cell)
        if not found:
            continue
        out.append(f"## {title}\n")
        for n in sorted(found):
            part = found[n]
            out.append(part.get("task", f"### Exercise {n}") + "\n")
            out.append("Solution:\n\n```python\n" + part.get("solution", "# (no solution cell)") + "\n```\n")
            if part.get("check"):
                out.append("The check printed:\n\n```text\n" + part["check"] + "\n```\n")
    return "\n".join(out)


# ---- slides -----------------------------------------------------------------------------------------------------
def write_slides(nb: NotebookNode, path: Path, local_js: str | None) -> None:
    """reveal.js slides with no code and no exercise cells: the narrative, the pictures, the outputs."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    c = Config()
    c.SlidesExporter.exclude_input = True
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    c.SlidesExporter.reveal_scroll = True
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_cell_tags = {"solution", "exercise", "check"}
    c.SlidesExporter.preprocessors = [
        "specdec_lab.lab.teaching.HeadingSlides",
        "specdec_lab.lab.teaching.PlotlyForSlides",
    ]
    if local_js:
        c.SlidesExporter.reveal_url_prefix = f"{local_js}/reveal.js"
        c.SlidesExporter.require_js_url = f"{local_js}/require.js"
        c.SlidesExporter.jquery_url = f"{local_js}/jquery.min.js"
        c.SlidesExporter.mathjax_url = f"{local_js}/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    body, resources = SlidesExporter(config=c).from_notebook_node(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    for name, data in resources.get("outputs", {}).items():
        (path.parent / name).write_bytes(data)


# ---- the kit -----------------------------------------------------------------------------------------------------
def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # atomic: an interrupted kit leaves the previous file whole


def build(cfg: KitConfig) -> list[Path]:
    paths = sorted(cfg.notebooks.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise SystemExit(f"teacher kit: no notebooks/NN_*.ipynb under {cfg.notebooks} (run it from the repo's root)")
    try:
        run_times = json.loads(cfg.run_times.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise SystemExit(f"teacher kit: cannot read {cfg.run_times} ({e}); `make reproduce` writes it") from e
    nbs = {p.stem: nbformat.read(p, as_version=4) for p in paths}
    written = [cfg.out / "syllabus.md", cfg.out / "answer_key.md"]
    _write(written[0], syllabus_markdown(nbs, run_times, cfg))
    _write(written[1], answer_key_markdown(nbs))
    for stem, nb in nbs.items():
        student = cfg.out / "student" / f"{stem}.ipynb"
        _write(student, nbformat.writes(student_copy(nb)))
        written.append(student)
        if cfg.slides:
            slides = cfg.out / "slides" / f"{stem}.slides.html"
            write_slides(nb, slides, cfg.local_js)
            written.append(slides)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m specdec_lab.lab.teacher [--out DIR] [--no-slides] [--local-js DIR]` (module docstring)."""
    p = argparse.ArgumentParser(prog="python -m specdec_lab.lab.teacher", description=__doc__.split("\n\n")[0])
    p.add_argument("--notebooks", type=Path, default=KitConfig.notebooks)
    p.add_argument("--out", type=Path, default=KitConfig.out)
    p.add_argument("--run-times", type=Path, default=KitConfig.run_times)
    p.add_argument("--no-slides", action="store_true", help="syllabus, answer key and student copies only")
    p.add_argument("--local-js", help="slides load reveal.js & co. from this folder, relative to the slides")
    p.add_argument("--student-only", action="store_true", help="write only the student copies, into --out itself")
    args = p.parse_args(argv)
    if args.student_only:
        paths = sorted(args.notebooks.glob("[0-9][0-9]_*.ipynb"))
        if not paths:
            p.error(f"no notebooks/NN_*.ipynb under {args.notebooks} (run it from the repository root)")
        for path in paths:
            _write(args.out / path.name, nbformat.writes(student_copy(nbformat.read(path, as_version=4))))
        print(f"== {len(paths)} student copies in {args.out}/ (no solution cells; pictures kept, answers cleared)")
        return 0
    cfg = KitConfig(notebooks=args.notebooks, out=args.out, run_times=args.run_times, slides=not args.no_slides,
                    local_js=args.local_js)  # fmt: skip
    written = build(cfg)
    print(f"== teacher's kit in {cfg.out}/: {len(written)} files (syllabus.md, answer_key.md, student/, slides/)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
