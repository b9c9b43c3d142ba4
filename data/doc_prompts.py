"""Prompts on real passages: prose paragraphs from the documentation installed with the environment.

Why: the template bank (`prompt_bank`) varies requests but its passages are few (40), and the draft and
the Medusa heads learn those passages instead of how the target copies from, condenses and translates
*any* text — on the benchmark's long hand-written passages (summarization, rag, qa, translation) the
draft's greedy acceptance was far below its acceptance on coding, math and writing (data/README.md). Real
prose is the fix, and none may be downloaded: but every Python environment carries megabytes of it.

Sources: each installed package's long description (its README), the Python language reference
(`pydoc_data.topics`), the standard library's docstrings (parsed with `ast`, never imported), and the
markdown/reST/text documents inside installed packages. Paragraphs are kept when they read as prose:
40–200 words, letters and spaces ≥ 88% of characters, no code markers; markdown/reST decoration (links,
emphasis, roles) is stripped. The set depends on what is
installed, so the generated file is committed (`data/train_prompts_docs.jsonl`) and the environment is
pinned (environment.yml); with the same environment the output is byte-identical. Benchmark texts are
excluded like in the bank. The target's answers to these prompts are self-distillation data: only the
prompts come from outside, every trained-on response is the target's own greedy text.

    python data/doc_prompts.py --n 1000 --seed 0 --start-id 3001 --out data/train_prompts_docs.jsonl

Collecting the passages needs only the standard library; the CLI writes the file with
`specdec_lab.io.write_jsonl` (atomic), so running it imports the package.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata as metadata
import json
import random
import re
import sysconfig
from collections import Counter
from pathlib import Path

__all__ = ["passages", "build_doc_prompts", "main"]

_DATA = Path(__file__).resolve().parent
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")  # [text](url) -> text
_ROLE = re.compile(r":[a-z]+:`([^`<]*)(?:<[^>]*>)?`")  # :class:`Foo <x.Foo>` -> Foo
_DECOR = re.compile(r"[*_`]{1,3}")
_CODE = re.compile(r"(>>>|\$ |::|\{|\}|==|=>|->|\|\||</|/>|\bdef |\bimport |https?://|\w+\(\)|#include)")
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_STOP = set(
    "the a an and or of to in on for with by from as at is are was were be been this that these those it its "
    "which can will not you your we our they their also more most such into than then when where what how "
    "each other all any may must should would could one two use used using only has have had but if so".split()
)


def _clean(paragraph: str) -> str:
    text = _ROLE.sub(r"\1", _LINK.sub(r"\1", paragraph))
    text = _DECOR.sub("", text)
    return " ".join(text.split())


def _is_prose(text: str) -> bool:
    words = text.split()
    if not 40 <= len(words) <= 200 or _CODE.search(text) or not text[0].isupper() or text[-1] not in ".!?":
        return False
    letters = sum(c.isalpha() or c.isspace() for c in text)
    return letters / len(text) >= 0.88 and text.isascii()


def _docstrings(root: Path) -> list[tuple[str, str]]:
    """(file, docstring) of every module, class and function under root (parsed, never imported)."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if {"test", "tests", "idlelib", "site-packages"} & set(path.relative_to(root).parts):
            continue
        try:
            tree = ast.parse(path.read_text(errors="ignore"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    out.append((str(path.relative_to(root)), doc))
    return out


def _sources() -> list[tuple[str, str]]:
    """(name, long text): installed distributions' descriptions, Python's reference topics, the standard
    library's docstrings, and the markdown/reST/text documents shipped inside installed packages."""
    out = []
    for dist in sorted(metadata.distributions(), key=lambda d: (d.metadata["Name"] or "").lower()):
        body = dist.metadata.get_payload() or dist.metadata.get("Description") or ""
        if body:
            out.append((dist.metadata["Name"], body))
    try:
        from pydoc_data.topics import topics

        out += [(f"python:{k}", topics[k]) for k in sorted(topics)]
    except ImportError:  # pragma: no cover - stripped-down Pythons
        pass
    paths = sysconfig.get_paths()
    out += _docstrings(Path(paths["stdlib"]))
    site = Path(paths["purelib"])
    docs = sorted(p for ext in ("*.md", "*.rst", "*.txt") for p in site.rglob(ext))
    out += [(str(p.relative_to(site)), p.read_text(errors="ignore")) for p in docs]
    return out


def passages(exclude: set[str] | None = None) -> list[str]:
    """Unique prose paragraphs, in a deterministic order (source name, then position)."""
    seen, out = set(exclude or ()), []
    for _, body in _sources():
        for para in re.split(r"\n\s*\n", body):
            text = _clean(para)
            key = text[:80].lower()
            if _is_prose(text) and key not in seen:
                seen.add(key)
                out.append(text)
    return out


def _keyword(text: str) -> str:
    """A content word the passage repeats (for a question about it); the longest word as a fallback."""
    words = [w.strip(".,;:()\"'").lower() for w in text.split()]
    counts = Counter(w for w in words if len(w) >= 5 and w.isalpha() and w not in _STOP)
    if counts:
        return max(counts.items(), key=lambda kv: (kv[1], len(kv[0]), kv[0]))[0]
    return max(words, key=len)


LANGUAGES = ["French", "Spanish", "German", "Italian", "Portuguese", "Dutch"]
TEMPLATES: dict[str, list[str]] = {
    "summarization": [
        "Summarize the following text in one sentence.\n\n{p}",
        "Summarize this passage in two or three sentences.\n\n{p}",
        "Give a short summary of the text below as three bullet points.\n\n{p}",
        "What is the main idea of this paragraph? Answer briefly.\n\n{p}",
    ],
    "qa": [
        "{p}\n\nWhat is this paragraph about, and who would find it useful?",
        "Read the text and explain in simple words what it means.\n\n{p}",
        '{p}\n\nWhat does "{k}" refer to in this text?',
    ],
    "rag": [
        "Answer the question using only the context.\n\nContext:\n{p}\n\n"
        "Question: What does the context say about {k}?",
        "Context:\n{p}\n\nBased on the context above, why is {k} important?",
        "Use the document to answer.\n\nDocument: {p}\n\nQuestion: What is {k}, according to the document?",
    ],
    "translation": [
        "Translate into {lang}:\n\n{s}",
        "Translate the following text to {lang}.\n\n{s}",
        "How would you say this in {lang}?\n\n{s}",
    ],
    "writing": [
        "Rewrite this paragraph in a simpler, friendlier style.\n\n{p}",
        "Turn the following text into a short email to a colleague.\n\n{p}",
        "Write a short blog introduction based on this text.\n\n{p}",
    ],
}
WEIGHTS = {"summarization": 3, "qa": 2, "rag": 3, "translation": 2, "writing": 2}


def build_doc_prompts(n: int, seed: int = 0, start_id: int = 3001, exclude: set[str] | None = None) -> list[dict]:
    """n Spec-Bench records (question_id, category, turns) over `passages()`, each passage used once."""
    pool = passages(exclude)
    rng = random.Random(seed)
    rng.shuffle(pool)
    if n > len(pool):
        raise ValueError(f"asked for {n} prompts but only {len(pool)} prose passages are installed here")
    cats = [c for c, w in WEIGHTS.items() for _ in range(w)]
    out = []
    for i, text in enumerate(pool[:n]):
        cat = cats[i % len(cats)]
        template = rng.choice(TEMPLATES[cat])
        sentences = _SENT.split(text)
        short = " ".join(sentences[: rng.choice([1, 2])])
        prompt = template.format(p=text, k=_keyword(text), s=short, lang=rng.choice(LANGUAGES))
        out.append({"question_id": start_id + i, "category": cat, "turns": [prompt]})
    return out


def _benchmark_texts() -> set[str]:
    keys = set()
    for path in (_DATA / "prompts.jsonl", _DATA / "train_prompts.jsonl"):
        if path.is_file():
            for line in path.read_text().splitlines():
                for turn in json.loads(line)["turns"]:
                    for para in re.split(r"\n\s*\n", turn):
                        keys.add(_clean(para)[:80].lower())
    return keys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start-id", type=int, default=3001)
    p.add_argument("--out", default=str(_DATA / "train_prompts_docs.jsonl"))
    args = p.parse_args(argv)
    from specdec_lab.io import write_jsonl  # here, not at the top: collecting passages needs no torch

    records = build_doc_prompts(args.n, args.seed, args.start_id, exclude=_benchmark_texts())
    out = write_jsonl(args.out, records)
    print(f"{len(records)} prompts -> {out} ({Counter(r['category'] for r in records)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
