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
# # 06 · Medusa decoding: the heads draft, the target verifies a tree
#
# Notebook 03 trained Medusa heads: head $k$ reads the target's last hidden state $h_a$ at the last
# accepted token and guesses the token $k$ positions after the next one. Decoding with them needs no
# second model: per step (`generate(method="medusa")`, `proposers/medusa.py`)
#
# 1. **propose** — run heads $1..D$ on $h_a$ (a few small matmuls), take each head's top candidates and
#    place them on a token tree: the node with *rank path* $(r_1, \dots, r_d)$ carries head $d$'s
#    rank-$r_d$ candidate below the node $(r_1, \dots, r_{d-1})$;
# 2. **verify** — one target forward over every node with tree attention (each node sees the cache and
#    its own ancestors);
# 3. **accept** — the longest root-to-node path the target agrees with, plus the target's own bonus token;
#    its hidden state is the next step's $h_a$ (no extra forward).
#
# Notation: **p** = target, **q** = draft (here: the heads). "Mean accepted" = tokens emitted per target
# forward, **bonus included** (autoregressive = 1).
#
# Sections: (1) one prompt decoded live, step by step; (2) greedy Medusa equals autoregressive decoding,
# and what it buys in speed here; (3) sampling: the exact tree rule Medusa uses by default, *typical*
# acceptance, and the measured (lossy) drift of typical acceptance from exact sampling.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer prompts and tokens, fewer drift trials (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
prompt_id: int = 3  # question_id in data/prompts.jsonl for the live demo
max_new_tokens: int = 48  # tokens generated in the live demo
max_budget: int = 16  # tree="auto": largest node budget considered (a CPU picks a handful)
default_step: int = -1  # step shown (and saved) before the slider; -1: the step that accepted most (ties: the larger tree)
bench_prompts: int = 4  # prompts in the live speed comparison (spread over categories)
bench_tokens: int = 48  # new tokens per prompt in the live speed comparison
temperature: float = 0.7  # sampling temperature of section 3
sample_tokens: int = 32  # tokens per sampled generation in section 3
epsilon: float = 0.09  # typical acceptance: hard threshold ε of section 3's decode and drift (reference default)
delta: float = 0.3  # typical acceptance: entropy threshold δ of section 3's decode and drift (reference default, = sqrt(ε))
drift_epsilons: str = "0.01,0.25"  # further ε of the drift measurement beside (epsilon, delta), each with δ = sqrt(ε)
drift_trials: int = 400  # episodes per point of the drift measurement
drift_vocab: int = 8  # vocabulary of the tiny model used for the drift
seed: int = 0  # random seed
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    max_new_tokens, bench_prompts, bench_tokens = 24, 2, 24
    sample_tokens, drift_trials = 16, 150
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import math
import os
import time
from pathlib import Path

import pandas as pd
import torch
from IPython.display import Markdown
from transformers.utils import logging as hf_logging

from specdec_lab import generate, load_model, tiny_model
from specdec_lab.accept import typical_rule
from specdec_lab.accept.losslessness import LogitsTable, drift_baseline, typical_drift
from specdec_lab.bench import run_benchmark
from specdec_lab.io import load_prompts
from specdec_lab.lab.trees import Explorer
from specdec_lab.proposers.medusa import MedusaDecodeConfig, MedusaProposer
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.viz.decoding import (
    budget_figure,
    drift_figure,
    drift_frame,
    show_steps,
    speed_table,
    step_callback,
    step_tree_figure,
)
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tokens import trace_table

T_START = time.perf_counter()
FIGURES = Path(os.environ.get("SPECDEC_LAB_FIGURES", figures_dir))  # env override: used by nbval in CI
hf_logging.disable_progress_bar()
torch.manual_seed(seed)
all_prompts = load_prompts("../data/prompts.jsonl")
prompts = {p.question_id: p for p in all_prompts}
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; quick={quick}")

# %% [markdown]
# ## 1. One prompt, decoded live
#
# Which tree? `tree="auto"` sizes it for *this* machine: it measures the target's verify cost $t(n)$ for
# trees of $n$ tokens and the heads' cost, and picks the node budget $n$ maximising
# $E[L](n) \,/\, (t(n+1) + \text{heads})$, where $E[L](n)$ is the expected tokens per step of the best
# $n$-node tree under the heads' calibrated accuracies (`specdec_lab/trees/`). On a GPU, where $t$ is flat,
# that is tens of nodes; on a CPU, where every extra token costs, a handful. We build the proposer
# ourselves so we can read its choice afterwards.

