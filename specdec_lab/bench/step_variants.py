"""The verify step built four ways (eager or compiled, fp32 or int8/int4 weights) as cost curves, measured together.

    python -m specdec_lab.bench.step_variants --variants fp32,fp32+compile,int8,int4 \\
        --out data/curves/step_variants.json

A variant is `<weights>[+head=H][+compile]`: the weights `load_model(..., weights=)` holds ("fp32", "int8",
"int4"), the LM head's format where named (`quant.HEADS`; else `load_model`'s default) and whether the verify
step is compiled. Each variant is its own model object; `measure_variants` times
t(n) for all of them in one loop — each repeat runs one pass over the sizes per variant, the variants'
order rotated from repeat to repeat (`timing.interleaved_curves`), the median kept — so a burst of load
from another process hits every variant alike. The file:

    {"format": "specdec_lab.step_variants/1", "model": ..., "machine": {...}, "context": 64, "repeats": 7,
     "variants": {"int8": {"weights": "int8", "compile": false, "load_seconds": ..., "warmup_seconds": ...,
                           "sizes": [1, 2, ...], "seconds": [s, s, ...], ...}, ...}}     # + CostCurve.to_dict()

(files written before the curve's own JSON held "points": {"1": s, ...} instead: they load the same).
`variant_curves` reads it back as `CostCurve`s, which is what notebook 12 draws and what `replay.replay_bench`
re-prices a recorded bench under: why a cheaper step changes what speculation buys. With s the seconds of
the loop's own work per step (acceptance, the proposer, bookkeeping) and τ the tokens a step emits,

    speedup ≈ τ · (t(1) + s₁) / (t(n) + s)

so a step made cheaper by a constant factor leaves the ratio alone only if s shrinks with it. Compiling
removes per-operator overhead from t but not from s; smaller weights cut the bytes of t(1) most, while the
dequantisation work of an n-row product grows with n, so t(n)/t(1) rises. Both push the ratio down, and
the replay says by how much for each recorded method.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ..cost.curve import CostCurve, measure_cost_curve
from ..cost.timing import Contender, interleaved_curves
from .builds import Build, parse_build

__all__ = [
    "FORMAT",
    "StepVariant",
    "parse_variants",
    "measure_variants",
    "variant_curves",
    "replay_variants",
    "main",
]

FORMAT = "specdec_lab.step_variants/1"
SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


StepVariant = Build  # weights[+compile]: the same builds the bench runs as `method@build`


def parse_variants(text: str) -> list[StepVariant]:
    """Parse "fp32,fp32+compile,int8" into variants; a clear error for anything else."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("no step variant given (e.g. --variants fp32,int8)")
    out = [parse_build(part) for part in parts]
    if len({v.name for v in out}) < len(out):
        raise ValueError(f"a step variant is named twice in {text!r}")
    return out


def measure_variants(
    models: Mapping[str, object],
    steps: Mapping[str, object] | None = None,
    sizes: Sequence[int] = SIZES,
    context: int = 64,
    repeats: int = 7,
    warmup: int = 1,
    progress: Callable | None = None,
) -> dict[str, CostCurve]:
    """t(n) of each model (same sizes and context), interleaved and rotated per repeat; the median per size.

    steps: {name: a `compiled.CompiledStep`} for the compiled variants (absent: eager). The first `warmup`
    rounds are not kept (they also compile a compiled step's buckets). Each round of each
    model is `cost.measure_cost_curve(repeats=1)`: a fresh cache with `context` cached tokens (untimed), then
    one timed verify forward per size.
    """
    contenders = {name: Contender(model, step=(steps or {}).get(name)) for name, model in models.items()}
    return interleaved_curves(contenders, sizes, context, repeats, warmup, progress).curves


def variant_curves(record: Mapping) -> dict[str, CostCurve]:
    """The curves of a file written by `main` (variant name -> CostCurve), in the file's order."""
    if record.get("format") != FORMAT:
        raise ValueError(f"not a step-variants file (format {record.get('format')!r}, expected {FORMAT!r})")
    device, context = record.get("device", "cpu"), int(record.get("context", 0))  # older files: theirs, here
    return {name: CostCurve.from_dict(v, device=device, context=context) for name, v in record["variants"].items()}


