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
# # 10 · EAGLE: drafting at the feature level from the target's own hidden states
#
# Every learned proposer so far drafts from tokens (the distilled 2-layer draft, `data/draft/`) or from one hidden
# state with independent heads (Medusa, notebooks 03–06). EAGLE (Li et al. 2024, arXiv 2401.15077; EAGLE-2,
# arXiv 2406.16858; EAGLE-3, arXiv 2503.01840) drafts autoregressively *in the target's feature space*: a
# one-layer drafter reads the target's hidden states — which the decoding loop already has from its verify
# forward — and its own output stands in for the next position's features while it drafts on. It is what
# the serving engines ship today: vLLM and SGLang load EAGLE-3 drafters (`LlamaForCausalLMEagle3`), and
# `python -m specdec_lab.eagle.export` writes ours in that layout.
#
# **The architecture** (`specdec_lab/eagle/model.py`, read from SafeAILab/EAGLE and vLLM/SGLang's
# `llama_eagle3.py`). Notation: $x_t$ the tokens, $f_t$ the target's features at position $t$, $e(x)$ the
# target's own (frozen, shared) token embedding, $H$ the hidden size, $L$ the target's layers.
#
# 1. **features**: the hidden states at the *inputs* of target layers $(2, L/\!/2, L-3)$ = (2, 15, 27) for
#    SmolLM2's 30 layers — low, middle and high level — fused by `fc` ($3H \to H$) into $g_t$;
# 2. **one decoder layer** of the target's shape, whose attention reads $[\,\mathrm{norm}(e(x_{t+1}))\,;\,
#    \mathrm{norm}(g_t)\,]$ ($2H$ inputs): position $t$ pairs the features at $t$ with the *next* token and
#    predicts $x_{t+2}$; its pre-norm output $h_t$ is the hidden input of the next step, so a chain goes
#    $(h_t, d_1) \to d_2$, $(h_{t+1}, d_2) \to d_3$, …; it keeps its own small KV cache, and after each
#    verification restarts from the target's *true* features of the accepted path;
# 3. **a reduced-vocabulary head**: `lm_head` scores only $M$ drafting-vocabulary rows; `d2t` maps row $j$ to
#    target token $j + \mathrm{d2t}[j]$, `t2d` marks the target tokens it covers, and the logits are
#    scattered into the full vocabulary with $-\infty$ elsewhere *before* any softmax;
# 4. **training-time test** (EAGLE-3's TTT, `specdec_lab/train/eagle_ttt.py`): in training the drafter is unrolled
#    on its own outputs for 7 steps (SafeAILab/EAGLE `eagle/traineagle3`), attending to its earlier steps'
#    keys, exactly as it will run while decoding — so it learns to draft from its own, imperfect, features.
#
# EAGLE-1/2's variant (the last layer's state only, `fc` over $[e; f]$, $2H \to H$) is `variant="eagle1"`.
#
# Sections: (1) why features are easier to predict than tokens — accuracy per draft position of the token
# draft, the Medusa heads and EAGLE on the same held-out text; (2) the drafting-vocabulary trade-off, with a
# slider; (3) a short live training run next to the recorded CPU run; (4) a real step's dynamic tree
# (EAGLE-2); (5) the speed table.

# %% tags=["parameters"]
quick: bool = False  # CI: a shorter live training run and generation (same code paths)
rerun: bool = False  # True: measure the accuracy per draft position afresh (minutes) instead of reading accuracy_file
model_name: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
weights: str = "data/eagle/smollm2-135m"  # the EAGLE drafter folder (relative to the repository root)
accuracy_file: str = (
    "data/eagle/position_accuracy.json"  # python -m specdec_lab.lab.drafter_accuracy (relative to the repo root)
)
curve_file: str = (
    "data/eagle/runs/cpu-20min/curve.json"  # the recorded training run's curve (relative to the repo root)
)
bench_file: str = "data/bench/avx512-nine-56-r2.json"  # section 6's bench results (relative to the repo root)
compare_examples: int = 48  # rerun: held-out examples (the held-out rule of the training data)
alpha: float = 0.6  # vocabulary slider: an acceptance with every token nameable (scaled by coverage)
train_seconds: float = 35.0  # the live training run's wall-time budget
train_batch: int = 4  # sequences per optimizer step in the live run
prompt_id: int = 3  # question_id in data/prompts.jsonl for the dynamic-tree demo
max_new_tokens: int = 48  # tokens generated in the dynamic-tree demo
default_step: int = -1  # step whose tree is drawn; -1: the largest tree (ties: the one that accepted most)
seed: int = 0  # random seed
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
if quick:
    train_seconds, train_batch, max_new_tokens, compare_examples = 10.0, 2, 24, 8
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone

