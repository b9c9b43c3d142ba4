"""The serving table: vLLM's OpenAI server with our drafters, by concurrency, beside our own batched loop.

    python -m specdec_lab.bench.serving --export results/serve --concurrency 1,2,4,8,16 \\
        --configs none,ngram,draft,eagle3,policy --per-category 2 --max-new-tokens 64 --out results/serving.json

One vLLM server per config, all started first (an idle server costs no CPU: measured), so that at every concurrency
the configs run back to back in an order rotated by one (`cost.timing.rotated`): a ratio to vLLM plain at the same
concurrency is taken within minutes, not across restarts.

    none     plain decoding                       ngram / draft / eagle3    that proposer, a fixed k (--k)
    policy   the export's choice (`serve.json`): its method with k by running requests from our cost model

At concurrency c, c client threads take the prompts from one queue (a finished request's thread sends the next:
what a server sees from c users); each request streams (TTFT, ITL: `serve.client`). Per (c, config): throughput
(new tokens / wall seconds), TTFT and ITL median and p90, vLLM's acceptance per position (its counters' growth),
and per prompt whether the output equals our single-sequence autoregressive `generate` (else the first differing
token and our top-1 − top-2 logit gap there: a near-tie flipped by another kernel's rounding, or a bug) and vLLM
plain's at the same c.

Beside it, in the same run: our loop — the lab's acceptance per position for each served method with the same k
(`serve.policy.measure`, the numbers vLLM's counters are compared with), and `generate_batch` at B = c for
`--ours` (`bench.batched.run_batched`); llama.cpp's plain decoding of the GGUF at c = 1 where llama-cpp-python is
installed (`bench.llamacpp`). Threads: the server's forward on every core (`serve.engine`); ours on torch's.
With `--repeats R`, each concurrency runs R rounds (the order rotated each round), keeps every config's fastest
round and reports the range of its per-round ratios to plain. Loopback only; every request has a timeout, and the
run stops its servers whatever happens (by process group).
The results file is written after every concurrency; a rerun of the same command resumes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ..cost.timing import rotated
from ..io import first_per_category, load_prompts, positive_int, write_json
from ..machine import machine_info
from .batched import _percentile, _resume, run_batched
from .harness import first_diff, top2_gap

__all__ = ["CONFIGS", "load", "run_serving", "summarize_serving", "main"]

FORMAT = "specdec_lab.bench.serving/1"
CONFIGS = ("none", "ngram", "draft", "eagle3", "policy")
REQUEST_TIMEOUT = 300.0


def load(url: str, prompts: Sequence[list[int]], concurrency: int, max_tokens: int) -> tuple[list, float]:
    """Every prompt through the server at `concurrency` (module docstring): -> (Completions in prompt order, wall s)."""
    from ..serve.client import complete

    results: list = [None] * len(prompts)
    errors: list[BaseException] = []
    next_index = iter(range(len(prompts)))
    lock = threading.Lock()

    def worker() -> None:
        while not errors:
            with lock:
                i = next(next_index, None)
            if i is None:
                return
            try:
                results[i] = complete(url, prompts[i], max_tokens, timeout=REQUEST_TIMEOUT)
            except BaseException as err:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(err)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return results, wall


def _strip_eos(tokens: list[int], eos: set[int]) -> list[int]:
    return tokens[:-1] if tokens and tokens[-1] in eos else tokens


def _server_config(export: str, config: str, k: int, threads: str, max_num_seqs: int):
    from ..serve.engine import ServerConfig

    if config == "policy":
        return ServerConfig(export=export, method="auto", threads=threads, max_num_seqs=max_num_seqs)
    return ServerConfig(export=export, method=config, num_speculative_tokens=None if config == "none" else k,
                        threads=threads, max_num_seqs=max_num_seqs)  # fmt: skip


def _policy_record(serve_record: dict) -> dict:
    """What the bench's `policy` config served: the export's choice, its schedule and the engine's corrections."""
    method = serve_record["choice"]["method"]
    return {"choice": serve_record["choice"], "speculative_config": serve_record["speculative_config"],
            "schedule": serve_record["policy"]["schedules"].get(method),
            "engine_corrections": serve_record["policy"].get("engine_corrections"),
            "engine_prices": serve_record.get("engine_prices")}  # fmt: skip


