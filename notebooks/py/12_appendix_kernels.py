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
# # 12 · Appendix: the kernels under the cost curve
#
# Notebook 00 measured t(n), the time of one verify forward over n tokens, and read speculation's
# break-even from it: a step that verifies n tokens must emit more than t(n)/t(1) of them. On a CPU the
# shape of that curve is not a law of nature; it is the kernels torch runs. A forward spends its time in
# two kinds:
#
# 1. **the linear layers** — n activation rows times every weight matrix, a few hundred megabytes of
#    weights streamed per forward whatever n is (section 1);
# 2. **attention over the KV cache** — which, for grouped-query attention with a mask, transformers'
#    stock path pays with a copy of the whole cache per layer (section 2).
#
# `load_model` chooses both by default. This appendix shows what each choice computes (the same numbers),
# what it costs on this machine, and how it moves the curve that every speed-up in the workbook is
# priced on. Every comparison is timed **in one loop**: each repeat runs every setup once, in an order
# rotated from repeat to repeat, and each setup keeps its median (`specdec_lab.cost.timing`), so a burst of
# load from another process hits all setups alike instead of deciding the comparison.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer sizes and repeats
model_name: str = "smollm2-135m"  # or a local HF dir / .gguf
sizes: list[int] = [1, 2, 4, 8, 16, 32, 64]  # tokens per verify forward (the compiled step's buckets)
repeats: int = 3  # interleaved repeats per setup (the median is kept)
contexts: list[int] = [256, 1024]  # cached tokens for the attention comparison (its copy grows with them)
threads: int = 0  # torch CPU threads (0: the torch default, one per core)
variants_file: str = "../data/curves/step_variants.json"  # python -m specdec_lab.bench.step_variants (section 4)
bench_file: str = "../data/bench/avx512-eagle-hybrid-7.json"  # a traced bench run, re-priced in section 4
builds_bench_files: list[str] = [  # bench runs over builds (section 4), each its own table; the last is summed up
    "../data/bench/avx512-builds-56.json",  # every build, before attention summed in slot order
    "../data/bench/avx512-cpp-wrapper-28.json",  # after it, with inductor's C++ wrapper: fp32 and int4 compiled
    "../data/bench/avx2-builds-14.json",  # the same builds on a CPU without AVX-512
    "../data/bench/avx512-int4-trees-56.json",  # the int4 compiled builds after it, with llama.cpp's anchors
]

# %%
if quick:
    sizes = [n for n in sizes if n in (1, 2, 4, 8, 16, 64)]
    repeats = min(repeats, 2)
    contexts = contexts[:1]

import json
import statistics
from pathlib import Path

import pandas as pd
import torch
from IPython.display import Markdown, display
from transformers.utils import logging as hf_logging

from specdec_lab import load_model
from specdec_lab.bench.report import by_build
from specdec_lab.bench.step_variants import replay_variants, variant_curves
from specdec_lab.cost.timing import compare_cost_curves, spread_sentence
from specdec_lab.machine import machine
from specdec_lab.models.attention import ATTENTION, attention_kind
from specdec_lab.models.fast_linear import linear_kind, linear_plan
from specdec_lab.models.kernel_setups import agreement, attention_setups, linear_setups, plan_by_size, same_as_default
from specdec_lab.viz.cost import cost_curves_figure

if threads > 0:
    torch.set_num_threads(threads)
hf_logging.disable_progress_bar()
lm = load_model(model_name)
model = lm.model
print(machine().describe())
print(f"linear layers: {linear_kind(model)}; attention: {attention_kind(model)}")

# %% [markdown]
# ## 1. The matmul kernel
#
# A forward over n tokens multiplies n activation rows by every weight matrix. For a few rows that should
# cost one pass over the weights, but torch's stock `F.linear` (x Wᵀ through MKL) can take several times
# longer on CPUs for a few rows — and 2–3 rows can be slower than 4. Two other kernels compute the same
# product (`specdec_lab.models.fast_linear`):
#
# * **W xᵀ** — (W xᵀ)ᵀ, a GEMM with the large matrix as the left operand (a single row padded to two);
# * **oneDNN** — oneDNN's inner product on a copy of W packed once into its blocked layout, whose cost
#   hardly grows with the number of rows (the packed copies double the weights' memory).
#
# Which is fastest at 1, 2, … 64 rows depends on the CPU, so `load_model` **measures** all three on the
# model's own matrices — per weight shape and row count, each kernel timed alone, best of a few repeats —
# and installs, for each, the kernel that won that measurement by more than a small margin over the
# default plan (`tune_linear`; cached per machine in `~/.cache/specdec_lab/linear_plans.json`, so only the
# first load pays). That is a choice made once, on isolated matrices, at one moment. Whether it is also
# the fastest *whole forward* now is a separate question, which the timing below answers.
#
# Four setups of the same model (`kernel_setups.linear_setups`; switching keeps the packed copies, so it
# costs nothing):
#
# | setup | kernel by rows |
# |---|---|
# | stock nn.Linear | torch's `F.linear` |
# | W xᵀ only | W xᵀ up to 16 rows, `F.linear` beyond (`use_fast_linear(model, pack=False)`) |
# | default plan | W xᵀ for 1–2 rows, oneDNN for 3–64 (`use_fast_linear(model)`) |
# | measured plan | what `tune_linear` chose on this machine (what `load_model` returns) |
#
# First, they compute the same forward: same parameters, only the order of the float sums inside the
# kernels differs.

