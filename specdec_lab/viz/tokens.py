"""A GenerationResult's tokens as HTML, colored by how each one was produced, and its trace as a table.

Per step of the loop (one target forward) the emitted tokens are
* accepted draft tokens — proposed by the proposer and confirmed by the target (green),
* then one target token — the bonus token the target supplies itself after the accepted path (blue); in
  autoregressive decoding every token is one of these,
* and the proposed-but-rejected nodes of that step's tree, shown struck through and faded (red); they
  were verified but never emitted.

`tokens_html` returns a self-contained HTML string (inline styles, no scripts); `show_tokens` wraps it in
`IPython.display.HTML` for notebooks. Without a tokenizer tokens are shown as their ids. Text is decoded as
a run (`specdec_lab.text`): a character spread over byte tokens (an emoji is three or four) lands on the token
that completes it, and the tokens before it show as "·", never as "�".
"""

from __future__ import annotations

import html as _html

from ..text import PARTIAL, path_pieces, token_pieces

__all__ = [
    "tokens_html",
    "show_tokens",
    "tokens_summary",
    "trace_table",
    "token_text",
    "token_roles",
    "step_pieces",
    "node_pieces",
]

COLORS = {
    "accepted": "#c7ecc5",  # accepted draft token
    "target": "#cfe0fb",  # bonus / target token
    "rejected": "#f7c9c9",  # proposed, rejected
}
ROLE_TITLES = {
    "accepted": "accepted draft token",
    "target": "target token (bonus)",
    "rejected": "proposed, rejected",
}


def token_text(token: int, tokenizer=None) -> str:
    """Readable text of one token: decoded (spaces kept), or `[id]` without a tokenizer."""
    if tokenizer is None:
        return f"[{token}]"
    return tokenizer.decode([token])


def step_pieces(result, tokenizer=None) -> list[list[str]]:
    """Per step, the text of each emitted token, decoded as one run after the prompt (`text.token_pieces`):
    "" for a byte whose character a later token completes."""
    flat = [t for s in result.steps for t in s.emitted]
    pieces = iter(token_pieces(flat, tokenizer, context=result.prompt_tokens))
    return [[next(pieces) for _ in s.emitted] for s in result.steps]


def node_pieces(result, step: int, tokenizer=None) -> list[str]:
    """The text of each node of `step`'s tree, decoded along its own path after the committed tokens."""
    before = result.prompt_tokens + [t for s in result.steps[:step] for t in s.emitted]
    s = result.steps[step]
    return path_pieces(s.tree_tokens, s.tree_parents, tokenizer, context=before[:-1])


def token_roles(result) -> list[list[tuple[str, int]]]:
    """Per step, (role, token) pairs in display order: accepted drafts, the target token, rejected nodes.

    Works from `result.steps` (generate(..., trace=True)). Emitted tokens cut by EOS inside a path are
    respected: only what was emitted is labelled accepted/target.
    """
    steps = []
    for step in result.steps:
        on_path = set(step.path)
        n_acc = min(step.accepted, len(step.emitted))
        roles = [("accepted", t) for t in step.emitted[:n_acc]]
        roles += [("target", t) for t in step.emitted[n_acc:]]
        roles += [("rejected", t) for i, t in enumerate(step.tree_tokens) if i > 0 and i not in on_path]
        steps.append(roles)
    return steps


def _span(text: str, role: str, title: str) -> str:
    style = f"background:{COLORS[role]};border-radius:3px;padding:0 1px;"
    if role == "rejected":
        style += "text-decoration:line-through;opacity:0.55;font-size:0.85em;"
    # a newline breaks the line only where it was emitted; rejected proposals stay inline
    shown = _html.escape(text).replace("\n", "↵" if role == "rejected" else "↵<br>")
    if text.strip() == "" and "\n" not in text:
        shown = shown.replace(" ", "&nbsp;") or "&#8203;"
    return f'<span class="sd-{role}" style="{style}" title="{_html.escape(title)}">{shown}</span>'


