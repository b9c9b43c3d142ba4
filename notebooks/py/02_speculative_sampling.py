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
# # 02 · Speculative sampling with a draft model
#
# A small **draft** model proposes k tokens, the **target** (SmolLM2-135M-Instruct) verifies them in one
# forward, and the output is *exactly* the target's: token for token under greedy decoding, in
# distribution under sampling.
#
# ### Learning objectives
#
# After this notebook you can:
#
# - **explain** why resampling a rejected draft from the residual norm(max(p − q, 0)) keeps the output
#   distributed exactly as p, and draw p, q and the residual at a real position;
# - **write** the speculative acceptance rule for a chain and **test** it with a chi-square test that a broken
#   rule fails;
# - **measure** a draft's acceptance per draft position and against the temperature, and compare it with the
#   i.i.d. theory of notebook 01;
# - **predict** a speedup from measured parts (α̂, T_draft, t(n)) and set it beside a benchmark.
#
# ### Prerequisites
#
# Notebook 00 (the loop, the bonus token, the cost curve) and notebook 01 (α = 1 − TV(p, q), E[L], the measured
# speedup). Notation: notebook 00's table — p (target), q (draft), α = Σ min(p, q), k, c, τ, L, E[L] and "mean
# accepted" (tokens per target forward, bonus included); T is the sampling temperature.
#
# First **the rule in one picture**: p, q and the residual at one real position. Then
#
# 1. the draft: a 2-layer LM distilled from the target (`python -m specdec_lab.train draft`), its
#    training record, and the training-free alternative (the target's own first layers);
# 2. the draft live: per step, what it proposed and what the target accepted;
# 3. measured α per draft position against the i.i.d. theory of notebook 01;
# 4. α against the sampling temperature, measured on benchmark prompts (read from a committed file);
# 5. losslessness: the empirical next-token histogram under speculative sampling vs the target's p,
#    with a chi-square test — and a broken rule that fails it;
# 6. speed: against autoregressive decoding and against transformers' `generate(assistant_model=...)`
#    with the same draft weights;
# 7. a dashboard;
#
# then questions, exercises, takeaways and further reading. Defaults are small so the notebook runs in minutes on a
# CPU (nbval runs it as is; the line under the parameters says how long its last run took). Section 4
# reads its measurement from `data/bench/draft_alpha_temperature.json` (`rerun=True` measures it again).

# %% tags=["parameters"]
quick: bool = False  # CI: fewer prompts, tokens and trials (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, local HF dir or .gguf
draft: str = "default"  # "default" (data/draft/smollm2-135m-2l), "layer_skip:N" or a draft folder
prompt_id: int = 3  # question_id in data/prompts.jsonl for the live demo
max_new_tokens: int = 48  # tokens per generation in the demos
k_fixed: int = 6  # draft length for the per-position statistics
position_prompts: int = 2  # prompts for the per-position statistics
temperature: float = 0.8  # sampling temperature for sections 2 and 5
top_p: float = 0.9  # nucleus sampling for sections 2 and 5
rerun: bool = False  # section 4: measure α against temperature afresh (minutes) instead of reading alpha_file
alpha_file: str = "../data/bench/draft_alpha_temperature.json"  # python -m specdec_lab.lab.alpha_temperature
hist_trials: int = 1000  # speculative episodes for the histogram
bench_prompts: int = 2  # prompts for the live speed comparison
bench_tokens: int = 48  # new tokens per prompt in the live speed comparison
seed: int = 0  # random seed

# %%
if quick:
    max_new_tokens = min(max_new_tokens, 24)
    position_prompts = min(position_prompts, 1)
    hist_trials = min(hist_trials, 300)
    bench_prompts = min(bench_prompts, 1)
    bench_tokens = min(bench_tokens, 24)
    rerun = True  # the measurement's own code path, on a tiny grid, into results/

from specdec_lab import load_model
from specdec_lab.lab.course import start

FIGURES = start("../results/figures" if quick else "../figures", seed=seed, stem="02_speculative_sampling")
lm = load_model(model_name)  # the target, used in every section

# %% [markdown]
# ## The rule in one picture
#
# Speculative sampling — found independently by [Leviathan et al. 2023](https://arxiv.org/abs/2211.17192) and
# [Chen et al. 2023](https://arxiv.org/abs/2302.01318) — decides each drafted token x, which the draft drew from
# its q, with one coin: **accept x with probability min(1, p(x)/q(x))**; at the first rejection, replace x by a
# token drawn from the **residual** norm(max(p − q, 0)), and stop. Here are p, q and the residual at one real
# position: the target and the shipped draft (section 1 says how it was made), after a short question, with this
# notebook's temperature and top-p applied to both.

# %%
import numpy as np

from specdec_lab.accept.losslessness import LogitsTable
from specdec_lab.models.draft_model import get_draft
from specdec_lab.sampling import Sampling, warp_probs

d = get_draft(draft, lm.model)  # the draft: built on the target's weights (section 1)
sampling = Sampling(temperature=temperature, top_p=top_p)
context = lm.chat_ids("Name one fruit that is red.")
target_table = LogitsTable(lm.model, context)  # next-token logits after context + a prefix, memoized
draft_table = LogitsTable(d.model, context, forward=lambda x: d.logits(x, extra=context))
p0 = warp_probs(target_table(()), sampling).double().numpy()  # (V,) p after the context
q0 = warp_probs(draft_table(()), sampling).double().numpy()  # (V,) q after the context

# %%
from specdec_lab.viz.acceptance import residual_figure, vocabulary_labels

shown = np.argsort(-np.maximum(p0, q0))[:10]  # the tokens the figure shows: the 10 likeliest under p or q
fig = residual_figure(p0, q0, vocabulary_labels(lm.tokenizer, shown), top=10)
fig

# %% [markdown]
# Why the residual, and not p itself? Follow one token x through the rule:
#
# * x is drafted with probability q(x) and then kept with probability min(1, p(x)/q(x)): together
#   min(p(x), q(x)), the overlap of its two bars in the top panel. Summed over all tokens the overlap is α, so a
#   draft is accepted with probability α and rejected with probability 1 − α.
# * After a rejection the rule draws from the residual. Before normalising, its mass is Σ max(p − q, 0) = 1 − α —
#   exactly what p holds beyond the overlap — so a rejection emits x with probability
#   (1 − α) · max(p(x) − q(x), 0) / (1 − α) = max(p(x) − q(x), 0).
# * In total x is emitted with probability min(p(x), q(x)) + max(p(x) − q(x), 0) = **p(x)**. The draft decides how
#   often the cheap path is taken — the speed — and never what is emitted.
#
# So the residual is zero wherever q ≥ p (the draft already offers those tokens at least as often as the target
# wants them) and tops up exactly the tokens the draft under-proposes. Resampling a rejection from p instead
# would emit min(p, q) + (1 − α)·p: too much of every token where q > p. Section 5 tests both rules on the real
# model. The same argument, applied to each drafted position in turn, makes a whole chain exact.

# %%
import torch
from IPython.display import Markdown

from specdec_lab.accept.tree_rules import residual  # noqa: F401 - Exercise 2 watches it
from specdec_lab.lab.chain_exercise import branch_reference

alpha0 = float(np.minimum(p0, q0).sum())
# the rule's two ways of emitting x (drafted and kept; rejected, then drawn from the residual), summed over both:
# the library's own split (`lab.chain_exercise.branch_reference`), which Exercise 2 asks you to build by hand
emitted0 = branch_reference(torch.from_numpy(p0), torch.from_numpy(q0)).sum(0).numpy()
emitted_gap0 = float(np.abs(emitted0 - p0).max())  # float64: rounding leaves it far under 1e-6 (Exercise 2's bar)
Markdown(
    f"At this position α = Σ min(p, q) = {alpha0:.2f}: a drafted token is accepted with probability {alpha0:.2f} "
    f"and replaced from the residual with probability {1 - alpha0:.2f}; the rule's emitted distribution, "
    f"min(p, q) + (1 − α)·residual, differs from p by at most {emitted_gap0:.1e} over the {len(p0)} tokens of the "
    "vocabulary"
    + (": floating-point rounding (under 1e-6)." if emitted_gap0 < 1e-6 else
       ", more than floating-point rounding (1e-6): here the split does **not** add up to p.")
)  # fmt: skip

