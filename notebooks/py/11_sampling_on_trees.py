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
# from the residual norm(max(0, p − q)) ([Leviathan et al. 2023](https://arxiv.org/abs/2211.17192)). A tree
# has *sibling sets*: several candidates for the same position. The field has one exact answer per way the
# siblings were drawn (`specdec_lab/accept/tree_rules.py`, each with its derivation):
#
# * **one-hot** — deterministic siblings (Medusa's top-k, EAGLE-2/3 and SGLang's top-k trees, Lookahead's
#   n-gram pool): q is one-hot, so sibling x is accepted with probability p(x); after a rejection p(x) := 0 and
#   p is renormalised before the next sibling is tried.
# * **multi-draft** — siblings drawn independently from q (SpecInfer,
#   [Miao et al. 2024](https://arxiv.org/abs/2305.09781)): the chain's test per sibling,
#   p ← norm(max(0, p − q)) after each rejection. SpecTr ([Sun et al. 2023](https://arxiv.org/abs/2310.15141))
#   casts the verification of several i.i.d. drafts as an optimal-transport problem and derives another exact
#   rule for the same siblings (not implemented here).
# * **without replacement** — siblings drawn one after another from q without the earlier ones (Recursive
#   Speculative Decoding, [Jeon et al. 2024](https://arxiv.org/abs/2402.14160)): q of a later sibling has the
#   earlier tokens removed.
# * **traversal** — Traversal Verification ([Weng et al. 2025](https://arxiv.org/abs/2505.12398)): leaf to root,
#   sequence-level acceptance; section 1 checks it exact on each of the three draws above.
# * **typical** — Medusa's typical acceptance ([Cai et al. 2024](https://arxiv.org/abs/2401.10774), section
#   2.3.1): *lossy*, for contrast.
#
# The sections: (1) the rules side by side on a toy tree, computed exactly; (2) the residual after each
# rejected sibling, step by step (a slider); (3) the emitted sequence distribution against the target's,
# with deliberately broken rules beside the exact ones; (4) acceptance against the temperature,
# on the toy models and on the real model; (5) typical acceptance's speed against its fidelity on the real
# model; (6) every method sampled on the real model, against autoregressive sampling.
#
# Everything in sections 1 to 3 and the toy half of section 4 is *exact*: the toy models have a few tokens,
# so `specdec_lab.accept.exactness` walks every branch of the drafts' and the rule's randomness and sums the
# probability of every emitted sequence — no sampling noise.
#
# ### Learning objectives
#
# - **Derive** the one-hot rule's acceptance chances for a sibling set and show that each sibling is emitted
#   with exactly its target probability.
# - **Compute** the residual a rule leaves after a rejected sibling, for one-hot siblings and for siblings drawn
#   from q, with or without replacement.
# - **Check** a tree rule's exactness by enumerating every branch of its randomness, and tell an exact rule
#   from a broken one by the total variation of what it emits.
# - **Explain** what moves a method's acceptance, and with it its greedy speed-up, when it samples (an exact
#   rule's test against a draw from p, a lossy rule's threshold), and measure how much each method keeps on the
#   real model.
#
# ### Prerequisites
#
# Notebook 02 (exact speculative sampling on a chain, the residual), notebooks 04 and 06 (tree attention and
# tree verification, greedy).
#
# **Notation** as in notebook 00: p the target's distribution, q the draft's, α the acceptance of one drafted
# token, k, c, τ, L, E[L]; "mean accepted" = tokens emitted per target forward, bonus included. TV is the total
# variation distance, ½ Σ |a − b|.

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
import torch

from specdec_lab.lab.course import start

if quick:
    vocab, toy_temperatures, toy_contexts = 4, "0,0.7,1.0", 3
    rerun_limit, rerun_tokens, rerun_temperatures = 1, 8, "0,1.0"
FIGURES = start(stem="11_sampling_on_trees")
torch.set_num_threads(1)  # the toy models are thousands of tiny ops: one thread (after the "Ran on" line)

# %% [markdown]
# ## 1 · The rules side by side on one toy tree
#
# The tree: three siblings at the root, two below the first, one below the second. Each rule is applied to
# trees whose siblings were drawn the way it is exact for (the "siblings" column); traversal on all three draws,
# and one-hot on sampled siblings as well (its derivation holds for any fixed sibling list, however drawn).
# "exact" says whether the rule is meant to be exact; "drafts accepted per step" is the exact expected number of
# drafted tokens one step accepts, and "E[L]" adds the bonus: notebook 00's L, the tokens one step emits, so
# E[L] = drafts accepted per step + 1; "TV from p" is the total variation between the exact distribution of the
# first two emitted tokens and autoregressive sampling's.
#
# **Predict, then run.** Before running the next cell, guess: which exact rule accepts the most drafts per step,
# and how far from p (in TV) will typical acceptance, the one lossy rule, land — near rounding, or far?

# %% tags=["prediction", "nbval-check-output"]
import pandas as pd

from specdec_lab.accept.exactness import step_accepted
from specdec_lab.accept.toy import RULES, TOY_SHAPE, RuleCase, compare_rules, toy_models
from specdec_lab.accept.traversal import accept_traversal
from specdec_lab.accept.tree_rules import accept_one_hot
from specdec_lab.sampling import Sampling

sampling = Sampling(temperature=temperature, top_p=top_p if top_p < 1.0 else None)
target, draft = toy_models(vocab, noise=draft_noise)
print(f"toy target and draft over {vocab} tokens; tree: parents {TOY_SHAPE[0]}; sampling {sampling}")
trav_wor = RuleCase("traversal", accept_traversal, "without_replacement")  # traversal on the third draw as well
oh_sampled = RuleCase("one_hot", accept_one_hot, "sampled")  # one-hot on sampled siblings, q unused
added = (oh_sampled, trav_wor)
rows = compare_rules(target, draft, sampling, RULES[:1] + [oh_sampled] + RULES[1:-1] + [trav_wor] + RULES[-1:])
for r in rows:  # compare_rules prices only its own RULES: the added cases' acceptance, computed the same way
    for case in added:
        if (r["rule"], r["siblings"]) == (case.name, case.draw):
            r["accepted_per_step"] = step_accepted(case.rule, target, draft, sampling, *TOY_SHAPE, case.draw)
table = pd.DataFrame(rows).set_index(["rule", "siblings"])
table["TV from p"] = table.pop("tv").map(lambda v: "0 (to rounding)" if v < 1e-6 else f"{v:.3f}")
table = table.rename(columns={"accepted_per_step": "drafts accepted per step"})
table.insert(2, "E[L]", table["drafts accepted per step"] + 1)  # tokens one step emits, the bonus included
table.round({"drafts accepted per step": 3, "E[L]": 3})

# %% tags=["nbval-ignore-output"]
from IPython.display import Markdown, display

from specdec_lab.lab.course import compare

