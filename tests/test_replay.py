"""What-if replay (`specdec_lab.bench.replay`) and the bench's per-step traces it reads.

Synthetic runs check the replay's arithmetic exactly; the bench part runs on `tiny_model()` (random
weights, token-id prompts).
"""

import json

import pytest

from specdec_lab.bench import format_table, run_benchmark, summarize
from specdec_lab.bench.replay import (
    curve_from_traces,
    curves_by_prompt,
    replay_bench,
    replay_row,
    shaped_curve_from_traces,
    theory_speedup,
    traced_rows,
)
from specdec_lab.bench.trace import TRACE_FIELDS, TraceStep, steps_of
from specdec_lab.cost import CurveInputError, curve_from_points, flat_curve
from specdec_lab.io import Prompt


# ---- synthetic runs ---------------------------------------------------------------------------------
def traced(method, q, steps, prefill=0.0, other=0.0, category="a"):
    """A bench row with a trace (`steps` as stored); its measured seconds = prefill + phases + other."""
    read = [TraceStep.of(s) for s in steps]
    tokens = sum(s.emitted for s in read)
    seconds = prefill + sum(s.t_propose + s.t_verify + s.t_accept for s in read) + other
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
        steps, prefill = steps_of(r), r["trace"]["prefill_seconds"]
        assert len(steps) == r["forwards"]
        assert sum(s.emitted for s in steps) == r["new_tokens"]
        assert all(s.nodes >= 1 and 0 <= s.candidates <= s.nodes - 1 and s.emitted >= 1 for s in steps)
        assert 0 < prefill + sum(s.t_propose + s.t_verify + s.t_accept for s in steps) <= r["seconds"] + 1e-5
    assert all(s.nodes == 1 and s.chain for s in steps_of(rows[0]))  # AR verifies the root only: a chain
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


# ---- re-deciding: each method's own sizing rule under the other curve ----------------------------------------
REPO = __import__("pathlib").Path(__file__).resolve().parents[1]
STEEP = {1: T1, 2: 1.1 * T1, 3: 1.2 * T1, 4: 1.3 * T1, 5: 1.4 * T1, 9: 1.8 * T1, 33: 4.2 * T1, 65: 7.4 * T1}


def steep():
    """A CPU-like curve: every extra token costs a tenth of a one-token forward."""
    return curve_from_points(STEEP)


def chain_run(method="draft", k=3, c=0.02 * T1, repeats=4):
    """AR and a chain method whose every step drafts k tokens (k = the rule's choice on `steep()` at α 0.6):
    accepted k, 0, 0 repeated -> α̂ = k / (k + 2 rejections) = 0.6 for k = 3."""
    curve = steep()
    pattern = [k, 0, 0] * repeats
    chain = traced(method, 1, [[k + 1, k, a + 1, c * k, curve(k + 1), 0.0, 1] for a in pattern])
    ar = traced("autoregressive", 1, [[1, 0, 1, 0.0, T1, 0.0, 1]] * chain["new_tokens"])
    return results_of([ar, chain], ["autoregressive", method])


def by_method(table):
    return {r["method"]: r for r in table}


def test_redecided_chain_on_its_own_curve_keeps_the_recorded_k_and_its_time():
    from specdec_lab.bench.redecide import redecide_bench
    from specdec_lab.cost.theory import optimal_k

    assert optimal_k(0.6, 0.02 * T1, 8, verify_cost=steep()) == 3  # the run's k is the rule's on this curve
    results = chain_run()
    draft = by_method(redecide_bench(results, steep(), reference=steep()))["draft"]
    assert draft["size"] == "draft length k"
    assert draft["recorded_size"] == draft["chosen_size"] == 3
    assert draft["predicted_speedup"] == pytest.approx(draft["repriced_speedup"])
    assert draft["repriced_speedup"] == pytest.approx(draft["measured_speedup"])


@pytest.mark.parametrize("method", ["draft", "prompt_lookup"])
def test_on_a_flat_curve_a_chain_drafts_longer_and_gains(method):
    from specdec_lab.bench.redecide import redecide_bench

    results = chain_run(method)
    row = by_method(redecide_bench(results, flat_curve(T1), reference=steep()))[method]
    assert row["chosen_size"] > row["recorded_size"] == 3
    assert row["predicted_speedup"] > row["repriced_speedup"] > row["measured_speedup"]


