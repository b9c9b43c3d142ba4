"""Which machine a results file was measured on, and how a notebook names it: "this machine" only where the
file's machine record is this kernel's machine, else the file's own machine (`viz.results.machine_label`).

A bench results file carries a `machine` record; a sweep's gathered table.csv does not (nested values stay out
of its flat rows), but the table.json written beside it keeps the machine in its best point's result. The
tables committed under data/sweeps/tables/ were copied without their table.json: their machine is the one the
sweep log names (data/bench/README.md, "Sweeps over notebook 08"), recorded here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..io import REPO_DIR
from ..viz.results import machine_label

__all__ = ["COMMITTED_SWEEP_MACHINES", "table_machine", "same_machine", "measured_where"]

# committed sweep table (path from the repository root) -> the machine its log names
COMMITTED_SWEEP_MACHINES: dict[str, dict] = {
    "data/sweeps/tables/lookahead_wng.csv": {  # data/bench/README.md: "2026-12-01, a 2-core AMD EPYC reporting
        "cpu": "AMD EPYC", "isa": "AVX512", "bf16": True, "torch_threads": 2,  # AVX-512 and native bf16"
        "date": "2026-12-01", "source": "data/bench/README.md, 'Sweeps over notebook 08'",
    },
}  # fmt: skip


def table_machine(path: str | Path) -> dict | None:
    """The machine record of a sweep table: its table.json's (a sweep's own out folder), else the committed
    table's logged machine, else None (nothing says where it was measured)."""
    path = Path(path)
    sibling = path.with_suffix(".json")
    if sibling.is_file():
        try:
            best = json.loads(sibling.read_text(encoding="utf-8")).get("best") or {}
            record = (best.get("result") or {}).get("machine")
        except (OSError, ValueError, AttributeError):
            record = None
        if record:
            return dict(record)
    try:
        key = path.resolve().relative_to(REPO_DIR.resolve()).as_posix()
    except ValueError:
        return None
    record = COMMITTED_SWEEP_MACHINES.get(key)
    return dict(record) if record else None


def same_machine(record: Mapping | None, here: Mapping | None = None) -> bool:
    """Whether a file's machine record is this machine: the same CPU name, torch ISA and thread count
    (`here`: a `machine().as_dict()`-like record; default this kernel's)."""
    if not record:
        return False
    if here is None:
        from ..machine import machine

        here = machine().as_dict()
    threads = lambda r: r.get("torch_threads", r.get("threads"))  # noqa: E731 - files say torch_threads
    return (record.get("cpu"), record.get("isa"), threads(record)) == (here.get("cpu"), here.get("isa"), threads(here))


def measured_where(record: Mapping | None, here: Mapping | None = None) -> str:
    """'this machine (AMD EPYC (AVX512, 2 threads))' where the record is this machine, else the record's own
    machine, 'AMD EPYC (AVX512, 2 threads)'; 'a machine the file does not record' without a record."""
    if not record:
        return "a machine the file does not record"
    label = machine_label(record)
    return f"this machine ({label})" if same_machine(record, here) else label
