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
# # 04 · Tree attention: many candidate continuations in one forward
#
# Medusa's heads (notebook 03) give *several* candidates per future position: head 1's top-s for the
# next-but-one token, head 2's top-s for the one after, and so on. A chain can hold only one guess per
# position; a **tree** holds them all, and the target checks every root-to-leaf path in **one** forward.
# The trick is the attention mask: flatten the tree into a sequence and let each node attend only to the
# cached prefix, its own ancestors and itself, so every node sees exactly the context of its own path.
# Token trees verified this way come from SpecInfer ([Miao et al. 2024](https://arxiv.org/abs/2305.09781))
# and Medusa ([Cai et al. 2024](https://arxiv.org/abs/2401.10774)).
#
# ### Learning objectives
#
# - **Count** the nodes and root-to-leaf paths of a Cartesian candidate tree, and explain why it explodes.
# - **Flatten** a token tree into tokens, parent pointers, depths and position ids.
# - **Build** the tree attention mask from parent pointers and check it against the library's.
# - **Verify** that one tree forward gives the logits of decoding every path on its own.
# - **Measure** what a tree forward costs against a single-token forward on this machine.
#
# ### Prerequisites
#
# Notebook 00 (the decoding loop, the KV cache, the cost curve) and notebook 03 (Medusa heads and their
# ranked candidates). Notation as in notebook 00's table: p = the target, q = the draft, k = the draft length
# (for a tree, its nodes besides the root), t(n) = the cost of one target forward over n tokens. Here K = the
# number of heads (the deepest depth), and a tree has N = k + 1 nodes: k drafted nodes + the root (node 0, the
# last accepted token). Throughout, "nodes" counts the root too and "drafted nodes" does not. $P$ is the number of
# tokens already in the KV cache (the prefix).
#
# ### Plan
#
# 1. why not all combinations: the Cartesian explosion, counted;
# 2. a small tree flattened to a sequence: node order, parents, depths and position ids;
# 3. the tree mask derived by hand and checked against the library's;
# 4. the tree and its mask, linked: pick a node, see its path and its mask row;
# 5. on SmolLM2-135M with the shipped heads: one tree forward gives the same logits as decoding each
#    path on its own, and what it costs against a single-token forward.
#
# The library pieces: `specdec_lab.trees.tree.Tree`, `specdec_lab.verify` (`verify_tree`,
# `tree_attention_mask`), `specdec_lab.viz.trees` and `specdec_lab.viz.tree_figures`.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer timing repeats (same code paths)
model_name: str = "smollm2-135m"  # target model: shipped name, HF directory or .gguf
prompt_index: int = 0  # which benchmark prompt (data/prompts.jsonl) feeds the real-model tree
tree_nodes: int = 16  # drafted nodes (the root not counted) of the real Medusa tree (greedy, conditional model)
top: int = 10  # candidates per head (ranks available to the tree)
repeats: int = 7  # timing rounds (median; each round times every way once, in rotated order)
threads: int = 0  # torch CPU threads (0: the torch default)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %% tags=["nbval-ignore-output"]
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    repeats = 1
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, threads, stem="04_tree_attention")
lm = load_model(model_name)

# %% [markdown]
# ## 1. The Cartesian explosion
#
# The obvious tree takes head $h$'s top-$s$ at every depth and all their combinations: depth $d$ holds
# $s^d$ drafted nodes, so $K$ heads give $\sum_{d=1}^{K} s^d$ drafted nodes + the root, and $s^K$ root-to-leaf
# paths. A verify forward's cost grows with its tokens (notebook 00's cost curve; section 5 below), and the mask
# is $N \times (P + N)$: each of the $N$ nodes against the $P$ cached tokens and the $N$ nodes. Each cell of the
# table is *drafted nodes / paths*:

# %% tags=["nbval-check-output"]
import pandas as pd

from specdec_lab.trees import cartesian_paths, cartesian_size

rows = []
for n_heads in range(1, 5):
    for s in (1, 2, 3, 5, 8, 10):
        size = cartesian_size([s] * n_heads)
        assert size["nodes"] == len(cartesian_paths([s] * n_heads))
        rows.append({"heads K": n_heads, "top-s": s, "cell": f"{size['nodes']} / {size['paths']}"})
explosion = pd.DataFrame(rows).pivot(index="heads K", columns="top-s", values="cell")
k4s8 = cartesian_size([8] * 4)
assert k4s8 == {"nodes": 4680, "paths": 4096}
print(f"K = 4 heads, top-8 each: {k4s8['nodes']} drafted nodes + the root, {k4s8['paths']} paths; the mask's "
      f"tree part alone (N × N, N = {k4s8['nodes'] + 1}) has {(k4s8['nodes'] + 1) ** 2 / 1e6:.1f} M entries")
explosion.rename_axis(columns="top-s  (cells: drafted nodes / paths)")

