"""The exercises of notebooks 00-03 that were reworked, run from the stored notebooks' own cells (by tag) without the
real model: each check fails on the stub and on a plausible wrong answer (ExerciseError), and passes on the
solution. Plus the helpers behind them: notebook 00's picture window (`viz.timeline_window`) and notebook 02's
exact chain check (`lab.chain_exercise`)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from exercise_cells import attempt, cells, exercise, fails, passes, run, source

from specdec_lab.lab.course import ExerciseError


def code_cell(stem: str, pattern: str) -> str:
    """The source of the first code cell matching `pattern` (a regex)."""
    return next(source(c) for c in cells(stem) if c["cell_type"] == "code" and re.search(pattern, source(c)))


# ---- 01: optimal draft lengths at points the notebook's tables do not show -----------------------------------
def ns01() -> dict:
    ns = run(
        "import numpy as np, pandas as pd\n"
        "from specdec_lab.cost.theory import (\n"
        "    accepted_length_pmf, expected_speedup, expected_tokens_per_step, optimal_k,\n)\n"
        "from specdec_lab.trees.build import expected_length\n"
        "from specdec_lab.lab.course import check, watch"
    )
    run(code_cell("01_acceptance_math", r"k_max: int ="), namespace=ns)  # the parameters
    run(code_cell("01_acceptance_math", r"curve = CostCurve\("), namespace=ns)  # section 4's example curve
    return ns


def test_01_exercise_1_refuses_the_reference_a_tv_without_its_half_and_a_tv_computed_backwards():
    ex = exercise("01_acceptance_math", 1)
    fails(ex, None, ns01)
    tv1 = "def tv1(p, q):\n    return {}\n\n\nanswer = tv1(p1, q1)".format  # the function, then the answer from it
    acc, tvd = "acceptance_rate(torch.tensor(p), torch.tensor(q))", "tv_distance(torch.tensor(p), torch.tensor(q))"
    fails(ex, "import torch\n" + tv1(f"1 - float({acc})"), ns01)  # TV from the watched α reference
    fails(ex, "import torch\n" + tv1(f"float({tvd})"), ns01)  # the TV reference, copied
    fails(ex, "import torch\nanswer = float(tv_distance(torch.tensor(p1), torch.tensor(q1)))", ns01)  # as a value
    fails(ex, tv1("np.abs(p - q).sum()"), ns01)  # TV without its 1/2
    fails(ex, tv1("1 - 0.65"), ns01)  # one minus section 1's α (p, q), printed above the exercise
    # section 1's simulator, watched (as the function, it also meets slices that are not distributions)
    fails(ex, tv1("0.5 * np.abs(p - q).sum()") + "\nanswer = 1 - simulate_acceptance(p1, q1)['alpha']", ns01)
    # section 1's Σ min line gives α, not TV: handed back as TV it fails
    fails(ex, tv1("sum(min(a, b) for a, b in zip(p, q))"), ns01)
    right = tv1("0.5 * np.abs(p - q).sum()")
    fails(ex, right + "\nanswer = 1 - tv1(p1, q1)", ns01)  # α handed back where TV is asked
    # TV computed backwards, as 1 − Σ min(p, q): right over two whole distributions, wrong on the slices
    for backwards in ("1 - np.minimum(p, q).sum()", "1 - sum(min(a, b) for a, b in zip(p, q))"):
        with pytest.raises(ExerciseError, match="first three tokens"):
            attempt(ex, ns01(), tv1(backwards))
    # the backwards function with the right TV typed in as the answer: the slices still call the function
    with pytest.raises(ExerciseError, match="first three tokens"):
        attempt(ex, ns01(), tv1("1 - np.minimum(p, q).sum()") + "\nanswer = 0.5 * np.abs(p1 - q1).sum()")
    # TV(p1, q1) pasted as a value, the function left a stub: the slices get no answer
    with pytest.raises(ExerciseError, match="first three tokens.*no answer yet"):
        attempt(ex, ns01(), "answer = 0.43")
    run(ex["exercise"], right, ex["check"], namespace=ns01())  # the definition passes
    passes(ex, ns01)


def test_01_exercise_2_refuses_the_reference_the_iid_closed_form_and_a_count_without_the_bonus():
    ex = exercise("01_acceptance_math", 2)
    fails(ex, None, ns01)
    fails(ex, "answer = expected_length([(0,) * d for d in range(1, k2 + 1)], [[a] for a in alphas2])", ns01)  # ref
    fails(ex, "answer = expected_tokens_per_step(alphas2[0], k2)", ns01)  # the i.i.d. closed form, first α
    fails(ex, "answer = expected_tokens_per_step(float(np.mean(alphas2)), k2)", ns01)  # ... with the mean α
    fails(ex, "a = float(np.mean(alphas2))\nanswer = (1 - a ** (k2 + 1)) / (1 - a)", ns01)  # typed by hand
    no_bonus = (
        "reach = [float(np.prod(alphas2[:j])) for j in range(k2 + 1)]\n"
        "pmf = [reach[j] * (1 - alphas2[j]) for j in range(k2)] + [reach[k2]]\n"
        "answer = sum(j * pj for j, pj in enumerate(pmf))"
    )
    fails(ex, no_bonus, ns01)  # E[A], the bonus left out
    passes(ex, ns01)


def test_01_exercise_3_not_the_neighbouring_table_entry_and_the_tie_to_the_shorter_k():
    ex = exercise("01_acceptance_math", 3)
    fails(ex, None, ns01)
    fails(ex, "answer = optimal_k(alpha3, c3, k_max)", ns01)  # the reference, in scope
    fails(ex, "answer = optimal_k(0.8, 0.1, k_max)", ns01)  # the old exercise's answer, printed in section 3
    fails(ex, "answer = k_max", ns01)  # E[L] alone grows with k: the cost c ignored
    fails(ex, "answer = speedup_explorer(alpha3, 4, c3, k_max)[1]['optimal k']", ns01)  # section 5's callback
    sp = "def sp(k):\n    return (1 - alpha3 ** (k + 1)) / ((1 - alpha3) * (k * c3 + 1))\n"
    fails(ex, sp + "def best3(ks):\n    return optimal_k(alpha3, c3, k_max)\nanswer = best3(ks3)", ns01)  # the ref
    longer = "def best3(ks):\n    return max(k for k in ks if sp(k) == max(map(sp, ks)))\nanswer = best3(ks3)"
    fails(ex, sp + longer, ns01)  # the tie rule ignored: the last of the tied maxima
    plain_max = "def best3(ks):\n    return max(ks, key=sp)\nanswer = best3(ks3)"
    fails(ex, sp + plain_max, ns01)  # the first maximum in the given order (longest first): the longer of the tie
    argmax = "def best3(ks):\n    return ks[int(np.argmax([sp(k) for k in ks]))]\nanswer = best3(ks3)"
    fails(ex, sp + argmax, ns01)  # numpy's argmax: the first maximum too
    upward = "def best3(ks):\n    return max(range(k_max + 1), key=sp)\nanswer = best3(ks3)"
    fails(ex, sp + upward, ns01)  # right by luck: an upward scan of range that never sees the candidates or the tie
    upward_value = "answer = max(range(k_max + 1), key=sp)"  # the same, as a value with best3 left a stub
    fails(ex, sp + upward_value, ns01)
    passes(ex, ns01)


def test_01_exercise_4_needs_the_curve_and_the_cheaper_draft():
    ex = exercise("01_acceptance_math", 4)
    fails(ex, None, ns01)
    fails(ex, "answer = optimal_k(alpha4, t_draft4, k_max, verify_cost=curve)", ns01)  # the reference, in scope
    fails(ex, "answer = optimal_k(alpha4, t_draft4 / curve(1), k_max)", ns01)  # a unit verify cost
    unit_cost = (  # computed by hand, but with section 3's flat verify cost instead of the curve
        "rates = [expected_tokens_per_step(alpha4, k) / (k * t_draft4 + curve(1)) for k in range(k_max + 1)]\n"
        "answer = rates.index(max(rates))"
    )
    fails(ex, unit_cost, ns01)
    fails(ex, "answer = optimal_k(alpha4, t_draft, k_max, verify_cost=curve)", ns01)  # section 4's 5 ms draft
    rate = "def rate(k):\n    return expected_tokens_per_step(alpha4, k) / (k * t_draft4 + curve(k + 1))\n"
    longer = "def best4(ks):\n    return max(k for k in ks if rate(k) >= max(map(rate, ks)) * (1 - 1e-9))\n"
    fails(ex, rate + longer + "answer = best4(ks4)", ns01)  # the tie rule ignored: the last of the tied maxima
    plain_max = "def best4(ks):\n    return max(ks, key=rate)\nanswer = best4(ks4)"
    fails(ex, rate + plain_max, ns01)  # the first maximum in the given order (longest first): the longer of the tie
    upward = "def best4(ks):\n    return max(range(k_max + 1), key=rate)\nanswer = best4(ks4)"
    fails(ex, rate + upward, ns01)  # right by luck: an upward scan of range that never sees the candidates or the tie
    inside = "def best4(ks):\n    return optimal_k(alpha4, t_draft4, k_max, verify_cost=curve)\nanswer = best4(ks4)"
    fails(ex, rate + inside, ns01)  # the reference, inside the function
    passes(ex, ns01)


def test_01_exercise_answers_are_not_printed_above_their_stubs():
    """Ex3's (α, c) is not in section 3's table and Ex4's α is not a row of section 4's."""
    ex3, ex4 = (run(exercise("01_acceptance_math", n)["exercise"], namespace=ns01()) for n in (3, 4))
    table3 = code_cell("01_acceptance_math", r"alphas_t = ")
    alphas_t, cs_t = (eval(re.search(rf"{name} = (\(.*?\))", table3).group(1)) for name in ("alphas_t", "cs_t"))  # noqa: S307
    assert ex3["alpha3"] not in alphas_t and ex3["c3"] not in cs_t
    table4 = code_cell("01_acceptance_math", r"curve = CostCurve\(")
    assert str(ex4["alpha4"]) not in re.search(r"for a in (\(.*?\))", table4).group(1)


# ---- 02: the two branches of the rule, and the chain rule checked exactly ------------------------------------
def ns02_position() -> dict:
    """p0, q0 as the picture's: two distributions over a vocabulary, q zero outside a drafting vocabulary."""
    gen = np.random.default_rng(0)
    p0 = gen.dirichlet(np.full(64, 0.3)) * (np.arange(64) % 5 != 0)  # top-p leaves tokens out of p ...
    q0 = gen.dirichlet(np.full(64, 0.3)) * (np.arange(64) < 40)  # ... and q is 0 outside the drafting vocabulary
    p0, q0 = p0 / p0.sum(), q0 / q0.sum()
    return run(
        "import torch\nfrom specdec_lab.accept.tree_rules import residual\n"
        "from specdec_lab.lab.course import check, is_stub\n"
        "alpha0 = float(np.minimum(p0, q0).sum())  # the picture's cell: the emitted distribution, in scope\n"
        "emitted0 = np.minimum(p0, q0) + (1 - alpha0) * residual(*map(torch.from_numpy, (p0, q0)), 0).numpy()",
        namespace={"p0": p0, "q0": q0, "np": np},
    )


