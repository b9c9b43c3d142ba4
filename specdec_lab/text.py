"""Tokens as text a reader can follow: byte pieces grouped into characters, whitespace made visible.

A byte-level BPE tokenizer (SmolLM2's, GPT-2's) splits a character it has no token for into its UTF-8
bytes: 🍎 is three tokens. Decoding each token alone gives "�" for every one of them. `token_pieces`
decodes a run of tokens in order and gives each token the text it *completes*:

    tokens   [… 'ðŁį', 'İ' …]  (two byte tokens of one 4-byte emoji, after one more)
    pieces   ['', '', '🍎']    the character lands on the token that finishes it; the ones before carry ""
                               (`visible` labels it `PARTIAL`, so a node is never blank)

`context` is the text's past (e.g. the committed tokens before a tree's root), so a character begun before
the first token shown is still completed correctly. Tree nodes are decoded along their own path.

`visible(text)` shows whitespace in labels: "▁" a space, "↵" a newline, "⇥" a tab (the legend every token
figure states).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PARTIAL", "WHITESPACE_LEGEND", "token_pieces", "path_pieces", "visible"]

PARTIAL = "·"  # label of a token that holds only the first byte(s) of a character completed later
WHITESPACE_LEGEND = "▁ = space, ↵ = newline, ⇥ = tab; · = a byte of a character the next token completes"
_REPLACEMENT = "\ufffd"
WINDOW = 8  # tokens of left context each piece is decoded with


def _decode(tokenizer, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids)) if ids else ""


def token_pieces(tokens: Sequence[int], tokenizer=None, context: Sequence[int] = (), final: bool = True) -> list[str]:
    """Per token, the text it completes: its characters, or "" for a byte that a later token completes.

    Without a tokenizer: "[id]" per token. Joined, the pieces are the run's decoded text; a character still
    incomplete after the last token shows as "�" there if `final` (the text ends here), else as "".

    Each piece is decoded within a window of the WINDOW tokens before it (a UTF-8 character is at most 4
    bytes, so at most 4 byte tokens): piece_i = complete(decode(w + [t_i]))[len(complete(decode(w))):],
    where complete() drops a trailing incomplete character. Cost: two short decodes per token.
    """
    tokens = [int(t) for t in tokens]
    if tokenizer is None:
        return [f"[{t}]" for t in tokens]
    ids = [int(t) for t in context][-WINDOW:] + tokens
    offset = len(ids) - len(tokens)
    pieces = []
    for i in range(offset, len(ids)):
        window = ids[max(0, i - WINDOW) : i]
        before = _decode(tokenizer, window).rstrip(_REPLACEMENT)
        after = _decode(tokenizer, window + [ids[i]])
        if i < len(ids) - 1 or not final:
            after = after.rstrip(_REPLACEMENT)  # not finished yet: the next token may complete it
        pieces.append(after[len(before) :] if after.startswith(before) else after)
    return pieces


def path_pieces(
    tokens: Sequence[int], parents: Sequence[int], tokenizer=None, context: Sequence[int] = ()
) -> list[str]:
    """Per node of a tree (parents[i] < i, root's parent −1), its piece decoded along its own path ("" for a
    node that holds only a character's first bytes: its children may complete it)."""
    tokens, parents = [int(t) for t in tokens], [int(p) for p in parents]
    pieces = []
    for i in range(len(tokens)):
        path = []
        j = i
        while j >= 0:
            path.append(tokens[j])
            j = parents[j]
        path.reverse()
        pieces.append(token_pieces(path, tokenizer, context, final=False)[-1])
    return pieces


def visible(text: str, partial: bool = True) -> str:
    """A label with whitespace shown (▁ ↵ ⇥) and, for "" (a leading byte), `PARTIAL`."""
    if text == "" and partial:
        return PARTIAL
    return text.replace(" ", "▁").replace("\n", "↵").replace("\t", "⇥")
