"""α against temperature (`specdec_lab.lab.alpha_temperature`): β is 1 − TV of the proposer's q and the target's
p, greedy β counts exactly the accepted drafts, the pooled summary and the file's resume."""

from __future__ import annotations

import json
from dataclasses import asdict, replace

import numpy as np
import pytest
import torch

import specdec_lab as S
from specdec_lab.cost.theory import expected_tokens_per_step, tv_distance
from specdec_lab.lab import alpha_temperature as A
from specdec_lab.models.draft_model import Draft, DraftSpec, build_draft, trainable_parameters
from specdec_lab.sampling import Sampling, warp_probs

PROMPT = [5, 17, 42, 7, 99, 3]


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=4, eos_token_id=None)


@pytest.fixture(scope="module")
def draft(target):
    """Target layers 0 and 3 plus random deltas, over a reduced drafting vocabulary (as the shipped draft)."""
    d = build_draft(target, DraftSpec(base_layers=[0, 3], lora_rank=0, adapter=False), vocab=torch.arange(0, 256, 2))
    with torch.no_grad():
        for p in trainable_parameters(d):
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    d.model.requires_grad_(False)
    return d


def test_a_draft_equal_to_the_target_is_always_accepted(target):
    same = Draft(model=target, vocab=None, name="self")
    answer = S.generate(target, PROMPT, max_new_tokens=12).tokens
    for t in (0.0, 0.7, 1.5):
        beta = A.teacher_forced_beta(target, same, PROMPT, answer, Sampling(temperature=t))
        assert beta.shape == (12,) and np.allclose(beta, 1.0, atol=1e-5)


@torch.inference_mode()
def test_beta_is_one_minus_tv_at_every_position(target, draft):
    answer = [11, 200, 3, 64, 9]
    sampling = Sampling(temperature=0.8)
    beta = A.teacher_forced_beta(target, draft, PROMPT, answer, sampling)
    for t in range(len(answer)):
        ids = torch.tensor([PROMPT + answer[:t]])
        p = warp_probs(target(ids).logits[0, -1], sampling)
        q = warp_probs(draft.logits(ids, extra=PROMPT)[0, -1], sampling)  # q = 0 outside vocab ∪ prompt
        assert q[1].item() == 0.0  # an odd id, not in the prompt: outside the drafting vocabulary
        assert beta[t] == pytest.approx(1 - float(tv_distance(p, q)), abs=1e-5)
    assert ((beta > 0) & (beta < 1)).all()


def test_greedy_beta_is_argmax_agreement_and_counts_the_accepted_drafts(target, draft):
    point = A.measure_point(target, draft, PROMPT, 0.0, draft_length=3, max_new_tokens=30)
    answer = S.generate(target, PROMPT, max_new_tokens=30).tokens
    beta = A.teacher_forced_beta(target, draft, PROMPT, answer, Sampling())
    assert set(np.unique(beta)) <= {0.0, 1.0}
    assert point["positions"] == 30 and point["beta_sum"] == beta.sum()
    # Greedy: a reached draft position sits at an answer position, and is accepted exactly when the draft's
    # argmax there is the target's. So the accepted drafts are β summed over the reached positions.
    run = S.generate(target, PROMPT, method="draft", draft=draft, draft_length=3, max_new_tokens=30)
    offset, on_reached = 0, 0.0
    for s in run.steps:
        if s.proposed == 3:
            on_reached += beta[offset : offset + min(s.accepted + 1, 3)].sum()
        offset += s.accepted + 1
    assert point["accepted"] == on_reached
    assert 0 < point["accepted"] < point["reached"]


