"""EAGLE-3's training-time test: the drafter unrolled on its own outputs for K steps, batched over positions.

Read from SafeAILab/EAGLE `eagle/traineagle3/cnets.py` (`Model.forward`, `LlamaAttention.forward`) and
`main.py` (the loss weights). Notation as in `model.py`: f_t the target's features at position t, x_t the
tokens, g_t = fc(f_t); the drafter's position t pairs its hidden input with x_{t+1} and predicts x_{t+2}.

Step i = 0..K-1 runs the one decoder layer over every index t of a (B, T) batch at once:

    hidden      h^0_t = g_t                 h^i_t = output of step i-1 at index t (its OWN output)
    token       x_{t+1+i}                   (the text's token: teacher-forced, as the anchor's shifted input_ids)
    rotary      position t + i              (the decode position of the i-th draft after the root x_{t+1})
    attention   keys of step 0 at indices s <= t (the true-feature entries), and the keys of steps 1..i at
                index t only (the chain's own earlier drafts)
    predicts    x_{t+2+i}: target p = softmax of the target's logits at position t+1+i restricted to the
                drafting vocabulary's columns (`logits[..., t2d]`: renormalised over those tokens)

which is exactly what decoding computes (`EagleDrafter.forward` on a cache of true entries 0..t, then i
single steps at positions t+1..t+i), so the training graph and the decode path agree step for step (a test
checks it). Loss, as the anchor: L = sum_i w^i L_i, w = 0.8, L_i = -sum_{t valid} sum_j p_ij log q_ij / N,
N the batch's loss positions at step 0 (one denominator for every step, as the anchor's mean over all
positions), a position valid when x_{t+2+i} is a response token and the target's greedy token there is in
the drafting vocabulary (the anchor's `position_mask`). Optionally the prompt's tokens count as well
(`teacher(prompt_from=...)`, teacher-forced text the prefill already paid for); held-out accuracy stays on
responses.

`teacher` is the target's side: one teacher-forced prefill of a right-padded batch gives the features, the
restricted distribution and the greedy tokens. `accuracy` is the held-out measure: the top-1 of step k-1
equals the target's greedy token, over every response position (drafts 1..k-1 teacher-forced, so this is
the greedy acceptance of draft k given the earlier ones were accepted).

Departure: the anchor masks more of step 0's keys at every step (`attention_mask[:, :, ind0, ind1] = min`
after step idx: at step i, index t no longer sees s in t-i+1..t; SafeAILab/EAGLE issue #247 asks why). Here
step i at index t sees all of 0..t, because that is what the decoder sees when it drafts from root x_{t+1}.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, repeat_kv

from ..eagle.model import EagleDrafter

__all__ = ["Teacher", "teacher", "Unroll", "unroll", "loss_rows", "shifted", "ttt_loss", "accuracy", "STEP_WEIGHT"]

STEP_WEIGHT = 0.8  # loss weight of step i: 0.8**i (SafeAILab/EAGLE eagle/traineagle3/main.py, `ploss_weight`)


@dataclass
class Unroll:
    hidden: list[torch.Tensor]  # K tensors (B, T, H): step i's pre-norm outputs
    logits: list[torch.Tensor]  # K tensors (B, T, M): step i's drafting-vocabulary logits (fp32)


def shifted(x: torch.Tensor, by: int, fill=0) -> torch.Tensor:
    """(B, T, ...) -> (B, T, ...) with out[:, t] = x[:, t + by] (`fill` past the end): the anchor's `padding`."""
    if by == 0:
        return x
    pad = x.new_full((x.shape[0], min(by, x.shape[1]), *x.shape[2:]), fill)
    return torch.cat([x[:, by:], pad], dim=1)


