"""The README stays a five-minute read whose numbers come from files, and data/bench/ stays explained.

(a) every generated block of README.md (`<!-- kind: path -->` ... `<!-- /kind -->`) equals what
    `specdec_lab.bench.readme` renders from its file now: a stale README fails, naming the command that renders it
    again (`python -m specdec_lab.bench.readme README.md`, `make readme`);
(b) README.md has at most 300 lines;
(c) every file in data/bench/ is read by a notebook (notebooks/py/*.py) or a test (tests/*.py), or has an entry in
    data/bench/README.md (a heading naming it) whose machine is the file's own record; every entry names a file
    that is there;
(d) every notebook in notebooks/ is a row of the README's notebook map;
(e) the methods table lists every registered method and its files exist; the command-line table's new modules
    exist and its old ones are gone.
The renderer itself is tested on small inputs at the end.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import re
from pathlib import Path

import pytest

from specdec_lab.bench import readme
from specdec_lab.bench.readme import (
    README_COMMAND,
    bench_command,
    format_seconds,
    headline_markdown,
    notebook_map_rows,
    readme_blocks,
    render_block,
    render_readme,
)
from specdec_lab.bench.report import summarize

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
BENCH = REPO / "data" / "bench"
BENCH_INDEX = BENCH / "README.md"
MAX_LINES = 300


def readme_text() -> str:
    return README.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The body of `## heading` (up to the next `## `)."""
    parts = text.split(f"\n## {heading}\n", 1)
    assert len(parts) == 2, f"README.md has no '## {heading}' section"
    return parts[1].split("\n## ", 1)[0]


# ---- (a) generated blocks are current ------------------------------------------------------------------
def test_readme_has_its_generated_blocks():
    kinds = {(m["kind"], m["path"]) for m in readme_blocks(readme_text())}
    assert ("headline", "data/bench/avx512-nine-56-r2.json") in kinds, (
        "README.md lost its headline block: <!-- headline: data/bench/avx512-nine-56-r2.json --> ... <!-- /headline -->"
    )
    assert ("notebooks", "notebooks/run_times.json") in kinds, (
        "README.md lost its notebook map block: <!-- notebooks: notebooks/run_times.json --> ... <!-- /notebooks -->"
    )


@pytest.mark.parametrize("block", readme_blocks(readme_text()), ids=lambda m: f"{m['kind']}:{m['path']}")
def test_generated_block_is_current(block):
    expected = render_block(block["kind"], block["path"], block["body"], REPO)
    if block["body"] != expected:
        diff = "\n".join(list(difflib.unified_diff(block["body"].splitlines(), expected.splitlines(),
                                                   "README.md", "rendered now", lineterm=""))[:30])  # fmt: skip
        pytest.fail(f"README.md's generated block '{block['kind']}: {block['path']}' is stale (its file changed, or "
                    f"the block was edited by hand): run `{README_COMMAND}` (make readme) and commit README.md.\n"
                    f"{diff}")  # fmt: skip


# ---- (b) length -----------------------------------------------------------------------------------------
def test_readme_is_short():
    n = len(readme_text().splitlines())
    assert n <= MAX_LINES, (
        f"README.md has {n} lines (at most {MAX_LINES}): move reference material to notebooks/README.md or "
        "data/README.md, results to data/bench/README.md"
    )


# ---- (c) every bench file is read or indexed ------------------------------------------------------------
def named_in(name: str, paths) -> list[str]:
    """The files among `paths` that name `name` as a whole file name (not as the tail of a longer one)."""
    pattern = re.compile(r"(?<![\w.-])" + re.escape(name) + r"(?![\w.-])")
    return [p.name for p in paths if pattern.search(p.read_text(encoding="utf-8"))]


def index_entries() -> dict[str, str]:
    """data/bench/README.md's entries: {file name: the entry's text}, an entry being a heading that is one file
    name in backticks, down to the next heading."""
    entries, name, lines = {}, None, []
    for line in [*BENCH_INDEX.read_text(encoding="utf-8").splitlines(), "# end"]:
        if line.startswith("#"):
            if name is not None:
                entries[name] = "\n".join(lines)
            m = re.fullmatch(r"#+ `([^`/]+)`", line.strip())
            name, lines = (m.group(1), []) if m else (None, [])
        elif name is not None:
            lines.append(line)
    return entries


def bench_files() -> list[Path]:
    return sorted(p for p in BENCH.iterdir() if p.is_file() and p.name != "README.md")


def test_every_bench_file_is_read_or_indexed():
    readers = sorted((REPO / "notebooks" / "py").glob("*.py")) + sorted(
        p for p in (REPO / "tests").glob("*.py") if p.name != Path(__file__).name
    )
    entries = index_entries()
    orphans = [p.name for p in bench_files() if p.name not in entries and not named_in(p.name, readers)]
    assert not orphans, (
        f"data/bench/ holds files that no notebook (notebooks/py/*.py) or test reads and data/bench/README.md does "
        f"not index: {orphans}. Add an entry for each (a heading `#### `NAME``, the machine from its `machine` "
        "record, the command from its `config`, what it showed), or delete the file"
    )


