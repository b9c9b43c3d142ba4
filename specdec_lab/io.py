"""Files in and out, each done one way: atomic writes, prompt files, the model a manifest names, EOS ids.

Atomic writes (`atomic_path`, and `write_json` / `write_jsonl` on top of it). Every results file, shard,
manifest, prompt set and safetensors file this project writes goes the same way:

    temp file in the destination's folder  ->  written, flushed, fsync'ed  ->  os.replace(temp, destination)

os.replace within one folder is atomic on POSIX, so a reader (or a resumed run after a crash or Ctrl-C) sees
the old file or the whole new one, never half of one. If anything fails before the rename, the temp file is
deleted and the exception propagates; the old file is untouched. The new file gets mode FILE_MODE (0o644,
whatever the umask): mkstemp creates owner-only 0o600 files, and these are data meant to be read by others.

Prompt files (`load_prompts`) are Spec-Bench / MT-Bench `question.jsonl`: one JSON object per line with
question_id, category and turns (user messages; the first one is the prompt). Every reader here — the
benchmark, self-distillation, the dashboards — gets the same `Prompt` records, and a bad line is an error
naming the file and line.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FILE_MODE",
    "atomic_path",
    "atomic_dir",
    "write_json",
    "write_jsonl",
    "Prompt",
    "PromptError",
    "PROMPTS_FILE",
    "load_prompts",
    "as_prompts",
    "cache_dir",
    "eos_ids",
    "positive_int",
    "first_per_category",
]

FILE_MODE = 0o644  # rw-r--r--: every file written here, regardless of umask (see the module doc)
DIR_MODE = 0o755  # rwxr-xr-x: every folder written whole (`atomic_dir`)


# ---- atomic writes ----------------------------------------------------------------------------------
@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path next to `path`; write it inside the block; on success it replaces `path` atomically.

        with atomic_path("heads.safetensors") as tmp:
            save_file(tensors, tmp)

    The parent folder is created if missing. On any exception the temp file is removed and the exception
    re-raised: `path` keeps its old content (or stays absent).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDWR)
        try:
            os.fsync(fd)  # data on disk before the name points at it: a crash leaves the old file or the new one
        finally:
            os.close(fd)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_dir(path: str | os.PathLike, marker: str = "config.json") -> Iterator[Path]:
    """Yield a temp folder next to `path`; fill it inside the block; on success the temp folder becomes `path`
    atomically (os.replace of a folder), so a folder at `path` is always complete.

        with atomic_dir(cache_dir() / "draft-x") as tmp:
            model.save_pretrained(tmp)

    A concurrent writer that finished first wins: when `path` already holds a folder with `marker` in it the
    rename fails, ours is dropped, and theirs is kept. Any other failure, or an exception in the
    block, removes the temp folder and propagates; `path` is never left half-written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"))
    try:
        yield tmp
        os.chmod(tmp, DIR_MODE)
        try:
            os.replace(tmp, path)
        except OSError:
            if not (path / marker).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_json(path: str | os.PathLike, obj, *, indent: int | None = 1) -> Path:
    """Write `obj` as JSON (+ newline) atomically. indent=None writes one compact line (data shards)."""
    separators = None if indent is not None else (",", ":")
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=indent, separators=separators)  # streams: may fail half-way (then cleaned up)
        f.write("\n")
    return Path(path)