import json
import os
import time
from pathlib import Path

import pandas as pd
import torch
from IPython.display import HTML, Markdown, display
from transformers.utils import logging as hf_logging

from specdec_lab import METHODS, generate, load_model
from specdec_lab.eagle import SHIPPED_DIR
from specdec_lab.eagle.vocab_cost import target_macs, vocab_tradeoff
from specdec_lab.io import load_prompts
from specdec_lab.lab.drafter_accuracy import DISTILL_DIRS
from specdec_lab.lab.trees import Explorer
from specdec_lab.proposers.eagle import weights_folder
from specdec_lab.text import WHITESPACE_LEGEND
from specdec_lab.train.distill import load_distillation_data, split_heldout
from specdec_lab.train.eagle import EagleTrainConfig, Trainer, batches, init_drafter
from specdec_lab.train.eagle_ttt import loss_rows, teacher, ttt_loss, unroll
from specdec_lab.train.lineage import lineage, stitched_curve
from specdec_lab.viz.decoding import show_steps, step_tree_figure
from specdec_lab.viz.eagle_figures import (
    SOURCE_LABELS,
    lineage_figure,
    position_accuracy_figure,
    source_html,
    speed_rows,
    training_figure,
    vocab_callback,
    vocab_point,
    vocab_tradeoff_figure,
)
from specdec_lab.viz.figures import save_figure

T_START = time.perf_counter()
REPO = SHIPPED_DIR.parents[1]  # data/ paths are relative to the repository root
FIGURES = Path(os.environ.get("SPECDEC_LAB_FIGURES", figures_dir))  # env override: used by nbval in CI
hf_logging.disable_progress_bar()
torch.manual_seed(seed)
lm = load_model(model_name)
tok = lm.tokenizer
folder = weights_folder(weights)
have_drafter = (folder / "config.json").is_file()
if not have_drafter:
    print(f"No EAGLE drafter at {weights}: section 1 shows the recorded file only, section 4 is skipped "
          "(train one with `python -m specdec_lab.train eagle`).")  # fmt: skip
print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; quick={quick}; drafter: {weights}")

# %% [markdown]
# ## 1. Why features are easier to predict than tokens
#
# A drafter's job at draft position $k$ is to name the target's token $k$ places after the next one. The
# three learned proposers of this workbook get different information for it:
#
# - the **2-layer token draft** re-reads the true tokens: with its earlier drafts accepted (teacher-forced)
#   it sees exactly the target's context, so its guess at position $k$ is its next-token guess and its line
#   is flat — but it must rebuild the target's understanding of the text from tokens with 2 layers;
# - a **Medusa head** $k$ reads one hidden state $h_t$ and never sees the tokens drafted between: head 2 must
#   guess as if it knew what head 1 said;
# - **EAGLE** starts from the target's own features (what the 30 layers made of the text), sees the drafted
#   tokens, and carries its *own* predicted features forward — its error grows only as those drift.
#
# The measure is the same for all three (`specdec_lab/lab/drafter_accuracy.py`, the definition of
# `train.eagle_ttt.accuracy`): on held-out self-distillation text (question_id % 10 == 0, one fixed subset), the
# proposer's top-1 equals the target's greedy token at draft position $k$, with drafts $1..k-1$ replaced by
# the true tokens (teacher-forced: what it sees when they were accepted), over every response token. Each
# proposer scores the rows it scores when decoding. The committed file is
# `python -m specdec_lab.lab.drafter_accuracy` (`rerun=True` measures afresh).

