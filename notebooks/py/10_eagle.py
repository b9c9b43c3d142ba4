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
# state with independent heads (Medusa, notebooks 03–06). EAGLE ([Li et al. 2024](https://arxiv.org/abs/2401.15077);
# EAGLE-2, [Li et al. 2024](https://arxiv.org/abs/2406.16858); EAGLE-3, [Li et al. 2025](https://arxiv.org/abs/2503.01840))
# drafts autoregressively *in the target's feature space*: a one-layer drafter reads the target's hidden states —
# which the decoding loop already has from its verify forward — and its own output stands in for the next
# position's features while it drafts on. It is what the serving engines ship today: vLLM and SGLang load
# EAGLE-3 drafters (`LlamaForCausalLMEagle3`), and `python -m specdec_lab.eagle.export` writes ours in that layout.
#
# **The architecture** (`specdec_lab/eagle/model.py`, read from SafeAILab/EAGLE and vLLM/SGLang's
# `llama_eagle3.py`). Notation: $x_t$ the tokens, $f_t$ the target's features at position $t$, $e(x)$ the
# target's own (frozen, shared) token embedding, $H$ the hidden size, $N$ the target's layers ($L$ keeps notebook
# 00's meaning: the tokens one step emits, bonus included).
#
# 1. **features**: the hidden states at the *inputs* of target layers $(2, N/\!/2, N-3)$ = (2, 15, 27) for
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
#    on its own outputs for a few steps (7 in SafeAILab/EAGLE's `eagle/traineagle3`; the first run behind the shipped
#    drafter used 7 and the later ones fewer, as section 3's lineage table records), attending to its earlier steps' keys, exactly as
#    it will run while decoding — so it learns to draft from its own, imperfect, features.
#
# EAGLE-1/2's variant (the last layer's state only, `fc` over $[e; f]$, $2H \to H$) is `variant="eagle1"`.
#
# Sections: (1) drafting from features, from tokens or from one hidden state — accuracy per draft position of
# the token draft, the Medusa heads and EAGLE on the same held-out text; (2) the drafting-vocabulary trade-off, with a
# slider; (3) a short live training run next to the recorded CPU run; (4) dynamic trees (EAGLE-2): a real
# decode, and a demonstration tree grown level by level; (5) the hybrid's sources; (6) the speed table.
#
# ### Learning objectives
#
# - **Explain** what an EAGLE-3 drafter reads (which target layers it fuses) and why its own features can keep
#   more of its accuracy over the draft positions than independent Medusa heads keep of theirs.
# - **Measure** accuracy per draft position, teacher-forced, with the library's definition.
# - **Derive** c_MAC, a proxy for the cost ratio c of a draft step, from the model shapes and weigh it against the
#   coverage of a reduced drafting vocabulary.
# - **Read** a dynamic (EAGLE-2) draft tree and the speed table of a benchmark run.
#
# ### Prerequisites
#
# Notebook 01 (the speed-up formula with α and c), notebooks 03–06 (Medusa heads and tree verification), notebook
# 08 or 09 for the benchmark's speed-ups.
#
# **Notation** as in notebook 00: p, q, α, k (draft length), c (cost ratio), L (tokens one step emits, bonus
# included), E[L], τ; "mean accepted" = tokens emitted per target forward, bonus included. A *draft position* is
# written $j$ ($1 \le j \le k$): the $j$-th drafted token of a step, Medusa's head $j$.

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
default_step: int = -1  # step whose tree is drawn; -1: the one that branches most (ties: the one that accepted most)
demo_budget: int = 10  # section 4's demonstration tree: the most drafted nodes, root not counted (verify priced flat)
demo_width: int = 3  # section 4's demonstration tree: children per expanded node, nodes expanded per level
seed: int = 0  # random seed
figures_dir: str = "../figures"  # where figures are saved (relative to notebooks/); quick runs use ../results/figures

# %%
from specdec_lab import load_model
from specdec_lab.lab.course import start

if quick:
    train_seconds, train_batch, max_new_tokens, compare_examples = 10.0, 2, 24, 8
    figures_dir = "../results/figures"  # CI runs leave the committed figures alone
FIGURES = start(figures_dir, seed=seed, stem="10_eagle")
lm = load_model(model_name)

# %% [markdown]
# ## 1. Features, tokens or one hidden state: accuracy per draft position
#
# A drafter's job at draft position $j$ is to name the target's token $j$ places after the next one. The
# three learned proposers of this workbook get different information for it:
#
# - the **2-layer token draft** re-reads the true tokens: with its earlier drafts accepted (teacher-forced)
#   it sees exactly the target's context, so its guess at position $j$ is its next-token guess and its line
#   is flat — but it must rebuild the target's understanding of the text from tokens with 2 layers;
# - a **Medusa head** $j$ reads one hidden state $h_t$ and never sees the tokens drafted between: head 2 must
#   guess as if it knew what head 1 said;
# - **EAGLE** starts from the target's own features (what the 30 layers made of the text), sees the drafted
#   tokens, and carries its *own* predicted features forward — its error grows as those drift.
#
# Which of these wins at which position is measured, not assumed: the sentence under the figure compares EAGLE
# with the token draft position by position.
#
# The measure is the same for all three (`specdec_lab/lab/drafter_accuracy.py`, the definition of
# `train.eagle_ttt.accuracy`). The **accuracy at draft position $j$**, $a_j$ = hits / scored tokens: on held-out
# self-distillation text (question_id % 10 == 0, one fixed subset), over *every* response token $x_s$ — each one is
# scored at every $j$, as the $j$-th draft of the step whose root (the target's own next token) is $x_{s-j}$; for a
# response's first tokens that root and its context lie in the prompt, so the scored set does not shrink with $j$
# (the cell below prints the counts) — the share where the proposer's top-1 at position $j$ equals the target's greedy
# token there — with drafts $1..j-1$ replaced by the true tokens (teacher-forced: the tokens it would see had they
# been accepted; EAGLE still carries its own features). It is **not conditional** on drafts $1..j-1$ having been
# right: no token is left out because an earlier guess missed. At $j = 1$ there is no earlier position, so $a_1$ is
# plainly P(the proposer's top-1 = the target's greedy token at draft position 1) — the conditional and the unconditional reading
# coincide there; from $j = 2$ on they differ (Exercise 1 returns to this). Each proposer scores the rows it scores
# when decoding. The committed file is `python -m specdec_lab.lab.drafter_accuracy` (`rerun=True` measures
# afresh); the table has one row per proposer and one column per draft position.

# %%
import json

import pandas as pd
from IPython.display import Markdown, display

from specdec_lab.io import REPO_DIR as REPO  # data/ paths are relative to the repository root
from specdec_lab.proposers.eagle import weights_folder
from specdec_lab.viz.eagle_figures import SOURCE_LABELS

folder = weights_folder(weights)
have_drafter = (folder / "config.json").is_file()
if not have_drafter:
    print(f"No EAGLE drafter at {weights}: section 1 shows the recorded file only, section 4 is skipped "
          "(train one with `python -m specdec_lab.train eagle`).")  # fmt: skip
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
    from specdec_lab.train.lineage import lineage

    src = record["sources"]
    last_run = record["weights"]["eagle"].get("tokens_seen")
    try:  # the drafter's whole training: every run it continued, back to a fresh drafter (section 3's table)
        chain = lineage(record["weights"]["eagle"]["folder"])
        total = chain[-1].tokens_before + chain[-1].curve["points"][-1]["tokens"]
        seen = f"{total:,} training tokens over {len(chain)} runs, {last_run:,} of them in its last"
    except (ValueError, KeyError, TypeError):
        seen = f"{last_run} training tokens in its last run"
    print(f"{accuracy_file}: {record['examples']} held-out examples, {record['tokens']} response tokens; drafter "
          f"{record['weights']['eagle']['folder']} ({seen}), "
          f"draft {record['weights']['draft']}, Medusa heads {record['weights']['medusa']}")  # fmt: skip
    counts = {c for s in src.values() for c in s["count"]}
    print("scored tokens: " + (f"{record['tokens']:,} at every draft position for every proposer (every response "
                               "token, the same set at every j)" if counts == {record["tokens"]} else
                               "; ".join(f"{n} {s['count']}" for n, s in src.items())))  # fmt: skip
    if "medusa" in src and None in src["medusa"]["accuracy"]:
        n_heads = sum(x is not None for x in src["medusa"]["accuracy"])
        print(f"the Medusa drafter has {n_heads} heads: at draft positions beyond {n_heads} it has no guess (NaN below)")
    display(pd.DataFrame({SOURCE_LABELS[n]: s["accuracy"] for n, s in src.items()},
                         index=pd.Index(record["positions"], name="draft position j")).T.round(3))  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.eagle_figures import position_accuracy_figure
