"""Published speculative-decoding results, one row per (method, paper, setting), each checked at its source.

The table lives in `data/literature/published.csv`; every row carries the URL it came from (`source`), the exact text
read there with the number quoted (`checked`), and how close that text is to the source (`verified`):

    paper          the paper's own text (arXiv HTML / PDF text, possibly read in a converted copy)
    repository     a file of the project's repository at a named commit (README, leaderboard, docs)
    transcription  a third-party transcription of the paper's table; the paper itself was not readable here

A number that could not be read anywhere is left empty and the row's `note` says so. Nothing is filled from memory.

What the numbers mean differs between papers, which is why `metric` names the convention of each row:

    alpha          Leviathan et al.: the acceptance rate alpha = E[beta] = E[sum_x min(p(x), q(x))] of ONE drafted
                   token (Corollary 3.6). Tokens per target call follow from it: E = (1 - alpha^(gamma+1)) / (1 - alpha)
                   for a chain of gamma drafted tokens (their Eq. 1), bonus token included.
    tau            EAGLE, EAGLE-2, EAGLE-3: "average acceptance length", tokens produced per draft-verify cycle. It
                   COUNTS the bonus token the target model adds, so vanilla decoding has tau = 1 (not 0).
    mean accepted  Spec-Bench "#Mean Accepted Tokens" per decoding step and AngelSlim "accept length": 1.00 for
                   vanilla decoding, so the same convention as tau (bonus counted).
    none           the source gives a speedup only (Chen et al., Medusa's text, Lookahead's abstract, the PLD README).

`speedup` is always the wall-clock ratio against the source's own baseline, at batch size 1 unless `note` says
otherwise: T5X for Leviathan et al., the autoregressive sampler on the same TPUs for Chen et al., the default
Hugging Face implementation for Medusa and the EAGLE papers, Spec-Bench's vanilla run for the leaderboard, and
vLLM without speculation for AngelSlim (a throughput ratio computed here, said so in `note`). Speedups measured on
different devices, frameworks and baselines are not comparable with each other, nor with a 2-core CPU.
Extra columns: `draft_len` (gamma, K or num_speculative_tokens where a chain length is fixed) and `cost_c`
(Leviathan's cost coefficient c = t(draft step) / t(target step), their Table 4).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from ..io import DATA_DIR

__all__ = ["COLUMNS", "METRICS", "PUBLISHED_FILE", "published", "summary_table"]

PUBLISHED_FILE = DATA_DIR / "literature" / "published.csv"
COLUMNS = (
    "method",
    "paper",
    "model",
    "params_b",
    "hardware",
    "draft",
    "draft_len",
    "cost_c",
    "metric",
    "value",
    "speedup",
    "temperature",
    "task",
    "source",
    "checked",
    "verified",
    "note",
)
REQUIRED = ("method", "paper", "model", "hardware", "draft", "metric", "task", "source", "checked", "verified")
NUMERIC = ("params_b", "draft_len", "cost_c", "value", "speedup", "temperature")  # empty -> NaN
METRICS = ("alpha", "tau", "mean accepted", "none")
VERIFIED = ("paper", "repository", "transcription")
_SYMBOL = {"alpha": "α", "tau": "τ", "mean accepted": "mean acc."}


def published(path: str | Path | None = None) -> pd.DataFrame:
    """Read and validate the published-results CSV; numeric columns come back as floats (NaN where empty).

    Raises ValueError naming the file, the row (line number, paper, model) and the column of the first problem:
    a missing or unknown column, an empty required field, a non-number or non-positive number, an unknown metric,
    a metric without its value, or a source that is not a URL.
    """
    path = Path(path) if path is not None else PUBLISHED_FILE
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in df.columns]
    unknown = [c for c in df.columns if c not in COLUMNS]
    if missing or unknown:
        raise ValueError(f"{path}: columns missing {missing}, unknown {unknown}; expected {list(COLUMNS)}")
    if df.empty:
        raise ValueError(f"{path}: no rows")
    numbers: dict[str, list[float]] = {c: [] for c in NUMERIC}
    for i, row in df.iterrows():
        where = f"{path}: line {i + 2} ({row['paper'] or '?'}, {row['model'] or '?'})"
        for col in REQUIRED:
            if not row[col].strip():
                raise ValueError(f"{where}: column {col!r} is empty")
        for col in NUMERIC:
            text = row[col].strip()
            try:
                x = float(text) if text else math.nan
            except ValueError:
                raise ValueError(f"{where}: column {col!r} is {text!r}, not a number") from None
            if text and not (math.isfinite(x) and (x > 0 or (col == "temperature" and x == 0))):
                raise ValueError(f"{where}: column {col!r} is {text!r}; it must be positive")
            numbers[col].append(x)
        if row["metric"] not in METRICS:
            raise ValueError(f"{where}: metric {row['metric']!r} is not one of {METRICS}")
        if (row["metric"] == "none") != (row["value"].strip() == ""):
            raise ValueError(f"{where}: metric {row['metric']!r} with value {row['value']!r} (a value needs a metric)")
        if not re.match(r"https?://\S+", row["source"]):
            raise ValueError(f"{where}: source {row['source']!r} is not a URL")
        if row["verified"] not in VERIFIED:
            raise ValueError(f"{where}: verified {row['verified']!r} is not one of {VERIFIED}")
    return df.assign(**{c: pd.Series(v, index=df.index, dtype=float) for c, v in numbers.items()})


def _short_source(url: str) -> str:
    """'https://arxiv.org/abs/2211.17192 Table 2' -> 'arXiv 2211.17192 Table 2'; a GitHub file -> 'owner/repo file'."""
    m = re.match(r"https?://arxiv\.org/abs/(\S+)\s*(.*)", url)
    if m:
        return f"arXiv {m[1]} {m[2]}".strip()
    m = re.match(r"https?://github\.com/([^/]+/[^/]+)(?:/blob/[^/]+/(\S+))?\s*(.*)", url)
    if m:
        return " ".join(p for p in (m[1], (m[2] or "").rsplit("/", 1)[-1], m[3]) if p)
    return url


def summary_table(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """One compact row per paper/setting for display: method, model, draft, hardware, task, α/τ, speedup, source.

    `α/τ` is written with the row's own symbol ("α 0.75", "τ 3.94", "mean acc. 2.28"; see the module docstring for
    what each counts); `source` is a short link text, marked "(transcription)" where the paper itself was not read.
    """
    df = published() if df is None else df
    acc = [
        f"{_SYMBOL[m]} {v:g}" if m in _SYMBOL and pd.notna(v) else ""
        for m, v in zip(df["metric"], df["value"], strict=True)
    ]
    src = [
        _short_source(s) + (" (transcription)" if v == "transcription" else "")
        for s, v in zip(df["source"], df["verified"], strict=True)
    ]
    return pd.DataFrame(
        {
            "method": df["method"],
            "paper": df["paper"],
            "model": df["model"],
            "draft": df["draft"],
            "hardware": df["hardware"],
            "task": df["task"],
            "α/τ": acc,
            "speedup": df["speedup"],
            "source": src,
        }
    ).reset_index(drop=True)
