"""The speedup lab (specdec_lab/lab/experiment.py) and its dashboard (lab/speedup.py), on a tiny random model."""

import json
from dataclasses import dataclass

import pytest
import torch

from specdec_lab import tiny_model
from specdec_lab.io import load_prompts
from specdec_lab.lab.experiment import (
    PROVENANCE,
    experiment_record,
    fastest,
    forward_sizes,
    provenance,
    run_experiment,
)
from specdec_lab.lab.lookup_ceiling import ceiling_by_method, lookup_ceiling
from specdec_lab.lab.speedup import LIVE_ONLY, OWN_PROMPT, LabDashboard
from specdec_lab.lab.widgets import PLACEHOLDER, Snapshot
from specdec_lab.proposers import METHODS, register_method
from specdec_lab.proposers.base import param
from specdec_lab.proposers.prompt_lookup import PromptLookupProposer
from specdec_lab.proposers.registry import MethodSpecError, method_parameters
from specdec_lab.viz.lab_figures import (
    accepted_figure,
    lab_step_tree_figure,
    numbers_html,
    provenance_html,
    steps_slider_figure,
)

IDS = [5, 7, 9, 11, 13, 2, 3] * 6
# the target's own first layer drafts: some steps accept drafts, some accept none, one proposes nothing
MIXED = "layer_skip:n_layers=1:draft_length=3"


@pytest.fixture(scope="module")
def model():
    return tiny_model()


@pytest.fixture(scope="module")
def mixed(model):
    return run_experiment(model, IDS, MIXED, max_new_tokens=24)


@dataclass
class DummyConfig:
    width: int = param(3, "how wide")
    rate: float = param(0.5, "a float")
    strict: bool = param(False, "a flag")
    mode: int | str = "auto"  # a union: shown as text; a plain default has no help


class DummyProposer(PromptLookupProposer):
    name = "dummy_lab"

    def __init__(self, config: DummyConfig | None = None):
        super().__init__(max_draft=2, draft_length=2)
        self.dummy = config


@pytest.fixture
def dummy_method():
    register_method("dummy_lab", DummyProposer, DummyConfig)
    yield "dummy_lab"
    del METHODS["dummy_lab"]


# ---- method_parameters ----------------------------------------------------------------------------------
def test_method_parameters_cover_every_registered_method():
    for name, method in METHODS.items():
        params = method_parameters(name)
        if method.config is None:
            assert params == []
            continue
        names, own = [p.name for p in params], list(method.config.__dict__.get("__annotations__", {}))
        assert sorted(names) == sorted(method.config.__dataclass_fields__)
        assert names[: len(own)] == own  # what the method declares itself leads; a shared base's fields follow
        defaults = method.config()
        assert all(p.default == getattr(defaults, p.name) for p in params)
    by_name = {p.name: p for p in method_parameters("prompt_lookup")}
    assert by_name["max_draft"].kind == "int" and by_name["draft_length"].kind == "text"
    assert "k_max" in by_name["max_draft"].help


def test_a_newly_registered_method_appears(model, dummy_method):
    params = {p.name: p for p in method_parameters(dummy_method)}
    assert {n: p.kind for n, p in params.items()} == {"width": "int", "rate": "float", "strict": "bool", "mode": "text"}
    assert params["width"].help == "how wide" and params["mode"].type == "int | str" and params["mode"].help == ""
    dash = LabDashboard(model, method=dummy_method)
    assert set(dash.param_widgets) == set(params)
    dash.param_widgets["strict"][1].value = True
    dash.param_widgets["mode"][1].value = "4"
    assert dash.spec() == "dummy_lab:strict=true:mode=4"
    lab = run_experiment(model, IDS, dash.spec(), max_new_tokens=8)  # it runs, its bool parsed back
    assert lab.params == {"strict": True, "mode": 4} and lab.identical


