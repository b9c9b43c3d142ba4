"""Figures and HTML of notebook 06 (Medusa decoding), without a browser: synthetic traces, one tiny-model run."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest
import torch

import specdec_lab as S
from specdec_lab.accept.losslessness import LogitsTable, drift_baseline, typical_drift
from specdec_lab.generate import GenerationResult, StepTrace
from specdec_lab.medusa import MedusaHeads
from specdec_lab.sampling import Sampling
from specdec_lab.trees import BudgetChoice
from specdec_lab.viz.decoding import (
    STEP_COLORS,
    budget_figure,
    drift_figure,
    drift_frame,
    show_steps,
    speed_table,
    step_callback,
    step_label,
    step_tree_figure,
    steps_html,
)


def _step(tokens, parents, path, emitted):
    return StepTrace(
        tree_tokens=tokens,
        tree_parents=parents,
        path=path,
        emitted=emitted,
        t_propose=0.001,
        t_verify=0.01,
        t_accept=0.0001,
        info={"nodes": len(tokens) - 1},
    )


@pytest.fixture
def trace():
    """Two steps: a 4-node tree with a 2-node accepted path (3 tokens emitted), then a rejected chain."""
    steps = [
        _step([10, 11, 12, 13], [-1, 0, 0, 1], [0, 1, 3], [11, 13, 14]),
        _step([14, 15, 16], [-1, 0, 1], [0], [17]),
    ]
    return GenerationResult(
        tokens=[11, 13, 14, 17],
        prompt_tokens=[1, 2, 10],
        text=None,
        stop_reason="max_new_tokens",
        method="medusa",
        seconds=0.1,
        prefill_seconds=0.01,
        steps=steps,
        forwards=2,
    )


class FakeTokenizer:
    def decode(self, ids, **_):
        return "".join(f"<{i}>" if i != 13 else " a\n" for i in ids)


def test_step_tree_figure_highlights_the_accepted_path(trace):
    fig = step_tree_figure(trace, 0)
    assert isinstance(fig, go.Figure)
    names = [t.name for t in fig.data]
    assert names == ["edges", "accepted path", "nodes"]
    path = fig.data[1]
    assert len(path.x) == 3  # root, node 1, node 3
    nodes = fig.data[2]
    assert list(nodes.marker.color).count("#2ca02c") == 3
    assert fig.layout.title.text.startswith("step 0 (of steps 0–1): ")  # counted from 0, the range spelled out
    assert "2 of 3 proposed accepted" in fig.layout.title.text


def test_step_tree_figure_callback_every_step_and_bounds(trace):
    for s in range(len(trace.steps)):
        assert step_tree_figure(trace, s).layout.title.text.startswith(f"step {s} (of steps 0–1)")
    rejected = step_tree_figure(trace, 1)
    assert list(rejected.data[-1].marker.color).count("#2ca02c") == 1  # only the root is on the path
    with pytest.raises(IndexError, match="steps 0..1"):
        step_tree_figure(trace, 2)
    with pytest.raises(IndexError):
        step_tree_figure(trace, -1)


def test_step_callback_drives_an_ipywidgets_slider(trace):
    import ipywidgets as w

    callback = step_callback(trace, FakeTokenizer())
    assert callback.__name__ == "show_step"
    assert callback(1).layout.title.text.startswith("step 1 (of steps 0–1)")
    seen = []
    ui = w.interactive(lambda step: seen.append(callback(step)), step=w.IntSlider(value=0, min=0, max=1))
    ui.children[0].value = 1  # moving the slider calls the callback
    assert [f.layout.title.text.split(":")[0] for f in seen[-1:]] == ["step 1 (of steps 0–1)"]
    assert "<11>" in seen[0].layout.title.text


def test_step_label_uses_the_tokenizer(trace):
    assert "<11> a\\n<14>" in step_label(trace, 0, FakeTokenizer())
    assert "[11][13][14]" in step_label(trace, 0)


def test_no_trace_is_an_error(trace):
    trace.steps = []
    with pytest.raises(ValueError, match="trace=True"):
        step_tree_figure(trace, 0)
    with pytest.raises(ValueError, match="trace=True"):
        steps_html(trace)


def test_steps_html_colours_by_step_and_marks_drafts(trace):
    html = steps_html(trace, FakeTokenizer())
    assert html.count('class="sd-step"') == 2
    assert html.count('class="sd-tok"') == len(trace.tokens)
    assert STEP_COLORS[0] in html and STEP_COLORS[1] in html
    assert html.count("font-weight:bold") == 2  # the two accepted drafts of step 0
    assert html.count("bonus (target)") == 2  # one bonus token per step
    assert "↵<br>" in html  # a newline breaks the line
    assert "mean accepted 2.00" in html
    assert show_steps(trace).data == steps_html(trace)


def test_budget_figure_marks_the_chosen_budget():
    table = [
        {"budget": 0, "depth": 0, "expected_length": 1.0, "rate": 10.0},
        {"budget": 1, "depth": 1, "expected_length": 1.4, "rate": 12.0},
        {"budget": 2, "depth": 1, "expected_length": 1.5, "rate": 11.0},
    ]
    choice = BudgetChoice(budget=1, paths=[(0,)], expected_length=1.4, seconds=0.1, rate=12.0, depth=1, table=table)
    fig = budget_figure(choice)
    assert list(fig.data[0].y) == [1.0, 1.4, 1.5]
    assert list(fig.data[1].y) == pytest.approx([1.0, 1.2, 1.1])
    chosen = [t for t in fig.data if t.name.startswith("chosen")]
    assert [list(t.x) for t in chosen] == [[1], [1]]
    assert list(chosen[1].y) == pytest.approx([1.2])
    assert "n = 1" in fig.layout.title.text
    with pytest.raises(ValueError):
        budget_figure(BudgetChoice(budget=0, paths=[], expected_length=1.0, seconds=0.1, rate=1.0))


def test_speed_table_from_a_bench_summary():
    summary = {
        "autoregressive": {"tokens_per_s": 10.0, "mean_accepted": 1.0, "speedup": 1.0, "new_tokens": 149,
                           "prompts": 4, "identical_to_autoregressive": 1.0},
        "medusa": {"tokens_per_s": 13.0, "mean_accepted": 1.8, "speedup": 1.3, "new_tokens": 149,
                   "prompts": 4, "identical_to_autoregressive": 1.0},
    }  # fmt: skip
    df = speed_table(summary)
    assert list(df.index) == ["autoregressive", "medusa"]
    assert df.loc["medusa", "speed-up vs autoregressive"] == 1.3
    assert df.loc["medusa", "mean accepted"] == 1.8
    # the bench's new_tokens is a sum over the prompts: the column says so, and a count stays an int
    assert df.loc["medusa", "new tokens (all prompts)"] == 149 and df.loc["medusa", "prompts"] == 4
    assert df["new tokens (all prompts)"].dtype.kind == "i" and "new tokens" not in df.columns


@pytest.fixture(scope="module")
def drift_tables():
    target = S.tiny_model(vocab_size=6, seed=0)
    draft = S.tiny_model(vocab_size=6, seed=0)
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in draft.named_parameters():
            if "layers" in name:
                p.add_(torch.randn(p.shape, generator=gen) * 0.3 * p.std())
    with torch.random.fork_rng(devices=[]):
        return LogitsTable(target, [1, 2]).fill(3), LogitsTable(draft, [1, 2]).fill(3)


def test_drift_frame_and_figure_on_a_tiny_model(drift_tables):
    target, draft = drift_tables
    floors, drifts = {}, []
    for t in (0.7, 1.0):
        s = Sampling(temperature=t)
        floors[t] = drift_baseline(target, draft, s, k=2, trials=60, n=2, seed=0)
        for eps in (0.01, 0.25):
            drifts.append(typical_drift(target, draft, s, epsilon=eps, delta=math.sqrt(eps), k=2, trials=60, n=2))
    frame = drift_frame(drifts, floors)
    assert frame.shape[0] == 4
    assert list(frame.index.get_level_values("temperature")) == [0.7, 0.7, 1.0, 1.0]
    assert frame.loc[(1.0, 0.25), "TV floor (exact rule)"] == floors[1.0]["tv"]
    assert frame.loc[(0.7, 0.01), "delta"] == 0.1
    assert (frame["trials"] == 60).all()
    fig = drift_figure(frame)
    assert len(fig.data) == 2 * 2 * 2  # per temperature: (typical, floor) x (TV, KL)
    assert list(fig.data[0].x) == [0.01, 0.25]
    assert list(fig.data[0].y) == list(frame.xs(0.7, level="temperature")["TV"])
    assert fig.data[1].line.dash == "dash"
    for axis in (fig.layout.xaxis, fig.layout.xaxis2):  # log axes ticked at the measured ε only, readable
        assert axis.type == "log" and list(axis.tickvals) == [0.01, 0.25] and list(axis.ticktext) == ["0.01", "0.25"]


def test_figures_of_a_real_medusa_run_on_a_tiny_model():
    torch.manual_seed(0)
    model = S.tiny_model(seed=0)
    heads = MedusaHeads.for_model(model, num_heads=2)
    result = S.generate(model, [5, 6, 7, 8], method="medusa", heads=heads, tree="cartesian:2,2", max_new_tokens=6)
    assert result.steps
    for s, step in enumerate(result.steps):
        fig = step_tree_figure(result, s)
        assert len(fig.data[-1].x) == len(step.tree_tokens)
    html = steps_html(result)
    assert html.count('class="sd-tok"') == len(result.tokens)
