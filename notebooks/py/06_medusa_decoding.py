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
# Notebook 03 trained [Medusa](https://arxiv.org/abs/2401.10774) heads (Cai et al. 2024): head $d$ reads the
# target's last hidden state $h_a$ at the last accepted token $a$ (the subscript names that token) and guesses the
# token $d$ positions after the next one. Decoding with them needs no second model: per step (`generate(method="medusa")`,
# `proposers/medusa.py`)
#
# 1. **propose** — run heads $1..D$ on $h_a$ (a few small matmuls), take each head's top candidates and
#    place them on a token tree: the node with *rank path* $(r_1, \dots, r_d)$ carries head $d$'s
#    rank-$r_d$ candidate below the node $(r_1, \dots, r_{d-1})$;
# 2. **verify** — one target forward over every node with tree attention (each node sees the cache and
#    its own ancestors: notebook 04);
# 3. **accept** — the longest root-to-node path the target agrees with, plus the target's own bonus token;
#    its hidden state is the next step's $h_a$ (no extra forward).
#
# ## Learning objectives
#
# After this notebook you can
#
# - read one Medusa step: which tokens the heads proposed, which path the target accepted, and what it emitted;
# - explain why `tree="auto"` chooses the tree it does on this machine, from $E[L](n)$ and the cost curve;
# - verify that greedy Medusa emits exactly the autoregressive tokens, and measure what a larger tree costs;
# - compute typical acceptance's threshold $\min(\varepsilon, \delta e^{-H(p)})$ and explain why the rule is lossy
#   when sampling.
#
# **Prerequisites.** 02 (speculative sampling), 03 (Medusa heads), 04 (tree attention) and 05 (optimized trees).
#
# **Notation** (notebook 00's table): $p$ = target, $q$ = draft (here: the heads), $E[L]$ = expected tokens per
# step, $\tau$ = its measured mean, $T$ = temperature. "Mean accepted" = tokens emitted per target forward, **bonus included**
# (autoregressive = 1). A tree's **node budget $n$** = its nodes besides the root: notebook 00's draft length $k$ for a
# tree (the verify forward takes $n + 1$ tokens). $A_{j,r}$ = head $j$'s calibrated accuracy at rank $r$ (how often its
# rank-$r$ candidate is the right token, `calibration.json`); the subscript $a$ of $h_a$ is a token, not an accuracy.
#
# Sections: (1) one prompt decoded on a fixed demonstration tree, step by step; (2) which tree pays on this
# machine: what `tree="auto"` picks and why; (3) greedy Medusa equals autoregressive decoding, and what it buys
# in speed here; (4) sampling: the exact tree rule Medusa uses by default, *typical* acceptance, and the measured
# (lossy) drift of typical acceptance from exact sampling.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer prompts and tokens, fewer drift trials (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
prompt_id: int = 3  # question_id in data/prompts.jsonl for the live demo
max_new_tokens: int = 48  # tokens generated in the live demo
demo_tree: str = "cartesian:3,2"  # section 1's tree, whatever tree="auto" picks: head 1's top 3, each with head 2's top 2
max_budget: int = 16  # tree="auto": largest node budget considered
default_step: int = -1  # step shown (and saved) before the slider; -1: the step that accepted most (ties: the larger tree)
bench_prompts: int = 4  # prompts in the live speed comparison (spread over categories)
bench_tokens: int = 48  # new tokens per prompt in the live speed comparison (at most: a prompt may end earlier)
temperature: float = 0.7  # sampling temperature of section 4
sample_tokens: int = 32  # tokens per sampled generation in section 4
epsilon: float = 0.09  # typical acceptance: hard threshold ε of section 4's decode and drift (reference default)
delta: float = 0.3  # typical acceptance: entropy threshold δ of section 4's decode and drift (reference default, = sqrt(ε))
drift_epsilons: str = "0.01,0.25"  # further ε of the drift measurement beside (epsilon, delta), each with δ = sqrt(ε)
drift_trials: int = 400  # episodes per point of the drift measurement
drift_vocab: int = 8  # vocabulary of the tiny model used for the drift
seed: int = 0  # random seed
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %% tags=["nbval-ignore-output"]
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    max_new_tokens, bench_prompts, bench_tokens = 24, 2, 24
    sample_tokens, drift_trials = 16, 150
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, seed=seed, stem="06_medusa_decoding")
lm = load_model(model_name)
tok = lm.tokenizer

# %% [markdown]
# ## 1. One prompt, decoded on a demonstration tree
#
# Which tree the heads fill is a choice. To *see* a Medusa step, this section decodes with a fixed tree with
# siblings and depth, `demo_tree` (by default `cartesian:3,2`: head 1's top 3 candidates, each followed by
# head 2's top 2 — 9 nodes below the root), whatever size pays on this machine (section 2 asks that). Every
# tree is exact under greedy decoding, so the text is the same; only the number of forwards and their cost
# change.

# %%
from specdec_lab import generate
from specdec_lab.io import load_prompts

all_prompts = load_prompts("../data/prompts.jsonl")
prompt = next(p for p in all_prompts if p.question_id == prompt_id)
ids = lm.chat_ids(prompt.text)
print(f"[{prompt.category}] {prompt.text[:300]}...")
demo = generate(lm, ids, method="medusa", tree=demo_tree, max_new_tokens=max_new_tokens)
ar = generate(lm, ids, method="autoregressive", max_new_tokens=max_new_tokens)

# %% [markdown]
# **Each step's tree.** Node 0 is the root (the last accepted token); green is the accepted path, whose
# tokens are emitted together with the target's bonus token after it. In token labels ▁ is a space, ↵ a
# newline, ⇥ a tab, and · a byte of a character that the next token completes. Steps are numbered from 0.
# The step shown first is the one that accepted most (ties: the larger tree, then the earlier step;
# parameter `default_step`), then a slider over all steps (its callback is the same `step_tree_figure`):

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.decoding import step_label, step_tree_figure
from specdec_lab.viz.figures import save_figure

if default_step < 0:  # the most instructive step: most tokens accepted, then the largest tree, then the earliest
    step = max(range(len(demo.steps)), key=lambda i: (demo.steps[i].accepted, len(demo.steps[i].tree), -i))
else:
    step = min(default_step, len(demo.steps) - 1)
print(step_label(demo, step, tok))  # the figure's own title: the same step, counted the same way
fig = step_tree_figure(demo, step, tok)
print(f"saved {save_figure(fig, '06_step_tree', FIGURES)}")
fig

# %% tags=["nbval-skip"]
import ipywidgets as w

from specdec_lab.lab.trees import Explorer
from specdec_lab.viz.decoding import step_callback

Explorer(
    w.IntSlider(value=step, min=0, max=len(demo.steps) - 1, description="step", continuous_update=False),
    step_callback(demo, tok),
    header="<b>Move the slider</b>: that step's tree, the accepted path in green.",
    show_initial=False,  # the default step is the plain cell above
)

# %% [markdown]
# The emitted text, one colour per step (one target forward); bold underlined tokens were drafted by the
# heads and accepted, the plain one closing each step is the target's bonus token. Below it the first steps
# as a table: `proposed` = nodes offered below the root, `accepted` = draft tokens the target accepted,
# `emitted` = those plus the bonus token, `text` = what the step emitted, `ms_propose` / `ms_verify` = the
# heads' time and the verify forward's, in milliseconds on this machine.

# %% tags=["nbval-ignore-output"]
from IPython.display import display

from specdec_lab.viz.decoding import show_steps
from specdec_lab.viz.tokens import trace_table

display(show_steps(demo, tok))
steps_table = trace_table(demo, tok)
first_ms, rest_ms = float(steps_table["ms_verify"].iloc[0]), float(steps_table["ms_verify"].iloc[1:].median())
if first_ms > 1.5 * rest_ms:  # the first verify forward of the decode, against the median of the others
    print(f"step 0's verify took {first_ms:.0f} ms against a median of {rest_ms:.0f} ms for the others: it is the "
          "decode's first tree forward, and a first call typically pays one-time set-up (memory, the first calls "
          "of its kernels); the steps after it are the steady cost.")
steps_table[["proposed", "accepted", "emitted", "text", "ms_propose", "ms_verify"]].head(10)

