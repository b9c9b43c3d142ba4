"""specdec_lab.theory: closed-form edge cases, consistency with cost.py, and Monte Carlo agreement."""

from __future__ import annotations

import gc
import math
import weakref

import numpy as np
import pytest
import torch

from specdec_lab.cost import CostCurve, DraftLength
from specdec_lab.theory import (
    acceptance_rate,
    accepted_length_pmf,
    expected_speedup,
    expected_tokens_per_step,
    measured_speedup,
    optimal_k,
    simulate_acceptance,
    simulate_tokens_per_step,
    speculation_pays,
    tv_distance,
)


@pytest.mark.parametrize("k", [0, 1, 4, 10])
def test_alpha_zero_one_edges(k):
    assert expected_tokens_per_step(0.0, k) == 1.0  # every draft rejected: only the bonus token
    assert expected_tokens_per_step(1.0, k) == k + 1  # every draft accepted, plus the bonus
    assert expected_speedup(0.0, k, 0.1) == pytest.approx(1.0 / (k * 0.1 + 1))
    assert expected_speedup(1.0, k, 0.1) == pytest.approx((k + 1) / (k * 0.1 + 1))


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.9, 1.0])
def test_k_zero_is_autoregressive(alpha):
    assert expected_tokens_per_step(alpha, 0) == 1.0
    assert expected_speedup(alpha, 0, 0.5) == 1.0


def test_closed_form_matches_series_and_pmf():
    for alpha in (0.2, 0.5, 0.8):
        for k in (1, 3, 7):
            series = sum(alpha**j for j in range(k + 1))
            assert expected_tokens_per_step(alpha, k) == pytest.approx(series)
            pmf = accepted_length_pmf(alpha, k)
            assert pmf.sum() == pytest.approx(1.0)
            assert (np.arange(k + 1) * pmf).sum() + 1 == pytest.approx(series)  # E[L] + bonus


def test_input_checks():
    with pytest.raises(ValueError, match="alpha"):
        expected_tokens_per_step(1.5, 2)
    with pytest.raises(ValueError, match="k must"):
        expected_tokens_per_step(0.5, -1)
    with pytest.raises(ValueError, match="c must"):
        expected_speedup(0.5, 2, -0.1)


def test_optimal_k_edges_and_brute_force():
    assert optimal_k(0.0, 0.1) == 0  # a draft that is always wrong: don't speculate
    assert optimal_k(1.0, 0.0, k_max=12) == 12  # free and always right: as long as allowed
    assert optimal_k(0.9, 2.0) == 0  # a draft slower than the target never pays
    for alpha in np.linspace(0.05, 0.95, 10):
        for c in (0.01, 0.05, 0.2):
            brute = max(range(33), key=lambda k: (expected_speedup(alpha, k, c), -k))
            assert optimal_k(alpha, c) == brute


def test_measured_form_reduces_to_unit_costs():
    alpha, k, t = 0.7, 4, 0.05
    # verifying k+1 tokens costs one target step, a draft step costs c target steps
    assert measured_speedup(alpha, k, t, 0.1 * t, t) == pytest.approx(expected_speedup(alpha, k, 0.1))
    assert speculation_pays(alpha, k, t, 0.1 * t, t)
    assert not speculation_pays(0.0, k, t, 0.1 * t, t)  # m = 1 < k c + 1
    # seed condition m T_target > k T_draft + T_verify at the boundary
    m = expected_tokens_per_step(alpha, k)
    t_verify = m * t - k * 0.1 * t
    assert measured_speedup(alpha, k, t, 0.1 * t, t_verify) == pytest.approx(1.0)


def test_cost_curve_choice_matches_theory():
    curve = CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[0.040, 0.045, 0.050, 0.060, 0.090])
    for alpha in (0.3, 0.6, 0.85):
        for draft in (0.0, 0.002, 0.01):
            k = curve.best_chain_length(alpha, 10, draft_step=draft)
            assert k == optimal_k(alpha, draft / curve(1), 10, verify_cost=lambda n: curve(n) / curve(1))


