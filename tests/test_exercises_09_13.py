"""The exercises of notebooks 09-14 that were reworked, run from the stored notebooks' own cells (by tag) without the
real model: each check fails on the stub and on a plausible wrong answer (ExerciseError), and passes on the
solution. Plus the helpers behind the notebooks' rewritten sentences and figures: `viz.results.ranking_text`
(a tie within the run's spread is written as a tie) and `viz.batching` (readable log ticks, one set of B labels)."""

from __future__ import annotations

import json

import pytest
import torch
from exercise_cells import NOTEBOOKS, attempt, exercise, fails, passes, run

from specdec_lab.lab.course import ExerciseError

ROOT = NOTEBOOKS.parent


def base() -> dict:
    return run("import math, json\nimport torch\nfrom specdec_lab.lab.course import check")


# ---- 12: the memory wall at its own inputs, the sizes where every layer is stock, a chain on each build ----------
def ns12() -> dict:
    ns = base()
    run("from specdec_lab.lab.course import watch", namespace=ns)
    torch.manual_seed(0)
    embed = torch.nn.Embedding(4000, 37)
    model = torch.nn.Sequential(embed, torch.nn.Linear(37, 37), torch.nn.Linear(37, 4000, bias=False))
    model[2].weight = embed.weight  # a tied LM head: one matrix, counted once
    fp32 = sum(p.numel() for p in model.parameters()) * 4
    # section 4's record, its fp32 MB rounded to the real file's relative precision (538.1 MB: four figures)
    ns.update(model=model, wall={"read_gb_s": 27.88, "weights_mb": round(fp32 / 1e6, 4),
                                 "wall_ms_per_token": round(fp32 / 27.88e9 * 1e3, 6)})  # fmt: skip
    return ns


def test_12_exercise_1_the_wall_at_its_own_bandwidth_and_bytes():
    ex = exercise("12_appendix_kernels", 1)
    fails(ex, None, ns12)
    fails(ex, "answer = memory_wall(params_bytes=weight_bytes(model, bytes_per_param), bandwidth=bandwidth)"
          "['wall_ms_per_token']", ns12)  # the reference, called  # fmt: skip
    fails(ex, "answer = wall['wall_ms_per_token']", ns12)  # section 4's fp32 figure, printed above
    # section 4's rounded fp32 MB rescaled to bf16 at this bandwidth: within 1e-3, refused by the tight tolerance
    fails(ex, "answer = wall['weights_mb'] * 1e6 / 4 * bytes_per_param / bandwidth * 1e3", ns12)
    fails(ex, "answer = sum(p.numel() for p in model.parameters()) * 4 / bandwidth * 1e3", ns12)  # fp32 bytes
    fails(ex, "answer = sum(p.numel() for p in model.state_dict().values()) * 2 / bandwidth * 1e3", ns12)  # tied twice
    fails(ex, "answer = sum(p.numel() for p in model.parameters()) * 2 / bandwidth", ns12)  # seconds, not ms
    passes(ex, ns12)


def test_12_exercise_2_every_layer_not_only_the_lm_head():
    ex = exercise("12_appendix_kernels", 2)
    fails(ex, None, ns12)
    fails(ex, "answer = [n for n in rows if all(m.kernel_for(n) == 'stock' for m in layers)]", ns12)  # the reference
    fails(ex, "answer = [n for n in rows if n > 64]", ns12)  # past the plans only
    fails(ex, "answer = [n for n in rows if n > 64 or head.plan[n] == 'stock']", ns12)  # the LM head alone
    # a layer without a plan skipped, as if it ran stock
    fails(ex, "answer = [n for n in rows if n > 64 or all(m.plan[n] == 'stock' for m in layers if m.plan)]", ns12)
    fails(ex, "answer = [n for n in rows if n <= 64 and all((m.plan or default_plan(False))[n] == 'stock' "
          "for m in layers)]", ns12)  # more than 64 rows forgotten  # fmt: skip
    passes(ex, ns12)


def ns12_variants() -> dict:
    from specdec_lab.bench.step_variants import variant_curves

    ns = ns12()
    ns["variants"] = variant_curves(json.loads((ROOT / "data/curves/step_variants.json").read_text()))
    return ns