# %% [markdown]
# Most of those paths are hopeless: a depth-4 node is accepted only if all four of its tokens are right, so its
# chance is a product of four accuracies, and a low rank's accuracy is small to begin with (notebook 03 measures
# each head's accuracy, notebook 05 each rank's). Notebook 05 picks the nodes worth verifying from a machine's cost
# curve — few where an extra node costs time, dozens where it is nearly free. Whatever the tree, verifying it works the same way, which is what this notebook is about.
#
# ## 2. A small tree, flattened
#
# Three heads' worth of candidates after "The black cat": head 1 proposes " sat" / " is", head 2 " on" /
# " down", head 3 " the". A tree is named by **rank paths** (`(0, 1)` = head 1's rank-0 token, then head
# 2's rank-1 token) and stored as two vectors, `tokens` and `parents`, in topological order (a parent
# before its children). Note that Medusa's candidates for depth 2 are the same under every depth-1 node
# (head 2 reads the same hidden state whichever token comes first): " on" appears twice. The table lists each
# node's token, its rank path, its parent's index, its depth (edges from the root) and its position id.

# %% tags=["nbval-check-output"]
import torch
from IPython.display import Markdown, display

from specdec_lab import Tree
from specdec_lab.text import WHITESPACE_LEGEND, path_pieces, visible

tok = lm.tokenizer
words = {"root": " cat", 1: [" sat", " is"], 2: [" on", " down"], 3: [" the", " a"]}
ids_of = {w: tok(w, add_special_tokens=False)["input_ids"] for w in [words["root"], *sum([words[d] for d in (1, 2, 3)], [])]}
assert all(len(v) == 1 for v in ids_of.values()), ids_of  # one token each
cand = torch.tensor([[ids_of[w][0] for w in words[d]] for d in (1, 2, 3)])  # (depth, s): the heads' ranked candidates
rank_paths = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]
small = Tree.from_rank_paths(ids_of[" cat"][0], rank_paths, cand)
prefix_ids = tok("The black", add_special_tokens=False)["input_ids"]
P = len(prefix_ids)  # cache length: the prefix's K/V are already cached; the root " cat" is not
ordered = [()] + sorted(rank_paths, key=lambda p: (len(p), p))
small_text = path_pieces(small.tokens, small.parents, tok, context=prefix_ids)  # each node's text, on its path
display(Markdown(f"Token text in tables and figures: {WHITESPACE_LEGEND}."))
pd.DataFrame(
    {
        "token": [visible(x) for x in small_text],
        "rank path": [str(p) if p else "(root)" for p in ordered],
        "parent": small.parents.tolist(),
        "depth": small.depths.tolist(),
        f"position id (= {P} + depth)": small.position_ids(P).tolist(),
    },
    index=pd.Index(range(len(small)), name="node"),
)

# %% [markdown]
# The model receives the 7 nodes as one sequence `cat sat is on down on the` — meaningless as text,
# which is why the positions and the mask must say what each node's context is. **Position ids** are
# cache length + depth, the slot the token would occupy if accepted: nodes at the same depth share a
# position — siblings (" sat" / " is"; " on" / " down" under " sat") and cousins (" on" under " is") alike —
# so RoPE rotates them as the same distance from the prefix,
# and an accepted path's K/V can be kept without re-rotation.
#
# ## 3. The mask, by hand
#
# Query node $i$ may attend to key $j$ iff $j$ is a cached prefix token, or $j$ is $i$ itself or one of
# its ancestors. Walking the parent pointers in plain Python, for the $N$ nodes against the $P + N$ keys
# (the prefix, then the nodes):

# %% tags=["nbval-check-output"]
from specdec_lab.verify import tree_attention_mask
from specdec_lab.viz.trees import node_labels

parents = small.parents.tolist()
N = len(small)
naive = [[False] * (P + N) for _ in range(N)]
for i in range(N):
    for j in range(P):  # the whole cached prefix
        naive[i][j] = True
    node = i
    while node != -1:  # itself, then each ancestor up to the root
        naive[i][P + node] = True
        node = parents[node]
naive = torch.tensor(naive)
assert torch.equal(naive[:, P:], small.mask)  # the library's ancestor mask (Exercise 2 builds it in one pass)
# what verify_tree hands the model: 0 where a key is seen, torch.finfo(dtype).min (not -inf: a row of -inf would
# softmax to NaN) where it is masked
additive = tree_attention_mask(small, P, torch.float32)[0, 0]
assert torch.equal(naive, additive == 0)
print(f"hand-made mask == Tree.mask == (tree_attention_mask == 0): {tuple(naive.shape)} (N × (P + N))")
print("\n".join(f"{lab:>8} sees " + "".join("■" if v else "·" for v in row.tolist()) for lab, row in
                zip(node_labels(small, tok), naive, strict=True)))

