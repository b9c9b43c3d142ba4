"""Self-distillation data: the target's own greedy responses to a prompt set, and a cache of its hidden states.

Heads and draft models are trained to predict what *the target* would say, not what a human wrote: the
speedup depends on agreeing with the target, so the training text is the target's own output (Medusa §3.3,
"self-distillation"; also DistillSpec). Greedy responses make the labels the target's argmax tokens.

On disk (`out_dir`, small enough to commit; sizes of the committed sets: data/distill/README.md):
    meta.json              what produced the shards (model, settings, fingerprint of the prompt ids)
    shard-00000.json ...   one per batch, written atomically (temp file + rename): a rerun skips shards that
                           exist, so an interrupted run resumes where it stopped
Each example stores `prompt_ids` (chat template applied) and `response_ids` (EOS included when it stopped).

Hidden states (`cache_hidden_states`): the target's last hidden state (after the final norm) at every
token of prompt + response, fp16, one safetensors file under `data/cache/` (gitignored, regenerable).
Medusa-1 heads sit on a frozen backbone, so h_t never changes: computing it once turns each training
epoch from "30 layers + heads" into "heads only".

    >>> lm = load_model("smollm2-135m")
    >>> prompts = specdec_lab.io.load_prompts("data/train_prompts.jsonl")
    >>> data = generate_distillation_data(lm, prompts, "data/distill/x")
    >>> cache = cache_hidden_states(lm, data, "data/cache/x-hidden.safetensors")
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..io import as_prompts, atomic_path, eos_ids, write_json
from ..models.load import LoadedModel, model_name, model_record, prompt_ids, unwrap

__all__ = [
    "DistillExample",
    "HiddenCache",
    "split_heldout",
    "generate_distillation_data",
    "load_distillation_data",
    "distillation_stats",
    "distill_sources",
    "cache_hidden_states",
    "load_hidden_cache",
]


@dataclass
class DistillExample:
    question_id: int
    category: str
    prompt_ids: list[int]  # chat template applied, ends with the assistant-turn header
    response_ids: list[int]  # the target's greedy continuation (EOS included when it stopped there)
    stop: str  # "eos" | "length"

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids


# ---- prompts ----------------------------------------------------------------------------------------
def split_heldout(items: Sequence, every: int = 10) -> tuple[list, list]:
    """(train, held_out) of Prompts or DistillExamples: held out when question_id % every == 0."""
    held = [x.question_id % every == 0 for x in items]
    return [x for x, h in zip(items, held, strict=True) if not h], [x for x, h in zip(items, held, strict=True) if h]


def _fingerprint(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


# ---- generation ---------------------------------------------------------------------------------------
def _unpack(lm) -> tuple[torch.nn.Module, object, str]:
    """(model, tokenizer, name); the name is the manifests' (never a path of this machine)."""
    model, tokenizer = unwrap(lm)
    return model, tokenizer, model_record(lm)["name"] if isinstance(lm, LoadedModel) else model_name(lm)


@torch.inference_mode()
def _generate_batch(model, prompts: list[list[int]], max_new_tokens: int, pad: int, eos: list[int]):
    """Greedy continuations of a left-padded batch with HF `generate` -> list of (response_ids, stop)."""
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)  # (B, T) left padded
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(p)
        mask[i, width - len(p) :] = 1
    out = model.generate(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        num_beams=1,
        pad_token_id=pad,
        eos_token_id=eos or None,
    )
    results = []
    for row in out[:, width:].tolist():  # finished rows are padded after their EOS: cut at the first one
        end = next((j for j, t in enumerate(row) if t in eos), None)
        results.append((row[: end + 1], "eos") if end is not None else (row, "length"))
    return results