def test_02_exercise_1_refuses_the_reference_and_an_unnormalised_residual():
    ex = exercise("02_speculative_sampling", 1)
    fails(ex, None, ns02_position)
    fails(ex, "def my_residual(p, q):\n    return residual(p, q, 0)", ns02_position)  # section 1's call
    fresh = "def my_residual(p, q):\n    from specdec_lab.accept.tree_rules import residual as r\n    return r(p, q, 0)"
    fails(ex, fresh, ns02_position)  # the library's residual under a name of the answer's own
    fails(ex, "def my_residual(p, q):\n    return (p - q).clamp(min=0)", ns02_position)  # max(p − q, 0), not normalised
    fails(ex, "def my_residual(p, q):\n    e = (q - p).clamp(min=0)\n    return e / e.sum()", ns02_position)
    copied = "torch.from_numpy((emitted0 - np.minimum(p0, q0)) / (1 - alpha0))"  # the picture's residual, from scope
    fails(ex, f"def my_residual(p, q):\n    return {copied}", ns02_position)
    fails(ex, f"answer = {copied}", ns02_position)  # the old value-answer: the stub function is still a stub
    ns = ns02_position()  # the copied value is right at the picture's position: only the check's own pairs catch it
    assert torch.allclose(eval(copied, ns), ns["residual"](torch.from_numpy(ns["p0"]), torch.from_numpy(ns["q0"]), 0))
    passes(ex, ns02_position)


