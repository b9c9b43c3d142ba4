"""specdec_lab.cost.theory: closed-form edge cases and Monte Carlo agreement (the cost model: test_cost.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from specdec_lab.cost.theory import (
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