# %% tags=["nbval-check-output"]
linear = linear_setups(model)
same = agreement(model, linear)
linear["measured plan"]()  # back to what load_model gave
print(f"{len(linear)} setups ({', '.join(linear)}), {same['forwards']} forwards of 1-64 rows after a cache:")
print(f"  same greedy token at every position: {same['same_tokens']}")
print(f"  largest logit difference below 1e-3: {same['max_abs_diff'] < 1e-3}")

# %% [markdown]
# The measured plan on this machine, per weight shape (rows → kernel), and the kernel it runs at each
# size timed below:

# %% tags=["nbval-ignore-output"]
display(pd.Series(linear_plan(model), name="kernel by rows").rename_axis("weight shape (out x in)").to_frame())
plan_table = pd.DataFrame(plan_by_size(model, sizes)).rename_axis("rows n")
default_too = same_as_default(model, sizes)
plan_table["same as default plan"] = [n in default_too for n in plan_table.index]
plan_table

# %% tags=["nbval-ignore-output"]
linear_cmp = compare_cost_curves(model, linear, sizes=sizes, repeats=repeats)
linear["measured plan"]()
ms = pd.DataFrame(
    {f"{name} t(n) ms": [s * 1e3 for s in c.seconds] for name, c in linear_cmp.curves.items()},
    index=pd.Index(sizes, name="n tokens verified"),
)
ms["fastest"] = [linear_cmp.fastest(n) for n in sizes]
ms["measured / fastest"] = [
    linear_cmp.curves["measured plan"](n) / linear_cmp.curves[linear_cmp.fastest(n)](n) for n in sizes
]
display(Markdown(spread_sentence(linear_cmp.noise)))
ms.round(2)

# %% tags=["nbval-ignore-output"]
cost_curves_figure(linear_cmp.curves, title=f"Linear kernels: verify cost at context {linear_cmp.context}")

# %% tags=["nbval-ignore-output"]
curves = linear_cmp.curves
wins = linear_cmp.wins("measured plan")
lost = [n for n in sizes if n not in wins]
behind = {n: curves["measured plan"](n) / curves[linear_cmp.fastest(n)](n) - 1 for n in lost}
stock_over = [curves["stock nn.Linear"](n) / curves["measured plan"](n) for n in sizes]
stock_slower = [n for n, r in zip(sizes, stock_over, strict=True) if r > 1]
noise_level = linear_cmp.noise.spread
differs = [n for n in sizes if n not in default_too]


def sizes_text(ns: list[int]) -> str:
    return ", ".join(map(str, ns)) if ns else "none"


parts = [
    f"In this run ({repeats} interleaved repeats) the measured plan was the fastest of the four setups at "
    f"{len(wins)} of the {len(sizes)} sizes."
]
if lost:
    worst = max(behind, key=behind.get)
    within = [n for n in lost if behind[n] <= noise_level]
    parts.append(
        f"At the other {len(lost)} it was behind the fastest by {statistics.median(behind.values()):.0%} in the "
        f"median (most at n = {worst}: {behind[worst]:.0%}, behind {linear_cmp.fastest(worst)}); "
        + (
            (
                f"{'all' if len(within) == len(lost) else len(within)} of those gaps are within the repeats' "
                f"median spread ({noise_level:.0%})."
            )
            if within
            else f"each gap is larger than the repeats' median spread ({noise_level:.0%})."
        )
    )
parts.append(
    f"The measured plan differs from the default plan only at n = {sizes_text(differs)}; at "
    f"{sizes_text(default_too)} the two run the same kernels (table above), so between those two setups any "
    "difference there is noise, not a choice."
)
if lost:
    parts.append(
        "A plan chosen once, on each matrix alone, is not guaranteed to give the fastest whole forward at every "
        "size: a forward also runs attention and the other layers, and the load differs from the moment the "
        "plan was measured (`tune_linear(model, refresh=True)` measures again)."
    )
