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
# # 07 · Lookahead decoding: Jacobi iteration, the n-gram pool and the 2D window
#
# The methods so far needed a **draft**: a small model (02), heads trained on the target (03, 06), or
# the prompt's own text ([prompt lookup](https://github.com/apoorvumang/prompt-lookup-decoding)).
# [Lookahead decoding](https://arxiv.org/abs/2402.02057) (Fu et al. 2024) needs none of them. It makes its
# guesses with the target itself, in the same forward that verifies:
#
# 1. **Jacobi iteration** (`generate(method="jacobi")`, `proposers/jacobi.py`;
#    [Santilli et al. 2023](https://arxiv.org/abs/2305.10427)) — guess a block of $n$ future tokens, run *one*
#    forward over it and replace every guess by the target's argmax after its predecessor; greedy decoding is
#    the fixed point. Alone, on a model not trained for it, it hardly ever beats one token per step;
# 2. **the 2D window** (`generate(method="lookahead")`, `proposers/lookahead.py`) — keep the last
#    $N-1$ Jacobi iterates as a $(N-1) \times W$ window; each of its $W$ columns becomes an $N$-gram
#    for a **pool** keyed by the first token. The window is verified but never accepted: in our loop it
#    is an ordinary token tree of *non-candidate* nodes, a comb;
# 3. **the verification branch** — the pool's n-grams that start with the current token, merged into a
#    trie under the root; greedy acceptance keeps the longest one the target agrees with. The output is
#    exactly greedy decoding's.
#
# ## Learning objectives
#
# After this notebook you can
#
# - run Jacobi iteration and explain why its fixed point is greedy decoding and why, on a pretrained model, it
#   fixes about one token per forward;
# - build one lookahead step's tree — window, root and n-gram trie — count its nodes, and derive its attention
#   mask from the reference code's rule;
# - trace where the accepted n-grams came from (the text or the window) over a decode;
# - predict a $(W, N, G)$ point's speed-up from its mean accepted and the cost curve, and explain why sizes
#   chosen for a GPU lose on a CPU;
# - explain how Token Recycling walks its successor table into a draft tree, and compare its speed with prompt
#   lookup's.
#
# **Prerequisites.** 00 (the decoding loop and the cost curve) and 04 (tree attention); 06 helps (a token tree
# verified in one forward).
#
# **Notation** (notebook 00's table): $t(n)$ = the cost of a forward over $n$ tokens; "mean accepted" ($\tau$ in the
# figures' axis labels) = tokens emitted per target forward, **bonus included** (autoregressive = 1). Section 1 and
# Exercise 2 also use $n$ for Jacobi's block length (the `n` of `method="jacobi"`, here `jacobi_n`): a Jacobi forward verifies those $n$
# guesses. Lookahead's own sizes are $W$, $N$ and $G$ (section 2).
#
# Sections: (1) Jacobi on a real prompt, its trajectory, and why it stalls; (2) one lookahead step's tree
# and attention mask, derived by hand and checked against the library; (3) the pool and its hits over a
# decode; (4) a sweep over $W, N, G$, timed against autoregressive decoding (run by `specdec_lab.sweep`,
# read here from its committed table); (5) why the same method pays where a forward of 64 tokens costs what
# one costs; (6) the reference code's sizes for a 7B model on a GPU, measured by the benchmark harness on a
# CPU beside the sizes `W="auto"` chooses there (the results file names its machine, and section 6 prints it);
# (7) Token Recycling, a draft from the target's own past top-k, drawn on this prompt and measured from a bench file.

# %% tags=["parameters"]
quick: bool = False  # CI: shorter decodes, fewer cost-curve sizes (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
prompt_id: int = 3  # question_id in data/prompts.jsonl for sections 1-3
jacobi_n: int = 8  # Jacobi block length (future tokens guessed and refined per step)
jacobi_tokens: int = 32  # tokens decoded with Jacobi iteration (section 1)
demo_W: int = 4  # section 2: window width (columns)
demo_N: int = 3  # section 2: n-gram size (the window has N − 1 levels)
demo_G: int = 2  # section 2: n-grams kept per first token (verified per step at most)
demo_tokens: int = 24  # section 2: tokens decoded to find a step with a full window and G n-grams
pool_W: int = 4  # section 3: window width
pool_N: int = 4  # section 3: n-gram size
pool_G: int = 4  # section 3: n-grams per first token
pool_tokens: int = 64  # section 3: tokens decoded
sweep_table: str = "../data/sweeps/tables/lookahead_wng.csv"  # section 4: the W x N x G sweep's gathered table
cost_sizes: str = "1,2,4,8,16,24,32,48,64"  # section 5: tree sizes at which the verify cost is measured
paper_bench: str = "../data/bench/lookahead_paper_sizes.json"  # section 6: the bench of the paper's sizes vs W="auto"
rerun: bool = False  # section 6: run that bench afresh (several minutes) into rerun_out instead of reading paper_bench
rerun_per_category: int = 1  # section 6, rerun: prompts per category (data/prompts.jsonl has 7 categories)
rerun_tokens: int = 64  # section 6, rerun: new tokens per prompt and method
rerun_out: str = "../results/bench/07_paper_sizes.json"  # section 6, rerun: where the bench writes
recycle_bench: str = "../data/bench/avx512-recycle-21.json"  # section 7: recycle against prompt lookup (bench file)
seed: int = 0  # random seed (of the window's initial guesses; greedy output does not depend on it)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %% tags=["nbval-ignore-output"]
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    jacobi_tokens, demo_tokens, pool_tokens = 16, 16, 32
    cost_sizes = "1,4,16,32"
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, seed=seed, stem="07_lookahead_decoding")
lm = load_model(model_name)
tok = lm.tokenizer

# %% [markdown]
# ## 1. Jacobi iteration on a real prompt
#
# Greedy decoding solves $y_j = \arg\max p(\cdot \mid x, y_{<j})$ one $j$ after the other. Jacobi
# iteration guesses the whole block $g_1 \dots g_n$ and updates every guess at once from one causal
# forward over $[\text{root}, g_1, \dots, g_n]$:
# $g'_j = \arg\max p(\cdot \mid x, \text{root}, g_{<j})$. In our loop that forward *is* the verify
# forward of the chain root → $g_1$ → … → $g_n$: the accepted prefix $g_1 \dots g_a$ plus the bonus
# $g'_{a+1}$ are emitted, and the updated guesses past them are the next step's block.
#
# **Predict, then run:** each forward refines `jacobi_n` guesses at once. How many tokens per forward will
# Jacobi iteration emit on this pretrained model — close to `jacobi_n`, close to 1, or in between? Write down your
# guess before running the next two cells (the second prints the answer).

# %%
from specdec_lab import generate
from specdec_lab.io import load_prompts
from specdec_lab.viz.jacobi import jacobi_frame

all_prompts = load_prompts("../data/prompts.jsonl")
prompt = next(p for p in all_prompts if p.question_id == prompt_id)
ids = lm.chat_ids(prompt.text)
print(f"[{prompt.category}] {prompt.text[:300]}...")
ar = generate(lm, ids, max_new_tokens=max(jacobi_tokens, demo_tokens, pool_tokens))
jac = generate(lm, ids, method="jacobi", n=jacobi_n, max_new_tokens=jacobi_tokens)
traj = jacobi_frame(jac, tok)

# %% tags=["prediction", "nbval-check-output"]
assert jac.tokens == ar.tokens[: len(jac.tokens)], "greedy Jacobi must equal autoregressive decoding"
print(f"Jacobi (n = {jacobi_n}) == autoregressive, token for token: True ({len(jac.tokens)} tokens)")
# The update at offset 1 is the target's argmax after the step's root: greedy decoding's next token, every step
# (the step's bonus). A check over every step, whatever was accepted.
starts = [0]  # per step, the index of the first token it emits
for s in jac.steps[:-1]:
    starts.append(starts[-1] + len(s.emitted))
bonus_right = [s.info["after"][0] == jac.tokens[i] for s, i in zip(jac.steps, starts, strict=True)
               if s.info["after"] and i < len(jac.tokens)]  # (the last step may have no block left to guess)