# %% [markdown]
# A chain is the special case where node $i$'s parent is $i-1$: the mask is then lower-triangular, the
# model's ordinary causal mask, and `verify_tree` passes no mask at all (`Tree.is_chain`).
#
# ## 4. The tree and its mask, linked
#
# Row $i$ of the mask is node $i$'s path: the default view selects the deepest node, "the"
# (cat → sat → on → the). The widget below it redraws both figures for any node with the same library
# function, `specdec_lab.viz.tree_figures.node_view`.

# %%
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tree_figures import node_view

selected = N - 1
tree_fig, mask_fig = node_view(small, selected, tok, cache_length=P)
mask_fig.update_xaxes(title_text=f"key: the {P} cached prefix tokens, then the tree's nodes")
mask_fig.update_layout(margin_t=mask_fig.layout.margin.t + 40, height=mask_fig.layout.height + 40, title_y=0.97,
                       title_yanchor="top")  # room for the key axis's title above its labels
if not quick:
    print(f"saved {save_figure(tree_fig, '04_linked_tree', FIGURES)}")
    print(f"saved {save_figure(mask_fig, '04_linked_mask', FIGURES)}")
tree_fig

# %%
mask_fig

# %% tags=["nbval-check-output"]
print(f"node {node_labels(small, tok)[selected]}: path {small.path_to(selected)}, "
      f"attends to the {P} prefix tokens + nodes {torch.nonzero(small.mask[selected]).flatten().tolist()}")

# %% tags=["nbval-skip"]
from specdec_lab.lab.trees import node_explorer
from specdec_lab.lab.widgets import show_widget

# a stored notebook keeps no widget state: its reader sees this line in the control's place, naming its figures
show_widget(node_explorer(small, tok, cache_length=P, node=selected).widget,
            "[interactive control: it appears when the notebook runs; its default view is the tree and mask figures "
            f"of node {selected} above]")

# %% [markdown]
# ## 5. On the real model: one forward = every path decoded on its own
#
# Now a tree of **real** Medusa candidates: prefill a benchmark prompt, run the shipped heads on the last
# hidden state, and place their top candidates on a tree of `tree_nodes` drafted nodes + the root (the greedy tree of notebook 05 under the
# conditional accuracy model). The root is the prompt's last token.

# %%
import json

from specdec_lab import KVCache
from specdec_lab.io import load_prompts
from specdec_lab.medusa import load_shipped_heads, shipped_heads_path
from specdec_lab.trees import HeadAccuracies, greedy_tree
from specdec_lab.verify import prefill
from specdec_lab.viz.trees import tree_figure

model = lm.model
heads = load_shipped_heads(model)
acc = HeadAccuracies.from_dict(json.loads((shipped_heads_path() / "calibration.json").read_text()))
prompt = load_prompts()[prompt_index]
ids = lm.chat_ids(prompt.text)
cache = KVCache.for_model(model, capacity=len(ids) + tree_nodes + 8)
pre = prefill(model, cache, torch.tensor(ids[:-1]))  # everything but the root
with torch.inference_mode():
    candidates = heads(pre.hidden[-1]).topk(top, dim=-1).indices  # (K, top): head h's ranked guesses
paths = greedy_tree(acc.model("conditional"), tree_nodes)
tree = Tree.from_rank_paths(ids[-1], paths, candidates)
print(f"prompt {prompt.question_id} ({prompt.category}), {len(ids)} tokens; cache holds {cache.length}")
print(f"tree: {len(tree)} nodes ({len(tree) - 1} drafted + the root), depth {tree.max_depth}, "
      f"{len(tree.paths())} root-to-leaf paths")
fig = tree_figure(tree, tok, title=f"{len(tree) - 1} Medusa candidates after prompt {prompt.question_id}")
if not quick:
    print(f"saved {save_figure(fig, '04_medusa_candidates', FIGURES)}")
fig

# %% [markdown]
# **One forward over the tree** (cached prefix, tree mask, position ids = cache length + depth) against
# the plainest reference there is: for each root-to-leaf path, the model's ordinary causal forward over
# prompt + path, with no cache and no mask of ours. Every node's logits must match the reference's
# logits at that node's position. The table lists each path (its node indices and text), the largest
# difference between the two forwards' logits on it, and whether their argmax (the greedy token) agrees
# at every node.

# %% tags=["nbval-ignore-output"]
from specdec_lab.verify import verify_tree

out = verify_tree(model, cache, tree)  # (N, V) logits, one forward
cache.rollback()  # drop the tree's K/V: the cache is back to the prefix
rows, worst, largest = [], 0.0, 0.0
node_text = path_pieces(tree.tokens, tree.parents, tok, context=ids[:-1])  # the root completes the prompt
with torch.inference_mode():
    for path in tree.paths():
        seq = torch.tensor(ids + tree.tokens[path[1:]].tolist())[None]  # prompt (root included) + the path's drafts
        ref = model(input_ids=seq).logits[0, len(ids) - 1 :].float()  # (len(path), V): at the root, then each draft
        delta = (out.logits[path] - ref).abs().max().item()
        worst, largest = max(worst, delta), max(largest, ref.abs().max().item())
        rows.append({"path (nodes)": " → ".join(map(str, path)),
                     "text": visible("".join(node_text[n] for n in path)),
                     "max |Δ logit|": f"{delta:.1e}",
                     "same argmax": bool((out.logits[path].argmax(-1) == ref.argmax(-1)).all())})