def test_realised_counts_and_summary():
    class Step:
        def __init__(self, proposed, accepted):
            self.proposed, self.accepted = proposed, accepted

    class Run:
        steps = [Step(4, 0), Step(4, 4), Step(4, 2), Step(2, 1)]  # the last one was cut by max_new_tokens

    counts = A.realised_counts(Run(), 4)
    assert counts == {"steps": 3, "reached": 1 + 4 + 3, "accepted": 6, "tokens": 1 + 5 + 3}
    points = [
        {"temperature": 0.0, "positions": 10, "beta_sum": 4.0, **counts},
        {"temperature": 0.0, "positions": 30, "beta_sum": 18.0, **counts},
        {"temperature": 1.0, "positions": 20, "beta_sum": 5.0, "steps": 0, "reached": 0, "accepted": 0, "tokens": 0},
    ]
    rows = A.summarise(points, k=4)
    assert [r["temperature"] for r in rows] == [0.0, 1.0]
    assert rows[0]["alpha_tv"] == pytest.approx(22 / 40)  # pooled over positions, not a mean of prompts
    assert rows[0]["alpha_tv_se"] == pytest.approx(round(np.std([0.4, 0.6], ddof=1) / np.sqrt(2), 4))
    assert rows[0]["alpha_run"] == pytest.approx(round(12 / 16, 4))
    assert rows[0]["tokens_per_forward"] == pytest.approx(round(18 / 6, 4))
    assert rows[0]["tokens_per_forward_iid"] == pytest.approx(round(expected_tokens_per_step(0.75, 4), 4))
    assert rows[1]["alpha_run"] is None and rows[1]["alpha_tv_se"] is None and rows[1]["alpha_tv"] == 0.25


def test_resume_needs_the_same_configuration(tmp_path):
    out = tmp_path / "a.json"
    config = A.AlphaTemperatureConfig(out=str(out), per_category=1, max_new_tokens=8)
    out.write_text(json.dumps({"config": {**asdict(config), "out": "a.json", "threads": 1}, "points": [{"x": 1}]}))
    assert A._resumable(out, config) == [{"x": 1}]  # out and threads do not change a point
    assert A._resumable(out, replace(config, max_new_tokens=16)) == []
    assert A._resumable(out, replace(config, fresh=True)) == []


def test_cli_records_its_non_default_options():
    config = A.AlphaTemperatureConfig(temperatures=[0.0, 1.0], max_new_tokens=16, out="/somewhere/x.json")
    assert A._argv(config) == ["--temperatures", "0,1", "--max-new-tokens", "16"]
    args = A.build_parser().parse_args(A._argv(config))
    assert args.temperatures == "0,1" and args.max_new_tokens == 16


@pytest.mark.real
def test_real_model_one_point(real_model, tmp_path):
    prompts, out = str(_one_prompt(tmp_path)), str(tmp_path / "r.json")
    config = A.AlphaTemperatureConfig(temperatures=[0.0, 1.0], max_new_tokens=6, prompts=prompts, out=out, quiet=True)
    result = A.measure(config, lm=real_model)
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["summary"] == result["summary"] and len(saved["points"]) == 2
    assert saved["config"]["out"] == "r.json" and str(tmp_path) not in json.dumps(saved)
    for row in result["summary"]:
        assert 0.0 <= row["alpha_tv"] <= 1.0 and row["positions"] == 6


def _one_prompt(folder):
    path = folder / "p.jsonl"
    path.write_text(json.dumps({"question_id": 1, "category": "qa", "turns": ["Name a red fruit."]}) + "\n")
    return path


def test_vocabulary_labels_show_whitespace_and_byte_tokens_by_id():
    from specdec_lab.viz.acceptance import vocabulary_labels

    class Tokenizer:
        def decode(self, ids):
            return {1: " the", 2: "\n", 3: "\ufffd"}[ids[0]]

    assert vocabulary_labels(Tokenizer(), [1, 2, 3]) == {1: "▁the (1)", 2: "↵ (2)", 3: "(byte of a character) 3"}


def test_alpha_temperature_figure_fits_and_shows_both_estimates():
    from specdec_lab.viz.acceptance import alpha_temperature_figure

    point = {"positions": 10, "beta_sum": 5.0, "steps": 4, "reached": 8, "accepted": 4, "tokens": 8}
    rows = A.summarise([{"temperature": t, **point} for t in (0.0, 0.0, 1.0)], k=4)
    fig = alpha_temperature_figure(rows)
    assert [len(tr.x) for tr in fig.data] == [2, 2]
    assert fig.layout.width is None or fig.layout.width <= 950
    assert list(fig.data[0].y) == [0.5, 0.5] and list(fig.data[1].y) == [0.5, 0.5]
