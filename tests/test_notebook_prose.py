"""No measured number typed into a notebook's prose (`shared/notebook-conventions.md`, "Prose and numbers").

A number a cell measured changes when the cell runs again (another machine, another load, another model); a
sentence that types it goes stale beside the output that contradicts it. So a Markdown cell may state a
measured-looking figure — a speedup (1.35×), a share (40 %), a time (30 ms, 2 s), a rate (84 tok/s), any
decimal — only where it is a literature constant marked with its source on the same line (a link, "et al.",
an arXiv id, "Table N", or an explicit "source:"). Everything else is rendered by a code cell from the values
it computed (`Markdown(f"...")`), or the prose names the table instead.

Not measured, so not flagged: LaTeX math ($...$, worked examples and formulas), inline code and fenced code
(parameter values, calls), shapes (576×576), section numbers (2.3.1) and integers without a unit.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9]*.ipynb"))

_FENCED = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.S | re.M)
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
_CODE = re.compile(r"`[^`\n]+`")
_LINK_TARGET = re.compile(r"\]\([^)]*\)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_SHAPE = re.compile(r"\d[\d ]*\s*[×x]\s*\d+")  # 576×576, 49 152 × 576: sizes, not speedups
_SECTION = re.compile(r"\b\d+(?:\.\d+){2,}\b")  # 2.3.1
_ARXIV = re.compile(r"\b\d{4}\.\d{4,5}\b")  # 2505.12398
_SOURCED = re.compile(r"\]\(https?://|et al\.|arXiv|\bTable \d|\bsource:", re.I)
_MEASURED = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?\s*(?:×|%|ms\b|s\b|seconds?\b|tok(?:en)?s?/s\b)"  # a unit of speed, share or time
    r"|(?<![\w.])\d+\.\d+(?![\w.])"  # any decimal
    r"|(?<![\w.])\.\d+(?![\w.])"  # .636
)


def measured_numbers(markdown: str) -> list[str]:
    """The measured-looking figures typed into one Markdown cell's prose, each as 'figure  «line»'."""
    text = _FENCED.sub("", _HTML_COMMENT.sub(lambda m: m.group(0) if "source:" in m.group(0) else "", markdown))
    found = []
    for line in text.splitlines():
        if _SOURCED.search(line):
            continue
        prose = _LINK_TARGET.sub("]", _CODE.sub("", _MATH.sub("", line)))
        prose = _ARXIV.sub("", _SECTION.sub("", _SHAPE.sub("", prose)))
        found += [f"{m.group(0).strip()}  «{line.strip()[:100]}»" for m in _MEASURED.finditer(prose)]
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_measured_number_is_typed_into_prose(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    typed = [
        f"cell {i}: {hit}"
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "markdown"
        for hit in measured_numbers("".join(cell["source"]))
    ]
    assert not typed, (
        f"{path.name} types measured numbers into prose — render them from the cell's values "
        "(Markdown(f'...')) or name the table; a literature constant needs its source on the line:\n  "
        + "\n  ".join(typed)
    )


def test_notebooks_are_found():
    assert len(NOTEBOOKS) >= 10, NOTEBOOKS


@pytest.mark.parametrize(
    "typed",
    [
        "Prompt lookup measured 1.35× on this machine.",
        "One forward takes 30 ms here.",
        "It reaches 84 tok/s.",
        "Head 1 is right 39 % of the time.",
        "* **auto** measured 1.53 against 1.57.",
        "the stored rates are .636/.393",
        "the step took 2 s",
    ],
)
def test_a_planted_typed_number_is_caught(typed):
    assert measured_numbers(f"Some prose.\n{typed}\nMore prose.")


@pytest.mark.parametrize(
    "fine",
    [
        "Medusa-2 reports 2.3–2.8× on Vicuna-7B ([Cai et al. 2024](https://arxiv.org/abs/2401.10774), Table 1).",
        "EAGLE-3 reaches τ ≈ 6.5 (source: SafeAILab/EAGLE README).",
        "With $\\alpha = 0.8$ and $k = 4$, $E = (1 - 0.8^5)/(1 - 0.8)$.",
        "Call `generate(lm, ids, epsilon=0.09)` to try it.",
        "Each head is a 576×576 residual block.",
        "See section 2.3.1 of the paper and arXiv 2505.12398.",
        "The table above gives the measured speedups; 3 heads, 64 nodes.",
        "```python\nx = 1.5\n```",
    ],
)
def test_math_code_shapes_and_sourced_constants_pass(fine):
    assert measured_numbers(fine) == []
