"""Mean accepted per step against the sampling temperature, per method and acceptance rule, on the real model.

Tokens per target forward ("mean accepted", bonus included) is what a tree buys before any timing: at T = 0 a
rule accepts a draft iff it is the target's argmax; at T > 0 the exact rules accept a deterministic candidate
x with probability p(x) (one-hot rule), so a flatter p (higher T) accepts less, while typical acceptance keeps
accepting whatever clears its threshold (lossy). Counting needs no clock, so the points run one after another.

Per (method, rule) in `CONFIGS` and temperature T: `generate(method, accept=rule, temperature=T, top_p=...)` on
every prompt, summing emitted tokens and target forwards. Rows: method, rule, temperature, mean accepted,
tokens, forwards.

    python -m specdec_lab.lab.accepted_temperature            # writes data/bench/accepted_temperature.json
    python -m specdec_lab.lab.accepted_temperature --temperatures 0,1 --limit 1 --max-new-tokens 16 --out x.json

The file is rewritten atomically after every point.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ..io import DATA_DIR, write_json

__all__ = ["CONFIGS", "DEFAULT_OUT", "accepted_vs_temperature", "main"]

DEFAULT_OUT = DATA_DIR / "bench" / "accepted_temperature.json"
# (method, rule): None = the method's default (greedy at T = 0, its exact rule when sampling)
CONFIGS: list[tuple[str, str | None]] = [
    ("prompt_lookup", None),
    ("medusa", None),
    ("medusa", "traversal"),
    ("medusa", "typical"),
    ("lookahead", None),
    ("lookahead", "typical"),
]


def accepted_vs_temperature(
    model,
    prompts: Sequence,
    temperatures: Sequence[float] = (0.0, 0.3, 0.7, 1.0),
    configs: Sequence[tuple[str, str | None]] = tuple(CONFIGS),
    *,
    top_p: float | None = 0.9,
    max_new_tokens: int = 32,
    seed: int = 0,
    out: str | Path | None = None,
    record: dict | None = None,
    progress: bool = True,
) -> dict:
    """{"rows": [{method, rule, temperature, mean_accepted, tokens, forwards}], ...record}; written to `out`.

    prompts: token-id lists or texts (as `generate` takes them). At T = 0 every rule is greedy (top_p unused):
    the named rules reduce to it there, so each method gets one T = 0 point per rule, all equal by design.
    """
    from tqdm.auto import tqdm

    from ..generate import generate

    result = dict(record or {}) | {"rows": []}
    points = [(t, m, r) for t in temperatures for m, r in configs]
    for t, method, rule in tqdm(points, disable=not progress, desc="accepted vs T"):
        tokens = forwards = 0
        for i, prompt in enumerate(prompts):
            sampled = float(t) > 0
            r = generate(model, prompt, method=method, accept=rule if sampled else None, temperature=float(t),
                         top_p=top_p if sampled else None, max_new_tokens=max_new_tokens, seed=seed + i,
                         trace=False)  # fmt: skip
            tokens, forwards = tokens + len(r.tokens), forwards + r.forwards
        result["rows"].append({"method": method, "rule": rule or "exact", "temperature": float(t),
                               "mean_accepted": tokens / max(forwards, 1), "tokens": tokens,
                               "forwards": forwards})  # fmt: skip
        if out is not None:
            write_json(out, result)
    return result


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m specdec_lab.lab.accepted_temperature", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--temperatures", default="0,0.3,0.7,1.0", help="comma-separated")
    ap.add_argument("--top-p", type=float, default=0.9)
    ap.add_argument("--limit", type=int, default=3, help="first N prompts of data/prompts.jsonl")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--no-progress", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    from ..io import load_prompts
    from ..machine import machine_info
    from ..models.load import load_model

    a = build_parser().parse_args(argv)
    model = load_model(a.model)
    prompts = [p.text if p.text is not None else p.ids for p in load_prompts()[: a.limit]]
    temperatures = [float(t) for t in a.temperatures.split(",")]
    record = {
        "what": "mean accepted (tokens per target forward) against temperature per method and rule; "
        "accepted_temperature.py",
        "command": "python -m specdec_lab.lab.accepted_temperature "
        + shlex.join(sys.argv[1:] if argv is None else argv),
        "machine": machine_info(),
        "config": dict(temperatures=temperatures, top_p=a.top_p, prompts=len(prompts), max_new_tokens=a.max_new_tokens,
                       seed=a.seed),
    }  # fmt: skip
    accepted_vs_temperature(model, prompts, temperatures, top_p=a.top_p, max_new_tokens=a.max_new_tokens,
                            seed=a.seed, out=a.out, record=record, progress=not a.no_progress)  # fmt: skip
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