# %% [markdown]
# ## 1. The draft
#
# No smaller SmolLM2 exists offline, so we make one (`specdec_lab.models.draft_model`): **2 decoder layers**
# initialized from the target's first two, the target's (shared, frozen) embeddings and tied head, and a
# 576×576 **readout** A before the head, logits = E·(A h). A starts as a least-squares "tuned lens" that
# maps the draft's last hidden state onto the target's; then LoRA deltas, the norms and A are distilled
# on the target's own greedy answers to the training prompts (KL to the target's distribution at every
# position, read from the cached target hidden states). Only the trained tensors are stored (a few MB);
# the rest is rebuilt from the target at load time.
#
# The draft evaluates only a **drafting vocabulary** (the most frequent tokens of the distillation
# responses plus the prompt's own tokens), in the style of [EAGLE-3](https://arxiv.org/abs/2503.01840): a smaller
# head, and q = 0 outside the vocabulary keeps speculative sampling exact (q only needs to be a distribution).
# The training-free alternative, `draft="layer_skip:N"`, drafts with the target's own first N layers
# (self-speculative decoding, as in [LayerSkip](https://arxiv.org/abs/2404.16710)). The sizes, from the draft's
# manifest:

# %%
from IPython.display import display

manifest = d.manifest
print(f"draft {d.name!r}: {d.n_layers} layers, vocabulary {'full' if d.vocab is None else len(d.vocab)}")
train_tokens_text = None  # the training split's response tokens, counted from the distillation data the manifest names
train_token_rows = {}  # the same counts, as rows of the training record below
if manifest:
    import re
    from pathlib import Path

    from specdec_lab.train.distill import load_distillation_data, split_heldout

    _dirs = [Path("..") / x for x in str(manifest["data"].get("distill_dir", "")).split(",") if x]
    _every = re.search(r"% (\d+) ==", manifest["data"].get("heldout_rule", ""))
    if _dirs and _every and all(x.is_dir() for x in _dirs):
        _train, _held = split_heldout([e for x in _dirs for e in load_distillation_data(x)], int(_every.group(1)))
        if len(_train) == manifest["data"]["train_examples"]:  # the same split the training run made
            _n_train, _n_held = (sum(len(e.response_ids) for e in x) for x in (_train, _held))
            train_tokens_text = (f"{_n_train:,} response tokens; the {len(_held)} held-out prompts "
                                 f"({manifest['data']['heldout_rule']}) add {_n_held:,} more")  # fmt: skip
            train_token_rows = {"training response tokens": f"{_n_train:,}",
                                f"held-out prompts ({manifest['data']['heldout_rule']})":
                                    f"{len(_held)} ({_n_held:,} response tokens)"}  # fmt: skip
    if train_tokens_text is None:  # no data to split: the manifest's count covers every example, held-out included
        train_tokens_text = (f"{manifest['data']['response_tokens']:,} response tokens over all "
                             f"{manifest['data']['examples']} examples, the held-out ones included")  # fmt: skip
        train_token_rows = {"response tokens (all examples, held-out included)":
                            f"{manifest['data']['response_tokens']:,}"}  # fmt: skip
if manifest and d.vocab is not None:
    display(Markdown(
        f"LoRA rank {manifest['spec']['lora_rank']}, distilled on {manifest['data']['train_examples']} training "
        f"prompts ({train_tokens_text}); a drafting vocabulary of "
        f"{len(d.vocab)} of the target's {lm.model.config.vocab_size} tokens, so the draft's head costs "
        f"{len(d.vocab) / lm.model.config.vocab_size:.0%} of a full one."
    ))  # fmt: skip

# %% tags=["nbval-check-output"]
import pandas as pd

if manifest:  # the committed record of `python -m specdec_lab.train draft` (the same on every machine)
    training = manifest["training"]
    record = {
        "base layers": manifest["spec"]["base_layers"],
        "LoRA rank": manifest["spec"]["lora_rank"],
        "drafting vocabulary": manifest["spec"]["vocab_size"],
        "training prompts": manifest["data"]["train_examples"],
        **train_token_rows,
        "steps": training["steps_done"],
        "training minutes": round(training["wall_seconds"] / 60, 1),
        "final loss": training["final_loss"],
        "held-out greedy α (drafting vocabulary)": manifest["heldout"]["alpha_greedy_draft_vocab"],
        "held-out greedy α (full head)": manifest["heldout"]["alpha_greedy_full_vocab"],
        "α before training (tuned-lens init)": manifest["heldout_before_training"]["alpha_greedy_draft_vocab"],
    }
else:  # a layer-skip draft: the target's own first layers
    record = {"layers": f"the target's first {d.n_layers}", "trained": "nothing (training-free)"}
pd.Series(record, name=f"draft {d.name!r}" + (" (manifest.json)" if manifest else "")).to_frame()

# %% [markdown]
# ## 2. The draft live
#
# Greedy first: the output must equal plain autoregressive decoding token for token. Each bordered group
# is one target forward: green tokens were proposed by the draft and accepted, the blue one is the
# target's bonus token, struck-through red ones were proposed and rejected. In token labels ▁ is a space,
# ↵ a newline, ⇥ a tab, and · a byte of a character that the next token completes.

# %%
from specdec_lab import generate
from specdec_lab.io import load_prompts

prompts = {p.question_id: p for p in load_prompts()}
prompt = prompts[prompt_id].text
print(f"[{prompts[prompt_id].category}] {prompt[:300]}...")
ids = lm.chat_ids(prompt)
ar = generate(lm, ids, max_new_tokens=max_new_tokens)
sd = generate(lm, ids, method="draft", draft=draft, draft_length=4, max_new_tokens=max_new_tokens)

# %% tags=["nbval-check-output"]
assert sd.tokens == ar.tokens, "greedy speculative decoding must equal autoregressive decoding"
print(f"identical to autoregressive: {sd.tokens == ar.tokens}")
print(f"fewer target forwards than autoregressive: {sd.forwards < ar.forwards}")

# %%
from specdec_lab.viz.tokens import show_tokens

print(f"{sd.forwards} target forwards (autoregressive: {ar.forwards}); mean accepted {sd.mean_accepted:.2f} "
      "(τ: tokens per target forward, bonus included)")
show_tokens(sd, lm.tokenizer)

# %% [markdown]
# The first steps of the trace, one row per target forward. `proposed` is k, the tokens drafted; `accepted`, how
# many drafts the target kept (the bonus not counted, unlike "mean accepted" above); `emitted`, the tokens the step
# added, L = accepted + 1 (the bonus), whose mean over the decode is the "mean accepted" τ above; `text`, those
# tokens; `ms_propose`, `ms_verify`, `ms_accept`, the wall time of the three phases (the draft's forwards are
# the propose phase). Then what the draft reports about its choice (`Proposer.info`): `k`, the draft length it
# chose (fixed at 4 here, so always `proposed`); `alpha (before verify)`, its running estimate α̂ of its own
# acceptance rate as it stood when the step drafted — *before* the target verified this step's drafts, so a row's
# own acceptances enter only the next row's value — from which the cost rule (`draft_length="cost"`) would
# choose k; `probe`, `True` on a step where a cost rule that had backed off to k = 0 drafts anyway to measure α
# again (never with a fixed k); `fed`, how many positions the draft's first forward of the step processed — the
# tokens it had not seen yet. While drafting, the draft feeds each of its drafts to itself to draft the next,
# all but the last one: after a step that rejected a draft, the only unseen token is the bonus (`fed` = 1); after
# a step that accepted all k, the last draft x_k was never fed, so it comes with the bonus (`fed` = 2); more
# after a stretch without drafting. The sentence under the table counts which case this trace shows.

# %%
from specdec_lab.text import visible
from specdec_lab.viz.tokens import trace_table

trace_rows = trace_table(sd, lm.tokenizer).head(12).rename(columns={"alpha": "alpha (before verify)"})
if "text" in trace_rows:  # whitespace shown as in the token labels above: ▁ space, ↵ newline, ⇥ tab
    trace_rows["text"] = trace_rows["text"].map(lambda s: visible(s, partial=False))
display(trace_rows)
if "fed" in trace_rows and len(trace_rows) > 1:
    _fed, _all_in = trace_rows["fed"].iloc[1:], (trace_rows["accepted"] == trace_rows["proposed"]).shift(1).iloc[1:]
    _two, _one = int((_fed == 2).sum()), int((_fed == 1).sum())
    _after_full = int(((_fed == 2) & _all_in.astype(bool)).sum())
    _other = len(_fed) - _one - _two
    display(Markdown(
        f"In rows 1 to {len(trace_rows) - 1} (row 0 starts from the prompt), `fed` is 1 in {_one} and 2 in {_two}"
        + (f" (and another value in {_other})" if _other else "")
        + f"; {_after_full} of the {_two} rows with `fed` = 2 come right after a row that accepted all of its drafts "
        f"(rows 0 to {len(trace_rows) - 2} hold {int(_all_in.astype(bool).sum())} such rows)."
    ))  # fmt: skip

# %% [markdown]
# Under sampling (temperature and top-p applied identically to p and q) the draft samples its tokens and
# sends its full distributions q along; the target accepts x with probability min(1, p(x)/q(x)) — the rule of
# the picture:

# %%
sampled = generate(lm, ids, method="draft", draft=draft, draft_length=4, max_new_tokens=max_new_tokens,
                   temperature=temperature, top_p=top_p, seed=seed)  # fmt: skip
show_tokens(sampled, lm.tokenizer)

