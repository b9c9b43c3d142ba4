"""The exercises of notebooks 04–08 that were given new data, run without the real model: each check fails on a
plausible wrong answer (one that misses the exercise's point) and passes on the teacher's solution.

The cells are the stored notebook's own (stub, solution, check: tags `exercise`, `solution`, `check`); only the
names they take from earlier cells of the notebook (the real model's tree and logits, the small tree of 04's
section 2, 05's accuracies, 08's comparison) are made here, small and synthetic.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from exercise_cells import attempt as run  # stub, answer, check
from exercise_cells import exercise as cells
from exercise_cells import run as run_cells

from specdec_lab.lab.course import ExerciseError


# ---- 04 -------------------------------------------------------------------------------------------------------
def _tree_04():
    from specdec_lab import Tree

    candidates = torch.arange(100, 140).reshape(4, 10)  # head k's ranked guesses (token ids)
    paths = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 0, 1), (0, 0, 0, 0)]
    return Tree.from_rank_paths(7, paths, candidates)


def _small_04():
    """Notebook 04's small tree of section 2, its words as made-up token ids."""
    from specdec_lab import Tree

    ids_of = {w: [10 + i] for i, w in enumerate([" cat", " sat", " is", " on", " down", " the", " a"])}
    cand = torch.tensor([[ids_of[w][0] for w in pair] for pair in ([" sat", " is"], [" on", " down"], [" the", " a"])])
    small = Tree.from_rank_paths(ids_of[" cat"][0], [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)], cand)
    return small, ids_of


def _ns_04(logits=None):
    """What notebook 04's exercises take from its earlier cells, small and synthetic."""
    from specdec_lab import Tree
    from specdec_lab.lab.course import check, watch
    from specdec_lab.verify import tree_attention_mask

    tree = _tree_04()
    small, ids_of = _small_04()
    if logits is None:
        logits = torch.zeros(len(tree), 200)
    return {"torch": torch, "Tree": Tree, "check": check, "watch": watch, "tree_attention_mask": tree_attention_mask,
            "tree": tree,
            "cache": SimpleNamespace(length=9), "small": small, "ids_of": ids_of,
            "out": SimpleNamespace(logits=logits)}  # fmt: skip


def test_04_exercise_1_position_ids_from_parents():
    ex = cells("04_tree_attention", 1)
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_04(), None)
    wrong = {
        "the node's index, not its depth": "def position_ids(parents, cache_length):\n"
        "    return torch.arange(len(parents)) + cache_length",
        "the depth alone, without the cache length": "def position_ids(parents, cache_length):\n"
        "    d = [0] * len(parents)\n    for i in range(1, len(parents)):\n        d[i] = d[parents[i]] + 1\n"
        "    return torch.tensor(d)",
        "the real tree's ids, whatever the input": "def position_ids(parents, cache_length):\n"
        "    return tree.depths + cache.length",
        "the real tree's method, whatever the input": "def position_ids(parents, cache_length):\n"
        "    return tree.position_ids(cache_length)",
        "the reference's class, built from the input": "def position_ids(parents, cache_length):\n"
        "    t = Tree(torch.zeros(len(parents), dtype=torch.long), torch.tensor(parents))\n"
        "    return t.position_ids(cache_length)",
    }
    for why, answer in wrong.items():
        with pytest.raises(ExerciseError):
            run(ex, _ns_04(), answer)
            pytest.fail(why)
    run(ex, _ns_04(), ex["solution"])


