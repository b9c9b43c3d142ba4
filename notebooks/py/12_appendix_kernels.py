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
# priced on (section 3); then two other levers, a compiled step and fewer bytes of weights (section 4), and
# where the bytes of a 4-bit step still go: its LM head (section 5).
# Every comparison is timed **in one loop**: each repeat runs every setup once, in an order
# rotated from repeat to repeat, each setup warmed by an untimed pass right after it is switched in, and each
# setup keeps its median (`specdec_lab.cost.timing`), so a burst of
# load from another process hits all setups alike instead of deciding the comparison.
#
# ### Learning objectives
#
# - **Measure** whole verify forwards under several linear-layer kernels in one interleaved loop, and tell a
#   difference from the repeats' noise.
# - **Explain** why a masked grouped-query attention forward copies the KV cache in transformers' `sdpa` path,
#   and check that the kernel without the copy computes the same logits.
# - **Derive** the memory wall of a one-token step (bytes of weights over read bandwidth) and compare a
#   build's measured step with it.
# - **Predict** what a cheaper step (compiled, int8 or int4 weights) does to a speculative speed-up, with the
#   loop's own seconds shrinking or not.
#
# ### Prerequisites
#
# Notebook 00 (the cost curve t(n) and the break-even t(n)/t(1)) and notebook 01 (the speed-up formula with
# the cost ratio c); notebook 09 for the benchmark files section 4 reads.
#
# **Notation** as in notebook 00: p, q, α, k, c, τ, L, E[L]; t(n) the seconds of a verify forward over n
# tokens; "mean accepted" = tokens emitted per target forward, bonus included.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer sizes and repeats
model_name: str = "smollm2-135m"  # or a local HF dir / .gguf
sizes: list[int] = [1, 2, 4, 8, 16, 32, 64]  # tokens per verify forward (the compiled step's buckets)
repeats: int = 8  # interleaved repeats per setup (median kept; a multiple of 4: each setup in each slot alike)
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
profile_file: str = "../data/bench/avx512-profile-head-fused.json"  # python -m specdec_lab.bench.profile_step (§5)
levers_bench_file: str = "../data/bench/avx512-file-bytes-21.json"  # the head and fusion levers, llama.cpp (§5)
step_levers_file: str = "../data/bench/avx512-step-levers.json"  # what a call pays besides its kernels (§5)
step_bench_file: str = "../data/bench/avx512-step-levers-21.json"  # every method on the new step, llama.cpp (§5)

# %%
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    sizes = [n for n in sizes if n in (1, 2, 4, 8, 16, 64)]
    repeats = min(repeats, 2)
    contexts = contexts[:1]
FIGURES = start(threads=threads, stem="12_appendix_kernels")
model = load_model(model_name).model

# %% [markdown]
# ## 1. The matmul kernel
#
# A forward over n tokens multiplies n activation rows by every weight matrix. For a few rows that should
# cost one pass over the weights; whether torch's stock `F.linear` (x Wᵀ through MKL) gets there depends on
# the CPU and the library build, which is why it is measured here rather than assumed. Two other kernels
# compute the same product (`specdec_lab.models.fast_linear`):
#
# * **W xᵀ** — (W xᵀ)ᵀ, a GEMM with the large matrix as the left operand (a single row padded to two);
# * **oneDNN** — oneDNN's inner product on a copy of W packed once into its blocked layout, built for several
#   rows at a time (the packed copies double the weights' memory); how its cost grows with the rows is
#   measured below.
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
from specdec_lab.models.kernel_setups import agreement, linear_setups

linear = linear_setups(model)
same = agreement(model, linear)
linear["measured plan"]()  # back to what load_model gave
print(f"{len(linear)} setups ({', '.join(linear)}), {same['forwards']} forwards of 1-64 rows after a cache:")
print(f"  same greedy token at every position: {same['same_tokens']}")
print(f"  largest logit difference below 1e-3: {same['max_abs_diff'] < 1e-3}")

# %% [markdown]
# The measured plan on this machine, per weight shape (rows → kernel), and the kernel it runs at each
# size timed below (`same as default plan`: every layer runs the default plan's kernel at that size):

# %% tags=["nbval-ignore-output"]
import pandas as pd
from IPython.display import Markdown, display

from specdec_lab.models.attention import attention_kind
from specdec_lab.models.fast_linear import linear_kind, linear_plan
from specdec_lab.models.kernel_setups import plan_by_size, same_as_default

print(f"linear layers: {linear_kind(model)}; attention: {attention_kind(model)}")
with pd.option_context("display.max_colwidth", None, "display.width", 250):  # the whole plan, untruncated
    display(pd.Series(linear_plan(model), name="kernel by rows").rename_axis("weight shape (out x in)").to_frame())
plan_table = pd.DataFrame(plan_by_size(model, sizes)).rename_axis("rows n")
default_too = same_as_default(model, sizes)
plan_table["same as default plan"] = [n in default_too for n in plan_table.index]
plan_table

# %% [markdown]
# Then the four setups timed in one loop (context 64). Each repeat runs every setup once, the order rotated, and
# every setup first runs one untimed forward per size right after it is switched in (the first forwards after a
# switch pay allocations and cold caches, which would otherwise land on the timed pass's first sizes); each setup
# keeps its median. Where two setups run the very same kernels at a size (read from each setup's layers: the plan
# table's `same as default plan`, the sizes where the measured plan chose what another setup runs, 1–2 rows, where
# W xᵀ only and the default plan both run W xᵀ, and more than 16, where W xᵀ only runs torch's stock kernel) the
# loop times the same code twice, so their gap measures the protocol's own noise directly: the noise floor below is
# the larger of that gap and the repeats' spread. The table gives t(n) in milliseconds per setup, which setup was
# fastest at each n (`tie: …` where others are within the noise floor of it), and the measured plan's time over the
# fastest one's.
#
# **Predict, then run.** Before running the next cell, write down which setup you expect to be fastest at one
# row and which at 64, and whether the measured plan — the winner of each matrix timed alone — will be the
# fastest whole forward at every size. The sentence two cells below compares your guess with the loop.

# %% tags=["prediction", "nbval-ignore-output"]
from specdec_lab.cost.curve import measure_cost_curve
from specdec_lab.cost.timing import compare_cost_curves, spread_sentence
from specdec_lab.lab.kernel_groups import kernel_groups, kernels_by_setup


def sizes_text(ns: list[int]) -> str:
    return "n = " + ", ".join(map(str, ns))


def warmed(install):
    """Switch a setup in, then run one untimed forward per size: the timed pass starts warm."""

    def run() -> None:
        install()
        measure_cost_curve(model, sizes=sizes, context=64, repeats=1, warmup=0)  # untimed: discarded

    return run


# which kernel each weight shape runs at each size, per setup (read by switching each in: no repacking)
kernels = kernels_by_setup(model, linear, sizes)
linear_cmp = compare_cost_curves(model, {name: warmed(f) for name, f in linear.items()}, sizes=sizes, repeats=repeats)
linear["measured plan"]()
curves = linear_cmp.curves

# setups grouped by the code they run at each size: where a group has several setups the loop timed the same code
# more than once, and their gap is the protocol's own noise, measured directly
same_code = {n: kernel_groups({s: curves[s](n) for s in linear}, {s: kernels[s][n] for s in linear}) for n in sizes}
twin_gap = {n: max(hi / lo - 1 for g, (lo, hi) in zip(same_code[n].groups, same_code[n].spans, strict=True)
                   if len(g) > 1) for n in sizes if same_code[n].twins}  # fmt: skip
noise_level = max(linear_cmp.noise.spread, max(twin_gap.values(), default=0.0))
# the setups that run, at n rows, the very kernels of the measured plan
twins = {n: [s for s in linear if s != "measured plan" and kernels[s][n] == kernels["measured plan"][n]] for n in sizes}


def fastest_or_tie(n: int) -> str:
    best = linear_cmp.fastest(n)
    near = [s for s in linear if curves[s](n) <= curves[best](n) * (1 + noise_level)]
    return best if len(near) == 1 else "tie: " + ", ".join(near)


ms = pd.DataFrame(
    {f"{name} t(n) ms": [s * 1e3 for s in c.seconds] for name, c in linear_cmp.curves.items()},
    index=pd.Index(sizes, name="n tokens verified"),
)
ms["fastest"] = [fastest_or_tie(n) for n in sizes]
ms["measured / fastest"] = [
    linear_cmp.curves["measured plan"](n) / linear_cmp.curves[linear_cmp.fastest(n)](n) for n in sizes
]
floor_text = spread_sentence(linear_cmp.noise)
if twin_gap:
    worst_twin = max(twin_gap, key=twin_gap.get)
    floor_text += (
        f" Where setups ran the very same kernels ({sizes_text(list(twin_gap))}) their medians differed by up to "
        f"{twin_gap[worst_twin]:.0%} (n = {worst_twin}): a gap no kernel explains — the load of the moment, or an order "
        f"effect of the protocol that one run cannot tell from it — so the noise floor "
        f"used below is {noise_level:.0%}, the larger of it and the repeats' spread; differences inside it are "
        "within noise, not an order."
    )
else:
    floor_text += f" No two setups ran the same kernels at a size timed; the floor is the spread, {noise_level:.0%}."
display(Markdown(floor_text))
ms.round(2)

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.cost import cost_curves_figure

cost_curves_figure(linear_cmp.curves, title=f"Linear kernels: verify cost at context {linear_cmp.context}")

# %% tags=["nbval-ignore-output"]
import statistics

from specdec_lab.lab.course import compare

stock_over = [curves["stock nn.Linear"](n) / curves["measured plan"](n) for n in sizes]


def plural(count: int, one: str, many: str) -> str:
    return f"{count} {one if count == 1 else many}"


# where the measured plan runs the same code as another setup (twins, above), the loop times that code twice: a
# tie by construction, neither a win nor a loss; only the other sizes test the plan's choice
tied = [n for n in sizes if twins[n]]
chosen_sizes = [n for n in sizes if not twins[n]]
first = [n for n in chosen_sizes if linear_cmp.fastest(n) == "measured plan"]
# a win counts only where the plan is ahead of the runner-up by more than the noise floor
ahead = {n: min(curves[s](n) for s in linear if s != "measured plan") / curves["measured plan"](n) - 1 for n in first}
wins = [n for n in first if ahead[n] > noise_level]
lost = [n for n in chosen_sizes if n not in first]
behind = {n: curves["measured plan"](n) / curves[linear_cmp.fastest(n)](n) - 1 for n in lost}