def test_unknown_method_and_bad_values_are_named(model):
    with pytest.raises(ValueError, match="not a registered method"):
        run_experiment(model, IDS, "hf_generate", max_new_tokens=4)
    with pytest.raises(MethodSpecError, match="max_draft='x'"):
        run_experiment(model, IDS, "prompt_lookup:max_draft=x", max_new_tokens=4)
    with pytest.raises(ValueError, match="not a bool"):
        run_experiment(model, IDS, "lookahead:pool_from_prompt=maybe", max_new_tokens=4)
    with pytest.raises(ValueError, match="give it once"):
        run_experiment(model, IDS, "prompt_lookup:temperature=0.5", temperature=0.0, max_new_tokens=4)


# ---- run_experiment -------------------------------------------------------------------------------------
def test_provenance_adds_up(mixed):
    counts = mixed.provenance_counts
    assert sum(counts.values()) == len(mixed.result.tokens) == 24
    assert all(counts[k] > 0 for k in PROVENANCE), counts  # this spec exercises all three
    assert counts["accepted draft"] == sum(mixed.accepted_lengths)
    assert len(mixed.accepted_lengths) == mixed.result.forwards
    assert mixed.identical is True  # greedy: lossless
    plain = [s for s in mixed.result.steps if s.proposed == 0]
    assert counts["plain step"] == sum(len(s.emitted) for s in plain)


def test_prompt_lookup_greedy_is_identical_to_autoregressive(model):
    lab = run_experiment(model, IDS, "prompt_lookup:draft_length=3", max_new_tokens=20)
    assert lab.identical is True and lab.result.tokens == lab.baseline.tokens
    assert lab.baseline.method == "autoregressive"
    assert provenance(lab.baseline.steps) == ["plain step"] * 20
    assert lab.speedup == pytest.approx(lab.tokens_per_s / lab.baseline_tokens_per_s)


def test_lookup_ceiling_is_what_a_greedy_prompt_lookup_run_accepts(model):
    """Replaying the answer through the lookup's matcher: at the answer position where each step of a greedy
    prompt-lookup run began, run(t) capped by the drafts offered is what the step accepted."""
    from specdec_lab import generate

    ids = (torch.randint(0, 256, (2,), generator=torch.Generator().manual_seed(3)).tolist() * 15)[:30]
    r = generate(model, ids, method="prompt_lookup", max_new_tokens=40, draft_length=4, max_draft=4)
    ceiling = lookup_ceiling(ids, r.tokens, cap=4)
    assert ceiling["positions"] == len(ceiling["runs"]) == len(r.tokens)
    t = 0
    for s in r.steps:
        assert s.accepted == min(ceiling["runs"][t], s.proposed), t
        t += len(s.emitted)
    assert sum(s.accepted for s in r.steps) > 0  # this prompt makes the tiny model repeat: not vacuous
    assert ceiling["right"] == sum(k > 0 for k in ceiling["runs"]) / len(r.tokens)
    # by method: pooled over answers, weighted by positions; a missing prompt is named
    rows = [{"question_id": 1, "method": "m", "tokens": r.tokens}, {"question_id": 2, "method": "m", "tokens": [1]}]
    pooled = ceiling_by_method(rows, {1: ids, 2: [1, 1]}, cap=4)["m"]
    assert pooled["positions"] == len(r.tokens) + 1 and pooled["answers"] == 2
    assert pooled["mean_run"] == pytest.approx((sum(ceiling["runs"]) + 1) / (len(r.tokens) + 1))
    with pytest.raises(KeyError, match="question 3"):
        ceiling_by_method([{"question_id": 3, "method": "m", "tokens": []}], {})


def test_stop_from_the_hook(model):
    phases = []

    def hook(phase, step, trace, emitted):
        phases.append(phase)
        return False if phase == "method" and step == 2 else None

    lab = run_experiment(model, IDS, "prompt_lookup:draft_length=3", max_new_tokens=20, on_step=hook)
    assert lab.stopped and lab.baseline is None and lab.result.stop_reason == "stopped"
    assert len(lab.result.steps) == 3 and "baseline" not in phases and phases[0] == "warmup"
    assert json.loads(json.dumps(lab.to_dict()))["stopped"] is True


