"""Notebook 07, section 6 (`lab.lookahead.paper_sizes_frame`, `viz.lookahead_sweep.paper_sizes_figure`) and the
width of notebook 07's figures (at most the 950 px output area of a laptop screen), without a model."""

from __future__ import annotations

import pytest

from specdec_lab import Tree
from specdec_lab.bench.trace import TraceStep
from specdec_lab.cost import CostCurve, flat_curve
from specdec_lab.lab.lookahead import PAPER_METHODS, PAPER_SIZES, paper_sizes_frame
from specdec_lab.viz.lookahead import lookahead_mask_figure, lookahead_tree_figure
from specdec_lab.viz.lookahead_sweep import cost_figure, paper_sizes_figure, sweep_figure, sweep_frame

MAX_WIDTH = 950
PAPER = "lookahead:" + ":".join(f"{k}={v}" for k, v in PAPER_SIZES.items())


def _step(nodes: int, candidates: int, emitted: int) -> list:
    """A stored trace step (`bench.trace.TraceStep`): the sizes given, the phases' seconds made up."""
    return TraceStep(nodes, candidates, emitted, 0.001, 0.03, 0.001, nodes == 1).stored()


def _results():
    """A bench results file's shape: two prompts, the three methods of PAPER_METHODS."""
    rows = []
    for qid, cat in (("1", "coding"), ("9", "math")):
        rows.append({"question_id": qid, "category": cat, "method": "autoregressive", "tokens_per_s": 20.0,
                     "mean_accepted": 1.0, "proposer": {}, "trace": {"steps": [_step(1, 0, 1)] * 4}})  # fmt: skip
        rows.append({"question_id": qid, "category": cat, "method": "lookahead", "tokens_per_s": 24.0,
                     "mean_accepted": 1.4, "proposer": {"steps": 10, "window_steps": 5, "W": 2 if qid == "1" else 0},
                     "trace": {"steps": [_step(8, 2, 2), _step(4, 3, 1)]}})  # fmt: skip
        rows.append({"question_id": qid, "category": cat, "method": PAPER, "tokens_per_s": 10.0,
                     "mean_accepted": 2.0, "proposer": {"steps": 8, "window_steps": 8, "W": 15},
                     "trace": {"steps": [_step(100, 40, 3), _step(90, 30, 1)]}})  # fmt: skip
    summary = {
        "autoregressive": {"prompts": 2, "tokens_per_s": 20.0, "mean_accepted": 1.0, "speedup": 1.0,
                           "speedup_95": [1.0, 1.0], "identical_to_autoregressive": 1.0},
        "lookahead": {"prompts": 2, "tokens_per_s": 24.0, "mean_accepted": 1.4, "speedup": 1.2,
                      "speedup_95": [1.1, 1.3], "identical_to_autoregressive": 1.0},
        PAPER: {"prompts": 2, "tokens_per_s": 10.0, "mean_accepted": 2.0, "speedup": 0.5,
                "speedup_95": [0.4, 0.6], "identical_to_autoregressive": 1.0},
    }  # fmt: skip
    return {"methods": PAPER_METHODS.split(","), "summary": summary, "rows": rows}


def test_paper_sizes_frame_reads_sizes_traces_and_the_sizer():
    frame = paper_sizes_frame(_results())
    assert list(frame.index) == ["lookahead", PAPER]  # autoregressive is the baseline, not a row
    auto, paper = frame.loc["lookahead"], frame.loc[PAPER]
    assert (auto["W"], auto["N"], auto["G"]) == ("auto", 4, 8)  # LookaheadConfig's defaults
    assert (paper["W"], paper["N"], paper["G"]) == (15, 5, 15)
    assert auto["widths chosen"] == "0, 2" and paper["widths chosen"] == "15"
    assert auto["tokens verified / forward"] == pytest.approx(6.0)  # (8 + 4 + 8 + 4) / 4 steps
    assert paper["tokens verified / forward"] == pytest.approx(95.0)
    assert auto["steps with a window"] == pytest.approx(0.5) and paper["steps with a window"] == 1.0
    assert (paper["95% low"], paper["95% high"]) == (0.4, 0.6) and frame["identical to autoregressive"].all()


def test_paper_sizes_figure_compares_per_prompt():
    fig = paper_sizes_figure(_results())
    assert fig.layout.width <= MAX_WIDTH
    speed = [t for t in fig.data if t.name == PAPER and t.xaxis == "x2"][0]
    assert list(speed.y) == pytest.approx([0.5, 0.5]) and list(speed.x) == ["coding (1)", "math (9)"]
    assert {t.name for t in fig.data} == {"lookahead", PAPER}


def test_notebook_07_figures_fit_the_output_area():
    rows = [{"W": w, "N": n, "G": g, "status": "done", "speedup": 1.0, "tokens_per_s": 20.0,
             "baseline_tokens_per_s": 20.0, "mean_accepted": 1.5, "verified_per_forward": 1 + (n - 1) * w,
             "proposed_per_forward": 2.0, "extra_per_forward": (n - 1) * w - 1.0, "identical": True, "noisy": False}
            for w in (2, 4, 8) for n in (3, 4, 5) for g in (2, 4, 8)]  # fmt: skip
    frame = sweep_frame(rows)
    curve = CostCurve(sizes=[1, 8, 64], seconds=[1.0, 1.5, 4.0], tree=True)
    curves = {"cpu": curve, "flat": flat_curve(1.0, up_to=64)}
    assert sweep_figure(frame).layout.width <= MAX_WIDTH
    assert cost_figure(frame, curves).layout.width <= MAX_WIDTH
    # a wide window (the paper's W = 15): the tree and its mask are capped
    W, levels = 15, 4
    tokens = list(range(1, W * levels + 1))
    parents = [-1] + list(range(W - 1)) + [(lv - 1) * W + i for lv in range(1, levels) for i in range(W)]
    tree = Tree(tokens, parents, candidate=[True] + [False] * (len(tokens) - 1))
    assert lookahead_tree_figure(tree, W).layout.width <= MAX_WIDTH
    assert lookahead_mask_figure(tree, W, cache_length=3).layout.width <= MAX_WIDTH


def test_legend_swatches_are_the_colours_of_their_marks():
    tree = Tree([1, 2, 3, 4, 5], [-1, 0, 0, 2, 1])  # a small trie: root, two n-grams
    fig = lookahead_tree_figure(tree, 0, path=[0, 1, 4])
    for trace in fig.data:
        if trace.showlegend is not False and trace.mode and "markers" in trace.mode:
            assert isinstance(trace.marker.color, str), f"{trace.name}: one colour per legend entry"
    assert [t for t in fig.data if t.name == "accepted n-gram token"]
