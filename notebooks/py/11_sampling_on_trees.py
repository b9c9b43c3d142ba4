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
# # 11 · Sampling on trees: exact rules for every way siblings are drawn
#
# Notebook 02 sampled exactly on a *chain*: accept a draft x with probability min(1, p(x)/q(x)), else draw
# from the residual norm(max(0, p − q)) (Leviathan et al. 2023). A tree has *sibling sets*: several
# candidates for the same position. The field has one exact answer per way the siblings were drawn
# (`specdec_lab/accept/tree_rules.py`, each with its derivation):
#
# * **one-hot** — deterministic siblings (Medusa's top-k, EAGLE-2/3 and SGLang's top-k trees, Lookahead's
#   n-gram pool): q is one-hot, so sibling x is accepted with probability p(x); after a rejection p(x) := 0 and
#   p is renormalised before the next sibling is tried.
# * **multi-draft** — siblings drawn independently from q (SpecInfer, arXiv 2305.09781): the chain's test per
#   sibling, p ← norm(max(0, p − q)) after each rejection.
# * **without replacement** — siblings drawn one after another from q without the earlier ones (Recursive
#   Speculative Decoding, arXiv 2402.14160): q of a later sibling has the earlier tokens removed.
# * **traversal** — Traversal Verification (arXiv 2505.12398): leaf to root, sequence-level acceptance; exact
#   on any of the draws above.
# * **typical** — Medusa's typical acceptance (Cai et al. 2024, section 2.3.1): *lossy*, for contrast.
#
# The sections: (1) the rules side by side on a toy tree, computed exactly; (2) the residual after each
# rejected sibling, step by step (a slider); (3) the emitted sequence distribution against the target's,
# with deliberately broken rules beside the exact ones; (4) tokens accepted per step against the temperature,
# on the toy models and on the real model; (5) typical acceptance's speed against its fidelity on the real
# model.
#
# Everything in sections 1 to 3 and the toy half of section 4 is *exact*: the toy models have a few tokens,
# so `specdec_lab.accept.exactness` walks every branch of the drafts' and the rule's randomness and sums the
# probability of every emitted sequence — no sampling noise.

# %% tags=["parameters"]
quick: bool = False  # CI: a smaller toy vocabulary and fewer temperatures (same code paths)
rerun: bool = False  # True: measure section 4's real-model curve afresh (minutes) instead of reading accepted_file
vocab: int = 5  # toy vocabulary (every sequence of n tokens is enumerated)
draft_noise: float = 1.0  # sections 1-3: toy draft = target logits + this much N(0, 1) noise (larger: worse)
temperature: float = 0.7  # sampling temperature of sections 1-3
top_p: float = 0.9  # top-p of sections 1-3 (1.0: none)
toy_temperatures: str = "0,0.3,0.5,0.7,1.0,1.5"  # section 4, toy models
toy_contexts: int = 8  # section 4: toy (target, draft) pairs averaged over (each its own first context)
sweep_noise: float = 0.5  # section 4: the toy drafts' noise
accepted_file: str = "../data/bench/accepted_temperature.json"  # python -m specdec_lab.lab.accepted_temperature
typical_file: str = "../data/bench/avx2-typical_sweep.json"  # python -m specdec_lab.lab.typical_sweep
bench_files: list[str] = [  # section 6: bench runs with sampled labels, each its own table
    "../data/bench/avx2-t07-56-r2.json",  # T = 0.7, top-p 0.9
    "../data/bench/avx2-t07-pure-56.json",  # T = 0.7 alone
    "../data/bench/avx2-t07-pure-hybrid-r2.json",  # T = 0.7 alone: the hybrid again, --repeats 2
]
greedy_files: str = "../data/bench/avx2-nine-56-r2.json,../data/bench/avx2-repeats2.json"  # its greedy twins
rerun_limit: int = 2  # rerun: prompts (first N of data/prompts.jsonl)
rerun_tokens: int = 24  # rerun: new tokens per prompt
rerun_temperatures: str = "0,0.7,1.0"  # rerun: temperatures

