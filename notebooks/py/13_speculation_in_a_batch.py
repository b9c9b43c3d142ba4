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
# # 13 · Speculation in a batch
#
# Every notebook so far decoded one prompt at a time. A server decodes many: B requests share each target
# forward, and that changes what speculation buys. Verifying a few extra tokens costs far less than decoding them
# one step each only while a step is bound by reading the weights; enough rows × tokens push it toward compute-bound, and each drafted token then
# costs a larger share of what decoding a token costs (section 2 measures that share at each B). This notebook runs every method on a batch through the same loop —
# each row proposes its own tree, one forward verifies all of them, each row accepts its own path — and lets the
# one cost model decide how much to speculate at each batch size.
#
# ### Learning objectives
#
# After this notebook you can:
#
# - **build** the attention mask of one forward over B rows at different cache lengths (ragged rows, padding);
# - **explain** ragged acceptance and continuous batching, and read them off a rows × steps grid;
# - **measure** the step's price t(B, n) and predict from it where speculation stops paying;
# - **choose** a draft length at batch size B from a measured curve, as the loop's sizers do, and compare the
#   choice with the policies vLLM and SGLang ship;
# - **plan** one width for a whole batch step from the rows' expected gains and t(B, N), and read the lever's
#   effect off a bench that runs it off and on.
#
# ### Prerequisites
#
# Notebooks 00 (the loop, the cost curve t(n)), 01 (α, k, E[L], the optimal k), 04 (tree attention) and 06 or 10
# (a tree method). Notation: notebook 00's table — p, q, α, k, c, τ, L, E[L], and "mean accepted" (tokens emitted
# per target forward, bonus included); B is the batch size, n the tokens one row verifies in a step, P_b the
# committed prefix (cached tokens) of row b.
#
# 1. one forward over B rows, drawn small: the 4D mask;
# 2. the price of a step, t(B, n);
# 3. ragged acceptance and continuous batching, live;
# 4. how much to speculate at B: the sizers' choices beside vLLM's and SGLang's policies;
# 5. the batched bench: speedup, throughput and latency by batch size;
# 6. what the price leaves out: a speculation gate, measured;
# 7. one width for the whole step: the planner, a lever measured;
#
# then questions, exercises, takeaways and further reading.

# %% tags=["parameters"]
quick: bool = False  # CI: a smaller live batch (same code paths)
policy_file: str = "../data/curves/batch_policy-amx.json"  # t(B, n) and the sizers' choices (bench.batch_policy)
bench_file: str = "../data/bench/amx-batched-28x64-r2.json"  # the batched bench (bench.batched)
gate_file: str = "../data/bench/amx-batched-gate-28x64-r2.json"  # the same bench with the speculation gate (§6)
levers_file: str = "../data/bench/avx512-batched-levers-21x48-r2.json"  # the bench with the planner off and on (§7)
demo_prompts: int = 6  # prompts of the live batch (section 3)
demo_batch: int = 3  # its rows
demo_tokens: int = 48  # new tokens per prompt
demo_method: str = "prompt_lookup"  # the method of the live batch

# %%
if quick:
    demo_prompts, demo_tokens = 4, 16

from specdec_lab.lab.course import start

FIGURES = start("../results/figures" if quick else "../figures", stem="13_speculation_in_a_batch")

# %% [markdown]
# ## 1. One forward over B rows
#
# Each row is a sequence with its own committed prefix of P_b tokens (its K/V in the cache) and its own tree. (P_b,
# not L: notebook 00's L counts the tokens one target forward emits.) One forward takes them all: the node tokens
# as a (B, N) batch padded to the largest tree, positions P_b + depth, and one additive mask per
# row over the shared cache slots — a node sees its row's committed slots and its own ancestors; a padding node
# sees only its own slot, so every softmax has a term and nothing leaks between rows. Rows advance by different
# counts afterwards (each keeps its own accepted path): the slots stay per row, which is why the batch keeps one
# cache buffer with a length per row (`specdec_lab.kv_cache.RowsCache`) rather than one length for all.

# %%
import torch

from specdec_lab.trees import Tree
from specdec_lab.verify import rows_attention_mask
from specdec_lab.viz.batching import rows_mask_figure

trees = [Tree(torch.tensor([7, 8, 9, 10]), torch.tensor([-1, 0, 0, 1])), Tree.chain(3, [4]), None]
lengths = [2, 4, 3]  # each row's committed prefix P_b
tokens, positions, mask = rows_attention_mask(trees, lengths, torch.float32)
print("tokens (B, N):", tokens.tolist())
print("positions (B, N):", positions.tolist())
rows_mask_figure(mask, lengths)

# %% [markdown]
# Row 0 verifies a branching tree of 4 nodes after 2 committed slots; row 1 a chain of 2 after 4; row 2 has no
# tree (it finished, or waits for a prompt) and takes part as padding only. The dashed line is each row's P_b.

# %% [markdown]
# ## 2. The price of a step: t(B, n)
#
# `bench.batch_policy` measured one forward over B rows of n tokens each (`cost.measure_cost_curve(rows=B)`),
# for every B the bench runs. The solid lines are a step's time in ms, the dotted ones the ms per token
# verified: while they fall steeply, a wider step costs far less than its tokens would one step each (the weights
# are read once for all rows and tokens); where they flatten, the step's time grows with its tokens — it is closing on compute-bound, and a
# drafted token's discount shrinks. The table after the figure measures, at each B, what a drafted token costs
# as a share of what decoding a token costs.
#
# **Predict, then run.** Before running the next two cells, write down your guess: at the largest B, does a
# step of 8 tokens per row cost more or less, *relative to a step of 1*, than at B = 1? The sentence under the
# figure gives the measured answer.

# %%
import json

from specdec_lab.cost import CostCurve
from specdec_lab.viz.batching import cost_by_batch_figure

with open(policy_file) as f:
    policy = json.load(f)
curves = {int(b): CostCurve.from_dict(c) for b, c in policy["curves"].items()}
print(f"measured on: {policy['machine']['cpu']} · {policy['machine']['isa']} (this file's machine)")
cost_by_batch_figure(curves)

# %% tags=["prediction"]
from IPython.display import Markdown, display

from specdec_lab.lab.course import compare

small, large = min(curves), max(curves)
ratio = {b: curves[b](8) / curves[b](1) for b in sorted(curves)}
steps = list(ratio.values())
monotone = all(y > x for x, y in zip(steps[:-1], steps[1:], strict=True))
every_b = ", ".join(f"{r:.2f}× at B = {b}" for b, r in ratio.items())
display(Markdown(compare(
    ratio[large], ratio[small],
    f"At B = {large} a step of 8 tokens per row costs {{a:.2f}}× a step of 1, against {{b:.2f}}× at B = {small}: "
    + ("the ratio rises with every B measured — the wider the batch, the dearer each extra token, and speculation "
       "has less room." if monotone else
       f"dearer at the widest batch than at the narrowest, though not step by step ({every_b}; the file records "
       "no spread, so neighbouring B are not ordered here)."),
    f"At B = {large} a step of 8 tokens per row costs {{a:.2f}}× a step of 1, no more than the {{b:.2f}}× at "
    f"B = {small}: on the file's machine the batch has not made extra tokens dearer.",
)))  # fmt: skip

