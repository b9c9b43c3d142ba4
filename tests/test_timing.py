"""timing: compared timings taken in one loop (rotated order), their medians, and neutral sentences on their noise;
kernel_setups: the setups notebook 10 compares switch in place and compute the same forward."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from specdec_lab import cost, tiny_model
from specdec_lab.cost import timing
from specdec_lab.cost.noise import TimingNoise
from specdec_lab.cost.timing import (
    Comparison,
    Contender,
    compare_cost_curves,
    interleaved,
    interleaved_curves,
    rotated,
    rotated_rounds,
    runs_sentence,
    spread_sentence,
)
from specdec_lab.models.attention import ATTENTION, attention_kind, use_gqa_attention
from specdec_lab.models.fast_linear import FastLinear, default_plan, linear_kind, use_fast_linear
from specdec_lab.models.kernel_setups import agreement, attention_setups, linear_setups, plan_by_size, same_as_default

# what the stored outputs must never show (tests/test_notebook_outputs.py)
WARNING = re.compile(r"\b\w*Warning\b|timings? (?:are )?unreliable", re.I)


def test_rotated_puts_each_name_first_equally_often():
    names = ["a", "b", "c"]
    firsts = [rotated(names, r)[0] for r in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]
    assert all(sorted(rotated(names, r)) == names for r in range(6))
    for k in range(9):  # the bench harness's per-prompt order (prompt index + round), as it sliced it before
        assert rotated(names, k) == names[k % 3 :] + names[: k % 3]


def test_rotated_rounds_is_the_one_loop_warmup_unkept_progress_over_the_rounds():
    calls, wrapped = [], []

    def progress(rounds, desc):
        wrapped.append((list(rounds), desc))
        return rounds

    fns = {name: (lambda name=name: calls.append(name) or f"{name}{len(calls)}") for name in "ab"}
    kept = rotated_rounds(fns, repeats=2, warmup=1, progress=progress)
    assert calls == list("abbaab") and wrapped == [([0, 1, 2], "rounds")]
    assert kept == {"a": ["a4", "a5"], "b": ["b3", "b6"]}  # what each timed call returned, in repeat order
    with pytest.raises(ValueError, match="repeats"):
        rotated_rounds(fns, repeats=0)


def test_interleaved_runs_each_fn_once_per_repeat_in_rotated_order():
    calls = []
    fns = {name: (lambda name=name: calls.append(name)) for name in "xyz"}
    times = interleaved(fns, repeats=3, warmup=1)
    assert calls == list("xyzyzxzxyxyz")  # the warm-up round, then three timed ones
    assert {k: len(v) for k, v in times.items()} == {"x": 3, "y": 3, "z": 3}
    assert all(t >= 0 for v in times.values() for t in v)


def test_interleaved_self_timed_keeps_what_each_call_returns():
    seconds = iter([0.5, 0.25, 0.75, 0.125])
    times = interleaved({"a": lambda: next(seconds), "b": lambda: next(seconds)}, repeats=2, warmup=0, self_timed=True)
    assert times == {"a": [0.5, 0.125], "b": [0.25, 0.75]}  # repeat 1 runs b first
    with pytest.raises(ValueError):
        interleaved({"a": lambda: None}, repeats=0)


def _comparison() -> Comparison:
    return Comparison(
        sizes=[1, 4],
        times={"slow": {1: [2.0, 2.0, 2.2], 4: [3.0, 3.0, 3.0]}, "fast": {1: [1.0, 1.0, 1.0], 4: [3.5, 3.5, 3.5]}},
        context=64,
    )


def test_comparison_reads_medians_winners_and_ratios():
    cmp = _comparison()
    assert cmp.curves["slow"].seconds == [2.0, 3.0] and cmp.curves["fast"].seconds == [1.0, 3.5]
    assert cmp.fastest(1) == "fast" and cmp.fastest(4) == "slow"
    assert cmp.wins("fast") == [1] and cmp.wins("slow") == [4]
    assert cmp.ratio("fast", "slow") == pytest.approx([0.5, 3.5 / 3.0])
    assert cmp.noise.repeats == 3 and cmp.noise.per_size[1] > 0 and cmp.noise.per_size[4] == 0


def test_sentences_are_neutral_prose_whatever_the_noise():
    quiet = TimingNoise(per_size={1: 0.02, 4: 0.03}, repeats=7, load_per_core=None)
    busy = TimingNoise(per_size={1: 0.4, 4: 0.6}, repeats=7, load_per_core=None)
    for noise in (quiet, busy):
        text = spread_sentence(noise)
        assert not WARNING.search(text) and "⚠" not in text
    assert "agree to within 2%" in spread_sentence(quiet) or "agree to within 3%" in spread_sentence(quiet)
    assert "busy" in spread_sentence(busy) and "busy" not in spread_sentence(quiet)
    steady = runs_sentence({"a": [1.0, 1.0, 1.01], "b": [2.0, 2.0, 2.0]})
    noisy = runs_sentence({"a": [1.0, 2.0, 3.0], "b": [2.0, 2.0, 2.0]})
    assert "agree" in steady and "busy" in noisy and not WARNING.search(steady + noisy)
    assert "single sample" in runs_sentence({"a": [1.0], "b": [2.0]})


def test_interleaved_curves_run_every_contender_once_per_repeat_in_rotated_order(monkeypatch):
    """Each contender's pass (install first, its own model and compiled step) runs once per round, the order
    rotated; the comparison keeps each size's timed seconds per repeat and their medians."""
    ran = []

    def one_pass(model, sizes, context, repeats, warmup, step):
        assert (repeats, warmup) == (1, 0)
        ran.append((model, step))
        t = len(ran)  # the r-th pass of the loop takes r seconds at every size
        return cost.CostCurve(sizes=list(sizes), seconds=[t * n for n in sizes], device="dev", context=context)

    monkeypatch.setattr(timing, "measure_cost_curve", one_pass)
    installed = []
    contenders = {
        "eager": Contender("m1", install=lambda: installed.append(len(ran))),
        "compiled": Contender("m1", step="step"),
        "int8": Contender("m2"),
    }
    cmp = interleaved_curves(contenders, sizes=[1, 4], context=8, repeats=3, warmup=1)
    e, c, i = ("m1", None), ("m1", "step"), ("m2", None)
    assert ran == [e, c, i, c, i, e, i, e, c, e, c, i]  # warm-up round, then rounds rotated by 1, 2, 3
    assert installed == [0, 5, 7, 9]  # just before each of its passes
    assert cmp.times["eager"] == {1: [6, 8, 10], 4: [24, 32, 40]} and cmp.times["int8"][1] == [5, 7, 12]
    assert cmp.curves["compiled"].seconds == [9, 36] and cmp.device == "dev" and cmp.context == 8
    cmp = compare_cost_curves("m", {"x": lambda: None, "y": lambda: None}, sizes=[1], context=8, repeats=2, warmup=0)
    assert cmp.setups == ["x", "y"] and ran[-4:] == [("m", None)] * 4


