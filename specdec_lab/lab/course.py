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
import types
from collections.abc import Callable
from pathlib import Path

from ..viz.figures import TEMPLATE  # the one plotly template: the viz functions' and, by default, every cell's
from ..viz.tables import register_readable_text

__all__ = ["TEMPLATE", "ran_on", "runs_in", "start", "compare", "within_tol", "check", "watch", "Watch",
           "ExerciseError", "is_stub"]  # fmt: skip


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
    if seconds < 59.5:  # under a minute, in seconds ("about 1 min" for 24 s would overstate it)
        took = f"{max(1, round(seconds))} s"
    elif seconds < 600:  # minutes with one decimal ("about 1 min" for 83 s would understate it)
        took = f"{seconds / 60:.1f} min"
    else:
        took = f"{round(seconds / 60)} min"
    return f"Runs in about {took} with its defaults (the last `make reproduce`: {times.get('machine', '?')})."


def start(figures_dir: str = "../figures", threads: int = 0, seed: int = 0, stem: str | None = None) -> Path:
    """A notebook's setup, in one call: print `ran_on()` (and, given the notebook's `stem`, `runs_in(stem)`),
    set torch's threads (0: its default) and every seed, hide transformers' progress bars (no stored "Loading
    weights" widget), make `TEMPLATE` plotly's default, give every pandas Styler, Markdown and HTML a readable
    text/plain (`viz.tables.register_readable_text`: the text shown, not `<…Styler at 0x…>`), and return the
    folder figures go to (SPECDEC_LAB_FIGURES overrides it: CI keeps the committed figures)."""
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
    register_readable_text()
    print(ran_on())
    if stem is not None:
        print(runs_in(stem))
    return Path(os.environ.get("SPECDEC_LAB_FIGURES") or figures_dir)


def within_tol(a: float, b: float, rel_tol: float) -> bool:
    """Whether a and b are within `rel_tol` of each other as a reader takes it: the larger at most (1 + rel_tol)×
    the smaller, |a − b| ≤ rel_tol · min(|a|, |b|) (not `math.isclose`, whose max(|a|, |b|) would call a 2× gap
    "within 52%"); with rel_tol 0, only where equal. The one rule behind `compare` and `experiment.fastest`."""
    return abs(a - b) <= rel_tol * min(abs(a), abs(b))


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
    """The sentence the numbers state: `within` where a and b are within `rel_tol` of each other, else `above`
    where a > b and `below` otherwise. "Within 52%" means what a reader takes it to mean: the larger is at most
    1.52× the smaller, |a − b| ≤ rel_tol · min(|a|, |b|) (not `math.isclose`, whose max(|a|, |b|) would call a
    2× gap "within 52%"); with rel_tol 0, only where equal. Each is a format string over a, b and `values`:

        compare(t2, t1, "two tokens cost more than one ({a:.1f} against {b:.1f} ms)",
                "two tokens cost no more than one here ({a:.1f} against {b:.1f} ms)", rel_tol=0.02,
                within="two tokens cost about what one does ({a:.1f} against {b:.1f} ms: within noise)")
    """
    if any(isinstance(x, float) and math.isnan(x) for x in (a, b)):
        raise ValueError(f"compare needs two numbers, got {a!r} and {b!r} (a NaN states no comparison)")
    if within is not None and within_tol(a, b, rel_tol):
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


class _ModuleView(types.ModuleType):
    """A notebook's name for a module, with some functions watched: every other attribute is the module's own,
    except that a watched function reached another way — through a submodule (`accept.chain.f` where `accept.f`
    is watched) or under another name — is the same watched wrapper. The module itself is never touched (other
    cells and the library keep the original)."""

    def __init__(self, module: types.ModuleType, watched: dict | None = None):
        super().__init__(module.__name__, module.__doc__)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_watched", {} if watched is None else watched)  # id(original) -> wrapper

    def __getattr__(self, name: str):
        module = object.__getattribute__(self, "_module")
        watched = object.__getattribute__(self, "_watched")
        value = getattr(module, name)
        if id(value) in watched:
            return watched[id(value)]
        if isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__ + "."):
            return _ModuleView(value, watched)  # a submodule: the same watched functions inside it
        return value