# %% [markdown]
# How close to compute-bound does each B come? A step bound by reading the weights costs about the same whatever
# its tokens; a compute-bound one costs in proportion to them. The exponent e of t(B, n) ∝ n^e over the widest
# doubling measured (n₁ to n₂ = 2n₁ tokens per row), e = log(t(B, n₂) / t(B, n₁)) / log(n₂ / n₁), says how the
# step's time scales: near 0 doubling is nearly free, near 1 it doubles the step. It does not say what a drafted
# token costs against decoding one — that is a second quantity. A decode step emits B tokens for t(B, 1), so a
# decoded token costs t(B, 1) / B. Adding n₂ − n₁ tokens to each of the B rows costs t(B, n₂) − t(B, n₁), so a
# drafted token at the margin costs (t(B, n₂) − t(B, n₁)) / (B (n₂ − n₁)). Their ratio is the share
# r(B) = (t(B, n₂) − t(B, n₁)) / ((n₂ − n₁) · t(B, 1)): near 0 a drafted token is nearly free, at 1 it costs
# what decoding a token does. (The file records no spread between its repeats, so a difference of a few
# hundredths between two B is not a finding.)

# %%
import math

import pandas as pd

n2 = max(curves[small].sizes)  # the widest step measured, and the widest at most half of it: a doubling
n1 = max(n for n in curves[small].sizes if n <= n2 / 2)
exponent = {b: math.log(c(n2) / c(n1)) / math.log(n2 / n1) for b, c in curves.items()}
share = {b: (c(n2) - c(n1)) / ((n2 - n1) * c(1)) for b, c in curves.items()}  # drafted token / decoded token
display(pd.DataFrame({
    f"tokens per forward at n = {n2} (B·n)": {b: b * n2 for b in curves},
    f"t(B, {n2}) / t(B, {n1})": {b: c(n2) / c(n1) for b, c in curves.items()},
    f"exponent e ({n1}→{n2} tokens per row)": exponent,
    "decoded token, ms: t(B, 1) / B": {b: 1e3 * c(1) / b for b, c in curves.items()},
    f"drafted token, ms ({n1}→{n2})": {b: 1e3 * (c(n2) - c(n1)) / (b * (n2 - n1)) for b, c in curves.items()},
    "share r (drafted / decoded)": share,
}).rename_axis("B").round(2))  # fmt: skip
dearest = max(share, key=share.get)
# every B's exponent is listed; the file records no spread, so neighbouring B are not ordered (the prose above)
_path = ", ".join(f"{exponent[b]:.2f} at B = {b}" for b in sorted(exponent))
Markdown(
    compare(
        exponent[large], exponent[small],
        f"The exponent is {{b:.2f}} at B = {small} and {{a:.2f}} at B = {large} ({_path}; with no spread recorded, "
        f"only the widest batch against the narrowest is read here, not neighbouring B): at the widest batch more of "
        f"a step's time is decided by its tokens than at B = {small}. ",
        f"The exponent is {{b:.2f}} at B = {small} and {{a:.2f}} at B = {large}: the batch did not bring the step "
        "closer to compute-bound on the file's machine. ",
    )
    + compare(
        share[large], share[small],
        f"A drafted token's share of a decoded token's cost goes from {{b:.0%}} at B = {small} to {{a:.0%}} at "
        f"B = {large}",
        f"A drafted token's share of a decoded token's cost is {{b:.0%}} at B = {small} and {{a:.0%}} at B = {large}",
    )
    + (f"; the largest share measured, {share[dearest]:.0%} at B = {dearest}, "
       + ("is close to the full price of decoding: speculation there has little discount left."
          if share[dearest] >= 0.8 else
          "is still under the price of decoding a token: on the forward's price alone a drafted token keeps a "
          "discount at every B measured. Whether drafting pays at the widest batch is the bench's to say (section "
          "5): the step is more than the forward (section 6).")
       + f" (Widest steps: {large * n2} tokens per forward at B = {large}, on the file's machine.)")
)  # fmt: skip

# %% [markdown]
# ## 3. Ragged acceptance and continuous batching, live
#
# `generate_batch` decodes a list of prompts B rows at a time with one method. Each step every active row
# proposes, one forward verifies all trees, and each row accepts its own path — so rows advance by different
# counts. A row that emits EOS or spends its budget frees its slot, and the next waiting prompt is prefilled into
# it while the others go on: a long answer does not hold a short one's slot.

# %%
from specdec_lab import generate, generate_batch, load_model
from specdec_lab.io import load_prompts

lm = load_model("smollm2-135m")
texts = [p.text for p in load_prompts()[::9][:demo_prompts]]  # one prompt from every few, several categories
batch = generate_batch(lm, texts, demo_method, max_new_tokens=demo_tokens, batch_size=demo_batch)
alone = [generate(lm, t, max_new_tokens=demo_tokens).tokens for t in texts]
same = sum(r.tokens == a for r, a in zip(batch.results, alone, strict=True))
print(f"{demo_method}, {demo_prompts} prompts on {demo_batch} rows: {same} of {demo_prompts} prompts' answers equal "
      "autoregressive decoding of the prompt alone")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.batching import ragged_figure

ragged_figure(batch.grid)

# %% [markdown]
# Each column is one batched forward; a cell holds the tokens that row emitted in it (its accepted drafts plus
# the bonus), blank where the row was padding. Hover to see which prompt a row was decoding: when a row finishes,
# the next prompt takes it over.

# %% [markdown]
# ## 4. How much to speculate at batch size B
#
# Each row sizes its drafts on t(B, n) (`StepCost` with `rows=B`): the sizers are the ones of the single-sequence
# loop, only the price changed. The table lists what they choose on the measured curves — a chain of free drafts
# (prompt lookup's) at three acceptance rates α, and Medusa's tree for the shipped heads (its drafted nodes, the
# root not counted) — beside the draft
# length vLLM's documented EAGLE-3 example uses at that many running requests (its own model and GPU).

# %%
import pandas as pd

table = pd.DataFrame(policy["chosen"]).set_index("batch_size")
# Medusa's budget counts drafted nodes, the root (the last committed token) excluded; section 5's `nodes_per_step`
# counts every token a step verifies, root included
table.rename(columns={"medusa_nodes": "medusa_nodes (drafted, root excluded)"})

# %%
for p in policy["published"]:
    print(f"{p['system']} ({p['setting']}): {p['rule']}\n  source: {p['source']}")

# %% tags=["nbval-ignore-output"]
import ipywidgets as W

from specdec_lab.lab.widgets import Dashboard
from specdec_lab.medusa.drafter import get_drafter
from specdec_lab.viz.batching import policy_view

accuracies = get_drafter("default", lm.model).accuracies.model("independent")
slider = W.SelectionSlider(options=sorted(curves), value=small, description="B")


def sizes_view(b: int):
    """policy_view's figure, and its row of sizes as a small two-column table (section 4's columns)."""
    fig, row = policy_view(curves, b, accuracies)
    sizes = pd.Series(row, name="chosen", dtype=object)
    sizes = sizes.rename({"medusa_nodes": "medusa_nodes (drafted, root excluded)"})
    return fig, sizes.rename_axis("column").to_frame()


dashboard = Dashboard({"b": slider}, sizes_view, initial=sizes_view(small),
                      what="the sizes chosen at the smallest B")  # fmt: skip
dashboard  # the controls, and a snapshot of the default view

