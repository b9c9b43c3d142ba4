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
# # 05 · Optimized sparse trees: which candidates are worth verifying
#
# Notebook 04 verified a tree of Medusa candidates in one forward. The full Cartesian tree is far too
# big (K = 4 heads × top-8: 4680 drafted nodes + the root), and most of its nodes are almost never accepted.
# Medusa's answer ([Cai et al. 2024](https://arxiv.org/abs/2401.10774)) is a **sparse tree**: keep only the nodes
# whose acceptance probability is high. Under greedy verification a node is accepted iff every token on its path is
# the target's, so with $a_h^{(i)}$ = P(head $h$'s rank-$i$ candidate is right), a node with rank path
# $(r_1, \dots, r_d)$ has value $\prod_{h=1}^{d} a_h^{(r_h)}$, and
#
# $$E[L] = 1 + \sum_{v \in \text{tree}} \prod_{h=1}^{d(v)} a_h^{(r_h(v))}$$
#
# tokens per step, the bonus token included (the 1). Section 1 measures $a_h^{(i)}$ two ways: over all positions
# (Medusa's **independent** model: the product is exact only if the heads' errors are independent) or over the
# positions where heads $1..h-1$ all had the truth in their top-10 (the **conditional** model, which the trees in
# this notebook use unless the `accuracy_model` parameter says otherwise). How many nodes to verify is then a
# question about the machine, as in Sequoia ([Chen et al. 2024](https://arxiv.org/abs/2402.12374)): a bigger tree
# accepts more but its forward costs more.
#
# ### Learning objectives
#
# - **Compute** the E[L] of a tree of rank paths from per-head accuracies, under the independent and the
#   conditional model.
# - **Build** the greedy sparse tree for a node budget and **explain** why it equals the dynamic-programming
#   optimum.
# - **Size** a tree to a machine's measured cost curve with `choose_budget`, and explain why a flat curve picks
#   another tree.
# - **Compare** predicted E[L] with the mean accepted of real decodes, and test which accuracy model predicts
#   better.
#
# ### Prerequisites
#
# Notebooks 03 (the heads and their accuracy) and 04 (verifying a tree in one forward), and notebook 00's cost
# curve. Notation as in notebook 00's table: p = the target, q = the draft, E[L] = expected tokens emitted per
# target forward and *mean accepted* (τ) = the measured value, bonus included in both; t(m) = seconds of one
# verify forward of m tokens (notebook 00's t(n); m here, because n is taken by the budget). Here K = the number of
# heads, S = candidates per head, and n = nodes below the root, the budget (notebook 00's draft length k, for a
# tree): a budget of n nodes verifies n + 1 tokens (the root too), at cost t(n + 1). **Counting nodes:** from here
# on, "nodes" (in prose, tables and figure titles) means the drafted nodes below the root, what notebook 04 calls
# "drafted nodes"; 04's "nodes" counts the root too, so 04's tree of 17 nodes is this notebook's "greedy 16".
#
# ### Plan
#
# 1. the calibrated accuracies $a_h^{(i)}$ of the shipped heads, independent and conditional;
# 2. the greedy construction, node by node;
# 3. E[L] against the node budget: greedy, dynamic programming, Cartesian trees — and why greedy = DP here;
# 4. the 64-node sparse tree;
# 5. how many nodes to verify *on this machine*: the measured tree cost curve and `choose_budget`, against
#    a flat (GPU-like) curve;
# 6. predicted vs. measured E[L] on real prompts, and greedy output = autoregressive.
#
# Library: `specdec_lab.trees` (accuracies, E[L], greedy / DP trees, `choose_budget`),
# `specdec_lab.cost` (`measure_cost_curve(tree=True)`), `specdec_lab.proposers.medusa` (decoding),
# `specdec_lab.viz.tree_figures` (the trees) and `specdec_lab.viz.tree_sizing` (accuracies, E[L], budgets).

# %% tags=["parameters"]
quick: bool = False  # CI: fewer prompts, shorter generations, smaller DP sweep and cost curve
model_name: str = "smollm2-135m"  # target model: shipped name, HF directory or .gguf
heads_dir: str = "../data/medusa/smollm2-135m"  # shipped heads and their calibration.json
accuracy_model: str = "conditional"  # accuracy model for the trees drawn and sized: "independent" or "conditional"
max_budget: int = 64  # largest tree (nodes below the root) considered
dp_budget: int = 32  # budgets 1..dp_budget are also solved by dynamic programming
greedy_nodes: int = 16  # size of the fixed greedy tree decoded in section 6
n_prompts: int = 6  # benchmark prompts decoded in section 6 (evenly spread over categories)
max_new_tokens: int = 64  # tokens per prompt in section 6
curve_repeats: int = 5  # timing repeats per size of the tree cost curve
default_step: int = 8  # greedy step shown by the plain cell of section 2
threads: int = 0  # torch CPU threads (0: the torch default)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
from specdec_lab.lab.course import start

if quick:
    dp_budget, n_prompts, max_new_tokens, curve_repeats = 12, 2, 24, 1
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, threads, stem="05_optimized_trees")

# %% [markdown]
# ## 1. Calibrated head accuracies
#
# `python -m specdec_lab.train medusa-calibrate` ran the target over the **held-out** self-distillation
# answers (prompts the heads never trained on; never the benchmark prompts used in section 6), read the
# heads at every position, and recorded the rank of the true token in each head's top-10. Two models:
#
# * **independent** (Medusa's): $a_h^{(i)}$ = P(head $h$'s rank $i$ is right), over all positions;
# * **conditional**: the same, over the positions where heads $1..h-1$ all had the truth in their top-10
#   (a tree node at depth $h$ is only reached when its ancestors were right).
#
# The table gives each head's top-1 accuracy (rank 0 right) and top-10 accuracy (the truth among its 10
# candidates) under both models.

# %% tags=["nbval-check-output"]
import json
from pathlib import Path

import pandas as pd

from specdec_lab.trees import HeadAccuracies

acc = HeadAccuracies.from_dict(json.loads((Path(heads_dir) / "calibration.json").read_text()))
A = acc.model(accuracy_model)  # (K, S) the factors used for the trees below
K, S = acc.num_heads, acc.num_candidates
print(f"{K} heads × top-{S}, calibrated on {acc.positions} held-out positions; trees below use the {accuracy_model} model")
pd.DataFrame(
    {"top-1 independent": acc.top[:, 0], "top-1 conditional": acc.conditional[:, 0],
     "top-10 independent": acc.top.sum(1), "top-10 conditional": acc.conditional.sum(1)},
    index=[f"head {k}" for k in range(1, K + 1)],
).round(3)

# %%
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tree_sizing import accuracy_figure

fig = accuracy_figure(acc)
if not quick:
    print(f"saved {save_figure(fig, '05_head_accuracies', FIGURES)}")
fig

# %%
from IPython.display import Markdown

higher = [k + 1 for k in range(1, K) if acc.conditional[k, 0] > acc.top[k, 0]]
later = [f"head {k}" for k in range(2, K + 1)]
Markdown(
    "Head 1's two rows are the same (nothing to condition on). For "
    + (f"every later head ({', '.join(later)})" if len(higher) == K - 1
       else f"{len(higher)} of the {K - 1} later heads ({', '.join(f'head {k}' for k in higher) or 'none'})")
    + " the conditional top-1 accuracy is the higher one in the table above"
    + (": positions where heads 1..h−1 all had the truth in their top-10 are more predictable than the average "
       "position, and head h is right more often there too. That suggests a **hypothesis**, which section 6 tests against real decodes: "
       "the independent model, which multiplies marginals, under-estimates deep paths, and the conditional model "
       "predicts them better." if higher else
       ": on this calibration the heads' errors are not correlated the way Medusa's usually are, and the two "
       "models should predict about alike (section 6 measures both).")
)  # fmt: skip