by = {(r["rule"], r["siblings"]): r for r in rows}
one_hot, trav = by[("one_hot", "deterministic")], by[("traversal", "sampled")]
multi, wor = by[("multi_draft", "sampled")], by[("without_replacement", "without_replacement")]
typ = by[("typical", "deterministic")]
oh_sampled_tv = by[("one_hot", "sampled")]["tv"]
# the exact computations' float rounding (the exact rules' largest TV), as a relative tolerance no tighter than the
# 1e-6 the table reads as "0 (to rounding)": a gap inside it states no order
rounding_tol = max(1e-6, 10 * max(r["tv"] for r in rows if r["exact"]))
display(Markdown(
    f"On this tree every exact rule's TV is float rounding (largest: {max(r['tv'] for r in rows if r['exact']):.1e}), "
    f"typical's is {typ['tv']:.3f}. Sampled siblings verified with their q (multi-draft) accept "
    f"{multi['accepted_per_step']:.3f} drafts per step; traversal on the same trees "
    + compare(trav["accepted_per_step"], multi["accepted_per_step"], "accepts more ({a:.4f} against {b:.4f})",
              "accepts fewer ({a:.4f} against {b:.4f})", "accepts as many ({a:.3f}, to float rounding)",
              rel_tol=rounding_tol)
    + f"; drawing them without replacement accepts {wor['accepted_per_step']:.3f}, traversal on those trees "
    + compare(by[("traversal", "without_replacement")]["accepted_per_step"], wor["accepted_per_step"],
              "more ({a:.4f} against {b:.4f}: a gap of {d:.1e}, beyond the float rounding above)",
              "fewer ({a:.4f} against {b:.4f}: a gap of {d:.1e}, beyond the float rounding above)",
              "as many ({a:.3f}, to float rounding)", rel_tol=rounding_tol,
              d=abs(by[("traversal", "without_replacement")]["accepted_per_step"] - wor["accepted_per_step"]))
    + ", "
    f"and the deterministic top siblings with the one-hot rule {one_hot['accepted_per_step']:.3f}. The one-hot "
    "rule on the sampled trees "
    + ("is exact too (TV {:.1e}, float rounding)" if oh_sampled_tv < 1e-6 else "is not exact here (TV {:.3f})").format(
        oh_sampled_tv)
    + " and "
    + compare(by[("one_hot", "sampled")]["accepted_per_step"], multi["accepted_per_step"],
              "accepts more ({a:.3f}) than the multi-draft rule on them",
              "accepts fewer ({a:.3f}) than the multi-draft rule on them",
              "accepts as many ({a:.3f}, to float rounding) as the multi-draft rule on them", rel_tol=rounding_tol)
    + ". "
    f"Typical accepts {typ['accepted_per_step']:.3f} — by emitting what p would not."
))  # fmt: skip

# %% [markdown]
# ## 2 · The residual after each rejected sibling
#
# One sibling set verified by hand: the root's three deterministic siblings (q's top three tokens) under the
# one-hot rule, at temperature one. Before sibling j is tried the target's distribution is the residual p_j;
# the sibling is accepted with probability p_j(x_j); on rejection its mass is removed and the rest
# renormalised. After the last rejection the bonus token is drawn from what is left — never one of the
# rejected siblings. The table gives each step's sibling token and its chance of acceptance; the plain cell
# draws the last step (the bonus's distribution); the slider below walks the steps.

# %% tags=["nbval-check-output"]
from specdec_lab.accept.toy import residual_steps

steps = residual_steps(target, draft, Sampling(temperature=1.0), "deterministic", width=3)
pd.DataFrame([{"step": s["step"], "sibling token": "(bonus)" if s["token"] is None else str(s["token"]),
               "P(accept)": "" if s["accept"] is None else f"{s['accept']:.4f}"} for s in steps["steps"]]
             ).set_index("step")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.sampling_trees import residual_figure

residual_figure(steps, len(steps["steps"]) - 1)

# %% tags=["nbval-ignore-output"]
import ipywidgets as widgets

from specdec_lab.lab.trees import Explorer

display(Explorer(
    widgets.IntSlider(min=0, max=len(steps["steps"]) - 1, value=len(steps["steps"]) - 1, description="rejections"),
    lambda step: residual_figure(steps, step),
    header="<b>Move the slider</b>: the residual before each sibling is tried, then the bonus's.",
    show_initial=False,  # its starting value is the last step: the plain cell above
))  # fmt: skip

# %% [markdown]
# ## 3 · The emitted sequences against the target's
#
# The exact distribution of the first two emitted tokens under a rule, beside autoregressive sampling from p,
# for the likeliest sequences: two exact rules and two broken variants (`accept.exactness.BROKEN_RULES`: a
# rejected sibling retried, siblings drawn without replacement verified as if i.i.d.). The table after the
# figure gives the TV from the target of three broken variants, a residual left unnormalised among them.

# %% tags=["nbval-ignore-output"]
from specdec_lab.accept.toy import BROKEN, joint_rows
from specdec_lab.viz.sampling_trees import joint_figure

shown = [RULES[0], RULES[2], *BROKEN[1:]]
names = [f"{c.name} ({c.draw})" for c in shown]
joint_figure(joint_rows(target, draft, sampling, shown), names,
             title="the first two emitted tokens: exact rules and broken variants against autoregressive sampling")  # fmt: skip

# %% tags=["nbval-check-output"]
broken = compare_rules(target, draft, sampling, BROKEN)
exact_tv = max(r["tv"] for r in rows if r["exact"])
smallest = min(broken, key=lambda r: r["tv"])


def draws_to_see(tv: float) -> float:
    """1/TV², to one significant figure: the order of the sample a histogram needs to show a TV that small."""
    return float(f"{1 / tv**2:.1g}")


display(Markdown(
    "Every broken variant moves the emitted distribution off the target's, by a TV "
    + compare(smallest["tv"], 1e3 * exact_tv, "more than a thousand times", "less than a thousand times",
              rel_tol=0.0)
    + " the largest exact rule's (float rounding). How far differs widely — with, in brackets, the order of "
    "the sample a histogram of draws would need to show it (1/TV²): "
    + "; ".join(f"{r['rule']} {r['tv']:.3f} (about {draws_to_see(r['tv']):,.0f} draws)"
                for r in sorted(broken, key=lambda r: r["tv"]))
    + ". The figure above draws the exact joint of "
    + ", ".join(c.name for c in shown if c in BROKEN)
    + "; the table below gives every broken variant's TV, "
    + ", ".join(c.name for c in BROKEN if c not in shown)
    + " among them (too small a shift to see in bars)."
))  # fmt: skip
pd.DataFrame([{"rule": r["rule"], "siblings": r["siblings"], "TV from p": round(r["tv"], 3)} for r in broken]
             ).set_index("rule")  # fmt: skip

# %% [markdown]
# The same question on the real pipeline is asked in the tests: `tests/test_tree_sampling.py` enumerates the
# emitted joint of every rule and broken variant on several toy trees and settings
# (`test_one_hot_tree_rule_is_lossless_eagle_issue_329` there settles EAGLE's one-hot question), and
# `tests/test_sampling_methods.py` runs `generate` for every method on a tiny random Llama and G-tests the
# histogram of its first tokens against the exact joint.
#
# ## 4 · Acceptance against the temperature
#
# At T = 0 every rule accepts a draft iff it is the argmax. At T > 0 the one-hot rule accepts a deterministic
# candidate x with probability p(x), the target's own probability of that token. First the toy models,
# exactly (a smaller tree: two siblings at the root, two below the first; the top-p of sections 1-3 at every
# T > 0; averaged over `toy_contexts` random target/draft pairs, each with its own first context). Two rules
# can give the same line: each line has its own dash and marker, so one never hides the other, and the sentence
# under the figure says which lines coincide. On deterministic siblings no exact rule can accept more than the
# one-hot rule in expectation at the same context (section 6 says why), so traversal there can at best equal it.
# Deterministic siblings are the draft's top tokens by its raw logits, as a real top-k takes them, at every T.