parts.append(
    f"Torch's stock `nn.Linear` took {min(stock_over):.2f}–{max(stock_over):.2f}× the measured plan's time, "
    f"longer at {len(stock_slower)} of the {len(sizes)} sizes."
)
Markdown(" ".join(parts))

# %% [markdown]
# ## 2. Attention over the cache
#
# SmolLM2 uses grouped-query attention: 9 query heads share 3 key/value heads. transformers' `sdpa`
# attention hands the 3 K/V heads to torch's kernel directly only when there is *no* attention mask —
# that is, for one-token steps. Every forward of 2+ tokens over a cache (every verification) has a mask,
# and then it first expands K/V to 9 heads (`repeat_kv`): a copy of the whole cache, per layer, per
# forward, whose cost grows with the context. On CPU torch's kernel takes GQA and a mask together, so
# `load_model` selects `specdec_lab.models.attention.gqa_sdpa_attention` (registered through transformers'
# public `AttentionInterface`; nothing is patched), which skips the copy. Same numbers first:

# %% tags=["nbval-check-output"]
attention = attention_setups(model)
same_attention = agreement(model, attention)
attention[ATTENTION]()  # back to the default
print(f"{' vs '.join(attention)}, {same_attention['forwards']} forwards of 1-64 tokens after a cache:")
print(f"  same greedy token at every position: {same_attention['same_tokens']}")
print(f"  largest logit difference below 1e-3: {same_attention['max_abs_diff'] < 1e-3}")

# %% [markdown]
# Then both timed in one loop at longer contexts, where the copies cost most:

# %% tags=["nbval-ignore-output"]
attention_cmp = {c: compare_cost_curves(model, attention, sizes=sizes, context=c, repeats=repeats) for c in contexts}
attention[ATTENTION]()
table = {}
for c, cmp in attention_cmp.items():
    table[f"sdpa t(n) ms @ {c}"] = [s * 1e3 for s in cmp.curves["sdpa"].seconds]
    table[f"{ATTENTION} t(n) ms @ {c}"] = [s * 1e3 for s in cmp.curves[ATTENTION].seconds]
    table[f"{ATTENTION} / sdpa @ {c}"] = cmp.ratio(ATTENTION, "sdpa")
for c, cmp in attention_cmp.items():
    display(Markdown(f"Context {c}: {spread_sentence(cmp.noise)}"))
pd.DataFrame(table, index=pd.Index(sizes, name="n tokens verified")).round(2)


# %% tags=["nbval-ignore-output"]
def attention_sentence(context: int, cmp) -> str:
    ratio = dict(zip(sizes, cmp.ratio(ATTENTION, "sdpa"), strict=True))
    masked = [n for n in sizes if n > 1]  # n = 1 has no mask: both run the same kernel
    faster = [n for n in masked if ratio[n] < 1]
    median = statistics.median(ratio[n] for n in masked)
    slower = [n for n in masked if ratio[n] >= 1]
    text = (
        f"At context {context}, {ATTENTION} was faster than sdpa at {len(faster)} of the {len(masked)} masked "
        f"sizes (n ≥ 2), its median time {median:.2f}× sdpa's"
    )
    if slower:
        text += f"; not faster at n = {', '.join(map(str, slower))}"
    return text + f" (the repeats' spread: {cmp.noise.spread:.0%})."


medians = {
    c: statistics.median(r for n, r in zip(sizes, cmp.ratio(ATTENTION, "sdpa"), strict=True) if n > 1)
    for c, cmp in attention_cmp.items()
}
trend = ""
if len(medians) > 1:
    (c0, m0), (c1, m1) = list(medians.items())[0], list(medians.items())[-1]
    trend = (
        f" From context {c0} to {c1} the median ratio went from {m0:.2f} to {m1:.2f}: the saving "
        f"{'grew' if m1 < m0 else 'did not grow'} with the context"
        f"{', as the copy it removes does' if m1 < m0 else ' in this run'}."
    )
Markdown(
    " ".join(attention_sentence(c, cmp) for c, cmp in attention_cmp.items())
    + trend
    + " At n = 1 there is no mask and both run the same kernel, so their difference there is noise."
)

# %% [markdown]
# ## 3. What the kernels mean for speculation
#
# A kernel choice does not only scale the milliseconds: it changes the *shape* of t(n), and the break-even
# t(n)/t(1) a step must beat is a ratio of two of its points. The right panel of the figure in section 1
# shows it per setup; the table below reads it at a few draft sizes. Every benchmark in `data/bench/`
# records the kernels it ran (`linear` and `linear_plan` in its config, the CPU's ISA under `machine`),
# since every method's speed-up depends on them.

