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
# * the tokens per step (target forward) — the "mean accepted" of the theory, bonus included;
# * tokens/s of both runs and the speed-up, and whether the output is identical (it must be, greedily);
# * the tree verified at each step;
# * and several methods at once on the same prompt (section 2): tokens per step, draft tokens accepted
#   per step, and speed, side by side.
#
# The method list and each method's parameters are read from the registry
# (`specdec_lab.proposers.METHODS` and its config dataclasses), so a method added with `register_method`
# appears in the dashboard without editing this notebook. The cell below runs the default experiment
# without widgets (papermill and nbval see a complete notebook); the dashboard follows.
#
# **Sweeps** execute this notebook once per grid point (`python -m specdec_lab.sweep SPEC.yaml`) with
# the parameters `method` (a bench spec such as `"draft:max_draft=4"`), `temperature`, `max_new_tokens`,
# `prompt_id` (one id or a list), `seed`, `quick` and `result_path`, where the result is written as JSON,
# and an empty `compare`: a point measures one method, so section 2's side-by-side run is skipped.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer tokens (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
prompt_id: int = 46  # question_id in data/prompts.jsonl, or a list of them (46: a rag prompt that copies a lot)
method: str = "prompt_lookup"  # the method measured: a bench spec (name plus settings, as in the text above)
temperature: float = 0.0  # sampling temperature (0: greedy, the output must equal autoregressive's)
max_new_tokens: int = 64  # tokens generated per prompt, by the method and by the baseline
seed: int = 0  # sampling seed (both runs)
result_path: str = None  # when set: write the experiment's JSON record there (sweeps read it)
default_step: int = -1  # the step whose tree is shown first (-1: the most instructive, `instructive_step`)
compare: str = "prompt_lookup,draft,medusa,lookahead"  # section 2: specs run side by side on the first prompt ("": skip)
compare_tokens: int = 48  # section 2: tokens per method
compare_rounds: int = 2  # section 2: interleaved rounds (order rotated); each method keeps its fastest
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    max_new_tokens = min(max_new_tokens, 24)
    compare, compare_tokens, compare_rounds = "prompt_lookup,lookahead", 16, 1
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import os
import time
from pathlib import Path

import torch
from IPython.display import HTML, Markdown, display
from tqdm.auto import tqdm
from transformers.utils import logging as hf_logging

from specdec_lab import load_model
from specdec_lab.io import load_prompts, write_json
from specdec_lab.lab.compare import CompareDashboard, compare_methods
from specdec_lab.lab.experiment import experiment_record, instructive_step, run_experiment
from specdec_lab.lab.speedup import LabDashboard
from specdec_lab.machine import machine
from specdec_lab.text import WHITESPACE_LEGEND
from specdec_lab.viz.comparison import comparison_figure, comparison_frame
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.lab_figures import (
    accepted_figure,
    numbers_frame,
    numbers_html,
    provenance_html,
    steps_slider_figure,
)

T_START = time.perf_counter()
FIGURES = Path(os.environ.get("SPECDEC_LAB_FIGURES", figures_dir))  # env override: used by nbval in CI
hf_logging.disable_progress_bar()
torch.manual_seed(seed)
all_prompts = load_prompts("../data/prompts.jsonl")
by_id = {p.question_id: p for p in all_prompts}
if isinstance(prompt_id, str):  # papermill -p passes "3,7" as text
    prompt_id = [int(x) for x in prompt_id.replace(",", " ").split()]
prompt_ids = list(prompt_id) if isinstance(prompt_id, list | tuple) else [prompt_id]
missing = [q for q in prompt_ids if q not in by_id]
if missing:
    raise ValueError(f"prompt_id {missing} not in data/prompts.jsonl (ids {min(by_id)}..{max(by_id)})")
print(f"{machine().describe()}; quick={quick}")

# %% [markdown]
# ## 1. The default experiment
#
# One warm-up run of each method first (first-call costs — allocator, cost-curve measurement, loading
# a draft — would otherwise land on whichever runs first), then the method, then autoregressive decoding
# on the same chat-templated prompt, temperature and seed.

# %% tags=["nbval-ignore-output"]
lm = load_model(model_name)
labs = []
for qid in tqdm(prompt_ids, desc="prompts", disable=len(prompt_ids) == 1):
    p = by_id[qid]
    settings = {"temperature": temperature, "max_new_tokens": max_new_tokens, "seed": seed}
    labs.append(run_experiment(lm, p.text, method, **settings, extra={"prompt_id": qid, "category": p.category}))
lab = labs[0]
print(f"[{by_id[prompt_ids[0]].category}] {lab.prompt[:300]}...")

# %% [markdown]
# The output of the method, coloured by provenance (hover a token for its step). Tokens that arrive as
# accepted drafts are the speed-up: each step emits its accepted run plus one bonus token for one
# target forward. A character the tokenizer spells with several byte tokens (an emoji, an accented
# letter) shows on the token that completes it; the key to the symbols in token labels follows the text.

# %% tags=["nbval-ignore-output"]
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
# (`draft_length="cost"`) proposes $k$ tokens where $E[\text{tokens}]/t(k+1)$ is largest on the verify
# cost $t$ measured on this machine, so another CPU drafts differently — with the same output. (With
# `prompt_lookup:draft_length=heuristic`, transformers' +2/−1 rule, the counts depend on the text only.)

# %% tags=["nbval-ignore-output"]
print(f"{len(lab.result.tokens)} tokens in {lab.result.forwards} target forwards (mean accepted "
      f"{lab.mean_accepted:.2f}): {lab.provenance_counts}")  # fmt: skip