# %% [markdown]
# ## 3. α per draft position vs the theory
#
# Notebook 01 assumed every draft token is accepted independently with the same probability α. Here the
# draft always proposes k = `k_fixed` tokens on a few benchmark prompts (greedy), and we count, per
# position i, how often it was *reached* (all earlier drafts accepted) and *accepted*.

# %%
from specdec_lab.viz.acceptance import acceptance_by_position

position_ids = [q for q in sorted(prompts) if q % 7 == 6][:position_prompts]  # one per category
runs = [generate(lm, lm.chat_ids(prompts[q].text), method="draft", draft=draft, draft_length=k_fixed,
                 max_new_tokens=max_new_tokens) for q in position_ids]  # fmt: skip
stats = acceptance_by_position(runs, k_fixed)
alpha_hat = stats["accepted"].sum() / stats["reached"].sum()
steps = [s for r in runs for s in r.steps if s.proposed == k_fixed]

# %%
print(f"prompts {position_ids}: {int(stats['reached'][0])} steps ({len(steps)} full-length), α̂ over all of "
      f"them = {alpha_hat:.3f}")  # fmt: skip
pd.DataFrame({k: v for k, v in stats.items() if k != "position"}, index=pd.Index(stats["position"], name="position")).round(3)

# %%
from specdec_lab.viz.acceptance import position_figure
from specdec_lab.viz.figures import save_figure