def test_04_exercise_2_the_additive_mask_from_parents():
    ex = cells("04_tree_attention", 2)
    first = cells("04_tree_attention", 1)["exercise"]  # defines ex_parents

    def ns():
        return run_cells(first, namespace=_ns_04())

    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    wrong = {
        "the reference in scope, called": "def tree_mask(parents, cache_length):\n"
        "    t = Tree(torch.zeros(len(parents), dtype=torch.long), torch.tensor(parents))\n"
        "    return tree_attention_mask(t, cache_length, torch.float32)",
        "Tree.mask, built from the input": "def tree_mask(parents, cache_length):\n"
        "    t = Tree(torch.zeros(len(parents), dtype=torch.long), torch.tensor(parents))\n"
        "    a = torch.cat([torch.ones(len(parents), cache_length, dtype=torch.bool), t.mask], 1)\n"
        "    return torch.zeros(a.shape).masked_fill(~a, torch.finfo(torch.float32).min)[None, None]",
        "the real tree's mask, whatever the input": "def tree_mask(parents, cache_length):\n"
        "    a = torch.cat([torch.ones(len(tree), cache.length, dtype=torch.bool), tree.mask], 1)\n"
        "    return torch.zeros(a.shape).masked_fill(~a, torch.finfo(torch.float32).min)[None, None]",
        "the causal (chain) mask": "def tree_mask(parents, cache_length):\n    n = len(parents)\n"
        "    a = torch.cat([torch.ones(n, cache_length, dtype=torch.bool), torch.ones(n, n).tril().bool()], 1)\n"
        "    return torch.zeros(a.shape).masked_fill(~a, torch.finfo(torch.float32).min)[None, None]",
        "-inf instead of the dtype's minimum": "def tree_mask(parents, cache_length):\n    n = len(parents)\n"
        "    anc = torch.zeros(n, n, dtype=torch.bool)\n    for i, p in enumerate(parents):\n"
        "        if p >= 0:\n            anc[i] = anc[p]\n        anc[i, i] = True\n"
        "    a = torch.cat([torch.ones(n, cache_length, dtype=torch.bool), anc], 1)\n"
        "    return torch.zeros(a.shape).masked_fill(~a, float('-inf'))[None, None]",
    }
    for why, answer in wrong.items():
        with pytest.raises(ExerciseError):
            run(ex, ns(), answer)
            pytest.fail(why)
    run(ex, ns(), ex["solution"])


WRONG_GREEDY = """
def greedy_accept(tree, logits):  # a node whose token is its parent's argmax, accepted or not
    pred = logits.argmax(-1).tolist()
    tokens, parents = tree.tokens.tolist(), tree.parents.tolist()
    depth, best = [0] * len(tree), 0
    for i in range(1, len(tree)):
        depth[i] = depth[parents[i]] + 1
        if tokens[i] == pred[parents[i]] and depth[i] > depth[best]:
            best = i
    return tree.path_to(best), pred[best]
"""


def test_04_exercise_3_a_rejected_parent_rejects_its_matching_child():
    from specdec_lab.accept import accept_greedy

    ex = cells("04_tree_attention", 3)
    tree = _tree_04()
    logits = torch.zeros(len(tree), 200)
    logits[:, 199] = 1.0  # the target wants a token no node carries: on the real tree only the root is accepted

    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_04(logits), None)
    # the wrong rule agrees on the real tree (nothing accepted there) and fails on the made-up logits
    wrong = {}
    exec(WRONG_GREEDY, wrong)  # noqa: S102
    assert wrong["greedy_accept"](tree, logits) == (lambda r: (r.path, r.bonus))(accept_greedy(tree, logits))
    with pytest.raises(ExerciseError, match="small tree"):
        run(ex, _ns_04(logits), WRONG_GREEDY)
    with pytest.raises(ExerciseError, match="called `accept_greedy`"):  # the reference in scope
        run(ex, _ns_04(logits), "def greedy_accept(tree, logits):\n"
            "    r = accept_greedy(tree, logits)\n    return r.path, r.bonus")  # fmt: skip
    # the tie rule: an answer that keeps the last of equally deep accepted nodes agrees on the first two trees and
    # fails on the tree with a tie
    ignores_tie = ex["solution"].replace("if depth[i] > depth[best]", "if depth[i] >= depth[best]")
    assert ignores_tie != ex["solution"]
    with pytest.raises(ExerciseError, match="tie"):
        run(ex, _ns_04(logits), ignores_tie)
    done = run(ex, _ns_04(logits), ex["solution"])
    small, ids_of = _small_04()
    assert done["greedy_accept"](done["small"], done["toy_logits"]) == ([0, 2], ids_of[" a"][0])
    # the tie is real: two equally deep paths are accepted, and the lowest index wins
    assert done["greedy_accept"](done["tie_tree"], done["tie_logits"]) == ([0, 1, 3], ids_of[" the"][0])
    wrong_tie = {}
    exec(ignores_tie, {"Tree": object, "torch": torch}, wrong_tie)  # noqa: S102
    assert wrong_tie["greedy_accept"](done["tie_tree"], done["tie_logits"]) == ([0, 2, 4], ids_of[" a"][0])
    # the made-up logits reach the case the exercise is about: a child that matches a rejected parent's argmax
    pred = done["toy_logits"].argmax(-1).tolist()
    assert small.tokens[3] == pred[1] and small.tokens[1] != pred[0]