def tokens_html(
    result,
    tokenizer=None,
    *,
    show_rejected: bool = True,
    max_rejected: int = 12,
    legend: bool = True,
    summary: bool = True,
) -> str:
    """HTML of the generated tokens colored by role (see module docstring); one step = one bordered group.

    result:       a GenerationResult with its per-step trace
    tokenizer:    to decode tokens (default: ids); a LoadedModel's `.tokenizer`
    show_rejected: render each step's rejected proposals after its emitted tokens, struck through
    max_rejected: at most this many rejected tokens per step, then "+N"
    """
    if not result.steps and result.tokens:
        raise ValueError("this result has no per-step trace: run generate(..., trace=True)")
    parts = []
    counts = {"accepted": 0, "target": 0, "rejected": 0}
    emitted = step_pieces(result, tokenizer)
    for s, roles in enumerate(token_roles(result)):
        step = result.steps[s]
        head = f"step {s}: {step.accepted}/{step.proposed} proposed accepted"
        on_path = set(step.path)
        nodes = node_pieces(result, s, tokenizer) if show_rejected and tokenizer is not None else None
        texts = emitted[s] + [
            nodes[i] if nodes is not None else token_text(t, tokenizer)
            for i, t in enumerate(step.tree_tokens)
            if i > 0 and i not in on_path
        ]
        spans = []
        rejected = 0
        for (role, tok), text in zip(roles, texts, strict=True):
            counts[role] += 1
            if role == "rejected":
                rejected += 1
                if not show_rejected or rejected > max_rejected:
                    continue
            spans.append(_span(text or PARTIAL, role, f"{head} — {ROLE_TITLES[role]} (id {tok})"))
        if show_rejected and rejected > max_rejected:
            spans.append(f'<span class="sd-more" style="opacity:0.5;font-size:0.8em">+{rejected - max_rejected}</span>')
        parts.append(
            f'<span class="sd-step" data-step="{s}" style="border-right:1px solid #bbb;padding-right:1px;'
            f'margin-right:1px">{"".join(spans)}</span>'
        )
    body = (
        '<div class="sd-tokens" style="font-family:ui-monospace,monospace;font-size:13px;line-height:1.9;'
        f'white-space:normal;word-break:break-word">{"".join(parts)}</div>'
    )
    head_html = ""
    if legend:
        items = "".join(
            _span(ROLE_TITLES[r], r, ROLE_TITLES[r]) + "&nbsp; " for r in ("accepted", "target", "rejected")
        )
        head_html += f'<div class="sd-legend" style="font-size:12px;margin-bottom:4px">{items}</div>'
    foot = ""
    if summary:
        foot = (
            f'<div class="sd-summary" style="font-size:12px;margin-top:4px">{len(result.tokens)} tokens in '
            f"{result.forwards} target forwards ({result.method}): {counts['accepted']} accepted draft, "
            f"{counts['target']} target, {counts['rejected']} rejected proposals; "
            f"mean accepted {result.mean_accepted:.2f} tokens/forward</div>"
        )
    return f"<div>{head_html}{body}{foot}</div>"


def tokens_summary(result, show_rejected: bool = True) -> str:
    """The summary line of `tokens_html` as plain text: tokens, forwards, counts by role, mean accepted."""
    counts = {"accepted": 0, "target": 0, "rejected": 0}
    for roles in token_roles(result):
        for role, _ in roles:
            counts[role] += 1
    return (
        f"{len(result.tokens)} tokens in {result.forwards} target forwards ({result.method}): "
        f"{counts['accepted']} accepted draft, {counts['target']} target, {counts['rejected']} rejected proposals; "
        f"mean accepted {result.mean_accepted:.2f} tokens/forward"
    )


def show_tokens(result, tokenizer=None, **kwargs):
    """`tokens_html` as an `IPython.display.HTML` object (renders in notebooks). Its text/plain (a plain-text
    front end, a stored notebook read as text) is the emitted text alone, then the summary line: rejected
    proposals are counted there, never spliced into the text."""
    from IPython.display import HTML

    class TokensHTML(HTML):
        def _repr_pretty_(self, p, cycle):  # IPython finds this before any printer registered for HTML
            p.text(emitted_text + "\n" + summary)

    emitted_text = "".join("".join(pieces) for pieces in step_pieces(result, tokenizer))
    summary = tokens_summary(result)
    return TokensHTML(tokens_html(result, tokenizer, **kwargs))


def trace_table(result, tokenizer=None):
    """One row per step: proposed k, accepted, emitted tokens (text), ms propose/verify/accept, proposer info.

    Returns a pandas DataFrame indexed by step.
    """
    import pandas as pd

    rows = []
    texts = step_pieces(result, tokenizer)
    for s, step in enumerate(result.steps):
        row = {
            "step": s,
            "proposed": step.proposed,
            "accepted": step.accepted,
            "emitted": len(step.emitted),
            "text": "".join(texts[s]),
            "ms_propose": round(step.t_propose * 1e3, 2),
            "ms_verify": round(step.t_verify * 1e3, 2),
            "ms_accept": round(step.t_accept * 1e3, 2),
        }
        row.update({k: v for k, v in step.info.items() if k not in row})
        rows.append(row)
    return pd.DataFrame(rows).set_index("step") if rows else pd.DataFrame()