# %% [markdown]
# ## 2. The greedy tree, node by node
#
# Start from the root. The **frontier** holds every child of a chosen node (for a node of rank path $p$:
# $p + (i,)$ for each rank $i$ of the next head). Greedy adds the frontier node of largest value, $n$
# times; each addition raises E[L] by exactly that node's value. The table lists the first additions: the
# node's rank path, its value (`gain`) and the tree's E[L] after it. In the figure after it, the number beside
# a node is its rank at its depth (the last entry of its rank path), its colour is its value, and the ring
# marks the node just added.

# %% tags=["nbval-check-output"]
from specdec_lab.trees import greedy_steps

steps = greedy_steps(A, max_budget)
pd.DataFrame(steps[:12]).set_index("step").round(4)

# %%
from specdec_lab.viz.tree_figures import greedy_step_figure

fig = greedy_step_figure(steps, default_step, A)
if not quick:
    print(f"saved {save_figure(fig, '05_greedy_step', FIGURES)}")
fig

# %%
import math
import random


def value(path):  # a node's value: the product of its heads' factors along its rank path
    return math.prod(float(A[k, r]) for k, r in enumerate(path))


chain2, chain3 = value((0, 0)), value((0, 0, 0))
near = {d: min(range(S), key=lambda r: abs(value((r,)) - v)) for d, v in ((2, chain2), (3, chain3))}
first = [tuple(st["path"]) for st in steps[:default_step]]  # the nodes of the figure above, in the order added
n_head1 = sum(len(q) == 1 for q in first)
n_chain = sum(len(q) > 1 and not any(q) for q in first)  # (0, 0), (0, 0, 0), ...: the top-1 chain
others = [q for q in first if len(q) > 1 and any(q)]
Markdown(
    "Move the slider to replay the construction (`specdec_lab.viz.tree_figures.greedy_step_figure`). Of the "
    f"first {len(first)} nodes (the figure above), {n_head1} {'is' if n_head1 == 1 else 'are'} head 1's guesses, "
    f"{n_chain} belong{'s' if n_chain == 1 else ''} to the top-1 chain below its rank-0 guess"
    + (f", and {len(others)} {'is' if len(others) == 1 else 'are'} neither ("
       + ", ".join(f"`{q}`" for q in others) + ")" if others else "")
    + ", interleaved by value: "
    f"the depth-2 top-1 node is worth {A[0, 0]:.4f} · {A[1, 0]:.4f} ≈ {chain2:.3f}, closest to head 1's "
    f"rank-{near[2]} guess ({value((near[2],)):.3f}); the depth-3 top-1 node ({chain3:.3f}) is closest to its "
    f"rank-{near[3]} guess ({value((near[3],)):.3f}). Each head-1 guess enters the tree just before the deep "
    "nodes worth less than it."
)

# %% tags=["nbval-skip"]
import ipywidgets as w

from specdec_lab.lab.trees import Explorer
from specdec_lab.lab.widgets import show_widget

explorer = Explorer(
    w.IntSlider(value=default_step, min=1, max=len(steps), description="step", continuous_update=False),
    lambda s: greedy_step_figure(steps, s, A),
    header="<b>Move the slider</b>: the tree after that many additions; the ring marks the node just added.",
    show_initial=False,  # the default step is the plain cell above
)
# a stored notebook keeps no widget state: its reader sees this line in the control's place, naming its figure
show_widget(explorer.widget, "[interactive control: it appears when the notebook runs; its default view is the "
            f"tree after step {default_step}, the figure above the paragraph above]")

# %% [markdown]
# ## 3. E[L] against the budget: greedy, DP and Cartesian trees
#
# `optimal_tree` solves the same problem exactly by dynamic programming over (depth, nodes) — a knapsack
# over each node's children ranks, as in Sequoia ([Chen et al. 2024](https://arxiv.org/abs/2402.12374)) — and
# `brute_force_tree` enumerates every subtree (tiny cases). Cartesian trees (top-$s_1$ × top-$s_2$ × ...) are
# evaluated at their own sizes: the table gives each one's nodes and root-to-leaf paths, its E[L], and the E[L]
# of the greedy tree with as many nodes.

# %% tags=["nbval-check-output"]
from specdec_lab.trees import (
    brute_force_tree,
    cartesian_paths,
    cartesian_size,
    expected_length,
    greedy_tree,
    optimal_tree,
)

budgets = list(range(1, max_budget + 1))
greedy_e = {m: [steps_m["expected_length"] for steps_m in greedy_steps(acc.model(m), max_budget)]
            for m in ("independent", "conditional")}
dp_e = {m: [expected_length(optimal_tree(acc.model(m), n), acc.model(m)) for n in range(1, dp_budget + 1)]
        for m in ("independent", "conditional")}
for m in dp_e:  # greedy = DP at every budget the DP solved (1..dp_budget), under both models
    assert max(abs(g - d) for g, d in zip(greedy_e[m][:dp_budget], dp_e[m], strict=True)) < 1e-12
small_acc = A[:3, :3]  # 3 heads × top-3: 39 candidate nodes, every 5-node subtree enumerated
assert abs(expected_length(brute_force_tree(small_acc, 5), small_acc)
           - expected_length(greedy_tree(small_acc, 5), small_acc)) < 1e-12
print(f"greedy == DP for budgets 1..{dp_budget} (both models), == brute force on a 3×3 case: True")

cartesian = {}
for tops in ([1], [1, 1], [1, 1, 1, 1], [2], [3, 2], [2, 2, 2], [4, 2, 1], [3, 3, 3], [4, 4, 2], [2, 2, 2, 2],
             [4, 4, 4], [8, 8, 8, 8]):
    paths = cartesian_paths(tops)
    n = len(paths)
    g = greedy_steps(A, n)[-1]["expected_length"]
    cartesian["×".join(map(str, tops))] = {"nodes": n, "paths": cartesian_size(tops)["paths"],
                                          f"E[L] Cartesian ({accuracy_model})": expected_length(paths, A),
                                          "E[L] greedy, same nodes": g}
cart = pd.DataFrame(cartesian).T.astype({"nodes": int, "paths": int})  # counts stay integers in the table
cart.round(3)

# %%
from specdec_lab.viz.tree_sizing import expected_length_figure

points = {name: (row["nodes"], row[f"E[L] Cartesian ({accuracy_model})"]) for name, row in cartesian.items()
          if row["nodes"] <= max_budget + 30}
off_chart = [name for name in cartesian if name not in points]  # too big to draw beside the budgets: table only
other = "independent" if accuracy_model == "conditional" else "conditional"
# each trace's E[L] under the model it names: the Cartesian points are priced under `accuracy_model`, like the
# first two lines; the third line is the other model's greedy tree priced under that other model
fig = expected_length_figure(
    {f"greedy ({accuracy_model} model)": (budgets, greedy_e[accuracy_model]),
     f"DP ({accuracy_model} model)": (list(range(1, dp_budget + 1)), dp_e[accuracy_model]),
     f"greedy ({other} model)": (budgets, greedy_e[other])},
    points,
    points_name=f"Cartesian trees ({accuracy_model} model)"
    + (f"; {', '.join(off_chart)} in the table only" if off_chart else ""),
    yaxis_title="E[L] under the model each trace names",
)
if not quick:
    print(f"saved {save_figure(fig, '05_expected_length', FIGURES)}")
fig