def test_02_exercise_2_is_not_passed_by_handing_back_p():
    ex = exercise("02_speculative_sampling", 2)
    assert "alpha_t" not in ex["solution"]  # section 4's `alpha_t` survives a rerun of the exercises
    fails(ex, None, ns02_position)
    fails(ex, "def branches(p, q):\n    return p", ns02_position)  # p is what the rows add up to, not the rows
    fails(ex, "def branches(p, q):\n    return torch.stack([p, torch.zeros_like(p)])", ns02_position)
    resample_from_p = (  # the broken rule's second branch: the rejected mass drawn from p, not the residual
        "def branches(p, q):\n    kept = torch.minimum(p, q)\n    return torch.stack([kept, (1 - kept.sum()) * p])"
    )
    fails(ex, resample_from_p, ns02_position)
    literal = (  # q(x)·min(1, p(x)/q(x)) typed as is: NaN where p = q = 0
        "def branches(p, q):\n"
        "    kept = q * torch.clamp(p / q, max=1.0)\n"
        "    excess = (p - q).clamp(min=0)\n"
        "    return torch.stack([kept, (1 - kept.sum()) * excess / excess.sum()])"
    )
    fails(ex, literal, ns02_position)
    with_reference = (  # right rows, but the residual taken from the library's function in scope
        "def branches(p, q):\n    kept = torch.minimum(p, q)\n"
        "    return torch.stack([kept, (1 - kept.sum()) * residual(p, q, 0)])"
    )
    fails(ex, with_reference, ns02_position)
    imported = (  # the reference the markdown names, imported under a name of the answer's own
        "from specdec_lab.lab.chain_exercise import branch_reference as _b\ndef branches(p, q):\n    return _b(p, q)"
    )
    fails(ex, imported, ns02_position)
    ns = ns02_position()
    run(ex["exercise"], ex["solution"], ex["check"], namespace=ns)
    assert "branch_reference" not in ns  # the reference stays under a private module name: not in scope for a rerun


