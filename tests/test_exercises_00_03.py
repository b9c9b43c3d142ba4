"""The exercises of notebooks 00-03 that were reworked, run from the stored notebooks' own cells (by tag) without the
real model: each check fails on the stub and on a plausible wrong answer (ExerciseError), and passes on the
solution. Plus the helpers behind them: notebook 00's picture window (`viz.timeline_window`) and notebook 02's
exact chain check (`lab.chain_exercise`)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from exercise_cells import cells, exercise, fails, passes, run, source


def code_cell(stem: str, pattern: str) -> str:
    """The source of the first code cell matching `pattern` (a regex)."""
    return next(source(c) for c in cells(stem) if c["cell_type"] == "code" and re.search(pattern, source(c)))


# ---- 01: optimal draft lengths at points the notebook's tables do not show -----------------------------------
def ns01() -> dict:
    ns = run(
        "import numpy as np, pandas as pd\n"
        "from specdec_lab.cost.theory import expected_speedup, expected_tokens_per_step, optimal_k\n"
        "from specdec_lab.lab.course import check"
    )
    run(code_cell("01_acceptance_math", r"k_max: int ="), namespace=ns)  # the parameters
    run(code_cell("01_acceptance_math", r"curve = CostCurve\("), namespace=ns)  # section 4's example curve
    return ns


def test_01_exercise_3_not_the_neighbouring_table_entry():
    ex = exercise("01_acceptance_math", 3)
    fails(ex, None, ns01)
    fails(ex, "answer = optimal_k(0.8, 0.1, k_max)", ns01)  # the old exercise's answer, printed in section 3
    fails(ex, "answer = k_max", ns01)  # E[L] alone grows with k: the cost c ignored
    passes(ex, ns01)


def test_01_exercise_4_needs_the_curve_and_the_cheaper_draft():
    ex = exercise("01_acceptance_math", 4)
    fails(ex, None, ns01)
    fails(ex, "answer = optimal_k(alpha4, t_draft4 / curve(1), k_max)", ns01)  # a unit verify cost
    fails(ex, "answer = optimal_k(alpha4, t_draft, k_max, verify_cost=curve)", ns01)  # section 4's 5 ms draft
    passes(ex, ns01)


def test_01_exercise_answers_are_not_printed_above_their_stubs():
    """Ex3's (α, c) is not in section 3's table and Ex4's α is not a row of section 4's."""
    ex3, ex4 = (run(exercise("01_acceptance_math", n)["exercise"], namespace={}) for n in (3, 4))
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
        "import torch\nfrom specdec_lab.lab.course import check, is_stub", namespace={"p0": p0, "q0": q0, "np": np}
    )


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
    passes(ex, ns02_position)


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
    passes(ex, ns02_chain)


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


# ---- 03: Adam's first step and a loss weight -----------------------------------------------------------------
def ns03() -> dict:
    ns = run("import torch\nfrom specdec_lab.lab.course import check")
    run(code_cell("03_medusa_heads", r"lr: float ="), namespace=ns)  # the parameters: `lr`
    return ns


def test_03_exercise_2_wants_adam_not_the_printed_weights():
    ex = exercise("03_medusa_heads", 2)
    fails(ex, None, ns03)
    fails(ex, "answer = -lr * lam * g", ns03)  # plain SGD: the weight scales the step
    fails(ex, "answer = -lr * torch.sign(g)", ns03)  # Adam without its eps: wrong where |lam * g| is near eps
    fails(ex, "from specdec_lab.medusa import loss_weights\nanswer = loss_weights(4, 0.8)", ns03)  # the old answer
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
    with pytest.raises(ValueError):
        step_window(decode, len(decode.steps))


def test_a_partial_step_is_one_that_kept_some_drafts_but_not_all():
    from types import SimpleNamespace

    from specdec_lab.viz.timeline_window import first_partial_step, is_partial

    steps = [SimpleNamespace(accepted=a, proposed=k) for a, k in ((0, 4), (4, 4), (0, 0), (2, 4), (1, 3))]
    assert [is_partial(s) for s in steps] == [False, False, False, True, True]
    assert first_partial_step(steps) == 3 and first_partial_step(steps[:3]) is None
