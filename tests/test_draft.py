"""Draft proposer: greedy output equals autoregressive, the draft cache stays exact, drafts round-trip."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept import Acceptance
from specdec_lab.models.draft_model import (
    DEFAULT_DRAFT,
    DRAFT_DIR,
    Draft,
    DraftSpec,
    build_draft,
    export_hf,
    layer_skip_draft,
    load_draft,
    save_draft,
    trainable_parameters,
)
from specdec_lab.proposers import DecodeState, DraftConfig, DraftProposer
from specdec_lab.sampling import Sampling

PROMPT = [5, 17, 42, 7, 99, 3]


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=4, eos_token_id=None)


@pytest.fixture(scope="module")
def drafts(target):
    """A layer-skip draft, and a 'trained-like' draft (target layers + random deltas) with a reduced vocab."""
    skip = layer_skip_draft(target, 2)
    other = build_draft(target, DraftSpec(base_layers=[0, 3], lora_rank=0), vocab=torch.arange(0, 256, 3))
    with torch.no_grad():
        for p in trainable_parameters(other):
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(1)))
    other.model.requires_grad_(False)
    return {"skip": skip, "reduced_vocab": other}


@pytest.mark.parametrize("which", ["skip", "reduced_vocab"])
@pytest.mark.parametrize("draft_length", [1, 3, 6, "heuristic", "cost"])
def test_greedy_draft_equals_autoregressive(target, drafts, which, draft_length):
    ar = S.generate(target, PROMPT, max_new_tokens=40)
    r = S.generate(target, PROMPT, method="draft", draft=drafts[which], draft_length=draft_length,
                   max_new_tokens=40)  # fmt: skip
    assert r.tokens == ar.tokens
    assert r.forwards <= ar.forwards


@pytest.mark.parametrize("max_new_tokens", [1, 2, 5])
def test_small_budgets_and_eos(target, drafts, max_new_tokens):
    ar = S.generate(target, PROMPT, max_new_tokens=max_new_tokens)
    r = S.generate(target, PROMPT, method="draft", draft=drafts["skip"], draft_length=4,
                   max_new_tokens=max_new_tokens)  # fmt: skip
    assert r.tokens == ar.tokens
    eos = S.generate(target, PROMPT, max_new_tokens=30).tokens[7]  # stop at a token mid-chain
    ar = S.generate(target, PROMPT, max_new_tokens=30, eos_token_id=eos)
    r = S.generate(target, PROMPT, method="draft", draft=drafts["skip"], draft_length=5, max_new_tokens=30,
                   eos_token_id=eos)  # fmt: skip
    assert r.tokens == ar.tokens and r.stop_reason == "eos"


def test_layer_skip_method(target):
    ar = S.generate(target, PROMPT, max_new_tokens=30)
    r = S.generate(target, PROMPT, method="layer_skip", n_layers=3, draft_length=3, max_new_tokens=30)
    assert r.tokens == ar.tokens and r.mean_accepted > 1.0
    with pytest.raises(ValueError, match="n_layers"):
        S.generate(target, PROMPT, method="layer_skip", n_layers=4, max_new_tokens=3)


def test_draft_cache_matches_fresh_forward(target, drafts):
    """After any accepted prefix, the draft's cached state gives the logits of a from-scratch forward."""
    draft = drafts["reduced_vocab"]
    prop = DraftProposer(DraftConfig(draft=draft, draft_length=4))
    tokens = list(PROMPT)
    state = DecodeState(tokens=tokens, prompt_length=len(PROMPT), cache_length=len(PROMPT) - 1, max_depth=10,
                        model=target)  # fmt: skip
    prop.start(state)
    gen = torch.Generator().manual_seed(0)
    for accepted in [0, 4, 2, 4, 1, 3]:
        tree = prop.propose(state)
        assert len(tree) == 5
        acc = Acceptance(path=list(range(accepted + 1)), bonus=int(torch.randint(0, 256, (), generator=gen)))
        state.tokens.extend(tree.tokens[1 : accepted + 1].tolist() + [acc.bonus])
        prop.update(state, tree, acc, None)
        assert prop.seen == prop.cache.length < len(state.tokens)
        with torch.inference_mode():
            fresh = draft.logits(torch.tensor([state.tokens]), extra=PROMPT)[0, -1]  # (V,) -inf off the rows
            cached = prop._step(state.tokens[prop.seen :])  # (M,) over the reduced rows
        prop.cache.rollback()
        torch.testing.assert_close(cached, fresh[prop.rows], atol=1e-4, rtol=1e-4)


