"""α of a draft against the sampling temperature: the real-model version of notebook 01's one number.

Two estimates at each temperature T, on the same prompts, with p and q warped by the same T (no top-k/top-p
unless asked), so both are the acceptance that exact speculative sampling at T actually has:

    α_TV  = mean_t β_t,  β_t = Σ_x min(p_T(x | c_t), q_T(x | c_t)) = 1 − TV(p_T, q_T)     (teacher-forced)

        over the answer positions t of a text sampled from the target at T (c_t = prompt + answer[:t]).
        This is Leviathan et al.'s α = E[β]: the probability that one draft token is accepted, averaged over
        the contexts decoding visits. The text is the output of the speculative run below, which is
        distributed exactly as the target's own sampling at T (that is losslessness), so the contexts are
        the right ones. At T = 0 both distributions are one-hot on their argmax: β_t = 1[argmax q = argmax p],
        greedy agreement (what `train draft` reports as held-out α, there on the held-out training text).

    α_run = accepted / reached                                          (realised, fixed draft length k)

        counted in that speculative run: a draft position is *reached* when every earlier draft of its step
        was accepted; accepted / reached is the per-token rate (drafts after a rejection are never checked,
        so accepted / drafted would understate it). Its contexts include accepted draft tokens, and its
        count is a sample (β_t is an expectation), so it scatters around α_TV.

Also per temperature: tokens per target forward in the run, and what (1 − α^{k+1})/(1 − α) predicts from
α_run (notebook 01's i.i.d. formula; notebook 02, section 3, shows where it misses).

    python -m specdec_lab.lab.alpha_temperature                    # writes data/bench/draft_alpha_temperature.json
    python -m specdec_lab.lab.alpha_temperature --temperatures 0,1 --per-category 1 --max-new-tokens 16 --out x.json

The file is rewritten atomically after every (prompt, temperature) point, and a run with the same
configuration resumes from it (`--fresh` starts over).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..io import DATA_DIR, load_prompts, write_json
from ..sampling import Sampling, warp_probs

__all__ = [
    "AlphaTemperatureConfig",
    "DEFAULT_OUT",
    "teacher_forced_beta",
    "realised_counts",
    "measure_point",
    "summarise",
    "measure",
    "main",
]

DEFAULT_OUT = DATA_DIR / "bench" / "draft_alpha_temperature.json"
# What a resumed run may differ in without changing any number of the points already measured.
RESUME_IGNORES = ("out", "fresh", "quiet", "threads")


@dataclass
class AlphaTemperatureConfig:
    model: str = "smollm2-135m"  # target: shipped name, HF directory or .gguf
    draft: str = "default"  # draft argument of `draft_model.get_draft` ("default", "layer_skip:N", a folder)
    temperatures: list[float] = field(default_factory=lambda: [0.0, 0.3, 0.7, 1.0])
    top_p: float | None = None  # applied to p and q alike; None: temperature only
    prompts: str = ""  # question.jsonl; "" = the benchmark's data/prompts.jsonl
    per_category: int = 2  # the first N prompts of every category
    max_new_tokens: int = 64  # answer length per point
    draft_length: int = 4  # fixed k of the speculative run (α_run, tokens per forward)
    seed: int = 0  # sampling seed of every run (T > 0)
    threads: int = 2  # torch CPU threads
    out: str = str(DEFAULT_OUT)
    fresh: bool = False
    quiet: bool = False


# ---- the two estimates ------------------------------------------------------------------------------
@torch.inference_mode()
def teacher_forced_beta(target, draft, prompt_ids: list[int], answer: list[int], sampling: Sampling) -> np.ndarray:
    """(n,) β_t = Σ_x min(p_T, q_T) at each answer position t = 0..n−1 (context prompt + answer[:t]).

    target: the HF causal LM; draft: a `draft_model.Draft`. One forward of each over prompt + answer. The
    draft's q is the proposer's: its readout, its drafting vocabulary plus the prompt's tokens (q = 0
    elsewhere), warped like p.
    """
    ids = torch.tensor([list(prompt_ids) + list(answer)], device=next(target.parameters()).device)  # (1, L)
    rows = slice(len(prompt_ids) - 1, len(prompt_ids) - 1 + len(answer))  # logits that predict answer[t]
    p = warp_probs(target(ids).logits[0, rows], sampling)  # (n, V)
    q = warp_probs(draft.logits(ids, extra=list(prompt_ids))[0, rows], sampling)  # (n, V)
    return torch.minimum(p, q).sum(-1).double().cpu().numpy()


def realised_counts(result, k: int) -> dict:
    """Per-token counts of one speculative run with fixed draft length k (steps that drafted k tokens).

    reached: draft positions whose earlier drafts were all accepted (min(accepted + 1, k) per step);
    accepted: drafts accepted; steps and tokens: for tokens per target forward.
    """
    full = [s for s in result.steps if s.proposed == k]
    return {
        "steps": len(full),
        "reached": int(sum(min(s.accepted + 1, k) for s in full)),
        "accepted": int(sum(s.accepted for s in full)),
        "tokens": int(sum(s.accepted + 1 for s in full)),
    }


def measure_point(
    target,
    draft,
    prompt_ids: list[int],
    temperature: float,
    *,
    draft_length: int = 4,
    max_new_tokens: int = 64,
    top_p: float | None = None,
    seed: int = 0,
) -> dict:
    """One prompt at one temperature: a speculative run with fixed k = draft_length (its answer is a sample
    of the target at T), then teacher-forced β over that answer. Returns the sums `summarise` pools."""
    from ..generate import generate

    sampling = Sampling(temperature=temperature, top_p=top_p if temperature > 0 else None)
    t0 = time.perf_counter()
    run = generate(target, prompt_ids, method="draft", draft=draft, draft_length=draft_length,
                   max_new_tokens=max_new_tokens, temperature=temperature, top_p=sampling.top_p,
                   seed=seed)  # fmt: skip
    beta = teacher_forced_beta(target, draft, prompt_ids, run.tokens, sampling)
    return {
        "temperature": temperature,
        "new_tokens": len(run.tokens),
        "beta_sum": round(float(beta.sum()), 6),
        "positions": len(beta),
        **realised_counts(run, draft_length),
        "seconds": round(time.perf_counter() - t0, 2),
    }


# ---- aggregation --------------------------------------------------------------------------------------
def summarise(points: list[dict], k: int) -> list[dict]:
    """One row per temperature: α_TV (pooled over positions, with the standard error of its per-prompt
    values: positions within one answer are correlated), α_run = accepted / reached, tokens per forward,
    and the i.i.d. formula's tokens per forward at α_run. None where a count is 0 (JSON has no NaN)."""
    from ..cost.theory import expected_tokens_per_step

    def ratio(num, den, digits=4):
        return round(num / den, digits) if den else None

    rows = []
    for t in sorted({p["temperature"] for p in points}):
        pts = [p for p in points if p["temperature"] == t]
        per_prompt = [p["beta_sum"] / p["positions"] for p in pts if p["positions"]]
        positions, reached, accepted = (sum(p[key] for p in pts) for key in ("positions", "reached", "accepted"))
        alpha_run = ratio(accepted, reached)
        iid = round(expected_tokens_per_step(accepted / reached, k), 4) if reached else None
        rows.append(
            {
                "temperature": t,
                "prompts": len(pts),
                "positions": positions,
                "alpha_tv": ratio(sum(p["beta_sum"] for p in pts), positions),
                "alpha_tv_se": round(float(np.std(per_prompt, ddof=1) / np.sqrt(len(per_prompt))), 4)
                if len(per_prompt) > 1
                else None,
                "reached": reached,
                "accepted": accepted,
                "alpha_run": alpha_run,
                "tokens_per_forward": ratio(sum(p["tokens"] for p in pts), sum(p["steps"] for p in pts)),
                "tokens_per_forward_iid": iid,
            }
        )
    return rows