def test_bench_index_entries_match_their_files():
    entries = index_entries()
    gone = sorted(name for name in entries if not (BENCH / name).is_file())
    assert not gone, f"data/bench/README.md has entries for files that are not in data/bench/: {gone}; remove them"
    wrong = []
    for name, text in entries.items():
        machine = json.loads((BENCH / name).read_text(encoding="utf-8")).get("machine") or {}
        expected = f"{machine.get('cpu')} · {machine.get('isa')}"
        if expected not in text:
            wrong.append(f"{name}: its machine record says '{expected}'")
    assert not wrong, "data/bench/README.md names another machine than the file's own record:\n" + "\n".join(wrong)


# ---- (d) the notebook map -------------------------------------------------------------------------------
def test_notebook_map_lists_every_notebook():
    blocks = [m for m in readme_blocks(readme_text()) if m["kind"] == "notebooks"]
    assert blocks, "README.md has no notebook map block (<!-- notebooks: notebooks/run_times.json -->)"
    listed = {stem for _, _, stem in notebook_map_rows(blocks[0]["body"])}
    notebooks = {p.stem for p in (REPO / "notebooks").glob("[0-9]*.ipynb")}
    missing, extra = sorted(notebooks - listed), sorted(listed - notebooks)
    assert not missing, f"notebooks missing from the README's notebook map (add a row each): {missing}"
    assert not extra, f"the README's notebook map lists notebooks that do not exist: {extra}"


# ---- (e) methods and command lines ----------------------------------------------------------------------
def table_rows(body: str) -> list[list[str]]:
    lines = [line.strip().strip("|") for line in body.splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.split("|")] for line in lines[2:]]  # header and rule aside


def test_methods_table_lists_every_method():
    from specdec_lab.proposers import METHODS

    rows = table_rows(section(readme_text(), "The methods"))
    names = {m.group(1) for r in rows if (m := re.fullmatch(r"`(\w+)`", r[0]))}
    assert set(METHODS) <= names, f"methods missing from the README's methods table: {sorted(set(METHODS) - names)}"
    files = [f for r in rows for f in re.findall(r"`([\w/]+(?:\.py|/))`", r[1])]
    missing = [f for f in files if not (REPO / "specdec_lab" / f).exists()]
    assert files and not missing, f"the methods table names files that are not in specdec_lab/: {missing}"


def module_of(command: str) -> str:
    return command.strip("`").split()[0]


def test_command_line_table_points_at_real_modules():
    body = section(readme_text(), "Command lines")
    rows = [r for r in table_rows(body) if len(r) == 2]
    assert rows, "the README's command-line table is empty"
    for old, new in rows:
        if new != "removed":
            assert importlib.util.find_spec(module_of(new)) is not None, f"README: {new} names no module"
        if " " not in old.strip("`"):  # a renamed module (not a renamed subcommand) must be gone
            assert importlib.util.find_spec(module_of(old)) is None, f"README: {old} is listed as renamed but exists"
    unchanged = re.findall(r"`(specdec_lab[\w.]*)`", body.split("Unchanged:", 1)[1])
    missing = [m for m in unchanged if importlib.util.find_spec(m) is None]
    assert unchanged and not missing, f"README lists as unchanged modules that do not exist: {missing}"


# ---- the renderer ---------------------------------------------------------------------------------------
def tiny_results(identical=(True, False)) -> dict:
    rows = []
    for q, cat in enumerate(["coding", "qa"], start=1):
        rows.append({"question_id": q, "category": cat, "method": "autoregressive", "new_tokens": 10,
                     "seconds": 1.0, "forwards": 10, "identical": True})  # fmt: skip
        rows.append({"question_id": q, "category": cat, "method": "prompt_lookup", "new_tokens": 10,
                     "seconds": 0.5, "forwards": 5, "identical": identical[q - 1]})  # fmt: skip
    labels = ["autoregressive", "prompt_lookup"]
    return {
        "config": {"methods": labels, "max_new_tokens": 10, "repeats": 1, "out": "results/tiny.json"},
        "machine": {"cpu": "Test CPU", "isa": "AVX2", "bf16": False, "torch_threads": 2},
        "prompts_done": 2,
        "methods": labels,
        "summary": summarize(rows, labels),
        "rows": rows,
    }