def _measure(server, ids, c, max_tokens, model, reference, plain, eos) -> dict:
    from ..serve.client import acceptance, scrape_metrics

    before = scrape_metrics(server.url)
    done, wall = load(server.url, ids, c, max_tokens)
    spec = acceptance(before, scrape_metrics(server.url))
    rows = []
    for i, (x, out, ref) in enumerate(zip(ids, done, reference, strict=True)):
        got = _strip_eos(out.tokens, eos)
        diff = first_diff(_strip_eos(ref, eos), got)
        row = {"identical": diff is None, "first_diff": diff, "new_tokens": len(out.tokens),
               "ttft": round(out.ttft, 4), "latency": round(out.done, 4)}  # fmt: skip
        if diff is not None:
            row["top2_gap"] = top2_gap(model, x, _strip_eos(ref, eos), diff)
        if plain is not None:
            row["equals_plain"] = first_diff(plain[i], got) is None
        rows.append(row)
    ttft = [o.ttft for o in done]
    itl = [g for o in done for g in o.itl]
    n = sum(len(o.tokens) for o in done)
    return {"concurrency": c, "seconds": round(wall, 4), "tokens": n, "tokens_per_s": round(n / wall, 3),
            "ttft_median": round(statistics.median(ttft), 4), "ttft_p90": round(_percentile(ttft, 0.9), 4),
            "itl_median": round(statistics.median(itl), 5) if itl else None,
            "itl_p90": round(_percentile(itl, 0.9), 5) if itl else None,
            "acceptance": spec, "identical": sum(r["identical"] for r in rows), "prompts": len(rows),
            "rows": rows, "_tokens": [_strip_eos(o.tokens, eos) for o in done]}  # fmt: skip


def run_serving(lm, prompts, export: str, configs: Sequence[str], concurrency: Sequence[int], max_new_tokens: int,
                k: int = 3, ours: Sequence[str] = ("autoregressive",), threads: str = "all", llamacpp: bool = True,
                repeats: int = 1, out: str | None = None, command: str | None = None,
                progress: bool = True) -> dict:  # fmt: skip
    """The run of the module docstring; `prompts`: `io.Prompt`s. -> the results record (also written to `out`)."""
    from tqdm.auto import tqdm

    from ..cost.curve import measure_cost_curve
    from ..generate import generate
    from ..io import eos_ids
    from ..serve.engine import Server
    from ..serve.policy import measure

    ids = [lm.chat_ids(p.text) for p in prompts]
    serve_record = json.loads((Path(export) / "serve.json").read_text())
    config = {"export": str(export), "configs": list(configs), "concurrency": list(concurrency), "k": k,
              "max_new_tokens": max_new_tokens, "prompts": [p.question_id for p in prompts], "ours": list(ours),
              "threads": threads, "repeats": repeats}  # fmt: skip
    record = _resume(out, config, FORMAT) or {"format": FORMAT, "config": config, "machine": machine_info(), "vllm": [],
                                      "policy": _policy_record(serve_record)}  # fmt: skip
    if command:
        record.setdefault("command", command)
    model, eos = lm.model, set(eos_ids(lm.model, lm.tokenizer))
    reference = [generate(lm, x, max_new_tokens=max_new_tokens).tokens
                 for x in tqdm(ids, desc="reference (our autoregressive)", disable=not progress)]  # fmt: skip
    if "lab" not in record:  # our loop's acceptance per position, each served method at the served k
        step = measure_cost_curve(lm.model, sizes=(1,))(1)  # one target step at one row: the unit of c
        record["lab"] = {m: measure(lm, ids, m, k, max_new_tokens, step).to_dict()
                         for m in tqdm([c for c in configs if c in ("ngram", "draft", "eagle3")],
                                       desc="our loop's acceptance", disable=not progress)}  # fmt: skip
        _write(out, record)
    done = {(r["config"], r["concurrency"]) for r in record["vllm"]}
    todo = [c for c in configs if any((c, n) not in done for n in concurrency)]
    servers: dict[str, Server] = {}
    try:
        for c in tqdm(todo, desc="starting vLLM", disable=not progress):
            t0 = time.perf_counter()
            servers[c] = Server(_server_config(export, c, k, threads, max(concurrency))).start()
            record.setdefault("start_seconds", {})[c] = round(time.perf_counter() - t0, 1)
        bar = tqdm(total=len(concurrency) * len(todo) * repeats, desc="(concurrency, config, repeat)",
                   disable=not progress)  # fmt: skip
        for j, n in enumerate(concurrency):
            if all((c, n) in done for c in todo):
                bar.update(len(todo) * repeats)
                continue
            kept: dict[str, dict] = {}
            each: dict[str, list[float]] = {c: [] for c in todo}
            plain: list | None = None
            for rep in range(repeats):
                order = rotated(list(todo), j + rep)
                if "none" in order:  # plain first in each round: the others' outputs are compared with its
                    order.remove("none")
                    order.insert(0, "none")
                for c in order:
                    bar.update(1)
                    run = _measure(servers[c], ids, n, max_new_tokens, model, reference, plain, eos)
                    tokens = run.pop("_tokens")
                    if c == "none":
                        plain = tokens
                    each[c].append(run["tokens_per_s"])
                    if c not in kept or run["seconds"] < kept[c]["seconds"]:
                        kept[c] = run
            for c in todo:
                record["vllm"].append({"config": c, **kept[c], "repeat_tokens_per_s": each[c]})
            _write(out, record)  # after every concurrency: a rerun resumes at the next
        bar.close()
        if "eagle3" in servers and "raw_text" not in record:
            record["raw_text"] = _raw_text(lm, servers["eagle3"], prompts, k, max_new_tokens)
            _write(out, record)
    finally:
        for server in servers.values():
            server.stop()
    if ours and "ours" not in record:
        record["ours"] = run_batched(lm, prompts, list(ours), list(concurrency), max_new_tokens, repeats,
                                     progress=progress)  # fmt: skip
        _write(out, record)
    if llamacpp and "llamacpp" not in record:
        record["llamacpp"] = _llamacpp(lm, ids, max_new_tokens, reference, eos)
        _write(out, record)
    record["summary"] = summarize_serving(record)
    _write(out, record)
    return record


