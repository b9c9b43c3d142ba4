"""One sweep point: papermill executes the notebook with the point's parameters, atomically; its folder's states.

    <out>/points/<id>/notebook.ipynb   the executed notebook (also kept for a failed point: its traceback)
                      result.json      the notebook's result; its presence means "done"
                      error.json       a failed point: error name, message, the failing cell's source
                      figures/         whatever the notebook saves with save_figure (SPECDEC_LAB_FIGURES),
                                       so a sweep never rewrites the repository's figures/

One point, in order (papermill runs in a child process: process.py says why):

    papermill  notebook -> <id>/.notebook.ipynb.XXXX.tmp     result_path = <id>/.result.XXXX.pending.json
    ok and the pending result is a JSON object:  tmp -> notebook.ipynb, pending -> result.json (os.replace)
    else:                                        tmp -> notebook.ipynb, error.json written, pending removed

The notebook writes its result to a pending name, and the runner renames it to result.json only after the
whole notebook ran: a notebook that wrote its result and then failed in a later cell is a failed point, and
result.json — the resume marker — exists only for points whose executed notebook is complete and saved.
Ctrl-C (KeyboardInterrupt), or a stop asked by `should_stop`, kills the point's papermill process and its
kernel, then removes the temp notebook, the pending result and any other temp file of the point: nothing
half-written keeps a final name or stays behind, and the next run redoes that point. The pending name is new
for every execution, so a result written late by anything that escaped is never promoted.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from ..io import atomic_path, write_json
from .process import run_papermill
from .spec import RESULT_PATH, Point

__all__ = ["point_dir", "point_state", "remove_partial", "run_point", "env", "first_line"]

NOTEBOOK, RESULT, ERROR = "notebook.ipynb", "result.json", "error.json"
PENDING = ".result.{}.pending.json"  # {}: unique per execution (module doc)
FIGURES_ENV = "SPECDEC_LAB_FIGURES"  # save_figure's folder override (specdec_lab.viz.figures)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def point_dir(out: Path, point: Point) -> Path:
    return Path(out) / "points" / point.id


def remove_partial(folder: Path) -> None:
    """Remove what a run stopped mid-write leaves under `folder` (a point's, or a whole sweep's out folder):
    temp files of atomic writes (`.<name>.XXXX.tmp`) and pending results. Their final names never exist
    half-written, so this loses nothing finished."""
    folder = Path(folder)
    if folder.is_dir():
        for stale in [*folder.rglob(".*.tmp"), *folder.rglob(PENDING.format("*"))]:
            stale.unlink(missing_ok=True)


def point_state(folder: Path) -> str:
    """'done' (result.json), 'failed' (error.json, no result) or 'pending' (neither)."""
    if (folder / RESULT).is_file():
        return "done"
    if (folder / ERROR).is_file():
        return "failed"
    return "pending"


@contextmanager
def env(**values: str | None) -> Iterator[None]:
    """Set (or, for None, remove) environment variables inside the block; restore them after."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def first_line(message, limit: int = 200) -> str:
    lines = ANSI.sub("", str(message or "")).strip().splitlines()
    return lines[0][:limit] if lines else ""


def _excerpt(text: str, lines: int = 20, chars: int = 2000) -> str:
    kept = ANSI.sub("", text or "").splitlines()[:lines]
    return "\n".join(kept)[:chars]


def _error_record(raw: dict) -> dict:
    """What error.json keeps of a failure (the child's raw fields): enough to see why without opening the
    executed notebook."""
    if "cell_index" in raw:  # a cell raised (papermill's PapermillExecutionError)
        tb = [ANSI.sub("", line) for line in raw.get("traceback") or []]
        return {
            "error": raw["ename"],
            "message": raw["evalue"],
            "cell": raw["cell_index"],
            "execution_count": raw["exec_count"],
            "source": _excerpt(raw["source"]),
            "traceback": "\n".join(tb)[-3000:],
        }
    # the kernel died, a cell timed out, the kernel could not start, ...
    return {"error": raw["ename"], "message": _excerpt(raw["evalue"], lines=40, chars=3000)}


def run_point(
    notebook: Path,
    folder: Path,
    parameters: dict,
    kernel: str = "python3",
    cell_timeout=900,
    should_stop: Callable[[], bool] | None = None,
) -> dict:
    """Execute one point (module doc); -> {"status": "done" | "failed", "seconds", "error": dict | None}.

    KeyboardInterrupt (also one that ended the kernel's cell) and should_stop() (-> process.PointCancelled)
    stop the point, leave nothing half-written and propagate."""
    notebook = Path(notebook).resolve()
    folder = Path(folder).resolve()  # the kernel runs in the notebook's folder: every path it gets is absolute
    folder.mkdir(parents=True, exist_ok=True)
    remove_partial(folder)  # left by a process killed hard
    pending = folder / PENDING.format(uuid.uuid4().hex[:12])
    error: dict | None = None
    t0 = time.perf_counter()
    try:
        with atomic_path(folder / NOTEBOOK) as tmp:
            raw = run_papermill(
                notebook,
                tmp,
                {**parameters, RESULT_PATH: str(pending)},
                kernel=kernel,
                cwd=notebook.parent,
                cell_timeout=cell_timeout,
                env={FIGURES_ENV: str(folder / "figures")},
                should_stop=should_stop,
            )
            if raw is not None:
                if raw["ename"] == "KeyboardInterrupt":
                    # Ctrl-C ended the kernel's cell (an interrupt sent to the kernel itself): that is the
                    # user's interrupt, not a failed point (else the sweep would go on to the next point)
                    raise KeyboardInterrupt
                error = _error_record(raw)
            if tmp.stat().st_size == 0:  # papermill failed before writing anything: no notebook to keep
                raise _NothingWritten
    except _NothingWritten:
        pass
    except BaseException:
        pending.unlink(missing_ok=True)
        remove_partial(folder)  # the kernel's own temp files (its result's, a figure's), now that it is dead
        raise
    seconds = time.perf_counter() - t0
    if error is None:
        error = _check_result(pending)
    if error is not None:
        pending.unlink(missing_ok=True)
        write_json(folder / ERROR, {**error, "parameters": parameters, "seconds": round(seconds, 3)})
        return {"status": "failed", "seconds": seconds, "error": error}
    os.replace(pending, folder / RESULT)  # last: result.json is the "done" marker
    (folder / ERROR).unlink(missing_ok=True)  # a retried point that now passes
    return {"status": "done", "seconds": seconds, "error": None}


class _NothingWritten(Exception):
    """papermill left the temp notebook empty; atomic_path then removes it instead of publishing it."""


def _check_result(pending: Path) -> dict | None:
    if not pending.is_file():
        return {
            "error": "NoResult",
            "message": f"the notebook ran without error but wrote no JSON at its {RESULT_PATH!r} parameter",
        }
    try:
        result = json.loads(pending.read_text(encoding="utf-8"))
    except ValueError as err:
        return {"error": "BadResult", "message": f"the result is not valid JSON: {err}"}
    if not isinstance(result, dict):
        return {"error": "BadResult", "message": f"the result is a JSON {type(result).__name__}, not an object"}
    return None