# %% [markdown]
# ## 5. The batched bench: speedup, throughput and latency by B
#
# `python -m specdec_lab.bench.batched` ran every method on benchmark prompts from every category at each batch
# size, prompts fed from a queue (the cell prints the file's command and machine; `data/bench/README.md` indexes
# it). Speedup is tokens/s over batched autoregressive decoding at the same B, in the same run; `speedup_range`
# is the lowest and highest speedup of single repeats, each paired with autoregressive's repeat — how far one
# run's ratio moved on a shared machine. The kept `speedup` is the fastest repeat over autoregressive's fastest;
# the two may be different rounds, so it can lie outside `speedup_range`. The dashed line is EAGLE-3's published
# speedup by batch size in SGLang on an H100 with Llama-3.1-8B (EAGLE-3 paper, arXiv 2503.01840, Table 3; another
# model and device: compare its shape, not its level).

# %%
from specdec_lab.lab.batch_levers import split_by_side
from specdec_lab.viz.batching import speedup_by_batch_figure, throughput_latency_figure

with open(bench_file) as f:
    bench = json.load(f)
summary = [r for r in bench["summary"] if "error" not in r]
cfg = bench["config"]
print(f"measured on: {bench['machine']['cpu']} · {bench['machine']['isa']} (this file's machine)\n"
      f"{cfg['prompts']} prompts × {cfg['max_new_tokens']} new tokens, {cfg['repeats']} repeat(s) per (B, method), "
      f"the fastest kept\ncommand: {bench.get('command', '(not recorded)')}")  # fmt: skip
skipped = {}  # (method, why) -> the batch sizes the bench left it out at (its reason, without an exception name)
for r in bench["summary"]:
    if "error" in r:
        why = (
            r["error"].split(": ", 1)[-1]
            if r["error"].split(":", 1)[0].endswith(("Error", "Exception"))
            else r["error"]
        )
        skipped.setdefault((r["method"], why), []).append(r["batch_size"])
for (method, why), sizes in skipped.items():
    print(f"left out: {method} at B = {', '.join(map(str, sizes))} ({why})")
EAGLE3_TABLE3 = {"EAGLE-3, SGLang, H100 (published)": {1: 2.36, 8: 1.62, 32: 1.32}}  # source: arXiv 2503.01840 Table 3
speedup_by_batch_figure(summary, EAGLE3_TABLE3)

# %%
by_b = pd.DataFrame(summary).set_index(["batch_size", "method"])
display(by_b[["tokens_per_s", "speedup", "speedup_range", "latency_median_s", "latency_p90_s"]])  # speed
# what each row's steps did
by_b[["mean_accepted", "nodes_per_step", "speculated", "identical"]].rename(
    columns={"nodes_per_step": "nodes_per_step (root included)"})  # fmt: skip

# %% [markdown]
# Two tables, one per kind of column. `tokens_per_s` is every prompt's new tokens over the run's wall time at that B; `speedup` its ratio to
# batched autoregressive; `latency_*` the seconds from the start until a request's last token (median, 90th
# percentile); `mean_accepted` tokens per target forward per row, bonus included; `nodes_per_step` the tokens a
# row verified per step, root included, averaged over the run's steps (section 4's `medusa_nodes` counts drafted
# nodes only, so a tree of n drafted nodes verifies n + 1 here). The two need not agree: section 4 is one fixed
# choice on the policy file's curve and the heads' calibration accuracies, while the live loop re-sizes every step
# on the curve it measured at warm-up, corrected by this run's load (`StepCost`), its trees' own acceptance
# (`trees.DepthCorrection`) and the heads' cost, and a row near its token budget drafts less; `speculated` the share of steps a gate let the rows speculate
# (section 6; `None` here: this run had no gate); `identical` the rows equal to single-sequence autoregressive
# decoding of their prompt. `hf_generate` is transformers' own loop, which decodes without drafting and records no
# steps of ours: its `mean_accepted` and `nodes_per_step` are NaN (not measured), not zero.

# %%
throughput_latency_figure(summary)

# %%
best = {}
for r in summary:
    ours = r["method"] != "autoregressive" and not r["method"].startswith("hf_")  # our speculative methods
    if ours and r.get("speedup") and (r["batch_size"] not in best or r["speedup"] > best[r["batch_size"]][1]):
        best[r["batch_size"]] = (r["method"], r["speedup"])
lo, hi = min(best), max(best)
by_row = {(r["batch_size"], r["method"]): r for r in summary}
ranges = [by_row[(b, best[b][0])].get("speedup_range") for b in (lo, hi)]
moved = max(((top - low) / low for low, top in filter(None, ranges)), default=0.0)  # single repeats, over the lower
# is the fall speculation's room shrinking? The method that drafted least at the widest B, priced on the forward:
# per row at its own mean width, 1 + its drafted nodes, on section 2's curve t(B, n), but the forward pads every
# row to the step's widest tree, and one row drafting a single node already makes it t(B, 2) / t(B, 1) — the bench
# does not record each step's widest tree, so the two prices bracket what the forward alone may cost.
least = min((r for r in summary if r["batch_size"] == hi and r["method"] != "autoregressive"
             and not r["method"].startswith("hf_") and r.get("speedup") and r.get("nodes_per_step") is not None
             and not math.isnan(r["nodes_per_step"])), key=lambda r: r["nodes_per_step"], default=None)  # fmt: skip
outside = ""
if least is not None and hi in share and hi in curves:
    drafted_nodes = least["nodes_per_step"] - 1
    priced_drafts = curves[hi](1 + drafted_nodes) / curves[hi](1) - 1.0  # t(B, 1 + d) / t(B, 1) − 1: no padding
    padded_one = curves[hi](2) / curves[hi](1)  # the forward when any one row drafts one node: all rows pad to 2
    # per step, the forward's unit: a step emits mean_accepted tokens where a plain step emits one, so its steps took
    # mean_accepted / speedup plain steps' time (per token it is 1 / speedup: not the unit of t(B, 2) / t(B, 1))
    step_ratio = least["mean_accepted"] / least["speedup"]
    rng_l = least.get("speedup_range")
    below_plain = bool(rng_l) and rng_l[1] < 1.0  # every single repeat below plain batched decoding
    # how far its repeats moved the step ratio (mean_accepted / each repeat's speedup, the kept one included)
    step_moved = (max(rng_l[1], least["speedup"]) / min(rng_l[0], least["speedup"]) - 1.0) if rng_l else 0.0
    if below_plain and drafted_nodes > 0:
        outside = (
            f" Is all of that less room for speculation? At B = {hi}, {least['method']} drafted the least, "
            f"{drafted_nodes:.2f} nodes per row per step on average ({least['mean_accepted']:.2f} tokens emitted per "
            f"forward); priced at each row's own width, t({hi}, {1 + drafted_nodes:.2f}) / t({hi}, 1) on section 2's "
            f"curve, that is about {priced_drafts:.0%} more than a plain step, but the forward pads every row to the "
            f"step's widest tree, and one row "
            f"drafting a single node already makes it t({hi}, 2) / t({hi}, 1) = {padded_one:.2f}× a plain step "
            f"(section 2's curve). It ran at {least['speedup']:.2f}× end to end (every single repeat below plain "
            f"decoding; the wall time holds every row's prefill, which this file does not time apart), so each of its "
            f"steps ({least['mean_accepted']:.2f} tokens), its share of the prefills counted in, took "
            f"{least['mean_accepted']:.2f} / {least['speedup']:.2f} = {step_ratio:.2f}× a plain step's time: "
            + compare(
                step_ratio, padded_one,
                "more than a one-node padded forward costs (if its prefills cost what plain decoding's do), but the "
                "bench does not record each step's widest tree, so this run cannot split the loss between wider padded trees and the per-row work outside the "
                "forward (proposers, acceptance, K/V writes; section 6).",
                "within what the padded forward alone can cost, so this run does not show how much of the loss "
                "lies outside the forward (proposers, acceptance, K/V writes; section 6) — the bench does not "
                "record each step's widest tree.",
                "level with what a one-node padded forward costs, within how far its repeats moved that ratio "
                "({moved:.0%}), so this run does not show how much of the loss lies outside the forward "
                "(proposers, acceptance, K/V writes; section 6) — the bench does not record each step's widest tree.",
                rel_tol=step_moved, moved=step_moved,
            )
        )  # fmt: skip