def _raw_text(lm, server, prompts, k: int, max_new_tokens: int) -> dict:
    """EAGLE-3's acceptance per position when the prompts go as raw text (no chat template), in vLLM and in our
    loop: what a client that sends `prompt: "<text>"` to /v1/completions measures (the drafter was distilled on
    chat-formatted answers)."""
    from ..cost.curve import measure_cost_curve
    from ..models.load import prompt_ids
    from ..serve.client import acceptance, scrape_metrics
    from ..serve.policy import measure

    ids = [prompt_ids(p.text, lm.tokenizer, chat=False) for p in prompts]
    before = scrape_metrics(server.url)
    load(server.url, ids, 1, max_new_tokens)
    ours = measure(lm, ids, "eagle3", k, max_new_tokens, measure_cost_curve(lm.model, sizes=(1,))(1))
    return {"vllm": acceptance(before, scrape_metrics(server.url)), "ours": ours.to_dict()}


def _llamacpp(lm, ids, max_new_tokens, reference, eos) -> dict:
    """llama.cpp's plain decoding of the GGUF, one request at a time (c = 1), or why it could not run."""
    from . import llamacpp as anchor

    reason = anchor.unavailable()
    if reason:
        return {"unavailable": reason}
    run = anchor.llamacpp(lm.model, sorted(eos))
    run(ids[0], 8, 0)  # warm-up
    t0, tokens = time.perf_counter(), []
    for x in ids:
        tokens.append(run(x, max_new_tokens, 0).tokens)
    wall = time.perf_counter() - t0
    n = sum(len(t) for t in tokens)
    pairs = zip(reference, tokens, strict=True)
    same = sum(first_diff(_strip_eos(r, eos), _strip_eos(t, eos)) is None for r, t in pairs)
    return {"concurrency": 1, "seconds": round(wall, 4), "tokens": n, "tokens_per_s": round(n / wall, 3),
            "identical": same, "prompts": len(ids), "weights": "the GGUF's own (Q4_1)"}  # fmt: skip


def summarize_serving(record: dict) -> list[dict]:
    """One row per (concurrency, engine config): tokens/s, speedup over vLLM plain at that concurrency, latencies,
    acceptance per position (vLLM's, and our loop's for the same method and k), identity."""
    plain_runs = {r["concurrency"]: r for r in record["vllm"] if r["config"] == "none"}
    plain = {c: r["tokens_per_s"] for c, r in plain_runs.items()}
    lab = record.get("lab", {})
    rows = []
    for r in sorted(record["vllm"], key=lambda r: (r["concurrency"], CONFIGS.index(r["config"]))):
        row = {"concurrency": r["concurrency"], "engine": "vllm", "config": r["config"],
               "tokens_per_s": r["tokens_per_s"], "speedup_vs_vllm_plain": round(r["tokens_per_s"] /
                                                                                 plain[r["concurrency"]], 3)
               if r["concurrency"] in plain else None,
               "ttft_median": r["ttft_median"], "ttft_p90": r["ttft_p90"], "itl_median": r["itl_median"],
               "itl_p90": r["itl_p90"], "identical": f"{r['identical']}/{r['prompts']}",
               "equals_vllm_plain": _equals_plain(r),
               "speedup_range": _ratio_range(r, plain_runs.get(r["concurrency"])),
               "vllm_rate_per_position": r["acceptance"]["rate_per_position"],
               "ours_rate_per_position": _per_draft(lab.get(r["config"]))}  # fmt: skip
        rows.append(row)
    for r in (record.get("ours") or {}).get("runs", []):
        if "tokens_per_s" not in r:
            continue
        c = r["batch_size"]
        rows.append({"concurrency": c, "engine": "ours", "config": r["method"],
                     "tokens_per_s": round(r["tokens_per_s"], 3),
                     "speedup_vs_vllm_plain": round(r["tokens_per_s"] / plain[c], 3) if c in plain else None,
                     "latency_median": round(statistics.median(x["latency"] for x in r["rows"]), 4),
                     "identical": f"{sum(x['identical'] for x in r['rows'])}/{len(r['rows'])}"})  # fmt: skip
    cpp = record.get("llamacpp") or {}
    if "tokens_per_s" in cpp:
        rows.append({"concurrency": 1, "engine": "llama.cpp", "config": "plain (Q4_1)",
                     "tokens_per_s": cpp["tokens_per_s"],
                     "speedup_vs_vllm_plain": round(cpp["tokens_per_s"] / plain[1], 3) if 1 in plain else None,
                     "identical": f"{cpp['identical']}/{cpp['prompts']}"})  # fmt: skip
    return rows


