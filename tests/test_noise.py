"""Timing noise (`specdec_lab.cost.noise`): the repeat spread, the warning threshold, and the measured curve."""

from __future__ import annotations

import statistics

import pytest

from specdec_lab import tiny_model
from specdec_lab.cost.noise import TimingNoise, combine, measure_cost_curve_with_noise, relative_spread


def test_relative_spread_is_iqr_over_median():
    assert relative_spread([1.0]) == 0.0
    assert relative_spread([2.0, 2.0, 2.0]) == 0.0
    xs = [1.0, 2.0, 3.0, 4.0, 5.0]  # inclusive quartiles 2 and 4, median 3
    assert relative_spread(xs) == pytest.approx(2.0 / 3.0)
    assert relative_spread(list(reversed(xs))) == relative_spread(xs)  # order does not matter
    assert relative_spread([0.0, 0.0]) == 0.0  # no division by zero


def test_warning_only_above_the_threshold():
    quiet = TimingNoise(per_size={1: 0.02, 2: 0.03, 4: 0.5}, repeats=5, threshold=0.1, load_per_core=0.5)
    assert quiet.spread == pytest.approx(0.03)  # the median over sizes: one noisy size does not decide
    assert quiet.worst == (4, 0.5)
    assert not quiet.unreliable and quiet.message().startswith("Timings look steady")
    assert "3.0%" in quiet.message() and "worst 50.0% at n = 4" in quiet.message()
    # one decimal: a spread just under the threshold does not print as the threshold ("15%, under the 15%")
    edge = TimingNoise(per_size={1: 0.149}, repeats=5, threshold=0.15, load_per_core=None)
    assert not edge.unreliable and "14.9%" in edge.message() and "under the 15%" in edge.message()

    busy = TimingNoise(per_size={1: 0.4, 2: 0.6}, repeats=5, threshold=0.1, load_per_core=3.0)
    assert busy.unreliable
    msg = busy.message()
    assert msg.startswith("Timings unreliable: the repeats disagree, the CPU is probably busy")
    assert "rerun on a quiet machine" in msg
    assert "load average 3.0 per core" in msg
    assert "⚠️" in busy.note().data and "⚠️" not in quiet.note().data

    few = TimingNoise(per_size={1: 0.01}, repeats=2, load_per_core=None)
    assert "Only 2 repeats" in few.message() and "load" not in few.message()
    assert few.message().startswith("Timings look steady")
    assert busy.as_dict()["unreliable"] is True


def test_combine_keeps_the_largest_spread_per_size():
    a = TimingNoise(per_size={1: 0.01, 2: 0.2}, repeats=5, load_per_core=None)
    b = TimingNoise(per_size={1: 0.05, 4: 0.03}, repeats=3, load_per_core=None)
    c = combine(a, b)
    assert c.per_size == {1: 0.05, 2: 0.2, 4: 0.03} and c.repeats == 3
    with pytest.raises(ValueError, match="at least one"):
        combine()


def test_spread_between_measured_sizes_is_the_larger_of_its_neighbours():
    # an interpolated cost (t(9) from t(8) and t(16)) is as noisy as the noisier size it reads
    nz = TimingNoise(per_size={1: 0.01, 8: 0.02, 16: 0.07}, repeats=3, load_per_core=None)
    assert nz.at(8) == 0.02 and nz.at(9) == 0.07 and nz.at(100) == 0.07 and nz.at(4) == 0.02


def test_measured_curve_is_the_median_of_the_repeats(monkeypatch):
    import specdec_lab.cost.noise as noise
    from specdec_lab.cost import CostCurve

    # three passes with known timings: the curve must be their per-size median, the spread their IQR/median
    passes = iter([[1.0, 2.0], [3.0, 2.2], [2.0, 1.8]])

    def fake(model, sizes, context, repeats, warmup, tree):
        assert repeats == 1
        return CostCurve(sizes=list(sizes), seconds=next(passes), context=context, tree=tree)

    monkeypatch.setattr(noise, "measure_cost_curve", fake)
    curve, nz = measure_cost_curve_with_noise(None, sizes=[1, 2], repeats=3)
    assert curve.seconds == [2.0, 2.0] and curve.sizes == [1, 2]
    assert nz.per_size[1] == pytest.approx(relative_spread([1.0, 3.0, 2.0]))
    assert nz.per_size[2] == pytest.approx(relative_spread([2.0, 2.2, 1.8]))
    assert nz.repeats == 3


def test_on_a_tiny_model():
    curve, nz = measure_cost_curve_with_noise(tiny_model(), sizes=[1, 2, 4], context=8, repeats=3, warmup=1)
    assert curve.sizes == [1, 2, 4] and all(s > 0 for s in curve.seconds)
    assert set(nz.per_size) == {1, 2, 4} and all(s >= 0 for s in nz.per_size.values())
    assert nz.spread == statistics.median(nz.per_size.values())
    with pytest.raises(ValueError, match="repeats"):
        measure_cost_curve_with_noise(tiny_model(), sizes=[1], repeats=0)
