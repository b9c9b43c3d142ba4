"""Medusa heads: shapes, the one-matmul shared head, labels, loss weights, checkpoints, Medusa-1/2 training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from specdec_lab import tiny_model
from specdec_lab.medusa import (
    IGNORE_INDEX,
    MedusaConfig,
    MedusaHeads,
    frozen_head_loss,
    load_heads,
    load_medusa_layout,
    loss_weights,
    medusa_labels,
    medusa_loss,
    save_heads,
    save_medusa_layout,
)
from specdec_lab.medusa.heads import FrozenHeadCE
from specdec_lab.train.distill import cache_hidden_states, generate_distillation_data, split_heldout
from specdec_lab.train.medusa1 import Medusa1Config, build_rows, head_accuracy, train_medusa1
from specdec_lab.train.medusa2 import Medusa2Config, backbone_drift, train_medusa2

EOS = 3
ROOT = Path(__file__).resolve().parents[1]


def _randomised(heads: MedusaHeads) -> MedusaHeads:
    """Non-zero residual blocks, so heads differ from each other and from the base head."""
    with torch.no_grad():
        heads.w1.normal_(0, 0.2)
        heads.b1.normal_(0, 0.2)
        if heads.w2 is not None:
            heads.w2.add_(torch.randn_like(heads.w2) * 0.1)
    return heads


@pytest.fixture(scope="module")
def model():
    return tiny_model(eos_token_id=EOS)


@pytest.fixture(scope="module")
def examples(model, tmp_path_factory):
    """Self-distilled data of the tiny model: its own greedy continuations of random prompts."""
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(4, 256, (6,), generator=gen).tolist() for _ in range(40)]
    out = tmp_path_factory.mktemp("distill")
    return generate_distillation_data(model, prompts, out, max_new_tokens=24, batch_size=20, progress=False)


@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("layers", [1, 2])
def test_shapes_and_one_matmul_equals_per_head_matmuls(model, shared, layers):
    heads = _randomised(MedusaHeads.for_model(model, num_heads=3, num_layers=layers, shared_lm_head=shared))
    h = torch.randn(2, 5, 64)  # (B, T, H)
    assert heads.features(h).shape == (2, 5, 3, 64)
    logits = heads(h)
    assert logits.shape == (2, 5, 3, 256)  # (B, T, K, V)
    for k in range(1, 4):
        torch.testing.assert_close(logits[..., k - 1, :], heads.head_logits(h, k), atol=1e-5, rtol=1e-5)
    n_params = sum(p.numel() for p in heads.parameters())
    assert n_params == layers * 3 * (64 * 64 + 64) + (0 if shared else 3 * 256 * 64)


def test_shared_head_uses_the_targets_weight_and_starts_as_the_base_head(model):
    heads = MedusaHeads.for_model(model, num_heads=4)
    lm_head = model.get_output_embeddings().weight
    assert heads.lm_head_weight.data_ptr() == lm_head.data_ptr()  # shared storage, not a copy
    assert "lm_head_weight" not in heads.state_dict()  # never saved
    h = torch.randn(7, 64)
    base = h @ lm_head.T
    for k in range(4):  # W1 = 0: SiLU(0) = 0, every head is the base head at init
        torch.testing.assert_close(heads(h)[:, k], base)
    with pytest.raises(ValueError, match="lm_head_weight"):
        MedusaHeads(MedusaConfig(hidden_size=64, vocab_size=256))


def test_labels_are_shifted_by_k_plus_one_and_skip_the_prompt():
    ids = torch.arange(100, 110)  # T = 10
    labels = medusa_labels(ids, prompt_length=4, num_heads=3)  # (T, K+1)
    assert labels.shape == (10, 4)
    for t in range(10):
        for k in range(4):
            j = t + k + 1  # head k predicts x_{t+k+1}; head 0 is the base LM head
            want = int(ids[j]) if 4 <= j < 10 else IGNORE_INDEX
            assert labels[t, k] == want, (t, k)
    assert labels[3, 0] == 104 and labels[2, 1] == 104 and labels[1, 1] == IGNORE_INDEX  # first response token
    assert labels[7, 1] == 109 and labels[8, 1] == IGNORE_INDEX  # last one


def test_loss_weights_and_weighted_loss():
    torch.testing.assert_close(loss_weights(4), torch.tensor([0.8, 0.64, 0.512, 0.4096]))
    torch.testing.assert_close(loss_weights(2, decay=1.0), torch.ones(2))
    logits = torch.randn(6, 2, 11)  # (N, K, V)
    labels = torch.randint(0, 11, (6, 2))
    labels[0, 1] = labels[4, 1] = IGNORE_INDEX
    total, per_head = medusa_loss(logits, labels, loss_weights(2))
    ce = torch.nn.functional.cross_entropy
    head1 = ce(logits[:, 0], labels[:, 0])
    head2 = ce(logits[[1, 2, 3, 5], 1], labels[[1, 2, 3, 5], 1])  # ignored rows excluded from the mean
    torch.testing.assert_close(per_head, torch.stack([head1, head2]))
    torch.testing.assert_close(total, 0.8 * head1 + 0.64 * head2)


def test_fused_frozen_head_loss_equals_autograd_through_the_logits():
    w = torch.randn(300, 16)  # (V, H) frozen projection
    z = torch.randn(5, 3, 16, requires_grad=True)  # (N, K, H)
    labels = torch.randint(0, 300, (5, 3))
    labels[1, 2] = labels[4, 0] = IGNORE_INDEX
    weights = loss_weights(3)
    ref, ref_heads = medusa_loss(z @ w.T, labels, weights)
    (ref_grad,) = torch.autograd.grad(ref, z)
    fused, fused_heads = frozen_head_loss(z, w, labels, weights)  # chunk smaller than N*K below too
    (grad,) = torch.autograd.grad(fused, z)
    torch.testing.assert_close(fused, ref)
    torch.testing.assert_close(fused_heads, ref_heads)
    torch.testing.assert_close(grad, ref_grad)
    ce = FrozenHeadCE.apply(z.detach().reshape(15, 16), w, labels.reshape(15), None, 0.0, 4)  # 4 chunks
    torch.testing.assert_close(ce.view(5, 3).sum(0) / (labels != IGNORE_INDEX).sum(0), ref_heads)


@pytest.mark.parametrize("shared", [True, False])
def test_save_load_round_trip_our_format(model, tmp_path, shared):
    heads = _randomised(MedusaHeads.for_model(model, num_heads=3, num_layers=2, shared_lm_head=shared))
    save_heads(heads, tmp_path / "fp32", dtype=torch.float32, metadata={"note": "x"})
    back = load_heads(tmp_path / "fp32", model)
    assert back.config == heads.config
    h = torch.randn(4, 64)
    torch.testing.assert_close(back(h), heads(h), atol=0, rtol=0)
    save_heads(heads, tmp_path / "fp16")  # default: fp16, what we ship
    torch.testing.assert_close(load_heads(tmp_path / "fp16", model)(h), heads(h), atol=2e-2, rtol=1e-2)
    config = json.loads((tmp_path / "fp32" / "medusa_config.json").read_text())
    assert config["metadata"] == {"note": "x"} and config["shared_lm_head"] == shared


def test_published_layout_with_stacked_blocks_round_trips_and_warns(model, tmp_path):
    """Several blocks per head: exact round trip here, and a warning about FasterDecoding's tied blocks."""
    heads = _randomised(MedusaHeads.for_model(model, num_heads=2, num_layers=3))
    with pytest.warns(UserWarning, match="tied block"):
        out = save_medusa_layout(heads, tmp_path / "pub", dtype=torch.float32)
    back = load_heads(out, model)
    assert back.config.num_layers == 3
    h = torch.randn(3, 64)
    torch.testing.assert_close(back(h), heads(h), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("shared", [True, False])
def test_save_load_round_trip_published_layout(model, tmp_path, shared):
    heads = _randomised(MedusaHeads.for_model(model, num_heads=2, shared_lm_head=shared))
    out = save_medusa_layout(heads, tmp_path / "pub", dtype=torch.float32, base_model="tiny")
    config = json.loads((out / "config.json").read_text())
    assert config["medusa_num_heads"] == 2 and config["medusa_num_layers"] == 1
    from safetensors.torch import load_file

    state = load_file(str(out / "medusa_lm_head.safetensors"))
    assert set(state) == {f"{k}.{s}" for k in range(2) for s in ("0.linear.weight", "0.linear.bias", "1.weight")}
    assert state["1.1.weight"].shape == (256, 64)  # every head carries its W2 in that layout
    back = load_heads(out, model)  # detected: no medusa_config.json
    assert back.config.shared_lm_head == shared  # shared W2 == LM head is recognised as the shared variant
    h = torch.randn(3, 64)
    torch.testing.assert_close(back(h), heads(h), atol=1e-6, rtol=1e-6)
    # the older torch.save checkpoint, with a "medusa_head." prefix as some trainers write it
    (out / "medusa_lm_head.safetensors").rename(tmp_path / "moved")
    torch.save({f"medusa_head.{k}": v for k, v in state.items()}, out / "medusa_lm_head.pt")
    forced = load_medusa_layout(out, model, shared=False)
    assert not forced.config.shared_lm_head
    torch.testing.assert_close(forced(h), heads(h), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize(
    "bf16,soft", [(False, 0.0), (False, 0.5), (True, 0.0), (True, 0.5)]
)  # bf16: the projection's dtype (fp32 where bf16 is emulated); soft: half of each target is the model's own
def test_a_few_medusa1_steps_lower_the_loss_and_raise_accuracy(model, examples, tmp_path, bf16, soft):
    train_ex, held_ex = split_heldout(examples, every=5)
    cache = cache_hidden_states(model, examples, tmp_path / "h.safetensors", progress=False)
    rows = build_rows(cache.subset([e.question_id for e in train_ex]), num_heads=3)
    held = build_rows(cache.subset([e.question_id for e in held_ex]), num_heads=3)
    assert rows.labels.shape[1] == 4 and (rows.labels[:, 1:] != IGNORE_INDEX).any(1).all()
    heads = MedusaHeads.for_model(model, num_heads=3)
    before = head_accuracy(heads, rows)
    assert before.base_top1 > 0.97  # greedy self-distilled text: the LM head agrees with its labels
    cfg = Medusa1Config(steps=60, batch_size=64, lr=1e-2, warmup_steps=5, log_every=10, bf16=bf16, soft=soft)
    log = train_medusa1(heads, rows, cfg, eval_rows=held, progress=False)
    # soft targets: the loss is a cross-entropy against a spread-out distribution, floored at its entropy
    assert log.loss[-1] < (0.9 if soft else 0.8) * log.loss[0]
    after = head_accuracy(heads, rows)  # a random model's text: learnable on the training rows only
    assert all(a < b for a, b in zip(after.loss, before.loss, strict=True))
    assert after.top1[0] > before.top1[0] + 0.02
    assert log.evals and log.evals[-1]["step"] == 60 and len(log.evals[-1]["top1"]) == 3


def test_medusa2_keeps_the_backbone_close_to_the_original(examples):
    model = tiny_model(eos_token_id=EOS)  # trained in place: a fresh copy of the same weights
    heads = MedusaHeads.for_model(model, num_heads=2)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    # the backbone's learning rate 100x below the heads': Adam moves every weight by ~lr per step
    cfg = Medusa2Config(warmup_steps=10, joint_steps=20, batch_size=4, head_lr=1e-2, backbone_lr=1e-4, lambda0_ramp=10)
    log = train_medusa2(model, heads, examples[:30], cfg, eval_sequences=examples[30:], progress=False)
    assert log.phase.count("warmup") == 10 and log.phase.count("joint") == 20
    assert log.drift[0]["kl"] < 1e-6  # the warmup (Medusa-1) phase never touches the backbone
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, original[k])]
    assert changed and not any("embed" in k or "lm_head" in k for k in changed)  # backbone moved, not embeddings
    drift = log.drift[-1]
    assert 0 < drift["kl"] < 0.01 and drift["top1_agreement"] > 0.9  # nats per response position
    assert sum(log.head_loss[-1]) < 0.8 * sum(log.head_loss[0])
    assert all(p.requires_grad for p in model.parameters())  # flags restored
    # the drift measure itself: a model against itself has none
    zero = backbone_drift(model, model, examples[30:])
    assert zero.kl < 1e-6 and zero.top1_agreement == 1.0