def test_paired_cost_statistic_cancels_each_repeats_load():
    """'paired': t(n) = median t(first size) x the median within-repeat ratio. A repeat in which the one-token
    forward alone ran fast (the minimum's pick) or in which everything ran slow moves neither."""
    from specdec_lab.cost import summarize_times

    times = {1: [1.0, 0.8, 3.0, 1.0, 1.0], 2: [1.1, 1.1, 3.3, 1.1, 1.1]}  # true ratio 1.1; repeat 1: a lucky t(1)
    assert summarize_times(times, "paired") == pytest.approx([1.0, 1.1])
    assert summarize_times(times, "min") == pytest.approx([0.8, 1.1])  # ratio 1.375: 2 tokens look dear
    assert summarize_times(times, "median") == pytest.approx([1.0, 1.1])
    with pytest.raises(ValueError, match="statistic must be"):
        from specdec_lab.cost import measure_cost_curve

        measure_cost_curve(None, statistic="mean")


def test_cost_curve_cache_dies_with_its_model(monkeypatch):
    """Curves are cached per model object, not per id(): a freed model's entry goes with it, so a new model
    (which CPython may well place at the freed one's address) is measured, never handed the old curve."""
    from specdec_lab import cost
    from specdec_lab.models import tiny_model

    fresh = CostCurve(sizes=[1, 2], seconds=[0.01, 0.02])
    monkeypatch.setattr(cost, "measure_cost_curve", lambda model, sizes, **kw: fresh)
    old, stale = tiny_model(), CostCurve(sizes=[1, 2], seconds=[1.0, 2.0])
    cost.set_cost_curve(old, stale)
    assert cost.cost_curve_for(old) is stale
    entries, gone = len(cost._CURVES), weakref.ref(old)
    del old
    gc.collect()
    assert gone() is None and len(cost._CURVES) == entries - 1  # the cache did not keep the model alive
    for _ in range(3):
        assert cost.cost_curve_for(tiny_model()) is fresh


def test_cost_mode_probes_after_a_run_of_zeros():
    """A proposer switched off by its estimates (here a draft step dearer than a forward) is retried now and
    then, so one bad measurement cannot disable it for good; probe_every=0 never retries."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.040, 0.045, 0.050])
    for probe_every, expected in ((4, [0, 0, 0, 1, 0, 0, 0, 1]), (0, [0] * 8)):
        length = DraftLength("cost", k_max=4, probe_every=probe_every)
        length.curve, length.draft_step = curve, 1.0  # a 1 s draft step: k* = 0
        assert [length.choose(available=4) for _ in range(8)] == expected
    length = DraftLength("cost", k_max=4, probe_every=2)
    length.curve, length.draft_step = curve, 1.0
    assert [length.choose(available=0) for _ in range(4)] == [0] * 4  # nothing to propose: no probe


def test_cost_mode_corrects_the_curve_with_observed_verify_times():
    """The curve was measured at a short context; verifies observed at a long one cost more for n > 1. The
    correction is applied per size (nearest observed size for the others) and moves the choice of k."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.030, 0.031, 0.040])
    length = DraftLength("cost", k_max=3, probe_every=0)
    length.curve = curve
    length.tracker.successes[None], length.tracker.failures[None] = 70.0, 30.0  # α̂ ≈ 0.7
    assert length.choose(available=3) == 3  # at the measured curve a 4-token verify pays
    assert length.verify_cost(4) == curve(4)
    for _ in range(100):
        length.observe_verify(2, 0.036)  # long context: 2 tokens cost 16% more than measured ...
        length.observe_verify(4, 0.056)  # ... 4 tokens 40% more
    assert length.verify_cost(2) == pytest.approx(0.036, rel=2e-2)
    assert length.verify_cost(3) == pytest.approx(curve(3) * 0.056 / 0.040, rel=2e-2)  # nearest: 4 (ties up)
    assert length.verify_cost(1) == pytest.approx(0.030 * 0.036 / 0.031, rel=2e-2)  # nearest: 2
    assert length.choose(available=3) == 1
    before = length.verify_cost(2)
    length.observe_verify(2, 0.0)  # no timing: ignored
    assert length.verify_cost(2) == before


