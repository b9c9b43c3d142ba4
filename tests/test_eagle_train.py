"""EAGLE-3 training (`specdec_lab.train.eagle_ttt`, `python -m specdec_lab.train eagle`) on a tiny random target: the
training-time test equals the decode path step for step, a few steps lower the loss, a resumed run equals an
uninterrupted one, and the command writes the drafter, its manifest and its curve."""

from __future__ import annotations

import json

import pytest
import torch

import specdec_lab as S
from specdec_lab.eagle import load_drafter, random_drafter
from specdec_lab.train.distill import DistillExample
from specdec_lab.train.eagle import EagleTrainConfig, Trainer, init_drafter, main
from specdec_lab.train.eagle_ttt import teacher, unroll

VOCAB = torch.arange(3, 256, 3)  # a reduced drafting vocabulary (85 of 256 ids)


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=4, eos_token_id=None)


def _examples(n: int, seed: int = 0) -> list[DistillExample]:
    """Prompt + response pairs of random tokens (lengths vary, so batches are padded)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for q in range(1, n + 1):
        prompt, response = 4 + q % 3, 8 + (q * 5) % 7
        ids = torch.randint(0, 256, (prompt + response,), generator=g).tolist()
        out.append(DistillExample(q, "x", ids[:prompt], ids[prompt:], "length"))
    return out


@pytest.mark.parametrize("variant", ["eagle3", "eagle1"])
def test_training_time_test_equals_the_decode_path(target, variant):
    """Step i of the unroll at index t == the decoder drafting i steps from the root x_{t+1} (true tokens fed)."""
    d = random_drafter(target, variant, vocab=VOCAB, seed=1)
    ex = _examples(3)
    t = teacher(target, d, ex)
    steps = 4
    with torch.no_grad():
        run = unroll(d, t.features, t.ids, steps)
        for b, e in enumerate(ex):
            ids = torch.tensor(e.ids)
            for pos in (0, 3, len(e.ids) - steps - 1):
                cache = d.new_cache()
                h = d(d.fuse(t.features[b, : pos + 1]), ids[1 : pos + 2], torch.arange(pos + 1), cache)[-1]
                torch.testing.assert_close(h, run.hidden[0][b, pos], atol=1e-4, rtol=1e-4)
                for j in range(1, steps):
                    h = d(h[None], ids[pos + 1 + j : pos + 2 + j], torch.tensor([pos + j]), cache)[0]
                    torch.testing.assert_close(h, run.hidden[j][b, pos], atol=1e-4, rtol=1e-4)
                    torch.testing.assert_close(d.logits(h).float(), run.logits[j][b, pos], atol=1e-4, rtol=1e-4)


def test_a_few_steps_lower_the_loss(target):
    d = random_drafter(target, vocab=VOCAB, seed=2)
    cfg = EagleTrainConfig(ttt_steps=3, lr=3e-3, warmup_steps=1, eval_examples=0, max_tokens=10**9, epochs=100)
    trainer = Trainer(target, d, _examples(8), [], cfg, progress=False)
    batch = _examples(8)
    losses = [trainer.train_step(batch) for _ in range(12)]
    assert losses[-1] < 0.8 * losses[0]
    assert trainer.step == 12 and trainer.tokens > 0


def test_resume_equals_an_uninterrupted_run(target, tmp_path):
    cfg = EagleTrainConfig(ttt_steps=2, batch_size=3, lr=3e-3, warmup_steps=2, epochs=2.0, eval_examples=2,
                           eval_every=2, checkpoint_every=100)  # fmt: skip
    train, held = _examples(10), _examples(2, seed=1)
    whole = Trainer(target, random_drafter(target, vocab=VOCAB, seed=3), train, held, cfg, progress=False)
    whole.run()
    path = tmp_path / "ckpt.pt"
    first = Trainer(target, random_drafter(target, vocab=VOCAB, seed=3), train, held, cfg, path, progress=False)
    first.run(stop_after=3)  # interrupted: the checkpoint holds step 3
    assert first.step == 3 and path.is_file()
    resumed = Trainer(target, random_drafter(target, vocab=VOCAB, seed=3), train, held, cfg, path, progress=False)
    assert resumed.step == 3 and resumed.tokens == first.tokens
    resumed.run()
    assert resumed.step == whole.step == 8  # ceil(10 / 3) batches x 2 epochs
    assert resumed.tokens == whole.tokens
    for (name, a), b in zip(whole.d.state_dict().items(), resumed.d.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5, msg=name)
    assert [p["step"] for p in resumed.curve] == [p["step"] for p in whole.curve]
    assert len(resumed.opt.state) == len(whole.opt.state)


def test_command_writes_drafter_manifest_and_curve(tmp_path):
    out = tmp_path / "eagle"
    argv = ["--model", "tiny", "--limit", "12", "--max-new-tokens", "8", "--distill-dir", str(tmp_path / "distill"),
            "--ttt-steps", "3", "--batch-size", "4", "--eval-examples", "2", "--eval-every", "1",
            "--checkpoint", str(tmp_path / "ckpt.pt"), "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["steps"] == 3  # 11 training prompts in batches of 4
    assert len(manifest["heldout_accuracy_by_position"]) == 3
    assert manifest["tokens_seen"] > 0 and manifest["config"]["ttt_steps"] == 3
    assert {"machine", "train_seconds", "train_tokens_per_second", "command"} <= set(manifest)
    curve = json.loads((out / "curve.json").read_text())
    assert [p["step"] for p in curve["points"]] == [0, 1, 2, 3]
    assert all(0.0 <= a <= 1.0 for p in curve["points"] for a in p["accuracy"])
    drafter = load_drafter(out, S.tiny_model(eos_token_id=3, num_layers=4))
    assert drafter.config.variant == "eagle3"
    r = S.generate(S.tiny_model(eos_token_id=3, num_layers=4), [5, 6, 7, 8], method="eagle", weights=drafter,
                   max_new_tokens=8)  # fmt: skip
    assert r.tokens == S.generate(S.tiny_model(eos_token_id=3, num_layers=4), [5, 6, 7, 8], max_new_tokens=8).tokens


def test_a_run_in_sittings_and_a_continued_run(tmp_path):
    """--session-minutes 0 stops at once, checkpointed, writing nothing; the same command then finishes the run;
    --init-from starts a second run from the first one's drafter (the same weights before its first step)."""
    out, ckpt = tmp_path / "eagle", tmp_path / "ckpt.pt"
    argv = ["--model", "tiny", "--limit", "12", "--max-new-tokens", "8", "--distill-dir", str(tmp_path / "distill"),
            "--ttt-steps", "2", "--batch-size", "4", "--eval-examples", "2", "--eval-every", "1",
            "--checkpoint", str(ckpt), "--out", str(out), "--quiet"]  # fmt: skip
    assert main([*argv, "--session-minutes", "0"]) == 0
    assert ckpt.is_file() and not out.exists()
    assert main(argv) == 0
    assert json.loads((out / "manifest.json").read_text())["steps"] == 3
    first = load_drafter(out, S.tiny_model(eos_token_id=3, num_layers=4))
    config = EagleTrainConfig(ttt_steps=2, init_from=str(out))
    again = init_drafter(S.tiny_model(eos_token_id=3, num_layers=4), config)
    for (name, a), b in zip(first.state_dict().items(), again.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    with pytest.raises(SystemExit, match="eagle3 drafter, not eagle1"):
        init_drafter(S.tiny_model(eos_token_id=3, num_layers=4), EagleTrainConfig(variant="eagle1", init_from=str(out)))


def test_prompt_positions_add_the_prompt_after_the_shared_prefix(target):
    """teacher(prompt_from=i) scores prompt tokens from i on as well; the response-token count is unchanged; the
    trainer starts prompt positions after the prefix every training prompt shares."""
    d = random_drafter(target, vocab=VOCAB, seed=4)
    ex = _examples(4)
    shared = [9, 9, 9]
    ex = [DistillExample(e.question_id, e.category, shared + e.prompt_ids, e.response_ids, e.stop) for e in ex]
    plain, more = teacher(target, d, ex), teacher(target, d, ex, prompt_from=len(shared))
    assert more.tokens == plain.tokens == plain.positions
    for b, e in enumerate(ex):
        assert plain.valid[b].nonzero().flatten().tolist() == list(range(len(e.prompt_ids), len(e.ids)))
        assert more.valid[b].nonzero().flatten().tolist() == list(range(len(shared), len(e.ids)))
    assert more.positions == plain.positions + sum(len(e.prompt_ids) - len(shared) for e in ex)
    torch.testing.assert_close(more.features, plain.features)
    rows = plain.valid.roll(-1, 1) & plain.valid  # rows read by both: the target's distribution is the same there
    torch.testing.assert_close(more.p[rows], plain.p[rows])
    cfg = EagleTrainConfig(ttt_steps=2, eval_examples=0, prompt_positions=True)
    trainer = Trainer(target, d, ex, [], cfg, progress=False)
    assert trainer.prompt_from == len(shared)
    trainer.train_step(ex)
    assert trainer.positions > trainer.tokens > 0
