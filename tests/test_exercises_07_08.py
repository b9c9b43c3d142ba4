"""The exercises of notebooks 07 and 08, run without the real model: each check fails on a plausible wrong answer
(one that misses the exercise's point, or calls the reference already in scope) and passes on the solution.

The cells are the stored notebook's own (stub, solution, check: tags `exercise`, `solution`, `check`); only the
names they take from earlier cells of the notebook are made here, small and synthetic.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from exercise_cells import attempt as run  # stub, answer, check
from exercise_cells import exercise as cells

from specdec_lab.lab.course import ExerciseError


# ---- 07 -------------------------------------------------------------------------------------------------------
def _steps_07():
    """Lookahead steps, made up: a full window with n-grams, a full window without, and no window at all."""

    def step(columns, levels, proposed):
        size = max(columns * levels, 1) + proposed  # the tree the library would verify
        return SimpleNamespace(info={"columns": columns, "levels": levels}, proposed=proposed, tree=[0] * size)

    return [step(4, 2, 4), step(4, 2, 0), step(0, 0, 3), step(0, 0, 0), step(5, 1, 2)]


def test_07_exercise_1_the_root_counts_once_with_or_without_a_window():
    from specdec_lab.lab.course import check

    ex = cells("07_lookahead_decoding", 1)
    steps = _steps_07()

    def ns():
        fake = SimpleNamespace(steps=steps)
        return {"demo": fake, "la": fake, "generate": lambda *a, **k: fake, "lm": None, "ids": [], "pool_N": 4,
                "pool_G": 4, "seed": 0, "check": check}  # fmt: skip

    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    head = "def step_nodes(columns, levels, ngram_nodes):\n    return "
    for wrong in (head + "columns * levels + ngram_nodes",  # a step without a window: the root forgotten
                  head + "columns * levels + ngram_nodes + 1",  # the root counted twice
                  head + "1 + levels * columns - 1 + ngram_nodes",  # a full window's count, copied: no root alone
                  head + "12"):  # a printed step's total, whatever the step  # fmt: skip
        with pytest.raises(ExerciseError, match="not yet"):
            run(ex, ns(), wrong)
    run(ex, ns(), ex["solution"])


def test_07_exercise_2_a_jacobi_update_not_the_fixed_point_nor_generate():
    import torch

    from specdec_lab import generate

    ex = cells("07_lookahead_decoding", 2)
    from specdec_lab.lab.course import check

    ns = lambda: {"torch": torch, "generate": generate, "seed": 0, "check": check}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    calls = (  # the greedy answer, from the reference in scope
        "def jacobi_step(block):\n"
        "    return generate(tiny, prompt_ids, method='autoregressive', max_new_tokens=len(block)).tokens"
    )
    with pytest.raises(ExerciseError, match="called `generate`"):
        run(ex, ns(), calls)
    by_hand = (  # the fixed point by a greedy loop of its own: right at the end, but no Jacobi update
        "def jacobi_step(block):\n    ids = list(prompt_ids)\n    for _ in block:\n"
        "        with torch.no_grad():\n            ids.append(int(tiny(torch.tensor([ids])).logits[0, -1].argmax()))\n"
        "    return ids[len(prompt_ids):]"
    )
    with pytest.raises(ExerciseError, match="padding block"):
        run(ex, ns(), by_hand)
    shifted = (  # the logits at the guesses' own positions: one position late
        "def jacobi_step(block):\n    with torch.no_grad():\n"
        "        logits = tiny(torch.tensor([prompt_ids + block])).logits[0]\n"
        "    return logits[len(prompt_ids) : len(prompt_ids) + len(block)].argmax(-1).tolist()"
    )
    with pytest.raises(ExerciseError, match="padding block"):
        run(ex, ns(), shifted)
    run(ex, ns(), ex["solution"])


def test_07_exercise_3_its_own_curve_and_no_call_to_the_reference():
    import pandas as pd

    from specdec_lab.cost import flat_curve
    from specdec_lab.cost.curve import CostCurve
    from specdec_lab.lab.course import check
    from specdec_lab.viz.lookahead_sweep import predicted_speedups

    index = pd.MultiIndex.from_tuples([(2, 3, 2), (4, 4, 4), (8, 5, 8)], names=["W", "N", "G"])
    sweep = pd.DataFrame({"mean accepted": [1.48, 1.76, 1.98], "tokens verified / forward": [6.2, 16.2, 45.0],
                          "n-gram nodes / forward": [2.3, 4.0, 8.1]}, index=index)  # fmt: skip
    curve = CostCurve(sizes=[1, 8, 16, 32, 64], seconds=[0.02, 0.03, 0.036, 0.05, 0.08], tree=True)  # "this CPU"
    curves = {"this CPU (measured)": curve, "flat (GPU-like)": flat_curve(curve(1), up_to=64)}
    ns = lambda: {"sweep": sweep, "curve": curve, "pred": predicted_speedups(sweep, curves),  # noqa: E731
                  "predicted_speedups": predicted_speedups, "check": check}  # fmt: skip
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex := cells("07_lookahead_decoding", 3), ns(), None)
    wrongs = (
        'answer = list(pred["predicted (this CPU (measured))"])',  # the table printed above: another curve
        'answer = [r["mean accepted"] / bent(r["tokens verified / forward"]) for _, r in sweep.iterrows()]',  # t(n)
        'answer = [r["mean accepted"] / (bent(r["n-gram nodes / forward"]) / bent(1)) for _, r in sweep.iterrows()]',
    )
    for wrong in wrongs:
        with pytest.raises(ExerciseError, match="not yet"):
            run(ex, ns(), wrong)
    with pytest.raises(ExerciseError, match="called `predicted_speedups`"):
        run(ex, ns(), 'answer = list(predicted_speedups(sweep, {"b": bent})["predicted (b)"])')
    run(ex, ns(), ex["solution"])


def test_07_exercise_4_harvest_and_slide():
    from specdec_lab.lab.course import check

    ex = cells("07_lookahead_decoding", 4)
    ns = lambda: {"check": check}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    head = "def window_step(levels, root, pred):\n"
    no_root = head + (  # column 0 read from level 0, the root left out
        "    cols = zip(levels[0] + [None], *levels[1:], pred)\n"
        "    return [(c[0], tuple(c[1:])) for c in cols], [levels[1][1:], *levels[2:], list(pred)]"
    )
    kept = head + (  # the harvest right, the window not slid (level 0 kept)
        "    cols = zip([root, *levels[0]], *levels[1:], pred)\n"
        "    return [(c[0], tuple(c[1:])) for c in cols], [levels[0], *levels[2:], list(pred)]"
    )
    typed_in = head + (  # the shown window's answer, typed in: the check's second window refuses it
        "    return [(10, (20, 30, 40)), (11, (21, 31, 41)), (12, (22, 32, 42)), (13, (23, 33, 43))], "
        "[[21, 22, 23], [30, 31, 32, 33], [40, 41, 42, 43]]"
    )
    for wrong in (no_root, kept, typed_in):
        with pytest.raises(ExerciseError, match="not yet"):
            run(ex, ns(), wrong)
    run(ex, ns(), ex["solution"])


# ---- 08 -------------------------------------------------------------------------------------------------------
def test_08_exercise_3_the_tie_rule_meets_a_real_tie():
    from specdec_lab.lab.course import check
    from specdec_lab.lab.experiment import fastest

    ex = cells("08_speedup_lab", 3)
    runs = [SimpleNamespace(spec="prompt_lookup", speedup=1.21), SimpleNamespace(spec="draft", speedup=0.97)]
    ns = lambda: {"comparison": runs, "tie_tol": 0.05, "tol": 0.05, "fastest": fastest, "check": check}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    argmax = "def fastest_specs(speedups, rel_tol):\n    return [max(speedups, key=speedups.get)] if speedups else []"
    absolute = (
        "def fastest_specs(speedups, rel_tol):\n    top = max(speedups.values(), default=0)\n"
        "    return sorted((s for s in speedups if top - speedups[s] <= rel_tol), key=lambda s: -speedups[s])"
    )
    unsorted = ("def fastest_specs(speedups, rel_tol):\n    top = max(speedups.values(), default=0)\n"
                "    return [s for s in speedups if top - speedups[s] <= rel_tol * top]")  # fmt: skip
    max_relative = (  # math.isclose's band, relative to the larger of the two: a third made-up speed-up falls in
        "def fastest_specs(speedups, rel_tol):\n    top = max(speedups.values(), default=0)\n"
        "    return sorted((s for s in speedups if top - speedups[s] <= rel_tol * top),\n"
        "                  key=lambda s: -speedups[s])"
    )
    for wrong in (argmax, absolute, unsorted, max_relative):  # section 2's runs hold no tie
        with pytest.raises(ExerciseError, match="made-up"):
            run(ex, ns(), wrong)
    run(ex, ns(), ex["solution"])


def _lab_08():
    """Section 1's LabResult, made up: a traced run with a plain step, partial and full acceptances and a path cut
    short by end-of-text, against an autoregressive baseline of the same 12 tokens."""
    from specdec_lab.generate import GenerationResult, StepTrace
    from specdec_lab.lab.experiment import LabResult

    def step(proposed, path, emitted):  # a chain of `proposed` drafts after the root; `path` accepted nodes
        return StepTrace(list(range(100, 101 + proposed)), list(range(-1, proposed)), path, emitted, 0, 0, 0)

    steps = [step(0, [0], [1]), step(3, [0, 1], [2, 3]), step(2, [0, 1, 2], [4, 5, 6]), step(4, [0, 1, 2], [7, 8, 9]),
             step(3, [0, 1, 2, 3], [10, 2])]  # fmt: skip
    tokens = [t for s in steps for t in s.emitted]
    run = GenerationResult(tokens, [5, 6], None, "eos", "prompt_lookup", 0.31, 0.0, steps, forwards=len(steps))
    base = GenerationResult(tokens, [5, 6], None, "eos", "autoregressive", 0.52, 0.0, forwards=len(tokens))
    return LabResult("prompt_lookup", "prompt_lookup", {}, 0.0, 0, 64, run, base)


def test_08_exercise_1_read_a_run_from_its_fields():
    ex = cells("08_speedup_lab", 1)
    ns = lambda: {"lab": _lab_08()}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    head = "def read_run(run, base):\n    return "
    wrongs = (
        head + "(lab.mean_accepted, lab.speedup)",  # section 1's values, copied: the made-up runs differ
        head + "(len(run.tokens) / run.forwards, base.seconds / run.seconds)",  # a time ratio, not tokens/s
        head
        + "(len(run.tokens) / run.forwards - 1, (len(run.tokens) / run.seconds) / (len(base.tokens) / base.seconds))",
    )  # (the last: accepted drafts per step, the bonus left out)
    for wrong in wrongs:
        with pytest.raises(ExerciseError, match="made-up"):
            run(ex, ns(), wrong)
    with pytest.raises(AttributeError):  # the library's own properties are not on the runs it is handed
        run(ex, ns(), head + "(run.mean_accepted, run.tokens_per_s / base.tokens_per_s)")
    after = ns()  # one failed check leaves no reference behind: an answer cannot borrow the check's helpers
    with pytest.raises(ExerciseError):
        run(ex, after, wrongs[1])
    assert not {"as_lab", "LabResult", "made", "_check_exercise_1"} & set(after)
    with pytest.raises(NameError):
        run(ex, after, head + "(as_lab(run, base).mean_accepted, as_lab(run, base).speedup)")
    run(ex, ns(), ex["solution"])


def test_08_exercise_2_count_provenance_with_a_plain_step_and_a_cut_path():
    ex = cells("08_speedup_lab", 2)
    ns = lambda: {"lab": _lab_08()}  # noqa: E731
    with pytest.raises(ExerciseError, match="no answer yet"):
        run(ex, ns(), None)
    copied = "def count_provenance(steps):\n    return dict(lab.provenance_counts)"
    no_cut = (
        "def count_provenance(steps):\n    c = {'accepted draft': 0, 'bonus': 0, 'plain step': 0}\n"
        "    for s in steps:\n        if s.proposed == 0:\n            c['plain step'] += len(s.emitted)\n"
        "        else:\n            c['accepted draft'] += s.accepted\n"
        "            c['bonus'] += len(s.emitted) - s.accepted\n    return c"
    )  # an end-of-text token inside the path: a bonus of -1
    all_bonus = (
        "def count_provenance(steps):\n    c = {'accepted draft': 0, 'bonus': 0, 'plain step': 0}\n"
        "    for s in steps:\n        c['accepted draft'] += min(s.accepted, len(s.emitted))\n"
        "        c['bonus'] += len(s.emitted) - min(s.accepted, len(s.emitted))\n    return c"
    )  # a plain step's token counted as a bonus
    for wrong in (copied, no_cut, all_bonus):
        with pytest.raises(ExerciseError, match="made-up"):
            run(ex, ns(), wrong)
    after = ns()  # one failed check leaves none of its own names behind: `PROVENANCE` is not in scope
    with pytest.raises(ExerciseError):
        run(ex, after, no_cut)
    assert not {"PROVENANCE", "made_up_counts", "_check_exercise_2"} & set(after)
    calls = (  # the reference the stub names `provenance`, called: refused whatever its value
        "from collections import Counter\n\n\ndef count_provenance(steps):\n    c = Counter(provenance(steps))\n"
        "    return {k: c.get(k, 0) for k in ('accepted draft', 'bonus', 'plain step')}"
    )
    with pytest.raises(ExerciseError, match="called `provenance`"):
        run(ex, ns(), calls)
    via_lab = (  # section 1's `lab` copied with other steps: its own counts call the library's reading
        "import dataclasses\n\n\ndef count_provenance(steps):\n"
        "    copy = dataclasses.replace(lab, result=dataclasses.replace(lab.result, steps=list(steps)))\n"
        "    return dict(copy.provenance_counts)"
    )
    with pytest.raises(ExerciseError, match="called `provenance`"):
        run(ex, ns(), via_lab)
    import specdec_lab.lab.experiment as experiment_module
    import specdec_lab.lab.trace_reading as trace_reading_module

    assert experiment_module.provenance is trace_reading_module.provenance  # the check put the library back
    assert experiment_module.provenance.__module__ == "specdec_lab.lab.trace_reading"
    run(ex, ns(), ex["solution"])


def test_08_exercise_3_uses_section_2s_tolerance_so_it_agrees_with_the_sentence():
    from specdec_lab.lab.course import check
    from specdec_lab.lab.experiment import fastest

    ex = cells("08_speedup_lab", 3)
    runs = [SimpleNamespace(spec="prompt_lookup", speedup=1.21), SimpleNamespace(spec="draft", speedup=1.0)]
    ns = lambda: {"comparison": runs, "tie_tol": 0.05, "tol": 0.3, "fastest": fastest, "check": check}  # noqa: E731
    fixed = ex["solution"].replace("<= rel_tol *", "<= 0.05 *")  # the set tolerance, not the one it is given
    assert fixed != ex["solution"]
    with pytest.raises(ExerciseError, match="section 2"):
        run(ex, ns(), fixed)
    run(ex, ns(), ex["solution"])


def test_08_exercise_3_an_answer_that_calls_fastest_is_refused():
    from specdec_lab.lab.course import check
    from specdec_lab.lab.experiment import fastest

    ex = cells("08_speedup_lab", 3)
    runs = [SimpleNamespace(spec="prompt_lookup", speedup=1.21), SimpleNamespace(spec="draft", speedup=0.97)]
    ns = lambda: {"comparison": runs, "tie_tol": 0.05, "tol": 0.05, "fastest": fastest, "check": check}  # noqa: E731
    calls = (
        "def fastest_specs(speedups, rel_tol):\n    from types import SimpleNamespace as S\n"
        "    return [x.spec for x in fastest([S(spec=k, speedup=v) for k, v in speedups.items()], rel_tol)]"
    )
    with pytest.raises(ExerciseError, match="called `fastest`"):
        run(ex, ns(), calls)


@pytest.mark.parametrize(
    ("name", "answer"),
    [
        (  # section 2's `slowest` on the reciprocal speed-ups: the same rule, so the same specs
            "slowest",
            "def fastest_specs(speedups, rel_tol):\n    from types import SimpleNamespace as S\n"
            "    return [x.spec for x in slowest([S(spec=k, speedup=1 / v) for k, v in speedups.items()], rel_tol)]",
        ),
        (  # section 1's `compare_sentence` (course.compare) deciding "within" for each spec
            "compare_sentence",
            "def fastest_specs(speedups, rel_tol):\n    top = max(speedups.values(), default=0)\n"
            "    near = [s for s in speedups if compare_sentence(speedups[s], top, 'a', 'b', within='w', "
            "rel_tol=rel_tol) == 'w']\n"
            "    return sorted(near, key=lambda s: -speedups[s])",
        ),
    ],
    ids=["slowest", "compare_sentence"],
)
def test_08_exercise_3_an_answer_that_hands_the_rule_to_another_function_in_scope_is_refused(name, answer):
    from specdec_lab.lab.course import check

    ex = cells("08_speedup_lab", 3)
    runs = [SimpleNamespace(spec="prompt_lookup", speedup=1.21), SimpleNamespace(spec="draft", speedup=1.19)]
    ns = lambda: {"comparison": runs, "tie_tol": 0.05, "tol": 0.05, "check": check}  # noqa: E731
    with pytest.raises(ExerciseError, match=f"called `{name}`"):
        run(ex, ns(), answer)
    # what stops it is the watch: with only `fastest` watched, as before, the call's answer passes
    unwatched = {**ex, "exercise": ex["exercise"].replace(', "slowest", "compare_sentence")', ")")}
    assert unwatched["exercise"] != ex["exercise"]
    run(unwatched, ns(), answer)


# ---- the library behind 08's sentences and tree figure ----------------------------------------------------------
def test_slowest_and_the_rounds_spread_say_when_the_timings_cannot_order():
    from specdec_lab.lab.experiment import fastest, round_spread, slowest

    def r(spec, speedup, rounds=(), base=()):
        return SimpleNamespace(spec=spec, speedup=speedup,
                               extra={"round_seconds": list(rounds), "baseline_round_seconds": list(base)})  # fmt: skip

    runs = [r("a", 2.62, (1.0, 1.02), (2.0, 2.1)), r("b", 1.04, (3.0, 3.3)), r("c", 1.09), r("d", 1.56)]
    assert [x.spec for x in slowest(runs, 0.05)] == ["b", "c"]  # 1.04 and 1.09: within 5%, no single slowest
    assert [x.spec for x in slowest(runs)] == ["b"] and [x.spec for x in fastest(runs, 0.05)] == ["a"]
    reversed_runs = [r("b", 1.09), r("c", 1.04)]  # the numbers the other way round: the same tie
    assert {x.spec for x in slowest(reversed_runs, 0.05)} == {"b", "c"}
    assert round_spread(runs) == pytest.approx(0.1)  # b's rounds lay 10% apart, the baseline's 5%
    assert math.isnan(round_spread([r("a", 1.0, (1.0,))]))  # one round: no spread of its own
    assert slowest([]) == []


def test_the_lab_tree_draws_rejected_drafts_apart_from_the_bonus_node():
    from specdec_lab.viz.lab_figures import TREE_COLORS, lab_step_tree_figure, steps_slider_figure

    lab = _lab_08()
    fig = lab_step_tree_figure(lab.result, 3)  # 4 drafts proposed, 2 accepted, then the bonus 9
    nodes = next(t for t in fig.data if t.name == "nodes")
    assert list(nodes.marker.color) == [TREE_COLORS["root"], *[TREE_COLORS["accepted draft"]] * 2,
                                        *[TREE_COLORS["rejected draft"]] * 2]  # fmt: skip
    bonus = next(t for t in fig.data if t.name == "bonus")
    assert bonus.marker.color == TREE_COLORS["bonus"] != TREE_COLORS["rejected draft"]
    assert bonus.y[0] == nodes.y[2] - 1  # one level under the last accepted node
    assert "bonus" in bonus.hovertemplate and "id 9" in bonus.hovertemplate
    assert next(t for t in lab_step_tree_figure(lab.result, 0).data if t.name == "plain step")  # no draft: plain
    cut = lab_step_tree_figure(lab.result, 4)  # end-of-text inside the accepted path: no bonus to draw
    assert not [t for t in cut.data if t.name in ("bonus", "plain step")]
    slider = steps_slider_figure(lab, step=3)
    assert {t.name for t in slider.data if t.visible and t.showlegend} == {"accepted path", "rejected draft", "bonus"}