SHAPE = "def speedup_of_shape(r):\n    return {}\n\n\n".format  # the function of r = t(k + 1)/t(1) alone
EL = "(1 - alpha ** (k + 1)) / (1 - alpha)"  # E[L], the bonus included
BY_SHAPE = "answer = {n: speedup_of_shape(t(k + 1) / t(1)) for n, t in variants.items()}"
PRINTED = f"answer = {{n: {EL} * t(1) / (k * c * t(1) + t(k + 1)) for n, t in variants.items()}}"  # the formula


def test_12_exercise_3_a_chain_priced_on_each_build_from_its_shape_alone():
    ex = exercise("12_appendix_kernels", 3)
    fails(ex, None, ns12_variants)
    right = SHAPE(f"{EL} / (k * c + r)")
    passes({**ex, "solution": right + BY_SHAPE}, ns12_variants)
    # the reference, called: as the answer, or inside the function (with t(1) set to 1), with the answer by its
    # shape or by the printed formula (the function then runs only on the check's made-up curves, which the check
    # cell calls before its references begin, so the call is seen)
    fails(ex, "answer = {n: measured_speedup(alpha, k, t(1), c * t(1), t) for n, t in variants.items()}",
          ns12_variants)  # fmt: skip
    calls = SHAPE("measured_speedup(alpha, k, 1.0, c, r)")
    for answer in (BY_SHAPE, PRINTED):
        with pytest.raises(ExerciseError, match="called `measured_speedup`"):
            attempt(ex, ns12_variants(), calls + answer)
    # the printed formula copied, per build, the function left a stub: the made-up curves get no speed-up
    fails(ex, PRINTED, ns12_variants)
    # ... or a function that ignores r (a flat curve's speed-up, whatever the shape): wrong on the made-up curves
    fails(ex, SHAPE(f"{EL} / (k * c + 1)") + PRINTED, ns12_variants)
    fails(ex, right + "answer = {n: speedup_of_shape(t(k) / t(1)) for n, t in variants.items()}", ns12_variants)  # t(k)
    fails(ex, SHAPE("(alpha - alpha ** (k + 1)) / (1 - alpha) / (k * c + r)") + BY_SHAPE, ns12_variants)  # no bonus
    fails(ex, SHAPE(f"{EL} / (k * c + r + 1)") + BY_SHAPE, ns12_variants)  # one forward too many
    passes(ex, ns12_variants)


# ---- 13: a row's mask of its own, one chain priced at every B, the draft length at an α the table does not show, ---
# ---- and each row's padding -----------------------------------------------------------------------------------------
def ns13() -> dict:
    ns = base()
    policy = json.loads((ROOT / "data/curves/batch_policy-amx.json").read_text())
    run("from specdec_lab.cost import CostCurve\nfrom specdec_lab.lab.course import watch\n"
        "from specdec_lab.trees import Tree\nfrom specdec_lab.verify import rows_attention_mask\n"
        "trees = [Tree(torch.tensor([7, 8, 9, 10]), torch.tensor([-1, 0, 0, 1])), Tree.chain(3, [4]), None]\n"
        "lengths = [2, 4, 3]\ntokens, positions, mask = rows_attention_mask(trees, lengths, torch.float32)",
        namespace=ns)  # fmt: skip
    ns["curves"] = {int(b): ns["CostCurve"].from_dict(c) for b, c in policy["curves"].items()}
    ns["policy"] = policy
    return ns


def test_13_exercise_1_a_mask_of_its_own():
    ex = exercise("13_speculation_in_a_batch", 1)
    fails(ex, None, ns13)
    fails(ex, "visible = rows_attention_mask([Tree(torch.arange(5), torch.tensor(parents))], [prefix], "
          "torch.float32)[2][0, 0] == 0", ns13)  # the reference, called  # fmt: skip
    fails(ex, "visible = mask[0, 0, :, :8] == 0", ns13)  # row 0's mask above: another tree and prefix
    # a chain's causal mask: the branches ignored
    fails(ex, "visible = torch.ones(5, 8, dtype=torch.bool).tril(prefix)", ns13)
    passes(ex, ns13)


