"""One width per batch step (`cost.plan`, `generate_batch(levers="plan")`).

The planner's rule against brute force; its survival table against counts by hand; and on a tiny random-weight
model with a knee-shaped t(B, n) (flat to 3 tokens, then steep), every method's rows still equal their prompts
decoded alone while the planner cuts trees; sampled, a batch with the planner emits the target's distribution.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept.exactness import g_test
from specdec_lab.batch import Levers, generate_batch
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.cost.plan import Survival, WidthPlanner, best_width
from specdec_lab.sampling import Sampling
from specdec_lab.trees.tree import Tree
from tests.test_batch import PROMPTS, methods
from tests.test_sampling_methods import N_TOKENS, PROMPT, RUNS, autoregressive_joint, medusa_drafter

KNEE = CostCurve(sizes=[1, 2, 3, 4, 8, 64], seconds=[1.0, 1.0, 1.05, 2.0, 4.0, 32.0])


def test_the_width_is_the_best_of_every_width_by_brute_force():
    rng = random.Random(0)
    for _ in range(200):
        rows = rng.randint(1, 3)
        gains = [[1.0] + sorted((rng.random() for _ in range(rng.randint(0, 4))), reverse=True) for _ in range(rows)]
        times = [rng.uniform(0.5, 3.0) for _ in range(6)]
        price = times.__getitem__  # any shape, not even monotone (width n at index n, index 0 unused)
        times.insert(0, 0.0)
        n, rate = best_width(gains, price)
        widest = max(len(g) for g in gains)
        rates = {m: sum(sum(g[:m]) for g in gains) / price(m) for m in range(1, widest + 1)}
        assert rate == pytest.approx(max(rates.values())) and rates[n] == pytest.approx(rate)
        assert n == min(m for m in rates if rates[m] >= rate * (1 - 1e-9))  # a tie goes to the smaller width
    assert best_width([[1.0, 0.0, 0.0], [1.0, 0.0]], lambda n: 1.0)[0] == 1  # nothing to gain: plain steps
    assert best_width([[1.0, 0.9, 0.8], [1.0, 0.5]], lambda n: 1.0)[0] == 3  # a flat price: every row fills up


def test_survival_counts_offers_where_the_parent_was_accepted():
    # root -> 1, 2 (siblings: ranks 0, 1); 1 -> 3 (depth 2). Path root, 1, 3: all three nodes offered, 1 and 3 hit
    tree = Tree(torch.tensor([5, 6, 7, 8]), torch.tensor([-1, 0, 0, 1]))
    s = Survival()
    assert Survival.keys(tree) == [(0, 0), (1, 0), (1, 1), (2, 0)]
    assert s.gains(tree) == [1.0, 0.5, 0.5, 0.25]  # Beta(1, 1): ½ unlabelled, multiplied down the path
    s.record(tree, [0, 1, 3])
    s.record(tree, [0, 2])  # node 3's parent rejected: no offer for (2, 0)
    assert s.offers == {(1, 0): 2, (1, 1): 2, (2, 0): 1} and s.hits == {(1, 0): 1, (1, 1): 1, (2, 0): 1}
    assert s.gains(tree) == pytest.approx([1.0, 0.5, 0.5, 0.5 * 2 / 3])
    window = Tree(torch.tensor([5, 6, 7]), torch.tensor([-1, 0, 0]), candidate=torch.tensor([True, True, False]))
    assert s.gains(window)[2] == 0.0  # verified for its logits, never accepted


def test_the_planner_runs_uncut_in_warm_up_and_probes_then_cuts_to_the_best_width():
    planner = WidthPlanner(warmup=2, probe_every=4)
    chain = Tree.chain(1, [2, 3, 4, 5])
    steep = lambda n: float(n)  # noqa: E731 - every token costs a plain step: nothing pays
    widths = [len(planner.cut([chain, None, chain], steep)[0]) for _ in range(8)]
    assert widths == [5, 5, 1, 5, 1, 1, 1, 5]  # steps 1-2 warm-up, 4 and 8 probes
    assert planner.summary() == {"steps": 8, "cut": 0.5, "mean_width": 3.0}


def test_levers_read_their_names_and_refuse_unknown_ones():
    assert Levers.of(None) == Levers.of("off") == Levers() and Levers.of("plan").plan
    assert Levers.of(None, rows=4).plan and Levers.of("default", rows=16).plan and not Levers.of("default", rows=3).plan
    assert Levers.of("plan").name() == "plan" and Levers().name() == "off"
    with pytest.raises(ValueError, match="unknown lever"):
        Levers.of("plan+warp")
    with pytest.raises(TypeError, match="levers takes a Levers"):
        Levers.of(3)


@pytest.fixture(scope="module")
def knee_model():
    model = S.tiny_model(num_layers=2, eos_token_id=None, seed=0)
    for rows in (1, 2, 3):
        for tree in (False, True):
            set_cost_curve(model, CostCurve(sizes=KNEE.sizes, seconds=KNEE.seconds, tree=tree), rows=rows)
    return model


def test_every_method_with_the_planner_equals_its_prompt_alone(knee_model):
    """On the knee curve the planner cuts the wide trees (speculative methods) and each row still emits what
    `generate` emits for its prompt alone; Lookahead's window is never cut."""
    ref = [S.generate(knee_model, p, max_new_tokens=14).tokens for p in PROMPTS]
    cut = {}
    for name, params in methods(knee_model).items():
        out = generate_batch(knee_model, PROMPTS, name, max_new_tokens=14, batch_size=3, levers="plan", **params)
        assert [r.tokens for r in out.results] == ref, name
        cut[name] = out.plan["cut"] if out.plan else None
    assert cut["autoregressive"] is None and cut["lookahead"] == 0.0  # nothing to plan; a window is not cut
    assert all(cut[m] > 0 for m in ("draft", "medusa", "eagle")), cut  # the knee made the planner cut