# %%
if quick:
    vocab, toy_temperatures, toy_contexts = 4, "0,0.7,1.0", 3
    rerun_limit, rerun_tokens, rerun_temperatures = 1, 8, "0,1.0"

import json

import pandas as pd
import torch
from IPython.display import Markdown, display

from specdec_lab.accept.toy import (
    BROKEN,
    RULES,
    SMALL_SHAPE,
    TOY_SHAPE,
    accepted_vs_temperature,
    compare_rules,
    joint_rows,
    residual_steps,
    toy_models,
)
from specdec_lab.bench.report import by_sampling
from specdec_lab.sampling import Sampling
from specdec_lab.viz.sampling_trees import (
    accepted_temperature_figure,
    joint_figure,
    residual_figure,
    sweep_rate,
    typical_tradeoff_figure,
)

torch.set_num_threads(1)  # thousands of tiny ops
sampling = Sampling(temperature=temperature, top_p=top_p if top_p < 1.0 else None)
target, draft = toy_models(vocab, noise=draft_noise)
print(f"toy target and draft over {vocab} tokens; tree: parents {TOY_SHAPE[0]}; sampling {sampling}")

# %% [markdown]
# ## 1 · The rules side by side on one toy tree
#
# The tree: three siblings at the root, two below the first, one below the second. Each rule is applied to
# trees whose siblings were drawn the way it is exact for (the "siblings" column); traversal on two of them.
# "accepted per step" is the exact expected number of draft tokens one step accepts; "TV" is the total
# variation between the exact distribution of the first two emitted tokens and autoregressive sampling's.

# %% tags=["nbval-check-output"]
rows = compare_rules(target, draft, sampling, RULES)
table = pd.DataFrame(rows).set_index(["rule", "siblings"])
table["TV from p"] = table.pop("tv").map(lambda v: "0 (to rounding)" if v < 1e-6 else f"{v:.3f}")
table.round({"accepted_per_step": 3})

# %% tags=["nbval-ignore-output"]
by = {(r["rule"], r["siblings"]): r for r in rows}
one_hot, trav = by[("one_hot", "deterministic")], by[("traversal", "sampled")]
multi, wor = by[("multi_draft", "sampled")], by[("without_replacement", "without_replacement")]
typ = by[("typical", "deterministic")]
display(Markdown(
    f"On this tree every exact rule's TV is float rounding (largest: {max(r['tv'] for r in rows if r['exact']):.1e}), "
    f"typical's is {typ['tv']:.3f}. Sampled siblings verified with their q (multi-draft) accept "
    f"{multi['accepted_per_step']:.3f} drafts per step; traversal on the same trees accepts "
    f"{'more' if trav['accepted_per_step'] > multi['accepted_per_step'] + 1e-9 else 'no more'} "
    f"({trav['accepted_per_step']:.3f}); drawing them without replacement accepts {wor['accepted_per_step']:.3f}, "
    f"and the deterministic top siblings with the one-hot rule {one_hot['accepted_per_step']:.3f}. "
    f"Typical accepts {typ['accepted_per_step']:.3f} — by emitting what p would not."
))

# %% [markdown]
# ## 2 · The residual after each rejected sibling
#
# One sibling set verified by hand: the root's three deterministic siblings (q's top three tokens) under the
# one-hot rule. Before sibling j is tried the target's distribution is the residual p_j; the sibling is
# accepted with probability p_j(x_j); on rejection its mass is removed and the rest renormalised. After the
# last rejection the bonus token is drawn from what is left — never one of the rejected siblings. The plain
# cell shows the last step (the bonus's distribution); the slider below walks the steps.

# %% tags=["nbval-check-output"]
steps = residual_steps(target, draft, Sampling(temperature=1.0), "deterministic", width=3)
pd.DataFrame([{"step": s["step"], "sibling token": "(bonus)" if s["token"] is None else str(s["token"]),
               "P(accept)": "" if s["accept"] is None else f"{s['accept']:.4f}"} for s in steps["steps"]]
             ).set_index("step")  # fmt: skip