def test_a_chain_that_drafted_nothing_and_fixed_sizes_are_repriced():
    from specdec_lab.bench.redecide import redecide_row

    plain = traced("draft", 1, [[1, 0, 1, 0.0001, T1, 0.0, 1]] * 5)
    fixed = traced("draft:draft_length=3", 1, chain_run()["rows"][1]["trace"]["steps"])
    for row in (plain, fixed):
        d = redecide_row(row, flat_curve(T1))
        assert d.kind == "" and d.seconds == pytest.approx(replay_row(row, flat_curve(T1)))


def medusa_run(budget, curve, head=0.05 * T1, emitted=(2, 1, 2, 1)):
    steps = [[budget + 1, budget, e, head, curve(budget + 1), 0.0, int(budget <= 1)] for e in emitted * 4]
    med = traced("medusa", 1, steps)
    ar = traced("autoregressive", 1, [[1, 0, 1, 0.0, T1, 0.0, 1]] * med["new_tokens"])
    med["proposer"] = {"depth": 1, "correction": [1.0]}
    return results_of([ar, med], ["autoregressive", "medusa"])


def test_medusa_redecided_calls_pick_budget_on_the_calibrated_trees():
    from specdec_lab.bench.redecide import redecide_bench
    from specdec_lab.trees import pick_budget, tree_options
    from specdec_lab.trees.accuracy import HeadAccuracies

    calib = json.loads((REPO / "data" / "medusa" / "smollm2-135m" / "calibration.json").read_text())
    acc = HeadAccuracies.from_dict(calib).model("conditional")
    options = tree_options(acc, 32, max_depth=acc.shape[0])
    own = pick_budget(options, steep(), lambda d: 0.05 * T1 * d, [1.0])  # what the run would have picked here
    results = medusa_run(own.budget, steep())
    here = by_method(redecide_bench(results, steep(), reference=steep()))["medusa"]
    assert here["size"] == "tree nodes n" and here["chosen_size"] == here["recorded_size"] == own.budget
    assert here["predicted_speedup"] == pytest.approx(here["repriced_speedup"], rel=0.02)
    flat = by_method(redecide_bench(results, flat_curve(T1), reference=steep()))["medusa"]
    assert flat["chosen_size"] >= 4 * own.budget  # the tree grows where nodes are free
    assert flat["predicted_speedup"] > flat["repriced_speedup"]


def test_lookahead_opens_its_window_on_a_flat_curve():
    from specdec_lab.bench.redecide import redecide_bench

    curve = steep()
    steps = [[3, 2, e, 0.0002, curve(3), 0.0, 1] for e in (2, 1, 1, 2) * 4]  # no window: W = 0, 2 n-gram nodes
    la = traced("lookahead", 1, steps)
    ar = traced("autoregressive", 1, [[1, 0, 1, 0.0, T1, 0.0, 1]] * la["new_tokens"])
    la["proposer"] = {"steps": 16, "text": 8, "window": 0, "y_win": 0.1}
    results = results_of([ar, la], ["autoregressive", "lookahead"])
    here = by_method(redecide_bench(results, curve, reference=curve))["lookahead"]
    assert here["size"] == "window W" and here["recorded_size"] == here["chosen_size"] == 0
    flat = by_method(redecide_bench(results, flat_curve(T1), reference=curve))["lookahead"]
    assert flat["chosen_size"] > 0 and flat["predicted_speedup"] > flat["repriced_speedup"]


def test_redecided_on_this_machines_recorded_run():
    """The committed AVX-512 run: on its own curve the rules choose about what the run used; on a flat one the
    chains draft longer, Medusa's tree and Lookahead's window grow, and none of them loses."""
    from specdec_lab.bench.redecide import redecide_bench

    results = json.loads((REPO / "data" / "bench" / "avx512-after.json").read_text())
    own = curve_from_traces(results)
    here = by_method(redecide_bench(results, own, reference=own))
    for m in ("prompt_lookup", "draft", "medusa", "lookahead"):
        assert abs(here[m]["chosen_size"] - here[m]["recorded_size"]) < 1.5, here[m]
        assert here[m]["predicted_speedup"] == pytest.approx(here[m]["measured_speedup"], rel=0.1)
    flat = by_method(redecide_bench(results, flat_curve(own(1)), reference=own))
    for m in ("prompt_lookup", "draft", "medusa", "lookahead"):
        assert flat[m]["chosen_size"] > here[m]["chosen_size"], m
        assert flat[m]["predicted_speedup"] >= flat[m]["repriced_speedup"] - 1e-9, m
    assert flat["medusa"]["chosen_size"] >= 16