# %% tags=["nbval-ignore-output"]
from specdec_lab.accept.toy import SMALL_SHAPE, accepted_vs_temperature
from specdec_lab.viz.sampling_trees import accepted_temperature_figure

temps = [float(t) for t in toy_temperatures.split(",")]
pairs = [toy_models(vocab, seed=10 * i, noise=sweep_noise) for i in range(toy_contexts)]
toy_rows = accepted_vs_temperature(pairs, temps, shape=SMALL_SHAPE, top_p=sampling.top_p)
accepted_temperature_figure(toy_rows, ("rule", "siblings"), "accepted",
                            "toy models: exact E[accepted drafts per step]",
                            y_title="E[accepted drafts per step] (bonus not counted)")  # fmt: skip

# %% tags=["nbval-ignore-output"]
toy_at = {(r["rule"], r["siblings"], r["temperature"]): r["accepted"] for r in toy_rows}
toy_gap = max(abs(toy_at["traversal", "deterministic", t] - toy_at["one_hot", "deterministic", t]) for t in temps)
t_low = min((t for t in temps if t > 0), default=None)
toy_step = "" if t_low is None or 0.0 not in temps else (
    f" From T = 0 to the smallest T > 0 here (T = {t_low:g}) the one-hot rule's E[accepted] moves by "
    f"{toy_at['one_hot', 'deterministic', t_low] - toy_at['one_hot', 'deterministic', 0.0]:+.3f} drafts per step: "
    "deterministic siblings are the draft's top tokens by its raw logits at every T (a one-hot or top-p-cut q does "
    "not rank the tokens it zeroes), so both sides of T = 0 verify the same tokens and only the chance p(x) of "
    "accepting each moves.")  # fmt: skip
exact_lines = {(c.name, c.draw) for c in RULES if c.exact}  # typical is lossy: not an exact rule
toy_values: dict[str, list[float]] = {}
for (rule, draw, _), value in toy_at.items():
    if (rule, draw) in exact_lines:
        toy_values.setdefault(f"{rule} · {draw}", []).append(value)
toy_range = {name: max(v) - min(v) for name, v in toy_values.items() if len(v) > 1}
least = min(toy_range, key=toy_range.get, default=None)
toy_moves = "" if least is None else (
    f" Every exact rule's E[accepted] moves with T here: the one that moves least, {least}, spans "
    f"{toy_range[least]:.3f} drafts per step over its temperatures." if toy_range[least] > 1e-6 else
    f" Not every exact rule's E[accepted] moves with T here: {least} spans {toy_range[least]:.1e} drafts per step "
    "over its temperatures (float rounding).")  # fmt: skip
display(Markdown(
    "On the toy models, computed exactly (no sampling noise), traversal and the one-hot rule on deterministic "
    + (f"siblings accept alike at every T (largest difference {toy_gap:.1e}, float rounding): their lines coincide."
       if toy_gap < 1e-6 else f"siblings differ by up to {toy_gap:.4f} drafts per step over the temperatures.")
    + toy_step + toy_moves
))  # fmt: skip

# %% [markdown]
# And the real model (SmolLM2-135M with the shipped Medusa heads), mean accepted per step — tokens per target
# forward, bonus included — for the methods the file records, each with its exact rule (the sentence under the
# table lists them), Traversal Verification and typical acceptance by name (at T > 0 with the top-p the file records, which the sentence under the table gives). A sampled count over a few short decodes, each
# rule on the texts its own draws produced: the sentence under the table says what the file records and how far to
# read a gap between two rules. By default read from the file
# `python -m specdec_lab.lab.accepted_temperature` wrote; `rerun=True` measures it here.

# %% tags=["nbval-ignore-output"]
import json

from specdec_lab import load_model

lm = load_model()  # the real model (section 6 tokenizes the bench's prompts with it too)
if rerun or quick:
    from specdec_lab.io import load_prompts
    from specdec_lab.lab.accepted_temperature import accepted_vs_temperature as measure_accepted

    prompts = [p.text for p in load_prompts()[:rerun_limit]]
    real = measure_accepted(lm, prompts, [float(t) for t in rerun_temperatures.split(",")],
                            max_new_tokens=rerun_tokens, progress=False)  # fmt: skip
else:
    with open(accepted_file) as f:
        real = json.load(f)
accepted_temperature_figure(real["rows"], ("method", "rule"), "mean_accepted",
                            "real model: mean accepted per step (tokens per target forward)",
                            y_title="mean accepted (tokens per forward)")  # fmt: skip

# %% tags=["nbval-ignore-output"]
import inspect

from specdec_lab.viz.sampling_trees import rule_gap_text

real_table = pd.DataFrame(real["rows"]).pivot_table(index=["method", "rule"], columns="temperature",
                                                    values="mean_accepted")  # fmt: skip
display(real_table.round(2))
if ("medusa", "traversal") in real_table.index and ("medusa", "exact") in real_table.index:
    # the committed file records its config; a live run (rerun or quick) is the prompts and tokens asked for here
    # (a live run samples with the measuring function's default top-p)
    from specdec_lab.lab.accepted_temperature import accepted_vs_temperature as real_sweep

    cfg_r = real.get("config") or {"prompts": rerun_limit, "max_new_tokens": rerun_tokens,
                                   "top_p": inspect.signature(real_sweep).parameters["top_p"].default}  # fmt: skip
    display(Markdown(
        f"The file records {', '.join(sorted({m for m, _ in real_table.index}))}, on {cfg_r['prompts']} prompts of "
        f"{cfg_r['max_new_tokens']} tokens, top-p {cfg_r.get('top_p') or 'none'} at T > 0 (at T = 0 every rule is "
        "greedy), one sampled decode per point, each rule on the texts its own draws "
        "produced. Traversal and the one-hot rule are compared on Medusa's deterministic trees. "
        + rule_gap_text(real["rows"], "medusa", "traversal", "exact",
                        labels={"traversal": "traversal", "exact": "the one-hot rule (`exact`)"})
        + " On deterministic siblings traversal cannot beat the one-hot rule in expectation at the same context "
        "(the toy models above, computed exactly, show the two lines coincide; section 6 says why), so a gap beyond "
        "the spread here would come from the different texts each rule's draws produced, not from the rule. The "
        "standard errors treat the steps as independent, which steps of one text are not: more prompts, or "
        "repeated decodes per point, would measure the spread instead of modelling it."
    ))  # fmt: skip

# %% [markdown]
# ## 5 · Typical acceptance: speed against fidelity
#
# From `python -m specdec_lab.lab.typical_sweep` (Medusa on the real model): for each ε (δ = √ε) the speed over
# autoregressive sampling (on the decode alone: sampled texts differ in length, see section 6), against the
# total variation between the distribution of the first token a step emits and the target's p at that
# context. The exact one-hot rule's TV is the noise floor of that estimate (its true TV is 0), drawn dashed:
# typical is only measurably lossy to the right of it. The figure's title names the machine the sweep ran on.

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.results import machine_label
from specdec_lab.viz.sampling_trees import typical_tradeoff_figure

