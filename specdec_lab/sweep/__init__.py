"""Parameter sweeps over a notebook: `python -m specdec_lab.sweep SPEC.yaml` (see __main__.py).

spec.py     the YAML spec (SweepSpec), its checks (SpecError) and grid points with stable ids
runner.py   papermill once per point, atomically, resumable, failures recorded (run_sweep)
gather.py   the table (CSV + JSON), the best point and the headline figure (gather)
"""

from .gather import format_best, gather, short_labels, sweep_figure
from .runner import RunConfig, RunSummary, point_dir, point_state, run_point, run_sweep
from .spec import Point, SpecError, SweepSpec, check_methods, expand, load_spec

__all__ = [
    "Point",
    "RunConfig",
    "RunSummary",
    "SpecError",
    "SweepSpec",
    "check_methods",
    "expand",
    "format_best",
    "gather",
    "load_spec",
    "point_dir",
    "point_state",
    "run_point",
    "run_sweep",
    "short_labels",
    "sweep_figure",
]