# %% [markdown]
# ## 2. Which tree pays here: `tree="auto"`
#
# `tree="auto"` (the default) sizes the tree for *this* machine: it measures the target's verify cost $t(m)$
# of a tree-masked input of $m$ tokens (root included) and the heads' cost, and picks the node budget $n$ maximising
# $E[L](n) \,/\, (t(n+1) + \text{heads})$, where $E[L](n)$ is the expected tokens per step of the best
# $n$-node tree under the heads' calibrated accuracies (`specdec_lab/trees/`) — at the start; as it decodes it
# re-prices, and scales each depth's term of $E[L]$ by how much more or less this prompt accepted there than the
# calibration predicted (a factor $\rho_d$ per depth its verified trees reached; a deeper depth, never verified yet,
# takes the deepest reached depth's factor: `trees.DepthCorrection`). On a GPU, where $t$ stays flat up to tens of
# tokens, that is tens of nodes; on a machine where $t$ grows with the input's width sooner, the budget is
# smaller — possibly one node, or none. Where this machine's $t$ starts to rise is for the run to measure: the cells
# below print which sizes $m$ cost more than $t(1)$ beyond the timing noise on this run, and whether that noise lets
# them tell at all. We build the proposer ourselves so we
# can read its choice afterwards.
#
# **Predict, then run:** section 1's demonstration tree has 9 nodes below the root. Will `tree="auto"` pick more
# nodes than that on this machine, fewer, or none at all (plain decoding)? Write down your guess before running
# the next two cells (the second prints the choice).

# %%
from specdec_lab.proposers.medusa import MedusaDecodeConfig, MedusaProposer

proposer = MedusaProposer(MedusaDecodeConfig(tree="auto", max_budget=max_budget))
med = generate(lm, ids, proposer=proposer, max_new_tokens=max_new_tokens)
choice = proposer.choice

# %% tags=["prediction", "nbval-ignore-output"]
from specdec_lab.viz.decoding import budget_figure

print(f"tree='auto' picked n = {choice.budget} nodes, depth {choice.depth}: rank paths {[list(p) for p in choice.paths]}")
print(f"measured on this prompt: mean accepted {med.mean_accepted:.2f} ({len(med.tokens)} tokens in {med.forwards} "
      "target forwards after the prefill)")
