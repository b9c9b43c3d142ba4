"""The one cost model (`cost.StepCost`) and the chain-length controller on it (`draft_length`).

Equivalences and invariants: the price is the curve until the loop says otherwise; the corrections keep sizes
consistent (a size never looks cheaper than a smaller one because of noise); the loop's own time enters the
price, the proposer's priced drafting does not; α̂ follows what was accepted; cost mode = brute force.
"""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest

import specdec_lab as S
from specdec_lab.cost import CostCurve, StepCost, curve_store, flat_curve, summarize_times
from specdec_lab.cost.theory import expected_tokens_per_step, optimal_k
from specdec_lab.memory import Memory
from specdec_lab.proposers.draft_length import AcceptanceTracker, DraftLength, Probes

REPO = Path(__file__).resolve().parents[1]


def observe_verify(cost: StepCost, n: int, seconds: float) -> None:
    """A chain step of n tokens whose forward took `seconds` and nothing else."""
    cost.observe(n, False, seconds, 0.0)


def length_on(curve: CostCurve, alpha: float | None = None, learn: bool = True, **kw) -> DraftLength:
    kw.setdefault("probes", Probes(0))
    length = DraftLength("cost", cost=StepCost.of(curve, learn=learn), **kw)
    if alpha is not None:
        length.tracker.set(None, alpha, 100.0)
    return length


# ---- the curve ----------------------------------------------------------------------------------------
def test_paired_cost_statistic_cancels_each_repeats_load():
    """'paired': t(n) = median t(first size) x the median within-repeat ratio. A repeat in which the one-token
    forward alone ran fast (the minimum's pick) or in which everything ran slow moves neither."""
    times = {1: [1.0, 0.8, 3.0, 1.0, 1.0], 2: [1.1, 1.1, 3.3, 1.1, 1.1]}  # true ratio 1.1; repeat 1: a lucky t(1)
    assert summarize_times(times, "paired") == pytest.approx([1.0, 1.1])
    assert summarize_times(times, "min") == pytest.approx([0.8, 1.1])  # ratio 1.375: 2 tokens look dear
    assert summarize_times(times, "median") == pytest.approx([1.0, 1.1])
    with pytest.raises(ValueError, match="statistic must be"):
        from specdec_lab.cost import measure_cost_curve

        measure_cost_curve(None, statistic="mean")


def test_cost_curve_cache_dies_with_its_model_and_grows_on_demand(monkeypatch):
    """Curves are cached per model object, not per id(): a freed model's entry goes with it, so a new model
    (which CPython may well place at the freed one's address) is measured, never handed the old curve. A
    request for more tokens than the cached curve reaches measures again, up to the new size."""
    from specdec_lab.cost import curve as cost

    measured = []

    def fake(model, sizes, **kw):
        measured.append(max(sizes))
        return CostCurve(sizes=list(sizes), seconds=[0.01 * n for n in sizes])

    monkeypatch.setattr(cost, "measure_cost_curve", fake)
    monkeypatch.delenv(curve_store.ENV, raising=False)  # this process's own cache only
    old, stale = S.tiny_model(), CostCurve(sizes=[1, 2], seconds=[1.0, 2.0])
    cost.set_cost_curve(old, stale)
    assert cost.cost_curve_for(old, max_tokens=2) is stale and measured == []
    assert max(cost.cost_curve_for(old, max_tokens=9).sizes) == 9 and measured == [9]
    entries, gone = len(cost._CURVES), weakref.ref(old)
    del old
    gc.collect()
    assert gone() is None and len(cost._CURVES) == entries - 1  # the cache did not keep the model alive
    fresh = S.tiny_model()
    assert cost.cost_curve_for(fresh, max_tokens=4).seconds[0] == pytest.approx(0.01) and measured == [9, 4]


