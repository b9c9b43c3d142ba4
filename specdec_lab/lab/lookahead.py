"""Lookahead decoding observed (notebook 07): a proposer that reports its n-gram pool after every step.

    RecordingLookahead(LookaheadConfig(W=4, N=4, G=4))   pass as generate(proposer=...); decodes exactly as
                                                         `LookaheadProposer` does
    viz.lookahead_pool.pool_frame(result)                its trace as one row per step (pool size included)

    paper_sizes_frame(results)   a bench results file of autoregressive, lookahead (W="auto": the sizes this
                                 machine chooses) and lookahead at the paper's W = 15, N = 5, G = 15, one row
                                 per lookahead method (`python -m specdec_lab.bench --methods PAPER_METHODS`)

It lives here, not in viz: it decodes (a proposer subclass), and viz only draws what a decode returned.
"""

from __future__ import annotations

from ..bench.trace import steps_of
from ..proposers.lookahead import WINDOW, LookaheadProposer

__all__ = ["RecordingLookahead", "PAPER_SIZES", "PAPER_METHODS", "paper_sizes_frame"]


class RecordingLookahead(LookaheadProposer):
    """A LookaheadProposer whose `info()` also reports the pool after the step: `pool_keys` (first tokens),
    `pool_grams` (n-grams) and `pool_window` (of those, harvested from the window and not seen in the
    text). Decoding is unchanged: build it with a `LookaheadConfig` and pass `generate(proposer=...)`."""

    def info(self) -> dict:
        sources = [s for grams in self.pool.table.values() for s in grams.values()]
        return {
            **super().info(),
            "pool_keys": len(self.pool.table),
            "pool_grams": len(sources),
            "pool_window": sources.count(WINDOW),
        }


# ---- Lookahead at the paper's sizes beside the sizes this machine chooses (a bench results file) -------
PAPER_SIZES = {"W": 15, "N": 5, "G": 15}  # Llama-2-7B-chat in hao-ai-lab/LookaheadDecoding, applications/run_mtbench.sh
PAPER_METHODS = "autoregressive,lookahead,lookahead:W=15:N=5:G=15"  # what `paper_sizes_frame` compares
# The bench command behind data/bench/lookahead_paper_sizes.json (notebook 07, section 6):
#   python -m specdec_lab.bench --methods autoregressive,lookahead,lookahead:W=15:N=5:G=15 --per-category 1 \
#       --max-new-tokens 64 --repeats 2 --out data/bench/lookahead_paper_sizes.json


def _sizes(label: str) -> dict:
    """W, N, G a lookahead method label runs with: its spec's values over `LookaheadConfig`'s defaults."""
    from ..proposers.lookahead import LookaheadConfig
    from ..proposers.registry import parse_method_spec

    spec, config = parse_method_spec(label), LookaheadConfig()
    return {k: spec.params.get(k, getattr(config, k)) for k in ("W", "N", "G")}


def paper_sizes_frame(results: dict):
    """One row per lookahead method of a bench results file (`specdec_lab.bench`, traces on): its sizes, tokens
    per step (mean accepted, bonus included), tokens verified per forward (root included, from the traces),
    the share of steps that verified a window, tokens/s and the speed-up over autoregressive with its 95%
    paired-bootstrap interval, and whether every output equalled autoregressive decoding's.

    W "auto" rows also give the widths the sizer ended with, per prompt (`widths chosen`)."""
    import pandas as pd

    rows = {}
    for label, s in results["summary"].items():
        if not label.startswith("lookahead"):
            continue
        runs = [r for r in results["rows"] if r["method"] == label]
        steps = [st for r in runs if r.get("trace") for st in steps_of(r)]
        props = [r.get("proposer") or {} for r in runs]
        window_steps, all_steps = sum(p.get("window_steps", 0) for p in props), sum(p.get("steps", 0) for p in props)
        sizes = _sizes(label)
        lo, hi = s.get("speedup_95") or (float("nan"), float("nan"))  # None: too few prompts for an interval
        rows[label] = {
            **sizes,
            "widths chosen": ", ".join(str(w) for w in sorted({p["W"] for p in props if "W" in p}))
            if sizes["W"] == "auto"
            else str(sizes["W"]),
            "prompts": s["prompts"],
            "tokens per step": s["mean_accepted"],
            "tokens verified / forward": sum(st.nodes for st in steps) / len(steps) if steps else float("nan"),
            "steps with a window": window_steps / all_steps if all_steps else float("nan"),
            "tokens/s": s["tokens_per_s"],
            "speed-up vs autoregressive": s["speedup"],
            "95% low": lo,
            "95% high": hi,
            "identical to autoregressive": s["identical_to_autoregressive"] == 1.0,
        }
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("method")
