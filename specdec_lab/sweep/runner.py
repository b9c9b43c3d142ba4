"""Running a sweep: every point not yet done goes to an executor; finished points are skipped on resume.

This side decides what runs: it reads each point's folder (point.py: result.json means done), hands the rest
to an executor (executors.py: local processes by default, a Dask cluster with `cluster=`), and records each
outcome as it comes back, with a progress bar over points (done / skipped / failed). The points' files are
written by whoever runs them, into the same out folder.

Failed points are skipped by later runs unless --retry-failed: a failure is usually deterministic (a bad
parameter value, a bug) and would otherwise cost its full run time again on every resume; error.json says
why, and the table lists the point as failed.

Workers. `workers > 1` runs that many points at once on this machine (one papermill process, hence one
kernel, each). Each kernel's torch uses every core, so on a 2-core machine two workers make every point
slower and the timings (speedups!) noisier: keep the default 1 there; use more on many-core machines, for
notebooks whose results do not depend on timing, or a cluster.

Ctrl-C stops the executor's running points (their processes killed, their partial files removed) and
propagates as KeyboardInterrupt; anything half-written that is left in the points' folders (a cluster worker
that died mid-point) is removed here as well.
"""

from __future__ import annotations

from collections import Counter
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from .executors import Executor, PointTask, make_executor
from .point import first_line, point_dir, point_state, remove_partial
from .spec import Point, SweepSpec

__all__ = ["RunConfig", "RunSummary", "run_sweep"]


@dataclass
class RunConfig:
    out: Path
    workers: int = 1  # >1: that many points at once; on a 2-core machine it slows every point (module doc)
    retry_failed: bool = False  # run points that failed before again (default: keep their error.json)
    kernel: str = "python3"  # the venv's kernel (`make setup` registers it)
    cell_timeout: int | None = 900  # seconds per cell; None: no limit
    progress: bool = True
    cluster: str | None = None  # a Dask scheduler address (tcp://host:port): run the points there


@dataclass
class RunSummary:
    ran: int = 0  # executed in this run, successfully
    failed: int = 0  # executed in this run, failed
    skipped: int = 0  # already done
    kept_failed: int = 0  # failed in an earlier run and not retried
    seconds: float = 0.0  # wall time of this run's executions


def run_sweep(spec: SweepSpec, points: list[Point], config: RunConfig, executor: Executor | None = None) -> RunSummary:
    """Run every point not yet done (resume); failures are recorded and the run goes on.

    `executor`: where the points run (default: make_executor(config.cluster, config.workers), closed here)."""
    summary = RunSummary()
    out = Path(config.out).resolve()  # absolute: a cluster worker runs in a folder of its own
    todo: list[PointTask] = []
    for p in points:
        state = point_state(point_dir(out, p))
        if state == "done":
            summary.skipped += 1
        elif state == "failed" and not config.retry_failed:
            summary.kept_failed += 1
        else:
            todo.append(PointTask(p, spec.notebook, point_dir(out, p), config.kernel, config.cell_timeout))
    if not todo:  # nothing to run: no executor (no cluster connection) needed
        return summary
    own = executor is None
    executor = make_executor(config.cluster, config.workers) if own else executor
    bar = tqdm(
        total=len(points),
        initial=len(points) - len(todo),
        desc=f"{spec.name} ({executor.name})",
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
        with closing(executor.run(todo)) as outcomes:  # closing: leaving early stops the running points
            for task, outcome in outcomes:
                record(task.point, outcome)
    except BaseException:
        for task in todo:
            remove_partial(task.folder)
        raise
    finally:
        bar.close()
        if own:
            executor.close()
    summary.ran, summary.failed = counts["done"], counts["failed"]
    return summary