display(Markdown(compare(
    best[lo][1], best[hi][1],
    f"Our best method's speedup falls from {{a:.2f}}× at B = {lo} ({best[lo][0]}) to {{b:.2f}}× at B = {hi} "
    f"({best[hi][0]}): the batch wore the gain down." + outside,
    f"Our best method's speedup is {{a:.2f}}× at B = {lo} ({best[lo][0]}) and {{b:.2f}}× at B = {hi} "
    f"({best[hi][0]}): in this file's run the batch did not shrink it.",
    f"Our best method's speedup is {{a:.2f}}× at B = {lo} ({best[lo][0]}) and {{b:.2f}}× at B = {hi} "
    f"({best[hi][0]}): within how far single repeats moved them ({{moved:.0%}}), so this run cannot tell them apart.",
    rel_tol=moved, moved=moved,
)))  # fmt: skip
# at the widest B: which of our methods beat plain batched decoding in every single repeat (each repeat's ratio to
# autoregressive's paired repeat: `speedup_range`), lost to it in every one, or had repeats on both sides of 1 — the
# rule of `lab.batch_levers`, shared with section 7; this file has no no-effect control (autoregressive against its
# own paired repeat is 1 by construction), so its band is 0 and the repeats alone decide
at_widest = split_by_side({
    f"{r['method']} ({r['speedup']:.2f}×)": r.get("speedup_range") or [r["speedup"]]
    for r in summary
    if r["batch_size"] == hi and r["method"] != "autoregressive" and not r["method"].startswith("hf_") and r.get("speedup")
})  # fmt: skip
display(Markdown(
    f"At the widest batch, B = {hi}, against plain batched decoding, each method judged by its single repeats "
    f"({cfg['repeats']} per method; faster: every repeat above it; slower: every repeat below; within noise: repeats "
    "on both sides — this file has no no-effect control to widen that band): "
    + (f"faster — {', '.join(at_widest['faster'])}" if at_widest["faster"] else "no method was faster")
    + (f"; slower — {', '.join(at_widest['slower'])}" if at_widest["slower"] else "; none was slower")
    + (f"; within noise — {', '.join(at_widest['within'])}" if at_widest["within"] else "")
    + "."
))  # fmt: skip

# %% [markdown]
# ## 6. What the price leaves out: a speculation gate, measured
#
# The sizers price a step by t(B, n), the target's forward. At B rows a step also runs every row's proposer and
# acceptance one after the other in Python, writes each row's K/V at its own length, and pads every row to the
# widest row's tree; all of that grows with B and none of it is in t(B, n) at the row's own n, the price its sizer
# sees. So each row's sizer can still see a draft that pays while the batch as a whole loses. A gate (`specdec_lab.cost.gate.SpeculationGate`,
# `generate_batch(..., gate=True)`, `bench.batched --gate`) measures instead of assuming: it alternates speculating
# and plain steps (every row's depth capped at 0) on the same stretch of text, then runs the mode that emitted more
# tokens per second, and probes again. A plain step is not free for every method, though: EAGLE's and Medusa's
# drafters still follow the accepted tokens, and a speculating step after a plain one pays the drafter's catch-up.
# The tables set the same bench with the gate (`gate_file`, B ≥ 2: one row runs without a gate) beside the run
# above. Two runs also differ by the machine's own drift between them: `hf_generate`, which the gate does not
# touch, measures it, and a change the gate made counts only beyond that drift or the repeats' spread (their range
# widened to hold the kept ratio), whichever is larger; a change is read over the smaller of its two speedups, the
# scale `compare` uses.


# %%
def best_by_b(summary_rows):
    """{B: (method, speedup)} of the fastest method other than autoregressive and the transformers anchors."""
    out = {}
    for r in summary_rows:
        if r.get("speedup") is None or r["method"] == "autoregressive" or r["method"].startswith("hf_"):
            continue
        if r["batch_size"] not in out or r["speedup"] > out[r["batch_size"]][1]:
            out[r["batch_size"]] = (r["method"], r["speedup"])
    return out


with open(gate_file) as f:
    gate_run = json.load(f)
print(f"gate_file: {gate_run['machine']['cpu']} · {gate_run['machine']['isa']} (its machine)\n"
      f"command: {gate_run.get('command', '(not recorded)')}")  # fmt: skip
with_gate = [r for r in gate_run["summary"] if "error" not in r]
alone = best_by_b(summary)
gated = best_by_b(with_gate)
both = sorted(set(alone) & set(gated))


def best_label(summary_rows, b: int, top: tuple) -> str:
    """The fastest method at B = b, with the others whose single repeats overlap its own: not ordered by this run."""
    rows_b = {r["method"]: r for r in summary_rows if r["batch_size"] == b and r.get("speedup") is not None
              and r["method"] != "autoregressive" and not r["method"].startswith("hf_")}  # fmt: skip
    lo_t, hi_t = rows_b[top[0]].get("speedup_range") or (top[1], top[1])
    ties = [m for m, r in rows_b.items() if m != top[0] and r.get("speedup_range")
            and r["speedup_range"][0] <= hi_t and lo_t <= r["speedup_range"][1]]  # fmt: skip
    return f"{top[0]} {top[1]:.2f}×" + (f" (single repeats overlap: {', '.join(ties)})" if ties else "")


with pd.option_context("display.max_colwidth", None):  # the tie lists in full
    display(pd.DataFrame({
        "sizers alone: best": {b: best_label(summary, b, alone[b]) for b in both},
        "with the gate: best": {b: best_label(with_gate, b, gated[b]) for b in both},
    }).rename_axis("B"))  # fmt: skip

# %%
by_method = {(r["batch_size"], r["method"]): r for r in summary}
pd.DataFrame([{"B": r["batch_size"], "method": r["method"], "sizers alone": by_method[(r["batch_size"], r["method"])]["speedup"],
               "with the gate": r["speedup"], "steps speculated": r["speculated"]}
              for r in with_gate if r["method"] != "autoregressive" and not r["method"].startswith("hf_")
              and (r["batch_size"], r["method"]) in by_method]).set_index(["B", "method"])  # fmt: skip

# %%
gate_rows = {(r["batch_size"], r["method"]): r for r in with_gate}
CONTROL = "hf_generate"  # untouched by the gate: how far the same method moved between the two files


def row_spread(r: dict) -> float:
    """How far one row's speedup moved: its single repeats' range widened to hold the kept (fastest-over-fastest)
    ratio, which may pair different rounds and so fall outside that range; the span over its bottom (`compare`'s
    scale)."""
    if not r.get("speedup_range"):
        return 0.0
    lo, hi = min(r["speedup_range"][0], r["speedup"]), max(r["speedup_range"][1], r["speedup"])
    return (hi - lo) / lo


