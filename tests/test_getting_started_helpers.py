"""Notebook 00's helpers (`specdec_lab.lab.getting_started`): the timed run at the median, its time split into
parts that add up, and which benchmark categories the prompts' spread lets a sentence call lowest or highest
(tested with the numbers reversed, and with a tie)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specdec_lab.cost.curve import CostCurve
from specdec_lab.cost.noise import TimingNoise
from specdec_lab.lab.getting_started import category_extremes, median_run, split_run, timed_runs


def test_timed_runs_keeps_each_result_beside_its_seconds():
    calls = iter(range(100))
    seconds, results = timed_runs({"a": lambda: ("a", next(calls)), "b": lambda: ("b", next(calls))}, repeats=3)
    assert [len(seconds[n]) for n in "ab"] == [3, 3] and all(s >= 0 for s in seconds["a"] + seconds["b"])
    assert [r[0] for r in results["a"]] == ["a"] * 3 and [r[0] for r in results["b"]] == ["b"] * 3
    assert sorted(r[1] for r in results["a"] + results["b"]) == list(range(6))  # every call kept, none dropped


def test_median_run_is_the_median_or_the_run_nearest_it():
    assert median_run([3.0, 1.0, 2.0], ["slow", "fast", "mid"]) == (2, "mid")
    assert median_run([1.0, 4.0, 1.5, 3.0], "abcd")[1] in ("c", "d")  # median 2.25: nearest are 1.5 and 3.0
    assert median_run([1.0, 3.0], ["fast", "slow"]) == (0, "fast")  # a tie goes to the faster run
    with pytest.raises(ValueError):
        median_run([1.0, 2.0], ["only one"])


def test_split_run_parts_add_up_to_the_run():
    curve = CostCurve(sizes=[1, 4], seconds=[0.010, 0.016])
    noise = TimingNoise(per_size={1: 0.05, 4: 0.20}, repeats=5)
    steps = [SimpleNamespace(t_verify=t, tree_tokens=[0] * n) for t, n in ((0.011, 1), (0.017, 4), (0.016, 4))]
    result = SimpleNamespace(seconds=0.100, prefill_seconds=0.050, steps=steps, forwards=3)
    sp = split_run(result, curve, noise)
    assert sp.prefill + sp.verify + sp.loop == pytest.approx(sp.seconds)
    assert sp.verify == pytest.approx(0.044) and sp.at_t1 == pytest.approx(0.030) and sp.sizes == (1, 4)
    assert sp.band == 0.20  # the widest spread of t(1) and the sizes verified
    assert sp.extra == pytest.approx(0.014) and sp.extra_rel == pytest.approx(0.014 / 0.030)


def _rows(per_category: dict[str, list[float]]) -> list[dict]:
    """A bench file's rows for one method: each prompt's mean accepted as tokens over 10 forwards."""
    return [
        {"method": "prompt_lookup", "category": c, "new_tokens": round(m * 10), "forwards": 10}
        for c, ms in per_category.items()
        for m in ms
    ] + [{"method": "autoregressive", "category": "qa", "new_tokens": 10, "forwards": 10}]  # another method: ignored


def test_category_extremes_names_a_clear_end_alone_and_reversed_numbers_reverse_it():
    clear = {"qa": [1.0, 1.1, 1.0, 1.1], "rag": [3.0, 3.2, 3.1, 2.9], "code": [2.0, 2.1, 1.9, 2.0]}
    e = category_extremes(_rows(clear), "prompt_lookup")
    assert e.lowest == ["qa"] and e.highest == ["rag"] and e.values["qa"] == pytest.approx(1.05)
    flipped = {"qa": clear["rag"], "rag": clear["qa"], "code": clear["code"]}  # the numbers reversed
    e = category_extremes(_rows(flipped), "prompt_lookup")
    assert e.lowest == ["rag"] and e.highest == ["qa"]


def test_category_extremes_keeps_a_tie_within_the_prompts_spread():
    spread = {"qa": [1.0, 1.1, 1.0, 1.1], "rag": [1.0, 6.0, 1.2, 2.0], "sum": [1.1, 4.0, 1.5, 2.5]}
    e = category_extremes(_rows(spread), "prompt_lookup")
    assert e.highest == ["rag", "sum"]  # 2.55 against 2.28: the prompts cannot order them, highest value first
    assert "qa" in e.lowest
    with pytest.raises(ValueError):
        category_extremes(_rows({"qa": [1.0]}), "prompt_lookup")