with open(typical_file) as f:
    sweep = json.load(f)
typical_tradeoff_figure(sweep, title=f"typical acceptance: speed against fidelity — {machine_label(sweep['machine'])}")

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.sampling_trees import sweep_rate

ar = next(r for r in sweep["rows"] if r["rule"] == "autoregressive")
ex = next(r for r in sweep["rows"] if r["rule"] == "exact")
typ_rows = [r for r in sweep["rows"] if r.get("epsilon") is not None]
rate = sweep_rate(sweep)  # the decode alone where the sweep recorded it
speeds = [r[rate] / ar[rate] for r in typ_rows]
tv_lo, tv_hi = min(typ_rows, key=lambda r: r["tv"]), max(typ_rows, key=lambda r: r["tv"])
display(Markdown(
    f"In this sweep the exact rule ran at {ex[rate] / ar[rate]:.2f}× autoregressive sampling "
    f"({'decode alone' if rate != 'tokens_per_s' else 'prefill included'}) "
    f"with TV {ex['tv']:.3f} (its noise floor); typical ran at {min(speeds):.2f}× to {max(speeds):.2f}× over the "
    f"ε grid (the sweep records one timing per point and no timing spread, so no ε is read as the fastest), with "
    f"TV from {tv_lo['tv']:.3f} (ε = {tv_lo['epsilon']:g}, {tv_lo['tv'] / ex['tv']:.1f} times the floor) to "
    f"{tv_hi['tv']:.3f} (ε = {tv_hi['epsilon']:g}, {tv_hi['tv'] / ex['tv']:.1f} times), on "
    f"{sweep['config']['prompts']} prompts of "
    f"{sweep['config']['max_new_tokens']} new tokens at T = {sweep['config']['temperature']}, top-p "
    f"{sweep['config']['top_p'] or 'none'}, measured on {machine_label(sweep['machine'])}. "
    "Section 6's benchmark prices the exact rule against typical on every prompt."
))  # fmt: skip

# %% [markdown]
# ## 6 · Every method sampled on the real model
#
# The benchmark runs every method sampled (at a chat model's usual temperature and top-p, with the exact rule
# of its proposer by default; Medusa's typical acceptance as a named, lossy variant, `accept=typical`) on all
# the prompts in one process, methods rotated per prompt. A sampled method is compared with **autoregressive
# sampling**, whose step also pays for the draw, and with its own greedy speed-up: `kept` is the sampled speed-up
# over the greedy one: for an exact method that gains speed greedily, the share of its greedy speed-up left when
# sampling (a ratio of the speed-ups themselves, not of their gains over autoregressive decoding; where `kept` is
# below 1, the share of the gain left is smaller still). The greedy speed-up comes from the sampled run itself
# where it has the greedy label, else from a greedy run of the same prompts on the same kind of machine (`greedy_files`): each
# speed-up is a ratio within its own run, so the two runs need not have run at the same moment, only on the
# same kind of CPU. Under an exact rule a drafted token must now match a *draw* from p, not its argmax: a draft
# that was the argmax is accepted only with chance p(x), one that missed it now has chance p(x) instead of none
# (section 4's toy sentence gives how the one-hot rule's acceptance moves from T = 0 to the smallest T > 0), so
# the table, not the rule, says whether an exact method keeps less than its greedy speed-up. Medusa's typical
# acceptance (`accept=typical`) is no exact rule: it accepts any draft whose probability under the sampled p
# clears its threshold, so its acceptance is not tied to a draw from p, its `kept` can exceed 1, and the
# sentence under the tables reads it apart from the exact methods'. The worst category shows whether a method
# ever costs time against plain sampling.
#
# One thing greedy runs never meet: sampled methods emit texts of *different lengths* from the same prompt
# (each consumes the random stream its own way, and the end-of-text token comes when it comes). The prompt's
# prefill is the same work for every method, but a method whose draw stopped after a handful of tokens pays a
# whole prefill for them. On a category of long prompts and short answers that alone can move a ratio by
# several percent, so the second table repeats the comparison on the decode alone, each prompt's traced
# prefill taken out (`bench.report.decode_rows`). A category's interval, not its point, says whether a method
# loses there.
#
# The columns of each file's two tables: `speed-up [95%]` over autoregressive sampling (Σ tokens / Σ seconds
# against the same for autoregressive sampling on the same prompts) with its 95-percent interval (paired bootstrap over prompts);
# `worst category`, the category where that ratio is lowest, and `there [95%]`, its ratio and interval there;
# `greedy`, the method's greedy speed-up on the same prompts; `kept`, the sampled speed-up over the greedy one;
# `mean accepted (greedy)`, tokens per target forward sampled, greedy in brackets. The heading above each pair
# of tables names the draw (shared by every row, so the method labels leave it out), the file, and the machine
# it was measured on.

# %% tags=["nbval-ignore-output"]
from specdec_lab.bench.report import by_sampling
from specdec_lab.viz.sampling_trees import sampled_frame, short_label

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
    records = by_sampling(run, greedy_runs=greedy_runs)
    sampled = pd.DataFrame(records).set_index("method")
    draws = sorted({", ".join(f"{k} = {v}" for k, v in sorted(d.items())) for d in sampled["draw"]})
    display(Markdown(
        f"**{bench_file.rsplit('/', 1)[-1]}** — {' / '.join(draws)}; {run['prompts_done']} prompts, "
        f"{run['config']['max_new_tokens']} new tokens, --repeats {run['config'].get('repeats', 1)}; measured on "
        f"{machine_label(run['machine'])}; greedy speed-ups from: "
        f"{', '.join(sorted({str(g).rsplit('/', 1)[-1] for g in sampled['greedy_run'].fillna(bench_file)}))}"
    ))  # fmt: skip
    display(sampled_frame(records))
    if sampled["decode_speedup"].notna().all():  # the same on the decode alone (traced prefill taken out)
        display(Markdown("On the decode alone (each prompt's traced prefill taken out):"))
        display(sampled_frame(records, decode=True))
    return run, sampled


def interval(ci) -> str:
    """' [lo, hi]' of a 95-percent interval, '' where the record has none."""
    return f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci is not None and len(ci) == 2 else ""


