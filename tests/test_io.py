"""specdec_lab.io: atomic writes (old file intact on failure, no temp file, one mode), prompt files, EOS, manifests."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from specdec_lab import io
from specdec_lab.io import (
    FILE_MODE,
    Prompt,
    PromptError,
    as_prompts,
    atomic_path,
    eos_ids,
    load_prompts,
    write_json,
    write_jsonl,
)
from specdec_lab.models import LoadedModel, model_record
from specdec_lab.models.load import SHIPPED


# ---- atomic writes ----------------------------------------------------------------------------------
@pytest.fixture
def strict_umask():
    """umask 077: a writer that relied on the umask (or kept mkstemp's 0600) would make owner-only files."""
    old = os.umask(0o077)
    yield
    os.umask(old)


def test_write_json_round_trip_and_mode(tmp_path, strict_umask):
    path = tmp_path / "sub" / "r.json"  # the folder is created
    write_json(path, {"a": [1, 2], "é": "ü"})
    assert json.loads(path.read_text()) == {"a": [1, 2], "é": "ü"}
    assert path.read_text().endswith("\n")
    assert path.stat().st_mode & 0o777 == FILE_MODE == 0o644
    write_json(path, {"b": 1}, indent=None)
    assert path.read_text() == '{"b":1}\n'  # compact: data shards
    assert path.stat().st_mode & 0o777 == FILE_MODE
    assert os.listdir(path.parent) == ["r.json"]


def test_write_jsonl_keeps_text_readable(tmp_path):
    path = write_jsonl(tmp_path / "p.jsonl", [{"t": "Mañana"}, {"t": "x"}])
    assert path.read_text(encoding="utf-8") == '{"t": "Mañana"}\n{"t": "x"}\n'
    assert path.stat().st_mode & 0o777 == FILE_MODE


def test_unserializable_object_midway_leaves_the_old_file(tmp_path):
    path = tmp_path / "r.json"
    write_json(path, {"rows": [1, 2, 3]})
    before = path.read_bytes()
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_json(path, {"rows": [1, 2], "bad": object()})  # json.dump has streamed the rows by then
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["r.json"]  # the half-written temp file is gone


def test_failing_replace_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    write_jsonl(path, [{"old": True}])
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(io.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_jsonl(path, [{"new": True}])
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["r.jsonl"]


def test_atomic_path_for_other_writers(tmp_path, strict_umask):
    path = tmp_path / "w.bin"
    with pytest.raises(KeyboardInterrupt):  # an interruption, too, leaves nothing behind
        with atomic_path(path) as tmp:
            tmp.write_bytes(b"half")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []
    with atomic_path(path) as tmp:
        assert tmp.parent == path.parent and tmp.name.startswith(".w.bin.")  # same folder: os.replace is atomic
        tmp.write_bytes(b"whole")
    assert path.read_bytes() == b"whole" and path.stat().st_mode & 0o777 == FILE_MODE
    assert os.listdir(tmp_path) == ["w.bin"]


# ---- prompt files -----------------------------------------------------------------------------------
def test_benchmark_prompts_load_by_default():
    prompts = load_prompts()
    assert len(prompts) == 56 and all(isinstance(p, Prompt) and p.text and p.ids is None for p in prompts)
    assert [p.question_id for p in prompts] == list(range(1, 57))


@pytest.mark.parametrize(
    "lines, message",
    [
        (['{"question_id": 1, "category": "a", "turns": ["hi"]}', '{"question_id": 2,'], r":2: not valid JSON"),
        (['{"question_id": 1, "turns": ["hi"]}'], r":1: missing key\(s\) category"),
        (['[1, 2]'], r":1: expected a JSON object, got list"),
        (['{"question_id": 1, "category": "a", "turns": []}'], r":1: 'turns' must be a non-empty list"),
        (['{"question_id": 1, "category": "a", "turns": ["a"]}', "", '{"question_id": 1, "category": "b",'
          ' "turns": ["b"]}'], r":3: duplicate question_id 1"),
        (["", "  "], r"no prompts in file"),
    ],
)  # fmt: skip
def test_bad_prompt_file_names_file_and_line(tmp_path, lines, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(PromptError, match=f"bad.jsonl{message}" if message.startswith(":") else message):
        load_prompts(bad)


def test_prompt_file_first_turn_and_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_prompts(tmp_path / "missing.jsonl")
    good = tmp_path / "good.jsonl"
    good.write_text('{"question_id": 7, "category": "qa", "turns": ["Why?", "And?"]}\n\n')
    assert load_prompts(good) == [Prompt(question_id=7, category="qa", text="Why?")]


def test_as_prompts_numbers_texts_and_ids():
    assert as_prompts(["a", [1, 2]]) == [Prompt(1, "all", text="a"), Prompt(2, "all", ids=[1, 2])]
    with pytest.raises(PromptError, match="duplicate question_id"):
        as_prompts([Prompt(1, "x", text="a"), Prompt(1, "y", text="b")])


# ---- EOS --------------------------------------------------------------------------------------------
def _model(eos):
    return SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=eos))


def test_eos_resolution_order():
    tok = SimpleNamespace(eos_token_id=2)
    assert eos_ids(_model([9, 5, 9]), tok, eos_token_id=7) == [7]  # explicit first
    assert eos_ids(_model([9, 5, 9]), tok, eos_token_id=[8, 3]) == [3, 8]
    assert eos_ids(_model([9, 5, 9]), tok, eos_token_id=[]) == []  # explicitly none
    assert eos_ids(_model([9, 5, 9]), tok) == [5, 9]  # then the generation config (a list, deduplicated)
    assert eos_ids(_model(4), tok) == [4]  # ... or one id
    assert eos_ids(_model(None), tok) == [2]  # then the tokenizer
    assert eos_ids(SimpleNamespace(generation_config=None), tok) == [2]
    assert eos_ids(_model(None)) == []  # nothing to stop at


# ---- what manifests record --------------------------------------------------------------------------
def test_model_record_never_holds_a_machine_path():
    name, shipped = next(iter(SHIPPED.items()))
    lm = LoadedModel(None, None, name, f"/home/someone/.venv/site-packages/x/{shipped.filename}")
    record = model_record(lm)
    assert record["name"] == name and record["package"] == shipped.distribution
    assert record["file"] == shipped.filename and "version" in record
    local = model_record(LoadedModel(None, None, "/data/models/my-llama", "/data/models/my-llama"))
    assert local == {"name": "my-llama", "file": "my-llama"}
    assert not any(str(v).startswith("/") for r in (record, local) for v in r.values())


def test_atomic_dir_is_all_or_nothing(tmp_path):
    from specdec_lab.io import atomic_dir

    target = tmp_path / "cache" / "model"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "weights.bin").write_bytes(b"half")
        raise RuntimeError("interrupted")
    assert not target.exists() and list((tmp_path / "cache").iterdir()) == []  # no half folder, no temp left
    with atomic_dir(target) as tmp:
        (tmp / "config.json").write_text("{}")
        (tmp / "weights.bin").write_bytes(b"whole")
    assert sorted(p.name for p in target.iterdir()) == ["config.json", "weights.bin"]
    assert (target.stat().st_mode & 0o777) == 0o755
    with atomic_dir(target) as tmp:  # a second writer: the complete folder already there is kept
        (tmp / "config.json").write_text('{"second": true}')
    assert (target / "config.json").read_text() == "{}" and len(list((tmp_path / "cache").iterdir())) == 1
