"""The exercises of notebooks 09-13 that were reworked, run from the stored notebooks' own cells (by tag) without the
real model: each check fails on the stub and on a plausible wrong answer (ExerciseError), and passes on the
solution. Plus the helpers behind the notebooks' rewritten sentences and figures: `viz.results.ranking_text`
(a tie within the run's spread is written as a tie) and `viz.batching` (readable log ticks, one set of B labels)."""

from __future__ import annotations

import json

import torch
from exercise_cells import NOTEBOOKS, exercise, fails, passes, run

ROOT = NOTEBOOKS.parent


def base() -> dict:
    return run("import math, json\nimport torch\nfrom specdec_lab.lab.course import check")


# ---- 10: what the accuracy per position buys, and the vocabulary trade-off ------------------------------------
def ns10_accuracy() -> dict:
    ns = base()
    record = json.loads((ROOT / "data/eagle/position_accuracy.json").read_text())
    ns.update(record=record, src=record["sources"])
    run("from specdec_lab.viz.eagle_figures import SOURCE_LABELS", namespace=ns)
    return ns


def test_10_exercise_1_chain_tokens_per_step_from_position_accuracy():
    ex = exercise("10_eagle", 1)
    fails(ex, None, ns10_accuracy)
    # every position counted on its own, not only once the earlier ones hit
    fails(ex, "answer = {n: 1 + sum(s['accuracy'][:k_chain]) for n, s in src.items()}", ns10_accuracy)
    # the products right, the bonus left out: not notebook 00's L
    fails(ex, "import math\nanswer = {n: sum(math.prod(s['accuracy'][:j]) for j in range(1, k_chain + 1)) "
          "for n, s in src.items()}", ns10_accuracy)  # fmt: skip
    passes(ex, ns10_accuracy)


def ns10_vocab() -> dict:
    from specdec_lab.eagle.vocab_cost import VocabTradeoff

    ns = base()
    tradeoff = VocabTradeoff(sizes=[1024, 4096, 8192, 49152], c=[0.06, 0.066, 0.073, 0.248],
                             coverage=[0.82, 0.94, 0.973, 1.0], head_share=0.21, held_tokens=1000)  # fmt: skip
    ns.update(tradeoff=tradeoff, alpha=0.6, shipped_m=8192)
    return ns


def test_10_exercise_2_the_vocabulary_that_buys_the_most():
    ex = exercise("10_eagle", 2)
    fails(ex, None, ns10_vocab)
    # the coverage ignored: a drafter could name every token
    fails(ex, "answer = {m: max([1.0] + [(1 - alpha ** (k + 1)) / (1 - alpha) / (k * c + 1) for k in range(1, 17)]) "
          "for m, c in zip(tradeoff.sizes, tradeoff.c)}", ns10_vocab)  # fmt: skip
    passes(ex, ns10_vocab)


# ---- 11: the chance each sibling is emitted, on a set where p(x) is not the answer ----------------------------
def ns11() -> dict:
    ns = base()
    run(
        "torch.set_num_threads(1)\n"
        "from specdec_lab.accept.toy import residual_steps, toy_models\n"
        "from specdec_lab.sampling import Sampling\n"
        "target, draft = toy_models(5, noise=1.0)\n"
        "steps = residual_steps(target, draft, Sampling(temperature=1.0), 'deterministic', width=3)",
        namespace=ns,
    )
    return ns


def test_11_exercise_1_checked_where_the_target_probability_is_not_the_answer():
    ex = exercise("11_sampling_on_trees", 1)
    fails(ex, None, ns11)
    # p(x) handed back: right for the one-hot rule (its theorem), wrong for the sampled siblings given their draw
    fails(ex, "answer = {name: [st['p'][x] for x in st['tokens']] for name, st in zip(chance_sets, (steps, sampled))}",
          ns11)  # fmt: skip
    fails(ex, "answer = {name: list(ch) for name, ch in chance_sets.items()}", ns11)  # the chances themselves
    passes(ex, ns11)


# ---- 12: the sizes where the measured plan is the stock kernel, asked of every layer ---------------------------
def ns12() -> dict:
    from specdec_lab.models.fast_linear import use_fast_linear

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 16))
    use_fast_linear(model)
    inner, head = model
    inner.plan = tuple(["stock"] * 16 + ["onednn"] * 49)  # rows 1-15 stock, 16-64 oneDNN
    head.plan = tuple(["stock"] * 4 + ["onednn"] * 12 + ["stock"] * 32 + ["onednn"] * 17)  # as section 1's LM head
    ns = base()
    ns.update(model=model)
    return ns