# %% [markdown]
# **Why greedy equals DP here.** A child's value is its parent's times a factor $a_h^{(i)} \le 1$, so no
# node is worth more than its parent. Sort all candidate nodes by value (ties: shallower first): every
# parent comes before its children, so the first $n$ nodes of that order are prefix-closed — a valid
# tree — and, being the $n$ largest values, no other $n$-node set (tree or not) has a larger sum. Greedy
# picks exactly those nodes: the next node in the order always has its parent chosen, so it is on the
# frontier. The DP needs no such argument; its E[L] equals greedy's up to float rounding (this section's first
# cell asserts a difference below `1e-12` at every budget the DP solved, 1..`dp_budget` as its line says; the figure's
# DP trace covers those budgets: the two sum their nodes' values in different orders),
# and it would still be right for factors > 1 (e.g. weights that are not probabilities), where greedy is not.
# The same argument says no Cartesian tree can beat the greedy tree of its size; how far below it each one lies,
# from the table:

# %%
from specdec_lab.lab.course import compare

cart_col = f"E[L] Cartesian ({accuracy_model})"
below = [name for name, row in cartesian.items() if row[cart_col] < row["E[L] greedy, same nodes"] - 1e-12]
full, e_top = cartesian["8×8×8×8"], greedy_e[accuracy_model][-1]
Markdown(
    f"{len(below)} of the {len(cartesian)} Cartesian trees lie below the greedy tree of the same size "
    f"({', '.join(below) or 'none'})" + ("; the others are greedy trees themselves. " if len(below) < len(cartesian)
                                         else ". ")
    + compare(full[cart_col], e_top,
              "The Cartesian tree of four heads' top 8 ({n} nodes) reaches E[L] {a:.3f}, {d:.3f} more than the "
              "{m}-node greedy tree's {b:.3f}: {r:.0f}× the nodes for that, and the greedy tree of {n} nodes "
              "would beat it again ({g:.3f}).",
              "The Cartesian tree of four heads' top 8 ({n} nodes) reaches E[L] {a:.3f}, below even the {m}-node "
              "greedy tree's {b:.3f}.",
              within="The Cartesian tree of four heads' top 8 ({n} nodes) reaches about the {m}-node greedy "
              "tree's E[L] ({a:.3f} against {b:.3f}).",
              rel_tol=0.001, n=int(full["nodes"]), m=max_budget, d=full[cart_col] - e_top,
              r=full["nodes"] / max_budget, g=full["E[L] greedy, same nodes"])
)  # fmt: skip

# %% [markdown]
# ## 4. The 64-node sparse tree

# %% tags=["nbval-check-output"]
tree64 = greedy_tree(A, max_budget)
per_depth = pd.Series([len(p) for p in tree64]).value_counts().sort_index()
print(f"greedy tree, {accuracy_model} model: {len(tree64)} nodes, E[L] = {expected_length(tree64, A):.3f} "
      f"(independent model: {expected_length(tree64, acc.top):.3f})")
print("nodes per depth:", per_depth.to_dict())
print("depth-1 ranks:", sorted(p[0] for p in tree64 if len(p) == 1))

# %%
from specdec_lab.viz.tree_figures import rank_tree_figure

fig = rank_tree_figure(tree64, A, title=f"greedy sparse tree, {len(tree64)} nodes ({accuracy_model} model): "
                                        "colour = P(node accepted)")
if not quick:
    print(f"saved {save_figure(fig, '05_sparse_tree_64', FIGURES)}")
fig

# %%
depth1 = sorted(p[0] for p in tree64 if len(p) == 1)
widest = int(per_depth.idxmax())
Markdown(
    f"Nodes per depth: {', '.join(f'{n} at depth {d}' for d, n in per_depth.items())}. "
    + (f"All {S} head-1 candidates are in (even rank {S - 1} is worth at least as much as any node left out)"
       if len(depth1) == S else f"{len(depth1)} of head 1's {S} candidates are in (ranks {depth1[0]}–{depth1[-1]})")
    + f"; depth {widest} is the widest, and the deepest level, depth {int(per_depth.index.max())}, keeps "
    f"{int(per_depth.iloc[-1])} continuation{'s' if per_depth.iloc[-1] != 1 else ''} of the best paths: "
    + ("widest at the root" if widest == int(per_depth.index.min()) else
       f"the tree widens from depth 1 to depth {widest}"
       + (f" (depth 1 can hold at most head 1's {S} candidates, and holds them all; depth 2 can hold {S} children "
          "of each)" if len(depth1) == S else ""))
    + (f", then thins at every depth past {widest}, because a node is never worth more than its parent."
       if all(a >= b for a, b in zip(per_depth.loc[widest:], per_depth.loc[widest:].iloc[1:], strict=False))
       else f", and does not thin at every depth past {widest}.")
)  # fmt: skip

# %% [markdown]
# ## 5. How many nodes on this machine?
#
# More nodes raise E[L] but a verify forward of n + 1 tokens costs t(n + 1), plus the heads' cost
# $t_{\text{heads}}(d)$ for a tree of depth $d$ (a cost, not section 1's head index $h$). `choose_budget` maximises
# the predicted rate $E[L](n) / (t(n + 1) + t_{\text{heads}}(d))$ over n = 0..64 (n = 0
# is plain decoding). When the heads are priced per depth, each n is tried as section 2's greedy tree and as the
# greedy tree capped at each smaller depth (a shallower tree runs fewer heads), and the fastest is kept: E[L](n) is
# then that tree's, which can be below the greedy tree's. This is Sequoia's hardware-aware sizing ([Chen et al. 2024](https://arxiv.org/abs/2402.12374))
# on a measured curve. First the cost curve of **branching** trees on this CPU (a tree mask, not the model's
# causal one):

# %% tags=["nbval-ignore-output"]
from specdec_lab import load_model
from specdec_lab.cost import set_cost_curve
from specdec_lab.cost.noise import measure_cost_curve_with_noise
from specdec_lab.viz.tree_sizing import tree_cost_curve_figure  # viz.cost's figure, tokens named m

lm = load_model(model_name)
model = lm.model
sizes = [1, 2, 4, 8, 12, 16, 24, 32, 48, max_budget + 1] if not quick else [1, 2, 4, 8, 16, 32, max_budget + 1]
# the median of `curve_repeats` passes (as measure_cost_curve), with the repeats' spread kept: it says below
# whether the chosen budget beats its runner-up by more than this run's repeats move them
curve, curve_noise = measure_cost_curve_with_noise(model, sizes=sorted(set(sizes)), repeats=curve_repeats, warmup=1,
                                                   tree=True)
set_cost_curve(model, curve)  # tree="auto" decoding below sizes its tree on this very curve
fig = tree_cost_curve_figure(curve, title="t(m): verify cost of a branching tree of m tokens, this CPU")
if not quick:
    print(f"saved {save_figure(fig, '05_tree_cost_curve', FIGURES)}")
print("t(m) ms, m = tokens:", {m: round(s * 1e3, 1) for m, s in zip(curve.sizes, curve.seconds, strict=True)})
worst_m, worst_spread = curve_noise.worst
# no verdict on the whole curve here: the budget decision below weighs its margin against the spread at the very
# sizes it compares, which a median over all sizes can hide
print(f"spread of the {curve_noise.repeats} repeats (IQR / median): median over the sizes {curve_noise.spread:.1%}, "
      f"widest {worst_spread:.1%} at m = {worst_m}; per size:",
      {m: f"{v:.0%}" for m, v in curve_noise.per_size.items()})
fig