print(f"each step's update at offset 1 is greedy decoding's next token: {all(bonus_right) and len(bonus_right) > 0}")
print(f"mean accepted {jac.mean_accepted:.2f} tokens per forward with n = {jacobi_n} guesses refined per forward; "
      f"fewer than 1.5: {jac.mean_accepted < 1.5}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
import pandas as pd
from IPython.display import display

from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.jacobi import jacobi_figure

accepted_guesses = traj[traj["accepted"]]
if len(accepted_guesses):  # a guess is accepted only if it is greedy's token there (and the update keeps it)
    assert accepted_guesses["right"].all() and accepted_guesses["unchanged"].all()
print(f"{len(accepted_guesses)} guesses accepted"
      + (", every one right and left unchanged by its update" if len(accepted_guesses) else ": nothing to check there"))
counts = {
    "steps (target forwards)": len(jac.steps),
    "mean accepted (tokens per forward)": round(jac.mean_accepted, 3),
    "guesses made (step x offset)": len(traj),
    "... accepted": int(traj["accepted"].sum()),
    "... right, but behind a wrong guess": int((traj["state"] == 1).sum()),
    "... left unchanged by the update": int(traj["unchanged"].sum()),
    "... wrong": int((traj["state"] == 0).sum()),
}
display(pd.Series(counts, name=f"Jacobi, n = {jacobi_n}", dtype=object).to_frame())  # ints stay ints
fig = jacobi_figure(jac, tok)
print(f"saved {save_figure(fig, '07_jacobi_trajectory', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
from IPython.display import Markdown

n_accepted, n_behind = int(traj["accepted"].sum()), int((traj["state"] == 1).sum())
Markdown(
    "Each row is one step (one forward), each column an offset after that step's root; the cell shows the guess "
    "that was verified there (in token labels ▁ is a space, ↵ a newline, ⇥ a tab, and · a byte of a character that "
    "the next token completes). "
    + (f"Green marks an accepted guess ({n_accepted} here). " if n_accepted else
       "No guess was accepted in this run, so no cell is green (green would mark an accepted guess). ")
    + (f"Yellow marks a guess that was **already the right token but could not be accepted**, because a guess "
       f"before it was wrong ({n_behind} here); gray, a wrong guess." if n_behind else
       "No right guess sat behind a wrong one either (yellow would mark one); gray, a wrong guess.")
)  # fmt: skip

# %% [markdown]
# That is the whole
# problem: a guess is fixed only once its *entire* prefix is right, since the target's argmax at offset $j$ is computed
# from the guessed context $g_{<j}$. A wrong $g_1$ spoils the context of every later position, the update
# makes offset 1 right (it is the bonus token), and the next step starts over from a block that was
# predicted from a wrong context. So mean accepted stays near 1 (the check above): each forward fixes
# about one token, like autoregressive decoding, at the price of a $(n+1)$-token forward.
# ([CLLMs](https://arxiv.org/abs/2403.00835), Kou et al. 2024, fine-tune the target so that the trajectory
# converges in fewer iterations; a pretrained chat model does not.)
#
# But a guess made from a guessed context can still be a plausible *continuation of that context* (hover a
# cell for the guess and its update). Text repeats (names, code identifiers, phrases of the prompt), so
# an n-gram made there may fit later. That is the idea of Lookahead decoding: **harvest** the trajectory
# as n-grams, and verify the ones that start with the current token.
#
# ## 2. One lookahead step: the window as a tree, and its mask
#
# LADE (the reference code, hao-ai-lab/LookaheadDecoding) builds its 2D window with a hand-written attention mask: window cell
# $(l, i)$ — level $l$, column $i$, a guess for offset $l + i$ after the root — attends to level 0's
# columns $0..i$ and to column $i$ of levels $1..l$, at position `cache_length + l + i`. That *is* a
# tree: give cell $(0, i)$ the parent $(0, i-1)$ and cell $(l, i)$ the parent $(l-1, i)$ (a comb whose
# spine is level 0; the root is cell $(0, 0)$). So `proposers/lookahead.py` appends the window to the
# ordinary token tree as **non-candidate** nodes (`Tree(..., candidate=...)`): the one `verify_tree` of
# every method verifies it, acceptance never walks into it, and the loop's cache `keep` drops its K/V.
# After the forward, the argmax at the last level's cell of column $i$ completes that column to an
# $N$-gram for the pool. The verification branch — the root's n-grams as chains, merged into a trie —
# sits beside it under the root.
#
# A small case from a real decode (parameters `demo_W`, `demo_N`, `demo_G`; by default $W = 4$, $N = 3$,
# $G = 2$): a step with a full window and the most n-grams verified — among those, the first that accepted an
# n-gram token, or the first of them if none did.

# %%
from specdec_lab.text import token_pieces, visible
from specdec_lab.viz.lookahead import node_kinds

demo = generate(lm, ids, method="lookahead", W=demo_W, N=demo_N, G=demo_G, seed=seed, max_new_tokens=demo_tokens)
full = [s.info["levels"] == demo_N - 1 and s.info["W"] > 0 for s in demo.steps]
pick = max(range(len(demo.steps)), key=lambda i: (full[i], demo.steps[i].info["grams"], demo.steps[i].accepted > 0))
step = demo.steps[pick]
tree, columns, levels = step.tree, step.info["columns"], step.info["levels"]
committed = list(ids) + [t for s in demo.steps[:pick] for t in s.emitted]  # the text before this step; root last
cache_length = len(committed) - 1  # committed K/V before this step (the root's is computed in it)
kinds = node_kinds(tree, columns)
emitted = "".join(token_pieces(step.emitted, tok, context=committed))
print(f"step {pick}: {len(tree)} nodes ({kinds.count('root')} root, {kinds.count('window')} further window cells, "
      f"{kinds.count('ngram')} n-gram nodes from {step.info['grams']} n-grams); accepted path {step.path}, "
      f"emitted {visible(emitted)!r}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.lookahead import lookahead_tree_figure

fig = lookahead_tree_figure(tree, columns, tok, path=step.path)
print(f"saved {save_figure(fig, '07_lookahead_tree', FIGURES)}")
fig

# %% [markdown]
# The window (hollow) reads as a grid: the top row is level 0 (the root and the oldest guesses still in the
# window: each step's new predictions enter as the last level, and every level moves up one, as `Window.step`
# does in exercise 4), each column top-down is an n-gram in the making, at offsets $i, i+1, \dots$; the
# dotted edges are the tree's parent pointers. The n-grams (blue) hang left of the root, one per column; green is the accepted path.
#
# Now the mask, derived cell by cell from LADE's rule — no tree involved — and the positions
# `cache_length + l + i`, both compared with what the library verifies (`tree.mask`,
# `tree.position_ids`). An n-gram token sees the root and the tokens before it in its n-gram (its trie
# ancestors), nothing of the window; no window cell sees an n-gram.

# %% tags=["nbval-check-output"]
import torch

from specdec_lab.viz.lookahead import window_cell

n_window = levels * columns  # nodes 0 .. n_window − 1: the window, root = cell (0, 0)
cells = [window_cell(node, columns) for node in range(n_window)]
naive = torch.zeros(len(tree), len(tree), dtype=torch.bool)
for q, (lq, iq) in enumerate(cells):
    for k, (lk, ik) in enumerate(cells):
        naive[q, k] = (lk == 0 and ik <= iq) or (ik == iq and 1 <= lk <= lq)  # LADE's multilevel mask
parents = tree.parents.tolist()
for q in range(n_window, len(tree)):  # the verification trie: the root and the n-gram's earlier tokens
    k = q
    while k != -1:
        naive[q, k] = True
        k = parents[k]
positions = tree.position_ids(cache_length).tolist()
assert all(positions[node] == cache_length + lq + iq for node, (lq, iq) in enumerate(cells))
assert all(positions[q] == cache_length + len(tree.path_to(q)) - 1 for q in range(n_window, len(tree)))
assert torch.equal(naive, tree.mask), "LADE's window mask must equal the tree's ancestor mask"
assert kinds == ["root"] + ["window"] * (n_window - 1) + ["ngram"] * (len(tree) - n_window)
print(f"window {levels} levels x {columns} columns: positions cache_length + l + i, and LADE's mask == tree.mask: True")
print(f"window cells never accepted (non-candidates), accepted path inside the verification branch: "
      f"{all(kinds[n] != 'window' for n in step.path)}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.text import path_pieces
from specdec_lab.viz.lookahead import lookahead_mask_figure

display(pd.DataFrame({
    "token": [visible(p) for p in path_pieces(tree.tokens.tolist(), parents, tok, context=committed[:-1])],
    "branch": kinds,
    "cell (l, i)": [str(window_cell(n, columns)) if kinds[n] != "ngram" else "" for n in range(len(tree))],
    "parent": parents,
    "position": positions,
}).T)  # fmt: skip
fig = lookahead_mask_figure(tree, columns, tok, cache_length=cache_length)
print(f"saved {save_figure(fig, '07_lookahead_mask', FIGURES)}")
fig

# %% [markdown]
# The window block is the staircase LADE draws by hand: level 0 causal, each lower cell a vertical
# column plus the level-0 row up to its column. The n-gram block is the tree mask of notebook 04. The
# two never see each other, so the candidates' logits are exactly those of verifying the n-grams alone
# (`tests/test_lookahead.py` checks this), and greedy Lookahead emits exactly the autoregressive tokens:

# %% tags=["nbval-check-output"]
print(f"greedy lookahead (W={demo_W}, N={demo_N}, G={demo_G}) == autoregressive: "
      f"{demo.tokens == ar.tokens[: len(demo.tokens)]} ({len(demo.tokens)} tokens)")  # fmt: skip

# %% [markdown]
# Every step of that decode, on a slider (the callback is the same `lookahead_step_figure`):

# %% tags=["nbval-skip"]
# (drawn on demand only: papermill and nbval stall on widgets that draw figures when created)
import ipywidgets as w

from specdec_lab.lab.trees import Explorer
from specdec_lab.viz.lookahead import lookahead_step_callback

Explorer(
    w.IntSlider(value=pick, min=0, max=len(demo.steps) - 1, description="step", continuous_update=False),
    lookahead_step_callback(demo, tok),
    show_initial=False,  # the step shown above
)

# %% [markdown]
# ## 3. The pool over a decode
#
# With `pool_W`, `pool_N`, `pool_G` (by default $W = 4$, $N = 4$, $G = 4$): the pool starts with the prompt's n-grams (`pool_from_prompt`, LADE's
# default) and grows by the output's n-grams and by the $W$ n-grams the window harvests every step, keeping at
# most $G$ continuations per first token: a full key drops its least recently added n-gram (`NgramPool.add`), so
# the pool's total never falls but the text's or the window's part of it can. A
# step verifies the root's n-grams (at most $G$, most recent first). Accepted tokens are **credited** to
# the text when a text n-gram offered them (it would have been verified without any window), else to the
# window. `RecordingLookahead` is the library's proposer with the pool's size added to its `info()`.

# %%
from specdec_lab.lab.lookahead import RecordingLookahead
from specdec_lab.proposers import LookaheadConfig
from specdec_lab.viz.lookahead_pool import pool_frame

recorder = RecordingLookahead(LookaheadConfig(W=pool_W, N=pool_N, G=pool_G, seed=seed))
la = generate(lm, ids, proposer=recorder, max_new_tokens=pool_tokens)
pool = pool_frame(la)

# %% tags=["nbval-check-output"]
print(
    f"greedy lookahead (W={pool_W}, N={pool_N}, G={pool_G}) == autoregressive: {la.tokens == ar.tokens[: len(la.tokens)]}"
)
print(f"the pool's total never falls: {bool(pool['pool n-grams'].is_monotonic_increasing)}; "
      f"credited tokens add up to the accepted ones: "
      f"{int(pool['accepted (text)'].sum() + pool['accepted (window)'].sum()) == int(pool['accepted'].sum())}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.lookahead_pool import pool_figure

verified = pool["n-grams verified"] > 0
display(pd.Series({
    "steps": len(pool),
    "mean accepted (tokens per forward)": round(la.mean_accepted, 3),
    "pool after the first step (n-grams)": int(pool["pool n-grams"].iloc[0]),
    "pool at the end (n-grams)": int(pool["pool n-grams"].iloc[-1]),
    "... of which from the window only": int(pool["pool n-grams (window)"].iloc[-1]),
    "steps whose root had n-grams": f"{int(verified.sum())} ({verified.mean():.0%})",
    "steps with an accepted n-gram token": int((pool["accepted"] > 0).sum()),
    "accepted tokens credited to the text": int(pool["accepted (text)"].sum()),
    "accepted tokens credited to the window": int(pool["accepted (window)"].sum()),
    "tokens verified per forward (mean)": round(pool["nodes"].mean(), 1),
}, name=f"lookahead W={pool_W}, N={pool_N}, G={pool_G}").to_frame())  # fmt: skip
fig = pool_figure(pool)
print(f"saved {save_figure(fig, '07_pool', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
from IPython.display import Markdown

from specdec_lab.lab.course import compare

by_text, by_window = int(pool["accepted (text)"].sum()), int(pool["accepted (window)"].sum())
source = "the text" if by_text > by_window else "the window" if by_window > by_text else "the text and the window alike"
text_grams = pool["pool n-grams"] - pool["pool n-grams (window)"]
later = pool.iloc[1:]  # the steps after the first: what each added to the pool
win_added = int(pool["pool n-grams (window)"].iloc[-1] - pool["pool n-grams (window)"].iloc[0])
text_added = int(text_grams.iloc[-1] - text_grams.iloc[0])
steps_after, emitted_after = len(later), int(later["emitted"].sum())
text_fell = int((text_grams.diff().iloc[1:] < 0).sum())  # steps at which the text's n-grams shrank
win_fell = int((pool["pool n-grams (window)"].diff().iloc[1:] < 0).sum())
win_hits = int((pool["accepted (window)"] > 0).sum())  # steps that accepted window tokens
win_partial = int(((pool["accepted (window)"] > 0) & (pool["accepted (window)"] < pool_N - 1)).sum())  # fewer than N − 1


def band(name, fell):
    if not fell:
        return f"the {name}'s n-grams never shrank"
    return f"the {name}'s n-grams shrank at {fell} of the {steps_after} steps"


Markdown(
    f"After the first step the pool held {int(pool['pool n-grams'].iloc[0])} n-grams, at the end "
    f"{int(pool['pool n-grams'].iloc[-1])}. Over the {steps_after} steps between, the window's n-grams "
    f"{'grew' if win_added >= 0 else 'shrank'} by {abs(win_added)} ({win_added / max(steps_after, 1):.1f} per step; it "
    f"harvests at most $W$ = {pool_W} per step, and an n-gram already in the pool adds nothing) and the text's "
    f"{'grew' if text_added >= 0 else 'shrank'} by {abs(text_added)} ({text_added / max(emitted_after, 1):.2f} per "
    f"emitted token, of {emitted_after}; the most is one n-gram per emitted token). The pool also evicts: it keeps "
    f"at most $G$ = {pool_G} continuations per first token, dropping the least recently added, and a window n-gram "
    f"the text then produces is counted as the text's — so {band('text', text_fell)} and {band('window', win_fell)}. "
    + compare(win_added, text_added, "Most of the net growth came from the window. ",
              "Most of the net growth came from the text. ", within="The two grew by as much. ")
    + (f"Of the accepted tokens, {by_text} are credited to the text and {by_window} to the window: "
       f"most hits come from **{source}**" if by_text + by_window else "No n-gram token was accepted")
    + (" — n-grams of the prompt or of the output so far that the text then repeats." if by_text > by_window else ".")
    + f" A window n-gram is a guessed {pool_N - 1}-token continuation of a token that then recurs as the root, made "
    "from a context that was itself guessed; it pays as far as its tokens are right, counted from the first: "
    + (f"of the {win_hits} steps that accepted window tokens, {win_partial} accepted fewer than its {pool_N - 1} "
       "(a partial hit: only its first tokens right) and "
       f"{win_hits - win_partial} all of them. " if win_hits else "no window token was accepted here. ")
    + "Each step with a window pays its $(N-1) \\cdot W - 1$ "
    f"cells besides the root ({(pool_N - 1) * pool_W - 1} here) in the forward, whether it hits or not. The emitted text, "
    "one colour per forward (bold = accepted from an n-gram):"
)  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.decoding import show_steps

show_steps(la, tok)

# %% [markdown]
# ## 4. A sweep over $W$, $N$, $G$
#
# The sweep runs outside this notebook, as every sweep of the workbook does:
#
# ```bash
# python -m specdec_lab.sweep data/sweeps/lookahead_wng.yaml      # -> results/sweeps/lookahead_wng/table.csv
# ```
#
# executes notebook 08 once per grid point ($W \in \{2, 4, 8\}$, $N \in \{3, 4, 5\}$, $G \in \{2, 4, 8\}$,
# greedy, three prompts): lookahead and autoregressive decoding on the same prompts in one kernel, after a
# warm-up of each, every output compared with autoregressive's. Each point's result is one small JSON
# (`lab.experiment.experiment_record`: speed-up, mean accepted, and the size of the verify forward — tokens
# per forward, root included, and the window cells among them); finished points are skipped when the sweep
# is run again, and a gather step writes one row per point to `table.csv`. This section reads the table
# committed from such a run, `data/sweeps/tables/lookahead_wng.csv` (parameter `sweep_table`: point it at
# your own run's `table.csv` to draw your machine's). **Timings of one machine, on three prompts: noisy.**
#
# Columns, per $(W, N, G)$: the speed-up (lookahead's tokens/s over autoregressive's), both tokens/s, mean
# accepted, the tokens verified per forward (root included) and, of them, the n-gram nodes and the window cells
# besides the root, whether every output equalled autoregressive decoding's, and whether the point's timings
# were noisy (autoregressive step times spread out: the CPU was busy with something else).

# %% tags=["nbval-ignore-output"]
from pathlib import Path

from specdec_lab.lab.provenance import same_machine, table_machine
from specdec_lab.viz.lookahead_sweep import sweep_frame
from specdec_lab.viz.results import machine_label


def file_machine(record):
    """The machine a results file names, never 'this machine': and whether this kernel's matches its description."""
    if not record:
        return "a machine the file does not record"
    when = f", {record['date']}" if record.get("date") else ""
    like = "the same CPU, ISA and threads as" if same_machine(record) else "not"
    return f"{machine_label(record)}{when} ({like} the machine running this notebook)"


table = pd.read_csv(sweep_table)
sweep = sweep_frame(table)
sweep_machine = table_machine(sweep_table)  # its table.json's machine record, or the committed table's logged one
print(f"{sweep_table}: {len(sweep)} of {len(table)} points finished; prompts {table['prompt_id'].iloc[0]}, "
      f"{table['max_new_tokens'].iloc[0]} new tokens each, temperature {table['temperature'].iloc[0]:g}")  # fmt: skip
print(f"measured on {file_machine(sweep_machine)}")
with pd.option_context("styler.sparse.index", False):  # every row names its W and N (in the plain text too)
    display(sweep.round(3).style.format(precision=3).set_caption(
        f"{Path(sweep_table).name}: measured on {machine_label(sweep_machine) if sweep_machine else 'an unrecorded machine'}"
    ))  # fmt: skip

# %% tags=["nbval-check-output"]
print(f"every grid point identical to autoregressive: {bool(sweep['identical to autoregressive'].all())}")
print(", ".join(f"{a} in {sorted(set(sweep.index.get_level_values(a)))}" for a in sweep.index.names), len(sweep), "points")

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.lookahead_sweep import sweep_figure

fig = sweep_figure(sweep)
print(f"saved {save_figure(fig, '07_sweep', FIGURES)}")
fig

# %% [markdown]
# Every step with a window pays for the $(N-1) \cdot W - 1$ window cells besides the root (a step goes without
# the window where it does not fit the tokens left to generate: section 6), plus the n-gram trie of up to
# $G$ n-grams of $N-1$ tokens, whether anything is accepted or not; the window can only add hits through the
# n-grams it harvests into the pool. Which of the two wins depends on what an extra token in the forward
# costs. On the table above:

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.course import compare
from specdec_lab.lab.experiment import NOISY_SPREAD

speed, nodes = sweep["speed-up vs autoregressive"], sweep["tokens verified / forward"]
best, worst = speed.idxmax(), speed.idxmin()
rho = speed.corr(nodes, method="spearman")
# The sweep's own timing noise: autoregressive decoding did the same work at every point (same prompts, same
# tokens), so the spread of its tokens/s across the points (std / mean) is what a re-run may move a speed-up by.
ar_speed = sweep["autoregressive tokens/s"]
noise = float(ar_speed.std() / ar_speed.mean())
# "within that noise" by compare's own rule (the larger ≤ (1 + noise)× the smaller), as the sentences below use it
near_best = [p for p in speed.index if compare(speed[p], speed[best], "", "", within="y", rel_tol=noise) == "y"]
near_worst = [p for p in speed.index if compare(speed[p], speed[worst], "", "", within="y", rel_tol=noise) == "y"]


def where(p):
    return f"$W = {p[0]}, N = {p[1]}, G = {p[2]}$"


def point(p):
    row = sweep.loc[p]
    return (f"{where(p)} ({row['speed-up vs autoregressive']:.2f}×, mean accepted {row['mean accepted']:.2f}, "
            f"{row['tokens verified / forward']:.1f} tokens per forward"
            + (", its timings flagged noisy)" if row["timings noisy"] else ")"))  # fmt: skip


def points(ps, fastest_first=True):
    ordered = sorted(ps, key=lambda p: -speed[p] if fastest_first else speed[p])
    return "; ".join(f"{where(p)} ({speed[p]:.2f}×" + (", timings noisy)" if sweep.loc[p, "timings noisy"] else ")")
                     for p in ordered)  # fmt: skip


trend = ("shows no clear trend" if abs(rho) < 0.3 else "falls" if rho < 0 else "rises")
Markdown(
    f"The sweep's timing noise: autoregressive decoding, the same work at every point, ran at tokens/s that vary by "
    f"{noise:.0%} across the points (std / mean). "
    + compare(speed[best], speed.drop(best).max(), f"The fastest point is {point(best)}, ahead of every other by more "
              "than that. ", "",
              within=f"{len(near_best)} points lie within that of the fastest measured one, so the sweep cannot "
              f"tell which is fastest: {points(near_best)}. ", rel_tol=noise)
    + compare(speed.drop(worst).min(), speed[worst], f"The slowest is {point(worst)}, behind every other by more "
              "than the noise. ", "",
              within=f"The slowest, slowest first, within that noise of the slowest: {points(near_worst, False)}. ",
              rel_tol=noise)
    + f"Across the grid, the speed-up {trend} with the tokens verified per forward (Spearman rank correlation "
    f"{rho:.2f}), while mean accepted ranges from {sweep['mean accepted'].min():.2f} to "
    f"{sweep['mean accepted'].max():.2f} tokens per forward. Timings flagged noisy (autoregressive step times "
    f"p90/median above {NOISY_SPREAD}: the CPU was busy with something else): {int(sweep['timings noisy'].sum())} of "
    f"{len(sweep)} points."
)

# %% [markdown]
# ## 5. The same method where a forward of 64 tokens costs what one costs
#
# Lookahead was designed for GPUs, where a small forward is bound by reading the weights, so a forward over
# more tokens costs little more than one over a single token. This section models that machine as a flat curve,
# $t(n) = t(1)$ — an assumption, not a measurement (no output here times a GPU): on it every extra window or n-gram
# token is free and the speed-up *is* the mean accepted. On a CPU the verify cost $t(n)$ grows with $n$ once $n$ is
# large enough (the cell below prints which sizes stand above $t(1)$ beyond this run's timing noise). Predicted speed-up of a grid point, from
# its measured mean accepted and its mean tokens per forward $\bar n$:
#
# $$\text{speed-up} \approx \frac{\text{mean accepted}}{t(\bar n) / t(1)},$$
#
# on the tree verify cost curve measured here (`measure_cost_curve(..., tree=True)`: one tree-masked input of
# $n$ tokens after 64 cached tokens, warm, the median of 5 repeats with their spread — the same function,
# input and statistic as notebook 06's re-timing of its curve, `cost.noise.measure_cost_curve_with_noise`; the curve
# 06's decode prices on is `cost_curve_for`'s, the median of paired within-repeat ratios instead; notebook 04
# times one tree after a prompt, so its ratio is not this curve's) and on a flat one ($t(n) = t(1)$, GPU-like, `cost.flat_curve`). The prediction leaves
# out the proposer's own Python time, and the measured curve is the machine running this notebook while the
# table's speed-ups are those of the machine that ran the sweep (section 4 names it): the comparison is exact only
# where the two are the same.

# %% tags=["nbval-ignore-output"]
from specdec_lab.cost import flat_curve
from specdec_lab.cost.noise import measure_cost_curve_with_noise
from specdec_lab.viz.lookahead_sweep import cost_figure, predicted_speedups

COST_CONTEXT = 64  # cached tokens before each timed forward (measure_cost_curve's default)
COST_REPEATS = 5  # timed passes over all sizes (as notebook 06's re-timing): the curve is their median per size
curve, curve_noise = measure_cost_curve_with_noise(
    lm.model, sizes=[int(n) for n in cost_sizes.split(",")], context=COST_CONTEXT, tree=True, repeats=COST_REPEATS,
    warmup=1,
)
flat = flat_curve(curve(1), up_to=max(curve.sizes))
curves = {"this CPU (measured)": curve, "flat (GPU-like)": flat}


# How far two costs may differ from noise alone, the one rule of this notebook (section 5 and the window's pick
# below): the two sizes' own spreads (IQR / median of their repeats) added, and never less than the typical spread
# (the median over the sizes) counted once for each: one size's IQR of 5 repeats is itself noisy, small by chance
# as well as large. Read against the smaller cost, as `compare` reads "within".
def pair_tol(n, m):
    return max(0.02, 2 * curve_noise.spread, curve_noise.at(n) + curve_noise.at(m))


print(f"t(n)/t(1) here (tree verify input, after {COST_CONTEXT} cached tokens, warm: median of {COST_REPEATS} repeats "
      "after 1 untimed pass; in brackets how far t(n) and t(1) may differ from noise alone: their spreads, IQR / "
      f"median, added, and at least {max(0.02, 2 * curve_noise.spread):.1%}, twice the sizes' median spread of "
      f"{curve_noise.spread:.1%} and never under 2%):",
      ", ".join(f"{n}: {r:.2f}" + (f" ({pair_tol(n, 1):.1%})" if n > 1 else "")
                for n, r in zip(curve.sizes, curve.relative(), strict=True)))  # fmt: skip
verdict_t1 = {n: compare(curve(n), curve(1), "above", "below", within="within", rel_tol=pair_tol(n, 1))
              for n in curve.sizes if n > 1}  # fmt: skip


def sizes_at(verdict):  # the sizes n with that verdict against t(1), said in words ("none" for no size)
    return ", ".join(str(n) for n, v in verdict_t1.items() if v == verdict) or "none"


print("beyond that noise (the larger of t(n) and t(1) more than the bracket above the smaller), t(n) stands above t(1) "
      f"at n = {sizes_at('above')}; within noise of t(1) at n = {sizes_at('within')}"
      + (f"; below it at n = {sizes_at('below')}" if "below" in verdict_t1.values() else ""))  # fmt: skip
pred = predicted_speedups(sweep, curves)
display(pred[["mean accepted", "tokens verified / forward", "speed-up vs autoregressive",
              "predicted (this CPU (measured))", "predicted (flat (GPU-like))"]].round(3))  # fmt: skip
fig = cost_figure(sweep, curves, measured=f"measured on {machine_label(sweep_machine) if sweep_machine else 'the sweep'}")
print(f"saved {save_figure(fig, '07_cost_speedup', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
import math

import numpy as np

from specdec_lab.lab.course import compare, within_tol

best_on = {name: pred[f"predicted ({name})"].idxmax() for name in curves}
rank_corr = {name: pred[f"predicted ({name})"].corr(speed, method="spearman") for name in curves}
here = pred["predicted (this CPU (measured))"]
below, above = int((here < speed).sum()), int((here > speed).sum())
ratios = (here / speed).to_numpy(dtype=float)
ratio = float(np.median(ratios))
# The noise of a median of many ratios is not one point's spread (`noise`): its scatter over the points is a bootstrap
# (fixed seed); the sign test counts the sides. But every point's prediction divides by the same one timing of this
# curve: an error in t(1), or at the sizes the points share, moves all of them alike, and no number of points averages
# it out. So the median "runs high/low" only where its 95% interval leaves out 1 *and* it differs from 1 by more than
# section 5's rule lets two of the curve's costs differ from noise alone (its floor: the typical spread, counted once
# for each cost), read against the smaller, as `compare` reads "within".
boot = np.median(np.random.default_rng(0).choice(ratios, size=(2000, len(ratios))), axis=1)
lo, hi = (float(x) for x in np.quantile(boot, [0.025, 0.975]))
curve_tol = max(0.02, 2 * curve_noise.spread)
in_scatter = lo <= 1.0 <= hi  # the points' scatter alone shows no bias
in_curve_noise = within_tol(ratio, 1.0, curve_tol)  # the curve's own timing noise covers the offset
off_by = abs(ratio - 1.0) / min(ratio, 1.0)  # how far from 1, read against the smaller
n_sides = below + above
sign_p = (min(1.0, 2 * sum(math.comb(n_sides, j) for j in range(min(below, above) + 1)) / 2**n_sides)
          if n_sides else 1.0)  # fmt: skip
if below == len(pred) or above == len(pred):
    side = f"runs {'below' if below else 'above'} the measurement at every one of the {len(pred)} points"
else:
    side = f"is below the measurement at {below} and above it at {above} of the {len(pred)} points"
elsewhere = (f" Besides, the curve is this machine's, measured now, and the speed-ups are those of the sweep's file, "
             f"measured on {file_machine(sweep_machine)} at another moment.")  # fmt: skip
predicted_best = best_on["this CPU (measured)"]
# Pricing each step at t(n̄) rather than the mean of t(n) over its steps errs by how the curve bends where the steps'
# sizes lie (Jensen). The table has no per-step sizes, so the bend is read over the grid's n̄: t at the middle of that
# range against the chord between its ends, by section 5's rule (the chord's spread: the noisier end's).
n_lo, n_hi = (float(f(pred["tokens verified / forward"])) for f in (np.min, np.max))
bend_tol = pair_tol((n_lo + n_hi) / 2, max((n_lo, n_hi), key=curve_noise.at))
bend = compare(curve((n_lo + n_hi) / 2), (curve(n_lo) + curve(n_hi)) / 2, "down", "up", within="straight",
               rel_tol=bend_tol)  # fmt: skip
bend_where = (f"over the grid's n̄, {n_lo:.0f} to {n_hi:.0f} tokens, t at the middle lies "
              + {"up": "below the chord between the ends, beyond the timing noise", "down": "above the chord between "
                 "the ends, beyond the timing noise", "straight": f"within the timing noise ({bend_tol:.0%}) of the "
                 "chord between the ends"}[bend])  # fmt: skip
jensen = (f"pricing every step at t of the *mean* tokens per forward, where the steps' sizes vary and the curve bends "
          f"upward ({bend_where}), so the mean of t(n) over the steps is at least t(n̄)")  # fmt: skip
jensen_not = (" Pricing every step at t of the *mean* tokens per forward is not shown to be one of them: "
              + bend_where + (", so on this curve the mean of t(n) over steps of varied sizes is at most t(n̄), which "
                              "would put the prediction low" if bend == "down" else
                              ", so the steps' varied sizes need not move the mean of t(n) off t(n̄) either way")
              + ".")  # fmt: skip
leaves_out = ["the proposer's own Python time (pool, trie, window) and the loop's extra work on lookahead's larger "
              "trees, which its steps pay beyond an autoregressive step's and the t(n) curve does not",
              *([jensen] if bend == "up" else []),
              "the curve being the median of a few warm repeats after {context} cached tokens, while the sweep's "
              "forwards ran after the prompt and its output so far, on a machine as busy as it then was"]  # fmt: skip
measured_best = (f"measured: {where(best)}" if len(near_best) == 1 else
                 f"measured: any of the {len(near_best)} points within the sweep's timing noise ({noise:.0%}) of the "
                 f"fastest (section 4), the top prediction on this CPU's curve "
                 f"{'among them' if predicted_best in near_best else 'not among them'}")  # fmt: skip


def top_said(name):  # a curve's top prediction, and the points whose prediction is within noise of it
    col, n_bar = pred[f"predicted ({name})"], pred["tokens verified / forward"]
    top = best_on[name]
    if curves[name] is flat:  # a flat curve predicts the mean accepted itself: no timing noise in it, only exact ties
        ties = [p for p in col.index if p != top and col[p] == col[top]]
    else:  # two predictions differ by the noise of t at their two sizes: section 5's rule for the two costs
        ties = [p for p in col.index if p != top and compare(col[p], col[top], "", "", within="y",
                                                             rel_tol=pair_tol(n_bar[p], n_bar[top])) == "y"]  # fmt: skip
    said = f"on {name}: {where(top)} ({col[top]:.2f}×)"
    if not ties:
        return said + (", above every other point" if curves[name] is flat else
                       ", beyond the timing noise of every other point")  # fmt: skip
    return said + (f", with {len(ties)} more point{'s' if len(ties) != 1 else ''} "
                   + ("within the timing noise of it (section 5's rule for the two forwards' sizes), so this curve "
                      "does not single out one best point" if curves[name] is not flat else "tied with it exactly"))


# a measured curve can only beat the flat one where it prices a forward below t(1): say so, and whether that is noise
over_flat = pred.index[pred["predicted (this CPU (measured))"] > pred["predicted (flat (GPU-like))"]]
below_t1 = [n for n, v in verdict_t1.items() if v == "below"]
over_flat_note = "" if not len(over_flat) else (
    f"At {len(over_flat)} of the {len(pred)} points this CPU's curve predicts more than the flat one: it prices "
    "their forwards below t(1), "
    + ("where section 5 finds no size below t(1) beyond the timing noise, so that edge is the noise of this run's "
       "curve, not a faster forward. " if not below_t1 else
       f"as section 5 measured (below t(1) beyond the timing noise at n = {sizes_at('below')}). ")
)  # fmt: skip
bias_said = (
    "The median predicted / measured is {a:.2f}; its 95% bootstrap interval over the points, {lo:.2f} to {hi:.2f}, "
    "contains 1 (sign test on the points' sides p = {p:.1g}): within the points' scatter, the median shows no bias "
    "either way." if in_scatter else
    "The median predicted / measured is {a:.2f} (95% bootstrap interval over the points {lo:.2f} to {hi:.2f}, which "
    "leaves out 1; sign test on the points' sides p = {p:.1g}), {o:.1%} off 1. The points' scatter alone would call "
    "that a bias, but every point's prediction divides by the same one timing of this curve, whose costs may differ "
    "by {t:.1%} from noise alone (section 5's rule, at least): an error there moves every point alike, and no number "
    "of points averages it out. The offset is within that noise, so this run does not show the prediction running "
    "high or low." if in_curve_noise else None  # None: beyond both, the side below chooses the sentence
)  # fmt: skip
bias_values = {"lo": lo, "hi": hi, "p": sign_p, "o": off_by, "t": curve_tol, "context": COST_CONTEXT}
Markdown(
    f"On this CPU's curve the prediction {side}. "
    + (bias_said.format(a=ratio, **bias_values) if bias_said else compare(ratio, 1.0,
              "The median predicted / measured is {a:.2f} (95% bootstrap interval over the points {lo:.2f} to "
              "{hi:.2f}, which leaves out 1; sign test on the points' sides p = {p:.1g}), {o:.1%} off 1, beyond the {t:.1%} "
              "by which section 5's rule lets two of the curve's costs differ: the prediction runs high. "
              + ("Three" if len(leaves_out) == 3 else "Two") + " things it leaves out could each put it there, and "
              "the table records none of them per step, so it cannot say which weighs most: "
              + "; ".join(leaves_out[:-1]) + "; and " + leaves_out[-1] + "."
              + ("" if bend == "up" else jensen_not),
              "The median predicted / measured is {a:.2f} (95% bootstrap interval over the points {lo:.2f} to "
              "{hi:.2f}, which leaves out 1; sign test on the points' sides p = {p:.1g}), {o:.1%} off 1, beyond the {t:.1%} "
              "by which section 5's rule lets two of the curve's costs differ: the prediction runs low, although the "
              "proposer's own time, which it leaves out, would if anything put it "
              "above"
              + ({"up": " (and so would the steps' sizes varying around the mean on this curve: " + bend_where + ")",
                  "down": "; the steps' sizes varying around the mean could put it low: " + bend_where + ", so the "
                  "mean of t(n) over the steps is at most t(n̄)",
                  "straight": "; the steps' varied sizes need not move it either way: " + bend_where}[bend])
              + "; what remains is the curve: measured now (the median of a few warm repeats after {context} cached "
              "tokens), it may be steeper than what the sweep's forwards paid.",
              **bias_values))
    + elsewhere + " "
    + "Highest prediction " + "; ".join(top_said(name) for name in curves)
    + f"; {measured_best}. "
    + over_flat_note
    + "Rank correlation of the predicted with the measured speed-ups: "
    + ", ".join(f"{name} {r:.2f}" for name, r in rank_corr.items())
    + ". On the flat curve the predicted speed-up is the mean accepted itself, so the best point there is the one "
    "that accepts most per forward, however many tokens it verifies: the window is sized again for that curve "
    "(among the grid's points). Notebook 09's what-if asks the same of every method — its **re-decided** replay "
    "chooses each method's sizes (tree budget, draft length, window) again under the other curve, beside its "
    "re-priced replay of the sizes the measured CPU chose."
)  # fmt: skip

# %% [markdown]
# That is why `W="auto"` (`proposers/lookahead_budget.py`) sizes the window from the measured cost curve
# and the hit rates seen so far, maximising $(1 + y_\text{text} + y_\text{win} \log_2(1+W)) / t(n_W + \hat g)$ every few steps, with
# $n_W = (N-1)W$ for $W \ge 1$ (the root and the $(N-1)W - 1$ window cells after it: the root is the window's
# first cell) and $n_0 = 1$: $y_\text{text}$ is the accepted tokens per step credited to n-grams of the
# text, $y_\text{win}$ those credited to window n-grams per $\log_2(1+W)$, and $\hat g$ the n-gram trie's nodes
# verified per step. With its priors (before any hit is observed) and the default $N$ and $G$ of `lookahead`, on
# the two curves: per width $W$ the tokens it predicts per unit of time $t(1)$, and the width it opens with.

# %% tags=["nbval-ignore-output"]
from specdec_lab.cost import StepCost
from specdec_lab.proposers import LookaheadConfig
from specdec_lab.proposers.lookahead_budget import LookaheadBudget

defaults = LookaheadConfig()  # lookahead's default N, G and widest window
choices, budgets = {}, {}
for name, c in curves.items():
    budget = LookaheadBudget(StepCost.of(c), N=defaults.N, G=defaults.G, max_window=defaults.max_window)  # one cost model
    choices[name] = {f"W={width}": round(score * c(1), 3) for width, score in budget.scores().items()}
    choices[name]["chosen W"] = budget.width()
    budgets[name] = budget
pd.DataFrame.from_dict(choices, orient="index")  # predicted tokens per t(1), per width, and the width W="auto" starts with

# %% tags=["nbval-ignore-output"]
opens = {name: c["chosen W"] for name, c in choices.items()}


def opening(w):
    return "no window (pool verification only)" if w == 0 else f"a window of W = {w}"


def margin_here():  # the CPU's pick against its runner-up: a tie within section 5's noise rule for their two costs
    b = budgets["this CPU (measured)"]
    scores = b.scores()
    pick = opens["this CPU (measured)"]
    if pick not in scores or len(scores) < 2:
        return ""
    other = max((w for w in scores if w != pick), key=lambda w: scores[w])
    tol = pair_tol(*(max(1, round(b.nodes(w, b.g_nodes.value))) for w in (pick, other)))
    return compare(scores[pick], scores[other],
                   " On this CPU it predicts {m:.1%} more than its runner-up, {o}: more than the {t:.1%} by which the "
                   "two sizes' t(n) may differ from noise alone (section 5's rule), so the pick stands on this curve.",
                   " On this CPU {o} scores higher: the sizer opens with a narrow window as a probe, not as its best score.",
                   within=" On this CPU it predicts only {m:.1%} more than its runner-up, {o}: within the {t:.1%} by "
                   "which the two sizes' t(n) may differ from noise alone (section 5's rule), so another run of this "
                   "cell can open with either.",
                   rel_tol=tol, t=tol, o=opening(other),
                   m=(scores[pick] - scores[other]) / min(abs(scores[pick]), abs(scores[other])))  # fmt: skip


# a width this CPU's curve scores above the flat curve: only a forward priced below t(1) can do that (section 5)
over_flat_w = [w for w in choices["this CPU (measured)"] if w.startswith("W=")
               and choices["this CPU (measured)"][w] > choices["flat (GPU-like)"][w]]
over_flat_w_note = "" if not over_flat_w else (
    f" At {', '.join(over_flat_w)} the table scores this CPU above the flat curve: its curve prices those forwards "
    "below t(1), "
    + ("which section 5 finds within the timing noise of t(1), so that edge is this run's noise, not a faster forward."
       if not below_t1 else f"as section 5 measured (below t(1) beyond the timing noise at n = {sizes_at('below')}).")
)  # fmt: skip


Markdown(
    f"With its priors the sizer opens with {opening(opens['this CPU (measured)'])} on this CPU, and with "
    f"{opening(opens['flat (GPU-like)'])} on the flat curve (the widest it considers is {defaults.max_window})."
    + margin_here() + " From there it re-chooses "
    "every `adapt_every` steps from the hit rates it observes: on a CPU a window is widened only while window "
    "n-grams keep hitting."
    + over_flat_w_note
)  # fmt: skip

# %% [markdown]
# ## 6. The paper's sizes on a CPU
#
# The reference code runs Llama-2-7B-chat on MT-Bench with N = 5, W = 15, G = 15 (source: hao-ai-lab/LookaheadDecoding, `applications/run_mtbench.sh`: `LEVEL=5`, `WIN=15`, `GUESS=15`),
# sized for a GPU (the machine section 5's flat curve models: a forward of many tokens priced as one). Each step
# *with a window* then verifies the root, $(N-1) \cdot W - 1 = 59$ window cells and up to $G$ n-grams of $N - 1$ tokens. Not every
# step has one: `LookaheadProposer.propose` (`specdec_lab/proposers/lookahead.py`) leaves the window out where
# its deepest cell, $(N-2) + (W-1)$ tokens past the root, does not fit the tokens still to generate — the last
# $N + W - 3$ tokens of a decode, a large share of a 64-token one — and for its first $N - 2$ steps the window
# is still filling, with fewer levels. So the table's share of steps with a window is below 1, and its tokens
# verified per forward can fall below $1 + 59$ plus the n-grams. The same sizes
# on a CPU, beside `lookahead` as it runs by default (`W="auto"`, $N = 4$, $G = 8$: the window sized by
# the cost model, section 5), measured by the benchmark harness on one prompt per category:
#
# ```bash
# python -m specdec_lab.bench --methods autoregressive,lookahead,lookahead:W=15:N=5:G=15 --per-category 1 \
#     --max-new-tokens 64 --repeats 2 --out data/bench/lookahead_paper_sizes.json
# ```
#
# Greedy; per prompt the three methods run in rotated order, twice, and each keeps its faster run; every
# output is compared with autoregressive decoding's. This section reads the committed result (parameter
# `paper_bench`); `rerun=True` runs the same command here instead (several minutes). Columns: the sizes (and,
# for `W="auto"`, the widths it ended with per prompt), the prompts, tokens per step (mean accepted), tokens
# verified per forward, the share of steps that verified a window, tokens/s, the speed-up over autoregressive
# with its 95-percent paired-bootstrap interval over the prompts, and whether every output equalled autoregressive's.

# %% tags=["nbval-ignore-output"]
import json
from pathlib import Path

from specdec_lab.lab.lookahead import PAPER_METHODS, PAPER_SIZES, paper_sizes_frame

if rerun:
    from specdec_lab.bench.__main__ import main as bench_main

    argv = ["--model", model_name, "--prompts", "../data/prompts.jsonl", "--methods", PAPER_METHODS,
            "--per-category", str(rerun_per_category), "--max-new-tokens", str(rerun_tokens), "--repeats", "2",
            "--out", rerun_out, "--fresh"]  # fmt: skip
    assert bench_main(argv) == 0, "the bench failed (its error is printed above)"
    paper_bench = rerun_out
paper = json.loads(Path(paper_bench).read_text())
cfg, mach = paper["config"], paper["machine"]
paper_label = "lookahead:" + ":".join(f"{k}={v}" for k, v in PAPER_SIZES.items())
print(f"{Path(paper_bench).name}: {paper['prompts_done']} prompts ({cfg['per_category']} per category), "
      f"{cfg['max_new_tokens']} new tokens, best of {cfg['repeats']} rotated runs; measured on "
      f"{file_machine(mach)}")  # fmt: skip
paper_frame = paper_sizes_frame(paper)
paper_frame.round(3).style.format(precision=3).set_caption(f"{Path(paper_bench).name}: measured on {machine_label(mach)}")

# %% tags=["nbval-check-output"]
print(f"methods: {', '.join(paper['methods'])}; every output identical to autoregressive: "
      f"{bool(paper_frame['identical to autoregressive'].all())}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.lookahead_sweep import paper_sizes_figure

fig = paper_sizes_figure(paper)
print(f"saved {save_figure(fig, '07_paper_sizes', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
auto_row, big = paper_frame.loc["lookahead"], paper_frame.loc[paper_label]


def interval(row):
    return f"{row['speed-up vs autoregressive']:.2f}× [95% interval {row['95% low']:.2f}, {row['95% high']:.2f}]"


from specdec_lab.bench.report import speedup_interval


def per_forward(rows):  # bench rows with forwards in place of seconds: their tokens / "seconds" = tokens per step
    return [{**r, "seconds": r["forwards"]} for r in rows]


ci_step = speedup_interval(*(per_forward([r for r in paper["rows"] if r["method"] == m]) for m in (paper_label, "lookahead")))
step_ci = (f"ratio {big['tokens per step'] / auto_row['tokens per step']:.2f}, 95% interval "
           f"{ci_step[0]:.2f}–{ci_step[1]:.2f}, paired bootstrap over the prompts" if ci_step else
           "too few prompts for an interval")  # fmt: skip
more = ("more" if ci_step and ci_step[0] > 1 else "fewer" if ci_step and ci_step[1] < 1 else
        "about as many (within noise: the interval holds 1)")  # fmt: skip
faster = big["speed-up vs autoregressive"] > auto_row["speed-up vs autoregressive"]
overlap = not (big["95% low"] > auto_row["95% high"] or auto_row["95% low"] > big["95% high"])  # (nan: unknown)
if overlap:  # the intervals decide: their point estimates alone would order two runs within the prompts' spread
    verdict = (f"On {machine_label(mach)}, which ran the bench, the two **cannot be told apart** on these prompts: "
               f"{interval(big)} against {interval(auto_row)} (the intervals overlap)")  # fmt: skip
else:
    verdict = (f"On {machine_label(mach)}, which ran the bench, the paper's sizes are "
               f"**{'faster' if faster else 'slower'}**: {interval(big)} against {interval(auto_row)}")  # fmt: skip
Markdown(
    f"At the paper's sizes lookahead emits **{more}** tokens per step — {big['tokens per step']:.2f} against "
    f"{auto_row['tokens per step']:.2f} for `W=\"auto\"` ({step_ci}; `W=\"auto\"` ended on W ∈ "
    f"{{{auto_row['widths chosen']}}} per prompt and verified a window in {auto_row['steps with a window']:.0%} of "
    "its steps) — and each of its forwards verifies "
    f"{big['tokens verified / forward']:.1f} tokens on average, against {auto_row['tokens verified / forward']:.1f}. "
    + verdict + f". Where a forward of {big['tokens verified / forward']:.0f} tokens costs what one costs (the flat curve of "
    f"section 5), the model would put the speed-up at the tokens per step itself, {big['tokens per step']:.2f}× — a "
    "prediction, not a measurement: that model leaves out the proposer's own Python time (section 5), and no output "
    "here times such a machine. Notebook 09's re-decided what-if asks which sizes each method would choose "
    "under such a curve."
)  # fmt: skip

# %% [markdown]
# ## 7. Token Recycling: the target's own past guesses as a draft
#
# Lookahead keeps the window's n-grams; [Token Recycling](https://arxiv.org/abs/2408.08696) (Luo et al. 2024)
# keeps even less. Every verify forward computes $p(\cdot \mid \text{path to node})$ at *every* node of the
# tree, and decoding uses one token of it. Keep instead, for every token $v$ of the vocabulary, the 8 tokens
# the target last ranked highest after $v$: a table $M$ of $V \times 8$ ids (`generate(method="recycle")`,
# `proposers/recycle.py`). After each verify, $M[v_j] \leftarrow \text{top-8}(\text{logits}_j)$ for every node
# $j$ (holding token $v_j$); to draft, walk the table from the root along rank paths — the node $(r_1, \dots, r_d)$ holds
# $M[\text{token of } (r_1, \dots, r_{d-1})][r_d]$. No model, no training, no prompt match needed; the tree is a
# function of what came before the step, so greedy acceptance emits autoregressive decoding's tokens and the one-hot
# tree rule keeps sampling exact. The paper verifies one 80-node tree on a GPU; here the cost model sizes the tree
# from the acceptance per (depth, rank) it counts on the run (`RankAcceptance`), as Medusa's trees are sized (06).
#
# **Predict, then run:** recycle needs no match in the text, prompt lookup does. On this model, will recycle emit
# more or fewer tokens per step than prompt lookup? (The bench at the end of this section answers it.)
#
# The picture first: one step of a recycle decode of this section's prompt — the tree its walk proposed, which
# nodes the target accepted (green), rejected (red) and the token it emitted itself (blue).

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.trace_reading import instructive_step
from specdec_lab.viz.lab_figures import lab_step_tree_figure

rec = generate(lm, ids, method="recycle", max_new_tokens=pool_tokens, trace=True)
shown = instructive_step(rec.steps)
fig = lab_step_tree_figure(rec, shown, tok)
print(f"saved {save_figure(fig, '07_recycle_step', FIGURES)}")
fig

# %% tags=["nbval-check-output"]
print(f"recycle == autoregressive, token for token: {rec.tokens == ar.tokens[: len(rec.tokens)]} "
      f"({len(rec.tokens)} tokens); steps that proposed a tree: {sum(s.proposed > 0 for s in rec.steps) > 0}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
table_facts = rec.proposer
Markdown(
    f"Over this decode the table held successors for {table_facts['table']['rows_known']} tokens, and the walk's "
    f"first guess below an accepted node was right an estimated {table_facts['acceptance']['a_depth1'][0]:.0%} of "
    f"the time (rank 0 at depth 1; rank 1: {table_facts['acceptance']['a_depth1'][1]:.0%}: estimates from this "
    "run's verified trees, each shrunk toward its rank's rate over all depths where its own counts are few). On "
    "those estimates and this machine's cost curve the cost "
    f"model verified {table_facts['mean_nodes']:.1f} drafted nodes per step on average; mean accepted "
    f"{rec.mean_accepted:.2f} tokens per forward, bonus included."
)  # fmt: skip

# %% [markdown]
# The measurement: the benchmark harness ran `recycle` beside prompt lookup on three prompts of every category
# (up to 128 new tokens each, fewer where the answer ends; a fresh table per prompt; parameter `recycle_bench`,
# command in `data/bench/README.md`). Both draft for free, but they propose differently — prompt lookup only what
# the text repeats, as one chain; recycle whatever the target ranked highest after a token before, as a tree — and
# the cost model sizes each by what it accepts, so more accepted per step can still run slower where it is paid
# for with wider verifies. Each category holds three prompts: its rows are shown, not ordered.

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.recycle import recycle_frame, recycle_sentence

recycle_record = json.loads(Path(recycle_bench).read_text())
print(f"{Path(recycle_bench).name}: measured on {file_machine(recycle_record['machine'])}")
display(recycle_frame(recycle_record).round(2).style.format(precision=2)
        .set_caption(f"{Path(recycle_bench).name}: speed-up over autoregressive and mean accepted"))  # fmt: skip
Markdown(recycle_sentence(recycle_record))

# %% [markdown]
# ## Check your understanding
#
# 1. Most of the window's guesses are wrong. Why does greedy lookahead still emit exactly the autoregressive
#    tokens?
#
#    <details><summary>Answer</summary>
#
#    The window's cells are non-candidate nodes: greedy acceptance never walks into them, and their K/V are
#    dropped. The n-gram nodes never attend to the window (the mask of section 2), so their logits are those of
#    verifying the n-grams alone, and greedy acceptance keeps an n-gram token only where it is the target's
#    argmax. The window changes which n-grams reach the pool, never which tokens are emitted.
#    </details>
#
# 2. Why does Jacobi iteration on a pretrained model fix about one token per forward, although it updates all
#    $n$ guesses at once?
#
#    <details><summary>Answer</summary>
#
#    The update at offset $j$ is the argmax after the *guessed* prefix $g_{<j}$. Only offset 1 has an all-real
#    context, so only it is sure to be right; once a guess is wrong, every later update is computed from a wrong
#    context, and a right token behind a wrong one cannot be accepted. A model trained for it (CLLMs) predicts
#    several tokens right from a partly wrong context; a pretrained one rarely does.
#    </details>
#
# 3. On the flat curve of section 5 the best grid point is the one that accepts most per forward. Why not on
#    this CPU's curve?
#
#    <details><summary>Answer</summary>
#
#    The speed-up is about the mean accepted divided by $t(\bar n)/t(1)$. On a flat curve the divisor is 1 for
#    any $\bar n$, so more tokens per step always wins. On a CPU the divisor grows with the tokens verified per
#    forward, and a wide window or a large $G$ adds more to $\bar n$ than its extra hits add to the mean accepted.
#    </details>

# %% [markdown]
# ## Exercises
#
# Each exercise has a stub cell (replace the `...`), a solution cell (removed from student copies) and a check
# cell that compares your answer with the library's own function.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — how many tokens does one lookahead step verify?
#
# A step's tree is the window (`levels` × `columns` cells; the root is cell (0, 0)) followed by the n-gram
# trie's `ngram_nodes` nodes. Write `step_nodes(columns, levels, ngram_nodes)`, and think about what a step
# whose window did not fit (`levels = columns = 0`) verifies. The check runs it on every step of the decodes of sections 2 and
# 3 and of a short decode with no window at all (`W=0`: pool verification only) — their `info["columns"]`,
# `info["levels"]` and `proposed` — against the size of the tree the library verified, `len(step.tree)`.

# %% tags=["exercise", "exercise-1"]
def step_nodes(columns, levels, ngram_nodes):
    ...


# %% tags=["solution", "exercise-1"]
def step_nodes(columns, levels, ngram_nodes):  # noqa: F811 - replaces the stub above
    return max(columns * levels, 1) + ngram_nodes  # window cells, the root among them (or the root alone)


# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.lab.course import check

no_window = generate(lm, ids, method="lookahead", W=0, N=pool_N, G=pool_G, seed=seed, max_new_tokens=8)
steps = [*demo.steps, *la.steps, *no_window.steps]
assert any(s.info["levels"] == 0 for s in steps) and any(s.info["levels"] > 0 for s in steps)  # both kinds
answer = None if step_nodes(4, 2, 3) is None else [
    step_nodes(s.info["columns"], s.info["levels"], s.proposed) for s in steps]  # fmt: skip
_ = check("the nodes of every lookahead step of sections 2 and 3, and of a decode without a window", answer,
          [len(s.tree) for s in steps],
          close=lambda a, r: a == r, hint="The root is window cell (0, 0): count it once, with or without a window.")

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — Jacobi iteration converges to greedy decoding
#
# On a tiny random model (`tiny_model`, no chat template: prompts are token ids), write `jacobi_step(block)`:
# one Jacobi update of a block of guesses for the tokens after `prompt_ids` — one forward of the model over
# `prompt_ids + block` (`tiny(torch.tensor([ids])).logits[0]`), and each guess replaced by the argmax at the
# position before it. The check iterates it from a block of copies of the last prompt token until nothing
# changes. It compares your first update, of that padding block, with the first forward of the library's Jacobi
# decoding (`generate(..., method="jacobi", init="repeat")`, its `info["after"]`), and the fixed point with greedy
# decoding (`generate(tiny, prompt_ids, method="autoregressive")`). An answer that calls `generate` is refused:
# the update is one forward of `tiny` and an argmax.

# %% tags=["exercise", "exercise-2"]
from specdec_lab import tiny_model
from specdec_lab.lab.course import watch

tiny = tiny_model(seed=seed)
prompt_ids, n = [5, 17, 42, 9], 8
_watch = watch(globals(), "generate")  # the check's reference


def jacobi_step(block):
    ...


# %% tags=["solution", "exercise-2"]
def jacobi_step(block):  # noqa: F811 - replaces the stub above
    with torch.no_grad():
        logits = tiny(torch.tensor([prompt_ids + block])).logits[0]  # (len, V): logits[i] predicts token i + 1
    start = len(prompt_ids) - 1  # the prompt's last position predicts the block's first token
    return logits[start : start + len(block)].argmax(dim=-1).tolist()


# %% tags=["check", "exercise-2", "nbval-check-output"]
hint = "The logits at position i predict token i + 1: the block's first guess comes from the prompt's last position."
padding = [prompt_ids[-1]] * n  # Santilli et al. start from padding: copies of one token
first_update = jacobi_step(list(padding))
_watch.begin_check()  # from here the references are the check's own
reference = _watch["generate"]  # the library's decoding, unwatched
library_jacobi = reference(tiny, prompt_ids, method="jacobi", n=n, init="repeat", max_new_tokens=n + 1, trace=True)
_ = check("one Jacobi update of the padding block", first_update, library_jacobi.steps[0].info["after"],
          close=lambda a, r: list(a) == r, hint=hint, watch=_watch)  # fmt: skip
block, updates = padding, 0
while (new := jacobi_step(block)) != block and updates <= n:  # each update fixes >= 1 more
    block, updates = new, updates + 1
greedy = reference(tiny, prompt_ids, method="autoregressive", max_new_tokens=n).tokens
assert library_jacobi.tokens[:n] == greedy  # the library's Jacobi decoding is greedy decoding too
_ = check("the fixed point of Jacobi iteration", block, greedy, close=lambda a, r: list(a) == r, hint=hint, watch=_watch)
print(f"the block stopped changing after {updates} updates (at most n = {n}: each fixes one more token at least)")

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★ — apply section 5's model to a new cost curve
#
# For every $(W, N, G)$ point of the sweep, predict its speed-up over autoregressive decoding on `bent`, a made-up
# cost curve that is nearly flat up to 16 tokens and then rises steeply (a machine between section 5's two;
# `bent(n)` is the seconds of a forward over $n$ tokens, interpolated). Use section 5's model: every forward of a
# point verifies the point's mean tokens per forward $\bar n$ (`tokens verified / forward`) and emits its mean
# accepted tokens; an autoregressive forward verifies one token and emits one; nothing else takes time. Work out
# what each decoder emits per second on `bent`, and return their ratio per point, a list in the sweep's row order.
# The reference is `predicted_speedups(sweep, {"bent": bent})`; an answer that calls it is refused.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.cost.curve import CostCurve
from specdec_lab.lab.course import watch

bent = CostCurve(sizes=[1, 8, 16, 32, 64], seconds=[0.020, 0.0203, 0.021, 0.027, 0.043], tree=True)  # made up
_watch = watch(globals(), "predicted_speedups")  # the check's reference
answer = ...  # one predicted speed-up per row of `sweep`

# %% tags=["solution", "exercise-3"]
answer = [row["mean accepted"] / (bent(row["tokens verified / forward"]) / bent(1)) for _, row in sweep.iterrows()]

# %% tags=["check", "exercise-3", "nbval-check-output"]
import math

_watch.begin_check()  # from here the references are the check's own
reference = list(_watch["predicted_speedups"](sweep, {"bent": bent})["predicted (bent)"])
_ = check("the predicted speed-ups of the sweep's points on the bent curve", answer, reference, watch=_watch,
          close=lambda a, r: len(a) == len(r) and all(math.isclose(x, y, rel_tol=1e-9) for x, y in zip(a, r, strict=True)),
          hint="Divide the mean accepted by the cost of a forward of n̄ tokens relative to one of a single token.")

# %% [markdown] tags=["exercise-4"]
# ### Exercise 4 ★★★ — one Jacobi step of the 2D window: harvest and slide
#
# A full window of $W = 4$ columns and $N - 1 = 3$ levels is given as `levels` (level 0 without its column 0,
# which is the root; then levels 1 and 2), with the step's `root` and `pred`, the target's argmax at the last
# level's cells. Write `window_step(levels, root, pred)` returning `(grams, next_levels)`: the $W$ n-grams it
# harvests (column $i$ read top-down, then `pred[i]`, as `(first token, tuple of the N − 1 after it)`) and the
# window after it slides by one (level 1 without its column 0 becomes level 0, every level moves up, `pred` is
# the new last level). The reference is the proposer's own `Window.step` (`proposers/lookahead.py`).

# %% tags=["exercise", "exercise-4"]
levels_given = [[11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]]
root, pred = 10, [40, 41, 42, 43]


def window_step(levels, root, pred):
    ...


# %% tags=["solution", "exercise-4"]
def window_step(levels, root, pred):  # noqa: F811 - replaces the stub above
    columns = zip([root, *levels[0]], *levels[1:], pred, strict=True)  # column i: offsets i .. i + N − 1
    grams = [(col[0], tuple(col[1:])) for col in columns]
    return grams, [levels[1][1:], *levels[2:], list(pred)]


# %% tags=["check", "exercise-4", "nbval-check-output"]
from specdec_lab.proposers.lookahead import Window


def _library_step(levels, root, pred):  # the proposer's own Window.step on a full window of these levels
    window = Window(4, 4, fresh=lambda: 0)
    window.levels = [list(level) for level in levels]
    harvested = window.step(root, pred)
    return [(int(k), tuple(map(int, g))) for k, g in harvested], [list(map(int, lv)) for lv in window.levels]


def _plain(result):  # (grams, levels) as lists and tuples, whatever sequences the answer used
    grams, levels = result
    return [(k, tuple(g)) for k, g in grams], [list(lv) for lv in levels]


_second = ([[51, 52, 53], [60, 61, 62, 63], [70, 71, 72, 73]], 50, [80, 81, 82, 83])  # a window of the check's own
_answers = [window_step(levels_given, root, pred), window_step(*_second)]
_ = check("the harvested n-grams and the slid window, on the window above and on a second one of the check's own",
          None if any(a is None for a in _answers) else _answers,
          [_library_step(levels_given, root, pred), _library_step(*_second)],
          close=lambda a, r: [_plain(x) for x in a] == r,
          hint="Column 0 starts with the root; the new level 0 drops level 1's column 0.")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - Jacobi iteration's fixed point is greedy decoding, but on a pretrained model each forward fixes about one
#   token: a guess is only as good as the guessed context it was predicted from.
# - Lookahead turns the Jacobi trajectory into n-grams and verifies the ones that start with the current token;
#   its 2D window is an ordinary token tree of non-candidate nodes, and the reference code's hand-written mask
#   is that tree's ancestor mask.
# - Greedy lookahead emits exactly the autoregressive tokens at every $(W, N, G)$ of the sweep; only the speed
#   depends on the sizes.
# - The speed-up is about the mean accepted over the relative cost of the forward: sizes chosen for a flat
#   (GPU) cost curve verify far more tokens than a CPU pays for, which is why `W="auto"` sizes the window from
#   the measured curve.
# - Token Recycling drafts from the target's own past top-8 per token, walked into a tree: no model and no
#   training, exact like every method here; whether it pays on this model, against plain decoding and against
#   prompt lookup, is section 7's measured sentence, with its intervals.
#
# ## Further reading
#
# - [Break the Sequential Dependency of LLM Inference Using Lookahead Decoding](https://arxiv.org/abs/2402.02057)
#   (Fu et al. 2024): the 2D window, the n-gram pool and the sizes of section 6.
# - [Accelerating Transformer Inference for Translation via Parallel Decoding](https://arxiv.org/abs/2305.10427)
#   (Santilli et al. 2023): Jacobi decoding, section 1.
# - [CLLMs: Consistency Large Language Models](https://arxiv.org/abs/2403.00835) (Kou et al. 2024): fine-tuning
#   a model so that Jacobi iteration converges in fewer steps.
# - [Prompt Lookup Decoding](https://github.com/apoorvumang/prompt-lookup-decoding) (repository): n-grams from
#   the prompt alone, the text half of lookahead's pool.
# - [Turning Trash into Treasure: Accelerating Inference of Large Language Models with Token
#   Recycling](https://arxiv.org/abs/2408.08696) (Luo et al. 2024): the successor table and its static tree,
#   section 7.
