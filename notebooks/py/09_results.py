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
# # 09 · Results: every method per category, against transformers, beside the theory and a replay
#
# The reproduction of the workbook's headline numbers, read from results files the benchmark wrote
# (`python -m specdec_lab.bench`, committed under `data/bench/`):
#
# 1. **what was run** — machine (ISA), model, prompts, and the checks that do not depend on timing:
#    every method's output is identical to autoregressive decoding's, token for token, and its mean
#    accepted length (tokens per target forward, bonus included);
# 2. **every method per category against transformers' own `generate`** (`hf_generate`, and its prompt
#    lookup and assisted generation as anchors for ours);
# 3. **the theory's predicted speedup beside the measured one** (`specdec_lab/theory.py`: acceptance
#    α̂ and the measured costs);
# 4. **a replay** of the recorded runs (`specdec_lab/replay.py`): every step's tree size, drafting and
#    bookkeeping time, re-priced under a verify cost curve t(n) — under this machine's own curve it must
#    reproduce the measured speedups;
# 5. **what-if on other hardware** — the same runs under a flat, GPU-like curve (a forward of n tokens
#    costs what one costs) and under a curve you enter: the projected ranking of the methods beside the
#    measured one here.
#
# By default the notebook reads the committed files, so its checked outputs are the same wherever it
# runs; `rerun=True` runs the benchmark from scratch into `results/` through the same command-line code
# path (minutes per prompt and method on a laptop CPU), and `quick=True` does that on one prompt and
# three methods.

# %% tags=["parameters"]
quick: bool = False  # CI: implies rerun with a tiny bench (1 prompt, 3 methods, 16 tokens; same code paths)
rerun: bool = False  # True: run the bench from scratch into rerun_out (and measure the curves) instead of reading files
results_file: str = "../data/bench/avx2-results-traces.json"  # traced run: all methods + anchors, 1 prompt/category
full_file: str = "../data/bench/avx2-medusa-lookahead.json"  # all 56 prompts: AR, draft, layer_skip, medusa, lookahead
anchors_file: str = "../data/bench/avx2-tuned.json"  # all 56 prompts: AR, prompt lookup and transformers' anchors
curves_file: str = "../data/bench/avx2-results-traces-curves.json"  # verify curves measured beside the traced run
rerun_methods: str = "autoregressive,prompt_lookup,draft,layer_skip,medusa,lookahead,jacobi,hf_generate,hf_assisted,hf_prompt_lookup"  # fmt: skip
rerun_per_category: int = 1  # prompts per category (data/prompts.jsonl has 7 categories)
rerun_limit: int = 0  # at most this many prompts (0: no limit)
rerun_tokens: int = 128  # new tokens per prompt and method
rerun_out: str = "../results/bench/09_results.json"  # where a rerun writes (resumable; rerun starts fresh)
model_name: str = "smollm2-135m"  # target for a rerun: shipped name, HF directory or .gguf
user_curve: str = "1:0.0060,16:0.0061,64:0.0064,256:0.0080"  # "n:seconds,...": an example device curve; enter yours
tolerance: float = 0.05  # the replay under this machine's own curve must be within this of the measured speedup
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    rerun = True
    rerun_methods, rerun_limit, rerun_tokens = "autoregressive,prompt_lookup,hf_generate", 1, 16
    rerun_out = "../results/bench/09_quick.json"
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import json
import os
import time
from pathlib import Path

import pandas as pd
from IPython.display import Markdown, display

from specdec_lab.cost import CostCurve
from specdec_lab.machine import machine
from specdec_lab.replay import (
    curve_from_points,
    curve_from_traces,
    curves_by_prompt,
    flat_curve,
    replay_bench,
    shaped_curve_from_traces,
    theory_prediction,
    traced_rows,
)
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.results import (
    category_figure,
    ranking_figure,
    ranking_frame,
    replay_figure,
    speedup_frame,
    stat_frame,
)

T_START = time.perf_counter()
FIGURES = Path(os.environ.get("SPECDEC_LAB_FIGURES", figures_dir))  # env override: used by nbval in CI
pd.options.display.float_format = "{:.2f}".format


def load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