# ---- curve files: one command on the device, read by notebook 09 ---------------------------------------------
def test_a_curve_file_round_trips_and_a_hand_written_one_loads(tmp_path):
    from specdec_lab.cost import CostCurve, ShapedCurve
    from specdec_lab.cost.curve_file import curve_record, load_curve_file

    tree = CostCurve([1, 4, 64], [0.006, 0.0061, 0.0064], device="cuda", context=64, tree=True)
    chain = CostCurve([1, 4, 64], [0.006, 0.006, 0.0062], device="cuda", context=64)
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(curve_record(tree, chain, device="cuda", machine={"device_name": "H100"})))
    loaded = load_curve_file(path)
    assert isinstance(loaded, ShapedCurve)
    assert loaded.tree(64) == pytest.approx(0.0064) and loaded.chain(64) == pytest.approx(0.0062)
    by_hand = tmp_path / "hand.json"
    by_hand.write_text(json.dumps({"device": "my gpu", "points": {"1": 0.005, "33": 0.0052}}))
    assert load_curve_file(by_hand)(17) == pytest.approx(0.0051)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"points": {"4": 0.01}}))
    with pytest.raises(CurveInputError, match="n=1"):
        load_curve_file(bad)
    bad.write_text(json.dumps([1, 2]))
    with pytest.raises(CurveInputError, match="points"):
        load_curve_file(bad)


def test_the_curve_file_command_measures_and_writes(model, tmp_path, monkeypatch):
    import specdec_lab.cost.curve_file as cf
    from specdec_lab.bench.redecide import redecide_bench
    from specdec_lab.cost import measure_cost_curve

    def measure(model_name, device, dtype, context, repeats, max_tokens):  # the tiny model, not a download
        sizes = [1, 2, 4, max_tokens]
        tree = measure_cost_curve(model, sizes=sizes, context=context, repeats=repeats, tree=True)
        chain = measure_cost_curve(model, sizes=sizes, context=context, repeats=repeats)
        return cf.curve_record(tree, chain, model=model_name, device=device)

    monkeypatch.setattr(cf, "measure_curve_file", measure)
    out = tmp_path / "curve.json"
    assert cf.main(["--out", str(out), "--context", "8", "--repeats", "1", "--max-tokens", "8"]) == 0
    curve = cf.load_curve_file(out)
    assert curve.tree.sizes == [1, 2, 4, 8] and all(t > 0 for t in curve.tree.seconds)
    assert "curve.json" in cf.curve_label(out)
    results = chain_run()
    table = by_method(redecide_bench(results, curve, reference=steep()))  # a file's curve is a what-if curve
    assert table["autoregressive"]["predicted_speedup"] == pytest.approx(1.0)


def test_the_results_figures_fit_and_the_whatif_table_names_both_views():
    from specdec_lab.bench.redecide import redecide_bench
    from specdec_lab.viz.results import ranking_figure, ranking_frame, replay_figure, whatif_frame

    results = chain_run()
    tables = {"this machine": redecide_bench(results, steep(), reference=steep()),
              "flat": redecide_bench(results, flat_curve(T1), reference=steep())}  # fmt: skip
    frame = whatif_frame(tables)
    assert ("flat", "re-priced") in frame.columns and ("flat", "re-decided") in frame.columns
    assert frame.loc["draft", ("measured here", "what is sized")] == "draft length k"
    replay = {"own": replay_bench(results, steep(), reference=steep()), "flat": replay_bench(results, flat_curve(T1))}
    fig = replay_figure(replay)
    assert fig.layout.width <= 950 and len({t.marker.symbol for t in fig.data}) == 2  # a distinct mark per curve
    assert all(t.mode == "markers" for t in fig.data)  # no text labels printed over each other
    flat = {r["method"]: r for r in tables["flat"]}
    rank = ranking_frame({m: r["measured_speedup"] for m, r in flat.items()},
                         {"re-decided: flat": {m: r["predicted_speedup"] for m, r in flat.items()}})  # fmt: skip
    assert ranking_figure(rank, "t").layout.width <= 950


def test_the_redecide_command_prints_both_views(tmp_path, capsys):
    from specdec_lab.bench.redecide import main

    results = tmp_path / "r.json"
    results.write_text(json.dumps(chain_run()))
    curve = tmp_path / "c.json"
    curve.write_text(json.dumps({"device": "gpu", "points": {"1": T1 / 4, "64": T1 / 4}}))
    assert main([str(results), "--curve", str(curve)]) == 0
    out = capsys.readouterr().out
    assert "re-decided" in out and "flat t(n) = t(1)" in out and str(curve) in out and "draft length k" in out
    assert main([str(results), "--curve", "4:0.01"]) == 2