display(pd.DataFrame(rows))
Markdown(f"The largest difference is {worst:.1e}, on logits up to {largest:.0f} in size.")

# %% tags=["nbval-check-output"]
assert worst < 1e-3 and all(r["same argmax"] for r in rows)
print(f"fp32: max |Δ logit| over all {len(tree)} nodes and {len(rows)} paths < 1e-3: {worst < 1e-3}")

# %% [markdown]
# The differences are float rounding (a different summation order in attention and the matmuls). Greedy
# acceptance walks down this tree comparing each node's token with its parent's argmax, so the tree
# forward accepts exactly what path-by-path decoding would.
#
# **Cost.** Three ways to score every node: one tree forward; one cached forward per root-to-leaf path
# (each a chain: what a chain verifier would need for the same candidates); and plain decoding, one
# forward per token of each path. The unit is a single-token forward, one step of plain decoding, timed as
# the mean of several in a row (and cross-checked against plain decoding's own average per forward). The
# four are timed in one loop after an untimed warm-up round, each round in a rotated order, so that a change in
# the machine's load falls on all of them alike. The table gives each way's forwards, the tokens they score, the
# median time, how far the rounds spread, and that time in single-token forwards.
#
# What exactly is timed, so that this ratio is not read as another notebook's $t(n)/t(1)$: one forward of this
# tree's $N$ = `tree_nodes` + 1 tokens with its tree mask, after this prompt's cached tokens (the cache length
# printed above), warm (after the untimed round), the median of `repeats` rounds, against the mean of a few
# single-token forwards after the same prefix. Notebooks 05 and 07 time their cost curves another way (a tree-masked
# input after a fixed context of 64 cached tokens, one forward per size per pass, each size's median over the passes:
# the "05/07 protocol" below); the code cell after the next text cell times this tree's size that way too and sets the
# two ratios side by side. Notebook 06 uses that protocol only to re-time its curve: the curve its decode sizes trees
# on is `cost_curve_for`'s (15 interleaved passes, $t(m)$ = the median over the passes of each pass's own
# $t(m)/t(1)$, times the median $t(1)$), a third way, not compared here.
#
# **Predict, then run:** the tree has `tree_nodes` + 1 tokens. Will one forward over all of them cost about one
# single-token forward, about as many single-token forwards as it has nodes, or something in between? Write down
# your guess before running the next cell.

# %% tags=["prediction", "nbval-ignore-output"]
import statistics

from specdec_lab.cost.noise import relative_spread
from specdec_lab.cost.timing import interleaved

SINGLES = 8  # single-token forwards per timed call: the unit is their mean, steadier than one forward's time


def single():
    for _ in range(SINGLES):
        verify_tree(model, cache, Tree.root(int(tree.tokens[0])))
        cache.rollback()


def one_tree():
    verify_tree(model, cache, tree)
    cache.rollback()


def per_path():
    for path in tree.paths():
        verify_tree(model, cache, Tree.chain(int(tree.tokens[0]), tree.tokens[path[1:]]))
        cache.rollback()


def token_by_token():
    for path in tree.paths():
        for node in path:
            verify_tree(model, cache, Tree.root(int(tree.tokens[node])))
        cache.rollback()


n_paths, n_tokens = len(tree.paths()), sum(len(p) for p in tree.paths())
ways = {  # name: (function, forwards per call, forwards reported, tokens scored)
    "one single-token forward": (single, SINGLES, 1, 1),
    "one tree forward": (one_tree, 1, 1, len(tree)),
    "one forward per path": (per_path, 1, n_paths, n_tokens),
    "one forward per token of each path": (token_by_token, 1, n_tokens, n_tokens),
}
names = list(ways)
# every way once per round, the order rotated (a drift hits all alike); round 0 warms up and is not kept
times = interleaved({name: ways[name][0] for name in names}, repeats=repeats, warmup=1)
times = {name: [t / ways[name][1] for t in times[name]] for name in names}  # the unit: one single-token forward
ms = {name: statistics.median(times[name]) * 1e3 for name in names}
# IQR / median over the rounds, rounded to the 0.1 % the table prints: the sums below add what a reader sees
spread = {name: round(relative_spread(times[name]), 3) for name in names}
cost_table = pd.DataFrame(
    {"forwards": {n: ways[n][2] for n in names}, "tokens scored": {n: ways[n][3] for n in names},
     "ms": {n: round(ms[n], 1) for n in names}, "spread (IQR / median)": {n: f"{spread[n]:.1%}" for n in names}},
)  # fmt: skip
cost_table["× a single-token forward"] = (pd.Series(ms) / ms[names[0]]).round(2)
cost_table

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.course import compare

