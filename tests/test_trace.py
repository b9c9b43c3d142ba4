"""The per-step trace record (`specdec_lab.bench.trace`): what a results file stores per loop step, and the one
reader that replay, redecide and decompose go through."""

import json

import pytest

from specdec_lab.bench import runner
from specdec_lab.bench.decompose import decompose_bench
from specdec_lab.bench.redecide import redecide_bench
from specdec_lab.bench.replay import curve_from_traces, replay_bench, shaped_curve_from_traces, theory_prediction
from specdec_lab.bench.trace import TRACE_FIELDS, TraceStep, compact_steps, steps_of
from specdec_lab.cost import flat_curve
from specdec_lab.generate import StepTrace
from tests.test_replay import T1, results_of, traced


def step_trace(parents, emitted, candidate=None):
    """A `generate` step: a tree of len(parents) nodes, `emitted` tokens, unrounded phase seconds."""
    return StepTrace(tree_tokens=list(range(len(parents))), tree_parents=parents, path=[0],
                     emitted=list(range(emitted)), t_propose=0.0012344, t_verify=0.0345678, t_accept=0.0004561,
                     tree_candidate=candidate)  # fmt: skip


def test_steps_compact_to_short_lists_and_read_back_by_name():
    steps = [
        step_trace([-1], 1),  # a plain step
        step_trace([-1, 0, 1, 2], 3),  # a chain of 3 drafts
        step_trace([-1, 0, 0, 1], 2),  # a tree
        step_trace([-1, 0, 1, 0, 0], 1, [True, True, True, False, False]),  # Lookahead: 2 window nodes, not candidates
    ]
    stored = json.loads(json.dumps(compact_steps(steps)))  # as a results file holds them
    assert stored[1] == [4, 3, 3, 0.001234, 0.034568, 0.000456, 1]
    assert json.dumps(stored[2]) == "[4, 3, 2, 0.001234, 0.034568, 0.000456, 0]"  # chain as 0 / 1, not a boolean
    read = steps_of({"trace": {"prefill_seconds": 0.0, "steps": stored}})
    assert [(s.nodes, s.candidates, s.emitted, s.chain) for s in read] == [
        (1, 0, 1, True),
        (4, 3, 3, True),
        (4, 3, 2, False),
        (5, 2, 1, False),
    ]
    assert (read[0].t_propose, read[0].t_verify, read[0].t_accept) == (0.001234, 0.034568, 0.000456)
    assert [s.stored() for s in read] == stored
    assert TRACE_FIELDS == ("nodes", "candidates", "emitted", "t_propose", "t_verify", "t_accept", "chain")
    assert runner.TRACE_FIELDS is TRACE_FIELDS and runner.compact_steps is compact_steps  # the harness's import


def test_a_six_column_step_reads_with_chain_none():
    old = [4, 3, 3, 0.001, 0.02, 0.0005]  # written before `chain` existed
    s = TraceStep.of(old)
    assert s.chain is None and list(s[:6]) == old
    assert TraceStep.of([*old, 0]).chain is False and TraceStep.of([*old, 1]).chain is True
    with pytest.raises(TypeError):
        TraceStep.of([*old, 1, 7])  # a column this code does not know
    # such steps count for both shapes of the run's own curve
    rows = [{"question_id": 1, "prompt_tokens": 10, "new_tokens": 4, "trace": {"steps": [[1, 0, 1, 0, T1, 0], old]}}]
    shaped = shaped_curve_from_traces({"rows": rows})
    assert shaped.chain(4) == shaped.tree(4) == 0.02


def bench_rows(layout):
    """AR, a draft chain, a Medusa tree and a fixed tree on one prompt, every step stored as `layout(TraceStep)`."""
    ar = [TraceStep(1, 0, 1, 0.0001, T1, 0.0004, True)] * 24
    draft = [TraceStep(4, 3, a + 1, 0.0006, 1.3 * T1, 0.0003, True) for a in (3, 0, 0) * 4]
    medusa = [TraceStep(5, 4, e, 0.0005, 1.4 * T1, 0.0003, False) for e in (2, 1, 2, 1) * 3]
    tree = [TraceStep(5, 4, 3, 0.0002, 1.6 * T1, 0.0003, False)] * 8
    runs = {"autoregressive": ar, "draft": draft, "medusa": medusa, "tree": tree}
    rows = [traced(m, 1, [layout(s) for s in steps], prefill=0.02, other=0.003) for m, steps in runs.items()]
    rows[2]["proposer"] = {"depth": 1, "correction": [1.0]}
    return results_of(rows, list(runs))


def analyses(results):
    own = curve_from_traces(results)
    shaped = shaped_curve_from_traces(results)
    return (
        own.to_dict(),
        replay_bench(results, shaped),
        redecide_bench(results, flat_curve(T1), reference=own),
        [w.as_dict() for w in decompose_bench(results)],
        [theory_prediction([r], shaped) for r in results["rows"]],
    )


def test_every_analysis_reads_the_columns_through_the_one_record(monkeypatch):
    """Store every step with its columns reversed and teach only `TraceStep.of` that layout: replay, redecide
    and decompose give the same numbers, so none of them reads a column by its index."""
    expected = analyses(bench_rows(TraceStep.stored))
    read = TraceStep.of
    monkeypatch.setattr(TraceStep, "of", classmethod(lambda cls, stored: read(stored[::-1])))
    assert analyses(bench_rows(lambda s: s.stored()[::-1])) == expected
