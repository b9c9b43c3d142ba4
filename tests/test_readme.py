"""The README's "Use it from Python" block runs as written, on the real model (a block that rots is worse
than none)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)
    assert len(section) == 2, f"README has no '## {heading}' section"
    match = re.search(r"```python\n(.*?)```", section[1].split("\n## ", 1)[0], flags=re.S)
    assert match, f"README's '## {heading}' section has no python block"
    return match.group(1)


@pytest.mark.real
def test_use_it_from_python_block_runs(capsys):
    code = python_block("Use it from Python")
    scope: dict = {}
    exec(compile(code, str(README), "exec"), scope)  # noqa: S102 - the README's own example
    out = capsys.readouterr().out
    assert scope["ar"].text.strip() and scope["ar"].stop_reason in ("eos", "max_new_tokens")
    assert scope["pl"].tokens == scope["ar"].tokens
    assert "prompt_lookup" in out and "autoregressive" in out


@pytest.mark.real
def test_add_a_method_block_runs(capsys):
    code = python_block("Add a method")
    scope: dict = {}
    try:
        exec(compile(code, str(README), "exec"), scope)  # noqa: S102 - the README's own example
    finally:
        from specdec_lab.proposers.registry import METHODS

        METHODS.pop("repeat_last", None)  # the example's method does not outlive the test
    assert scope["out"].forwards <= len(scope["out"].tokens) and "repeat_last" in capsys.readouterr().out
