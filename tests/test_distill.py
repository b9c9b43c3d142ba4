"""Self-distillation data and the hidden-state cache (tiny random models; the prompt file itself)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from specdec_lab import generate, tiny_model
from specdec_lab.io import load_prompts
from specdec_lab.train.distill import (
    DistillExample,
    cache_hidden_states,
    distillation_stats,
    generate_distillation_data,
    load_distillation_data,
    load_hidden_cache,
    split_heldout,
)

ROOT = Path(__file__).resolve().parents[1]
EOS = 3


@pytest.fixture(scope="module")
def model():
    return tiny_model(eos_token_id=EOS)


def _prompts(n=9, seed=0):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 10, (n,), generator=gen).tolist()
    return [torch.randint(4, 256, (t,), generator=gen).tolist() for t in lengths]


def test_batched_generation_equals_the_greedy_loop(model, tmp_path):
    """Left padding in batched HF generate must not change anyone's greedy continuation."""
    prompts = _prompts()
    examples = generate_distillation_data(model, prompts, tmp_path, max_new_tokens=16, batch_size=4, progress=False)
    assert [e.prompt_ids for e in examples] == prompts
    for e in examples:
        ref = generate(model, e.prompt_ids, max_new_tokens=16, eos_token_id=EOS)
        assert e.response_ids == ref.tokens
        assert e.stop == ("eos" if ref.stop_reason == "eos" else "length")
        assert e.ids == e.prompt_ids + e.response_ids


def test_resumes_from_existing_shards_and_writes_atomically(model, tmp_path):
    prompts = _prompts()
    first = generate_distillation_data(model, prompts, tmp_path, max_new_tokens=8, batch_size=4, progress=False)
    shards = sorted(tmp_path.glob("shard-*.json"))
    assert len(shards) == 3  # 9 prompts in batches of 4
    kept = {p: p.stat().st_mtime_ns for p in shards[1:]}
    shards[0].unlink()  # an interrupted run: one batch missing
    again = generate_distillation_data(model, prompts, tmp_path, max_new_tokens=8, batch_size=4, progress=False)
    assert again == first
    assert {p: p.stat().st_mtime_ns for p in shards[1:]} == kept  # untouched, not regenerated
    assert not list(tmp_path.glob(".*tmp"))  # no temp files left behind
    assert load_distillation_data(tmp_path) == first
    stats = distillation_stats(tmp_path)
    assert stats["examples"] == 9 and stats["response_tokens"] == sum(len(e.response_ids) for e in first)


def test_other_settings_in_the_same_directory_are_refused(model, tmp_path):
    generate_distillation_data(model, _prompts(3), tmp_path, max_new_tokens=4, batch_size=2, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        generate_distillation_data(model, _prompts(3), tmp_path, max_new_tokens=5, batch_size=2, progress=False)


def test_hidden_cache_matches_the_model_and_is_reused(model, tmp_path):
    examples = [DistillExample(i + 1, "", p, [5, 6, 7], "length") for i, p in enumerate(_prompts(4))]
    path = tmp_path / "h.safetensors"
    cache = cache_hidden_states(model, examples, path, progress=False)
    assert cache.hidden.dtype == torch.float16 and cache.hidden.shape[1] == 64
    h, ids, prompt_length = cache.example(2)
    assert ids.tolist() == examples[2].ids and prompt_length == len(examples[2].prompt_ids)
    with torch.no_grad():
        ref = model.get_decoder()(input_ids=torch.tensor([examples[2].ids])).last_hidden_state[0]
    torch.testing.assert_close(h.float(), ref, atol=1e-2, rtol=1e-2)
    mtime = path.stat().st_mtime_ns
    again = cache_hidden_states(model, examples, path, progress=False)
    assert path.stat().st_mtime_ns == mtime and torch.equal(again.hidden, cache.hidden)  # loaded, not rerun
    assert load_hidden_cache(path)[1]["fingerprint"]
    other = cache_hidden_states(model, examples[:2], path, progress=False)  # other data: recomputed
    assert len(other) == 2 and path.stat().st_mtime_ns != mtime
    sub = cache.subset([1, 4])
    assert sub.question_ids.tolist() == [1, 4] and torch.equal(sub.example(1)[0], cache.example(3)[0])


def test_hidden_cache_adds_examples_without_recomputing_the_others(model, tmp_path):
    examples = [DistillExample(i + 1, "", p, [5, 6, 7], "length") for i, p in enumerate(_prompts(4))]
    path = tmp_path / "h.safetensors"
    first = cache_hidden_states(model, examples[:2], path, progress=False)
    calls = []
    hook = model.get_decoder().register_forward_pre_hook(lambda *_: calls.append(1))
    grown = cache_hidden_states(model, examples, path, progress=False)  # two examples added
    hook.remove()
    assert len(calls) == 2  # only the new examples ran through the model
    fresh = cache_hidden_states(model, examples, None, progress=False)
    assert grown.question_ids.tolist() == [1, 2, 3, 4] and torch.equal(grown.ids, fresh.ids)
    assert torch.equal(grown.example(0)[0], first.example(0)[0])  # reused rows, bit for bit
    torch.testing.assert_close(grown.hidden.float(), fresh.hidden.float(), atol=1e-2, rtol=1e-2)


def test_prompt_file_and_heldout_split():
    prompts = load_prompts(ROOT / "data" / "train_prompts.jsonl")
    assert len(prompts) == 300 and all(p.text for p in prompts)
    train, held = split_heldout(prompts, every=10)
    assert len(held) == 30 and len(train) == 270
    assert {p.question_id for p in held}.isdisjoint(p.question_id for p in train)
    shipped = ROOT / "data" / "distill" / "smollm2-135m"
    assert (shipped / "meta.json").is_file(), f"the committed self-distillation set is missing: {shipped}"
    meta = json.loads((shipped / "meta.json").read_text())
    assert meta["examples"] == 300