# %%
lm = load_model(model_name)
tok = lm.tokenizer
prompt = prompts[prompt_id]
ids = lm.chat_ids(prompt.text)
print(f"[{prompt.category}] {prompt.text[:300]}...")
proposer = MedusaProposer(MedusaDecodeConfig(tree="auto", max_budget=max_budget))
med = generate(lm, ids, proposer=proposer, max_new_tokens=max_new_tokens)
ar = generate(lm, ids, method="autoregressive", max_new_tokens=max_new_tokens)

# %% tags=["nbval-ignore-output"]
choice = proposer.choice
print(
    f"tree='auto' picked n = {choice.budget} nodes, depth {choice.depth}: rank paths {[list(p) for p in choice.paths]}"
)
print(
    f"predicted E[L] = {choice.expected_length:.2f} tokens per step (proposer.expected_length() = "
    f"{proposer.expected_length():.2f}); predicted speed-up {choice.speedup:.2f}x under the cost model"
)
print(
    f"measured on this prompt: mean accepted {med.mean_accepted:.2f} ({len(med.tokens)} tokens in {med.forwards} forwards)"
)
fig = budget_figure(choice)
print(f"saved {save_figure(fig, '06_tree_budget', FIGURES)}")
fig

# %% [markdown]
# The cost model ranks neighbouring budgets only as well as it knows $t(n)$, and a curve measured once at
# startup is off by about the margin between neighbours. So the price is the one cost model every method
# shares (`cost.StepCost`): the measured curve corrected by every step the loop times, plus the loop's own
# time per step. `tree="auto"` prices the same candidate trees again every `adapt_every` steps as it
# learns, and where no tree pays it probes the smallest one now and then. Every tree is exact; only the
# speed depends on the choice. How many steps verified each tree size on this prompt:

# %% tags=["nbval-ignore-output"]
pd.Series(med.proposer["budgets"], name="steps").rename_axis("nodes verified").to_frame().T

# %% tags=["nbval-ignore-output"]
acc = proposer.drafter.accuracies  # the heads' calibrated accuracies (calibration.json, notebook 05)
A = acc.model(proposer.config.accuracy)  # (K, S)
largest = max(choice.trees)  # the largest tree priced (budget <= max_budget)
gains = sorted((math.prod(float(A[k, r]) for k, r in enumerate(p)) for p in choice.trees[largest]),
               reverse=True)  # each node's addition to E[L], best first
Markdown(
    "The predicted speed-up falls once the verify forward grows faster than $E[L]$: each extra node costs a "
    "share of a forward on this machine's cost curve, while head $d$'s rank-$r$ candidate adds only "
    "$\\prod_j a_{j, r_j}$ to $E[L]$"
    + (f" (in the {largest}-node tree: {gains[0]:.3f} for the best node, {gains[-1]:.3f} for the last)"
       if gains else "")
    + f". The heads' accuracy (head 1 top-1 {float(acc.top[0, 0]):.2f} on held-out text: `calibration.json`, notebook "
    "05) caps $E[L]$ "
    "far below the trees of the Medusa paper's Vicuna-7B heads."
)  # fmt: skip

# %% [markdown]
# **Each step's tree.** Node 0 is the root (the last accepted token); green is the accepted path, whose
# tokens are emitted together with the target's bonus token after it. In token labels ▁ is a space, ↵ a
# newline, ⇥ a tab, and · a byte of a character that the next token completes. The step shown first is
# the one that accepted most (ties: the larger tree, then the earlier step; parameter `default_step`),
# then a slider over all steps (its callback is the same `step_tree_figure`):

# %% tags=["nbval-ignore-output"]
if default_step < 0:  # the most instructive step: most tokens accepted, then the largest tree, then the earliest
    step = max(range(len(med.steps)), key=lambda i: (med.steps[i].accepted, len(med.steps[i].tree), -i))
else:
    step = min(default_step, len(med.steps) - 1)
print(f"step {step} of {len(med.steps)}: {len(med.steps[step].tree)} nodes, {med.steps[step].accepted} accepted")
fig = step_tree_figure(med, step, tok)
print(f"saved {save_figure(fig, '06_step_tree', FIGURES)}")
fig

# %% tags=["nbval-skip"]
import ipywidgets as w

Explorer(
    w.IntSlider(value=step, min=0, max=len(med.steps) - 1, description="step", continuous_update=False),
    step_callback(med, tok),
    header="<b>Move the slider</b>: that step's tree, the accepted path in green.",
    show_initial=False,  # the default step is the plain cell above
)

