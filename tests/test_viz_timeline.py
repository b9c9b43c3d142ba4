"""viz/timeline.py: the loop drawn from a real decode's trace (notebook 00's first picture), on a tiny model."""

from __future__ import annotations

import pytest
import torch

from specdec_lab import generate, tiny_model
from specdec_lab.viz.timeline import PHASES, ROLE_NAMES, timeline_figure, timeline_rows


@pytest.fixture(scope="module")
def result():
    """Prompt lookup on a prompt that repeats two tokens: the tiny model repeats too, so drafts get accepted."""
    base = torch.randint(0, 256, (2,), generator=torch.Generator().manual_seed(3)).tolist()
    res = generate(tiny_model(), (base * 30)[:30], method="prompt_lookup", max_new_tokens=24, draft_length=4)
    assert sum(s.accepted for s in res.steps) > 0
    return res


def boxes(fig, role: str):
    return next(t for t in fig.data if t.name == ROLE_NAMES[role])


def test_rows_follow_the_trace(result):
    rows = timeline_rows(result, max_steps=None)
    assert len(rows) == len(result.steps)
    for row, step in zip(rows, result.steps, strict=True):
        roles = [role for role, _ in row["drafted"]]
        assert len(roles) == step.proposed
        assert roles.count("accepted") == step.accepted and roles.count("rejected") == step.proposed - step.accepted
        assert row["bonus"] is not None  # no EOS here: every step ends with the target's own token
        assert [row[name] for name, _, _ in PHASES] == [step.t_propose, step.t_verify, step.t_accept]
    assert len(timeline_rows(result, max_steps=3)) == 3
    assert timeline_rows(result.steps[:2])[0]["drafted"] == timeline_rows(result)[0]["drafted"]  # steps alone


def test_figure_draws_every_token_and_phase(result):
    shown = result.steps[:5]
    fig = timeline_figure(result, max_steps=5)
    assert fig.layout.template.layout.plot_bgcolor == "white"  # TEMPLATE, the one template
    assert fig.layout.width <= 950
    assert len(boxes(fig, "accepted").x) == sum(s.accepted for s in shown)
    assert len(boxes(fig, "rejected").x) == sum(s.proposed - s.accepted for s in shown)
    assert len(boxes(fig, "target").x) == len(shown)  # one bonus token per step, in its own column
    phases = [t for t in fig.data if t.name in {label for _, label, _ in PHASES}]
    assert [t.name for t in phases] == [label for _, label, _ in PHASES]  # in the order a step runs them
    propose, verify, accept = phases
    for i, step in enumerate(shown):  # end to end: each phase starts where the one before it ended
        assert verify.base[i] == pytest.approx(propose.base[i] + step.t_propose * 1e3)
        assert accept.base[i] == pytest.approx(verify.base[i] + step.t_verify * 1e3)
        assert accept.x[i] == pytest.approx(step.t_accept * 1e3)


def test_labels_come_from_the_tokenizer(result):
    class Tok:
        def decode(self, ids):
            return "".join(f" t{i}" for i in ids)

    fig = timeline_figure(result, Tok(), max_steps=2)
    assert all(text.startswith("▁t") for text in boxes(fig, "target").text)  # spaces shown as ▁
    assert all(len(text) <= 8 for t in fig.data if t.text is not None for text in t.text)


def test_an_empty_trace_is_refused(result):
    with pytest.raises(ValueError, match="trace=True"):
        timeline_figure(result.steps[:0])
