"""Parameter sweeps over a notebook: `python -m specdec_lab.sweep SPEC.yaml` (see __main__.py).

spec.py             the YAML spec (SweepSpec), its checks (SpecError) and grid points with stable ids
point.py            one point: papermill once, atomically, failures recorded (run_point); its folder's state
process.py          that papermill in a child process, and killing it (and its kernel) for sure
papermill_child.py  the script the child runs (papermill only: no specdec_lab, no torch)
executors.py        where points run: local processes, or a Dask cluster (make_executor)
runner.py           the sweep: what to run (resume), progress, outcomes (run_sweep)
gather.py           the table (CSV + JSON), the best point and the headline figure (gather)

Importing this package never imports `distributed`: only DaskExecutor does, when a cluster is asked for.
"""

from .executors import ClusterError, DaskExecutor, Executor, LocalExecutor, PointTask, make_executor
from .gather import format_best, gather, short_labels, sweep_figure
from .point import point_dir, point_state, remove_partial, run_point
from .process import PointCancelled, PointProcessError
from .runner import RunConfig, RunSummary, run_sweep
from .spec import Point, SpecError, SweepSpec, check_methods, expand, load_spec

__all__ = [
    "ClusterError",
    "DaskExecutor",
    "Executor",
    "LocalExecutor",
    "Point",
    "PointCancelled",
    "PointProcessError",
    "PointTask",
    "RunConfig",
    "RunSummary",
    "SpecError",
    "SweepSpec",
    "check_methods",
    "expand",
    "format_best",
    "gather",
    "load_spec",
    "make_executor",
    "point_dir",
    "point_state",
    "remove_partial",
    "run_point",
    "run_sweep",
    "short_labels",
    "sweep_figure",
]