# %% tags=["nbval-ignore-output"]
reads = [n for n in (2, 4, 8, 16) if n in sizes]
pd.DataFrame({name: {f"t({n})/t(1)": c(n) / c(1) for n in reads} for name, c in curves.items()}).T.rename_axis(
    "setup (context 64)"
).round(2)

# %% [markdown]
# ## 4. A cheaper step: compiled, and int8 or int4 weights
#
# Sections 1–2 chose kernels for the same fp32 forward. Two larger levers change the forward itself:
#
# * **compiling** it (`load_model(..., compile=True)`: `torch.compile`, inductor's C++ on a CPU) fuses the
#   small operators between the matrix products — norms, rotary embeddings, activations — and removes
#   Python's per-operator overhead, which for a model this small is a large share of a step;
# * **fewer bytes of weights** (`load_model(..., weights="int8")` per output channel, `"int4"` in groups of
#   32 loaded from the model file's own 4-bit blocks): a one-token step must stream every weight once, so
#   its floor is the weights' bytes over the memory bandwidth.
#
# `python -m specdec_lab.bench.step_variants` measured t(n) of each build in one loop (each repeat runs every
# build once, the order rotated) and stored it with its machine; the figure reads that file.

# %% tags=["nbval-ignore-output"]
record = json.loads(Path(variants_file).read_text())
variants = variant_curves(record)
rec_machine = record["machine"]
print(f"measured on: {rec_machine.get('cpu', '?')} (torch ISA {rec_machine.get('isa', '?')}), "
      f"{record['threads']} threads, context {record['context']}, {record['repeats']} repeats")  # fmt: skip
step_table = pd.DataFrame(
    {
        name: {
            "t(1) ms": c(1) * 1e3,
            "tokens/s at one token a step": 1 / c(1),
            **{f"t({n})/t(1)": c(n) / c(1) for n in (2, 4, 8, 16)},
            "warm-up s": record["variants"][name].get("warmup_seconds"),
        }
        for name, c in variants.items()
    }
).T.rename_axis("build")
step_table.round(2)

# %% tags=["nbval-ignore-output"]
cost_curves_figure(variants, title=f"One verify step, each build (context {record['context']})")

# %% [markdown]
# Why does a cheaper step change what speculation buys? A step that verifies n tokens and emits τ of them
# costs t(n) plus the loop's own work s (accepting, the proposer, bookkeeping), so against plain decoding
#
# $$\text{speed-up} \approx \frac{\tau\,(t(1) + s_1)}{t(n) + s}.$$
#
# Making t cheaper by a constant factor leaves this alone only if s shrinks with it. Compiling the target
# removes overhead from t, not from the proposer's Python; smaller weights shrink t(1) — the bytes — more
# than t(n), whose extra rows pay the de-quantisation again. `replay_variants` re-prices a recorded bench
# run (every step's tree, accepted tokens and phase timings kept) under each build's curve, with the loop's
# own seconds either shrinking like t(1) or staying as measured — the two bracket what the build would do:

# %% tags=["nbval-ignore-output"]
bench = json.loads(Path(bench_file).read_text())
shrinks = replay_variants(bench, variants, scale_overhead=True)
stays = replay_variants(bench, variants, scale_overhead=False)
methods = [m for m in next(iter(shrinks.values())) if m != "autoregressive"]
replay_table = pd.DataFrame(
    {
        (name, how): {m: table[m] for m in methods}
        for name in variants
        for how, table in (("overhead shrinks", shrinks[name]), ("overhead stays", stays[name]))
    }  # fmt: skip
)
replay_table.columns.names = ["build", "loop's own seconds"]
replay_table.rename_axis("method (speed-up over autoregressive on the same build)").round(2)

# %% tags=["nbval-ignore-output"]
base_name = next(iter(variants))
fastest = min(variants, key=lambda v: variants[v](1))
best = max(methods, key=lambda m: stays[base_name][m])
change = stays[fastest][best] / stays[base_name][best]
Markdown(
    f"The cheapest one-token step here is **{fastest}** (t(1) {variants[fastest](1) * 1e3:.1f} ms against "
    f"{variants[base_name](1) * 1e3:.1f} ms for {base_name}). On it, {best} — the fastest method of the recorded "
    f"run — would have a speed-up of {stays[fastest][best]:.2f}× there against {stays[base_name][best]:.2f}× on "
    f"{base_name} ({change:.0%} of it) if its own work did not shrink, and "
    f"{shrinks[fastest][best]:.2f}× ({shrinks[fastest][best] / shrinks[base_name][best]:.0%}) if it shrank like "
    "t(1). A cheaper step and speculation multiply, but the cheaper the step, the more the loop's own seconds "
    "and a steeper t(n)/t(1) weigh."
)

