# ---
# jupyter:
#   jupytext:
#     cell_metadata_filter: -papermill,-execution
#     formats: ipynb,py//py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (specdec_lab)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 03 · Medusa heads: extra decoding heads on the target's last hidden state
#
# A draft model ([Leviathan et al. 2023](https://arxiv.org/abs/2211.17192)) is a second network with its own KV
# cache. **Medusa** ([Cai et al. 2024](https://arxiv.org/abs/2401.10774)) drafts with almost nothing: a few small
# *heads* that read the hidden state the target has already computed. At position *t* the target's LM head
# ("head 0") reads the last hidden state $h_t$ and predicts $x_{t+1}$; Medusa head $k$ reads the **same** $h_t$
# and predicts $x_{t+k+1}$:
#
# $$p_t^{(k)} = \mathrm{softmax}\big(W_2^{(k)} \cdot (\mathrm{SiLU}(W_1^{(k)} h_t + b^{(k)}) + h_t)\big)$$
#
# One decoding step then proposes $x_{t+1}$ (the target's own prediction) followed by the heads' guesses
# for $x_{t+2}, \dots, x_{t+K+1}$, and the target verifies them all in one forward (notebooks 04–06 decode with
# them). Here we build and train the heads.
#
# ### Learning objectives
#
# - **Explain** the Medusa head architecture and **count** its parameters when $W_2$ is shared with the LM head.
# - **Derive** each head's training labels (head $k$ at position $t$ learns $x_{t+k+1}$) and check them against
#   the library's.
# - **Measure** per-head accuracy on held-out text, and **explain** why head $k$ is harder than head $k-1$ and
#   why training accuracy overstates it.
# - **Train** Medusa-1 heads live and **test**, by ablation, what the loss weights $\lambda_k$ do to the trained
#   heads.
# - **Measure** the drift of a backbone trained with the heads (Medusa-2) with and without its self-distillation
#   term, and **judge** the difference against its noise.
#
# ### Prerequisites
#
# Notebook 00 (the decoding loop, the KV cache) and notebooks 01–02 (drafting and verifying with a draft model).
# Notation as in notebook 00's table: p = the target, q = the draft, α = the chance a drafted token is accepted,
# E[L] = expected tokens emitted per target forward (bonus included). Here $K$ = the number of heads and $k$
# indexes them: head $k$ drafts the token $k + 1$ places ahead, so heads $1..k$ draft $k$ tokens (notebook 00's
# draft length). $\lambda_k$ is head $k$'s loss weight, and top-1 / top-5 accuracy = how often the true token is
# a head's first guess / among its five best.
#
# ### Plan
#
# 1. the architecture, and the variant we ship: $W_2$ **shared with the frozen LM head**;
# 2. self-distillation data: the target's own greedy answers, and the labels of each head;
# 3. the shipped heads for SmolLM2-135M-Instruct, **why head $k$ is harder** (vs. the paper's Vicuna-7B), and how
#    much of their training accuracy is memorised (training vs held-out text, epoch by epoch);
# 4. Medusa-1 training, live, with per-head loss curves;
# 5. the loss weights $\lambda_k = 0.8^k$, ablated;
# 6. a Medusa-2 run on a tiny model (heads and backbone trained jointly) with the backbone's drift measured.
#
# The shipped heads come from `python -m specdec_lab.train medusa` (recipe and numbers in
# `data/medusa/smollm2-135m/manifest.json`); the training below is a short run of the same library code.

# %% tags=["parameters"]
quick: bool = False  # CI: tiny run (few examples, few steps), same code paths
model_name: str = "smollm2-135m"  # target model: shipped name, HF directory or .gguf
heads_dir: str = "../data/medusa/smollm2-135m"  # the shipped heads (with manifest.json)
distill_dir: str = "../data/distill/smollm2-135m"  # the committed self-distillation data
heldout_every: int = 10  # hold out every n-th prompt by question_id (as for the shipped heads)
heldout_examples: int = 30  # held-out prompts evaluated live, evenly spread over their categories
train_examples: int = 60  # training examples for the live run (their hidden states are computed here)
train_steps: int = 60  # Medusa-1 steps of the live run
batch_size: int = 128  # rows (positions) per step
lr: float = 3e-3  # AdamW learning rate of the live runs
ablation_steps: int = 20  # steps per loss-weight setting in the ablation
threads: int = 0  # torch CPU threads (0: the torch default)
memorisation_file: str = "../data/medusa/memorisation.json"  # per-epoch train vs held-out accuracy (python -m specdec_lab.train medusa-memorisation)
rerun: bool = False  # section 3: measure the memorisation curve afresh (minutes on a CPU; quick: a tiny run) into rerun_out instead of reading memorisation_file
rerun_out: str = "../results/medusa/memorisation.json"  # where a rerun writes
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    train_examples, heldout_examples, train_steps, batch_size, ablation_steps = 12, 6, 20, 64, 10
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, threads, stem="03_medusa_heads")
lm = load_model(model_name)

# %% [markdown]
# ## 1. The heads
#
# Each head is a residual block (576 × 576 for SmolLM2; the shipped heads stack several, counted below) followed by a
# projection $W_2$ to the vocabulary. The paper gives every head its own $W_2$, initialised from the LM
# head. With a 49 152-token vocabulary that projection is 28 M parameters per head — 57 MB in fp16, a
# fifth of the whole model, *per head*. So the variant we ship keeps $W_2$ **equal to the target's LM
# head, frozen**: a head is then only its residual block(s), and since every head multiplies by the same matrix, all $K$ heads'
# logits come from **one** matmul $(N, K, H) \times (H, V)$.
#
# $W_1$ starts at zero, so $\mathrm{SiLU}(0) = 0$ and each head starts out *as the LM head*: it predicts
# $x_{t+1}$. Training moves head $k$ forward by $k$ tokens.

# %%
import json
from pathlib import Path

from specdec_lab.medusa import load_heads
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.medusa import architecture_figure

model = lm.model
n_layers = model.config.num_hidden_layers
shipped = load_heads(heads_dir, model)  # attaches the target's LM head (shared storage, no copy)
manifest = json.loads((Path(heads_dir) / "manifest.json").read_text())
K = shipped.config.num_heads
fig = architecture_figure(shipped.config, backbone_layers=n_layers)
if not quick:
    print(f"saved {save_figure(fig, '03_medusa_architecture', FIGURES)}")
fig

# %% tags=["nbval-check-output"]
import pandas as pd

H, V = model.config.hidden_size, model.config.vocab_size
blocks = shipped.config.num_layers  # residual blocks per head, from the shipped heads' config
block = H * H + H  # one residual block: W1 (H x H) and b1 (H)
stored = sum(p.numel() for p in shipped.parameters())  # w1, b1; the shared W2 is the LM head (a buffer)
assert stored == K * blocks * block
target_params = sum(p.numel() for p in model.parameters())
variants = {
    f"shipped: {blocks} blocks/head, W2 = LM head": K * blocks * block,
    f"{blocks} blocks/head, own W2 per head": K * (blocks * block + V * H),
    "paper: 1 block/head, own W2 per head": K * (block + V * H),
}
pd.DataFrame(
    {
        name: {
            "parameters": f"{n / 1e6:.2f} M",
            "fp16 size": f"{n * 2 / 1e6:.2f} MB",
            "share of the 135M target": f"{n / target_params:.1%}",
        }
        for name, n in variants.items()
    }
).T.rename_axis(f"K = {K} heads")

# %% [markdown]
# **One matmul equals K matmuls.** `heads(h)` computes all residual blocks batched and projects the
# (N·K, H) features in one product; `head_logits(h, k)` is the plain per-head reference.

# %% tags=["nbval-check-output"]
import torch

torch.manual_seed(0)  # the same 8 states every run
h = torch.randn(8, H)  # 8 hidden states
with torch.no_grad():
    batched = shipped(h)  # (8, K, V)
    per_head = torch.stack([shipped.head_logits(h, k) for k in range(1, K + 1)], dim=1)
print(f"batched logits {tuple(batched.shape)}; max |difference| to per-head matmuls "
      f"< 1e-3: {(batched - per_head).abs().max().item() < 1e-3}")

# %% [markdown]
# ## 2. Self-distillation data and the heads' labels
#
# Heads should predict what *the target* will say, so the training text is the target's own greedy
# answers to `data/train_prompts.jsonl` (counted in the table below; `data/prompts.jsonl`, the benchmark
# set, is never trained on). `generate_distillation_data` batches prompts through `model.generate` (left
# padding), writes one shard per batch atomically and skips existing shards on a rerun; the set is
# committed under `data/distill/`. Every tenth prompt is held out for measuring accuracy.

# %% tags=["nbval-check-output"]
from specdec_lab.train.distill import distillation_stats, load_distillation_data, split_heldout

data = load_distillation_data(distill_dir)
stats = distillation_stats(distill_dir)
train_all, held_out = split_heldout(data, every=heldout_every)
pd.Series(
    {
        "prompts": stats["examples"],
        "train / held-out": f"{len(train_all)} / {len(held_out)}",
        "prompt tokens (chat template)": stats["prompt_tokens"],
        "response tokens": stats["response_tokens"],
        "responses that ended with EOS": stats["stopped_at_eos"],
        "max new tokens": stats["max_new_tokens"],
        # the shards' recorded seconds, not timed here: the shipped heads' run generated them, and its manifest
        # names the machine (data/medusa/smollm2-135m/manifest.json)
        f"generation time, these {stats['examples']} prompts (batch {stats['batch_size']}, on {manifest['machine']['cpu']})":
            f"{stats['generation_seconds'] / 60:.1f} min",
    }
).to_frame(stats["model"])

# %%
ex = held_out[0]
print(lm.tokenizer.decode(ex.prompt_ids) + "\u2502" + lm.tokenizer.decode(ex.response_ids))