from specdec_lab.viz.figures import save_figure

if record is not None:
    fig = position_accuracy_figure(record)
    print(f"saved {save_figure(fig, '10_position_accuracy', FIGURES, png=not quick)}")
    display(fig)

# %%
from specdec_lab.lab.course import compare

if record is not None:
    a = {n: s["accuracy"] for n, s in src.items()}

    def _share_var(s: dict, i: int) -> float:
        """Binomial variance of a share of hits over its scored tokens."""
        x = s["hits"][i] / max(s["count"][i], 1)
        return x * (1 - x) / max(s["count"][i], 1)

    first, second = (sorted(a, key=lambda n: -a[n][0]) + [None])[:2]  # the two best at draft position 1
    if second is None:
        lines = [f"At draft position 1 the {SOURCE_LABELS[first]} scores {a[first][0]:.2f}."]
    else:  # the leader named only beyond two standard errors of its difference from the runner-up
        band1 = 2 * (_share_var(src[first], 0) + _share_var(src[second], 0)) ** 0.5
        lead = ("At draft position 1 the {x} is right most often ({a:.2f}; the {y} next, {b:.2f}, beyond two standard "
                "errors of the difference, ±{band:.3f}).")  # fmt: skip
        lines = [compare(a[first][0], a[second][0], lead, lead,
                         "At draft position 1 the {x} and the {y} are not told apart ({a:.2f} and {b:.2f}, within "
                         "two standard errors of the difference, ±{band:.3f}).",
                         rel_tol=band1 / max(min(a[first][0], a[second][0]), 1e-12), band=band1,
                         x=SOURCE_LABELS[first], y=SOURCE_LABELS[second])]  # fmt: skip
    if "eagle" in a and "medusa" in a:
        j = max(i for i, x in enumerate(a["medusa"]) if x is not None)  # the last head
        e, m = a["eagle"], a["medusa"]
        keep_e, keep_m = e[j] / max(e[0], 1e-9), m[j] / max(m[0], 1e-9)

        # two standard errors of each difference, the proposers taken as independent samples (as below); the kept
        # share's by the delta method on a_j / a_1, its two shares also taken as independent
        gap_band = 2 * (_share_var(src["eagle"], j) + _share_var(src["medusa"], j)) ** 0.5
        keep_band = 2 * sum(
            (r**2) * (_share_var(s, j) / max(x[j], 1e-9) ** 2 + _share_var(s, 0) / max(x[0], 1e-9) ** 2)
            for r, s, x in ((keep_e, src["eagle"], e), (keep_m, src["medusa"], m))) ** 0.5  # fmt: skip
        lines.append(
            compare(e[j], m[j], "At position {j}, EAGLE ({a:.2f}) is above Medusa's head {j} ({b:.2f}), beyond two "
                    "standard errors (±{band:.3f});",
                    "At position {j}, EAGLE ({a:.2f}) is below Medusa's head {j} ({b:.2f}), beyond two standard "
                    "errors (±{band:.3f});",
                    "At position {j}, EAGLE ({a:.2f}) and Medusa's head {j} ({b:.2f}) are not told apart (within two "
                    "standard errors, ±{band:.3f});", rel_tol=gap_band / max(min(e[j], m[j]), 1e-12),
                    j=j + 1, band=gap_band)
            + compare(keep_e, keep_m,
                      " EAGLE keeps {a:.0%} of its position-1 accuracy there, the heads {b:.0%} (beyond two standard "
                      "errors, ±{band:.0%}): the drafter's own features carry further than independent heads do.",
                      " EAGLE keeps {a:.0%} of its position-1 accuracy there, the heads {b:.0%} (beyond two standard "
                      "errors, ±{band:.0%}): here the drafter's features drift faster than the heads' accuracy falls.",
                      " EAGLE keeps {a:.0%} of its position-1 accuracy there, the heads {b:.0%}: within noise (two "
                      "standard errors, ±{band:.0%}).",
                      rel_tol=keep_band / max(min(keep_e, keep_m), 1e-12), band=keep_band)
        )  # fmt: skip
    if "draft" in a and "eagle" in a:
        # per draft position: EAGLE against the token draft, "within noise" inside two standard errors of the
        # difference of the two shares (each over its scored tokens)
        def _side(j: int) -> str:
            e, d = src["eagle"], src["draft"]
            if e["accuracy"][j] is None or d["accuracy"][j] is None:
                return "unscored"
            pe, pd_ = e["hits"][j] / max(e["count"][j], 1), d["hits"][j] / max(d["count"][j], 1)
            se = (pe * (1 - pe) / max(e["count"][j], 1) + pd_ * (1 - pd_) / max(d["count"][j], 1)) ** 0.5
            return compare(pe, pd_, "above", "below", within="within noise", rel_tol=2 * se / max(min(pe, pd_), 1e-12))

        def _positions(js: list[int]) -> str:
            return ("position " if len(js) == 1 else "positions ") + ", ".join(str(j + 1) for j in js)

        sides = [_side(j) for j in range(len(a["eagle"]))]
        groups = {w: [j for j, x in enumerate(sides) if x == w] for w in ("above", "below", "within noise")}
        words = {"above": "**above** the token draft's", "below": "**below** the token draft's",
                 "within noise": "**not told apart** from the token draft's"}  # fmt: skip
        parts = [f"{words[w]} at {_positions(js)}" for w, js in groups.items() if js]
        lines.append(
            "Position by position, EAGLE's accuracy is " + "; ".join(parts)
            + " (a difference counts beyond two standard errors of the two shares over their "
            f"{record['tokens']:,} scored tokens, taken as independent samples; the table gives the values). All "
            "proposers are scored on the same tokens, and the file records hit counts, not which tokens each got "
            "right, so the paired test those tokens call for cannot be run from it; its band is narrower where the "
            "two proposers' hits go together, so a difference inside this band is neither shown nor "
            "ruled out."
            + (" The token draft re-reads the true tokens at every position (teacher-forced) and is scored on the "
               "same tokens at every position, so it makes the same guesses there and its line is flat by "
               "construction, while EAGLE carries its own features, which drift with the position."
               if groups["below"] else "")
            + " Per step the token draft runs two target-sized layers and a head, EAGLE one layer and a head "
            "(section 2 prices EAGLE's draft step in multiply-adds; the token draft's step is not priced there)."
        )  # fmt: skip
    display(Markdown(" ".join(lines)))