parts = [f"In this run ({plural(repeats, 'repeat', 'interleaved repeats')}, context {linear_cmp.context}):"]
if tied:
    groups = {}
    for n in tied:
        groups.setdefault(" and ".join(twins[n]), []).append(n)
    # the measured plan and every setup it shares its kernels with: the slots that time the same code at that size
    slots = sorted({len(twins[n]) + 1 for n in tied})
    words = {2: "two", 3: "three", 4: "four"}
    slots_text = " or ".join(words.get(m, str(m)) for m in slots)
    parts.append(
        "at "
        + "; at ".join(f"{sizes_text(ns)} the measured plan runs the very kernels of {who}" for who, ns in groups.items())
        + f" (table above). There the loop times the same code in {slots_text} "
        "slots (the measured plan's and theirs), so which of them came first is noise: those sizes count as neither "
        "a win nor a loss of the plan."
    )
if chosen_sizes:
    parts.append(
        f"At the {plural(len(chosen_sizes), 'size', 'sizes')} where the plan runs kernels no other setup runs "
        f"({sizes_text(chosen_sizes)}), it was the fastest of the four by more than the noise floor "
        f"({noise_level:.0%}) at {sizes_text(wins) if wins else 'none of them'}"
        + (f"; at {sizes_text([n for n in first if n not in wins])} its median was the lowest, but within that floor "
           "of the next setup's (by " + ", ".join(f"{ahead[n]:.1%}" for n in first if n not in wins) + "): "
           + ("a tie, not a win." if len(first) - len(wins) == 1 else "ties, not wins.")
           if len(wins) < len(first) else ".")  # fmt: skip
    )
else:
    parts.append("At no size timed does the plan run kernels of its own, so this loop cannot test its choices.")
if lost:
    # another setup's median lower than the plan's: a loss only beyond the noise floor; inside it, a tie
    level_sizes = [n for n in lost if behind[n] <= noise_level]
    beyond = [n for n in lost if behind[n] > noise_level]
    if level_sizes:
        gaps = [behind[n] for n in level_sizes]
        parts.append(
            f"At {sizes_text(level_sizes)} another setup's median was lower than the plan's, by "
            + (f"{gaps[0]:.1%}" if len(gaps) == 1 else f"{min(gaps):.1%}–{max(gaps):.1%}")
            + f": within the noise floor ({noise_level:.0%}), so "
            + ("a tie, not a loss." if len(gaps) == 1 else "ties, not losses.")
        )
    if beyond:
        parts.append(
            f"At {sizes_text(beyond)} the plan trailed the fastest by more than the noise floor ({noise_level:.0%}: "
            + ", ".join(f"{behind[n]:.0%} behind {linear_cmp.fastest(n)} at n = {n}" for n in beyond)
            + "): a plan chosen once, on each matrix alone, is not guaranteed to give the fastest whole forward — a "
            "forward also runs attention and the other layers, and the load differs from the moment the plan was "
            "measured (`tune_linear(model, refresh=True)` measures again)."
        )
few = [n for n in sizes if n <= 4]  # a few rows: where stock kernels stumble on some CPUs
others = [name for name in linear if name not in ("stock nn.Linear", "measured plan")]  # the other kernels alone
if few and others:
    best_other = statistics.geometric_mean([min(curves[o](n) for o in others) for n in few])
    stock_few = statistics.geometric_mean([curves["stock nn.Linear"](n) for n in few])
    alternatives = " and ".join(others)
    parts.append(compare(
        stock_few * 1e3, best_other * 1e3,
        f"For a few rows ({sizes_text(few)}) torch's stock kernel was slower here than the better of {alternatives} "
        "({a:.1f} against {b:.1f} ms, geometric means): on this CPU the other kernels earn their place there.",
        f"For a few rows ({sizes_text(few)}) torch's stock kernel was faster here than the better of {alternatives} "
        "({a:.1f} against {b:.1f} ms, geometric means): on this CPU it needs no replacing there.",
        f"For a few rows ({sizes_text(few)}) torch's stock kernel and the better of {alternatives} took about the "
        "same ({a:.1f} against {b:.1f} ms, geometric means: within the noise floor).",
        rel_tol=noise_level,
    ))  # fmt: skip
# stock slower than the plan by more than the spread, where the plan is not stock itself (a tie by construction)
stock_slower = [n for n, r in zip(sizes, stock_over, strict=True)
                if r > 1 + noise_level and "stock nn.Linear" not in twins[n]]  # fmt: skip
parts.append(
    f"Over all sizes torch's stock `nn.Linear` took {min(stock_over):.2f}–{max(stock_over):.2f}× the measured plan's "
    f"time, longer by more than the noise floor at {len(stock_slower)} of the {len(sizes)} sizes."
)
Markdown(" ".join(parts))

# %% [markdown]
# ## 2. Attention over the cache
#
# SmolLM2 uses grouped-query attention: 9 query heads share 3 key/value heads. transformers' `sdpa`
# attention hands the 3 K/V heads to torch's kernel directly only when there is *no* attention mask —
# that is, for one-token steps. Every forward of 2+ tokens over a cache (every verification) has a mask,
# and then it first expands K/V to 9 heads (`repeat_kv`): a copy of the whole cache, per layer, per
# forward — work proportional to the context. On CPU torch's kernel takes GQA and a mask together, so
# `load_model` selects `specdec_lab.models.attention.gqa_sdpa_attention` (registered through transformers'
# public `AttentionInterface`; nothing is patched), which skips the copy. Whether skipping it makes a forward
# faster on this machine, and whether any saving grows with the context — the copy is one part of a forward
# whose linear layers cost the same at every context — is for the timing below to say. Same numbers first:

# %% tags=["nbval-check-output"]
from specdec_lab.models.attention import ATTENTION
from specdec_lab.models.kernel_setups import attention_setups

attention = attention_setups(model)
same_attention = agreement(model, attention)
attention[ATTENTION]()  # back to the default
print(f"{' vs '.join(attention)}, {same_attention['forwards']} forwards of 1-64 tokens after a cache:")
print(f"  same greedy token at every position: {same_attention['same_tokens']}")
print(f"  largest logit difference below 1e-3: {same_attention['max_abs_diff'] < 1e-3}")

# %% [markdown]
# Then both timed in one loop at each context of `contexts`, where the copy is the size of the cache. The
# table gives t(n) in milliseconds for each attention at each context and the ratio of the two (below one:
# `sdpa_gqa` is faster):

# %% tags=["nbval-ignore-output"]
attention_cmp = {  # each setup warmed after its switch, as in section 1
    c: compare_cost_curves(model, {name: warmed(f) for name, f in attention.items()}, sizes=sizes, context=c,
                           repeats=repeats)
    for c in contexts
}  # fmt: skip
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
from specdec_lab.lab.course import compare


def attention_verdict(context: int, cmp) -> tuple[str, str, float, list[int]]:
    """The sentence for one context, the median's verdict ("faster", "slower" or "within"), the median ratio and
    the masked sizes faster beyond the floor."""
    ratio = dict(zip(sizes, cmp.ratio(ATTENTION, "sdpa"), strict=True))
    masked = [n for n in sizes if n > 1]  # n = 1 has no mask: both run the same kernel
    control = abs(ratio[1] - 1)  # n = 1: the same kernel timed twice, so its ratio's distance from 1 is noise
    floor = max(cmp.noise.spread, control)  # a size counts only beyond both the repeats' spread and the control
    faster = [n for n in masked if ratio[n] < 1 - floor]
    slower = [n for n in masked if ratio[n] > 1 + floor]
    median = statistics.median(ratio[n] for n in masked)
    verdict = "within" if abs(median - 1) <= floor else "faster" if median < 1 else "slower"
    text = (
        f"At context {context} the noise floor is {floor:.0%} (the larger of the repeats' spread, "
        f"{cmp.noise.spread:.0%}, and the n = 1 control's distance from 1, where the same kernel ran twice and the "
        f"ratio was {ratio[1]:.2f}). {ATTENTION} was faster than sdpa by more than that at "
        f"{len(faster)} of the {len(masked)} masked sizes (n ≥ 2{'; ' + sizes_text(faster) if faster else ''})"
    )
    if slower:
        text += f", slower by more than it at n = {', '.join(map(str, slower))}"
    level = len(masked) - len(faster) - len(slower)
    if level:
        text += f", within the noise at the other {level}"
    text += f". Its median time over the masked sizes was {median:.2f}× sdpa's: "
    # a median within the floor is no saving across the sizes, but the sizes beyond it (either way) are named: a
    # saving at some sizes only is neither "no saving" nor a saving at this context
    only = "; ".join(
        f"{word} beyond it at {sizes_text(ns)} only" for word, ns in (("a saving", faster), ("slower", slower)) if ns
    )
    text += {
        "faster": "faster beyond the floor, a saving at this context.",
        "slower": "slower beyond the floor, so skipping the copy saved nothing at this context.",
        "within": "within the floor, so across the masked sizes this run cannot tell the two apart"
        + (f" ({only}, not across the sizes)." if only else " — no saving beyond the noise at any size."),
    }[verdict]
    return text, verdict, median, faster


verdicts = {c: attention_verdict(c, cmp) for c, cmp in attention_cmp.items()}
trend = ""
if len(verdicts) > 1:
    (c0, (_, v0, m0, _)), (c1, (_, v1, m1, _)) = list(verdicts.items())[0], list(verdicts.items())[-1]
    spread = max(cmp.noise.spread for cmp in attention_cmp.values())
    if v0 == v1 == "faster":  # a saving at both contexts: did it grow with the copy it removes?
        trend = " " + compare(
            m0, m1,
            "From context {c0} to {c1} the median ratio fell from {a:.2f} to {b:.2f}: the saving grew with the "
            "context, as the copy it removes does.",
            "From context {c0} to {c1} the median ratio rose from {a:.2f} to {b:.2f}: the saving did not grow with "
            "the context in this run, so at these contexts the copy is not what decides the time of a forward.",
            "From context {c0} to {c1} the median ratio went from {a:.2f} to {b:.2f}, a change within the repeats' "
            "spread ({spread:.0%}): this run cannot tell whether the saving grows with the context.",
            rel_tol=spread, c0=c0, c1=c1, spread=spread,
        )  # fmt: skip
    elif v1 == "faster":  # a saving only at the longer context
        trend = (
            f" Only at context {c1} did {ATTENTION} save time beyond the noise (median ratio {m0:.2f} at context "
            f"{c0}, {m1:.2f} at {c1}): the saving showed where the copy it removes is the largest."
        )
    elif v0 == "faster":  # a saving at the shorter context only
        trend = (
            f" {ATTENTION} saved time beyond the noise at context {c0} but not at {c1} (median ratio {m0:.2f}, then "
            f"{m1:.2f}): in this run the saving did not grow with the context."
        )
    else:
        without = [c for c, (_, v, _, _) in verdicts.items() if v != "faster"]
        where = f"context{'s' if len(without) > 1 else ''} {' and '.join(map(str, without))}"
        # contexts whose median was within the floor but with some sizes faster beyond it: named, not called "none"
        some = [f"at context {c} at {sizes_text(f)} only" for c, (_, v, _, f) in verdicts.items() if v == "within" and f]
        trend = (
            f" At {where} {ATTENTION}'s median over the masked sizes showed no saving beyond the noise"
            + (f" (a saving beyond it {'; '.join(some)})" if some else "")
            + ", so this run has no saving across the sizes whose growth with the context it could read (the median "
            f"ratio went from {m0:.2f} at context {c0} to {m1:.2f} at {c1}). The copy it skips is one part of a forward "
            f"whose linear layers cost the same at every context; on this machine, at {where}, skipping it did not "
            "show as a saving above the noise across the sizes."
        )
