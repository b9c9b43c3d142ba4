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
#
# 1. why not all combinations: the Cartesian explosion, counted;
# 2. a small tree flattened to a sequence: node order, parents, depths and position ids;
# 3. the tree mask derived by hand and checked against the library's;
# 4. the tree and its mask, linked: pick a node, see its path and its mask row;
# 5. on SmolLM2-135M with the shipped heads: one tree forward gives the same logits as decoding each
#    path on its own, and what it costs against a single-token forward.
#
# Notation: p = target, q = draft; a node's tokens are all drafts except the root, the last accepted
# token. The library pieces: `specdec_lab.trees.tree.Tree`, `specdec_lab.verify` (`verify_tree`,
# `tree_attention_mask`), `specdec_lab.viz.trees` and `specdec_lab.viz.tree_figures`.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer timing repeats (same code paths)
model_name: str = "smollm2-135m"  # target model: shipped name, HF directory or .gguf
prompt_index: int = 0  # which benchmark prompt (data/prompts.jsonl) feeds the real-model tree
tree_nodes: int = 16  # nodes below the root of the real Medusa tree (greedy, conditional model)
top: int = 10  # candidates per head (ranks available to the tree)
repeats: int = 3  # timing rounds (median; each round times every way once, in rotated order)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    repeats = 1
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import json
import os
import statistics
from pathlib import Path

import pandas as pd
import torch
from IPython.display import Markdown, display
from transformers.utils import logging as hf_logging

from specdec_lab import KVCache, Tree, load_model
from specdec_lab.cost.timing import interleaved
from specdec_lab.io import load_prompts
from specdec_lab.lab.trees import node_explorer
from specdec_lab.medusa import load_shipped_heads, shipped_heads_path
from specdec_lab.text import WHITESPACE_LEGEND, path_pieces, visible
from specdec_lab.trees import HeadAccuracies, cartesian_paths, cartesian_size, greedy_tree
from specdec_lab.verify import prefill, tree_attention_mask, verify_tree
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tree_figures import node_view
from specdec_lab.viz.trees import node_labels, tree_figure

FIGURES = Path(os.environ.get("SPECDEC_LAB_FIGURES", figures_dir))  # env override: used by nbval in CI
torch.manual_seed(0)
hf_logging.disable_progress_bar()
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; quick={quick}")

# %% [markdown]
# ## 1. The Cartesian explosion
#
# The obvious tree takes head $k$'s top-$s$ at every depth and all their combinations: depth $d$ holds
# $s^d$ nodes, so $K$ heads give $\sum_{d=1}^{K} s^d$ nodes and $s^K$ root-to-leaf paths. A verify
# forward's cost grows with its tokens (notebook 00's cost curve; section 5 below), and the mask is $N \times N$:

# %% tags=["nbval-check-output"]
rows = []
for k in range(1, 5):
    for s in (1, 2, 3, 5, 8, 10):
        size = cartesian_size([s] * k)
        assert size["nodes"] == len(cartesian_paths([s] * k))
        rows.append({"heads K": k, "top-s": s, "cell": f"{size['nodes']} / {size['paths']}"})
explosion = pd.DataFrame(rows).pivot(index="heads K", columns="top-s", values="cell")
k4s8 = cartesian_size([8] * 4)
assert k4s8 == {"nodes": 4680, "paths": 4096}
print(f"K = 4 heads, top-8 each: {k4s8['nodes']} nodes, {k4s8['paths']} paths, "
      f"a {k4s8['nodes'] + 1}² = {(k4s8['nodes'] + 1) ** 2 / 1e6:.1f} M-entry mask")
explosion.rename_axis(columns="top-s  (cells: nodes / paths)")

# %% [markdown]
# Nearly all of those paths are hopeless: head 4's rank-7 guess is rarely right even *on its own* (notebook 03 measures each head's accuracy by rank),
# and a depth-4 node is accepted only if all four of its tokens are right. Notebook 05 picks the few
# dozen nodes worth verifying. Whatever the tree, verifying it works the same way, which is what this
# notebook is about.
#
# ## 2. A small tree, flattened
#
# Three heads' worth of candidates after "The black cat": head 1 proposes " sat" / " is", head 2 " on" /
# " down", head 3 " the". A tree is named by **rank paths** (`(0, 1)` = head 1's rank-0 token, then head
# 2's rank-1 token) and stored as two vectors, `tokens` and `parents`, in topological order (a parent
# before its children). Note that Medusa's candidates for depth 2 are the same under every depth-1 node
# (head 2 reads the same hidden state whichever token comes first): " on" appears twice.