def ns02_chain() -> dict:
    return run(
        "import torch\nfrom specdec_lab.sampling import warp_probs\nfrom specdec_lab.lab.course import check, is_stub"
    )


CHAIN_RULE = """
def my_accept(tree, logits, sampling, coins, **_):
    probs = warp_probs(logits, sampling)
    k = len(tree) - 1
    for i in range(1, k + 1):
        x, p, q = int(tree.tokens[i]), probs[{p_row}], tree.draft_probs[i]
        if not coins.accept(float(p[x]), float(q[x])):
            return Acceptance(path=list(range(i)), bonus=coins.sample({residual}))
    return Acceptance(path=list(range(k + 1)), bonus=coins.sample(probs[{bonus_row}]))
"""
RIGHT = {"p_row": "i - 1", "residual": "(p - q).clamp(min=0.0)", "bonus_row": "k"}


@pytest.mark.parametrize(
    "flaw",
    [
        {"bonus_row": "k - 1"},  # all accepted: the bonus from the p the last draft was tested against
        {"residual": "p"},  # a rejection resampled from p
        {"p_row": "i"},  # each draft tested against the p after itself
    ],
    ids=["all-accepted bonus from p before x_k", "rejection resampled from p", "p one node late"],
)
def test_02_exercise_3_catches_a_wrong_chain_rule(flaw):
    ex = exercise("02_speculative_sampling", 3)
    fails(ex, CHAIN_RULE.format(**(RIGHT | flaw)), ns02_chain)


def test_02_exercise_3_stub_fails_and_solution_passes():
    ex = exercise("02_speculative_sampling", 3)
    assert "k=3" in ex["check"]
    fails(ex, None, ns02_chain)
    run(ex["exercise"], CHAIN_RULE.format(**RIGHT), ex["check"], namespace=ns02_chain())  # the sketch above is right
    ns = ns02_chain()
    run(ex["exercise"], ex["solution"], ex["check"], namespace=ns)
    assert "accept_multi_draft" not in ns  # the library's exact rule is not left in scope for a rerun


@pytest.mark.parametrize(
    "rule",
    ["accept_multi_draft", "accept_exact", "accept_speculative",
     "chain.accept_speculative", "tree_rules.accept_multi_draft", "tree_rules.accept_exact"],
)  # fmt: skip
def test_02_exercise_3_refuses_the_library_rule(rule):
    """The library's rules the exercise models are watched, also through the submodules that define them
    (`accept.chain`, `accept.tree_rules`): an answer that hands the step to one is refused."""
    ex = exercise("02_speculative_sampling", 3)
    fails(ex, f"def my_accept(tree, logits, sampling, coins, **kw):\n    return accept.{rule}(tree, logits, sampling, "
          "coins=coins)\n", ns02_chain)  # fmt: skip