# ---- 05 -------------------------------------------------------------------------------------------------------
def _acc_05():
    """Made-up accuracies: no two nodes of equal value, and the independent and conditional trees differ."""
    from specdec_lab.trees import HeadAccuracies

    base, decay = [0.62, 0.55, 0.51, 0.47], [0.45, 0.52, 0.58, 0.61]
    cond = torch.tensor([[b * d**r for r in range(10)] for b, d in zip(base, decay, strict=True)], dtype=torch.float64)
    top = cond * torch.tensor([[1.0], [0.7], [0.55], [0.45]], dtype=torch.float64)
    return HeadAccuracies(top=top, conditional=cond, positions=1000)


def _ns_05():
    """What notebook 05's exercises take from its earlier cells, small and synthetic."""
    import pandas as pd

    from specdec_lab.cost import CostCurve
    from specdec_lab.lab.course import check, watch
    from specdec_lab.trees import (
        brute_force_tree,
        cartesian_paths,
        choose_budget,
        expected_length,
        greedy_steps,
        greedy_tree,
        optimal_tree,
    )

    acc = _acc_05()
    A = acc.conditional
    steps = greedy_steps(A, 64)  # section 2's greedy additions, gains included

    def value(path):
        return math.prod(float(A[k, r]) for k, r in enumerate(path))

    return {"math": math, "pd": pd, "torch": torch, "acc": acc, "A": A, "K": 4, "S": 10, "value": value,
            "check": check, "watch": watch, "expected_length": expected_length, "greedy_tree": greedy_tree,
            "greedy_steps": greedy_steps, "optimal_tree": optimal_tree, "brute_force_tree": brute_force_tree,
            "choose_budget": choose_budget, "cartesian_paths": cartesian_paths, "steps": steps,
            "curve": CostCurve(sizes=[1, 4, 17, 65], seconds=[0.030, 0.036, 0.058, 0.170], tree=True),
            "head_seconds": {1: 0.0003, 2: 0.0005, 3: 0.0006, 4: 0.0008}}  # fmt: skip


def _fails(ex, namespace, wrong: dict[str, str]) -> None:
    for why, answer in wrong.items():
        with pytest.raises(ExerciseError):
            run(ex, namespace(), answer)
            pytest.fail(f"the check passed {why}")


def test_05_exercise_1_expected_length_by_hand():
    ex = cells("05_optimized_trees", 1)
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_05(), None)
    _fails(ex, _ns_05, {
        "the reference in scope": "answer = expected_length(small_tree, A)",
        "section 2's value helper": "answer = 1 + sum(value(p) for p in small_tree)",
        "section 2's greedy gains": "answer = 1 + sum(s['gain'] for s in steps if tuple(s['path']) in small_tree)",
        "no bonus token": "answer = sum(math.prod(float(A[d, r]) for d, r in enumerate(p)) for p in small_tree)",
        "a sum, not a product, along the path": "answer = 1 + sum(sum(float(A[d, r]) for d, r in enumerate(p)) "
        "for p in small_tree)",
    })  # fmt: skip
    run(ex, _ns_05(), ex["solution"])


def test_05_exercise_2_the_most_valuable_nodes_under_the_independent_model():
    ex = cells("05_optimized_trees", 2)
    ns = _ns_05()
    assert sorted(ns["greedy_tree"](ns["acc"].top, 20)) != sorted(ns["greedy_tree"](ns["A"], 20))
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_05(), None)
    _fails(ex, _ns_05, {
        "the reference in scope": "answer = greedy_tree(acc.top, budget)",
        "the greedy steps in scope": "answer = [s['path'] for s in greedy_steps(acc.top, budget)]",
        "the conditional model's tree (section 2's table and value)":
            "answer = sorted(cartesian_paths([S] * K), key=lambda p: (-value(p), len(p), p))[:budget]",
        "the shallowest nodes first": "answer = sorted(cartesian_paths([S] * K), key=lambda p: (len(p), p))[:budget]",
        "one node short": "answer = sorted(cartesian_paths([S] * K), key=lambda p: "
        "-math.prod(float(acc.top[d, r]) for d, r in enumerate(p)))[:budget - 1]",
    })  # fmt: skip
    run(ex, _ns_05(), ex["solution"])


def test_05_exercise_3_the_speedup_of_a_tree_section_5_did_not_price():
    ex = cells("05_optimized_trees", 3)
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_05(), None)
    e = "expected_length(demo_paths, A)"
    _fails(ex, _ns_05, {
        "t(n), not t(n + 1)": f"answer = {e} * curve(1) / (curve(9) + head_seconds[2])",
        "no heads": f"answer = {e} * curve(1) / curve(10)",
        "the heads of depth 1": f"answer = {e} * curve(1) / (curve(10) + head_seconds[1])",
        "E[L] without the bonus": f"answer = ({e} - 1) * curve(1) / (curve(10) + head_seconds[2])",
        "the library's price": "answer = choose_budget(A, curve, max_budget=9, head_cost=head_seconds.get).speedup",
    })  # fmt: skip
    run(ex, _ns_05(), ex["solution"])