def test_sampling_on_a_planned_batch_emits_the_targets_distribution():
    """The G-test of test_batch's sampling test with the planner on: cuts decided before the coins keep the exact
    rules exact (Medusa's top-s trees, cut to the step's width, on the knee curve)."""
    torch.set_num_threads(1)
    target = S.tiny_model(vocab_size=8, num_layers=4, eos_token_id=None, seed=2)
    for tree in (False, True):
        set_cost_curve(target, CostCurve(sizes=KNEE.sizes, seconds=KNEE.seconds, tree=tree), rows=4)
    joint = autoregressive_joint(target, PROMPT, Sampling(temperature=1.0), N_TOKENS)
    out = generate_batch(target, [PROMPT] * RUNS, "medusa", max_new_tokens=N_TOKENS, batch_size=4, temperature=1.0,
                         seed=0, levers="plan", heads=medusa_drafter(target), tree="cartesian:3,2", vocab="full",
                         accuracy="independent")  # fmt: skip
    assert out.plan["cut"] > 0 and sum(r.forwards for r in out.results) < RUNS * N_TOKENS
    result = g_test(Counter(tuple(r.tokens) for r in out.results), joint)
    assert result["dof"] >= 4 and result["p_value"] > 1e-3, result


def test_brute_force_helper_covers_small_cases():
    # every cut of 2 rows x 3 nodes on a flat price: the best keeps every node
    for a, b in itertools.product([0.0, 0.4, 0.9], repeat=2):
        n, _ = best_width([[1.0, a, a * a], [1.0, b]], lambda n: 1.0)
        assert n == (1 if a == b == 0 else 2 if a == 0 else 3)


def test_the_batched_bench_runs_each_lever_set_apart(knee_model, tmp_path):
    from specdec_lab.bench.batched import run_batched, summarize_batched
    from specdec_lab.io import Prompt

    prompts = [Prompt(question_id=str(i), category="c", text="", ids=p) for i, p in enumerate(PROMPTS[:3])]
    methods = ["autoregressive", "prompt_lookup:draft_length=3"]
    record = run_batched(knee_model, prompts, methods, [2], max_new_tokens=8, out=str(tmp_path / "run.json"),
                         progress=False, levers=["off", "plan"])  # fmt: skip
    runs = {(r["method"], r["levers"]) for r in record["runs"]}
    assert runs == {("autoregressive", "off"), ("prompt_lookup:draft_length=3", "off"),
                    ("prompt_lookup:draft_length=3", "plan")}  # fmt: skip
    assert record["config"]["levers"] == ["off", "plan"]
    rows = {(r["method"], r["levers"]): r for r in summarize_batched(record["runs"])}
    planned = rows["prompt_lookup:draft_length=3", "plan"]
    assert planned["identical"] == "3/3" and planned["vs_off"] > 0 and planned["decode_speedup"] > 0
    assert rows["prompt_lookup:draft_length=3", "off"]["vs_off"] == 1.0
    with pytest.raises(ValueError, match="unknown lever"):
        run_batched(knee_model, prompts, ["autoregressive"], [2], max_new_tokens=8, progress=False, levers=["fast"])


def test_the_next_steps_drafts_are_capped_one_past_the_width_and_retried_after_plain_steps():
    planner = WidthPlanner(warmup=1, probe_every=100, retry_every=3)
    chain = Tree.chain(1, [2, 3, 4, 5])
    assert planner.depth_cap() is None  # warm-up: uncapped
    planner.cut([chain, chain], lambda n: 1.0)  # warm-up step, uncut: width 5
    assert planner.depth_cap() == 5  # one deeper than N* − 1
    caps = []
    for _ in range(6):
        planner.cut([chain, chain], float)  # t(n) = n: nothing pays, N* = 1
        caps.append(planner.depth_cap())
    assert caps == [1, 0, 0, 1, 0, 0]  # after plain steps: nothing drafted, one draft in every third step
