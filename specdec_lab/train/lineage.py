"""A drafter's whole training: the chain of runs behind a drafter folder, stitched into one curve.

A run that continues another (`train eagle --init-from <folder>`) records in its manifest
`continues = {"run": <folder of the run before>, "tokens_seen": <training tokens before this run>, ...}` and its
`curve.json` counts tokens from its own start. `lineage(folder)` follows `continues` back to a fresh drafter and
returns the runs oldest first; `stitched_curve` shifts each run's points by the tokens seen before it, so the
held-out accuracy per draft position reads against the drafter's total training tokens (every run here is
evaluated on the same held-out rule, so the points are comparable; the runs' settings differ and are listed).

    python -m specdec_lab.train lineage data/eagle/smollm2-135m     # one line per run
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from ..io import REPO_DIR

__all__ = ["Run", "lineage", "stitched_curve"]

REPO = REPO_DIR


@dataclass
class Run:
    folder: str  # as the manifest that points here names it (relative to the repository root)
    manifest: dict
    curve: dict
    tokens_before: int  # training tokens the drafter had seen when this run started

    @property
    def settings(self) -> str:
        c = self.manifest["config"]
        extra = ", prompt positions" if c.get("prompt_positions") else ""
        return f"TTT {c['ttt_steps']} steps, batch {c['batch_size']}, lr {c['lr']:g}{extra}"


def _read(folder: Path) -> tuple[dict, dict]:
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        curve = json.loads((folder / "curve.json").read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{folder}: not a trained drafter's record (manifest.json + curve.json): {e}") from e
    return manifest, curve


def lineage(folder: str | Path, root: str | Path = REPO) -> list[Run]:
    """The runs that made the drafter in `folder`, oldest first (relative folders resolve against `root`)."""
    root, runs, seen = Path(root), [], set()
    name: str | None = str(folder)
    while name is not None:
        path = Path(name) if Path(name).is_absolute() else root / name
        if path.resolve() in seen:
            raise ValueError(f"{path}: the runs' `continues` links form a loop")
        seen.add(path.resolve())
        manifest, curve = _read(path)
        before = manifest.get("continues") or {}
        runs.append(Run(name, manifest, curve, int(before.get("tokens_seen", 0))))
        name = before.get("run")
    return runs[::-1]


def stitched_curve(runs: list[Run]) -> list[dict]:
    """Every run's evaluation points against total training tokens: {"tokens", "accuracy", "run"} (a continuing
    run's first point, its starting drafter, repeats the previous run's last one and is dropped)."""
    out = []
    for i, run in enumerate(runs):
        for j, p in enumerate(run.curve["points"]):
            if i and j == 0 and p.get("step") == 0:
                continue
            out.append({"tokens": run.tokens_before + p["tokens"], "accuracy": p["accuracy"], "run": i})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.train lineage", description=__doc__.split("\n")[0])
    p.add_argument("folder", nargs="?", default="data/eagle/smollm2-135m")
    args = p.parse_args(argv)
    try:
        runs = lineage(args.folder)
    except ValueError as e:
        raise SystemExit(str(e)) from None
    for run in runs:
        last = run.curve["points"][-1]
        print(f"{run.folder}: tokens {run.tokens_before:,} -> {run.tokens_before + last['tokens']:,}, "
              f"{run.manifest['train_seconds'] / 60:.0f} min ({run.settings}); held-out accuracy by position "
              f"{last['accuracy']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