# %% tags=["nbval-ignore-output"]
residual_figure(steps, len(steps["steps"]) - 1)

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets  # noqa: E402

widgets.interact(lambda step: residual_figure(steps, step).show(),
                 step=widgets.IntSlider(min=0, max=len(steps["steps"]) - 1, value=0, description="rejections"))  # fmt: skip

# %% [markdown]
# ## 3 · The emitted sequences against the target's
#
# The exact distribution of the first two emitted tokens under a rule, beside autoregressive sampling from p,
# for the likeliest sequences: two exact rules and two broken variants (`accept.exactness.BROKEN_RULES`: a
# rejected sibling retried, siblings drawn without replacement verified as if i.i.d.). The table after the
# figure gives the TV from the target of three broken variants, a residual left unnormalised among them.

# %% tags=["nbval-ignore-output"]
shown = [RULES[0], RULES[2], *BROKEN[1:]]
names = [f"{c.name} ({c.draw})" for c in shown]
joint_figure(joint_rows(target, draft, sampling, shown), names)

# %% tags=["nbval-check-output"]
broken = compare_rules(target, draft, sampling, BROKEN)
exact_tv = max(r["tv"] for r in rows if r["exact"])
display(Markdown(f"Every broken variant's TV is {'above' if min(r['tv'] for r in broken) > 1e3 * exact_tv else 'not far above'} "
                 "a thousand times the largest exact rule's (float rounding)."))
pd.DataFrame([{"rule": r["rule"], "siblings": r["siblings"], "TV from p": round(r["tv"], 3)} for r in broken]
             ).set_index("rule")  # fmt: skip

# %% [markdown]
# The same question on the real pipeline is asked in the tests: `tests/test_tree_sampling.py` enumerates the
# emitted joint of every rule and broken variant on several toy trees and settings, and
# `tests/test_sampling_methods.py` runs `generate` for every method on a tiny random Llama and G-tests the
# histogram of its first tokens against the exact joint (`test_one_hot_tree_rule_is_lossless_eagle_issue_329`
# settles EAGLE's one-hot question).
#
# ## 4 · Tokens accepted per step against the temperature
#
# At T = 0 every rule accepts a draft iff it is the argmax. At T > 0 the one-hot rule accepts a deterministic
# candidate x with probability p(x), the target's own probability of that token. First the toy models, exactly (a smaller tree:
# two siblings at the root, two below the first; the top-p of sections 1-3 at every T > 0; averaged over
# `toy_contexts` random target/draft pairs, each with its own first context):

# %% tags=["nbval-ignore-output"]
temps = [float(t) for t in toy_temperatures.split(",")]
pairs = [toy_models(vocab, seed=10 * i, noise=sweep_noise) for i in range(toy_contexts)]
toy_rows = accepted_vs_temperature(pairs, temps, shape=SMALL_SHAPE, top_p=sampling.top_p)
accepted_temperature_figure(toy_rows, ("rule", "siblings"), "accepted",
                            "toy models: exact E[accepted drafts per step]")  # fmt: skip

# %% [markdown]
# And the real model (SmolLM2-135M with the shipped Medusa heads), mean accepted per step — tokens per target
# forward, bonus included — for every tree method with its exact rule, Traversal Verification and typical
# acceptance by name (with the top-p the file records, at T > 0). A sampled count over a few short decodes:
# a small gap between two rules at one temperature is noise. By default read from the file
# `python -m specdec_lab.lab.accepted_temperature` wrote; `rerun=True` measures it here.

# %% tags=["nbval-ignore-output"]
if rerun or quick:
    from specdec_lab import load_model
    from specdec_lab.io import load_prompts
    from specdec_lab.lab.accepted_temperature import accepted_vs_temperature as measure_accepted

    lm = load_model()
    prompts = [p.text for p in load_prompts()[:rerun_limit]]
    real = measure_accepted(lm, prompts, [float(t) for t in rerun_temperatures.split(",")],
                            max_new_tokens=rerun_tokens, progress=False)  # fmt: skip
