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
from exercise_cells import exercise as cells
from exercise_cells import run as run_cells

from specdec_lab.lab.course import ExerciseError


def run(ex: dict[str, str], namespace: dict, answer: str | None) -> dict:
    """The stub, then `answer` (a wrong answer's code, the solution's, or None: the stub left as it is), then the
    check, in `namespace`."""
    return run_cells(ex["exercise"], answer or "", ex["check"], namespace=namespace)


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


def test_04_exercise_1_position_ids_of_the_real_tree():
    from specdec_lab import Tree

    ex = cells("04_tree_attention", 1)
    ns = lambda: {"torch": torch, "Tree": Tree, "tree": _tree_04(), "cache": SimpleNamespace(length=9)}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    with pytest.raises(ExerciseError, match="elements differ"):  # the node's index, not its depth
        run(ex, ns(), "answer = torch.arange(len(real_parents)) + cache.length")
    with pytest.raises(ExerciseError, match="elements differ"):  # the depth alone, without the cache length
        run(ex, ns(), "answer = torch.tensor([len(tree.path_to(i)) - 1 for i in range(len(real_parents))])")
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


def test_04_exercise_4_a_rejected_parent_rejects_its_matching_child():
    from specdec_lab import Tree
    from specdec_lab.accept import accept_greedy
    from specdec_lab.lab.course import check

    ex = cells("04_tree_attention", 4)
    tree = _tree_04()
    logits = torch.zeros(len(tree), 200)
    logits[:, 199] = 1.0  # the target wants a token no node carries: on the real tree only the root is accepted

    def ns():
        small, ids_of = _small_04()
        return {"torch": torch, "Tree": Tree, "check": check, "tree": tree, "out": SimpleNamespace(logits=logits),
                "small": small,
                "ids_of": ids_of}  # fmt: skip

    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    # the wrong rule agrees on the real tree (nothing accepted there) and fails on the made-up logits
    small, ids_of = _small_04()
    wrong = {}
    exec(WRONG_GREEDY, wrong)  # noqa: S102
    assert wrong["greedy_accept"](tree, logits) == (lambda r: (r.path, r.bonus))(accept_greedy(tree, logits))
    with pytest.raises(ExerciseError, match="small tree"):
        run(ex, ns(), WRONG_GREEDY)
    done = run(ex, ns(), ex["solution"])
    assert done["greedy_accept"](done["small"], done["toy_logits"]) == ([0, 2], ids_of[" a"][0])


# ---- 05 -------------------------------------------------------------------------------------------------------
def test_05_exercise_2_prune_to_a_budget_the_table_does_not_show():
    from specdec_lab.lab.course import check
    from specdec_lab.trees import greedy_tree

    base, decay = [0.62, 0.55, 0.51, 0.47], [0.45, 0.52, 0.58, 0.61]  # no two nodes of equal value
    A = torch.tensor([[b * d**r for r in range(10)] for b, d in zip(base, decay, strict=True)])

    def value(path):
        return math.prod(float(A[k, r]) for k, r in enumerate(path))

    ex = cells("05_optimized_trees", 2)
    assert "budget = min(20," in ex["exercise"]
    ns = lambda: {"A": A, "tree64": greedy_tree(A, 64), "value": value, "math": math,  # noqa: E731
                  "greedy_tree": greedy_tree, "check": check}  # fmt: skip
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    with pytest.raises(ExerciseError):  # the shallowest nodes first, not the most valuable
        run(ex, ns(), "answer = sorted(tree64, key=lambda p: (len(p), p))[:budget]")
    with pytest.raises(ExerciseError):  # the most valuable first, but one node short (off by one)
        run(ex, ns(), "answer = sorted(tree64, key=lambda p: -value(p))[:budget - 1]")
    run(ex, ns(), ex["solution"])


# ---- 08 -------------------------------------------------------------------------------------------------------
def test_08_exercise_3_the_tie_rule_meets_a_real_tie():
    from specdec_lab.lab.course import check
    from specdec_lab.lab.experiment import fastest

    ex = cells("08_speedup_lab", 3)
    runs = [SimpleNamespace(spec="prompt_lookup", speedup=1.21), SimpleNamespace(spec="draft", speedup=0.97)]
    ns = lambda: {"comparison": runs, "tie_tol": 0.05, "fastest": fastest, "check": check}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    argmax = "def fastest_specs(speedups, rel_tol):\n    return [max(speedups, key=speedups.get)] if speedups else []"
    absolute = (
        "def fastest_specs(speedups, rel_tol):\n    top = max(speedups.values(), default=0)\n"
        "    return sorted((s for s in speedups if top - speedups[s] <= rel_tol), key=lambda s: -speedups[s])"
    )
    unsorted = ("def fastest_specs(speedups, rel_tol):\n    top = max(speedups.values(), default=0)\n"
                "    return [s for s in speedups if top - speedups[s] <= rel_tol * top]")  # fmt: skip
    for wrong in (argmax, absolute, unsorted):  # section 2's runs hold no tie: the argmax passes them alone
        with pytest.raises(ExerciseError, match="made-up"):
            run(ex, ns(), wrong)
    run(ex, ns(), ex["solution"])