unit, tree_ms = ms["one single-token forward"], ms["one tree forward"]
per_path_ms, per_token_ms = ms["one forward per path"], ms["one forward per token of each path"]
decode_unit = per_token_ms / n_tokens  # plain decoding's own average per forward: a second estimate of the unit


def tol(*ways_):
    """The comparison's noise: the widest spread of the ways it compares, and at least 5 %."""
    return max(0.05, *(spread[w] for w in ways_))


display(Markdown(
    f"*The unit is the median over {repeats} rounds of the mean of {SINGLES} single-token forwards in a row; "
    f"the rounds' spread (relative interquartile range) is in the table, up to {max(spread.values()):.1%}.* "
    + compare(unit, decode_unit,
              "A single-token forward timed on its own ({a:.1f} ms) took longer than plain decoding's average per "
              "forward ({b:.1f} ms over {f} forwards), so the ratios below flatter the tree by that much.",
              "A single-token forward timed on its own ({a:.1f} ms) took less than plain decoding's average per "
              "forward ({b:.1f} ms over {f} forwards), so the ratios below understate the tree by that much.",
              within="A single-token forward timed on its own ({a:.1f} ms) agrees with plain decoding's average per "
              "forward ({b:.1f} ms over {f} forwards) within noise.",
              rel_tol=tol(names[0], names[3]), f=n_tokens)
    + " " + compare(tree_ms, len(tree) * unit,
                    "One tree forward of {n} nodes took longer ({a:.1f} ms) than {n} single-token forwards would "
                    "({b:.1f} ms): on this machine the tree saves no time per token.",
                    "One tree forward scored all {n} nodes in {r:.2f}× the time of this table's single-token "
                    "forward (the tree forward's rounds spread {u:.1%}, the unit's {v:.1%}; the cell after next "
                    "checks the unit against the 05/07 protocol's): {s:.1f}× less time per token than scoring "
                    "them one at a time.",
                    within="One tree forward of {n} nodes took about what {n} single-token forwards would ({a:.1f} "
                    "against {b:.1f} ms: within noise).", rel_tol=tol(names[0], names[1]), n=len(tree),
                    r=tree_ms / unit, s=len(tree) * unit / tree_ms, u=spread[names[1]], v=spread[names[0]])
    + " " + compare(per_path_ms, tree_ms,
                    "Verifying the same candidates path by path ({f} forwards) took {r:.1f}× the tree forward",
                    "Verifying the same candidates path by path ({f} forwards) was faster than the tree forward "
                    "({r:.2f}×)",
                    within="Verifying the same candidates path by path ({f} forwards) took about the tree forward's "
                    "time (within noise)", rel_tol=tol(names[1], names[2]), f=n_paths, r=per_path_ms / tree_ms)
    + compare(per_token_ms, tree_ms, ", and plain decoding {r:.1f}× ({f} forwards).",
              ", and plain decoding was faster than the tree forward ({r:.2f}×, {f} forwards).",
              within=", and plain decoding about the same (within noise; {f} forwards).",
              rel_tol=tol(names[1], names[3]), f=n_tokens, r=per_token_ms / tree_ms)
))

# %% [markdown]
# **The same size, timed as notebooks 05 and 07 time it** (the 05/07 protocol; notebook 06 re-times its curve this
# way too). Their curves come from `measure_cost_curve(..., tree=True)`:
# a tree-masked input of $N$ tokens after 64 cached tokens (not this prompt), one forward of each size per pass
# against one single-token forward (not the mean of several), the median of the passes
# (`cost.noise.measure_cost_curve_with_noise`, which keeps the passes' spread). Here for $N$ = this tree's tokens:

# %% tags=["nbval-ignore-output"]
from specdec_lab.cost.noise import measure_cost_curve_with_noise

PASSES = 3 if quick else 5  # timed passes of the 05/07 protocol (one untimed pass first)
their_curve, their_noise = measure_cost_curve_with_noise(model, sizes=[1, len(tree)], context=64, repeats=PASSES,
                                                         warmup=1, tree=True)  # fmt: skip