def test_13_exercise_2_the_same_chain_at_every_batch_size():
    ex = exercise("13_speculation_in_a_batch", 2)
    fails(ex, None, ns13)
    fails(ex, "chain_speedup = {b: measured_speedup(0.7, 3, c(1), 0.0, c) for b, c in curves.items()}", ns13)
    fails(ex, "chain_speedup = {b: (0.7 - 0.7 ** 4) / 0.3 * c(1) / c(4) for b, c in curves.items()}", ns13)  # no bonus
    fails(ex, "chain_speedup = {b: (1 - 0.7 ** 4) / 0.3 * c(1) / c(3) for b, c in curves.items()}", ns13)  # t(B, k)
    passes(ex, ns13)


def test_13_exercise_3_not_the_tables_column():
    ex = exercise("13_speculation_in_a_batch", 3)
    fails(ex, None, ns13)
    fails(ex, "k_chosen = {b: optimal_k(0.6, 0.0, 8, verify_cost=c) for b, c in curves.items()}", ns13)  # reference
    # the table's neighbouring column (α = 0.7), printed above the exercise
    fails(ex, "k_chosen = {int(r['batch_size']): r['k_at_alpha_0.7'] for r in policy['chosen']}", ns13)
    # E[L] without the bonus
    fails(ex, "k_chosen = {b: max(range(9), key=lambda k: ((0.6 - 0.6 ** (k + 1)) / 0.4 / c(k + 1), -k)) "
          "for b, c in curves.items()}", ns13)  # fmt: skip
    passes(ex, ns13)


def ns13_batch() -> dict:
    from types import SimpleNamespace

    ns = ns13()
    grid = [
        [(0, 2), (1, 1), (2, 3)],
        [(0, 1), (1, 2), (2, 1)],
        [(3, 1), None, (2, 2)],
        [(3, 2), None, None],
        [(3, 1), None, None],
    ]  # row 1 finished after step 2 with nothing queued, row 2 after step 3
    results = [SimpleNamespace(forwards=f) for f in (2, 2, 3, 3)]  # each prompt's own steps, counted by hand
    ns["batch"] = SimpleNamespace(
        grid=grid,
        active=[sum(c is not None for c in s) for s in grid],
        batch_size=3,
        forwards=len(grid),
        results=results,
    )
    return ns


def test_13_exercise_4_each_rows_padding():
    ex = exercise("13_speculation_in_a_batch", 4)
    fails(ex, None, ns13_batch)
    fails(ex, "padding = len(batch.active) * 3 - sum(batch.active)", ns13_batch)  # the total, not per row
    fails(ex, "padding = [sum(step[r] is None for r in range(3)) for step in batch.grid]", ns13_batch)  # per step
    fails(ex, "padding = [sum(c is not None and c[1] == 1 for c in (s[r] for s in batch.grid)) for r in range(3)]",
          ns13_batch)  # one-token steps counted as waiting  # fmt: skip
    right = "padding = [sum(step[r] is None for step in batch.grid) for r in range(3)]\n"
    fails(ex, right, ns13_batch)  # the counts right, the row left as a stub
    fails(ex, right + "waited_most = max(padding)", ns13_batch)  # the largest count, not its row
    fails(ex, right + "waited_most = min(range(3), key=padding.__getitem__)", ns13_batch)  # the row that waited least
    passes(ex, ns13_batch)


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


# ---- 14: E[L] from survival shares, a schedule of its own rows, acceptance from two scrapes -------------------------
def ns14() -> dict:
    import pandas as pd

    ns = base()
    runs = [{"method": "ngram", "k": 4, "survival": [0.15, 0.12, 0.1, 0.09], "drafted": 0.5, "draft_cost": 0.0,
             "steps": 244, "tokens": 390},
            {"method": "eagle3", "k": 4, "survival": [0.44, 0.18, 0.11, 0.08], "drafted": 0.97, "draft_cost": 0.07,
             "steps": 208, "tokens": 390}]  # fmt: skip
    lab = pd.DataFrame(runs).set_index("method")
    lab["τ at k"] = 1 + lab["survival"].map(sum)
    rows = [{"batch_size": b, "methods": {"eagle3": {"k": k, "speedup": 1.1}}} for b, k in ((1, 1), (2, 1), (4, 2))]
    record = {
        "policy": {"lab": {"runs": runs}, "by_batch_size": rows},
        "choice": {"method": "eagle3"},
        "speculative_config": {"num_speculative_tokens_per_batch_size": [[1, 1, 1], [2, 3, 1], [4, 1024, 2]]},
    }
    ns.update(lab=lab, record=record, rows=rows)
    run("from specdec_lab.serve.client import acceptance", namespace=ns)
    return ns