def sampled_summary(run: dict, sampled: pd.DataFrame, draws: str, run_spread: float | None) -> str:
    exact = sampled[sampled["rule"] != "typical"].rename(index=short_label)  # the draw is stated once, in `draws`
    gains = exact[exact["greedy_speedup"].fillna(0) > 1].sort_values("kept")  # `kept` is a share only of a gain
    left_out = [m for m in exact.index if m not in gains.index]
    worst = exact["worst_speedup"].idxmin()
    per_category = run["prompts_done"] / len({r["category"] for r in run["rows"]})
    if len(gains) > 1:
        kept = (f"the exact methods with a greedy speed-up above 1× kept {gains['kept'].min():.0%} to "
                f"{gains['kept'].max():.0%} of it")  # fmt: skip
        if run_spread is not None:
            # both in whole percentage points, as the sentences show them
            kept += compare(round(100 * gains["kept"].iloc[1]) - round(100 * gains["kept"].iloc[0]), round(100 * run_spread),
                            f" ({gains.index[0]} least: the lowest two {{a}} point(s) apart, beyond the {{b}}-point "
                            "run-to-run spread below)",
                            " (the lowest two {a} point(s) apart, not beyond the {b}-point run-to-run spread below: no "
                            "method is read as keeping least)", rel_tol=0.0)  # fmt: skip
    elif len(gains) == 1:
        kept = f"{gains.index[0]} kept {gains['kept'].iloc[0]:.0%} of its greedy speed-up"
    else:
        kept = "no exact method had a greedy speed-up above 1×"
    if left_out:
        kept += (f"; {', '.join(left_out)} left out of that range (a greedy speed-up at or below 1×, or none "
                 "recorded, makes the sampled/greedy ratio no share of a gain)")  # fmt: skip
    text = (
        f"With {draws} ({run['prompts_done']} prompts, --repeats {run['config'].get('repeats', 1)}, "
        f"{machine_label(run['machine'])}), {kept}; the lowest category ratio against autoregressive sampling was "
        f"{exact.loc[worst, 'worst_speedup']:.2f}×{interval(exact.loc[worst, 'worst_speedup_95'])} ({worst}, "
        f"{exact.loc[worst, 'worst_category']}), resting on {per_category:.0f} prompt(s) of that category."
    )
    if exact["decode_speedup"].notna().all():
        d_worst = exact["decode_worst_speedup"].idxmin()
        text += (
            f" On the decode alone the lowest category ratio was {exact.loc[d_worst, 'decode_worst_speedup']:.2f}×"
            f"{interval(exact.loc[d_worst, 'decode_worst_speedup_95'])} ({d_worst}, "
            f"{exact.loc[d_worst, 'decode_worst_category']})"
            + (f", and the kept share ran from {gains['decode_kept'].min():.0%} to {gains['decode_kept'].max():.0%}."
               if len(gains) > 1 else ".")
        )  # fmt: skip
    return text + typical_note(sampled, run_spread)


def typical_note(sampled: pd.DataFrame, run_spread: float | None) -> str:
    """Typical acceptance's `kept`, read apart from the exact methods': against its whole greedy speed-up (100%),
    with the run-to-run spread as the yardstick; '' where the file has no typical row with a greedy twin."""
    notes = []
    for m, r in sampled[sampled["rule"] == "typical"].rename(index=short_label).iterrows():
        if pd.isna(r["kept"]):
            continue
        pts = round(100 * r["kept"])  # whole percentage points, as the table shows them
        said = (f" {m} (lossy) kept {pts}% of Medusa's greedy speed-up (mean accepted {r['mean_accepted']:.2f} "
                f"sampled, {r['greedy_mean_accepted']:.2f} greedy)")  # fmt: skip
        if run_spread is None:
            notes.append(said + ": with no run-to-run spread measured here, its distance from 100% is not read.")
            continue
        band = round(100 * run_spread)
        if abs(pts - 100) <= band:
            notes.append(said + f": within the {band}-point run-to-run spread of its whole greedy speed-up, so this run "
                         "reads neither a gain nor a loss from sampling.")  # fmt: skip
        elif pts > 100:
            notes.append(said + f": more than its whole greedy speed-up, beyond the {band}-point run-to-run spread. "
                         "Typical acceptance is not an exact rule: it accepts any draft whose probability under "
                         "the sampled p clears its threshold, not only one a draw from p would match, while in its "
                         "greedy twin (Medusa at T = 0) every rule accepts only a draft that is the argmax; so its "
                         "`kept` is no share of a greedy gain, and what it gains over its greedy speed-up is paid in "
                         "fidelity (section 5's TV).")  # fmt: skip
        else:
            notes.append(said + f": less than its whole greedy speed-up, beyond the {band}-point run-to-run spread; "
                         "it is lossy all the same (section 5's TV), so this is no exact method's kept share.")  # fmt: skip
    return "".join(notes)


tables = []
for bench_file in bench_files:
    run, sampled = sampled_table(bench_file)
    draw = sampled["draw"].iloc[0]
    tables.append((bench_file, run, sampled, ", ".join(f"{k} = {v}" for k, v in sorted(draw.items()))))
# run-to-run spread: the same method at the same draw in two files, its kept share's largest difference, taken
# from the whole percentages the sentences show (so the gap shown is the gap between the numbers shown)
kept_by = {}
for bench_file, run, sampled, draws in tables:
    for m, r in sampled[sampled["rule"] != "typical"].rename(index=short_label).iterrows():
        if pd.notna(r["kept"]):
            kept_by.setdefault((draws, m), []).append(
                (round(100 * r["kept"]), bench_file.rsplit('/', 1)[-1], run["config"].get("repeats", 1)))  # fmt: skip
repeated = {k: max(p for p, _, _ in v) - min(p for p, _, _ in v) for k, v in kept_by.items() if len(v) > 1}
run_spread = max(repeated.values()) / 100 if repeated else None
summaries = [sampled_summary(run, sampled, draws, run_spread) for _, run, sampled, draws in tables]
if repeated:
    (d_sp, m_sp), _ = max(repeated.items(), key=lambda kv: kv[1])
    settings = {rep for _, _, rep in kept_by[d_sp, m_sp]}
    summaries.append(
        f"Run-to-run spread: the same method at the same draw, measured in two files, kept shares up to "
        f"{repeated[d_sp, m_sp]} percentage points apart ({m_sp} with {d_sp}: "
        + ", ".join(f"{pct}% in {name} (--repeats {rep})" for pct, name, rep in kept_by[d_sp, m_sp])
        + ")"
        + ("; the files' settings differ (--repeats), so this spread mixes run-to-run noise with that setting"
           if len(settings) > 1 else "")
        + ". A difference between two methods' kept shares no larger than that is read as within noise: a rough "
        f"yardstick, as it rests on {'one method' if len(repeated) == 1 else f'{len(repeated)} method-draw pairs'} measured "
        "twice, not on a spread measured for every method."
    )  # fmt: skip
else:
    summaries.append("No method was measured twice at the same draw here, so the kept shares carry no "
                     "run-to-run spread: read differences between methods as unmeasured noise.")  # fmt: skip

# %% tags=["nbval-ignore-output"]
display(Markdown("\n\n".join(summaries)))

# %% [markdown]
# ### Lookup under sampling: does the sampled text repeat itself less?
#
# No exact rule can accept more of a deterministic draft than the one-hot rule does, in expectation at the same
# context (section 4's real-model counts compare different sampled texts, a few prompts each, with a spread
# modelled from the counts, not measured): an exact rule emits x at most with probability p(x), and accepting x with
# probability p(x), else sampling from p without x, is in distribution "draw y ~ p and accept iff y = x". So
# prompt lookup's draft is accepted exactly where the target's own next token continues an earlier n-gram,
# and a speculative run's answer is a draw from the target (it is lossless). Replaying autoregressive answers
# through the lookup's own matcher (`specdec_lab.lab.lookup_ceiling`) therefore measures what any
# lookup-based method can accept on that kind of text. The first table has one row per bench file (`run`) and
# autoregressive label (`label`, greedy or sampled): `answers` replayed, `positions` (answer tokens) scored,
# `right` the share of positions where a lookup step's first draft token is the text's next token, `mean_run`
# the draft tokens a step starting there would accept. The sentence under the tables says whether the greedy
# answers repeat themselves (and their prompt) more than the sampled ones here; if they do, every draft that
# comes from lookup (prompt lookup's, and the hybrid's lookup chains) loses that part of its acceptance when
# sampling. Section 6's summaries say whether the methods' kept shares differ beyond the run-to-run spread; this
# section does not rank them. The second table splits the hybrid's accepted draft tokens by source (one column
# each), per 100 tokens emitted, greedy against sampled.