ours, theirs = tree_ms / unit, their_curve(len(tree)) / their_curve(1)
their_unit = their_curve(1) * 1e3  # ms
# each ratio's spread, measured the same way on both sides: the spreads of its numerator and denominator, added
ours_noise = spread[names[0]] + spread[names[1]]  # this section's ratio: tree forward over single forward
their_at = {m: round(their_noise.at(m), 3) for m in (1, len(tree))}  # rounded to the 0.1 % printed, as the table's
theirs_noise = their_at[1] + their_at[len(tree)]  # the 05/07 ratio: its two sizes' spreads
both = max(0.05, ours_noise + theirs_noise)  # the two ratios' spreads, added (and at least 5 %)
unit_tol = spread[names[0]] + their_at[1]  # the two units' spreads, added
Markdown(
    f"Timed as notebooks 05 and 07 do, $t({len(tree)})/t(1)$ = {theirs:.2f} (a single-token forward {their_unit:.1f} "
    f"ms; the passes spread {their_at[1]:.1%} at 1 token and {their_at[len(tree)]:.1%} at {len(tree)}, "
    f"IQR / median); this section's table gives {ours:.2f} (a single-token forward {unit:.1f} ms, its rounds "
    f"spread {spread[names[0]]:.1%}). "
    + compare(unit, their_unit,
              "The two units differ: this section's is {r:.2f}× the 05/07 single forward, beyond the {t:.1%} their "
              "spreads add to, and a dearer unit makes every ratio in the table smaller by that factor. ",
              "The two units differ: this section's is {r:.2f}× the 05/07 single forward, beyond the {t:.1%} their "
              "spreads add to, and a cheaper unit makes every ratio in the table larger by that factor. ",
              within="The two units agree within the {t:.1%} their spreads add to. ",
              rel_tol=unit_tol, t=unit_tol, r=unit / their_unit)
    + compare(theirs, ours,
              "The 05/07 protocol gives the larger ratio, beyond the {t:.1%} the two ratios spread (added): "
              "{why}",
              "The 05/07 protocol gives the smaller ratio, beyond the {t:.1%} the two ratios spread (added): "
              "{why}",
              within="The two ratios differ by less than the {t:.1%} they spread (added; this section's table "
              "{o:.1%}, the 05/07 passes {p:.1%}), so these runs cannot tell the two protocols apart.",
              rel_tol=both, t=both, o=ours_noise, p=theirs_noise,
              why=("with the units agreeing, the difference is the tree forward's own cost relative to one token, "
                   "after their 64-token context against after this prompt."
                   if abs(unit - their_unit) <= unit_tol * min(unit, their_unit) else  # compare's reading of "within"
                   "the units' difference above accounts for some or all of it (the tree forward's own cost after "
                   "their 64-token context against after this prompt, for the rest)."))
    + f" The two ratios' spreads (each its two timings' spreads added) are this section's {ours_noise:.1%} and the "
    f"05/07 passes' {theirs_noise:.1%}; each comes from a handful of repeats and has no spread of its own measured, so "
    "this run does not rank the two protocols' steadiness. Notebook 05 sizes trees on the 05/07 protocol, and times "
    f"its whole cost curve in a run of its own: its $t(m)/t(1)$ near $m$ = {len(tree)} is a separate measurement, "
    "under that run's load, and need not agree with this one within either run's spread (this run's "
    f"{theirs_noise:.1%}; 05's are printed in its section 5): a run's spread bounds that run only."
)  # fmt: skip

# %% [markdown]
# Why: a forward costs roughly a fixed part — reading every weight once, whatever the number of tokens —
# plus a part that grows with its tokens (the matmuls' arithmetic, attention). The tree forward pays the
# fixed part once for all its nodes; path by path pays it once per path, plain decoding once per token. How
# much of a single-token forward is the fixed part depends on the machine: the more, the cheaper each
# extra node (notebook 00's cost curve; notebook 05 measures it with a tree mask and sizes the tree on it).
# This is the whole reason trees pay: extra candidates are verified for a fraction of their own forward —
# as long as what they add to the forward's cost stays below what they add to the accepted length. Which
# nodes to spend that budget on is notebook 05.
#
# ## Check your understanding
#
# 1. Two sibling nodes carry different tokens. Why do they get the **same** position id?
#
#    <details><summary>Answer</summary>A position id is the cache slot a token would occupy if it were accepted:
#    cache length + depth. Siblings are alternatives for the same slot — at most one of them is accepted — so
#    RoPE must rotate both as that same distance from the prefix; the accepted one's K/V can then stay in the
#    cache as they are.</details>
#
# 2. In the small tree, how many keys does the row of node 6 (" the", depth 3) allow, and which?
#
#    <details><summary>Answer</summary>$P + 4$: the $P$ cached prefix tokens, then the root " cat", its ancestors
#    " sat" (node 1) and " on" (node 3), and itself. Its siblings' and cousins' columns stay masked, so it sees
#    exactly the text "The black cat sat on the".</details>
#
# 3. Why can `verify_tree` pass no mask at all when the tree is a chain?
#
#    <details><summary>Answer</summary>In a chain node $i$'s parent is $i-1$, so its ancestors are all nodes
#    before it: the ancestor mask is lower-triangular, which is the model's own causal mask. The ordinary forward
#    already applies it.</details>
#
# ## Exercises
#
# Each exercise is a stub to fill in (`...`), then a cell that checks your answer against the library. The
# solutions are in the teacher's copy.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — Position ids from parent pointers
#
# Write `position_ids(parents, cache_length)`: from a tree's parent pointers (a list, `parents[0] = -1`, in
# topological order) and the number of tokens already in the cache, every node's position id, cache length +
# depth, as a `torch.long` tensor. Walk the nodes in order: a parent comes before its children, so
# `depth[i] = depth[parents[i]] + 1`. The check runs it on the tree `ex_parents` below (drawn nowhere in this
# notebook) with a cache of `ex_cache` tokens, and on the real tree of section 5. Reference: `Tree.position_ids`;
# the check refuses an answer that builds a `Tree` through the name `Tree` to ask it (it watches that name, not
# every route to the class: computing from `parents` is the exercise).

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch

