"""`train.lineage`: the runs behind a drafter folder, oldest first, and their curves stitched on total tokens."""

from __future__ import annotations

import json

import pytest

from specdec_lab.train.lineage import lineage, main, stitched_curve
from specdec_lab.viz.eagle_figures import lineage_figure


def _run(root, name, points, continues=None):
    folder = root / name
    folder.mkdir(parents=True)
    manifest = {"config": {"ttt_steps": 3, "batch_size": 4, "lr": 1e-3}, "train_seconds": 60.0}
    if continues:
        manifest["continues"] = continues
    (folder / "manifest.json").write_text(json.dumps(manifest))
    pts = [{"step": s, "tokens": t, "accuracy": [a]} for s, t, a in points]
    (folder / "curve.json").write_text(json.dumps({"positions": [1], "points": pts}))


def test_a_chain_of_runs_is_stitched_on_total_tokens(tmp_path):
    _run(tmp_path, "a", [(0, 0, 0.0), (5, 100, 0.2)])
    _run(tmp_path, "b", [(0, 0, 0.2), (5, 50, 0.3)], {"run": "a", "tokens_seen": 100})
    _run(tmp_path, "c", [(0, 0, 0.3), (5, 80, 0.4)], {"run": "b", "tokens_seen": 150})
    runs = lineage("c", root=tmp_path)
    assert [r.folder for r in runs] == ["a", "b", "c"] and [r.tokens_before for r in runs] == [0, 100, 150]
    pts = stitched_curve(runs)
    assert [(p["tokens"], p["accuracy"][0], p["run"]) for p in pts] == [
        (0, 0.0, 0), (100, 0.2, 0), (150, 0.3, 1), (230, 0.4, 2)]  # fmt: skip
    assert len(lineage_figure(runs, pts, positions=(1,)).data) == 1


def test_broken_chains_name_the_problem(tmp_path):
    _run(tmp_path, "a", [(0, 0, 0.0)], {"run": "b", "tokens_seen": 0})
    _run(tmp_path, "b", [(0, 0, 0.0)], {"run": "a", "tokens_seen": 0})
    with pytest.raises(ValueError, match="loop"):
        lineage("a", root=tmp_path)
    _run(tmp_path, "c", [(0, 0, 0.0)], {"run": "missing", "tokens_seen": 0})
    with pytest.raises(ValueError, match="missing: not a trained drafter's record"):
        lineage("c", root=tmp_path)


def test_the_shipped_drafter_chains_back_to_a_fresh_one(capsys):
    runs = lineage("data/eagle/smollm2-135m")
    assert runs[-1].folder == "data/eagle/smollm2-135m" and runs[0].tokens_before == 0
    pts = stitched_curve(runs)
    assert all(a["tokens"] <= b["tokens"] for a, b in zip(pts, pts[1:], strict=False))
    assert main(["data/eagle/smollm2-135m"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(runs)