# %% tags=["nbval-ignore-output"]
from specdec_lab.io import load_prompts
from specdec_lab.lab.lookup_ceiling import ceiling_by_method

prompt_ids = {p.question_id: lm.chat_ids(p.text) for p in load_prompts()}  # tokenized as the bench did
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

# %% tags=["nbval-ignore-output"]
ceiling = pd.DataFrame(ceiling_rows)
is_greedy = ~ceiling["label"].str.contains("temperature=")
greedy = ceiling[is_greedy].drop_duplicates(subset=["answers", "positions", "right"])  # greedy texts repeat across runs
g_pos = greedy["positions"].sum()
greedy_right = (greedy["right"] * greedy["positions"]).sum() / g_pos  # pooled over the greedy runs' answers
sampled_ceiling = (ceiling[~is_greedy].groupby(["answers", "positions", "right"], sort=False)["run"]
                   .agg(" and ".join).reset_index())  # the same sampled answers in two runs: one row, both named


def binomial_spread(share: float, n: int) -> float:
    """Two standard errors of a share of n positions, relative to it: the count's own noise."""
    return 2 * (share * (1 - share) / n) ** 0.5 / share if share > 0 else 0.0


display(Markdown("A lookup step's first draft token is the text's next token at "
                 + "; ".join(compare(r["right"], greedy_right, "{a:.1%} of the positions of {run}'s sampled answers, "
                                     "more than of the greedy answers' ({b:.1%})", "{a:.1%} of the positions of {run}'s "
                                     "sampled answers, fewer than of the greedy answers' ({b:.1%})", "{a:.1%} of the "
                                     "positions of {run}'s sampled answers, about as many as of the greedy answers' "
                                     "({b:.1%}, within two standard errors)", run=r["run"],
                                     rel_tol=binomial_spread(r["right"], r["positions"]) + binomial_spread(greedy_right, g_pos))
                         for _, r in sampled_ceiling.iterrows())
                 + "."))  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. Under the one-hot rule, all three siblings of section 2 were rejected. Why can the bonus token never be
#    one of them?
#
#    <details><summary>Answer</summary>
#
#    Each rejection sets that token's probability to zero in the residual and renormalises the rest; the bonus
#    is drawn from the final residual, where every rejected sibling has probability zero. That is what makes
#    the rule exact: a sibling's whole probability p(x) is spent on accepting it, so none is left for the bonus.
#    </details>
#
# 2. Section 1's `one_hot · sampled` row shows the one-hot rule exact on sampled siblings too. Then what does the
#    multi-draft rule gain by using q?
#
#    <details><summary>Answer</summary>
#
#    Acceptance, not exactness. Given the drawn sibling set every q is one-hot, so the one-hot rule stays
#    exact; but it accepts x with probability p(x), while the multi-draft rule accepts it with
#    min(1, p(x)/q(x)), which is at least p(x) when q(x) ≤ 1. Using the distribution the siblings were really
#    drawn from lets a likely draft be accepted more often.
#    </details>
#
# 3. Typical acceptance accepts more drafts per step than any exact rule in section 1. Why is that not a free
#    speed-up?
#
#    <details><summary>Answer</summary>
#
#    It accepts by a threshold on p instead of a test that keeps the distribution, so it emits tokens the
#    target would not have sampled as often: its TV from p is far from zero (sections 1 and 5). The speed is
#    bought with the output's distribution, and how much is lost depends on ε.
#    </details>
#
# ## Exercises
#
# Each exercise is a stub to fill in, then a check against the library's own function.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — which sibling is emitted, given the chances
#
# Siblings are tried in order; once tried, sibling j is accepted with chance a_j, and the first sibling accepted
# is emitted. Derive P(j), the chance that sibling j is the one emitted, from the chances, and compute it for two
# sibling sets (`chance_sets`): section 2's deterministic siblings under the one-hot rule, and three siblings
# *sampled* from q under the multi-draft rule, each tried with min(1, p_j(x)/q_j(x)) on the residual
# (`accept.toy.residual_steps`). Write `emitted(chances)`, which returns `[P(1), P(2), ...]` for any list of
# chances, and answer `{name: emitted(chances)}`; the check also calls `emitted` on chance lists of its own. The
# reference walks the library's coins (`accept.exactness.enumerate_outcomes`, watched) over every branch of the
# accept/reject draws. Then compare the two sets with the target's own p(x_j) (`steps["p"]`, `sampled["p"]`,
# indexed by the siblings' tokens `steps["tokens"]`, `sampled["tokens"]`): answer `gap`, `{name: the largest
# |P(j) − p(x_j)| over the siblings of that set}`. Then explain each set's gap to yourself.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.accept.exactness import ScriptedCoins, enumerate_outcomes  # noqa: F401 - in scope, watched
from specdec_lab.lab.course import watch

_watch = watch(globals(), "enumerate_outcomes")

draws = ScriptedCoins([int(torch.tensor(steps["q"]).argmax()), 0, 1])  # which draws of q: its likeliest, then 0, 1
sampled = residual_steps(target, draft, Sampling(temperature=1.0), "sampled", width=3, coins=draws)
chance_sets = {"deterministic, one-hot rule": [s["accept"] for s in steps["steps"][:-1]],
               "sampled, multi-draft rule": [s["accept"] for s in sampled["steps"][:-1]]}  # fmt: skip


def emitted(chances: list[float]) -> list[float]:
    ...  # [P(sibling 1 is emitted), P(sibling 2), ...]


answer = ...  # {name: emitted(chances) for each of chance_sets}
gap = ...  # {name: max over the set's siblings of |P(j) - p(x_j)|}

# %% tags=["solution", "exercise-1"]
def emitted(chances: list[float]) -> list[float]:  # noqa: F811 - the stub's, filled in
    probs, still_rejected = [], 1.0
    for a in chances:
        probs.append(still_rejected * a)
        still_rejected *= 1 - a
    return probs


answer = {name: emitted(chances) for name, chances in chance_sets.items()}
gap = {name: max(abs(v - st["p"][x]) for v, x in zip(answer[name], st["tokens"], strict=True))
       for name, st in zip(chance_sets, (steps, sampled), strict=True)}  # fmt: skip

# %% tags=["check", "exercise-1", "nbval-check-output"]
import math

from specdec_lab.lab.course import check

_watch.begin_check()  # from here the references are the check's own


def walked(chances: list[float]) -> list[float]:
    """P(sibling j is emitted) over every branch of the coins: try each in order, stop at the first accepted."""
    first = _watch["enumerate_outcomes"](lambda coins: next((j for j, a in enumerate(chances) if coins.accept(a, 1.0)), None))
    return [first.get(j, 0.0) for j in range(len(chances))]