def write_jsonl(path: str | os.PathLike, rows: Iterable) -> Path:
    """Write one JSON object per line atomically; non-ASCII text stays readable (prompt files are prose)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return Path(path)


# ---- prompts ----------------------------------------------------------------------------------------
REPO_DIR = Path(__file__).resolve().parents[1]  # the checkout: data/ and notebooks/ sit beside the package
DATA_DIR = REPO_DIR / "data"  # shipped weights, prompts, results: data, not package files
PROMPTS_FILE = DATA_DIR / "prompts.jsonl"  # the benchmark set


class PromptError(ValueError):
    """A prompt file or prompt list that cannot be used as it is (the message says where and why)."""


@dataclass
class Prompt:
    """One prompt: text (the first user turn, chat-templated by whoever runs it) or token ids."""

    question_id: int | str
    category: str
    text: str | None = None
    ids: list[int] | None = None


def load_prompts(path: str | os.PathLike | None = None) -> list[Prompt]:
    """Read a Spec-Bench / MT-Bench `question.jsonl` (default: the benchmark's data/prompts.jsonl).

    Needs question_id (unique: results and held-out splits are keyed by it), category, and a non-empty
    turns list whose first item is text. Blank lines are skipped; any other bad line raises PromptError
    naming the file and line number.
    """
    path = Path(path) if path is not None else PROMPTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"prompts file not found: {path} (expected a question.jsonl-style file)")
    prompts: list[Prompt] = []
    seen: set = set()
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise PromptError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(obj, dict):
                raise PromptError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            missing = [k for k in ("question_id", "category", "turns") if k not in obj]
            if missing:
                raise PromptError(f"{where}: missing key(s) {', '.join(missing)}")
            turns = obj["turns"]
            if not (isinstance(turns, list) and turns and isinstance(turns[0], str) and turns[0].strip()):
                raise PromptError(f"{where}: 'turns' must be a non-empty list whose first item is text")
            qid = obj["question_id"]
            if qid in seen:
                raise PromptError(f"{where}: duplicate question_id {qid!r} (results are keyed by it)")
            seen.add(qid)
            prompts.append(Prompt(question_id=qid, category=str(obj["category"]), text=turns[0]))
    if not prompts:
        raise PromptError(f"{path}: no prompts in file")
    return prompts


def first_per_category(prompts: list[Prompt], n: int) -> list[Prompt]:
    """The first n prompts of every category, in file order."""
    counts: dict[str, int] = {}
    out = []
    for p in prompts:
        if counts.get(p.category, 0) < n:
            counts[p.category] = counts.get(p.category, 0) + 1
            out.append(p)
    return out


def as_prompts(prompts: Sequence) -> list[Prompt]:
    """Accept Prompt records, texts or token-id lists (the latter two numbered 1.. in category "all")."""
    out = []
    for i, p in enumerate(prompts, 1):
        if isinstance(p, Prompt):
            out.append(p)
        elif isinstance(p, str):
            out.append(Prompt(question_id=i, category="all", text=p))
        else:
            out.append(Prompt(question_id=i, category="all", ids=[int(t) for t in p]))
    ids = [p.question_id for p in out]
    if len(set(ids)) != len(ids):
        raise PromptError("prompts have duplicate question_id values (results are keyed by them)")
    return out


# ---- the cache folder ------------------------------------------------------------------------------
def cache_dir() -> Path:
    """Where per-machine caches live: de-quantized copies of GGUF models, measured kernel plans, exported
    drafts (`$SPECDEC_LAB_CACHE`, default ~/.cache/specdec_lab). Never committed, safe to delete."""
    return Path(os.environ.get("SPECDEC_LAB_CACHE", Path.home() / ".cache" / "specdec_lab"))


# ---- end of sequence --------------------------------------------------------------------------------
def eos_ids(model, tokenizer=None, eos_token_id: int | Sequence[int] | None = None) -> list[int]:
    """The sorted token ids decoding stops at; every method, ours and transformers', uses this one set.

    Precedence: `eos_token_id` when given (an int or a list; [] means "never stop at EOS"), else the model's
    `generation_config.eos_token_id` (chat models often list several there: end of turn and end of text),
    else the tokenizer's `eos_token_id`, else none ([]).
    """
    if eos_token_id is None:
        eos_token_id = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if eos_token_id is None and tokenizer is not None:
        eos_token_id = tokenizer.eos_token_id
    if eos_token_id is None:
        return []
    many = isinstance(eos_token_id, (list, tuple, set))
    return sorted({int(e) for e in (eos_token_id if many else [eos_token_id])})


def positive_int(text: str) -> int:
    """argparse `type=` for counts (tokens, prompts, workers): a whole number >= 1, else a clear usage error."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value