def change(new: float, old: float) -> float:
    """A signed change over the smaller of the two: the scale `compare`'s within-noise band uses."""
    return (new - old) / min(abs(new), abs(old))


def repeat_spread(b: int) -> float:
    """How far single repeats moved the two best methods' speedups at B = b (`row_spread` of each): the wider."""
    return max(row_spread(by_method[(b, alone[b][0])]), row_spread(gate_rows[(b, gated[b][0])]))


def control_drift(b: int) -> float:
    """How far the control's speedup moved between the two files at B = b, over the smaller: the two runs' own
    difference with nothing changed (0 where the control is missing from either file)."""
    x, y = by_method.get((b, CONTROL)), gate_rows.get((b, CONTROL))
    if not x or not y or not x.get("speedup") or not y.get("speedup"):
        return 0.0
    return abs(x["speedup"] - y["speedup"]) / min(x["speedup"], y["speedup"])


noise = {b: max(repeat_spread(b), control_drift(b)) for b in both}  # what a difference between the files must exceed
display(pd.DataFrame({
    "repeats' spread": {b: f"{repeat_spread(b):.1%}" for b in both},
    f"{CONTROL}'s drift between the files": {b: f"{control_drift(b):.1%}" for b in both},
    "gate's change of the best (over the smaller)": {b: f"{change(gated[b][1], alone[b][1]):+.1%}" for b in both},
    "steps the gated best speculated": {b: f"{gate_rows[(b, gated[b][0])]['speculated']:.0%}"
                                        if gate_rows[(b, gated[b][0])].get("speculated") is not None else "—" for b in both},
}).rename_axis("B"))  # fmt: skip
lowest = min(alone[b][1] for b in both)
# the batch sizes where the sizers alone did worst: every B within its repeats' range of the lowest speedup
worst_alone = [b for b in both if alone[b][1] - lowest <= repeat_spread(b) * alone[b][1]]
verdict = {b: compare(gated[b][1], alone[b][1], "faster", "slower", "within", rel_tol=noise[b]) for b in both}


def speculated(b: int) -> str:
    share = gate_rows[(b, gated[b][0])].get("speculated")
    if share is None:
        return "its share of speculating steps was not recorded"
    return f"{gated[b][0]} speculated on {share:.0%} of its steps"


display(Markdown(
    ("The sizers alone did worst at B = " + ", ".join(f"{b} ({alone[b][1]:.2f}×)" for b in worst_alone)
     + " — within the repeats' range of one another, so no one of them is the worst. "
     if len(worst_alone) > 1 else
     f"The sizers alone did worst at B = {worst_alone[0]} ({alone[worst_alone[0]][1]:.2f}×), beyond the repeats' "
     "range of every other B. ")
    + f"A change the gate made counts only beyond the noise between the two files — the larger of the repeats' "
    f"spread and how far {CONTROL}, which the gate does not touch, moved between them. Beyond it: "
    + ("; ".join(
        f"B = {b}, {alone[b][1]:.2f}× → {gated[b][1]:.2f}× "
        + (f"(faster with the gate; {speculated(b)})" if verdict[b] == "faster"
           else f"(slower with the gate: its probes and the drafters' work in plain steps cost more than it saved; "
                f"{speculated(b)})")
        for b in both if verdict[b] != "within"
    ) or "nowhere — at every B the best method's change is within noise")
    + " (this judges only each B's best method; method by method below)."
))  # fmt: skip
better = sum(v == "faster" for v in verdict.values())


def method_noise(b: int, m: str) -> float:
    """The noise one method's change between the files must exceed at B = b: the larger of its two rows' repeats'
    spread and the control's drift."""
    return max(row_spread(by_method[(b, m)]), row_spread(gate_rows[(b, m)]), control_drift(b))


pairs = sorted((b, m) for (b, m) in gate_rows if (b, m) in by_method and b in both and m != "autoregressive"
               and not m.startswith("hf_") and gate_rows[(b, m)].get("speedup") and by_method[(b, m)].get("speedup"))  # fmt: skip
per_method = {p: compare(gate_rows[p]["speedup"], by_method[p]["speedup"], "faster", "slower", "within",
                         rel_tol=method_noise(*p)) for p in pairs}  # fmt: skip


def listed(side: str) -> str:
    return ", ".join(f"{m} at B = {b} ({by_method[(b, m)]['speedup']:.2f}× → {gate_rows[(b, m)]['speedup']:.2f}×, "
                     f"{change(gate_rows[(b, m)]['speedup'], by_method[(b, m)]['speedup']):+.1%} against "
                     f"{method_noise(b, m):.1%} noise)" for (b, m) in pairs if per_method[(b, m)] == side)  # fmt: skip


n_faster = sum(v == "faster" for v in per_method.values())
n_slower = sum(v == "slower" for v in per_method.values())
display(Markdown(
    f"Method by method, each against the larger of its own repeats' spread and {CONTROL}'s drift at that B: "
    f"{n_faster + n_slower} of {len(pairs)} method × B changes lie beyond the noise"
    + (f" — faster with the gate: {listed('faster')}" if n_faster else " — none faster with the gate")
    + (f"; slower with the gate: {listed('slower')}" if n_slower else "; none slower")
    + "; the rest within noise."
))  # fmt: skip
if n_faster and n_slower:
    why = (f"the gate helped {n_faster} method × B beyond noise and hurt {n_slower}, so turning it on for every method "
           "would trade one for the other")  # fmt: skip
elif n_faster:
    why = f"the gate helped {n_faster} method × B beyond noise and hurt none, but "
    why += (f"moved each B's best method beyond noise at only {better} of {len(both)} batch sizes"
            if better <= len(both) / 2 else f"the best method at {better} of {len(both)} batch sizes")  # fmt: skip
elif n_slower:
    why = f"the gate hurt {n_slower} method × B beyond noise and helped none"
else:
    why = "no method's change lies beyond the noise"
display(Markdown(
    f"Across B = {both[0]}–{both[-1]} the gate's best method was faster than the sizers' alone, beyond the noise, at "
    f"{better} of {len(both)} batch sizes, slower at {sum(v == 'slower' for v in verdict.values())}"
    f", and within noise at {sum(v == 'within' for v in verdict.values())}. `generate_batch` leaves the gate off by "
    f"default: {why}; `gate=True` is a choice to measure per method and machine."
))  # fmt: skip

