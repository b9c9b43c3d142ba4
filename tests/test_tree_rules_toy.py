"""Notebook 11's library: the toy comparison of tree rules, the residual walk, its slider callback, and the
real-model accepted-vs-temperature sweep (on a tiny model)."""

from __future__ import annotations

import json

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept.toy import (
    BROKEN,
    RULES,
    accepted_vs_temperature,
    compare_rules,
    joint_rows,
    residual_steps,
    toy_models,
)
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.lab.accepted_temperature import accepted_vs_temperature as measure_accepted
from specdec_lab.sampling import Sampling
from specdec_lab.viz.sampling_trees import (
    accepted_temperature_figure,
    joint_figure,
    residual_figure,
    typical_tradeoff_figure,
)

SAMPLING = Sampling(temperature=0.7, top_p=0.9)


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: thousands of tiny ops on one thread


def test_exact_rules_match_the_target_and_broken_and_typical_do_not():
    target, draft = toy_models(4)
    rows = compare_rules(target, draft, SAMPLING, RULES + BROKEN)
    for r in rows:
        if r["exact"]:
            assert r["tv"] < 1e-6, r
            assert r["accepted_per_step"] > 0, r  # the rule was exercised: drafts were accepted
        else:
            assert r["tv"] > 1e-2, r
    by = {(r["rule"], r["siblings"]): r["accepted_per_step"] for r in rows}
    # deterministic siblings: traversal accepts what the one-hot rule does (both optimal there)
    assert by[("traversal", "deterministic")] == pytest.approx(by[("one_hot", "deterministic")], abs=1e-6)
    assert by[("traversal", "sampled")] >= by[("multi_draft", "sampled")] - 1e-9


def test_joint_rows_sum_to_one_per_rule():
    target, draft = toy_models(4)
    rows = joint_rows(target, draft, SAMPLING, RULES[:1] + BROKEN[1:2])
    for name in ("autoregressive", "one_hot (deterministic)", "retries_rejected (deterministic)"):
        assert sum(r[name] for r in rows) == pytest.approx(1.0, abs=1e-6)


def test_residual_steps_remove_each_rejected_sibling():
    target, draft = toy_models(5)
    steps = residual_steps(target, draft, Sampling(temperature=1.0), "deterministic", width=3)
    assert len(steps["steps"]) == 4 and steps["steps"][-1]["token"] is None
    for j, step in enumerate(steps["steps"]):
        assert sum(step["residual"]) == pytest.approx(1.0, abs=1e-5)
        for x in steps["tokens"][:j]:
            assert step["residual"][x] == 0.0  # a rejected sibling never comes back
        if step["token"] is not None:  # one-hot: accepted with the residual's own probability
            assert step["accept"] == pytest.approx(step["residual"][step["token"]], abs=1e-6)


def test_residual_figure_is_a_plain_callback_for_every_step():
    target, draft = toy_models(5)
    steps = residual_steps(target, draft, Sampling(temperature=1.0), "deterministic", width=3)
    for k in range(len(steps["steps"])):
        fig = residual_figure(steps, k)
        assert len(fig.data) == 2 and fig.layout.width <= 950
        assert list(fig.data[1].y) == pytest.approx(steps["steps"][k]["residual"])


def test_toy_accepted_vs_temperature_and_figures_build():
    target, draft = toy_models(4)
    rows = accepted_vs_temperature([(target, draft), toy_models(4, seed=10)], [0.0, 1.0], top_p=0.9)
    assert {r["temperature"] for r in rows} == {0.0, 1.0}
    assert not any(r["temperature"] == 0.0 and r["siblings"] != "deterministic" for r in rows)
    assert accepted_temperature_figure(rows, ("rule", "siblings"), "accepted", "x").layout.width <= 950
    names = ["one_hot (deterministic)"]
    assert joint_figure(joint_rows(target, draft, SAMPLING, RULES[:1]), names).layout.width <= 950


def test_typical_tradeoff_figure_reads_the_committed_sweep():
    from specdec_lab.lab.typical_sweep import DEFAULT_OUT

    sweep = json.loads(DEFAULT_OUT.read_text())
    fig = typical_tradeoff_figure(sweep)
    assert len(fig.data) == 2 and fig.layout.width <= 950


def test_real_model_sweep_counts_tokens_per_forward_and_writes_atomically(tmp_path):
    model = S.tiny_model(vocab_size=16, num_layers=2, eos_token_id=None, seed=0)
    for tree in (False, True):
        set_cost_curve(model, CostCurve(sizes=[1, 64], seconds=[1.0, 1.0], tree=tree))
    out = tmp_path / "acc.json"
    result = measure_accepted(model, [[1, 2, 3, 1, 2, 3, 1, 2]], [0.0, 1.0], [("prompt_lookup", None)],
                              max_new_tokens=6, out=out, progress=False)  # fmt: skip
    assert [r["temperature"] for r in result["rows"]] == [0.0, 1.0]
    for r in result["rows"]:
        assert r["mean_accepted"] == pytest.approx(r["tokens"] / r["forwards"]) and r["mean_accepted"] >= 1.0
    assert json.loads(out.read_text())["rows"] == result["rows"]


def test_top_p_prefilter_matches_the_full_sort_row_by_row(monkeypatch):
    """warp_probs' top-256 prefilter (exact rules' per-node cost) keeps the same nucleus as a full sort, also
    when some rows of a batch are too flat for it and fall back."""
    import specdec_lab.sampling as sampling_mod

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3000, generator=gen) * 0.1
    x[:3, :5] += 12  # rows 0-2 peaky (nucleus in the top 256), rows 3-5 flat (full sort)
    for s in (Sampling(temperature=0.7, top_p=0.9), Sampling(temperature=1.3, top_k=50, top_p=0.8)):
        fast = [sampling_mod.warp_probs(x, s), sampling_mod.warp_probs(x[4], s)]
        monkeypatch.setattr(sampling_mod, "TOP_P_PREFILTER", 10**9)
        slow = [sampling_mod.warp_probs(x, s), sampling_mod.warp_probs(x[4], s)]
        monkeypatch.undo()
        for a, b in zip(fast, slow, strict=True):
            assert torch.equal(a > 0, b > 0) and torch.allclose(a, b, atol=1e-6)


def test_draw_never_picks_a_zero_and_follows_probs():
    from specdec_lab.sampling import draw

    probs = torch.tensor([0.5, 0.0, 0.3, 0.2, 0.0])
    gen = torch.Generator().manual_seed(0)
    counts = torch.bincount(torch.tensor([draw(probs, gen) for _ in range(4000)]), minlength=5).float()
    assert counts[1] == 0 and counts[4] == 0
    assert torch.allclose(counts / 4000, probs, atol=0.03)