# %% tags=["nbval-check-output"]
lm = load_model(model_name)
tok = lm.tokenizer
words = {"root": " cat", 1: [" sat", " is"], 2: [" on", " down"], 3: [" the", " a"]}
ids_of = {w: tok(w, add_special_tokens=False)["input_ids"] for w in [words["root"], *sum([words[d] for d in (1, 2, 3)], [])]}
assert all(len(v) == 1 for v in ids_of.values()), ids_of  # one token each
cand = torch.tensor([[ids_of[w][0] for w in words[d]] for d in (1, 2, 3)])  # (depth, s): the heads' ranked candidates
rank_paths = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]
small = Tree.from_rank_paths(ids_of[" cat"][0], rank_paths, cand)
prefix_ids = tok("The black", add_special_tokens=False)["input_ids"]
L = len(prefix_ids)  # cache length: the prefix's K/V are already cached; the root " cat" is not
ordered = [()] + sorted(rank_paths, key=lambda p: (len(p), p))
small_text = path_pieces(small.tokens, small.parents, tok, context=prefix_ids)  # each node's text, on its path
display(Markdown(f"Token text in tables and figures: {WHITESPACE_LEGEND}."))
pd.DataFrame(
    {
        "token": [visible(x) for x in small_text],
        "rank path": [str(p) if p else "(root)" for p in ordered],
        "parent": small.parents.tolist(),
        "depth": small.depths.tolist(),
        f"position id (= {L} + depth)": small.position_ids(L).tolist(),
    },
    index=pd.Index(range(len(small)), name="node"),
)

# %% [markdown]
# The model receives the 7 nodes as one sequence `cat sat is on down on the` — meaningless as text,
# which is why the positions and the mask must say what each node's context is. **Position ids** are
# cache length + depth, the slot the token would occupy if accepted: siblings (" sat" / " is", and the
# three depth-2 nodes) share a position, so RoPE rotates them as the same distance from the prefix,
# and an accepted path's K/V can be kept without re-rotation.
#
# ## 3. The mask, by hand
#
# Query node $i$ may attend to key $j$ iff $j$ is a cached prefix token, or $j$ is $i$ itself or one of
# its ancestors. Walking the parent pointers in plain Python:

# %% tags=["nbval-check-output"]
parents = small.parents.tolist()
N = len(small)
naive = [[False] * (L + N) for _ in range(N)]
for i in range(N):
    for j in range(L):  # the whole cached prefix
        naive[i][j] = True
    node = i
    while node != -1:  # itself, then each ancestor up to the root
        naive[i][L + node] = True
        node = parents[node]
naive = torch.tensor(naive)
assert torch.equal(naive[:, L:], small.mask)  # the library's ancestor mask (one pass: mask[i] = mask[parent] | {i})
additive = tree_attention_mask(small, L, torch.float32)[0, 0]  # what verify_tree hands the model: 0 / -inf
assert torch.equal(naive, additive == 0)
print(f"hand-made mask == Tree.mask == (tree_attention_mask == 0): {tuple(naive.shape)} (N × (L + N))")
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
selected = N - 1
tree_fig, mask_fig = node_view(small, selected, tok, cache_length=L)
if not quick:
    print(f"saved {save_figure(tree_fig, '04_linked_tree', FIGURES)}")
    print(f"saved {save_figure(mask_fig, '04_linked_mask', FIGURES)}")
tree_fig

# %%
mask_fig

# %% tags=["nbval-check-output"]
print(f"node {node_labels(small, tok)[selected]}: path {small.path_to(selected)}, "
      f"attends to the {L} prefix tokens + nodes {torch.nonzero(small.mask[selected]).flatten().tolist()}")

# %% tags=["nbval-skip"]
node_explorer(small, tok, cache_length=L, node=selected)

# %% [markdown]
# ## 5. On the real model: one forward = every path decoded on its own
#
# Now a tree of **real** Medusa candidates: prefill a benchmark prompt, run the shipped heads on the last
# hidden state, and place their top candidates on a tree of `tree_nodes` candidates (the greedy tree of notebook 05 under the
# conditional accuracy model). The root is the prompt's last token.

