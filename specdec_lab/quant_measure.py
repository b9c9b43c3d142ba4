"""What int8 / int4 weights buy on this machine: the kernels per row count, the step's cost curve, plain decoding.

    python -m specdec_lab.quant_measure --out data/bench/avx512-quant.json      # a few minutes

Three measurements, each interleaving what it compares (one loop, rotated order) and keeping medians:

* kernels: seconds per matrix of fp32 FastLinear's kernels and of the int8/int4 kernels (fp32 or bf16
  activations) at 1..64 rows, on SmolLM2-135M's decoder shapes (`quant.measure_kernels`, which also decides
  the activation dtype per machine: `quant.quant_plan`);
* cost curves: one cached verify forward of n = 1, 2, 4, 8, 16 tokens (`cost.measure_cost_curve`) of the
  real model in every weights setup — the t(n) that speculation's sizes follow;
* plain decoding: tokens per second of greedy autoregressive decoding on chat prompts.

The results name the machine and its torch CPU ISA (`machine_info`); they are committed under data/bench/.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from tqdm import tqdm

from .cost import measure_cost_curve
from .generate import generate
from .io import load_prompts, write_json
from .machine import machine_info
from .models import load_model
from .quant import quant_plan, weights_record
from .timing import rotated

__all__ = ["SETUPS", "measure", "main"]

# (label, load_model weights, head_weights)
SETUPS = (("fp32", "fp32", "fp32"), ("int8", "int8", "fp32"), ("int4", "int4", "fp32"),
          ("int8+head8", "int8", "int8"), ("int4+head8", "int4", "int8"))  # fmt: skip
SIZES = (1, 2, 4, 8, 16)


def measure(setups=SETUPS, rounds: int = 4, prompts: int = 2, new_tokens: int = 64, progress: bool = True) -> dict:
    """The three measurements (module doc) for every setup in one process; returns the results dict."""
    plan = quant_plan()
    models = {label: load_model(weights=w, head_weights=h) for label, w, h in setups}
    chats = [p for p in load_prompts("data/prompts.jsonl")][::8][:prompts]  # one prompt from each of a few categories
    any_lm = next(iter(models.values()))
    ids = [any_lm.chat_ids(p.text) for p in chats]
    labels = list(models)
    curve_runs: dict[str, list[list[float]]] = {k: [] for k in labels}
    speeds: dict[str, list[float]] = {k: [] for k in labels}
    tokens: dict[str, list[list[int]]] = {k: [] for k in labels}
    bar = tqdm(total=rounds * len(labels), disable=not progress, desc="quant_measure")
    for r in range(rounds):
        for label in rotated(labels, r):  # no setup always first
            lm = models[label]
            curve = measure_cost_curve(lm.model, sizes=SIZES, repeats=3, warmup=1)
            curve_runs[label].append(curve.seconds)
            for x in ids:
                t0 = time.perf_counter()
                out = generate(lm, x, max_new_tokens=new_tokens)
                speeds[label].append(len(out.tokens) / (time.perf_counter() - t0))
                if r == 0:
                    tokens[label].append(out.tokens)
            bar.update()
    bar.close()
    curves = {k: [statistics.median(run[i] for run in v) for i in range(len(SIZES))] for k, v in curve_runs.items()}
    return {
        "machine": machine_info(torch.device("cpu")),
        "isa": torch.backends.cpu.get_cpu_capability(),
        "kernels": {"compute": plan["compute"], "rows": plan["rows"], "seconds": plan["seconds"]},
        "setups": {label: weights_record(lm.model) for label, lm in models.items()},
        "cost_curve": {"sizes": list(SIZES), "seconds": curves},
        "plain_decoding": {
            "prompts": [p.question_id for p in chats],
            "new_tokens": new_tokens,
            "tokens_per_second": {k: statistics.median(v) for k, v in speeds.items()},
            "runs": speeds,
            "same_tokens_as_fp32": {
                k: [a == b for a, b in zip(v, tokens["fp32"], strict=True)] for k, v in tokens.items()
            }
            if "fp32" in tokens
            else None,
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.quant_measure", description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="results JSON (e.g. data/bench/avx512-quant.json)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--new-tokens", type=int, default=64)
    a = p.parse_args(argv)
    res = measure(rounds=a.rounds, new_tokens=a.new_tokens)
    print(f"torch CPU ISA: {res['isa']}; kernel activations: {res['kernels']['compute']}")
    print("cost curve (ms) at sizes", res["cost_curve"]["sizes"])
    for k, v in res["cost_curve"]["seconds"].items():
        rel = " ".join(f"{s / v[0]:.2f}" for s in v)
        print(f"  {k:11s} " + " ".join(f"{s * 1e3:6.1f}" for s in v) + f"   t(n)/t(1): {rel}")
    print("plain decoding tokens/s:")
    for k, v in res["plain_decoding"]["tokens_per_second"].items():
        print(f"  {k:11s} {v:6.1f}")
    if a.out:
        write_json(a.out, res)
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