# %% [markdown]
# ## 7. One width for the whole step: the planner, a lever measured
#
# Section 6's list of what the sizers' price leaves out starts with padding: one forward runs every row at the
# widest row's tree (section 1's mask), so a step costs t(B, N) with N the largest tree, while each row priced its
# own n. The planner (`specdec_lab.cost.plan`) prices the step as the forward runs it: one width for every row, as
# SGLang and vLLM also set one speculation size for the whole batch (section 4's policies: vLLM's by the requests
# running, SGLang's by the accepted length). `generate_batch` runs it by default from four rows
# (`batch.Levers.default`; below four rows each row sizes its own tree): `levers="off"` turns it off,
# `levers="plan"` asks for it at any B. After the rows propose, it numbers each row's nodes j = 0, 1, …, n_b − 1
# in tree order — node 0 the root (the last committed token), n_b the row's nodes, root included — and gives node
# j of row b a gain g_bj, the chance it is accepted, learned on the batch per (depth, sibling rank); the root's
# g_b0 = 1 is the bonus token every row emits. It picks the one width N* that maximises the batch's expected tokens
# per second,
#
# $$N^* = \arg\max_N \frac{\sum_b \sum_{j=0}^{\min(N, n_b) - 1} g_{bj}}{t(B, N) + o},$$
#
# where o is the step's own overhead (the rows have drafted already: it is the same for every N). A row cut to
# N ≤ n_b nodes expects 1 + g_b1 + … + g_b(N−1) tokens, the root's 1 first (`cost.plan.width_rates`, whose
# `gains[b]` list starts with it). The planner then cuts every row's tree to its first N* nodes; N = 1 (every row a
# plain step) is always a candidate. The cut is made before
# the forward, as a `max_depth` cut is, so greedy rows still emit their prompts' own outputs. The next step's
# paid drafts (EAGLE's, Medusa's heads) are capped one deeper than N*, so a drafter that pays per token drafts
# little where little pays; prompt lookup's drafts cost nothing and are never capped.
#
# First the rule on one made-up step, priced on the policy file's t(4, n) (its machine): four rows, one with a
# long prompt-lookup match (five drafts), two with one draft, one with none, every draft surviving its parent with
# probability $s = 0.6$.

# %%
from specdec_lab.cost.plan import best_width, width_rates
from specdec_lab.viz.batching import width_plan_figure

s_demo = 0.6
demo_gains = [[s_demo**j for j in range(6)], [1.0, s_demo], [1.0, s_demo], [1.0]]  # g_bj, the root's 1 first
demo_rates = width_rates(demo_gains, curves[4])
demo_n, _ = best_width(demo_gains, curves[4])
widest_n = max(len(g) for g in demo_gains)
rate_of = {n: tok / sec for n, (tok, sec) in demo_rates.items()}
width_plan_figure(demo_rates, demo_n)

# %%
display(Markdown(
    f"Uncut, the step runs at the long row's width N = {widest_n}: {demo_rates[widest_n][0]:.2f} expected tokens in "
    f"t(4, {widest_n}) = {demo_rates[widest_n][1] * 1e3:.1f} ms, {rate_of[widest_n]:.0f} tokens/s. "
    + (f"The planner's N* = {demo_n} gives {rate_of[demo_n]:.0f} tokens/s ({rate_of[demo_n] / rate_of[widest_n]:.2f}× "
       f"the uncut step's, {rate_of[demo_n] / rate_of[1]:.2f}× a plain step's): every row but the long one is whole "
       f"at that width, and the long row's deep drafts were worth less than what they made the other three pay."
       if demo_n not in (1, widest_n) else
       f"Here N* = {demo_n}: " + ("plain steps, nothing drafted pays its padded price on this curve."
                                  if demo_n == 1 else "the whole trees: on this curve the padding is worth its price."))
))  # fmt: skip

# %% [markdown]
# Then the lever on the batched bench: `--levers off,plan` runs every speculative method twice in one run, with
# the planner off (each row sizes and prices its own tree, as in sections 5–6, whose files record no lever set: the
# planner was off there) and on; autoregressive and transformers' `generate` run with the levers off only (a plain
# step has nothing to cut), with the same repeats. This is another file than section 5's — the cell prints its
# machine and prompts beside section 5's, and how each file, by its own rule, judges a method against its own plain
# decoding at the same B. `plan / off` is a method's tokens/s with the planner over its own without, and the range
# beside it the same ratio repeat by repeat (the two paired by repeat); `decode-only` divides by the wall time less
# the rows' prefills, which the published batch tables compare.
#
# How far can plan / off move when the planner changes nothing? Where it cut no step and both runs decoded alike
# (same mean accepted, same nodes per step), plan / off would be 1 on a quiet machine: that pair is the file's
# no-effect control, and how far its repeats moved from 1 is the band a change must clear (`lab.batch_levers`, the
# rule section 5 uses with no control: every repeat beyond the band on one side).

# %%
from specdec_lab.lab.batch_levers import no_effect_band, planner_controls, repeat_ratios, side

with open(levers_file) as f:
    lever_run = json.load(f)
lcfg, bench_cfg = lever_run["config"], bench["config"]
same_machine = lever_run["machine"]["cpu"] == bench["machine"]["cpu"]
print(f"levers_file: {lever_run['machine']['cpu']} · {lever_run['machine']['isa']} (its machine), {lcfg['prompts']} "
      f"prompts × {lcfg['max_new_tokens']} new tokens, {lcfg['repeats']} repeats\n"
      f"section 5's bench_file: {bench['machine']['cpu']} · {bench['machine']['isa']}, {bench_cfg['prompts']} prompts × "
      f"{bench_cfg['max_new_tokens']} new tokens ({'the same' if same_machine else 'another'} machine, another run)\n"
      f"command: {lever_run.get('command', '(not recorded)')}")  # fmt: skip
lever_sum = {
    (r["batch_size"], r["method"], r.get("levers", "off")): r for r in lever_run["summary"] if "error" not in r
}
lever_runs = {(r["batch_size"], r["method"], r.get("levers", "off")): r for r in lever_run["runs"] if "error" not in r}


def per_repeat(b: int, m: str) -> list[float]:
    """plan / off of each repeat (the two runs paired by repeat): how far one run's ratio moved."""
    return repeat_ratios(lever_runs[(b, m, "plan")]["repeat_tokens_per_s"],
                         lever_runs[(b, m, "off")]["repeat_tokens_per_s"])  # fmt: skip


lever_rows = []
for (b, m, lv), r in sorted(lever_sum.items()):
    if lv != "plan" or (b, m, "off") not in lever_sum:
        continue
    off_r, reps = lever_sum[(b, m, "off")], per_repeat(b, m)
    lever_rows.append({
        "B": b, "method": m, "off: speedup": off_r["speedup"], "plan: speedup": r["speedup"],
        "off: decode-only": off_r["decode_speedup"], "plan: decode-only": r["decode_speedup"],
        "plan / off": r["vs_off"], "plan / off, per repeat": f"[{min(reps):.2f}, {max(reps):.2f}]",
        "mean width (plan)": (lever_runs[(b, m, "plan")].get("plan") or {}).get("mean_width"),
        "steps cut (plan)": (lever_runs[(b, m, "plan")].get("plan") or {}).get("cut"),
        "identical (plan)": r["identical"],
    })  # fmt: skip
with pd.option_context("display.max_colwidth", None):
    display(pd.DataFrame(lever_rows).set_index(["B", "method"]))


# this file's no-effect control (the pairs the planner never touched) and the band it sets: how far a paired ratio of
# this run moved with nothing changed; every ratio of this file is judged by it, here and in the next cell
controls = planner_controls(lever_run["runs"])
band = no_effect_band(controls.values())


# the two files against plain batched decoding at the B both measured, each by its own rule (`speedup_range`, the
# repeats): this file against its band, section 5's by its repeats alone (it has no control: band 0, as in section 5);
# a method they judge differently is the two machines', prompt sets' and runs' doing, not the planner's
def vs_plain(r: dict, band_r: float) -> str:
    return side(r.get("speedup_range") or [r["speedup"]], band_r)