# %% [markdown]
# ## 1. What was run
#
# The traced run is the benchmark's command line,
#
# ```
# python -m specdec_lab.bench --methods autoregressive,prompt_lookup,draft,layer_skip,medusa,lookahead,jacobi,\
#     hf_generate,hf_assisted,hf_prompt_lookup --per-category 1 --max-new-tokens 128 --dtype float32 \
#     --out data/bench/avx2-results-traces.json
# ```
#
# every method back to back on the same prompt (greedy, fp32), method order rotated per prompt, timed from
# outside. Its rows of our loop also carry a per-step trace (tree size, tokens emitted, seconds to propose,
# verify and accept) — what sections 3–5 use. With `rerun=True` the cell below runs that command (with the
# parameters above) instead of reading the committed file.

# %%
if rerun:
    from specdec_lab.bench.__main__ import main as bench_main

    argv = ["--model", model_name, "--prompts", "../data/prompts.jsonl", "--methods", rerun_methods,
            "--per-category", str(rerun_per_category), "--max-new-tokens", str(rerun_tokens), "--out", rerun_out,
            "--fresh"] + (["--limit", str(rerun_limit)] if rerun_limit else [])  # fmt: skip
    assert bench_main(argv) == 0, "the bench failed (its error is printed above)"
    results_file = rerun_out
results = load(results_file)
full, anchors = load(full_file), load(anchors_file)
cfg, mach = results["config"], results["machine"]
here = machine()
display(Markdown(
    f"**{results_file}**: {results['prompts_done']} of {results['prompts_total']} prompts"
    + (f" ({cfg['per_category']} per category)" if cfg["per_category"] else "")
    + f", {len(results['methods'])} methods, {cfg['model']}, "
    f"{cfg['dtype']}, {cfg['max_new_tokens']} new tokens, linear kernels `{cfg['linear']}`, attention "
    f"`{cfg['attention']}`. Measured on **{mach['cpu']} ({mach['isa']})**, {mach['torch_threads']} torch "
    f"threads, torch {mach['torch']}, transformers {mach['transformers']}. This notebook runs on "
    f"{here.cpu} ({here.isa})" + ("." if here.isa == mach["isa"] else " — another ISA than the results'.")
))  # fmt: skip


# %% tags=["nbval-check-output"]
def checks(name, res):
    """What must hold whatever the timing: counts, identity with autoregressive, mean accepted length."""
    s = res["summary"]
    cats = list(dict.fromkeys(r["category"] for r in res["rows"]))
    print(f"{name}: {res['prompts_done']} prompts in {len(cats)} categories, {len(res['methods'])} methods, "
          f"{len(res['rows'])} rows, {sum('trace' in r for r in res['rows'])} with a step trace")  # fmt: skip
    frame = pd.DataFrame({
        "identical to AR": {m: s[m]["identical_to_autoregressive"] for m in s},
        "mean accepted": {m: s[m]["mean_accepted"] for m in s},
        "tokens": {m: s[m]["new_tokens"] for m in s},
    })  # fmt: skip
    print(frame.to_string(float_format="{:.3f}".format), end="\n\n")


for name, res in (("traced run", results), ("all prompts (ours)", full), ("all prompts (anchors)", anchors)):
    checks(name, res)

# %% [markdown]
# Every method is lossless here (greedy acceptance: the output *is* greedy decoding's), so "identical to
# AR" must be 1.00 everywhere — transformers' anchors included, which run the same model with its own
# `generate`. Mean accepted is 1.00 for the plain decoders (`autoregressive`, `hf_generate`) by
# construction.
#
# ## 2. Every method per category, against transformers' anchors
#
# Speedup = (Σ tokens / Σ seconds of the method) / (the same for our autoregressive loop) on the same
# prompts, per category and overall. First the traced run (one prompt per category, every method and
# anchor, one sitting):

# %% tags=["nbval-ignore-output"]
traced_speedup = speedup_frame(results)
display(traced_speedup.style.format("{:.2f}x").set_caption("speedup over autoregressive — traced run"))

# %% [markdown]
# Then all 56 prompts (8 per category), from the two committed full runs: each method against the
# autoregressive rows of its own run (Jacobi and `hf_assisted` ran only in the traced run).

