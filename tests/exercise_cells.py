"""A notebook exercise's own cells, read from the stored .ipynb by tag and run without the real model: the shared
helpers of tests/test_exercises_*.py (each feeds a check a plausible wrong answer and sees it fail)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specdec_lab.lab.course import ExerciseError

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ROLES = ("exercise", "solution", "check")


def cells(stem: str) -> list[dict]:
    return json.loads((NOTEBOOKS / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def exercise(stem: str, n: int) -> dict[str, str]:
    """{role: source} of exercise n's stub, solution and check cells (tags exercise-n and the role)."""
    found = {}
    for c in cells(stem):
        tags = c.get("metadata", {}).get("tags", [])
        if f"exercise-{n}" in tags and c["cell_type"] == "code":
            found[next(r for r in ROLES if r in tags)] = source(c)
    assert set(found) == set(ROLES), f"{stem} exercise {n}: {sorted(found)}"
    return found


def run(*sources: str, namespace: dict | None = None) -> dict:
    """Execute the cells' sources one after the other in `namespace` (a fresh one by default)."""
    ns = {} if namespace is None else namespace
    exec(compile("\n".join(sources), "notebook cells", "exec"), ns)  # noqa: S102 - the notebook's own cells
    return ns


def attempt(ex: dict[str, str], namespace: dict, answer: str | None) -> dict:
    """The stub, then `answer` (a wrong answer's code, the solution's, or None: the stub left as it is), then the
    check, in `namespace`."""
    return run(ex["exercise"], answer or "", ex["check"], namespace=namespace)


def fails(ex: dict[str, str], wrong: str | None, namespace) -> None:
    """The check raises ExerciseError on the stub followed by `wrong` (None: the stub alone)."""
    with pytest.raises(ExerciseError):
        attempt(ex, namespace(), wrong)


def passes(ex: dict[str, str], namespace) -> None:
    run(ex["exercise"], ex["solution"], ex["check"], namespace=namespace())