def replay_variants(results: Mapping, curves: Mapping[str, CostCurve], base: str = "fp32",
                    scale_overhead: bool = True) -> dict[str, dict[str, float]]:  # fmt: skip
    """Predicted speedup of every traced method of a bench run (`results`) if its step were each variant's.

    The run was measured on the eager fp32 step at some moment's speed; the variants at another. So each
    variant's curve is first put on the run's own scale, t'(n) = t_v(n) · t_run(1) / t_base(1)
    (`replay.curve_from_traces` gives t_run): what the file keeps is how a variant changes the step, not
    how loaded the machine was. scale_overhead: the loop's and the proposers' own seconds shrink like t(1)
    (True: their model work — drafts, heads — speeds up as the target's does) or stay as measured (False:
    host-side Python, which neither compiling the target nor shrinking its weights touches). The two bracket
    the truth. Returns {variant: {method: predicted speedup over autoregressive on the same variant}}.
    """
    from .replay import curve_from_traces, replay_bench

    if base not in curves:
        raise ValueError(f"base variant {base!r} is not among the curves {list(curves)}")
    own = curve_from_traces(results)
    to_run = own(1) / curves[base](1)
    out = {}
    for name, c in curves.items():
        rel = c(1) / curves[base](1)
        scaled = CostCurve(list(c.sizes), [t * to_run for t in c.seconds], device=c.device, context=c.context)
        s = rel if scale_overhead else 1.0
        rows = replay_bench(dict(results), scaled, reference=own, draft_scale=s, overhead_scale=s)
        out[name] = {r["method"]: r["predicted_speedup"] for r in rows}
    return out


def _load(model: str, variant: StepVariant):
    from ..models.load import load_model

    t0 = time.perf_counter()
    head = {"head_weights": variant.head} if variant.head else {}
    lm = load_model(model, weights=variant.weights, compile=variant.compile, **head)
    return lm, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.step_variants", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--variants", default="fp32,fp32+compile,int8,int4,int8+compile,int4+compile")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default="data/curves/step_variants.json")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    import torch
    from tqdm.auto import tqdm

    from ..io import write_json
    from ..machine import machine_info

    try:
        variants = parse_variants(a.variants)
        sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
        if 1 not in sizes:  # a curve is read back only with t(1), the step every ratio is taken to
            raise ValueError(f"--sizes must include 1, got {a.sizes!r}")
    except ValueError as e:
        p.error(str(e))
    models, steps, meta = {}, {}, {}
    for v in variants:
        print(f"step_variants: loading {v.name} ...", file=sys.stderr)
        lm, seconds = _load(a.model, v)
        models[v.name] = lm.model
        if lm.step is not None:
            steps[v.name] = lm.step
        elif v.compile:
            p.error(f"{v.name}: this model cannot be compiled here (the warning above says why)")
        meta[v.name] = {"weights": v.weights, "compile": v.compile, "load_seconds": round(seconds, 1)}
    for v in variants:  # the first rounds of a compiled step compile its buckets: timed apart, never kept
        t0 = time.perf_counter()
        if v.name in steps:
            steps[v.name].warm_up()
        measure_cost_curve(models[v.name], sizes=sizes, context=a.context, repeats=1, warmup=0,
                           step=steps.get(v.name))  # fmt: skip
        meta[v.name]["warmup_seconds"] = round(time.perf_counter() - t0, 1)
    curves = measure_variants(models, steps, sizes, a.context, a.repeats, warmup=1,
                              progress=None if a.no_progress else tqdm)  # fmt: skip
    record = {"format": FORMAT, "model": a.model, "machine": machine_info("cpu"), "context": a.context,
              "repeats": a.repeats, "threads": torch.get_num_threads(),
              "variants": {name: {**meta[name], **c.to_dict()} for name, c in curves.items()}}  # fmt: skip
    write_json(Path(a.out), record)
    for name, c in curves.items():
        print(f"{name:>14}: t(1) {c(1) * 1e3:.1f} ms, t(8)/t(1) {c(8) / c(1):.2f}" if 8 in c.sizes else name)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
