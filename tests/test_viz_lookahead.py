"""Notebook 07's figures and tables (viz/lookahead*.py), its pool recorder (lab/lookahead.py) and its sweep's
table, on a tiny random model."""

from __future__ import annotations

import pytest
import torch

from specdec_lab import Tree, generate, tiny_model
from specdec_lab.cost import CostCurve, flat_curve
from specdec_lab.lab.lookahead import RecordingLookahead
from specdec_lab.proposers import LookaheadConfig
from specdec_lab.proposers.lookahead import WINDOW, LookaheadProposer, Window
from specdec_lab.viz.jacobi import jacobi_figure, jacobi_frame
from specdec_lab.viz.lookahead import (
    lookahead_mask_figure,
    lookahead_step_callback,
    lookahead_step_figure,
    lookahead_tree_figure,
    node_kinds,
    window_cell,
)
from specdec_lab.viz.lookahead_pool import pool_figure, pool_frame
from specdec_lab.viz.lookahead_sweep import cost_figure, predicted_speedups, sweep_figure, sweep_frame


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3)


def repetitive_prompt(seed=0, length=36, period=6):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(1, 256, (period,), generator=g).tolist()
    return (base * (length // period + 1))[:length]


def _trace(fig, name):
    found = [t for t in fig.data if t.name == name]
    assert found, f"no trace {name!r} in {[t.name for t in fig.data]}"
    return found[0]


# ---- Jacobi -------------------------------------------------------------------------------------------
def test_jacobi_frame_states_agree_with_the_output(model):
    res = generate(model, repetitive_prompt(), method="jacobi", n=4, max_new_tokens=20)
    frame = jacobi_frame(res)
    assert len(frame) == sum(len(s.info["before"]) for s in res.steps)
    # accepted guesses are right; per step their count is the accepted prefix (what the loop emitted)
    assert frame[frame["accepted"]]["right"].all()
    per_step = frame.groupby("step")["accepted"].sum().reindex(range(len(res.steps)), fill_value=0).tolist()
    assert per_step == [s.accepted for s in res.steps] == [s.info["accepted"] for s in res.steps]
    assert set(frame["state"]) <= {0, 1, 2}
    # an accepted guess is a fixed point of the update
    assert frame[frame["accepted"]]["unchanged"].all()
    fig = jacobi_figure(res)
    heat = fig.data[0]
    assert len(heat.z) == len(res.steps) and len(heat.z[0]) == 4
    assert heat.z[0][0] in (0, 1, 2)


def test_jacobi_frame_refuses_other_traces(model):
    res = generate(model, repetitive_prompt(), method="autoregressive", max_new_tokens=3)
    with pytest.raises(ValueError, match="Jacobi"):
        jacobi_frame(res)
    with pytest.raises(ValueError, match="trace"):
        jacobi_frame(generate(model, repetitive_prompt(), method="jacobi", max_new_tokens=3, trace=False))


# ---- the tree and the mask of one step ----------------------------------------------------------------
def _step_tree(W=3, N=3, grams=((30, 31), (30, 32), (40, 41))):
    proposer = LookaheadProposer(W=W, N=N, G=len(grams), pool_from_prompt=False)
    proposer.prompt = [7]
    proposer.window = Window(W, N, proposer._fresh)
    proposer.window.levels = [list(range(11, 11 + W - 1))] + [
        list(range(20 * lvl, 20 * lvl + W)) for lvl in range(1, N - 1)
    ]
    for gram in reversed(grams):
        proposer.pool.add(7, tuple(gram), WINDOW)
    from specdec_lab.proposers import DecodeState

    return proposer.propose(DecodeState(tokens=[1, 2, 7], prompt_length=3, cache_length=2, max_depth=64))


def test_node_kinds_and_cells():
    tree = _step_tree()
    kinds = node_kinds(tree, 3)
    assert kinds == ["root"] + ["window"] * 5 + ["ngram"] * 5
    assert [window_cell(n, 3) for n in range(6)] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    # a window cell's depth (position offset) is l + i
    assert all(tree.depths[n] == sum(window_cell(n, 3)) for n in range(6))
    assert node_kinds(Tree.chain(1, [2, 3]), 0) == ["root", "ngram", "ngram"]


def test_lookahead_tree_figure_places_the_window_as_a_grid_and_the_trie_left():
    tree = _step_tree()
    fig = lookahead_tree_figure(tree, 3, path=[0, 6, 7])
    window = _trace(fig, "window cell (never accepted)")
    assert list(window.x) == [1, 2, 0, 1, 2] and list(window.y) == [0, 0, -1, -1, -1]
    grams = _trace(fig, "verification n-gram")
    assert all(x < 0 for x in grams.x) and sorted(set(grams.y)) == [-2, -1]
    assert len(_trace(fig, "accepted path").x) == 3
    assert list(_trace(fig, "root (last accepted token)").x) == [0]


def test_lookahead_mask_figure_colours_keys_by_branch_and_draws_boundaries():
    tree = _step_tree()
    fig = lookahead_mask_figure(tree, 3, cache_length=5)
    z = fig.data[0].z
    assert len(z) == len(tree) and len(z[0]) == len(tree) + 1
    assert all(row[0] == 1 for row in z)  # the prefix column: visible to all
    assert z[4][1:] == [1, 2, 0, 0, 2, 0, 0, 0, 0, 0, 0]  # cell (1, 1) sees root, (0, 1) and itself
    assert z[7][1:] == [1, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0]  # an n-gram's second token: root, its first, itself
    assert len(fig.layout.shapes) == 4  # root | window | n-grams, one vertical and one horizontal each
    assert len(set(fig.data[0].y)) == len(tree)  # unique labels


# ---- the pool -----------------------------------------------------------------------------------------
def test_recording_lookahead_decodes_the_same_and_reports_the_pool(model):
    ids = repetitive_prompt(1)
    ref = generate(model, ids, max_new_tokens=30).tokens
    proposer = RecordingLookahead(LookaheadConfig(W=4, N=3, G=4))
    res = generate(model, ids, proposer=proposer, max_new_tokens=30)
    assert res.tokens == ref
    frame = pool_frame(res)
    assert len(frame) == len(res.steps)
    assert (frame["pool n-grams"] >= frame["pool n-grams (window)"]).all()
    assert frame["pool n-grams"].is_monotonic_increasing or frame["pool n-grams"].iloc[-1] > 0
    assert frame["accepted"].sum() == proposer.counts["accepted"]
    assert (frame["accepted (text)"] + frame["accepted (window)"]).sum() == proposer.counts["accepted"]
    assert (frame["nodes"] == 1 + frame["window cells"] + frame["n-gram nodes"]).all()
    fig = pool_figure(frame)
    assert {t.name for t in fig.data} >= {"pool: text n-grams", "accepted (window)", "hit rate"}
    # the slider's callback: every step draws (windowed or not), a step out of range raises
    show = lookahead_step_callback(res)
    assert show.__name__ == "show_step"
    windowed = next(i for i, s in enumerate(res.steps) if s.info["W"])
    fig = show(windowed)
    assert "window" in fig.layout.title.text and _trace(fig, "window cell (never accepted)")
    lookahead_step_figure(res, len(res.steps) - 1)
    with pytest.raises(IndexError):
        lookahead_step_figure(res, len(res.steps))


# ---- the sweep's table -------------------------------------------------------------------------------
def _rows():
    """Rows as `python -m specdec_lab.sweep` gathers them (table.json's "rows"; table.csv has the same columns)."""
    rows = []
    for (w, n), (speedup, acc, nodes) in {(2, 3): (0.8, 1.5, 8.0), (0, 3): (1.1, 1.2, 2.0)}.items():
        rows.append(
            {"id": f"W{w}", "status": "done", "W": w, "N": n, "G": 4, "prompt_id": [1, 9], "method": f"lookahead:W={w}",
             "speedup": speedup, "tokens_per_s": 10.0 * speedup, "baseline_tokens_per_s": 10.0, "mean_accepted": acc,
             "verified_per_forward": nodes, "proposed_per_forward": 1.0, "extra_per_forward": nodes - 2.0,
             "identical": True, "noisy": False, "seconds": 50.0}
        )  # fmt: skip
    rows.append({"id": "W4", "status": "failed", "W": 4, "N": 3, "G": 4, "error": "ValueError: no"})
    return rows


def _frame():
    return sweep_frame(_rows())


def test_sweep_frame_and_figure(tmp_path):
    frame = _frame()
    assert list(frame.index) == [(0, 3, 4), (2, 3, 4)]  # sorted; the failed point left out
    assert frame.loc[(2, 3, 4), "tokens verified / forward"] == 8.0
    assert frame.loc[(2, 3, 4), "window cells / forward"] == 6.0 and frame["identical to autoregressive"].all()
    fig = sweep_figure(frame)
    bars = [t for t in fig.data if t.name == "N = 3, G = 4"]
    assert len(bars) == 3 and list(bars[0].x) == ["0", "2"] and list(bars[0].y) == [1.1, 0.8]
    assert "W = 0" in fig.layout.title.text
    # the committed table.csv reads back to the same frame
    pd = pytest.importorskip("pandas")
    path = tmp_path / "table.csv"
    pd.DataFrame(_rows()).to_csv(path, index=False)
    assert sweep_frame(pd.read_csv(path)).equals(frame)
    assert "W = 0" not in sweep_figure(frame.drop(index=(0, 3, 4))).layout.title.text


def test_sweep_frame_names_a_missing_column():
    rows = [{k: v for k, v in r.items() if k != "verified_per_forward"} for r in _rows()]
    with pytest.raises(ValueError, match="verified_per_forward"):
        sweep_frame(rows)


def test_predicted_speedup_on_a_flat_curve_is_the_mean_accepted():
    curve = CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[1.0, 1.2, 1.6, 2.4, 4.0], tree=True)
    flat = flat_curve(curve(1), up_to=64)
    assert flat(64) == flat(1) == 1.0 and flat.sizes == [1, 64]
    pred = predicted_speedups(_frame(), {"cpu": curve, "flat": flat})
    assert pred["predicted (flat)"].tolist() == pytest.approx([1.2, 1.5])
    assert pred["predicted (cpu)"].tolist() == pytest.approx([1.2 / 1.2, 1.5 / 2.4])
    fig = cost_figure(_frame(), {"cpu": curve, "flat": flat})
    assert _trace(fig, "predicted on flat").y.tolist() == pytest.approx([1.2, 1.5])
    assert _trace(fig, "measured").y.tolist() == [1.1, 0.8]


def test_paper_sizes_figure_names_the_machine_the_bench_ran_on():
    """Notebook 07 reads a committed bench file: its figure names that file's CPU, not the one drawing it."""
    from specdec_lab.viz.lookahead_sweep import paper_sizes_figure

    rows = [
        {"question_id": "1", "category": "coding", "method": m, "tokens_per_s": tps, "mean_accepted": acc}
        for m, tps, acc in (("autoregressive", 20.0, 1.0), ("lookahead:W=15:N=5:G=15", 10.0, 2.0))
    ]
    results = {"methods": ["autoregressive", "lookahead:W=15:N=5:G=15"], "rows": rows}
    assert paper_sizes_figure(results | {"machine": {"cpu": "AMD EPYC"}}).layout.title.text.startswith(
        "Lookahead on AMD EPYC: "
    )
    assert paper_sizes_figure(results).layout.title.text.startswith("Lookahead on a CPU: ")
