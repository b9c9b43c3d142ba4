"""What-if replay (`specdec_lab.replay`) and the bench's per-step traces it reads.

Synthetic runs check the replay's arithmetic exactly; the bench part runs on `tiny_model()` (random
weights, token-id prompts).
"""

import json

import pytest

from specdec_lab.bench import format_table, run_benchmark, summarize
from specdec_lab.bench.runner import TRACE_FIELDS
from specdec_lab.io import Prompt
from specdec_lab.replay import (
    CurveInputError,
    curve_from_points,
    curve_from_traces,
    curves_by_prompt,
    flat_curve,
    replay_bench,
    replay_row,
    shaped_curve_from_traces,
    theory_speedup,
    traced_rows,
)


# ---- synthetic runs ---------------------------------------------------------------------------------
def traced(method, q, steps, prefill=0.0, other=0.0, category="a"):
    """A bench row with a trace; its measured seconds = prefill + phases + other."""
    tokens = sum(s[2] for s in steps)
    seconds = prefill + sum(s[3] + s[4] + s[5] for s in steps) + other
    return dict(question_id=q, category=category, method=method, prompt_tokens=10, new_tokens=tokens,
                seconds=seconds, forwards=len(steps), identical=True,
                trace={"prefill_seconds": prefill, "steps": steps})  # fmt: skip


def results_of(rows, methods):
    return {"methods": methods, "trace_fields": list(TRACE_FIELDS), "rows": rows}


T1, T4 = 0.010, 0.016  # this machine's made-up curve: a one-token and a four-node forward