def test_layer_skip_copies_its_catch_up_from_the_target_cache(target):
    """A layer-skip draft's catch-up K/V is the target's own (copied): equal to recomputing it with the draft,
    and the decode stays token-for-token autoregressive through backed-off stretches and probes."""
    skip = layer_skip_draft(target, 2)
    assert skip.shared_layers == 2
    kv = S.KVCache.for_model(target, capacity=64)
    S.prefill(target, kv, torch.tensor(PROMPT[:-1]))
    mine = S.KVCache.for_model(skip.model, capacity=64)
    mine.extend_from(kv, 0, 3)
    mine.extend_from(kv, 3, len(PROMPT) - 1)
    fresh = S.KVCache.for_model(skip.model, capacity=64)
    with torch.inference_mode():
        skip.model(input_ids=torch.tensor([PROMPT[:-1]]), cache=fresh, use_cache=True)
    for a, b in zip(mine.layers, fresh.layers, strict=True):
        torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="extend_from"):
        mine.extend_from(kv, 0, 2)  # not at the committed end
    # cost mode with a short probe interval: backed-off stretches, then probes that copy their catch-up
    ar = S.generate(target, PROMPT, max_new_tokens=60)
    r = S.generate(target, PROMPT, method="draft", draft=skip, draft_length=2, max_new_tokens=60)
    assert r.tokens == ar.tokens
    r = S.generate(target, PROMPT, method="draft", draft=skip, max_new_tokens=60, probe_every=3, probe_max=3)
    assert r.tokens == ar.tokens


