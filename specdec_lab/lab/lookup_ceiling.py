"""What prompt lookup could accept on a given text: how often the text itself continues an earlier n-gram.

Replay a finished answer through the lookup's own matcher (`PromptLookupProposer.matches`): at every answer
position t, the context is prompt + answer[:t]; the longest suffix n-gram seen earlier proposes its most recent
continuation, and we count how many of its tokens the answer actually goes on with,

    run(t)   = max k such that answer[t : t + k] == continuation[:k]         (k <= cap)
    right    = mean over t of 1[run(t) >= 1]        the lookup's next-token guess is the text's next token
    mean_run = mean over t of run(t)                 draft tokens a greedy step starting at t would accept

Why this is the ceiling on sampled text too. With deterministic drafts the exact one-hot rule accepts the
draft token x with probability p(x), else samples from p with x removed: in distribution that is "draw
y ~ p, accept iff y = x" (`accept.tree_rules`). So on an answer sampled from the target — and a speculative run's
answer is one, exactly (losslessness) — the answer's own next token plays the role of y, and `right` is
the fraction of positions at which a lookup step's first draft token is accepted. A text that repeats
itself less leaves every lookup-based method less to accept, whatever the verification rule: greedy answers
of a small model repeat more than its samples, which is why lookup-heavy methods keep less of their greedy
speed-up when sampling (notebook 11, section 6).

    stats = lookup_ceiling(prompt_ids, answer_ids)          # -> {"positions", "right", "mean_run", "runs"}
    table = ceiling_by_method(rows, prompt_ids_by_question) # bench rows -> per method label
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..proposers.prompt_lookup import PromptLookupProposer

__all__ = ["lookup_ceiling", "ceiling_by_method"]


def lookup_ceiling(prompt: Sequence[int], answer: Sequence[int], *, max_ngram: int = 3, min_ngram: int = 1,
                   cap: int = 10) -> dict:  # fmt: skip
    """{"positions": answer positions, "right": lookup's first guess right (fraction), "mean_run": accepted
    draft tokens a greedy step at each position would get (mean, at most `cap`), "runs": run(t) per answer
    position} — module docstring. A greedy prompt-lookup step starting at answer position t with k draft
    tokens accepts min(runs[t], k) of them (tests/test_lab.py checks it on a real run)."""
    if cap < 1:
        raise ValueError(f"cap must be >= 1, got {cap}")
    lookup = PromptLookupProposer(max_ngram=max_ngram, min_ngram=min_ngram, max_draft=cap)
    tokens, start = [int(t) for t in prompt] + [int(t) for t in answer], len(prompt)
    runs = []
    for t in range(start, len(tokens)):
        found = lookup.matches(tokens[:t])  # indexes only positions new since t - 1 (the slice: ms per answer)
        continuation = found[0][1] if found else []
        k = 0
        while k < len(continuation) and t + k < len(tokens) and tokens[t + k] == continuation[k]:
            k += 1
        runs.append(k)
    n = len(runs)
    return {"positions": n, "right": sum(k > 0 for k in runs) / n if n else 0.0,
            "mean_run": sum(runs) / n if n else 0.0, "runs": runs}  # fmt: skip


def ceiling_by_method(rows: Iterable[Mapping], prompts: Mapping, **kwargs) -> dict[str, dict]:
    """Bench rows (question_id, method, tokens) -> {method label: lookup_ceiling pooled over its answers}
    (positions summed, `right` and `mean_run` weighted by positions). prompts: question_id -> prompt ids."""
    pooled: dict[str, dict] = {}
    for r in rows:
        if r["question_id"] not in prompts:
            raise KeyError(f"no prompt ids for question {r['question_id']!r} (method {r['method']!r})")
        s = lookup_ceiling(prompts[r["question_id"]], r["tokens"], **kwargs)
        p = pooled.setdefault(r["method"], {"positions": 0, "right": 0.0, "mean_run": 0.0, "answers": 0})
        p["positions"] += s["positions"]
        p["right"] += s["right"] * s["positions"]
        p["mean_run"] += s["mean_run"] * s["positions"]
        p["answers"] += 1
    for p in pooled.values():
        n = max(p["positions"], 1)
        p["right"], p["mean_run"] = p["right"] / n, p["mean_run"] / n
    return pooled