@pytest.mark.parametrize(
    "call",
    ['accept.ACCEPT_RULES["multi_draft"](tree, logits, sampling, coins=coins)',
     'accept.get_accept_rule("multi_draft")(tree, logits, sampling, coins=coins)',
     'accept.tree_rules._walk(tree, logits, sampling, coins, "sampled")',
     "__import__('specdec_lab.accept.tree_rules', fromlist=['x']).accept_exact(tree, logits, sampling, coins=coins)"],
)  # fmt: skip
def test_02_exercise_3_refuses_a_library_rule_reached_another_way(call):
    """A rule reached through the registry, a private walker or an import of the answer's own runs the library's
    code: the check records it by its code, not its name."""
    ex = exercise("02_speculative_sampling", 3)
    fails(ex, f"def my_accept(tree, logits, sampling, coins, **kw):\n    return {call}\n", ns02_chain)


def test_02_exercise_3_refuses_a_rule_that_never_accepts():
    """Plain sampling from p is exact but accepts nothing: the emitted tokens pass, the acceptance chance does not."""
    ex = exercise("02_speculative_sampling", 3)
    never = (
        "def my_accept(tree, logits, sampling, coins, **_):\n"
        "    from specdec_lab.accept.result import Acceptance\n"
        "    from specdec_lab.sampling import warp_probs\n"
        "    return Acceptance(path=[0], bonus=coins.sample(warp_probs(logits[0], sampling)))\n"
    )
    fails(ex, never, ns02_chain)


def test_chain_exercise_helpers_on_the_library_rules():
    from specdec_lab.accept.exactness import BROKEN_RULES
    from specdec_lab.accept.tree_rules import accept_multi_draft
    from specdec_lab.lab.chain_exercise import (
        EXACT,
        all_accepted_probability,
        branch_reference,
        chain_rule_tv,
        probe_rule,
    )

    assert probe_rule(lambda *a, **k: None) is None
    assert chain_rule_tv(accept_multi_draft, k=3) < EXACT  # the library's exact rule, on a chain
    assert chain_rule_tv(BROKEN_RULES["q_ignored_in_residual"], k=3) > 1000 * EXACT
    assert 0.0 < all_accepted_probability(accept_multi_draft, k=3) < 1.0  # the all-accepted bonus is reached
    p, q = (
        torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64),
        torch.tensor([0.2, 0.5, 0.0, 0.3], dtype=torch.float64),
    )
    rows = branch_reference(p, q)
    assert torch.allclose(rows.sum(0), p) and rows[0, 2] == 0 and rows[1, 3] == 0


# ---- 03: labels, Adam's first step, targets per head, the Medusa-1 loss -----------------------------------------
def ns03() -> dict:
    """K = 4 heads and an example of 10 prompt and 7 response tokens, as section 2's (a prompt longer than K)."""
    from types import SimpleNamespace

    gen = torch.Generator().manual_seed(0)
    k = 4
    held_rows = SimpleNamespace(  # 64 held-out rows: their h_t, and labels with IGNORE_INDEX (-100) near the end
        hidden=lambda rows: torch.randn(len(rows), 8, generator=torch.Generator().manual_seed(1)),
        labels=torch.where(
            torch.rand(80, k + 1, generator=gen) < 0.2, -100, torch.randint(0, 12, (80, k + 1), generator=gen)
        ),
    )
    shipped = lambda h: torch.randn(h.shape[0], k, 12, generator=torch.Generator().manual_seed(2))  # noqa: E731
    ns = run(
        "import torch\nfrom IPython.display import Markdown\n"
        "from specdec_lab.medusa import IGNORE_INDEX, loss_weights, medusa_labels\n"
        "from specdec_lab.lab.course import check",
        namespace={"K": k, "ids": torch.arange(100, 117), "P": 10, "held_rows": held_rows, "shipped": shipped},
    )
    run(code_cell("03_medusa_heads", r"lr: float ="), namespace=ns)  # the parameters: `lr`
    run("naive = medusa_labels(ids, P, K)", namespace=ns)  # section 2's table, in scope at the exercises
    return ns


def test_03_exercise_1_needs_the_end_of_the_example():
    ex = exercise("03_medusa_heads", 1)
    fails(ex, None, ns03)
    fails(ex, "answer = medusa_labels(ids1, P, K)[t1].tolist()", ns03)  # the reference, in scope
    fails(ex, "answer = naive[t1].tolist()", ns03)  # section 2's table: the whole example, not the cut one
    fails(ex, "answer = [int(x) for x in ids[t1 + 1 : t1 + K + 2]]", ns03)  # the end of the example ignored
    fails(
        ex, "answer = [int(ids1[t1 + k]) if t1 + k < len(ids1) else IGNORE_INDEX for k in range(K + 1)]", ns03
    )  # one early
    passes(ex, ns03)