def synthetic(tokens=12, draft=0.002):
    """AR: `tokens` one-token steps. tree: 4-node trees emitting 3 tokens per step, `draft` s to propose."""
    ar = traced("autoregressive", 1, [[1, 0, 1, 0.0, T1, 0.0]] * tokens)
    tree = traced("tree", 1, [[4, 3, 3, draft, T4, 0.0]] * (tokens // 3))
    return results_of([ar, tree], ["autoregressive", "tree"])


def test_replay_of_a_row_is_prefill_plus_curve_plus_drafting_plus_overheads():
    steps = [[1, 0, 1, 0.001, 0.5, 0.0002], [5, 4, 3, 0.003, 0.7, 0.0004], [3, 2, 1, 0.002, 0.6, 0.0001]]
    row = traced("m", 1, steps, prefill=0.05, other=0.01)
    curve = curve_from_points({1: 0.02, 3: 0.03, 5: 0.05})
    drafting, accepting = 0.001 + 0.003 + 0.002, 0.0002 + 0.0004 + 0.0001
    assert replay_row(row, curve) == pytest.approx(0.05 + (0.02 + 0.05 + 0.03) + drafting + accepting + 0.01)
    # scaled: drafting by s_d, everything besides the forwards and the drafting by s_o
    expected = (0.02 + 0.05 + 0.03) + 0.5 * drafting + 2.0 * (0.05 + accepting + 0.01)
    assert replay_row(row, curve, draft_scale=0.5, overhead_scale=2.0) == pytest.approx(expected)


def test_replay_under_the_recorded_curve_reproduces_the_measured_speedup():
    results = synthetic()
    curve = curve_from_traces(results)
    assert curve.sizes == [1, 4] and curve.seconds == pytest.approx([T1, T4])
    table = {r["method"]: r for r in replay_bench(results, curve)}
    assert table["autoregressive"]["predicted_speedup"] == pytest.approx(1.0)
    tree = table["tree"]
    assert tree["measured_speedup"] == pytest.approx(12 * T1 / (4 * (T4 + 0.002)))
    assert tree["predicted_speedup"] == pytest.approx(tree["measured_speedup"])
    assert tree["mean_accepted"] == pytest.approx(3.0) and tree["mean_nodes"] == pytest.approx(4.0)


def test_autoregressive_under_any_curve_predicts_speedup_one():
    results = synthetic()
    for curve in (flat_curve(0.003), curve_from_points({1: 0.5, 64: 9.0})):
        (ar,) = [r for r in replay_bench(results, curve) if r["method"] == "autoregressive"]
        assert ar["predicted_speedup"] == pytest.approx(1.0)


@pytest.mark.parametrize("draft", [0.0, 0.002, 0.01])
def test_flat_curve_gives_mean_accepted_times_verify_over_verify_plus_drafting(draft):
    results = synthetic(draft=draft)
    reference = curve_from_traces(results)
    flat = flat_curve(reference(1))  # same t(1): the drafting scale is 1
    (tree,) = [r for r in replay_bench(results, flat, reference=reference) if r["method"] == "tree"]
    assert tree["predicted_speedup"] == pytest.approx(3.0 * T1 / (T1 + draft))
    # a device 4x faster per forward: drafting scales alike by default, so the ratio is the same ...
    (fast,) = [r for r in replay_bench(results, flat_curve(T1 / 4), reference=reference) if r["method"] == "tree"]
    assert fast["predicted_speedup"] == pytest.approx(3.0 * T1 / (T1 + draft))
    # ... unless the drafting is host work that does not speed up
    (host,) = [
        r for r in replay_bench(results, flat_curve(T1 / 4), reference=reference, draft_scale=1.0)
        if r["method"] == "tree"
    ]  # fmt: skip
    assert host["predicted_speedup"] == pytest.approx(3.0 * (T1 / 4) / (T1 / 4 + draft))


def test_replay_compares_on_the_same_prompts_and_by_category():
    ar = [[1, 0, 1, 0.0, T1, 0.0]] * 6
    rows = [traced("autoregressive", 1, ar, category="a"), traced("autoregressive", 2, ar * 2, category="b"),
            traced("tree", 1, [[4, 3, 3, 0.0, T4, 0.0]] * 2, category="a")]  # fmt: skip
    results = results_of(rows, ["autoregressive", "tree", "hf_generate"])
    table = replay_bench(results, curve_from_traces(results))
    assert [r["method"] for r in table] == ["autoregressive", "tree"]  # untraced anchors are left out
    assert table[1]["prompts"] == 1
    assert table[1]["measured_speedup"] == pytest.approx(6 * T1 / (2 * T4))  # against prompt 1's AR only
    (b,) = replay_bench(results, curve_from_traces(results), category="b")
    assert b["method"] == "autoregressive" and b["prompts"] == 1


def test_theory_speedup_uses_the_maximum_likelihood_alpha():
    # chains of 2 drafts: accepted 2, 0, 1 -> α̂ = 3 / (3 + 2 rejections) = 0.6
    steps = [[3, 2, 3, 0.001, T4, 0.0], [3, 2, 1, 0.001, T4, 0.0], [3, 2, 2, 0.001, T4, 0.0]]
    rows = [traced("draft", 1, steps)]
    curve = curve_from_points({1: T1, 3: T4})
    m = 1 + 0.6 + 0.36  # E[L + 1] for α = 0.6, k = 2
    assert theory_speedup(rows, curve) == pytest.approx(m * T1 / (0.001 + T4))
    assert theory_speedup(rows, curve, tree_expected_length=2.5) == pytest.approx(2.5 * T1 / (0.001 + T4))
    assert theory_speedup([traced("autoregressive", 1, [[1, 0, 1, 0.0, T1, 0.0]])], curve) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "points, message",
    [
        ({}, "at least one point"),
        ({0: 0.01, 1: 0.01}, ">= 1"),
        ({1: 0.01, 2.5: 0.02}, "whole numbers"),
        ({1: -0.01}, "positive number"),
        ({1: float("nan")}, "positive number"),
        ({1: "fast"}, "positive number"),
        ({4: 0.01, 8: 0.02}, "must include n=1"),
        ([(1, 0.01), (1, 0.02)], "given twice"),
        ([(1, 0.01, 3)], "(tokens, seconds)"),
    ],
)
def test_user_entered_curves_are_checked(points, message):
    with pytest.raises(CurveInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        curve_from_points(points)


def test_user_entered_curve_is_sorted_and_interpolated():
    curve = curve_from_points([(8, 0.02), (1, 0.01), (4, 0.012)])
    assert curve.sizes == [1, 4, 8]
    assert curve(6) == pytest.approx(0.016)
    assert flat_curve(0.005)(1) == flat_curve(0.005)(500) == 0.005


# ---- the bench records traces -----------------------------------------------------------------------


def prompts(n=1):
    return [Prompt(question_id=i + 1, category="ab"[i % 2], ids=[5, 6, 7, 8, 5, 6, 7, 8, 5, 6][i:]) for i in range(n)]


def test_bench_records_a_trace_per_row_of_our_loop(model):
    results = run_benchmark(model, prompts(), "autoregressive,prompt_lookup", max_new_tokens=12, progress=False)
    assert results["trace_fields"] == list(TRACE_FIELDS)
    rows = traced_rows(results)
    assert [r["method"] for r in rows] == ["autoregressive", "prompt_lookup"]
    for r in rows:
        steps, prefill = r["trace"]["steps"], r["trace"]["prefill_seconds"]
        assert len(steps) == r["forwards"]
        assert sum(s[2] for s in steps) == r["new_tokens"]
        assert all(s[0] >= 1 and 0 <= s[1] <= s[0] - 1 and s[2] >= 1 for s in steps)
        assert 0 < prefill + sum(s[3] + s[4] + s[5] for s in steps) <= r["seconds"] + 1e-5
    assert all(s[0] == 1 and s[6] == 1 for s in rows[0]["trace"]["steps"])  # AR verifies the root only: a chain
    table = replay_bench(results, curve_from_traces(results))
    assert table[0]["predicted_speedup"] == pytest.approx(1.0)
    json.dumps(results)  # the results file stays plain JSON


def test_bench_without_traces_and_old_files_load(model, tmp_path):
    out = tmp_path / "r.json"
    results = run_benchmark(model, prompts(2), "autoregressive,prompt_lookup", max_new_tokens=8, progress=False,
                            out=str(out), traces=False, limit=1)  # fmt: skip
    assert traced_rows(results) == [] and all("trace" not in r for r in results["rows"])
    # a file written before traces existed: no "traces" in its config, no "trace_fields"
    old = json.loads(out.read_text())
    del old["config"]["traces"], old["trace_fields"]
    out.write_text(json.dumps(old))
    assert "overall" in format_table(old)
    assert summarize(old["rows"], old["methods"])["prompt_lookup"]["prompts"] == 1
    with pytest.raises(ValueError, match="no traced"):
        replay_bench(old, flat_curve(0.01))
    # ... and resumes (traces on now): the old rows stay untraced, the new prompt's rows carry traces
    resumed = run_benchmark(model, prompts(2), "autoregressive,prompt_lookup", max_new_tokens=8, progress=False,
                            out=str(out))  # fmt: skip
    assert [("trace" in r) for r in resumed["rows"]] == [False, False, True, True]


def test_chains_and_trees_are_priced_on_their_own_curves():
    # the same size, n = 4: a chain (no mask) at T4, a tree (a tree mask) 50% dearer
    ar = traced("autoregressive", 1, [[1, 0, 1, 0.0, T1, 0.0, 1]] * 12)
    chain = traced("chain", 1, [[4, 3, 3, 0.0, T4, 0.0, 1]] * 4)
    tree = traced("tree", 1, [[4, 3, 3, 0.0, 1.5 * T4, 0.0, 0]] * 4)
    results = results_of([ar, chain, tree], ["autoregressive", "chain", "tree"])
    shaped = shaped_curve_from_traces(results)
    assert shaped.chain(4) == pytest.approx(T4) and shaped.tree(4) == pytest.approx(1.5 * T4)
    assert shaped.chain(1) == shaped.tree(1) == pytest.approx(T1)
    for r in replay_bench(results, shaped):  # exact per shape ...
        assert r["predicted_speedup"] == pytest.approx(r["measured_speedup"])
    pooled = {r["method"]: r for r in replay_bench(results, curve_from_traces(results))}  # ... pooled: averaged
    assert pooled["chain"]["ratio"] < 1 < pooled["tree"]["ratio"]


def test_curves_by_prompt_price_each_row_at_its_own_context():
    # prompt 2 has a long context: every forward there costs twice as much
    rows = []
    for q, k in ((1, 1.0), (2, 2.0)):  # prompt 2 ends early (EOS): the prompts weigh differently per method
        rows.append(traced("autoregressive", q, [[1, 0, 1, 0.0, k * T1, 0.0, 1]] * (12 if q == 1 else 3)))
        tree = [[4, 3, 3, 0.0, k * T4, 0.0, 0]] * (4 if q == 1 else 1)
        rows.append(traced("tree", q, tree + [[1, 0, 1, 0.0, k * T1, 0.0, 1]] * (2 if q == 1 else 0)))
    results = results_of(rows, ["autoregressive", "tree"])
    per_prompt = curves_by_prompt(results)
    assert per_prompt[2].tree(4) == pytest.approx(2 * T4)
    (_, tree) = replay_bench(results, per_prompt)
    assert tree["predicted_speedup"] == pytest.approx(tree["measured_speedup"])
    (_, pooled) = replay_bench(results, shaped_curve_from_traces(results))
    assert pooled["ratio"] != pytest.approx(1.0)
    with pytest.raises(ValueError, match="no curve for prompt 2"):
        replay_bench(results, {1: per_prompt[1]})