# %% tags=["nbval-ignore-output"]
full_speedup = pd.concat([
    speedup_frame(anchors, ["autoregressive", "prompt_lookup", "hf_generate", "hf_prompt_lookup"]),
    speedup_frame(full, ["draft", "layer_skip", "medusa", "lookahead"]),
])  # fmt: skip
display(full_speedup.style.format("{:.2f}x").set_caption("speedup over autoregressive — all 56 prompts"))
fig = category_figure({"56 prompts": full_speedup}, f"Speedup per category, {mach['cpu']} ({mach['isa']}), "
                      f"{cfg['model']} fp32, {full['config']['max_new_tokens']} new tokens")  # fmt: skip
print(f"saved {save_figure(fig, '09_per_category', FIGURES)}")
fig

# %% [markdown]
# Our loop against transformers' implementation of the same idea: tokens/s of ours over tokens/s of
# the anchor, on the same prompts (above 1: ours is faster).

# %% tags=["nbval-ignore-output"]
PAIRS = [("autoregressive", "hf_generate"), ("prompt_lookup", "hf_prompt_lookup"), ("draft", "hf_assisted")]


def anchor_ratios(res):
    rate = stat_frame(res, "tokens_per_s")
    return pd.DataFrame(
        {f"{a} / {b}": rate.loc[a] / rate.loc[b] for a, b in PAIRS if a in rate.index and b in rate.index}
    ).T


vs_anchor = anchor_ratios(results)
vs_anchor_full = anchor_ratios(anchors)
display(vs_anchor.style.format("{:.2f}").set_caption("ours / transformers, tokens/s — traced run"))
display(vs_anchor_full.style.format("{:.2f}").set_caption("ours / transformers, tokens/s — all 56 prompts"))

# %%
best_full = full_speedup.drop(index="autoregressive")["overall"].idxmax()
lines = [f"Over all 56 prompts the fastest method here is **{best_full}**, "
         f"{full_speedup.loc[best_full, 'overall']:.2f}× autoregressive decoding"]  # fmt: skip
for col, label in (("autoregressive / hf_generate", "our plain loop"), ("prompt_lookup / hf_prompt_lookup",
                   "our prompt lookup"), ("draft / hf_assisted", "our draft model")):  # fmt: skip
    src = vs_anchor_full if col in vs_anchor_full.index else vs_anchor
    if col in src.index:
        r = src.loc[col, "overall"]
        lines.append(f"{label} runs at {r:.2f}× the tokens/s of transformers' {col.split(' / ')[1]}"
                     + (" (traced run)" if src is vs_anchor else ""))  # fmt: skip
display(Markdown("; ".join(lines) + "."))

# %% [markdown]
# ## 3. The theory's prediction beside the measurement
#
# `theory.py`'s measured form: speedup = E[tokens per step] · t(1) / (drafting seconds per step + t(n)),
# with t the verify cost of an n-node forward. For chains (prompt lookup, the draft models, Jacobi)
# E[tokens per step] = (1 − α̂^{k+1}) / (1 − α̂) for each step's draft length k, α̂ the per-token
# acceptance fitted to the trace by maximum likelihood (the theory's i.i.d. model: a chain of k accepts a
# truncated-geometric number); Medusa uses its own prediction E[L + 1] from the calibrated head
# accuracies (notebook 05). Lookahead has no closed form (its hits come from an n-gram pool) and is left
# out. t(n) is the run's own (section 4).

# %% tags=["nbval-ignore-output"]
own = curve_from_traces(results)
replay_own = {r["method"]: r for r in replay_bench(results, own)}
rows_of = {m: [r for r in traced_rows(results) if r["method"] == m] for m in replay_own}
theory_rows = {}
for m, rows in rows_of.items():
    tree_len = None
    if m == "medusa":
        lens = [r["proposer"].get("expected_length") for r in rows]
        tree_len = sum(lens) / len(lens) if all(x is not None for x in lens) else None
    th = None if m == "lookahead" else theory_prediction(rows, own, tree_expected_length=tree_len)
    theory_rows[m] = {
        "mean accepted": replay_own[m]["mean_accepted"],
        "α̂ (chains)": th and th["alpha"],
        "theory E[tokens/step]": th and th["tokens_per_step"],
        "theory speedup": th and th["speedup"],
        "replay (own curve)": replay_own[m]["predicted_speedup"],
        "measured": replay_own[m]["measured_speedup"],
    }