# which of the two set each context's floor: the n = 1 control where it was larger than the repeats' spread
set_by = {}
for c, cmp in attention_cmp.items():
    control = abs(cmp.ratio(ATTENTION, "sdpa")[sizes.index(1)] - 1)
    set_by.setdefault("the n = 1 control" if control > cmp.noise.spread else "the repeats' spread", []).append(c)
Markdown(
    " ".join(text for text, _, _, _ in verdicts.values())
    + trend
    + " At n = 1 there is no mask and both run the same kernel, so their difference there is noise — which is why"
    " each floor above takes it into account; in this run "
    + " and ".join(f"{who} set it at context{'s' if len(cs) > 1 else ''} {' and '.join(map(str, cs))}"
                   for who, cs in set_by.items())
    + "."
)  # fmt: skip

# %% [markdown]
# ## 3. What the kernels mean for speculation
#
# A kernel choice need not only scale the milliseconds: it can change the *shape* of t(n), and the break-even
# t(n)/t(1) a step must beat is a ratio of two of its points. The right panel of the figure in section 1
# shows it per setup; the table below reads it at a few draft sizes, and the sentence under it says whether
# this run's kernels differ in t(1) and in shape by more than the noise floor of section 1 (setups that run the very
# same kernels at a size count as one kernel there: their gap is noise). Sizing a tree by the hardware's own
# t(n) is what Sequoia calls hardware-aware ([Chen et al. 2024](https://arxiv.org/abs/2402.12374)); every
# sizing rule of this workbook does it with the measured curve. Since every method's speed-up depends on the
# kernels, a benchmark file should say which it ran; the sentence under the table counts, from the files in
# `data/bench/` themselves, which record them (`linear` and `linear_plan` in the config, the CPU's ISA under
# `machine`) and which do not.

# %% tags=["nbval-ignore-output"]
import json
from pathlib import Path

from specdec_lab.lab.course import within_tol

reads = [n for n in (2, 4, 8, 16) if n in sizes]
display(
    pd.DataFrame({name: {f"t({n})/t(1)": c(n) / c(1) for n in reads} for name, c in curves.items()})
    .T.rename_axis("setup (context 64)")
    .round(2)
)
# setups that run the very same code at a size are one kernel there (section 1: their gap is noise), so t(1) and the
# shape are compared between kernels, each at the median of the setups that run it
t1 = {name: c(1) for name, c in curves.items()}
t1_read = kernel_groups(t1, {s: kernels[s][1] for s in curves})


def shape_groups(n: int, among: list[str] | None = None):
    """t(n)/t(1) by kernel: setups that run the same code at 1 and at n rows count as one."""
    names = [s for s in curves if among is None or s in among]
    ratios = {s: curves[s](n) / curves[s](1) for s in names}
    return kernel_groups(ratios, {s: (kernels[s][1], kernels[s][n]) for s in names})


# a ratio of two medians carries the noise of both: its floor is twice section 1's
shape_gap = {n: shape_groups(n).gap for n in reads}
shape_apart = [n for n in reads if shape_gap[n] > 2 * noise_level]


def falls_after(name: str, n: int) -> list[int]:
    """The larger sizes whose median `name` ran faster than its t(n): more rows for less time, so at least one of
    the two medians is off (or that kernel has a slow path at n rows; one run cannot tell which)."""
    return [m for m in sizes if m > n and curves[name](m) < curves[name](n)]


# a gap that rests on such a point (without that setup the others' shapes agree within the floor) is not read as a
# change of shape: a curve that falls with more rows is one noisy median as likely as another kernel
bumpy = {n: [s for s in curves if falls_after(s, n)] for n in shape_apart}
steady = {n: [s for s in curves if s not in bumpy[n]] for n in shape_apart}
rests = [n for n in shape_apart if bumpy[n] and len(steady[n]) > 1
         and shape_groups(n, steady[n]).gap <= 2 * noise_level]  # fmt: skip
shape_read = [n for n in shape_apart if n not in rests]
shape_text = (
    f"differed between kernels by more than twice that floor (the noise of a ratio of two medians) at "
    f"{sizes_text(shape_read)}: another kernel, another break-even there"
    if shape_read
    else "differed between kernels by more than twice that floor (the noise of a ratio of two medians) only where a "
    "curve fell with more rows (below): this run shows no change of shape it can read"
    if rests
    else "differed between kernels by no more than twice that floor (the noise of a ratio of two medians) at any n "
    "read: this run shows no change of shape beyond the noise"
)  # fmt: skip
for n in rests:
    notes = "; ".join(
        f"{s}'s t({n}) lay above its own t({m}) ({curves[s](n) * 1e3:.1f} against {curves[s](m) * 1e3:.1f} ms)"
        for s in bumpy[n] for m in falls_after(s, n)[:1]
    )  # fmt: skip
    shape_text += (
        f". At n = {n} the gap rests on a curve that falls with more rows — {notes} — and without "
        f"{' and '.join(bumpy[n])} the other setups' t({n})/t(1) agree within that floor: a forward over more rows "
        "that takes less time is one noisy median or that kernel's own slow path at so few rows, and one run cannot "
        f"tell which, so this run does not read a moved break-even at n = {n} from it"
    )


def setups_text(group: tuple[str, ...]) -> str:
    return group[0] if len(group) == 1 else ", ".join(group[:-1]) + " and " + group[-1]


t1_text = (f"Across the {len(curves)} setups t(1) ranged from {min(t1.values()) * 1e3:.1f} to "
           f"{max(t1.values()) * 1e3:.1f} ms")  # fmt: skip
for group, (lo, hi) in zip(t1_read.groups, t1_read.spans, strict=True):
    if len(group) > 1:
        t1_text += (f"; {setups_text(group)} run the very same kernels at n = 1 ({lo * 1e3:.1f}–{hi * 1e3:.1f} ms: "
                    "that spread is noise)")  # fmt: skip
if t1_read.kernels == 1:
    t1_differs = False
    t1_text += ". Every setup runs the same kernels at one row, so this run has no t(1) difference between kernels"
else:
    t1_differs = not within_tol(t1_read.highest, t1_read.lowest, noise_level)
    between = (
        f". Between the {t1_read.kernels} different sets of kernels (each at the median of the setups that run it) "
        f"t(1) went from {{b:.1f}} ms ({setups_text(t1_read.groups[0])}) to {{a:.1f}} ms "
        f"({setups_text(t1_read.groups[-1])}), a {t1_read.gap:.0%} gap"
    )
    t1_text += compare(
        t1_read.highest * 1e3, t1_read.lowest * 1e3,
        between + f", beyond section 1's noise floor of {noise_level:.0%}: another kernel, another t(1)",
        between + f", beyond section 1's noise floor of {noise_level:.0%}: another kernel, another t(1)",
        between + f", within section 1's noise floor of {noise_level:.0%}: this run does not tell the kernels' t(1) "
        "apart",
        rel_tol=noise_level,
    )  # fmt: skip
display(Markdown(t1_text + "; t(n)/t(1) — the shape — " + shape_text + "."))

bench_records = {f.name: json.loads(f.read_text()) for f in sorted(Path(bench_file).parent.glob("*.json"))}
with_kernels = [name for name, r in bench_records.items()
                if isinstance(r.get("config"), dict) and {"linear", "linear_plan"} <= set(r["config"])]  # fmt: skip
without_kernels = [name for name in bench_records if name not in with_kernels]
with_isa = [name for name, r in bench_records.items() if isinstance(r.get("machine"), dict) and r["machine"].get("isa")]
read_here = [Path(f).name for f in (bench_file, *builds_bench_files)]
Markdown(
    f"Of the {len(bench_records)} benchmark files in `data/bench/`, {len(with_kernels)} record the linear kernels "
    "they ran (`linear` and `linear_plan` in their config)"
    + (f"; the other {len(without_kernels)} do not: {', '.join(without_kernels)}." if without_kernels else ".")
    + f" {len(with_isa)} of the {len(bench_records)} record the CPU's ISA under `machine`"
    + ("." if len(with_isa) == len(bench_records) else
       f" (not: {', '.join(n for n in bench_records if n not in with_isa)}).")
    + f" Of the {len(read_here)} benchmark files section 4 reads, {sum(n in with_kernels for n in read_here)} record "
    f"their kernels; its build curves ({Path(variants_file).name}) record "
    + ("theirs." if "linear" in json.loads(Path(variants_file).read_text()) else "none.")
)  # fmt: skip

# %% [markdown]
# ## 4. A cheaper step: compiled, and int8 or int4 weights
#
# Sections 1–2 chose kernels for the same fp32 forward. Two other levers change the forward itself:
#
# * **compiling** it (`load_model(..., compile=True)`: `torch.compile`, inductor's C++ on a CPU) fuses the
#   small operators between the matrix products — norms, rotary embeddings, activations — and removes
#   Python's per-operator overhead (how much of a step that was is the table below: t(1) eager against compiled);
# * **fewer bytes of weights** (`load_model(..., weights="int8")` per output channel, `"int4"` in groups of
#   32 loaded from the model file's own 4-bit blocks): a one-token step must stream every weight once, so
#   its floor is the weights' bytes over the memory bandwidth (the memory wall, `specdec_lab.cost.memory_wall`:
#   why decoding is bound by memory, not arithmetic, as [Chen et al. 2023](https://arxiv.org/abs/2302.01318)
#   put it for speculative sampling).
#
# `python -m specdec_lab.bench.step_variants` measured t(n) of each build in one loop (each repeat runs every
# build once, the order rotated) and stored it with its machine, which the table's caption and the figure's
# title name (it need not be the machine of this notebook's "Ran on" line). The file records no LM-head setting: a
# file committed before section 5's levers ran its quantized builds with the defaults of that day, the fp32 LM head
# and separate products, and the table names them so (`+head=fp32`, compiled `+unfused`; the caption says which),
# as the bench tables below do, so that one name means one build everywhere. The table gives each build's t(1),
# the tokens per second of one token a step (1/t(1)), t(n)/t(1) at a few sizes, and the seconds its first
# forwards took (`warm-up s`: compiling is paid there).

