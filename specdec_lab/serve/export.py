"""One folder a serving engine loads: the target, our drafters in vLLM's layouts, and the config our policy picks.

    python -m specdec_lab.serve export --out results/serve [--batch-size 1,2,4,8,16] [--quick]

    OUT/target/     the target as a complete HF folder: fp32 safetensors (the GGUF's values, de-quantized once by
                    `load_model`), config.json with `architectures` (vLLM resolves the model class from it; the
                    GGUF conversion leaves it null), tokenizer, chat template, generation config
    OUT/draft/      the shipped distilled draft (`models.draft_model.export_hf`: its LoRA readout folded into an
                    untied head over the whole vocabulary) -> vLLM `{"method": "draft_model", "model": ...}`
    OUT/eagle3/     the shipped EAGLE-3 drafter (`eagle.export`: `LlamaForCausalLMEagle3`, d2t, aux layer ids)
                    -> vLLM `{"method": "eagle3", "model": ...}`
    OUT/serve.json  the policy (`serve.policy`): the lab's acceptance per depth for ngram, draft and eagle3 in our
                    loop, the target's t(B, n) on this machine, every method's best k and predicted speedup by
                    batch size, each method's k-by-running-requests schedule, the method chosen, and
                    `speculative_config`: vLLM's config of that choice (what `serve run --method auto` starts;
                    absolute paths, as exported), and by batch size the config for that many concurrent requests
                    (plain where the schedule drafts nothing: `serve run --batch-size N`); the machine it was decided
                    on. With `--engine-prices FILE` (a serving bench's results) the predictions are corrected by
                    what vLLM measured

Each part is written atomically and kept when present (a rerun resumes); `serve.json` is decided again unless
`--keep-policy`. Nothing here imports vLLM: the folders are checked against what its loaders read
(`eagle.export.check_export`) and loaded by it in `tests/test_serve.py` (marked `vllm`).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from ..io import atomic_dir, write_json

__all__ = ["TARGET_FILES", "export_target", "export_draft", "export_eagle3", "decide_policy", "export_all"]

TARGET_FILES = ("model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                "generation_config.json", "special_tokens_map.json")  # fmt: skip
LAB_K = 6  # positions the lab measures: every k <= LAB_K is priced (vLLM's own examples serve 2-5)
LAB_PROMPTS, LAB_TOKENS = 7, 64  # the first prompt of each category, 64 tokens each


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)  # the 538 MB of weights once on disk when the cache is on the same file system
    except OSError:
        shutil.copy2(src, dst)


def export_target(model_folder: str | os.PathLike, out: str | os.PathLike) -> Path:
    """The de-quantized HF folder `load_model` made -> `out`, complete for an engine (module docstring)."""
    src, out = Path(model_folder), Path(out)
    if (out / "config.json").is_file():
        return out
    config = json.loads((src / "config.json").read_text())
    if config.get("model_type") != "llama":
        raise ValueError(f"{src}: only Llama targets are exported (model_type {config.get('model_type')!r})")
    config["architectures"] = ["LlamaForCausalLM"]
    for key in ("_name_or_path", "_model_name_or_path"):  # absolute paths of this machine
        config.pop(key, None)
    with atomic_dir(out) as tmp:
        for name in TARGET_FILES:
            if (src / name).is_file():
                _link_or_copy(src / name, tmp / name)
        (tmp / "config.json").write_text(json.dumps(config, indent=1))  # last: marks the folder complete
    return out


def export_draft(lm, out: str | os.PathLike, draft: str = "default") -> Path:
    """The draft model `draft` (`models.draft_model.get_draft`) as a standalone HF folder in `out`."""
    from ..models.draft_model import export_hf, get_draft

    return export_hf(get_draft(draft, lm.model), out, tokenizer=lm.tokenizer)


def export_eagle3(out: str | os.PathLike, weights: str = "data/eagle/smollm2-135m") -> Path:
    """The EAGLE-3 drafter folder `weights` in the engines' layout, in `out` (checked when present)."""
    from ..eagle.export import check_export, export_folder
    from ..proposers.eagle import weights_folder

    out = Path(out)
    if (out / "config.json").is_file():
        check_export(out)
        return out
    return export_folder(weights_folder(weights), out)


