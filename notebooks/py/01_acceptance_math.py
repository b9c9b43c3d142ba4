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
# # 01 · The acceptance math of speculative decoding
#
# A draft model proposes *k* tokens; the target checks them in one forward and keeps a prefix. How many
# tokens does a step emit, how fast is that, and how long should the draft be? Everything follows from one
# number, the **acceptance rate** α, and one ratio, the **cost** c of a draft step relative to a target step.
#
# ### Learning objectives
#
# After this notebook you can:
#
# - **derive** α = Σ min(p, q) = 1 − TV(p, q) and show that speculative sampling emits tokens distributed
#   exactly as p;
# - **compute** E[L], the expected tokens per step, for a given α and k, and check it by Monte Carlo;
# - **find** the optimal draft length k* for α and c, first with a verify forward that costs one target step
#   whatever k is, then on a cost curve t(n) (an example curve here; notebook 00 measures your machine's);
# - **convert** between the conventions papers report (α per token; τ and "mean accepted" per step) and apply
#   the formulas to published numbers.
#
# ### Prerequisites
#
# Notebook 00 (the loop, the bonus token, the cost curve t(n)) and basic probability (expectations, the
# geometric distribution). Notation: notebook 00's table — p (target), q (draft), α, k, c = T_draft / T_target,
# τ, L (tokens one step emits, bonus included), E[L], and "mean accepted" (tokens per target forward, bonus
# included) — the symbols of [Leviathan et al. 2023](https://arxiv.org/abs/2211.17192).
#
# 1. α = 1 − TV(p, q): why speculative sampling accepts with exactly that probability, and stays exact;
# 2. tokens per step: E[L] = (1 − α^{k+1}) / (1 − α), checked by Monte Carlo;
# 3. speedup (1 − α^{k+1}) / ((1 − α)(kc + 1)) as surfaces and curves, and the optimal k;
# 4. the measured form: E[L]·t(1) > k·T_draft + t(k+1);
# 5. sliders to explore;
# 6. what the papers report, and the formulas of sections 2 and 3 applied to their α;
#
# then questions, exercises, takeaways and further reading. All formulas live in `specdec_lab.cost.theory`;
# this notebook derives them, checks them and draws them.

# %% tags=["parameters"]
quick: bool = False  # CI: fewer Monte Carlo trials (same code paths)
trials: int = 200_000  # Monte Carlo trials per check
c: float = 0.05  # cost ratio (draft step over target step) for the figures
k_max: int = 16  # longest draft length considered
seed: int = 0  # random seed

# %%
if quick:
    trials = min(trials, 20_000)

from specdec_lab.lab.course import start

FIGURES = start("../results/figures" if quick else "../figures", seed=seed, stem="01_acceptance_math")  # quick: figures/ untouched

# %% [markdown]
# ## 1. One token: α = Σ min(p, q) = 1 − TV(p, q)
#
# Speculative sampling ([Leviathan et al. 2023](https://arxiv.org/abs/2211.17192);
# [Chen et al. 2023](https://arxiv.org/abs/2302.01318), who found the same rule independently) draws x ~ q and
# **accepts it with probability min(1, p(x)/q(x))**; on rejection it draws from the *residual*
# norm(max(0, p − q)). Two facts follow in two lines each.
#
# *Acceptance probability.* P(accept) = Σ_x q(x)·min(1, p(x)/q(x)) = Σ_x min(q(x), p(x)) = α. Since
# Σ p = Σ q = 1, Σ min(p, q) = 1 − ½ Σ |p − q| = 1 − TV(p, q).
#
# *Exactness.* P(emit x) = min(p, q)(x) + (1 − α)·max(0, p − q)(x) / Σ max(0, p − q). The residual's
# mass is Σ max(0, p − q) = 1 − Σ min(p, q) = 1 − α, so the second term is max(0, p − q)(x) and
# P(emit x) = min(p, q)(x) + max(0, p − q)(x) = p(x). The draft changes the *speed*, never the output.
#
# A naive check with Python loops, then the library:

# %% tags=["nbval-check-output"]
import numpy as np
import torch

from specdec_lab.cost.theory import acceptance_rate, tv_distance

p = np.array([0.50, 0.25, 0.15, 0.10, 0.00])
q = np.array([0.30, 0.40, 0.05, 0.05, 0.20])
alpha_naive = sum(min(pi, qi) for pi, qi in zip(p, q, strict=True))
tv_naive = 0.5 * sum(abs(pi - qi) for pi, qi in zip(p, q, strict=True))
alpha_lib = float(acceptance_rate(torch.tensor(p), torch.tensor(q)))
assert abs(alpha_naive - alpha_lib) < 1e-12 and abs(alpha_naive - (1 - tv_naive)) < 1e-12
print(f"α = Σ min(p, q) = {alpha_naive:.3f} = 1 − TV = {1 - float(tv_distance(torch.tensor(p), torch.tensor(q))):.3f}")

# %%
import pandas as pd

from specdec_lab.cost.theory import simulate_acceptance

sim = simulate_acceptance(p, q, trials=trials, seed=seed)
se = np.sqrt(p * (1 - p) / trials)
pd.DataFrame(
    {"p (target)": p, "q (draft)": q, "emitted (simulated)": sim["histogram"], "|emitted − p| / SE": np.abs(sim["histogram"] - p) / np.maximum(se, 1e-12)},
    index=pd.Index([f"x{i}" for i in range(len(p))], name="token"),
).round(4)

# %%
print(f"simulated acceptance {sim['acceptance']:.4f} vs α = {sim['alpha']:.4f} (SE {np.sqrt(sim['alpha'] * (1 - sim['alpha']) / trials):.4f})")
assert abs(sim["acceptance"] - sim["alpha"]) < 5 * np.sqrt(sim["alpha"] * (1 - sim["alpha"]) / trials)
assert np.all(np.abs(sim["histogram"] - p) < 5 * se + 1e-12)

