"""Step variants as cost curves (`specdec_lab.bench.step_variants`): parsing, the interleaved measurement, the file,
and the replay of a recorded run under a cheaper step (synthetic runs, exact arithmetic)."""

import json

import pytest

from specdec_lab.bench.step_variants import (
    FORMAT,
    StepVariant,
    measure_variants,
    parse_variants,
    replay_variants,
    variant_curves,
)
from specdec_lab.cost import CostCurve
from tests.test_replay import REPO, T1, T4, synthetic


def test_variants_parse_and_bad_ones_are_named():
    assert parse_variants("fp32, int8+compile") == [StepVariant("fp32"), StepVariant("int8", True)]
    assert StepVariant("int4", True).name == "int4+compile"
    for bad, word in [("int3", "int3"), ("fp32+fast", "fp32.fast"), ("", "no step variant"), ("int8,int8", "twice")]:
        with pytest.raises(ValueError, match=word):
            parse_variants(bad)


def test_variants_are_measured_together_and_the_file_reads_back(model):
    curves = measure_variants({"a": model, "b": model}, sizes=(1, 2, 4), context=8, repeats=2, warmup=0)
    assert list(curves) == ["a", "b"] and all(c.sizes == [1, 2, 4] and min(c.seconds) > 0 for c in curves.values())
    record = {
        "format": FORMAT,
        "context": 8,
        "variants": {m: {"weights": "fp32", **c.to_dict()} for m, c in curves.items()},
    }
    assert variant_curves(json.loads(json.dumps(record))) == curves  # what `main` writes
    points = {m: dict(zip(map(str, c.sizes), c.seconds, strict=True)) for m, c in curves.items()}
    older = {"format": FORMAT, "context": 8, "variants": {m: {"points": p} for m, p in points.items()}}
    assert variant_curves(older) == curves  # what it wrote before the curve had one JSON shape
    with pytest.raises(ValueError, match="not a step-variants file"):
        variant_curves({"format": "x"})


def test_the_committed_step_variants_file_loads():
    record = json.loads((REPO / "data" / "curves" / "step_variants.json").read_text())
    curves = variant_curves(record)
    assert list(curves) == list(record["variants"]) and all(c.context == record["context"] for c in curves.values())
    assert all(c.sizes[0] == 1 and c(1) > 0 for c in curves.values())


def curve(scale):  # this run's made-up curve (T1, T4 from the replay tests), `scale` times cheaper
    return CostCurve([1, 4], [T1 / scale, T4 / scale])


def test_replaying_the_run_on_its_own_step_reproduces_it_and_a_cheaper_step_with_fixed_overhead_gains_less():
    results = synthetic(tokens=12, draft=0.004)
    base = replay_variants(results, {"fp32": curve(1.0)})["fp32"]
    assert base["autoregressive"] == pytest.approx(1.0)
    # measured: AR 12 steps of T1; tree 4 steps of T4 + drafting -> the replay on the run's own curve says the same
    assert base["tree"] == pytest.approx((12 * T1) / (4 * (T4 + 0.004)))
    # only the ratio of a variant to the base matters (the file's curves are on another moment's scale)
    twice = replay_variants(results, {"fp32": curve(0.5), "fast": curve(1.0)})
    assert twice["fp32"]["tree"] == pytest.approx(base["tree"])
    fixed = replay_variants(results, {"fp32": curve(1.0), "fast": curve(2.0)}, scale_overhead=False)
    scaled = replay_variants(results, {"fp32": curve(1.0), "fast": curve(2.0)}, scale_overhead=True)
    assert scaled["fast"]["tree"] == pytest.approx(base["tree"])  # everything twice as fast: same ratio
    assert fixed["fast"]["tree"] == pytest.approx((12 * T1 / 2) / (4 * (T4 / 2 + 0.004)))  # drafting not halved
    assert fixed["fast"]["tree"] < base["tree"]
    with pytest.raises(ValueError, match="base variant"):
        replay_variants(results, {"int8": curve(1.0)})