def _step(d: EagleDrafter, emb, hidden, positions, keys: list, values: list, causal) -> torch.Tensor:
    """One step of the layer over (B, T) indices; appends this step's K/V to keys/values -> (B, T, H)."""
    layer, attn = d.layer, d.layer.self_attn
    b, t, _ = hidden.shape
    if d.eagle3:
        residual = hidden
        x = torch.cat([layer.input_layernorm(emb), layer.hidden_norm(hidden)], dim=-1)  # (B, T, 2H)
    else:  # EAGLE-1/2: fc over [e ; f] is the layer's input and its residual
        x = residual = d.fc(torch.cat([emb, hidden], dim=-1))  # (B, T, H)
    shape = (b, t, -1, attn.head_dim)
    q = attn.q_proj(x).view(shape).transpose(1, 2)  # (B, nh, T, D)
    k = attn.k_proj(x).view(shape).transpose(1, 2)  # (B, nkv, T, D)
    v = attn.v_proj(x).view(shape).transpose(1, 2)
    cos, sin = d.rotary(x, positions)  # (B, T, D) each
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    keys.append(repeat_kv(k, attn.num_key_value_groups))  # (B, nh, T, D)
    values.append(repeat_kv(v, attn.num_key_value_groups))
    scores = [q @ keys[0].transpose(-1, -2) * attn.scaling + causal]  # (B, nh, T, T) the true entries s <= t
    scores += [(q * kj).sum(-1, keepdim=True) * attn.scaling for kj in keys[1:]]  # (B, nh, T, 1) own drafts
    w = torch.cat(scores, dim=-1).softmax(-1, dtype=torch.float32).to(q.dtype)  # (B, nh, T, T + i)
    out = w[..., :t] @ values[0]  # (B, nh, T, D)
    for j, vj in enumerate(values[1:]):
        out = out + w[..., t + j, None] * vj
    h = residual + attn.o_proj(out.transpose(1, 2).reshape(b, t, -1))
    return h + layer.mlp(layer.post_attention_layernorm(h))


def unroll(d: EagleDrafter, features: torch.Tensor, ids: torch.Tensor, steps: int,
           rows: list[torch.Tensor] | None = None) -> Unroll:  # fmt: skip
    """The training-time test (module docstring): `steps` steps over a batch.

    features (B, T, F, H): the target's features at every position; ids (B, T): the tokens. Index t of step i
    reads x_{t+1+i} (positions past the end read token 0: never a loss position). `rows[i]` (B, T) bool, when
    given, limits step i's logits to those indices (packed, (n_i, M)): the drafting head then runs only where a
    loss or an accuracy is read (the response), not over the prompt, whose indices still run the layer (their
    step-0 keys are the true entries every later index attends to).
    """
    b, t, f, h = features.shape
    hidden = d.fc(features.reshape(b, t, f * h)) if d.eagle3 else features[:, :, 0]  # (B, T, H)
    positions = torch.arange(t, device=features.device)[None].expand(b, t)
    causal = torch.full((t, t), torch.finfo(hidden.dtype).min, device=hidden.device).triu(1)  # (T, T)
    keys, values, out = [], [], Unroll([], [])
    for i in range(steps):
        emb = F.embedding(shifted(ids, 1 + i), d.embedding).to(hidden.dtype)  # (B, T, H) x_{t+1+i}
        hidden = _step(d, emb, hidden, positions + i, keys, values, causal)
        out.hidden.append(hidden)
        out.logits.append(d.logits(hidden if rows is None else hidden[rows[i]]).float())  # (B, T, M) or (n_i, M)
    return out


def loss_rows(valid: torch.Tensor, in_vocab: torch.Tensor, steps: int) -> list[torch.Tensor]:
    """Step i's loss indices (B, T) bool: x_{t+2+i} is a training token (`Teacher.valid`) and the target's greedy
    token there is in the drafting vocabulary (the anchor's `position_mask`)."""
    return [shifted(valid, 2 + i, False) & shifted(in_vocab, 1 + i, False) for i in range(steps)]


def ttt_loss(run: Unroll, target_p: torch.Tensor, valid: torch.Tensor, in_vocab: torch.Tensor,
             weight: float = STEP_WEIGHT) -> tuple[torch.Tensor, list[float]]:  # fmt: skip
    """(loss, per-step losses) of an `Unroll` (module docstring).

    target_p (B, T, M): the target's distribution at position u over the drafting vocabulary (row u predicts
    x_{u+1}); valid (B, T) bool: x_u is a training token; in_vocab (B, T) bool: the target's greedy token
    after position u is in the drafting vocabulary. Step i at index t uses row t+1+i and validity of x_{t+2+i}.
    The run's logits are either full (B, T, M) or packed at `loss_rows(valid, in_vocab, K)` (n_i, M).
    """
    n = shifted(valid, 2).sum().clamp_min(1)  # the loss positions of step 0
    total, parts = 0.0, []
    for i, (logits, mask) in enumerate(zip(run.logits, loss_rows(valid, in_vocab, len(run.logits)), strict=True)):
        p = shifted(target_p, 1 + i)[mask]  # (n_i, M)
        if logits.dim() == 3:
            logits = logits[mask]  # (n_i, M)
        loss = -(p * logits.log_softmax(-1)).sum(-1).sum() / n
        total = total + weight**i * loss
        parts.append(float(loss.detach()))
    return total, parts