_watch = watch(globals(), "Tree")  # the reference's class: an answer that builds a Tree by this name is refused
ex_parents = [-1, 0, 0, 0, 1, 1, 2, 4, 4, 5, 7, 10]  # 12 nodes, depths 0..5
ex_cache = 37


def position_ids(parents: list[int], cache_length: int) -> torch.Tensor:
    """(N,) torch.long: cache_length + the depth of each node."""
    ...

# %% tags=["solution", "exercise-1"]
def position_ids(parents: list[int], cache_length: int) -> torch.Tensor:  # noqa: F811 - the solution replaces the stub
    """(N,) torch.long: cache_length + the depth of each node."""
    depth = [0] * len(parents)
    for i in range(1, len(parents)):
        depth[i] = depth[parents[i]] + 1
    return torch.tensor(depth, dtype=torch.long) + cache_length

# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.lab.course import check

for what, ps, length in (("the tree ex_parents", ex_parents, ex_cache),
                         ("the real tree of section 5", tree.parents.tolist(), cache.length)):
    _watch.begin_check()
    reference = _watch["Tree"](torch.zeros(len(ps), dtype=torch.long), torch.tensor(ps)).position_ids(length)
    _ = check(f"position ids of {what}", position_ids(ps, length), reference, watch=_watch,
              hint="Position id = cache length + depth (edges from the root, not the node's index); the root has "
                   "depth 0. Compute it from `parents`, the argument.")

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — The mask the model receives, from parent pointers
#
# Section 3 walked up from every node to the root; topological order also allows a single pass down: a node
# sees what its parent sees, plus itself (`row[i] = row[parents[i]] | {i}`). Either method is fine here — the
# check compares the mask, not how it was built; the task is the layout the model receives. Write
# `tree_mask(parents, cache_length)` returning the **additive** mask `verify_tree` hands the model: shape (1, 1, N, cache_length + N),
# 0 where a node may attend, the dtype's most negative value (`torch.finfo(torch.float32).min`) where it may not;
# every node sees the whole cached prefix (the first `cache_length` keys), then its ancestors and itself. The
# check runs it on the real tree of section 5 and on `ex_parents` of Exercise 1. Reference:
# `specdec_lab.verify.tree_attention_mask(tree, cache_length, torch.float32)`; the check refuses an answer that calls it
# or builds a `Tree` (whose `mask` is the ancestor block) through the names in scope.

# %% tags=["exercise", "exercise-2"]
_watch = watch(globals(), "tree_attention_mask", "Tree")


def tree_mask(parents: list[int], cache_length: int) -> torch.Tensor:
    """(1, 1, N, cache_length + N) float32: 0 = may attend, finfo.min = masked."""
    ...

# %% tags=["solution", "exercise-2"]
def tree_mask(parents: list[int], cache_length: int) -> torch.Tensor:  # noqa: F811 - the solution replaces the stub
    """(1, 1, N, cache_length + N) float32: 0 = may attend, finfo.min = masked."""
    n = len(parents)
    ancestors = torch.zeros(n, n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            ancestors[i] = ancestors[p]  # built already: p < i
        ancestors[i, i] = True
    allowed = torch.cat([torch.ones(n, cache_length, dtype=torch.bool), ancestors], dim=1)
    return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)[None, None]

# %% tags=["check", "exercise-2", "nbval-check-output"]
for what, ps, length in (("the real tree", tree.parents.tolist(), cache.length), ("ex_parents", ex_parents, 3)):
    _watch.begin_check()
    reference = _watch["tree_attention_mask"](_watch["Tree"](torch.zeros(len(ps), dtype=torch.long), torch.tensor(ps)),
                                              length, torch.float32)
    _ = check(f"the additive mask of {what}", tree_mask(ps, length), reference, watch=_watch,
              hint="Start every row of the ancestor block from its parent's row (a copy), set the diagonal, put a "
                   "block of ones (the prefix) to its left, map True -> 0 and False -> torch.finfo(torch.float32).min, "
                   "and add two leading dimensions.")

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — Greedy acceptance on the tree forward
#
# `out.logits[i]` (section 5) is the target's distribution of the token that follows node $i$'s path. Under
# greedy verification node $i$ is accepted iff its parent is accepted and its token is the argmax of its
# parent's logits. Return `(path, bonus)`: the node indices of the deepest accepted path, root first (among equally
# deep ones the lowest index), and the bonus token, the argmax after the path's last node. The check runs it on the
# real tree with `out.logits`; on the small tree of section 2 with made-up target logits `toy_logits` (below):
# there the target's argmax after each node is the token of `toy_argmax`, and node 3 (" on") carries its parent's
# argmax although that parent, " sat", is rejected; and on `tie_tree`, a made-up tree whose root has two children
# carrying the same token (a proposer that merges two drafts can repeat a sibling), so two paths of the same depth
# are accepted and the tie rule decides. Reference: `specdec_lab.accept.accept_greedy`.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.accept import accept_greedy  # noqa: F401 - watched below
from specdec_lab.lab.course import watch

