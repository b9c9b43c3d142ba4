"""One point's papermill, in a process of its own: `python -P papermill_child.py JOB.json` (started by process.py).

Run as a script, not as `specdec_lab.sweep.papermill_child`: it imports papermill and the standard library
only. Importing the package would import torch (specdec_lab/__init__), seconds on every point for nothing.
(-P keeps this file's folder, which holds spec.py and runner.py, off sys.path, so no import can pick them up.)

JOB.json: {"parent": pid, "notebook", "output", "parameters", "kernel", "cwd", "cell_timeout", "report"}.
It executes the notebook into `output` and writes the report, {"error": null} or the failure's raw fields
(runner.py turns them into error.json), then exits 0. Any other exit means it crashed before reporting.

It leaves when its parent does (polled twice a second, as ipykernel's own parent poller does), and its kernel
then leaves in turn: a runner that dies, is killed or is stopped at once never leaves a point running on.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import warnings


def _leave_with_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(3)


def _raw_error(err: Exception) -> dict:
    from papermill.exceptions import PapermillExecutionError

    if isinstance(err, PapermillExecutionError):
        return {
            "ename": err.ename,
            "evalue": err.evalue,
            "cell_index": err.cell_index,
            "exec_count": err.exec_count,
            "source": err.source,
            "traceback": list(err.traceback or []),
        }
    # the kernel died, a cell timed out, the kernel could not start, ...
    return {"ename": type(err).__name__, "evalue": str(err)}


START_ATTEMPTS = 3  # starts of a kernel that dies before running any cell


def _died_at_start(error: dict) -> bool:
    return error["ename"] == "RuntimeError" and "before replying to kernel_info" in error["evalue"]


def main(job_path: str) -> int:
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    # the parent's pid comes from the job, not os.getppid(): a parent gone before this line is noticed too
    threading.Thread(target=_leave_with_parent, args=(job["parent"],), daemon=True).start()
    import papermill

    error = None
    with warnings.catch_warnings():
        # papermill warns that the temp name does not end in .ipynb; it writes JSON all the same
        warnings.filterwarnings("ignore", message=r"The specified file .* does not end in")
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                papermill.execute_notebook(
                    job["notebook"],
                    job["output"],
                    parameters=job["parameters"],
                    kernel_name=job["kernel"],
                    cwd=job["cwd"],
                    progress_bar=False,
                    execution_timeout=job["cell_timeout"],
                )
                error = None
            except Exception as err:  # a failed point: reported, not raised
                error = _raw_error(err)
            # A kernel that died before it answered kernel_info ran none of the point's code (kernels started
            # two at a time on a busy machine do, now and then): the point is started again, not failed.
            if error is None or not _died_at_start(error):
                break
            print(f"the kernel died at start (attempt {attempt} of {START_ATTEMPTS}): {error['evalue']}", flush=True)
    with open(job["report"], "w", encoding="utf-8") as f:
        json.dump({"error": error}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
