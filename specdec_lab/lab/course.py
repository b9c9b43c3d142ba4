"""What every numbered notebook shares as a course: its first output, sentences chosen by the numbers they state,
and exercises checked against the library.

    FIGURES = start(figures_dir, threads)       # the first cell: prints "Ran on: ...", seeds, one plotly template
    Markdown(compare(a, b, "{a} is faster than {b}", "{a} is slower than {b}", within="... within noise"))
    answer = ...                                 # an exercise: the stub a student fills in (tag `exercise`)
    answer = the_solution()                      # the solution (tag `solution`, removed from student copies)
    check("the tree mask", answer, reference)    # the check (kept): prints what was right, or raises saying what not

Why `compare`: a sentence that compares measurements is chosen by the comparison, never typed, so when the
numbers turn over on another machine the sentence turns with them (tests/test_course.py feeds it both
orders). Why the `Ran on:` line: stored outputs are compared across notebooks by readers; each names the
machine and date it came from, and tests/test_notebook_machines.py holds every notebook to one machine.
"""

from __future__ import annotations

import datetime
import math
import os
import random
from collections.abc import Callable
from pathlib import Path

from ..viz.figures import TEMPLATE  # the one plotly template: the viz functions' and, by default, every cell's
from ..viz.tables import register_styler_text

__all__ = ["TEMPLATE", "ran_on", "runs_in", "start", "compare", "check", "ExerciseError", "is_stub"]


def ran_on(date: datetime.date | None = None) -> str:
    """'Ran on: <CPU · torch ISA · bf16 · threads> · torch <version> · <date>': a notebook's first output."""
    import torch

    from ..machine import machine

    day = (date or datetime.date.today()).isoformat()
    return f"Ran on: {machine().describe()} · torch {torch.__version__} · {day}"


def runs_in(stem: str, record: str | os.PathLike | None = None) -> str:
    """How long the notebook `stem` ran in the last `make reproduce` (notebooks/run_times.json), and where.

    A notebook run by `make reproduce` prints this before that run rewrites run_times.json, so its own output
    quotes the run before; `make store` renders the stored line again from the stored run's file
    (`lab.stored.render_runs_in`), and tests/test_notebook_outputs.py holds every stored line to the file."""
    import json

    from ..io import REPO_DIR

    path = Path(record) if record is not None else REPO_DIR / "notebooks" / "run_times.json"
    try:
        times = json.loads(path.read_text(encoding="utf-8"))
        seconds = float(times["seconds"][stem])
    except (OSError, ValueError, KeyError, TypeError):
        return f"Runs in: not measured yet (`make reproduce` records it in {path.name})."
    minutes = max(1, round(seconds / 60))
    return f"Runs in about {minutes} min with its defaults (the last `make reproduce`: {times.get('machine', '?')})."


def start(figures_dir: str = "../figures", threads: int = 0, seed: int = 0, stem: str | None = None) -> Path:
    """A notebook's setup, in one call: print `ran_on()` (and, given the notebook's `stem`, `runs_in(stem)`),
    set torch's threads (0: its default) and every seed, hide transformers' progress bars (no stored "Loading
    weights" widget), make `TEMPLATE` plotly's default, give every pandas Styler a readable text/plain (its
    cells as text, `viz.tables.styler_text`, not `<…Styler at 0x…>`), and return the folder figures go to
    (SPECDEC_LAB_FIGURES overrides it: CI keeps the committed figures)."""
    import numpy as np
    import plotly.io as pio
    import torch
    from transformers.utils import logging as hf_logging

    if threads > 0:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    hf_logging.disable_progress_bar()
    pio.templates.default = TEMPLATE
    register_styler_text()
    print(ran_on())
    if stem is not None:
        print(runs_in(stem))
    return Path(os.environ.get("SPECDEC_LAB_FIGURES") or figures_dir)


def compare(
    a: float,
    b: float,
    above: str,
    below: str,
    within: str | None = None,
    *,
    rel_tol: float = 0.0,
    **values,
) -> str:
    """The sentence the numbers state: `within` where a and b are within `rel_tol` of each other
    (|a − b| ≤ rel_tol · max(|a|, |b|); with rel_tol 0, only where equal), else `above` where a > b and `below`
    otherwise. Each is a format string over a, b and `values`:

        compare(t2, t1, "two tokens cost more than one ({a:.1f} against {b:.1f} ms)",
                "two tokens cost no more than one here ({a:.1f} against {b:.1f} ms)", rel_tol=0.02,
                within="two tokens cost about what one does ({a:.1f} against {b:.1f} ms: within noise)")
    """
    if any(isinstance(x, float) and math.isnan(x) for x in (a, b)):
        raise ValueError(f"compare needs two numbers, got {a!r} and {b!r} (a NaN states no comparison)")
    if within is not None and math.isclose(a, b, rel_tol=rel_tol):  # |a − b| <= rel_tol · max(|a|, |b|)
        sentence = within
    else:
        sentence = above if a > b else below
    return sentence.format(a=a, b=b, **values)


# ---- exercises ----------------------------------------------------------------------------------------------
class ExerciseError(AssertionError):
    """An exercise's answer is missing or wrong; the message says which and what to try."""


def is_stub(answer) -> bool:
    """Whether `answer` is still a student copy's stub: `...`, or None (what a function whose body is `...`
    returns)."""
    return answer is Ellipsis or answer is None


def check(what: str, answer, reference, *, close: Callable | float | None = None, hint: str = "") -> None:
    """Compare an exercise's `answer` with the library's `reference`; print what was right, or raise
    `ExerciseError` saying what is wrong (and `hint`). `close`: None compares exactly (tensors with torch.equal,
    numbers with ==), a float is a relative tolerance, a callable close(answer, reference) -> bool decides.
    Returns nothing, so a notebook cell ending in `check(...)` shows the printed line once."""
    if is_stub(answer):
        raise ExerciseError(f"{what}: no answer yet — replace the `...` in the cell above with your code. {hint}")
    ok, detail = _agrees(answer, reference, close)
    if not ok:
        raise ExerciseError(f"{what}: not yet — {detail}. {hint}".rstrip())
    print(f"✓ {what}: {detail}")


def _agrees(answer, reference, close) -> tuple[bool, str]:
    import torch

    if callable(close):
        same = bool(close(answer, reference))
        return same, "agrees with the library's" if same else "differs from the library's"
    if isinstance(reference, torch.Tensor):
        if not isinstance(answer, torch.Tensor):
            return False, f"expected a tensor of shape {tuple(reference.shape)}, got {type(answer).__name__}"
        if answer.shape != reference.shape:
            return False, f"shape {tuple(answer.shape)}, expected {tuple(reference.shape)}"
        if close is None:
            same = torch.equal(answer.to(reference.dtype), reference)
            return same, "equal to the library's, element for element" if same else (
                f"{int((answer.to(reference.dtype) != reference).sum())} of {reference.numel()} elements differ"
            )
        same = torch.allclose(answer.double(), reference.double(), rtol=close, atol=0.0)
        return same, f"within a relative {close:g} of the library's" if same else "further than the tolerance from it"
    if isinstance(reference, float | int) and not isinstance(reference, bool) and close is not None:
        same = math.isclose(float(answer), float(reference), rel_tol=close)
        return (
            same,
            f"within a relative {close:g} of the library's" if same else f"{answer:.4g}, the library's {reference:.4g}",
        )
    same = answer == reference
    return bool(same), f"{answer!r}" if same else f"got {answer!r}, expected {reference!r}"