def generate_distillation_data(
    lm,
    prompts: Sequence,
    out_dir: str | os.PathLike,
    *,
    max_new_tokens: int = 128,
    batch_size: int = 16,
    progress: bool = True,
) -> list[DistillExample]:
    """The target's greedy responses to `prompts`, written as resumable shards under `out_dir`.

    lm:      a LoadedModel (text prompts are wrapped in its chat template) or a bare HF model (then the
             prompts must be token-id lists; tiny test models have no tokenizer)
    prompts: `Prompt` records (`io.load_prompts`; the text is the user message), strings, or token-id lists
    Prompts are batched in order of length (less left padding); each batch is one shard file, and shards
    already on disk are skipped (a resumed directory keeps the batch size it was made with). Changing the
    model, settings or prompts under an existing `out_dir` is
    an error (the old shards would silently mix in); use a new directory.
    Returns the examples in prompt order.
    """
    model, tokenizer, name = _unpack(lm)
    records = as_prompts(prompts)
    ids = [prompt_ids(r, tokenizer) for r in records]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "model": name,
        "max_new_tokens": max_new_tokens,
        "batch_size": batch_size,
        "examples": len(records),
        "fingerprint": _fingerprint(name, max_new_tokens, batch_size, ids),
    }
    meta_path = out / "meta.json"
    if meta_path.exists():
        old = json.loads(meta_path.read_text())
        if old.get("batch_size") != batch_size:  # resume with the batches the shards were made with
            batch_size = meta["batch_size"] = old.get("batch_size", batch_size)
            meta["fingerprint"] = _fingerprint(name, max_new_tokens, batch_size, ids)
        if old["fingerprint"] != meta["fingerprint"]:
            raise ValueError(f"{out} holds distillation shards made with other settings ({old}); use another directory")
    else:
        write_json(meta_path, meta, indent=None)

    tokenizer_pad = getattr(tokenizer, "pad_token_id", None)
    eos = eos_ids(model, tokenizer)
    pad = tokenizer_pad if tokenizer_pad is not None else (eos[0] if eos else 0)
    order = sorted(range(len(records)), key=lambda i: (len(ids[i]), i))  # by length: less padding
    batches = [order[b : b + batch_size] for b in range(0, len(order), batch_size)]
    todo = [b for b in range(len(batches)) if not (out / f"shard-{b:05d}.json").exists()]
    bar = tqdm(total=len(records), desc="self-distillation", unit="prompt", disable=not progress)
    bar.update(len(records) - sum(len(batches[b]) for b in todo))
    for b in todo:
        t0 = time.perf_counter()
        responses = _generate_batch(model, [ids[i] for i in batches[b]], max_new_tokens, pad, eos)
        seconds = time.perf_counter() - t0
        examples = [
            DistillExample(records[i].question_id, records[i].category, ids[i], resp, stop)
            for i, (resp, stop) in zip(batches[b], responses, strict=True)
        ]
        shard = {"seconds": round(seconds, 3), "examples": [asdict(e) for e in examples]}
        write_json(out / f"shard-{b:05d}.json", shard, indent=None)
        bar.update(len(examples))
    bar.close()
    return load_distillation_data(out)


def load_distillation_data(out_dir: str | os.PathLike) -> list[DistillExample]:
    """All examples under `out_dir`, sorted by question_id."""
    examples = []
    for path in sorted(Path(out_dir).glob("shard-*.json")):
        examples += [DistillExample(**e) for e in json.loads(path.read_text())["examples"]]
    if not examples:
        raise FileNotFoundError(f"no distillation shards in {out_dir}: run generate_distillation_data first")
    return sorted(examples, key=lambda e: e.question_id)


def distillation_stats(out_dir: str | os.PathLike) -> dict:
    """Size and generation wall time of a distillation directory (summed over shards)."""
    shards = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("shard-*.json"))]
    examples = [e for s in shards for e in s["examples"]]
    return {
        "examples": len(examples),
        "prompt_tokens": sum(len(e["prompt_ids"]) for e in examples),
        "response_tokens": sum(len(e["response_ids"]) for e in examples),
        "stopped_at_eos": sum(e["stop"] == "eos" for e in examples),
        "generation_seconds": round(sum(s["seconds"] for s in shards), 1),
        **json.loads((Path(out_dir) / "meta.json").read_text()),
    }


def distill_sources(
    lm,
    sources: Sequence[tuple[Sequence, str | os.PathLike]],
    *,
    max_new_tokens: int = 128,
    batch_size: int = 16,
    progress: bool = True,
) -> tuple[list[DistillExample], dict]:
    """Several (prompts, shard directory) pairs, generated (resumably) and concatenated: the data a trainer uses.

    One directory per prompt file keeps each directory's fingerprint valid when a prompt set is added later
    (the 300 hand-written training prompts, then the 1600 of `data/prompt_bank.py`): nothing already
    generated is regenerated. Returns (examples sorted by question_id, stats summed over the directories).
    Question ids must be unique across sources (held-out splits and hidden-state caches key on them).
    """
    examples, stats = [], []
    for prompts, out_dir in sources:
        examples += generate_distillation_data(
            lm, prompts, out_dir, max_new_tokens=max_new_tokens, batch_size=batch_size, progress=progress
        )
        stats.append(distillation_stats(out_dir))
    ids = [e.question_id for e in examples]
    if len(set(ids)) != len(ids):
        raise ValueError("question_id values repeat across distillation sources: give each prompt set its own ids")
    summed = {k: sum(s[k] for s in stats) for k in ("examples", "prompt_tokens", "response_tokens", "stopped_at_eos")}
    summed["generation_seconds"] = round(sum(s["generation_seconds"] for s in stats), 1)
    summed.update(model=stats[0]["model"], max_new_tokens=max_new_tokens, sources=len(stats))
    return sorted(examples, key=lambda e: e.question_id), summed