# %% [markdown]
# `MedusaProposer` with `tree="auto"` makes exactly this choice once per model: the calibrated accuracy
# model, this cost curve, and the heads' drafting cost measured per depth — with the heads' weights in
# fp32 or weight-only int8, whichever has the smaller median time here (int8 can change which tokens are
# proposed, never the output: the target verifies every node in fp32). A two-token warm-up decode builds
# it; `choose_budget` called here on the same inputs must agree. The table gives, per cost curve, the chosen
# budget n, the tree's depth and E[L], the predicted seconds of one step (verify + heads) and the predicted
# speed-up over plain decoding under that curve.
#
# **Predict, then run:** the same accuracies, two cost curves — this CPU's measured one above, and a flat one
# where a forward of 65 tokens costs what one costs. Which curve will choose the bigger tree, and will this CPU's
# choice be closer to 1 node or to 64? Write down your guess before running the next cell.
#
# (Notebook 06's `tree="auto"` decode applies the same rule with its own measurement of t(m), up to its own
# `max_budget`, and then prices its trees again as it decodes, with the loop's own time per step and what was
# accepted: its section 2 computes whether that moves its choice away from the measured curve's.)

# %% tags=["prediction", "nbval-ignore-output"]
from specdec_lab import generate, make_proposer
from specdec_lab.cost import CostCurve
from specdec_lab.io import load_prompts
from specdec_lab.trees import choose_budget

prompts = load_prompts()
proposer = make_proposer("medusa", tree="auto", max_budget=max_budget, accuracy=accuracy_model)
generate(lm, prompts[0].text, proposer=proposer, max_new_tokens=2, chat=True)
head_seconds = dict(proposer.drafter.head_seconds)
cpu = choose_budget(A, curve, max_budget=max_budget, head_cost=lambda d: head_seconds.get(d, 0.0))
assert cpu.budget == proposer.choice.budget and cpu.paths == proposer.choice.paths
flat = CostCurve(sizes=[1, max_budget + 1], seconds=[curve(1)] * 2, tree=True)  # t(m) = t(1) for m <= 65
gpu = choose_budget(A, flat, max_budget=max_budget)  # heads ~free next to a GPU forward: no head cost
drafter = proposer.drafter
# each choice is the smaller median of a few timed calls: a rule, not an order judged against those calls' spread
medians = lambda d: " against ".join(f"{k} {v * 1e3:.2f} ms" for k, v in d.items())  # noqa: E731
weights_note = f"heads' weights {drafter.head_weights}" + (
    f" (the smaller median of the timed calls: {medians(drafter.score_seconds)}; no spread kept, so not an order "
    "beyond noise)" if len(drafter.score_seconds) > 1 else "")
blocks_note = (  # how the heads' residual blocks run: `MedusaDrafter.blocks`
    "each head's residual blocks as its own int8 matrix-vector product per layer" if drafter.head_weights == "int8"
    else {"bmm": "all heads' residual blocks as one batched matmul per layer",
          "mv": "each head's residual blocks as its own matrix-vector product per layer"}[drafter.block_kernel]
    + (f" (the smaller median of the timed calls: {medians(drafter.block_seconds)}; no spread kept)"
       if len(drafter.block_seconds) > 1 else ""))
print("heads' cost per depth (ms):", {d: round(s * 1e3, 2) for d, s in head_seconds.items()},
      f"— {weights_note}; {blocks_note}")
pd.DataFrame(
    {name: {"chosen budget n": c.budget, "depth": c.depth, "E[L]": round(c.expected_length, 3),
            "predicted s / step": f"{c.seconds * 1e3:.1f} ms", "predicted speed-up": round(c.speedup, 2)}
     for name, c in {"this CPU (measured curve)": cpu, "flat curve t(m) = t(1)": gpu}.items()}
)

# %% tags=["nbval-check-output"]
assert gpu.budget >= 20  # a flat curve makes every node free: tens of nodes
print(f"flat curve picks n = {gpu.budget} nodes (E[L] = {gpu.expected_length:.3f})")

# %%
from specdec_lab.viz.tree_sizing import budget_rate_figure

fig = budget_rate_figure({"this CPU (t(m) measured above, heads timed)": cpu,
                          "flat t(m) = t(1), heads free (GPU-like)": gpu})