def test_to_dict_is_json_and_has_the_sweep_keys(mixed):
    d = json.loads(json.dumps(mixed.to_dict()))
    for key in ("method", "temperature", "speedup", "mean_accepted", "tokens_per_s", "baseline_tokens_per_s",
                "identical", "new_tokens", "machine"):  # fmt: skip
        assert key in d, key
    assert d["method"] == MIXED and d["new_tokens"] == 24 and d["identical"] is True
    assert d["baseline_step_ms"] > 0 and d["timing_spread"] >= 1 and d["noisy"] == (d["timing_spread"] > 1.5)
    assert len(d["steps"]) == len(d["accepted_lengths"]) and len(d["provenance"]) == 24
    rec = json.loads(json.dumps(experiment_record([mixed, mixed])))
    assert rec["new_tokens"] == 48 and rec["identical"] is True and len(rec["runs"]) == 2
    assert rec["speedup"] == pytest.approx(mixed.speedup, rel=1e-3)
    # the verify forward's size (a sweep's "tokens verified / forward"): root + candidates + non-candidates
    steps = mixed.result.steps
    assert d["verified_per_forward"] == pytest.approx(sum(len(s.tree_tokens) for s in steps) / len(steps), abs=1e-6)
    assert d["verified_per_forward"] == pytest.approx(1 + d["proposed_per_forward"], abs=1e-6)
    assert d["extra_per_forward"] == 0 and d["proposed_per_forward"] > 0
    assert rec["verified_per_forward"] == pytest.approx(d["verified_per_forward"], abs=1e-6)


def test_forward_sizes_count_lookahead_window_cells(model):
    lab = run_experiment(model, IDS, "lookahead:W=2:N=3:G=2", max_new_tokens=12, warmup_tokens=0)
    rec = experiment_record([lab])
    assert rec["extra_per_forward"] > 0  # the window: verified every step, never accepted
    assert rec["verified_per_forward"] == pytest.approx(1 + rec["proposed_per_forward"] + rec["extra_per_forward"])
    assert forward_sizes([]) == dict.fromkeys(("verified_per_forward", "proposed_per_forward", "extra_per_forward"))


def test_figures_and_html(mixed):
    html = provenance_html(mixed)
    assert html.count("lab-accepted-draft") == mixed.provenance_counts["accepted draft"] + 1  # + legend
    assert "speed-up" in numbers_html(mixed)
    assert len(accepted_figure(mixed).data) == 4
    fig = steps_slider_figure(mixed, step=1)
    assert len(fig.layout.sliders[0].steps) == len(mixed.result.steps)
    assert sum(bool(t.visible) for t in fig.data) == len(lab_step_tree_figure(mixed.result, 1).data)


# ---- the dashboard --------------------------------------------------------------------------------------
def test_dashboard_builds_for_every_method(model):
    dash = LabDashboard(model, load_prompts())
    assert "specdec-lab" in dash.widget._dom_classes
    for name in sorted(METHODS):
        dash.method.value = name
        assert [n for n in dash.param_widgets] == [p.name for p in method_parameters(name)]
        assert dash.spec() == name  # defaults only: the bare name


def test_dashboard_prompt_picker_tells_the_truth(model):
    prompts = load_prompts()
    dash = LabDashboard(model, prompts)
    assert dash.picker.value == OWN_PROMPT and "no prompt" in dash.prompt_state.value
    dash.picker.value = 2
    assert (
        dash.prompt.value == prompts[2].text and f"shipped prompt {prompts[2].question_id}" in dash.prompt_state.value
    )
    dash.prompt.value += " (edited)"
    assert dash.picker.value == OWN_PROMPT and "your own prompt" in dash.prompt_state.value
    dash.prompt.value = prompts[5].text  # typed (pasted) text of a shipped prompt is recognised
    assert dash.picker.value == 5