def _recorded(config: AlphaTemperatureConfig) -> dict:
    """The configuration as the file records it: file names without this machine's folders."""
    d = asdict(config)
    return d | {"out": Path(d["out"]).name, "prompts": Path(d["prompts"]).name if d["prompts"] else ""}


def _resumable(path: Path, config: AlphaTemperatureConfig) -> list[dict]:
    """The points of an earlier run with the same configuration (ignoring RESUME_IGNORES), else []."""
    if config.fresh or not path.is_file():
        return []
    old = json.loads(path.read_text())
    mine = {k: v for k, v in _recorded(config).items() if k not in RESUME_IGNORES}
    theirs = {k: v for k, v in old.get("config", {}).items() if k not in RESUME_IGNORES}
    return old.get("points", []) if mine == theirs else []


def measure(config: AlphaTemperatureConfig, lm=None) -> dict:
    """Run every (prompt, temperature) point not yet in config.out; rewrite the file after each; return it."""
    from tqdm.auto import tqdm

    from ..machine import machine_info
    from ..models.draft_model import get_draft
    from ..models.load import load_model, model_record, prompt_ids

    torch.set_num_threads(config.threads)
    lm = lm if lm is not None else load_model(config.model)
    draft = get_draft(config.draft, lm.model)
    prompts = load_prompts(config.prompts or None)
    counts: dict[str, int] = {}
    chosen = []
    for p in prompts:  # the first per_category prompts of every category, in file order
        if counts.get(p.category, 0) < config.per_category:
            counts[p.category] = counts.get(p.category, 0) + 1
            chosen.append(p)
    out = Path(config.out)
    points = _resumable(out, config)
    done = {(p["question_id"], p["temperature"]) for p in points}
    todo = [(p, t) for t in config.temperatures for p in chosen if (p.question_id, t) not in done]
    record = {
        "what": "α of the draft against temperature: teacher-forced 1 − TV (alpha_tv) and accepted / reached "
        "in speculative runs with a fixed draft length (alpha_run); see specdec_lab/lab/alpha_temperature.py",
        "command": shlex.join(["python", "-m", "specdec_lab.lab.alpha_temperature", *_argv(config)]),
        "config": _recorded(config),
        "target": model_record(lm),
        "draft": draft.name,
        "machine": machine_info(next(lm.model.parameters()).device),
    }
    bar = tqdm(todo, desc="α vs temperature", unit="point", disable=config.quiet)
    for prompt, t in bar:
        bar.set_postfix_str(f"T={t:g} prompt {prompt.question_id}")
        ids = prompt_ids(prompt, lm.tokenizer)  # text in the chat template, as the bench does
        point = measure_point(lm.model, draft, ids, t, draft_length=config.draft_length, top_p=config.top_p,
                              max_new_tokens=config.max_new_tokens, seed=config.seed)  # fmt: skip
        points.append({"question_id": prompt.question_id, "category": prompt.category} | point)
        write_json(out, record | {"points": points, "summary": summarise(points, config.draft_length)})
    bar.close()
    result = record | {"points": points, "summary": summarise(points, config.draft_length)}
    write_json(out, result)
    return result