def test_sampled_draft_carries_q(target, drafts):
    draft = drafts["reduced_vocab"]
    prop = DraftProposer(DraftConfig(draft=draft, draft_length=3))
    state = DecodeState(tokens=list(PROMPT), prompt_length=len(PROMPT), cache_length=len(PROMPT) - 1,
                        max_depth=10, model=target, sampling=Sampling(temperature=0.9, top_p=0.95),
                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    prop.start(state)
    tree = prop.propose(state)
    q = tree.draft_probs  # (4, V)
    assert q.shape == (4, 256)
    torch.testing.assert_close(q[1:].sum(-1), torch.ones(3))
    assert (q[1:, tree.tokens[1:]].diagonal() > 0).all()  # each draft token had q > 0
    outside = torch.ones(256, dtype=torch.bool)
    outside[prop.rows] = False
    assert float(q[1:, outside].abs().sum()) == 0.0  # q = 0 outside the drafting vocabulary


@pytest.mark.parametrize("lora_rank", [0, 8])
def test_save_load_roundtrip_and_hf_export(tmp_path, target, lora_rank):
    draft = build_draft(target, DraftSpec(base_layers=[1], lora_rank=lora_rank, lora_alpha=8.0),
                        vocab=torch.arange(100))  # fmt: skip
    with torch.no_grad():
        for p in trainable_parameters(draft):
            p.add_(0.02 * torch.randn(p.shape))
    x = torch.tensor([PROMPT])
    want = draft.logits(x)  # (1, T, V): the readout, the vocabulary's rows, -inf elsewhere
    assert torch.isinf(want[..., 100:]).all() and torch.isfinite(want[..., :100]).all()
    save_draft(draft, tmp_path / "d", {"note": "test"})
    loaded = load_draft(tmp_path / "d", target)
    assert loaded.spec.lora_rank == lora_rank and loaded.manifest["note"] == "test"
    torch.testing.assert_close(loaded.vocab, torch.arange(100))
    torch.testing.assert_close(loaded.logits(x), want, atol=2e-2, rtol=1e-2)  # fp16 storage
    from transformers import AutoModelForCausalLM

    folder = export_hf(loaded, tmp_path / "hf")
    hf = AutoModelForCausalLM.from_pretrained(folder).eval()
    full = Draft(model=loaded.model, vocab=None, name="full view", adapter=loaded.adapter)
    with torch.inference_mode():
        torch.testing.assert_close(hf(x).logits, full.logits(x), atol=1e-4, rtol=1e-4)
    ar = S.generate(target, PROMPT, max_new_tokens=20)
    out = target.generate(x, attention_mask=torch.ones_like(x), assistant_model=hf, max_new_tokens=20,
                          do_sample=False)  # fmt: skip
    assert out[0, len(PROMPT) :].tolist() == ar.tokens


def test_draft_cache_dies_with_its_target():
    """Drafts are cached per target object, not per id(): a freed target's drafts go with it, so a new target
    never gets a draft built on the old one's layers."""
    from specdec_lab.models.draft_model import _LOADED, get_draft

    old = S.tiny_model(num_layers=3)
    first = get_draft("layer_skip:1", old)
    assert get_draft("layer_skip:1", old) is first
    entries, gone = len(_LOADED), weakref.ref(old)
    del old, first
    gc.collect()
    assert gone() is None and len(_LOADED) == entries - 1
    new = S.tiny_model(num_layers=3)
    assert get_draft("layer_skip:1", new).model.get_decoder().layers[0] is new.get_decoder().layers[0]


def test_config_errors():
    with pytest.raises(ValueError, match="max_draft"):
        DraftConfig(max_draft=0)
    with pytest.raises(ValueError, match="vocab"):
        DraftConfig(vocab="tiny")
    with pytest.raises(ValueError, match="draft_length"):
        DraftConfig(draft_length="fast")


def test_missing_draft_folder_is_clear(tmp_path, target):
    with pytest.raises(FileNotFoundError, match="train"):
        S.generate(target, PROMPT, method="draft", draft=str(tmp_path / "nope"), max_new_tokens=3)


def test_train_cli_smoke(tmp_path):
    from specdec_lab.train.draft import main

    out = tmp_path / "draft"
    rc = main(["--model", "tiny", "--distill-dir", str(tmp_path / "distill"), "--out", str(out),
               "--cache", str(tmp_path / "hidden.safetensors"),
               "--steps", "5", "--base-layers", "0", "--lora-rank", "4", "--quiet"])  # fmt: skip
    assert rc == 0 and (out / "manifest.json").is_file() and (out / "draft.safetensors").is_file()
    draft = load_draft(out, S.tiny_model(eos_token_id=3, num_layers=3))
    assert draft.manifest["training"]["steps_done"] == 5


@pytest.mark.real
def test_real_model_greedy_draft_equals_autoregressive(real_model):
    assert (DRAFT_DIR / DEFAULT_DRAFT).is_dir(), f"the shipped draft is missing: {DRAFT_DIR / DEFAULT_DRAFT}"
    draft = str(DRAFT_DIR / DEFAULT_DRAFT)
    for prompt in ["What is 17 times 23? Explain briefly."]:
        ids = real_model.chat_ids(prompt)
        ar = S.generate(real_model, ids, max_new_tokens=40)
        r = S.generate(real_model, ids, method="draft", draft=draft, draft_length=4, max_new_tokens=40)
        assert r.tokens == ar.tokens
        assert r.forwards < ar.forwards


def test_draft_object_is_exported():
    assert isinstance(layer_skip_draft(S.tiny_model(num_layers=3), 1), Draft)


def test_layer_skip_drafts_over_the_shipped_vocabulary_only_when_it_fits_the_head():
    """The shipped 8k drafting vocabulary was built for SmolLM2's 49,152-row head: a layer-skip draft of a
    target with that head scores only those rows; any other head (here a tiny model's) scores all of them."""
    from specdec_lab.models.vocab import drafting_vocab

    assert layer_skip_draft(S.tiny_model(num_layers=3), 1).vocab is None
    shipped = drafting_vocab()
    big = S.tiny_model(num_layers=2, vocab_size=49152)
    skip = layer_skip_draft(big, 1)
    assert skip.vocab is not None and torch.equal(skip.vocab, shipped)


def test_layer_skip_over_the_drafting_vocabulary_equals_autoregressive():
    """Scoring a subset of the head changes which token the draft proposes, never what is emitted."""
    big = S.tiny_model(num_layers=3, vocab_size=49152)
    ids = [5, 17, 300, 12000, 9, 44]
    ar = S.generate(big, ids, max_new_tokens=24)
    for vocab in ("draft", "full"):
        r = S.generate(big, ids, method="layer_skip", n_layers=1, draft_length=3, vocab=vocab, max_new_tokens=24)
        assert r.tokens == ar.tokens, vocab


@pytest.mark.real
def test_real_model_layer_skip_uses_the_drafting_vocabulary(real_model):
    ids = real_model.chat_ids("Write a Python function that reverses a string.")
    ar = S.generate(real_model, ids, max_new_tokens=32)
    r = S.generate(real_model, ids, method="layer_skip", draft_length=3, max_new_tokens=32)
    assert r.tokens == ar.tokens
    from specdec_lab.models.draft_model import get_draft

    assert get_draft("layer_skip:4", real_model.model).vocab is not None