# %% tags=["nbval-ignore-output"]
fig = accepted_figure(lab)
print(f"saved {save_figure(fig, '08_accepted_per_step', FIGURES)}")
fig

# %% tags=["nbval-ignore-output"]
record = experiment_record(labs)
summary = (
    f"**{record['method']}** on {len(labs)} prompt(s) at temperature {record['temperature']:g}: "
    f"{record['mean_accepted']:.2f} tokens per target forward, {record['tokens_per_s']:.1f} tokens/s against "
    f"autoregressive's {record['baseline_tokens_per_s']:.1f} — a **{record['speedup']:.2f}×** speed-up on "
    f"this machine ({machine().describe()}); output identical to autoregressive: {record['identical']}."
)
if record["speedup"] < 1:
    summary += (" Below 1: on a CPU every extra token in the verify forward costs time, and the accepted "
                "drafts did not pay for the proposals here.")  # fmt: skip
if record["noisy"]:
    summary += (f" Autoregressive steps, which all do the same work, varied by {record['timing_spread']:.1f}× "
                "(p90/median) in this run: the CPU was busy with something else, so these speeds may move on a "
                "re-run.")  # fmt: skip
elif record["timing_spread"] is not None:
    summary += f" Timing noise: autoregressive step times p90/median = {record['timing_spread']:.2f}."
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
# land on one method alone. Four views: tokens emitted against target forwards (the slope is the tokens
# per step), against seconds (the slope is the speed), how many draft tokens the steps accepted, and the
# speedup.

# %% tags=["nbval-ignore-output"]
specs = [s.strip() for s in compare.split(",") if s.strip()]  # empty (a sweep point): this section is skipped
first = by_id[prompt_ids[0]]
comparison = []
if specs:
    comparison = compare_methods(lm, first.text, specs, temperature=temperature, max_new_tokens=compare_tokens,
                                 seed=seed, repeats=compare_rounds)  # fmt: skip
    display(comparison_frame(comparison).style.format(precision=2)
            .set_caption(f"prompt {first.question_id} ({first.category}), {compare_tokens} tokens per method"))  # fmt: skip
    fig = comparison_figure(comparison, f"Prompt {first.question_id} ({first.category}): {len(specs)} methods, "
                                        f"{compare_rounds} interleaved round(s)")  # fmt: skip
    print(f"saved {save_figure(fig, '08_compare', FIGURES)}")
    display(fig)
else:
    print("compare is empty: no side-by-side comparison in this run")

# %% tags=["nbval-ignore-output"]
ranked = sorted(comparison, key=lambda x: x.speedup, reverse=True)
most_steps = max(comparison, key=lambda x: x.mean_accepted, default=None)
Markdown(
    "" if not comparison else
    f"On this prompt the fastest is **{ranked[0].spec}** ({ranked[0].speedup:.2f}× autoregressive decoding)"
    + (f" and the slowest {ranked[-1].spec} ({ranked[-1].speedup:.2f}×)" if len(ranked) > 1 else "")
    + f"; the most tokens per target forward come from **{most_steps.spec}** ({most_steps.mean_accepted:.2f})"
    + (" — the same method." if most_steps is ranked[0] else
       " — not the fastest: what a step costs (its verify forward, its drafting) decides as much as what it "
       "emits.")
    + " Every output "
    + ("is identical to autoregressive decoding's." if all(x.identical for x in comparison)
       else "is **not** identical to autoregressive decoding's: " + ", ".join(x.spec for x in comparison
                                                                          if not x.identical) + ".")
)  # fmt: skip

# %% [markdown]
# The same with controls: edit the method list, pick a prompt, press **Run** (the runs happen in the
# background; **Stop** ends them at the next step).

# %% tags=["nbval-skip"]
CompareDashboard(lm, all_prompts, initial=comparison or None, seed=seed)

# %% [markdown]
# ## 3. One method in detail: the dashboard
#
# Pick a shipped prompt (or type your own — the line under the box says which it is), a method and its
# parameters, the temperature, and press **Run**; **Stop** ends a long run at the next step and shows
# what was generated so far. The spec line shows the same point as a bench/sweep spec. It opens on the
# default experiment above: move the **step** slider to see each step's tree.

# %% tags=["nbval-skip"]
dash = LabDashboard(lm, all_prompts, initial=lab, seed=seed)
dash

# %% [markdown]
# **The default view, stored.** The dashboard needs a running kernel; this is what it shows for the
# default experiment, as a static figure: each step's verified tree (green: the accepted path, whose
# tokens were emitted with the bonus token after it), one step at a time on the figure's own slider. It
# opens on the most instructive step (`instructive_step`: one whose proposal was accepted in part and
# rejected in part, the most tokens accepted among those); the cell below says which.

# %% tags=["nbval-ignore-output"]
shown = instructive_step(lab.result.steps) if default_step < 0 else default_step
fig = steps_slider_figure(lab, lm.tokenizer, step=shown)
print(f"saved {save_figure(fig, '08_step_trees', FIGURES)}")
s = lab.result.steps[min(shown, len(lab.result.steps) - 1)]
display(Markdown(f"Shown first: step {shown} (the steps are numbered 0 to {len(lab.result.steps) - 1}), a tree of "
                 f"{len(s.tree_tokens)} nodes; {s.accepted} of its {s.proposed} proposed tokens were accepted."))  # fmt: skip
fig

# %% tags=["nbval-ignore-output"]
print(f"notebook wall time: {time.perf_counter() - T_START:.0f} s")