theory = pd.DataFrame(theory_rows).T
display(theory.style.format("{:.2f}", na_rep="–").set_caption("predicted vs measured speedup, traced run"))

# %% [markdown]
# The theory counts two costs per step, drafting and the verify forward; the replay also counts what the
# loop does around them (acceptance, compacting the KV cache, the proposer's update, prefill), each as
# recorded. Where the theory is above the measurement, that bookkeeping is what it leaves out.
#
# ## 4. Replay: re-pricing the recorded steps under a cost curve
#
# `replay_bench` keeps every step's tree and timings and swaps only the verify forward's cost: t(n_step)
# from a curve instead of the recorded seconds (`specdec_lab/replay.py` for the formula). Which curve is
# "this machine's"? Five candidates:
#
# * **the run's own** (`curve_from_traces`): the mean recorded verify seconds of each tree size, pooled
#   over every method and prompt — the cost the bench actually paid, at its context lengths and load;
# * **the run's own, chains and trees apart** (`shaped_curve_from_traces`): the same, one curve for chains
#   (verified with the model's causal mask) and one for trees (an explicit tree mask), each step priced on
#   its own shape's;
# * **the run's own, per prompt** (`curves_by_prompt`): the same again, fitted to each prompt's rows alone
#   — every method on a prompt verifies at the same context lengths, prompts differ (long RAG contexts);
# * **measured at the bench's context** (`measure_bench_curve`): a separate measurement after the run,
#   median of 5, of trees of the sizes the run verified, after a cache of the bench's median context;
# * **the methods' own** (`cost_curve_for(model, tree=True)`): what Medusa sizes its tree from — a
#   64-token context, the minimum of 7 repeats (the undisturbed cost).
#
# All five are this machine's, so drafting and bookkeeping keep their recorded seconds (scale 1).

# %%
if rerun:
    from specdec_lab.cost import cost_curve_for
    from specdec_lab.models import load_model
    from specdec_lab.replay import measure_bench_curve

    lm = load_model(model_name)
    largest = max(s[0] for r in traced_rows(results) for s in r["trace"]["steps"])  # tree nodes verified, at most
    measured_curves = {"bench context": measure_bench_curve(lm.model, results),
                       "context 64 (min)": cost_curve_for(lm.model, max_tokens=min(max(largest, 2), 64), tree=True)}  # fmt: skip
else:
    measured_curves = {name: CostCurve(**c) for name, c in load(curves_file)["curves"].items()}
shaped = shaped_curve_from_traces(results)
curves = {"run's own": own, "run's own, by shape": shaped, "run's own, per prompt": curves_by_prompt(results),
          **measured_curves}  # fmt: skip
shown = {"run's own": own, "run's own, chains": shaped.chain, "run's own, trees": shaped.tree, **measured_curves}
display(pd.DataFrame({name: {n: c(n) * 1e3 for n in sorted({*own.sizes})} for name, c in shown.items()})
        .rename_axis("n").style.format("{:.1f}").set_caption("t(n), ms"))  # fmt: skip

# %% tags=["nbval-ignore-output"]
tables = {name: replay_bench(results, c, draft_scale=1.0, overhead_scale=1.0) for name, c in curves.items()}
replay_frame = pd.DataFrame({"measured": {r["method"]: r["measured_speedup"] for r in tables["run's own"]}})
for name, table in tables.items():
    replay_frame[f"predicted ({name})"] = pd.Series({r["method"]: r["predicted_speedup"] for r in table})
error = {name: (replay_frame[f"predicted ({name})"] / replay_frame["measured"] - 1).abs() for name in curves}
display(replay_frame.style.format("{:.3f}").set_caption("replay: predicted vs measured speedup"))
display(pd.DataFrame(error).style.format("{:.1%}").set_caption("|predicted / measured − 1|"))
fig = replay_figure(tables, band=tolerance)
print(f"saved {save_figure(fig, '09_replay', FIGURES)}")
fig