# %%
model = lm.model
heads = load_shipped_heads(model)
acc = HeadAccuracies.from_dict(json.loads((shipped_heads_path() / "calibration.json").read_text()))
prompt = load_prompts()[prompt_index]
ids = lm.chat_ids(prompt.text)
cache = KVCache.for_model(model, capacity=len(ids) + tree_nodes + 8)
pre = prefill(model, cache, torch.tensor(ids[:-1]))  # everything but the root
with torch.inference_mode():
    candidates = heads(pre.hidden[-1]).topk(top, dim=-1).indices  # (K, top): head k's ranked guesses
paths = greedy_tree(acc.model("conditional"), tree_nodes)
tree = Tree.from_rank_paths(ids[-1], paths, candidates)
print(f"prompt {prompt.question_id} ({prompt.category}), {len(ids)} tokens; cache holds {cache.length}")
print(f"tree: {len(tree)} nodes, depth {tree.max_depth}, {len(tree.paths())} root-to-leaf paths")
fig = tree_figure(tree, tok, title=f"{len(tree) - 1} Medusa candidates after prompt {prompt.question_id}")
if not quick:
    print(f"saved {save_figure(fig, '04_medusa_candidates', FIGURES)}")
fig

# %% [markdown]
# **One forward over the tree** (cached prefix, tree mask, position ids = cache length + depth) against
# the plainest reference there is: for each root-to-leaf path, the model's ordinary causal forward over
# prompt + path, with no cache and no mask of ours. Every node's logits must match the reference's
# logits at that node's position.

# %% tags=["nbval-ignore-output"]
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
# forward per token of each path. The unit is a single-token forward, one step of plain decoding. The
# four are timed in one loop, each round in a rotated order, so that a change in the machine's load
# falls on all of them alike.

# %% tags=["nbval-ignore-output"]
def single():
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
ways = {  # name: (function, forwards, tokens scored)
    "one single-token forward": (single, 1, 1),
    "one tree forward": (one_tree, 1, len(tree)),
    "one forward per path": (per_path, n_paths, n_tokens),
    "one forward per token of each path": (token_by_token, n_tokens, n_tokens),
}
names = list(ways)
# every way once per round, the order rotated (a drift hits all alike); round 0 warms up and is not kept
times = interleaved({name: ways[name][0] for name in names}, repeats=repeats, warmup=1)
ms = {name: statistics.median(times[name]) * 1e3 for name in names}
cost_table = pd.DataFrame(
    {"forwards": {n: ways[n][1] for n in names}, "tokens scored": {n: ways[n][2] for n in names},
     "ms": {n: round(ms[n], 1) for n in names}},
)  # fmt: skip
cost_table["× a single-token forward"] = (cost_table["ms"] / ms[names[0]]).round(2)
cost_table

# %% tags=["nbval-ignore-output"]
unit, tree_ms = ms["one single-token forward"], ms["one tree forward"]
Markdown(
    f"One tree forward scored all {len(tree)} nodes in {tree_ms / unit:.1f}× the time of a single-token forward: "
    f"{len(tree) * unit / tree_ms:.1f}× less time per token than scoring them one at a time. Verifying the same "
    f"candidates path by path took {ms['one forward per path'] / tree_ms:.1f}× the tree forward ({n_paths} "
    f"forwards), and plain decoding {ms['one forward per token of each path'] / tree_ms:.1f}× ({n_tokens} forwards)."
)

# %% [markdown]
# Why: a forward costs roughly a fixed part — reading every weight once, whatever the number of tokens —
# plus a part that grows with its tokens (the matmuls' arithmetic, attention). The tree forward pays the
# fixed part once for all its nodes; path by path pays it once per path, plain decoding once per token. How
# much of a single-token forward is the fixed part depends on the machine: the more, the cheaper each
# extra node (notebook 00's cost curve; notebook 05 measures it with a tree mask and sizes the tree on it).
# This is the whole reason trees pay: extra candidates are verified for a fraction of their own forward —
# as long as what they add to the forward's cost stays below what they add to the accepted length. Which
# nodes to spend that budget on is notebook 05.
