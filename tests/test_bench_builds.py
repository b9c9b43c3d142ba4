"""Builds in one bench run (`specdec_lab.bench.builds`): our methods on other weights and steps beside the
base model's, each compared with its own build's autoregressive output."""

import copy

import pytest

import specdec_lab as S
from specdec_lab.bench import BenchInputError, parse_methods, run_benchmark
from specdec_lab.bench.builds import Build, BuildSet, parse_build, split_label
from specdec_lab.bench.report import by_build
from specdec_lab.io import Prompt
from specdec_lab.models.quant import quantize_model, weights_kind

pytestmark = pytest.mark.usefixtures("one_thread")


def test_parse_build_and_label():
    assert parse_build("int4+compile") == Build("int4", True)
    assert parse_build("fp32") == Build("fp32", False)
    assert split_label("hybrid:max_nodes=8@int8") == ("hybrid:max_nodes=8", Build("int8", False))
    assert split_label("prompt_lookup") == ("prompt_lookup", None)
    assert parse_build("int4+head=fp32+compile") == Build("int4", True, "fp32")
    assert parse_build("int4+head=fp32+compile").name == "int4+head=fp32+compile"
    assert parse_build("int4+head=fp32").model_key == "int4+head=fp32" and Build("int4", True).model_key == "int4"
    assert parse_build("int4+compile+unfused") == Build("int4", True, None, False)
    for bad in (
        "int3",
        "int4+fast",
        "int4+compile+compile",
        "",
        "int4+head=int4",
        "fp32+head=q8_0",
        "int4+head=fp32+head=int8",
        "int4+unfused",
    ):
        with pytest.raises(BenchInputError, match="weights\\[\\+head=H\\]\\[\\+compile\\[\\+unfused\\]\\]"):
            parse_build(bad)


def test_parse_methods_keeps_the_build_in_the_label_only():
    spec = parse_methods("prompt_lookup:max_draft=3@int8+compile")[0]
    assert (spec.label, spec.name, spec.params) == ("prompt_lookup:max_draft=3@int8+compile", "prompt_lookup",
                                                    {"max_draft": 3})  # fmt: skip
    with pytest.raises(BenchInputError, match="loads its own model"):
        parse_methods("hf_generate@int8")
    with pytest.raises(BenchInputError, match="build 'int2'"):
        parse_methods("autoregressive@int2")


@pytest.fixture(scope="module")
def models():
    fp32 = S.tiny_model(num_layers=2, eos_token_id=None)
    return fp32, quantize_model(copy.deepcopy(fp32), "int8", compute="float32")


def test_builds_run_in_one_run_and_compare_with_their_own_autoregressive(models):
    fp32, int8 = models
    assert weights_kind(int8) == "int8"
    ps = [Prompt(question_id=i, category="ab"[i % 2], ids=[5, 6, 7, 8, 5, 6, 7, 8, 5, 6][i:]) for i in range(3)]
    labels = "autoregressive,prompt_lookup,autoregressive@int8,prompt_lookup@int8"
    res = run_benchmark(fp32, ps, labels, max_new_tokens=12, models={"int8": int8}, progress=False)
    rows = res["rows"]
    assert {r["method"] for r in rows} == set(labels.split(","))
    assert all(r["identical"] for r in rows)  # each exact method equals its own build's autoregressive
    assert {r.get("reference") for r in rows if r["method"].endswith("@int8")} == {"autoregressive@int8"}
    assert all("reference" not in r for r in rows if "@" not in r["method"])
    assert res["config"]["builds"]["int8"]["weights"] == "int8"
    table = {(r["method"], r["build"]): r for r in by_build(res)}  # the notebook's table of a run with builds
    q = "int8+head=fp32"  # named by what it held: the fixture's int8 model keeps the fp32 head
    assert set(table) == {(m, b) for m in ("autoregressive", "prompt_lookup") for b in ("fp32", q)}
    assert table[("autoregressive", q)]["speedup_own"] == 1.0
    own = table[("prompt_lookup", q)]
    assert own["speedup_own"] == pytest.approx(own["tokens_per_s"] / table[("autoregressive", q)]["tokens_per_s"])
    # the int8 build's own greedy output: what generate gives on the int8 model
    for r in rows:
        if r["method"] == "autoregressive@int8":
            ids = next(p.ids for p in ps if p.question_id == r["question_id"])
            assert r["tokens"] == S.generate(int8, ids, method="autoregressive", max_new_tokens=12).tokens


def test_a_named_head_is_its_own_model_and_reference(models):
    """`@int8+head=q8_0` runs on the model given under that key and is compared with its own autoregressive."""
    fp32, int8 = models
    q8 = quantize_model(copy.deepcopy(fp32), "int8", head="q8_0", compute="float32")
    labels = "autoregressive,autoregressive@int8,autoregressive@int8+head=q8_0,prompt_lookup@int8+head=q8_0"
    res = run_benchmark(fp32, [[5, 6, 7, 8, 5, 6, 7, 8]], labels, max_new_tokens=10,
                        models={"int8": int8, "int8+head=q8_0": q8}, progress=False)  # fmt: skip
    rows = {r["method"]: r for r in res["rows"]}
    assert rows["prompt_lookup@int8+head=q8_0"]["reference"] == "autoregressive@int8+head=q8_0"
    assert rows["prompt_lookup@int8+head=q8_0"]["identical"]
    assert res["config"]["builds"]["int8+head=q8_0"]["head"] == "q8_0"


def test_a_build_without_its_model_or_autoregressive(models):
    fp32, int8 = models
    with pytest.raises(BenchInputError, match="needs a model with int8 weights"):
        run_benchmark(fp32, [[1, 2, 3]], "autoregressive,prompt_lookup@int8", max_new_tokens=2, progress=False)
    with pytest.raises(BenchInputError, match="holds fp32 weights with a fp32 head"):
        run_benchmark(fp32, [[1, 2, 3]], "prompt_lookup@int8", max_new_tokens=2, models={"int8": fp32},
                      progress=False)  # fmt: skip
    with pytest.raises(BenchInputError, match="holds int8 weights with a fp32 head"):
        run_benchmark(fp32, [[1, 2, 3]], "prompt_lookup@int8+head=q8_0", max_new_tokens=2,
                      models={"int8+head=q8_0": int8}, progress=False)  # fmt: skip
    # no autoregressive@int8: the int8 rows are compared with the base autoregressive (the build's drift)
    b = BuildSet(["autoregressive", "prompt_lookup@int8"], fp32, False, {"int8": int8})
    assert b.reference("prompt_lookup@int8") == "autoregressive"
    assert b.record() == {"int8": b.record()["int8"]} and b.base == Build("fp32", False)