own_chances = [[0.5, 0.2, 0.9], [1.0, 0.3, 0.4], [0.0, 0.6, 1.0], [0.25, 0.25, 0.25, 0.25]]  # the check's own inputs
reference = ({name: walked(chances) for name, chances in chance_sets.items()}, [walked(c) for c in own_chances])


def _close_lists(a, r) -> bool:
    return (isinstance(a, list) and len(a) == len(r)
            and all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12) for x, y in zip(a, r, strict=True)))  # fmt: skip


_ = check("P(each sibling is emitted), on the two sets and on the check's own chances",
          answer if answer is ... else (answer, [emitted(list(c)) for c in own_chances]), reference, watch=_watch,
          close=lambda a, r: isinstance(a[0], dict) and a[0].keys() == r[0].keys()
          and all(_close_lists(a[0][n], r[0][n]) for n in r[0]) and all(map(_close_lists, a[1], r[1])),
          hint="Multiply a_j by the chance that every earlier sibling was rejected; p(x) is not the answer for sampled siblings.")  # fmt: skip
reference = reference[0]
_gap = {name: max(abs(v - p_of[x]) for v, x in zip(probs, tokens, strict=True))
        for (name, probs), tokens, p_of in zip(reference.items(), (steps["tokens"], sampled["tokens"]),
                                               (steps["p"], sampled["p"]), strict=True)}  # fmt: skip
_ = check("the largest |P(j) - p(x_j)| per set", gap, _gap,
          close=lambda a, r: isinstance(a, dict) and a.keys() == r.keys()
          and all(isinstance(a[n], (int, float)) and not isinstance(a[n], bool)
                  and math.isclose(a[n], r[n], rel_tol=1e-6, abs_tol=1e-6) for n in r),
          hint="Compare your P(j) with p at each sibling's token, set by set, and keep the largest difference.")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — the residual after two siblings drawn without replacement
#
# Two siblings were drawn from q *without replacement* (Recursive Speculative Decoding, the third bullet at the
# top): x₁ first, then x₂ from q with x₁ removed. Both were rejected. Compute the distribution the *third* sibling
# is tested against, as a tensor over the toy vocabulary. Two things change after each rejection: the target's
# side (the residual, as on a chain) and the draft's side (which distribution the next sibling was drawn from);
# the residual after x₂'s rejection is taken against the distribution x₂ was actually drawn from. Not at the root
# of section 2: here p and q are the target's and the draft's distributions one token further, after `ctx`, at
# temperature $T = 0.7$ (`p_ctx`, `q_ctx` below), with x₁, x₂ = q's two likeliest tokens. The check composes
# `specdec_lab.accept.tree_rules.residual` (an answer that calls it is refused). Then compute `moved`: the total
# variation distance (half the summed absolute difference) between this residual and the one the third sibling
# would be tested against had x₁ been `x3`, q's third likeliest token (x₂ kept). The check computes that too.

# %% tags=["exercise", "exercise-2"]
import torch

from specdec_lab.accept.tree_rules import residual  # noqa: F401 - watched, the check's reference
from specdec_lab.lab.course import watch

ctx, at_07 = (steps["tokens"][0],), Sampling(temperature=0.7)  # after q's likeliest root token, at T = 0.7
p_ctx, q_ctx = target.probs(ctx, at_07), draft.probs(ctx, at_07)
x1, x2, x3 = q_ctx.argsort(descending=True)[:3].tolist()  # the two siblings, in draw order; x3: another first one
_watch = watch(globals(), "residual")
answer = ...  # (V,) tensor: the distribution the third sibling is tested against
moved = ...  # the TV distance between `answer` and the same residual had the first sibling been x3 (x2 kept)

# %% tags=["solution", "exercise-2"]
def third_residual(first: int) -> torch.Tensor:
    left = (p_ctx - q_ctx).clamp(min=0.0)  # after the first sibling ~ q: the part of p that q does not cover
    r1 = left / left.sum()
    q2 = q_ctx.clone()
    q2[first] = 0.0  # x2 was drawn from q without the first sibling
    q2 = q2 / q2.sum()
    left = (r1 - q2).clamp(min=0.0)  # after x2 ~ q2: the part of r1 that q2 does not cover
    return left / left.sum()


answer = third_residual(x1)
moved = float((third_residual(x3) - answer).abs().sum() / 2)  # q2 depends on the first sibling


# %% tags=["check", "exercise-2", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own