# %% [markdown]
# **Labels.** At position $t$ head $k$'s target is token $t+k+1$ ($k = 0$: the LM head's own next
# token). Only response tokens are targets: the prompt is not the target's text. Derived naively here,
# then checked against `medusa_labels`. The table shows each token's text as the tokenizer decodes it in
# place (`specdec_lab.text.token_pieces`), with whitespace made visible:

# %% tags=["nbval-check-output"]
from IPython.display import Markdown, display

from specdec_lab.medusa import IGNORE_INDEX, medusa_labels
from specdec_lab.text import WHITESPACE_LEGEND, token_pieces, visible

ids, P = torch.tensor(ex.ids), len(ex.prompt_ids)
naive = torch.full((len(ids), K + 1), IGNORE_INDEX)
for t in range(len(ids)):
    for k in range(K + 1):
        if P <= t + k + 1 < len(ids):
            naive[t, k] = ids[t + k + 1]
assert torch.equal(naive, medusa_labels(ids, P, K))
pieces = [visible(x) for x in token_pieces(ids.tolist(), lm.tokenizer)]  # the text of token j, in context
label = lambda t, k: pieces[t + k + 1] if naive[t, k] != IGNORE_INDEX else "(none)"  # noqa: E731  x_{t+k+1}
window = range(P - K - 2, P + 3)
display(Markdown(f"Token text: {WHITESPACE_LEGEND}. *(none)*: no label (a prompt token, not the target's text)."))
pd.DataFrame(
    {"token x_t": [pieces[t] for t in window]}
    | {("LM head" if k == 0 else f"head {k}"): [label(t, k) for t in window] for k in range(K + 1)},
    index=pd.Index([f"t = {t}" + (" (last prompt token)" if t == P - 1 else "") for t in window]),
)

# %% [markdown]
# Because the backbone is frozen in Medusa-1, $h_t$ never changes during training: we run the target
# once over every example and keep its last hidden states (fp16) — `cache_hidden_states`. A training
# example is then one *row* ($h_t$ and its $K$ labels), and an epoch costs only the heads, not the
# backbone's layers. Here: `heldout_examples` of this data's held-out prompts (the manifest has the shipped heads'
# accuracy pooled over all held-out prompts of the three sets, and per set) plus `train_examples` training ones.

# %%
import time

from specdec_lab.train.distill import cache_hidden_states
from specdec_lab.train.medusa1 import build_rows