def test_headline_markdown_renders_a_run():
    md = headline_markdown(tiny_results(), source="data/bench/tiny.json")
    lines = md.splitlines()
    assert lines[0] == "| method | overall [95%] | coding | qa | mean accepted | identical |"
    row = next(line for line in lines if line.startswith("| `prompt_lookup`"))
    assert "2.00×" in row and "| 2.00 |" in row and row.endswith("| 1/2 |"), row
    assert not any(line.startswith("| `autoregressive`") for line in lines)  # the baseline is the caption's
    caption = md.replace("\n", " ")  # captions are wrapped to the README's width
    assert "Test CPU, torch ISA AVX2, bf16 emulated, 2 threads" in caption
    assert "Made by: `python -m specdec_lab.bench --methods autoregressive,prompt_lookup --max-new-tokens 10" in caption
    assert "--out data/bench/tiny.json`" in caption


def test_bench_command_writes_only_what_differs_from_the_defaults():
    cfg = {"methods": "autoregressive,hybrid@int4+compile", "max_new_tokens": 128, "repeats": 2, "limit": None,
           "per_category": 4, "linear": "tuned", "weights": "int4", "compile": True, "traces": False,
           "out": "results/x.json"}  # fmt: skip
    assert bench_command(cfg) == (
        "python -m specdec_lab.bench --methods autoregressive,hybrid@int4+compile --per-category 4 --repeats 2 "
        "--weights int4 --compile --no-traces --out results/x.json"
    )
    assert bench_command(cfg, out="data/bench/x.json").endswith("--out data/bench/x.json")


def test_bench_command_leaves_out_the_clis_own_defaults():
    """The defaults come from the CLI itself (`python -m specdec_lab.bench` with no arguments), not a copy."""
    from dataclasses import asdict

    from specdec_lab.bench.__main__ import parse_args

    cli = asdict(parse_args([])[0])
    everything_default = {key: cli[key] for key, _ in readme._FLAGS if key != "methods"}
    assert bench_command({**everything_default, "methods": "autoregressive"}) == (
        "python -m specdec_lab.bench --methods autoregressive"
    )


def test_format_seconds():
    assert (format_seconds(None), format_seconds(45.4), format_seconds(236)) == ("—", "45 s", "3 min 56 s")


MAP = """| notebook | what it teaches | run time |
|---|---|---|
| [00_a](notebooks/00_a.ipynb) | one thing | — |
| [01_b](notebooks/01_b.ipynb) | another | 9 s |
"""


def test_notebook_map_renders_times_and_dashes(tmp_path):
    missing = render_block("notebooks", "run_times.json", MAP, tmp_path)
    assert "| [00_a](notebooks/00_a.ipynb) | one thing | — |" in missing
    assert "| [01_b](notebooks/01_b.ipynb) | another | — |" in missing  # no file: every time is a dash
    assert "not measured yet" in missing
    (tmp_path / "run_times.json").write_text(json.dumps({"machine": "M · torch ISA AVX2", "date": "2026-12-06",
                                                         "seconds": {"01_b": 123.4}}))  # fmt: skip
    timed = render_block("notebooks", "run_times.json", MAP, tmp_path)
    assert "| [00_a](notebooks/00_a.ipynb) | one thing | — |" in timed
    assert "| [01_b](notebooks/01_b.ipynb) | another | 2 min 03 s |" in timed
    assert "on M · torch ISA AVX2, 2026-12-06" in timed


def test_render_readme_is_idempotent_and_refuses_unknown_blocks(tmp_path):
    text = f"# t\n\n<!-- notebooks: run_times.json -->\n{MAP}<!-- /notebooks -->\n\nend\n"
    once = render_readme(text, tmp_path)
    assert once.startswith("# t\n\n<!-- notebooks: run_times.json -->\n")
    assert once.endswith("<!-- /notebooks -->\n\nend\n")
    assert render_readme(once, tmp_path) == once
    with pytest.raises(ValueError, match="unknown README block kind"):
        render_readme("<!-- nonsense: x.json -->\n<!-- /nonsense -->\n", tmp_path)


def test_cli_checks_and_renders_a_readme(tmp_path, capsys):
    (tmp_path / "run.json").write_text(json.dumps(tiny_results()))
    readme_file = tmp_path / "README.md"
    readme_file.write_text("# t\n<!-- headline: run.json -->\nold\n<!-- /headline -->\n")
    assert readme.main([str(readme_file), "--check"]) == 1
    assert "stale" in capsys.readouterr().out and "old" in readme_file.read_text()  # --check writes nothing
    assert readme.main([str(readme_file)]) == 0
    assert "| `prompt_lookup` |" in readme_file.read_text()
    assert readme.main([str(readme_file), "--check"]) == 0


def test_cli_records_run_times(tmp_path):
    log = tmp_path / "run_times.log"
    log.write_text("00_a 100.0 112.2\n01_b 200 230.5\n")
    out = tmp_path / "run_times.json"
    assert readme.main(["--record-run-times", str(log), str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["seconds"] == {"00_a": 12.2, "01_b": 30.5} and record["machine"] and record["date"]