def _decodes_05():
    """Two prompts' decodes of one depth-3 tree: step traces with accepted paths of known lengths."""
    from specdec_lab.generate import StepTrace

    def result(accepted):
        steps = [StepTrace([1, 2, 3, 4], [-1, 0, 1, 2], list(range(a + 1)), [9] * (a + 1), 0, 0, 0) for a in accepted]
        return SimpleNamespace(steps=steps, tokens=[9] * sum(a + 1 for a in accepted), forwards=len(steps))

    return [result([0, 1, 3, 2, 0, 1]), result([2, 0, 0, 3])]


def test_05_exercise_4_acceptance_by_depth_pooled_and_at_least_d():
    ex = cells("05_optimized_trees", 4)

    def ns():
        return _ns_05() | {"greedy_nodes": 16, "trees": {"greedy 16": [(0,), (0, 0), (0, 0, 0)]},
                           "decodes": {"greedy 16": _decodes_05()}}  # fmt: skip

    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    _fails(ex, ns, {
        "exactly d, not at least d": "steps_ = [s for r in decodes[deep_name] for s in r.steps]\n"
        "answer = {d: sum(s.accepted == d for s in steps_) / len(steps_) for d in (1, 2, 3)}",
        "the mean of per-prompt fractions": "answer = {d: sum(sum(s.accepted >= d for s in r.steps) / len(r.steps) "
        "for r in decodes[deep_name]) / len(decodes[deep_name]) for d in (1, 2, 3)}",
        "the depths the model predicts": "answer = {d: sum(math.prod(float(A[k, r]) for k, r in enumerate(p)) "
        "for p in trees[deep_name] if len(p) == d) for d in (1, 2, 3)}",
        "the reference in scope, called": "answer = dict(enumerate(survival([s for r in decodes[deep_name] for s in "
        "r.steps], 3), start=1))",
        "the reference, taken from the watch": "answer = dict(enumerate(_watch['survival']([s for r in "
        "decodes[deep_name] for s in r.steps], 3), start=1))",
    })  # fmt: skip
    run(ex, ns(), ex["solution"])


# ---- 06 -------------------------------------------------------------------------------------------------------
def _ns_06():
    """What notebook 06's exercises take from its earlier cells, small and synthetic."""
    from specdec_lab.accept import typical_rule
    from specdec_lab.lab.course import check, watch
    from specdec_lab.sampling import Sampling
    from specdec_lab.trees import Tree, pick_budget, tree_options

    # Ex 1's rows, ε = 0.12: after (3,) at T = 1.2 δ·e^-H < ε binds, and T = 1, ε alone, the larger threshold or
    # section 4's (ε, δ) each move the set; after (0,) at T = 0.7 (peaked) ε < δ·e^-H binds, and δ·e^-H alone moves it
    rows = {(3,): torch.tensor([0.1, 1.2, -1.3, 0.5, -0.7, -0.2, -1.0, -1.6]),
            (0,): torch.tensor([-3.0, -1.0, -4.0, 2.0, -2.5, 0.8, -4.0, -1.5])}  # fmt: skip

    def step(n, tree=True):  # a CPU-like step: every token past the first adds 10% of a single-token step
        return 0.030 * (1 + 0.1 * (n - 1))

    proposer = SimpleNamespace(
        options=tree_options(_acc_05().conditional, max_budget=16),
        cost=SimpleNamespace(step=step),
        drafter=SimpleNamespace(head_seconds={1: 0.0004, 2: 0.0007, 3: 0.001, 4: 0.0013}),
    )
    return {"math": math, "torch": torch, "Tree": Tree, "Sampling": Sampling, "check": check, "watch": watch,
            "target_table": lambda context: rows[tuple(context)], "temperature": 0.7, "epsilon": 0.09, "delta": 0.3,
            "drift_vocab": len(rows[(3,)]), "typical_rule": typical_rule, "rule": typical_rule(0.09, 0.3),
            "proposer": proposer, "pick_budget": pick_budget}  # fmt: skip