def test_processes_share_a_curve_through_the_store_only_when_asked(monkeypatch, tmp_path):
    """With SPECDEC_LAB_CURVE_CACHE set, a second process (here: a new model object, i.e. an empty
    per-process cache) reads the first one's measurement instead of measuring; a request for more tokens
    than stored measures again and replaces it; unset, every process measures for itself."""
    from specdec_lab.cost import curve as cost

    measured = []

    def fake(model, sizes, **kw):
        measured.append(max(sizes))
        return CostCurve(sizes=list(sizes), seconds=[0.01 * n for n in sizes], tree=kw.get("tree", False))

    monkeypatch.setattr(cost, "measure_cost_curve", fake)
    monkeypatch.setenv(curve_store.ENV, str(tmp_path))
    first = cost.cost_curve_for(S.tiny_model(), max_tokens=6, tree=True)
    second = cost.cost_curve_for(S.tiny_model(), max_tokens=5, tree=True)  # another "process", fewer tokens
    assert measured == [6] and second == first and len(list(tmp_path.glob("*.json"))) == 1
    assert max(cost.cost_curve_for(S.tiny_model(), max_tokens=9, tree=True).sizes) == 9 and measured == [6, 9]
    assert cost.cost_curve_for(S.tiny_model(), max_tokens=4).tree is False and measured == [6, 9, 4]  # chains: own key
    for damaged in tmp_path.glob("*.json"):  # an entry that is no curve is measured again, like an unreadable one
        damaged.write_text(json.dumps({"sizes": [1, 2], "seconds": [0.01]}))
    assert max(cost.cost_curve_for(S.tiny_model(), max_tokens=9, tree=True).sizes) == 9 and measured == [6, 9, 4, 9]
    monkeypatch.delenv(curve_store.ENV)
    cost.cost_curve_for(S.tiny_model(), max_tokens=4, tree=True)
    assert measured == [6, 9, 4, 9, 4]


def test_a_curve_round_trips_through_its_json_and_the_older_shape_still_loads():
    """`to_dict` -> JSON -> `from_dict` gives the same curve; {"points": {"1": s, ...}} (curve files, the records
    in data/curves) reads as the same curve, its missing fields from the caller."""
    curve = CostCurve(sizes=[1, 2, 8], seconds=[0.01, 0.011, 0.02], device="cuda", context=64, tree=True)
    assert CostCurve.from_dict(json.loads(json.dumps(curve.to_dict()))) == curve
    older = {"points": {"8": 0.02, "1": 0.01, "2": 0.011}, "weights": "fp32"}  # unsorted keys, a record's own key
    assert CostCurve.from_dict(older, device="cuda", context=64, tree=True) == curve
    assert CostCurve.from_dict({**curve.to_dict(), "device": "cpu"}, device="cuda").device == "cpu"  # its own wins
    for path in sorted(REPO.glob("data/curves/*.json")):  # every committed record loads
        record = json.loads(path.read_text())
        entries = record.get("variants") or record.get("levers") or record.get("curves")  # step variants, levers, by B
        assert entries, f"{path.name}: no curves under 'variants', 'levers' or 'curves'"
        for entry in entries.values():
            assert CostCurve.from_dict(entry)(1) > 0, path
    for c in json.loads((REPO / "data/bench/avx2-results-traces-curves.json").read_text())["curves"].values():
        assert CostCurve.from_dict(c) == CostCurve(**c)


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ([0.01, 0.02], "JSON object"),
        ({"seconds": [0.01]}, '"sizes" and "seconds" must be lists of equal length'),
        ({"sizes": [1, 2], "seconds": [0.01]}, "write both lists"),
        ({"curve": [1, 2]}, "got the keys .'curve'.: add one of the two"),
        ({"points": {"one": 0.01}}, 'key "points" by "1", "2"'),
        ({"sizes": [2, 4], "seconds": [0.01, 0.02]}, "must include n=1"),
        ({"points": {"1": -1.0}}, "positive number of seconds"),
    ],
)
def test_a_bad_curve_dict_names_the_problem_and_the_fix(bad, named):
    from specdec_lab.cost import CurveInputError

    with pytest.raises(CurveInputError, match=named):
        CostCurve.from_dict(bad)


