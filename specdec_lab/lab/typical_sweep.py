"""Typical acceptance's trade-off, measured: Medusa's speed against the fidelity of what it emits, as ε sweeps.

Medusa's typical acceptance (`accept.typical_rule`, Cai et al. 2024, section 2.3.1) accepts a candidate x iff
p(x) > min(ε, δ·exp(−H(p))), with δ = √ε (the paper's section 3.3.2). It is lossy: a smaller ε accepts more
(faster) and moves the output further from p. The exact one-hot rule (`accept="exact"`) is the reference at
both ends: its output follows p, and its speed is what exactness costs. Per ε, and for the exact rule:

* speed — `generate(method="medusa", accept=rule, temperature=T)` on every prompt, `repeats` times; the
  rules (and autoregressive sampling, the baseline) run interleaved, one loop over (prompt, repeat) with the
  order rotated each time, so a machine's drift hits every rule alike. Every config first runs once, short and
  untimed (`warmup_tokens`): a method's first call pays one-time costs that belong to no rule. Tokens per
  second, the same on the decode alone (each prompt's prefill taken out: sampled texts differ in length) and
  tokens per target forward ("mean accepted", bonus included).
* fidelity — the total variation between the distribution of the first token a step emits and the target's
  p at that context, averaged over the steps of a decode. At every step of a run (the contexts the rule's
  own decoding visits) `FirstTokenTV` draws the rule `draws` times on the step's tree and logits with a
  generator of its own, histograms the first emitted token and takes TV(histogram, p). The exact rule's
  value with the same draws is the noise floor: what sampling noise alone gives (its true TV is 0), so a
  typical ε is only measurably lossy where its TV stands above that floor.

    python -m specdec_lab.lab.typical_sweep                      # writes data/bench/typical_sweep.json
    python -m specdec_lab.lab.typical_sweep --epsilons 0.01,0.09 --per-category 1 --max-new-tokens 32 --out x.json

The file is rewritten atomically after every rule's fidelity pass and at the end.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..accept.registry import get_accept_rule
from ..accept.typical import typical_rule
from ..cost.timing import rotated
from ..io import DATA_DIR, write_json
from ..sampling import GREEDY, Sampling, warp_probs

__all__ = ["FirstTokenTV", "typical_sweep", "DEFAULT_OUT", "main"]

DEFAULT_OUT = DATA_DIR / "bench" / "typical_sweep.json"
EXACT = "exact"


@dataclass
class FirstTokenTV:
    """An acceptance rule that also measures, at every step, TV(first emitted token's distribution, p).

    The estimate uses `draws` extra calls of `rule` on the step's (tree, logits) with its own generator, so the
    decode itself (the call that returns) draws from the loop's generator exactly as `rule` alone would.
    """

    rule: Callable
    draws: int = 200
    seed: int = 0
    tvs: list[float] = field(default_factory=list)

    @property
    def __name__(self) -> str:
        return f"first_token_tv({getattr(self.rule, '__name__', 'rule')})"

    def __call__(self, tree, logits: torch.Tensor, sampling: Sampling = GREEDY, generator=None, **kw):
        p = warp_probs(logits[0], sampling).double()  # (V,) the target's next-token distribution at the root
        gen = torch.Generator(device=logits.device).manual_seed(self.seed + len(self.tvs))
        counts = torch.zeros_like(p)
        for _ in range(self.draws):
            acc = self.rule(tree, logits, sampling=sampling, generator=gen)
            counts[int(tree.tokens[acc.path[1]]) if len(acc.path) > 1 else acc.bonus] += 1
        self.tvs.append(0.5 * float((counts / self.draws - p).abs().sum()))
        return self.rule(tree, logits, sampling=sampling, generator=generator, **kw)


def _rules(epsilons: Sequence[float]) -> dict[str, object]:
    """name -> accept argument: the exact rule, then typical at each ε with δ = √ε."""
    return {EXACT: EXACT} | {f"typical eps={e:g}": typical_rule(e, math.sqrt(e)) for e in epsilons}


def _speed(s: dict) -> dict:
    """A rule's timed totals -> tokens/s (prefill included), decode tokens/s (prefill taken out) and mean accepted.

    Sampled rules emit texts of different lengths from one prompt, and the prompt's prefill (the same work for
    every rule) spread over fewer tokens would read as a slower rule: the decode rate is the comparison.
    """
    return {"tokens_per_s": s["tokens"] / s["seconds"],
            "decode_tokens_per_s": s["tokens"] / max(s["seconds"] - s["prefill"], 1e-9),
            "mean_accepted": s["tokens"] / max(s["forwards"], 1)}  # fmt: skip


def _mean_sem(xs: list[float]) -> tuple[float, float]:
    n = len(xs)
    mean = sum(xs) / max(n, 1)
    var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var / n) if n else 0.0


def typical_sweep(
    model,
    prompts: Sequence,
    epsilons: Sequence[float] = (0.01, 0.03, 0.09, 0.2, 0.3),
    *,
    temperature: float = 0.7,
    top_p: float | None = None,
    max_new_tokens: int = 64,
    repeats: int = 1,
    draws: int = 200,
    seed: int = 0,
    warmup_tokens: int = 8,
    medusa: dict | None = None,
    out: str | Path | None = None,
    record: dict | None = None,
    progress: bool = True,
) -> dict:
    """Speed and first-token TV of Medusa with the exact rule and typical acceptance at each ε (module docstring).

    prompts: token-id lists or texts (as `generate` takes them); medusa: the method's parameters (heads, tree, ...).
    Returns {"rows": [per rule: speed, mean accepted, TV mean/sem/contexts], ...record}; written to `out` if given.
    """
    from tqdm.auto import tqdm

    from ..generate import generate

    medusa = dict(medusa or {})
    rules = _rules(epsilons)
    kw = dict(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, trace=False)
    timed = {"autoregressive": dict(method="autoregressive")} | {
        name: dict(method="medusa", accept=accept, **medusa) for name, accept in rules.items()
    }
    speed = {name: {"tokens": 0, "seconds": 0.0, "prefill": 0.0, "forwards": 0} for name in timed}
    names = list(timed)
    points = [(i, r) for i in range(len(prompts)) for r in range(repeats)]
    bar = tqdm(total=len(points) * len(names) + len(rules) * len(prompts), desc="typical sweep", disable=not progress)
    # Warm-up, untimed: one short run of every timed config, as the bench does. A method's first call pays its
    # one-time costs (heads loaded, the cost curve measured, kernels chosen); whichever rule ran first would
    # otherwise carry them in its tokens/s.
    for name in names:
        generate(model, prompts[0], seed=seed, **(kw | dict(max_new_tokens=min(warmup_tokens, max_new_tokens))),
                 **timed[name])  # fmt: skip
    for turn, (i, r) in enumerate(points):  # interleaved: every rule once per point, the order rotated
        for name in rotated(names, turn):
            res = generate(model, prompts[i], seed=seed + r, **kw, **timed[name])
            s = speed[name]
            s["tokens"], s["seconds"], s["forwards"] = s["tokens"] + len(res.tokens), s["seconds"] + res.seconds, \
                s["forwards"] + res.forwards  # fmt: skip
            s["prefill"] += res.prefill_seconds or 0.0
            bar.update()
    rows = [{"rule": "autoregressive", "epsilon": None, "delta": None, **_speed(speed["autoregressive"])}]
    result = dict(record or {}) | {
        "config": {"epsilons": list(epsilons), "temperature": temperature, "top_p": top_p,
                   "max_new_tokens": max_new_tokens, "repeats": repeats, "draws": draws, "seed": seed,
                   "warmup_tokens": warmup_tokens, "prompts": len(prompts)},
        "rows": rows,
    }  # fmt: skip
    for name, accept in rules.items():
        meter = FirstTokenTV(get_accept_rule(accept), draws=draws, seed=seed)
        for prompt in prompts:
            generate(model, prompt, method="medusa", accept=meter, seed=seed, **kw, **medusa)
            bar.update()
        tv, sem = _mean_sem(meter.tvs)
        s = speed[name]
        eps = None if accept == EXACT else accept.epsilon
        rows.append({"rule": name, "epsilon": eps, "delta": None if eps is None else accept.delta, **_speed(s),
                     "tv": tv, "tv_sem": sem, "contexts": len(meter.tvs)})  # fmt: skip
        if out is not None:
            write_json(out, result)
    bar.close()
    floor = next(row["tv"] for row in rows if row["rule"] == EXACT)
    for row in rows:
        if "tv" in row:
            row["tv_above_floor"] = row["tv"] - floor
    if out is not None:
        write_json(out, result)
    return result


# ---- command line -------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.lab.typical_sweep",
        description="Medusa with typical acceptance: speed against first-token TV as epsilon sweeps (delta = sqrt).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", default="smollm2-135m", help="target model")
    p.add_argument("--epsilons", default="0.01,0.03,0.09,0.2,0.3", help="comma-separated ε (δ = √ε)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--per-category", type=int, default=1, help="prompts per category of data/prompts.jsonl")
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=2, help="timed runs per prompt and rule")
    p.add_argument("--draws", type=int, default=200, help="rule draws per step for the first-token TV")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup-tokens", type=int, default=8, help="length of the one untimed run per rule first")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="result JSON (written atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    from ..io import load_prompts
    from ..machine import machine_info
    from ..models.load import load_model, model_record, prompt_ids

    a = build_parser().parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    lm = load_model(a.model)
    counts: dict[str, int] = {}
    chosen = []
    for prompt in load_prompts():  # the first per_category prompts of every category, in file order
        if counts.get(prompt.category, 0) < a.per_category:
            counts[prompt.category] = counts.get(prompt.category, 0) + 1
            chosen.append(prompt)
    args = argv if argv is not None else sys.argv[1:]
    record = {
        "what": "Medusa: typical acceptance at each epsilon (delta = sqrt) against the exact one-hot rule: speed and "
        "the TV of the first emitted token's distribution from p (exact rule = noise floor); typical_sweep.py",
        "command": shlex.join(["python", "-m", "specdec_lab.lab.typical_sweep", *args]),
        "target": model_record(lm),
        "machine": machine_info(next(lm.model.parameters()).device),
        "question_ids": [p.question_id for p in chosen],
    }  # fmt: skip
    result = typical_sweep(
        lm, [prompt_ids(p, lm.tokenizer) for p in chosen], [float(e) for e in a.epsilons.split(",")],
        temperature=a.temperature, top_p=a.top_p, max_new_tokens=a.max_new_tokens, repeats=a.repeats,
        draws=a.draws, seed=a.seed, warmup_tokens=a.warmup_tokens, out=a.out, record=record, progress=not a.quiet,
    )  # fmt: skip
    for row in result["rows"]:
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, file=sys.stderr)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
