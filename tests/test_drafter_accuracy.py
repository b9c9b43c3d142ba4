"""`lab.drafter_accuracy`: accuracy per draft position of the token draft, Medusa heads and EAGLE on the same
examples."""

from __future__ import annotations

import pytest
import torch

import specdec_lab as S
from specdec_lab.eagle import random_drafter
from specdec_lab.lab.drafter_accuracy import held_out_subset, position_accuracy
from specdec_lab.medusa import MedusaHeads
from specdec_lab.medusa.drafter import Drafter
from specdec_lab.models.draft_model import Draft, layer_skip_draft
from specdec_lab.train.distill import DistillExample

VOCAB = torch.arange(3, 256, 3)  # a reduced drafting vocabulary (85 of 256 ids)
K = 4


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=4, eos_token_id=None)


def _examples(target, n: int = 6) -> list[DistillExample]:
    """Random prompts with the target's own greedy responses (what the self-distillation data is)."""
    g = torch.Generator().manual_seed(0)
    out = []
    for q in range(n):
        prompt = torch.randint(0, 256, (4 + q % 3,), generator=g).tolist()
        r = S.generate(target, prompt, max_new_tokens=8 + q % 4, trace=False)
        out.append(DistillExample(10 * q, "x", prompt, r.tokens, "length"))
    return out


@pytest.fixture(scope="module")
def heads(target):
    h = MedusaHeads.for_model(target, num_heads=3)
    with torch.no_grad():  # not the zero init (every head a copy of the base head), but near it: some hits
        h.w1.copy_(0.05 * torch.randn(h.w1.shape, generator=torch.Generator().manual_seed(0)))
    return Drafter(heads=h, source=None, vocab=VOCAB, accuracies=None)


def _naive_medusa(target, heads, examples, j: int) -> tuple[int, int]:
    """Head j at every response position, one example and one position at a time."""
    hits = total = 0
    for e in examples:
        ids = torch.tensor([e.ids])
        with torch.no_grad():
            last = target.get_decoder()(input_ids=ids).last_hidden_state[0]  # (T, H)
            greedy = target(input_ids=ids).logits[0].argmax(-1)  # (T,) row u: the token after x_u
        rows = heads.rows(e.prompt_ids)
        for u in range(len(e.prompt_ids), len(e.ids)):  # x_u a response token, predicted from index t = u - j - 1
            t = u - j - 1
            if t < 0:
                continue
            logits = heads.heads.head_logits(last[t], j)[rows]
            hits += int(rows[logits.argmax()] == greedy[u - 1])
            total += 1
    return hits, total


def test_same_positions_for_every_source_and_medusa_matches_a_naive_loop(target, heads):
    examples = _examples(target)
    drafter = random_drafter(target, vocab=VOCAB, seed=1)
    draft = layer_skip_draft(target, n_layers=2)
    r = position_accuracy(target, drafter, draft, heads, examples, positions=K, batch_size=4, progress=False)
    assert r["positions"] == [1, 2, 3, 4] and set(r["sources"]) == {"draft", "medusa", "eagle"}
    counts = {name: s["count"] for name, s in r["sources"].items()}
    assert counts["draft"] == counts["medusa"] == counts["eagle"]  # the same response tokens for every proposer
    assert counts["eagle"][0] == sum(len(e.response_ids) for e in examples)  # every response token at position 1
    for j in (1, 2, 3):
        naive = _naive_medusa(target, heads, examples, j)
        assert (r["sources"]["medusa"]["hits"][j - 1], counts["medusa"][j - 1]) == naive
    assert r["sources"]["medusa"]["accuracy"][3] is None  # no fourth head
    assert 0 < sum(r["sources"]["medusa"]["hits"])


def test_a_draft_equal_to_the_target_is_always_right(target, heads):
    """A draft that IS the target: its teacher-forced guess is the greedy token at every position (the token
    draft's line is flat by definition, at 1.0 here); an untrained EAGLE drafter is not."""
    examples = _examples(target)
    drafter = random_drafter(target, vocab=None, seed=1)
    r = position_accuracy(target, drafter, Draft(model=target, vocab=None, name="target"), None, examples, positions=3,
                          progress=False)  # fmt: skip
    assert r["sources"]["draft"]["accuracy"] == [1.0, 1.0, 1.0]
    assert "medusa" not in r["sources"]
    assert r["sources"]["eagle"]["accuracy"][0] < 1.0