ADAM = "def adam_first_update(grad):\n    return {update}\n"
SURVIVES = (
    "survives = [i for i in range(len(g)) if not torch.isclose(adam_first_update(lam * g)[i], adam_first_update(g)[i], "
    "rtol=1e-3, atol=0)]"
)
RIGHT_ADAM = ADAM.format(update="-lr * grad / (grad.abs() + 1e-8)")


@pytest.mark.parametrize(
    "wrong",
    [
        ADAM.format(update="-lr * grad") + SURVIVES,  # plain SGD: the weight scales the step
        ADAM.format(update="-lr * torch.sign(grad)") + SURVIVES,  # Adam without its eps
        RIGHT_ADAM + "survives = []",  # "Adam cancels the weight", taken as exact
        RIGHT_ADAM + "survives = [4]",  # only the one gradient that looks tiny at a glance
        RIGHT_ADAM + "survives = list(range(len(g)))",
    ],
    ids=["SGD", "sign without eps", "never survives", "only the first tiny entry", "everywhere"],
)
def test_03_exercise_2_refuses_a_wrong_update_or_list(wrong):
    fails(exercise("03_medusa_heads", 2), wrong, ns03)


def test_03_exercise_2_stub_fails_and_solution_passes():
    ex = exercise("03_medusa_heads", 2)
    fails(ex, None, ns03)
    copied = (  # torch.optim.Adam itself, the check's reference
        "def adam_first_update(grad):\n    w = torch.zeros_like(grad, requires_grad=True)\n    w.grad = grad.clone()\n"
        "    torch.optim.Adam([w], lr=lr).step()\n    return w.detach()\n" + SURVIVES
    )
    fails(ex, copied, ns03)
    aliased = (  # the same, under an alias bound outside the function: no name of it in the function's code
        "from torch.optim import Adam as _A\n"
        "def adam_first_update(grad):\n    w = torch.zeros_like(grad, requires_grad=True)\n    w.grad = grad.clone()\n"
        "    _A([w], lr=lr).step()\n    return w.detach()\n" + SURVIVES
    )
    fails(ex, aliased, ns03)
    list_by_adam = (  # a right update, but the list computed with torch.optim.Adam directly
        RIGHT_ADAM + "def _adam(x):\n    w = torch.zeros_like(x, requires_grad=True)\n    w.grad = x.clone()\n"
        "    torch.optim.Adam([w], lr=lr).step()\n    return w.detach()\n"
        "survives = [i for i in range(len(g)) if not torch.isclose(_adam(lam * g)[i], _adam(g)[i], rtol=1e-3, atol=0)]"
    )
    fails(ex, list_by_adam, ns03)
    fails(ex, "survives = [4, 5]", ns03)  # the list alone: the update function is still a stub
    passes(ex, ns03)


def test_03_exercise_3_short_prompt_gives_later_heads_fewer_targets():
    ex = exercise("03_medusa_heads", 3)
    fails(ex, None, ns03)
    fails(ex, "answer = (medusa_labels(ids3, P3, K) != IGNORE_INDEX).sum(0).tolist()", ns03)  # the reference
    fails(ex, "answer = [len(ids3) - P3] * (K + 1)", ns03)  # one per response token, as with a long prompt
    fails(ex, "answer = [len(ids) - P] * (K + 1)", ns03)  # section 2's example's counts
    passes(ex, ns03)


LOSS = "import torch.nn.functional as F\n\n\ndef my_medusa_loss(logits, labels):\n    K = logits.shape[1]\n{body}"