# %%
others = list(measured_curves)
own_ok = {name: bool((error[name] <= tolerance).all()) for name in curves if name.startswith("run's own")}
e_pooled, e_shaped, e_prompt = error["run's own"], error["run's own, by shape"], error["run's own, per prompt"]
display(Markdown(
    f"Under the run's own curve the replay predicts every method's measured speedup within "
    f"**{e_pooled.max():.1%}** (worst: {e_pooled.idxmax()}); with chains and trees priced apart within "
    f"**{e_shaped.max():.1%}** (worst: {e_shaped.idxmax()}); per prompt within **{e_prompt.max():.1%}** (worst: "
    f"{e_prompt.idxmax()}). "
    f"Required: {tolerance:.0%} — "
    + ", ".join(f"{name}: {'met' if ok else 'NOT met'}" for name, ok in own_ok.items())
    + ". The separately measured curves give t(1) = "
    + " and ".join(f"{measured_curves[n](1) * 1e3:.1f} ms ({n})" for n in others)
    + f" against the run's {own(1) * 1e3:.1f} ms, and replayed under them the predictions are off by up to "
    + " and ".join(f"{error[n].max():.0%} ({n})" for n in others)
    + ": a curve measured apart from the run misses what the run paid (context growth, load between "
    "forwards), and how much that matters depends on the shape of t(n) at the sizes each method verifies."
))  # fmt: skip

# %% [markdown]
# ## 5. What-if on other hardware: a flat curve, and yours
#
# On a GPU a 135M-parameter model's forward is bound by reading weights and launching kernels: 1 token or
# 64 cost about the same. A **flat curve**, t(n) = t(1), is that limit. Replayed under it, each method
# keeps its recorded trees and drafting (scaled like t(1): the same here, since the flat curve takes this
# machine's t(1)), and only the bigger forwards become free. So the projection favours methods that
# verify many nodes per step for a long accepted path — and it prices *these* runs' decisions: methods
# that size their trees and drafts from the cost curve (Medusa's budget, Lookahead's window, the drafts'
# lengths) would choose larger ones on a flat curve and do at least as well as projected.
#
# `user_curve` is a device's t(n) entered by hand (`"n:seconds,..."`, n = 1 required). The default is an
# *illustrative* GPU-like shape, not a measurement; replace it with your device's (`measure_cost_curve`
# on that device, `tree=True`). Drafting is scaled by t'(1)/t(1) (drafting is model compute too); the
# last column instead keeps the drafting and bookkeeping at this machine's seconds (host-side work that
# a faster accelerator does not speed up) — the two bracket the other device.

# %% tags=["nbval-ignore-output"]
points = {int(n): float(t) for n, t in (item.split(":") for item in user_curve.split(",") if item.strip())}
user = curve_from_points(points, device="user")
flat = flat_curve(own(1))
projections = {
    "flat t(n) = t(1)": {r["method"]: r["predicted_speedup"] for r in replay_bench(results, flat, reference=own)},
    "user curve": {r["method"]: r["predicted_speedup"] for r in replay_bench(results, user, reference=own)},
    "user curve, host work unscaled": {r["method"]: r["predicted_speedup"] for r in replay_bench(
        results, user, reference=own, draft_scale=1.0, overhead_scale=1.0)},
}  # fmt: skip
measured_here = {r["method"]: r["measured_speedup"] for r in tables["run's own"]}
ranking = ranking_frame(measured_here, projections).drop(index="autoregressive")
display(ranking.style.format("{:.2f}", subset=[c for c in ranking.columns if not c.startswith("rank")]))
fig = ranking_figure(ranking, "Measured here vs projected on other verify cost curves (replay of the traced run)")
print(f"saved {save_figure(fig, '09_flat_ranking', FIGURES)}")
fig

# %%
order_here = list(ranking.sort_values("measured here", ascending=False).index)
order_flat = list(ranking.sort_values("flat t(n) = t(1)", ascending=False).index)
display(Markdown(
    f"Ranking measured here: {' > '.join(order_here)}. Projected on a flat curve: {' > '.join(order_flat)} "
    f"— best **{order_flat[0]}** at {ranking.loc[order_flat[0], 'flat t(n) = t(1)']:.2f}× "
    f"(here {ranking.loc[order_flat[0], 'measured here']:.2f}×). Anchors (transformers' generate) have no "
    "step trace and are not replayed."
))  # fmt: skip

# %%
print(f"notebook ran in {time.perf_counter() - T_START:.1f} s")
