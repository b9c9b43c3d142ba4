"""One point's papermill in a child process, and stopping it for sure (used by point.run_point).

Why a child process. The runner used to call papermill in its own process, so Ctrl-C had to travel as a
KeyboardInterrupt through nbclient's asyncio loop, the kernel's shutdown and the notebook's last write before
our code saw it. Under load a single SIGINT was seen to leave a sweep running for minutes in there. The cause
was never pinned down; candidates, none confirmed: the exception raised inside a finaliser, where CPython
prints and drops it; the loop resuming the interrupted cell's abandoned tasks while nbclient shuts the kernel
down. (The kernel never saw that SIGINT: jupyter_client starts it in a session of its own.) Rather than depend
on how that unwinds, the process that gets Ctrl-C now never runs nbclient: it waits on its children in a plain
polling loop, where KeyboardInterrupt lands in our code within one poll, and stopping a point needs no
cooperation from the stopped code:

    child:    python -P papermill_child.py JOB.json    its own session: a terminal's Ctrl-C reaches the runner only
    kernel:   started by the child's jupyter_client    a session of its own too (jupyter_client does that)
    stop:     SIGKILL to the child's process group and to the kernel's (the child's descendants, read from
              /proc before the child dies), wait until they are gone; the caller then removes the point's
              partial files, which nothing can write any more

Where /proc is missing (not Linux) the kernel is not found: it exits by itself within about a second of its
parent (ipykernel polls it), and the child does the same after its own parent (papermill_child.py).

The child's files (job, report, log, and the kernel's connection file: JUPYTER_RUNTIME_DIR points there) live
in a temp folder removed when the point ends, killed or not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["PointCancelled", "PointProcessError", "run_papermill", "kill_all"]

CHILD = Path(__file__).with_name("papermill_child.py")
POLL = 0.2  # seconds between looks at the child (and at should_stop)
GONE_WAIT = 10.0  # seconds to wait for killed processes to disappear
_LIVE: dict[int, subprocess.Popen] = {}  # running children, for kill_all (the CLI's second Ctrl-C)
_FAMILY: dict[int, list[int]] = {}  # child pid -> [child, its descendants], read when a kill of it began


class PointCancelled(Exception):
    """The point was stopped because its should_stop() said so (the sweep is being stopped)."""


class PointProcessError(RuntimeError):
    """The child running papermill died without reporting (not a failing notebook: that is reported)."""


def run_papermill(
    notebook: Path,
    output: Path,
    parameters: dict,
    *,
    kernel: str,
    cwd: Path,
    cell_timeout: int | None,
    env: dict[str, str],
    should_stop: Callable[[], bool] | None = None,
) -> dict | None:
    """Execute `notebook` into `output` in a child process; -> None when every cell ran, else the failure's raw
    fields ({"ename", "evalue", ...}: papermill_child.py). An exception here, KeyboardInterrupt included, or
    should_stop() turning true (-> PointCancelled) kills the child and its kernel before it propagates."""
    with tempfile.TemporaryDirectory(prefix="specdec-sweep-point-") as tmp:
        tmp = Path(tmp)
        job = {
            "parent": os.getpid(),
            "notebook": str(notebook),
            "output": str(output),
            "parameters": parameters,
            "kernel": kernel,
            "cwd": str(cwd),
            "cell_timeout": cell_timeout,
            "report": str(tmp / "report.json"),
        }
        (tmp / "job.json").write_text(json.dumps(job), encoding="utf-8")
        child_env = {**os.environ, **env, "JUPYTER_RUNTIME_DIR": str(tmp)}
        with open(tmp / "log.txt", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-P", str(CHILD), str(tmp / "job.json")],
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _LIVE[proc.pid] = proc
        try:
            while True:
                try:
                    code = proc.wait(timeout=POLL)
                    break
                except subprocess.TimeoutExpired:
                    if should_stop is not None and should_stop():
                        raise PointCancelled(f"stopped: {notebook.name} -> {output.parent}") from None
        except BaseException:
            _kill(proc)
            raise
        finally:
            _LIVE.pop(proc.pid, None)
            _FAMILY.pop(proc.pid, None)
        report = tmp / "report.json"
        if code != 0 or not report.is_file():
            tail = (tmp / "log.txt").read_text(encoding="utf-8", errors="replace")[-3000:]
            raise PointProcessError(
                f"the papermill process for {output.parent.name} exited with code {code} before reporting "
                f"(killed? papermill missing in {sys.executable}?). Its output:\n{tail}"
            )
        return json.loads(report.read_text(encoding="utf-8"))["error"]


def kill_all() -> None:
    """Kill every point process this process runs, and their kernels (the CLI's second Ctrl-C, before it exits)."""
    for proc in list(_LIVE.values()):
        _kill(proc, wait=1.0)


def _record_family(proc: subprocess.Popen) -> list[int] | None:
    """[child, its descendants] from /proc, read once per child and kept for a later kill (None: the child had
    already exited, nothing recorded). Kept because a second Ctrl-C can land inside the first one's `_kill`,
    after the child died but before the kernel's group was killed: the child's exit cuts the link to the
    kernel, and `kill_all` must still find it."""
    if proc.pid not in _FAMILY:
        if proc.poll() is not None:  # exited and reaped: its pid may belong to someone else now
            return None
        _FAMILY[proc.pid] = [proc.pid, *_descendants(proc.pid)]
    return _FAMILY[proc.pid]


def _kill(proc: subprocess.Popen, wait: float = GONE_WAIT) -> None:
    """SIGKILL the child's process group and its descendants' groups (the kernel and whatever it started);
    return once they are gone (or after `wait` seconds)."""
    family = _record_family(proc)  # before the kill: once the child is gone, so is the link
    if family is None:
        return
    own = os.getpgrp()
    for pid in family:
        try:
            group = os.getpgid(pid)
            if group != own:  # never our own group: that would kill the runner (and the terminal's job)
                os.killpg(group, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait
    try:
        proc.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        pass
    while not all(_gone(pid) for pid in family[1:]) and time.monotonic() < deadline:
        time.sleep(0.05)


def _descendants(root: int) -> list[int]:
    """Every process below `root`, read from /proc (Linux); [] where there is no /proc."""
    children: dict[int, list[int]] = {}
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            stat = Path("/proc", name, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # "pid (comm) state ppid ...": comm may hold spaces
        children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _gone(pid: int) -> bool:
    """True when `pid` (found in /proc) has exited: its entry is gone, or it is a zombie waiting to be reaped."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
