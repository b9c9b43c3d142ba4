"""`python -m specdec_lab.models --check`: find the model file, build its fp32 cache, measure this machine's kernels.

`make setup` runs it once; `--retune` measures the linear kernels again (on a quiet machine).
"""

from __future__ import annotations

import argparse

from ..machine import machine
from .fast_linear import tune_linear
from .load import _dequantized_copy, _resolve, load_model
from .quant import quant_plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Locate (and cache) the shipped models.")
    parser.add_argument(
        "--check",
        action="store_true",
        help="find the model file, build the fp32 cache, and measure this machine's linear kernels (cached)",
    )
    parser.add_argument("--retune", action="store_true", help="measure the linear kernels again (quiet machine)")
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args(argv)
    kind, path = _resolve(args.model)
    print(f"{args.model}: {kind} at {path}")
    if args.check and kind == "gguf":
        print(f"fp32 cache: {_dequantized_copy(path)}")
    if args.check or args.retune:
        print(machine().describe())
        lm = load_model(args.model, tune_kernels=False)
        for shape, plan in tune_linear(lm.model, refresh=args.retune).items():
            print(f"linear kernels {shape:>12}: {plan}")
        print(f"int8/int4 kernels' activation dtype: {quant_plan(refresh=args.retune)['compute']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