train_ex = train_all[:train_examples]
held_ex = held_out[:: max(len(held_out) // heldout_examples, 1)][:heldout_examples]  # evenly spread
t0 = time.perf_counter()
cache_path = Path(f"../data/cache/03_medusa_heads-{len(train_ex)}-{len(held_ex)}.safetensors")
cached = cache_path.is_file()  # an earlier run's hidden states: read back, not recomputed
cache = cache_hidden_states(lm, train_ex + held_ex, cache_path, progress=False)
train_rows = build_rows(cache.subset([e.question_id for e in train_ex]), K)
held_rows = build_rows(cache.subset([e.question_id for e in held_ex]), K)
print(f"hidden states of {len(cache)} examples {'loaded from the cache' if cached else 'computed'} in "
      f"{time.perf_counter() - t0:.1f} s "
      f"({cache.hidden.numel() * 2 / 1e6:.0f} MB fp16); rows: {len(train_rows)} train, {len(held_rows)} held-out")

# %% [markdown]
# ## 3. The shipped heads, and why head k is harder
#
# The shipped heads were trained by `python -m specdec_lab.train medusa` on three prompt sets: the
# hand-written training prompts, the template bank (`data/prompt_bank.py`) and prompts over real
# documentation prose (`data/doc_prompts.py`). The sizes, from the data and the manifest:

# %%
from specdec_lab.viz.medusa import PAPER_VICUNA_7B_SOURCE

SET_NAMES = {"smollm2-135m": "hand-written", "smollm2-135m-extra": "template bank", "smollm2-135m-docs": "real prose"}
set_sizes = {}  # set -> (train prompts, held-out prompts), split by the manifest's rule (every 10th question_id)
train_response_tokens = 0  # the training prompts' response tokens (notebook 02 counts the same split)
for folder in manifest["data"]["distill_dir"].split(","):
    tr_set, ho_set = split_heldout(load_distillation_data(Path("..") / folder), every=heldout_every)
    set_sizes[SET_NAMES.get(Path(folder).name, Path(folder).name)] = (len(tr_set), len(ho_set))
    train_response_tokens += sum(len(e.response_ids) for e in tr_set)
Markdown(
    "Training prompts: " + ", ".join(f"{n_tr} {name}" for name, (n_tr, _) in set_sizes.items())
    + f" ({manifest['data']['train_rows'] / 1e3:.0f}k hidden-state rows, one per position at which some head has a "
    f"response token to predict: the last {K + 1} prompt positions and all but the last two response positions of "
    f"each example, so {K - 1} rows per example more than its response tokens, {train_response_tokens:,} over the "
    "training prompts); held out: "
    + ", ".join(f"{n_ho} {name}" for name, (_, n_ho) in set_sizes.items())
    + ". Their recipe and held-out accuracy, as recorded in the manifest: per head, top-1 and top-5 accuracy and the "
    "mean cross-entropy (nats) on the held-out positions, next to the Vicuna-7B heads' top-1 from the "
    f"{PAPER_VICUNA_7B_SOURCE}."
)

# %% tags=["nbval-check-output"]
from specdec_lab.viz.medusa import PAPER_VICUNA_7B_TOP1

tr = manifest["training"]
acc_m = manifest["heldout_accuracy"]
print(f"command: {manifest['command']}")
print(f"{tr['steps']} steps x {tr['batch_size']} rows on {manifest['data']['train_rows']} rows "
      f"({manifest['data']['train_examples']} examples); lr {tr['lr']}, lambda_k = {tr['decay']}^k; "
      f"{tr['wall_seconds'] / 60:.1f} min on {manifest['machine']['cpu']}")
if tr.get("soft", 0.0):  # soft targets: head k's target mixes the label with the target model's own distribution
    print(f"head k's target at position t: {1 - tr['soft']:.0%} the token x_t+k+1, {tr['soft']:.0%} the target "
          "model's own next-token distribution at position t+k (soft targets)")
pd.DataFrame(
    {"top-1": acc_m["top1"], "top-5": acc_m["top5"], "CE (nats)": acc_m["loss"],
     "Medusa paper, Vicuna-7B top-1": list(PAPER_VICUNA_7B_TOP1[:K]) + [None] * (K - 4)},
    index=pd.Index([f"head {k} -> x_t+{k + 1}" for k in range(1, K + 1)], name="held-out"),
)

# %%
Markdown(
    f"Recomputed here from the hidden states above — {len(held_ex)} of the {len(held_out)} held-out prompts of "
    "the hand-written set (`heldout_examples`); the manifest's held-out set adds the other sets' — with the "
    "untrained heads (= the LM head, predicting $x_{t+1}$ instead of $x_{t+k+1}$) as the baseline:"
)

# %% tags=["nbval-ignore-output"]
from specdec_lab.medusa import MedusaHeads
from specdec_lab.train.medusa1 import head_accuracy
from specdec_lab.viz.medusa import head_accuracy_figure

acc_shipped = head_accuracy(shipped, held_rows, bf16=None)  # bf16 logits where native (same argmax up to rare ties)
acc_untrained = head_accuracy(MedusaHeads.for_model(model, num_heads=K), held_rows, bf16=None)
print(f"LM head top-1 on its own greedy text: {acc_shipped.base_top1:.3f}"
      + (" (1.0 up to fp16 rounding of h_t, which can flip a near-tie)" if acc_shipped.base_top1 >= 0.99 else
         " (more than 1% off 1.0: more than fp16 rounding of h_t flipping near-ties)"))  # fmt: skip
print(f"head top-1 here: {[round(a, 3) for a in acc_shipped.top1]}; "
      f"manifest ({manifest['data']['heldout_examples']} held-out prompts): {acc_m['top1']}")  # fmt: skip
fig = head_accuracy_figure({"shipped heads": acc_shipped, "untrained (= LM head)": acc_untrained},
                           title="Medusa head accuracy on held-out self-distilled text: head k predicts x<sub>t+k+1</sub>")  # fmt: skip
if not quick:
    print(f"saved {save_figure(fig, '03_head_accuracy', FIGURES)}")
fig

# %% [markdown]
# Why head $k$ is harder: it must guess $x_{t+k+1}$ **without seeing** $x_{t+1}, \dots, x_{t+k}$.
# Whatever the target will say next is a branch point; the further ahead, the more branches multiply, and
# a head can only bet on the most likely one. Its top-5 keeps four more branches than its top-1 — which is
# why Medusa verifies a *tree* of each head's top candidates, not a chain. What the hand-written held-out
# prompts (written one by one, not drawn from the template bank the training prompts share) say, head by head,
# and how it compares with the Vicuna-7B heads of the Medusa paper
# ([Cai et al. 2024](https://arxiv.org/abs/2401.10774); which of its tables or figures holds these accuracies
# could not be checked, see `specdec_lab.viz.medusa.PAPER_VICUNA_7B_SOURCE`):

# %%
import numpy as np

from specdec_lab.lab.course import compare

paper = PAPER_VICUNA_7B_TOP1[:K]
# The hand-written held-out prompts are written one by one, not drawn from a template: the comparison with the
# paper uses them; the all-sets figure is shown beside it.
hw_key = next(name for name in manifest["heldout_accuracy_by_set"] if SET_NAMES.get(name) == "hand-written")
acc_hw = manifest["heldout_accuracy_by_set"][hw_key]
top1, top5 = acc_hw["top1"], acc_hw["top5"]
keep1, keep5 = top1[-1] / top1[0], top5[-1] / top5[0]  # what head K keeps of head 1's accuracy


def gap_se(per_prompt: list, k: int, base: int | None = None) -> float:
    """Standard error between prompts of top-1[k] − top-1[base] (default k − 1), each pooled over the prompts'
    rows as the figure pools them (a prompt's rows move together, so they are not independent draws)."""
    base = k - 1 if base is None else base
    part = {}
    for j in (base, k):
        n = np.array([a.count[j] for a in per_prompt], dtype=float)
        hits = np.array([a.top1[j] * a.count[j] if a.count[j] else 0.0 for a in per_prompt])
        part[j] = (hits - hits.sum() / max(n.sum(), 1) * n) / max(n.sum(), 1)
    d = part[k] - part[base]
    return float(np.sqrt(len(d) / max(len(d) - 1, 1) * (d**2).sum()))


# the noise of a head-to-head gap: each hand-written held-out prompt scored alone (the prompts the figure pools)
hw_prompts = [head_accuracy(shipped, build_rows(cache.subset([e.question_id]), K), bf16=None) for e in held_ex]


def head_step(k: int, base: int) -> str:
    """Head k + 1's top-1 against head base + 1's, judged on two standard errors between the prompts."""
    se2 = 2 * gap_se(hw_prompts, k, base)
    return compare(top1[k], top1[base], "higher, beyond ±{s:.3f}", "lower, beyond ±{s:.3f}",
                   within="**within noise** (±{s:.3f})", rel_tol=se2 / max(min(top1[k], top1[base]), 1e-12), s=se2)  # fmt: skip


Markdown(
    f"On the hand-written held-out prompts ({acc_hw['count'][0]} positions), top-1 goes from {top1[0]:.2f} "
    f"(head 1) to {top1[-1]:.2f} (head {K}): " + head_step(K - 1, 0)
    + f" (two standard errors between the {len(hw_prompts)} prompts). Step by step: "
    + "; ".join(f"head {k + 1} against head {k}: " + head_step(k, k - 1) for k in range(1, K))
    + f". Top-5 goes from {top5[0]:.2f} to {top5[-1]:.2f}. Head {K} keeps {keep5:.0%} of head 1's top-5 accuracy "
    f"and {keep1:.0%} of its top-1. Against the Medusa paper's Vicuna-7B heads, top-1 (hand-written held-out set vs "
    "paper, whose source table could not be checked): "
    + "; ".join(f"head {k + 1}: {ours:.2f} vs {theirs:.2f}" for k, (ours, theirs) in enumerate(zip(top1, paper, strict=False)))
    + f" ({manifest['data']['train_rows'] / 1e3:.0f}k training rows, {shipped.config.num_layers} residual "
    f"blocks per head). The manifest's all-sets figure (table above: head 1 {acc_m['top1'][0]:.2f}) also counts the "
    "template-bank and real-prose prompts; the manifest keeps no per-prompt scores for those sets, so this notebook "
    "does not compare the sets (the table below asks whether the kind of text alone moves head 1's top-1)."
)

# %% [markdown]
# The paper's heads differ from these in more than size (another model, other data, figures from a table this
# notebook could not check), so this notebook does not explain the gap to them. Two differences could account for part of it.
# A 135M model's last hidden state (576 wide instead of 4096) may say less about the tokens after the next one —
# not measured here. And the heads saw the training positions of one small model's answers only: residual blocks
# can memorise part of their training text (`data/medusa/README.md` records the earlier rounds with fewer blocks
# per head) — measured below. The table scores the shipped heads on training positions they were trained on
# against held-out ones, and splits the held-out prompts by kind of text.

# %% tags=["nbval-ignore-output"]
import math
from statistics import NormalDist

from scipy.stats import t as student_t

from specdec_lab.lab.course import within_tol

seen = head_accuracy(shipped, train_rows, max_rows=2048, bf16=None)  # the shipped heads were trained on these
# "held-out" here: this section's sample of held-out prompts (all its kinds), not the manifest's all-sets figure
by_category = {"training positions (seen)": seen.top1,
               f"held-out: all {len(held_ex)} prompts of this sample": acc_shipped.top1}  # fmt: skip
per_prompt = {}  # category -> (head 1's top-1, its labelled rows) on each of its prompts: the noise between prompts
row_of = {}  # category -> its row of the table
for category in sorted({e.category for e in held_ex}):
    q = [e.question_id for e in held_ex if e.category == category]
    row_of[category] = f"held-out: {category} ({len(q)} prompts)"
    by_category[row_of[category]] = head_accuracy(shipped, build_rows(cache.subset(q), K), bf16=None).top1
    prompt_acc = [head_accuracy(shipped, build_rows(cache.subset([i]), K), bf16=None) for i in q]
    per_prompt[category] = [(float(a.top1[0]), int(a.count[0])) for a in prompt_acc if a.count[0]]
seen_vs_held = pd.DataFrame(by_category, index=[f"head {k}" for k in range(1, K + 1)]).T.round(3)
display(seen_vs_held)


def pooled_se(pairs):  # the standard error between prompts of a pooled (row-weighted) accuracy, as the table pools
    acc_i, w = np.array([a for a, _ in pairs]), np.array([c for _, c in pairs], dtype=float)
    mean = (w * acc_i).sum() / w.sum()
    return float(np.sqrt(len(w) / (len(w) - 1) * (w**2 * (acc_i - mean) ** 2).sum()) / w.sum())


# the values the sentence quotes are the table's (head 1 column, every labelled row of the kind pooled)
cat_mean = {c: float(seen_vs_held.loc[row_of[c], "head 1"]) for c, v in per_prompt.items() if len(v) > 1}
cat_se = {c: pooled_se(per_prompt[c]) for c in cat_mean}
ranked = sorted(cat_mean, key=cat_mean.get, reverse=True)
best, worst = ranked[0], ranked[-1]
se_ends = float(np.hypot(cat_se[best], cat_se[worst]))
n_lo, n_hi = min(map(len, per_prompt.values())), max(map(len, per_prompt.values()))
n_prompts_text = f"{n_lo}" if n_lo == n_hi else f"{n_lo}–{n_hi}"
# the two ends are the widest of all pairs of kinds, picked after seeing the values: they are judged at the bar for
# every pair at once (two-sided 5% over all pairs, Bonferroni), not at the two standard errors of one planned pair;
# and each end's standard error is estimated from its few prompts, so the bar is Student's t at Welch's degrees of
# freedom, not the normal's (which would take the two estimated errors as exact)
n_pairs = len(cat_mean) * (len(cat_mean) - 1) // 2
n_ends = {c: len(per_prompt[c]) for c in (best, worst)}
_welch_den = sum(cat_se[c] ** 4 / max(n_ends[c] - 1, 1) for c in (best, worst))
df_ends = se_ends**4 / _welch_den if _welch_den > 0 else math.inf
z_normal = NormalDist().inv_cdf(1 - 0.025 / max(n_pairs, 1))
z_pairs = float(student_t.ppf(1 - 0.025 / max(n_pairs, 1), df_ends)) if math.isfinite(df_ends) else z_normal
kinds_tol = z_pairs * se_ends / max(min(cat_mean[best], cat_mean[worst]), 1e-12)  # compare's rel_tol: |gap| ≤ z·SE
kinds_apart = not within_tol(cat_mean[best], cat_mean[worst], kinds_tol)  # the one rule, as `compare` reads it
# training positions against held-out ones: the held-out figure's error between its prompts (section 3's
# `hw_prompts` are these prompts, each scored alone), the training rows' binomial error (it understates theirs)
held_se1 = pooled_se([(float(a.top1[0]), int(a.count[0])) for a in hw_prompts if a.count[0]])
seen_se1 = (seen.top1[0] * (1 - seen.top1[0]) / max(seen.count[0], 1)) ** 0.5
se_seen = float(np.hypot(held_se1, seen_se1))
FORMULAIC = {"coding": "code syntax", "math": "math steps", "rag": "passages copied from the context"}
Markdown(
    f"Head 1 here: {seen.top1[0]:.2f} ± {seen_se1:.3f} top-1 on training positions it was trained on (binomial, "
    f"{seen.count[0]} sampled rows), {acc_shipped.top1[0]:.2f} ± {held_se1:.3f} on held-out ones (between the "
    f"{len(hw_prompts)} prompts): "
    + compare(seen.top1[0], acc_shipped.top1[0],
              "{r:.1f}× as often right on text it has seen, beyond two standard errors",
              "**less** often right on text it has seen, beyond two standard errors",
              within="**within noise** of each other (two standard errors), so this run does not resolve memorisation here",
              rel_tol=2 * se_seen / max(min(seen.top1[0], acc_shipped.top1[0]), 1e-12),
              r=seen.top1[0] / max(acc_shipped.top1[0], 1e-9))
    + f". By kind of text (the table's held-out rows, each pooled over its {n_prompts_text} prompts; ± the standard "
    "error between those prompts), head 1's top-1 runs "
    f"from {cat_mean[worst]:.3f} ± {cat_se[worst]:.3f} ({worst}) to {cat_mean[best]:.3f} ± {cat_se[best]:.3f} ({best}): "
    + compare(cat_mean[best], cat_mean[worst],
              "a gap beyond {z:.1f} standard errors between these two",
              "a gap beyond {z:.1f} standard errors between these two",
              within="**within noise** of so few prompts (under {z:.1f} standard errors), so no order between the "
              "kinds of text on this run",
              rel_tol=kinds_tol, z=z_pairs)
    + f" ({z_pairs:.1f}, not 2: the two ends are the widest of the {n_pairs} pairs of kinds, picked after the fact, so "
    "they are judged at the bar for every pair at once; and their standard errors rest on "
    + " and ".join(str(n_ends[c]) for c in (worst, best))
    + f" prompts, so the bar is Student's t on {df_ends:.1f} degrees of freedom, not the normal's {z_normal:.1f}); "
    "the kinds in between are not ranked."
    + (f" One reading, which this table does not test: {best} is formulaic text ({FORMULAIC[best]}), which a head "
       f"can predict ahead more easily than {worst}."
       if kinds_apart and best in FORMULAIC else "")
)  # fmt: skip

# %% [markdown]
# ### Memorisation, epoch by epoch
#
# How fast does that gap open? A Medusa-1 run with the shipped heads' recipe (four residual blocks per
# head, $W_2$ = the frozen LM head, the same learning-rate schedule; argmax labels instead of soft targets,
# which cost more time) on a few hundred of the training prompts scores its heads, before training and after every epoch, on a fixed sample of its *training*
# rows and on held-out rows. Accuracy on training rows counts what a head learned plus what it
# memorised; held-out accuracy counts only what it learned. The run is
# `python -m specdec_lab.train medusa-memorisation` (minutes on a 2-core CPU, written to
# `data/medusa/memorisation.json` with the machine it ran on, named above the figure); this notebook reads its
# record (`memorisation_file`), and `rerun=True` measures it afresh here.

# %% tags=["nbval-ignore-output"]
from specdec_lab.io import write_json
from specdec_lab.train.medusa_memorisation import MemorisationConfig, memorisation_run
from specdec_lab.viz.medusa import memorisation_figure

if rerun:
    folders = [Path("..") / f for f in manifest["data"]["distill_dir"].split(",")]
    examples = [e for folder in folders for e in load_distillation_data(folder)]
    small = {"train_examples": 12, "heldout_examples": 6, "epochs": 2, "num_layers": 1, "train_eval_rows": 256,
             "heldout_eval_rows": 256}  # fmt: skip
    mem = memorisation_run(lm, examples, MemorisationConfig(**(small if quick else {})),
                           cache_path=Path("../data/cache/03_memorisation.safetensors"), progress=False)
    write_json(rerun_out, mem)
else:
    mem = json.loads(Path(memorisation_file).read_text())
epochs = mem["epochs"]
md = mem["data"]
fig = memorisation_figure(epochs, title=f"Memorisation: top-1 per epoch, {md['train_examples']} training prompts "
                                         f"({md['train_rows']} positions), {md['heldout_examples']} held-out")  # fmt: skip
if not quick:
    print(f"saved {save_figure(fig, '03_memorisation', FIGURES)}")
print(f"the record's run: {mem['machine']['cpu']} ({mem['machine']['isa']}), {mem['machine']['torch_threads']} "
      f"thread(s), {sum(mem['seconds'].values()) / 60:.1f} min (hidden states and training)")
fig

# %% tags=["nbval-ignore-output"]
gap_frame = pd.DataFrame(
    {f"head {k + 1}: {side}": [e[key]["top1"][k] for e in epochs]
     for k in range(len(epochs[0]["train"]["top1"])) for side, key in (("training", "train"), ("held-out", "heldout"))},
    index=pd.Index([e["epoch"] for e in epochs], name="epoch"),
)  # fmt: skip
gap_frame["head 1: gap"] = gap_frame["head 1: training"] - gap_frame["head 1: held-out"]
display(Markdown("Per epoch, each head's top-1 on the sampled training rows and on the held-out rows, and head 1's "
                 "gap (training minus held-out):"))
display(gap_frame.round(3))
held1 = [e["heldout"]["top1"][0] for e in epochs]
train1 = [e["train"]["top1"][0] for e in epochs]
last = len(epochs) - 1
noise = 2 * (held1[last] * (1 - held1[last]) / epochs[last]["heldout"]["count"][0]) ** 0.5  # 2 standard errors
d_held, d_train = held1[last] - held1[last - 1], train1[last] - train1[last - 1]
# each epoch's change of head 1's gap (from epoch 1 on), against a rough scale: two binomial standard errors of
# the change of a gap (training and held-out accuracy, two epochs, taken as independent) at the last epoch
se_gap = (train1[last] * (1 - train1[last]) / epochs[last]["train"]["count"][0]
          + held1[last] * (1 - held1[last]) / epochs[last]["heldout"]["count"][0]) ** 0.5  # fmt: skip
gap_noise = 2 * 2**0.5 * se_gap
gap_steps = [(t2 - h2) - (t - h) for t, h, t2, h2 in zip(train1[1:], held1[1:], train1[2:], held1[2:], strict=False)]
clear = [epochs[i + 2]["epoch"] for i, g in enumerate(gap_steps) if g > gap_noise]
unclear = [epochs[i + 2]["epoch"] for i, g in enumerate(gap_steps) if g <= gap_noise]
widening_note = (
    ". " if not gap_steps else
    f", the gap wider after every epoch from epoch 1 on, each time by more than ±{gap_noise:.3f} (two binomial "
    "standard errors of an epoch's change of the gap: a rough scale, not a paired test). "
    if not unclear else
    f"; from epoch 1 on, the gap widened by more than ±{gap_noise:.3f} (two binomial standard errors of an "
    "epoch's change of the gap: a rough scale, not a paired test) after epoch(s) "
    f"{', '.join(map(str, clear)) or 'none'}, and after epoch(s) {', '.join(map(str, unclear))} it moved by less: "
    "within noise, no order. "
)  # fmt: skip
near = min(range(1, last + 1), key=lambda i: abs(epochs[i]["epoch"] - tr["steps"] * tr["batch_size"] / manifest["data"]["train_rows"]))
Markdown(
    f"Before training (epoch 0) every head is the LM head: head 1 scores {train1[0]:.2f} on training rows and "
    f"{held1[0]:.2f} held-out. After epoch 1: {train1[1]:.2f} and {held1[1]:.2f}. After epoch {epochs[last]['epoch']}: "
    f"{train1[last]:.2f} and {held1[last]:.2f}"
    + widening_note
    + f"In the last epoch the training accuracy moved by {d_train:+.3f}; the held-out accuracy moved by {d_held:+.3f}"
    + ((f", less than two binomial standard errors of one epoch's held-out accuracy (±{noise:.3f}; a rough scale, "
        "not a paired test: every epoch scores the same rows, and the record keeps no per-row hits), "
        + ("while the gap widened beyond its scale above: by then an epoch over the same text only memorises."
           if gap_steps and gap_steps[-1] > gap_noise else
           "and the gap's change is within its scale above: by the last epoch this run resolves neither more "
           "learning nor more memorising."))
       if abs(d_held) < noise else (": the heads still learn." if d_held > 0 else ": memorising now costs held-out accuracy."))
    + f" The shipped heads, trained on {manifest['data']['train_rows'] / 1e3:.0f}k rows, saw each about "
    f"{tr['steps'] * tr['batch_size'] / manifest['data']['train_rows']:.1f} times, near this run's epoch "
    f"{epochs[near]['epoch']} (gap {train1[near] - held1[near]:.2f}). Section 3's table of training positions against "
    "held-out ones measures their gap otherwise "
    + (f"(the share of the target's own distribution in the heads' targets is {tr.get('soft', 0.0):.0%} there, "
       f"{mem['config'].get('soft', 0.0):.0%} in this run; "
       if tr.get("soft", 0.0) != mem["config"].get("soft", 0.0) else "(")
    + f"{len(train_ex)} {SET_NAMES.get(Path(distill_dir).name, Path(distill_dir).name)} training prompts against "
    f"{len(held_ex)} held-out ones, where this run samples rows from every set), so this notebook does not set the "
    "two gaps side by side."
)

# %% [markdown]
# ## 4. Medusa-1, live
#
# Fresh heads on the frozen backbone, from the cached rows:
# $\mathcal{L} = \sum_k \lambda_k \, \mathrm{CE}_k$, $\lambda_k = 0.8^k$ (script $\mathcal{L}$ for a training loss:
# $L$ stays the tokens one target forward emits, as in notebook 00), each $\mathrm{CE}_k$ against the hard label
# $x_{t+k+1}$ (the shipped heads' soft targets, section 3, also mix in the target's own distribution). The
# cross-entropy runs over the full vocabulary through the frozen LM head in bf16, fused (`frozen_head_loss`): the
# (rows·K, V) logits are never stored for autograd. `train_fn` is also the dashboard's callback below: with its default
# settings the dashboard trains exactly this run.

# %%
from specdec_lab.train.medusa1 import Medusa1Config, train_medusa1
from specdec_lab.viz.medusa import loss_figure


def train_fn(steps, lr_, decay, callback=None):
    """Fresh heads, Medusa-1 on the cached training rows; (TrainLog, held-out HeadAccuracy)."""
    torch.manual_seed(0)
    fresh = MedusaHeads.for_model(model, num_heads=K)
    c = Medusa1Config(steps=steps, batch_size=batch_size, lr=lr_, decay=decay, warmup_steps=min(20, steps // 5),
                      log_every=max(steps // 30, 1))
    lg = train_medusa1(fresh, train_rows, c, progress=False, callback=callback)
    train_fn.heads = fresh  # the last run's heads (the dashboard's contract stays the pair returned below)
    return lg, head_accuracy(fresh, held_rows, bf16=None)


log, acc_live = train_fn(train_steps, lr, 0.8)
live_heads = train_fn.heads  # this run's heads: the next cell scores them on each held-out prompt alone
print(f"{train_steps} steps x {batch_size} rows ({train_steps * batch_size / len(train_rows):.1f} epochs) "
      f"in {log.seconds:.0f} s")
fig = loss_figure(log, K, title=f"Medusa-1 on {len(train_ex)} examples: per-head cross-entropy")
if not quick:
    print(f"saved {save_figure(fig, '03_medusa1_loss', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
display(pd.DataFrame(
    {"live run top-1": acc_live.top1, "live run top-5": acc_live.top5,
     "shipped top-1": acc_shipped.top1, "shipped top-5": acc_shipped.top5},
    index=[f"head {k}" for k in range(1, K + 1)],
).round(3))
tail = np.asarray(log.head_loss[-max(len(log.head_loss) // 5, 2):])  # the last fifth of the logged steps: (steps, K)
end_loss = tail.mean(0)  # per head, with its standard error (none from a single logged step)
end_se = tail.std(0, ddof=1) / len(tail) ** 0.5 if len(tail) > 1 else np.full(len(end_loss), np.inf)
# neighbouring heads compared step by step: at a logged step every head saw the same batch, so the pair's
# difference at each step is what can be ordered; an order that holds at every step of the window is one
step_up = np.diff(tail, axis=1)  # (steps, K - 1): head k+1's loss minus head k's, at each logged step
up_se = step_up.std(0, ddof=1) / len(tail) ** 0.5 if len(tail) > 1 else np.full(K - 1, np.inf)


def pair_order(d, se):  # "up" / "down" where every step or the mean beyond 2 standard errors says so, else None
    if len(d) > 1 and (d > 0).all() or d.mean() > 2 * se:
        return "up"
    if len(d) > 1 and (d < 0).all() or d.mean() < -2 * se:
        return "down"
    return None


orders = [pair_order(step_up[:, i], up_se[i]) for i in range(K - 1)]
every_step = bool((step_up > 0).all()) and len(tail) > 1
loose = [f"heads {i + 1} and {i + 2}" for i, o in enumerate(orders) if o is None]
if all(o == "up" for o in orders):
    verdict = (f": the later the head, the higher, at every one of these {len(tail)} logged steps." if every_step else
               ": the later the head, the higher, each step up beyond two standard errors of the step-by-step "
               "differences.")
else:
    parts = [f"head {i + 2} {'above' if o == 'up' else 'below'} head {i + 1}" for i, o in enumerate(orders) if o]
    parts += [f"{', '.join(loose)} within noise of each other (no order)"] if loose else []
    verdict = "; step by step, " + "; ".join(parts) + "."
# live against shipped, head by head on the same held-out rows, judged between the held-out prompts (a prompt's rows
# move together, so rows are not independent draws): each prompt scored alone by both sets of heads (`hw_prompts`,
# section 3, are the shipped heads' scores on these prompts)
live_prompts = [head_accuracy(live_heads, build_rows(cache.subset([e.question_id]), K), bf16=None) for e in held_ex]


def paired_se(acc_a: list, acc_b: list, k: int) -> float:
    """Standard error between prompts of pooled top-1[k] of `acc_a` minus that of `acc_b`, two sets of heads scored
    on the same prompts' rows (as `gap_se`, section 3, does for two heads of one set)."""
    n = np.array([a.count[k] for a in acc_a], dtype=float)
    diff = np.array([(a.top1[k] - b.top1[k]) * a.count[k] if a.count[k] else 0.0
                     for a, b in zip(acc_a, acc_b, strict=True)])  # fmt: skip
    d = (diff - diff.sum() / max(n.sum(), 1) * n) / max(n.sum(), 1)
    return float(np.sqrt(len(d) / max(len(d) - 1, 1) * (d**2).sum()))


versus_shipped = [
    compare(a, b, "above", "below", within="within",
            rel_tol=2 * paired_se(live_prompts, hw_prompts, k) / max(min(a, b), 1e-12))
    for k, (a, b) in enumerate(zip(acc_live.top1, acc_shipped.top1, strict=True))
]  # fmt: skip
tally = [f"{'within noise of it' if w == 'within' else w} at {versus_shipped.count(w)} of {K} heads"
         for w in ("below", "within", "above") if w in versus_shipped]


def later_not_below(acc, prompts_acc, where):  # each head whose held-out top-1 is not below the head before it
    """Judged by two standard errors between the held-out prompts (`gap_se`, section 3; `prompts_acc`: the same
    heads scored on each prompt alone), as section 5 judges the same question."""
    notes = []
    for k in range(1, len(acc.top1)):
        a, b = acc.top1[k], acc.top1[k - 1]
        if a < b:
            continue
        se = gap_se(prompts_acc, k)
        notes.append(compare(
            a, b, "above it beyond two standard errors (±{s:.3f}, between the {m} held-out prompts): this run does not "
            "show the order section 3's reasoning predicts for these two heads", "",
            within="within two standard errors of it (±{s:.3f}, between the {m} held-out prompts): no order between "
            "these two heads here",
            rel_tol=2 * se / max(min(a, b), 1e-12), s=2 * se, m=len(prompts_acc),
        ).join((f"{where}, head {k + 1}'s held-out top-1 ({a:.3f}) is not below head {k}'s ({b:.3f}): ", ".")))
    return notes


Markdown(
    "Every head starts at a high loss: at initialisation it *is* the LM head, confidently predicting $x_{t+1}$ "
    f"where $x_{{t+k+1}}$ is asked. Averaged over the last {len(tail)} logged steps the heads' losses are "
    + ", ".join(f"{x:.2f} ± {e:.2f}" for x, e in zip(end_loss, end_se, strict=True)) + " nats"
    + verdict
    + f" With {len(train_ex)} examples and {train_steps} steps, the live run's held-out top-1 is, against the shipped "
    f"heads' on the same held-out rows (judged by two standard errors of the paired difference between the "
    f"{len(live_prompts)} held-out prompts, each scored alone by both), " + ", ".join(tally) + "."
    + "".join(" " + note for note in later_not_below(acc_live, live_prompts, "In the live run"))
)  # fmt: skip

# %% [markdown]
# Try other settings with the dashboard (it trains on the same rows; press *train*). Under it, a static
# snapshot shows its default view: the run above, which its default settings reproduce.

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.medusa import MedusaTrainingDashboard
from specdec_lab.lab.widgets import Snapshot

MedusaTrainingDashboard(
    train_fn, K, steps=train_steps, lr=lr,
    snapshot=Snapshot(fig, "held-out top-1 per head: " + ", ".join(f"{x:.3f}" for x in acc_live.top1),
                      what=f"steps {train_steps}, lr {lr:g}, decay 0.8", how="Press *train* above to train live."),
)  # fmt: skip

# %% [markdown]
# ## 5. The loss weights λ_k, ablated
#
# The paper weights head $k$ by $\lambda_k = 0.8^k$ so that the harder, noisier later heads count less.
# We train the same heads with three schedules — same data order, same steps.
#
# **Predict, then run.** Under $1^k$ every head's loss counts alike; under $0.8^k$ the last head's counts less
# than the first's, and under $0.5^k$ far less. Before you run the next cell, write down how much you expect the
# three schedules' trained heads to differ, and under which schedule you expect the last head to be the most
# accurate.

# %% tags=["prediction"]
from specdec_lab.viz.medusa import ablation_figure

ablation = {}
trained_w1 = {}
ablation_heads = {}  # decay -> its trained heads, for the per-prompt check below
for decay in (0.8, 1.0, 0.5):
    torch.manual_seed(0)
    hd = MedusaHeads.for_model(model, num_heads=K)
    c = Medusa1Config(steps=ablation_steps, batch_size=batch_size, lr=lr, decay=decay, warmup_steps=5)
    train_medusa1(hd, train_rows, c, progress=False)
    name = f"lambda_k = {decay}^k" + (" (paper)" if decay == 0.8 else "")
    ablation[name], trained_w1[decay] = head_accuracy(hd, held_rows, bf16=None), hd.w1.detach().clone()
    ablation_heads[decay] = hd
fig = ablation_figure(ablation, title=f"loss weights: held-out top-1 after {ablation_steps} steps")
if not quick:
    print(f"saved {save_figure(fig, '03_lambda_ablation', FIGURES)}")
fig

# %% tags=["nbval-check-output"]
from specdec_lab.medusa import loss_weights

rel = {decay: ((trained_w1[decay] - trained_w1[0.8]).norm() / trained_w1[0.8].norm()).item() for decay in (1.0, 0.5)}
for decay in (1.0, 0.5):
    print(f"lambda_k = {decay}^k vs 0.8^k: relative difference of the trained W1 below 1%: {rel[decay] < 0.01}")
print("weights of the three schedules:", {d: [round(x, 3) for x in loss_weights(K, d).tolist()] for d in (0.8, 1.0, 0.5)})

# %% tags=["prediction"]
def per_prompt_accuracy(heads) -> list:
    """The heads' held-out accuracy on each held-out prompt alone: the noise between prompts."""
    return [head_accuracy(heads, build_rows(cache.subset([e.question_id]), K), bf16=None) for e in held_ex]


# `gap_se`: section 3's standard error between prompts of a neighbouring-head gap


name_of = {decay: f"lambda_k = {decay}^k" + (" (paper)" if decay == 0.8 else "") for decay in ablation_heads}
one_result = max(rel.values()) <= 0.01  # the three schedules trained the same heads: judge the order once
judged = [0.8] if one_result else list(ablation_heads)
top1_spread = max(abs(ablation[n].top1[j] - ablation[name_of[0.8]].top1[j]) for n in ablation for j in range(K))
untrained_prompts = per_prompt_accuracy(MedusaHeads.for_model(model, num_heads=K))
order_notes = []
for decay in judged:
    acc, prompts_acc = ablation[name_of[decay]], per_prompt_accuracy(ablation_heads[decay])
    for k in range(1, K):
        a, b = acc.top1[k], acc.top1[k - 1]
        if a < b:
            continue
        se, ua, ub = gap_se(prompts_acc, k), acc_untrained.top1[k], acc_untrained.top1[k - 1]
        use = gap_se(untrained_prompts, k)
        moved = max(abs(a - ua), abs(b - ub))  # how far training took these two heads from the untrained start
        trained_above = not within_tol(a, b, 2 * se / max(min(a, b), 1e-12))  # the rule `compare` reads below
        untrained_above = ua > ub and not within_tol(ua, ub, 2 * use / max(min(ua, ub), 1e-12))
        order_notes.append(
            f"Under {name_of[decay]}, head {k + 1}'s held-out top-1 ({a:.3f}) is not below head {k}'s ({b:.3f}): "
            + compare(a, b, "above it beyond two standard errors (±{s:.3f}, between the {m} held-out prompts)", "",
                      within="within two standard errors of it (±{s:.3f}, between the {m} held-out prompts): no order "
                      "between these two heads here", rel_tol=2 * se / max(min(a, b), 1e-12), s=2 * se, m=len(prompts_acc))
            + ". The untrained heads (the LM head, section 3's figure) had "
            + compare(ua, ub, "head {k1} above head {k0} already ({a:.3f} against {b:.3f}, beyond ±{s:.3f})",
                      "head {k1} below head {k0} ({a:.3f} against {b:.3f}, beyond ±{s:.3f})",
                      within="head {k1} at {a:.3f} against head {k0}'s {b:.3f} (within ±{s:.3f})",
                      rel_tol=2 * use / max(min(ua, ub), 1e-12), s=2 * use, k1=k + 1, k0=k)
            + f", and {ablation_steps} training steps moved these two heads' held-out top-1 by at most {moved:.3f}"
            + (": the order is the starting point's, which so short a run keeps, not one that training or the "
               "weighting made." if trained_above and untrained_above else ".")
        )  # fmt: skip
Markdown(
    compare(
        max(rel.values()), 0.01,
        "**The weighting changed the trained heads** here: their $W_1$ differ from the $0.8^k$ run's by up to {a:.1%}.",
        "**The weighting changes nothing here — and that is the lesson.** The three schedules' trained $W_1$ differ by "
        "at most {a:.2%}",
    )
    + (f", and their heads' held-out top-1 by at most {top1_spread:.3f}: one result, not three, judged once below."
       if one_result else "")
    + "".join(" " + note for note in order_notes)
)  # fmt: skip

# %% [markdown]
# Why one would expect no change: in Medusa-1 with a frozen backbone
# and a frozen shared $W_2$, the heads share *no* parameter: head $k$'s weights get gradient only from
# $\lambda_k \mathrm{CE}_k$. Scaling one head's loss by $\lambda_k$ scales only its own gradient, and
# Adam divides every gradient by its running RMS, so the update is (up to Adam's ε) unchanged. The
# weights matter where heads **share** parameters — Medusa-2's backbone (next section), or separate
# $W_2$ heads sharing an embedding — or with plain SGD, where $\lambda_k$ acts as a per-head learning rate.
#
# ## 6. Medusa-2 on a tiny model: training the backbone too, without letting it drift
#
# Medusa-2 fine-tunes the backbone jointly with the heads: $\mathcal{L} = \mathcal{L}_{LM} + w \, \mathcal{L}_{\text{Medusa-1}}$
# ($w$, not $\lambda_0$: index 0 is the LM head; `lambda0` in the code).
# The backbone is also the *verifier*, so whatever it learns changes the text speculative decoding
# produces. The recipe guards against that: heads warm up first (a Medusa-1 phase), $w$ ramps
# up, the backbone's learning rate is much smaller than the heads', and $\mathcal{L}_{LM}$ is a
# **self-distillation** loss, $\mathrm{KL}(p_{\text{orig}} \,\|\, p_\theta)$ against a frozen copy of the
# original model. We compare it with plain cross-entropy on the (self-generated) tokens, on a tiny random
# Llama and its own greedy text; drift = mean KL from the original per response position.

# %% tags=["nbval-ignore-output"]
from specdec_lab import tiny_model
from specdec_lab.train.distill import generate_distillation_data
from specdec_lab.train.medusa2 import Medusa2Config, train_medusa2
from specdec_lab.viz.medusa import medusa2_figure

tiny = tiny_model(eos_token_id=3)
gen = torch.Generator().manual_seed(0)
tiny_prompts = [torch.randint(4, 256, (6,), generator=gen).tolist() for _ in range(48)]
tiny_data = generate_distillation_data(tiny, tiny_prompts, Path("../data/cache/03_tiny_distill"),
                                       max_new_tokens=24, batch_size=24, progress=False)
joint = 30 if quick else 120
runs, drift_end, students = {}, {}, {}
for lm_loss in ("kl", "ce"):
    student = tiny_model(eos_token_id=3)  # same weights as `tiny`, trained in place
    hd = MedusaHeads.for_model(student, num_heads=3)
    c = Medusa2Config(warmup_steps=20, joint_steps=joint, batch_size=4, head_lr=1e-2, backbone_lr=3e-4,
                      lambda0=0.2, lambda0_ramp=20, lm_loss=lm_loss, drift_every=10)
    name = "ℒ_LM = KL to the original" if lm_loss == "kl" else "ℒ_LM = CE on the tokens"
    runs[name] = train_medusa2(student, hd, tiny_data[:40], c, reference=tiny, eval_sequences=tiny_data[40:],
                               progress=False)
    students[name] = student  # kept: the drift at the end is also read per evaluation sequence, below
fig = medusa2_figure(runs)
if not quick:
    print(f"saved {save_figure(fig, '03_medusa2_drift', FIGURES)}")
fig

# %% [markdown]
# The table gives each run's drift (mean KL from the original model per response position, in nats) after the
# warmup and at the end, the share of response positions whose argmax (the greedy token) is unchanged, and the
# heads' summed cross-entropy at the last step.

# %% tags=["nbval-ignore-output"]
pd.DataFrame(
    {name: {"drift after warmup (KL, nats)": log.drift[0]["kl"],
            "drift at the end (KL, nats)": log.drift[-1]["kl"],
            "argmax unchanged (greedy output kept)": log.drift[-1]["top1_agreement"],
            "heads' CE, sum over heads (last step)": sum(log.head_loss[-1])}
     for name, log in runs.items()}
).round(4)

# %% tags=["nbval-check-output"]
from specdec_lab.train.medusa2 import backbone_drift

kl_end = {name: log.drift[-1]["kl"] for name, log in runs.items()}
# the drift at the end per evaluation sequence (the same sequences for both runs): the paired difference's spread
# between sequences is this comparison's noise (one training seed each: seed-to-seed variation is not in it)
drift_seq = {name: np.array([backbone_drift(students[name], tiny, [s]).kl for s in tiny_data[40:]]) for name in runs}
drift_diff = drift_seq["ℒ_LM = CE on the tokens"] - drift_seq["ℒ_LM = KL to the original"]
drift_se2 = 2 * float(drift_diff.std(ddof=1)) / math.sqrt(len(drift_diff))
print("warmup leaves the backbone untouched:", all(log.drift[0]["kl"] == 0 for log in runs.values()))
print("self-distillation drifts less than CE, beyond 2 SE between evaluation sequences:",
      bool(kl_end["ℒ_LM = CE on the tokens"] - kl_end["ℒ_LM = KL to the original"] > drift_se2))

# %% [markdown]
# During warmup only the heads train, so the drift is exactly 0. In the joint phase both runs move the
# backbone. With Adam every trained weight moves by about the learning rate per step, whatever its
# gradient, so the backbone's small learning rate is the first guard. The KL term is the second: it
# pushes back on exactly the changes that move the next-token distribution, where cross-entropy on the
# greedy tokens rewards sharpening the distribution towards its own argmax.

# %% tags=["nbval-ignore-output"]
kl_run, ce_run = runs["ℒ_LM = KL to the original"], runs["ℒ_LM = CE on the tokens"]
kl_kl, kl_ce = kl_run.drift[-1]["kl"], ce_run.drift[-1]["kl"]
flipped = 1 - kl_run.drift[-1]["top1_agreement"]
Markdown(
    f"At the end of the joint phase the backbone has drifted by {kl_kl:.3f} nats per position with the KL term "
    f"and {kl_ce:.3f} with cross-entropy: "
    + compare(kl_ce, kl_kl, "{r:.1f}× more drift without the KL term, beyond two standard errors of the paired "
              "difference between the {m} evaluation sequences (±{s:.3f}).",
              "**less** drift without the KL term, beyond two standard errors of the paired difference between the "
              "{m} evaluation sequences (±{s:.3f}).",
              within="**within noise** of each other (±{s:.3f}, two standard errors of the paired difference between "
              "the {m} evaluation sequences), so this run does not order them.",
              rel_tol=drift_se2 / max(min(kl_ce, kl_kl), 1e-12), r=kl_ce / max(kl_kl, 1e-12), s=drift_se2,
              m=len(drift_diff))
    + " Each run is one training seed, so that error leaves out how much a different seed would move either drift."
    + f" Even with the KL term the argmax changed at {flipped:.0%} of the response positions (why so many, at this "
    "KL, this notebook does not measure)."
)

# %% [markdown]
# On a real model the drift is what decides whether Medusa-2 decoding is still the *original* model's
# output. The library function is the same for a real model (`train_medusa2`), only slow on a CPU.
#
# ## Closing note: the shipped heads
#
# SmolLM2-135M-Instruct, $K$ heads, Medusa-1, $W_2$ shared with the LM head, trained on the target's own
# greedy answers to the training prompts and measured on the held-out ones (counts and times below):

# %%
d = manifest["data"]
closing = pd.DataFrame(
    {f"hand-written top-1 ({acc_hw['count'][0]} positions)": acc_hw["top1"],
     "hand-written top-5": acc_hw["top5"],
     f"all sets top-1 ({acc_m['count'][0]} positions)": acc_m["top1"], "all sets top-5": acc_m["top5"]},
    index=pd.Index([f"head {k}" for k in range(1, K + 1)], name="held-out"),
)
# the hand-written set is drawn from no template shared with training: E[L] and the paper comparison use it
a1, p1 = acc_hw["top1"][0], PAPER_VICUNA_7B_TOP1[0]
chain = sum(torch.tensor(acc_hw["top1"][:k]).prod().item() for k in range(1, K + 1))  # sum_k a_1 ... a_k
print(f"{d['train_examples']} training prompts, {d['heldout_examples']} held-out; "
      f"size on disk: {manifest['size_bytes'] / 1e6:.2f} MB (fp16 residual blocks; W2 is the target's LM head)")
print(f"training: {tr['steps']} steps in {tr['wall_seconds'] / 60:.1f} min; hidden states "
      f"{d['hidden_cache_seconds'] / 60:.1f} min; self-distillation data (all {d['sources']} prompt sets, "
      f"{d['examples']} prompts) {d['generation_seconds'] / 60:.1f} min "
      f"({manifest['machine']['cpu']}, {manifest['machine']['torch_threads']} thread(s))")
print(f"what head 1's hand-written held-out top-1 of {a1:.3f} buys: a one-node tree (head 1's top guess) emits E[L] = 1 + a1 = "
      f"{1 + a1:.2f} tokens per target forward, bonus included (the Medusa paper's Vicuna-7B head 1, {p1:.2f}, "
      f"from a table this notebook could not check: {1 + p1:.2f}); a chain of all {K} heads' top guesses, if their errors were independent, "
      f"1 + a1 + a1 a2 + ... = {1 + chain:.2f}")
closing

# %%
by_set = manifest["heldout_accuracy_by_set"]
set_top1 = {SET_NAMES.get(name, name): acc["top1"][0] for name, acc in by_set.items()}
Markdown(
    f"Head 1 reaches a top-1 of {acc_hw['top1'][0]:.2f} (top-5 {acc_hw['top5'][0]:.2f}) on the hand-written "
    f"held-out prompts, written one by one rather than drawn from a template — the figure the comparison uses; the "
    f"Vicuna-7B head 1 scores {PAPER_VICUNA_7B_TOP1[0]:.2f} ({PAPER_VICUNA_7B_SOURCE}). Over all "
    f"{manifest['data']['heldout_examples']} held-out prompts it is {acc_m['top1'][0]:.2f}. By prompt set, head 1 "
    "top-1: "
    + ", ".join(f"{name} {v:.2f}" for name, v in set_top1.items())
    + " (each pooled over its positions; the manifest keeps no per-prompt scores, so these carry no error between "
    "prompts and this notebook does not rank the sets. Within the hand-written set, section 3's table "
    + (f"finds head 1's top-1 apart between two kinds of text, from {cat_mean[worst]:.2f} ({worst}) to "
       f"{cat_mean[best]:.2f} ({best}), beyond the noise between its few prompts per kind). "
       if kinds_apart else
       "does not resolve the kind of text moving head 1's top-1 beyond the noise between its few prompts per kind). ")
    + "`data/medusa/README.md` records the ablations behind the recipe (residual blocks per head, soft targets, "
    "twice the steps, the amount of self-distilled text); the memorisation curve of section 3 shows what more "
    "passes over the same text buy. For decoding, what counts is the "
    "accepted length of a *tree* built from each head's top candidates, which is why top-5 matters: notebooks "
    "04–06 verify, size and decode such trees."
)  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. At position $t$, which token does head 2 learn to predict, and does the last **prompt** position get a label?
#
#    <details><summary>Answer</summary>Head 2 learns $x_{t+3}$. The last prompt position $t = P - 1$ does get
#    labels: its targets $x_{P}, x_{P+1}, \dots$ are response tokens, the target's own text. Only a label that
#    falls inside the prompt (or past the end) is ignored.</details>
#
# 2. Why can all $K$ heads' logits come from **one** matmul in the shipped variant?
#
#    <details><summary>Answer</summary>Every head's $W_2$ is the same frozen matrix, the LM head. So the heads'
#    residual features, stacked as $(N, K, H)$, are multiplied by one $(H, V)$ matrix — one product instead of
#    $K$, and no per-head copy of a 28 M-parameter projection.</details>
#
# 3. Why did the loss weights $\lambda_k$ not change Medusa-1 training here, and when would they?
#
#    <details><summary>Answer</summary>The heads share no trained parameter, so head $k$'s weights get gradient
#    only from $\lambda_k \mathrm{CE}_k$; Adam divides each gradient by its running RMS, which cancels the
#    constant $\lambda_k$. The weights matter where heads share parameters (Medusa-2's backbone) or with an
#    optimiser that does not rescale, such as plain SGD.</details>
#
# ## Exercises
#
# Each exercise is a stub to fill in (`...`), then a cell that checks your answer against the library. The
# solutions are in the teacher's copy. They reuse what the notebook computed: the example `ex` (its token ids `ids`,
# prompt length `P`), the heads `shipped`, the held-out rows `held_rows` and $K$.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — What each head predicts near the end of a cut-short example
#
# Head $k$ (with $k = 0$ the LM head) at position $t$ is trained on the token $k + 1$ places ahead, where that
# token exists. Take the example with its last 4 tokens cut off (as if the answer had stopped early): `ids1`, with
# the same prompt length `P`. At its third-last position, $t = $ `len(ids1) - 3` (near the end, where the later
# heads have nothing left to predict), give the $K + 1$ labels, LM head first, as a list of ints: a token id, or
# `IGNORE_INDEX` for a head whose target lies past the end. (Section 2's table `naive` is for the whole example,
# not this one.) Reference: row `len(ids1) - 3` of `specdec_lab.medusa.medusa_labels(ids1, P, K)`; the check
# refuses an answer that calls the notebook's `medusa_labels` (work it out from the definition, not from the
# library).

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch

_watch = watch(globals(), "medusa_labels")  # the reference: not for the answer
ids1 = ids[: len(ids) - 4]  # the example, cut short by 4 tokens
t1 = len(ids1) - 3
answer = ...  # [LM head's label, head 1's, ..., head K's]: K + 1 ints, IGNORE_INDEX where there is none

# %% tags=["solution", "exercise-1"]
answer = [int(ids1[t1 + k + 1]) if t1 + k + 1 < len(ids1) else IGNORE_INDEX for k in range(K + 1)]

# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.lab.course import check

_watch.begin_check()  # from here the references are the check's own

_ = check(f"the labels at t = {t1} (of {len(ids1)} tokens)", answer, _watch["medusa_labels"](ids1, P, K)[t1].tolist(),
          close=lambda a, r: len(a) == len(r) and [int(x) for x in a] == r, watch=_watch,
          hint="Head k at position t learns x_{t+k+1}; past the last token of ids1 there is nothing to learn "
               "(IGNORE_INDEX).")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — Where Adam does not cancel the loss weight
#
# Section 5 says that Adam cancels a head's constant loss weight $\lambda_k$, up to its $\epsilon$. Find out
# where "up to $\epsilon$" bites. A head's weights start at 0 and its first step receives the gradient `grad`.
# First write `adam_first_update(grad)`: the change Adam's first step makes to the weights (learning rate
# `lr`, default $\beta_1 = 0.9$, $\beta_2 = 0.999$, $\epsilon = 10^{-8}$), from Adam's definition — the
# moments $m, v$ start at 0 and are bias-corrected; work out what that leaves at step 1. Then, for the `g` and
# $\lambda_3 = 0.8^3$ of the cell below, list the indices `i` at which the update for the weighted gradient
# $\lambda_3 g$ differs from the update for $g$ by more than one part in a thousand: where the weight survives. The
# check runs your function on gradients of its own against `torch.optim.Adam` (and refuses a function that runs
# torch's optimizer code when the check calls it, under whatever name, and an answer that took an optimizer step),
# then checks the list.

# %% tags=["exercise", "exercise-2"]
from torch.optim.optimizer import register_optimizer_step_pre_hook

if "_adam_hook" in globals():  # this cell run again: one hook, not two
    _adam_hook.remove()  # noqa: F821 - bound by an earlier run of this cell
_adam_steps = []  # every optimizer step taken from here to the check: the answer must take none
_adam_hook = register_optimizer_step_pre_hook(lambda opt, args, kwargs: _adam_steps.append(type(opt).__name__))
g = torch.tensor([0.3, -0.02, 0.004, -1.5, 3e-8, -1e-9])  # head 3's gradient of CE_3 at the first step


def adam_first_update(grad):
    """What one Adam step (lr = `lr`, default betas and eps) adds to weights at 0 that receive `grad`."""
    ...


lam = 0.8**3  # lambda_3
survives = ...  # sorted list of the i where the update for lam * g differs from the update for g by > 0.1%


# %% tags=["solution", "exercise-2"]
def adam_first_update(grad):  # noqa: F811 - replaces the stub above
    """What one Adam step (lr = `lr`, default betas and eps) adds to weights at 0 that receive `grad`."""
    # m_hat = grad and sqrt(v_hat) = |grad| after bias correction: the step is lr, signed, unless |grad| ~ eps
    return -lr * grad / (grad.abs() + 1e-8)


survives = [i for i in range(len(g)) if not torch.isclose(adam_first_update(lam * g)[i], adam_first_update(g)[i], rtol=1e-3, atol=0)]


# %% tags=["check", "exercise-2", "nbval-check-output"]
import os
import sys

from specdec_lab.lab.course import ExerciseError


def _torch_adam_update(grad):
    """The change one torch.optim.Adam step (lr = `lr`, default betas and eps) makes to weights at 0."""
    w = torch.zeros_like(grad, requires_grad=True)
    w.grad = grad.clone()
    torch.optim.Adam([w], lr=lr).step()
    return w.detach()


def _names(code) -> set:  # the global and attribute names a function's code reaches, nested functions included
    return set(code.co_names).union(*(_names(c) for c in code.co_consts if hasattr(c, "co_names")))


_grads = [lam * g, g, torch.tensor([2.0, -5e-9, 1e-7, -0.7])]  # the exercise's two, and one of the check's own
_OPTIM_DIR = os.path.dirname(torch.optim.Optimizer.step.__code__.co_filename)  # torch's optimizers, Adam's code
_optim_ran = []  # torch.optim code your function runs inside the check's calls (a functional Adam, an alias)


def _profile(frame, event, arg):
    if event == "call" and os.path.dirname(frame.f_code.co_filename) == _OPTIM_DIR:
        _optim_ran.append(frame.f_code.co_name)


_previous_profile = sys.getprofile()
sys.setprofile(_profile)
try:
    _mine = [adam_first_update(x) for x in _grads]
finally:
    sys.setprofile(_previous_profile)
    _adam_hook.remove()  # from here the Adam steps are the check's own
if _adam_steps or _optim_ran or (
    callable(adam_first_update) and {"optim", "Adam", "_torch_adam_update"} & _names(adam_first_update.__code__)
):
    raise ExerciseError("Adam's first update: the answer (the function or the list) ran torch.optim.Adam, the "
                        "reference the check compares with — derive the step from Adam's definition (re-run the "
                        "exercise's cells after editing)")  # fmt: skip
_ = check("Adam's first update, on three gradients", None if any(m is None for m in _mine) else
          torch.cat([torch.as_tensor(m, dtype=torch.float32) for m in _mine]),
          torch.cat([_torch_adam_update(x) for x in _grads]), close=1e-4,
          hint="After bias correction m_hat = grad and v_hat = grad²: the step is -lr · grad / (|grad| + eps) — not "
               "-lr · grad (that is SGD), and not -lr · sign(grad) either, where |grad| is near eps.")  # fmt: skip
_ = check("where lambda_3 survives Adam's first step", survives,
          [i for i in range(len(g)) if not torch.isclose(_torch_adam_update(lam * g)[i], _torch_adam_update(g)[i], rtol=1e-3, atol=0)],
          close=lambda a, r: sorted(int(i) for i in a) == r,
          hint="Compare the two updates entry by entry: they agree where |g| is far above eps.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★ — How many targets each head gets, after a short prompt
#
# Take the example's last two prompt tokens and its response as a new example: `ids3`, with a prompt of
# `P3 = 2` tokens — shorter than $K$. Guess first: does head $K$ get fewer training targets than the LM head,
# since it looks further ahead? Then count, for $k = 0, \dots, K$, the positions $t$ at which head $k$ has a label
# ($x_{t+k+1}$ exists and is a response token), as a list of $K + 1$ ints. Reference: the labelled entries of
# `medusa_labels(ids3, P3, K)`, counted per column; the check refuses an answer that calls the notebook's
# `medusa_labels` (count from the definition, not from the library).

# %% tags=["exercise", "exercise-3"]
from specdec_lab.lab.course import watch

_watch = watch(globals(), "medusa_labels")  # the reference: not for the answer
ids3, P3 = ids[P - 2 :], 2  # the last two prompt tokens, then the whole response
answer = ...  # [labels of the LM head, of head 1, ..., of head K]

# %% tags=["solution", "exercise-3"]
answer = [sum(1 for t in range(len(ids3)) if P3 <= t + k + 1 < len(ids3)) for k in range(K + 1)]

# %% tags=["check", "exercise-3", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
_counts = (_watch["medusa_labels"](ids3, P3, K) != IGNORE_INDEX).sum(0).tolist()
_ = check("targets per head after a 2-token prompt", answer, _counts,
          close=lambda a, r: len(a) == len(r) and [int(x) for x in a] == r, watch=_watch,
          hint="Head k's label at t is x_{t+k+1}: count the t >= 0 with P3 <= t + k + 1 < len(ids3).")  # fmt: skip
_short = [k for k in range(K + 1) if _counts[k] < _counts[0]]
Markdown(
    f"With a prompt of {P3} tokens the heads get {', '.join(map(str, _counts))} targets: "
    + (f"head{'s' if len(_short) > 1 else ''} {', '.join(map(str, _short))} get fewer than the LM head, since their "
       "window of positions would start before the first token. With a prompt longer than K (section 2's example) "
       "every head gets one target per response token: its window is the LM head's, shifted k places back into the "
       "prompt." if _short else "every head gets as many as the LM head.")
)  # fmt: skip

# %% [markdown] tags=["exercise-4"]
# ### Exercise 4 ★★★ — The Medusa-1 loss by hand
#
# For the first 64 held-out rows, the stub computes every head's logits and labels. Write `my_medusa_loss(logits,
# labels)` for logits (N, K, V) and labels (N, K): the Medusa-1 loss $\mathcal{L} = \sum_k \lambda_k \mathrm{CE}_k$ as a
# float, where $\mathrm{CE}_k$ is head $k$'s mean cross-entropy over the rows where it has a label (`IGNORE_INDEX`
# elsewhere: those rows count neither in the sum nor in the number it is divided by) and $\lambda_k = 0.8^k$.
# The check runs it on these rows and on the same rows with most labels removed, against
# `specdec_lab.medusa.medusa_loss(logits, labels, loss_weights(K))`, whose first result is $\mathcal{L}$; the check
# refuses a `my_medusa_loss` that runs it (or its `weighted_head_loss`), however your code reaches it.

# %% tags=["exercise", "exercise-4"]
from specdec_lab.lab.course import watch
from specdec_lab.medusa import medusa_loss  # noqa: F401 - the reference: watched below

_watch = watch(globals(), "medusa_loss")  # the reference: not for the answer
rows = torch.arange(64)  # the first 64 held-out rows
with torch.no_grad():
    logits = shipped(held_rows.hidden(rows).float())  # (64, K, V): every head's logits at each row's h_t
labels = held_rows.labels[rows, 1:]  # (64, K): head k's target, IGNORE_INDEX where it has none


def my_medusa_loss(logits, labels):
    """sum_k 0.8^k CE_k (a float), CE_k = head k's mean cross-entropy over the rows where it has a label."""
    ...


# %% tags=["solution", "exercise-4"]
import torch.nn.functional as F


def my_medusa_loss(logits, labels):  # noqa: F811 - replaces the stub above
    """sum_k 0.8^k CE_k (a float), CE_k = head k's mean cross-entropy over the rows where it has a label."""
    heads = logits.shape[1]
    ce = torch.stack([F.cross_entropy(logits[:, k].float(), labels[:, k], ignore_index=IGNORE_INDEX) for k in range(heads)])
    return float((0.8 ** torch.arange(1, heads + 1) * ce).sum())


# %% tags=["check", "exercise-4", "nbval-check-output"]
from specdec_lab.lab.chain_exercise import guarded as _guarded
from specdec_lab.lab.course import ExerciseError, is_stub
from specdec_lab.medusa import heads as _heads_ref
from specdec_lab.medusa import loss_weights as _loss_weights

_loss_codes = {_heads_ref.medusa_loss.__code__, _heads_ref.weighted_head_loss.__code__}

_sparse = labels.clone()  # most labels removed: a mean over all rows, unlabelled ones included, is now far off
_sparse[::2] = IGNORE_INDEX  # every other row: no head has a label
_sparse[1::4, -1] = IGNORE_INDEX  # and head K loses half of the rest
_cases = [(logits, labels), (logits, _sparse)]
_my_loss, _loss_ran = _guarded(my_medusa_loss, lambda code: code in _loss_codes)  # however the answer reaches them
_mine = [_my_loss(lg, lb) for lg, lb in _cases]
if _loss_ran and not any(is_stub(m) for m in _mine):
    raise ExerciseError("the Medusa-1 loss: your `my_medusa_loss` ran the library's `medusa_loss`, what the check "
                        "compares with: compute each head's cross-entropy and weight it yourself")  # fmt: skip
_watch.begin_check()  # from here the references are the check's own
_ = check("the Medusa-1 loss, on 64 held-out rows and on the same rows with most labels removed",
          None if any(is_stub(m) for m in _mine) else torch.tensor([float(m) for m in _mine], dtype=torch.float64),
          torch.tensor([float(_watch["medusa_loss"](lg, lb, _loss_weights(K))[0]) for lg, lb in _cases],
                       dtype=torch.float64),
          close=1e-4, watch=_watch, hint="Average each head's cross-entropy over its labelled rows only (not over all N rows), then "
                           "weight by 0.8^k from k = 1 and sum.")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - A Medusa head is a residual block on the target's last hidden state; sharing $W_2$ with the frozen LM head
#   keeps the heads small (section 1's table gives their share of the model) and all heads' logits one matmul.
# - Head $k$ at position $t$ is trained on $x_{t+k+1}$, and only where that token is the target's own response:
#   the labels are the target's text shifted, once per head (the shipped heads mix that label with the target's
#   own distribution at $t+k$, section 3's soft targets).
# - Head $k$ guesses the token $k + 1$ places ahead without seeing the ones in between, which is why Medusa verifies a tree of
#   each head's top candidates rather than a chain of top-1 guesses (notebooks 04–06).
# - Accuracy on training positions counts memorisation as well as learning; only held-out text measures what a
#   head learned (section 3 measures the gap epoch by epoch).
# - With heads that share no parameter, Adam cancels a head's constant loss weight up to its ε (section 5's
#   argument, tested there on the live heads; Exercise 2 finds where ε bites); Medusa-2 trains the verifier itself,
#   and section 6 compares its drift with and without the KL self-distillation term (a tiny model, one training
#   seed per loss).
#
# ## Further reading
#
# - [Medusa (Cai et al. 2024)](https://arxiv.org/abs/2401.10774): the heads, Medusa-1 and Medusa-2 training,
#   self-distillation and the loss weights (every section here).
# - [Fast Inference from Transformers via Speculative Decoding (Leviathan et al. 2023)](https://arxiv.org/abs/2211.17192):
#   the draft-and-verify scheme the heads replace the draft model in.
