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
# # 08 · The speedup lab: any method against autoregressive decoding, token by token
#
# Notebooks 00–07 built the methods one at a time. This one puts them side by side on *your* prompt:
# pick a method and its parameters, run it and plain autoregressive decoding on the same prompt in the
# same process (`specdec_lab.lab.experiment.run_experiment`), and see
#
# * every emitted token coloured by how it was produced — an **accepted draft** token (proposed by the
#   method, confirmed by the target), the target's **bonus** token after the accepted path, or a
#   **plain step** (nothing was proposed: an ordinary decoding step);
# * the tokens per step (target forward) — the measured mean accepted τ (bonus included), the quantity whose
#   expectation the theory gives as $E[L]$;
# * tokens/s of both runs and the speed-up, and whether the output is identical (it must be, greedily);
# * the tree verified at each step;
# * and several methods at once on the same prompt (section 2): tokens per step, draft tokens accepted
#   per step, and speed, side by side.
#
# ## Learning objectives
#
# After this notebook you can
#
# - run any registered method against autoregressive decoding on one prompt and read its `LabResult`: mean
#   accepted, speed-up, identical output;
# - tell from a step's trace which tokens were accepted drafts, bonus tokens and plain steps;
# - compare several methods on one prompt with interleaved timings, and decide which is fastest — or that the
#   timings cannot tell;
# - run the same experiment as a sweep point (`python -m specdec_lab.sweep`).
#
# **Prerequisites.** 00 (the decoding loop and the cost curve); 02, 06 and 07 introduce the draft model,
# Medusa and lookahead that section 2 compares.
#
# **Notation** (notebook 00's table): $k$ = tokens proposed per step, $E[L]$ = expected tokens per step.
# "Mean accepted" = tokens emitted per target forward, **bonus included** (autoregressive = 1).
#
# The method list and each method's parameters are read from the registry
# (`specdec_lab.proposers.METHODS` and its config dataclasses), so a method added with `register_method`
# appears in the dashboard without editing this notebook. The cells below run the default experiment
# without widgets (papermill and nbval see a complete notebook); the dashboards follow.
#
# **Sweeps** execute this notebook once per grid point (`python -m specdec_lab.sweep SPEC.yaml`) with
# the parameters `method` (a bench spec such as `"draft:max_draft=4"`), `temperature`, `max_new_tokens`,
# `prompt_id` (one id or a list), `seed`, `quick`, `repeats` (runs per prompt; the run of median speed-up is
# kept: 1 makes a sweep faster, with one timing per point) and `result_path`, where the result is written as JSON,
# and an empty `compare`: a point measures one method, so section 2's side-by-side run is skipped.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer tokens (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
prompt_id: int = 46  # question_id in data/prompts.jsonl, or a list of them (46: a rag prompt that copies a lot)
method: str = "prompt_lookup"  # the method measured: a bench spec (name plus settings, as in the text above)
temperature: float = 0.0  # sampling temperature (0: greedy, the output must equal autoregressive's)
max_new_tokens: int = 64  # tokens generated per prompt, by the method and by the baseline
repeats: int = 3  # section 1: runs of the experiment per prompt; the headline keeps the run of median speed-up
seed: int = 0  # sampling seed (both runs)
result_path: str = None  # when set: write the experiment's JSON record there (sweeps read it)
default_step: int = -1  # the step whose tree is shown first (-1: the most instructive, `instructive_step`)
compare: str = "prompt_lookup,draft,medusa,lookahead"  # section 2: specs run side by side on the first prompt ("": skip)
compare_tokens: int = 48  # section 2: tokens per method
compare_rounds: int = 2  # section 2: interleaved rounds (order rotated); each method keeps its fastest
tie_tol: float = 0.05  # speed-ups within this share count as tied (the least tolerance; section 2 widens it to the machine's own spread)
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    max_new_tokens, repeats = min(max_new_tokens, 24), 1
    compare, compare_tokens, compare_rounds = "prompt_lookup,lookahead", 16, 1
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, seed=seed, stem="08_speedup_lab")
lm = load_model(model_name)

# %% [markdown]
# ## 1. The default experiment
#
# One warm-up run of each method first (first-call costs — allocator, cost-curve measurement, loading
# a draft — would otherwise land on whichever runs first), then the method, then autoregressive decoding
# on the same chat-templated prompt, temperature and seed. The whole experiment runs `repeats` times per
# prompt and the run of median speed-up is the one shown: a single timing can catch the machine busy, and
# the repeats also give this section a spread of its own (how far their speed-ups lay apart).

# %% tags=["nbval-ignore-output"]
import math

from specdec_lab.io import load_prompts
from specdec_lab.lab.experiment import run_experiment

all_prompts = load_prompts("../data/prompts.jsonl")
by_id = {p.question_id: p for p in all_prompts}
if isinstance(prompt_id, str):  # papermill -p passes "3,7" as text
    prompt_id = [int(x) for x in prompt_id.replace(",", " ").split()]
prompt_ids = list(prompt_id) if isinstance(prompt_id, list | tuple) else [prompt_id]
missing = [q for q in prompt_ids if q not in by_id]
if missing:
    raise ValueError(f"prompt_id {missing} not in data/prompts.jsonl (ids {min(by_id)}..{max(by_id)})")