def test_12_exercise_2_every_layer_not_only_the_lm_head():
    ex = exercise("12_appendix_kernels", 2)
    fails(ex, None, ns12)
    fails(ex, "answer = [n for n in rows if layers[-1].kernel_for(n) == 'stock']", ns12)  # the LM head alone
    fails(ex, "answer = [n for n in rows if n <= 64 and all(m.plan[n] == 'stock' for m in layers)]", ns12)  # > 64 rows
    passes(ex, ns12)


# ---- 13: one chain priced at every B, and the draft length at an α the table does not show -----------------------
def ns13() -> dict:
    ns = base()
    policy = json.loads((ROOT / "data/curves/batch_policy-amx.json").read_text())
    run("from specdec_lab.cost import CostCurve", namespace=ns)
    ns["curves"] = {int(b): ns["CostCurve"].from_dict(c) for b, c in policy["curves"].items()}
    ns["policy"] = policy
    return ns


def test_13_exercise_2_the_same_chain_at_every_batch_size():
    ex = exercise("13_speculation_in_a_batch", 2)
    fails(ex, None, ns13)
    fails(ex, "chain_speedup = {b: (0.7 - 0.7 ** 4) / 0.3 * c(1) / c(4) for b, c in curves.items()}", ns13)  # no bonus
    fails(ex, "chain_speedup = {b: (1 - 0.7 ** 4) / 0.3 * c(1) / c(3) for b, c in curves.items()}", ns13)  # t(B, k)
    passes(ex, ns13)


def test_13_exercise_3_not_the_tables_column():
    ex = exercise("13_speculation_in_a_batch", 3)
    fails(ex, None, ns13)
    # the table's neighbouring column (α = 0.7), printed above the exercise
    fails(ex, "k_chosen = {int(r['batch_size']): r['k_at_alpha_0.7'] for r in policy['chosen']}", ns13)
    # E[L] without the bonus
    fails(ex, "k_chosen = {b: max(range(9), key=lambda k: ((0.6 - 0.6 ** (k + 1)) / 0.4 / c(k + 1), -k)) "
          "for b, c in curves.items()}", ns13)  # fmt: skip
    passes(ex, ns13)


# ---- the helpers behind rewritten sentences and figures ---------------------------------------------------------
def test_ranking_text_writes_a_tie_within_the_spread_and_turns_with_the_numbers():
    from specdec_lab.viz.results import ranking_text

    spread = {"medusa": 0.04, "lookahead": 0.07, "draft": 0.01}
    assert ranking_text({"medusa": 1.264, "lookahead": 1.263, "draft": 1.0}, spread) == "medusa ≈ lookahead > draft"
    assert ranking_text({"medusa": 1.263, "lookahead": 1.264, "draft": 1.0}, spread) == "lookahead ≈ medusa > draft"
    assert ranking_text({"medusa": 1.264, "lookahead": 1.263}) == "medusa > lookahead"  # no spread: an order
    assert ranking_text({"a": 2.0, "b": 1.0}, 0.01) == "a > b" and ranking_text({"a": 1.0, "b": 2.0}, 0.01) == "b > a"


def test_cost_by_batch_ticks_read_as_milliseconds_and_the_legend_clears_the_right_axis():
    from specdec_lab.cost import CostCurve
    from specdec_lab.viz.batching import cost_by_batch_figure, log_ticks

    curves = {b: CostCurve(sizes=[1, 2, 4, 8], seconds=[0.03 * b**0.3 * (1 + n / 8) for n in (1, 2, 4, 8)])
              for b in (1, 8, 16)}  # fmt: skip
    fig = cost_by_batch_figure(curves)
    y2 = fig.layout.yaxis2
    assert y2.tickmode == "array" and all(t.endswith(" ms") for t in y2.ticktext)
    assert all(str(t).replace(" ms", "").replace(".", "", 1).isdigit() for t in y2.ticktext)  # no "1.085362"
    assert fig.layout.legend.orientation == "h"  # below the plot, not over the right axis' title
    ticks = log_ticks([0.12, 3.5])
    assert ticks["tickvals"][0] <= 0.12 * 1.5 and ticks["tickvals"][-1] >= 3.5 / 1.5
    assert log_ticks([]) == {}


def test_throughput_latency_labels_each_batch_size_once():
    from specdec_lab.viz.batching import throughput_latency_figure

    summary = [{"method": m, "batch_size": b, "latency_median_s": 10.0 / b + i, "tokens_per_s": 20.0 * b + i}
               for i, m in enumerate(("autoregressive", "medusa", "eagle")) for b in (1, 2, 4)]  # fmt: skip
    fig = throughput_latency_figure(summary)
    labelled = [t for t in fig.data if "text" in (t.mode or "")]
    assert len(labelled) == 1 and list(labelled[0].text) == ["B=1", "B=2", "B=4"]
    assert all("B=" in t.hovertemplate or "%{text}" in t.hovertemplate for t in fig.data)