# %% [markdown]
# The replay predicts; the bench measures. One bench run put every build side by side — the same methods on
# fp32 and int4 weights, eager and compiled (`--methods autoregressive,hybrid@int4+compile,...`: a method's
# `@build` suffix, `specdec_lab.bench.builds`), rotated per prompt, beside transformers' and llama.cpp's own
# decoding of the same model file. `speed-up` is over fp32 eager autoregressive in that run; `own` over the
# same build's autoregressive; `identical` is the fraction of prompts whose output equals that build's own
# autoregressive output (a quantized model is another model).
#
# Why a quantized build can differ from its own autoregressive output at all: verifying n rows computes the
# same dot products as n one-row steps, but a kernel may sum them in another order for another row count,
# and with bf16 activations (the fast path of the int4 kernels) such a last-bit difference becomes a whole
# bf16 step in the next layer's input now and then. The compiled quantized builds remove that cause — their
# attention and LM head sum every row alike at every row count (`CompiledStep.exact_rows`,
# `specdec_lab.models.row_invariance`); the eager ones keep torch's attention kernel. A branching tree has one more
# cause: a second branch's keys sit at other cache slots than one-row decoding puts them in, and a softmax
# summed in vector lanes by slot index groups the same terms differently. The compiled steps now sum the
# softmax and p·V in slot order, where another branch's masked slot adds an exact zero, so every node of a
# tree rounds like one-row decoding along its path. The first table below is a run from before that change
# (its `identical` for the hybrid's trees shows what the cause cost); the others ran after it, each titled
# with its file and the CPU it ran on; the last, with llama.cpp among its anchors, is summed up below.

# %% tags=["nbval-ignore-output"]
for builds_bench_file in builds_bench_files:
    builds_run = json.loads(Path(builds_bench_file).read_text())
    build_rows = pd.DataFrame(by_build(builds_run))
    ours = build_rows[build_rows.build != "anchor"]
    attention = {b.get("attention") for b in builds_run["config"].get("builds", {}).values() if b.get("exact_rows")}
    display(Markdown(
        f"**{Path(builds_bench_file).name}**: {builds_run['prompts_done']} prompts, "
        f"{builds_run['config']['max_new_tokens']} new tokens; measured on: {builds_run['machine'].get('cpu', '?')} "
        f"(torch ISA {builds_run['machine'].get('isa', '?')}); exact-rows attention: {', '.join(sorted(attention)) or 'none'}"
    ))  # fmt: skip
    display(ours.pivot_table(index="method", columns="build", values=["tokens_per_s", "speedup", "speedup_own",
                                                                      "identical"], sort=False).round(2))  # fmt: skip
    display(build_rows[build_rows.build == "anchor"].set_index("method")[["tokens_per_s", "speedup", "mean_accepted",
                                                                          "identical"]].round(2))  # fmt: skip

# %% tags=["nbval-ignore-output"]
anchors = build_rows[build_rows.build == "anchor"].set_index("method").tokens_per_s
exact = ours[(ours.identical == 1.0) & (ours.method != "autoregressive")]  # speculative, equal on every prompt
top = exact.loc[exact.tokens_per_s.idxmax()]
wall = builds_run.get("memory_wall") or {}
plain = ours[(ours.method == "autoregressive")].set_index("build").tokens_per_s
text = (
    f"The fastest speculative method whose output equalled its build's autoregressive output on every prompt was "
    f"**{top.method} on {top.build}**, at {top.tokens_per_s:.1f} tokens/s: "
    + ", ".join(f"{top.tokens_per_s / v:.2f}× {name}" for name, v in anchors.items())
    + ". "
)
if wall.get("wall_ms_per_token"):
    text += (
        f"Reading the {wall['weights_mb']:.0f} MB of fp32 weights once takes {wall['wall_ms_per_token']:.1f} ms at "
        f"the {wall['read_gb_s']:.1f} GB/s measured before the run — a ceiling of {wall['wall_tokens_per_s']:.1f} "
        "tokens/s for one token a step — against plain decoding at "
        + ", ".join(f"{v:.1f} tokens/s ({build})" for build, v in plain.items())
        + " (prompt and the loop's own work included)."
    )
Markdown(text)