calibrated = {n: opt.expected_length for n, opt in choice.options.items()}  # E[L](n) before any correction
reprice_every = proposer.config.adapt_every  # it prices before steps 0, reprice_every, 2·reprice_every, …: choice = last
priced_at = ((proposer.steps - 1) // reprice_every) * reprice_every if proposer.steps else 0  # steps it had seen at that pricing
# the deepest tree verified before that pricing: only depths 1..reached_then had a factor ρ_d of their own when it priced
reached_then = max((s.tree.max_depth for s in med.steps[:priced_at] if len(s.tree_tokens) > 1), default=0)
fig = budget_figure(choice, title=f"tree='auto' at its last pricing (after {priced_at} of {proposer.steps} steps): "
                                  f"n = {choice.budget}, depth {choice.depth}, E[L] = {choice.expected_length:.2f} "
                                  + (f"(corrected by this prompt's ρ_d; calibrated {calibrated[choice.budget]:.2f})"
                                     if reached_then else "(calibrated: no tree verified before it)"))  # fmt: skip
print(f"saved {save_figure(fig, '06_tree_budget', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
import math

import numpy as np
from IPython.display import Markdown

from specdec_lab.cost.noise import measure_cost_curve_with_noise
from specdec_lab.lab.course import compare

measured = proposer.cost.curve(tree=True)  # t(m) as measured before the decode; its prices since then moved
# `measured` is `cost_curve_for`'s (cost/curve.py): 15 interleaved repeats, t(m) = the median over repeats of the
# within-repeat ratio t_r(m)/t_r(1), times t(1)'s median ("paired"). How far a second measurement moves it: the same
# tree forwards timed again the way notebooks 05 and 07 (section 5) time theirs, 5 repeats, each size's median, with
# their spread (IQR / median) per size. One size's IQR of 5 repeats is itself noisy (one busy repeat can inflate it),
# so two costs are compared against the typical spread: the median over the sizes, counted once for each cost; and
# never against less than the two timings' own disagreement on t(m)/t(1), the largest over the sizes.
retimed, t_noise = measure_cost_curve_with_noise(lm.model, sizes=list(measured.sizes), context=measured.context or 64,
                                                 repeats=5, warmup=1, tree=True)  # fmt: skip
timing_gap = {m: max(a, b) / min(a, b) - 1 for m in measured.sizes if m > 1  # read against the smaller, as compare
              for a, b in [(measured(m) / measured(1), retimed(m) / retimed(1))]}  # fmt: skip
gap_at = max(timing_gap, key=timing_gap.get)
pair_noise = max(0.02, 2 * t_noise.spread, timing_gap[gap_at])  # relative tolerance between two costs (or rates)
noise_said = (f"{pair_noise:.1%}, the larger of twice the re-timing's median spread of {t_noise.spread:.1%} (once "
              f"for each cost) and the largest gap between the two timings' $t(m)/t(1)$, {timing_gap[gap_at]:.1%} at "
              f"m = {gap_at}")  # fmt: skip
by_budget = {r["budget"]: r for r in choice.table}  # per budget n: E[L], verify and heads seconds, rate, speed-up
chosen, largest = by_budget[choice.budget], by_budget[max(by_budget)]


def within_noise(a, b):  # two costs (or rates) within pair_noise of each other, as `compare` reads "within"
    return compare(a, b, "above", "below", within="within", rel_tol=pair_noise) == "within"


def step_cost(r):  # a step's seconds (verify + heads) as a multiple of a plain decoding step's
    return (r["verify_seconds"] + r["head_seconds"]) / by_budget[0]["verify_seconds"]


def against_plain(r):  # a step against a plain step, "within noise" inside the two costs' spreads
    return compare(step_cost(r), 1.0, "{a:.2f}× a plain step", "{a:.2f}× a plain step (below one)",
                   within="{a:.2f}× a plain step (within noise of one)", rel_tol=pair_noise)  # fmt: skip


what = ("plain decoding: no tree pays" if choice.budget == 0 else
        "a one-node chain: head 1's top-1 candidate only" if [tuple(p) for p in choice.paths] == [(0,)] else
        f"a tree of {choice.budget} nodes, depth {choice.depth}")  # fmt: skip
A = proposer.drafter.accuracies.model(proposer.config.accuracy)  # (K, S) the heads' calibrated accuracies
gains = sorted((math.prod(float(A[k, r]) for k, r in enumerate(p)) for p in choice.trees[max(by_budget)]), reverse=True)
final_rho = med.proposer.get("correction", [])  # ρ_d as the decode ended: after the last pricing, not used by it


def pricing_rho():  # the ρ_d the last pricing used, read back from its table: E[L](n) − 1 = Σ_d ρ_d · P_d(n)
    # depths 1..reached_then had a factor of their own then; deeper ones took ρ at reached_then (TreeOption.corrected)
    rows = [(choice.options[r["budget"]].by_depth, r["expected_length"]) for r in choice.table if r["budget"] > 0]
    width = reached_then
    if not rows or not width:
        return []
    X, y = np.zeros((len(rows), width)), np.array([e - 1.0 for _, e in rows])
    for i, (by_depth, _) in enumerate(rows):
        for d, v in enumerate(by_depth):
            X[i, min(d, width - 1)] += v
    used = X.any(axis=0)  # depths some row of the table reaches: only those factors are pinned down
    return np.linalg.lstsq(X[:, used], y, rcond=None)[0].tolist() if used.any() else []


def rho_said(factors):
    return ", ".join(f"$\\rho_{d + 1}$ = {f:.2f}" for d, f in enumerate(factors))


def depths_said(a, b):
    return f"depth {a}" if a == b else f"depths {a} to {b}"


rho = rho_said(pricing_rho())
deeper = max(len(choice.options[r["budget"]].by_depth) for r in choice.table)  # the table's deepest tree
at_end = (f" By the decode's end its verified trees had reached {depths_said(1, len(final_rho))}: "
          f"{rho_said(final_rho)}, after the last pricing and not used by it." if final_rho and priced_at < proposer.steps
          else "")  # fmt: skip
corrected = (
    (f" (These $E[L]$ are the decode's own at its last pricing, after {priced_at} of its {proposer.steps} steps. "
     f"By then its verified trees had reached depth {reached_then} at most; the term of each of those depths is "
     "scaled by what this prompt had accepted there against the calibration"
     + (f", {rho}" if rho else "")
     + (f"; the deeper terms of the figure's trees ({depths_said(reached_then + 1, deeper)}) take "
        f"$\\rho_{{{reached_then}}}$ again, the library's rule for a depth not verified yet (`trees.DepthCorrection`), "
        "not anything accepted there" if deeper > reached_then else "")
     + "." + at_end
     if reached_then else
     " (These $E[L]$ are the calibrated ones: no tree had been verified before the last pricing, so no $\\rho_d$ "
     "corrected them." + at_end)
    + f" Calibrated alone, as notebook 05 computes it, the choice's $E[L]$ is "
    f"{calibrated[choice.budget]:.3f} and the {max(by_budget)}-node tree's {calibrated[max(by_budget)]:.3f}.)"
)
big = max(by_budget)
if choice.budget == big:
    why = (f"The largest tree it considers ({big} nodes, `max_budget`) pays most here: its step costs "
           f"{against_plain(largest)} and it expects {largest['expected_length']:.2f} tokens.")
else:
    costs = (f"on this machine's cost curve its step (verify {big + 1} tokens, then the heads) costs "
             f"{against_plain(largest)}, the choice's {against_plain(chosen)}")
    cost_rises = not within_noise(step_cost(largest), step_cost(chosen))
    why = (f"In the figure, $E[L]$ keeps rising with $n$ — the best {big}-node tree expects "
           f"{largest['expected_length']:.2f} tokens per step against {chosen['expected_length']:.2f} for the "
           f"choice — while {costs}; two costs differ beyond noise only by more than {noise_said}. " + compare(
               chosen["speedup"], largest["speedup"],
               "Predicted speed-up: {a:.2f}× for the choice against {b:.2f}× for the {n}-node tree, a gap beyond that "
               "noise" + (": the verify cost of the larger tree outweighs what its extra nodes add."
                          if cost_rises else "."),
               "Predicted speed-up: {a:.2f}× for the choice against {b:.2f}× for the {n}-node tree.",
               within="Predicted speed-up: {a:.2f}× for the choice against {b:.2f}× for the {n}-node tree — within "
               "that noise: on this run's timings the two cannot be told apart, and the pick follows the medians.",
               rel_tol=pair_noise, n=big))  # fmt: skip
why += corrected
siblings = sum(len(p) == 1 for p in choice.paths)  # the pick's depth-1 nodes, and its nodes below them
below = len(choice.paths) - siblings
Markdown(
    f"On this prompt (question {prompt_id}) and this run's timings, `tree=\"auto\"` picked **n = {choice.budget}** "
    f"({what}): one prompt's pricing; section 3's bench sizes the tree anew on each of its prompts. {why} Each extra node adds only "
    f"$\\prod_j A_{{j, r_j}}$ (head $j$'s calibrated accuracy at rank $r_j$, along the node's path) to $E[L]$ (in the {max(by_budget)}-node tree: {gains[0]:.3f} for the best node, "
    f"{gains[-1]:.3f} for the last), because the heads are weak: head 1's top-1 is right "
    f"{float(proposer.drafter.accuracies.top[0, 0]):.0%} of the time on held-out text (`calibration.json`, "
    "notebook 05), far below the Medusa paper's Vicuna-7B heads. "
    + (f"Here the pick branches too ({siblings} siblings at depth 1, and {below} node{'s' if below != 1 else ''} "
       "below them); section 1 still draws a fixed demonstration tree so that its picture does not depend on what a "
       "run's timings pick." if choice.depth >= 2 and siblings >= 2 else
       "That is why section 1 drew a fixed demonstration tree: the tree that pays here has too little to show.")
)  # fmt: skip

# %% [markdown]
# The cost model ranks neighbouring budgets only as well as it knows $t(n)$, and a curve measured once at
# startup can be off by as much as the margin between neighbours (the last cell of this section sets the two side
# by side). So the price is the one cost model every method
# shares (`cost.StepCost`): the measured curve corrected by every step the loop times, plus the loop's own
# time per step. `tree="auto"` prices the same candidate trees again every `adapt_every` steps as it
# learns, and where no tree pays it probes the smallest one now and then. Every tree is exact; only the
# speed depends on the choice. How many steps verified each tree size (nodes below the root) on this prompt;
# 0 is a plain forward with no node below the root (where no tree paid, or where only one token was left to emit and
# the loop cut the tree to its root). Near `max_new_tokens` the loop likewise cuts a tree deeper than the tokens left
# to its first depths (`Tree.truncate_depth`), so a step can verify fewer nodes than the pick without any new pricing.
# The steps add up to the forwards printed above:

# %% tags=["nbval-ignore-output"]
import pandas as pd

verified_sizes = {int(n): int(k) for n, k in med.proposer["budgets"].items()}
if med.forwards > sum(verified_sizes.values()):
    verified_sizes[0] = med.forwards - sum(verified_sizes.values())
print(f"{sum(verified_sizes.values())} steps = {med.forwards} target forwards after the prefill")
cut_sizes = {sum(len(p) <= d for p in choice.paths): d for d in range(1, choice.depth)}  # the pick cut to depth d
for n in sorted(verified_sizes):
    if 0 < n < choice.budget and n in cut_sizes:
        print(f"{n} nodes = the picked {choice.budget}-node tree cut to depth {cut_sizes[n]} (its nodes at depth "
              f"<= {cut_sizes[n]}): the size a step verifies where the loop cut the tree near max_new_tokens")
pd.Series(dict(sorted(verified_sizes.items())), name="steps").rename_axis("nodes verified").to_frame().T

# %% [markdown]
# Notebook 05 (section 5) chose a budget for the same heads with `choose_budget`: the calibrated accuracies on a
# cost curve measured once, nothing learned from a decode. The same rule on this notebook's own measured curve
# (the one `tree="auto"` started from) and its `max_budget`, beside the choice of the decode's last pricing. The table
# gives every budget's predicted speed-up three ways: on the curve alone, on the same curve timed again earlier in
# this section (each size's median of a few repeats, the way notebook 05 times its own curve), and at the decode's
# last pricing (the figure above).

# %% tags=["nbval-ignore-output"]
from specdec_lab.trees import pick_budget

head_cost = lambda d: proposer.drafter.head_seconds.get(d, 0.0) if d else 0.0  # noqa: E731
at_start = pick_budget(proposer.options, measured, head_cost)
start_up = {r["budget"]: r["speedup"] for r in at_start.table}  # predicted speed-up per budget n, the curve alone
again = pick_budget(proposer.options, retimed, head_cost)  # the same rule on section 2's second timing of the curve
again_up = {r["budget"]: r["speedup"] for r in again.table}
end_up = {r["budget"]: r["speedup"] for r in choice.table}  # the same at the last pricing: the figure above
# pair_noise (measured above, with `measured` and `retimed`): two rates differ beyond noise only by more than it


def listed(values):  # 1, 2 and 3: a list said in words, not as a Python list
    values = [str(v) for v in values]
    return " and ".join([", ".join(values[:-1]), values[-1]]) if len(values) > 1 else "".join(values) or "none"


def margin(ups, pick, label):  # the pick against its runner-up, in predicted speed-up (= in rate)
    runner_up = max((n for n in ups if n != pick), key=lambda n: ups[n])
    return compare(ups[pick], ups[runner_up],
                   label + " n = {p} predicts {m:.1%} more speed-up than the runner-up n = {r} ({a:.3f}× against "
                   "{b:.3f}×), more than the {t:.1%} by which two timings of a cost $t(n + 1)$ can differ here.",
                   label + " n = {p} and the runner-up n = {r} predict the same speed-up ({a:.3f}×).",
                   within=label + " n = {p} predicts only {m:.1%} more speed-up than the runner-up n = {r} "
                   "({a:.3f}× against {b:.3f}×), within the {t:.1%} by which two timings of a cost $t(n + 1)$ can differ; "
                   "by that tolerance {ties}: this run's timings do not single out n = {p}, and another run of this "
                   "notebook can pick any of them.",
                   rel_tol=pair_noise, p=pick, r=runner_up, t=pair_noise, ties=tied_with(ups, pick),
                   m=(ups[pick] - ups[runner_up]) / min(abs(ups[pick]), abs(ups[runner_up])))  # fmt: skip
    # m is read against the smaller, as compare and within_noise read "within": the ties listed agree with it


def dear_budgets():  # budgets both timings price below both neighbours beyond noise, for a size m = n + 1 that both
    # timings put above the line between t(m − 1) and t(m + 1) beyond noise: that one size's own forward is dear
    def dip(n):
        return all(ups[n] < min(ups[n - 1], ups[n + 1]) and not within_noise(ups[n], min(ups[n - 1], ups[n + 1]))
                   for ups in (start_up, again_up))  # fmt: skip

    def bump(m):
        return all(c(m) > (c(m - 1) + c(m + 1)) / 2 and not within_noise(c(m), (c(m - 1) + c(m + 1)) / 2)
                   for c in (measured, retimed))  # fmt: skip

    return [n for n in sorted(start_up) if n > 0 and n - 1 in start_up and n + 1 in start_up and dip(n) and bump(n + 1)]


def dear_said(n):  # one such budget: its predicted speed-ups, and the t(m)/t(1) of its size and its neighbours
    m = n + 1
    ratios = ", ".join(f"$t({k})/t(1)$ = {measured(k) / measured(1):.2f} (timed again: {retimed(k) / retimed(1):.2f})"
                       for k in (m - 1, m, m + 1))  # fmt: skip
    return (f" Both timings here price n = {n} below both of its neighbours by more than that tolerance ({start_up[n]:.2f}× "
            f"on the curve alone and {again_up[n]:.2f}× timed again, against at least "
            f"{min(start_up[n - 1], start_up[n + 1]):.2f}× and {min(again_up[n - 1], again_up[n + 1]):.2f}× beside it), "
            f"and both put the cost of its step's m = {m} tokens above the line between its neighbours' by more than it "
            f"too ({ratios}): that one forward is dear here, and a curve that does not time m = {m} reads it off that "
            "line and cannot show it.")  # fmt: skip


def again_said():  # the rule on the second timing of the curve, and notebook 05's pick beside these
    cleared = [pick for ups, pick in ((start_up, at_start.budget), (end_up, choice.budget))
               if not within_noise(ups[pick], max(ups[n] for n in ups if n != pick))]  # margins said "more than"
    said = f" The same rule on the curve timed again (the table's second row) picks n = {again.budget}" + (
        " too." if again.budget == at_start.budget else
        f", not n = {at_start.budget}: two timings of one curve already move the pick"
        + (f", although the margins above clear the tolerance, so this run's timings do not single out n = "
           f"{at_start.budget}." if cleared else "."))  # fmt: skip
    return (said + "".join(dear_said(n) for n in dear_budgets())
            + " Notebook 05 (section 5) runs this rule on a curve it timed itself, at another moment, at its own set "
            "of sizes (a size it does not time, it reads off the line between its timed neighbours), with its own timings of "
            "the heads and its own `max_budget`: its pick need not be among the ties listed here, and where it "
            "differs from these picks the difference is in those inputs, not in the rule.")  # fmt: skip


def tied_with(ups, pick):  # every budget whose predicted speed-up is within noise of the pick's, said the short way
    ties = [n for n in ups if n != pick and within_noise(ups[n], ups[pick])]
    apart = [n for n in ups if n != pick and n not in ties]
    if len(ties) > len(apart):
        return (f"every budget of the row but n = {listed(apart)} is within noise of n = {pick}" if apart else
                f"every budget of the row is within noise of n = {pick}")  # fmt: skip
    return f"n = {listed(ties)} {'is' if len(ties) == 1 else 'are'} within noise of n = {pick}"


def sizes_said(sizes):
    return f"m = {listed(sizes)}" if sizes else "none"


def verdict_at(m):  # t(m) against t(1): "above"/"below" only where both timings of the curve say so beyond noise
    said = {compare(c(m), c(1), "above", "below", within="within", rel_tol=pair_noise) for c in (measured, retimed)}
    return said.pop() if len(said) == 1 else "within"


def shape_of_curve():  # which t(m) differ from t(1) beyond noise (m = tokens verified, root included)
    verdict = {m: verdict_at(m) for m in measured.sizes if m > 1}
    ties = [m for m, v in verdict.items() if v == "within"]
    above = [m for m, v in verdict.items() if v == "above"]
    below = [m for m, v in verdict.items() if v == "below"]
    top = max(measured.sizes)
    what = ("tree-masked inputs of m tokens" + (f" after {measured.context} cached tokens" if measured.context else "")
            + ", warm, timed by `cost_curve_for` (`cost/curve.py`): 15 repeats with the sizes interleaved, $t(m)$ = "
            "the median over the repeats of the ratio $t_r(m)/t_r(1)$ within each, times the median $t(1)$ — not "
            "each size's own median of 5 repeats, as notebooks 05 and 07 (section 5) and section 2's re-timing "
            "take it, nor notebook 04's single tree after a prompt")  # fmt: skip
    return (f"The tree verify curve this decode started from ({what}; two costs differ beyond noise only by more "
            f"than {noise_said}), read with its re-timing: a size stands above (or below) $t(1)$ only where both "
            f"timings put it there beyond that noise — $t(m)$ within noise of $t(1)$: {sizes_said(ties)}; "
            f"above it: {sizes_said(above)}" + (f"; below: {sizes_said(below)}" if below else "")
            + f"; $t({top})/t(1)$ = {measured(top) / measured(1):.2f} (timed again: {retimed(top) / retimed(1):.2f}). "
            + ("No size differs from $t(1)$ beyond that noise on both timings: this run's timings cannot say where "
               "the verify cost starts to rise, so the ranking of budgets below rests on the medians alone. "
               if not above else rise_said(verdict)))


def rise_said(verdict):  # where the verdict settles on "above" for good, and the isolated "above"s before it
    sizes = sorted(verdict)
    onset = next((m for i, m in enumerate(sizes) if all(verdict[x] == "above" for x in sizes[i:])), None)
    early = [m for m in sizes if verdict[m] == "above" and (onset is None or m < onset)]
    if onset is not None and not early:
        smaller = [m for m in sizes if m < onset]  # the sizes within noise of t(1)
        tied = [measured(m) / measured(1) for m in smaller]
        step = (f", and the chosen tree's step (verify {choice.budget + 1} tokens, then the heads) is priced at "
                f"{against_plain(chosen)}" if choice.budget > 0 else "")
        if not smaller:
            return (f"In this run's timings every size from m = {onset} up stands above $t(1)$ beyond noise on both "
                    f"timings{step}: "
                    "any tree costs more than a plain forward here, and must earn its share of the forward. ")
        one = len(smaller) == 1
        which = (f"the one smaller size, m = {smaller[0]}, is within {pair_noise:.1%} of it on at least one timing"
                 if one else f"every smaller one is within {pair_noise:.1%} of it on at least one timing")  # fmt: skip
        medians = (f"; its $t(m)/t(1)$ is {tied[0]:.2f}" if one else
                   f"; their $t(m)/t(1)$ run from {min(tied):.2f} to {max(tied):.2f}")  # fmt: skip
        whose = "that size's cost" if one else "those sizes' costs"
        return (f"In this run's timings, from m = {onset} up every size stands above $t(1)$ beyond noise on both "
                f"timings; {which}, "
                f"which says only that these timings cannot tell {whose} from $t(1)$, not that they cost the same"
                f"{medians}{step}. A tree verified in a size below m = {onset} is not shown to cost more than a plain "
                f"forward here; one of m = {onset} or more is, and must earn its share of the forward. ")
    settled = (f"only from m = {onset} up does every size stand above $t(1)$" if onset is not None else
               "even the largest sizes do not all stand above $t(1)$")
    return (f"The verdict is not monotone in m: m = {listed(early)} stand{'s' if len(early) == 1 else ''} above "
            f"$t(1)$ while larger sizes tie it, and {settled}. Single sizes flip between \"above\" and \"within\" "
            "from run to run at this noise (notebook 07, section 5, times the same forwards), so this run's timings "
            "place no " + ("threshold below that" if onset is not None else "threshold")
            + "; the ranking of neighbouring budgets below rests on the medians. ")


display(pd.DataFrame({"predicted speed-up, curve alone (05's rule)": start_up,
                      "predicted speed-up, curve timed again (05's rule)": again_up,
                      "predicted speed-up, at the last pricing (figure above)": end_up})
        .rename_axis("node budget n").round(3).T)  # fmt: skip
kind_names = {"root": "root-only steps", "chain": "chain steps", "tree": "branching-tree steps"}
own_time = ", ".join(f"{v * 1e3:.1f} ms on {kind_names.get(k, k)}" for k, v in proposer.cost.overheads.items()) or (
    "none: no step was timed")  # learned per kind of step (`cost.StepCost.overheads`), from every step the loop timed
Markdown(
    shape_of_curve()
    + compare(choice.budget, at_start.budget,
            "On the measured curve alone (notebook 05's rule) the pick is n = {b}; after the first {s} steps of this decode (its last pricing) "
            "the cost model also knew the loop's own time per step ({o}, paid whatever the tree) and how "
            "much more or less this prompt accepts per depth than the calibration said, and `tree=\"auto\"` moved "
            "to a larger tree, n = {a}.",
            "On the measured curve alone (notebook 05's rule) the pick is n = {b}; after the first {s} steps of this decode (its last pricing) "
            "the cost model also knew the loop's own time per step ({o}) and how much more or less this "
            "prompt accepts per depth than the calibration said, and `tree=\"auto\"` moved to a smaller tree, "
            "n = {a}.",
            within="On the measured curve alone (notebook 05's rule) the pick is n = {b} too: what the decode "
            "learned did not move it (the loop's own time per step, learned per kind of step: {o}; and the acceptance "
            "per depth on this prompt).",
            s=priced_at, o=own_time)
    + " " + margin(start_up, at_start.budget, "On the curve alone (the table's first row)")
    + " " + margin(end_up, choice.budget, "At the decode's last pricing (its third row, the figure above)")
    + again_said()
)  # fmt: skip

# %% [markdown]
# ## 3. Exact under greedy decoding — and how fast here
#
# A node is accepted only if its token *is* the target's argmax after its parent, so greedy Medusa emits
# exactly the autoregressive tokens, whatever tree the heads fill:

# %% tags=["nbval-check-output"]
assert med.tokens == ar.tokens and demo.tokens == ar.tokens, "greedy Medusa must equal autoregressive decoding"
print(f"greedy Medusa (tree='auto' and tree={demo_tree!r}) == autoregressive, token for token: True "
      f"({len(ar.tokens)} tokens)")  # fmt: skip
print(ar.text[:400])

# %% [markdown]
# **Speed.** The benchmark harness (`specdec_lab.bench.run_benchmark`: greedy, a warm-up per method, method
# order rotated per prompt, every output checked against autoregressive) on a few prompts: autoregressive,
# Medusa with the auto tree, Medusa with the demonstration tree of section 1, Medusa with a one-node chain
# (head 1's top-1 only) — each run whatever tree `auto` ended on in section 2, since the bench's `auto` is sized
# anew on each of its prompts and re-priced as it decodes — and the shipped draft model (notebook 02). Columns: tokens/s over all prompts, mean accepted, the speed-up
# against autoregressive (the ratio of the two tokens/s), the share of prompts whose output was identical to
# autoregressive's, the prompts, and the new tokens summed over them (a prompt may stop before `bench_tokens`
# at its end-of-text token). These are **this machine's numbers, on few prompts: noisy**; the measured
# reference is the full benchmark, `python -m specdec_lab.bench --methods autoregressive,draft,medusa`.

# %% tags=["nbval-ignore-output"]
from specdec_lab.bench import run_benchmark
from specdec_lab.viz.decoding import speed_table

fixed = {f"medusa:tree={t}": t for t in dict.fromkeys((demo_tree, "chain:1"))}  # both, whatever `auto` ended on
bench_set = all_prompts[:: max(len(all_prompts) // bench_prompts, 1)][:bench_prompts]
bench = run_benchmark(lm, bench_set, methods=["autoregressive", "medusa", *fixed, "draft"],
                      max_new_tokens=bench_tokens, progress=False)  # fmt: skip
print(f"{len(bench_set)} prompts ({', '.join(p.category for p in bench_set)}), at most {bench_tokens} new tokens each")
speed_table(bench["summary"]).round(3)

# %% tags=["nbval-check-output"]
print(
    "every method identical to autoregressive on every prompt:",
    all(s["identical_to_autoregressive"] == 1.0 for s in bench["summary"].values()),
)

# %% tags=["nbval-ignore-output"]
from specdec_lab.bench.report import speedup_interval
from specdec_lab.lab.course import compare

summary = bench["summary"]


def per_forward(rows):  # bench rows with forwards in place of seconds: their tokens / "seconds" = mean accepted
    return [{**r, "seconds": r["forwards"]} for r in rows]


def shown(ci):  # a paired-bootstrap interval of a ratio fixed / auto
    return f"95% interval of the ratio {ci[0]:.2f}–{ci[1]:.2f}" if ci else "too few prompts for an interval"


def tie(ci):  # within noise: the interval holds 1 (or there is none)
    return ci is None or ci[0] <= 1.0 <= ci[1]


def against_ar(x, ci):  # a speed-up over autoregressive with its 95% interval
    return f"{x:.2f}×" + (f" [{ci[0]:.2f}–{ci[1]:.2f}]" if ci else "")


def versus(label, name):
    """Medusa with a fixed tree against the auto tree: tokens per forward, then speed — each as a paired-bootstrap 95%
    interval over the prompts of the ratio fixed / auto, "within noise" where that interval holds 1."""
    s, auto = summary[label], summary["medusa"]
    mine = [r for r in bench["rows"] if r["method"] == label]
    theirs = [r for r in bench["rows"] if r["method"] == "medusa"]
    ci_tok = speedup_interval(per_forward(mine), per_forward(theirs))  # None: fewer than 2 prompts
    ci_speed = speedup_interval(mine, theirs)
    a, b = s["mean_accepted"], auto["mean_accepted"]
    tokens = (f"{name} emitted {a:.2f} tokens per forward against the auto tree's {b:.2f} ({shown(ci_tok)}"
              + ("; within noise on these prompts)" if tie(ci_tok) else
                 compare(a, b, "): more per forward", "): fewer per forward")))  # fmt: skip
    ia, ib = s.get("speedup_95"), auto.get("speedup_95")  # each against autoregressive
    speed = (f"; its speed-up over autoregressive was {against_ar(s['speedup'], ia)} against the auto tree's "
             f"{against_ar(auto['speedup'], ib)} (95% intervals); paired prompt by prompt, its speed over the auto tree's: "
             f"{shown(ci_speed)}" + (
        ": within noise, so on these few prompts the two cannot be told apart." if tie(ci_speed) else
        not_the_trees(name, s, auto, mine) if tie(ci_tok) else
        compare(s["speedup"], auto["speedup"], f": **{name}** was faster.", ": **the auto tree** was faster.")))
    return tokens + speed  # fmt: skip


def not_the_trees(name, s, auto, mine):
    """The speed interval leaves out 1 while tokens per forward tie: the gap is in the seconds per forward. Where the
    faster method's forwards verified at least as many nodes as the slower's, its tree cannot have made them cheaper."""
    fixed_nodes = max(int((r.get("proposer") or {}).get("nodes") or 0) for r in mine)  # at most, per forward
    auto_nodes = sum(n * k for n, k in auto_budgets.items()) / max(auto_steps, 1)  # mean per forward
    fast_nodes, slow_nodes = (fixed_nodes, auto_nodes) if s["speedup"] > auto["speedup"] else (auto_nodes, fixed_nodes)
    faster = name[0].lower() + name[1:] if s["speedup"] > auto["speedup"] else "the auto tree"
    nodes = (f"the auto tree's forwards verified {auto_nodes:.2f} nodes on average against at most {fixed_nodes} "
             f"for {name[0].lower() + name[1:]}")
    if fast_nodes >= slow_nodes:
        return (f", which leaves out 1 — but the trees cannot make that gap: tokens per forward tie (above) and {nodes}, "
                f"so {faster}'s forwards were no smaller than the other's. The gap is in the time of comparable "
                f"forwards between the bench's runs, timing variation that a {len(mine)}-prompt bootstrap does not "
                "capture: no order between the two is shown.")  # fmt: skip
    return (f": **{faster}** was faster, with tokens per forward tied (above) and {nodes}: the gap can come from its "
            f"smaller forwards (on {len(mine)} prompts).")  # fmt: skip


auto_budgets = {}  # nodes verified -> steps, over the bench's `medusa` (tree="auto") runs on all its prompts
auto_forwards = 0  # target forwards (prefill not counted): the table's mean accepted divides by them
for row in bench["rows"]:
    if row["method"] == "medusa":
        auto_forwards += int(row.get("forwards") or 0)
        for n, k in ((row.get("proposer") or {}).get("budgets") or {}).items():  # only steps that verified a tree
            auto_budgets[int(n)] = auto_budgets.get(int(n), 0) + int(k)
root_only = auto_forwards - sum(auto_budgets.values())  # the rest verified the root alone
if root_only > 0:
    auto_budgets[0] = root_only
auto_steps = sum(auto_budgets.values())
auto_ran = ("The bench's `medusa` row is `tree=\"auto\"` sized anew on each prompt and re-priced as it decoded"
            + (": over its " + str(auto_steps) + " target forwards (prefill not counted; the table's mean accepted is "
               "its new tokens over these forwards) it verified " + ", ".join(
                f"{n} node{'s' if n != 1 else ''} on {k / auto_steps:.0%}" for n, k in sorted(auto_budgets.items()))
               + " of them" + (f" — the {root_only} forward{'s' if root_only != 1 else ''} with 0 nodes verified the "
                               "root alone: a prompt's last token, where the loop cuts every tree to depth 0, or a "
                               "step where nothing paid" if root_only > 0 else "")
               + (". A size below the most common one comes from a pricing on one prompt that chose less, or from a "
                  "tree cut near `max_new_tokens` to the depths the tokens left allow (section 2)"
                  if len([n for n in auto_budgets if 0 < n < max(auto_budgets, key=auto_budgets.get)]) else "")
               + ". " if auto_steps else ". "))  # fmt: skip
if auto_steps:  # the bench's most common size against section 2's pick (one prompt's pricing)
    common = max((n for n in auto_budgets if n > 0), key=auto_budgets.get, default=0)
    in_bench = any(p.question_id == prompt_id for p in bench_set)
    said = f"The bench's most common size, {common} node{'s' if common != 1 else ''}, is "
    auto_ran += (said + "section 2's pick too. " if common == choice.budget else
                 said + f"not section 2's n = {choice.budget}: that pick priced one prompt (question {prompt_id}, "
                 + ("one of the bench's" if in_bench else "not among the bench's") + ") at one pricing of this run's "
                 "timings, and each bench prompt priced its own. ")  # fmt: skip
names = {f"medusa:tree={demo_tree}": f"The demonstration tree `{demo_tree}`", "medusa:tree=chain:1": "The one-node chain"}
Markdown(
    "Mean accepted is what the heads buy per forward; the speed-up is that divided by what a bigger verify forward "
    "(and the heads) cost. " + auto_ran
    + " ".join(versus(label, names[label]) for label in fixed)
    + " The same heads on a GPU-like flat cost curve would verify tens of nodes for almost nothing (notebook 05, "
    "section 5)."
)  # fmt: skip

# %% [markdown]
# ## 4. Sampling: the exact tree rule and typical acceptance
#
# Greedy acceptance is exact but only defined at temperature 0. When sampling, Medusa's default rule is exact
# too. Its siblings are the heads' top-$s$ candidates, a function of the path: deterministic, so the draft
# distribution $q$ of each is one-hot. For such siblings the exact rule (`accept_one_hot`, which
# `accept="exact"`, the default at temperature > 0, picks for them) tries a node's children one after
# another: accept candidate $x$ with probability $p(x)$; else set $p(x)$ to 0, renormalise, and try the
# next sibling; after the last one the bonus token is drawn from what is left of $p$. It is
# [SpecInfer](https://arxiv.org/abs/2305.09781)'s multi-step speculative sampling (Miao et al.) with a one-hot
# $q$, the way [EAGLE](https://arxiv.org/abs/2401.15077) (Li et al.) samples on its top-$k$ draft trees: every
# candidate is emitted with exactly its probability under $p$, and the tokens outside the tree keep theirs
# through the bonus (derivation: `specdec_lab/accept/tree_rules.py`; the exact emitted distribution is tested
# against autoregressive sampling for every method in `tests/test_tree_sampling.py` and
# `tests/test_sampling_methods.py`). [SpecTr](https://arxiv.org/abs/2310.15141) (Sun et al.) treats the choice
# among several drafts as optimal transport.
#
# The Medusa paper's own sampling rule is the lossy option, by name: **typical acceptance**
# (`accept="typical"`, [Cai et al. 2024](https://arxiv.org/abs/2401.10774), section 2.3.1) accepts candidate
# $x$ after node $j$ iff
#
# $$p_j(x) > \min\big(\varepsilon,\; \delta \cdot e^{-H(p_j)}\big),$$
#
# and samples the bonus token from $p$. The reference defaults are $\varepsilon = 0.09$,
# $\delta = 0.3 = \sqrt{\varepsilon}$ ([Cai et al. 2024](https://arxiv.org/abs/2401.10774)); this section uses
# the parameters `epsilon` and `delta` (`typical_rule(epsilon, delta)`), the defaults unless a run sets them. At
# temperature 0, $p$ is one-hot, $H = 0$, and the rule accepts exactly the argmax: **typical = greedy**.

# %% tags=["nbval-check-output"]
from specdec_lab.accept import typical_rule

rule = typical_rule(epsilon, delta)  # the thresholds every typical decode and drift of this section uses
typ0 = generate(lm, ids, method="medusa", accept=rule, max_new_tokens=max_new_tokens, tree="auto",
                max_budget=max_budget)  # fmt: skip
print(f"typical acceptance (ε = {epsilon:g}, δ = {delta:g}) at temperature 0 == greedy Medusa, token for token: "
      f"{typ0.tokens == med.tokens}")  # fmt: skip

# %% [markdown]
# At temperature > 0 Medusa samples with the exact rule unless typical acceptance is asked for by name. Both
# are compared with autoregressive *sampling* at the same temperature and seed (the outputs differ: all
# three are samples). Columns: the tokens emitted, the target forwards that emitted them, their ratio (mean
# accepted) and the first characters of the text.

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
with pd.option_context("display.max_colwidth", None):  # the 80 characters whole, not pandas' default cut
    display(pd.DataFrame.from_dict(
        {name: {"new tokens": len(r.tokens), "target forwards": r.forwards, "mean accepted": round(r.mean_accepted, 3),
                "text": " ".join(r.text[:80].split()) + "…"} for name, r in runs.items()},
        orient="index",
    ))  # fmt: skip

# %% tags=["nbval-ignore-output"]
import statistics

sampled, exact, typical = runs.values()


def per_step(r):  # tokens each target forward emitted (its mean is the run's mean accepted)
    return [len(st.emitted) for st in r.steps]


def diff_halfwidth(x, y):  # 95% normal half-width of the difference of two means, over the steps of two decodes
    return 1.96 * math.sqrt(sum(statistics.variance(v) / len(v) for v in (x, y) if len(v) > 1))


half = diff_halfwidth(per_step(typical), per_step(exact))
plausible = ("it accepts a draft token whenever it is *plausible* (above the threshold), not only with the "
             "probability sampling would give it — which is why the rule is **lossy** (measured below)")  # fmt: skip
Markdown(
    f"On this one sample of {sample_tokens} tokens: " + compare(
        typical.mean_accepted, exact.mean_accepted,
        "typical acceptance emitted {a:.2f} tokens per target forward against {b:.2f} for the exact rule, more "
        "beyond the ±{h:.2f} a 95% interval of the difference over their steps allows (autoregressive sampling: "
        "{s:.2f}).",
        "typical acceptance emitted {a:.2f} tokens per target forward against {b:.2f} for the exact rule, fewer "
        "beyond the ±{h:.2f} a 95% interval of the difference over their steps allows (autoregressive sampling: "
        "{s:.2f}).",
        within="typical acceptance emitted {a:.2f} tokens per target forward and the exact rule {b:.2f}: within "
        "noise, inside the ±{h:.2f} of a 95% interval of the difference over their steps (autoregressive sampling: "
        "{s:.2f}); one short sample cannot order the two rules.",
        rel_tol=half / min(typical.mean_accepted, exact.mean_accepted), h=half, s=sampled.mean_accepted)
    + f" What typical acceptance does differently: {plausible}."
    + " No run of this notebook times typical acceptance (section 3 times greedy decoding only): notebook 11, "
    "section 5, reads its speed against its fidelity from the typical-acceptance sweep on the real model."
)  # fmt: skip

# %% [markdown]
# How lossy, measured: on a tiny model (vocabulary `drift_vocab`, so every prefix can be tabulated) with a
# deterministic draft (argmax of a perturbed copy — as Medusa heads propose their top candidates), run many
# independent 2-draft episodes and compare the histogram of the first two emitted tokens with the exact joint
# $p(t_1)\,p(t_2 \mid t_1)$ (`losslessness.typical_drift`). The exact rule (`accept_speculative`) on the same
# drafts gives the noise floor of this many trials (`drift_baseline`). The grid: this run's $(\varepsilon,
# \delta)$ (parameters `epsilon`, `delta`) and the further ε of `drift_epsilons`, each with
# $\delta = \sqrt{\varepsilon}$; the temperature of the decode above and 1.

# %%
import torch

from specdec_lab import tiny_model
from specdec_lab.accept.losslessness import LogitsTable, drift_baseline, typical_drift
from specdec_lab.sampling import Sampling
from specdec_lab.viz.decoding import drift_frame

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

# %% [markdown]
# Per (temperature, ε): δ; the total variation (TV) and KL divergence of typical acceptance's first two tokens
# from the exact joint; the same for the exact rule on the same drafts (the floors: what this many trials show
# even for an exact rule); the χ² test's p-value for "typical follows the exact joint"; and the trials.

# %% tags=["nbval-ignore-output"]
drift.round(4)

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.decoding import drift_figure

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
from specdec_lab.sampling import warp_probs

rows = {}
for t in temperatures:
    p0 = warp_probs(target_table(()), Sampling(temperature=t))
    x = int(draft_table(()).argmax())
    H = float(-torch.special.xlogy(p0, p0).sum())
    for eps, dlt in grid.items():
        thr = min(eps, dlt * math.exp(-H))
        rows[(t, eps)] = {"δ": dlt, "draft token x": x, "p(x) (what sampling gives it)": float(p0[x]),
                          "max_v p(v) (T sharpens it)": float(p0.max()), "H(p) nats": H, "threshold min(ε, δe^-H)": thr, "accepted": float(p0[x]) > thr}  # fmt: skip
first = pd.DataFrame.from_dict(rows, orient="index").rename_axis(["temperature", "epsilon"])
# p(x) can sit near where softmax(logits / T) barely moves with T (a logit near the T-weighted mean); the max and H(p)
# show the temperature applied
first.round(3)  # rounded per column, before any transpose could make the columns objects

# %% tags=["nbval-ignore-output"]
passed = int(first["accepted"].sum())


def eps_effect(t):  # does ε move the TV at temperature t beyond what the exact rule's floor shows?
    tv, floor = drift.loc[t, "TV"], float(drift.loc[t, "TV floor (exact rule)"].max())
    listed = ", ".join(f"{tv[e]:.3f} at ε = {e:g}" for e in tv.index)
    return (f"at T = {t:g} the TV is {listed}: " + compare(
        float(tv.max() - tv.min()), floor, "ε moves it by {a:.3f}, more than the exact rule's noise floor ({b:.3f})",
        "ε moves it by {a:.3f}, within the exact rule's noise floor ({b:.3f}): ε does not change it here",
        within="ε moves it by {a:.3f}, about the exact rule's noise floor ({b:.3f}): ε does not change it here"))


Markdown(
    (f"The threshold is small next to a plausible token's probability: at all {len(first)} (T, ε) of the grid the "
     "draft's first token passes, so" if passed == len(first) else
     f"The draft's first token passes the threshold at {passed} of the {len(first)} (T, ε) of the grid; where it "
     "passes,")
    + " the first emitted token is (almost) always the draft's choice and the TV is large — the rule trades "
    "*diversity* for speed. Across the grid, "
    + "; ".join(eps_effect(t) for t in drift.index.get_level_values(0).unique()) + "."
    + " On a real model the effect is the same in kind: typical "
    "acceptance produces plausible text, and the Medusa paper reports quality rather than distribution equality. "
    "Where the output must follow $p$, use an exact rule: Medusa's default when sampling (the one-hot rule of this "
    "section), or the draft model's speculative sampling (notebook 02)."
)  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. Wherever the heads guess wrong, the target rejects their candidates. Why is the emitted text then still
#    exactly the autoregressive text, and what does a wrong guess cost?
#
#    <details><summary>Answer</summary>
#
#    A node is accepted only if its token is the target's argmax after its parent, and the bonus token is the
#    target's argmax after the last accepted node. Every emitted token is therefore the token greedy decoding
#    would emit at that position; a wrong guess only costs a wasted node in the forward, never a wrong token.
#    </details>
#
# 2. Why can `tree="auto"` pick a one-node chain on one machine and tens of nodes on another, with the same heads?
#
#    <details><summary>Answer</summary>
#
#    It maximises $E[L](n) / (t(n+1) + \text{heads})$. $E[L](n)$ depends only on the heads, but $t(n)$ is the
#    machine's: where it grows with every token verified, a node whose addition to $E[L]$ (the product of the
#    accuracies along its rank path) is small does not pay for its share of the forward; where $t$ is flat up to
#    tens of tokens (a GPU), every node that adds anything pays. Where a CPU's curve starts to rise depends on the
#    CPU and its threads, and its timing noise: section 2 prints where this run's did, within that noise.
#    </details>
#
# 3. Typical acceptance with the reference thresholds at temperature 0 reproduces greedy decoding, yet it is
#    lossy at temperature 0.7. What changes?
#
#    <details><summary>Answer</summary>
#
#    At temperature 0, $p$ is one-hot: $p(x) \in \{0, 1\}$ and the rule accepts exactly the argmax. At
#    temperature > 0 a candidate above the threshold is accepted *every* time, while exact sampling would emit it
#    only with probability $p(x)$: the draft's choice is over-represented and the other tokens under-represented.
#    </details>

# %% [markdown]
# ## Exercises
#
# Each exercise has a stub cell (replace the `...`), a solution cell (removed from student copies) and a check
# cell that compares your answer with the library's own function.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — which tokens does typical acceptance accept?
#
# After the tabulated context of section 4 and one further token, `prefix`, the target's logits are
# `target_table(prefix)` (a vector over the `drift_vocab` tokens; section 4's tables print nothing about these
# rows). For each `(prefix, T)` of `ex_rows` (below), with $p = \mathrm{softmax}(\text{logits} / T)$, list the
# tokens $x$ (in increasing order) that typical acceptance with the thresholds `ex_epsilon` and `ex_delta` (below,
# not section 4's) accepts as the only child of the root: $p(x) > \min(\varepsilon, \delta e^{-H(p)})$,
# $H(p) = -\sum_v p(v) \ln p(v)$. The two rows differ in how spread out $p$ is, so the minimum matters. The
# reference is the library's rule (`typical_rule(ex_epsilon, ex_delta)`) applied to one-node trees.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch

ex_rows = [((3,), 1.2), ((0,), 0.7)]  # (prefix, temperature) of each row of this exercise
ex_epsilon = 0.12
ex_delta = math.sqrt(ex_epsilon)  # δ = sqrt(ε), as the reference defaults
_watch = watch(globals(), "rule", "typical_rule")  # the check's reference: compute the threshold yourself
answer = ...  # per row of ex_rows, the accepted tokens, e.g. [[0, 3], [1]]

# %% tags=["solution", "exercise-1"]
answer = []
for ex_prefix, ex_temperature in ex_rows:
    p = torch.softmax(target_table(ex_prefix) / ex_temperature, dim=-1)
    H = float(-(p * p.log()).sum())
    threshold = min(ex_epsilon, ex_delta * math.exp(-H))
    answer.append([x for x in range(len(p)) if float(p[x]) > threshold])

# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.lab.course import check
from specdec_lab.trees import Tree

_watch.begin_check()  # from here the references are the check's own
accepted = [[x for x in range(drift_vocab)  # per row: root logits (2, V), only the root's row is read
             if len(_watch["typical_rule"](ex_epsilon, ex_delta)(Tree.chain(0, [x]),
                                                                 torch.stack([target_table(_prefix)] * 2),
                                                                 Sampling(temperature=_t)).path) == 2]
            for _prefix, _t in ex_rows]  # fmt: skip
_ = check("the tokens typical acceptance accepts", answer, accepted,
          close=lambda a, r: len(a) == len(r) and all(list(x) == y for x, y in zip(a, r, strict=True)), watch=_watch,
          hint="One list per row; warp by the row's temperature before the softmax; the threshold is the smaller of "
          "ε and δ·exp(−H(p)).")  # fmt: skip


def _above(p, threshold):  # the tokens whose probability exceeds a threshold
    return [x for x in range(drift_vocab) if float(p[x]) > threshold]


def _entropy(p):
    return float(-(p * p.log()).sum())


def _wrong_rules(prefix, t):  # plausible wrong rules, on one row
    p = torch.softmax(target_table(prefix) / t, dim=-1)
    p1 = torch.softmax(target_table(prefix), dim=-1)  # the row without the temperature
    return {"accepting everything": list(range(drift_vocab)),
            "accepting the argmax only": [int(p.argmax())],
            "the hard threshold ε alone": _above(p, ex_epsilon),
            "the entropy threshold δ·exp(−H) alone": _above(p, ex_delta * math.exp(-_entropy(p))),
            "the larger of the two thresholds": _above(p, max(ex_epsilon, ex_delta * math.exp(-_entropy(p)))),
            "no temperature (T = 1)": _above(p1, min(ex_epsilon, ex_delta * math.exp(-_entropy(p1))))}  # fmt: skip


_wrongs = [_wrong_rules(_prefix, _t) for _prefix, _t in ex_rows]
_told = [w for w in _wrongs[0] if any(rows[w] != acc for rows, acc in zip(_wrongs, accepted, strict=True))]
_not_told = [w for w in _wrongs[0] if w not in _told]
print("the rows tell the rule apart from: " + (", ".join(_told) or "none of the plausible wrong rules")
      + (f"; not from: {', '.join(_not_told)}" if _not_told else ""))  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — greedy acceptance on a small tree
#
# A tree of 7 nodes (node 0 is the root) and the target's logits after every node are given below. Write
# `greedy_accept(tokens, parents, logits)` returning `(path, bonus)`: the longest root-to-node path whose every
# token is the target's argmax after its parent (a node counts only if its parent was accepted), as a list of
# node indices from the root, and the bonus token, the argmax after the path's last node. The reference is
# `specdec_lab.accept.accept_greedy`.

# %% tags=["exercise", "exercise-2"]
from specdec_lab.accept import accept_greedy  # noqa: F401 - watched below

tokens = [5, 2, 7, 3, 1, 4, 6]
parents = [-1, 0, 0, 1, 1, 3, 2]
logits = torch.zeros(7, 8)
for node, best in enumerate([2, 1, 6, 4, 0, 3, 5]):  # the target's argmax after each node
    logits[node, best] = 5.0
_watch = watch(globals(), "accept_greedy")


def greedy_accept(tokens, parents, logits):
    ...


# %% tags=["solution", "exercise-2"]
def greedy_accept(tokens, parents, logits):  # noqa: F811 - replaces the stub above
    argmax = logits.argmax(dim=-1).tolist()
    accepted, best = {0: [0]}, [0]  # node -> its accepted path; parents come before their children
    for node in range(1, len(tokens)):
        parent = parents[node]
        if parent in accepted and tokens[node] == argmax[parent]:
            accepted[node] = accepted[parent] + [node]
            if len(accepted[node]) > len(best):
                best = accepted[node]
    return best, argmax[best[-1]]


# %% tags=["check", "exercise-2", "nbval-check-output"]
def _as_pairs(results):  # (path, bonus) per tree, as plain lists and ints
    return [(list(map(int, path)), int(bonus)) for path, bonus in results]


_hidden = ([0, 3, 6, 2, 5, 1, 4, 7, 3], [-1, 0, 0, 1, 1, 2, 3, 5, 6], torch.zeros(9, 8))  # a second tree of its own
for _node, _best in enumerate([6, 2, 1, 4, 0, 7, 3, 2, 5]):
    _hidden[2][_node, _best] = 5.0
_answers = [greedy_accept(tokens, parents, logits), greedy_accept(*_hidden)]
_watch.begin_check()  # from here the references are the check's own
_refs = [_watch["accept_greedy"](Tree(torch.tensor(t), torch.tensor(p)), lg)
         for t, p, lg in ((tokens, parents, logits), _hidden)]  # fmt: skip
_ = check("the accepted path and bonus token, on the tree above and on a second tree of the check's own",
          None if any(a is None for a in _answers) else _answers, [(r.path, r.bonus) for r in _refs],
          close=lambda a, r: _as_pairs(a) == _as_pairs(r), watch=_watch,
          hint="A node is accepted only if its parent is; node 5 matches its parent's argmax, but is its parent accepted?")

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — choose the tree size as `tree="auto"` does
#
# `proposer.options` holds the candidate trees of section 2 (`TreeOption`s: `.budget` = nodes below the root,
# `.depth`, `.expected_length` = $E[L]$, calibrated); `heads(d)` is the heads' seconds for a tree of depth $d$
# (below). Write `auto_budget(options, price, heads)`, where `price(n)` gives the seconds of a step that verifies
# $n$ tokens: for every budget $n$ keep its best option by
# $\text{rate} = E[L] / (\text{price}(n + 1) + \text{heads}(\text{depth}))$, and return the budget with the highest
# rate (ties: the smaller budget). The check prices the options on made-up machines (`made_up`, below): on each,
# every token past the first adds a fixed share (`shares`, below) of this machine's single-token step, so the budgets
# it expects are printed nowhere above and differ from one machine to the next. The reference is `specdec_lab.trees.pick_budget` on the same options and costs.

# %% tags=["exercise", "exercise-3"]
def price(n):
    return proposer.cost.step(n, tree=True)


def per_token(share):  # a made-up machine: each token past the first adds `share` of a single-token step
    return lambda n: price(1) * (1 + share * (n - 1))


shares = (0.0, 0.02, 0.1)  # the made-up machines: the share of a single-token step each extra token adds
made_up = {f"a made-up machine where each extra token adds {share:.0%}": per_token(share) for share in shares}


def heads(depth):
    return proposer.drafter.head_seconds.get(depth, 0.0) if depth else 0.0


_watch = watch(globals(), "pick_budget")


def auto_budget(options, price, heads):
    ...


# %% tags=["solution", "exercise-3"]
def auto_budget(options, price, heads):  # noqa: F811 - replaces the stub above
    rate = {}
    for option in options:
        r = option.expected_length / (price(option.budget + 1) + heads(option.depth))
        rate[option.budget] = max(rate.get(option.budget, 0.0), r)
    return max(rate, key=lambda n: (rate[n], -n))


# %% tags=["check", "exercise-3", "nbval-check-output"]
picked = {what: auto_budget(proposer.options, cost, heads) for what, cost in made_up.items()}
_watch.begin_check()  # from here the references are the check's own
expected = {what: _watch["pick_budget"](proposer.options, cost, heads).budget for what, cost in made_up.items()}
for what in made_up:
    _ = check(f"the budget tree='auto' picks on {what}", picked[what], expected[what], close=lambda a, r: a == r,
              watch=_watch,
              hint="Price a budget n as a step that verifies n + 1 tokens (the root too); a budget may have several "
                   "depths.")

# %% [markdown]
# ## Takeaways
#
# - Medusa drafts from the target's own last hidden state: the heads fill a token tree, one forward verifies
#   it with tree attention, and the next step's hidden state comes out of the same forward.
# - Greedy Medusa emits exactly the autoregressive tokens, whatever tree the heads fill (checked above token for
#   token, for the auto tree and the demonstration tree).
# - The tree that pays is the machine's: `tree="auto"` picks the node budget $n$ with the best ratio of
#   $E[L](n)$ to the measured cost $t(n + 1)$ of verifying $n + 1$ tokens (plus the heads). With weak heads each
#   extra node adds little to $E[L]$, so the pick turns on how $t$ grows; section 2 prints this run's pick, the
#   sizes whose cost stands above $t(1)$ beyond the timing noise, whether the runner-up is within noise of it, and
#   what the same rule picks on a second timing of the curve.
# - When sampling, the one-hot rule keeps Medusa exact; typical acceptance is lossy: it emits every candidate above
#   its threshold, not with probability $p(x)$, and section 4 measures its drift from exact sampling against the
#   exact rule's noise floor in every cell of its grid.
#
# ## Further reading
#
# - [Medusa: Simple LLM Inference Acceleration Framework with Multiple Decoding Heads](https://arxiv.org/abs/2401.10774)
#   (Cai et al. 2024): the heads, the tree and typical acceptance (section 2.3.1) of this notebook.
# - [SpecInfer](https://arxiv.org/abs/2305.09781) (Miao et al. 2024): token-tree verification and multi-step
#   speculative sampling, the exact rule of section 4.
# - [EAGLE](https://arxiv.org/abs/2401.15077) (Li et al. 2024): top-$k$ draft trees, sampled with the same one-hot
#   rule (notebook 11; notebook 10 builds and runs them greedily).
# - [SpecTr](https://arxiv.org/abs/2310.15141) (Sun et al. 2023): several drafts verified by optimal transport.