fig = position_figure(stats, alpha_hat)
# the dashed line is the pooled measured rate: α̂ in this notebook (notebook 00's α is the probability Σ min(p, q))
fig.update_annotations(
    text=f"α̂ (pooled) = {alpha_hat:.3f}", selector=lambda a: (a.text or "").startswith("α (mean)")
)
print(f"saved {save_figure(fig, '02_alpha_per_position', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %%
from specdec_lab.cost.theory import accepted_length_pmf

observed = np.bincount([s.accepted for s in steps], minlength=k_fixed + 1) / max(len(steps), 1)
pd.DataFrame(
    {"measured": observed, "i.i.d. theory at α̂": accepted_length_pmf(alpha_hat, k_fixed)},
    index=pd.Index(range(k_fixed + 1), name="drafts accepted per step"),
).round(3)

# %%
from specdec_lab.cost.theory import expected_tokens_per_step

mean_tokens = np.mean([s.accepted + 1 for s in steps]) if steps else float("nan")  # τ of these steps
print(f"tokens per step over the {len(steps)} full-length steps (k = {k_fixed} drafted; shorter ones at the end of an "
      f"answer left out): measured τ = {mean_tokens:.2f}, theory E[L] = (1 − α̂^(k+1))/(1 − α̂) = "
      f"{expected_tokens_per_step(alpha_hat, k_fixed):.2f}")  # fmt: skip

# %% [markdown]
# Under the i.i.d. model the rate would be flat across positions and the histogram truncated-geometric.
# Real acceptance need not be: easy stretches (copying code or a name from the prompt, closing a block,
# boilerplate) can accept whole chains while hard ones reject the first token. Such burstiness would show
# as later positions (reached mostly in easy stretches) accepting more often than position 1, and as
# extra mass at 0 and at k in the histogram. What this run shows, read from the tables above:

# %%
from specdec_lab.lab.course import compare


def _rate(accepted: int, reached: int) -> tuple[float, float]:  # rate and its binomial standard error
    r = accepted / max(reached, 1)
    return r, (r * (1 - r) / max(reached, 1)) ** 0.5


def _tol(a: float, b: float, se: float) -> float:  # compare()'s rel_tol for "within two standard errors"
    return 2 * se / max(min(abs(a), abs(b)), 1e-12)  # the larger within 2 SE of the smaller


n_steps = max(len(steps), 1)
n_all_steps = int(stats["reached"][0])  # every step that drafted (position 1 is always reached), short ones included
(first, se_first), (later, se_later) = _rate(stats["accepted"][0], stats["reached"][0]), _rate(
    stats["accepted"][1:].sum(), stats["reached"][1:].sum()
)
se_pos = (se_first**2 + se_later**2) ** 0.5
iid = accepted_length_pmf(alpha_hat, k_fixed)
se_0, se_k = ((iid[j] * (1 - iid[j]) / n_steps) ** 0.5 for j in (0, -1))  # a share of n_steps under the i.i.d. law
se_tau = float(np.std([s.accepted + 1 for s in steps], ddof=1) / n_steps**0.5) if len(steps) > 1 else float("inf")
e_l = expected_tokens_per_step(alpha_hat, k_fixed)
Markdown(
    "Each comparison below counts as a difference only beyond two of its standard errors (given with it); inside "
    f"that it is within noise. The position rates and α̂ (so also E[L] at α̂) count all {n_all_steps} steps, each at "
    f"the positions it reached; the histogram and τ count the {len(steps)} full-length ones.\n\n"
    f"* Position 1 accepted {first:.2f} of the drafts that reached it, positions 2–{k_fixed} together {later:.2f} "
    f"({stats['reached'][1:].sum()} reached, standard error of the difference {se_pos:.2f}): "
    + compare(later, first, "later positions accepted **more** often than position 1 here",
              "later positions accepted **less** often than position 1 here",
              within="**within noise**, no order between them on this run", rel_tol=_tol(later, first, se_pos))
    + f".\n* Steps that accepted nothing: {observed[0]:.2f} measured against {iid[0]:.2f} under the i.i.d. law "
    f"(± {se_0:.2f}): "
    + compare(observed[0], iid[0], "**more** mass at 0", "**less** mass at 0", within="**within noise**",
              rel_tol=_tol(observed[0], iid[0], se_0))
    + f"; steps that accepted all {k_fixed}: {observed[-1]:.2f} against {iid[-1]:.2f} (± {se_k:.2f}): "
    + compare(observed[-1], iid[-1], "**more**", "**less**", within="**within noise**",
              rel_tol=_tol(observed[-1], iid[-1], se_k))
    + f".\n* Tokens per step: τ = {mean_tokens:.2f} ± {se_tau:.2f} measured, E[L] = {e_l:.2f} from the formula at α̂: "
    + compare(e_l, mean_tokens, "the formula runs **above** the measurement on this run",
              "the formula runs **below** the measurement on this run",
              within="**within noise** of each other on this run", rel_tol=_tol(e_l, mean_tokens, se_tau))
    + ".\n\n"
    "With few steps the later positions rest on a handful of drafts (mind the error bars in the figure), and "
    "the direction can change from run to run. Acceptance can vary along the text, which is why "
    "the draft length is chosen per step from a running estimate (`DraftLength(\"cost\")`) rather than once."
)  # fmt: skip

# %% [markdown]
# ## 4. α against temperature
#
# α is not a property of the draft alone: temperature T reshapes p and q alike, and Σ min(p, q) moves
# with it. At T = 0 both are one-hot and α is greedy agreement, 1[argmax q = argmax p] averaged over
# contexts; as T grows both flatten, overlapping where they were close and spreading mass where they
# were not; as T → ∞ p becomes uniform over the target's vocabulary and q over the drafting vocabulary,
# so α tends to their size ratio. Which way α moves in between is an empirical question for this draft.
#
# `python -m specdec_lab.lab.alpha_temperature` measures it on the first prompts of every category of the
# benchmark set, at a few temperatures from greedy (T = 0) to T = 1 (temperature only, no top-p), two ways:
#
# * **α_TV** (teacher-forced): at every position t of an answer sampled from the target at T, the exact
#   acceptance probability of one draft token, β_t = Σ min(p_T, q_T) = 1 − TV(p_T, q_T), averaged —
#   Leviathan et al.'s α = E[β]. The answer is the speculative run's own output, which *is* a sample
#   of the target at T (section 5), so these are the contexts decoding visits;
# * **α_run** (realised): accepted / reached in that speculative run (fixed k): a draft position
#   counts once all earlier drafts of its step were accepted (accepted / drafted would count drafts that
#   were never checked).
#
# The notebook reads the committed result; `rerun=True` measures it again here (minutes).
#
# **Predict, then run.** Before you run the next cells: as the sampling gets hotter (T from 0 towards 1), will
# this draft be accepted more often or less often? Write down your guess and why; the sentence under the figure
# says which way it went, or that this measurement cannot tell.

# %% tags=["nbval-check-output"]
import json
from pathlib import Path

from specdec_lab.lab.alpha_temperature import AlphaTemperatureConfig, measure

if rerun:
    config = AlphaTemperatureConfig(
        draft=draft, threads=torch.get_num_threads(), quiet=True, fresh=True,
        out="../results/02_alpha_temperature_quick.json" if quick else "../results/02_alpha_temperature.json",
        **({"temperatures": [0.0, 1.0], "per_category": 1, "max_new_tokens": 8, "prompts": "../data/prompts.jsonl"}
           if quick else {}),
    )  # fmt: skip
    alpha_t = measure(config, lm=lm)
else:
    alpha_t = json.loads(Path(alpha_file).read_text())
cfg_t = alpha_t["config"]
alpha_table = pd.DataFrame(alpha_t["summary"]).set_index("temperature")
print(f"{alpha_t['draft']} drafting for {alpha_t['target']['name']}: {alpha_table['prompts'].iloc[0]} prompts "
      f"({cfg_t['per_category']} per category), up to {cfg_t['max_new_tokens']} new tokens, k = {cfg_t['draft_length']}")  # fmt: skip
alpha_table[["positions", "alpha_tv", "alpha_tv_se", "reached", "alpha_run", "tokens_per_forward", "tokens_per_forward_iid"]]

# %% tags=["prediction"]
from specdec_lab.viz.acceptance import alpha_temperature_figure

fig = alpha_temperature_figure(alpha_t["summary"])
print(f"saved {save_figure(fig, '02_alpha_temperature', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %% tags=["prediction"]
tv, tv_se, run = alpha_table["alpha_tv"], alpha_table["alpha_tv_se"], alpha_table["alpha_run"]
run_se = (run * (1 - run) / alpha_table["reached"].clip(lower=1)) ** 0.5  # binomial: every draft independent
t_cold, t_hot = tv.index[0], tv.index[-1]
se_tv_ends = float(np.hypot(tv_se.iloc[0], tv_se.iloc[-1]))
se_run_ends = float(np.hypot(run_se.iloc[0], run_se.iloc[-1]))
gap = (run - tv).abs().max()
worst_iid = (alpha_table["tokens_per_forward_iid"] - alpha_table["tokens_per_forward"]).abs().max()
limit = (len(d.vocab) if d.vocab is not None else lm.model.config.vocab_size) / lm.model.config.vocab_size
heldout = manifest.get("heldout", {}).get("alpha_greedy_draft_vocab") if manifest else None
# the section's verdict, for the takeaways: does α_TV move with T beyond two standard errors, and which way
alpha_t_verdict = compare(
    tv.iloc[-1], tv.iloc[0],
    "on this draft α_TV rose from T = {t0:g} to T = {t1:g}, beyond two standard errors (section 4)",
    "on this draft α_TV fell from T = {t0:g} to T = {t1:g}, beyond two standard errors (section 4)",
    within="whether the temperature moves it on this draft, section 4's measurement cannot tell: α_TV at T = {t0:g} "
    "and T = {t1:g} is within noise (two standard errors over the prompts)",
    rel_tol=2 * se_tv_ends / min(tv.iloc[0], tv.iloc[-1]), t0=t_cold, t1=t_hot)  # fmt: skip
Markdown(
    f"From T = {t_cold:g} to T = {t_hot:g}, α_TV goes from {tv.iloc[0]:.3f} ± {tv_se.iloc[0]:.3f} to "
    f"{tv.iloc[-1]:.3f} ± {tv_se.iloc[-1]:.3f} (standard errors over the prompts): "
    + compare(tv.iloc[-1], tv.iloc[0],
              "by this measure the draft is accepted **more** often at T = {t1:g} than at T = {t0:g}, beyond two "
              "standard errors (the two ends only: the temperatures between are not ranked)",
              "by this measure the draft is accepted **less** often at T = {t1:g} than at T = {t0:g}, beyond two "
              "standard errors (the two ends only: the temperatures between are not ranked)",
              within="a difference **within noise** (under two standard errors), so α_TV alone does not say which "
              "way it goes", rel_tol=2 * se_tv_ends / min(tv.iloc[0], tv.iloc[-1]), t0=t_cold, t1=t_hot)
    + f". The realised rate α_run goes from {run.iloc[0]:.3f} ± {run_se.iloc[0]:.3f} to {run.iloc[-1]:.3f} ± "
    f"{run_se.iloc[-1]:.3f} (binomial standard errors, which treat every draft as independent and so understate the "
    "spread from prompt to prompt; judged here on the larger of those and α_TV's errors between prompts): "
    + compare(run.iloc[-1], run.iloc[0], "**higher** at T = {t1:g} than at T = {t0:g}, beyond two standard errors",
              "**lower** at T = {t1:g} than at T = {t0:g}, beyond two standard errors",
              within="**within noise** as well",
              rel_tol=2 * max(se_run_ends, se_tv_ends) / min(run.iloc[0], run.iloc[-1]), t0=t_cold, t1=t_hot)
    + f". (The T → ∞ limit, the drafting vocabulary's share of the target's, is about {limit:.2f}.) "
    f"α_run differs from α_TV by at most {gap:.3f} at any temperature, and the i.i.d. formula at "
    f"α_run gives tokens per forward within {worst_iid:.2f} of the measured ones. "
    + (f"At T = 0, α_TV is the quantity training reports as held-out greedy α ({heldout:.3f} in the record of "
       "section 1, measured on held-out training-style prompts rather than these). " if heldout and t_cold == 0 else "")
    + "What α buys in speed depends on k and on the machine's cost curve: section 6, and notebook 01, section 4."
)  # fmt: skip

# %% [markdown]
# ## 5. Losslessness: the next-token distribution is the target's
#
# The picture's argument, tested on the real model. At the picture's position, run many independent
# speculative steps (the draft samples x ~ q, the library's rule `accept_speculative` accepts or resamples from
# the residual) and histogram the first emitted token. The exact answer is p(· | context) after the same
# temperature/top-p. Model outputs are memoized per prefix (`losslessness.LogitsTable`); each episode calls the
# real rule on a real tree. A broken rule — the right acceptance test, but a rejection resampled from p instead
# of the residual (`accept_resample_from_p`) — runs beside it.

# %%
from specdec_lab.accept.losslessness import accept_resample_from_p, chi_square, exact_joint, simulate_emitted

target_table.prefetch([(t,) for t in np.flatnonzero(q0).tolist()])  # p after every possible draft token
p_exact = exact_joint(target_table, sampling, n=1)
counts = simulate_emitted(target_table, draft_table, sampling, k=1, trials=hist_trials, n=1, seed=seed)
broken = simulate_emitted(target_table, draft_table, sampling, k=1, trials=hist_trials, n=1, seed=seed,
                          rule=accept_resample_from_p)  # fmt: skip
good, bad = chi_square(counts, p_exact), chi_square(broken, p_exact)

# %% tags=["nbval-check-output"]
print(f"α at this context = Σ min(p, q) = {np.minimum(p_exact, q0).sum():.2f}")
print(f"speculative sampling vs p: consistent at false-alarm rate 1e-3: {good['p_value'] > 1e-3}")
print(f"broken rule (rejection resamples from p) vs p: consistent: {bad['p_value'] > 1e-3}")

# %%
print(f"chi-square: exact rule stat {good['stat']:.1f} on {good['dof']} dof, p-value {good['p_value']:.3g}; "
      f"broken rule stat {bad['stat']:.1f}, p-value {bad['p_value']:.3g}")  # fmt: skip
from specdec_lab.viz.acceptance import histogram_figure

labels = vocabulary_labels(lm.tokenizer, np.argsort(-p_exact)[:12])  # {id: text (id)}: single vocabulary entries
fig = histogram_figure(counts, p_exact, labels, top=12)
for trace in fig.data:  # name the error bars in the legend: ±2 binomial SE of a frequency whose truth is p
    if trace.error_y.array is not None:
        trace.name += ", bars ±2 binomial SE at p"
print(f"saved {save_figure(fig, '02_losslessness', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %% [markdown]
# `tests/test_speculative.py` runs the same test, with trial counts of its own, on a tiny model with context-
# dependent distributions (first *two* emitted tokens, temperature, top-k, top-p, greedy and sampled
# drafts), and checks that two broken rules fail it.

# %% [markdown]
# ## 6. Speed
#
# The same harness as `python -m specdec_lab.bench` (every method timed from outside, order rotated per
# prompt, greedy): autoregressive decoding, our `draft` method, and transformers' assisted generation
# (`hf_assisted`) with the *same* draft weights exported as a standalone full-vocabulary HF model.
# A few prompts here; the full table on the benchmark prompts is recorded next to the draft (below it).

# %%
import logging

from specdec_lab.bench import run_benchmark
from specdec_lab.cost.noise import measure_cost_curve_with_noise


class _AssistantConfigWarning(logging.Filter):
    """Drop one transformers message, nothing else: inside `generate(assistant_model=...)`, transformers' own
    candidate generator calls the assistant's `generate()` with a generation_config *and* max/min_new_tokens,
    then warns that this combination is deprecated. Nothing this notebook passes can avoid it, and in the stored
    outputs its red stderr box reads like an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Passing `generation_config` together with generation-related")


logging.getLogger("transformers.generation.utils").addFilter(_AssistantConfigWarning())
bench = run_benchmark(lm, load_prompts("../data/prompts.jsonl")[::19][:bench_prompts],
                      methods="autoregressive,draft,hf_assisted", max_new_tokens=bench_tokens, progress=False)  # fmt: skip
# one timed run per method and prompt: check the machine was quiet (a short cost curve, repeats kept)
_, bench_noise = measure_cost_curve_with_noise(lm.model, sizes=[1, k_fixed + 1], repeats=5)
# one reading of the timings for the whole notebook (section 6's sentences and the takeaways use it too): "noisy"
# past the warning threshold by more than a tenth of it, "rough" within a tenth of it either side, else "quiet"
timings = compare(bench_noise.spread, bench_noise.threshold, "noisy", "quiet", within="rough", rel_tol=0.1)
display(Markdown({
    "noisy": "> ⚠️ **The speedups below are rough: the repeats of a short cost curve, timed just after the benchmark, "
             "spread by {a:.1%} (IQR / median), above the {b:.0%} at which this notebook warns — the CPU was probably "
             "busy. Rerun on a quiet machine before trusting them.**",
    "quiet": "*The machine looked quiet: the repeats of a short cost curve, timed just after the benchmark, spread by "
             "{a:.1%} (IQR / median), under the {b:.0%} at which this notebook warns.*",
    "rough": "*The repeats of a short cost curve, timed just after the benchmark, spread by {a:.1%} (IQR / median), "
             "close to the {b:.0%} at which this notebook warns: read the speedups below as rough.*",
}[timings].format(a=bench_noise.spread, b=bench_noise.threshold)))  # fmt: skip
COLUMNS = ["prompts", "new_tokens", "tokens_per_s", "mean_accepted", "speedup", "identical_to_autoregressive"]
DIGITS = {"tokens_per_s": 1, "mean_accepted": 2, "speedup": 2, "identical_to_autoregressive": 2}


def summary_table(summary: dict) -> pd.DataFrame:
    """The harness's per-method summary, rounded for reading."""
    return pd.DataFrame(summary).T[COLUMNS].infer_objects().round(DIGITS)


summary_table(bench["summary"])

# %%
recorded = Path("../data/draft/smollm2-135m-2l/bench.json")
if draft == "default" and recorded.is_file():
    full = json.loads(recorded.read_text())
    print(f"recorded: {full['config']['max_new_tokens']} new tokens, {full['prompts_done']} prompts, {full['machine'].get('cpu', '')}")
    display(summary_table(full["summary"]))

# %% [markdown]
# Predicted from the parts: the measured α̂, the measured draft step time and the target's measured cost
# curve t(n), with `theory.measured_speedup` (notebook 01, section 4). The range of predictions that the sentence
# under the tables gives prices the uncertainty of α (each measurement ∓ two standard errors) and two readings of
# the curve, not the timings' own noise, which the sentence states separately and which comes on top of the range:
# where it finds k = 0 (plain decoding, no speed-up) within that noise of the best k, this run cannot tell whether drafting
# pays at all, whatever the range says.

# %%
from specdec_lab.cost import cost_curve_for
from specdec_lab.cost.theory import measured_speedup

curve = cost_curve_for(lm.model, max_tokens=k_fixed + 1)
t_draft = d.step_seconds or 0.0
rows = [{"k": k, "predicted speedup": round(measured_speedup(alpha_hat, k, curve(1), t_draft, curve), 2),
         "measured t(k + 1), ms": round(curve(k + 1) * 1e3, 1)} for k in range(0, k_fixed + 1)]  # fmt: skip
print(f"T_target = {curve(1) * 1e3:.1f} ms, T_draft = {t_draft * 1e3:.1f} ms (c = {t_draft / curve(1):.3f})")
pd.DataFrame(rows).set_index("k").T

# %%
from specdec_lab.lab.course import within_tol

best = max(rows, key=lambda r: r["predicted speedup"])
live = bench["summary"]["draft"]["speedup"]


def curve_floor(n: int) -> float:
    """t(n) held at no less than the measured t of fewer tokens: the reading in which every dip is noise."""
    return max(curve(m) for m in range(1, n + 1))


# the timings' spread: the repeats' IQR / median, measured just after the benchmark. A dip along the curve (a t(n)
# under the t of fewer tokens) may be noise or load, or a faster kernel path at that size: this run cannot tell
# which, so the prediction is priced on both readings of the curve, as measured and floored.
timing_spread = bench_noise.spread
# a dip compares two timings, each spread by about timing_spread: their ratio spreads by about √2 times that, so a
# dip counts as beyond the noise only past √2 · spread (a dip a hair past one spread is no evidence of anything)
dip_noise = float(np.sqrt(2) * timing_spread)
# that spread is an IQR of a few repeats at two sizes, itself a rough estimate (from 5 normal repeats, the IQR
# comes out under half the true one about a third of the time): a difference up to twice √2 · spread is at the
# edge of the noise, and only one past that is read as beyond it
noise_edge = 2 * dip_noise


def noise_reading(gap: float) -> str:
    """How a relative gap between two timings (the larger / the smaller − 1) reads against the noise: "within" it,
    "at the edge of" it, or "beyond the edge of" it."""
    return "within" if gap <= dip_noise else "at the edge of" if gap <= noise_edge else "beyond the edge of"


noise_yardstick = (f"√2 × the repeats' spread, {dip_noise:.1%}, the spread of a ratio of two timings; that spread "
                   f"comes from only {bench_noise.repeats} repeats at two sizes, so up to twice it, {noise_edge:.1%}, "
                   "is the edge of the noise")  # fmt: skip
# the ks whose prediction is within the timings' noise of the best one's: two ks' predictions differ by a ratio of
# two measured timings (t(1) cancels), whose noise is dip_noise, so the best k is then one of a tie, said so
near_best = [r["k"] for r in rows
             if r["k"] != best["k"] and within_tol(r["predicted speedup"], best["predicted speedup"], dip_noise)]  # fmt: skip
curve_dip = max([curve(m) / curve(n) - 1 for n in range(2, k_fixed + 2) for m in range(1, n)] + [0.0])


def best_prediction(alpha: float, cost=curve) -> float:
    """The best fixed-k prediction of the parts at acceptance rate `alpha` (clipped to [0, 1]), on the cost curve
    `cost` (the measured one, or `curve_floor`)."""
    a = min(max(alpha, 0.0), 1.0)
    return max(measured_speedup(a, k, curve(1), t_draft, cost) for k in range(k_fixed + 1))


def prediction_range(alpha: float, se: float) -> tuple[float, float]:
    """The best prediction at alpha ∓ 2 SE, over both readings of the curve (as measured, and floored)."""
    return (min(best_prediction(alpha - 2 * se, c) for c in (curve, curve_floor)),
            max(best_prediction(alpha + 2 * se, c) for c in (curve, curve_floor)))  # fmt: skip


# every greedy α this notebook measured for the draft, each with a standard error: section 3's α̂ rests on few
# prompts, so the larger measurements of sections 1 and 4 stand beside it (binomial errors treat every draft as
# independent and understate the spread from prompt to prompt; section 4's α_TV error is between prompts)
n_reached = int(stats["reached"].sum())
alpha_se = float(np.sqrt(alpha_hat * (1 - alpha_hat) / max(n_reached, 1)))
alpha_sources = [(f"α̂, section 3 ({len(runs)} prompts, {n_reached} reached drafts; binomial SE)", float(alpha_hat), alpha_se)]
if t_cold == 0:
    alpha_sources += [
        (f"α_TV at T = 0, section 4 ({int(alpha_table['prompts'].iloc[0])} prompts; SE between prompts)",
         float(tv.iloc[0]), float(tv_se.iloc[0])),
        (f"α_run at T = 0, section 4 ({int(alpha_table['reached'].iloc[0])} reached drafts; binomial SE)",
         float(run.iloc[0]), float(run_se.iloc[0])),
    ]  # fmt: skip
if heldout and manifest.get("heldout", {}).get("positions"):
    _n_held_pos = int(manifest["heldout"]["positions"])
    alpha_sources.append((f"held-out greedy α, section 1 ({_n_held_pos:,} positions; binomial SE)", float(heldout),
                          float(np.sqrt(heldout * (1 - heldout) / _n_held_pos))))  # fmt: skip
alpha_rows = pd.DataFrame(
    [{"measurement": name, "α": a, "± SE": se, "best prediction at α": best_prediction(a),
      "at α ∓ 2 SE": "{:.2f}× to {:.2f}×".format(*prediction_range(a, se))}
     for name, a, se in alpha_sources]
).set_index("measurement").round({"α": 3, "± SE": 3, "best prediction at α": 2})  # fmt: skip
display(alpha_rows)
pred_lo = min(prediction_range(a, se)[0] for _, a, se in alpha_sources)
pred_hi = max(prediction_range(a, se)[1] for _, a, se in alpha_sources)
pred_mid, pred_half = (pred_lo + pred_hi) / 2, (pred_hi - pred_lo) / 2
# where the live speed-up lies against the predicted range: inside it; or outside, by less than the timings' spread
# (read as compare reads "within": the larger at most (1 + spread)× the smaller) — no order; or beyond that
if pred_lo <= live <= pred_hi:
    live_side = "inside"
elif live < pred_lo:
    live_side = "below, within spread" if live * (1 + timing_spread) >= pred_lo else "below"
else:
    live_side = "above, within spread" if pred_hi * (1 + timing_spread) >= live else "above"
alpha_lo, alpha_hi = min(a for _, a, _ in alpha_sources), max(a for _, a, _ in alpha_sources)
# the section's verdict, for the takeaways
speed_verdict = (
    "this run's timings were flagged as noisy, so it does not test the prediction against the benchmark"
    if timings == "noisy" else
    {"above": f"the live benchmark ({live:.2f}×) measured **more** than the whole range the parts predict "
              f"({pred_lo:.2f}× to {pred_hi:.2f}×), beyond the timings' spread, so here the parts do not forecast "
              "the speed",
     "below": f"the live benchmark ({live:.2f}×) measured **less** than the whole range the parts predict "
              f"({pred_lo:.2f}× to {pred_hi:.2f}×), beyond the timings' spread, so here the parts (one α, no loop "
              "overhead) overestimate the speed",
     "inside": f"the live benchmark ({live:.2f}×) lies within the range the parts predict ({pred_lo:.2f}× to "
               f"{pred_hi:.2f}×)"}.get(live_side,
    f"the live benchmark ({live:.2f}×) lies {live_side.split(',')[0]} the range the parts predict ({pred_lo:.2f}× "
    f"to {pred_hi:.2f}×), by less than the timings' spread, so this run cannot tell it from the prediction")
)  # fmt: skip
Markdown(
    f"At section 3's α̂ = {alpha_hat:.3f} the parts predict at most {best['predicted speedup']:.2f}× (at k = "
    f"{best['k']}"
    + (f"; k = {', '.join(map(str, near_best))} predict{'s' if len(near_best) == 1 else ''} within the timings' "
       f"noise of it, {dip_noise:.1%} (two ks' predictions differ by a ratio of two measured timings), so this run "
       "does not single out a best k" if near_best else
       f"; every other k predicts less, by more than the timings' noise, {dip_noise:.1%}")
    + f"); the live benchmark above measured {live:.2f}× for `draft`. But α̂ rests on {len(runs)} prompts, "
    f"and the table's measurements of the same draft under greedy decoding run from {alpha_lo:.3f} to "
    f"{alpha_hi:.3f}: over all of them, each ∓ two standard errors, the parts predict {pred_lo:.2f}× to "
    f"{pred_hi:.2f}× (pricing t(n) both as measured and held at no less than the measured t of fewer tokens"
    + ("; the measured curve has no dip, so the two agree" if curve_dip == 0 else
       f": the curve's largest dip, {curve_dip:.1%}, is within the noise ({noise_yardstick}), so this run cannot "
       "tell it from noise"
       if noise_reading(curve_dip) == "within" else
       f": the curve's largest dip, {curve_dip:.1%}, is {noise_reading(curve_dip)} the noise ({noise_yardstick}); "
       "whether a dip is a faster kernel path at that size or load that came and went between sizes (noise wider "
       "than the repeats caught), this run does not show, see below")
    + f"). The timings' spread is the repeats' above ({timing_spread:.1%}, IQR / median). "
    + (f"The timings were flagged as noisy above (spread {bench_noise.spread:.0%}), so **no comparison** between the "
       "live speedup and the prediction can be drawn from this run."
       if timings == "noisy" else
       {"above": f"The live speedup is **above** that whole range, beyond the timings' spread ({timing_spread:.1%})",
        "below": f"The live speedup is **below** that whole range, beyond the timings' spread ({timing_spread:.1%})",
        "inside": "The live speedup lies **within** that range: this run cannot tell it from the prediction, "
                  "because the prediction is no sharper than the α it is given"}.get(
           live_side, f"The live speedup lies **{live_side.split(',')[0]}** that range, but by less than the "
           f"timings' spread ({timing_spread:.1%}): this run cannot tell it from the prediction") + ".")
    # why the two could differ: only where this run finds them apart
    + (" Where they differ, mind that the prediction assumes i.i.d. acceptance at one α measured on other prompts "
       "(the benchmark's own prompts are few, and α varies from prompt to prompt) and leaves out the loop's own "
       "overhead; the benchmark's draft also chooses k per step rather than using the best fixed one."
       if timings != "noisy" and live_side in ("above", "below") else "")
)  # fmt: skip

# %%
# The best k's premise: verifying k + 1 tokens costs t(k + 1). A measured t(k + 1) against t(1), and every dip along
# the curve, is read against the noise of section 6's repeats (`noise_reading`): within it, at its edge, or beyond.
n_verify = best["k"] + 1
t_one, t_best = curve(1), curve(n_verify)
rows_floor = [measured_speedup(alpha_hat, k, t_one, t_draft, curve_floor) for k in range(k_fixed + 1)]
k_floor = int(np.argmax(rows_floor))
floor_note = (
    f" With every t(n) held at no less than the measured t of fewer tokens (the range above's other reading), the parts "
    f"predict at most {rows_floor[k_floor]:.2f}× (at k = {k_floor}) instead."
    if t_best < t_one
    else ""
)
# the same premise along the whole curve: wherever the measured t(n + 1) is under t(n), each dip is judged against
# the noise (the case t(k + 1) against t(1) of the best k is the sentence's own, below)
dips = [(n, curve(n), curve(n + 1)) for n in range(1, k_fixed + 1)
        if curve(n + 1) < curve(n) and not (n == 1 and n_verify == 2)]  # fmt: skip
noisy_dips = [(n, a, b) for n, a, b in dips if noise_reading(a / b - 1) != "within"]
curve_note = "" if not dips else (
    " Along the table's curve, the measured "
    + "; ".join(f"t({n + 1}) = {b * 1e3:.1f} ms is under t({n}) = {a * 1e3:.1f} ms (a dip of {a / b - 1:.1%}: "
                f"{noise_reading(a / b - 1)} the noise)" for n, a, b in dips)
    + f"; the noise is {dip_noise:.1%} and its edge {noise_edge:.1%}, as above. "
    + ("Whether a dip past the noise is a faster kernel path at that size or load that came and went between sizes "
       "(noise wider than the repeats caught), this run does not show; either way the predicted speedups of "
       "neighbouring k rest on the curve's dips, which is why the range above also prices the curve floored."
       if noisy_dips else
       f"So this run cannot tell {'it' if len(dips) == 1 else 'them'} from timing noise, and the predicted speedups "
       "of neighbouring k are no sharper than the curve.")
)  # fmt: skip
verify_gap = max(t_best, t_one) / min(t_best, t_one) - 1
verify_edge = noise_reading(verify_gap) == "at the edge of"
Markdown(
    ("The best k needs no cost-curve premise: k = 0 is plain decoding." + curve_note)
    if best["k"] == 0 else
    f"That maximum at k = {best['k']}"
    + (" (one of a tie within the timings' noise, above)" if near_best else "")
    + f" prices verifying {n_verify} tokens at the measured t({n_verify}) = "
    f"{t_best * 1e3:.1f} ms against t(1) = {t_one * 1e3:.1f} ms ({verify_gap:.1%} apart): "
    + compare(t_best, t_one,
              "verifying them measured dearer than one token, but only at the edge of the noise ({noise}): this run "
              "barely resolves the verify cost the prediction rests on."
              if verify_edge else
              "verifying them costs more than one token, beyond the edge of the noise ({noise}).",
              "verifying them measured cheaper than one token, but only at the edge of the noise ({noise}): this run "
              "cannot call it a real effect; the prediction inherits it."
              if verify_edge else
              "verifying them measured **cheaper** than one token, beyond the edge of the noise ({noise}): whether "
              "a faster kernel path at that size or load the repeats missed, this run does not show; the prediction "
              "inherits it.",
              within="the two are **within noise** of each other (the noise is {noise}), so this run "
              "cannot tell verifying {n} tokens from verifying one; "
              + ("the measured t({n}) below t(1) is within that noise, and the prediction inherits it."
                 if t_best < t_one else "the prediction rests on a verify cost this run does not resolve."),
              rel_tol=dip_noise, noise=noise_yardstick, n=n_verify)
    + floor_note
    + curve_note
)  # fmt: skip

# %% [markdown]
# ## 7. Dashboard
#
# The plain cell runs the default; the controls call the same function (`lab.draft.run_draft_demo`)
# and redraw under them on every change (a static snapshot of the default view stands there until then).

# %%
from specdec_lab.lab.draft import run_draft_demo

demo_tokens = 32  # tokens per dashboard run: short, so a change redraws in seconds
html, numbers = run_draft_demo(lm, prompts[prompt_id].text, draft=draft, max_new_tokens=demo_tokens)
print(numbers)

# %% tags=["nbval-skip"]
import ipywidgets as w

from specdec_lab.lab.widgets import Dashboard


def _demo(question_id: int, temperature: float, draft_length: str):
    k = int(draft_length) if draft_length.isdigit() else draft_length
    return run_draft_demo(lm, prompts[question_id].text, draft=draft, temperature=temperature,
                          top_p=top_p if temperature > 0 else None, draft_length=k, max_new_tokens=demo_tokens)  # fmt: skip


Dashboard(
    {
        "question_id": w.Dropdown(options=sorted(prompts), value=prompt_id, description="prompt"),
        "temperature": w.FloatSlider(value=0.0, min=0.0, max=1.5, step=0.1, description="temperature",
                                     continuous_update=False),
        "draft_length": w.Dropdown(options=["cost", "heuristic", "2", "4", "6", "8"], value="4", description="k"),
    },
    _demo,
    header="<b>Change a control</b> to decode again with the draft (greedy at temperature 0).",
    initial=(html, numbers),
    what=f"prompt {prompt_id}, temperature 0, k = 4",
)  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. In the picture, a token has q(x) > p(x). Can a rejection ever emit it? How often is it emitted in all?
#
#    <details><summary>Answer</summary>
#
#    A rejection never emits it: the residual max(p − q, 0) is zero there. It is emitted only when drafted and
#    accepted, with probability q(x) · p(x)/q(x) = p(x) — exactly the target's probability.
#
#    </details>
#
# 2. What does the rule become under greedy decoding (T = 0), with a greedy draft?
#
#    <details><summary>Answer</summary>
#
#    p and q are one-hot at their argmaxes. A draft equal to the target's argmax has p(x)/q(x) = 1 and is always
#    accepted; any other has p(x) = 0 and is always rejected, and the residual max(p − q, 0) is one-hot at the
#    target's argmax, so the bonus is the target's own greedy token: the rule is `accept_greedy`, and the output
#    equals greedy decoding token for token (section 2).
#
#    </details>
#
# 3. Section 3 tests whether acceptance depends on the draft position. Suppose it did — on this run or on
#    another — or varied along the text. Would that threaten the exactness that section 5 tests?
#
#    <details><summary>Answer</summary>
#
#    No. The argument of the picture holds at every position for whatever p and q are there; nothing in it
#    assumes the same α everywhere. Acceptance that varied would change how many tokens a step emits — the speed,
#    and how well notebook 01's i.i.d. formula predicts E[L] — never the distribution of what is emitted.
#
#    </details>

# %% [markdown]
# ## Exercises
#
# Each exercise is a stub to fill in (`...`), a worked solution (removed from student copies) and a check
# against the library, which prints ✓ or says what is wrong. Exercises 1 and 2 are functions of p and q, which
# their checks run on the picture's position (`p0` and `q0`, numpy arrays over the vocabulary) and on pairs of their
# own. Exercise 3 needs no model: its check decodes with toy ones.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — the residual, by hand
#
# Write `my_residual(p, q)`: the residual norm(max(p − q, 0)) of two float64 torch tensors of shape (V,), as a
# float64 tensor of shape (V,). The check runs it on the picture's `p0`, `q0` and on two small pairs of its own
# (one with tokens only p has, only q has, and neither), against the residual the library's tree rules sample from,
# `specdec_lab.accept.tree_rules.residual(p, q, x)` (with q given, x is not used). The picture section ("The rule
# in one picture") called that function, and the check refuses a `my_residual` that runs it, however your code
# reaches it (an import, an alias): clip and normalise yourself.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch

_watch = watch(globals(), "residual")  # the reference: not for the answer


def my_residual(p, q):
    """(V,) float64: norm(max(p − q, 0))."""
    ...


# %% tags=["solution", "exercise-1"]
def my_residual(p, q):  # noqa: F811 - replaces the stub above
    """(V,) float64: norm(max(p − q, 0))."""
    excess = (p - q).clamp(min=0.0)  # its sum is 1 − α
    return excess / excess.sum()


# %% tags=["check", "exercise-1", "nbval-check-output"]
from specdec_lab.accept.tree_rules import residual as _residual_ref
from specdec_lab.lab.chain_exercise import guarded as _guarded
from specdec_lab.lab.course import ExerciseError, check, is_stub

_watch.begin_check()  # from here the references are the check's own
residual_pairs = [  # (p, q): the picture's position, then two small pairs of the check's own
    (torch.from_numpy(p0), torch.from_numpy(q0)),
    (torch.tensor([0.10, 0.40, 0.20, 0.30, 0.00, 0.00], dtype=torch.float64),
     torch.tensor([0.25, 0.25, 0.20, 0.00, 0.30, 0.00], dtype=torch.float64)),
    (torch.tensor([0.05, 0.15, 0.60, 0.20], dtype=torch.float64),
     torch.tensor([0.50, 0.10, 0.30, 0.10], dtype=torch.float64)),
]  # fmt: skip
# the library's residual, recorded however your code reaches it (an import, an alias)
_my_residual, residual_ran = _guarded(my_residual, lambda code: code is _residual_ref.__code__)
residual_rows = [_my_residual(p, q) for p, q in residual_pairs]
if residual_ran and not any(is_stub(r) for r in residual_rows):
    raise ExerciseError("the residual: your `my_residual` ran the library's `residual`, what the check compares "
                        "with: clip p − q at zero and normalise it yourself")  # fmt: skip
answer = (None if any(is_stub(r) for r in residual_rows) else
          torch.cat([torch.as_tensor(r, dtype=torch.float64).flatten() for r in residual_rows]))  # fmt: skip
_ = check("the residual, at the picture's position and on two pairs of the check's own", answer,
          torch.cat([_watch["residual"](p, q, 0) for p, q in residual_pairs]), watch=_watch,
          close=lambda a, r: a.shape == r.shape and bool(torch.allclose(a, r, rtol=1e-9, atol=1e-12)),
          hint="Clip p − q at zero, then divide by its sum (which is 1 − α).")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — the two ways a token is emitted
#
# Without sampling anything, split the probability that one step of the rule emits the token x first into its two
# branches: **row 0**, the draft proposed x and the target accepted it, q(x)·min(1, p(x)/q(x)); **row 1**, the
# draft was rejected (probability 1 − α) and x was drawn from the residual norm(max(p − q, 0)). Write
# `branches(p, q)` for float64 tensors of shape (V,) returning a (2, V) tensor; mind the tokens where q(x) = 0
# (the draft never proposes them: row 0 is 0 there, not NaN). The check runs it on the picture's `p0`, `q0` and on
# a small pair of its own that has such tokens, against the library's `specdec_lab.lab.chain_exercise.branch_reference`
# (built from `cost.theory.acceptance_rate` and `accept.tree_rules.residual`; the check refuses a `branches` that
# runs any of the three, however it reaches them: Exercise 1 built the residual by hand); then it adds your two rows, which must give p — the picture's
# argument, token by token.

# %% tags=["exercise", "exercise-2"]
from specdec_lab.lab.course import watch

_watch = watch(globals(), "residual")  # the reference's residual: not for the answer


def branches(p, q):
    """(2, V): row 0 = P(x drafted and accepted), row 1 = P(draft rejected, then x drawn from the residual)."""
    ...


# %% tags=["solution", "exercise-2"]
def branches(p, q):  # noqa: F811 - replaces the stub above
    """(2, V): row 0 = P(x drafted and accepted), row 1 = P(draft rejected, then x drawn from the residual)."""
    kept = torch.minimum(p, q)  # q·min(1, p/q) = min(p, q), also where q = 0
    excess = (p - q).clamp(min=0)  # its sum is 1 − α
    return torch.stack([kept, (1 - kept.sum()) * excess / excess.sum()])


# %% tags=["check", "exercise-2", "nbval-check-output"]
from specdec_lab.lab import chain_exercise as _chain  # the reference, under a name the answer does not reach for
from specdec_lab.lab.course import ExerciseError, is_stub

_watch.begin_check()  # from here the check's own references: `_watch[name]`
branch_pairs = [  # (p, q): the picture's position, then a small pair: a token only p has, one only q has, one neither
    (torch.from_numpy(p0), torch.from_numpy(q0)),
    (torch.tensor([0.45, 0.30, 0.25, 0.00, 0.00], dtype=torch.float64),
     torch.tensor([0.20, 0.50, 0.00, 0.30, 0.00], dtype=torch.float64)),
]  # fmt: skip
# the reference and what it is built from, recorded however your code reaches them (an import, an alias)
_branches, branch_ran = _chain.guarded(branches, _chain.is_branch_reference)
branch_rows = [_branches(p, q) for p, q in branch_pairs]
if branch_ran and not any(is_stub(r) for r in branch_rows):
    raise ExerciseError(f"the two branches: your `branches` ran {', '.join(sorted(set(branch_ran)))}, what the "
                        "check compares with: build both rows from p and q yourself")  # fmt: skip
answer = None if any(is_stub(r) for r in branch_rows) else torch.cat([torch.as_tensor(r, dtype=torch.float64).flatten() for r in branch_rows])
_ = check("the two branches, at the picture's position and on a small pair", answer,
          torch.cat([_chain.branch_reference(p, q).flatten() for p, q in branch_pairs]), watch=_watch,
          close=lambda a, r: a.shape == r.shape and bool(torch.allclose(a, r, rtol=1e-4, atol=1e-10)),
          hint="Row 0: min(p, q) (0 where q = 0, not NaN). Row 1: the rejected mass 1 − α times the normalised "
               "residual max(p − q, 0), not times p.")  # fmt: skip
branch_gap = float((torch.as_tensor(branch_rows[0], dtype=torch.float64).sum(0) - branch_pairs[0][0]).abs().max())
if not branch_gap < 1e-6:
    raise ExerciseError("row 0 + row 1 must give p at every token of the picture's position: the two ways of "
                        "emitting x cover all of p(x)")  # fmt: skip
print(f"✓ row 0 + row 1 = p at the picture's position, to within 1e-6 (rounding) at each of its {len(p0)} tokens: "
      "agrees")

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — the acceptance rule for a chain, checked exactly
#
# Write `my_accept(tree, logits, sampling, coins, **_)`: speculative sampling along a chain, as
# `specdec_lab.accept.accept_speculative` does it. Node 0 of `tree` is the root (the last emitted token) and
# nodes 1..k the drafts x_1..x_k (`tree.tokens`, a chain: node i's parent is i − 1); `tree.draft_probs[i]` is
# the q_i that x_i was drawn from; `warp_probs(logits[i], sampling)` is the target's p after node i. For
# i = 1..k: accept x_i with probability min(1, p_i(x_i)/q_i(x_i)), p_i the p after node i − 1; at the first
# rejection return `Acceptance(path=[0, ..., i − 1], bonus=...)` with the bonus drawn from norm(max(p_i − q_i, 0));
# with **every** draft accepted, draw the bonus from the p after node k. Draw every random choice through
# `coins`, as the library's rules do (`accept.tree_rules.Coins`): `coins.accept(p_x, q_x)` is True with
# probability min(1, p_x/q_x) (it tests u·q_x < p_x), and `coins.sample(probs)` draws a token from `probs`.
#
# Because all the randomness goes through `coins`, the check walks every branch of it
# (`accept.exactness.rule_joint`) and gets the **exact** distribution of what your rule emits — no sampling noise.
# It decodes with chains of k = 3 drafts on a toy target and draft over 4 tokens (`accept.toy.toy_models`:
# context-dependent random logits, the draft a noisy copy; sampled at temperature 1 from the two likeliest
# tokens, which keeps the branches few) and compares the first 4 emitted tokens with plain sampling's exact
# joint, in total variation; when a step accepts all 3 drafts, its bonus is the 4th. A library rule with one flaw
# (`accept.exactness.BROKEN_RULES`: after a rejection, the residual ignores q) goes through the same test and
# must fail it.

# %% tags=["exercise", "exercise-3"]
from specdec_lab import accept  # noqa: F401 - its rules: watched, not for the answer
from specdec_lab.accept import Acceptance
from specdec_lab.lab.course import watch

# the library's rules this one models: not for the answer (the check refuses an answer that calls one)
_watch = watch(globals(), *(f"accept.{name}" for name in ("accept_speculative", "accept_multi_draft", "accept_exact",
                                                          "accept_one_hot", "accept_without_replacement",
                                                          "accept_traversal")))  # fmt: skip


def my_accept(tree, logits, sampling, coins, **_):
    """Speculative sampling on a chain: accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first
    rejection the bonus ~ norm(max(p_i − q_i, 0)); with every draft accepted, the bonus ~ p after x_k."""
    ...


# %% tags=["solution", "exercise-3"]
def my_accept(tree, logits, sampling, coins, **_):  # noqa: F811 - replaces the stub above
    """Speculative sampling on a chain: accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the first
    rejection the bonus ~ norm(max(p_i − q_i, 0)); with every draft accepted, the bonus ~ p after x_k."""
    probs = warp_probs(logits, sampling)  # (k + 1, V): the target's p after each node
    k = len(tree) - 1
    for i in range(1, k + 1):
        x, p, q = int(tree.tokens[i]), probs[i - 1], tree.draft_probs[i]
        if not coins.accept(float(p[x]), float(q[x])):  # rejected: the bonus replaces x_i
            return Acceptance(path=list(range(i)), bonus=coins.sample((p - q).clamp(min=0.0)))
    return Acceptance(path=list(range(k + 1)), bonus=coins.sample(probs[k]))  # all accepted: one token more


# %% tags=["check", "exercise-3", "nbval-check-output"]
from specdec_lab.accept.exactness import BROKEN_RULES
from specdec_lab.lab.chain_exercise import (
    EXACT,
    all_accepted_probability,
    chain_rule_tv,
    guarded,
    is_library_rule,
    probe_rule,
)
from specdec_lab.lab.course import ExerciseError

_watch.begin_check()  # from here the check's own references
# every library rule your rule runs is recorded, by its code: also one reached through `accept.ACCEPT_RULES`,
# `accept.get_accept_rule(...)`, a private walker or an import of your own
_my_accept, library_ran = guarded(my_accept, is_library_rule)
probe = probe_rule(_my_accept, k=3)  # one real call first: the stub returns None, which check() reports
answer = probe if is_stub(probe) else chain_rule_tv(_my_accept, k=3)  # exact TV of the first 4 tokens from p
all_accepted = None if is_stub(probe) else all_accepted_probability(_my_accept, k=3)
if library_ran and not is_stub(probe):
    raise ExerciseError(f"your rule on chains: it ran the library's {', '.join(sorted(set(library_ran)))}, the "
                        "rules the check compares with: write the step yourself")  # fmt: skip
_ = check("your rule on chains of k = 3, first 4 tokens (exact)", answer, 0.0, close=lambda tv, _: tv < EXACT,
          watch=_watch,
          hint="Compare each x_i with the p after node i − 1; after a rejection sample max(p − q, 0), not p; "
               "with all k accepted, the bonus comes from the p after node k (logits[k]).")  # fmt: skip
from specdec_lab.accept import tree_rules as _tree_rules  # on a chain, `accept_multi_draft` is the library's exact rule

check("the chance a step accepts all 3 drafts (its bonus drawn after the whole chain)",
      all_accepted, all_accepted_probability(_tree_rules.accept_multi_draft, k=3),
      close=1e-6,
      hint="A rule that rejects too often (or never accepts) still emits p; the chance of accepting must match.")  # fmt: skip
flawed = chain_rule_tv(BROKEN_RULES["q_ignored_in_residual"], k=3)
assert flawed > 1000 * EXACT, "the flawed rule must fail the test: it has no teeth otherwise"
print(f"✓ the flawed rule (its residual ignores q) fails it: total variation {flawed:.3f} from p")

# %% [markdown]
# ## Takeaways
#
# - Resampling a rejected draft from the residual norm(max(p − q, 0)) makes speculative sampling exact: the
#   accepted mass min(p, q) plus the rejected mass 1 − α times the residual is p, at every position and for
#   any draft.
# - Exactness can be tested on the real model, and a test of it has teeth only with a control that must fail: section
#   5 puts the rule's output and a rule that resamples a rejection from p through the same chi-square test against
#   p, and prints both verdicts.
# - Notebook 01's i.i.d. model (one α at every draft position) can be tested on a decode: section 3 counts
#   acceptance per position, the histogram of accepted drafts and τ against E[L], each with its standard error, and
#   its sentence says whether this run resolves any departure or finds it within noise (a few prompts leave wide
#   error bars).

# %%
Markdown(
    f"- α is a property of the draft and the sampling together (α = Σ min(p, q) after the same warping of "
    f"both): {alpha_t_verdict}.\n"
    f"- Section 6 predicts the speed a draft buys from α̂, T_draft and the target's cost curve: {speed_verdict}."
)

# %% [markdown]
# ## Further reading
#
# - [Leviathan et al. 2023, *Fast Inference from Transformers via Speculative Decoding*](https://arxiv.org/abs/2211.17192)
#   — the rule, its proof of exactness, and the i.i.d. model of section 3.
# - [Chen et al. 2023, *Accelerating Large Language Model Decoding with Speculative Sampling*](https://arxiv.org/abs/2302.01318)
#   — the same rule, found independently, with a draft model for a 70B target.
# - [Li et al. 2025, *EAGLE-3*](https://arxiv.org/abs/2503.01840) — the reduced drafting vocabulary of section 1's
#   draft.
# - [Elhoushi et al. 2024, *LayerSkip*](https://arxiv.org/abs/2404.16710) — drafting with the target's own first
#   layers, the training-free `draft="layer_skip:N"`.