toy_argmax = [" is", " on", " a", " the", " down", " sat", " cat"]  # the target's argmax after node 0, 1, ..., 6
toy_logits = torch.zeros(len(small), max(v[0] for v in ids_of.values()) + 1)
for node, word in enumerate(toy_argmax):
    toy_logits[node, ids_of[word][0]] = 1.0
# root " cat" with two children " sat" (nodes 1 and 2); " on" under node 1, " down" under node 2
tie_words = [" cat", " sat", " sat", " on", " down"]
tie_tree = Tree(torch.tensor([ids_of[w][0] for w in tie_words]), torch.tensor([-1, 0, 0, 1, 2]))
tie_argmax = [" sat", " on", " down", " the", " a"]  # the target's argmax after node 0, 1, ..., 4
tie_logits = torch.zeros(len(tie_tree), toy_logits.shape[1])
for node, word in enumerate(tie_argmax):
    tie_logits[node, ids_of[word][0]] = 1.0
_watch = watch(globals(), "accept_greedy")


def greedy_accept(tree: Tree, logits: torch.Tensor) -> tuple[list[int], int]:
    """(accepted node indices, root first; the bonus token)."""
    ...

# %% tags=["solution", "exercise-3"]
def greedy_accept(tree: Tree, logits: torch.Tensor) -> tuple[list[int], int]:  # noqa: F811 - the solution replaces the stub
    """(accepted node indices, root first; the bonus token)."""
    pred = logits.argmax(-1).tolist()  # the target's greedy token after each node
    tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
    accepted, depth, best = {0}, [0] * len(tree), 0
    for i in range(1, len(tree)):
        depth[i] = depth[parents[i]] + 1
        if parents[i] in accepted and tokens[i] == pred[parents[i]]:
            accepted.add(i)
            best = i if depth[i] > depth[best] else best
    return tree.path_to(best), pred[best]

# %% tags=["check", "exercise-3", "nbval-check-output"]
for name, t, logits in (("the real tree", tree, out.logits), ("the small tree, made-up logits", small, toy_logits),
                         ("the tree with a tie, made-up logits", tie_tree, tie_logits)):
    _watch.begin_check()
    reference = _watch["accept_greedy"](t, logits)
    _ = check(f"greedy acceptance on {name}", greedy_accept(t, logits), (reference.path, reference.bonus),
              close=lambda a, r: (list(a[0]), int(a[1])) == r, watch=_watch,
              hint="Walk the nodes in index order; a node can be accepted only if its parent was — a node whose "
                   "token is its parent's argmax still fails when the parent was rejected — and among equally deep "
                   "accepted nodes keep the first (lowest index).")

# %% [markdown]
# ## Takeaways
#
# - A Cartesian tree of $K$ heads' top-$s$ has $\sum_d s^d$ drafted nodes (+ the root) and $s^K$ paths: it explodes long before it
#   is useful, so trees are chosen node by node (notebook 05).
# - A tree travels as two vectors, `tokens` and `parents`, in topological order; each node's position id is
#   cache length + depth, shared by every node at that depth (siblings and cousins).
# - The tree attention mask is the prefix plus each node's ancestors — one pass over the parent pointers — and a
#   chain's mask is the ordinary causal one.
# - One tree forward gives every node the logits its own path would get on its own (section 5's table and check),
#   so greedy acceptance on the tree accepts exactly what path-by-path decoding would.
# - What a tree forward costs against a single-token forward is a property of the machine, and noisy to time:
#   section 5 times it two ways, each with its spread, and says whether they agree. That ratio, measured over
#   sizes as notebook 05's cost curve, decides how many nodes are worth verifying.
#
# ## Further reading
#
# - [SpecInfer (Miao et al. 2024)](https://arxiv.org/abs/2305.09781): token trees verified in one forward with a
#   tree attention mask (sections 2–3 here).
# - [Medusa (Cai et al. 2024)](https://arxiv.org/abs/2401.10774): trees of the heads' top candidates, the
#   candidates of section 5.
# - [Sequoia (Chen et al. 2024)](https://arxiv.org/abs/2402.12374): choosing the tree for the hardware's cost of a
#   forward — the question section 5's cost table raises, answered in notebook 05.