judged = [(b, m, vs_plain(r, band), vs_plain(by_row[(b, m)], 0.0)) for (b, m, lv), r in sorted(lever_sum.items())
          if lv == "off" and m != "autoregressive" and not m.startswith("hf_") and r.get("speedup")
          and (b, m) in by_row and by_row[(b, m)].get("speedup")]  # fmt: skip
opposite = [o for o in judged if {o[2], o[3]} == {"faster", "slower"}]
differ = [o for o in judged if o[2] != o[3] and o not in opposite]
_word = {"faster": "faster", "slower": "slower", "within": "within noise"}
_rule = (f"this file's repeats against its no-effect band ({band:.1%}, the control in the next cell)" if controls else
         "this file's repeats alone (it has no no-effect control)")  # fmt: skip
display(Markdown(
    f"The `off` columns are this file's run, not section 5's ({'the same machine' if same_machine else 'another machine'}"
    f", {lcfg['prompts']} prompts × {lcfg['max_new_tokens']} tokens against {bench_cfg['prompts']} × "
    f"{bench_cfg['max_new_tokens']}). Against plain batched decoding at the batch sizes both measured, each file by "
    f"its own rule — {_rule}, section 5's by its repeats alone (no control there) — the two files put "
    + (", ".join(f"{m} at B = {b} on opposite sides ({here} in this file, {there} in section 5's)"
                 for b, m, here, there in opposite) if opposite else "no method on opposite sides")
    + (f"; they judge {len(differ)} of {len(judged)} method × B differently ("
       + "; ".join(f"{m} at B = {b}: {_word[here]} here, {_word[there]} in section 5's" for b, m, here, there in differ)
       + ")" if differ else "")
    + ": read each file's numbers against its own plain decoding, not across files."
))  # fmt: skip

# %%
# `controls` (the (B, method) pairs where the planner changed nothing) and their `band`: the cell above
sides = {"faster": [], "slower": [], "within": []}
for row in lever_rows:
    if (row["B"], row["method"]) in controls:
        continue  # the control itself: no effect by construction
    reps = per_repeat(row["B"], row["method"])
    sides[side(reps, band)].append(f"{row['method']} at B = {row['B']} ({row['plan / off']:.2f}×; repeats "
                                   f"{min(reps):.3f}–{max(reps):.3f})")  # fmt: skip
control_text = (
    "The run's own noise first: "
    + ", ".join(f"{m} at B = {b}, where the planner cut no step and both runs decoded alike, still moved plan / off "
                f"to {min(r):.3f}–{max(r):.3f} between repeats" for (b, m), r in controls.items())
    + f" — a {band:.1%} band (faster: every repeat above {1 + band:.3f}; slower: every one below "
    f"{1 / (1 + band):.3f}; within noise otherwise)."
    if controls else
    "This file has no no-effect control (the planner cut steps for every method), so the repeats alone decide "
    "(faster: every repeat above 1; slower: every one below; within noise: repeats on both sides)."
)  # fmt: skip
display(Markdown(
    control_text + " Judged so, the planner against the same method without it: "
    + (f"faster — {', '.join(sides['faster'])}" if sides["faster"] else "faster nowhere")
    + (f"; slower — {', '.join(sides['slower'])}" if sides["slower"] else "; slower nowhere")
    + (f"; within noise — {', '.join(sides['within'])}" if sides["within"] else "")
    + "."
))  # fmt: skip
# our plain batched step against transformers' batched generate, repeat by repeat (both run with the levers off in
# this file), judged by the same band: the control measures how far any paired ratio of this run moved
plain_vs_hf = {b: repeat_ratios(lever_runs[(b, "autoregressive", "off")]["repeat_tokens_per_s"],
                                lever_runs[(b, "hf_generate", "off")]["repeat_tokens_per_s"])
               for b in sorted({k[0] for k in lever_runs}) if (b, "hf_generate", "off") in lever_runs
               and (b, "autoregressive", "off") in lever_runs}  # fmt: skip
if plain_vs_hf:
    hf_sides = {b: side(r, band) for b, r in plain_vs_hf.items()}
    words = {"faster": "faster than `generate`", "slower": "slower than `generate`", "within": "within noise"}
    display(Markdown(
        "Our plain batched step over transformers' batched `generate` in this file, tokens/s repeat by repeat: "
        + "; ".join(f"B = {b}: {min(r):.2f}–{max(r):.2f}× ({words[hf_sides[b]]})" for b, r in plain_vs_hf.items())
        + (f" — judged by the same {band:.1%} band." if controls else " — judged by the repeats alone.")
    ))  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. Why does a padding node attend to its own cache slot rather than to nothing?
#
#    <details><summary>Answer</summary>A softmax over a row with every key masked is 0/0: NaN, which would spread
#    through the rest of the forward's arithmetic. One visible slot keeps it finite; the node's output is never
#    read and its K/V land past the row's committed length, dropped by the next `keep`.</details>
#
# 2. Two rows verify trees of 2 and 8 nodes in one step. What does the row with 2 nodes pay for the other's 8?
#
#    <details><summary>Answer</summary>Its padding: the forward computes B × 8 node positions, so the step costs
#    t(B, 8), not t(B, 2). Each row's sizer prices only its own n on the batch's curve t(B, n), so it does not see
#    that padding: it is one of the costs section 6 lists outside the sizers' price. The gate measures it on the
#    batch (section 6); the planner (section 7, on by default from four rows) prices it, one width N* for the whole
#    step at t(B, N*).</details>
#
# 3. Why can a batched row differ from the same prompt decoded alone under greedy decoding, and what would tell
#    a bug from rounding?
#
#    <details><summary>Answer</summary>A batched forward multiplies more rows at once, so its kernels sum in other
#    orders: fp32 results differ in the last bits and can flip a near-tie between the top two tokens. The bench
#    records the first differing token and the top-1 − top-2 logit gap there: a gap at rounding size is a tie; a
#    large gap is a bug.</details>

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — the mask of one row
#
# A row with a committed prefix of P = 3 tokens verifies a tree of N = 5 nodes with parents `[-1, 0, 1, 0, 3]`
# (two branches under the root, not row 0's tree above) in a forward over S = P + N = 8 slots, node i at slot
# P + i. Build its (N, S) boolean visibility: node i sees slot j if j < P (the committed prefix) or slot j holds
# one of its ancestors (itself included). The reference is `specdec_lab.verify.rows_attention_mask` (visible = the
# additive mask is 0), watched here: build it from the parents.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import check, watch

_watch = watch(globals(), "rows_attention_mask")
parents, prefix = [-1, 0, 1, 0, 3], 3
visible = ...  # a (5, 8) bool tensor

# %% tags=["solution", "exercise-1"]
visible = torch.zeros(len(parents), prefix + len(parents), dtype=torch.bool)
visible[:, :prefix] = True  # the committed prefix
for i in range(len(parents)):
    j = i
    while j >= 0:  # the node and its ancestors, at slots prefix + index
        visible[i, prefix + j] = True
        j = parents[j]

# %% tags=["check", "exercise-1", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
_tree = Tree(torch.arange(11, 11 + len(parents)), torch.tensor(parents))
check("the row's mask", visible, _watch["rows_attention_mask"]([_tree], [prefix], torch.float32)[2][0, 0] == 0,
      watch=_watch, hint="Walk each node's parents up to the root; slot P + i holds node i.")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — one chain, priced at every batch size