if not quick:
    print(f"saved {save_figure(fig, '05_budget_rate', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.trees import speedup_reason

cpu_rates = {row["budget"]: row["rate"] for row in cpu.table}  # predicted tokens per second, per budget n
runner_up = max((n for n in cpu_rates if n != cpu.budget), key=lambda n: cpu_rates[n])
noise_tol = curve_noise.at(cpu.budget + 1) + curve_noise.at(runner_up + 1)  # each rate's t(n + 1): their spreads add
untimed = sorted({m for m in (cpu.budget + 1, runner_up + 1) if m not in curve_noise.per_size})  # read between sizes
untimed_note = ("; " + ", ".join(f"t({m})" for m in untimed) + " not timed: read between the timed sizes around it, "
                "with the larger of their spreads") if untimed else ""
# t(m) against t(1), size by size, each judged against the repeats' spread at both sizes (IQR / median: they add);
# a difference inside it is within noise, and no explanation is drawn from it
timed = curve_noise.repeats >= 2
tol = {m: max(0.02, curve_noise.at(1) + curve_noise.at(m)) if timed else 0.02 for m in curve.sizes if m > 1}
ratio = {m: curve(m) / curve(1) for m in tol}
side = {m: compare(ratio[m], 1.0, "above", "below", within="within", rel_tol=tol[m] / min(ratio[m], 1.0)) for m in tol}
spread_of = "this run's timing repeats' spread" if timed else "2% (one timing repeat: no spread to judge by)"
rise = next((m for m in tol if side[m] == "above"), None)
before = [m for m in tol if rise is None or m < rise]
last = max(tol)
dips = [m for m in before if side[m] == "below"]
listed = lambda ms: ", ".join(f"t({m}) = {ratio[m]:.2f} t(1) ± {tol[m]:.0%}" for m in ms)  # noqa: E731
# a size whose repeats spread by more than half their median says nothing about the curve's shape: every band that
# adds it passes almost anything (a "flat curve" verdict from such a band would be the noise talking)
wild = {m: v for m, v in curve_noise.per_size.items() if v > 0.5} if timed else {}
if wild:
    shape = (f"The repeats spread by more than half their median at m = {', '.join(map(str, wild))} (up to "
             f"{max(wild.values()):.0%}: the CPU was probably busy): this run's curve cannot resolve whether a forward of more "
             "tokens costs more than a single-token one, and every choice priced on it below rests on its medians "
             "alone; a quiet rerun may choose otherwise.")
elif dips:  # cheaper than a single-token forward beyond the noise: that, and only that, is explained
    shape = (f"t(m) dips below t(1), beyond {spread_of}, at m = {', '.join(map(str, dips))} ({listed(dips)}): a "
             "forward of that many tokens costs less than a single-token one there. ")
elif before:
    shape = (f"t(m) is within {spread_of} of t(1) up to m = {before[-1]} ({listed(before)}): this run cannot tell "
             f"whether a forward of up to {before[-1]} tokens costs more than a single-token one. ")
else:
    shape = ""
if wild:
    pass
elif rise is None:
    shape += f"No measured size up to m = {last} costs more than t(1) beyond that spread: a flat curve on this run."
else:
    stays = all(side[m] == "above" for m in tol if m >= rise)
    shape += (f"{'It' if shape else 't(m)'} is above t(1), beyond {spread_of}, {'from' if stays else 'at'} m = {rise}"
              f"{' on' if stays else ''} (t({rise}) = {ratio[rise]:.2f} t(1) ± {tol[rise]:.0%}); a forward of {last} "
              f"tokens costs {ratio[last]:.1f} single-token ones.")
step_tol = max(0.01, curve_noise.at(1) + curve_noise.at(cpu.budget + 1)) if timed else 0.01
# per n, the measured curve kept the fastest of the greedy tree and its depth-capped versions; the flat curve (no
# head cost) priced the greedy tree alone: where the two differ, the measured curve's E[L](n) is a capped tree's
capped = [n for n in cpu.options if n in gpu.options and cpu.options[n].depth < gpu.options[n].depth]
spans = []  # runs of consecutive n
for n in capped:
    if spans and n == spans[-1][-1] + 1:
        spans[-1].append(n)
    else:
        spans.append([n])
if capped:
    ex = capped[0]
    capped_note = (
        f" So for n = {', '.join(f'{g[0]}–{g[-1]}' if len(g) > 1 else f'{g[0]}' for g in spans)} the measured curve "
        "keeps the greedy tree capped at a smaller depth, not section 2's greedy tree (per n the higher predicted "
        f"rate wins, however small its margin): at n = {ex}, depth {cpu.options[ex].depth} and E[L] "
        f"{cpu.options[ex].expected_length:.4f}, against the greedy tree's depth {gpu.options[ex].depth} and E[L] "
        f"{gpu.options[ex].expected_length:.4f} (hover the figure: each point shows its tree's E[L] and depth); "
        + (f"the chosen n = {cpu.budget} is one of them." if cpu.budget in capped
           else f"the chosen n = {cpu.budget} is the greedy tree itself.")
    )
else:
    capped_note = " At every n the measured curve still keeps section 2's greedy tree."
reason = speedup_reason(cpu, rel_tol=0.01).replace("{", "{{").replace("}", "}}")
Markdown(
    "On the flat curve every extra node is free, the predicted rate is E[L] itself, and "
    + (f"the whole {max_budget}-node budget is taken (E[L] still rises with n)" if gpu.budget == max_budget
       else f"n = {gpu.budget} of the {max_budget} allowed is taken")
    + f". On this run's measured curve {shape} A deeper tree also runs more heads: the sizer prices "
    "each depth at the heads' cost measured above (one median per depth, no spread kept, so its small steps are "
    "not an order)." + capped_note + " So the predicted rate peaks at "
    + (f"n = {cpu.budget} node{'s' if cpu.budget != 1 else ''}" if cpu.budget else "n = 0: plain decoding")
    + f" (E[L] {cpu.expected_length:.2f}, predicted speed-up {cpu.speedup:.2f}×): "
    + compare(gpu.budget, cpu.budget, "the same accuracies, another cost curve, a bigger tree under the flat one.",
              "the same accuracies, another cost curve, a smaller tree under the flat one.",
              within="the same accuracies pick the same tree under both curves.")
    + " " + (f"It beats the runner-up, n = {runner_up}, by {cpu_rates[cpu.budget] / cpu_rates[runner_up] - 1:.1%} in "
             "predicted rate; with a single timing repeat (`curve_repeats`) this run has no spread to judge that "
             "margin by." if curve_noise.repeats < 2 else
             compare(cpu_rates[cpu.budget], cpu_rates[runner_up],
                    "It beats the runner-up, n = {r}, by {m:.1%} in predicted rate, more than the spread of this "
                    "run's repeats of t(n + 1) at the two sizes ({z:.1%} together, IQR / median{u}): within this run, "
                    "the pick is not a timing repeat's accident.",
                    "It and the runner-up, n = {r}, predict the same rate.",
                    within="But it beats the runner-up, n = {r}, by only {m:.1%} in predicted rate, within the spread "
                    "of this run's repeats of t(n + 1) at the two sizes ({z:.1%} together, IQR / median{u}): this "
                    "run's curve does not separate the two.",
                    rel_tol=noise_tol, r=runner_up, m=cpu_rates[cpu.budget] / cpu_rates[runner_up] - 1, z=noise_tol,
                    u=untimed_note))
    + " This curve is one measurement, under this run's load: "
    + ("the repeats' spread bounds this run only, and " if curve_noise.repeats >= 2 else "")
    + "a second run on the same machine (notebook 06 measures its own t(m)) can find another curve and pick another "
    "budget."
    + "\n\n" + (reason if cpu.budget == 0 else compare(
        cpu.speedup, cpu.expected_length, reason, reason,
        within="The predicted speed-up ({a:.2f}×) and the tree's E[L] ({b:.2f}) differ by {d:.1%}, within {w} "
        "({t:.0%}): whether a step of {n} tokens, heads included, costs more or less than a single-token step is "
        "**within noise** on this run.", rel_tol=step_tol, d=abs(cpu.speedup / cpu.expected_length - 1),
        w="the repeats' spread of t(1) and t(n + 1)" if timed else "1%", t=step_tol, n=cpu.budget + 1))
)  # fmt: skip

# %% [markdown]
# **Which question this answers.** The flat-curve column *re-decides*: it asks which tree a machine with
# a flat cost curve would choose for these heads, and sizes the tree again under that curve. A second
# question can only give a smaller answer (the re-decided tree is the best one under that curve): what the
# trees *this CPU chose* would gain if each forward cost t(1) — the same trees, *re-priced*. Notebook 09's what-if
# shows both for every method, side by side: its **re-decided** replay (each method's sizes — tree budget, draft
# length, window — chosen again under the other curve), which is the question answered here, and its re-priced
# replay of the CPU's own choices.
#
# ## 6. Predicted vs. measured E[L]
#
# Decoding real benchmark prompts (`data/prompts.jsonl`, chat template) with fixed trees given as rank
# paths: the top-1 chain of head 1 (`chain:1`), the tree `choose_budget` picked on this CPU's curve in
# section 5, the 16-node greedy tree, and the tree the flat curve picked (a tree two of these name is decoded once,
# its row named by both). Each tree is fixed for the whole
# decode, so the prediction and the measurement are about the same nodes (a `tree="auto"` decode re-prices
# its trees every few steps as it learns the machine's costs, and may verify other sizes on the way: notebook
# 06 shows how many steps verified each). Greedy verification is exact, so each output must equal plain
# autoregressive decoding. The table gives each tree's nodes and depth, the **measured** mean accepted (tokens /
# target forwards over all its decodes, bonus included), the E[L] each accuracy model predicts, the
# absolute difference between each prediction and the measurement, and how far `n_prompts` prompts pin the
# measurement down: a bootstrap interval over resamples of the prompts (its column header and the line above the
# table say how wide and how many; with a handful of prompts a rough width, but the one the sentences below are
# held to).

# %% tags=["nbval-ignore-output"]
chosen = prompts[:: max(len(prompts) // n_prompts, 1)][:n_prompts]  # evenly spread over the categories
named = [("chain:1", [(0,)])]
if cpu.budget > 0:  # n = 0 (plain decoding) has no tree to verify
    named.append((f"this run's curve's choice (n = {cpu.budget})", [tuple(q) for q in cpu.paths]))
named += [(f"greedy {greedy_nodes}", greedy_tree(A, greedy_nodes)),
          (f"flat curve's choice (n = {gpu.budget})", [tuple(q) for q in gpu.paths])]  # fmt: skip
trees = {}  # one row per distinct tree: a tree two names pick is decoded once, under both names
for name, paths in named:
    same = next((n for n, q in trees.items() if sorted(q) == sorted(paths)), None)
    if same is None:
        trees[name] = paths
    else:
        trees[f"{same} = {name}"] = trees.pop(same)
decodes = {name: [] for name in trees}  # name -> its GenerationResults, one per prompt
identical = []
for p in chosen:
    ar = generate(lm, p.text, method="autoregressive", max_new_tokens=max_new_tokens, chat=True)
    for name, paths in trees.items():
        run = make_proposer("medusa", tree=paths, max_budget=max_budget, accuracy=accuracy_model)
        r = generate(lm, p.text, proposer=run, max_new_tokens=max_new_tokens, chat=True)
        assert sorted(map(tuple, run.paths)) == sorted(paths)  # the tree decoded is the tree predicted
        identical.append(r.tokens == ar.tokens)
        decodes[name].append(r)
rows = []
for name, paths in trees.items():
    runs = decodes[name]
    rows.append({"tree": name, "nodes": len(paths), "depth": max(len(q) for q in paths),
                 "measured": sum(len(r.tokens) for r in runs) / sum(r.forwards for r in runs),
                 "independent": expected_length(paths, acc.top),
                 "conditional": expected_length(paths, acc.conditional)})
table = pd.DataFrame(rows).set_index("tree")
table["|error| independent"] = (table["independent"] - table["measured"]).abs()
table["|error| conditional"] = (table["conditional"] - table["measured"]).abs()
# how far a few prompts pin the measurement down: resample the prompts (bootstrap), pool each resample's decodes
rng = random.Random(0)
draws = [[rng.randrange(len(chosen)) for _ in chosen] for _ in range(2000)]


def pooled(name, idx):  # tokens / forwards over the decodes of the prompts idx (repeats allowed)
    return sum(len(decodes[name][i].tokens) for i in idx) / sum(decodes[name][i].forwards for i in idx)


def interval(values):  # the central 95% of the resampled values
    values = sorted(values)
    return values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]


boot = {name: [pooled(name, idx) for idx in draws] for name in trees}
table["measured, 95% over prompts"] = [f"{lo:.2f}–{hi:.2f}" for lo, hi in map(interval, boot.values())]
print(f"{len(chosen)} prompts ({', '.join(sorted({p.category for p in chosen}))}) × {max_new_tokens} tokens; "
      "the interval: 2000 resamples of the prompts")
table.round(3)

# %% tags=["nbval-check-output"]
assert identical and all(identical)
# how many trees were decoded depends on the measured choice (a tree two names pick is decoded once): not printed
print(f"greedy Medusa output identical to autoregressive: every tree's decode of each of the {len(chosen)} prompts")

# %%
from specdec_lab.viz.tree_sizing import predicted_vs_measured_figure

for row in rows:  # the measured bar's error bar: the prompts' 95% interval of the table (bootstrap)
    row["interval"] = interval(boot[row["tree"]])
fig = predicted_vs_measured_figure(rows)
if not quick:
    print(f"saved {save_figure(fig, '05_predicted_vs_measured', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
models = ("independent", "conditional")
err = {m: table[f"|error| {m}"].mean() for m in models}


def mean_errors(idx):  # each model's mean |error| over the trees, on the decodes of the prompts idx
    return {m: sum(abs(table.loc[name, m] - pooled(name, idx)) for name in trees) / len(trees) for m in models}


diffs = [(lambda e: e["independent"] - e["conditional"])(mean_errors(idx)) for idx in draws]
diff_lo, diff_hi = interval(diffs)
diff = err["independent"] - err["conditional"]
diff_noise = diff - diff_lo if diff > 0 else diff_hi - diff  # |diff| <= this  <=>  the interval contains 0
# the statistic's whole range: per tree, |p_ind - x| - |p_cond - x| lies within ±|p_ind - p_cond|, and sits at an end
# whenever the measurement x falls outside both predictions: the mean of those gaps bounds the difference
gap = sum(abs(table.loc[name, "independent"] - table.loc[name, "conditional"]) for name in trees) / len(trees)
share_ind = sum(x < 0 for x in diffs) / len(diffs)  # resamples in which the independent model is nearer
whole = diff_lo <= -gap + 5e-4 and diff_hi >= gap - 5e-4
if diff_hi - diff_lo > 5e-4:
    band = ("the difference (independent − conditional) is {d:+.3f} and its 95% interval over resampled prompts, "
            "{lo:+.3f} to {hi:+.3f}, {verb} 0")
    if whole:
        band += (" — that interval is the statistic's whole possible range, ±{gap:.3f} (the two predictions' mean "
                 "gap: a measurement outside both predictions scores an end of it whichever side it falls), so it "
                 "only says on which side the measurement lands: the independent model is nearer in {share:.0%} "
                 "of the resamples")
else:  # the measurement on the same side of both predictions in every resample: the nearer model never changes
    band = "the difference (independent − conditional) is {d:+.3f}, and {lo:+.3f} in every resample of the prompts"
band_ex = band.format(d=diff, lo=diff_lo, hi=diff_hi, gap=gap, share=share_ind, verb="excludes")
band_in = band.format(d=diff, lo=diff_lo, hi=diff_hi, gap=gap, share=share_ind, verb="contains")


def versus(name, predicted):  # the measurement against a prediction, within its own 95% interval over prompts
    lo, hi = interval(boot[name])
    measured = table.loc[name, "measured"]
    reach = measured - lo if predicted < measured else hi - measured  # |Δ| <= reach  <=>  the interval holds it
    return compare(measured, predicted, "above", "below", within="within the prompts' spread of",
                   rel_tol=reach / min(measured, predicted))


bullets = []
for name, row in table.iterrows():
    n, d = int(row["nodes"]), int(row["depth"])
    head = (f"* **{name}** ({n} node{'s' if n != 1 else ''}, depth {d}): measured {row['measured']:.3f} tokens per "
            f"forward (95% over prompts: {row['measured, 95% over prompts']})")
    if d == 1:
        bullets.append(f"{head}, {versus(name, row['conditional'])} the {row['conditional']:.3f} predicted; "
                       "for depth-1 trees the two models coincide (head 1 has nothing to condition on).")
    else:
        bullets.append(f"{head}; the independent model says {row['independent']:.3f} (measured "
                       f"{versus(name, row['independent'])} it), the conditional {row['conditional']:.3f} "
                       f"(measured {versus(name, row['conditional'])} it).")
deep = table[table["depth"] > 1]
# beyond the prompts' spread: the whole 95% interval of the measurement on one side of the prediction
under = sum(interval(boot[name])[0] > deep.loc[name, "independent"] for name in deep.index)
over = sum(deep.loc[name, "conditional"] > interval(boot[name])[1] for name in deep.index)
# the predictions whose measurement lies outside the prompts' 95% interval: only those have an error to explain
predictions = [(name, m) for name in table.index for m in models  # depth 1: the two models coincide, one prediction
               if table.loc[name, "depth"] > 1 or m == "conditional"]
missed = [(name, m) for name, m in predictions if versus(name, table.loc[name, m]) != "within the prompts' spread of"]
flat_name = next(n for n in table.index if "flat curve's choice" in n)
Markdown(
    f"In this run ({len(chosen)} prompts × {max_new_tokens} tokens, {len(identical)} decodes, "
    f"{sum(identical)} identical to autoregressive):\n\n" + "\n".join(bullets) + "\n\n"
    + (f"{under} of the {len(deep)} deeper trees were accepted more often than the independent model's product of "
       "marginals predicts, beyond the prompts' spread" if under else f"None of the {len(deep)} deeper trees was "
       "accepted more often than the independent model's product of marginals predicts, beyond the prompts' spread")
    + (f"; the conditional model overshoots {over} of them beyond it. " if over else ". ")
    + compare(err["independent"], err["conditional"],
              "The **conditional model predicts better** on these decodes (mean |error| {b:.3f} against {a:.3f}; the "
              "difference's sign is settled: {band_ex}): the hypothesis "
              "of section 1 holds here — the heads are right *together* on predictable spans, which the "
              "conditional model conditions on.",
              "The **independent model predicts better** on these decodes (mean |error| {a:.3f} against {b:.3f}; "
              "the difference's sign is settled: {band_ex}): the "
              "hypothesis of section 1 does not hold here — the conditional model's correction, calibrated on "
              "held-out distillation text, does not carry over to these prompts.",
              within="Which model predicts better is **within noise** on these {p} prompts: mean |error| {a:.3f} "
              "(independent) and {b:.3f} (conditional), but {band_in} — these decodes do not decide the hypothesis "
              "of section 1 (more prompts, `n_prompts`, narrow it).",
              rel_tol=diff_noise / max(min(err.values()), 1e-12), band_ex=band_ex, band_in=band_in, p=len(chosen))
    + ((f" {len(missed)} of the {len(predictions)} predictions miss{'es its' if len(missed) == 1 else ' their'} "
        "measurement beyond the prompts' spread (" + "; ".join(f"`{name}` ({m if table.loc[name, 'depth'] > 1 else 'both models'})" for name, m in missed) + ")"
        + ". Candidate causes in the setting, none of them measured here: benchmark text instead of "
        "the held-out distillation text the accuracies were calibrated on, candidates restricted to the "
        "drafting vocabulary when decoding (the calibration ranked the full vocabulary), "
        + (f"heads drafting with {run.drafter.head_weights} weights (the calibration scored them in their stored "
           "precision: int8 can change which tokens are proposed), " if run.drafter.head_weights == "int8" else "")
        + "and the last step of each answer cut short by `max_new_tokens`.") if missed else
       " Every prediction is within the prompts' spread of its measurement: these decodes show no error of either "
       "model beyond noise, so none is explained or ranked here.")
    + "\n\n"
    + compare(gpu.budget, cpu.budget,
              "On this run's measured curve the chosen tree has {b} node{s}, the flat curve's {a}: "
              + ("this run's t(m) medians price the extra nodes out, on a curve section 5 found too noisy to "
                 "resolve (a quiet rerun may choose otherwise)." if wild else
                 "this run's t(m) (section 5, one measurement under this run's load) prices the extra nodes out."),
              "On this run's measured curve the chosen tree has {b} node{s}, more than the flat curve's {a}.",
              within="Both curves choose {a} nodes.", s="" if cpu.budget == 1 else "s")
    + f" Sized under the flat cost curve, the same accuracies buy the {gpu.budget}-node tree: predicted E[L] "
    f"{gpu.expected_length:.3f}, measured here {table.loc[flat_name, 'measured']:.3f} tokens per forward — the "
    "speed-up a machine with a flat curve (and heads that cost next to nothing) would get from these heads, where this "
    f"run's measured forward of {gpu.budget + 1} tokens costs {curve(gpu.budget + 1) / curve(1):.1f} single-token ones."
)  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. Why is a node never worth more than its parent, and what does that buy the greedy construction?
#
#    <details><summary>Answer</summary>A node's value is its parent's value times one more accuracy factor
#    $a_h^{(i)} \le 1$. So ordering all nodes by value puts every parent before its children: the $n$ most
#    valuable nodes always form a tree, and greedy — which takes the most valuable frontier node each time —
#    picks exactly them. That is why greedy equals the dynamic program.</details>
#
# 2. How can a predicted speed-up exceed the tree's E[L]?
#
#    <details><summary>Answer</summary>speed-up = E[L] · t(1) / (t(n + 1) + $t_{\text{heads}}(d)$), so it
#    exceeds E[L] exactly where the *curve it is given* says a forward of n + 1 tokens plus the heads costs less
#    than a single-token forward. `choose_budget` takes the measured curve at face value: such a point can be a
#    real dip (a small batch that runs a faster kernel path than one token), or only timing noise — a t(m) below
#    t(1) by less than the repeats' spread, which section 5 judges size by size and calls within noise. A
#    predicted speed-up above E[L] is therefore worth believing only where the dip is beyond that spread.</details>
#
# 3. Under a flat cost curve, why does `choose_budget` take (nearly) the whole budget?
#
#    <details><summary>Answer</summary>Every node adds its value, a positive number, to E[L], and on a flat curve
#    (with free heads) it costs nothing: the rate E[L](n) / t(1) rises with every node, so the largest tree
#    allowed wins.</details>
#
# ## Exercises
#
# Each exercise is a stub to fill in (`...`), then a cell that checks your answer against the library. The
# solutions are in the teacher's copy.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — E[L] of a small tree by hand
#
# For the tree of rank paths `small_tree` below — mostly low ranks; a node that section 2's greedy tree also picks
# has its gain in `steps`, the others have none there — compute E[L] = 1 + Σ over nodes of the product of
# `A[d, r_d]` along the node's rank path (`A` is the (K, S) accuracy matrix of section 1; row d is head d + 1),
# from that definition: the check refuses an answer that calls the in-scope `expected_length` or section 2's `value`.
# Reference: `specdec_lab.trees.expected_length`.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch

small_tree = [(1,), (8,), (1, 9), (8, 7), (1, 9, 6)]
_watch = watch(globals(), "expected_length", "value")
answer = ...  # a float: 1 + sum over the 5 nodes of prod_d A[d, r_d]

# %% tags=["solution", "exercise-1"]
answer = 1 + sum(math.prod(float(A[d, r]) for d, r in enumerate(path)) for path in small_tree)

# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.lab.course import check

_watch.begin_check()
_ = check("E[L] of the 5-node tree", answer, _watch["expected_length"](small_tree, A), close=1e-9, watch=_watch,
          hint="Each node contributes the product of one factor per depth; the 1 is the bonus token.")

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — The most valuable nodes form a tree
#
# Under the **independent** model (`acc.top`, Medusa's; the trees above use the conditional one), a node's value
# is the product of `acc.top[d, r_d]` along its rank path. Among all candidate nodes — every rank path of 1 to K
# heads' top-S, `cartesian_paths([S] * K)` — keep the `budget = 20` of largest value (ties: shallower first).
# Section 3 argued that the result is always a tree (check that every kept path's parent is kept too) and that it
# is the greedy tree of 20 nodes. Build it from the values: the check refuses an answer that calls the in-scope
# tree builders (`greedy_tree`, `greedy_steps`, `optimal_tree`, `brute_force_tree`, `choose_budget`). Reference:
# `specdec_lab.trees.greedy_tree(acc.top, 20)`.

# %% tags=["exercise", "exercise-2"]
budget = 20
_watch = watch(globals(), "greedy_tree", "greedy_steps", "optimal_tree", "brute_force_tree", "choose_budget")
answer = ...  # a list of `budget` rank paths (tuples)

# %% tags=["solution", "exercise-2"]
def independent_value(path):
    return math.prod(float(acc.top[d, r]) for d, r in enumerate(path))


by_value = sorted(cartesian_paths([S] * K), key=lambda path: (-independent_value(path), len(path), path))
answer = by_value[:budget]
assert all(len(path) == 1 or path[:-1] in answer for path in answer)  # prefix-closed: a tree

# %% tags=["check", "exercise-2", "nbval-check-output"]
_watch.begin_check()
_ = check("the 20 most valuable nodes (independent model)", answer, _watch["greedy_tree"](acc.top, budget),
          close=lambda a, r: sorted(map(tuple, a)) == sorted(r), watch=_watch,
          hint="Value = the product of acc.top along the path (the independent model, not A); sort largest first and "
               "keep exactly `budget`.")

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★ — The predicted speed-up of another tree on this CPU
#
# Section 5 priced only greedy trees (on this CPU's curve also greedy trees capped in depth). Price notebook
# 06's demonstration tree, the Cartesian tree `3×2` (head 1's top 3, each with head 2's top 2:
# `cartesian_paths([3, 2])`, 9 nodes, depth 2), on this CPU's curve: from the
# cost curve `curve` (call it: `curve(m)` = t(m) in seconds, m tokens), the heads' cost per depth `head_seconds` (a dict
# depth → seconds) and the tree's E[L] under `A`, compute the speed-up the cost model predicts over plain decoding,
# E[L] · t(1) / (t(n + 1) + $t_{\text{heads}}(d)$), with n = the tree's nodes and d its depth. Reference:
# `specdec_lab.trees.pick_budget` on the plain option and this one.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.trees import TreeOption, pick_budget  # noqa: F401 - pick_budget: watched below

demo_paths = cartesian_paths([3, 2])
_watch = watch(globals(), "pick_budget", "choose_budget")
answer = ...  # a float: predicted tokens/second of the 3×2 tree over plain decoding's

# %% tags=["solution", "exercise-3"]
n_demo = len(demo_paths)
depth_demo = max(len(path) for path in demo_paths)
answer = expected_length(demo_paths, A) * curve(1) / (curve(n_demo + 1) + head_seconds.get(depth_demo, 0.0))

# %% tags=["check", "exercise-3", "nbval-check-output"]
options = [TreeOption(budget=0, depth=0, expected_length=1.0, paths=()),  # plain decoding: the unit
           TreeOption(budget=len(demo_paths), depth=max(map(len, demo_paths)),
                      expected_length=expected_length(demo_paths, A), paths=tuple(demo_paths))]  # fmt: skip
_watch.begin_check()
priced = _watch["pick_budget"](options, curve, lambda d: head_seconds.get(d, 0.0))
_ = check("the 3×2 tree's predicted speed-up", answer, priced.table[-1]["speedup"], close=1e-9, watch=_watch,
          hint="A step verifies the root plus n nodes: t(n + 1); the heads run to the tree's depth (2 here).")

# %% [markdown] tags=["exercise-4"]
# ### Exercise 4 ★★★ — E[L] depth by depth, measured
#
# $E[L] = 1 + \sum_d P(\text{a step accepts at least } d \text{ drafts})$: each depth adds the chance that the
# accepted path reaches it. Section 6's table shows only the sum. `decodes[name]` holds section 6's
# `GenerationResult`s of each tree (one per prompt), each with its step traces `r.steps` (a `StepTrace` per target
# forward; `step.path` is the accepted path's node indices, root first, so `len(step.path) - 1` drafts were
# accepted). For the tree `deep_name` (below), pooled over all its decodes, return `{d: the fraction of steps that
# accepted at least d drafts}` for d = 1 .. its depth. The check compares with the library's `survival`
# (`specdec_lab.serve.policy`, notebook 14's share of steps accepted to each depth) on the same pooled steps. Then
# set each beside its prediction, the sum of the values of the tree's depth-d nodes under either model: at which
# depth does the model's error arise?

# %% tags=["exercise", "exercise-4"]
from specdec_lab.serve.policy import survival  # noqa: F401 - the reference: watched below

deep_name = next(name for name in trees if f"greedy {greedy_nodes}" in name)
_watch = watch(globals(), "survival")  # the reference: not for the answer
answer = ...  # {d: fraction of deep_name's steps (all prompts) that accepted >= d drafts}

# %% tags=["solution", "exercise-4"]
steps_deep = [step for r in decodes[deep_name] for step in r.steps]
depth_deep = max(len(path) for path in trees[deep_name])
answer = {d: sum(len(step.path) - 1 >= d for step in steps_deep) / len(steps_deep) for d in range(1, depth_deep + 1)}

# %% tags=["check", "exercise-4", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
pooled_steps = [step for r in decodes[deep_name] for step in r.steps]  # every prompt's steps, one list
reference = dict(enumerate(_watch["survival"](pooled_steps, max(len(path) for path in trees[deep_name])), start=1))
_ = check(f"P(at least d drafts accepted) on the greedy {greedy_nodes}-node tree", answer, reference, watch=_watch,
          close=lambda a, r: set(a) == set(r) and all(math.isclose(a[d], r[d], rel_tol=1e-9) for d in r),
          hint="Pool the steps of every prompt before dividing, and count a step at every depth up to the one it "
               "reached (at least d, not exactly d).")

# %% tags=["nbval-ignore-output"]
from specdec_lab.trees import node_values

# the answer's second part, folded: each depth's measured share beside its prediction, within the prompts' spread
deep_paths = trees[deep_name]
deep_depth = max(len(q) for q in deep_paths)
reached = [[sum(len(step.path) - 1 >= d for step in r.steps) for d in range(1, deep_depth + 1)]
           for r in decodes[deep_name]]  # per prompt: steps that accepted >= d drafts
n_steps = [len(r.steps) for r in decodes[deep_name]]
by_depth = {d: sum(c[d - 1] for c in reached) / sum(n_steps) for d in range(1, deep_depth + 1)}
by_depth_boot = {d: [sum(reached[i][d - 1] for i in idx) / sum(n_steps[i] for i in idx) for idx in draws]
                 for d in by_depth}
predicted_d = {m: {d: sum(v for q, v in zip(deep_paths, node_values(deep_paths, acc.model(m)).tolist(), strict=True)
                         if len(q) == d) for d in by_depth} for m in models}


def at_depth(d, pred):  # the measured share against a prediction, judged by its 95% interval over prompts
    lo, hi = interval(by_depth_boot[d])
    meas = by_depth[d]
    reach = meas - lo if pred < meas else hi - meas
    return compare(meas, pred, "above", "below", within="within the prompts' spread of",
                   rel_tol=reach / max(min(meas, pred), 1e-12))


sides = {m: {d: at_depth(d, predicted_d[m][d]) for d in by_depth} for m in models}
first_off = {m: next((d for d in by_depth if sides[m][d] != "within the prompts' spread of"), None) for m in models}
Markdown(
    f"<details><summary>Answer (this run, `{deep_name}`)</summary>\n\n"
    + "\n".join(f"* depth {d}: measured {by_depth[d]:.3f} (95% over prompts: {interval(by_depth_boot[d])[0]:.3f}–"
                f"{interval(by_depth_boot[d])[1]:.3f}); independent {predicted_d['independent'][d]:.3f} (measured "
                f"{sides['independent'][d]} it), conditional {predicted_d['conditional'][d]:.3f} (measured "
                f"{sides['conditional'][d]} it)" for d in by_depth)
    + "\n\n"
    + " ".join(f"The {m} model's error first leaves the prompts' spread at depth {first_off[m]}." if first_off[m]
               else f"The {m} model is within the prompts' spread at every depth: these prompts do not locate its "
               "error." for m in models)
    + "\n\n</details>"
)  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - A tree's E[L] is 1 (the bonus token) plus the sum of its nodes' acceptance probabilities, each a product of
#   per-depth accuracies along its rank path.
# - A node is never worth more than its parent, so the greedy tree is the optimal one (it matched the dynamic
#   program at every budget it solved in section 3, 1..`dp_budget`), and a Cartesian tree spends nodes on
#   combinations greedy skips.
# - The best tree size depends on the cost curve it is priced on: `choose_budget` maximises E[L] per second of a
#   step, and section 5 sizes the same accuracies on this run's measured curve and on a flat one. A measured curve
#   is one run's, under that run's load: a second run on the same machine (notebook 06 measures its own) may pick
#   another budget.
# - Which accuracy model predicts real decodes better is an empirical question: section 6 measured it on
#   benchmark prompts, and its sentence reports the answer this run gave.
#
# ## Further reading
#
# - [Medusa (Cai et al. 2024)](https://arxiv.org/abs/2401.10774): sparse trees of the heads' top candidates,
#   chosen by calibrated accuracy (sections 1–4).
# - [Sequoia (Chen et al. 2024)](https://arxiv.org/abs/2402.12374): the optimal tree by dynamic programming and
#   its size chosen for the hardware (sections 3 and 5).
# - [SpecInfer (Miao et al. 2024)](https://arxiv.org/abs/2305.09781): token trees verified in one forward, the
#   mechanism notebook 04 built and this notebook sizes.