# %%
acc_path = REPO / accuracy_file
if rerun and have_drafter:
    from specdec_lab.lab.drafter_accuracy import main as compare_main

    accuracy_file = "results/eagle/position_accuracy.json"
    acc_path = REPO / accuracy_file
    assert compare_main(["--model", model_name, "--weights", str(folder), "--examples", str(compare_examples),
                         "--out", str(acc_path), "--quiet"]) == 0  # fmt: skip
record = json.loads(acc_path.read_text()) if acc_path.is_file() else None
if record is None:
    print(f"{accuracy_file} is missing: run `python -m specdec_lab.lab.drafter_accuracy`.")
else:
    src = record["sources"]
    print(f"{accuracy_file}: {record['examples']} held-out examples, {record['tokens']} response tokens; drafter "
          f"{record['weights']['eagle']['folder']} ({record['weights']['eagle'].get('tokens_seen')} training tokens), "
          f"draft {record['weights']['draft']}, Medusa heads {record['weights']['medusa']}")  # fmt: skip
    display(pd.DataFrame({SOURCE_LABELS[n]: s["accuracy"] for n, s in src.items()},
                         index=pd.Index(record["positions"], name="draft position k")).T)  # fmt: skip

# %% tags=["nbval-ignore-output"]
if record is not None:
    fig = position_accuracy_figure(record)
    print(f"saved {save_figure(fig, '10_position_accuracy', FIGURES, png=not quick)}")
    display(fig)

# %%
if record is not None:
    a = {n: s["accuracy"] for n, s in src.items()}
    best1 = max(a, key=lambda n: a[n][0])
    lines = [f"At draft position 1 the {SOURCE_LABELS[best1]} is right most often ({a[best1][0]:.2f})."]
    if "eagle" in a and "medusa" in a:
        j = max(i for i, x in enumerate(a["medusa"]) if x is not None)  # the last head
        e, m = a["eagle"], a["medusa"]
        keep_e, keep_m = e[j] / max(e[0], 1e-9), m[j] / max(m[0], 1e-9)
        lines.append(
            f"At position {j + 1}, EAGLE ({e[j]:.2f}) is {'above' if e[j] > m[j] else 'below'} Medusa's head {j + 1} "
            f"({m[j]:.2f}); EAGLE keeps {keep_e:.0%} of its position-1 accuracy there, the heads {keep_m:.0%}: "
            + ("the drafter's own features carry further than independent heads do."
               if keep_e > keep_m else "here the drafter's features drift faster than the heads' accuracy falls.")
        )  # fmt: skip
    if "draft" in a and "eagle" in a:
        lines.append(
            f"EAGLE's position-1 accuracy is {'above' if a['eagle'][0] > a['draft'][0] else 'below'} the token "
            f"draft's ({a['eagle'][0]:.2f} against {a['draft'][0]:.2f}); per step the token draft runs two "
            "target-sized layers and a head, EAGLE one layer and a head (section 2 prices them)."
        )  # fmt: skip
    display(Markdown(" ".join(lines)))

# %% [markdown]
# ## 2. The drafting vocabulary: a draft step's cost against the tokens it can name
#
# On a small target the head dominates a draft step. The target's tied LM head is $V \times H$ =
# 49,152 × 576, and the drafter's one layer is small next to it, so the drafting vocabulary's size $M$ sets
# the cost ratio $c$ of the theory (notebook 01: one draft step over one target token). From the model
# shapes alone (`specdec_lab/eagle/vocab_cost.py`: multiply-adds of the linear layers, the attention scores
# left out on both sides):
#
# $$c(M) = \frac{\mathrm{fc} + \mathrm{layer} + M\,H}{L\cdot\mathrm{layer}_{\text{target}} + V\,H}$$
#
# Against it, **coverage** $(M)$: the share of the target's greedy tokens on held-out text (the
# self-distillation responses held out by question_id % 10 == 0) that lie among the $M$ most frequent
# tokens of the training responses — a drafter scoring only those rows can never propose the others (the
# target still verifies every token, so the output never changes; only acceptance can drop).

