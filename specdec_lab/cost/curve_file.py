"""A device's verify cost curve as a file: measured with one command on that device, read by notebook 09.

    python -m specdec_lab.cost.curve_file --device cuda --out my_gpu_curve.json     # on the machine with the GPU

measures t(n), the seconds of one cached verify forward of n tokens (`cost.measure_cost_curve`: sizes
interleaved, median of repeats, after `--context` cached tokens), for trees (an explicit tree mask: what
Medusa and Lookahead verify) and chains (the model's causal mask: prompt lookup and the drafts), and writes

    {"format": "specdec_lab.curve/1",
     "model": "smollm2-135m", "dtype": "float32", "device": "cuda", "context": 64, "repeats": 7,
     "machine": {...},                                   # `machine.machine_info`: CPU/GPU, torch, ...
     "points": {"1": 0.0061, "2": 0.0061, ...},          # tree mask: n -> seconds
     "chain_points": {"1": 0.0061, ...}}                 # causal mask (optional in files written by hand)

A file written by hand needs only "points" with n = 1 among them; one curve as `CostCurve.to_dict` writes
it loads too (`CostCurve.from_dict` reads both and checks them).
Use it in notebook 09 (its `device_curve` parameter) or from the command line:

    python -m specdec_lab.bench.redecide data/bench/avx512-after.json --curve my_gpu_curve.json
`load_curve_file` returns what `replay.replay_bench` and `redecide.redecide_bench` take: the tree curve, or a
`ShapedCurve` when the file has both shapes.
"""

from __future__ import annotations

import json
from pathlib import Path

from .curve import TREE_SIZES, CostCurve, CurveInputError, ShapedCurve

__all__ = ["FORMAT", "curve_record", "load_curve_file", "curve_label", "measure_curve_file", "main"]

FORMAT = "specdec_lab.curve/1"


def _points(curve: CostCurve) -> dict[str, float]:
    return {str(n): float(t) for n, t in zip(curve.sizes, curve.seconds, strict=True)}


def curve_record(tree: CostCurve, chain: CostCurve | None = None, **meta) -> dict:
    """The file's JSON for a measured tree curve (and chain curve); meta: model, dtype, device, machine, ..."""
    record = {"format": FORMAT, **meta, "context": tree.context, "points": _points(tree)}
    if chain is not None:
        record["chain_points"] = _points(chain)
    return record


def load_curve_file(path: str | Path) -> CostCurve | ShapedCurve:
    """The curve of a file written by `measure_curve_file` (or by hand: {"points": {"1": s, ...}})."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    try:  # "points" is the tree curve; the file's device and context are both curves'
        tree = CostCurve.from_dict(record, device="file", tree=True)
        if not isinstance(record.get("chain_points"), dict):
            return tree
        chain = CostCurve.from_dict({"points": record["chain_points"]}, device=tree.device, context=tree.context)
    except CurveInputError as err:
        raise CurveInputError(f"{path}: {err}") from None
    return ShapedCurve(chain=chain, tree=tree)


def curve_label(path: str | Path) -> str:
    """A short name for the file's curve: its device and machine as recorded (the file name otherwise)."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    machine = record.get("machine") or {}
    name = machine.get("device_name") or machine.get("cpu") or record.get("device")
    return f"{name} ({Path(path).name})" if name else Path(path).name


def measure_curve_file(model_name: str = "smollm2-135m", device: str = "cpu", dtype: str = "float32",
                       context: int = 64, repeats: int = 7, max_tokens: int = 64) -> dict:  # fmt: skip
    """Load the model on `device` and measure both curves (module docstring); returns the file's record."""
    import torch

    from ..machine import machine_info
    from ..models.load import load_model
    from .curve import measure_cost_curve

    lm = load_model(model_name, device=device, dtype=getattr(torch, dtype))
    sizes = sorted({n for n in TREE_SIZES if n <= max_tokens} | {1, max_tokens})
    tree = measure_cost_curve(lm.model, sizes=sizes, context=context, repeats=repeats, tree=True)
    chain = measure_cost_curve(lm.model, sizes=sizes, context=context, repeats=repeats, tree=False)
    return curve_record(tree, chain, model=model_name, dtype=dtype, device=device, repeats=repeats,
                        machine=machine_info(device))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """python -m specdec_lab.cost.curve_file [--device cuda] [--model smollm2-135m] --out CURVE.json"""
    import argparse

    from ..io import write_json

    p = argparse.ArgumentParser(prog="python -m specdec_lab.cost.curve_file", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="the curve file to write (JSON)")
    p.add_argument("--model", default="smollm2-135m", help="shipped model name, HF folder or .gguf")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, mps, ...")
    p.add_argument("--dtype", default="float32", help="float32, bfloat16, float16")
    p.add_argument("--context", type=int, default=64, help="cached tokens before the verified ones")
    p.add_argument("--repeats", type=int, default=7, help="timed repeats per size (median)")
    p.add_argument("--max-tokens", type=int, default=64, help="the largest n measured")
    a = p.parse_args(argv)
    record = measure_curve_file(a.model, a.device, a.dtype, a.context, a.repeats, a.max_tokens)
    write_json(a.out, record)
    t1 = record["points"]["1"]
    top = record["points"][str(a.max_tokens)]
    print(f"wrote {a.out}: t(1) = {t1 * 1e3:.2f} ms, t({a.max_tokens}) = {top * 1e3:.2f} ms on {a.device}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