labs, repeat_spread = [], []  # per prompt: the run of median speed-up, and max/min − 1 of the repeats' speed-ups
for qid in prompt_ids:
    p = by_id[qid]
    settings = {"temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed}
    runs = sorted((run_experiment(lm, p.text, method, **settings, extra={"prompt_id": qid, "category": p.category})
                   for _ in range(max(1, repeats))), key=lambda r: r.speedup)  # fmt: skip
    labs.append(runs[(len(runs) - 1) // 2])
    ups = [r.speedup for r in runs if r.speedup > 0]
    repeat_spread.append(max(ups) / min(ups) - 1 if len(ups) >= 2 else float("nan"))
lab = labs[0]
spread1 = max((x for x in repeat_spread if x == x), default=float("nan"))  # NaN with a single repeat
tol1 = tie_tol if math.isnan(spread1) else max(tie_tol, spread1)
print(f"[{by_id[prompt_ids[0]].category}] {lab.prompt[:300]}...")

# %% [markdown]
# The output of the method, coloured by provenance (hover a token for its step). Tokens that arrive as
# accepted drafts are the speed-up: each step that drafted emits its accepted run plus one bonus token for one
# target forward. Two exceptions: a step cut short by end-of-text emits no bonus, and a **plain step** — one
# that proposed nothing (prompt lookup finding no match, say) — emits a single token, the target's own next
# token, counted apart in the key as "plain step". Notebook 00 counts that token as the step's bonus (L = 0
# accepted + 1 bonus: a row with only a bonus is a plain decoding step); here it is kept apart so that "bonus"
# counts the drafting steps only. Either way each target forward emits one token of the target's own, plus the
# drafts it accepted. A character the tokenizer spells with several byte tokens (an emoji, an accented
# letter) shows on the token that completes it; the key to the symbols in token labels follows the text.
# The table: per run, the new tokens, the target forwards that emitted them, their ratio (mean accepted),
# tokens/s and why the run stopped.

# %% tags=["nbval-ignore-output"]
from IPython.display import HTML, Markdown, display

from specdec_lab.text import WHITESPACE_LEGEND
from specdec_lab.viz.lab_figures import numbers_frame, numbers_html, provenance_html

display(HTML(provenance_html(lab, lm.tokenizer) + numbers_html(lab)))
display(Markdown(f"Symbols in token labels: {WHITESPACE_LEGEND}."))
numbers_frame(lab)

# %% [markdown]
# What does not depend on timing is checked against the stored outputs (nbval): the tokens and their
# number, and — at temperature 0 — that the method reproduced autoregressive decoding exactly.

# %% tags=["nbval-check-output"]
print(f"method {lab.spec}, temperature {lab.temperature:g}, prompt {prompt_ids[0]}")
print(f"new tokens {len(lab.result.tokens)}, stop: {lab.result.stop_reason}")
print(f"autoregressive's text: {lab.baseline.text[:160]!r}...")
print(f"identical to autoregressive: {lab.identical}")
if temperature == 0:
    assert lab.identical, "greedy decoding must reproduce autoregressive decoding"

# %% [markdown]
# How the tokens were produced is *not* fixed by the prompt alone: prompt lookup's default draft length
# (`draft_length="cost"`) proposes $k$ tokens where $E[L]/t(k+1)$ ($L$ the tokens one target forward emits, bonus included) is largest on the verify
# cost $t$ measured on this machine, so another CPU drafts differently — with the same output. (With
# `prompt_lookup:draft_length=heuristic`, transformers' +2/−1 rule, the counts depend on the text only.)

# %% tags=["nbval-ignore-output"]
print(f"{len(lab.result.tokens)} tokens in {lab.result.forwards} target forwards (mean accepted "
      f"{lab.mean_accepted:.2f}): {lab.provenance_counts}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.lab_figures import accepted_figure

fig = accepted_figure(lab)
print(f"saved {save_figure(fig, '08_accepted_per_step', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
from specdec_lab.io import write_json
from specdec_lab.lab.course import compare as compare_sentence  # (`compare` is the parameter of section 2)
from specdec_lab.lab.experiment import experiment_record
from specdec_lab.machine import machine

record = experiment_record(labs)
summary = (
    f"**{record['method']}** on {len(labs)} prompt(s) at temperature {record['temperature']:g}: "
    f"{record['mean_accepted']:.2f} tokens per target forward, {record['tokens_per_s']:.1f} tokens/s against "
    f"autoregressive's {record['baseline_tokens_per_s']:.1f} — a speed-up of **{record['speedup']:.2f}×** on "
    f"this machine ({machine().describe()}); output identical to autoregressive: {record['identical']}."
    + (f" Shown: the run of median speed-up of {repeats} repeats, whose speed-ups lay at most {spread1:.0%} apart."
       if not math.isnan(spread1) else "")
)
summary += compare_sentence(
    record["speedup"], 1.0, "",
    " Below 1: on a CPU every extra token in the verify forward costs time, and the accepted drafts did not pay "
    "for the proposals here.",
    within=f" Within {tol1:.0%} of 1 (" + ("`tie_tol`, a set tolerance: one timing gives no spread of its own"
                                          if math.isnan(spread1) else "the noise: `tie_tol` or the repeats' spread, "
                                          "the larger") + "): the method ran about as fast as autoregressive decoding.",
    rel_tol=tol1)  # fmt: skip
if record["noisy"]:
    summary += (f" Autoregressive steps, which all do the same work, varied by {record['timing_spread']:.1f}× "
                "(p90/median) in this run: the CPU was busy with something else, so these speeds may move on a "
                "re-run.")  # fmt: skip
elif record["timing_spread"] is not None:
    summary += (f" Within one run, autoregressive step times p90/median = {record['timing_spread']:.2f}"
                + ("; that is the noise inside a run, while the repeats' spread above is how far whole runs moved"
                   if not math.isnan(spread1) else "") + ".")  # fmt: skip
if result_path:
    print(f"wrote {write_json(result_path, record)}")
Markdown(summary)

# %% [markdown]
# ## 2. Several methods at once
#
# The same prompt, several methods (`compare` above: bench specs, so `draft:max_draft=4` works too), and
# autoregressive decoding once for all of them (`specdec_lab.lab.compare.compare_methods`). Their timings
# are taken in one loop: every round runs each of them once, in an order rotated by one per round, and
# each keeps its fastest round — the benchmark's rule, so a busy moment or a first-call cost does not
# land on one method alone. The table: per method, the new tokens and target forwards, the mean accepted (tokens
# per target forward, bonus included), the draft tokens proposed and accepted per forward (drafts alone: the mean
# accepted adds each forward's bonus or plain-step token), tokens/s, the speed-up over the shared baseline, and
# whether the output equalled autoregressive decoding's. Four views: tokens emitted against target forwards
# (the slope is the tokens per step), against seconds (the slope is the decode speed after the prefill, where
# each curve starts; the table's tokens/s also counts the prefill), how many draft tokens the
# steps accepted, and the speedup.
#
# **Predict, then run:** of the methods in `compare`, which will emit the most tokens per target forward on this
# prompt, and will that one also be the fastest? Write down your guess before running the next cell.

# %% tags=["prediction", "nbval-ignore-output"]
from specdec_lab.lab.compare import compare_methods
from specdec_lab.viz.comparison import comparison_figure, comparison_frame

specs = [s.strip() for s in compare.split(",") if s.strip()]  # empty (a sweep point): this section is skipped
first = by_id[prompt_ids[0]]
comparison = []
if specs:
    comparison = compare_methods(lm, first.text, specs, temperature=temperature, max_new_tokens=compare_tokens,
                                 seed=seed, repeats=compare_rounds)  # fmt: skip
    # name the columns apart: "mean accepted" (tokens per target forward, bonus included) against the drafts alone
    display(comparison_frame(comparison).rename(columns={
        "tokens per step": "mean accepted (tokens per forward)", "proposed per step": "drafts proposed per forward",
        "accepted per step": "drafts accepted per forward (no bonus)"}).style.format(precision=2)
            .set_caption(f"prompt {first.question_id} ({first.category}), {compare_tokens} tokens per method"))  # fmt: skip
    fig = comparison_figure(comparison, f"Prompt {first.question_id} ({first.category}): {len(specs)} methods, "
                                        f"{compare_rounds} interleaved round(s)")  # fmt: skip
    print(f"saved {save_figure(fig, '08_compare', FIGURES)}")
    display(fig)
    # the seconds panel's slope is the decode speed after the prefill (a curve starts where its steps start); the
    # table's tokens/s divides by the whole call, prefill included
    slope_runs = [(c.spec, c.result) for c in comparison] + [(comparison[0].baseline_method, comparison[0].baseline)]
    slope_parts = []
    for name_c, r_c in (x for x in slope_runs if x[1] is not None):
        steps_s = sum(s.t_propose + s.t_verify + s.t_accept for s in r_c.steps)
        if steps_s > 0 and r_c.seconds > 0:
            slope_parts.append(f"{name_c} {len(r_c.tokens) / steps_s:.1f} tokens/s over its steps against "
                               f"{r_c.tokens_per_s:.1f} over the whole call ({r_c.seconds - steps_s:.2f} s outside "
                               "its steps' phases: the prefill and the loop's bookkeeping, drawn before the first step)")
    display(Markdown(
        "In the seconds panel each curve starts after its prefill, so its slope is the decode speed after the "
        "prefill; the table's tokens/s (and the speedup panel) divide by the whole call, prefill included: "
        + "; ".join(slope_parts) + "."))
else:
    print("compare is empty: no side-by-side comparison in this run")

# %% [markdown]
# Which is fastest, and which slowest? Timings of one prompt move from run to run, so speed-ups closer than the
# run's noise count as tied (`lab.experiment.fastest` and `slowest`, the rule `course.compare` applies to a
# sentence). The ordering reads this section's own noise: `tie_tol`, or where that is larger the largest gap between
# two rounds of one method (or of the shared baseline) here (`lab.experiment.round_spread`; it needs `compare_rounds`
# of 2 or more — with a single round, the spread of section 1's repeats stands in). The methods here share one
# baseline and ran in the same interleaved rounds, so how far section 1's repeats, timed at other moments, lay apart
# does not widen it. The sentence names every method: one that is neither among the fastest nor the slowest is named
# with the methods it lies within the noise of ("within" does not chain: a method can be within the noise of one slow
# method and not of another). It also sets this section's runs beside section 1's on the same prompt (the
# autoregressive run, and section 1's method): those comparisons span two sections timed at different moments, so
# they read the larger noise of the two — this section's, or how far section 1's repeats' speed-ups lay apart. Where
# the two autoregressive runs lie further apart than that, the machine's speed moved between the sections, or (where
# the two runs differ in length) the length did, since tokens/s divides by the whole call, prefill included; either
# way speed-ups are best compared within one section.

# %% tags=["nbval-ignore-output"]
import math

from specdec_lab.lab.course import within_tol
from specdec_lab.lab.experiment import fastest, round_spread, slowest

spread = round_spread(comparison)  # NaN with a single round


def noise_of(sources):
    """The largest of `tie_tol` and the spreads in `sources` (NaN: none measured), and the words that say which."""
    seen = {k: v for k, v in sources.items() if not math.isnan(v)}
    level = max([tie_tol, *seen.values()])
    if not seen:
        return level, "`tie_tol`, a set tolerance: a single round and a single repeat give no spread of their own"
    if level == tie_tol:
        return level, "`tie_tol`; " + " and ".join(f"{k} lay at most {v:.0%} apart" for k, v in seen.items())
    most = max(seen, key=seen.get)
    return level, (f"the most that {most} lay apart" + "".join(f"; {k}: {v:.0%}" for k, v in seen.items() if k != most)
                   + f"; `tie_tol` {tie_tol:.0%}")  # fmt: skip


HERE, THERE = "two rounds of one method (or of the baseline) here", "section 1's repeats' speed-ups"
# the ordering: this section's own noise (its methods share one baseline and ran in the same interleaved rounds); with
# a single round, section 1's repeats stand in
if math.isnan(spread):
    tol, why = noise_of({THERE: spread1})
    why = why if math.isnan(spread1) else "a single round here gives no spread of its own: " + why
else:
    tol, why = noise_of({HERE: spread})
# the comparisons with section 1 (timed at other moments): the larger noise of the two sections
noise, noise_why = noise_of({HERE: spread, THERE: spread1})
top, bottom = fastest(comparison, rel_tol=tol), slowest(comparison, rel_tol=tol)
most_steps = max(comparison, key=lambda x: x.mean_accepted, default=None)


def names(runs):
    return ", ".join(f"**{x.spec}** ({x.speedup:.2f}×)" for x in runs)


if not comparison:
    sentence = ""
elif len(top) == len(comparison):
    sentence = f"On this prompt {names(top)} all lie within {tol:.0%} of each other ({why}): these rounds cannot order them"
elif len(top) == 1:
    sentence = f"On this prompt the fastest is {names(top)}, none of the others within {tol:.0%} of it ({why})"
else:
    sentence = (f"On this prompt {names(top)} are the fastest, within {tol:.0%} of each other ({why}): these rounds "
                "cannot order them")  # fmt: skip
if comparison and len(top) < len(comparison):
    if any(x in top for x in bottom):  # within the noise of the fastest and the slowest alike: no clear bottom
        sentence += "; the rest lie within the noise of the fastest or of one another"
    elif len(bottom) == 1:
        sentence += f"; the slowest is {names(bottom)}"
    else:
        sentence += f"; the slowest, within the same tolerance of one another, are {names(bottom)}"
    # every method is named: one neither among the fastest nor the slowest is placed by its own neighbours, since
    # "within the noise" does not chain (a method can lie within it of one slow method and not of another)
    middle = [x for x in comparison if x not in top and x not in bottom and not math.isnan(x.speedup)]
    for x in sorted(middle, key=lambda r: -r.speedup):
        near = [y for y in comparison if y is not x and not math.isnan(y.speedup)
                and within_tol(x.speedup, y.speedup, tol)]  # fmt: skip
        sentence += f"; {names([x])} lies between them, " + (
            f"within {tol:.0%} of {names(near)}: these rounds do not order it against "
            + ("that one" if len(near) == 1 else "those") if near else f"more than {tol:.0%} from every other method")
if comparison:
    sentence += f"; the most tokens per target forward come from **{most_steps.spec}** ({most_steps.mean_accepted:.2f})"
    sentence += ((" — the fastest too." if len(top) == 1 else " — among the fastest.") if most_steps in top else
                 " — not among the fastest: what a step costs (its verify forward, its drafting) decides as much as "
                 "what it emits.")  # fmt: skip
    sentence += " Every output " + ("is identical to autoregressive decoding's." if all(x.identical for x in comparison)
                                    else "is **not** identical to autoregressive decoding's: "
                                    + ", ".join(x.spec for x in comparison if not x.identical) + ".")  # fmt: skip
    once = "the run of median speed-up of {r1} there" if repeats > 1 else "timed once there"
    base1, base2 = record["baseline_tokens_per_s"], comparison[0].baseline_tokens_per_s
    if len(labs) == 1 and base1 is not None and not math.isnan(base2):  # the same prompt's autoregressive runs
        # tokens/s divides by the whole call, prefill included: runs of other lengths differ by that alone
        nb1, nb2 = len(lab.baseline.tokens), len(comparison[0].baseline.tokens)
        moved = "so the machine's speed moved between the sections"
        if nb1 != nb2:  # how much the length alone moves tokens/s: section 1's run, its prefill kept, at nb2 tokens
            b1 = lab.baseline
            per_token = (b1.seconds - b1.prefill_seconds) / max(nb1, 1)  # its seconds per emitted token, prefill out
            at_nb2 = base1 * (nb2 / (b1.prefill_seconds + nb2 * per_token)) / (nb1 / b1.seconds)
            moved = (f"and the two runs differ in length ({nb1} against {nb2} new tokens), but section 1's run "
                     f"shortened to {nb2} tokens (its prefill kept) gives {at_nb2:.1f} tokens/s, "
                     + compare_sentence(at_nb2, base2, "still further from this one than the noise: the machine's speed "
                                        "moved between the sections", "still further from this one than the noise: "
                                        "the machine's speed moved between the sections",
                                        within="within the noise of this one: the length explains it",
                                        rel_tol=noise))  # fmt: skip
        sentence += compare_sentence(
            base1, base2,
            " Autoregressive decoding of this same prompt ran at {a:.1f} tokens/s in section 1 and {b:.1f} here: "
            "further apart than the noise ({tol:.0%}, {why}), {moved} — "
            "section 1's speed-up stands on a faster baseline than this one; compare speed-ups within one section.",
            " Autoregressive decoding of this same prompt ran at {a:.1f} tokens/s in section 1 and {b:.1f} here: "
            "further apart than the noise ({tol:.0%}, {why}), {moved} — "
            "section 1's speed-up stands on a slower baseline than this one; compare speed-ups within one section.",
            within=" Autoregressive decoding of this same prompt ran at {a:.1f} tokens/s in section 1 and {b:.1f} "
            "here: within the noise ({tol:.0%}, {why}).",
            rel_tol=noise, tol=noise, why=noise_why, moved=moved)  # fmt: skip
    again = next((x for x in comparison if x.spec == method), None)
    if again is not None and len(labs) == 1 and record["speedup"] is not None and not math.isnan(again.speedup):  # the same method on the same prompt as section 1: say why they differ
        sentence += compare_sentence(
            record["speedup"], again.speedup,
            " Section 1 measured **{m}** on this prompt at {a:.2f}×, here {b:.2f}×: the runs differ — {n1} tokens, "
            + once + "; {n2} tokens and the fastest of {r} round(s) here — and lie {gap:.0%} apart, more than "
            "{tol:.0%} ({why}).",
            " Section 1 measured **{m}** on this prompt at {a:.2f}×, here {b:.2f}×: the runs differ — {n1} tokens, "
            + once + "; {n2} tokens and the fastest of {r} round(s) here — and lie {gap:.0%} apart, more than "
            "{tol:.0%} ({why}).",
            within=" Section 1 measured **{m}** on this prompt at {a:.2f}×, here {b:.2f}×: within {tol:.0%} ({why}); "
            "the runs also differ in their settings ({n1} tokens, " + once + "; {n2} tokens and the fastest of {r} "
            "round(s) here).",
            rel_tol=noise, m=method, n1=max_new_tokens, n2=compare_tokens, r=compare_rounds, r1=repeats, tol=noise,
            why=noise_why,
            gap=abs(record["speedup"] - again.speedup) / min(record["speedup"], again.speedup))  # fmt: skip
        # a speed-up is the method's tokens/s over the baseline's: say which of the two moved between the sections
        own1, own2 = record["tokens_per_s"], again.tokens_per_s
        base2_m = again.baseline_tokens_per_s
        if all(x is not None and not math.isnan(x) and x > 0 for x in (own1, own2, base1, base2_m)):
            f_own, f_base = own2 / own1, base2_m / base1
            sentence += compare_sentence(
                f_base, f_own,
                " A speed-up is the method's tokens/s over the baseline's: between the sections **{m}**'s own "
                "tokens/s went {o1:.1f} → {o2:.1f} (×{b:.2f}), the baseline's {b1:.1f} → {b2:.1f} (×{a:.2f}), "
                "further apart than the noise ({tol:.0%}): the baseline gained on the method, so the speed-up "
                "moved with the baseline.",
                " A speed-up is the method's tokens/s over the baseline's: between the sections **{m}**'s own "
                "tokens/s went {o1:.1f} → {o2:.1f} (×{b:.2f}), the baseline's {b1:.1f} → {b2:.1f} (×{a:.2f}), "
                "further apart than the noise ({tol:.0%}): the method gained on the baseline, so the speed-up "
                "moved with the method.",
                within=" A speed-up is the method's tokens/s over the baseline's: between the sections **{m}**'s own "
                "tokens/s went {o1:.1f} → {o2:.1f} (×{b:.2f}), the baseline's {b1:.1f} → {b2:.1f} (×{a:.2f}); the "
                "speed-up moved by their ratio, and the two factors lie within the noise ({tol:.0%}) of each other.",
                rel_tol=noise, m=method, o1=own1, o2=own2, b1=base1, b2=base2_m, tol=noise)  # fmt: skip
Markdown(sentence)

# %% [markdown]
# The same with controls: edit the method list, pick a prompt, press **Run** (the runs happen in the
# background; **Stop** ends them at the next step).

# %% tags=["nbval-skip"]
from specdec_lab.lab.compare import CompareDashboard
from specdec_lab.lab.widgets import LIVE_ONLY, show_widget

compare_dash = CompareDashboard(lm, all_prompts, initial=comparison or None, seed=seed)
# it opens on the comparison above (if any), which is also what a reader of the stored notebook sees of it
show_widget(compare_dash.widget, "[interactive dashboard: its controls appear when the notebook runs; it opens on "
                                 "the comparison above]" if comparison else LIVE_ONLY)  # fmt: skip

# %% [markdown]
# ## 3. One method in detail: the dashboard
#
# Pick a shipped prompt (or type your own — the line under the box says which it is), a method and its
# parameters, the temperature, and press **Run**; **Stop** ends a long run at the next step and shows
# what was generated so far. The spec line shows the same point as a bench/sweep spec. It opens on the
# default experiment above: move the **step** slider to see each step's tree.
#
# The dashboard needs a running kernel. Under its controls it shows its default view as a static snapshot,
# stored with the notebook: each step's verified tree, one step at a time on the figure's own slider
# (`viz.lab_figures.lab_step_tree_figure`: dark gray the root, the last token already emitted; green the
# accepted drafts on the accepted path; red the drafts the target rejected; on a dashed edge right of the tree
# the token the target emitted itself after the last accepted node — the blue diamond of the **bonus**, or,
# on a step that proposed nothing, the gray one of a plain step), opening on the most
# instructive step (`instructive_step`: one whose proposal was accepted in part and rejected in part, the most
# tokens accepted among those); the text, numbers and tokens-per-step plot it also shows are section 1's. The
# snapshot gives way to the live view as soon as the dashboard redraws.

# %% tags=["nbval-ignore-output"]
from specdec_lab.lab.experiment import instructive_step
from specdec_lab.viz.lab_figures import steps_slider_figure

shown = instructive_step(lab.result.steps) if default_step < 0 else default_step
trees = steps_slider_figure(lab, lm.tokenizer, step=shown)
print(f"saved {save_figure(trees, '08_step_trees', FIGURES)}")
s = lab.result.steps[min(shown, len(lab.result.steps) - 1)]


def plural(n, noun):  # "1 node", "4 nodes"
    return f"{n} {noun}{'s' * (n != 1)}"


n_acc = min(s.accepted, len(s.emitted))  # an end-of-text token may cut the accepted path short
if s.proposed == 0:  # no step had a partial acceptance, and this one proposed nothing
    what = (f"a tree of {plural(len(s.tree_tokens), 'node')} and nothing proposed: a plain step, which emitted "
            f"{plural(len(s.emitted), 'token')} of the target's own")  # fmt: skip
else:
    what = (f"a tree of {plural(len(s.tree_tokens), 'node')}; {s.accepted} of its {plural(s.proposed, 'proposed token')} "
            f"{'was' if s.accepted == 1 else 'were'} accepted, {s.proposed - s.accepted} rejected, and the step emitted "
            f"{plural(len(s.emitted), 'token')}: " + ("the accepted ones and the bonus" if len(s.emitted) > n_acc else
                                                      "the accepted ones, cut by end-of-text before a bonus"))  # fmt: skip
Markdown(f"Under the dashboard below, the snapshot opens on step {shown} (the steps are numbered 0 to "
         f"{len(lab.result.steps) - 1}), {what}.")  # fmt: skip

# %% tags=["nbval-skip"]
from specdec_lab.lab.speedup import LabDashboard
from specdec_lab.lab.widgets import Snapshot

snapshot = Snapshot(trees, what="every step's tree of the default experiment, on the figure's own slider",
                    how="Press Run or move the step slider above to redraw it live.")  # fmt: skip
LabDashboard(lm, all_prompts, initial=lab, seed=seed, snapshot=snapshot)

# %% [markdown]
# ## Check your understanding
#
# 1. A method's run emitted 60 tokens in 16 target forwards. What is its mean accepted, and how many of the
#    tokens were bonus or plain-step tokens?
#
#    <details><summary>Answer</summary>
#
#    Mean accepted = $60 / 16 = 3.75$ tokens per forward, bonus included. Every forward emits one token that was
#    not an accepted draft (the bonus token, or the only token of a plain step) — except a step cut short by
#    end-of-text, which emits no bonus (Exercise 2). If no step was cut, 16 tokens were bonus or plain-step tokens
#    and 44 were accepted drafts; if the last one was, 15 and 45.
#    </details>
#
# 2. The method with the most tokens per target forward is not always the fastest. Why?
#
#    <details><summary>Answer</summary>
#
#    The speed-up is tokens per second, not per forward: a step also pays for its verify forward (which grows with
#    the tokens it verifies on a CPU) and for the drafting (a draft model's forwards, the heads). A method that
#    verifies a large tree or drafts with a model can emit more per step and still take longer per token.
#    </details>
#
# 3. Why are the method and autoregressive decoding timed on the same prompt, in the same process, after a
#    warm-up of each, and (in section 2) in rotated order?
#
#    <details><summary>Answer</summary>
#
#    So that they differ only in the method: the same prompt and tokens, the same threads and allocator state,
#    and no first-call cost (memory, a cost-curve measurement, loading a draft) landing on one of them. Rotating
#    the order spreads slow drifts of the machine over every method instead of one.
#    </details>

# %% [markdown]
# ## Exercises
#
# Each exercise has a stub cell (replace the `...`), a solution cell (removed from student copies) and a check
# cell that compares your answer with the library's own function.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — read a LabResult
#
# A run is read from three fields: `.tokens` (the new tokens), `.forwards` (target forwards) and `.seconds` (the
# whole call). Write `read_run(run, base)` returning the pair `(mean_accepted, speedup)` of a method's run `run`
# against autoregressive decoding's `base`: tokens per target forward (bonus included), and the method's tokens/s
# over the baseline's. The check hands it runs with those three fields only — section 1's (`fields(lab.result)`,
# `fields(lab.baseline)`) and `made_up`, a run stopped early (30 tokens) against a full baseline (48), where
# tokens/s and wall time give different ratios — and compares with what a `LabResult` reports for the same runs.

# %% tags=["exercise", "exercise-1"]
from types import SimpleNamespace


def fields(r):  # a run with only the three fields the exercise reads
    return SimpleNamespace(tokens=list(r.tokens), forwards=r.forwards, seconds=r.seconds)


made_up = (SimpleNamespace(tokens=[7] * 30, forwards=9, seconds=0.6),  # the method's run, stopped early
           SimpleNamespace(tokens=[7] * 48, forwards=48, seconds=1.5))  # autoregressive decoding's  # fmt: skip


def read_run(run, base):
    ...


# %% tags=["solution", "exercise-1"]
def read_run(run, base):  # noqa: F811 - replaces the stub above
    mean_accepted = len(run.tokens) / run.forwards
    speedup = (len(run.tokens) / run.seconds) / (len(base.tokens) / base.seconds)
    return mean_accepted, speedup


# %% tags=["check", "exercise-1", "nbval-check-output"]
def _check_exercise_1():  # the reference is built in here, so no name of it stays in scope for an answer
    import math

    from specdec_lab.generate import GenerationResult
    from specdec_lab.lab.course import check
    from specdec_lab.lab.experiment import LabResult

    def as_lab(run, base):  # the LabResult the library builds from the same fields
        def result(r):
            return GenerationResult(list(r.tokens), [], None, "max_new_tokens", "made up", r.seconds, 0.0,
                                    forwards=r.forwards)  # fmt: skip

        return LabResult("made up", "made up", {}, 0.0, 0, len(run.tokens), result(run), result(base))

    def same(a, r):
        return isinstance(a, tuple | list) and len(a) == 2 and all(map(lambda x, y: math.isclose(x, y, rel_tol=1e-9),
                                                                        a, r))  # fmt: skip

    hint = "Tokens/s is tokens over seconds of the whole call; divide the method's by the baseline's."
    made = as_lab(*made_up)
    check("mean accepted and speed-up of the made-up run stopped early", read_run(*made_up),
          (made.mean_accepted, made.speedup), close=same, hint=hint)  # fmt: skip
    check("mean accepted and speed-up of section 1's run", read_run(fields(lab.result), fields(lab.baseline)),
          (lab.mean_accepted, lab.speedup), close=same, hint=hint)  # fmt: skip


try:
    _check_exercise_1()
finally:
    del _check_exercise_1

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — where every token came from
#
# Write `count_provenance(steps)`: the emitted tokens of a list of steps counted by provenance. Each step (a
# `StepTrace`) has `.proposed` = draft tokens offered, `.accepted` = draft tokens the target accepted, `.emitted`
# = the tokens the step emitted: a step that proposed nothing emits **plain step** tokens; otherwise its first
# `accepted` tokens are **accepted draft** tokens (never more than it emitted: an end-of-text token can cut the
# accepted path short) and the rest **bonus**. Return a dict with the keys `"accepted draft"`, `"bonus"`,
# `"plain step"`. The check runs it on section 1's steps (`lab.result.steps`) and on `made_up_steps` (a plain
# step, a partial acceptance, a full one, and a path cut by end-of-text), against the library's reading of the
# same steps (`LabResult.provenance_counts`, built on `specdec_lab.lab.trace_reading.provenance`: the cell below
# names it `provenance`, and an answer that calls it is refused — directly, or through a `LabResult`, such as a copy
# of section 1's `lab` given other steps, whose counts call it).

# %% tags=["exercise", "exercise-2"]
from types import SimpleNamespace

from specdec_lab.lab.course import watch
from specdec_lab.lab.trace_reading import provenance  # noqa: F401 - in scope, and watched

_watch_2 = watch(globals(), "provenance")  # the check's reference: count the steps yourself

made_up_steps = [SimpleNamespace(proposed=0, accepted=0, emitted=[11]),  # a plain step
                 SimpleNamespace(proposed=4, accepted=2, emitted=[12, 13, 14]),  # two accepted, then the bonus
                 SimpleNamespace(proposed=3, accepted=3, emitted=[15, 16, 17, 18]),  # all three, then the bonus
                 SimpleNamespace(proposed=4, accepted=3, emitted=[19, 2])]  # end-of-text (2) inside the path  # fmt: skip


def count_provenance(steps):
    ...


# %% tags=["solution", "exercise-2"]
def count_provenance(steps):  # noqa: F811 - replaces the stub above
    counts = {"accepted draft": 0, "bonus": 0, "plain step": 0}
    for step in steps:
        if step.proposed == 0:
            counts["plain step"] += len(step.emitted)
        else:
            drafted = min(step.accepted, len(step.emitted))  # an end-of-text token may cut the path short
            counts["accepted draft"] += drafted
            counts["bonus"] += len(step.emitted) - drafted
    return counts


# %% tags=["check", "exercise-2", "nbval-check-output"]
def _check_exercise_2():  # the reference is read in here, so no name of it stays in scope for an answer
    from collections import Counter
    from unittest import mock

    import specdec_lab.lab.experiment as experiment_module
    import specdec_lab.lab.trace_reading as trace_reading_module
    from specdec_lab.lab.course import check
    from specdec_lab.lab.trace_reading import PROVENANCE
    from specdec_lab.lab.trace_reading import provenance as provenance_of  # the original, unwatched

    def answer_to(steps):  # the answer, with the library's own reading watched inside the library too: a
        # `LabResult` (section 1's `lab`, or a copy of it given other steps) counts by calling it

        def spy(s):
            _watch_2.called.append("provenance")
            return provenance_of(s)

        with mock.patch.object(trace_reading_module, "provenance", spy), \
                mock.patch.object(experiment_module, "provenance", spy):  # fmt: skip
            return count_provenance(steps)

    hint = "A step that proposed nothing emits plain-step tokens; a step cut by end-of-text emits no bonus."
    made_up_counts = Counter(provenance_of(made_up_steps))
    reference = {k: made_up_counts.get(k, 0) for k in PROVENANCE}
    check("the provenance counts of the made-up steps", answer_to(made_up_steps), reference,
          close=lambda a, r: a is not None and dict(a) == r, hint=hint, watch=_watch_2)  # fmt: skip
    reference = lab.provenance_counts  # read before the answer runs, outside the watch
    check("the provenance counts of section 1's run", answer_to(lab.result.steps), reference,
          close=lambda a, r: a is not None and dict(a) == r, hint=hint, watch=_watch_2)  # fmt: skip


try:
    _check_exercise_2()
finally:
    del _check_exercise_2

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★ — which method was fastest, or were they tied?
#
# `speedups` maps each method spec of section 2 to its measured speed-up (empty when `compare` is). Write
# `fastest_specs(speedups, rel_tol)`: the specs whose speed-up is the best one or within `rel_tol` of it by
# `course.compare`'s rule, $|a - b| \le \text{rel\_tol} \cdot \min(|a|, |b|)$ (the larger at most
# $(1 + \text{rel\_tol})\times$ the smaller), fastest first. One prompt's timings may or may not hold a tie, so the
# check also runs it on `tied`, made-up speed-ups of five methods with `rel_tol = 0.05`: two of them tied, and a
# third that a band relative to the *larger* value (`math.isclose`'s) would wrongly let in. The reference is `specdec_lab.lab.experiment.fastest`, on section 2's
# results with the tolerance section 2's sentence used (`tol`: `tie_tol`, or the largest spread of section 2's own
# rounds where that is larger; with a single round, section 1's repeats'), so the check's fastest and the sentence's agree; an answer that calls it is refused,
# and so is one that hands the rule to section 2's `slowest` (the same rule, on reciprocal speed-ups) or to
# section 1's `compare_sentence` (`course.compare`, which applies it).

# %% tags=["exercise", "exercise-3"]
from specdec_lab.lab.course import compare as compare_sentence  # noqa: F401 - in scope (section 1), and watched
from specdec_lab.lab.course import watch
from specdec_lab.lab.experiment import fastest, slowest  # noqa: F401 - in scope (section 2), and watched

# the check's reference, and the two in-scope functions that apply the same rule: compute the rule yourself
_watch = watch(globals(), "fastest", "slowest", "compare_sentence")
speedups = {x.spec: x.speedup for x in comparison}
tied = {"prompt_lookup": 1.902, "draft": 1.80, "medusa": 2.00, "lookahead": 1.93, "eagle": 1.20}  # made up


def fastest_specs(speedups, rel_tol):
    ...


# %% tags=["solution", "exercise-3"]
def fastest_specs(speedups, rel_tol):  # noqa: F811 - replaces the stub above
    if not speedups:
        return []
    top = max(speedups.values())
    tied = [spec for spec, s in speedups.items() if abs(top - s) <= rel_tol * min(abs(top), abs(s))]
    return sorted(tied, key=lambda spec: -speedups[spec])


# %% tags=["check", "exercise-3", "nbval-check-output"]
from types import SimpleNamespace

from specdec_lab.lab.course import check

tied_runs = [SimpleNamespace(spec=spec, speedup=s) for spec, s in tied.items()]  # (not `made_up`: exercise 1's)
hint = "Compare each speed-up with the best one, relative to the smaller of the two; list the fastest first."
answer = fastest_specs(tied, 0.05)
_watch.begin_check()  # from here the references are the check's own
_ = check("the fastest of the made-up speed-ups (rel_tol 0.05)", answer,
          [x.spec for x in _watch["fastest"](tied_runs, 0.05)], close=lambda a, r: list(a) == r, hint=hint,
          watch=_watch)  # fmt: skip
answer = fastest_specs(speedups, tol)
_watch.begin_check()
_ = check("the fastest methods of section 2 (its tolerance `tol`, as in its sentence)", answer,
          [x.spec for x in _watch["fastest"](comparison, tol)], close=lambda a, r: list(a) == r, hint=hint,
          watch=_watch)  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - A method and autoregressive decoding timed on the same prompt, in the same process and after a warm-up,
#   give a speed-up that isolates the method; at temperature 0 the output must be (and was) identical.
# - Every step but one cut by end-of-text emits one token the method did not draft (bonus or plain step), so mean
#   accepted = tokens per forward counts the accepted drafts plus (nearly) one.
# - Tokens per forward and speed need not rank methods alike (section 2's sentence says whether they did on this
#   prompt): what a step costs — its verify forward and its drafting — decides as much as what it emits, and
#   timings within run-to-run noise do not order methods.
# - The same notebook is a sweep point: `python -m specdec_lab.sweep` runs it with other parameters and gathers
#   each point's record.
#
# ## Further reading
#
# - [Fast Inference from Transformers via Speculative Decoding](https://arxiv.org/abs/2211.17192) (Leviathan et
#   al. 2023): the draft-and-verify loop every method of the lab runs.
# - [Prompt Lookup Decoding](https://github.com/apoorvumang/prompt-lookup-decoding) (repository): the default
#   method of section 1.
# - [Spec-Bench](https://github.com/hemingkx/Spec-Bench) (repository and leaderboard) and its
#   [survey](https://arxiv.org/abs/2401.07851) (Xia et al. 2024): methods compared on one benchmark, as section
#   2 compares them on one prompt.
