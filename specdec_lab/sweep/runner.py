"""Running a sweep: papermill executes the notebook once per point; finished points are skipped on resume.

    <out>/points/<id>/notebook.ipynb   the executed notebook (also kept for a failed point: its traceback)
                      result.json      the notebook's result; its presence means "done"
                      error.json       a failed point: error name, message, the failing cell's source
                      figures/         whatever the notebook saves with save_figure (SPECDEC_LAB_FIGURES),
                                       so a sweep never rewrites the repository's figures/

One point, in order:

    papermill  notebook -> <id>/.notebook.ipynb.XXXX.tmp     result_path = <id>/.result.XXXX.pending.json
    ok and the pending result is a JSON object:  tmp -> notebook.ipynb, pending -> result.json (os.replace)
    else:                                        tmp -> notebook.ipynb, error.json written, pending removed

The notebook writes its result to a pending name, and the runner renames it to result.json only after the
whole notebook ran: a notebook that wrote its result and then failed in a later cell is a failed point, and
result.json — the resume marker — exists only for points whose executed notebook is complete and saved.
Ctrl-C (KeyboardInterrupt) removes the temp notebook and the pending result; nothing half-written keeps a
final name, and the next run redoes that point. The pending name is new for every execution: a kernel
that outlives an interrupted run and writes its result late writes a name nobody promotes.

Failed points are skipped by later runs unless --retry-failed: a failure is usually deterministic (a bad
parameter value, a bug) and would otherwise cost its full run time again on every resume; error.json says
why, and the table lists the point as failed.

Workers. `workers > 1` runs points in a process pool (one papermill, hence one kernel, per worker). Each
kernel's torch uses every core, so on a 2-core machine two workers make every point slower and the
timings (speedups!) noisier: keep the default 1 there; use more on many-core machines, or for notebooks
whose results do not depend on timing.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from tqdm.auto import tqdm

from ..io import atomic_path, write_json
from .spec import RESULT_PATH, Point, SweepSpec

__all__ = ["RunConfig", "RunSummary", "run_sweep", "run_point", "point_dir", "point_state", "remove_partial", "env"]

NOTEBOOK, RESULT, ERROR = "notebook.ipynb", "result.json", "error.json"
PENDING = ".result.{}.pending.json"  # {}: unique per execution (module doc)
FIGURES_ENV = "SPECDEC_LAB_FIGURES"  # save_figure's folder override (specdec_lab.viz.figures)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass
class RunConfig:
    out: Path
    workers: int = 1  # >1: a process pool; on a 2-core machine it slows every point (module doc)
    retry_failed: bool = False  # run points that failed before again (default: keep their error.json)
    kernel: str = "python3"  # the venv's kernel (`make setup` registers it)
    cell_timeout: int | None = 900  # seconds per cell; None: no limit
    progress: bool = True


@dataclass
class RunSummary:
    ran: int = 0  # executed in this run, successfully
    failed: int = 0  # executed in this run, failed
    skipped: int = 0  # already done
    kept_failed: int = 0  # failed in an earlier run and not retried
    seconds: float = 0.0  # wall time of this run's executions


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


def _error_record(err: Exception) -> dict:
    """What error.json keeps of a failure: enough to see why without opening the executed notebook."""
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        tb = [ANSI.sub("", line) for line in err.traceback or []]
        return {
            "error": err.ename,
            "message": err.evalue,
            "cell": err.cell_index,
            "execution_count": err.exec_count,
            "source": _excerpt(err.source),
            "traceback": "\n".join(tb)[-3000:],
        }
    # the kernel died, a cell timed out, the kernel could not start, ...
    return {"error": type(err).__name__, "message": _excerpt(str(err), lines=40, chars=3000)}


def run_point(notebook: Path, folder: Path, parameters: dict, kernel: str = "python3", cell_timeout=900) -> dict:
    """Execute one point (module doc); -> {"status": "done" | "failed", "seconds", "error": dict | None}."""
    import papermill

    folder = folder.resolve()  # the kernel runs in the notebook's folder: every path it gets is absolute
    folder.mkdir(parents=True, exist_ok=True)
    remove_partial(folder)  # left by a process killed hard
    pending = folder / PENDING.format(uuid.uuid4().hex[:12])
    error: dict | None = None
    t0 = time.perf_counter()
    try:
        with env(**{FIGURES_ENV: str(folder / "figures")}), warnings.catch_warnings():
            # papermill warns that the temp name does not end in .ipynb; it writes JSON all the same
            warnings.filterwarnings("ignore", message=r"The specified file .* does not end in")
            with atomic_path(folder / NOTEBOOK) as tmp:
                try:
                    papermill.execute_notebook(
                        str(notebook),
                        str(tmp),
                        parameters={**parameters, RESULT_PATH: str(pending)},
                        kernel_name=kernel,
                        cwd=str(notebook.parent),
                        progress_bar=False,
                        execution_timeout=cell_timeout,
                    )
                except Exception as err:  # a failed point is recorded; KeyboardInterrupt is not caught
                    if getattr(err, "ename", None) == "KeyboardInterrupt":
                        # Ctrl-C reached the kernel (same process group) and ended its cell: that is the
                        # user's interrupt, not a failed point, even when this process missed its own SIGINT
                        # (else the sweep would go on to the next point, and record this one as failed)
                        raise KeyboardInterrupt from err
                    error = _error_record(err)
                if tmp.stat().st_size == 0:  # papermill failed before writing anything: no notebook to keep
                    raise _NothingWritten
    except _NothingWritten:
        pass
    except BaseException:
        pending.unlink(missing_ok=True)
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


def _task(spec: SweepSpec, point: Point, config: RunConfig) -> tuple:
    return (spec.notebook, point_dir(config.out, point), point.parameters, config.kernel, config.cell_timeout)


def run_sweep(spec: SweepSpec, points: list[Point], config: RunConfig) -> RunSummary:
    """Run every point not yet done (resume); failures are recorded and the run goes on."""
    summary = RunSummary()
    todo: list[Point] = []
    for p in points:
        state = point_state(point_dir(config.out, p))
        if state == "done":
            summary.skipped += 1
        elif state == "failed" and not config.retry_failed:
            summary.kept_failed += 1
        else:
            todo.append(p)
    bar = tqdm(
        total=len(points),
        initial=len(points) - len(todo),
        desc=spec.name,
        unit="point",
        disable=not config.progress,
        dynamic_ncols=True,
    )
    counts = Counter()

    def record(point: Point, outcome: dict) -> None:
        counts[outcome["status"]] += 1
        summary.seconds += outcome["seconds"]
        if outcome["error"]:
            e = outcome["error"]
            bar.write(f"failed: {point.id}: {e['error']}: {first_line(e['message'])}")
        bar.set_postfix(done=counts["done"], skipped=summary.skipped, failed=counts["failed"] + summary.kept_failed)
        bar.update(1)

    bar.set_postfix(done=0, skipped=summary.skipped, failed=summary.kept_failed)
    try:
        if config.workers <= 1 or len(todo) <= 1:
            for p in todo:
                bar.set_description(f"{spec.name} {p.id}")
                record(p, run_point(*_task(spec, p, config)))
        else:
            # spawn, not fork: a fresh interpreter per worker (no copied threads, zmq or tqdm state)
            workers = min(config.workers, len(todo))
            with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
                futures = {pool.submit(run_point, *_task(spec, p, config)): p for p in todo}
                try:
                    for fut in as_completed(futures):
                        record(futures[fut], fut.result())
                except BaseException:
                    pool.shutdown(wait=True, cancel_futures=True)  # the running points clean up after themselves
                    raise
    finally:
        bar.set_description(spec.name)
        bar.close()
    summary.ran, summary.failed = counts["done"], counts["failed"]
    return summary
