"""Tests for the prompt builders `data/prompt_bank.py` (template bank) and `data/doc_prompts.py` (real prose)."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
EXTRA = DATA / "train_prompts_extra.jsonl"


def _load_module(stem: str):
    # The builders are scripts next to the data they make (data/<stem>.py), not modules of a package.
    name = f"_{stem}_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DATA / f"{stem}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


pb = _load_module("prompt_bank")


def _texts(rows: list[dict]) -> list[str]:
    return [row["turns"][0] for row in rows]


def _read_rows(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_deterministic_for_a_seed():
    a = pb.build_prompts(400, seed=3)
    assert a == pb.build_prompts(400, seed=3)
    assert _texts(a) != _texts(pb.build_prompts(400, seed=4))


def test_rows_have_spec_bench_format():
    rows = pb.build_prompts(80, seed=0, start_id=500)
    assert [r["question_id"] for r in rows] == list(range(500, 580))
    for r in rows:
        assert set(r) == {"question_id", "category", "turns"}
        assert r["category"] in pb.CATEGORIES
        assert len(r["turns"]) == 1 and isinstance(r["turns"][0], str) and r["turns"][0].strip()


def test_bank_makes_at_least_4000_unique_prompts():
    n = pb.bank_size(seed=0)
    assert n >= 4000
    texts = _texts(pb.build_prompts(n, seed=0))
    assert len(set(texts)) == len(texts) == n


def test_categories_balanced_and_every_prefix_balanced():
    rows = pb.build_prompts(1000, seed=1)
    assert set(Counter(r["category"] for r in rows).values()) == {125}
    counts: Counter = Counter()
    for r in rows:
        counts[r["category"]] += 1
        present = [counts[c] for c in pb.CATEGORIES]
        assert max(present) - min(present) <= 1


def test_exclude_is_respected():
    first = _texts(pb.build_prompts(64, seed=0))
    again = _texts(pb.build_prompts(64, seed=0, exclude=first[:10]))
    assert not set(first[:10]) & set(again)


def test_too_many_raises_clear_error():
    n = pb.bank_size(seed=0)
    with pytest.raises(ValueError, match="more than the prompt bank can make"):
        pb.build_prompts(n + 1, seed=0)
    assert len(pb.build_prompts(n, seed=0)) == n


def test_bank_never_makes_a_benchmark_prompt():
    bench = set(pb.read_texts(DATA / "prompts.jsonl"))
    assert len(bench) == 56
    for pool in pb.category_pools(seed=0).values():
        assert not bench & set(pool)


def test_committed_file_disjoint_from_benchmark_and_train_prompts():
    texts = _texts(_read_rows(EXTRA))
    assert len(texts) == len(set(texts)) == 1600
    assert not set(texts) & set(pb.read_texts(DATA / "prompts.jsonl"))
    assert not set(texts) & set(pb.read_texts(DATA / "train_prompts.jsonl"))


def test_committed_file_equals_cli_output(tmp_path, capsys):
    out = tmp_path / "extra.jsonl"
    assert pb.main(["--n", "1600", "--seed", "0", "--start-id", "1001", "--out", str(out)]) == 0
    assert "writing" in capsys.readouterr().out
    assert out.read_bytes() == EXTRA.read_bytes()
    rows = _read_rows(out)
    assert [r["question_id"] for r in rows] == list(range(1001, 2601))
    assert list(tmp_path.iterdir()) == [out]  # the atomic write left no temp file behind


def test_second_draw_is_the_cli_output_and_disjoint_from_every_other_set(tmp_path):
    out = tmp_path / "extra2.jsonl"
    others = ["prompts.jsonl", "train_prompts.jsonl", "train_prompts_extra.jsonl", "train_prompts_docs.jsonl"]
    argv = ["--n", "2800", "--seed", "0", "--start-id", "5001", "--out", str(out), "--exclude"]
    assert pb.main(argv + [str(DATA / name) for name in others]) == 0
    assert out.read_bytes() == (DATA / "train_prompts_extra2.jsonl").read_bytes()
    texts = _texts(_read_rows(out))
    assert len(set(texts)) == 2800
    for name in others:
        assert not set(texts) & set(pb.read_texts(DATA / name)), name


# ---- doc_prompts: requests over real prose from the installed documentation -------------------------
def test_doc_prompts_are_prose_deterministic_and_exclude_benchmarks():
    dp = _load_module("doc_prompts")
    TEMPLATES, _benchmark_texts, _is_prose = dp.TEMPLATES, dp._benchmark_texts, dp._is_prose
    build_doc_prompts, passages = dp.build_doc_prompts, dp.passages
    excluded = _benchmark_texts()
    a = build_doc_prompts(60, seed=0, start_id=3001, exclude=excluded)
    assert a == build_doc_prompts(60, seed=0, start_id=3001, exclude=excluded)  # same environment -> same set
    assert [r["question_id"] for r in a] == list(range(3001, 3061))
    assert {r["category"] for r in a} == set(TEMPLATES)
    bench = {t for line in (DATA / "prompts.jsonl").read_text().splitlines() for t in json.loads(line)["turns"]}
    assert not any(r["turns"][0] in bench for r in a)
    texts = passages(excluded)
    assert len(texts) == len(set(texts)) and all(_is_prose(t) for t in texts)
    assert not _is_prose("def f(x):\n    return x == 1  " * 10)


def test_doc_prompts_refuse_more_than_installed():
    dp = _load_module("doc_prompts")
    with pytest.raises(ValueError, match="prose passages"):
        dp.build_doc_prompts(len(dp.passages()) + 1)