def test_flat_curve():
    flat = flat_curve(0.005, up_to=64)
    assert flat(1) == flat(64) == flat(500) == 0.005
    with pytest.raises(ValueError, match="t1"):
        flat_curve(0.0)


# ---- StepCost: corrections from the loop's timings ------------------------------------------------------
def test_price_is_the_curve_until_the_loop_observes():
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.030, 0.031, 0.040])
    cost = StepCost.of(curve)
    assert [cost.step(n) for n in (1, 2, 3, 4)] == [curve(n) for n in (1, 2, 3, 4)]
    assert cost.step(3, drafting=0.005) == pytest.approx(curve(3) + 0.005)
    with pytest.raises(RuntimeError, match="prepare"):
        StepCost().step(1)


def test_observed_verifies_correct_the_curve_per_size():
    """The curve was measured at a short context; verifies observed at a long one cost more for n > 1. The
    correction is per size (nearest observed size for the others) and moves a chain's choice of k."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.030, 0.031, 0.040])
    length = length_on(curve, alpha=0.7, k_max=3)
    cost = length.cost
    assert length.choose(available=3) == 3  # at the measured curve a 4-token verify pays
    for _ in range(100):
        observe_verify(cost, 2, 0.036)  # long context: 2 tokens cost 16% more than measured ...
        observe_verify(cost, 4, 0.056)  # ... 4 tokens 40% more
    assert cost.verify(2) == pytest.approx(0.036, rel=2e-2)
    assert cost.verify(3) == pytest.approx(curve(3) * 0.056 / 0.040, rel=2e-2)  # nearest: 4 (ties up)
    assert cost.verify(1) == pytest.approx(0.030 * 0.036 / 0.031, rel=2e-2)  # nearest: 2
    assert length.choose(available=3) == 1
    before = cost.verify(2)
    observe_verify(cost, 2, 0.0)  # no timing: ignored
    assert cost.verify(2) == before
    frozen = StepCost.of(curve, learn=False)
    observe_verify(frozen, 2, 1.0)
    assert frozen.verify(2) == curve(2)


def test_sizes_stay_consistent_after_a_burst_of_load():
    """A 2-token verify seen once at normal load, then a burst of foreign load while backed off (1-token
    verifies at 2x), then drafting (2-token verifies only, load back to normal): the 1-token cost must come
    back down with the load, and a 19% draft must not pay."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.060, 0.064, 0.070])
    length = length_on(curve, alpha=0.19, k_max=3)
    cost = length.cost
    for _ in range(20):
        observe_verify(cost, 1, 0.060)
    observe_verify(cost, 2, 0.064)  # a probe
    for _ in range(12):
        observe_verify(cost, 1, 0.120)  # the burst
    for _ in range(20):
        observe_verify(cost, 2, 0.064)  # drafting at normal load again
    assert cost.verify(1) == pytest.approx(0.060, rel=0.1)
    assert cost.verify(2) == pytest.approx(0.064, rel=0.05)
    length.draft_step = 0.015
    assert length.choose(available=3) == 0