def ns14_policy() -> dict:
    ns = ns14()
    run("from specdec_lab.lab.course import watch\nfrom specdec_lab.serve import policy", namespace=ns)
    return ns


def test_14_exercise_1_expected_tokens_from_survival_shares():
    ex = exercise("14_serving", 1)
    fails(ex, None, ns14)
    fails(ex, "expected_2 = sum(lab.loc[method, 'survival'][:2])", ns14)  # no bonus
    fails(ex, "expected_2 = lab.loc[method, 'τ at k']", ns14)  # the table's, at the lab's whole k
    fails(ex, "import math\nexpected_2 = 1 + sum(math.prod(lab.loc[method, 'survival'][:i]) for i in (1, 2))",
          ns14)  # survival read as per-position rates  # fmt: skip
    fails(ex, "expected_2 = policy.predicted_speedup(policy.LabRun(**{**record['policy']['lab']['runs'][1], "
          "'draft_cost': 0.0}), 2, lambda n: 1.0)", ns14)  # the reference, called  # fmt: skip
    passes(ex, ns14)


def test_14_exercise_2_a_schedule_of_its_own_rows():
    ex = exercise("14_serving", 2)
    fails(ex, None, ns14_policy)
    fails(ex, "plan = policy.schedule(my_rows, 'eagle3')", ns14_policy)  # the reference, called
    fails(ex, "plan = record['speculative_config']['num_speculative_tokens_per_batch_size']", ns14_policy)  # printed
    fails(ex, "plan = [[r['batch_size'], r['batch_size'], r['methods']['eagle3']['k']] for r in my_rows]",
          ns14_policy)  # each range one B wide  # fmt: skip
    fails(
        ex,
        "s = [r['batch_size'] for r in my_rows]\nplan = [[b, (s[i + 1] - 1) if i + 1 < len(s) else s[-1], "
        "r['methods']['eagle3']['k']] for i, (b, r) in enumerate(zip(s, my_rows))]",
        ns14_policy,
    )  # ends at 12
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        passes(ex, ns14_policy)
    assert "agrees" in out.getvalue() and "1024" not in out.getvalue()  # the check does not print the answer


def test_14_exercise_3_acceptance_from_two_scrapes():
    ex = exercise("14_serving", 3)
    fails(ex, None, ns14_policy)
    fails(ex, "r = acceptance(before, after)\nrates, mean_accepted = r['rate_per_position'], r['mean_accepted']",
          ns14_policy)  # the reference, called  # fmt: skip
    keys = "[k for k in after if 'per_pos' in k]"
    fails(
        ex,
        f"d = after['vllm:spec_decode_num_drafts_total']\nacc = [after[k] for k in {keys}]\n"
        "rates = [a / d for a in acc]\nmean_accepted = 1 + sum(acc) / d",
        ns14_policy,
    )  # cumulative, not grown
    fails(
        ex,
        f"d = 100.0\nacc = [after[k] - before[k] for k in {keys}]\nrates = [a / d for a in acc]\n"
        "mean_accepted = 1 + sum(acc) / d",
        ns14_policy,
    )  # the scrape's key order, not the positions'
    fails(
        ex,
        f"d = 300.0\nacc = [after[k] - before[k] for k in sorted({keys})]\nrates = [a / d for a in acc]\n"
        "mean_accepted = 1 + sum(acc) / d",
        ns14_policy,
    )  # over the draft tokens
    fails(
        ex,
        f"d = 100.0\nacc = [after[k] - before[k] for k in sorted({keys})]\nrates = [a / d for a in acc]\n"
        "mean_accepted = sum(acc) / d",
        ns14_policy,
    )  # no bonus
    passes(ex, ns14_policy)