# %% [markdown]
# Note token x4: the draft proposes it (q > 0 in the table above), the target never wants it (p = 0), and it is
# never emitted. Tokens the target wants *more* than the draft (x0, x2, x3) are topped up by the residual.
# Temperature, top-k and top-p change p and q but not the argument, as long as the *same* warping is
# applied to both (`specdec_lab.sampling.warp_probs`): notebook 02 checks that on the real model and
# `tests/test_speculative.py` on tiny ones, with a chi-square test.

# %% [markdown]
# ## 2. Tokens per step: (1 − α^{k+1}) / (1 − α)
#
# Treat acceptances along the chain as independent with probability α each (the i.i.d. assumption of
# Leviathan et al.; section 3 of notebook 02 tests it). A step accepts A of its k drafts, A truncated-geometric:
# P(A = j) = α^j (1 − α) for j < k and P(A = k) = α^k. It always emits the bonus token too, so it emits
# L = A + 1 tokens, and
#
#     E[L] = Σ_{j=0..k} P(A ≥ j) = Σ_{j=0..k} α^j = (1 − α^{k+1}) / (1 − α).
#
# Edge cases: α = 0 gives 1 (plain decoding), α = 1 gives k + 1, k = 0 gives 1.
#
# **Predict, then run.** At $\alpha = 0.8$, a step with k = 4 drafts emits some number of tokens. Does doubling
# the draft to k = 8 nearly double it? Write down your guess, then run the next cell: its table has both.

# %% tags=["prediction", "nbval-check-output"]
from specdec_lab.cost.theory import expected_tokens_per_step, simulate_tokens_per_step