# %% [markdown]
# ## 2. The drafting vocabulary: a draft step's cost against the tokens it can name
#
# On a small target a full-vocabulary head dominates a draft step. The target's tied LM head is $V \times H$ =
# 49,152 × 576, and the drafter's one layer is small next to it, so the drafting vocabulary's size $M$ sets
# most of the cost of a draft step — until $M\,H$ comes down to the size of $\mathrm{fc} + \mathrm{layer}$,
# the fixed part that no smaller vocabulary removes (in the formula below, the floor c_MAC(M) approaches as $M$
# shrinks). Notebook 00 defines $c = T_{\text{draft}}/T_{\text{target}}$, a ratio of
# measured times; this section uses a proxy for it from the model shapes alone, $c_{\mathrm{MAC}}$
# (`specdec_lab/eagle/vocab_cost.py`: multiply-adds of the linear layers, the attention scores left out on both
# sides), written c_MAC(M) in the table, the figure and the exercise (c alone is always the measured ratio):
#
# $$c_{\mathrm{MAC}}(M) = \frac{\mathrm{fc} + \mathrm{layer} + M\,H}{N\cdot\mathrm{layer}_{\text{target}} + V\,H}$$
#
# Against it, **coverage** $(M)$: the share of the target's greedy tokens on held-out text (the
# self-distillation responses held out by question_id % 10 == 0) that lie among the $M$ most frequent
# tokens of the training responses — a drafter scoring only those rows can never propose the others (the
# target still verifies every token, so the output never changes; only acceptance can drop).

# %%
from specdec_lab.eagle.vocab_cost import target_macs, vocab_tradeoff
from specdec_lab.lab.drafter_accuracy import DISTILL_DIRS
from specdec_lab.train.distill import load_distillation_data, split_heldout

examples = [e for d in DISTILL_DIRS.split(",") for e in load_distillation_data(REPO / d)]
train_ex, held_ex = split_heldout(examples, 10)
text_config = lm.model.config.get_text_config(decoder=True)
tradeoff = vocab_tradeoff(text_config, train_ex, held_ex)
macs = target_macs(text_config)
shipped_m = 8192  # the drafting vocabulary the draft, the Medusa drafter and the EAGLE drafter use (data/vocab/)
print(f"target: {macs['total'] / 1e6:.1f} M multiply-adds per token, the LM head {macs['head'] / 1e6:.1f} M of them; "
      f"coverage counted on {tradeoff.held_tokens} held-out response tokens (every held-out example; section 1 "
      "scores a subset of them)")  # fmt: skip
display(pd.DataFrame({"c_MAC(M)": tradeoff.c, "coverage(M)": tradeoff.coverage},
                     index=pd.Index(tradeoff.sizes, name="M")).T.round(3))  # fmt: skip

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.eagle_figures import vocab_tradeoff_figure

fig = vocab_tradeoff_figure(tradeoff, shipped=shipped_m)
print(f"saved {save_figure(fig, '10_vocab_tradeoff', FIGURES, png=not quick)}")
fig

# %%
from specdec_lab.viz.eagle_figures import vocab_point

full, ship = tradeoff.at(tradeoff.sizes[-1]), tradeoff.at(shipped_m)
assumed = alpha * ship["coverage"]  # the acceptance the closed form is fed at the shipped M (alpha is a parameter)
measured_note = ""
if record is not None and "eagle" in src and src["eagle"]["accuracy"][0] is not None:
    a1, n1 = src["eagle"]["accuracy"][0], src["eagle"]["count"][0]
    a1_band = 2 * (a1 * (1 - a1) / n1) ** 0.5  # two binomial standard errors of a_1 over its scored tokens
    measured_note = (
        f"section 1 measures the shipped drafter's a_1 (its accuracy at draft position 1) at {a1:.3f}, "
        + compare(abs(a1 - assumed), a1_band, "beyond two binomial standard errors (±{b:.3f}) of the {x:.2f} fed in "
                  "here", "within two binomial standard errors (±{b:.3f}) of the {x:.2f} fed in here", x=assumed)
        + "; "
    )  # fmt: skip
display(Markdown(
    f"The full vocabulary makes a draft step cost c_MAC = {full['c']:.3f} of a target token (in multiply-adds); "
    "the shipped "
    f"{shipped_m:,}-token vocabulary brings that to c_MAC = {ship['c']:.3f} while still covering "
    f"{ship['coverage']:.1%} of the target's greedy tokens on held-out text. " + vocab_point(tradeoff, shipped_m, alpha)
    + " These are the closed form's numbers (`theory.expected_speedup`, verification counted as one target step) for "
    "an assumed `alpha` and the multiply-add proxy c_MAC, not a prediction of a measured speed-up: "
    + measured_note + f"section 6 shows measured speed-ups, read from a stored benchmark file (`{bench_file}`) "
    "that was measured on the machine its caption names, not necessarily this one."
))  # fmt: skip

# %% [markdown]
# Move the slider over $M$ (its stops are the sizes of the table above, each computed, none interpolated): the
# figure marks it, and the line below gives $c_{\mathrm{MAC}}$, the coverage, and the best chain the closed form predicts when the acceptance is the parameter `alpha` scaled by the coverage (its callback is
# `viz.eagle_figures.vocab_callback`, tested in `tests/test_drafter_accuracy.py`).

# %% tags=["nbval-skip"]
import ipywidgets as w

from specdec_lab.lab.trees import Explorer
from specdec_lab.viz.eagle_figures import vocab_callback

display(Explorer(
    w.SelectionSlider(options=list(tradeoff.sizes),  # the computed sizes only: `tradeoff.at` interpolates others
                      value=shipped_m if shipped_m in tradeoff.sizes else tradeoff.sizes[-1], description="M",
                      continuous_update=False),
    vocab_callback(tradeoff, alpha, shipped_m),
    header="<b>Move the slider</b>: the drafting vocabulary's size M.",
    show_initial=False,  # the shipped size is the plain cell above
))  # fmt: skip

# %% [markdown]
# ## 3. A short live training run
#
# `python -m specdec_lab.train eagle` trains the drafter on the self-distillation data (`train/eagle.py`):
# per batch one teacher-forced prefill of the frozen target gives its features and its distribution, the
# drafter is unrolled on its own outputs (TTT, `ttt_steps` steps: the cell prints the live run's and the shipped
# drafter's), and the loss is the soft cross-entropy against the
# target's distribution restricted to the drafting vocabulary, weighted $0.8^i$ over the steps (SafeAILab/EAGLE
# `eagle/traineagle3/main.py`). Here: a fresh drafter, a few optimizer steps of the same `Trainer` within
# `train_seconds`, with its loss on one fixed held-out batch after every step. It is drawn next to the
# recorded 20-minute run on a CPU (`data/eagle/runs/cpu-20min/`): in the left panel its loss on its training batches
# (grey), to read beside the live run's training batches (dotted), not beside the held-out batch; the right panel is
# that run's held-out accuracy per draft position.

# %% tags=["nbval-ignore-output"]
import torch

from specdec_lab.train.eagle import EagleTrainConfig, Trainer, batches, init_drafter
from specdec_lab.train.eagle_ttt import loss_rows, teacher, ttt_loss, unroll
from specdec_lab.viz.eagle_figures import training_figure

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


start_loss = held_loss()
live = []
for batch in batches(train_ex, cfg.batch_size, 0, seed):
    loss = trainer.train_step(batch)
    live.append({"step": trainer.step, "tokens": trainer.tokens, "loss": round(loss, 3), "held_loss": held_loss()})
    if trainer.seconds >= train_seconds:
        break
curve = json.loads((REPO / curve_file).read_text())
shipped_cfg = json.loads((folder / "manifest.json").read_text())["config"] if have_drafter else {}
print(f"{len(live)} step(s), {trainer.tokens} training tokens in {trainer.seconds:.0f} s: held-out batch loss "
      f"{start_loss:.2f} -> {live[-1]['held_loss']:.2f}; TTT over {cfg.ttt_steps} steps here, "
      f"{shipped_cfg.get('ttt_steps', '?')} in the shipped drafter's last run (its manifest)")  # fmt: skip
fig = training_figure(live, curve, title=f"A live run of {len(live)} step(s) beside the recorded run ({curve_file})")
print(f"saved {save_figure(fig, '10_training', FIGURES, png=not quick)}")
fig