def test_one_noisy_probe_does_not_reorder_the_sizes():
    """Backed off (1-token verifies at 60 ms), one probe's 2-token verify timed fast (48 ms: noise), then
    steady 2-token verifies at 64 ms: a 2-token verify must never look cheaper than a 1-token one."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.060, 0.064, 0.070])
    length = length_on(curve, alpha=0.19, k_max=3)
    cost, length.draft_step = length.cost, 0.012
    for _ in range(20):
        observe_verify(cost, 1, 0.060)
    observe_verify(cost, 2, 0.048)  # the fast probe
    assert cost.verify(2) > cost.verify(1)
    assert length.choose(available=3) == 0
    for _ in range(60):
        observe_verify(cost, 2, 0.064)
        assert cost.verify(2) > cost.verify(1)
    assert length.choose(available=3) == 0


def test_the_loops_own_time_enters_the_price_the_proposers_drafting_does_not():
    """ô per kind of step: what a step took besides its forward, less what the proposer priced itself."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.030, 0.031, 0.040])
    cost = StepCost.of(curve)
    assert cost.overhead("chain") == 0.0  # nothing observed: no overhead assumed
    for _ in range(200):
        cost.observe(1, False, 0.030, 0.0005)  # a plain step: 0.5 ms around the forward
        cost.note(0.004)  # the proposer drafted for 4 ms ...
        cost.observe(3, False, curve(3), 0.0060)  # ... of the 6 ms besides the forward
        cost.observe(5, True, curve(5), 0.0030)  # a tree step: 3 ms of building and keeping
    assert cost.overhead("root") == pytest.approx(0.0005, rel=1e-3)
    assert cost.overhead("chain") == pytest.approx(0.0020, rel=1e-3)
    assert cost.overhead("tree") == pytest.approx(0.0030, rel=1e-3)
    assert cost.step(3) == pytest.approx(cost.verify(3) + 0.0020)
    assert cost.step(3, tree=True) == pytest.approx(cost.verify(3, tree=True) + 0.0030)
    assert cost.step(1, tree=True) == pytest.approx(cost.verify(1) + 0.0005)  # one node is a plain step
    assert StepCost.of(curve, overheads={"root": 0.001}).overhead("tree") == 0.001  # unseen kind: root's


def test_overhead_makes_a_marginal_draft_back_off():
    """A flat curve (a fast forward) where one free draft token at α = 0.05 looks like it pays: it does not
    once the 2 ms that a drafting step costs the loop are in the price."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.030, 0.0305, 0.032])
    length = length_on(curve, alpha=0.05, k_max=3)
    assert length.choose(available=3) >= 1
    for _ in range(100):
        length.cost.observe(1, False, 0.030, 0.0005)
        length.cost.observe(2, False, 0.0305, 0.0025)
    assert length.choose(available=3) == 0


# ---- the chain rule on the cost model --------------------------------------------------------------------
def test_cost_choice_matches_theory():
    curve = CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[0.040, 0.045, 0.050, 0.060, 0.090])
    for alpha in (0.3, 0.6, 0.85):
        for draft in (0.0, 0.002, 0.01):
            length = length_on(curve, alpha=alpha, learn=False, k_max=10)
            length.draft_step = draft
            k = length.choose(available=10)
            assert k == optimal_k(alpha, draft / curve(1), 10, verify_cost=lambda n: curve(n) / curve(1))
            rates = [expected_tokens_per_step(alpha, j) / (j * draft + curve(j + 1)) for j in range(11)]
            assert k == max(range(11), key=lambda j: (round(rates[j], 12), -j))


def test_probes_after_a_run_of_zeros():
    """A proposer switched off by its estimates (here a draft step dearer than a forward) is retried now and
    then; probe_every=0 never retries; nothing to propose is no probe."""
    curve = CostCurve(sizes=[1, 2, 4], seconds=[0.040, 0.045, 0.050])
    for every, expected in ((4, [0, 0, 0, 1, 0, 0, 0, 1]), (0, [0] * 8)):
        length = length_on(curve, k_max=4, probes=Probes(every))
        length.draft_step = 1.0  # a 1 s draft step: k* = 0
        assert [length.choose(available=4) for _ in range(8)] == expected
    length = length_on(curve, k_max=4, probes=Probes(2))
    length.draft_step = 1.0
    assert [length.choose(available=0) for _ in range(4)] == [0] * 4


# ---- α̂ follows what was accepted ------------------------------------------------------------------------
def test_alpha_hat_follows_what_was_accepted():
    """3 of 124 draft tokens accepted (62 two-token chains, the 3 accepted spread out): the estimate a decision
    is made on is near the realised rate, not held up by the prior (the old tracker said 0.32 here)."""
    tracker = AcceptanceTracker()
    accepted_at = {10, 30, 50}
    for step in range(62):
        tracker.observe(None, 2, 1 if step in accepted_at else 0)
    realised = 3 / (3 + 62)  # accepted / (accepted + rejections)
    assert tracker.alpha(None) < 0.1 and abs(tracker.alpha(None) - realised) < 0.06
    fresh = AcceptanceTracker(prior=0.5)
    assert fresh.alpha(None) == 0.5 and fresh.evidence(None) == 2.0
    for _ in range(40):
        fresh.observe(None, 1, 0)
    assert fresh.alpha(None) < 0.01  # the prior's pseudo-counts decay like any observation


def test_lower_bound_moves_little_on_one_lucky_token():
    tracker = AcceptanceTracker()
    for _ in range(6):
        tracker.observe(None, 1, 0)  # a draft that has not been paying
    low = tracker.alpha(None)
    tracker.observe(None, 1, 1)  # one accepted probe
    assert tracker.alpha(None) > low + 0.1  # the point estimate jumps ...
    assert tracker.lower_bound(None, 1.0) < tracker.alpha(None) - 0.15  # ... its bound stays well below
    assert tracker.lower_bound(None, 0.0) == tracker.alpha(None)
    for _ in range(6):
        tracker.observe(None, 1, 1)
    assert tracker.lower_bound(None, 1.0) > 0.5  # a run of accepted tokens lifts the bound too


def test_summary_names_the_realised_rate_and_the_estimate(monkeypatch):
    """The draft's summary: `alpha` = accepted / (accepted + rejected) over the call, `alpha_hat` = the
    tracker's estimate at the end. A draft that is never right: both near 0, and it backs off."""
    target = S.tiny_model(num_layers=2, eos_token_id=None)
    from specdec_lab.models.draft_model import Draft
    from specdec_lab.proposers import DraftConfig, DraftProposer

    bad = Draft(model=S.tiny_model(num_layers=2, seed=1), vocab=None, name="another random model")
    prop = DraftProposer(DraftConfig(draft=bad, max_draft=4, probe_every=4, probe_max=8))
    curve = CostCurve(sizes=[1, 2, 4, 8], seconds=[1.0, 1.3, 1.9, 3.1])
    prop.length.cost = StepCost.of(curve, learn=False)
    r = S.generate(target, [5, 17, 42, 7, 99, 3], max_new_tokens=80, proposer=prop)
    s = r.proposer
    assert s["alpha"] == pytest.approx(s["accepted"] / (s["accepted"] + s["rejected"]), abs=1e-3)
    assert s["alpha"] < 0.2 and s["alpha_hat"] < 0.2 and s["backed_off"] > s["steps"] / 2