# %%
examples = [e for d in DISTILL_DIRS.split(",") for e in load_distillation_data(REPO / d)]
train_ex, held_ex = split_heldout(examples, 10)
text_config = lm.model.config.get_text_config(decoder=True)
tradeoff = vocab_tradeoff(text_config, train_ex, held_ex)
macs = target_macs(text_config)
shipped_m = 8192  # the drafting vocabulary the draft, the Medusa drafter and the EAGLE drafter use (data/vocab/)
print(f"target: {macs['total'] / 1e6:.1f} M multiply-adds per token, the LM head {macs['head'] / 1e6:.1f} M of them; "
      f"coverage counted on {tradeoff.held_tokens} held-out response tokens")  # fmt: skip
display(pd.DataFrame({"c(M)": tradeoff.c, "coverage(M)": tradeoff.coverage},
                     index=pd.Index(tradeoff.sizes, name="M")).T.round(3))  # fmt: skip

# %% tags=["nbval-ignore-output"]
fig = vocab_tradeoff_figure(tradeoff, shipped=shipped_m)
print(f"saved {save_figure(fig, '10_vocab_tradeoff', FIGURES, png=not quick)}")
fig

# %%
full, ship = tradeoff.at(tradeoff.sizes[-1]), tradeoff.at(shipped_m)
display(Markdown(
    f"The full vocabulary makes a draft step cost c = {full['c']:.3f} of a target token; the shipped "
    f"{shipped_m:,}-token vocabulary brings that to c = {ship['c']:.3f} while still covering "
    f"{ship['coverage']:.1%} of the target's greedy tokens on held-out text. " + vocab_point(tradeoff, shipped_m, alpha)
    + " The closed form (`theory.expected_speedup`, verification counted as one target step) is an upper bound on a "
    "CPU, where verifying a few tokens costs more than one."
))  # fmt: skip

# %% [markdown]
# Move the slider over $M$: the figure marks it, and the line below gives $c$, the coverage, and the best chain
# the closed form predicts when the acceptance is the parameter `alpha` scaled by the coverage (its callback is
# `viz.eagle_figures.vocab_callback`, tested in `tests/test_eagle_compare.py`).

# %% tags=["nbval-skip"]
import ipywidgets as w

Explorer(
    w.SelectionSlider(options=[256, 512, 1024, 2048, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152],
                      value=shipped_m, description="M", continuous_update=False),
    vocab_callback(tradeoff, alpha, shipped_m),
    header="<b>Move the slider</b>: the drafting vocabulary's size M.",
    show_initial=False,  # the shipped size is the plain cell above
)  # fmt: skip

# %% [markdown]
# ## 3. A short live training run
#
# `python -m specdec_lab.train eagle` trains the drafter on the self-distillation data (`train/eagle.py`):
# per batch one teacher-forced prefill of the frozen target gives its features and its distribution, the
# drafter is unrolled on its own outputs (TTT, 7 steps), and the loss is the soft cross-entropy against the
# target's distribution restricted to the drafting vocabulary, weighted $0.8^i$ over the steps (SafeAILab/EAGLE
# `eagle/traineagle3/main.py`). Here: a fresh drafter, a few optimizer steps of the same `Trainer` within
# `train_seconds`, with its loss on one fixed held-out batch after every step. It is drawn next to the
# recorded 20-minute run on this CPU (`data/eagle/runs/cpu-20min/`); the right panel is that run's held-out
# accuracy per draft position.

# %% tags=["nbval-ignore-output"]
cfg = EagleTrainConfig(batch_size=train_batch, warmup_steps=4, max_minutes=train_seconds / 60, eval_every=10**9,
                       checkpoint_every=10**9, seed=seed)  # fmt: skip
trainer = Trainer(lm.model, init_drafter(lm.model, cfg), train_ex, [], cfg, progress=False)
held_batch = teacher(lm.model, trainer.d, held_ex[:train_batch])  # one fixed held-out batch: its loss after each step