# %% tags=["nbval-ignore-output"]
pts = curve["points"]
end = live[-1]["held_loss"]
rec_manifest = json.loads((REPO / curve_file).with_name("manifest.json").read_text())
rec_data = rec_manifest["data"]
# the evaluation's own noise: two binomial standard errors of an accuracy over the tokens it scores at draft
# position 1: the run's evaluation subset, rebuilt as `train.eagle.Trainer` picks it (evenly over the held-out
# set), scores each response token once there; an estimate from the data's mean response length where the
# distillation data loaded here is not the run's
n_rec_eval = rec_manifest["config"]["eval_examples"]
rec_subset = held_ex[:: max(1, len(held_ex) // max(n_rec_eval, 1))][:n_rec_eval]
if len(examples) == rec_data["examples"] and len(rec_subset) == rec_data["heldout_examples_evaluated"]:
    eval_tokens, eval_how = sum(len(e.response_ids) for e in rec_subset), ""
else:
    eval_tokens = rec_data["heldout_examples_evaluated"] * rec_data["response_tokens"] / rec_data["examples"]
    eval_how = "roughly "
acc_end, acc_prev = pts[-1]["accuracy"][0], pts[-2]["accuracy"][0]
acc_noise = 2 * (acc_end * (1 - acc_end) / eval_tokens) ** 0.5
noise_note = (f" ({acc_end - acc_prev:+.4f} on the evaluation before, against the evaluation's own noise of about "
              f"±{acc_noise:.3f}: two binomial standard errors over the {eval_how}{eval_tokens:,.0f} held-out response "
              f"tokens of its {rec_data['heldout_examples_evaluated']} evaluation examples).")
acc_tail = (", flat within noise at the end" if abs(acc_end - acc_prev) <= acc_noise else
            compare(acc_end, acc_prev, ", still rising at its last evaluation", ", below its evaluation before",
                    rel_tol=0.0)) + noise_note  # fmt: skip
display(Markdown(
    "On the fixed held-out batch the live run's loss "
    + compare(end, start_loss, "rose from {b:.2f} (the fresh drafter, before the first step) to {a:.2f}",
              "fell from {b:.2f} (the fresh drafter, before the first step; the figure starts after step 1) to {a:.2f}",
              "stayed at {b:.2f} (the fresh drafter), ending at {a:.2f},", rel_tol=0.01)
    + f" after {len(live)} step(s) in {trainer.seconds:.0f} s (the {train_seconds:g} s budget is checked between "
    "steps, so the last step may end past it); the loss of each training batch (dotted) also varies with the batch. "
    f"The recorded run saw {pts[-1]['tokens']:,} training tokens; its held-out accuracy at draft position 1 went "
    f"from {pts[0]['accuracy'][0]:.2f} (the fresh drafter, 0 tokens) to {pts[1]['accuracy'][0]:.2f} at its first "
    f"evaluation after training began and {acc_end:.2f} at its last"
    + acc_tail
))  # fmt: skip

# %% [markdown]
# The drafter `weights` names was not trained in one sitting: each run continued the drafter of the run before
# (`--init-from`), with the settings the CPU of the time afforded. `specdec_lab.train.lineage` follows the runs'
# manifests back to a fresh drafter and puts every run's held-out accuracy on one axis, the drafter's total
# training tokens (`python -m specdec_lab.train lineage` prints the same chain). The table: each run's folder,
# the training tokens the drafter had seen before it and during it, its minutes, its settings (TTT steps, batch,
# learning rate) and its held-out accuracy at draft position 1 when it ended ($a_1$ as section 1 defines it: the
# share of held-out tokens whose first draft is the target's greedy token).

# %% tags=["nbval-ignore-output"]
from specdec_lab.train.lineage import lineage, stitched_curve
from specdec_lab.viz.eagle_figures import lineage_figure

try:
    runs = lineage(weights)
except ValueError as e:
    runs = []
    print(f"no training record for {weights}: {e}")
if runs:
    display(pd.DataFrame([{"run": i + 1, "folder": r.folder, "tokens before": r.tokens_before,
                           "tokens": r.curve["points"][-1]["tokens"], "minutes": round(r.manifest["train_seconds"] / 60),
                           "budget (min)": r.manifest["config"].get("max_minutes"),
                           "settings": r.settings,
                           "accuracy at position 1": round(r.curve["points"][-1]["accuracy"][0], 3)}
                          for i, r in enumerate(runs)]).set_index("run"))  # fmt: skip
    early = [r for r in runs  # stopped more than a minute before its --max-minutes
             if r.manifest["config"].get("max_minutes")
             and r.manifest["train_seconds"] < 60 * (r.manifest["config"]["max_minutes"] - 1)]  # fmt: skip
    if early:
        def stop_reason(r) -> str:
            per_epoch = r.manifest.get("data", {}).get("train_tokens_per_epoch")
            epochs = r.manifest["config"].get("epochs", 1.0)
            if per_epoch and r.manifest.get("tokens_seen", 0) >= epochs * per_epoch:
                return f"{r.folder.rsplit('/', 1)[-1]} (its epochs done: tokens seen = {epochs:g} × tokens per epoch)"
            return f"{r.folder.rsplit('/', 1)[-1]} (its manifest records no epoch limit reached)"

        display(Markdown(
            "`minutes` is the training time each manifest measured; `budget (min)` is the `--max-minutes` its "
            "manifest's config records (a folder's name need not say it). Stopped before its budget: "
            + "; ".join(stop_reason(r) for r in early) + "."
        ))  # fmt: skip
    fig = lineage_figure(runs, stitched_curve(runs))
    print(f"saved {save_figure(fig, '10_lineage', FIGURES, png=not quick)}")
    display(fig)

    def _eval_tokens(r) -> tuple[float, str]:
        """The response tokens a run's evaluation scores at draft position 1: its evaluation subset rebuilt as
        `train.eagle.Trainer` picks it (as the cell above does) where the distillation data loaded here is the
        run's, else an estimate from the data's mean response length ("about")."""
        dat, n_ev = r.manifest.get("data", {}), r.manifest["config"].get("eval_examples", 0)
        sub = held_ex[:: max(1, len(held_ex) // max(n_ev, 1))][:n_ev]
        if len(examples) == dat.get("examples") and len(sub) == dat.get("heldout_examples_evaluated"):
            return sum(len(e.response_ids) for e in sub), ""
        return dat.get("heldout_examples_evaluated", 0) * dat.get("response_tokens", 0) / max(dat.get("examples", 1), 1), "about "

    def _dip(r) -> tuple[float, float, float, int, float, str]:
        """A continued run's inherited score (its evaluation at 0 tokens), its first evaluation after training
        began, about two binomial standard errors of the latter over its evaluation tokens, where that evaluation
        lies on the lineage's token axis, and the tokens (with how they were counted)."""
        (p0, p1), (n_tok, how) = r.curve["points"][:2], _eval_tokens(r)
        a0, a1 = p0["accuracy"][0], p1["accuracy"][0]
        return a0, a1, 2 * (a1 * (1 - a1) / max(n_tok, 1)) ** 0.5, r.tokens_before + p1["tokens"], n_tok, how

    cont = [(i + 1, r, _dip(r)) for i, r in enumerate(runs) if i and len(r.curve["points"]) > 1]
    dips = [(i, r, d) for i, r, d in cont if d[0] - d[1] > d[2]]
    if dips:
        i, r, (a0, a1, b, x, n_tok, how) = max(dips, key=lambda t: t[2][0] - t[2][1])
        # recovered: the run's last evaluation above the inherited score by more than its own two binomial SEs
        # (the same band as the dip; a recovery inside it is a tie, not counted)
        def _above(r, a0, n_tok):
            a_end = r.curve["points"][-1]["accuracy"][0]
            return a_end - a0 > 2 * (a_end * (1 - a_end) / max(n_tok, 1)) ** 0.5

        recovered = sum(_above(r, d[0], d[4]) for _, r, d in dips)
        level = sum(not _above(r, d[0], d[4]) and r.curve["points"][-1]["accuracy"][0] - d[0] >= -d[2]
                    for _, r, d in dips)  # fmt: skip
        display(Markdown(
            f"In {len(dips)} of the {len(cont)} continued runs the first evaluation after training began lies below "
            "the inherited drafter's own score by more than about two binomial standard errors (largest in run "
            f"{i}: {a0:.3f} → {a1:.3f} at {x:,} tokens, against ±{b:.3f} over the {how}{n_tok:,.0f} response tokens "
            f"its evaluation scores); {recovered} of them end above the score they inherited by more than the same "
            f"band" + (f", {level} within it" if level else "") + ". Each continued run loads the drafter's weights only (`--init-from`): its optimizer "
            "state and learning-rate schedule start afresh, and its settings may differ (the table); the record does "
            "not separate which of these causes the dip."
        ))  # fmt: skip
    last = runs[-1]
    if record is not None and "eagle" in src and record["weights"]["eagle"]["folder"] == last.folder:
        n_eval = last.manifest.get("data", {}).get("heldout_examples_evaluated", last.manifest["config"]["eval_examples"])
        copied = " (a bf16 copy, its manifest says)" if "bf16" in last.manifest.get("command", "") else ""
        run_end, sec1 = last.curve["points"][-1]["accuracy"][0], src["eagle"]["accuracy"][0]
        n_sec1 = src["eagle"]["count"][0]
        # the run's own evaluation subset, rebuilt as `train.eagle.Trainer` picks it (evenly over the held-out set),
        # scored with the shipped weights: separates the weights from the choice of examples (skipped when quick)
        from specdec_lab.proposers.eagle import get_eagle_drafter
        from specdec_lab.train.eagle_ttt import accuracy as position_hits

        n_run_ex = last.manifest["config"]["eval_examples"]
        run_subset = held_ex[:: max(1, len(held_ex) // max(n_run_ex, 1))][:n_run_ex]
        same = None
        if not quick and len(run_subset) == n_eval:
            shipped_d = get_eagle_drafter(str(folder), lm.model)
            h_run = t_run = 0
            with torch.no_grad():
                for j0 in range(0, len(run_subset), 8):
                    (h,), (t,) = position_hits(shipped_d, teacher(lm.model, shipped_d, run_subset[j0 : j0 + 8]), 1)
                    h_run, t_run = h_run + h, t_run + t
            same = h_run / max(t_run, 1)
        last_data = last.manifest.get("data", {})
        n_run = (t_run if same is not None else  # the run's scored tokens (estimated when not re-scored)
                 n_eval * last_data.get("response_tokens", 0) / max(last_data.get("examples", 1), 1))
        band = 2 * (run_end * (1 - run_end) / n_run + sec1 * (1 - sec1) / n_sec1) ** 0.5
        lines = [
            f"The last run ends at {run_end:.3f} at draft position 1, section 1's table gives {sec1:.3f} for the same "
            "drafter: two measurements with one definition (`train.eagle_ttt.accuracy`: the share of held-out response "
            "tokens where the drafter's top-1 at draft position 1 is the target's greedy token — at position 1 no "
            "earlier draft exists, so there is nothing for it to be conditional on) on two subsets of the held-out set "
            f"(question_id % 10 == 0). The run scored {n_eval} held-out examples with the drafter as it trained; "
            f"section 1 scores {record['examples']} ({n_sec1:,} response tokens, one subset shared by the three "
            f"proposers) with the weights as shipped{copied}. "
            + compare(abs(run_end - sec1), band, "The gap, {a:.3f}, is beyond two binomial standard errors of two "
                      "independent samples of these sizes (±{b:.3f}). ",
                      "The gap, {a:.3f}, is within noise: inside two binomial standard errors of two independent "
                      "samples of these sizes (±{b:.3f}). ", rel_tol=0.0)
        ]
        if same is not None:
            lines.append(
                f"Scored here with the shipped weights on the run's own {n_eval} examples ({t_run:,} tokens), the "
                f"drafter gets {same:.3f}: "
                + compare(abs(same - run_end), abs(same - sec1), "the weights move it more than the choice of "
                          "examples does. ", "the weights move it by {a:.4f}, the choice of examples by {b:.3f}: the "
                          "gap lies in which examples were scored, not in the weights. ",
                          "the weights and the choice of examples move it by about the same. ", rel_tol=0.1)
                + ("The binomial band treats every token as independent; the tokens of one response are not, so two "
                   "subsets of a few dozen responses can differ by more than that band, as these two do. " if abs(same - sec1) > band
                   else ""))  # fmt: skip
        lines.append("Section 1's is the number to compare proposers by.")
        display(Markdown("".join(lines)))

# %% [markdown]
# ## 4. Dynamic trees (EAGLE-2): a real decode, and a tree that branches
#
# With `tree="dynamic"` the drafter does not draft a chain but grows a tree
# ([EAGLE-2, Li et al. 2024](https://arxiv.org/abs/2406.16858)): after the same first forward it expands the best
# nodes level by level — one drafter forward per level over the chosen nodes, tree attention among their
# entries — each node valued by the product of the drafter's probabilities along its path, and keeps the best
# $k$ drafted nodes (the tree's nodes besides the root, as notebook 00 counts them), $k$ sized on the one cost
# model of this machine (`trees.expand`). The target verifies the whole tree
# in one forward and accepts the longest path it agrees with. First a real decode, with the trees this machine's
# cost model sizes (the cell prints their mean size: how far a tree grows is the cost model's decision, made on
# this machine's prices for each extra verified token).

# %%
from specdec_lab import generate
from specdec_lab.io import load_prompts

if have_drafter:
    prompt = {p.question_id: p for p in load_prompts(REPO / "data/prompts.jsonl")}[prompt_id]
    ids = lm.chat_ids(prompt.text)
    print(f"[{prompt.category}] {prompt.text[:200]}...")
    eag = generate(lm, ids, method="eagle", tree="dynamic", weights=str(folder), max_new_tokens=max_new_tokens)
    ar = generate(lm, ids, method="autoregressive", max_new_tokens=max_new_tokens, trace=False)
    print(f"greedy EAGLE (dynamic trees) equals autoregressive decoding token for token: {eag.tokens == ar.tokens}; "
          f"mean tree {eag.proposer.get('nodes')} drafted nodes plus the root")  # fmt: skip
else:
    print(f"No EAGLE drafter at {weights}: no dynamic tree to draw.")

# %% [markdown]
# To watch the tree *grow* level by level, the next cell decodes the same prompt with the same drafter and its
# same confidences, but prices verification on a flat curve, t(n) = t(1) at this machine's measured t(1) (the flat
# shape is assumed, not measured here) — and lets a tree have up to `demo_budget` drafted nodes, plus its root (the last
# emitted token, which every count below leaves out and the figure draws at the top), with `demo_width` children per
# expanded node: a demonstration tree, computed, whose budget lets it branch. The figure draws its step that
# branches most (most leaves), the accepted path in green. In token labels ▁ is a space, ↵ a newline, ⇥ a tab,
# and · a byte of a character that the next token completes.
#
# **Predict, then run.** Before running it: will the drafter's best nodes lie along one deep chain, or spread over
# several children of the root? And will a step with more nodes accept more tokens?

# %% tags=["prediction", "nbval-ignore-output"]
import numpy as np

from specdec_lab import Memory, StepCost
from specdec_lab.cost import flat_curve
from specdec_lab.text import WHITESPACE_LEGEND, token_pieces, visible
from specdec_lab.viz.decoding import show_steps, step_tree_figure


def leaves(tree) -> int:
    """Nodes no other node hangs from: 1 for a chain, more wherever the tree branches."""
    return len(tree) - len({int(u) for u in tree.parents.tolist() if u >= 0})


if have_drafter:
    t1 = StepCost(lm.model).prepare(1, tree=True)(1)  # this machine's one-token verify
    flat = Memory()
    flat.slot(Memory.COST).update(model=lm.model, step=None, cost=StepCost.of(flat_curve(t1, demo_budget + 1),
                                                                              learn=False))  # fmt: skip
    demo = generate(lm, ids, method="eagle", tree="dynamic", weights=str(folder), max_new_tokens=max_new_tokens,
                    max_budget=demo_budget, width=demo_width, memory=flat)  # fmt: skip
    print(f"demonstration (flat curve, up to {demo_budget} drafted nodes plus the root, width {demo_width}): mean tree "
          f"{demo.proposer.get('nodes')} drafted nodes, mean accepted {demo.mean_accepted:.2f} (bonus included); equals "
          f"autoregressive decoding token for token: {demo.tokens == ar.tokens}")  # fmt: skip

    def per_step_se(result) -> float:
        """Standard error of the mean tokens a step emitted (bonus included), from the per-step counts."""
        counts = np.array([len(st.emitted) for st in result.steps], dtype=float)
        return float(counts.std(ddof=1) / np.sqrt(len(counts))) if len(counts) > 1 else float("inf")

    step_band = 2 * float(np.hypot(per_step_se(demo), per_step_se(eag)))  # two standard errors of the difference
    display(Markdown(
        compare(demo.proposer.get("nodes"), eag.proposer.get("nodes"),
                "Priced flat, the trees grew to {a:.1f} drafted nodes a step on average, against {b:.1f} on this "
                "machine's prices; ", "Priced flat, the trees stayed at {a:.1f} drafted nodes a step on average, "
                "against {b:.1f} on "
                "this machine's prices; ", "Priced flat, the trees kept about the size they have on this machine's "
                "prices ({a:.1f} against {b:.1f} drafted nodes a step); ", rel_tol=0.05)
        + compare(demo.mean_accepted, eag.mean_accepted,
                  "with them a step emitted more tokens ({a:.2f} against {b:.2f}, bonus included; the difference is "
                  "beyond two standard errors, ±{band:.2f}, from the per-step counts).",
                  "with them a step emitted fewer tokens ({a:.2f} against {b:.2f}, bonus included; the difference is "
                  "beyond two standard errors, ±{band:.2f}, from the per-step counts).",
                  "with them a step emitted {a:.2f} tokens against {b:.2f} (bonus included): a difference **within "
                  "noise** on this one short decode (two standard errors from the per-step counts: ±{band:.2f}), so "
                  "this run does not say that the extra nodes bought tokens.",
                  rel_tol=step_band / max(min(demo.mean_accepted, eag.mean_accepted), 1e-12), band=step_band)
    ))  # fmt: skip
    if default_step < 0:  # the most instructive step: most leaves, then most tokens accepted, then the earliest
        step = max(range(len(demo.steps)), key=lambda i: (leaves(demo.steps[i].tree), demo.steps[i].accepted, -i))
    else:
        step = min(default_step, len(demo.steps) - 1)
    s = demo.steps[step]
    tree_el = s.info.get("expected_length")  # the drafter's own E[L] for this tree (its confidences, bonus included)
    print(f"step {step} of {len(demo.steps)}: {len(s.tree) - 1} drafted nodes plus the root ({len(s.tree)} drawn, "
          f"{leaves(s.tree)} leaves, {s.info.get('levels', '?')} levels), {s.accepted} accepted, so L = "
          f"{len(s.emitted)} tokens emitted (bonus included)"
          + (f"; the drafter's confidences gave this tree E[L] = {tree_el:.2f}" if tree_el is not None else ""))  # fmt: skip
    print(WHITESPACE_LEGEND)
    fig = step_tree_figure(demo, step, lm.tokenizer)
    drawn = len(s.tree_tokens)  # the title counts as the text above does: drafted nodes, then the root
    # and shows the emitted text as the node labels do (↵ for a newline, not a repr's escape)
    said = "".join(token_pieces(s.emitted, lm.tokenizer, demo.prompt_tokens + [t for x in demo.steps[:step] for t in x.emitted]))
    fig.update_layout(title_text=(fig.layout.title.text or "").replace(
        f": {drawn} nodes,", f": {drawn - 1} drafted nodes plus the root,", 1).replace(
        f"emitted {said!r}", f"emitted '{visible(said, partial=False)}'", 1))  # fmt: skip
    print(f"saved {save_figure(fig, '10_dynamic_tree', FIGURES, png=not quick)}")
    display(fig)

# %% [markdown]
# The real decode's emitted text (this machine's cost model, not the demonstration's), one colour per step (one
# target forward); bold underlined tokens were drafted by EAGLE and accepted, the plain one closing each step is
# the target's bonus token:

# %% tags=["nbval-ignore-output"]
if have_drafter:
    print(f"{len(eag.tokens)} tokens in {eag.forwards} target forwards: mean accepted {eag.mean_accepted:.2f} "
          f"(bonus included); mean tree {eag.proposer.get('nodes')} drafted nodes plus the root")  # fmt: skip
    display(show_steps(eag, lm.tokenizer))

# %% [markdown]
# ## 5. The hybrid: which source drafted each accepted token
#
# `method="hybrid"` (`proposers/hybrid.py`) asks prompt lookup and the Medusa heads — and the EAGLE drafter when
# `sources=` names it, as the cell below does — for candidates each step, merges them into one token trie, values every node by the acceptance each source has
# shown so far in the run, and verifies the best tree the cost model prices — n-gram drafts where the text
# repeats, model drafts where it does not. The model sources cost drafting time, so after the lookup each step
# plans which of them to run (none, the heads, the drafter, or both), pricing each alternative by the chain it
# is expected to add at its measured seconds; `plans` counts the steps per choice. Below, the same prompt: each
# accepted draft token on the colour of the source that proposed it (where several sources proposed the
# same token, the trie merged them: each combination has its own colour in the legend), the target's own
# token of each step plain.

# %% tags=["nbval-ignore-output"]
from IPython.display import HTML

from specdec_lab import METHODS
from specdec_lab.viz.eagle_figures import source_html

if have_drafter and "hybrid" in METHODS:
    hyb = generate(lm, ids, method="hybrid", sources="prompt_lookup+medusa+eagle", weights=str(folder),
                   max_new_tokens=max_new_tokens)  # fmt: skip
    print(f"greedy hybrid equals autoregressive decoding token for token: {hyb.tokens == ar.tokens}; "
          f"mean accepted {hyb.mean_accepted:.2f} (bonus included); accepted drafts by source "
          f"{hyb.proposer.get('accepted_by')}; model sources planned per step {hyb.proposer.get('plans')}")  # fmt: skip
    display(HTML(source_html(hyb, lm.tokenizer)))
    planned = sum((hyb.proposer.get("plans") or {}).values())
    unplanned = [i for i, st in enumerate(hyb.steps) if not st.info.get("run")]  # no source ran: no plan made
    print(f"`plans` counts {planned} of the {hyb.forwards} steps"
          + (f"; step(s) {unplanned} made no plan: no room was left to draft (the last tokens under max_new_tokens), "
             "so no source ran and the target emitted its own token alone" if unplanned else "")
          + (" (the counts do not add up: see `hyb.steps[i].info`)" if planned + len(unplanned) != hyb.forwards else ""))  # fmt: skip
    # each model source's share, from the two counts above: steps it was planned on, accepted drafts it proposed
    # (alone or merged with another source's same token)
    by_src = hyb.proposer.get("accepted_by") or {}
    plans = hyb.proposer.get("plans") or {}
    share = {src_name: (sum(v for k, v in plans.items() if src_name in k.split("+")),
                        sum(v for k, v in by_src.items() if src_name in k.split("+")))
             for src_name in ("medusa", "eagle")}  # fmt: skip
    display(Markdown(
        "Per model source: "
        + "; ".join(f"{'the Medusa heads were' if k == 'medusa' else 'the EAGLE drafter was'} planned on {p} of "
                    f"the {planned} planned steps and proposed {a} of the {sum(by_src.values())} accepted drafts"
                    for k, (p, a) in share.items())
        + ". The planner chooses by each source's acceptance so far in this run and its measured seconds per step, "
        "not by section 1's accuracies"
        + ("; on this prompt the EAGLE drafter added no accepted token." if share["eagle"][1] == 0 else ".")
    ))  # fmt: skip
else:
    print("This section needs method 'hybrid' and a trained EAGLE drafter.")

# %% [markdown]
# ## 6. The speed table
#
# The benchmark (`python -m specdec_lab.bench`, notebook 09) times every method on the same prompts, order
# rotated per prompt. The results file named by `bench_file`, measured on the machine its caption names (not
# necessarily this notebook's): per method the prompts it ran, its mean accepted (tokens per target forward, bonus
# included), tokens/s (Σ tokens / Σ seconds), its speed-up over autoregressive decoding on the same prompts, and
# the share of prompts whose output is identical to autoregressive decoding's.

# %% tags=["nbval-ignore-output"]
from specdec_lab.viz.eagle_figures import speed_rows
from specdec_lab.viz.results import machine_label

try:
    bench = json.loads((REPO / bench_file).read_text())
except (OSError, ValueError) as e:
    bench = None
    print(f"{bench_file}: cannot read it ({e}); run `python -m specdec_lab.bench --methods autoregressive,eagle`")
if bench is not None:
    display(pd.DataFrame(speed_rows(bench)).set_index("method").style.format("{:.2f}", subset=[
        "mean accepted", "tokens/s", "speedup", "identical"]).set_caption(
        f"{bench_file}: {bench['prompts_done']} prompts, {bench['config']['max_new_tokens']} new tokens, measured on "
        f"{machine_label(bench['machine'])}"))  # fmt: skip

# %% [markdown]
# ## Check your understanding
#
# 1. A Medusa head j and EAGLE at draft position j both guess the token j places after the next one. What does
#    EAGLE see that head j does not?
#
#    <details><summary>Answer</summary>
#
#    The tokens drafted before position j and its own predicted features for them: EAGLE drafts
#    autoregressively, each step reading the previous step's output state and the token just drafted. Head j
#    reads one hidden state $h_t$ and must guess as if it knew what heads 1 to j − 1 said.
#    </details>
#
# 2. Why does a drafting vocabulary of M rows never change the decoded text, only the speed?
#
#    <details><summary>Answer</summary>
#
#    The target verifies every drafted token. A drafter that cannot name a token simply fails to propose it,
#    so that position is rejected and the target's own token is emitted: acceptance can drop, the output
#    cannot change. What a smaller M buys is a cheaper draft step: section 2's table shows the multiply-add proxy
#    c_MAC growing with M (the head's $M\,H$ term), so it falls as M shrinks; the measured ratio c is the
#    benchmark's.
#    </details>
#
# 3. Why train the drafter on its own unrolled outputs (training-time test) instead of only on the target's
#    true features?
#
#    <details><summary>Answer</summary>
#
#    While decoding, every draft step after the first reads the drafter's own, imperfect, features. A drafter
#    trained only on true features never sees that input, and its errors compound from step to step; unrolled
#    in training exactly as it runs, it learns to draft from what it will actually be given.
#    </details>
#
# ## Exercises
#
# Each exercise is a stub to fill in, then a check against the library's own function.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — tokens per step from the accuracy per draft position
#
# Section 1's table gives, per proposer, the teacher-forced accuracy $a_j$ at draft position $j$, as measured: the
# share of *every* scored response token where draft $j$ is right (teacher-forced, so not conditional on drafts
# $1..j-1$ being right). A chain of $k = 4$ drafts emits the accepted drafts plus the bonus; treating each $a_j$ as
# if it were that conditional chance gives the approximation
# $E[L] \approx 1 + a_1 + a_1 a_2 + a_1 a_2 a_3 + a_1 a_2 a_3 a_4$ (notebook 00's L: tokens one step emits). Compute
# it for every proposer of the table (`src[name]["accuracy"]`, first 4 positions): `{name: E[L]}`, with
# `chain_length(a_js)`, which returns E[L] for any list of accuracies. Then compare: write `rank(accuracies)`,
# which orders the names of a `{name: [a_1, a_2, ...]}` table by this E[L], highest first, and answer `order`, the
# table's proposers ranked by it (first 4 positions); the check also calls `rank` on a table of its own. Does the
# ranking follow the order by $a_1$ here (the table's first column), and must it on every table? The check compares
# with `specdec_lab.trees.build.expected_length`, the tree value Medusa's trees are sized by, on a chain; an answer
# that calls it is refused.

# %% tags=["exercise", "exercise-1"]
from specdec_lab.lab.course import watch
from specdec_lab.trees.build import expected_length  # noqa: F401 - watched, the check's reference

k_chain = 4
_watch = watch(globals(), "expected_length")


def chain_length(a_js: list[float]) -> float:
    ...  # E[L] of a chain whose draft j has accuracy a_js[j - 1], bonus included


def rank(accuracies: dict[str, list[float]]) -> list[str]:
    ...  # the names, highest chain E[L] first


answer = ...  # {proposer name: E[L] of a chain of k_chain drafts, bonus included}
order = ...  # rank(...) of the table's proposers, first k_chain positions: [proposer name, ...]

# %% tags=["solution", "exercise-1"]
def chain_length(a_js: list[float]) -> float:  # noqa: F811 - the stub's, filled in
    expected, reach = 1.0, 1.0  # the bonus, and the chance that every draft so far was accepted
    for a in a_js:
        reach *= a
        expected += reach
    return expected


def rank(accuracies: dict[str, list[float]]) -> list[str]:  # noqa: F811 - the stub's, filled in
    return sorted(accuracies, key=lambda n: -chain_length(accuracies[n]))


answer = {name: chain_length(source["accuracy"][:k_chain]) for name, source in src.items()}
order = rank({name: source["accuracy"][:k_chain] for name, source in src.items()})

# %% tags=["check", "exercise-1", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
import math

from specdec_lab.lab.course import check

chain_paths = [(0,) * d for d in range(1, k_chain + 1)]  # a chain: the top candidate at every depth
reference = {name: _watch["expected_length"](chain_paths, [[a] for a in s["accuracy"][:k_chain]])
             for name, s in src.items()}  # fmt: skip
# the check's own table: its order by a_1 and its order by the sum of the a_j both differ from its E[L] order
own = {"sure first draft": [0.7, 0.1, 0.1, 0.1], "steady": [0.5, 0.6, 0.6, 0.6],
       "weak first, then sure": [0.2, 0.95, 0.95, 0.95]}  # fmt: skip
own_length = {name: _watch["expected_length"](chain_paths, [[a] for a in acc]) for name, acc in own.items()}
orders = (sorted(reference, key=lambda n: -reference[n]), sorted(own_length, key=lambda n: -own_length[n]))
_ = check("E[L] of a 4-draft chain per proposer", answer, reference, watch=_watch,
          close=lambda a, r: isinstance(a, dict) and a.keys() == r.keys() and all(math.isclose(a[n], r[n], rel_tol=1e-9) for n in r),
          hint="Draft j counts only if drafts 1..j all hit: multiply, then add the bonus.")  # fmt: skip
_ = check("the proposers ranked by E[L], on the table and on the check's own accuracies",
          order if order is ... else (order, rank(dict(own))), orders, watch=_watch,
          close=lambda a, r: isinstance(a, tuple) and all(isinstance(x, list) for x in a) and a == r,
          hint="Sort the names by their chain's E[L], highest first (each position's accuracy multiplied in, not "
               "added; a_1 alone does not decide it).")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — the drafting vocabulary that buys the most
#
# Section 2 weighs a draft step's cost proxy c_MAC(M) against the coverage(M) of a drafting vocabulary of M rows.
# For every M in `tradeoff.sizes`, compute the closed-form speed-up of the best chain (k = 1..16), or 1 where no
# chain beats plain decoding: notebook 01's E[L] for a chain of k drafts, each accepted with α, over the cost of
# one step in target-token units (k draft steps at c_MAC(M) each, and one target step that verifies them). Which
# α does a drafter with M rows have, given `alpha`, the acceptance with every token nameable? Answer
# `{M: speed-up}` and `best`, the M that wins. The check compares with
# `specdec_lab.eagle.vocab_cost.chain_speedup` (an answer that calls it is refused). Then answer for yourself: why
# is the winner the smallest or the full vocabulary, or neither?

# %% tags=["exercise", "exercise-2"]
from specdec_lab.eagle.vocab_cost import chain_speedup  # noqa: F401 - watched, the check's reference
from specdec_lab.lab.course import watch

_watch = watch(globals(), "chain_speedup")
answer = ...  # {M: the best chain's closed-form speed-up}
best = ...  # the M with the largest speed-up

# %% tags=["solution", "exercise-2"]
answer = {}
for m, c_mac, cov in zip(tradeoff.sizes, tradeoff.c, tradeoff.coverage, strict=True):
    a = alpha * cov  # a token outside the drafting vocabulary can never be proposed
    answer[m] = max([1.0] + [(1 - a ** (k + 1)) / (1 - a) / (k * c_mac + 1) for k in range(1, 17)])
best = max(answer, key=answer.get)

# %% tags=["check", "exercise-2", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
reference = {m: _watch["chain_speedup"](alpha * cov, c_mac)[0]
             for m, c_mac, cov in zip(tradeoff.sizes, tradeoff.c, tradeoff.coverage, strict=True)}  # fmt: skip
_ = check("the best chain's speed-up per vocabulary size", answer, reference, watch=_watch,
          close=lambda a, r: isinstance(a, dict) and a.keys() == r.keys() and all(math.isclose(a[m], r[m], rel_tol=1e-9) for m in r),
          hint="Scale the acceptance by the coverage: a drafter cannot propose a token it cannot name.")  # fmt: skip
_ = check("the winning M", best, max(reference, key=reference.get), close=lambda a, r: a == r,
          hint="The M whose speed-up is largest in your dict.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★★ — accuracy per draft position, teacher-forced
#
# `run` below unrolls an EAGLE drafter, `drafter` (the shipped one that `weights` names; section 3's live drafter
# where there is none), on a fixed batch of held-out examples, `held`, for a few steps: `run.logits[i]` holds, for
# every row where `masks[i]` is True, the drafter's scores over its drafting vocabulary at step i (draft position
# i + 1). Its guess is the top-1 row mapped to a target token by `drafter.target_ids`; the truth at those rows is
# the target's greedy token `shifted(held.greedy, 1 + i)` (row u of `greedy` is the token after u; the step-i
# prediction at row u is about the token i + 1 places later). Compute the accuracy at each draft position (a list
# of fractions). The check compares with `specdec_lab.train.eagle_ttt.accuracy`, the definition section 1 uses (an
# answer that calls it is refused).

# %% tags=["exercise", "exercise-3"]
from specdec_lab.lab.course import watch
from specdec_lab.proposers.eagle import get_eagle_drafter
from specdec_lab.train.eagle_ttt import accuracy, shifted  # noqa: F401 - accuracy: watched, the check's reference

# section 3 imported the same function as `position_hits`: that name is watched too, so no alias of the reference
# in scope passes the check
_watch = watch(globals(), "accuracy", *[n for n in ("position_hits",) if n in globals()])

drafter = get_eagle_drafter(str(folder), lm.model) if have_drafter else trainer.d  # a trained drafter where one exists
held = teacher(lm.model, drafter, held_ex[:train_batch]) if have_drafter else held_batch
positions = 4
masks = [shifted(held.valid, 2 + i, False) for i in range(positions)]  # rows whose token i + 2 later is a response token
with torch.no_grad():
    run = unroll(drafter, held.features, held.ids, positions, rows=masks)
answer = ...  # [accuracy at draft position 1, 2, ...]

# %% tags=["solution", "exercise-3"]
answer = []
for i, (logits, mask) in enumerate(zip(run.logits, masks, strict=True)):
    guess = drafter.target_ids[logits.argmax(-1)]  # drafting-vocabulary rows -> target token ids
    truth = shifted(held.greedy, 1 + i)[mask]
    answer.append(float((guess == truth).double().mean()))

# %% tags=["check", "exercise-3"]
_watch.begin_check()  # from here the references are the check's own
with torch.no_grad():
    hits, total = _watch["accuracy"](drafter, held, positions)
_reference = [h / t for h, t in zip(hits, total, strict=True)]
_close = lambda a, r: len(a) == len(r) and all(math.isclose(x, y, abs_tol=1e-6) for x, y in zip(a, r, strict=True))  # noqa: E731
_ = check("accuracy per draft position", answer, _reference, watch=_watch, close=_close,
          hint="Map the argmax through target_ids, and compare with greedy shifted by i + 1 at the masked rows.")  # fmt: skip


# does the check have teeth? Three plausible wrong answers, computed here, must each disagree with the reference
def _wrong(mapped: bool, by: int) -> list[float]:
    out = []
    for i, (logits, mask) in enumerate(zip(run.logits, masks, strict=True)):
        guess = logits.argmax(-1)
        guess = drafter.target_ids[guess] if mapped else guess
        out.append(float((guess == shifted(held.greedy, by + i)[mask]).double().mean()))
    return out


_wrongs = {"the rows left unmapped (no target_ids)": _wrong(False, 1), "the truth shifted by i + 2": _wrong(True, 2),
           "the truth shifted by i": _wrong(True, 0)}  # fmt: skip
_blunt = [name for name, w in _wrongs.items() if _close(w, _reference)]
print(f"✓ the check tells the right answer from each of {len(_wrongs)} plausible wrong ones ("
      + "; ".join(_wrongs) + ")" if not _blunt else
      f"⚠ the check cannot tell the right answer from: {'; '.join(_blunt)} (this drafter's guesses are too "
      "uniform there); a trained drafter at `weights` gives the check teeth")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - EAGLE drafts in the target's feature space from features the verify forward already computed; EAGLE-3 fuses
#   a low, a middle and a high layer, and its own output stands in for the next position's features.
# - EAGLE's drafter carries its own features forward, where Medusa's heads each guess from one hidden state;
#   section 1 measures, with one definition on the same held-out tokens, how much of its position-1 accuracy each
#   keeps over the draft positions.
# - On a small target a full-vocabulary head dominates a draft step: a reduced drafting vocabulary lowers the
#   cost proxy c_MAC a great deal, down to the drafter's fixed fc and layer, while covering most of the target's
#   tokens, and it never changes the output.
# - Greedy EAGLE with dynamic (EAGLE-2) trees decodes exactly what autoregressive decoding does; its speed-up on
#   a CPU is the benchmark's to measure (section 6).
#
# ## Further reading
#
# - [EAGLE, Li et al. 2024](https://arxiv.org/abs/2401.15077): drafting at the feature level (section 1).
# - [EAGLE-2, Li et al. 2024](https://arxiv.org/abs/2406.16858): dynamic draft trees from the drafter's confidence
#   (section 4).
# - [EAGLE-3, Li et al. 2025](https://arxiv.org/abs/2503.01840): fused multi-layer features and training-time test
#   (the architecture above, section 3).
# - [Medusa, Cai et al. 2024](https://arxiv.org/abs/2401.10774): the independent heads section 1 compares with.