@pytest.mark.real
def test_shipped_heads_load_on_the_real_model_and_beat_the_untrained_head(real_model):
    from specdec_lab.medusa import load_shipped_heads, shipped_heads_path

    assert (shipped_heads_path() / "medusa_config.json").is_file(), f"shipped heads missing: {shipped_heads_path()}"
    model, _ = real_model
    heads = load_shipped_heads(model)
    manifest = json.loads((shipped_heads_path() / "manifest.json").read_text())
    assert heads.config.num_heads == manifest["heads"]["num_heads"] and heads.config.shared_lm_head
    from specdec_lab.train.distill import load_distillation_data

    data = load_distillation_data(ROOT / "data" / "distill" / "smollm2-135m")
    _, held = split_heldout(data, every=10)
    cache = cache_hidden_states(real_model, held[:4], None, progress=False)
    rows = build_rows(cache, heads.num_heads)
    trained = head_accuracy(heads, rows)
    untrained = head_accuracy(MedusaHeads.for_model(model, num_heads=heads.num_heads), rows)
    assert trained.top1[0] > untrained.top1[0] + 0.2 and trained.top1[0] > 0.4


def test_figures_and_the_live_plot_callback():
    import plotly.graph_objects as go

    from specdec_lab.lab.medusa import MedusaTrainingDashboard
    from specdec_lab.train.medusa1 import HeadAccuracy, TrainLog
    from specdec_lab.train.medusa2 import Medusa2Log
    from specdec_lab.viz.medusa import (
        ablation_figure,
        architecture_figure,
        head_accuracy_figure,
        loss_figure,
        medusa2_figure,
        update_loss_figure,
    )

    for shared in (True, False):
        assert architecture_figure(MedusaConfig(576, 49152, 4, shared_lm_head=shared), 30).layout.shapes
    log = TrainLog(step=[10, 20], loss=[3.0, 2.0], head_loss=[[1.0, 2.0], [0.5, 1.5]])
    fig = loss_figure(None, num_heads=2)
    assert update_loss_figure(fig, log) is False  # "keep training"
    assert list(fig.data[1].y) == [2.0, 1.5] and list(fig.data[2].y) == [3.0, 2.0]
    acc = HeadAccuracy(top1=[0.6, 0.3], top5=[0.8, 0.5], loss=[1.0, 2.0], count=[5, 5], base_top1=1.0)
    paper = head_accuracy_figure({"a": acc}).data
    assert len(paper) == 3 and "Cai et al. 2024" in paper[2].name  # top-1, top-5, the paper named by its source
    assert len(ablation_figure({"a": acc, "b": acc}).data) == 2
    m2 = Medusa2Log(
        step=[1, 2],
        phase=["warmup", "joint"],
        lm_loss=[0, 0.1],
        head_loss=[[1.0], [0.9]],
        medusa_weight=[1.0, 0.1],
        drift=[{"step": 1, "kl": 0.0}, {"step": 2, "kl": 0.01}],
    )
    assert len(medusa2_figure({"kl": m2}).data) == 2
    calls = []

    def train_fn(steps, lr, decay, callback):  # what the notebook passes: trains, calling back per log
        calls.append((steps, lr, decay))
        callback(log)
        return log, acc

    dash = MedusaTrainingDashboard(train_fn, num_heads=2, steps=30, lr=1e-3)
    assert isinstance(dash.figure, go.FigureWidget)
    dash.run()
    assert calls == [(30, pytest.approx(1e-3), 0.8)] and list(dash.figure.data[0].y) == [1.0, 0.5]
    assert "0.600" in dash.output.value and not dash.button.disabled