def decide_policy(lm, batch_sizes: Sequence[int], methods: Sequence[str] = ("ngram", "draft", "eagle3"),
                  prompts: int = LAB_PROMPTS, max_new_tokens: int = LAB_TOKENS, k: int = LAB_K,
                  repeats: int = 3, engine: dict | None = None, progress: bool = True) -> dict:  # fmt: skip
    """The lab (our loop's acceptance per depth), t(B, n) on this machine, and the choice per B (`policy.choose`);
    engine: a serving bench's record, whose measured ratios correct the predictions (`policy.engine_corrections`)."""
    from tqdm.auto import tqdm

    from ..cost.curve import measure_cost_curve
    from ..io import first_per_category, load_prompts
    from ..models.load import prompt_ids
    from . import policy

    chosen = first_per_category(load_prompts(), 1)[:prompts]
    ids = [prompt_ids(p.text, lm.tokenizer) for p in chosen]
    curves = {}
    for b in tqdm(sorted(set(batch_sizes) | {1}), desc="t(B, n)", leave=False, disable=not progress):  # B = 1 too
        curves[b] = measure_cost_curve(lm.model, sizes=tuple(range(1, k + 2)), repeats=repeats, statistic="paired",
                                       rows=b)  # fmt: skip
    runs = [policy.measure(lm, ids, m, k, max_new_tokens, curves[1](1))
            for m in tqdm(methods, desc="lab", leave=False, disable=not progress)]  # fmt: skip
    priced = {b: curves[b] for b in batch_sizes}
    corrections = policy.engine_corrections(runs, priced, engine) if engine else None
    table = policy.choose(runs, priced, corrections=corrections)
    return {"engine_corrections": corrections,
            "lab": {"prompts": [p.question_id for p in chosen], "max_new_tokens": max_new_tokens,
                    "runs": [r.to_dict() for r in runs]},
            "curves": {str(b): {str(n): round(c(n), 6) for n in c.sizes} for b, c in curves.items()},
            "by_batch_size": table}  # fmt: skip


def export_all(out: str | os.PathLike, batch_sizes: Sequence[int] = (1, 2, 4, 8, 16), keep_policy: bool = False,
               quick: bool = False, model: str = "smollm2-135m", engine: str | os.PathLike | None = None,
               progress: bool = True) -> dict:  # fmt: skip
    """Write every part of the export (module docstring) into `out`; -> the serve.json record. engine: a serving
    bench's results file (`bench.serving`) whose measured speedups correct the policy (`policy.engine_corrections`)."""
    from ..machine import machine_info
    from ..models.load import load_model
    from .policy import NGRAM, pick_method, schedule

    out = Path(out)
    manifest = out / "serve.json"
    if keep_policy and manifest.is_file():
        return json.loads(manifest.read_text())
    lm = load_model(model)
    export_target(Path(str(lm.model.config._name_or_path)), out / "target")
    export_draft(lm, out / "draft")
    export_eagle3(out / "eagle3")
    serving = json.loads(Path(engine).read_text()) if engine else None
    decided = decide_policy(lm, batch_sizes, prompts=2 if quick else LAB_PROMPTS,
                            max_new_tokens=16 if quick else LAB_TOKENS, repeats=1 if quick else 3,
                            engine=serving, progress=progress)  # fmt: skip
    rows = decided["by_batch_size"]
    method, mean = pick_method(rows)
    first = rows[0]["methods"]  # at one request: each method's k when served with a fixed k (`run --method NAME`)
    record = {
        "format": "specdec_lab.serve/1",
        "model": model,
        "target": "target",
        "drafters": {"draft": "draft", "eagle3": "eagle3"},
        "ngram": NGRAM,
        "machine": machine_info(),
        "quick": quick,
        "engine_prices": str(engine) if engine else None,
        "policy": decided
        | {
            "tokens_by_method": {m: max(1, v["k"], v.get("best_k", 0)) for m, v in first.items()},
            "schedules": {m: schedule(rows, m) for m in first},
        },  # fmt: skip
        "choice": {"method": method, "mean_predicted_speedup": mean},
    }
    write_json(manifest, record)  # the drafters' folders are read back from the file by `engine.speculative_config`
    from .engine import speculative_config

    record["speculative_config"] = speculative_config(out, "auto")
    record["speculative_config_by_batch_size"] = {b: speculative_config(out, "auto", batch_size=b) for b in batch_sizes}
    write_json(manifest, record)
    return record
