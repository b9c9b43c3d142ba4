"""The speedup waterfall (`specdec_lab.bench.decompose`): its factors multiply back to the measured speedup."""

import json
import math
from pathlib import Path

import pytest

from specdec_lab.bench.decompose import decompose, decompose_bench
from specdec_lab.bench.trace import TraceStep
from specdec_lab.viz.results import measured_rows, waterfall_figure, waterfall_frame

REPO = Path(__file__).resolve().parents[1]
T1 = 0.010


def row(method, steps, prefill=0.02, other=0.003, q=1):
    read = [TraceStep.of(s) for s in steps]
    tokens = sum(s.emitted for s in read)
    seconds = prefill + sum(s.t_propose + s.t_verify + s.t_accept for s in read) + other
    return dict(question_id=q, category="a", method=method, new_tokens=tokens, seconds=seconds,
                forwards=len(steps), trace={"prefill_seconds": prefill, "steps": steps})  # fmt: skip


def test_the_factors_are_the_textbook_terms_and_multiply_to_the_measurement():
    ar = row("autoregressive", [[1, 0, 1, 0.0001, T1, 0.0004, 1]] * 30)
    spec = row("tree", [[4, 3, 3, 0.002, 1.5 * T1, 0.0008, 0]] * 10)
    w = decompose([spec], [ar])
    assert w.tau == pytest.approx(3.0) and w.r == pytest.approx(1.5) and w.c == pytest.approx(0.2)
    assert w.mean_nodes == 4
    assert w.o == pytest.approx((0.0008 + (0.02 + 0.003) / 10) / T1)
    assert w.o_baseline == pytest.approx((0.0001 + 0.0004 + (0.02 + 0.003) / 30) / T1)
    assert math.prod(w.factors.values()) == pytest.approx(w.measured)
    assert w.measured == pytest.approx((30 / spec["seconds"]) / (30 / ar["seconds"]))
    lv = w.levels
    assert lv["ideal"] == pytest.approx(3.0) and lv["verify"] == pytest.approx(2.0)
    assert lv["measured"] == pytest.approx(w.measured)
    # the textbook case: r = 1, no loop of its own on either side -> τ / (1 + c)
    free = decompose([row("t", [[4, 3, 3, 0.002, T1, 0.0, 0]] * 10, 0.0, 0.0)],
                     [row("autoregressive", [[1, 0, 1, 0.0, T1, 0.0, 1]] * 30, 0.0, 0.0)])  # fmt: skip
    assert free.measured == pytest.approx(3.0 / 1.2) and free.factors["loop"] == pytest.approx(1.0)


def test_decompose_bench_reproduces_the_benchs_own_speedups():
    results = json.loads((REPO / "data" / "bench" / "avx512-after.json").read_text())
    falls = decompose_bench(results)
    assert [w.method for w in falls] == [m for m in results["methods"] if m != "autoregressive"]
    for w in falls:
        assert w.prompts == results["summary"][w.method]["prompts"]
        assert math.prod(w.factors.values()) == pytest.approx(w.measured, rel=1e-9)
        assert w.measured == pytest.approx(results["summary"][w.method]["speedup"], rel=1e-6)
    frame = waterfall_frame(falls)
    assert list(frame.index) == [w.method for w in falls]
    fig = waterfall_figure(falls)
    assert fig.layout.width <= 950 and len(fig.data[0].x[0]) == 5 * len(falls)
    rows = measured_rows(falls, model="SmolLM2-135M", hardware="cpu", task="56 prompts", source="file")
    assert rows["α/τ"].str.startswith("τ ").all()


def test_decompose_needs_traces():
    with pytest.raises(ValueError, match="no traced"):
        decompose_bench({"rows": [], "methods": []})
    with pytest.raises(ValueError, match="trace"):
        decompose([{"method": "x", "new_tokens": 1, "seconds": 1.0}], [row("autoregressive", [[1, 0, 1, 0, T1, 0, 1]])])