# ---- hidden-state cache ------------------------------------------------------------------------------
@dataclass
class HiddenCache:
    """Last hidden states of the target over every example (rows of all examples concatenated).

    Example e covers rows offsets[e]:offsets[e+1]; row t of it is h_t, the state after token t, from which
    the LM head predicts token t+1 and Medusa head k predicts token t+k+1.
    """

    hidden: torch.Tensor  # (N, H) fp16
    ids: torch.Tensor  # (N,) int64 token ids
    offsets: torch.Tensor  # (E+1,) int64
    prompt_lengths: torch.Tensor  # (E,) int64
    question_ids: torch.Tensor  # (E,) int64

    def __len__(self) -> int:
        return len(self.prompt_lengths)

    def example(self, e: int) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(hidden (T, H), ids (T,), prompt_length) of example e."""
        a, b = int(self.offsets[e]), int(self.offsets[e + 1])
        return self.hidden[a:b], self.ids[a:b], int(self.prompt_lengths[e])

    def subset(self, question_ids) -> HiddenCache:
        wanted = {int(q) for q in question_ids}
        keep = [e for e in range(len(self)) if int(self.question_ids[e]) in wanted]
        parts = [self.example(e) for e in keep]
        lengths = torch.tensor([0] + [len(p[1]) for p in parts])
        return HiddenCache(
            hidden=torch.cat([p[0] for p in parts]),
            ids=torch.cat([p[1] for p in parts]),
            offsets=lengths.cumsum(0),
            prompt_lengths=self.prompt_lengths[keep],
            question_ids=self.question_ids[keep],
        )


def _model_fingerprint(model) -> str:
    head = model.get_output_embeddings().weight
    config = model.config.get_text_config(decoder=True)
    return f"{type(model).__name__}-{config.hidden_size}-{config.vocab_size}-{head.double().sum().item():.8e}"


def load_hidden_cache(path: str | os.PathLike) -> tuple[HiddenCache, dict]:
    """(cache, metadata) from a file written by `cache_hidden_states`."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    return HiddenCache(**load_file(str(path))), meta


@torch.inference_mode()
def cache_hidden_states(
    lm,
    examples: Sequence[DistillExample],
    path: str | os.PathLike | None = None,
    *,
    dtype: torch.dtype = torch.float16,
    progress: bool = True,
) -> HiddenCache:
    """Run the target once over every example (prompt + response) and keep h_t for every token.

    One forward per example (no padding, so rows are exactly what decoding sees). With `path`, the result
    is saved atomically and reused on the next call when the model and token ids match; when only the
    example set changed (a prompt set added), the examples already there are reused and only new ones
    run. fp16 halves the file (tokens x hidden size x 2 bytes); h_t's values are O(1-10), well inside fp16's
    range.
    """
    from safetensors.torch import save_file

    model, _, _ = _unpack(lm)
    model_key = _model_fingerprint(model)
    key = _fingerprint(model_key, [e.ids for e in examples])
    reuse: dict[tuple, torch.Tensor] = {}  # (question_id, ids) -> rows of an existing cache of this model
    if path is not None and Path(path).is_file():
        cache, meta = load_hidden_cache(path)
        if meta.get("fingerprint") == key:
            return cache
        old = [cache.example(e) for e in range(len(cache))]  # (hidden, ids, prompt_length) per example
        old_ids = [o[1].tolist() for o in old]
        same_model = meta.get("model") == model_key  # older caches: their fingerprint with this model's key
        if same_model or meta.get("fingerprint") == _fingerprint(model_key, old_ids):
            # same target, different example set (a prompt set was added): keep what is already computed
            reuse = {(int(q), tuple(i)): o[0] for q, i, o in zip(cache.question_ids, old_ids, old, strict=True)}
    body = model.get_decoder()  # decoder body: its last_hidden_state is after the final norm
    device = next(model.parameters()).device
    hidden, t0 = [], time.perf_counter()
    found = [reuse.get((e.question_id, tuple(e.ids))) for e in examples]
    missing = sum(rows is None for rows in found)
    for e, rows in tqdm(zip(examples, found, strict=True), total=len(examples), desc="hidden states",
                        unit="example", disable=not progress or not missing):  # fmt: skip
        if rows is None:
            out = body(input_ids=torch.tensor([e.ids], device=device), use_cache=False)
            rows = out.last_hidden_state[0].to("cpu", dtype)  # (T, H)
        hidden.append(rows)
    lengths = torch.tensor([0] + [len(e.ids) for e in examples])
    cache = HiddenCache(
        hidden=torch.cat(hidden),
        ids=torch.tensor([t for e in examples for t in e.ids], dtype=torch.long),
        offsets=lengths.cumsum(0),
        prompt_lengths=torch.tensor([len(e.prompt_ids) for e in examples], dtype=torch.long),
        question_ids=torch.tensor([e.question_id for e in examples], dtype=torch.long),
    )
    if path is not None:
        tensors = {f.name: getattr(cache, f.name).contiguous() for f in fields(cache)}
        seconds = f"{time.perf_counter() - t0:.1f}"  # compute time, kept for manifests
        with atomic_path(path) as tmp:
            save_file(tensors, tmp, metadata={"fingerprint": key, "model": model_key, "seconds": seconds})
    return cache
