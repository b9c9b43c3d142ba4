"""Tokens as readable text: byte pieces grouped into the character they spell (`specdec_lab.text`)."""

from __future__ import annotations

import pytest

from specdec_lab.text import PARTIAL, path_pieces, token_pieces, visible


class ByteTokenizer:
    """Each token is one UTF-8 byte (ids 0-255), decoded like HF does: invalid/incomplete bytes -> "�"."""

    def decode(self, ids, **kwargs):
        return bytes(ids).decode("utf-8", errors="replace")


TEXT = "a 🍎🍎 café\n"
IDS = list(TEXT.encode())


def test_pieces_join_to_the_text_and_land_on_the_completing_byte():
    pieces = token_pieces(IDS, ByteTokenizer())
    assert "".join(pieces) == TEXT
    assert pieces.count("🍎") == 2 and "\ufffd" not in "".join(pieces)
    first = IDS.index(0xF0)
    assert pieces[first : first + 4] == ["", "", "", "🍎"]


def test_a_run_cut_inside_a_character_completes_it_from_the_context():
    cut = IDS.index(0xF0) + 2
    head, tail = token_pieces(IDS[:cut], ByteTokenizer()), token_pieces(IDS[cut:], ByteTokenizer(), IDS[:cut])
    assert head[-1] == "\ufffd"  # the text ends inside a character: shown as such
    assert "".join(head[:-1]) + "".join(tail) == TEXT


def test_tree_nodes_decode_along_their_path():
    # root 'a', then two children: the two first bytes of 🍎 on one branch, 'b' on the other
    apple = list("🍎".encode())
    tokens = [ord("a"), apple[0], ord("b"), apple[1], apple[2], apple[3]]
    parents = [-1, 0, 0, 1, 3, 4]
    pieces = path_pieces(tokens, parents, ByteTokenizer())
    assert pieces == ["a", "", "b", "", "", "🍎"]
    assert [visible(p) for p in pieces][1] == PARTIAL


def test_without_a_tokenizer_ids_are_shown():
    assert token_pieces([3, 4]) == ["[3]", "[4]"]


@pytest.mark.parametrize("text,shown", [(" the", "▁the"), ("\n", "↵"), ("\t", "⇥"), ("", PARTIAL)])
def test_visible(text, shown):
    assert visible(text) == shown
