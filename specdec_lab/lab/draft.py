"""The distilled draft live (notebook 02): the callback behind its `Dashboard`.

    html, numbers = run_draft_demo(lm, prompt, draft="default", temperature=0.7)

One `generate(method="draft")` run, returned as the dashboard shows it: the tokens coloured by role
(`viz.tokens.tokens_html`) and a few summary numbers.
"""

from __future__ import annotations

from ..generate import generate
from ..viz.tokens import tokens_html

__all__ = ["run_draft_demo"]


def run_draft_demo(
    lm,
    prompt: str,
    draft: str = "default",
    temperature: float = 0.0,
    top_p: float | None = None,
    draft_length: int | str = 4,
    max_new_tokens: int = 48,
    seed: int = 0,
) -> tuple[str, dict]:
    """Generate with `method="draft"`; return (tokens as HTML, colored by role; summary numbers)."""
    result = generate(
        lm, lm.chat_ids(prompt), method="draft", draft=draft, draft_length=draft_length,
        max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, seed=seed,
    )  # fmt: skip
    proposed = sum(s.proposed for s in result.steps)
    accepted = sum(s.accepted for s in result.steps)
    summary = {
        "tokens": len(result.tokens),
        "target forwards": result.forwards,
        "mean accepted (tokens / forward)": round(result.mean_accepted, 2),
        "draft tokens accepted / proposed": f"{accepted} / {proposed}",
        "tokens/s": round(result.tokens_per_s, 1),
    }
    return tokens_html(result, lm.tokenizer), summary