rows = []
for a in (0.0, 0.5, 0.8, 0.95, 1.0):
    for k in (0, 1, 4, 8):
        sims = simulate_tokens_per_step(a, k, steps=trials // 10, seed=seed)
        naive = sum(a**j for j in range(k + 1))  # the series, summed by hand
        assert abs(naive - expected_tokens_per_step(a, k)) < 1e-12
        rows.append({"α": a, "k": k, "formula": expected_tokens_per_step(a, k), "z (simulated − formula)": (sims.mean() - naive) / max(sims.std() / np.sqrt(len(sims)), 1e-12)})
table = pd.DataFrame(rows)
assert (table["z (simulated − formula)"].abs() < 5).all()
table.pivot(index="α", columns="k", values="formula").map(lambda v: f"{v:.3f}")  # one format: 1.000, not 1.0

# %%
from specdec_lab.viz.acceptance import monte_carlo_figure
from specdec_lab.viz.figures import save_figure

fig = monte_carlo_figure(steps=trials // 10, seed=seed)
print(f"saved {save_figure(fig, '01_monte_carlo', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %% [markdown]
# The distribution of accepted drafts A itself (not just the mean of L = A + 1), against the truncated geometric
# law, each gap in standard errors of the simulated frequency (z):

# %%
from IPython.display import Markdown, display

from specdec_lab.cost.theory import accepted_length_pmf
from specdec_lab.lab.course import compare

a, k = 0.8, 6
sims = simulate_tokens_per_step(a, k, steps=trials // 10, seed=seed)
pmf_law, freq_sim = accepted_length_pmf(a, k), np.bincount(sims - 1, minlength=k + 1) / len(sims)
z_pmf = (freq_sim - pmf_law) / np.sqrt(pmf_law * (1 - pmf_law) / len(sims))  # gaps in standard errors
j_far = int(np.argmax(np.abs(z_pmf)))
display(Markdown(
    f"Over {len(sims):,} simulated steps, the largest gap is at j = {j_far} accepted drafts, "
    f"{abs(z_pmf[j_far]):.1f} standard errors: "
    + compare(abs(z_pmf[j_far]), 3.0, "beyond sampling noise (over {b:.0f}): the law does not match this simulation",
              "within sampling noise (under {b:.0f}): the simulation matches the law",
              within="at the edge of sampling noise ({b:.0f})")
    + "."
))  # fmt: skip
pd.DataFrame(
    {"formula": pmf_law, "simulated": freq_sim, "z (simulated − formula)": z_pmf},
    index=pd.Index(range(k + 1), name=f"drafts accepted (α={a}, k={k})"),
).round({"formula": 4, "simulated": 4, "z (simulated − formula)": 2})

# %% [markdown]
# ## 3. Speedup and the optimal draft length
#
# A step costs k draft steps plus one target forward, (kc + 1) in units of a target step, if verifying
# k + 1 tokens costs what one costs (memory-bound decoding; section 4 drops that assumption). So
#
#     speedup(α, k, c) = (1 − α^{k+1}) / ((1 − α)(kc + 1)).
#
# Longer drafts emit more tokens but each extra draft token is less likely to survive (α^i) and costs c:
# when c > 0 and α < 1 the speedup has a finite optimum k*(α, c), since E[L] stays below 1/(1 − α) while kc + 1
# grows without bound. That optimum can be the boundary k = 0 ("don't speculate"): one draft token pays only if
# (1 + α)/(1 + c) > 1, that is α > c, and the objective being unimodal in k, where α ≤ c no longer draft pays
# either (the heat map's k* = 0 corner, counted under it). At c = 0 it never falls with k; at a c small against 1 − α it still falls, but only past a k*
# that can lie beyond the longest draft the search tries, `k_max`. Wherever the search's best k is that cap, the
# optimum lies at or beyond it: there the surface below marks its optimal-k line with
# black diamonds ("at the search cap: k* ≥ k_max"), the table shows "k* ≥ k_max (search cap)" with the speedup at
# k_max rounded down (a lower bound: at c = 0 the speedup is E[L], which stays below 1/(1 − α)), and the heat map
# of k* after the table labels its colour bar "≥ k_max (the search cap)" — a limit of the search, not an
# optimum. There is no closed
# form for the integer optimum, but the objective is unimodal in k, so `theory.optimal_k` scans it; it counts
# a gain smaller than a relative $10^{-9}$ as a tie and gives the tie to the shorter draft (measured costs
# carry float rounding), which matters for small α at c = 0, as the note under the heat map shows, and wherever
# two draft lengths give exactly the same speedup: the table below marks each such tie.

# %%
from specdec_lab.viz.acceptance import speedup_surface_figure

fig = speedup_surface_figure(c=c, k_max=k_max)
print(f"saved {save_figure(fig, '01_speedup_surface', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %%
from specdec_lab.viz.acceptance import speedup_curves_figure

fig = speedup_curves_figure(c=c, k_max=k_max)
print(f"saved {save_figure(fig, '01_speedup_curves', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %% tags=["nbval-check-output"]
import math

from specdec_lab.cost.theory import expected_speedup, optimal_k

alphas_t = (0.5, 0.6, 0.7, 0.8, 0.9)
cs_t = (0.0, 0.02, 0.05, 0.1, 0.2)


def tied_with(a, cc):  # the other k whose speedup ties k*'s (within optimal_k's relative 1e-9): k* won by the tie rule
    k_best = optimal_k(a, cc, k_max)
    s_best = expected_speedup(a, k_best, cc)
    return [k for k in range(k_max + 1) if k != k_best and abs(expected_speedup(a, k, cc) - s_best) <= 1e-9 * s_best]


pd.DataFrame(
    [
        [  # at the search cap the optimum lies at k_max or beyond, and so does its speedup: the speedup at k_max,
            # rounded down, is a lower bound (rounded to nearest, 1.99998 would print as an unreachable 2.00)
            f"k* ≥ {k_max} (search cap), ≥ {math.floor(expected_speedup(a, k_max, cc) * 100) / 100:.2f}×"
            if optimal_k(a, cc, k_max) == k_max
            else f"k*={optimal_k(a, cc, k_max)}"
            + (f" (tied with k={', '.join(map(str, tied_with(a, cc)))})" if tied_with(a, cc) else "")
            + f", {expected_speedup(a, optimal_k(a, cc, k_max), cc):.2f}×"
            for cc in cs_t
        ]
        for a in alphas_t
    ],  # fmt: skip
    index=pd.Index(alphas_t, name="α"),
    columns=pd.Index(cs_t, name="c"),
)

# %%
from specdec_lab.viz.acceptance import optimal_k_figure

fig = optimal_k_figure(k_max=k_max)
print(f"saved {save_figure(fig, '01_optimal_k', FIGURES).html.name}")  # the name: no machine's path in the output
fig

# %%
from IPython.display import Markdown

_hm = fig.data[0]  # the heat map's own grid: its c = 0 row, read back rather than recomputed
_x, _y, _z = np.asarray(_hm.x), np.asarray(_hm.y), np.asarray(_hm.z)
_row = _z[int(np.argmin(np.abs(_y)))]  # k* along c = 0
_short = (_row < k_max) & (_x > 0)  # α > 0 whose k* stops below the cap
if _short.any():
    _gain = max(  # what the cap would add over the row's k*: the size of the "tie"
        expected_speedup(a, k_max, 0.0) / expected_speedup(a, int(kb), 0.0) - 1
        for a, kb in zip(_x[_short], _row[_short], strict=True)
    )
    _steps = "rises unevenly (here and there one step down)" if np.any(np.diff(_row) < 0) else "rises step by step"
    _capped = _x[(_row == k_max) & (_x > 0)]
    _reach = f"reaches the cap only from α ≈ {_capped.min():.2f}" if _capped.size else "never reaches the cap"
    _note = (
        f"The heat map's c = 0 row {_reach}; for "
        f"0 < α ≤ {_x[_short].max():.2f} it shows k* = {int(_row[_short].min())}…{int(_row[_short].max())}, and it "
        f"{_steps}. That is the tie rule, not an optimum: at c = 0 more drafts never hurt, but for small α "
        f"each one adds only α^(k+1) tokens, and drafting up to the cap instead would add at most a relative "
        f"{_gain:.1e} to the speedup there, inside the $10^{{-9}}$ that `optimal_k` calls a tie. Read that corner "
        "as \"any k will do\"."
    )
else:
    _note = "The heat map's c = 0 row sits at the search cap for every α > 0: at c = 0 more drafts never hurt."
_A, _C = np.meshgrid(_x, _y)  # the grid's α and c, cell by cell as _z
_inside = (_A > 0) & (_C > 0)
_none = (_z == 0) & _inside  # cells whose optimum is no drafting at all
_same = np.array_equal(_none, (_A <= _C) & _inside)
_rule = "exactly the cells with α ≤ c" if _same else "not the same cells as those with α ≤ c"
_note += (
    f" At c > 0 and α > 0, {int(_none.sum())} of the grid's {int(_inside.sum())} cells have k* = 0 — {_rule}: "
    "there the optimum is the boundary, not drafting at all."
)
Markdown(_note)

# %%
from IPython.display import Markdown

from specdec_lab.lab.course import compare


def _best(a, cc):  # (k*, speedup at k*) from the formula
    k_best = optimal_k(a, cc, k_max)
    return k_best, expected_speedup(a, k_best, cc)


def _k_text(a, cc, k_best):  # "k* = 1", with the draft lengths that tie it, if any
    ties = tied_with(a, cc)
    return f"k* = {k_best}" + (
        f", tied with k = {', '.join(map(str, ties))}: the tie rule gives it to the shorter draft" if ties else ""
    )


(k_cheap, s_cheap), (k_dear, s_dear) = _best(0.5, 0.05), _best(0.5, 0.2)
Markdown(
    f"Reading the table: at c = 0.05 a draft with α = 0.5 promises {s_cheap:.2f}× *in theory* "
    f"({_k_text(0.5, 0.05, k_cheap)}); "
    f"at c = 0.2 (a made-up, dearer draft: four times the cost per step) the same α gives {s_dear:.2f}× "
    f"({_k_text(0.5, 0.2, k_dear)}). That is why the draft in notebook 02 evaluates only a reduced drafting "
    "vocabulary: it cuts c, and "
    # tied draft lengths count on either side: the order holds whichever of them the tie rule picks
    + compare(min([k_cheap, *tied_with(0.5, 0.05)]), max([k_dear, *tied_with(0.5, 0.2)]),
              "the optimal k grows as c falls", "the optimal k shrinks as c falls",
              within="the optimal k stays the same while the speedup grows")
    + ". Section 4 shows what a verification cost that grows with the tokens verified does to that promise, on an "
    "example curve (notebook 00 measures a real one)."
)  # fmt: skip

# %% [markdown]
# ## 4. The measured form: E[L]·t(1) > k·T_draft + t(k+1)
#
# On real hardware verifying k + 1 tokens is *not* free: a forward over several tokens costs more than
# one over a single token, by an amount that belongs to the machine (notebook 00 measures the curve t(n) of
# *your* machine and says whether its dips lie beyond its repeats' noise; the appendix, notebook
# `12_appendix_kernels`, shows how the matmul kernels under it change it). With seconds instead of units, a
# step that emits E[L] tokens on average beats autoregressive decoding (E[L] forwards of t(1) seconds each)
# exactly when its own seconds, k draft steps of T_draft and one verify forward over k + 1 tokens, t(k + 1), are
# fewer:
#
#     E[L] · t(1)  >  k · T_draft + t(k + 1)
#
# and the speedup is their ratio (`theory.measured_speedup`). `specdec_lab.cost.CostCurve` holds a
# measured t(n); the draft proposer picks k* = argmax E[L] / (k·T_draft + t(k+1)) every step from
# its running estimate of α (from its recent acceptances) and its measured draft step time (`DraftLength("cost")`).
#
# This notebook stays deterministic (no model, no timing), so it works on an **example curve**, made up for
# this notebook (no stored measurement behind it) — and a made-up draft step time. The curve is a
# *hypothetical* shape, chosen to show what the measured form does with a curve that is not monotonic: a slow
# 2–3-token path that costs more than the 4- and 5-token forwards. It is not the curve notebook 00 measured,
# nor a claim that a CPU has one; read what follows as what the rule would do on such a machine:

# %% tags=["nbval-check-output"]
from specdec_lab.cost import CostCurve
from specdec_lab.cost.theory import measured_speedup, speculation_pays

curve = CostCurve(sizes=[1, 2, 3, 4, 5, 8], seconds=[0.061, 0.100, 0.128, 0.088, 0.095, 0.100])  # an example
t_draft = 0.005  # a made-up draft step time
print("example t(n), ms:", dict(zip(curve.sizes, [round(s * 1e3) for s in curve.seconds], strict=True)))
print("t(n)/t(1):", dict(zip(curve.sizes, [round(r, 2) for r in curve.relative()], strict=True)))
print(f"T_draft = {t_draft * 1e3:.0f} ms, c = T_draft / t(1) = {t_draft / curve(1):.3f}")
rows = []
for a in (0.3, 0.45, 0.6, 0.7, 0.8):
    k_unit = optimal_k(a, t_draft / curve(1), k_max)
    k_meas = optimal_k(a, t_draft, k_max, verify_cost=curve)  # seconds throughout: the same argmax
    rows.append(
        {
            "α": a,
            "k* (unit verify cost)": k_unit,
            "speedup (unit)": round(expected_speedup(a, k_unit, t_draft / curve(1)), 2),
            "k* (example curve)": k_meas,
            "speedup (example curve)": round(measured_speedup(a, k_meas, curve(1), t_draft, curve), 2),
            "pays at k = max(k*, 1)?": speculation_pays(a, max(k_meas, 1), curve(1), t_draft, curve),
        }
    )
pd.DataFrame(rows).set_index("α")

# %%
grid = [i / 100 for i in range(100)]
break_even = next(a for a in grid if optimal_k(a, t_draft, k_max, verify_cost=curve) > 0)
slow = [n for n in curve.sizes[1:-1] if curve(n) > min(curve(m) for m in curve.sizes if m > n)]  # dearer than a larger size
skipped = (
    f"skips the sizes that cost more than a larger one ({', '.join(map(str, slow))} tokens: up to "
    f"{max(curve(n) / curve(1) for n in slow):.2f}× a single-token forward)"
    if slow
    else "follows the measured cost"
)
unit_s = [expected_speedup(r["α"], r["k* (unit verify cost)"], t_draft / curve(1)) for r in rows]
meas_s = [measured_speedup(r["α"], r["k* (example curve)"], curve(1), t_draft, curve) for r in rows]
bound = (
    "the textbook formula (a verify that costs one target step) is an upper bound on the measured form's speedup "
    "at every α of the table, since every t(k + 1) on it costs more than t(1)"
    if all(u >= m for u, m in zip(unit_s, meas_s, strict=True)) and min(curve.relative()[1:]) > 1
    else "the textbook formula (a verify that costs one target step) is not an upper bound at every α of the table"
)
Markdown(
    f"On this made-up curve (not a measurement), {bound}; k* "
    f"{skipped}, and a draft needs "
    f"α ≈ {break_even:.2f} just to break even (below it k* = 0: don't speculate). Notebook 02 measures α, "
    "T_draft and t(k + 1) for the real draft model and compares the predicted speedup with the one the "
    "benchmark observes."
)

# %% [markdown]
# ## 5. Explore
#
# The plain cell below computes the default view (its numbers are what papermill and nbval check); the
# sliders under it call the same function, `specdec_lab.viz.acceptance.speedup_explorer`, and redraw the
# figure below them. Until you move one, a static snapshot of the default view stands there.

# %% tags=["nbval-check-output"]
from specdec_lab.viz.acceptance import speedup_explorer

fig, numbers = speedup_explorer(alpha=0.7, k=4, c=c, k_max=k_max)
print(numbers)

# %%
import ipywidgets as w

from specdec_lab.lab.widgets import Dashboard

explorer = Dashboard(
    {
        "alpha": w.FloatSlider(value=0.7, min=0.0, max=0.99, step=0.01, description="α", continuous_update=False),
        "k": w.IntSlider(value=4, min=0, max=k_max, description="k", continuous_update=False),
        "c": w.FloatSlider(value=c, min=0.0, max=0.5, step=0.01, description="c", continuous_update=False),
    },
    lambda alpha, k, c: speedup_explorer(alpha, k, c, k_max),
    header="<b>Move a slider</b> to redraw the figure below for other α, k, c.",
    initial=(fig, numbers),
    what=f"α = 0.7, k = 4, c = {c}",
)
explorer


# %% [markdown]
# ## 6. What the papers report
#
# `data/literature/published.csv` holds published results, each row with the URL it was read at and the
# text quoted there (`specdec_lab.bench.literature`). A few of them — the original speculative sampling paper
# ([Leviathan et al. 2023](https://arxiv.org/abs/2211.17192)), the Spec-Bench leaderboard
# ([Xia et al. 2024](https://github.com/hemingkx/Spec-Bench): one GPU and one target for every method, so those
# rows compare with each other) and EAGLE-3 ([Li et al. 2025](https://arxiv.org/abs/2503.01840)):

# %%
from IPython.display import Markdown, display

from specdec_lab.bench.literature import published, summary_table

lit = published()
few = lit[
    (lit["paper"].str.startswith("Leviathan") & (lit["task"] == "WMT EnDe") & (lit["temperature"] == 0)
     & lit["draft"].str.startswith("T5-small"))
    | (lit["paper"].str.contains("Spec-Bench")
       & lit["method"].isin(["speculative_sampling", "prompt_lookup", "medusa", "lookahead"]))
    | (lit["paper"].str.contains("EAGLE-3") & (lit["temperature"] == 0) & lit["model"].str.startswith("Vicuna-13B"))
]  # fmt: skip
with pd.option_context("display.max_colwidth", None):  # whole cell texts, none cut off with "..."
    display(summary_table(few))
for _paper, _note in few[few["note"].str.contains("ambiguous", na=False)].groupby("paper")["note"].first().items():
    _clause = next(part.strip() for part in _note.split(";") if "ambiguous" in part)  # the row's own caveat
    display(Markdown(f"*{_paper}, the hardware column: the source reads two ways — {_clause}.*"))

# %% [markdown]
# The acceptance column uses each paper's own convention, and they measure different things: a probability per
# drafted token (α), or tokens per target call with the bonus counted (τ, mean accepted):
#
# * **α** (Leviathan et al., arXiv 2211.17192, Corollary 3.6) is this notebook's α: the probability that
#   *one* drafted token is accepted, α = E[Σ min(p, q)]. Tokens per target call follow from it and the
#   draft length γ (their name for k) by section 2's formula.
# * **τ** (EAGLE, EAGLE-2, EAGLE-3: "average acceptance length") and Spec-Bench's "mean accepted tokens"
#   count the tokens emitted per draft-verify cycle *including* the target's bonus token, so plain
#   decoding scores 1 (source: `specdec_lab/bench/literature.py`, each row's `checked` text). That is a
#   measured E[L] of section 2 (notebook 00's τ, the library's "mean accepted"), not α: a τ is compared with
#   (1 − α^{k+1})/(1 − α), never with α.
# * The speedups are wall-clock ratios against each source's own baseline, on its own hardware; they
#   compare within one source, not across sources, and not with a 2-core CPU.
#
# Leviathan et al. give α, γ and the cost ratio c together, so section 3's formulas can be applied to
# their own numbers (γ is their k): tokens per target call E[L] = (1 − α^{γ+1})/(1 − α), and the expected speedup
# E[L]/(γc + 1) — which should reproduce the "expected" column of their Table 4 (quoted in each row's
# `note`) — beside the wall-clock speedup they measured.

# %% tags=["nbval-check-output"]
with_alpha = lit[(lit["metric"] == "alpha") & lit["draft_len"].notna() & lit["cost_c"].notna()]
alpha_rows = pd.DataFrame(
    {
        "draft": with_alpha["draft"],
        "task": with_alpha["task"],
        "T": with_alpha["temperature"],
        "α": with_alpha["value"],
        "γ": with_alpha["draft_len"].astype(int),
        "c": with_alpha["cost_c"],
        "E[L] = (1 − α^(γ+1))/(1 − α)": [expected_tokens_per_step(a, int(g)) for a, g in zip(with_alpha["value"], with_alpha["draft_len"], strict=True)],
        "expected speedup E[L]/(γc + 1)": [expected_speedup(a, int(g), cc) for a, g, cc in zip(with_alpha["value"], with_alpha["draft_len"], with_alpha["cost_c"], strict=True)],
        "expected (paper, Table 4)": with_alpha["note"].str.extract(r"expected factor ([\d.]+)X", expand=False).astype(float),
        "measured speedup (paper)": with_alpha["speedup"],
    }
).reset_index(drop=True)
quoted = alpha_rows["expected (paper, Table 4)"].notna()
# α is printed to two decimals in the paper: the recomputed factor may differ from theirs in the last digit
agree = (alpha_rows["expected speedup E[L]/(γc + 1)"] - alpha_rows["expected (paper, Table 4)"])[quoted].abs() <= 0.1
print(f"the formula reproduces Table 4's expected speedup in {int(agree.sum())} of {int(quoted.sum())} rows (to ±0.1)")
alpha_rows.round(2)

# %%
diff = alpha_rows["measured speedup (paper)"] - alpha_rows["expected speedup E[L]/(γc + 1)"]
# the paper's rounding: speedups to one decimal (±0.05), α to two (±0.005, moving the expected speedup by `wobble`)
wobble = pd.Series(
    [abs(expected_speedup(min(a + 0.005, 0.999), g, cc) - expected_speedup(a - 0.005, g, cc)) / 2
     for a, g, cc in zip(alpha_rows["α"], alpha_rows["γ"], alpha_rows["c"], strict=True)]
)  # fmt: skip
rounding = 0.05 + wobble
above, below = int((diff > rounding).sum()), int((diff < -rounding).sum())
worst = alpha_rows.loc[diff.abs().idxmax()]
Markdown(
    f"On these {len(alpha_rows)} settings α lies between {alpha_rows['α'].min():.2f} and {alpha_rows['α'].max():.2f}, "
    f"and the formula turns it into {alpha_rows['E[L] = (1 − α^(γ+1))/(1 − α)'].min():.1f}–"
    f"{alpha_rows['E[L] = (1 − α^(γ+1))/(1 − α)'].max():.1f} tokens per target call — the scale on which τ is "
    f"reported. Against the wall clock, the paper's measured speedup is above the formula's expectation by more "
    f"than the paper's rounding in {above} rows and below it in {below}"
    + (f" (within the paper's rounding — speedups to one decimal, α to two — in {len(alpha_rows) - above - below})"
       if above + below < len(alpha_rows) else "")
    + f"; the largest gap is {worst['draft']} on {worst['task']} at T = {worst['T']:g} "
    f"({worst['measured speedup (paper)']:.1f}× measured against {worst['expected speedup E[L]/(γc + 1)']:.1f}× "
    "expected). The formula assumes i.i.d. acceptance and a verify call that costs one target step, and its c "
    "is an estimate: a real system matches none of them exactly, in either direction."
)  # fmt: skip


# %% [markdown]
# ## Check your understanding
#
# 1. A draft whose q equals p exactly: what is α, and how many tokens does a step with k drafts emit?
#
#    <details><summary>Answer</summary>
#
#    α = Σ min(p, p) = 1: every draft is accepted (min(1, p/q) = 1), so every step emits L = k + 1 tokens — the
#    k drafts and the bonus — and E[L] = k + 1, the limit of (1 − α^{k+1}) / (1 − α) as α → 1.
#
#    </details>
#
# 2. Why must a rejection resample from the residual norm(max(0, p − q)), and not simply from p?
#
#    <details><summary>Answer</summary>
#
#    The accepted drafts already emit min(p, q)(x) of each token's probability. Resampling the rejected mass
#    1 − α from p would emit min(p, q) + (1 − α)·p, which is not p unless α = 1: it over-weights the tokens
#    where q > p. The residual adds back exactly what is missing, max(0, p − q), since its mass is 1 − α.
#    Notebook 02 shows the broken version failing a chi-square test on the real model.
#
#    </details>
#
# 3. One paper reports τ for a draft length k, another α for its draft. How do you compare the two drafts?
#
#    <details><summary>Answer</summary>
#
#    Not τ against α: τ counts tokens per step with the bonus (a measured E[L], at least 1), α is a per-token
#    probability (at most 1). Turn the α into E[L] = (1 − α^{k+1}) / (1 − α) at the same k (assuming i.i.d.
#    acceptances, section 2), then compare that with τ — and remember that each paper's speed-up belongs to its
#    own hardware.
#
#    </details>

# %% [markdown]
# ## Exercises
#
# Each exercise is a stub to fill in (`...`), a worked solution (removed from student copies) and a check
# against `specdec_lab.cost.theory`, which prints ✓ or says what is wrong. Exercise 1 needs nothing the notebook
# computed: it runs on its own.

# %% [markdown] tags=["exercise-1"]
# ### Exercise 1 ★ — α from the total variation distance
#
# For the two distributions in the cell below, write `tv1(p, q)`, the total variation distance
# **TV(p, q)** = ½ Σ_x |p(x) − q(x)|, using numpy only; α is then **1 − TV(p, q)**. The references are two
# separate library functions: `specdec_lab.cost.theory.tv_distance` (½ Σ_x |p(x) − q(x)|) for TV and
# `acceptance_rate` (Σ_x min(p(x), q(x))) for α, and the check takes α as one minus your TV, so its passing is the
# identity α = 1 − TV seen on these numbers. Each token adds its own ½ |p(x) − q(x)| to TV, so the check also calls
# `tv1(p1[:3], q1[:3])`, the first three tokens' share of TV(p1, q1), against `tv_distance` on the same slices: a
# TV computed backwards, as 1 − Σ min(p, q), equals the definition only over two whole distributions, and fails
# there. It refuses an answer that calls `acceptance_rate` or `tv_distance`.

# %% tags=["exercise", "exercise-1"]
import numpy as np

from specdec_lab.cost.theory import acceptance_rate, simulate_acceptance, tv_distance
from specdec_lab.lab.course import watch

_watch = watch(globals(), "acceptance_rate", "tv_distance", "simulate_acceptance")  # the references: not for the answer

p1 = np.array([0.40, 0.30, 0.20, 0.10, 0.00])  # the target's distribution over five tokens (not section 1's p)
q1 = np.array([0.11, 0.49, 0.07, 0.09, 0.24])  # the draft's (not section 1's q)


def tv1(p, q):  # TV(p, q) = ½ Σ_x |p(x) − q(x)|, summed over the tokens it is given
    ...


answer = tv1(p1, q1)  # TV(p1, q1); the check takes α = 1 − TV(p1, q1) from it

# %% tags=["solution", "exercise-1"]
def tv1(p, q):
    return 0.5 * np.abs(p - q).sum()


answer = tv1(p1, q1)

# %% tags=["check", "exercise-1", "nbval-check-output"]
import torch

from specdec_lab.lab.course import check

_part = tv1(p1[:3], q1[:3])  # the first three tokens' share of TV (not two distributions: each sums to under 1)
_watch.begin_check()  # from here the references are the check's own
_alpha1 = float(_watch["acceptance_rate"](torch.tensor(p1), torch.tensor(q1)))  # Σ min
_tv1 = float(_watch["tv_distance"](torch.tensor(p1), torch.tensor(q1)))  # ½ Σ |p − q|: its own reference
_tv_part = float(_watch["tv_distance"](torch.tensor(p1[:3]), torch.tensor(q1[:3])))  # the same, on the slices
_ = check("TV(p, q)", answer, _tv1, close=1e-9, watch=_watch,
          hint="TV(p, q) is half the sum of |p − q| over the tokens.")
_ = check("the first three tokens' share of TV(p, q)", _part, _tv_part, close=1e-9, watch=_watch,
          hint="Sum ½ |p(x) − q(x)| over the tokens given: 1 − Σ min(p, q) is TV only for two whole distributions.")
_ = check("α = 1 − TV(p, q), one minus your TV", 1 - answer, _alpha1, close=1e-9, watch=_watch,
          hint="α = Σ min(p, q) is one minus TV(p, q) for any two distributions.")  # fmt: skip

# %% [markdown] tags=["exercise-2"]
# ### Exercise 2 ★★ — E[L] from the distribution of accepted drafts, when α varies along the chain
#
# A chain of $k = 5$ drafts whose acceptance falls along the chain, as a draft's does the further it guesses
# ahead: draft $i$ (1-based) is accepted with probability `alphas2[i - 1]` given that every earlier one was
# (a draft is only checked when every earlier one was accepted). With no single α the closed form
# $(1 - α^{k+1}) / (1 - α)$ of section 2 does not apply — not with the first α, nor with their mean. Write the
# probability P(A = j) that the step accepts exactly j drafts (j = 0..k), then E[L] = Σ_j (j + 1)·P(A = j) — the
# bonus counted. The reference is `specdec_lab.trees.build.expected_length` on this chain (a tree of one path,
# the acceptance of each depth as its one column: notebook 05 uses it on wider trees); the check refuses an
# answer that calls it.

# %% tags=["exercise", "exercise-2"]
from specdec_lab.trees.build import expected_length  # noqa: F401 - in scope for the watch

_watch = watch(globals(), "expected_length")  # the reference: not for the answer
alphas2 = (0.9, 0.8, 0.7, 0.6, 0.5)  # P(draft i accepted | drafts 1..i-1 accepted), i = 1..5
k2 = len(alphas2)
answer = ...  # E[L] = Σ_j (j + 1)·P(A = j)

# %% tags=["solution", "exercise-2"]
reach = [1.0]  # reach[j]: P(the first j drafts all accepted)
for a in alphas2:
    reach.append(reach[-1] * a)
pmf = [reach[j] * (1 - alphas2[j]) for j in range(k2)] + [reach[k2]]  # j < k: accepted j, rejected the next
answer = sum((j + 1) * pj for j, pj in enumerate(pmf))

# %% tags=["check", "exercise-2", "nbval-check-output"]
_watch.begin_check()  # from here the references are the check's own
_ = check("E[L] for the chain of falling acceptances", answer,
          _watch["expected_length"]([(0,) * d for d in range(1, k2 + 1)], [[a] for a in alphas2]), close=1e-9,
          watch=_watch,
          hint="P(A = j) = α_1···α_j (1 − α_{j+1}) for j < k, and α_1···α_k for j = k; each step emits A + 1 "
               "tokens.")  # fmt: skip

# %% [markdown] tags=["exercise-3"]
# ### Exercise 3 ★★ — the optimal draft length, by scanning
#
# For $\alpha = 0.75$ and $c = 81/457 \approx 0.18$ — a point between the rows and columns of section 3's table,
# where two draft lengths give exactly the same speedup — write `best3(candidates)`: the k among `candidates` that
# maximizes the speedup (1 − α^{k+1}) / ((1 − α)(kc + 1)) of section 3. Of two tied k, the rule takes the shorter
# (a longer draft costs more drafting for nothing) whatever order the candidates come in: mind that `max` and
# `argmax` return the *first* maximum they meet. The answer is `best3(ks3)`, with `ks3` every k from `k_max` down
# to 0, **longest first**; the check also calls `best3` on the same candidates shortest first and on them without
# the k your answer picked, so the tie has to be handled, not dodged by scanning `range` upward. Write the formula
# yourself. The reference is
# `specdec_lab.cost.theory.optimal_k(alpha3, c3, k_max)`; the check refuses an answer that calls it,
# `expected_speedup` or section 5's `speedup_explorer`.

# %% tags=["exercise", "exercise-3"]
from specdec_lab.cost.theory import expected_speedup, optimal_k
from specdec_lab.viz.acceptance import speedup_explorer

_watch = watch(globals(), "optimal_k", "expected_speedup", "speedup_explorer")  # the references: not for the answer
alpha3, c3 = 0.75, 81 / 457  # c3: where two draft lengths tie
ks3 = list(range(k_max, -1, -1))  # the candidates, longest first


def best3(candidates):  # the k of `candidates` with the largest speedup at alpha3, c3; on a tie, the shorter
    ...


answer = best3(ks3)


# %% tags=["solution", "exercise-3"]
def best3(candidates):
    speedups = {k: (1 - alpha3 ** (k + 1)) / ((1 - alpha3) * (k * c3 + 1)) for k in candidates}
    return min(k for k in candidates if speedups[k] == max(speedups.values()))  # the shortest of the maxima


answer = best3(ks3)

# %% tags=["check", "exercise-3", "nbval-check-output"]
_also = (best3(sorted(ks3)), best3([k for k in ks3 if k != answer]))  # shortest first; without the answer's k
_watch.begin_check()  # from here the references are the check's own
_k3 = _watch["optimal_k"](alpha3, c3, k_max)
_s3 = {k: _watch["expected_speedup"](alpha3, k, c3) for k in ks3}
_rest3 = [k for k in ks3 if k != _k3]
_also_ref = (_k3, min(k for k in _rest3 if _s3[k] >= max(_s3[j] for j in _rest3) * (1 - 1e-9)))
_ = check("k* for α = 0.75, c = 81/457, in either order of the candidates and without the answer's own k", answer,
          _k3, watch=_watch,
          close=lambda a, ref: a == ref and _also == _also_ref,  # a yes or no: the printed line does not show the k
          hint="Compute the speedup of every k in `candidates` and keep the k of the largest; of equal ones, the "
               "smaller k, whatever their order.")  # fmt: skip

# %% [markdown] tags=["exercise-4"]
# ### Exercise 4 ★★★ — the optimal draft length on a cost curve
#
# Section 4's example curve, with a cheaper draft than its table's: the verify forward over k + 1 tokens costs
# `curve(k + 1)` seconds and a draft step `t_draft4` seconds (set in the cell below: about half the table's,
# chosen so that two draft lengths give the same rate). At α = `alpha4` (the cell below), write `best4(candidates)`:
# the k among `candidates` that maximizes tokens per second, E[L] / (k·t_draft4 + t(k + 1)), with E[L] from
# section 2 (ties: the shorter k, whatever the candidates' order — count two rates within a relative 1e-9 as tied,
# as float rounding of costs can split them). The answer is `best4(ks4)`, `ks4` again longest first; as in
# exercise 3, the check also calls `best4` shortest first and without the k your answer picked. The reference is `optimal_k(alpha4, t_draft4, k_max, verify_cost=curve)`, the rule the
# draft proposer runs every step; the check refuses an answer that calls it (E[L] from
# `expected_tokens_per_step` is fine here). The example curve gives t(n) at n = 1, 2, 3, 4, 5, 8 (made up, like
# its draft time: no measurement behind it): `curve` interpolates linearly between those sizes and extrapolates
# past n = 8 from the last two, so a k* above 7 would rest on extrapolated costs; at this α the answer's verify,
# t(k* + 1), stays within the sizes the curve gives.

# %% tags=["exercise", "exercise-4"]
_watch = watch(globals(), "optimal_k")  # the reference: not for the answer
alpha4, t_draft4 = 0.75, 0.002757484847096912  # α, and a draft step of about 2.8 ms (section 4's table: 5 ms)
ks4 = list(range(k_max, -1, -1))  # the candidates, longest first


def best4(candidates):  # the k of `candidates` with the most tokens per second on the example curve; ties: the shorter
    ...


answer = best4(ks4)

# %% tags=["solution", "exercise-4"]
import math


def best4(candidates):
    rates = {k: expected_tokens_per_step(alpha4, k) / (k * t_draft4 + curve(k + 1)) for k in candidates}
    return min(k for k in candidates if math.isclose(rates[k], max(rates.values()), rel_tol=1e-9))  # shorter of ties


answer = best4(ks4)

# %% tags=["check", "exercise-4", "nbval-check-output"]
_also = (best4(sorted(ks4)), best4([k for k in ks4 if k != answer]))  # shortest first; without the answer's k
_watch.begin_check()  # from here the references are the check's own
_k4 = _watch["optimal_k"](alpha4, t_draft4, k_max, verify_cost=curve)
_r4 = {k: expected_tokens_per_step(alpha4, k) / (k * t_draft4 + curve(k + 1)) for k in ks4}  # the same rates
_rest4 = [k for k in ks4 if k != _k4]
_also_ref = (_k4, min(k for k in _rest4 if _r4[k] >= max(_r4[j] for j in _rest4) * (1 - 1e-9)))
_ = check("k* on the example curve at α = 0.75, in either order of the candidates and without the answer's own k",
          answer, _k4, watch=_watch,
          close=lambda a, ref: a == ref and _also == _also_ref,  # a yes or no: the printed line does not show the k
          hint="Tokens per second: E[L] over the seconds of a step, k draft steps plus one verify of k + 1 tokens; "
               "of rates within a relative 1e-9, the smaller k, whatever the candidates' order.")  # fmt: skip

# %% [markdown]
# ## Takeaways
#
# - Speculative sampling accepts a drafted token with probability α = Σ min(p, q) = 1 − TV(p, q), and resampling
#   a rejection from the residual makes its output distributed exactly as p: the draft changes the speed, never
#   the output.
# - With independent acceptances a chain of k drafts emits E[L] = (1 − α^{k+1}) / (1 − α) tokens per step, the
#   bonus included; the Monte Carlo agrees with the formula, in mean and in distribution.
# - When drafting costs something (c > 0) the speedup has a finite optimum in k (k = 0, no drafting, where α ≤ c):
#   longer drafts win more tokens but each survives with α^i and costs c; at c = 0 it never falls, so the
#   optimum sits at the search's cap wherever α is large enough for the extra drafts to count.
# - A verify forward that costs more than one token lowers the speedup and raises the α a draft needs before it
#   pays; the measured form, not the textbook one, is what sizes a draft on a real machine.
# - Papers report acceptance in different conventions — α per token, τ or "mean accepted" per step with the
#   bonus — and only like compares with like.
#
# ## Further reading
#
# - [Leviathan et al. 2023, *Fast Inference from Transformers via Speculative Decoding*](https://arxiv.org/abs/2211.17192)
#   — α, the tokens-per-step and speedup formulas (sections 1–3), and the rows of section 6.
# - [Chen et al. 2023, *Accelerating Large Language Model Decoding with Speculative Sampling*](https://arxiv.org/abs/2302.01318)
#   — the same acceptance rule and its proof of exactness (section 1).
# - [Xia et al. 2024, Spec-Bench](https://github.com/hemingkx/Spec-Bench) — one benchmark for many methods, and
#   its "mean accepted tokens" (section 6).
# - [Li et al. 2025, *EAGLE-3*](https://arxiv.org/abs/2503.01840) — τ, the average acceptance length (section 6).