def _q_without(q: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """q with the earlier draws removed and renormalised, as `tree_rules.sibling_q` builds a later sibling's q."""
    q = q.clone()
    q[tokens] = 0.0
    return q / q.sum()


def _third(first: int) -> torch.Tensor:
    """The library's residual before the third sibling, had the first sibling been `first` (x2 kept)."""
    return _watch["residual"](_watch["residual"](p_ctx, q_ctx, first), _q_without(q_ctx, [first]), x2)


_reference = _third(x1)
_ = check("the residual before the third sibling", answer, _reference, watch=_watch,
          close=lambda a, r: a.shape == r.shape and torch.allclose(a.double(), r.double(), atol=1e-6),
          hint="Two residuals in a row: the first against q, the second against the q x2 was drawn from (q without "
          "x1, renormalised).")  # fmt: skip
# the question: the same residual had the first sibling been x3 (x2 kept), its TV distance from this one
_moved = float((_third(x3).double() - _reference.double()).abs().sum() / 2)
_ = check("how far the residual moves with the first sibling", moved, _moved,
          close=lambda a, r: isinstance(a, (int, float)) and not isinstance(a, bool)
          and math.isclose(a, r, rel_tol=1e-5, abs_tol=1e-6),
          hint="Which of the two distributions in the second residual was built from x1? Rebuild it from x3.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — the one-hot rule, enumerated exactly
#
# Write the one-hot rule for the root's sibling set as a function of its randomness: `coins.accept(p_x, 1.0)`
# is True with probability p_x (a Bernoulli), `coins.sample(probs)` draws a token from `probs` (normalised or
# not). Try the siblings in order on the residual (at first p): accept sibling x with probability p(x) (of the
# current residual) and return it; on a rejection set p(x) to zero and renormalise; after the last rejection
# return a draw from the residual (the bonus). `enumerate_outcomes` then runs your rule on every branch of
# its coins and returns the exact distribution of the token it emits. The reference is the library's
# `accept_one_hot` on the same tree, enumerated the same way (`specdec_lab.accept.exactness`). That distribution
# is p itself (the rule is exact), so the check also runs your rule on a fresh target and tree the exercise never
# showed, against the library's rule there, and asks your rule for its coins on the branch where every
# sibling is rejected: one acceptance per sibling with its chance on the residual, then the bonus's draw from
# the last residual — a rule that just returns `coins.sample(p)` emits the right distribution without trying a
# sibling, and is refused.

# %% tags=["exercise", "exercise-3"]
from functools import partial

from specdec_lab.accept.exactness import enumerate_outcomes  # noqa: F811 - unwatched again: here it is a tool

p_root = torch.tensor(steps["p"])  # section 2's root: the target at temperature one


def one_hot_rule(p, siblings, coins) -> int:
    """The first token the one-hot rule emits on the sibling set `siblings` (tokens, in order) with target p."""
    ...


answer = enumerate_outcomes(partial(one_hot_rule, p_root, steps["tokens"]))  # {token: probability}

# %% tags=["solution", "exercise-3"]
def one_hot_rule(p, siblings, coins) -> int:
    p = p.clone()
    for x in siblings:
        if coins.accept(float(p[x] / p.sum()), 1.0):
            return x
        p[x] = 0.0  # rejected: its mass goes, the rest is renormalised (p / p.sum() above)
    return coins.sample(p)


answer = enumerate_outcomes(partial(one_hot_rule, p_root, steps["tokens"]))

# %% tags=["check", "exercise-3", "nbval-check-output"]
from specdec_lab.accept.exactness import propose
from specdec_lab.accept.tree_rules import accept_one_hot

at_one = Sampling(temperature=1.0)  # section 2's sampling
tree = propose([-1, 0, 0, 0], [True] * 4, (), draft, at_one, "deterministic", coins=None)  # the root's 3 siblings
logits = torch.stack([target(path) for path in tree.meta["paths"]])  # (4, V) the target at each node
# a fresh target and draft the exercise never showed: the rule is run on them too, against the library's rule
fresh_target, fresh_draft = toy_models(vocab, seed=4242, noise=draft_noise)
fresh_tree = propose([-1, 0, 0, 0], [True] * 4, (), fresh_draft, at_one, "deterministic", coins=None)
fresh_logits = torch.stack([fresh_target(path) for path in fresh_tree.meta["paths"]])  # (4, V)
fresh_p = fresh_target.probs((), at_one).double()
fresh_siblings = fresh_tree.tokens[1:].tolist()


def first_token(coins) -> int:
    acc = accept_one_hot(tree, logits, sampling=at_one, coins=coins)
    return int(tree.tokens[acc.path[1]]) if len(acc.path) > 1 else acc.bonus


def fresh_first_token(coins) -> int:
    acc = accept_one_hot(fresh_tree, fresh_logits, sampling=at_one, coins=coins)
    return int(fresh_tree.tokens[acc.path[1]]) if len(acc.path) > 1 else acc.bonus


def same_dist(a, r) -> bool:
    return set(a) <= set(range(vocab)) | set(r) and all(math.isclose(a.get(t, 0.0), r.get(t, 0.0), abs_tol=1e-6)
                                                         for t in set(a) | set(r))  # fmt: skip


reference = enumerate_outcomes(first_token)
_ = check("the one-hot rule's exact distribution", answer, reference, close=same_dist,
          hint="Return a token on every path: an accepted sibling, or the bonus drawn from the residual.")  # fmt: skip
_ = check("the same on a fresh target and tree (one the exercise never showed)",
          enumerate_outcomes(partial(one_hot_rule, fresh_p.clone(), fresh_siblings)),
          enumerate_outcomes(fresh_first_token), close=same_dist,
          hint="Use the p and siblings the rule is given, not section 2's numbers.")  # fmt: skip


class Rejecting:
    """Coins that reject every sibling and record what the rule asks: each acceptance's chance, then the draw."""

    def __init__(self):
        self.asked = []

    def accept(self, p_x: float, q_x: float) -> bool:
        self.asked.append(("accept", 1.0 if q_x <= 0 else min(1.0, p_x / q_x)))
        return False

    def sample(self, probs) -> int:
        probs = torch.as_tensor(probs, dtype=torch.float64)
        self.asked.append(("sample", (probs / probs.sum()).tolist()))
        return int(probs.argmax())


asked = Rejecting()  # the student's rule on the fresh tree, every sibling rejected
one_hot_rule(fresh_p.clone(), fresh_siblings, asked)
library = Rejecting()  # the library's rule on the same tree and the same coins: the reference
accept_one_hot(fresh_tree, fresh_logits, sampling=at_one, coins=library)
expected = library.asked


def same_coins(a, r) -> bool:
    """The same calls in the same order, each chance (or drawn distribution) equal to rounding."""
    if len(a) != len(r):
        return False
    for (kind_a, va), (kind_r, vr) in zip(a, r, strict=True):
        if kind_a != kind_r:
            return False
        va, vr = (va, vr) if kind_r == "sample" else ([va], [vr])
        if len(va) != len(vr) or not all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(va, vr, strict=True)):
            return False
    return True


_ = check("the coins it asks for when every sibling is rejected", asked.asked, expected, close=same_coins,
          hint="Try each sibling with coins.accept(its chance on the residual, 1.0) before any draw; draw the bonus "
          "only after the last rejection, from what is left.")  # fmt: skip
display(Markdown(compare(max(abs(reference.get(t, 0.0) - steps["p"][t]) for t in range(vocab)), 1e-6,
                         "The library's distribution is not p: the rule would not be exact.",
                         "Both equal p itself, to rounding: the first token the rule emits is distributed as "
                         "autoregressive sampling's.")))  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - Every way of drawing siblings has an exact rule, and Traversal Verification is exact on all three (section 1's
#   table, computed exactly); the
#   one-hot rule on deterministic top-k siblings (Medusa, EAGLE, Lookahead) is lossless — the exact joint says
#   so, not a histogram.
# - Breaking any one step (no renormalisation, a retried sibling, the wrong q) moves the emitted distribution
#   off the target's; how far differs widely between the flaws (section 3's table), and the smallest would take
#   a large sample to see in a histogram, which is why exactness is checked by enumeration.
# - On the toy models, computed exactly, how much each exact rule accepts moves with the temperature (section 4's
#   first figure and the sentence under it); the real model's figure is one short sampled decode per point, and
#   there only the gap between traversal and the one-hot rule is read against its noise. Typical acceptance
#   accepts by a threshold instead, emitting tokens the target would not have sampled — the trade-off that
#   section 5 prices.
# - On the real model every method samples exactly by default, with the same loop it decodes greedily with
#   (Medusa's typical acceptance is the named, lossy variant); section 6 measures, against autoregressive
#   sampling, how much of the greedy speed-up that keeps.
# - What a method keeps rests on the text as much as on the rule: a deterministic draft is accepted exactly when
#   the target's draw follows it, so a lookup draft can be accepted only where the sampled text continues its own
#   n-grams (section 6's lookup ceiling bounds it). Whether that orders the methods' kept shares is a measurement:
#   section 6's sentences compare them with the run-to-run spread and call a smaller gap within noise.
#
# ## Further reading
#
# - [Leviathan et al. 2023](https://arxiv.org/abs/2211.17192): speculative sampling on a chain, the lemma each
#   tree rule applies once per sibling.
# - [SpecInfer, Miao et al. 2024](https://arxiv.org/abs/2305.09781): multi-step speculative sampling on trees of
#   sampled siblings (the multi-draft rule).
# - [Recursive Speculative Decoding, Jeon et al. 2024](https://arxiv.org/abs/2402.14160): siblings drawn without
#   replacement and the rule exact for them.
# - [Traversal Verification, Weng et al. 2025](https://arxiv.org/abs/2505.12398): sequence-level acceptance from
#   the leaves up, exact on each of the three draws section 1 checks.
# - [SpecTr, Sun et al. 2023](https://arxiv.org/abs/2310.15141): verification of several drafts as optimal
#   transport.