class Watch:
    """The in-scope references an exercise must not call: the stub cell wraps each named function (a name in the
    notebook's namespace, `obj.method` of an object there, or `module.function` of a module the notebook names:
    that name then holds a view of the module) in a pass-through that records the call, and the
    check refuses an answer computed by calling one. Why: the check compares with the library's function, so an
    answer that calls that same function passes without doing the exercise (the course's rule: no exercise
    passes with the reference copied from scope). Objects are wrapped on the instance, modules through a view
    bound to the notebook's name, never the module's own attribute: the library stays untouched."""

    def __init__(self, namespace: dict, names: tuple[str, ...]):
        self.names = names
        self.called: list[str] = []
        self.originals: dict[str, Callable] = {}
        self._checking = False  # True from `begin_check()` until the check: `_watch[name]` is the check's own
        for name in names:
            owner, _, attr = name.rpartition(".")
            if owner:
                obj = namespace[owner]
                original = getattr(obj, attr)
                original = getattr(original, "__watched__", original)  # a stub cell run twice wraps once
                if isinstance(obj, types.ModuleType):  # the notebook's name for the module gets a view of it
                    view = obj if isinstance(obj, _ModuleView) else _ModuleView(obj)
                    wrapper = self._wrap(name, original)
                    object.__setattr__(view, attr, wrapper)
                    object.__getattribute__(view, "_watched")[id(original)] = wrapper
                    namespace[owner] = view
                else:
                    setattr(obj, attr, self._wrap(name, original))
                self.originals[name] = original
            else:
                original = namespace[name]
                original = getattr(original, "__watched__", original)
                namespace[name] = self._wrap(name, original)
                self.originals[name] = original

    def begin_check(self) -> Watch:
        """The check cell's first line: from here to `check(...)` the unwatched references (`_watch["f"]`) are the
        check's own. Taken before it (by an answer), `_watch["f"]` counts as calling `f`."""
        self._checking = True
        return self

    def __getitem__(self, name: str) -> Callable:
        """The unwatched reference, for the check cell itself (after `_watch.begin_check()`):
        `check(..., _watch["f"](x), watch=_watch)`. Taken by an answer, it is recorded as a call of `f`."""
        if not self._checking:
            self.called.append(name)
        return self.originals[name]

    def _wrap(self, name: str, fn: Callable) -> Callable:
        def watched(*args, **kwargs):
            self.called.append(name)
            return fn(*args, **kwargs)

        watched.__watched__ = fn
        watched.__doc__ = fn.__doc__
        watched.__name__ = getattr(fn, "__name__", name)
        return watched

    def refuse(self, what: str) -> None:
        """Raise ExerciseError if a watched reference was called since the stub (or the last check)."""
        called, self.called, self._checking = sorted(set(self.called)), [], False
        if called:
            names = ", ".join(f"`{n}`" for n in called)
            raise ExerciseError(
                f"{what}: the answer called {names}, the reference the check compares with — compute it yourself "
                "from the definition (re-run the exercise's first cell, then your answer)"
            )


def watch(namespace: dict, *names: str) -> Watch:
    """In an exercise's stub cell: `_watch = watch(globals(), "acceptance_rate")`; then `check(..., watch=_watch)`."""
    return Watch(namespace, names)


def check(
    what: str,
    answer,
    reference,
    *,
    close: Callable | float | None = None,
    hint: str = "",
    watch: Watch | None = None,
) -> None:
    """Compare an exercise's `answer` with the library's `reference`; print what was right, or raise
    `ExerciseError` saying what is wrong (and `hint`). `close`: None compares exactly (tensors with torch.equal,
    numbers with ==), a float is a relative tolerance, a callable close(answer, reference) -> bool decides.
    `watch`: the stub's `Watch`; an answer that called a watched reference is refused whatever its value.
    Returns nothing, so a notebook cell ending in `check(...)` shows the printed line once."""
    if is_stub(answer):
        raise ExerciseError(f"{what}: no answer yet — replace the `...` in the cell above with your code. {hint}")
    if watch is not None:
        watch.refuse(what)
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
