"""The compiled fp32 step's levers against the memory wall, measured together.

    python -m specdec_lab.bench.compile_levers --out data/curves/compile_levers.json

The wall is the floor of a one-token step that reads every fp32 weight once: the weights' bytes over this
machine's read bandwidth (`cost.memory_wall`). A step above it pays Python and per-operator overhead, kernels that
stream a matrix below the bandwidth, and the work between the products (norms, rotary embeddings,
attention). Each lever is one `compiled.CompiledStep` option (the module docstring of `compiled` says what
each does and why the shipped choice is the shipped one):

    eager          no compiling: `_body_forward` with FastLinear's measured plan
    block=6        shipped: the compact forward compiled in blocks of 6 layers, FastLinear's kernels inside,
                   inductor's C++ wrapper around its kernels (the default on a CPU)
    block=0        the whole compact forward as one graph (slowest to compile), C++ wrapper
    block=0+python_wrapper   the whole graph with the Python wrapper
    freezing       inductor's freezing: weights as constants, prepacked by oneDNN
    inductor_mm    the linears as plain products inductor lowers itself, not the measured plan's kernels
    python_wrapper block=6 with inductor's Python wrapper around its kernels (shipped before the C++ one)

t(1) and t(8) of every lever are timed in one loop — each round runs every lever once, the order rotated
(`timing.interleaved_curves`), the median kept — so load from another process hits them alike; compile
seconds are timed apart. The file records the wall measured in the same process and, per lever, its curve
(`CostCurve.to_dict`; files written before held "points": {"1": s, "8": s}) and its t(1) over the wall.
"""

from __future__ import annotations

import argparse
import sys
import time

from ..cost.curve import CostCurve
from ..cost.timing import Contender, interleaved_curves

__all__ = ["LEVERS", "measure_levers", "main"]

FORMAT = "specdec_lab.compile_levers/1"
# lever -> CompiledStep options (None: eager)
LEVERS: dict[str, dict | None] = {
    "eager": None,
    "block=6": {"block": 6},
    "block=0": {"block": 0},
    "block=0+python_wrapper": {"block": 0, "cpp_wrapper": False},
    "freezing": {"block": 6, "freezing": True},
    "inductor_mm": {"block": 6, "fast_kernels": False},
    "python_wrapper": {"block": 6, "cpp_wrapper": False},
}


def measure_levers(model, levers: dict[str, dict | None], sizes=(1, 8), context: int = 64, repeats: int = 7,
                   progress=None) -> dict:  # fmt: skip
    """{lever: {"compile_seconds", "options", **its median curve's `to_dict`}} for `model` (fp32), timed in one loop."""
    from ..models.compiled import CompiledStep, capacity_for

    steps, record = {}, {}
    for name, options in levers.items():
        if options is None:
            steps[name], record[name] = None, {"compile_seconds": 0.0}
            continue
        step = CompiledStep(model=model, capacity=capacity_for(context + max(sizes)), **options)
        print(f"compile_levers: compiling {name} ...", file=sys.stderr)
        t0 = time.perf_counter()
        step.warm_up(buckets=sizes)
        steps[name], record[name] = step, {"options": options, "compile_seconds": round(time.perf_counter() - t0, 1)}
    contenders = {name: Contender(model, step=steps[name]) for name in levers}
    cmp = interleaved_curves(contenders, sizes, context, repeats, warmup=1, progress=progress)  # warm-up: not kept
    return {name: {**record[name], **curve.to_dict()} for name, curve in cmp.curves.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.compile_levers", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--levers", default=",".join(LEVERS), help=f"comma-separated, of: {', '.join(LEVERS)}")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default="data/curves/compile_levers.json")
    a = p.parse_args(argv)
    names = [x.strip() for x in a.levers.split(",") if x.strip()]
    unknown = [x for x in names if x not in LEVERS]
    if unknown or not names or a.repeats < 1:
        p.error(f"unknown lever(s) {', '.join(unknown)}; known: {', '.join(LEVERS)}" if unknown or not names
                else "--repeats must be >= 1")  # fmt: skip
    from tqdm.auto import tqdm

    from ..cost.memory_wall import memory_wall
    from ..io import write_json
    from ..machine import machine_info
    from ..models.load import load_model

    lm = load_model(a.model)
    levers = measure_levers(lm.model, {x: LEVERS[x] for x in names}, repeats=a.repeats, progress=tqdm)
    wall = memory_wall(lm.model)  # measured after the levers: the bandwidth of the same loaded moment
    curves = {name: CostCurve.from_dict(v) for name, v in levers.items()}
    for name, v in levers.items():
        v["t1_over_wall"] = round(curves[name](1) * 1e3 / wall["wall_ms_per_token"], 2)
    write_json(a.out, {"format": FORMAT, "model": a.model, "machine": machine_info("cpu"), "memory_wall": wall,
                       "repeats": a.repeats, "levers": levers})  # fmt: skip
    for name, v in levers.items():
        t = curves[name]
        print(f"{name:22s} t(1) {t(1) * 1e3:6.1f} ms  t(8) {t(8) * 1e3:6.1f} ms  "
              f"{v['t1_over_wall']:.2f}x wall  compile {v['compile_seconds']} s")  # fmt: skip
    print(f"wall {wall['wall_ms_per_token']} ms ({wall['weights_mb']} MB at {wall['read_gb_s']} GB/s); wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
