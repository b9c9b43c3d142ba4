"""CLI: python -m specdec_lab.sweep data/sweeps/draft_length_temperature.yaml [--quick] [--workers N | --cluster ADDR]

Checks the spec (keys, grid, the notebook and its parameters, every `method` spec string) before any
notebook runs; runs the points not yet done (a progress bar over points: done / skipped / failed), on this
machine or on a Dask cluster (--cluster tcp://host:port: executors.py); then gathers table.csv, table.json
and the figure into the out folder and prints the best point. Rerunning the same command resumes;
--gather-only rebuilds the table and figure from what is there.

Exit status: 0 every point has a result; 1 some point failed (its error.json says why), or a point's
process crashed; 2 bad spec or arguments, or the cluster cannot be used; 130 interrupted (finished points
are kept: rerun to resume).
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import time
from pathlib import Path

from ..io import positive_int
from .executors import CLUSTER_EXTRA, ClusterError, require_distributed
from .gather import format_best, gather
from .point import point_dir, remove_partial
from .process import PointProcessError, kill_all
from .runner import RunConfig, run_sweep
from .spec import SpecError, check_methods, expand, load_spec


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.sweep",
        description="Run a parameter grid by executing a notebook with papermill once per point; resumable.",
        epilog="Specs: data/sweeps/*.yaml. Output: <out>/points/<id>/{notebook.ipynb,result.json,error.json}, "
        "<out>/table.csv, table.json, <name>_<metric>.html/.png.",
    )
    p.add_argument("spec", help="sweep spec (YAML): name, notebook, parameters, grid, templates, metric, quick")
    p.add_argument("--out", default=None, help="output folder (default results/sweeps/<name>, or <name>-quick)")
    p.add_argument("--quick", action="store_true", help="run the spec's small `quick` section (CI)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="points run in parallel (default 1). Each point's kernel uses every core: on a 2-core "
                   "machine more workers make every point slower and its timings (speedups) unreliable")  # fmt: skip
    p.add_argument("--cluster", metavar="ADDRESS", default=None,
                   help="run the points on a Dask distributed cluster, e.g. tcp://host:8786 (needs the `cluster` "
                   f"extra: {CLUSTER_EXTRA}); the out folder and the notebook must be on a filesystem every "
                   "worker shares, at the same path")  # fmt: skip
    p.add_argument("--retry-failed", action="store_true",
                   help="run points that failed in an earlier run again (default: keep their error.json)")  # fmt: skip
    p.add_argument("--cell-timeout", type=positive_int, default=900, help="seconds per notebook cell (default 900)")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel (default python3: the venv's)")
    p.add_argument("--dry-run", action="store_true", help="check the spec and list the points; run nothing")
    p.add_argument("--gather-only", action="store_true", help="rebuild the table and figure; run nothing")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def interrupted_message(out: Path) -> str:
    return f"interrupted: finished points are in {out}/points; rerun the same command to resume"


def _second_interrupt_quits(out: Path) -> None:
    """Ctrl-C once: KeyboardInterrupt, which lands in the loop that waits on the point processes (papermill
    no longer runs in this process: process.py says why); the running points are killed, their partial
    files removed, and main() exits 130. Ctrl-C again while that runs: stop at once — kill every point
    process and its kernel, remove the partial files of every point, say so and exit 130. (On a cluster the
    first Ctrl-C has already told the points to stop; they do so on their workers.) SIGUSR1 dumps every
    thread's stack, to see where a sweep is stuck."""
    count = 0

    def on_sigint(signum, frame):
        nonlocal count
        count += 1
        if count == 1:
            raise KeyboardInterrupt
        kill_all()
        remove_partial(out)
        sys.stdout.flush()
        print(f"\n{interrupted_message(out)} (second Ctrl-C: stopped at once)", file=sys.stderr, flush=True)
        os._exit(130)

    signal.signal(signal.SIGINT, on_sigint)
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    try:
        spec = load_spec(a.spec)
        if a.quick:
            spec = spec.quick_spec()
        points = expand(spec)
        check_methods(spec, points)
    except SpecError as err:
        print(f"specdec_lab.sweep: error: {err}", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else Path("results/sweeps") / (spec.name + ("-quick" if a.quick else ""))
    print(f"{spec.name}: {len(points)} points of {spec.notebook.name} -> {out}")
    if a.dry_run:
        for p in points:
            print(f"  {p.id}  {p.parameters}")
        return 0
    config = RunConfig(
        out=out, workers=a.workers, retry_failed=a.retry_failed, kernel=a.kernel, cell_timeout=a.cell_timeout,
        progress=not a.no_progress, cluster=a.cluster,
    )  # fmt: skip
    t0 = time.perf_counter()
    if a.cluster and not a.gather_only:
        try:  # now, not when the first point is due: a missing package is a setup error (the extra)
            require_distributed()
        except ClusterError as err:
            print(f"specdec_lab.sweep: error: {err}", file=sys.stderr)
            return 2
    if not a.gather_only:
        if __name__ == "__main__":  # the CLI process owns SIGINT; main() called from Python leaves it alone
            _second_interrupt_quits(out)
        try:
            s = run_sweep(spec, points, config)
        except KeyboardInterrupt:
            print(f"\n{interrupted_message(out)}", file=sys.stderr)
            if __name__ == "__main__":
                # Stopped: nothing is left for a second Ctrl-C to stop. Ignore it, or one landing while the
                # interpreter shuts down (which restores SIGINT's default action, but leaves an ignored one
                # ignored) would end the process by the signal (exit -2) instead of with 130.
                signal.signal(signal.SIGINT, signal.SIG_IGN)
            return 130
        except ClusterError as err:
            print(f"specdec_lab.sweep: error: {err}", file=sys.stderr)
            return 2
        except PointProcessError as err:
            print(f"specdec_lab.sweep: error: {err}", file=sys.stderr)
            print(f"finished points are in {out}/points; rerun the same command to resume", file=sys.stderr)
            return 1
        kept = f"; {s.kept_failed} failed before, not retried (--retry-failed)" if s.kept_failed else ""
        took = time.perf_counter() - t0
        ran = f"ran {s.ran + s.failed} points in {took:.0f} s ({s.ran} done, {s.failed} failed)"
        print(f"{ran}; {s.skipped} already done{kept}")
    table = gather(spec, points, out, quick=a.quick)
    failed = [r["id"] for r in table["rows"] if r["status"] == "failed"]
    for pid in failed:
        print(f"failed: {pid}: see {point_dir(out, next(p for p in points if p.id == pid)) / 'error.json'}")
    print(format_best(table["best"], spec.metric))
    figure = table.get("figure")
    print(f"wrote {out / 'table.csv'}, {out / 'table.json'}" + (f", {out / figure['html']}" if figure else ""))
    if table["counts"]["pending"]:
        print(f"{table['counts']['pending']} points not run yet")
    return 1 if failed or table["counts"]["pending"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
