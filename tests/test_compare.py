"""Several methods side by side (lab/compare.py, viz/comparison.py) and the lab's most instructive step."""

import pytest

from specdec_lab import tiny_model
from specdec_lab.lab.compare import CompareDashboard, compare_methods
from specdec_lab.lab.experiment import instructive_step, run_experiment
from specdec_lab.viz.comparison import comparison_figure, comparison_frame
from specdec_lab.viz.lab_figures import steps_slider_figure

IDS = [5, 7, 9, 11, 13, 2, 3] * 6
SPECS = ["prompt_lookup:draft_length=3", "layer_skip:n_layers=1:draft_length=3"]


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def labs(model):
    return compare_methods(model, IDS, SPECS, max_new_tokens=16, repeats=2, warmup_tokens=2)


def test_compare_runs_every_method_against_one_shared_baseline(labs):
    assert [lab.spec for lab in labs] == SPECS
    base = labs[0].baseline
    assert base is not None and all(lab.baseline is base for lab in labs)  # one autoregressive timing for all
    for lab in labs:
        assert lab.identical and len(lab.result.tokens) == 16 and lab.result.steps
        assert lab.speedup == pytest.approx(lab.tokens_per_s / base.tokens_per_s)
    frame = comparison_frame(labs)
    assert list(frame.index) == [*SPECS, "autoregressive (baseline)"]
    assert frame.loc["autoregressive (baseline)", "tokens per step"] == 1
    assert frame.loc[SPECS[0], "tokens per step"] == pytest.approx(labs[0].mean_accepted)
    assert frame["identical"].all()
    fig = comparison_figure(labs)
    assert fig.layout.width <= 950
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == [*SPECS, "autoregressive"]  # one legend entry per method, its colour the same everywhere
    colors = {t.name: t.line.color for t in fig.data if t.type == "scatter"}
    assert all(t.marker.color == colors[t.name] for t in fig.data if t.type == "bar")


def test_compare_checks_its_specs_and_stops(model):
    with pytest.raises(ValueError, match="twice"):
        compare_methods(model, IDS, ["prompt_lookup", "prompt_lookup"], max_new_tokens=4)
    with pytest.raises(ValueError, match="not a registered method"):
        compare_methods(model, IDS, ["hf_generate"], max_new_tokens=4)
    seen = []

    def stop_in_second_run(phase, step, trace, emitted):
        seen.append(phase)
        return False if len(set(p for p in seen if p != "warmup")) > 1 else None

    labs = compare_methods(model, IDS, SPECS, max_new_tokens=8, warmup_tokens=0, on_step=stop_in_second_run)
    assert labs[0].result.tokens and labs[1].stopped and labs[0].baseline is None


def test_the_most_instructive_step_accepted_part_of_its_proposal(model):
    lab = run_experiment(model, IDS, SPECS[1], max_new_tokens=24)
    steps = lab.result.steps
    i = instructive_step(steps)
    s = steps[i]
    partial = [t for t in steps if 0 < min(t.accepted, len(t.emitted)) < t.proposed]
    if partial:
        assert 0 < s.accepted < s.proposed
        assert s.accepted == max(t.accepted for t in partial)
    assert instructive_step([]) == 0
    fig = steps_slider_figure(lab, step=i)
    assert fig.layout.sliders[0].active == i and fig.layout.height <= 720 + 110 and fig.layout.width <= 950


def test_compare_dashboard_runs_without_a_browser(model, labs):
    dash = CompareDashboard(model, initial=labs)
    assert dash.specs() == SPECS and "tokens per step" in dash.table.value
    dash.prompt.value = " ".join(map(str, IDS))
    dash.methods.value = "prompt_lookup"
    dash.max_new_tokens.value = 6
    out = dash.on_run(background=False)
    assert [lab.spec for lab in out] == ["prompt_lookup"] and dash.last is out and dash.plot.outputs
    dash.methods.value = " , "
    assert dash.on_run(background=False) is None and "at least one method" in dash.status.value