def test_soft_targets_need_the_fused_shared_head_path(model, examples, tmp_path):
    cache = cache_hidden_states(model, examples, tmp_path / "h.safetensors", progress=False)
    rows = build_rows(cache, num_heads=2)
    separate = MedusaHeads.for_model(model, num_heads=2, shared_lm_head=False)
    with pytest.raises(ValueError, match="soft targets"):
        train_medusa1(separate, rows, Medusa1Config(steps=1, soft=0.5))
    with pytest.raises(ValueError, match="soft must be in"):
        train_medusa1(MedusaHeads.for_model(model, num_heads=2), rows, Medusa1Config(steps=1, soft=1.5))


def test_soft_targets_gradient_equals_autograd_through_the_mixture():
    """FrozenHeadCE with a teacher: CE against (1-b) onehot + b softmax(teacher W^T), its gradient by autograd."""
    torch.manual_seed(0)
    z = torch.randn(15, 16, requires_grad=True)
    teacher, w = torch.randn(15, 16), torch.randn(40, 16)
    labels = torch.randint(0, 40, (15,))
    labels[3] = IGNORE_INDEX
    beta = 0.3
    fused = FrozenHeadCE.apply(z, w, labels, teacher, beta, 4)
    fused.sum().backward()
    z2 = z.detach().clone().requires_grad_(True)
    valid = labels != IGNORE_INDEX
    target = (1 - beta) * torch.nn.functional.one_hot(labels.clamp(min=0), 40) + beta * torch.softmax(teacher @ w.T, -1)
    ref = -(target * torch.log_softmax(z2 @ w.T, -1)).sum(-1) * valid
    ref.sum().backward()
    torch.testing.assert_close(fused, ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(z.grad, z2.grad, atol=1e-4, rtol=1e-4)


def test_rows_point_at_the_teacher_position_t_plus_k():
    from specdec_lab.train.distill import HiddenCache

    h = torch.arange(12, dtype=torch.float16)[:, None].repeat(1, 4)  # row value = global position
    cache = HiddenCache(
        hidden=h,
        ids=torch.arange(12),
        offsets=torch.tensor([0, 5, 12]),
        prompt_lengths=torch.tensor([2, 3]),
        question_ids=torch.tensor([1, 2]),
    )
    rows = build_rows(cache, 2)
    teach = rows.teacher_hidden(torch.arange(len(rows)), 2)[..., 0]  # (N, K) global position of h_{t+k}
    for i in range(len(rows)):
        t = int(rows.position[i])
        assert int(rows.hidden(torch.tensor([i]))[0, 0]) == t  # row value = its global position
        for k in (1, 2):
            if rows.labels[i, k] != IGNORE_INDEX:
                assert int(teach[i, k - 1]) == t + k
                assert int(cache.ids[t + k + 1]) == int(rows.labels[i, k])  # h_{t+k} predicts x_{t+k+1}
            else:
                assert int(teach[i, k - 1]) == 0


def test_train_subcommand_names():
    from specdec_lab.train import main, subcommands

    assert subcommands() == ["draft", "eagle", "lineage", "medusa", "medusa-calibrate", "medusa-memorisation"]
    with pytest.raises(SystemExit) as done:
        main(["medusa", "--help"])
    assert done.value.code == 0


def test_train_cli_smoke_with_soft_targets_and_a_data_fraction(tmp_path):
    from specdec_lab.train.medusa_cli import main

    out = tmp_path / "heads"
    rc = main(["--model", "tiny", "--distill-dir", str(tmp_path / "distill"), "--out", str(out),
               "--cache", str(tmp_path / "hidden.safetensors"), "--heads", "2", "--layers", "1",
               "--steps", "5", "--eval-every", "0", "--soft", "0.5", "--train-fraction", "0.5", "--quiet"])  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert rc == 0 and manifest["training"]["soft"] == 0.5
    data = manifest["data"]
    assert data["train_fraction"] == 0.5
    assert data["train_examples"] == (data["examples"] - data["heldout_examples"]) // 2