# %% tags=["nbval-ignore-output"]
import json
import subprocess
from pathlib import Path

from specdec_lab.bench.builds import Build
from specdec_lab.bench.step_variants import variant_curves
from specdec_lab.viz.results import machine_label


def committed_at(path: str, fmt: str = "%ct") -> str:
    """When the file was last committed (git's `fmt`: %ct seconds, %cs the date), or '' without git history."""
    try:
        out = subprocess.run(["git", "log", "-1", f"--format={fmt}", "--", Path(path).name], cwd=Path(path).parent,
                             capture_output=True, text=True, timeout=20, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


record = json.loads(Path(variants_file).read_text())
# the file records no LM-head setting nor stacked products: committed before section 5's levers (the profile file),
# its quantized builds held the defaults of their day, the fp32 head and separate products; each is named so, as
# `bench.report.by_build` names the bench files' builds, so that a name means one build in every section
variants_t, levers_t = committed_at(variants_file), committed_at(profile_file)
pre_levers = bool(variants_t and levers_t) and int(variants_t) < int(levers_t)
held_name = {
    name: Build(v["weights"], v["compile"], "fp32", not v["compile"]).name
    if pre_levers and v["weights"] != "fp32" and "head" not in v else name
    for name, v in record["variants"].items()
}  # fmt: skip
variants = {held_name[name]: c for name, c in variant_curves(record).items()}
variant_records = {held_name[name]: v for name, v in record["variants"].items()}
variants_machine = machine_label(record["machine"])
step_table = pd.DataFrame(
    {
        name: {
            "t(1) ms": c(1) * 1e3,
            "tokens/s at one token a step": 1 / c(1),
            **{f"t({n})/t(1)": c(n) / c(1) for n in (2, 4, 8, 16)},
            "warm-up s": variant_records[name].get("warmup_seconds"),
        }
        for name, c in variants.items()
    }
).T.rename_axis("build")
renamed = [f"{old} as {new}" for old, new in held_name.items() if old != new]
display(step_table.style.format("{:.2f}", na_rep="–").set_caption(
    f"{Path(variants_file).name}: measured on {variants_machine}, context {record['context']}, "
    f"{record['repeats']} repeats" + (f"; the file's {', '.join(renamed)} (committed before section 5's levers: "
                                      "the fp32 LM head, separate products)" if renamed else "")
))  # fmt: skip

# the shape of each quantized build's curve against fp32's (exercise 3 asks what it does to speculation); the file
# keeps medians only, no spread. Its own sign of noise is a curve that falls with more rows (a forward over more rows
# that took less time: one of the two medians is off by at least that much, or that kernel has a slow path there), so
# the yardstick for a ratio of two medians is twice the largest such fall in the file: the file's, whatever load this
# run met (section 3's doubling); a file with no fall leaves only this run's floor for a ratio of two medians
fp32_name = next(iter(variants))  # the fp32 eager build, the file's first row
quantized = [name for name, v in variant_records.items() if v["weights"] != "fp32"]
falls = [(c.seconds[i] / c.seconds[j] - 1, name, c.sizes[i], c.sizes[j]) for name, c in variants.items()
         for i in range(len(c.sizes)) for j in range(i + 1, len(c.sizes)) if c.seconds[j] < c.seconds[i]]  # fmt: skip
if falls:
    fall, fall_name, fall_n, fall_m = max(falls)
    shape_tol = 2 * fall
    yardstick_text = (
        f"the file keeps medians only, no spread; its one sign of its own noise is a curve that falls with more rows, "
        f"the largest {fall_name}'s from n = {fall_n} to {fall_m} ({fall:.0%}), so the yardstick is twice that, "
        f"{shape_tol:.0%}, for a ratio of two medians — the file's own, but a rough one: a fall shows the least its "
        "noise was"
    )
else:
    shape_tol = 2 * noise_level
    yardstick_text = (
        f"the file keeps medians only, and none of its curves falls with more rows; the yardstick is twice this "
        f"run's section-1 noise floor, {shape_tol:.0%}, the noise of a ratio of two medians here — another run's, "
        "so a rough one"
    )
shape_parts = []
steeper_everywhere = []
for n in (4, 8, 16, 32, 64):  # the sizes the figure below shows beyond 2
    base_ratio = variants[fp32_name](n) / variants[fp32_name](1)
    ratios = {q: variants[q](n) / variants[q](1) for q in quantized}
    said = {q: compare(r, base_ratio, "steeper", "flatter", "within", rel_tol=shape_tol) for q, r in ratios.items()}
    count = {w: sum(v == w for v in said.values()) for w in ("steeper", "flatter", "within")}
    head = (f"at n = {n} the quantized builds' t(n)/t(1) ran {min(ratios.values()):.2f}–{max(ratios.values()):.2f} "
            f"against {fp32_name}'s {base_ratio:.2f}: ")  # fmt: skip
    if count["steeper"] == len(ratios):
        steeper_everywhere.append(n)
        shape_parts.append(head + "every one steeper, beyond the yardstick")
    elif count["flatter"] == len(ratios):
        shape_parts.append(head + "every one flatter, beyond the yardstick")
    elif count["within"] == len(ratios):
        shape_parts.append(head + "every one within the yardstick, no order")
    else:
        shape_parts.append(head + ", ".join(f"{count[w]} {w}" for w in ("steeper", "flatter", "within") if count[w])
                           + f" of the {len(ratios)}")  # fmt: skip
if quantized:
    display(Markdown(
        f"The curves' shapes in {Path(variants_file).name}, quantized against {fp32_name} ({yardstick_text}): "
        + "; ".join(shape_parts) + ". "
        + (f"Where they are steeper ({sizes_text(steeper_everywhere)}), fewer bytes cut t(1) more than t(n): a "
           "draft that deep buys less from speculation on a quantized build than on fp32 (exercise 3)."
           if steeper_everywhere else "At no n read was every quantized curve steeper than fp32's beyond it.")
    ))  # fmt: skip

# %% [markdown]
# The file's fp32 row and section 1's "measured plan" both time an fp32 forward of this model, in two different
# runs: the file's, made by `step_variants` on its machine at another moment, and this notebook's, now. Whether
# they ran the same linear kernels is for the file to say, if it records them. The next cell sets the two t(1) side
# by side.

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.provenance import same_machine

base_name = next(iter(variants))  # the fp32 eager build, the file's first row
file_t1, live_t1 = variants[base_name](1) * 1e3, curves["measured plan"](1) * 1e3
when = committed_at(variants_file, "%cs")
file_run = (
    f"{Path(variants_file).name}: {'a machine reporting the same CPU' if same_machine(record['machine']) else 'another machine'}, "
    f"{variants_machine}, {record['repeats']} repeats, " + (f"committed {when}" if when else "no date recorded")
)  # fmt: skip
same_forward = (
    "The file's {base} t(1) is {a:.1f} ms; section 1 of this run timed the fp32 forward with its measured plan "
    "(context {ctx}) at {b:.1f} ms"
    + ("" if "linear" in record else
       " — the file does not record which linear kernels its forward ran, and section 3 found the kernel choice "
       "alone moving t(1) beyond this run's noise, so the two need not be the same forward" if t1_differs else
       " — the file does not record which linear kernels its forward ran (this run's kernels did not move t(1) beyond "
       "its noise, section 3, but that is one run's reading), so the two need not be the same forward")
)
apart = (
    same_forward + ". These are two runs ({file_run}; this run: the \"Ran on\" line, now), and they differ by more "
    "than this run's noise floor ({spread:.0%}, section 1: the larger of the repeats' spread and the twin gap): a step's seconds depend on the machine's load, the kernels and the "
    "library's code at the moment of measuring, so compare builds only within the file (one loop, one load), never a "
    "file's row with a live one."
)
display(Markdown(compare(
    file_t1, live_t1, apart, apart,
    same_forward + ": two runs ({file_run}; this run: the \"Ran on\" line, now) that agree within this run's "
    "noise floor ({spread:.0%}, section 1: the larger of the repeats' spread and the twin gap).",
    rel_tol=noise_level, base=base_name, ctx=linear_cmp.context, file_run=file_run, spread=noise_level,
)))  # fmt: skip

# %% tags=["nbval-ignore-output"]
cost_curves_figure(variants, title=f"One verify step, each build (context {record['context']}) — {variants_machine}")

# %% [markdown]
# Why does a cheaper step change what speculation buys? A step that verifies n tokens and emits L of them
# costs t(n) plus the loop's own work s (accepting, the proposer, bookkeeping); plain decoding emits one token
# per step of t(1) plus its own loop work s₁ (sampling, bookkeeping, no proposer). Over a decode, with τ the
# measured mean of L, against plain decoding
#
# $$\text{speed-up} \approx \frac{\tau\,(t(1) + s_1)}{t(n) + s}.$$
#
# Making t cheaper by a constant factor f leaves this alone only if s and s₁ shrink with it; with both fixed, the
# ratio falls as f falls exactly when s/s₁ > t(n)/t(1) (its derivative in f has the sign of t(1)·s − t(n)·s₁): the
# speculative loop's own work, which carries the proposer's Python, outweighs plain decoding's by more than its
# forward outweighs a one-token one. Compiling the target
# removes overhead from t, not from the proposer's Python; and smaller weights are expected to shrink t(1) —
# the bytes — more than t(n), whose extra rows pay the de-quantisation again (whether they do is the curves'
# to say: the table above). `replay_variants` re-prices a recorded bench
# run (every step's tree, accepted tokens and phase timings kept) under each build's curve, with the loop's
# own seconds either shrinking like t(1) or staying as measured — the two bracket what the build would do.
# The recorded run and the curves may come from different machines; the caption names both.

# %% tags=["nbval-ignore-output"]
from specdec_lab.bench.step_variants import replay_variants

bench = json.loads(Path(bench_file).read_text())
bench_machine = machine_label(bench["machine"])
shrinks = replay_variants(bench, variants, scale_overhead=True)
stays = replay_variants(bench, variants, scale_overhead=False)
methods = [m for m in next(iter(shrinks.values())) if m != "autoregressive"]
replay_table = pd.DataFrame(
    {
        (name, how): {m: table[m] for m in methods}
        for name in variants
        for how, table in (("shrinks", shrinks[name]), ("stays", stays[name]))
    }  # fmt: skip
)
replay_table.columns.names = ["build", "loop's own seconds"]
replay_table.rename_axis("method").style.format("{:.2f}").set_caption(
    f"speed-up over autoregressive on the same build: {Path(bench_file).name} ({bench_machine}) re-priced "
    f"under the curves of {Path(variants_file).name} ({variants_machine})"
)  # fmt: skip

# %% tags=["nbval-ignore-output"]
MEDIAN_TOL = 0.05  # two replayed speed-ups of one file's medians: a gap under 5% is counted level (a threshold set
# here: the file's medians carry no spread to judge by)
fastest = min(variants, key=lambda v: variants[v](1))
best = max(methods, key=lambda m: stays[base_name][m])
change = stays[fastest][best] / stays[base_name][best]
Markdown(
    f"The cheapest one-token step in {Path(variants_file).name} ({variants_machine}) is **{fastest}** (t(1) "
    f"{variants[fastest](1) * 1e3:.1f} ms against {variants[base_name](1) * 1e3:.1f} ms for {base_name}). On it, "
    f"{best} — the method this replay gives the largest speed-up on {base_name} — would have a speed-up of "
    f"{stays[fastest][best]:.2f}× against {stays[base_name][best]:.2f}× on {base_name} ({change:.0%} of it) if its "
    f"own work did not shrink, and {shrinks[fastest][best]:.2f}× ({shrinks[fastest][best] / shrinks[base_name][best]:.0%}) "
    "if it shrank like t(1). "
    + compare(
        change, 1.0,
        "On the file's medians speculation would buy more on that step than on the base build",
        "On the file's medians speculation would buy less on that step than on the base build",
        "On the file's medians speculation would buy about what it buys on the base build (within 5%, a "
        "threshold set here: the medians carry no spread)",
        rel_tol=MEDIAN_TOL,
    )
    + "; the file records medians only, no spread, so this is what its medians say, not an order beyond its noise "
    "(a build file with repeats per size would be needed for that)."
)  # fmt: skip

# %% tags=["nbval-ignore-output"]
# the model's prediction (the cheaper the step, the smaller the gain) against the replay table, pair by pair: for every
# method and every two builds, is the speed-up ("stays") lower on the build with the cheaper t(1)?
by_t1 = sorted(variants, key=lambda v: variants[v](1))  # cheapest first
tol = MEDIAN_TOL  # the file keeps medians only: the counts below are what its medians say (a gap under 5% counted
# level, a threshold set here), not orders beyond a noise the file does not record
held, broke, level = 0, {}, 0
for i, cheap in enumerate(by_t1):
    for dear in by_t1[i + 1 :]:
        for m in methods:
            r = stays[cheap][m] / stays[dear][m]
            if r * (1 + tol) < 1:  # compare's reading: lower by more than tol of the smaller
                held += 1
            elif r > 1 + tol:
                broke.setdefault((cheap, dear), []).append(m)
            else:
                level += 1
pairs = held + level + sum(map(len, broke.values()))
Markdown(
    "The formula predicts a smaller gain on a cheaper step where the speculative loop's own seconds outweigh plain "
    "decoding's by more than t(n) outweighs t(1) (s/s₁ > t(n)/t(1)), and more so if fewer bytes shrink t(1) more "
    "than t(n). What the replay table's medians say (loop's own seconds staying as measured): over "
    f"{pairs} comparisons (each method, each two builds with different t(1)) the build with the cheaper step had "
    f"the lower speed-up in {held}, about the same (within {tol:.0%}, a threshold set here: the medians carry no "
    f"spread) in {level}"
    + (
        ", and the higher one in " + str(sum(map(len, broke.values()))) + ": "
        + "; ".join(
            f"{cheap} (t(1) {variants[cheap](1) * 1e3:.1f} ms) over the dearer {dear} ({variants[dear](1) * 1e3:.1f} ms) "
            f"for {'every method' if len(ms_) == len(methods) else ', '.join(ms_)}"
            for (cheap, dear), ms_ in broke.items()
        )
        + ": t(1) alone did not rank these gains; the curve's shape and the loop's own seconds weigh in (exercise 3)."
        if broke
        else (", and the higher one in none." if held else ": the medians do not order the builds' gains at all.")
    )
    + " The file records medians only: these counts are what they say, not orders beyond a noise it does not record."
)  # fmt: skip

# %% [markdown]
# The replay predicts; the bench measures. One bench run put every build side by side — the same methods on
# fp32 and int4 weights, eager and compiled (`--methods autoregressive,hybrid@int4+compile,...`: a method's
# `@build` suffix, `specdec_lab.bench.builds`), rotated per prompt, beside transformers' and llama.cpp's own
# decoding of the same model file. `tokens_per_s` is each method's Σ tokens / Σ seconds; `speedup` is over fp32
# eager autoregressive in that run; `speedup_own` over the same build's autoregressive; `identical` is the
# fraction of prompts whose output equals that build's own autoregressive output (a quantized model is another
# model; an anchor — transformers, llama.cpp — has no build of ours and is compared with fp32 eager
# autoregressive, so llama.cpp's 4-bit file need not agree with it); `mean_accepted` (the anchors' table) is tokens per target forward, bonus included.
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
# with its file and the machine it ran on; the last is summed up below. The
# later runs timed autoregressive decoding on every build but each speculative method only on the builds they
# were checking: a method a run did not time on a build shows as NaN in its tables (rows and columns with no
# value at all are dropped). These files predate section 5's levers: each build is named by what its run held
# (`bench.report.by_build`), so their compiled int4 builds read `int4+head=fp32+compile+unfused` — the fp32 LM
# head and separate products — not today's default `int4+compile`.

# %% tags=["nbval-ignore-output"]
from specdec_lab.bench.report import by_build, speedup_interval


def fastest_of(run: dict, frame: pd.DataFrame) -> str:
    """The fastest row of `frame` (by_build rows of `run`) and whether this run tells it from the next fastest:
    the paired 95% interval of the two over the prompts both ran (a bootstrap over the prompts)."""
    ranked = frame.sort_values("tokens_per_s", ascending=False)
    top = ranked.iloc[0]
    name = f"**{top.method}**" + (f" on {top.build}" if frame.build.nunique() > 1 else "")
    if len(ranked) < 2:
        return f"{name}, {top.tokens_per_s:.1f} tokens/s"
    nxt = ranked.iloc[1]
    iv = speedup_interval([r for r in run["rows"] if r["method"] == top.label],
                          [r for r in run["rows"] if r["method"] == nxt.label])  # fmt: skip
    against = f"{nxt.method}" + (f" on {nxt.build}" if frame.build.nunique() > 1 else "")
    if iv and iv[0] > 1:
        verdict = f"ahead of the next, {against} ({nxt.tokens_per_s:.1f}), beyond the paired interval [{iv[0]:.2f}, {iv[1]:.2f}]"
    else:
        verdict = (f"level with the next, {against} ({nxt.tokens_per_s:.1f}): their paired interval "
                   + (f"[{iv[0]:.2f}, {iv[1]:.2f}] holds one" if iv else "is not defined") + ", this run does not order them")  # fmt: skip
    return f"{name}, {top.tokens_per_s:.1f} tokens/s — {verdict}"

for builds_bench_file in builds_bench_files:
    builds_run = json.loads(Path(builds_bench_file).read_text())
    build_rows = pd.DataFrame(by_build(builds_run))
    ours = build_rows[build_rows.build != "anchor"]
    attention = {b.get("attention") for b in builds_run["config"].get("builds", {}).values() if b.get("exact_rows")}
    display(Markdown(
        f"**{Path(builds_bench_file).name}**: {builds_run['prompts_done']} prompts, "
        f"{builds_run['config']['max_new_tokens']} new tokens; measured on {machine_label(builds_run['machine'])}; "
        f"exact-rows attention: {', '.join(sorted(attention)) or 'none'}"
    ))  # fmt: skip
    for values in (["tokens_per_s", "speedup"], ["speedup_own", "identical"]):  # two tables: each fits the page
        # a run that did not run every method on every build leaves empty cells: drop the rows and columns with none
        display(ours.pivot_table(index="method", columns="build", values=values, sort=False)
                .dropna(how="all").dropna(axis=1, how="all").round(2))  # fmt: skip
    display(build_rows[build_rows.build == "anchor"].set_index("method")[["tokens_per_s", "speedup", "mean_accepted",
                                                                          "identical"]].round(2))  # fmt: skip

# %% tags=["nbval-ignore-output"]
anchors = build_rows[build_rows.build == "anchor"].set_index("method").tokens_per_s
anchor_labels = build_rows[build_rows.build == "anchor"].set_index("method").label
exact = ours[(ours.identical == 1.0) & (ours.method != "autoregressive")]  # speculative, equal on every prompt
top = exact.loc[exact.tokens_per_s.idxmax()]
wall = builds_run.get("memory_wall") or {}
plain = ours[(ours.method == "autoregressive")].set_index("build").tokens_per_s
text = (
    f"In {Path(builds_bench_file).name} ({machine_label(builds_run['machine'])}), of the speculative methods whose "
    f"output equalled their build's autoregressive output on every prompt, the fastest was {fastest_of(builds_run, exact)}. "
    f"{top.method} on {top.build} against the anchors, each with its paired 95% interval over the prompts: "
    + ", ".join(
        f"{top.tokens_per_s / v:.2f}× "
        + ("[{:.2f}, {:.2f}] ".format(*iv) if (iv := speedup_interval(
            [r for r in builds_run["rows"] if r["method"] == top.label],
            [r for r in builds_run["rows"] if r["method"] == anchor_labels[name]])) else "")
        + name
        for name, v in anchors.items()
    )
    + ". "
)  # fmt: skip
if wall.get("wall_ms_per_token") and "fp32" in plain:
    # the wall the file records is the fp32 weights' bytes: it bounds fp32 plain decoding only; a 4-bit build
    # reads fewer bytes a step (its own, lower wall), and a speculative step emits several tokens per read
    text += (
        f"The memory wall the file records is for fp32 weights: reading their {wall['weights_mb']:.0f} MB once takes "
        f"{wall['weights_mb'] / 1e3 / wall['read_gb_s'] * 1e3:.1f} ms at the {wall['read_gb_s']:.1f} GB/s measured "
        f"before the run, a ceiling of {wall['wall_tokens_per_s']:.1f} tokens/s for fp32 decoding one token a step; "
        f"fp32 plain decoding reached {plain['fp32']:.1f} tokens/s ({plain['fp32'] / wall['wall_tokens_per_s']:.0%} "
        "of it, the prompt and the loop's own work included). That ceiling bounds no other row: the int4 builds "
        "(and llama.cpp's 4-bit file) read fewer bytes a step, so their own wall lies higher in tokens/s, and a "
        "speculative step emits more than one token per read of the weights, so the fp32 ceiling is no yardstick "
        f"for {top.method} on {top.build}."
    )  # fmt: skip
Markdown(text)

# %% [markdown]
# ## 5. The file's own bytes: the LM head, and one product where there were three
#
# A 4-bit decoder still reads one matrix at full width: the **LM head**, the 49,152 × 576 tied embedding that
# turns the last hidden state into logits over the vocabulary. Kept in fp32 it is 113 MB a step — more than
# all 30 int4 decoder layers together. The model file does not store it in fp32: it stores Q8_0, int8 codes
# with one fp16 scale per 32 inputs, and that is what llama.cpp reads. `load_model(weights="int4")` now holds
# the file's own Q8_0 blocks (`head_weights="q8_0"`, the default for int8/int4 builds). torch has no
# block-scaled int8 kernel, but its int4 kernel takes a scale and a zero per 32 inputs, so each code q is
# split as q = 16·hi + lo into two 4-bit planes laid side by side (`specdec_lab.models.quant`, "LM head"):
# one int4 product over twice the inputs is the file's weight times x — bit for bit in fp32 compute, with the
# scales rounded to bf16 in the fast bf16 path (as for the Q4_1 layers).
#
# The second lever is per call, not per byte: each layer's q, k, v and its gate and up products read the
# same input, and torch's CPU int4 packing lays out rows in blocks, so stacking their codes gives one product
# per group whose outputs are the separate layers' bit for bit (`CompactBody`'s `fuse`): 4 kernel calls a
# layer instead of 7 in the compiled step.
#
# `python -m specdec_lab.bench.profile_step` profiled 32 greedy tokens of each combination (the prefill left
# out); the table gives each build's bytes a step reads, by part (`cost.memory_wall.step_bytes`), the ms per
# token under the profiler, and the share of its time in the head's fp32 product (`mkldnn::_linear_pointwise`)
# and in the int4 kernel.

# %% tags=["nbval-ignore-output"]
profile = json.loads(Path(profile_file).read_text())


def op_share(build: dict, name: str) -> float:
    return sum(op["share"] for op in build["top_ops"] if op["op"] == name)


profile_table = pd.DataFrame(
    {
        name: {
            "head MB": b["step_bytes_mb_by_part"]["head"],
            "layers MB": b["step_bytes_mb_by_part"]["layers"],
            "step reads MB": b["step_bytes_mb"],
            "ms/token (profiled)": b["ms_per_token"],
            "fp32 head product": f"{op_share(b, 'mkldnn::_linear_pointwise'):.0%}",
            "int4 kernel": f"{op_share(b, 'aten::_weight_int4pack_mm_for_cpu'):.0%}",
        }
        for name, b in profile["builds"].items()
    }
).T
display(Markdown(f"**{Path(profile_file).name}**, measured on {machine_label(profile['machine'])}: "
                 f"`{profile['command']}`"))  # fmt: skip
profile_table

# %% tags=["nbval-ignore-output"]
before = profile["builds"]["int4+head=fp32+compile+unfused"]
after = profile["builds"]["int4+compile"]
head_share = before["step_bytes_mb_by_part"]["head"] / before["step_bytes_mb"]
Markdown(
    f"In the old build the head was {head_share:.0%} of the bytes a step read and its fp32 product "
    f"{op_share(before, 'mkldnn::_linear_pointwise'):.0%} of the profiled time; the file's Q8_0 blocks, held as "
    f"two int4 planes with a bf16 scale and zero per 32 inputs, read {after['step_bytes_mb_by_part']['head']:.0f} MB "
    f"instead of {before['step_bytes_mb_by_part']['head']:.0f} (the blocks themselves, 34 bytes per 32 weights, are "
    f"{49152 * 576 * 34 / 32 / 1e6:.0f} MB in the file: what llama.cpp reads). With "
    f"both levers a profiled token took {after['ms_per_token']:.1f} ms against {before['ms_per_token']:.1f} "
    f"(runs {min(after['ms_per_token_runs']):.1f}–{max(after['ms_per_token_runs']):.1f} against "
    f"{min(before['ms_per_token_runs']):.1f}–{max(before['ms_per_token_runs']):.1f} ms: "
    + compare(before["ms_per_token"], after["ms_per_token"],
              f"{1 - after['ms_per_token'] / before['ms_per_token']:.0%} less time, beyond the runs' ranges",
              "no less time", "within the runs' ranges",
              rel_tol=max((max(b["ms_per_token_runs"]) - min(b["ms_per_token_runs"])) / b["ms_per_token"]
                          for b in (before, after)))
    + "; the profiler's own overhead is in both). What "
    "the levers do to decoding, each apart, is the bench's to say, below."
)

# %% [markdown]
# One bench run (`levers_bench_file`) timed plain decoding on all four combinations, the hybrid before and
# after, and llama.cpp's own decoding of the same file, rotated per prompt. Every speculative method is
# compared with its own build's autoregressive output (`identical`).

# %% tags=["nbval-ignore-output"]
levers_run = json.loads(Path(levers_bench_file).read_text())
levers = pd.DataFrame(by_build(levers_run))
llama = float(levers[levers.method == "llamacpp"].tokens_per_s.iloc[0])
ours_levers = levers[levers.build != "anchor"].copy()
ours_levers["× llama.cpp"] = ours_levers.tokens_per_s / llama
display(Markdown(f"**{Path(levers_bench_file).name}**: {levers_run['prompts_done']} prompts, "
                 f"{levers_run['config']['max_new_tokens']} new tokens, measured on "
                 f"{machine_label(levers_run['machine'])}; llama.cpp {llama:.1f} tokens/s"))  # fmt: skip
ours_levers.set_index(["method", "build"])[["tokens_per_s", "× llama.cpp", "speedup_own", "identical"]].round(2)

# %% tags=["nbval-ignore-output"]
plain_by_build = ours_levers[ours_levers.method == "autoregressive"].set_index("build").tokens_per_s
old_build, new_build = "int4+head=fp32+compile+unfused", "int4+compile"
exact_new = ours_levers[(ours_levers.build == new_build) & (ours_levers.method != "autoregressive")
                        & (ours_levers.identical == 1.0)]  # fmt: skip
best = exact_new.loc[exact_new.tokens_per_s.idxmax()] if len(exact_new) else None
plain_label = ours_levers[ours_levers.method == "autoregressive"].set_index("build").label


def over_before(build: str) -> str:
    """Plain decoding on `build` over the old build's, paired per prompt: the ratio and its 95% interval."""
    iv = speedup_interval([r for r in levers_run["rows"] if r["method"] == plain_label[build]],
                          [r for r in levers_run["rows"] if r["method"] == plain_label[old_build]])  # fmt: skip
    ratio = plain_by_build[build] / plain_by_build[old_build]
    if not iv:
        return f"{ratio:.2f}×"
    verdict = "faster beyond it" if iv[0] > 1 else "slower beyond it" if iv[1] < 1 else "one inside it: level"
    return f"{ratio:.2f}× [{iv[0]:.2f}, {iv[1]:.2f}], {verdict}"


def over_llama(build: str) -> str:
    """Plain decoding on `build` over llama.cpp's plain decoding in the same run, paired per prompt: the ratio and
    its 95% bootstrap interval."""
    iv = speedup_interval([r for r in levers_run["rows"] if r["method"] == plain_label[build]],
                          [r for r in levers_run["rows"] if r["method"] == "llamacpp"])  # fmt: skip
    ratio = plain_by_build[build] / llama
    return f"{ratio:.2f}×" + (f" [{iv[0]:.2f}, {iv[1]:.2f}]" if iv else "")


text = (
    f"Plain decoding: {plain_by_build[old_build]:.1f} tokens/s before; "
    f"{plain_by_build['int4+head=fp32+compile']:.1f} with the fused products alone "
    f"({over_before('int4+head=fp32+compile')}), "
    f"{plain_by_build['int4+compile+unfused']:.1f} with the Q8_0 head alone ({over_before('int4+compile+unfused')}) "
    f"and {plain_by_build[new_build]:.1f} with both ({over_before(new_build)}; each against before, paired per "
    f"prompt); {over_llama(new_build)} llama.cpp's plain decoding (95% paired interval), against "
    f"{over_llama(old_build)} before. "
)
if best is not None:
    text += (
        f"Of the speculative methods equal to their build's output on every prompt of the new build, the fastest was "
        f"{fastest_of(levers_run, exact_new)}; {best.method} ran at {best.tokens_per_s / llama:.2f}× llama.cpp's plain "
        "decoding. "
    )
if best is not None:
    iv = speedup_interval([r for r in levers_run["rows"] if r["method"] == best.label],
                          [r for r in levers_run["rows"] if r["method"] == "llamacpp"])
    if iv:
        text += (f"Paired per prompt, {best.method} against llama.cpp: 95% interval [{iv[0]:.2f}, {iv[1]:.2f}] — "
                 + ("above one beyond it. " if iv[0] > 1 else "below one beyond it. " if iv[1] < 1
                    else "one lies inside it: this run does not tell the two apart. "))
text += "One run, one machine. "
# the same build and the same anchor in section 4's last file: tokens/s move between runs (the machine's load, the
# code of the day), so a "× llama.cpp" is read within one run, never across two
earlier_run = json.loads(Path(builds_bench_files[-1]).read_text())
earlier = pd.DataFrame(by_build(earlier_run))
earlier_plain = earlier[(earlier.method == "autoregressive") & (earlier.build == old_build)].tokens_per_s
earlier_llama = earlier[earlier.method == "llamacpp"].tokens_per_s
if len(earlier_plain) and len(earlier_llama):
    e_plain, e_llama = float(earlier_plain.iloc[0]), float(earlier_llama.iloc[0])
    text += (
        f"Section 4's {Path(builds_bench_files[-1]).name} ran plain decoding on the same {old_build} build at "
        f"{e_plain:.1f} tokens/s and llama.cpp at {e_llama:.1f} ({e_plain / e_llama:.2f}×); {Path(levers_bench_file).name} at "
        f"{plain_by_build[old_build]:.1f} and {llama:.1f} ({plain_by_build[old_build] / llama:.2f}×). Tokens per second move between runs with the "
        "machine's load and the code of the day, so each \"× llama.cpp\" here is read within its own run, never "
        "against the other's. "
    )
Markdown(text.strip())

# %% [markdown]
# ### What a call pays besides its kernels
#
# With the bytes cut, reading the compiled step's generated code and a kernel-level profile of it (inductor's
# per-kernel profiling, a cache of 1024 slots; taken while making these changes, not stored in `data/`) pointed at
# time that no weight accounts for, in three places of the code. The rounds below measure what changing them did:
#
# - **Copies of the cache inside the graph.** Each layer wrote its new K/V rows with `kc[0].index_copy_(…)`;
#   inductor turned that in-place write into *clone the whole cache, scatter the B rows, copy it back*, and the
#   attention's normaliser (a column of ones appended to V, so that Σ e_j is summed in slot order, section 4)
#   copied the whole V cache once more. The cache is now written on its whole 4-d buffer (inductor writes
#   only the B rows in place) and the normaliser is summed over a separate block of ones passed into the graph
#   — the same sums in the same order, bit for bit (`compact_body._slot_ordered_pv`).
# - **Python per call.** Every block rebuilt its 6 layers' argument lists on every call; now once per bucket.
# - **Guards.** Before running a graph, dynamo checks its guards — the shapes, dtypes and modes of the hundreds
#   of weight tensors a block takes — 6 times a token. A call like one made before now checks only the
#   guards that tell its graphs apart (dynamo's `skip_guard_eval_unsafe` stance, with a fall-back to every
#   guard; `specdec_lab.models.compiled`, module docstring).
#
# `step_levers_file` times each change on top of the one before, one process per version of the code (a git
# worktree each), the versions rotated over rounds: plain decoding's tokens/s and one compiled forward of 1
# and 8 tokens.

# %% tags=["nbval-ignore-output"]
step_levers = json.loads(Path(step_levers_file).read_text())
lever_rows = []
for label, v in step_levers["variants"].items():
    row = {"code": label}
    for key, name in (("ar_tokens_per_s", "plain tokens/s"), ("step_ms_b1", "forward ms, 1 token"),
                      ("step_ms_b8", "forward ms, 8 tokens")):  # fmt: skip
        runs = v[key]["runs"]
        row[name] = v[key]["median"]
        row[name + " spread"] = (max(runs) - min(runs)) / v[key]["median"] if v[key]["median"] else float("nan")
    lever_rows.append(row)
lever_table = pd.DataFrame(lever_rows).set_index("code")
display(Markdown(f"**{Path(step_levers_file).name}**, measured on {machine_label(step_levers['machine'])}: "
                 f"{step_levers['command']}"))  # fmt: skip
lever_table.round(3)

# %% tags=["nbval-ignore-output"]
def lever_steps(table: pd.DataFrame, column: str, higher_is_better: bool) -> list[tuple[str, float, str]]:
    """Each change against the code before it: (change, median ratio, verdict), the verdict judged against the
    larger of the two rows' spreads (max − min over the rounds, relative to the median): within it where the
    larger median is at most (1 + spread)× the smaller."""
    steps = []
    names = list(table.index)
    for before_name, after_name in zip(names, names[1:], strict=False):
        a, b = table.loc[before_name], table.loc[after_name]
        ratio = b[column] / a[column] if higher_is_better else a[column] / b[column]
        noise = max(a[column + " spread"], b[column + " spread"])
        beyond = abs(ratio - 1) > noise * min(1.0, ratio)
        verdict = (("faster" if ratio > 1 else "slower") + " beyond" if beyond else "within") + f" the rounds' spread of {noise:.0%}"
        steps.append((after_name.lstrip("+ "), ratio, verdict))
    return steps


first, last = lever_table.iloc[0], lever_table.iloc[-1]


def all_together(column: str, higher_is_better: bool, unit: str) -> tuple[str, bool]:
    """The last code against the first on one column, judged against the larger of the two rows' spreads."""
    a, b = first[column], last[column]
    noise = max(first[column + " spread"], last[column + " spread"])
    better, worse = ("faster", "slower") if higher_is_better else ("cheaper", "dearer")
    verdict = compare(b, a, better if higher_is_better else worse, worse if higher_is_better else better,
                      "within", rel_tol=noise)  # fmt: skip
    verdict += (" the rounds' spread of " if verdict == "within" else " beyond the rounds' spread of ") + f"{noise:.0%}"
    return f"{a:.1f} → {b:.1f} {unit} ({verdict})", verdict.startswith(better)


plain_text, plain_gain = all_together("plain tokens/s", True, "tokens/s")
b1_text, _ = all_together("forward ms, 1 token", False, "ms")
b8_text, _ = all_together("forward ms, 8 tokens", False, "ms")
plain_steps = lever_steps(lever_table, "plain tokens/s", True)
apart = [name for name, _, verdict in plain_steps if verdict.startswith("faster")]
Markdown(
    "Plain decoding, each change against the code before it — "
    + "; ".join(f"{name}: {ratio:.2f}× ({verdict})" for name, ratio, verdict in plain_steps)
    + ". "
    f"All together, plain decoding {plain_text}; one forward of 1 token {b1_text}, of 8 tokens {b8_text}. "
    + (("Apart, " + (f"only {', '.join(apart)} moved plain decoding beyond the spread" if apart else
                     "no single change moved plain decoding beyond the rounds' spread")
        + ": these rounds price the three changes together, not one by one. ") if plain_gain else
       "These rounds do not show the changes paying, together or apart. ")
    + "None of them reads a byte less of weights: whatever they took off a token, the step paid on top of its bytes."
)

# %% [markdown]
# One more bench run (`step_bench_file`) timed every method on the new step — the int4 build with the Q8_0
# head, the stacked products and the three changes above — beside llama.cpp's plain decoding of the same file,
# rotated per prompt. Each "× llama.cpp" is paired per prompt (a bootstrap interval over the prompts), and
# every speculative method is compared with this build's autoregressive output (`identical`).

# %% tags=["nbval-ignore-output"]
step_run = json.loads(Path(step_bench_file).read_text())
step_methods = pd.DataFrame(by_build(step_run))
llama_rows = [r for r in step_run["rows"] if r["method"] == "llamacpp"]
step_llama = float(step_methods[step_methods.method == "llamacpp"].tokens_per_s.iloc[0])
step_ours = step_methods[step_methods.build != "anchor"].copy()


def vs_llama(label: str) -> tuple[float, float] | None:
    """× llama.cpp's plain decoding, paired per prompt: (low, high) of the 95% bootstrap interval."""
    return speedup_interval([r for r in step_run["rows"] if r["method"] == label], llama_rows)


step_ours["× llama.cpp"] = step_ours.tokens_per_s / step_llama
step_ours["× llama.cpp, 95%"] = [
    "[{:.2f}, {:.2f}]".format(*iv) if (iv := vs_llama(lab)) else "–" for lab in step_ours.label
]
display(Markdown(f"**{Path(step_bench_file).name}**: {step_run['prompts_done']} prompts, "
                 f"{step_run['config']['max_new_tokens']} new tokens, measured on "
                 f"{machine_label(step_run['machine'])}; llama.cpp {step_llama:.1f} tokens/s"))  # fmt: skip
step_ours.set_index("method")[["build", "tokens_per_s", "× llama.cpp", "× llama.cpp, 95%", "speedup_own",
                               "identical"]].round(2)  # fmt: skip

# %% tags=["nbval-ignore-output"]
plain_new = step_ours[step_ours.method == "autoregressive"].iloc[0]
exact_step = step_ours[(step_ours.method != "autoregressive") & (step_ours.identical == 1.0)]
best_step = exact_step.loc[exact_step.tokens_per_s.idxmax()] if len(exact_step) else None


def against(label: str) -> str:
    """A method against llama.cpp's plain decoding, read from the paired 95% interval: beyond it, or level."""
    iv = vs_llama(label)
    if iv is None:
        return "no paired interval"
    where = f"the paired interval [{iv[0]:.2f}, {iv[1]:.2f}]"
    if iv[0] > 1:
        return f"faster than llama.cpp's plain decoding beyond {where}"
    if iv[1] < 1:
        return f"slower than llama.cpp's plain decoding beyond {where}"
    return f"level with llama.cpp's plain decoding: {where} holds one, this run does not order them"


text = (f"Against llama.cpp's plain decoding of the same model file, in {Path(step_bench_file).name}: plain decoding on "
        f"the new step ran at {plain_new.tokens_per_s:.1f} tokens/s, {plain_new['× llama.cpp']:.2f}× "
        f"({against(plain_new.label)}). ")  # fmt: skip
not_identical = sorted(step_ours[step_ours.identical < 1.0].method)
if best_step is not None:
    text += (f"Of the speculative methods equal to this build's output on every prompt, the fastest was "
             f"{fastest_of(step_run, exact_step)}; {best_step.method} ran at {best_step['× llama.cpp']:.2f}× "
             f"llama.cpp's plain decoding ({against(best_step.label)}). ")  # fmt: skip
if not_identical:
    text += f"Not identical on every prompt: {', '.join(not_identical)} (the table's `identical`). "
text += "Both against that run's own llama.cpp rows, paired per prompt; its machine is named above."
Markdown(text)

# %% [markdown]
# ## Check your understanding
#
# 1. Section 1's plan chooses a kernel per weight shape and row count from timings of each matrix alone. Why
#    can that plan lose to another setup on a whole forward at some size?
#
#    <details><summary>Answer</summary>
#
#    The plan was measured once, on isolated matrices, under the load of that moment. A whole forward also
#    runs attention, norms and the other layers, its matrices compete for the same caches, and the machine's
#    load differs from the moment the plan was measured. A gap within the repeats' spread is noise; a larger
#    one is a reason to measure again (`tune_linear(model, refresh=True)`). And where the plan runs the very
#    kernels of the setup that beat it (stock in every layer, say), the gap is noise by construction: first
#    check which kernels each setup runs at that size (exercise 2).
#    </details>
#
# 2. Why does transformers' `sdpa` path copy the KV cache for a verify forward but not for a one-token step?
#
#    <details><summary>Answer</summary>
#
#    A one-token step needs no attention mask, and then `sdpa` hands the 3 shared K/V heads to torch's kernel
#    as they are. A forward of 2+ tokens over a cache needs a mask, and on that path transformers first expands
#    K/V to the 9 query heads (`repeat_kv`): a copy of the whole cache per layer. `sdpa_gqa` passes GQA and the
#    mask to torch's kernel together, without the copy.
#    </details>
#
# 3. A build halves t(1). When does the formula predict that the speculative speed-up over that build's own
#    autoregressive decoding falls rather than stays, and what could make a cheaper build buy more anyway?
#
#    <details><summary>Answer</summary>
#
#    The speed-up is τ(t(1) + s₁)/(t(n) + s): the loops' own seconds s and s₁ do not shrink with a faster
#    target. Halving both t(1) and t(n) lowers the ratio exactly when s/s₁ > t(n)/t(1) — the speculative loop's
#    own work (proposer, acceptance, bookkeeping) outweighs plain decoding's by more than its forward outweighs a
#    one-token one, as it does when the proposer's Python is most of s. The other term is the curve's shape: a build whose t(n)/t(1) is lower (flatter)
#    buys more per step, one whose t(n)/t(1) is higher buys less. Which way a given build's shape goes is
#    for its measured curve to say, not a rule of fewer bytes — the sentence under section 4's builds table
#    reads each quantized build's t(n)/t(1) against fp32's from the file's curves, against a yardstick for the
#    noise of a file that keeps medians only.
#    </details>
#
# ## Exercises
#
# Each exercise is a stub to fill in, then a check against the library's own function.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — the memory wall
#
# A one-token step reads every weight once. Take a machine that reads `bandwidth = 20` GB/s and the model's
# weights held in bf16, `bytes_per_param` = 2 bytes each. Compute the floor of one
# step in **milliseconds per token**: the bytes of the weights (every parameter once — a tied embedding and LM
# head are one matrix) over the bandwidth. The section 4 figure is for fp32 at the bench's bandwidth: not this
# answer. The reference is `specdec_lab.cost.memory_wall.memory_wall` with the bytes from `weight_bytes`; both
# are watched — compute it from the parameters themselves: the check's tolerance is tight, so a megabyte
# figure rounded for display does not pass.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.cost.memory_wall import memory_wall, weight_bytes  # noqa: F401 - in scope, watched
from specdec_lab.lab.course import check, watch

_watch = watch(globals(), "memory_wall", "weight_bytes")
bandwidth, bytes_per_param = 20e9, 2  # bytes/s; bf16 weights
answer = ...  # ms per token: weight bytes / bandwidth

# %% tags=["solution", "exercise-1"]
n_params = sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once
answer = n_params * bytes_per_param / bandwidth * 1e3

# %% tags=["check", "exercise-1", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
reference = _watch["weight_bytes"](model, bytes_per_param) / bandwidth * 1e3  # memory_wall's, unrounded
_ = check("the memory wall of bf16 weights at 20 GB/s (ms per token)", answer, reference,
          close=1e-9, watch=_watch,
          hint="Count every parameter once (model.parameters()), 2 bytes each, and convert seconds to milliseconds.")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — where a measured plan *is* the stock kernel
#
# Section 1 could tell a choice from noise only by knowing which kernels each setup runs. Every linear layer is a
# `FastLinear` whose `plan` is a tuple indexed by the number of rows (index 0 unused): `plan[n]` names the kernel
# for n rows, and beyond the plan's end (more than 64 rows) it is always `"stock"`. A layer without a measured plan
# (`plan is None`) runs the default plan, `default_plan(layer.pack and ONEDNN)`. The cell below builds three layers
# with plans of their own (a made-up model, so that some small sizes are stock in some layers). Write
# `kernel(layer, n)`, then list the row counts in `rows` at which **every** layer of `layers` runs `"stock"`: there
# a "measured plan" and "stock nn.Linear" would run the very same code, so any time between them is noise. (Only
# the LM head, `head`, is not enough.) The reference is each layer's own `kernel_for`, watched here.

# %% tags=["exercise", "exercise-2"]
import torch

from specdec_lab.models.fast_linear import ONEDNN, default_plan, use_fast_linear

qkv, mlp, head = use_fast_linear(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8),
                                                     torch.nn.Linear(8, 8)), pack=False)  # fmt: skip
