"""`lab.batch_levers`: notebook 13's one rule for faster / slower / within noise (sections 5 and 7)."""

from __future__ import annotations

import pytest

from specdec_lab.lab.batch_levers import no_effect_band, planner_controls, repeat_ratios, side, split_by_side


def test_side_reads_every_repeat_and_reverses_with_the_numbers():
    assert side([1.19, 1.30]) == "faster"
    assert side([1 / 1.19, 1 / 1.30]) == "slower"  # the same ratios reversed
    assert side([0.96, 1.11]) == "within"  # repeats on both sides of 1: a tie


def test_a_no_effect_band_turns_a_small_win_into_a_tie():
    band = no_effect_band([[0.9645, 1.1064]])  # a pair the planner never touched
    assert band == pytest.approx(0.1064)
    assert side([1.0116, 1.1306]) == "faster"  # every repeat above 1 ...
    assert side([1.0116, 1.1306], band) == "within"  # ... but not above what noise alone moved
    assert side([1.187, 1.300], band) == "faster"
    assert side([1 / 1.187, 1 / 1.300], band) == "slower"  # reversed, the same verdict mirrored
    assert no_effect_band([]) == 0.0
    assert no_effect_band([[0.9]]) == pytest.approx(1 / 0.9 - 1)  # symmetric: a control below 1 counts too


def test_split_by_side_keeps_the_order_and_every_side():
    out = split_by_side({"a": [1.2, 1.3], "b": [0.8, 0.9], "c": [0.9, 1.1], "d": [1.1, 1.2]})
    assert out == {"faster": ["a", "d"], "slower": ["b"], "within": ["c"]}
    with pytest.raises(ValueError):
        side([])
    with pytest.raises(ValueError):
        side([1.0], -0.1)


def _run(b, m, lv, tps, acc, nodes, cut=None):
    return {"batch_size": b, "method": m, "levers": lv, "repeat_tokens_per_s": tps, "mean_accepted": acc,
            "nodes_per_step": nodes, "plan": None if cut is None else {"cut": cut}}  # fmt: skip


def test_planner_controls_are_pairs_the_planner_did_not_change():
    runs = [
        _run(8, "medusa", "off", [53.5, 59.4], 1.32, 1.979),
        _run(8, "medusa", "plan", [51.6, 65.7], 1.32, 1.979, cut=0.0),  # no cut, decoded alike: a control
        _run(8, "hybrid", "off", [56.8, 53.1], 1.44, 2.109),
        _run(8, "hybrid", "plan", [57.5, 60.1], 1.34, 1.708, cut=0.6),  # cut: not a control
        _run(4, "medusa", "off", [50.0, 40.0], 1.34, 2.5),
        _run(4, "medusa", "plan", [48.0, 43.0], 1.30, 2.3, cut=0.0),  # no cut, yet decoded otherwise (drafts capped)
        {"batch_size": 16, "method": "eagle", "levers": "plan", "error": "skipped"},
    ]
    controls = planner_controls(runs)
    assert list(controls) == [(8, "medusa")]
    assert controls[(8, "medusa")] == pytest.approx([51.6 / 53.5, 65.7 / 59.4])
    assert repeat_ratios([2.0, 3.0], [1.0, 2.0]) == [2.0, 1.5]
    with pytest.raises(ValueError):
        repeat_ratios([1.0], [1.0, 2.0])