else:
    with open(accepted_file) as f:
        real = json.load(f)
accepted_temperature_figure(real["rows"], ("method", "rule"), "mean_accepted",
                            "real model: mean accepted per step (tokens per target forward)")  # fmt: skip

# %% tags=["nbval-ignore-output"]
pd.DataFrame(real["rows"]).pivot_table(index=["method", "rule"], columns="temperature", values="mean_accepted").round(2)

# %% [markdown]
# ## 5 · Typical acceptance: speed against fidelity
#
# From `python -m specdec_lab.lab.typical_sweep` (Medusa on the real model): for each ε (δ = √ε) the speed over
# autoregressive sampling (on the decode alone: sampled texts differ in length, see section 6), against the
# total variation between the distribution of the first token a step emits and the target's p at that context. The exact one-hot rule's TV is the noise floor of that estimate
# (its true TV is 0), drawn dashed: typical is only measurably lossy to the right of it.

# %% tags=["nbval-ignore-output"]
with open(typical_file) as f:
    sweep = json.load(f)
typical_tradeoff_figure(sweep)

# %% tags=["nbval-ignore-output"]
ar = next(r for r in sweep["rows"] if r["rule"] == "autoregressive")
ex = next(r for r in sweep["rows"] if r["rule"] == "exact")
typ_rows = [r for r in sweep["rows"] if r.get("epsilon") is not None]
rate = sweep_rate(sweep)  # the decode alone where the sweep recorded it
fastest = max(typ_rows, key=lambda r: r[rate])
display(Markdown(
    f"In this sweep the exact rule ran at {ex[rate] / ar[rate]:.2f}× autoregressive sampling "
    f"({'decode alone' if rate != 'tokens_per_s' else 'prefill included'}) "
    f"with TV {ex['tv']:.3f} (its noise floor); typical's fastest point (ε = {fastest['epsilon']:g}) ran at "
    f"{fastest[rate] / ar[rate]:.2f}× with TV {fastest['tv']:.3f}, "
    f"{fastest['tv'] / ex['tv']:.1f} times the floor, on {sweep['config']['prompts']} prompts of "
    f"{sweep['config']['max_new_tokens']} new tokens at T = {sweep['config']['temperature']}, top-p "
    f"{sweep['config']['top_p'] or 'none'}, {sweep['machine']['device_name']} (torch ISA {sweep['machine']['isa']}). "
    "Section 6's benchmark prices the exact rule against typical on every prompt."
))

# %% [markdown]
# ## 6 · Every method sampled on the real model
#
# The benchmark runs every method sampled (at a chat model's usual temperature and top-p, with the exact rule
# of its proposer by default; Medusa's typical acceptance as a named, lossy variant) on all the prompts in one
# process, methods rotated per prompt. A sampled method is compared with **autoregressive sampling**, whose
# step also pays for the draw, and with its own greedy speed-up: `kept` is the share of the greedy speed-up
# left when sampling. The greedy speed-up comes from the sampled run itself where it has the greedy label, else
# from a greedy run of the same prompts on the same kind of machine (`greedy_files`): each speed-up is a ratio
# within its own run, so the two runs need not have run at the same moment, only on the same kind of CPU.
# Sampling lowers the acceptance (the draft must now match a *draw* from p, not its argmax), so kept < 1 is
# expected; the worst category shows whether a method ever costs time against plain sampling.
#
# One thing greedy runs never meet: sampled methods emit texts of *different lengths* from the same prompt
# (each consumes the random stream its own way, and the end-of-text token comes when it comes). The prompt's
# prefill is the same work for every method, but a method whose draw stopped after a handful of tokens pays a
# whole prefill for them. On a category of long prompts and short answers that alone can move a ratio by
# several percent, so the second table repeats the comparison on the decode alone, each prompt's traced
# prefill taken out (`bench.report.decode_rows`). A category's interval, not its point, says whether a method
# loses there.