#
# Take one fixed chain of free drafts (prompt lookup's): $k = 3$ drafts, each accepted with $\alpha = 0.7$. For
# every measured batch size B, compute its speed-up over plain batched decoding at that B on the measured curve:
# E[L] · t(B, 1) / t(B, k + 1), with E[L] = (1 − α^{k+1}) / (1 − α) the tokens one step emits, bonus included
# (notebook 01). Answer `{B: speed-up}`. The same acceptance buys less wherever t(B, k + 1)/t(B, 1) is steeper: the
# curve decides, not B itself (section 2's ratios need not rise at every step of B). The reference is
# `specdec_lab.cost.theory.measured_speedup(α, k, t(B, 1), 0.0, curve)`, watched here.

# %% tags=["exercise", "exercise-2"]
from specdec_lab.cost.theory import measured_speedup  # noqa: F401 - in scope, watched

_watch = watch(globals(), "measured_speedup")
chain_speedup = ...  # {B: speed-up of the chain on curves[B]}

# %% tags=["solution", "exercise-2"]
k, alpha = 3, 0.7
tokens_per_step = (1 - alpha ** (k + 1)) / (1 - alpha)  # E[L], the bonus included
chain_speedup = {b: tokens_per_step * c(1) / c(k + 1) for b, c in curves.items()}

# %% tags=["check", "exercise-2", "nbval-check-output"]
import math

_watch.begin_check()  # from here the references are the check's own
check("the chain's speed-up at every B", chain_speedup,
      {b: _watch["measured_speedup"](0.7, 3, c(1), 0.0, c) for b, c in curves.items()}, watch=_watch,
      close=lambda a, r: isinstance(a, dict) and a.keys() == r.keys() and all(math.isclose(a[b], r[b], rel_tol=1e-9) for b in r),
      hint="Verifying k drafts is one forward over k + 1 tokens per row, and E[L] counts the bonus.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★ — the draft length at every batch size
#
# Section 4's table gives the sizers' draft lengths at $\alpha \in \{0.5, 0.7, 0.9\}$ (its columns). Now
# $\alpha = 0.6$: on each measured curve, choose the draft length k of a chain of free drafts (prompt lookup's),
# the k in 0..8 that maximises
# E[L] / t(B, k + 1), with E[L] = (1 − α^{k+1}) / (1 − α) (notebook 01). Answer
# `{B: k}`. The reference is `cost.theory.optimal_k(0.6, 0.0, 8, verify_cost=curve)`, watched here.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.cost.theory import optimal_k  # noqa: F401 - in scope, watched

_watch = watch(globals(), "optimal_k")
k_chosen = ...  # {B: k}

# %% tags=["solution", "exercise-3"]
alpha = 0.6
k_chosen = {b: max(range(9), key=lambda k: ((1 - alpha ** (k + 1)) / (1 - alpha) / c(k + 1), -k))
            for b, c in curves.items()}  # fmt: skip

# %% tags=["check", "exercise-3", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
check("k at every B, α = 0.6", k_chosen, {b: _watch["optimal_k"](0.6, 0.0, 8, verify_cost=c) for b, c in curves.items()},
      close=lambda a, r: a == r, watch=_watch, hint="Verifying k drafts costs t(B, k + 1); E[L] counts the bonus; k = 0 (no drafts) is allowed.")  # fmt: skip

# %% [markdown] tags=["exercise-4"]
# ### Exercise 4 ★★★ — where did the rows wait?
#
# From the live batch's grid (`batch.grid`: per step, per row, `(prompt, tokens emitted)` or `None` for padding),
# count each row's padding cells — the steps in which that row decoded nothing — as a list, one count per row.
# The check also holds your counts to what `batch.active` (the rows decoding in each step) implies in total:
# steps × rows minus the active ones. Then name the row that waited most (`waited_most`, its index; any row tied
# for the most counts); section 3's figure shows where in the run its padding fell.

# %% tags=["exercise", "exercise-4"]
padding = ...  # a list: padding steps of row 0, row 1, ...
waited_most = ...  # the index of the row with the most padding steps

# %% tags=["solution", "exercise-4"]
padding = [sum(step[r] is None for step in batch.grid) for r in range(len(batch.grid[0]))]
waited_most = max(range(len(padding)), key=padding.__getitem__)

# %% tags=["check", "exercise-4"]
from specdec_lab.lab.course import ExerciseError, is_stub

n_rows = len(batch.grid[0])
if not is_stub(padding) and (not isinstance(padding, list) or len(padding) != n_rows):
    raise ExerciseError(f"padding per row: not yet — give a list of {n_rows} counts, one per row")
check(
    "padding steps in total (against what `batch.active` implies)",
    sum(padding) if isinstance(padding, list) else padding,
    len(batch.active) * n_rows - sum(batch.active),
    close=lambda a, r: a == r,
)  # what batch.active implies
# per row, from the prompts' own step counts: a row pads every batch step its prompts did not decode
_row_of = {cell[0]: b for step in batch.grid for b, cell in enumerate(step) if cell is not None}
check("padding steps per row", padding,
      [batch.forwards - sum(r.forwards for i, r in enumerate(batch.results) if _row_of[i] == b) for b in range(n_rows)],
      close=lambda a, r: a == r, hint="A row's padding is a step whose cell for that row is None.")  # fmt: skip
_per_row = [sum(step[b] is None for step in batch.grid) for b in range(n_rows)]
check("the row that waited most", waited_most, {b for b in range(n_rows) if _per_row[b] == max(_per_row)},
      close=lambda a, r: a in r, hint="The row whose count in your list is largest, as its index.")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - One loop serves a batch: every row proposes, one forward verifies all trees under one 4D mask, every row
#   accepts its own path — methods batch without a second copy of the loop.
# - Rows advance by different counts (ragged acceptance) and finished rows take the next prompt (continuous
#   batching), so each row keeps its own cache length.
# - A step's price t(B, n) decides how much to speculate: the same sizers price every draft and tree on the
#   batch's curve instead of one sequence's (section 4's table). Whether what they chose still beat plain
#   batched decoding at the widest B is the bench's measurement: the sentence under section 5's figures names
#   the methods, if any, that did beyond noise.
# - The forward is not the whole step, and its width is the batch's, not a row's: what grows with B outside it
#   (each row's Python work) is not in t(B, n), and every row pays for the widest tree. A gate measures the first
#   on the batch (section 6); the planner prices the second, one width N* for the whole step (section 7). Whether
#   either pays is measured per method and B, off and on, not predicted: sections 6 and 7 list the changes beyond
#   noise, in both directions.
# - Greedy rows equal their prompts decoded alone up to the rounding of a batched forward; the bench records any
#   difference with its logit gap.
#
# ## Further reading
#
# - Li et al., [EAGLE-3](https://arxiv.org/abs/2503.01840): throughput by batch size in SGLang (Table 3).
# - vLLM's [dynamic speculative decoding](https://github.com/vllm-project/vllm/blob/015a47e1282c9ef40d706ee3463cb699e04e93c0/docs/features/speculative_decoding/dynamic_speculative_decoding.md):
#   draft length by the number of running requests.
# - SGLang's [adaptive speculative decoding](https://github.com/sgl-project/sglang/blob/369fa46b1151bb3e8b73ddd17fee059fad72dd2f/docs/advanced_features/adaptive_speculative_decoding.md):
#   step tiers from the accepted length.
# - Leviathan et al., [speculative decoding](https://arxiv.org/abs/2211.17192): the memory-bound argument a
#   batch wears down.