# ---- command line -------------------------------------------------------------------------------------
def _argv(config: AlphaTemperatureConfig) -> list[str]:
    """The non-default options of `config`, as command-line arguments (recorded in the file)."""
    default, args = _recorded(AlphaTemperatureConfig()), []
    for name, value in _recorded(config).items():
        if name in ("out", "quiet", "fresh") or value == default[name]:
            continue
        flag = "--" + name.replace("_", "-")
        args += [flag, ",".join(f"{v:g}" for v in value) if isinstance(value, list) else str(value)]
    return args


def build_parser() -> argparse.ArgumentParser:
    d = AlphaTemperatureConfig()
    p = argparse.ArgumentParser(
        prog="python -m specdec_lab.lab.alpha_temperature",
        description="Measure the draft's acceptance rate α against the sampling temperature.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", default=d.model, help="target model")
    p.add_argument("--draft", default=d.draft, help="draft: default, layer_skip:N or a draft folder")
    p.add_argument("--temperatures", default=",".join(f"{t:g}" for t in d.temperatures), help="comma-separated")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling for p and q alike (T > 0)")
    p.add_argument("--prompts", default=d.prompts, help="question.jsonl (default: data/prompts.jsonl)")
    p.add_argument("--per-category", type=int, default=d.per_category, help="prompts per category")
    p.add_argument("--max-new-tokens", type=int, default=d.max_new_tokens)
    p.add_argument("--draft-length", type=int, default=d.draft_length, help="fixed k of the speculative runs")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", type=int, default=d.threads, help="torch CPU threads")
    p.add_argument("--out", default=d.out, help="result JSON (rewritten after every point; resumed)")
    p.add_argument("--fresh", action="store_true", help="ignore an existing --out and start over")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    config = AlphaTemperatureConfig(
        model=a.model, draft=a.draft, temperatures=[float(t) for t in a.temperatures.split(",")], top_p=a.top_p,
        prompts=a.prompts, per_category=a.per_category, max_new_tokens=a.max_new_tokens,
        draft_length=a.draft_length, seed=a.seed, threads=a.threads, out=a.out, fresh=a.fresh, quiet=a.quiet,
    )  # fmt: skip
    result = measure(config)
    for row in result["summary"]:
        print(json.dumps(row), file=sys.stderr)
    print(f"wrote {config.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
