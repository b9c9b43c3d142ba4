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
# distribution under sampling. Notation: **p** = target, **q** = draft, **α** = Σ min(p, q).
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
# 7. a dashboard.
#
# Defaults are small so the notebook runs in a couple of minutes on a CPU (nbval runs it as is). Section 4
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

import json
import logging
from pathlib import Path

import ipywidgets as w
import numpy as np
import pandas as pd
import torch
from IPython.display import Markdown, display
from transformers.utils import logging as hf_logging

from specdec_lab import generate, load_model
from specdec_lab.accept.losslessness import (
    LogitsTable,
    accept_resample_from_p,
    chi_square,
    exact_joint,
    simulate_emitted,
)
from specdec_lab.bench import run_benchmark
from specdec_lab.cost import cost_curve_for
from specdec_lab.cost.noise import measure_cost_curve_with_noise
from specdec_lab.cost.theory import accepted_length_pmf, expected_tokens_per_step, measured_speedup
from specdec_lab.io import load_prompts
from specdec_lab.lab.alpha_temperature import AlphaTemperatureConfig, measure
from specdec_lab.lab.draft import run_draft_demo
from specdec_lab.lab.widgets import Dashboard
from specdec_lab.models.draft_model import get_draft
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.viz.acceptance import (
    acceptance_by_position,
    alpha_temperature_figure,
    histogram_figure,
    position_figure,
    vocabulary_labels,
)
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tokens import show_tokens, trace_table

FIGURES = Path("../results/figures" if quick else "../figures")  # from notebooks/; quick runs keep figures/ as is
hf_logging.disable_progress_bar()


