"""Where a sweep's points run. run_sweep, in the process the user started, decides which points run (resume)
and records each outcome; an executor runs them and yields each outcome as it finishes.

    LocalExecutor(workers)   this machine, `workers` points at a time (threads, each waiting on its point's
                             papermill process: point.py, process.py)
    DaskExecutor(address)    a Dask `distributed` cluster (`--cluster tcp://host:port`): each point is a task
                             on some worker, which runs it the same way, in a papermill process of its own
    make_executor(cluster=None, workers=1)

An executor is a context manager; `run(tasks)` is a generator of (task, outcome). Leaving it early (Ctrl-C,
an error while recording) stops every running point — its processes killed, its partial files removed — and
starts no other: one local point's guarantees hold for every executor. Another backend (Ray, a batch queue)
is one more class with `run` and `close`.

A cluster's workers write their points' files themselves, so the out folder (and the notebook) must be on a
filesystem every worker shares, at the same path; run_sweep hands them absolute paths. Each worker needs
specdec_lab with papermill, the notebook's own imports and the kernel named by --kernel. Files are written
atomically on the worker as they are locally, and result.json stays the resume marker the scheduling side
reads. Stopping: the scheduling side sets a Dask Event that every running point polls (Dask cannot stop a
running task; the task stops its own papermill process), waits for the points to end, then cancels.

Why Dask rather than Ray: `distributed` is a small pure-Python install (an optional extra, `.[cluster]`); its
workers start with one command on any machine that reaches the scheduler's TCP port (`dask scheduler`,
`dask worker tcp://host:8786`), and a LocalCluster starts in seconds in a test. Ray brings a large
platform-specific wheel and its own daemons (GCS, raylet, dashboard): more than a sweep of notebook runs
needs. Its advantage here, killing a running task, is moot: each point runs in a process we kill ourselves.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from .point import run_point
from .process import PointCancelled, PointProcessError
from .spec import Point

__all__ = [
    "ClusterError",
    "DaskExecutor",
    "Executor",
    "LocalExecutor",
    "PointTask",
    "make_executor",
    "require_distributed",
]

CLUSTER_EXTRA = "pip install -e '.[cluster]'"
STOP_POLL = 1.0  # seconds between a cluster point's looks at the stop event (one scheduler round trip each)
STOP_WAIT = 60.0  # seconds the scheduling side waits for a cluster's running points to stop


class ClusterError(RuntimeError):
    """The cluster cannot be used: `distributed` missing, the scheduler unreachable, a worker unable to run."""


@dataclass(frozen=True)
class PointTask:
    """One point to run, with absolute paths (a cluster worker has its own working folder)."""

    point: Point
    notebook: Path
    folder: Path
    kernel: str = "python3"
    cell_timeout: int | None = 900

    def run(self, should_stop: Callable[[], bool] | None = None) -> dict:
        return run_point(self.notebook, self.folder, self.point.parameters, self.kernel, self.cell_timeout, should_stop)


class Executor:
    """Runs point tasks (module doc). Subclasses implement run() and, if they hold resources, close()."""

    name = "executor"

    def run(self, tasks: list[PointTask]) -> Iterator[tuple[PointTask, dict]]:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class LocalExecutor(Executor):
    """Points on this machine, `workers` at a time. With one worker the points run from the calling thread
    itself, so Ctrl-C lands directly in the loop that waits on the point's process (process.py)."""

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)
        self.name = f"local, {self.workers} worker{'s' * (self.workers > 1)}"

    def run(self, tasks: list[PointTask]) -> Iterator[tuple[PointTask, dict]]:
        if self.workers == 1 or len(tasks) <= 1:
            for task in tasks:
                yield task, task.run()
            return
        # Threads, not processes: each only waits on its point's own process. Signals reach the main thread
        # only; it sets `stop`, and every thread then kills its point and returns (PointCancelled).
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=min(self.workers, len(tasks)), thread_name_prefix="sweep-point")
        try:
            futures = {pool.submit(_run_unless_stopped, task, stop.is_set): task for task in tasks}
            for fut in as_completed(futures):
                yield futures[fut], fut.result()
        finally:
            stop.set()  # a no-op after the last point; else the running points stop and the queued never start
            pool.shutdown(wait=True, cancel_futures=True)


