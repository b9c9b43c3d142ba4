"""The bench's results file: what a run writes after every prompt, and what a resumed run may keep of it.

A run resumes from its --out only under the same configuration (but the fields of RESUME_IGNORES, which do
not change what a row measures) on the same machine; it keeps the prompts every method finished, and the
file is rewritten whole and atomically after every prompt, so an interruption loses at most the prompt in
progress. The summary is recomputed from the rows at every write (`report.summarize`): rows are the record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..io import write_json
from ..proposers.registry import BASELINE
from .report import summarize
from .runner import TRACE_FIELDS

__all__ = ["ResumeError", "RESUME_IGNORES", "Results", "resume_rows"]


class ResumeError(ValueError):
    """--out holds results of a different configuration (or machine); resuming would mix them."""


# traces only adds a field to rows: a run resumed with or without them aggregates the same speeds
RESUME_IGNORES = (
    "limit",
    "per_category",
    "out",
    "fresh",
    "traces",
    "compile_seconds",
    "compile_seconds_by_build",
    "compile_capacity",
)


def resume_rows(out: Path, config: dict, machine: dict, labels: list[str]) -> list[dict]:
    """Rows of prompts finished for every method in an earlier run of the same configuration."""
    try:
        old = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ResumeError(f"cannot resume from {out}: {err}. Use --fresh to start over.") from None
    changed = []
    for section, new in (("config", config), ("machine", machine)):
        prev = old.get(section, {})
        for key in sorted(set(prev) | set(new)):
            if key in RESUME_IGNORES and section == "config":
                continue
            if prev.get(key) != new.get(key):
                changed.append(f"  {section}.{key}: {prev.get(key)!r} in the file, {new.get(key)!r} now")
    if changed:
        raise ResumeError(
            f"{out} holds results of a different configuration; refusing to resume (the rows would be "
            "aggregated together):\n" + "\n".join(changed) + "\nUse --fresh to overwrite it or another --out."
        )
    rows = old.get("rows", [])
    by_prompt: dict = {}
    for r in rows:
        by_prompt.setdefault(r["question_id"], set()).add(r["method"])
    done = {q for q, ms in by_prompt.items() if ms >= set(labels)}
    return [r for r in rows if r["question_id"] in done]


@dataclass
class Results:
    """The results file: rewritten whole (atomically) after every prompt, so an interruption loses at
    most the prompt in progress."""

    config: dict
    machine: dict
    labels: list[str]
    prompts_total: int
    rows: list[dict]
    out: Path | None
    memory_wall: dict | None = None  # `cost.memory_wall.memory_wall`: measured per run, so never compared on resume

    def as_dict(self) -> dict:
        from .hf import NOTES

        return {
            "config": self.config,
            "machine": self.machine,
            "memory_wall": self.memory_wall,
            "methods": self.labels,
            "trace_fields": list(TRACE_FIELDS),
            "prompts_done": len({r["question_id"] for r in self.rows}),
            "prompts_total": self.prompts_total,
            "summary": summarize(self.rows, self.labels, baseline=BASELINE),
            "notes": NOTES,
            "rows": self.rows,
        }

    def save(self) -> dict:
        d = self.as_dict()
        if self.out is not None:
            write_json(self.out, d)
        return d
