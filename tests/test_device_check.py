"""The device check (`specdec_lab.bench.device_check`): the model's parts round-trip with their checksums, a
damaged part is named, and the CPU dry run of the whole check writes one results file with the curve and the
bench."""

from __future__ import annotations

import json

import pytest

from specdec_lab.bench.device_check import PartsError, join_parts, main, sha256, split_file


def test_split_and_join_round_trip(tmp_path):
    src = tmp_path / "model.gguf"
    src.write_bytes(bytes(range(256)) * 41 + b"tail")  # 10500 bytes: 3 parts of 4096 at most
    m = split_file(src, tmp_path / "parts", part_bytes=4096)
    assert [p["bytes"] for p in m["parts"]] == [4096, 4096, 10500 - 8192]
    joined = join_parts(tmp_path / "parts", tmp_path / "there")
    assert joined.read_bytes() == src.read_bytes() and sha256(joined) == m["sha256"]
    assert join_parts(tmp_path / "parts", tmp_path / "there") == joined  # already there: kept


def test_a_damaged_or_missing_part_is_named(tmp_path):
    src = tmp_path / "model.gguf"
    src.write_bytes(b"x" * 9000)
    split_file(src, tmp_path / "parts", part_bytes=4096)
    (tmp_path / "parts" / "part-001").write_bytes(b"x" * 4095)
    with pytest.raises(PartsError, match="part-001 of model.gguf is corrupted or truncated"):
        join_parts(tmp_path / "parts", tmp_path / "there")
    (tmp_path / "parts" / "part-002").unlink()
    (tmp_path / "parts" / "part-001").write_bytes(b"x" * 4096)
    with pytest.raises(PartsError, match="part-002 of model.gguf is missing"):
        join_parts(tmp_path / "parts", tmp_path / "there")
    assert main(["run", "--parts", str(tmp_path / "nowhere")]) == 2
    assert not (tmp_path / "there" / "model.gguf").exists()  # nothing half-written


@pytest.mark.real
def test_dry_run_writes_curve_and_bench(tmp_path, real_model):
    out = tmp_path / "check.json"
    assert main(["run", "--dry-run", "--out", str(out), "--methods", "autoregressive,prompt_lookup"]) == 0
    res = json.loads(out.read_text())
    assert res["config"]["device"] == "cpu" and set(res["stages"]) == {"curve", "bench_float32"}
    curve = json.loads((tmp_path / "check-curve.json").read_text())
    assert curve["format"] == "specdec_lab.curve/1" and "1" in curve["points"]
    methods = res["stages"]["bench_float32"]["methods"]
    assert methods["prompt_lookup"]["identical_to_autoregressive"] == 1.0
    assert main(["run", "--dry-run", "--out", str(out), "--methods", "autoregressive,prompt_lookup"]) == 0  # resumes