def test_dashboard_run_stop_and_step_slider(model, mixed):
    dash = LabDashboard(model, initial=mixed)
    assert dash.spec() == MIXED and dash.step.max == len(mixed.result.steps) - 1
    dash.set_spec("prompt_lookup:max_draft=4:draft_length=3")
    assert dash.param_widgets["max_draft"][1].value == 4
    dash.prompt.value = " ".join(map(str, IDS))
    dash.max_new_tokens.value = 12
    lab = dash.on_run(background=False)
    assert lab is not None and lab.spec == "prompt_lookup:max_draft=4:draft_length=3"
    assert dash.last is lab and len(lab.result.tokens) == 12 and "speed-up" in dash.numbers.value
    assert dash.progress.value == 24 and not dash.run_button.disabled
    # the figures reach the Output widgets as plotly mime data (what the browser draws), and the step
    # slider swaps the tree for another step's
    plotly = "application/vnd.plotly.v1+json"
    assert [plotly in out["data"] for out in (*dash.plot.outputs, *dash.tree.outputs)] == [True, True]
    before = dash.tree.outputs[0]["data"][plotly]
    dash.step.value = 0 if dash.step.value else 1
    assert dash.tree.outputs[0]["data"][plotly] != before
    dash._stop.set()  # Stop pressed before the first step: the warm-up ends the run
    dash.on_stop()
    lab = dash._work(IDS, dash.spec(), 0.0, 12)
    assert lab.stopped and lab.result.tokens == [] and "stopped" in dash.numbers.value
    dash.prompt.value = ""
    assert dash.on_run(background=False) is None and "empty" in dash.status.value


def test_fastest_ties_runs_within_the_tolerance(mixed):
    """The fastest run, or every run within rel_tol of it (course.compare's rule), fastest first; a run stopped
    before its baseline (no speed-up) is never among them."""
    from dataclasses import replace

    from specdec_lab.generate import GenerationResult

    def at(speedup: float):
        base = replace(mixed.baseline, seconds=1.0, tokens=[1] * 10)
        return replace(mixed, result=replace(mixed.result, seconds=1.0 / speedup, tokens=[1] * 10), baseline=base)

    a, b, c = at(1.30), at(1.25), at(0.90)
    assert [r.speedup for r in (a, b, c)] == pytest.approx([1.30, 1.25, 0.90])
    assert fastest([c, b, a]) == [a]
    assert fastest([c, b, a], rel_tol=0.05) == [a, b]  # 0.05 is within 5% of 1.30: tied
    assert fastest([c, b, a], rel_tol=0.5) == [a, b, c]
    unfinished = replace(mixed, baseline=None, result=GenerationResult([], [], "", "stopped", "x", 0.0, 0.0))
    assert fastest([unfinished]) == [] and fastest([]) == [] and fastest([unfinished, c]) == [c]


@pytest.fixture
def shown(monkeypatch):
    """What `IPython.display.display` publishes, with display handles that record their updates."""
    import IPython.display

    out: list = []

    class Handle:
        def __init__(self):
            self.updates = []

        def update(self, obj, raw=False):
            self.updates.append(obj)

    def fake_display(*objs, raw=False, display_id=None, **kwargs):
        out.extend(objs)
        return Handle() if display_id else None

    monkeypatch.setattr(IPython.display, "display", fake_display)
    return out


def test_dashboard_shows_the_snapshot_it_promises_and_retires_it(model, mixed, shown):
    """A stored notebook keeps no widget state: under the placeholder ("the default view follows below") the
    dashboard displays a static snapshot of its default view, which gives way when the live view redraws."""
    dash = LabDashboard(model, initial=mixed)
    dash._ipython_display_()
    widget, *snapshot = shown
    assert widget["text/plain"] == PLACEHOLDER and "application/vnd.jupyter.widget-view+json" in widget
    assert "Default view" in snapshot[0]["text/html"]
    assert sum("application/vnd.plotly.v1+json" in b for b in snapshot) == 2  # tokens per step, the step's tree
    assert dash.snapshot.handles
    dash.step.value = 0 if dash.step.value else 1  # the live view redraws: the copy goes
    assert dash.snapshot.handles == []

    shown.clear()
    LabDashboard(model)._ipython_display_()  # nothing to show yet: no snapshot, and no promise of one
    assert [b["text/plain"] for b in shown] == [LIVE_ONLY]

    shown.clear()
    given = Snapshot("<b>mine</b>", what="a view of my own")
    LabDashboard(model, initial=mixed, snapshot=given)._ipython_display_()
    assert "a view of my own" in shown[1]["text/html"] and shown[2]["text/html"] == "<b>mine</b>"
