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
# 4. losslessness: the empirical next-token histogram under speculative sampling vs the target's p,
#    with a chi-square test — and a broken rule that fails it;
# 5. speed: against autoregressive decoding and against transformers' `generate(assistant_model=...)`
#    with the same draft weights;
# 6. a dashboard.
#
# Defaults are small so the notebook runs in a couple of minutes on a CPU (nbval runs it as is).

# %% tags=["parameters"]
quick: bool = False  # CI: fewer prompts, tokens and trials (same code paths)
model_name: str = "smollm2-135m"  # target: shipped name, local HF dir or .gguf
draft: str = "default"  # "default" (data/draft/smollm2-135m-2l), "layer_skip:N" or a draft folder
prompt_id: int = 3  # question_id in data/prompts.jsonl for the live demo
max_new_tokens: int = 48  # tokens per generation in the demos
k_fixed: int = 6  # draft length for the per-position statistics
position_prompts: int = 2  # prompts for the per-position statistics
temperature: float = 0.8  # sampling temperature for sections 2 and 4
top_p: float = 0.9  # nucleus sampling for sections 2 and 4
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
from specdec_lab.bench import run_benchmark
from specdec_lab.cost import cost_curve_for
from specdec_lab.draft_model import get_draft
from specdec_lab.io import load_prompts
from specdec_lab.lab.draft import run_draft_demo
from specdec_lab.lab.widgets import Dashboard
from specdec_lab.losslessness import (
    LogitsTable,
    accept_resample_from_p,
    chi_square,
    exact_joint,
    simulate_emitted,
)
from specdec_lab.noise import measure_cost_curve_with_noise
from specdec_lab.sampling import Sampling, warp_probs
from specdec_lab.theory import accepted_length_pmf, expected_tokens_per_step, measured_speedup
from specdec_lab.viz.acceptance import acceptance_by_position, histogram_figure, position_figure
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tokens import show_tokens, trace_table

FIGURES = Path("../figures")  # notebooks run from notebooks/
hf_logging.disable_progress_bar()


class _AssistantConfigWarning(logging.Filter):
    """Drop one transformers message, nothing else: inside `generate(assistant_model=...)` (section 5),
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
# No smaller SmolLM2 exists offline, so we make one (`specdec_lab.draft_model`): **2 decoder layers**
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
if manifest:
    training = manifest["training"]
    pd.Series(
        {
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
        },
        name="draft training record (manifest.json)",
    ).to_frame()
else:
    print("training-free draft: nothing was trained")

# %% [markdown]
# ## 2. The draft live
#
# Greedy first: the output must equal plain autoregressive decoding token for token. Each bordered group
# is one target forward: green tokens were proposed by the draft and accepted, the blue one is the
# target's bonus token, struck-through red ones were proposed and rejected.

# %%
prompt = prompts[prompt_id].text
print(f"[{prompts[prompt_id].category}] {prompt[:300]}...")
ids = lm.chat_ids(prompt)
ar = generate(lm, ids, max_new_tokens=max_new_tokens)
sd = generate(lm, ids, method="draft", draft=draft, draft_length=4, max_new_tokens=max_new_tokens)

# %% tags=["nbval-check-output"]
assert sd.tokens == ar.tokens, "greedy speculative decoding must equal autoregressive decoding"
print(f"identical to autoregressive: {sd.tokens == ar.tokens}")
print(f"{len(sd.tokens)} tokens in {sd.forwards} target forwards (autoregressive: {ar.forwards}); mean accepted {sd.mean_accepted:.2f}")

# %%
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

# %% tags=["nbval-check-output"]
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
# Under the i.i.d. model the rate would be flat across positions and the histogram geometric. Real
# acceptance is bursty: easy stretches (copying code or a name from the prompt, closing a block,
# boilerplate) accept whole chains, hard ones reject the first token, so positions reached only in easy
# stretches tend to accept *more* often than position 1, and the histogram has extra mass at 0 and at
# long runs (with a weak draft, few steps reach the later positions: mind the error bars). That is why
# the draft length is chosen per step from a running estimate (`DraftLength("cost")`) rather than once.

# %% [markdown]
# ## 4. Losslessness: the next-token distribution is the target's
#
# Fix a context, run many independent speculative steps (the draft samples x ~ q, the library's rule
# `accept_speculative` accepts or resamples from the residual) and histogram the first emitted token.
# The exact answer is p(· | context) after the same temperature/top-p. Model outputs are memoized per
# prefix (`speculative.LogitsTable`); each episode calls the real rule on a real tree.

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
labels = [repr(lm.tokenizer.decode([i])) + f" ({i})" for i in range(len(p_exact))]
fig = histogram_figure(counts, p_exact, labels, top=12)
print(f"saved {save_figure(fig, '02_losslessness', FIGURES)}")
fig

# %% [markdown]
# `tests/test_speculative.py` runs the same test with many more trials on a tiny model with context-
# dependent distributions (first *two* emitted tokens, temperature, top-k, top-p, greedy and sampled
# drafts), and checks that two broken rules fail it.

# %% [markdown]
# ## 5. Speed
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

# %% [markdown]
# ## 6. Dashboard
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