def test_03_exercise_4_weights_from_head_1_and_means_over_labelled_rows():
    ex = exercise("03_medusa_heads", 4)
    fails(ex, None, ns03)
    ce = (
        "    ce = torch.stack([F.cross_entropy(logits[:, k], labels[:, k], ignore_index=IGNORE_INDEX) "
        "for k in range(K)])\n"
    )
    fails(ex, LOSS.format(body=ce + "    return float(ce.sum())"), ns03)  # unweighted
    fails(ex, LOSS.format(body=ce + "    return float((0.8 ** torch.arange(K) * ce).sum())"), ns03)  # 0.8^(k-1)
    clamped = (  # the unlabelled rows counted as label 0
        "    ce = torch.stack([F.cross_entropy(logits[:, k], labels[:, k].clamp(min=0)) for k in range(K)])\n"
        "    return float((0.8 ** torch.arange(1, K + 1) * ce).sum())"
    )
    fails(ex, LOSS.format(body=clamped), ns03)
    over_all_rows = (  # the unlabelled rows kept out of the sum but counted in the mean's denominator
        "    ce = torch.stack([F.cross_entropy(logits[:, k], labels[:, k], ignore_index=IGNORE_INDEX, "
        "reduction='none').mean() for k in range(K)])\n"
        "    return float((0.8 ** torch.arange(1, K + 1) * ce).sum())"
    )
    fails(ex, LOSS.format(body=over_all_rows), ns03)
    # the reference, in scope (watched): the copied call is refused, however right its value
    fails(ex, LOSS.format(body="    return float(medusa_loss(logits, labels, loss_weights(K))[0])"), ns03)
    fresh = (  # the reference under a name of the answer's own: recorded by its code, not its name
        "    import specdec_lab.medusa.heads as H\n"
        "    return float(H.medusa_loss(logits, labels, 0.8 ** torch.arange(1, K + 1))[0])"
    )
    fails(ex, LOSS.format(body=fresh), ns03)
    passes(ex, ns03)


# ---- 00: the picture's window around a partially accepted step -----------------------------------------------
@pytest.fixture(scope="module")
def decode():
    from specdec_lab import generate, tiny_model

    base = torch.randint(0, 256, (3,), generator=torch.Generator().manual_seed(5)).tolist()
    return generate(tiny_model(), (base * 20)[:40], method="prompt_lookup", max_new_tokens=24, draft_length=4)


def test_window_starts_before_the_partial_step():
    from specdec_lab.viz.timeline_window import window_start

    assert window_start(None) == 0
    assert window_start(0) == 0 and window_start(1) == 1 and window_start(2) == 1 and window_start(7) == 5
    assert window_start(7, count=2) == 6  # never so far back that the step falls out of the window


def test_partial_step_and_window_figure(decode):
    from specdec_lab.viz.timeline import ROLE_NAMES
    from specdec_lab.viz.timeline_window import first_partial_step, is_partial, step_window, timeline_window_figure

    s = first_partial_step(decode)
    assert s is None or (is_partial(decode.steps[s]) and not any(map(is_partial, decode.steps[:s])))
    first = 1 if len(decode.steps) > 1 else 0
    window = step_window(decode, first, 3)
    assert window.steps == decode.steps[first : first + 3]
    assert window.prompt_tokens == decode.prompt_tokens + [t for step in decode.steps[:first] for t in step.emitted]
    fig = timeline_window_figure(decode, None, first, count=3)
    names = [f"step {first + i}" for i in range(len(window.steps))]
    assert list(fig.layout.yaxis.categoryarray) == names
    bonus = next(t for t in fig.data if t.name == ROLE_NAMES["target"])
    assert list(bonus.y) == names[: len(bonus.y)] and all(h.startswith("step ") for h in bonus.hovertext)
    assert fig.layout.yaxis.title.text  # the rows are named: steps, one target forward each
    from specdec_lab.text import visible
    from specdec_lab.viz.timeline import timeline_rows

    rows = timeline_rows(window, None, max_steps=3)  # every token box labelled whole, none cut short with "…"
    assert list(bonus.text) == [visible(r["bonus"]) for r in rows if r["bonus"] is not None]
    with pytest.raises(ValueError):
        step_window(decode, len(decode.steps))


def test_a_partial_step_is_one_that_kept_some_drafts_but_not_all():
    from types import SimpleNamespace

    from specdec_lab.viz.timeline_window import first_partial_step, is_partial

    steps = [SimpleNamespace(accepted=a, proposed=k) for a, k in ((0, 4), (4, 4), (0, 0), (2, 4), (1, 3))]
    assert [is_partial(s) for s in steps] == [False, False, False, True, True]
    assert first_partial_step(steps) == 3 and first_partial_step(steps[:3]) is None