# %% tags=["nbval-ignore-output"]
loaded = {}  # path -> run record: every bench file of this section, read once
for path in filter(None, greedy_files.split(",")):  # the greedy speed-ups, where a run has no greedy labels
    with open(path) as f:
        loaded[path] = json.load(f)
greedy_runs = list(loaded.values())


def sampled_table(bench_file: str) -> tuple[dict, pd.DataFrame]:
    """One sampled bench run: its record and `by_sampling`'s table, greedy twins from `greedy_runs`."""
    with open(bench_file) as f:
        run = loaded[bench_file] = json.load(f)
    for g in greedy_runs:
        assert g["machine"]["isa"] == run["machine"]["isa"], "a greedy run of another machine kind"
    sampled = pd.DataFrame(by_sampling(run, greedy_runs=greedy_runs)).set_index("method")
    draws = sorted({", ".join(f"{k} = {v}" for k, v in sorted(d.items())) for d in sampled["draw"]})
    print(f"{bench_file}: {' / '.join(draws)}; {run['prompts_done']} prompts, "
          f"{run['config']['max_new_tokens']} new tokens, --repeats {run['config'].get('repeats', 1)}, "
          f"{run['machine']['device_name']} (torch ISA {run['machine']['isa']}); greedy speed-ups from: "
          f"{', '.join(sorted({str(g) for g in sampled['greedy_run'].fillna(bench_file)}))}")  # fmt: skip
    display(sampled[["rule", "speedup", "speedup_95", "worst_category", "worst_speedup", "worst_speedup_95",
                     "greedy_speedup", "kept", "mean_accepted", "greedy_mean_accepted"]].round(2))  # fmt: skip
    if sampled["decode_speedup"].notna().all():  # the same on the decode alone (traced prefill taken out)
        display(sampled[["decode_speedup", "decode_speedup_95", "decode_worst_category", "decode_worst_speedup",
                         "decode_worst_speedup_95", "greedy_decode_speedup", "decode_kept"]].round(2))  # fmt: skip
    return run, sampled


def sampled_summary(run: dict, sampled: pd.DataFrame, draws: str) -> str:
    exact = sampled[sampled["rule"] != "typical"]
    lowest, worst = exact["kept"].idxmin(), exact["worst_speedup"].idxmin()
    per_category = run["prompts_done"] / len({r["category"] for r in run["rows"]})
    kept = (f"every exact method kept between {exact['kept'].min():.0%} ({lowest}) and {exact['kept'].max():.0%}"
            if len(exact) > 1 else f"{lowest} kept {exact['kept'].min():.0%}")  # fmt: skip
    text = (
        f"With {draws} ({run['prompts_done']} prompts, --repeats {run['config'].get('repeats', 1)}), {kept} of "
        f"its greedy speed-up; the lowest category ratio against autoregressive "
        f"sampling was {exact.loc[worst, 'worst_speedup']:.2f}× ({worst}, {exact.loc[worst, 'worst_category']}), "
        f"resting on {per_category:.0f} prompt(s) of that category."
    )
    if exact["decode_speedup"].notna().all():
        d_worst = exact["decode_worst_speedup"].idxmin()
        text += (
            f" On the decode alone the lowest category ratio was {exact.loc[d_worst, 'decode_worst_speedup']:.2f}× "
            f"({d_worst}, {exact.loc[d_worst, 'decode_worst_category']}), and "
            + (f"the kept share ran from {exact['decode_kept'].min():.0%} ({exact['decode_kept'].idxmin()}) to "
               f"{exact['decode_kept'].max():.0%}." if len(exact) > 1 else
               f"{exact['decode_kept'].idxmin()} kept {exact['decode_kept'].min():.0%}.")
        )  # fmt: skip
    return text


summaries = []
for bench_file in bench_files:
    run, sampled = sampled_table(bench_file)
    draw = sampled["draw"].iloc[0]
    summaries.append(sampled_summary(run, sampled, ", ".join(f"{k} = {v}" for k, v in sorted(draw.items()))))