def test_06_exercise_1_the_typical_threshold():
    ex = cells("06_medusa_decoding", 1)
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_06(), None)
    head = ("answer = []\nfor ex_prefix, ex_temperature in ex_rows:\n"
            "    p = torch.softmax(target_table(ex_prefix) / ex_temperature, dim=-1)\n"
            "    H = float(-(p * p.log()).sum())\n")  # fmt: skip
    _fails(ex, _ns_06, {
        "the library's rule in scope": "answer = [[x for x in range(drift_vocab) if len(typical_rule(ex_epsilon, "
        "ex_delta)(Tree.chain(0, [x]), torch.stack([target_table(q)] * 2), "
        "Sampling(temperature=t)).path) == 2] for q, t in ex_rows]",
        "section 4's rule in scope": "answer = [[x for x in range(drift_vocab) if len(rule(Tree.chain(0, [x]), "
        "torch.stack([target_table(q)] * 2), Sampling(temperature=t)).path) == 2] for q, t in ex_rows]",
        "no temperature": "answer = []\nfor q, t in ex_rows:\n    p = torch.softmax(target_table(q), dim=-1)\n"
        "    H = float(-(p * p.log()).sum())\n"
        "    answer.append([x for x in range(len(p)) if float(p[x]) > min(ex_epsilon, ex_delta * math.exp(-H))])",
        "ε alone": head + "    answer.append([x for x in range(len(p)) if float(p[x]) > ex_epsilon])",
        "δ·exp(−H) alone": head + "    answer.append([x for x in range(len(p)) "
        "if float(p[x]) > ex_delta * math.exp(-H)])",
        "the larger of the two thresholds": head + "    answer.append([x for x in range(len(p)) "
        "if float(p[x]) > max(ex_epsilon, ex_delta * math.exp(-H))])",
        "section 4's thresholds": head + "    answer.append([x for x in range(len(p)) "
        "if float(p[x]) > min(epsilon, delta * math.exp(-H))])",
        "the first row only": head + "    answer.append([x for x in range(len(p)) "
        "if float(p[x]) > min(ex_epsilon, ex_delta * math.exp(-H))])\n    break",
        "every token": "answer = [list(range(drift_vocab))] * len(ex_rows)",
    })  # fmt: skip
    run(ex, _ns_06(), ex["solution"])


def test_06_exercise_2_greedy_acceptance_reaches_a_rejected_parent():
    ex = cells("06_medusa_decoding", 2)
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_06(), None)
    wrong = WRONG_GREEDY.replace("def greedy_accept(tree, logits):", "def _greedy(tree, logits):") + (
        "\ndef greedy_accept(tokens, parents, logits):\n"
        "    return _greedy(Tree(torch.tensor(tokens), torch.tensor(parents)), logits)\n")  # fmt: skip
    _fails(ex, _ns_06, {
        "a child matching a rejected parent's argmax": wrong,
        "the reference in scope": "def greedy_accept(tokens, parents, logits):\n"
        "    r = accept_greedy(Tree(torch.tensor(tokens), torch.tensor(parents)), logits)\n    return r.path, r.bonus",
        "the shown tree's answer typed in": "def greedy_accept(tokens, parents, logits):\n    return [0, 1, 4], 0",
    })  # fmt: skip
    run(ex, _ns_06(), ex["solution"])


def test_06_exercise_3_the_budget_auto_picks_on_costs_printed_nowhere():
    ex = cells("06_medusa_decoding", 3)
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, _ns_06(), None)
    best = ("    rate = {{}}\n    for o in options:\n        r = o.expected_length / ({cost} + {heads})\n"
            "        rate[o.budget] = max(rate.get(o.budget, 0.0), r)\n"
            "    return max(rate, key=lambda n: (rate[n], -n))\n")  # fmt: skip
    sig = "def auto_budget(options, price, heads):\n"
    _fails(ex, _ns_06, {
        "t(n), not t(n + 1)": sig + best.format(cost="price(o.budget)", heads="heads(o.depth)"),
        "no heads": sig + best.format(cost="price(o.budget + 1)", heads="0.0"),
        "E[L] alone": sig + "    return max(options, key=lambda o: (o.expected_length, -o.budget)).budget",
        "the reference in scope": sig + "    return pick_budget(options, price, heads).budget",
        "this machine's pick, whatever the costs": sig + "    return pick_budget(options, proposer.cost.step, heads)"
        ".budget",
        "the pick printed above (one node), whatever the costs": sig + "    return 1",
        "the largest budget, whatever the costs": sig + "    return max(o.budget for o in options)",
    })  # fmt: skip
    run(ex, _ns_06(), ex["solution"])