# ---- 00: mean accepted over part of a decode, a break-even α off the table, the additive mask ------------------
def ns00() -> dict:
    """A decode of six steps (L = 1, 3, 5, 1, 2, 5) whose tail from step 2 has another mean than the whole, and a
    cost curve whose t(4)/t(1) is above 1."""
    from types import SimpleNamespace

    from specdec_lab.cost.curve import CostCurve
    from specdec_lab.generate import GenerationResult

    steps = [SimpleNamespace(emitted=[7] * e, accepted=e - 1, proposed=4) for e in (1, 3, 5, 1, 2, 5)]
    demo = GenerationResult(
        tokens=[t for s in steps for t in s.emitted], prompt_tokens=[], text=None, stop_reason="max_new_tokens",
        method="prompt_lookup", seconds=1.0, prefill_seconds=0.1, steps=steps, forwards=len(steps),
    )  # fmt: skip
    curve = CostCurve(sizes=[1, 2, 4, 8], seconds=[0.030, 0.031, 0.040, 0.050])
    return run(
        "import torch\nfrom specdec_lab import Tree\nfrom specdec_lab.verify import tree_attention_mask\n"
        "from specdec_lab.cost.theory import expected_tokens_per_step\nfrom specdec_lab.lab.course import check",
        namespace={"demo": demo, "first": 2, "curve": curve},
    )


def test_00_exercise_1_the_tail_of_the_decode_not_its_whole():
    ex = exercise("00_getting_started", 1)
    fails(ex, None, ns00)
    fails(ex, "answer = demo.mean_accepted", ns00)  # the whole decode's, in scope
    fails(ex, "answer = len(demo.tokens) / len(demo.steps)", ns00)  # the same, by hand
    fails(ex, "answer = sum(s.accepted for s in demo.steps[first:]) / len(demo.steps[first:])", ns00)  # no bonus
    passes(ex, ns00)


def test_00_exercise_2_needs_the_exact_crossing_for_k_3():
    ex = exercise("00_getting_started", 2)
    fails(ex, None, ns00)
    grid = (
        "answer = next(a / 1000 for a in range(1001)\n"
        "              if expected_tokens_per_step(a / 1000, 3) >= 0.6 + curve(4) / curve(1))"
    )
    fails(ex, grid, ns00)  # section 3's table resolution
    free = (  # the bisection, but for a free proposer: the drafts' cost left out
        "lo, hi = 0.0, 1.0\nfor _ in range(60):\n    mid = (lo + hi) / 2\n"
        "    lo, hi = (mid, hi) if expected_tokens_per_step(mid, 3) < curve(4) / curve(1) else (lo, mid)\nanswer = hi"
    )
    fails(ex, free, ns00)
    k4 = (  # the bisection, but for section 3's k = 4
        "lo, hi = 0.0, 1.0\nfor _ in range(60):\n    mid = (lo + hi) / 2\n"
        "    lo, hi = (mid, hi) if expected_tokens_per_step(mid, 4) < curve(5) / curve(1) else (lo, mid)\nanswer = hi"
    )
    fails(ex, k4, ns00)
    fails(ex, "answer = 0.0", ns00)  # "any α pays": not with drafts that cost
    passes(ex, ns00)


def test_00_exercise_3_refuses_the_library_mask():
    ex = exercise("00_getting_started", 3)
    fails(ex, None, ns00)
    fails(ex, "answer = tree_attention_mask(Tree(list(range(6)), parents3), cached, torch.float32)[0, 0]", ns00)
    from_tree = (  # Tree.mask, padded with the cache columns: the library's tree, not a walk up the parents
        "mask = Tree(list(range(6)), parents3).mask\n"
        "answer = torch.cat([torch.zeros(6, cached), torch.where(mask, 0.0, torch.finfo(torch.float32).min)], 1)"
    )
    fails(ex, from_tree, ns00)
    no_cache = (  # the ancestors right, the cached prefix masked
        "answer = torch.full((6, 9), torch.finfo(torch.float32).min)\nfor i in range(6):\n    j = i\n"
        "    while j != -1:\n        answer[i, cached + j] = 0.0\n        j = parents3[j]"
    )
    fails(ex, no_cache, ns00)
    section_5 = (  # section 5's tree (parents [-1, 0, 0, 1, 1, 2, 3]), its first 6 nodes: the mask in scope, sliced
        "p5 = [-1, 0, 0, 1, 1, 2, 3]\nanswer = torch.full((6, 9), torch.finfo(torch.float32).min)\n"
        "answer[:, :cached] = 0.0\nfor i in range(6):\n    j = i\n"
        "    while j != -1:\n        answer[i, cached + j] = 0.0\n        j = p5[j]"
    )
    fails(ex, section_5, ns00)
    passes(ex, ns00)