@torch.no_grad()
def held_loss() -> float:
    """The TTT loss of the drafter as it is now on the fixed held-out batch (what `train_step` minimises)."""
    d, t = trainer.d, held_batch
    in_vocab = d.t2d[t.greedy]
    run = unroll(d, t.features, t.ids, cfg.ttt_steps, rows=loss_rows(t.valid, in_vocab, cfg.ttt_steps))
    return round(float(ttt_loss(run, t.p, t.valid, in_vocab, cfg.step_weight)[0]), 3)


start = held_loss()
live = []
for batch in batches(train_ex, cfg.batch_size, 0, seed):
    loss = trainer.train_step(batch)
    live.append({"step": trainer.step, "tokens": trainer.tokens, "loss": round(loss, 3), "held_loss": held_loss()})
    if trainer.seconds >= train_seconds:
        break
curve = json.loads((REPO / curve_file).read_text())
print(f"{len(live)} steps, {trainer.tokens} training tokens in {trainer.seconds:.0f} s: held-out batch loss "
      f"{start:.2f} -> {live[-1]['held_loss']:.2f}")  # fmt: skip
fig = training_figure(live, curve)
print(f"saved {save_figure(fig, '10_training', FIGURES, png=not quick)}")
fig

# %% tags=["nbval-ignore-output"]
pts = curve["points"]
end = live[-1]["held_loss"]
display(Markdown(
    f"On the fixed held-out batch the live run's loss {'fell' if end < start else 'did not fall'} from {start:.2f} "
    f"(the fresh drafter) to {end:.2f} after {len(live)} steps; the loss of each training batch (dotted) also "
    "varies with the batch. The recorded run saw "
    f"{pts[-1]['tokens']:,} training tokens; its held-out accuracy at draft position 1 went from "
    f"{pts[1]['accuracy'][0]:.2f} at its first evaluation to {pts[-1]['accuracy'][0]:.2f}"
    + (" and was still rising." if pts[-1]["accuracy"][0] > pts[-2]["accuracy"][0] else ".")
))  # fmt: skip

# %% [markdown]
# The drafter `weights` names was not trained in one sitting: each run continued the drafter of the run before
# (`--init-from`), with the settings this CPU afforded then. `specdec_lab.train.lineage` follows the runs'
# manifests back to a fresh drafter and puts every run's held-out accuracy on one axis, the drafter's total
# training tokens (`python -m specdec_lab.train lineage` prints the same chain).

# %% tags=["nbval-ignore-output"]
try:
    runs = lineage(weights)
except ValueError as e:
    runs = []
    print(f"no training record for {weights}: {e}")
if runs:
    display(pd.DataFrame([{"run": i + 1, "folder": r.folder, "tokens before": r.tokens_before,
                           "tokens": r.curve["points"][-1]["tokens"], "minutes": round(r.manifest["train_seconds"] / 60),
                           "settings": r.settings, "accuracy at position 1": r.curve["points"][-1]["accuracy"][0]}
                          for i, r in enumerate(runs)]).set_index("run"))  # fmt: skip
    fig = lineage_figure(runs, stitched_curve(runs))
    print(f"saved {save_figure(fig, '10_lineage', FIGURES, png=not quick)}")
    display(fig)

# %% [markdown]
# ## 4. A real step's dynamic tree (EAGLE-2)
#
# With `tree="dynamic"` the drafter does not draft a chain but grows a tree (EAGLE-2, arXiv 2406.16858): after
# the same first forward it expands the best nodes level by level — one drafter forward per level over the
# chosen nodes, tree attention among their entries — each node valued by the product of the drafter's
# probabilities along its path, and keeps the best $n$ nodes, $n$ sized on the one cost model of this machine
# (`trees.expand`). The target verifies the whole tree in one forward and accepts the longest path it agrees
# with. Below: one step of a real decode, the accepted path in green. In token labels
# ▁ is a space, ↵ a newline, ⇥ a tab, and · a byte of a character that the next token completes.

# %%
if have_drafter:
    prompt = {p.question_id: p for p in load_prompts(REPO / "data/prompts.jsonl")}[prompt_id]
    ids = lm.chat_ids(prompt.text)
    print(f"[{prompt.category}] {prompt.text[:200]}...")
    eag = generate(lm, ids, method="eagle", tree="dynamic", weights=str(folder), max_new_tokens=max_new_tokens)
    ar = generate(lm, ids, method="autoregressive", max_new_tokens=max_new_tokens, trace=False)
    print(f"greedy EAGLE (dynamic trees) equals autoregressive decoding token for token: {eag.tokens == ar.tokens}")
