"""The benchmark harness: aggregation math, method specs, resume/atomic writes, and an end-to-end run.

Everything runs on `tiny_model()` (random weights, no tokenizer), so prompts are token-id lists.
"""

import json
import time

import pytest
import torch

import specdec_lab as S
from specdec_lab import generate
from specdec_lab.bench import (
    ANCHORS,
    BenchInputError,
    ResumeError,
    RunOutput,
    format_table,
    parse_methods,
    run_benchmark,
    speedup_interval,
    summarize,
)
from specdec_lab.bench.__main__ import main
from specdec_lab.bench.report import against_best_single, by_sampling, decode_rows
from specdec_lab.bench.report import main as report_main
from specdec_lab.io import Prompt
from specdec_lab.proposers.registry import MethodSpecError, parse_method_spec


def repetitive(seed, length=24, period=5):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(0, 256, (period,), generator=g).tolist()
    return (base * (length // period + 1))[:length]


def prompts(n=3):
    return [Prompt(question_id=i + 1, category="ab"[i % 2], ids=repetitive(i)) for i in range(n)]


def counting_runner(calls, fail_at=None):
    """A fake anchor (registered like any ANCHORS entry): counts calls, can fail on the n-th."""

    def factory(model, eos_ids):
        def run(ids, max_new_tokens, seed):
            calls.append(list(ids))
            if fail_at is not None and len(calls) == fail_at:
                raise KeyboardInterrupt
            return RunOutput(tokens=[1] * max_new_tokens, forwards=max_new_tokens, stop_reason="max_new_tokens")

        return run

    return factory


# ---- aggregation ------------------------------------------------------------------------------------
def row(q, cat, method, tokens, seconds, forwards=None, identical=True):
    return dict(question_id=q, category=cat, method=method, new_tokens=tokens, seconds=seconds,
                forwards=forwards if forwards is not None else tokens, identical=identical)  # fmt: skip


def test_speedup_is_ratio_of_sums_and_identical_is_a_fraction():
    rows = [
        row(1, "a", "autoregressive", 10, 1.0),
        row(2, "b", "autoregressive", 30, 1.0),
        row(1, "a", "x", 10, 0.5, forwards=4, identical=True),
        row(2, "b", "x", 30, 2.5, forwards=10, identical=False),
    ]
    s = summarize(rows, ["autoregressive", "x"])
    assert s["autoregressive"]["tokens_per_s"] == pytest.approx(20.0)
    assert s["autoregressive"]["speedup"] == pytest.approx(1.0)
    assert s["autoregressive"]["mean_accepted"] == pytest.approx(1.0)
    x = s["x"]
    assert x["tokens_per_s"] == pytest.approx(40 / 3)
    assert x["speedup"] == pytest.approx((40 / 3) / 20)  # not the mean of per-prompt ratios (2.0, 0.4)
    assert x["mean_accepted"] == pytest.approx(40 / 14)
    assert x["identical_to_autoregressive"] == pytest.approx(0.5)
    assert x["by_category"]["a"]["speedup"] == pytest.approx(2.0)
    assert x["by_category"]["b"]["speedup"] == pytest.approx(0.4)
    assert x["by_category"]["a"]["identical_to_autoregressive"] == 1.0
    assert x["by_category"]["b"]["identical_to_autoregressive"] == 0.0
    assert list(x["by_category"]) == ["a", "b"]


def test_unknown_forwards_and_missing_baseline_give_null():
    rows = [row(1, "a", "hf", 10, 1.0, identical=None)]
    rows[0]["forwards"] = None
    s = summarize(rows, ["hf"])
    assert s["hf"]["mean_accepted"] is None
    assert s["hf"]["speedup"] is None
    assert s["hf"]["identical_to_autoregressive"] is None
    assert s["hf"]["tokens_per_s"] == pytest.approx(10.0)


def test_speedup_interval_is_a_paired_bootstrap_over_prompts():
    # A method exactly 2x faster on every prompt: every resample gives 2.0, however different the prompts.
    rows = [row(q, "a", "autoregressive", 10, 1.0 + q) for q in range(8)]
    rows += [row(q, "a", "x", 10, (1.0 + q) / 2) for q in range(8)]
    x = summarize(rows, ["autoregressive", "x"])["x"]
    assert x["speedup_95"] == pytest.approx([2.0, 2.0])
    # Same decoder, noisy times: the interval contains the point estimate and straddles 1; seeded.
    noisy = [row(q, "a", "autoregressive", 10, 1.0) for q in range(8)]
    noisy += [row(q, "a", "x", 10, s) for q, s in enumerate([0.8, 1.2, 0.9, 1.1, 1.15, 0.85, 1.0, 1.05])]
    lo, hi = speedup_interval([r for r in noisy if r["method"] == "x"], noisy[:8])
    point = summarize(noisy, ["autoregressive", "x"])["x"]["speedup"]
    assert lo < point < hi and lo < 1.0 < hi
    assert (lo, hi) == speedup_interval([r for r in noisy if r["method"] == "x"], noisy[:8])
    assert speedup_interval([row(1, "a", "x", 10, 1.0)], [row(1, "a", "autoregressive", 10, 1.0)]) is None
    assert "95% interval" in format_table(
        {"summary": summarize(noisy, ["autoregressive", "x"]), "rows": noisy, "prompts_done": 8, "prompts_total": 8,
         "config": {"model": "m", "device": "cpu", "dtype": "float32", "max_new_tokens": 10},
         "machine": {"device_name": "cpu", "torch_threads": 1}}
    )  # fmt: skip


def test_sampled_methods_are_compared_with_autoregressive_sampled_alike():
    t = ":temperature=0.7:top_p=0.9"
    rows = []
    for q, cat in ((1, "a"), (2, "a"), (3, "b"), (4, "b")):
        rows += [row(q, cat, "autoregressive", 10, 1.0), row(q, cat, "medusa", 10, 0.5, forwards=5),
                 row(q, cat, "autoregressive" + t, 10, 1.25, identical=None),
                 row(q, cat, "medusa" + t, 10, 0.8 if cat == "a" else 1.0, forwards=6, identical=None),
                 row(q, cat, "medusa:accept=typical" + t, 10, 0.625, forwards=5, identical=None),
                 row(q, cat, "prompt_lookup:temperature=1.0", 10, 0.5, identical=None)]  # fmt: skip
    labels = ["autoregressive", "medusa", "autoregressive" + t, "medusa" + t, "medusa:accept=typical" + t,
              "prompt_lookup:temperature=1.0"]  # fmt: skip
    res = {"methods": labels, "rows": rows, "summary": summarize(rows, labels)}
    recs = {r["method"]: r for r in by_sampling(res)}
    assert set(recs) == {"medusa" + t, "medusa:accept=typical" + t}  # no sampled baseline at T = 1: left out
    exact = recs["medusa" + t]
    assert exact["baseline"] == "autoregressive" + t and exact["greedy"] == "medusa"
    assert exact["speedup"] == pytest.approx(1.25 / 0.9)  # against sampled plain decoding, not greedy
    assert exact["by_category"] == pytest.approx({"a": 1.25 / 0.8, "b": 1.25})
    assert exact["worst_category"] == "b" and exact["worst_speedup"] == pytest.approx(1.25)
    assert exact["greedy_speedup"] == pytest.approx(2.0) and exact["kept"] == pytest.approx(1.25 / 0.9 / 2.0)
    assert exact["rule"] == "default" and recs["medusa:accept=typical" + t]["rule"] == "typical"
    assert recs["medusa:accept=typical" + t]["greedy"] == "medusa"  # `accept` aside, the same method
    res.update(prompts_done=4, prompts_total=4, config={"model": "m", "device": "cpu", "dtype": "float32",
               "max_new_tokens": 10}, machine={"device_name": "cpu", "torch_threads": 1})  # fmt: skip
    assert "kept 69% of 2.00x" in format_table(res)


def test_a_sampled_run_reads_its_greedy_speedups_from_another_run_on_the_same_prompts(tmp_path, capsys):
    t = ":temperature=0.7:top_p=0.9"
    sampled_rows, greedy_rows = [], []
    for q, cat in ((1, "a"), (2, "b")):
        sampled_rows += [row(q, cat, "autoregressive" + t, 10, 1.0, identical=None),
                         row(q, cat, "medusa" + t, 10, 0.8, forwards=6, identical=None)]  # fmt: skip
    for q, cat in ((1, "a"), (2, "b"), (3, "c")):  # prompt 3 was not sampled: it must not count
        greedy_rows += [row(q, cat, "autoregressive", 10, 1.0), row(q, cat, "medusa", 10, 0.5 if q < 3 else 0.1)]
    labels, glabels = ["autoregressive" + t, "medusa" + t], ["autoregressive", "medusa"]
    machine = {"device_name": "cpu", "torch_threads": 1, "isa": "AVX2"}
    cfg = {"model": "m", "device": "cpu", "dtype": "float32", "max_new_tokens": 10}

    def run(labels, rows, out):
        n = len({r["question_id"] for r in rows})
        return {"methods": labels, "rows": rows, "summary": summarize(rows, labels), "prompts_done": n,
                "prompts_total": n, "config": {**cfg, "out": out}, "machine": machine}  # fmt: skip

    sampled, greedy = run(labels, sampled_rows, "s.json"), run(glabels, greedy_rows, "g.json")
    (rec,) = by_sampling(sampled)
    assert rec["greedy"] is None and rec["kept"] is None  # no greedy twin in this run, none given
    (rec,) = by_sampling(sampled, greedy_runs=[greedy])
    assert rec["greedy"] == "medusa" and rec["greedy_run"] == "g.json"
    assert rec["greedy_speedup"] == pytest.approx(2.0)  # prompts 1 and 2 only
    assert rec["kept"] == pytest.approx(1.25 / 2.0)
    paths = []
    for name, run in (("s.json", sampled), ("g.json", greedy)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(run))
    assert report_main([str(paths[0]), "--greedy-from", str(paths[1])]) == 0
    assert "kept 62% of 2.00x" in capsys.readouterr().out
    other = {**greedy, "machine": {**machine, "isa": "AVX512"}}
    paths[1].write_text(json.dumps(other))
    with pytest.raises(SystemExit):
        report_main([str(paths[0]), "--greedy-from", str(paths[1])])
    assert "machine kinds do not compare" in capsys.readouterr().err


def test_a_sampled_short_answer_does_not_charge_its_prefill_to_the_method():
    """Same decode rate, different lengths: a 10-token answer and a 100-token one behind a 1 s prefill. Σ tokens /
    Σ seconds calls the short one 5.5x slower; the decode alone calls them equal (`decode_rows`)."""
    t = ":temperature=0.7"
    rows = []
    for q in (1, 2):
        for label, tokens in (("autoregressive" + t, 100), ("x" + t, 10)):
            r = row(q, "rag", label, tokens, 1.0 + tokens * 0.05, identical=None)
            rows.append(r | {"trace": {"prefill_seconds": 1.0, "steps": {}}})
    for q in (1, 2):  # its greedy twin: the same lengths, 2x faster on the decode
        rows += [row(q, "rag", "autoregressive", 100, 1.0 + 5.0) | {"trace": {"prefill_seconds": 1.0}},
                 row(q, "rag", "x", 100, 1.0 + 2.5) | {"trace": {"prefill_seconds": 1.0}}]  # fmt: skip
    labels = ["autoregressive" + t, "x" + t, "autoregressive", "x"]
    res = {"methods": labels, "rows": rows, "summary": summarize(rows, labels)}
    (rec,) = by_sampling(res)
    assert rec["speedup"] == pytest.approx((10 / 1.5) / (100 / 6.0))  # the prefill over 10 tokens: 0.4x
    assert rec["decode_speedup"] == pytest.approx(1.0) and rec["decode_speedup_95"] == pytest.approx([1.0, 1.0])
    assert rec["decode_worst_category"] == "rag" and rec["decode_worst_speedup"] == pytest.approx(1.0)
    assert rec["greedy_decode_speedup"] == pytest.approx(2.0) and rec["decode_kept"] == pytest.approx(0.5)
    untraced = [{k: v for k, v in r.items() if k != "trace"} for r in rows]
    assert decode_rows(untraced) is None
    (rec,) = by_sampling(res | {"rows": untraced})
    assert rec["decode_speedup"] is None and rec["decode_kept"] is None


def test_the_hybrid_is_held_to_the_best_single_method_of_each_category():
    rows = []
    for q, cat in ((1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "b"), (6, "b")):
        rows += [
            row(q, cat, "autoregressive", 10, 1.0),
            row(q, cat, "hf_generate", 10, 0.1),  # an anchor: not a single
            row(q, cat, "prompt_lookup", 10, 0.5 if cat == "a" else 0.9),
            row(q, cat, "medusa", 10, 0.8 if cat == "a" else 0.6 + 0.01 * q),
            row(q, cat, "hybrid", 10, 0.5 if cat == "a" else 0.8),
            row(q, cat, "medusa:temperature=0.7", 10, 0.2, identical=None),  # sampled: not a single
            row(q, cat, "hybrid:sources=prompt_lookup", 10, 0.1),  # the hybrid itself, configured: not a single
        ]
    labels = [
        "autoregressive",
        "hf_generate",
        "prompt_lookup",
        "medusa",
        "hybrid",
        "medusa:temperature=0.7",
        "hybrid:sources=prompt_lookup",
    ]
    res = {"methods": labels, "rows": rows, "summary": summarize(rows, labels)}
    best = against_best_single(res)
    assert best["singles"] == ["prompt_lookup", "medusa"]
    a, b = best["categories"]["a"], best["categories"]["b"]
    assert a["best"] == "prompt_lookup" and a["speedup"] == pytest.approx(2.0) and a["meets"]
    assert b["best"] == "medusa" and b["speedup"] == pytest.approx(1.25) and not b["meets"]  # below medusa's floor
    assert b["best_95"][0] > 1.25 and not best["meets_all"]
    assert against_best_single(res, label="eagle") is None  # not in the run
    res.update(prompts_done=6, prompts_total=6, config={"model": "m", "device": "cpu", "dtype": "float32",
               "max_new_tokens": 10}, machine={"device_name": "cpu", "torch_threads": 1})  # fmt: skip
    assert "best medusa" in format_table(res) and "below" in format_table(res)


# ---- method specs and input errors ------------------------------------------------------------------
def test_method_spec_parsing():
    spec = parse_method_spec("prompt_lookup:max_draft=4:draft_length=heuristic")
    assert spec.name == "prompt_lookup"
    assert spec.params == {"max_draft": 4, "draft_length": "heuristic"}
    assert spec.label == "prompt_lookup:max_draft=4:draft_length=heuristic"
    assert parse_method_spec("m:a=1.5:b=2:c=x").params == {"a": 1.5, "b": 2, "c": "x"}
    assert parse_method_spec("draft:remember=false:x=True").params == {"remember": False, "x": True}
    assert parse_method_spec("draft:draft=layer_skip:4:max_draft=6").params == {
        "draft": "layer_skip:4",
        "max_draft": 6,
    }
    labels = [s.label for s in parse_methods("autoregressive, prompt_lookup:max_draft=4,hf_generate")]
    assert labels == ["autoregressive", "prompt_lookup:max_draft=4", "hf_generate"]
    with pytest.raises(MethodSpecError, match="key=value"):
        parse_method_spec("prompt_lookup:max_draft")
    with pytest.raises(BenchInputError, match="key=value"):  # the bench names it as its own input error
        parse_methods("prompt_lookup:max_draft")
    with pytest.raises(BenchInputError, match="twice"):
        parse_methods("autoregressive,autoregressive")


def test_unknown_method_and_parameter_errors():
    with pytest.raises(BenchInputError, match="unknown method 'nope'") as err:
        parse_methods("autoregressive,nope")
    for name in ("autoregressive", "prompt_lookup", "hf_generate", "hf_prompt_lookup"):
        assert name in str(err.value)
    with pytest.raises(BenchInputError, match="bogus"):
        parse_methods("prompt_lookup:bogus=1")
    with pytest.raises(BenchInputError, match="prompt_lookup_num_tokens"):
        parse_methods("hf_prompt_lookup:bogus=1")
    with pytest.raises(BenchInputError, match="max_draft='x' is not a valid int"):
        parse_methods("prompt_lookup:max_draft=x")


def test_cli_rejects_bad_input_before_loading_a_model(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--limit", "0"])
    assert "must be >= 1" in capsys.readouterr().err
    assert main(["--methods", "autoregressive,nope", "--prompts", str(tmp_path / "x.jsonl")]) == 2
    assert "known methods" in capsys.readouterr().err
    assert main(["--prompts", str(tmp_path / "x.jsonl")]) == 2
    assert "prompts file not found" in capsys.readouterr().err


def test_text_prompt_without_tokenizer_is_a_clear_error(model):
    with pytest.raises(BenchInputError, match="needs a tokenizer"):
        run_benchmark(model, ["hello"], "autoregressive", max_new_tokens=2, progress=False)


# ---- resume -----------------------------------------------------------------------------------------
def test_atomic_write_and_resume_skip_done_prompts(model, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    calls: list = []
    # 1 warm-up call + prompt 1, then interrupted on prompt 2
    monkeypatch.setitem(ANCHORS, "counting", counting_runner(calls, fail_at=3))
    with pytest.raises(KeyboardInterrupt):
        run_benchmark(model, prompts(3), "counting", max_new_tokens=4, out=str(out), progress=False)
    saved = json.loads(out.read_text())
    assert saved["prompts_done"] == 1 and [r["question_id"] for r in saved["rows"]] == [1]
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]  # no temp file left behind

    calls.clear()
    monkeypatch.setitem(ANCHORS, "counting", counting_runner(calls))
    res = run_benchmark(model, prompts(3), "counting", max_new_tokens=4, out=str(out), progress=False)
    assert calls == [repetitive(1), repetitive(1), repetitive(2)]  # warm-up, then prompts 2 and 3 only
    assert [r["question_id"] for r in res["rows"]] == [1, 2, 3]
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))

    calls.clear()
    run_benchmark(model, prompts(3), "counting", max_new_tokens=4, out=str(out), progress=False)
    assert calls == []  # all done: no warm-up either


def test_resume_refuses_a_different_config(model, tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    monkeypatch.setitem(ANCHORS, "counting", counting_runner([]))
    run_benchmark(model, prompts(2), "counting", max_new_tokens=4, out=str(out), progress=False)
    with pytest.raises(ResumeError, match=r"(?s)config\.max_new_tokens: 4 in the file, 5 now.*--fresh"):
        run_benchmark(model, prompts(2), "counting", max_new_tokens=5, out=str(out), progress=False)
    with pytest.raises(ResumeError, match="prompts_sha256"):
        run_benchmark(model, prompts(3), "counting", max_new_tokens=4, out=str(out), progress=False)
    # a different --limit is the same run, extended
    res = run_benchmark(model, prompts(2), "counting", max_new_tokens=4, limit=1, out=str(out), progress=False)
    assert res["prompts_done"] == 2
    res = run_benchmark(model, prompts(2), "counting", max_new_tokens=5, out=str(out), fresh=True, progress=False)
    assert res["config"]["max_new_tokens"] == 5 and all(r["new_tokens"] == 5 for r in res["rows"])


def test_repeats_rotate_each_round_and_keep_the_fastest_run(model, monkeypatch):
    order: list = []
    slow = iter([0.2, 0.0, 0.2, 0.0, 0.0, 0.0])  # per timed call after warm-up: ma's 1st and mb's 2nd are slow

    def sleepy(name):
        def factory(model_, eos_ids):
            def run(ids, max_new_tokens, seed):
                order.append(name)
                if len(order) > 2:  # not the warm-ups
                    time.sleep(next(slow, 0.0))
                return RunOutput(tokens=[1] * max_new_tokens, forwards=max_new_tokens, stop_reason="max_new_tokens")

            return run

        return factory

    monkeypatch.setitem(ANCHORS, "ma", sleepy("ma"))
    monkeypatch.setitem(ANCHORS, "mb", sleepy("mb"))
    res = run_benchmark(model, prompts(1), "ma,mb", max_new_tokens=2, repeats=3, progress=False)
    assert order[2:] == ["ma", "mb", "mb", "ma", "ma", "mb"]  # round r is rotated by r: ABBAAB
    for r in res["rows"]:
        assert len(r["seconds_runs"]) == 3 and r["seconds"] == pytest.approx(min(r["seconds_runs"]), abs=1e-6)
        assert max(r["seconds_runs"]) >= 0.2 > r["seconds"]  # the slow run is not the one kept
    with pytest.raises(BenchInputError, match="repeats must be a positive integer"):
        run_benchmark(model, prompts(1), "ma", max_new_tokens=2, repeats=0, progress=False)
    assert "seconds_runs" not in run_benchmark(model, prompts(1), "ma", max_new_tokens=2, progress=False)["rows"][0]


# ---- end to end -------------------------------------------------------------------------------------
def test_end_to_end_tiny_model_is_identical_and_stops_at_eos(model, tmp_path):
    ps = prompts(3)
    eos = generate(model, ps[0].ids, max_new_tokens=6).tokens[5]  # prompt 1 stops at EOS after 6 tokens
    methods = "autoregressive,prompt_lookup,prompt_lookup:draft_length=4,hf_generate"
    res = run_benchmark(model, ps, methods, max_new_tokens=12, eos_token_id=eos, out=str(tmp_path / "r.json"),
                        progress=False)  # fmt: skip
    labels = methods.split(",")
    assert res["methods"] == labels and len(res["rows"]) == 3 * len(labels)
    for label in labels:
        s = res["summary"][label]
        assert s["identical_to_autoregressive"] == 1.0
        assert set(s["by_category"]) == {"a", "b"}
        assert s["prompts"] == 3
    assert res["summary"]["autoregressive"]["speedup"] == pytest.approx(1.0)
    assert res["summary"]["autoregressive"]["mean_accepted"] == 1.0
    assert res["summary"]["hf_generate"]["mean_accepted"] == 1.0  # forward calls counted by the hook
    first = [r for r in res["rows"] if r["question_id"] == 1]
    assert all(r["stop_reason"] == "eos" and r["new_tokens"] == 6 for r in first)
    drafted = [r for r in res["rows"] if r["method"] == "prompt_lookup:draft_length=4"]
    assert sum(r["forwards"] for r in drafted) < sum(r["new_tokens"] for r in drafted)  # drafts accepted
    assert {"cpu", "torch_threads", "torch", "transformers", "device"} <= set(res["machine"])
    table = format_table(res)
    assert all(label in table for label in labels) and "overall" in table


def test_a_differing_method_records_first_diff_and_top2_gap(model, monkeypatch):
    def off_by_one(model_, eos_ids):
        def run(ids, max_new_tokens, seed):
            toks = generate(model_, ids, max_new_tokens=max_new_tokens).tokens
            toks[3] = (toks[3] + 1) % 256
            return RunOutput(tokens=toks, forwards=None, stop_reason="max_new_tokens")

        return run

    monkeypatch.setitem(ANCHORS, "off_by_one", off_by_one)
    res = run_benchmark(model, prompts(2), "autoregressive,off_by_one", max_new_tokens=6, progress=False)
    bad = [r for r in res["rows"] if r["method"] == "off_by_one"]
    assert all(r["identical"] is False and r["first_diff"] == 3 and r["top2_gap"] > 0 for r in bad)
    assert res["summary"]["off_by_one"]["identical_to_autoregressive"] == 0.0
    assert res["summary"]["off_by_one"]["mean_accepted"] is None


# ---- memory: rows are independent unless asked --------------------------------------------------------
def test_a_row_does_not_depend_on_the_rows_before_it():
    """memory="fresh" (the default): a prompt's row is the same whether other prompts ran before it or not —
    its tokens, forwards and everything its proposer decided. memory="method" carries what the method
    learned from row to row (and the test can tell). Prices come from a curve far above the tiny model's
    timings, so every decision depends on what was accepted, not on the clock."""
    from specdec_lab.cost import CostCurve, set_cost_curve

    target = S.tiny_model(num_layers=4, eos_token_id=None)
    set_cost_curve(target, CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[1.0, 1.3, 1.9, 3.1, 5.5]))
    spec = "layer_skip:n_layers=1:probe_every=4:probe_max=8"  # the first of 4 random layers: a poor draft
    every = [Prompt(question_id=q, category="all", ids=repetitive(q, length=12, period=7)) for q in (1, 2, 3)]

    def rows(selection, memory):
        r = run_benchmark(target, selection, f"autoregressive,{spec}", max_new_tokens=40, memory=memory,
                          traces=False, progress=False)  # fmt: skip
        return {row["question_id"]: row for row in r["rows"] if row["method"] == spec}

    def decided(row):
        return row["tokens"], row["forwards"], row["proposer"]

    alone = rows(every[2:], "fresh")[3]
    after = rows(every, "fresh")[3]
    assert decided(after) == decided(alone)
    carried = rows(every, "method")[3]
    assert carried["tokens"] == alone["tokens"]  # exact either way ...
    assert decided(carried) != decided(alone)  # ... but it went on from what the earlier rows taught it
    with pytest.raises(BenchInputError, match="memory must be one of"):
        run_benchmark(target, every, "autoregressive", max_new_tokens=2, memory="global", progress=False)