@dataclass
class Teacher:
    """What one prefill of the frozen target gives a batch (B sequences, right-padded to T)."""

    features: torch.Tensor  # (B, T, F, H) hidden states at the drafter's feature layers
    ids: torch.Tensor  # (B, T) tokens (0 at padding)
    p: torch.Tensor  # (B, T, M) softmax of the target's logits restricted to the drafting vocabulary
    greedy: torch.Tensor  # (B, T) the target's argmax over its whole vocabulary (row u: the token after u)
    valid: torch.Tensor  # (B, T) bool: x_u is a training token (response; prompt from `prompt_from`)
    tokens: int  # response tokens the drafter predicts at step 0 (the training-token count of the curve)
    positions: int  # every loss position of step 0 (= tokens unless prompt positions are trained as well)


@torch.no_grad()
def teacher(target, d: EagleDrafter, examples, prompt_from: int | None = None) -> Teacher:
    """One teacher-forced prefill of `target` over `examples` (DistillExample: prompt_ids + response_ids).

    prompt_from: None scores the response positions only; an index i also scores the prompt's tokens from i on
    (teacher-forced text: the prefill computes the target's features and distribution there anyway, so those
    positions cost only the drafter's own work; i skips a prefix every prompt shares, e.g. the system turn).
    """
    device = d.lm_head.weight.device
    width = max(len(e.ids) for e in examples)
    ids = torch.zeros(len(examples), width, dtype=torch.long)
    mask = torch.zeros(len(examples), width, dtype=torch.long)
    valid = torch.zeros(len(examples), width, dtype=torch.bool)
    response = torch.zeros(len(examples), width, dtype=torch.bool)
    for i, e in enumerate(examples):
        ids[i, : len(e.ids)] = torch.tensor(e.ids)
        mask[i, : len(e.ids)] = 1
        response[i, len(e.prompt_ids) : len(e.ids)] = True
        start = len(e.prompt_ids) if prompt_from is None else min(prompt_from, len(e.prompt_ids))
        valid[i, start : len(e.ids)] = True
    ids, mask, valid = ids.to(device), mask.to(device), valid.to(device)
    out = target.get_decoder()(input_ids=ids, attention_mask=mask, use_cache=False, output_hidden_states=True)
    features = torch.stack([out.hidden_states[i] for i in d.config.feature_layers], dim=2).float()  # (B, T, F, H)
    head = target.get_output_embeddings().weight  # (V, H)
    last = out.last_hidden_state  # (B, T, H) after the final norm
    # the heads only where they are read: row u predicts x_{u+1}, read when x_{u+1} is a training token
    read = shifted(valid, 1, False)  # (B, T)
    rows = last[read]  # (R, H)
    greedy = torch.zeros_like(ids)
    greedy[read] = torch.cat([(chunk @ head.T).argmax(-1) for chunk in rows.split(512)])  # (R,), bounded memory
    p = torch.zeros(*ids.shape, len(d.target_ids), device=device)  # (B, T, M)
    p[read] = (rows @ head[d.target_ids].T).float().softmax(-1)  # restricted to the drafting vocabulary, renormalised
    return Teacher(features, ids, p, greedy, valid, int(shifted(response, 2, False).sum()),
                   int(shifted(valid, 2, False).sum()))  # fmt: skip


def accuracy(d: EagleDrafter, t: Teacher, steps: int) -> tuple[list[int], list[int]]:
    """(hits, positions) per draft position k = 1..steps: top-1 of step k-1 == the target's greedy token."""
    masks = [shifted(t.valid, 2 + i, False) for i in range(steps)]  # x_{t+2+i} is a response token
    run = unroll(d, t.features, t.ids, steps, rows=masks)
    hits, total = [], []
    for i, (logits, mask) in enumerate(zip(run.logits, masks, strict=True)):
        guess = d.target_ids[logits.argmax(-1)]  # (n_i,) target ids
        hits.append(int((guess == shifted(t.greedy, 1 + i)[mask]).sum()))
        total.append(int(mask.sum()))
    return hits, total