def test_held_out_subset_is_the_held_out_rule_evenly_spread():
    examples = [DistillExample(q, "x", [1], [2], "length") for q in range(1, 1001)]
    subset = held_out_subset(examples, 10)
    assert len(subset) == 10 and all(e.question_id % 10 == 0 for e in subset)
    assert [e.question_id for e in subset] == list(range(10, 1001, 100))
    assert held_out_subset(examples, 10) == subset


# ---- the drafting-vocabulary trade-off (notebook 10's slider) ---------------------------------------------
def test_macs_from_shapes_equal_the_linear_layers_parameters(target):
    """Per token a linear layer does one multiply-add per weight: the target's count is its linear weights plus
    the tied head, the drafter's its layer + fc + M head rows (a drafter built for the tiny target)."""
    from specdec_lab.eagle.vocab_cost import draft_step_macs, step_cost_ratio, target_macs

    config = target.config
    linear = sum(
        m.weight.numel() for n, m in target.named_modules() if isinstance(m, torch.nn.Linear) and "lm_head" not in n
    )
    assert target_macs(config) == {"layers": linear, "head": 256 * 64, "total": linear + 256 * 64}
    d = random_drafter(target, vocab=VOCAB, seed=1)
    drafter_linear = sum(m.weight.numel() for m in d.modules() if isinstance(m, torch.nn.Linear))
    assert draft_step_macs(config, len(VOCAB), features=len(d.config.feature_layers))["total"] == drafter_linear
    assert step_cost_ratio(config, 256) > step_cost_ratio(config, len(VOCAB))


def test_coverage_and_the_slider_callback(target):
    from specdec_lab.eagle.vocab_cost import vocab_tradeoff
    from specdec_lab.viz.eagle_figures import vocab_callback

    examples = _examples(target, 20)
    train, held = examples[::2], examples[1::2]
    t = vocab_tradeoff(target.config, train, held, sizes=(4, 16, 64, 256))
    assert t.coverage == sorted(t.coverage) and t.coverage[-1] == 1.0  # every token is among all 256
    assert t.c == sorted(t.c) and t.held_tokens == sum(len(e.response_ids) for e in held)
    show = vocab_callback(t, alpha=0.6, shipped=64)
    fig, text = show(32)  # between two sizes: interpolated in log M
    assert fig.layout.width <= 950 and "M = 32" in text
    row = t.at(32)
    assert t.coverage[1] <= row["coverage"] <= t.coverage[2] and t.c[1] < row["c"] < t.c[2]
    assert len(fig.data) == 2 and fig.data[0].y == tuple(t.c)


def test_source_html_colours_each_accepted_draft_by_its_source():
    from specdec_lab.generate import GenerationResult, StepTrace
    from specdec_lab.viz.eagle_figures import SOURCE_COLORS, source_html

    def step(emitted, sources):
        return StepTrace([0] * (len(sources) + 1), [-1] + list(range(len(sources))), list(range(len(sources) + 1)),
                         emitted, 0.0, 0.0, 0.0, info={"accepted_sources": sources})  # fmt: skip

    steps = [step([5, 6, 7], ["prompt_lookup", "eagle"]), step([8], []), step([9, 10], ["medusa+eagle"])]
    r = GenerationResult([5, 6, 7, 8, 9, 10], [1, 2], None, "max_new_tokens", "hybrid", 1.0, 0.1, steps, 3)
    out = source_html(r)  # no tokenizer: "[id]" pieces
    assert out.count(f"background:{SOURCE_COLORS['prompt_lookup']}") == 2  # the token and its legend swatch
    assert 'step 0: prompt_lookup">[5]' in out and 'step 0: eagle">[6]' in out
    assert "step 0: the target's token\">[7]" in out and "step 1: the target's token\">[8]" in out
    assert 'step 2: medusa+eagle">[9]' in out and "step 2: the target's token\">[10]" in out