def _run_unless_stopped(task: PointTask, should_stop: Callable[[], bool]) -> dict:
    if should_stop():
        raise PointCancelled(f"not started: {task.point.id}")
    return task.run(should_stop)


class DaskExecutor(Executor):
    """Points as tasks on a Dask `distributed` cluster (module doc). Connects on construction, so a bad address
    or a missing package is an error before any point runs."""

    def __init__(self, address: str, connect_timeout: float = 30.0):
        distributed = require_distributed()
        try:
            self.client = distributed.Client(address, timeout=connect_timeout, set_as_default=False)
        except Exception as err:  # OSError (unreachable), ValueError (bad address), TimeoutError, ...
            raise ClusterError(f"could not connect to the Dask scheduler at {address!r}: {err}") from None
        self.address = address
        self.name = f"Dask cluster {address}"

    def run(self, tasks: list[PointTask]) -> Iterator[tuple[PointTask, dict]]:
        from distributed import Event, as_completed

        run_id = uuid.uuid4().hex[:8]
        stop = Event(f"specdec-sweep-stop-{run_id}", client=self.client)
        futures = {
            self.client.submit(_run_on_worker, task, stop.name, key=f"sweep-{task.point.id}-{run_id}", pure=False): task
            for task in tasks
        }
        finished = False
        try:
            for fut in as_completed(futures, loop=self.client.loop):  # our client: it is not the default one
                task = futures[fut]
                try:
                    outcome = fut.result()
                except PointProcessError:
                    raise
                except Exception as err:
                    raise ClusterError(
                        f"point {task.point.id} could not run on the cluster ({type(err).__name__}: {err}). Every "
                        f"worker needs specdec_lab and papermill, and the notebook and out folder at the same paths "
                        f"({task.notebook}, {task.folder.parent})"
                    ) from err
                yield task, outcome
            finished = True
        finally:
            if not finished:
                self._stop(stop, list(futures))

    def _stop(self, stop, futures: list) -> None:
        """Tell every point to stop, give the running ones time to kill their processes and clean up, cancel.
        Called while an exception (Ctrl-C) propagates: a cluster that cannot be reached any more is reported
        here, not raised over it."""
        try:
            stop.set()
            deadline = time.monotonic() + STOP_WAIT
            while not all(f.done() for f in futures) and time.monotonic() < deadline:
                time.sleep(0.1)
            self.client.cancel(futures)
        except Exception as err:
            print(f"could not stop the points on {self.address}: {type(err).__name__}: {err}", file=sys.stderr)

    def close(self) -> None:
        self.client.close()


def _run_on_worker(task: PointTask, stop_name: str) -> dict:
    """A cluster task: run the point unless the sweep's stop event is set (polled every STOP_POLL seconds)."""
    from distributed import Event

    stop = Event(stop_name)  # the worker's client
    last = {"at": time.monotonic(), "set": stop.is_set()}

    def should_stop() -> bool:
        if time.monotonic() - last["at"] >= STOP_POLL:
            last.update(at=time.monotonic(), set=stop.is_set())
        return last["set"]

    if last["set"]:
        raise PointCancelled(f"not started: {task.point.id}")
    return task.run(should_stop)


def require_distributed():
    """The `distributed` module, or a ClusterError saying how to install it (an optional extra)."""
    try:
        import distributed
    except ImportError:
        raise ClusterError(
            f"--cluster needs Dask's `distributed` package, which is not installed for {sys.executable}: "
            f"{CLUSTER_EXTRA} (the optional `cluster` extra)"
        ) from None
    return distributed


def make_executor(cluster: str | None = None, workers: int = 1) -> Executor:
    """A DaskExecutor for a scheduler address, else a LocalExecutor with `workers` at a time."""
    if cluster:
        if workers > 1:
            raise ClusterError("--workers is for local runs; on a cluster, each worker thread runs one point")
        return DaskExecutor(cluster)
    return LocalExecutor(workers)
