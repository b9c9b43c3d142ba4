"""Speculation in a batch, measured: every method at every batch size, the prompts fed from a queue, one run.

    python -m specdec_lab.bench.batched --batch-size 1,2,4,8,16 \\
        --methods autoregressive,prompt_lookup,medusa,eagle,hybrid --max-new-tokens 128 --repeats 2 --out RUN.json

Per batch size B and method: `batch.generate_batch` decodes every prompt, B rows at a time (a finished row takes the
next waiting prompt); recorded are the wall seconds, total tokens/s, each request's latency (from the start until
its last token: median and p90), mean accepted, the mean tokens verified per row and step (the size the cost model
chose at this B), and per row whether the output equals our single-sequence autoregressive output for its prompt
(else the first differing token and the reference's top-1 − top-2 logit gap there: a near-tie flipped by the
batched forward's other summation order, or a bug). Speedup = a method's tokens/s over batched autoregressive's at
the same B, in the same run. Each (B, repeat) runs the methods in an order rotated by one (`cost.timing.rotated`),
every (B, method) keeps its fastest repeat, and the speedup's interval is the range of the per-repeat ratios (a
method and autoregressive paired by repeat). One untimed warm-up decode per (B, method) comes first: the sizers
measure the cost curve t(B, n) on their first step.

Levers (`batch.Levers`; by default `default`, what `generate_batch` runs unless told: the planner from four rows):
`--levers off,plan` runs every speculative method once per lever set (autoregressive and
the anchors once: no lever changes a plain step), so each lever's effect is measured apart, in the same run; a
run's `levers` names its set, and `vs_off` is its tokens/s over the same method's with every lever off. Beside the
end-to-end tokens/s each of our runs records `decode_tokens_per_s`, the new tokens over the wall time less the
rows' prefills (what the published batch tables compare), and its `decode_speedup` over autoregressive's.

Anchors: `hf_generate`, transformers' own batched greedy `generate` (left padding, B prompts at a time, each
chunk waiting for its longest answer), and `hf_assisted` at B > 1 records what transformers does there (it refuses
batches; the message is kept). The results file is written after every (B, method): a rerun resumes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from ..batch import Levers, generate_batch
from ..cost.timing import rotated
from ..io import eos_ids, first_per_category, load_prompts, positive_int, write_json
from ..machine import machine_info, sync
from ..models.load import load_model, unwrap
from ..proposers.registry import BASELINE, check_method_spec, parse_method_spec
from .harness import first_diff, top2_gap

__all__ = ["ANCHORS", "run_batched", "hf_batched", "summarize_batched", "main"]

FORMAT = "specdec_lab.bench.batched/1"
ANCHORS = ("hf_generate", "hf_assisted")
WARMUP_TOKENS = 8  # one untimed decode per (B, method) first: curves measured, allocations made


def _percentile(xs: Sequence[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


@torch.inference_mode()
def hf_batched(
    model, tokenizer, prompts: list[list[int]], batch_size: int, max_new_tokens: int, assisted: bool = False
):
    """transformers' `generate` on `batch_size` prompts at a time (left-padded, greedy): -> (token lists, latency per
    prompt, error or None). assisted: prompt-lookup assisted generation, which transformers refuses at batch > 1."""
    eos = eos_ids(model, tokenizer)
    pad = eos[0] if eos else 0
    device = next(model.parameters()).device
    tokens, latency, t0 = [], [], time.perf_counter()
    for i in range(0, len(prompts), batch_size):
        chunk = prompts[i : i + batch_size]
        width = max(len(p) for p in chunk)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=device)  # (B, T) left-padded
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
        extra = {"prompt_lookup_num_tokens": 3} if assisted else {}
        try:
            out = model.generate(ids, attention_mask=mask, do_sample=False, num_beams=1, max_new_tokens=max_new_tokens,
                                 eos_token_id=eos or None, pad_token_id=pad, **extra)  # fmt: skip
        except (ValueError, NotImplementedError, RuntimeError) as err:
            return None, None, f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
        sync(device)
        done = time.perf_counter() - t0
        for row in out[:, width:].tolist():
            cut = next((j + 1 for j, t in enumerate(row) if t in eos), len(row))  # padding after EOS dropped
            tokens.append(row[:cut])
            latency.append(done)  # the chunk's answers arrive together, when its longest ends
    return tokens, latency, None


def _paired_range(mine: list[float] | None, base: list[float] | None) -> list[float] | None:
    """[min, max] over repeats of mine[i] / base[i]; None without two paired repeats."""
    if not mine or not base or len(mine) != len(base) or len(mine) < 2:
        return None
    ratios = [m / a for m, a in zip(mine, base, strict=True)]
    return [round(min(ratios), 3), round(max(ratios), 3)]


def summarize_batched(runs: list[dict], baseline: str = BASELINE) -> list[dict]:
    """Per (B, method, levers): tokens/s end to end and decode-only, latency median and p90, speedup over batched
    `baseline` at that B (end to end, its per-repeat range, and decode-only), the speedup over the same method with
    every lever off (`vs_off`), mean accepted, tokens verified per row and step, identical n/N."""
    base = {r["batch_size"]: r["tokens_per_s"] for r in runs if r["method"] == baseline and r.get("tokens_per_s")}
    base_each = {r["batch_size"]: r.get("repeat_tokens_per_s") for r in runs if r["method"] == baseline}
    base_decode = {r["batch_size"]: r.get("decode_tokens_per_s") for r in runs if r["method"] == baseline}
    off = {(r["batch_size"], r["method"]): r.get("tokens_per_s") for r in runs if r.get("levers", "off") == "off"}
    out = []
    for r in runs:
        if r.get("error"):
            out.append({"batch_size": r["batch_size"], "method": r["method"], "error": r["error"]})
            continue
        rows = r["rows"]
        same = [x["identical"] for x in rows if x.get("identical") is not None]
        out.append({
            "batch_size": r["batch_size"], "method": r["method"], "levers": r.get("levers", "off"),
            "tokens_per_s": round(r["tokens_per_s"], 2),
            "speedup": round(r["tokens_per_s"] / base[r["batch_size"]], 3) if r["batch_size"] in base else None,
            # the interval: the speedup of each repeat on its own (a method and autoregressive paired by repeat)
            "speedup_range": _paired_range(r.get("repeat_tokens_per_s"), base_each.get(r["batch_size"])),
            "decode_tokens_per_s": _round(r.get("decode_tokens_per_s")),
            "decode_speedup": _ratio(r.get("decode_tokens_per_s"), base_decode.get(r["batch_size"])),
            "vs_off": _ratio(r["tokens_per_s"], off.get((r["batch_size"], r["method"]))),
            "latency_median_s": round(statistics.median(x["latency"] for x in rows), 2),
            "latency_p90_s": round(_percentile([x["latency"] for x in rows], 0.9), 2),
            "mean_accepted": r.get("mean_accepted"), "nodes_per_step": r.get("nodes_per_step"),
            "identical": f"{sum(same)}/{len(same)}" if same else None,
            "speculated": (r.get("gate") or {}).get("speculated"),  # share of steps the gate let speculate
        })  # fmt: skip
    return out


def _round(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def run_batched(lm, prompts, methods: Sequence[str], batch_sizes: Sequence[int], max_new_tokens: int = 128,
                repeats: int = 1, out: str | None = None, progress: bool = True, command: str | None = None,
                gate: bool = False, levers: Sequence[str] = ("default",)) -> dict:  # fmt: skip
    """The run (module docstring); `prompts`: `io.Prompt`s; `levers`: the lever sets (`batch.Levers` specs) each
    speculative method runs under. -> the results record (also written to `out`)."""
    from tqdm.auto import tqdm

    model, tokenizer = unwrap(lm)
    ids = [lm.chat_ids(p.text) if p.ids is None else list(p.ids) for p in prompts]
    config = {"methods": list(methods), "batch_sizes": list(batch_sizes), "max_new_tokens": max_new_tokens,
              "repeats": repeats, "prompts": len(prompts)}  # fmt: skip
    if gate:
        config["gate"] = True  # our methods ran with generate_batch(gate=True)
    # checked (a clear error) and in one spelling; "default" stays itself (what generate_batch runs unless told)
    levers = [x if x == "default" else Levers.of(x).name() for x in levers] or ["default"]
    if levers != ["off"]:
        config["levers"] = levers
    # (method, lever set) contenders per B: a plain step has nothing to cut, so autoregressive and the anchors once
    contenders = [(m, lv) for m in methods for lv in (levers if m != BASELINE and m not in ANCHORS else levers[:1])]
    record = _resume(out, config) or {"format": FORMAT, "config": config, "machine": machine_info(), "runs": []}
    if command:
        record.setdefault("command", command)
    done = {(r["batch_size"], r["method"], r.get("levers", "off")) for r in record["runs"]}
    reference = [generate_batch(lm, [x], BASELINE, max_new_tokens, batch_size=1).results[0].tokens
                 for x in tqdm(ids, desc="reference (one sequence)", disable=not progress)]  # fmt: skip
    bar = tqdm(total=len(batch_sizes) * len(contenders) * repeats, desc="(B, method, repeat)", disable=not progress)
    for b in batch_sizes:
        best: dict[tuple[str, str], dict] = {}
        each: dict[tuple[str, str], list[float]] = {c: [] for c in contenders}  # tokens/s of every repeat, in order
        for rep in range(repeats):
            for method, lv in rotated(list(contenders), rep):
                bar.update(1)
                if (b, method, lv) in done:
                    continue
                run = _one(lm, model, tokenizer, ids, prompts, method, b, max_new_tokens, reference, gate, lv)
                if "tokens_per_s" in run:
                    each[method, lv].append(round(run["tokens_per_s"], 3))
                key = (method, lv)
                if "error" in run or key not in best or run["seconds"] < best[key]["seconds"]:
                    best[key] = run
        for key in contenders:
            if key in best:
                record["runs"].append({**best[key], "repeat_tokens_per_s": each[key]})
        record["summary"] = summarize_batched(record["runs"])
        if out:
            write_json(out, record)  # atomic; a rerun of the same command resumes after the last finished B
    bar.close()
    return record


def _one(lm, model, tokenizer, ids, prompts, method, b, max_new_tokens, reference, gate=False, levers="off") -> dict:
    """One (B, method, lever set): its decode of every prompt, timed, with identity per row."""
    base = {"batch_size": b, "method": method, "levers": levers}
    if method in ANCHORS:
        if method == "hf_assisted" and b == 1:
            return {**base, "error": "measured at batch 1 by the single-sequence bench (python -m specdec_lab.bench)"}
        hf_batched(model, tokenizer, ids[:b], b, WARMUP_TOKENS, assisted=method == "hf_assisted")  # warm-up
        t0 = time.perf_counter()
        tokens, latency, error = hf_batched(model, tokenizer, ids, b, max_new_tokens, assisted=method == "hf_assisted")
        if error:
            return {**base, "error": error}
        seconds = time.perf_counter() - t0
        # transformers' loop: its prefills are not timed apart
        forwards, gate_record, plan_record, prefill_seconds = None, None, None, None
    else:
        spec = check_method_spec(parse_method_spec(method))  # typed parameters, checked against the registry
        # warm-up, not timed (as the single-sequence bench's): the sizers' first step at B rows measures the cost
        # curve t(B, n) once per process (seconds), which would otherwise land in this run's clock
        generate_batch(lm, ids[:b], spec.name, WARMUP_TOKENS, batch_size=b, levers=levers, **spec.params)
        result = generate_batch(lm, ids, spec.name, max_new_tokens, batch_size=b, trace=True, gate=gate,
                                levers=levers, **spec.params)  # fmt: skip
        tokens, latency, seconds = [r.tokens for r in result.results], result.latency, result.seconds
        prefill_seconds = result.prefill_seconds
        forwards = sum(r.forwards for r in result.results)
        steps = [s for r in result.results for s in r.steps]
        gate_record, plan_record = result.gate, result.plan
    rows = []
    for p, x, toks, ref, lat in zip(prompts, ids, tokens, reference, latency, strict=True):
        diff = first_diff(ref, toks)
        rows.append({"question_id": p.question_id, "category": p.category, "new_tokens": len(toks),
                     "latency": round(lat, 4), "identical": diff is None, "first_diff": diff,
                     "top2_gap": top2_gap(model, x, ref, diff) if diff is not None else None})  # fmt: skip
    n = sum(len(t) for t in tokens)
    run = {**base, "seconds": round(seconds, 4), "tokens": n, "tokens_per_s": n / seconds, "rows": rows}
    if prefill_seconds is not None and seconds > prefill_seconds:  # decode-only beside end-to-end (issue 58)
        run["prefill_seconds"] = round(prefill_seconds, 4)
        run["decode_tokens_per_s"] = n / (seconds - prefill_seconds)
    if forwards:
        run["mean_accepted"] = round(n / forwards, 3)
        run["nodes_per_step"] = round(sum(len(s.tree_tokens) for s in steps) / max(len(steps), 1), 3)
    if plan_record is not None:
        run["plan"] = plan_record  # the width planner's steps, share cut, mean width (`cost.plan`)
    if gate_record is not None:
        run["gate"] = gate_record  # the speculation gate's steps per mode and measured rates (`cost.gate`)
    return run


def _resume(out: str | None, config: dict, fmt: str = FORMAT) -> dict | None:
    """The results file `out` of an interrupted run of the same config (format `fmt`), to go on from; None for a
    fresh run; ValueError where `out` holds another run."""
    import json

    if not out or not Path(out).is_file():
        return None
    record = json.loads(Path(out).read_text(encoding="utf-8"))
    if record.get("format") != fmt or record.get("config") != config:
        raise ValueError(f"{out} holds another run (its config differs): pass another --out, or delete it")
    return record


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.batched", description=__doc__.splitlines()[0])
    p.add_argument("--methods", default="autoregressive,prompt_lookup,hf_generate",
                   help="our methods (name[:key=value...]) and the anchors hf_generate, hf_assisted")  # fmt: skip
    p.add_argument("--batch-size", default="1,2,4,8,16", help="comma-separated batch sizes")
    p.add_argument("--max-new-tokens", type=positive_int, default=128)
    p.add_argument("--repeats", type=positive_int, default=1, help="runs per (B, method); the fastest is kept")
    p.add_argument("--limit", type=positive_int, default=None, help="the first N prompts only")
    p.add_argument("--per-category", type=positive_int, default=None, help="the first N prompts of each category")
    p.add_argument("--prompts", default=None, help="question.jsonl (default: the benchmark's 56 prompts)")
    p.add_argument("--weights", default="fp32", choices=["fp32", "int8", "int4"], help="the target's weights")
    p.add_argument("--out", default="results/bench-batched.json")
    p.add_argument("--gate", action="store_true",
                   help="our methods decide by a speculation gate measured on the batch (cost/gate.py)")  # fmt: skip
    p.add_argument("--levers", default="default",
                   help="comma-separated lever sets our speculative methods run under, each 'default' (what "
                        "generate_batch runs unless told: the planner from 4 rows), 'off' or a '+'-joined list of "
                        "levers (batch.Levers: plan), e.g. off,plan")  # fmt: skip
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    try:
        sizes = [int(s) for s in a.batch_size.split(",") if s.strip()]
        if not sizes or min(sizes) < 1:
            raise ValueError(f"--batch-size takes whole numbers >= 1, got {a.batch_size!r}")
        prompts = load_prompts(a.prompts)
        if a.per_category:
            prompts = first_per_category(prompts, a.per_category)
        prompts = prompts[: a.limit]
        lm = load_model("smollm2-135m", weights=a.weights)
        command = " ".join(["python -m specdec_lab.bench.batched", *(argv if argv is not None else sys.argv[1:])])
        record = run_batched(lm, prompts, [m for m in a.methods.split(",") if m], sizes, a.max_new_tokens, a.repeats,
                             a.out, progress=not a.no_progress, command=command, gate=a.gate,
                             levers=[x for x in a.levers.split(",") if x.strip()])  # fmt: skip
    except ValueError as err:
        print(f"specdec_lab.bench.batched: error: {err}", file=sys.stderr)
        return 2
    for row in record["summary"]:
        print(row)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