def _per_draft(run: dict | None) -> list[float] | None:
    """Our loop's shares per drafting step (S_i / f), as vLLM counts: accepted at position i over the drafts."""
    if not run or not run.get("drafted"):
        return None
    return [round(s / run["drafted"], 4) for s in run["survival"]]


def _equals_plain(run: dict) -> str | None:
    """'n/N': the answers equal to vLLM plain's at the same concurrency (None for plain itself)."""
    flags = [row["equals_plain"] for row in run["rows"] if "equals_plain" in row]
    return f"{sum(flags)}/{len(flags)}" if flags else None


def _ratio_range(run: dict, plain: dict | None) -> list[float] | None:
    """[min, max] of the per-round ratios to vLLM plain (round i with round i: the same minutes of the machine)."""
    if plain is None or not run.get("repeat_tokens_per_s"):
        return None
    ratios = [a / b for a, b in zip(run["repeat_tokens_per_s"], plain["repeat_tokens_per_s"], strict=True)]
    return [round(min(ratios), 3), round(max(ratios), 3)]


def _write(out: str | None, record: dict) -> None:
    if out:
        write_json(out, record)


def _list(text: str, allowed: Sequence[str] | None = None) -> list[str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in items if allowed is not None and s not in allowed]
    if not items or bad:
        raise ValueError(f"expected a comma-separated list of {', '.join(allowed or ['names'])}, got {text!r}")
    return items


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.serving", description=__doc__.splitlines()[0])
    p.add_argument("--export", default="results/serve", help="a `python -m specdec_lab.serve export` folder")
    p.add_argument("--configs", default=",".join(CONFIGS), help=f"vLLM configs among {', '.join(CONFIGS)}")
    p.add_argument("--concurrency", default="1,2,4,8,16", help="comma-separated concurrent requests")
    p.add_argument("--k", type=positive_int, default=3, help="tokens a step drafts for ngram/draft/eagle3")
    p.add_argument("--per-category", type=positive_int, default=2, help="the first N prompts of each category")
    p.add_argument("--max-new-tokens", type=positive_int, default=64)
    p.add_argument("--repeats", type=positive_int, default=1, help="rounds per concurrency (configs rotated; the "
                   "fastest kept, the speedup's interval from the rounds)")  # fmt: skip
    p.add_argument("--ours", default="autoregressive", help="our methods run by generate_batch at B = concurrency "
                   "('' for none)")  # fmt: skip
    p.add_argument("--threads", choices=("all", "auto"), default="all", help="vLLM's CPU binding (serve.engine)")
    p.add_argument("--no-llamacpp", action="store_true", help="leave out llama.cpp's c = 1 anchor")
    p.add_argument("--out", default="results/serving.json")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    from ..serve.engine import ServeError

    try:
        configs = _list(a.configs, CONFIGS)
        concurrency = sorted({int(s) for s in _list(a.concurrency)})
        if concurrency[0] < 1:
            raise ValueError(f"--concurrency takes whole numbers >= 1, got {a.concurrency!r}")
        if not (Path(a.export) / "serve.json").is_file():
            raise ServeError(f"{a.export} is no serving export: run `python -m specdec_lab.serve export --out "
                             f"{a.export}` first")  # fmt: skip
        from ..models.load import load_model

        prompts = first_per_category(load_prompts(), a.per_category)
        lm = load_model("smollm2-135m")
        command = " ".join(["python -m specdec_lab.bench.serving", *(argv if argv is not None else sys.argv[1:])])
        record = run_serving(lm, prompts, a.export, configs, concurrency, a.max_new_tokens, a.k,
                             [m for m in a.ours.split(",") if m], a.threads, not a.no_llamacpp, a.repeats, a.out,
                             command, progress=not a.no_progress)  # fmt: skip
    except (ValueError, ServeError) as err:
        print(f"specdec_lab.bench.serving: error: {err}", file=sys.stderr)
        return 2
    for row in record["summary"]:
        print(row)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