class _AssistantConfigWarning(logging.Filter):
    """Drop one transformers message, nothing else: inside `generate(assistant_model=...)` (section 6),
    transformers' own candidate generator calls the assistant's `generate()` with a generation_config *and*
    max/min_new_tokens, then warns that this combination is deprecated. Nothing this notebook passes can
    avoid it, and in the stored outputs its red stderr box reads like an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Passing `generation_config` together with generation-related")


logging.getLogger("transformers.generation.utils").addFilter(_AssistantConfigWarning())
torch.manual_seed(seed)
prompts = {p.question_id: p for p in load_prompts()}
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; quick={quick}")

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
# responses plus the prompt's own tokens), EAGLE-3 style: a smaller head, and q = 0 outside the
# vocabulary keeps speculative sampling exact (q only needs to be a distribution). The sizes, from the
# draft's manifest:

# %%
lm = load_model(model_name)
d = get_draft(draft, lm.model)
manifest = d.manifest
print(f"draft {d.name!r}: {d.n_layers} layers, vocabulary {'full' if d.vocab is None else len(d.vocab)}")
if manifest and d.vocab is not None:
    display(Markdown(
        f"LoRA rank {manifest['spec']['lora_rank']}, distilled on {manifest['data']['train_examples']} training "
        f"prompts ({manifest['data']['response_tokens'] / 1e3:.0f}k response tokens); a drafting vocabulary of "
        f"{len(d.vocab)} of the target's {lm.model.config.vocab_size} tokens, so the draft's head costs "
        f"{len(d.vocab) / lm.model.config.vocab_size:.0%} of a full one."
    ))  # fmt: skip

# %% tags=["nbval-check-output"]
if manifest:  # the committed record of `python -m specdec_lab.train draft` (the same on every machine)
    training = manifest["training"]
    record = {
        "base layers": manifest["spec"]["base_layers"],
        "LoRA rank": manifest["spec"]["lora_rank"],
        "drafting vocabulary": manifest["spec"]["vocab_size"],
        "training data": f"{manifest['data']['train_examples']} prompts, {manifest['data']['response_tokens']} response tokens",
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
print(f"{sd.forwards} target forwards (autoregressive: {ar.forwards}); {sd.mean_accepted:.2f} tokens per forward")
show_tokens(sd, lm.tokenizer)

# %%
trace_table(sd, lm.tokenizer).head(12)

# %% [markdown]
# Under sampling (temperature and top-p applied identically to p and q) the draft samples its tokens and
# sends its full distributions q along; the target accepts x with probability min(1, p(x)/q(x)):

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
position_ids = [q for q in sorted(prompts) if q % 7 == 6][:position_prompts]  # one per category
runs = [generate(lm, lm.chat_ids(prompts[q].text), method="draft", draft=draft, draft_length=k_fixed,
                 max_new_tokens=max_new_tokens) for q in position_ids]  # fmt: skip
stats = acceptance_by_position(runs, k_fixed)
alpha_hat = stats["accepted"].sum() / stats["reached"].sum()
steps = [s for r in runs for s in r.steps if s.proposed == k_fixed]

# %%
print(f"prompts {position_ids}: {len(steps)} full-length steps, α̂ = {alpha_hat:.3f}")
pd.DataFrame({k: v for k, v in stats.items() if k != "position"}, index=pd.Index(stats["position"], name="position")).round(3)

# %%
fig = position_figure(stats, alpha_hat)
print(f"saved {save_figure(fig, '02_alpha_per_position', FIGURES)}")
fig

# %%
observed = np.bincount([s.accepted for s in steps], minlength=k_fixed + 1) / max(len(steps), 1)
pd.DataFrame(
    {"measured": observed, "i.i.d. theory at α̂": accepted_length_pmf(alpha_hat, k_fixed)},
    index=pd.Index(range(k_fixed + 1), name="drafts accepted per step"),
).round(3)

# %%
mean_tokens = np.mean([s.accepted + 1 for s in steps]) if steps else float("nan")
print(f"tokens per step: measured {mean_tokens:.2f}, theory (1 − α̂^(k+1))/(1 − α̂) = {expected_tokens_per_step(alpha_hat, k_fixed):.2f}")

# %% [markdown]
# Under the i.i.d. model the rate would be flat across positions and the histogram truncated-geometric.
# Real acceptance need not be: easy stretches (copying code or a name from the prompt, closing a block,
# boilerplate) can accept whole chains while hard ones reject the first token. Such burstiness would show
# as later positions (reached mostly in easy stretches) accepting more often than position 1, and as
# extra mass at 0 and at k in the histogram. What this run shows, read from the tables above:

# %%
def _rate(accepted: int, reached: int) -> tuple[float, float]:  # rate and its binomial standard error
    r = accepted / max(reached, 1)
    return r, (r * (1 - r) / max(reached, 1)) ** 0.5


(first, se_first), (later, se_later) = _rate(stats["accepted"][0], stats["reached"][0]), _rate(
    stats["accepted"][1:].sum(), stats["reached"][1:].sum()
)
z_pos = (later - first) / max((se_first**2 + se_later**2) ** 0.5, 1e-12)
iid = accepted_length_pmf(alpha_hat, k_fixed)
Markdown(
    f"* Position 1 accepted {first:.2f} of the drafts that reached it, positions 2–{k_fixed} together {later:.2f} "
    f"({stats['reached'][1:].sum()} reached): later positions accepted **{'more' if later > first else 'less'}** "
    f"often than position 1 here, a difference of {abs(z_pos):.1f} standard errors "
    f"({'beyond' if abs(z_pos) > 2 else 'within'} the noise of {len(steps)} steps).\n"
    f"* Steps that accepted nothing: {observed[0]:.2f} measured against {iid[0]:.2f} under the i.i.d. law "
    f"(**{'more' if observed[0] > iid[0] else 'less'}** mass at 0); steps that accepted all {k_fixed}: "
    f"{observed[-1]:.2f} against {iid[-1]:.2f} (**{'more' if observed[-1] > iid[-1] else 'less'}**).\n"
    f"* Tokens per step: {mean_tokens:.2f} measured, {expected_tokens_per_step(alpha_hat, k_fixed):.2f} from the "
    f"formula at α̂ — the formula runs **{'above' if expected_tokens_per_step(alpha_hat, k_fixed) > mean_tokens else 'below'}** "
    "the measurement on this run.\n\n"
    "With few steps the later positions rest on a handful of drafts (mind the error bars in the figure), and "
    "the direction can change from run to run. Either way acceptance varies along the text, which is why "
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

# %% tags=["nbval-check-output"]
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

# %%
fig = alpha_temperature_figure(alpha_t["summary"])
print(f"saved {save_figure(fig, '02_alpha_temperature', FIGURES)}")
fig

# %%
tv = alpha_table["alpha_tv"]
t_cold, t_hot = tv.index[0], tv.index[-1]
steps_t = np.sign(np.diff(tv.to_numpy()))
trend = (", at every step of the grid" if (steps_t == steps_t[0]).all() else ", between the ends though not at every step") if len(tv) > 2 else ""
gap = (alpha_table["alpha_run"] - tv).abs().max()
worst_iid = (alpha_table["tokens_per_forward_iid"] - alpha_table["tokens_per_forward"]).abs().max()
limit = (len(d.vocab) if d.vocab is not None else lm.model.config.vocab_size) / lm.model.config.vocab_size
heldout = manifest.get("heldout", {}).get("alpha_greedy_draft_vocab") if manifest else None
Markdown(
    f"From T = {t_cold:g} to T = {t_hot:g}, α_TV goes from {tv.iloc[0]:.3f} to {tv.iloc[-1]:.3f}: on these prompts the "
    f"draft is accepted **{'less' if tv.iloc[-1] < tv.iloc[0] else 'more'}** often the hotter the sampling{trend} "
    f"(the T → ∞ limit, the drafting vocabulary's share of the target's, is about {limit:.2f}). "
    f"The realised rate α_run differs from α_TV by at most {gap:.3f} at any temperature, and the i.i.d. formula at "
    f"α_run gives tokens per forward within {worst_iid:.2f} of the measured ones. "
    + (f"At T = 0, α_TV is the quantity training reports as held-out greedy α ({heldout:.3f} in the record of "
       "section 1, measured on held-out training-style prompts rather than these). " if heldout and t_cold == 0 else "")
    + "What α buys in speed depends on k and on the machine's cost curve: section 6, and notebook 01, section 4."
)  # fmt: skip

# %% [markdown]
# ## 5. Losslessness: the next-token distribution is the target's
#
# Fix a context, run many independent speculative steps (the draft samples x ~ q, the library's rule
# `accept_speculative` accepts or resamples from the residual) and histogram the first emitted token.
# The exact answer is p(· | context) after the same temperature/top-p. Model outputs are memoized per
# prefix (`losslessness.LogitsTable`); each episode calls the real rule on a real tree.

# %%
sampling = Sampling(temperature=temperature, top_p=top_p)
context = lm.chat_ids("Name one fruit that is red.")
target_table = LogitsTable(lm.model, context)
draft_table = LogitsTable(d.model, context, forward=lambda x: d.logits(x, extra=context))
q0 = warp_probs(draft_table(()), sampling)  # (V,) q after the context
target_table.prefetch([(t,) for t in q0.nonzero().flatten().tolist()])  # p after every possible draft token
p_exact = exact_joint(target_table, sampling, n=1)
counts = simulate_emitted(target_table, draft_table, sampling, k=1, trials=hist_trials, n=1, seed=seed)
broken = simulate_emitted(target_table, draft_table, sampling, k=1, trials=hist_trials, n=1, seed=seed,
                          rule=accept_resample_from_p)  # fmt: skip
q0 = q0.double().numpy()
good, bad = chi_square(counts, p_exact), chi_square(broken, p_exact)

# %% tags=["nbval-check-output"]
print(f"α at this context = Σ min(p, q) = {np.minimum(p_exact, q0).sum():.2f}")
print(f"speculative sampling vs p: consistent at false-alarm rate 1e-3: {good['p_value'] > 1e-3}")
print(f"broken rule (rejection resamples from p) vs p: consistent: {bad['p_value'] > 1e-3}")

# %%
print(f"chi-square: exact rule stat {good['stat']:.1f} on {good['dof']} dof, p-value {good['p_value']:.3g}; "
      f"broken rule stat {bad['stat']:.1f}, p-value {bad['p_value']:.3g}")  # fmt: skip
labels = vocabulary_labels(lm.tokenizer, np.argsort(-p_exact)[:12])  # {id: text (id)}: single vocabulary entries
fig = histogram_figure(counts, p_exact, labels, top=12)
print(f"saved {save_figure(fig, '02_losslessness', FIGURES)}")
fig

# %% [markdown]
# `tests/test_speculative.py` runs the same test with many more trials on a tiny model with context-
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
bench = run_benchmark(lm, load_prompts("../data/prompts.jsonl")[::19][:bench_prompts],
                      methods="autoregressive,draft,hf_assisted", max_new_tokens=bench_tokens, progress=False)  # fmt: skip
# one timed run per method and prompt: check the machine was quiet (a short cost curve, repeats kept)
_, bench_noise = measure_cost_curve_with_noise(lm.model, sizes=[1, k_fixed + 1], repeats=5)
display(bench_noise.note())
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
# curve t(n), with `theory.measured_speedup` (notebook 01, section 4):

# %%
curve = cost_curve_for(lm.model, max_tokens=k_fixed + 1)
t_draft = d.step_seconds or 0.0
rows = [{"k": k, "predicted speedup": round(measured_speedup(alpha_hat, k, curve(1), t_draft, curve), 2)} for k in range(0, k_fixed + 1)]
print(f"T_target = {curve(1) * 1e3:.1f} ms, T_draft = {t_draft * 1e3:.1f} ms (c = {t_draft / curve(1):.3f})")
pd.DataFrame(rows).set_index("k").T

# %%
best = max(rows, key=lambda r: r["predicted speedup"])
live = bench["summary"]["draft"]["speedup"]
Markdown(
    f"The parts predict at most {best['predicted speedup']:.2f}× (at k = {best['k']}, with α̂ from section 3); the "
    f"live benchmark above measured {live:.2f}× for `draft`, **{'below' if live < best['predicted speedup'] else 'above'}** "
    "the prediction. The prediction assumes i.i.d. acceptance at one α̂ measured on other prompts and leaves out "
    "the loop's own overhead; the benchmark's draft also chooses k per step rather than using the best fixed one."
)  # fmt: skip

# %% [markdown]
# ## 7. Dashboard
#
# The plain cell runs the default; the controls call the same function (`lab.draft.run_draft_demo`)
# and redraw under them on every change (a static snapshot of the default view stands there until then).

# %%
demo_tokens = 32  # tokens per dashboard run: short, so a change redraws in seconds
html, numbers = run_draft_demo(lm, prompts[prompt_id].text, draft=draft, max_new_tokens=demo_tokens)
print(numbers)

# %% tags=["nbval-skip"]
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