else:
    print(f"No EAGLE drafter at {weights}: no dynamic tree to draw.")

# %% tags=["nbval-ignore-output"]
if have_drafter:
    if default_step < 0:  # the most instructive step: the largest tree, then most tokens accepted, then the earliest
        step = max(range(len(eag.steps)), key=lambda i: (len(eag.steps[i].tree), eag.steps[i].accepted, -i))
    else:
        step = min(default_step, len(eag.steps) - 1)
    s = eag.steps[step]
    print(f"step {step} of {len(eag.steps)}: {len(s.tree)} nodes, {s.accepted} accepted; proposer info {s.info}")
    print(WHITESPACE_LEGEND)
    fig = step_tree_figure(eag, step, tok)
    print(f"saved {save_figure(fig, '10_dynamic_tree', FIGURES, png=not quick)}")
    display(fig)

# %% [markdown]
# The emitted text, one colour per step (one target forward); bold underlined tokens were drafted by EAGLE and
# accepted, the plain one closing each step is the target's bonus token:

# %% tags=["nbval-ignore-output"]
if have_drafter:
    print(f"{len(eag.tokens)} tokens in {eag.forwards} target forwards: mean accepted {eag.mean_accepted:.2f} "
          f"(bonus included); mean tree {eag.proposer.get('nodes')} nodes")  # fmt: skip
    display(show_steps(eag, tok))

# %% [markdown]
# ## 5. The hybrid: which source drafted each accepted token
#
# `method="hybrid"` (`proposers/hybrid.py`) asks prompt lookup, the Medusa heads and the EAGLE drafter for
# candidates each step, merges them into one token trie, values every node by the acceptance each source has
# shown so far in the run, and verifies the best tree the cost model prices — n-gram drafts where the text
# repeats, model drafts where it does not. The model sources cost drafting time, so after the lookup each step
# plans which of them to run (none, the heads, the drafter, or both), pricing each alternative by the chain it
# is expected to add at its measured seconds; `plans` counts the steps per choice. Below, the same prompt: each
# accepted draft token on the colour of the source that proposed it (two sources: the trie merged the same
# token), the target's own token of each step plain.

# %% tags=["nbval-ignore-output"]
if have_drafter and "hybrid" in METHODS:
    hyb = generate(lm, ids, method="hybrid", sources="prompt_lookup+medusa+eagle", weights=str(folder),
                   max_new_tokens=max_new_tokens)  # fmt: skip
    print(f"greedy hybrid equals autoregressive decoding token for token: {hyb.tokens == ar.tokens}; "
          f"mean accepted {hyb.mean_accepted:.2f} (bonus included); accepted drafts by source "
          f"{hyb.proposer.get('accepted_by')}; model sources planned per step {hyb.proposer.get('plans')}")  # fmt: skip
    display(HTML(source_html(hyb, tok)))
else:
    print("This section needs method 'hybrid' and a trained EAGLE drafter.")

# %% [markdown]
# ## 6. The speed table
#
# The benchmark (`python -m specdec_lab.bench`, notebook 09) times every method on the same prompts, order
# rotated per prompt. The results file named by `bench_file`:

# %% tags=["nbval-ignore-output"]
try:
    bench = json.loads((REPO / bench_file).read_text())
except (OSError, ValueError) as e:
    bench = None
    print(f"{bench_file}: cannot read it ({e}); run `python -m specdec_lab.bench --methods autoregressive,eagle`")
if bench is not None:
    print(f"{bench_file}: {bench['prompts_done']} prompts, {bench['config']['max_new_tokens']} new tokens, "
          f"{bench['machine'].get('cpu')}, ISA {bench['machine'].get('isa')}")  # fmt: skip
    display(pd.DataFrame(speed_rows(bench)).set_index("method").round(3))

# %% tags=["nbval-ignore-output"]
print(f"notebook run time: {time.perf_counter() - T_START:.0f} s")