# %% tags=["nbval-ignore-output"]
display(Markdown("\n\n".join(summaries)))

# %% [markdown]
# ### Why lookup-heavy methods keep less: the sampled text repeats itself less
#
# No exact rule can accept more of a deterministic draft than the one-hot rule does: accepting x with
# probability p(x), else sampling from p without x, is in distribution "draw y ~ p and accept iff y = x". So
# prompt lookup's draft is accepted exactly where the target's own next token continues an earlier n-gram,
# and a speculative run's answer is a draw from the target (it is lossless). Replaying autoregressive answers
# through the lookup's own matcher (`specdec_lab.lab.lookup_ceiling`) therefore measures what any
# lookup-based method can accept on that kind of text: `right` is the share of positions where a lookup
# step's first draft token is the text's next token, `mean_run` the draft tokens a step starting there would
# accept. Greedy answers of a small model repeat themselves (and their prompt) more than its samples do; the
# hybrid, whose greedy speed-up rests most on lookup chains, has the most to lose. The second table splits the
# hybrid's accepted draft tokens by source, per 100 tokens emitted, greedy against sampled.

# %% tags=["nbval-ignore-output"]
from specdec_lab import load_model
from specdec_lab.io import load_prompts
from specdec_lab.lab.lookup_ceiling import ceiling_by_method

tokenizer_lm = load_model()  # the prompts' token ids, tokenized as the bench did
prompt_ids = {p.question_id: tokenizer_lm.chat_ids(p.text) for p in load_prompts()}
ceiling_rows, source_rows, hybrid_emitted = [], [], {}
for path, run in loaded.items():  # the greedy runs, then the sampled ones, as section 6 read them
    name = path.rsplit("/", 1)[-1]
    plain = [r for r in run["rows"] if r["method"].split(":")[0] == "autoregressive"]
    assert all(r["prompt_tokens"] == len(prompt_ids[r["question_id"]]) for r in plain), "other prompt ids"
    for label, c in ceiling_by_method(plain, prompt_ids).items():
        ceiling_rows.append({"run": name, "label": label, "answers": c["answers"], "positions": c["positions"],
                             "right": c["right"], "mean_run": c["mean_run"]})  # fmt: skip
    for r in (r for r in run["rows"] if r["method"].split(":")[0] == "hybrid"):
        hybrid_emitted[name, r["method"]] = hybrid_emitted.get((name, r["method"]), 0) + r["new_tokens"]
        source_rows += [{"run": name, "label": r["method"], "source": source, "accepted": n}
                        for source, n in r["proposer"]["accepted_by"].items()]  # fmt: skip
display(pd.DataFrame(ceiling_rows).round(3))
by_source = pd.DataFrame(source_rows).groupby(["run", "label", "source"])["accepted"].sum().unstack("source")
(100 * by_source.fillna(0).div(pd.Series(hybrid_emitted), axis=0)).round(1)  # accepted drafts per 100 emitted

# %% [markdown]
# ## What this shows
#
# * Every way of drawing siblings has an exact rule, and Traversal Verification is exact on all of them; the
#   one-hot rule on deterministic top-k siblings (Medusa, EAGLE, Lookahead) is lossless — the exact joint says
#   so, not a histogram.
# * Breaking any one step (no renormalisation, a retried sibling, the wrong q) moves the emitted distribution
#   off the target's, visibly, on a three-sibling tree.
# * How much each exact rule accepts moves with the temperature (section 4's figures); typical acceptance
#   accepts by a threshold instead, emitting tokens the target would not have sampled — the trade-off that
#   section 5 prices.
# * On the real model every method samples exactly with the same loop it decodes greedily with;
#   section 6 measures, against autoregressive sampling, how much of the greedy speed-up that keeps.
# * What a method keeps rests on the text as much as on the rule: a deterministic draft is accepted exactly when
#   the target's draw follows it, and sampled answers continue their own n-grams less often than greedy ones,
#   so the methods whose greedy speed-up comes from lookup chains keep the least.