# %% [markdown]
# The emitted text, one colour per step (one target forward); bold underlined tokens were drafted by the
# heads and accepted, the plain one closing each step is the target's bonus token:

# %% tags=["nbval-ignore-output"]
show_steps(med, tok)

# %% tags=["nbval-ignore-output"]
trace_table(med, tok).head(10)

# %% [markdown]
# ## 2. Exact under greedy decoding — and how fast here
#
# A node is accepted only if its token *is* the target's argmax after its parent, so greedy Medusa emits
# exactly the autoregressive tokens, whatever the heads propose:

# %% tags=["nbval-check-output"]
assert med.tokens == ar.tokens, "greedy Medusa must equal autoregressive decoding token for token"
print(f"greedy Medusa == autoregressive, token for token: {med.tokens == ar.tokens} ({len(med.tokens)} tokens)")
print(ar.text[:400])

# %% [markdown]
# **Speed.** The benchmark harness (`specdec_lab.bench.run_benchmark`: greedy, a warm-up per method,
# method order rotated per prompt, every output checked against autoregressive) on a few prompts:
# autoregressive, Medusa with the auto tree, Medusa with a one-node chain (head 1's top-1 only), and the
# shipped draft model (notebook 02). These are **this machine's numbers, on few prompts: noisy**. The
# measured reference is the full benchmark:
# `python -m specdec_lab.bench --methods autoregressive,draft,medusa`.

