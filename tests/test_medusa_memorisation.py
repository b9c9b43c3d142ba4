"""Per-epoch training vs held-out accuracy of Medusa-1 (train.Medusa1Config.epoch_eval_rows) and the
memorisation run built on it (train/medusa_memorisation.py), on the tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from specdec_lab import tiny_model
from specdec_lab.medusa import MedusaHeads
from specdec_lab.train.distill import cache_hidden_states, generate_distillation_data, split_heldout
from specdec_lab.train.medusa1 import Medusa1Config, build_rows, train_medusa1
from specdec_lab.train.medusa_memorisation import MemorisationConfig, memorisation_run, spread

EOS = 3


@pytest.fixture(scope="module")
def model():
    return tiny_model(eos_token_id=EOS)


@pytest.fixture(scope="module")
def examples(model, tmp_path_factory):
    gen = torch.Generator().manual_seed(2)
    prompts = [torch.randint(4, 256, (6,), generator=gen).tolist() for _ in range(40)]
    out = tmp_path_factory.mktemp("distill")
    return generate_distillation_data(model, prompts, out, max_new_tokens=24, batch_size=20, progress=False)


def test_spread_picks_evenly_and_keeps_the_ends():
    assert spread(list(range(10)), 4) == [0, 3, 6, 9]
    assert spread([1, 2, 3], 0) == [1, 2, 3] and spread([1, 2, 3], 5) == [1, 2, 3] and spread([7, 8], 1) == [7]


def test_epoch_records_before_training_and_after_every_epoch(model, examples):
    train_ex, held_ex = split_heldout(examples, every=5)
    cache = cache_hidden_states(model, examples, None, progress=False)
    rows = build_rows(cache.subset([e.question_id for e in train_ex]), num_heads=2)
    held = build_rows(cache.subset([e.question_id for e in held_ex]), num_heads=2)
    per_epoch = len(rows) // 64
    cfg = Medusa1Config(steps=3 * per_epoch, batch_size=64, lr=1e-2, warmup_steps=2, epoch_eval_rows=256)
    log = train_medusa1(MedusaHeads.for_model(model, num_heads=2), rows, cfg, eval_rows=held, progress=False)
    assert [e["epoch"] for e in log.epochs] == [0, 1, 2, 3]
    assert [e["step"] for e in log.epochs] == [0, per_epoch, 2 * per_epoch, 3 * per_epoch]
    first, last = log.epochs[0], log.epochs[-1]
    assert len(first["train"]["top1"]) == 2 and first["train"]["count"][0] <= 256
    # untrained heads are the LM head: no gap yet; training rows of a random model's text are learnable,
    # held-out ones barely, so the gap opens
    gap = lambda e: e["train"]["top1"][0] - e["heldout"]["top1"][0]  # noqa: E731
    assert last["train"]["top1"][0] > first["train"]["top1"][0] + 0.05
    assert gap(last) > gap(first) + 0.05
    assert json.loads(json.dumps(log.as_dict()))["epochs"] == log.epochs
    # off by default: nothing recorded
    plain = train_medusa1(MedusaHeads.for_model(model, num_heads=2), rows, Medusa1Config(steps=3, batch_size=64),
                          eval_rows=held, progress=False)  # fmt: skip
    assert plain.epochs == []


def test_memorisation_run_record(model, examples, tmp_path):
    cfg = MemorisationConfig(train_examples=20, heldout_examples=6, epochs=2, num_heads=2, num_layers=1,
                             batch_size=64, lr=1e-2, holdout_every=5, train_eval_rows=128)  # fmt: skip
    record = memorisation_run(model, examples, cfg, cache_path=tmp_path / "h.safetensors", progress=False)
    assert record["data"]["train_examples"] == 20 and record["data"]["heldout_examples"] == 6
    assert [e["epoch"] for e in record["epochs"]] == [0, 1, 2]
    assert record["training"]["steps"] == 2 * record["data"]["steps_per_epoch"]
    json.dumps(record)  # JSON-able as is