qkv.plan = ("stock",) + ("stock",) * 3 + ("wx",) * 12 + ("onednn",) * 24 + ("stock",) * 25  # 1-3, 40-64 stock
mlp.plan = None  # no measured plan: the default plan (this layer keeps no packed copy)
head.plan = ("stock",) + ("stock",) * 2 + ("onednn",) * 45 + ("stock",) * 17  # 1-2 and 48-64 stock
layers = [qkv, mlp, head]
_watch = watch(globals(), "qkv.kernel_for", "mlp.kernel_for", "head.kernel_for")
rows = [1, 2, 3, 4, 8, 16, 40, 48, 64, 65, 256]


def kernel(layer, n: int) -> str:
    ...


answer = ...  # the n in rows at which kernel(layer, n) == "stock" for every layer

# %% tags=["solution", "exercise-2"]
def kernel(layer, n: int) -> str:  # noqa: F811 - the stub's, filled in
    plan = layer.plan or default_plan(layer.pack and ONEDNN)
    return plan[n] if n < len(plan) else "stock"


answer = [n for n in rows if all(kernel(layer, n) == "stock" for layer in layers)]

# %% tags=["check", "exercise-2", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
_ = check("the row counts where every layer runs torch's stock kernel", answer,
          [n for n in rows if all(_watch[f"{name}.kernel_for"](n) == "stock" for name in ("qkv", "mlp", "head"))],
          close=lambda a, r: a == r, watch=_watch,
          hint="Ask every layer, not only the LM head; a layer without a plan runs the default plan; past a plan's "
               "end the layer runs 'stock'.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — what a cheaper step does to a chain's speed-up
#
# Take a chain of $k = 3$ drafts at per-token acceptance $\alpha = 0.7$ whose draft step costs $c = 0.1$ of the
# target's t(1) (c = T_draft/T_target, as in notebook 01). On a build with curve t(n), its speed-up over that build's
# own plain decoding is $E[L]\cdot t(1) / (k\,T_{\text{draft}} + t(k + 1))$,
# with $E[L] = (1 - \alpha^{k+1}) / (1 - \alpha)$ the tokens a step emits, bonus included (notebook 01).
# Show that the build's t(1) drops out: write
# `speedup_of_shape(r)`, the speed-up as a function of the curve's shape $r = t(k + 1)/t(1)$ **alone** (it gets no
# t(1) and no curve), then answer `{build: speed-up}` for the builds of section 4 (`variants`: name → its curve t(n)
# in seconds) by calling it. The reference is `specdec_lab.cost.theory.measured_speedup`, watched here, on each
# build's whole curve; the check also calls your function on the shapes of curves it makes up (other t(1), other
# t(k + 1)), so it must give the speed-up from r alone, whatever t(1) was. Then, from your function: what must a cheaper
# build's curve do for speculation to buy more on it than on the base build? (The solution answers it.)

# %% tags=["exercise", "exercise-3"]
from specdec_lab.cost.theory import measured_speedup  # noqa: F401 - in scope, watched

_watch = watch(globals(), "measured_speedup")
alpha, k, c = 0.7, 3, 0.1  # c = T_draft / T_target


def speedup_of_shape(r: float) -> float:  # r = t(k + 1) / t(1); no t(1) in sight
    ...


answer = ...  # {build: speedup_of_shape(that build's t(k + 1)/t(1))}

# %% tags=["solution", "exercise-3"]
def speedup_of_shape(r: float) -> float:  # noqa: F811 - the stub's, filled in
    # divide E[L]·t(1) / (k·c·t(1) + t(k + 1)) by t(1) above and below: the draft costs a fixed share c of t(1)
    expected_tokens = (1 - alpha ** (k + 1)) / (1 - alpha)  # E[L], the bonus included
    return expected_tokens / (k * c + r)


answer = {name: speedup_of_shape(t(k + 1) / t(1)) for name, t in variants.items()}
# A cheaper step buys more from speculation only if its r = t(k + 1)/t(1) is lower — a flatter curve, not a lower
# t(1): the speed-up falls as r grows. Whether fewer bytes of weights flatten or steepen the curve is a measurement,
# not a rule: the sentence under section 4's builds table reads each quantized build's t(n)/t(1) against fp32's, with
# a yardstick for the noise (the file keeps medians only). Where a quantized curve is steeper at k + 1, its extra rows
# pay the de-quantisation again, and fewer bytes buy less from speculation than they cut from t(1).

# %% tags=["check", "exercise-3", "nbval-check-output"]
import math

# curves made up below (t(1) in seconds, r = t(k + 1)/t(1)): the answer's function sees only their shape; it is
# called here, before the check begins, so that a function that calls the reference is refused as an answer is
made_up_r = (1.0, 1.7, 4.3)
yours_r = {r: speedup_of_shape(r) for r in made_up_r}
_watch.begin_check()  # from here the references are the check's own
reference = {name: _watch["measured_speedup"](alpha, k, t(1), c * t(1), t) for name, t in variants.items()}
made_up = {(t1, r): _watch["measured_speedup"](alpha, k, t1, c * t1, r * t1) for t1 in (0.004, 0.25)
           for r in made_up_r}  # fmt: skip


def agrees(a, ref) -> bool:
    try:
        return (
            isinstance(a, dict)
            and a.keys() == ref.keys()
            and all(math.isclose(a[n], ref[n], rel_tol=1e-9) for n in ref)
            and all(math.isclose(yours_r[r], v, rel_tol=1e-9) for (_, r), v in made_up.items())
        )
    except TypeError:  # the stub's function returns None
        return False


_ = check("each build's chain speed-up, from its shape alone", answer, reference, watch=_watch, close=agrees,
          hint="Verifying k drafts is a forward over k + 1 tokens; T_draft is c·t(1): divide the numerator and the "
               "denominator by t(1).")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - The cost curve t(n) that prices every speed-up in the workbook is the kernels' doing: the same forward
#   under another linear-layer kernel can have another t(1) and another shape, so a break-even read from it
#   can move; section 3's sentence says which of the two this run measured beyond the noise.
# - Every kernel setup computes the same logits up to the order of float sums (the agreement checks above),
#   so choosing kernels is a question of time only, and its answer must be measured in one interleaved loop
#   against the repeats' noise.
# - Skipping transformers' copy of the KV cache changes only masked forwards, which is what every
#   verification is, and leaves the logits the same; whether it saves time at all, and more at a longer
#   context, is a measurement against the noise (section 2's sentence), not a given.
# - A cheaper step (compiled, fewer bytes of weights) and speculation multiply. The formula predicts that what
#   speculation adds shrinks as the step gets cheaper where the speculative loop's own seconds outweigh plain
#   decoding's by more than t(n) outweighs t(1) (s/s₁ > t(n)/t(1)); section 4's replay sentence says what the
#   recorded medians give pair by pair (the file keeps no spread, so no order beyond noise).
#
# ## Further reading
#
# - [Leviathan et al. 2023, Fast Inference from Transformers via Speculative Decoding](https://arxiv.org/abs/2211.17192):
#   the speed-up formula with the cost ratio c that section 4 and exercise 3 price on measured curves.
# - [Chen et al. 2023, Accelerating Large Language Model Decoding with Speculative Sampling](https://arxiv.org/abs/2302.01318):
#   why decoding is memory-bound, the premise of the memory wall of section 4.
# - [Chen et al. 2024, Sequoia](https://arxiv.org/abs/2402.12374): trees sized by the hardware's own verify cost,
#   what section 3's t(n)/t(1) feeds.