@pytest.fixture
def model():
    torch.manual_seed(0)
    m = use_gqa_attention(use_fast_linear(tiny_model(num_layers=2, num_heads=4, num_kv_heads=2, seed=5)))
    for i, layer in enumerate(m.modules()):  # a "measured" plan that differs from the default at 3 rows
        if isinstance(layer, FastLinear):
            plan = list(default_plan(True))
            plan[3] = "wx" if i % 2 else "stock"
            layer.plan = tuple(plan)
    return m


def test_linear_setups_switch_in_place_and_agree(model):
    setups = linear_setups(model)
    assert list(setups) == ["stock nn.Linear", "W xᵀ only", "default plan", "measured plan"]
    setups["stock nn.Linear"]()
    assert linear_kind(model) == "stock" and any(type(m) is nn.Linear for m in model.modules())
    setups["default plan"]()
    assert linear_kind(model) != "tuned"
    same = agreement(model, setups, rows=(1, 2, 3, 8), context=8)
    assert linear_kind(model) == "tuned"  # the last setup it ran: back to the measured plan
    assert same["same_tokens"] and same["max_abs_diff"] < 1e-4 and same["forwards"] == 16
    assert 3 not in same_as_default(model, [1, 2, 3, 8]) and same_as_default(model, [1, 2, 8]) == [1, 2, 8]
    kernels = plan_by_size(model, [1, 3])
    assert all(set(by_n) == {1, 3} for by_n in kernels.values())
    assert {by_n[3] for by_n in kernels.values()} <= {"wx", "stock"}
    with pytest.raises(ValueError):
        linear_setups(tiny_model())


def test_attention_setups_and_interleaved_curves(model):
    setups = attention_setups(model)
    assert list(setups) == ["sdpa", ATTENTION]
    assert agreement(model, setups, rows=(1, 3), context=8)["max_abs_diff"] == 0.0
    cmp = compare_cost_curves(model, setups, sizes=[1, 2], context=8, repeats=2, warmup=0)
    assert attention_kind(model) in ("sdpa", ATTENTION)
    assert cmp.setups == ["sdpa", ATTENTION] and cmp.sizes == [1, 2] and cmp.context == 8
    assert all(len(cmp.times[s][n]) == 2 for s in cmp.setups for n in cmp.sizes)
    assert set(cmp.curves) == {"sdpa", ATTENTION} and cmp.fastest(2) in cmp.setups