def test_cost_correction_keeps_sizes_consistent_after_a_burst_of_load():
    """A 2-token verify seen once at normal load, then a burst of foreign load while backed off (1-token
    verifies at 2x), then drafting (2-token verifies only, load back to normal): the 1-token cost must come
    back down with the load. (One ratio per size kept the burst's 1-token ratio, so a 2-token verify looked
    cheaper than a 1-token one and a draft accepting 19% never stopped.)"""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.060, 0.064, 0.070])
    length = DraftLength("cost", k_max=3, probe_every=0)
    length.curve = curve
    for _ in range(20):
        length.observe_verify(1, 0.060)
    length.observe_verify(2, 0.064)  # a probe
    for _ in range(12):
        length.observe_verify(1, 0.120)  # the burst
    for _ in range(20):
        length.observe_verify(2, 0.064)  # drafting at normal load again
    assert length.verify_cost(1) == pytest.approx(0.060, rel=0.1)
    assert length.verify_cost(2) == pytest.approx(0.064, rel=0.05)
    length.tracker.successes[None], length.tracker.failures[None] = 19.0, 81.0  # α̂ ≈ 0.19
    length.draft_step = 0.015
    assert length.choose(available=3) == 0  # a 19% draft does not pay


@pytest.mark.parametrize("alpha,k", [(0.3, 3), (0.75, 5), (0.9, 8), (0.0, 4), (1.0, 4)])
def test_monte_carlo_tokens_per_step(alpha, k):
    tokens = simulate_tokens_per_step(alpha, k, steps=50_000, seed=1)
    se = tokens.std() / math.sqrt(len(tokens)) + 1e-12
    assert abs(tokens.mean() - expected_tokens_per_step(alpha, k)) < 5 * se + 1e-9
    hist = np.bincount(tokens - 1, minlength=k + 1) / len(tokens)
    assert np.abs(hist - accepted_length_pmf(alpha, k)).max() < 0.01


def test_alpha_is_one_minus_tv_and_rejection_sampling_is_lossless():
    torch.manual_seed(0)
    p = torch.distributions.Dirichlet(torch.ones(6)).sample((5,))  # (5, 6)
    q = torch.distributions.Dirichlet(torch.ones(6)).sample((5,))
    torch.testing.assert_close(acceptance_rate(p, q), 1 - tv_distance(p, q))
    torch.testing.assert_close(acceptance_rate(p, p), torch.ones(5))
    sim = simulate_acceptance(p[0].numpy(), q[0].numpy(), trials=200_000, seed=2)
    assert sim["acceptance"] == pytest.approx(sim["alpha"], abs=0.005)
    assert np.abs(sim["histogram"] - p[0].numpy()).max() < 0.005  # output ~ p, not q


def test_slider_callback_and_position_counts():
    from types import SimpleNamespace

    from specdec_lab.viz.acceptance import acceptance_by_position, position_figure, speedup_explorer

    fig, numbers = speedup_explorer(alpha=0.7, k=4, c=0.05)
    assert numbers["E[tokens per step]"] == round(expected_tokens_per_step(0.7, 4), 3)
    assert numbers["optimal k"] == optimal_k(0.7, 0.05, 16)
    assert len(fig.data[0].y) == 5
    step = lambda proposed, accepted: SimpleNamespace(proposed=proposed, accepted=accepted)  # noqa: E731
    result = SimpleNamespace(steps=[step(3, 0), step(3, 3), step(3, 1), step(0, 0)])
    stats = acceptance_by_position([result], 3)
    assert stats["reached"].tolist() == [3, 2, 1]  # position i reached when >= i-1 drafts were accepted
    assert stats["accepted"].tolist() == [2, 1, 1]
    assert position_figure(stats, 0.5).data


def test_one_noisy_probe_does_not_reorder_the_sizes():
    """Backed off (1-token verifies at 60 ms), one probe's 2-token verify timed fast (48 ms: noise), then
    steady 2-token verifies at 64 ms: a 2-token verify must never look cheaper than a 1-token one, so a 19%
    draft stays off. (Taking a size's first residual as its shape did exactly that, and drafting then ran
    on: while only 2-token verifies are seen, nothing can correct how the two sizes compare.)"""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.060, 0.064, 0.070])
    length = DraftLength("cost", k_max=3, probe_every=0)
    length.curve, length.draft_step = curve, 0.012
    length.tracker.successes[None], length.tracker.failures[None] = 19.0, 81.0  # α̂ ≈ 0.19
    for _ in range(20):
        length.observe_verify(1, 0.060)
    length.observe_verify(2, 0.048)  # the fast probe
    assert length.verify_cost(2) > length.verify_cost(1)
    assert length.choose(available=3) == 0
    for _ in range(60):
        length.observe_verify(2, 0.064)
        assert length.verify_cost(2) > length.verify_cost(1)
    assert length.choose(available=3) == 0