# ---- memory: learning across calls only when asked --------------------------------------------------------
def test_memory_carries_the_cost_model_and_what_a_draft_learned():
    target = S.tiny_model(num_layers=2, eos_token_id=None)
    from specdec_lab.models.draft_model import Draft
    from specdec_lab.proposers import DraftConfig, DraftProposer

    bad = Draft(model=S.tiny_model(num_layers=2, seed=1), vocab=None, name="a random draft")

    def run(memory):
        prop = DraftProposer(DraftConfig(draft=bad, max_draft=4, probe_every=8, probe_max=8))
        prop.length.cost = StepCost.of(CostCurve(sizes=[1, 2, 4, 8], seconds=[1.0, 1.3, 1.9, 3.1]), learn=False)
        return S.generate(target, [5, 17, 42, 7, 99, 3], max_new_tokens=30, proposer=prop, memory=memory)

    first = run(None)
    assert first.steps[0].info["k"] >= 1  # the prior α̂ = 0.5: it tries the draft first
    again = run(None)  # no memory: the second call starts from the prior again
    assert again.steps[0].info["k"] == first.steps[0].info["k"]
    mem = Memory()
    run(mem)
    assert "draft:a random draft" in mem and mem.slot("draft:a random draft")["tracker"].alpha(None) < 0.3
    assert mem.cost(target).steps > 0  # the loop reported every step to the cost model it keeps
    carried = run(mem)
    assert carried.steps[0].info["k"] == 0  # it remembers the draft has not been paying: backed off at once
    assert set(mem.summary()) == {"cost", "draft:a random draft"}