# %% tags=["nbval-ignore-output"]
bench_set = all_prompts[:: max(len(all_prompts) // bench_prompts, 1)][:bench_prompts]
bench = run_benchmark(lm, bench_set, methods="autoregressive,medusa,medusa:tree=chain:1,draft",
                      max_new_tokens=bench_tokens, progress=False)  # fmt: skip
print(f"{len(bench_set)} prompts ({', '.join(p.category for p in bench_set)}) x {bench_tokens} new tokens")
speed_table(bench["summary"]).round(3)

# %% tags=["nbval-check-output"]
print(
    "every method identical to autoregressive on every prompt:",
    all(s["identical_to_autoregressive"] == 1.0 for s in bench["summary"].values()),
)

# %% tags=["nbval-ignore-output"]
summary = bench["summary"]
auto, chain = summary["medusa"], summary["medusa:tree=chain:1"]
faster = "auto tree" if auto["speedup"] > chain["speedup"] else "one-node chain"
ia, ic = auto.get("speedup_95"), chain.get("speedup_95")  # 95% paired-bootstrap intervals over prompts
overlap = ia is None or ic is None or (ia[0] <= ic[1] and ic[0] <= ia[1])  # (none: too few prompts to tell)
Markdown(
    "Mean accepted is what the heads buy per forward; the speed-up is that divided by what a bigger verify forward "
    "(and the heads) cost. A one-node chain pays little extra per step but emits at most 2 tokens; the auto tree "
    f"pays for a larger forward to offer more candidates per position. Here the auto tree emitted "
    f"{auto['mean_accepted']:.2f} tokens per forward against the chain's {chain['mean_accepted']:.2f}; its speed-up "
    f"was {auto['speedup']:.2f}× against the chain's {chain['speedup']:.2f}×"
    + (" — their 95% intervals overlap, so on these few prompts the two cannot be told apart." if overlap
       else f": the **{faster}** was faster.")
    + " The same heads on a GPU-like flat cost curve would verify tens of nodes for free (notebook 05, section 5)."
)  # fmt: skip

# %% [markdown]
# ## 3. Sampling: the exact tree rule and typical acceptance
#
# Greedy acceptance is exact but only defined at temperature 0. When sampling, Medusa's default rule is exact
# too. Its siblings are the heads' top-$s$ candidates, a function of the path: deterministic, so the draft
# distribution $q$ of each is one-hot. For such siblings the exact rule (`accept_one_hot`, which
# `accept="exact"`, the default at temperature > 0, picks for them) tries a node's children one after
# another: accept candidate $x$ with probability $p(x)$; else set $p(x)$ to 0, renormalise, and try the
# next sibling; after the last one the bonus token is drawn from what is left of $p$. It is SpecInfer's
# multi-step speculative sampling (Miao et al., arXiv 2305.09781) with a one-hot $q$, the way EAGLE
# (Li et al., arXiv 2401.15077) samples on its top-$k$ draft trees: every candidate is emitted with exactly
# its probability under $p$, and the tokens outside the tree keep theirs through the bonus (derivation:
# `specdec_lab/accept/tree_rules.py`; the exact emitted distribution is tested against autoregressive sampling
# for every method in `tests/test_tree_sampling.py` and `tests/test_sampling_methods.py`). SpecTr (Sun et
# al., arXiv 2310.15141) treats the choice among several drafts as optimal transport.
#
# The Medusa paper's own sampling rule is the lossy option, by name: **typical acceptance**
# (`accept="typical"`, Cai et al. 2024, section 2.3.1) accepts candidate $x$ after node $j$ iff
#
# $$p_j(x) > \min\big(\varepsilon,\; \delta \cdot e^{-H(p_j)}\big),$$
#
# and samples the bonus token from $p$. The reference defaults are $\varepsilon = 0.09$,
# $\delta = 0.3 = \sqrt{\varepsilon}$ (Cai et al. 2024); this section uses the parameters `epsilon` and
# `delta` (`typical_rule(epsilon, delta)`), the defaults unless a run sets them. At temperature 0, $p$ is
# one-hot, $H = 0$, and the rule accepts exactly the argmax: **typical = greedy**.

# %% tags=["nbval-check-output"]
rule = typical_rule(epsilon, delta)  # the thresholds every typical decode and drift of this section uses
typ0 = generate(lm, ids, method="medusa", accept=rule, max_new_tokens=max_new_tokens, tree="auto",
                max_budget=max_budget)  # fmt: skip
print(f"typical acceptance (ε = {epsilon:g}, δ = {delta:g}) at temperature 0 == greedy Medusa, token for token: "
      f"{typ0.tokens == med.tokens}")  # fmt: skip

# %% [markdown]
# At temperature > 0 Medusa samples with the exact rule unless typical acceptance is asked for by name. Both
# are compared with autoregressive *sampling* at the same temperature and seed (the outputs differ: all
# three are samples).

# %% tags=["nbval-ignore-output"]
runs = {
    f"autoregressive sampling, T = {temperature}": generate(
        lm, ids, temperature=temperature, seed=seed, max_new_tokens=sample_tokens),
    f"medusa, exact (one-hot rule), T = {temperature}": generate(
        lm, ids, method="medusa", temperature=temperature, seed=seed,
        max_new_tokens=sample_tokens, max_budget=max_budget),
    f"medusa, typical (ε = {epsilon:g}, δ = {delta:g}), T = {temperature}": generate(
        lm, ids, method="medusa", accept=rule, temperature=temperature, seed=seed,
        max_new_tokens=sample_tokens, max_budget=max_budget),
}  # fmt: skip
pd.DataFrame.from_dict(
    {name: {"new tokens": len(r.tokens), "target forwards": r.forwards, "mean accepted": round(r.mean_accepted, 3),
            "text": r.text[:80] + "…"} for name, r in runs.items()},
    orient="index",
)  # fmt: skip

# %% tags=["nbval-ignore-output"]
sampled, exact, typical = runs.values()
Markdown(
    f"Here exact Medusa emitted {exact.mean_accepted:.2f} tokens per target forward and typical Medusa "
    f"{typical.mean_accepted:.2f}, against sampling's {sampled.mean_accepted:.2f} ({exact.forwards} and "
    f"{typical.forwards} forwards for {len(exact.tokens)} and {len(typical.tokens)} tokens, against "
    f"{sampled.forwards} for {len(sampled.tokens)}; what that buys in speed on this machine is section 2's question, "
    "timed there by the benchmark harness)."
)  # fmt: skip

# %% [markdown]
# Typical acceptance gains its tokens by accepting a draft token whenever it is *plausible*, not only when
# it is the one sampling would have drawn — which is exactly why the rule is **lossy**. How lossy, measured: on a tiny model (vocabulary `drift_vocab`, so every prefix can be
# tabulated) with a deterministic draft (argmax of a perturbed copy — as Medusa heads propose their top
# candidates), run many independent 2-draft episodes and compare the histogram of the first two emitted
# tokens with the exact joint $p(t_1)\,p(t_2 \mid t_1)$ (`losslessness.typical_drift`). The exact rule
# (`accept_speculative`) on the same drafts gives the noise floor of this many trials (`drift_baseline`).
# The grid: this run's $(\varepsilon, \delta)$ (parameters `epsilon`, `delta`) and the further ε of
# `drift_epsilons`, each with $\delta = \sqrt{\varepsilon}$; the temperature of the decode above and 1.

# %%
target = tiny_model(vocab_size=drift_vocab, seed=seed)
perturbed = tiny_model(vocab_size=drift_vocab, seed=seed)
gen = torch.Generator().manual_seed(5)
with torch.no_grad():  # the "heads": the target's weights plus 30% noise in every layer
    for name, p in perturbed.named_parameters():
        if "layers" in name:
            p.add_(torch.randn(p.shape, generator=gen) * 0.3 * p.std())
context = [1, 2, 3]
target_table = LogitsTable(target, context).fill(3)
draft_table = LogitsTable(perturbed, context).fill(3)
grid = {float(e): math.sqrt(float(e)) for e in drift_epsilons.split(",") if e.strip()} | {epsilon: delta}
grid = dict(sorted(grid.items()))  # ε -> δ: this run's pair, and sqrt(ε) for the further ε
temperatures = tuple(sorted({temperature, 1.0}))
floors, drifts = {}, []
for t in temperatures:
    sampling = Sampling(temperature=t)
    floors[t] = drift_baseline(target_table, draft_table, sampling, k=2, trials=drift_trials, n=2, seed=seed)
    for eps, dlt in grid.items():
        drifts.append(typical_drift(target_table, draft_table, sampling, epsilon=eps, delta=dlt,
                                    k=2, trials=drift_trials, n=2, seed=seed))  # fmt: skip
drift = drift_frame(drifts, floors)

# %% tags=["nbval-ignore-output"]
drift.round(4)

# %% tags=["nbval-ignore-output"]
fig = drift_figure(drift)
print(f"saved {save_figure(fig, '06_typical_drift', FIGURES)}")
fig

# %% tags=["nbval-check-output"]
print(
    f"typical TV above 3x the exact rule's noise floor at every (T, ε): "
    f"{bool((drift['TV'] > 3 * drift['TV floor (exact rule)']).all())}"
)
print(f"chi-square rejects 'typical ~ exact sampling' at 1e-3 everywhere: {bool((drift['chi2 p-value'] < 1e-3).all())}")

# %% [markdown]
# **Where it deviates.** With a deterministic draft, the first candidate after the root is the draft's
# argmax $x$. Whenever $p(x)$ clears the threshold it is emitted *every* time — with probability ≈ 1
# instead of $p(x)$ — and the tokens sampling would have drawn instead are never produced. At the
# tabulated context:

# %% tags=["nbval-ignore-output"]
rows = {}
for t in temperatures:
    p0 = warp_probs(target_table(()), Sampling(temperature=t))
    x = int(draft_table(()).argmax())
    H = float(-torch.special.xlogy(p0, p0).sum())
    for eps, dlt in grid.items():
        thr = min(eps, dlt * math.exp(-H))
        rows[(t, eps)] = {"δ": dlt, "draft token x": x, "p(x) (what sampling gives it)": float(p0[x]),
                          "H(p) nats": H, "threshold min(ε, δe^-H)": thr, "accepted": float(p0[x]) > thr}  # fmt: skip
first = pd.DataFrame.from_dict(rows, orient="index").rename_axis(["temperature", "epsilon"])
first.round(3)  # rounded per column, before any transpose could make the columns objects

# %% tags=["nbval-ignore-output"]
passed, low = int(first["accepted"].sum()), drift["TV"].idxmin()
largest_eps = low[1] == max(grid)
Markdown(
    (f"The threshold is small next to a plausible token's probability: at all {len(first)} (T, ε) of the grid the "
     "draft's first token passes, so" if passed == len(first) else
     f"The draft's first token passes the threshold at {passed} of the {len(first)} (T, ε) of the grid; where it "
     "passes,")
    + " the first emitted token is (almost) always the draft's choice and the TV is large — the rule trades "
    f"*diversity* for speed. The TV is lowest at T = {low[0]:g}, ε = {low[1]:g} ({drift.loc[low, 'TV']:.3f}, against "
    f"up to {drift['TV'].max():.3f} elsewhere)"
    + (": the grid's largest ε, whose higher threshold rejects more of the later candidates and moves the output "
       "back toward $p$." if largest_eps else ".")
    + " On a real model the effect is the same in kind: typical "
    "acceptance produces plausible text, and the Medusa paper reports quality rather than distribution equality. "
    "Where the output must follow $p$, use an exact rule: Medusa's default when sampling (the one-hot rule of this "
    "section), or the draft model's speculative sampling (notebook 02)."
)  # fmt: skip

# %% tags=["nbval-ignore-output"]
print(f"notebook wall time: {time.perf_counter() - T_START:.0f} s")
