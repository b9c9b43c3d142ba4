"""The README's generated blocks: measured numbers in README.md are rendered from their files, never typed.

    <!-- headline: data/bench/avx512-nine-56-r2.json -->    headline_markdown(that bench run)
    ...
    <!-- /headline -->
    <!-- notebooks: notebooks/run_times.json -->            notebook_map_markdown(the block's own rows, the times)
    ...
    <!-- /notebooks -->

`python -m specdec_lab.bench.readme README.md` (`make readme`) renders every block again from its file (paths
relative to the README's folder; `--check` writes nothing and exits 1 naming a stale block, as
tests/test_readme_blocks.py does); `--headline RUN.json` prints one run's table; `--record-run-times TIMES OUT`
writes notebooks/run_times.json from `make reproduce`'s timings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from .report import categories

__all__ = ["bench_command", "headline_markdown", "notebook_map_markdown", "render_readme", "run_times_record", "main"]


README_COMMAND = "python -m specdec_lab.bench.readme README.md"  # (make readme) what renders every block
BLOCK = re.compile(r"<!-- (?P<kind>[a-z][\w-]*): (?P<path>\S+) -->\n(?P<body>.*?)<!-- /(?P=kind) -->\n?", re.S)
MISSING = "—"  # a cell with no measurement

# the CLI's flags in the order a command is written, as (config key, flag): `bench_command` writes a flag whose
# recorded value differs from the CLI's own default (`python -m specdec_lab.bench` with no arguments); a value the
# run did not record (None) is left out.
_FLAGS = (
    ("methods", "--methods"), ("max_new_tokens", "--max-new-tokens"), ("limit", "--limit"),
    ("per_category", "--per-category"), ("repeats", "--repeats"), ("prompts", "--prompts"), ("model", "--model"),
    ("device", "--device"), ("dtype", "--dtype"), ("linear", "--linear"), ("attention", "--attention"),
    ("weights", "--weights"), ("head_weights", "--head-weights"), ("memory", "--memory"), ("seed", "--seed"),
    ("warmup_tokens", "--warmup-tokens"),
)  # fmt: skip


def bench_command(config: dict, out: str | None = None) -> str:
    """The `python -m specdec_lab.bench` command line that makes a run of `config` (a results file's "config"):
    --methods always, every other flag whose recorded value differs from the CLI's default, and --out (`out`, else
    the recorded one). Flags only for what the config records: a run made before a flag existed shows none."""
    import shlex
    from dataclasses import asdict

    from .__main__ import parse_args  # the CLI (its module runs nothing on import)

    defaults = asdict(parse_args([])[0])
    words = ["python", "-m", "specdec_lab.bench"]
    for key, flag in _FLAGS:
        value = config.get(key)
        if key == "methods" and not isinstance(value, str):
            value = ",".join(value or ())
        if key == "head_weights":
            value = _head_flag(config)
        if value is None or (key != "methods" and value == defaults.get(key)):
            continue
        words += [flag, shlex.quote(str(value))]
    if config.get("compile"):
        words.append("--compile")
    if config.get("traces") is False:
        words.append("--no-traces")
    target = out or config.get("out")
    if target:
        words += ["--out", shlex.quote(str(target))]
    return " ".join(words)


def _head_flag(config: dict) -> str | None:
    """--head-weights as the run used it: the LM head of its quantized models (the base model where quantized,
    builds whose label names no head of its own); None where no quantized model ran (the flag changed nothing).
    The CLI's "auto" is "q8_0" (`load_model`): a run of q8_0 heads needs no flag."""
    heads = [config.get("head_weights")] if config.get("weights") not in (None, "fp32") else []
    heads += [b.get("head") for name, b in (config.get("builds") or {}).items()
              if b.get("weights") not in (None, "fp32") and "+head=" not in name]  # fmt: skip
    heads = {h for h in heads if h}
    if not heads:
        return None
    head = heads.pop() if len(heads) == 1 else None
    return None if head in (None, "q8_0") else head


def identical_counts(results: dict, label: str) -> tuple[int, int]:
    """(n, N): of the N prompts whose output `label` compared with autoregressive's, n equal token for token."""
    same = [r["identical"] for r in results["rows"] if r["method"] == label and r.get("identical") is not None]
    return sum(bool(x) for x in same), len(same)


def _speedup_cell(stats: dict, interval: bool = False) -> str:
    if stats.get("speedup") is None:
        return MISSING
    ci = stats.get("speedup_95") if interval else None
    return f"{stats['speedup']:.2f}×" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def headline_markdown(results: dict, source: str | None = None, baseline: str = "autoregressive") -> str:
    """A bench run as one Markdown table, what the README shows: per method (the baseline aside) its speed-up over
    the baseline overall with its 95% interval and per category, mean accepted and identical n/N; then the machine
    (cpu, torch ISA, bf16, threads), the run's size and the command that made it (`source`: the file's path).

    Every number is the file's own `summary` (and, for identical, its rows): nothing is re-measured or re-sampled.
    """
    summary, cfg, machine = results["summary"], results.get("config") or {}, results.get("machine") or {}
    labels = [x for x in summary if x != baseline]
    cats = categories(results["rows"])
    head = ["method", "overall [95%]", *cats, "mean accepted", "identical"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label in labels:
        s = summary[label]
        n, total = identical_counts(results, label)
        cells = [f"`{label}`", _speedup_cell(s, interval=True)]
        cells += [_speedup_cell(s["by_category"].get(c, {})) for c in cats]
        cells += [f"{s['mean_accepted']:.2f}" if s.get("mean_accepted") is not None else MISSING,
                  f"{n}/{total}" if total else MISSING]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    base = summary.get(baseline, {})
    bf16 = "bf16 native" if machine.get("bf16") else "bf16 emulated"
    sampled = any("temperature=" in x for x in summary)
    rate = f"; {baseline} {base['tokens_per_s']:.1f} tokens/s" if base.get("tokens_per_s") else ""
    captions = [
        f"Speed-up = Σ tokens / Σ seconds over `{baseline}`'s on the same prompts, in the same process "
        "[95% paired bootstrap over prompts]; mean accepted = tokens emitted per target forward, bonus included; "
        f"identical = prompts whose output equals `{baseline}`'s token for token.",
        f"Machine: {machine.get('cpu') or machine.get('arch', '?')}, torch ISA {machine.get('isa', '?')}, {bf16}, "
        f"{machine.get('torch_threads', '?')} threads. Run: {results.get('prompts_done', '?')} prompts, "
        f"{cfg.get('max_new_tokens', '?')} new tokens, {'sampled where a label says so' if sampled else 'greedy'}, "
        f"{cfg.get('weights') or 'fp32'}{' compiled' if cfg.get('compile') else ' eager'}, "
        f"repeats {cfg.get('repeats') or 1}{rate}.",
        f"Made by: `{bench_command(cfg, out=source)}`.",
    ]
    for caption in captions:
        lines += ["", _wrap(caption)]
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 116) -> str:
    """A caption as lines of at most `width` characters (Markdown joins them again; words are never split)."""
    import textwrap

    return textwrap.fill(text, width=width, break_long_words=False, break_on_hyphens=False)


def format_seconds(seconds: float | None) -> str:
    """45 -> '45 s', 236 -> '3 min 56 s'; None -> '—'."""
    if seconds is None:
        return MISSING
    s = int(round(seconds))
    return f"{s} s" if s < 100 else f"{s // 60} min {s % 60:02d} s"


NOTEBOOK_CELL = re.compile(r"\b(\d\d_\w+)")  # NN_name, with or without .ipynb after it


def notebook_map_rows(body: str) -> list[tuple[str, str, str]]:
    """The rows of a notebook map (a Markdown table whose first cell names NN_name): (first cell, what it teaches,
    notebook stem). The last cell (its run time) is the renderer's; a description must not contain '|'."""
    rows = []
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 3 and (m := NOTEBOOK_CELL.search(cells[0])):
            rows.append((cells[0], " | ".join(cells[1:-1]), m.group(1)))
    return rows


def notebook_map_markdown(rows: Sequence[tuple[str, str, str]], run_times: dict | None,
                          source: str = "notebooks/run_times.json") -> str:  # fmt: skip
    """The notebook map: one row per notebook (first cell, what it teaches, its run time from `run_times`, the
    file `make reproduce` writes: {"machine", "date", "seconds": {stem: seconds}}; '—' where it has none)."""
    seconds = (run_times or {}).get("seconds") or {}
    lines = ["| notebook | what it teaches | run time |", "|---|---|---|"]
    lines += [f"| {first} | {what} | {format_seconds(seconds.get(stem))} |" for first, what, stem in rows]
    if run_times:
        caption = (f"Run times: `make reproduce` (papermill, default parameters) on {run_times.get('machine', '?')}, "
                   f"{run_times.get('date', '?')} (`{source}`).")  # fmt: skip
    else:
        caption = f"Run times: not measured yet; `make reproduce` writes them to `{source}`."
    return "\n".join([*lines, "", _wrap(caption)]) + "\n"


def render_block(kind: str, path: str, body: str, root) -> str:
    """A README block rendered again from its file (`path`, relative to `root`)."""
    import json
    from pathlib import Path

    file = Path(root) / path
    if kind == "headline":
        try:
            results = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ValueError(f"block '{kind}: {path}': cannot read the bench results: {e}") from e
        return headline_markdown(results, source=path)
    if kind == "notebooks":
        rows = notebook_map_rows(body)
        if not rows:
            raise ValueError(f"block '{kind}: {path}' has no table rows naming a notebook (| NN_name | ... |)")
        times = json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None
        return notebook_map_markdown(rows, times, source=path)
    raise ValueError(f"unknown README block kind {kind!r} (known: headline, notebooks)")


def readme_blocks(text: str) -> list[re.Match]:
    """Every generated block of a README's text, in order."""
    return list(BLOCK.finditer(text))


def render_readme(text: str, root) -> str:
    """The README's text with every generated block rendered again from its file; the rest unchanged."""

    def again(m: re.Match) -> str:
        body = render_block(m["kind"], m["path"], m["body"], root)
        return f"<!-- {m['kind']}: {m['path']} -->\n{body}<!-- /{m['kind']} -->\n"

    return BLOCK.sub(again, text)


def run_times_record(seconds: dict[str, float], sections: dict[str, dict[str, float]] | None = None) -> dict:
    """What `make reproduce` writes to notebooks/run_times.json: this machine, today, each notebook's seconds,
    and (where the executed notebook is at hand) its seconds per `##` section, which the teacher's kit's syllabus
    reads (specdec_lab/lab/teacher.py)."""
    import datetime

    from ..machine import machine

    record = {"machine": machine().describe(), "date": datetime.date.today().isoformat(),
              "seconds": {k: round(float(v), 1) for k, v in sorted(seconds.items())}}  # fmt: skip
    if sections:
        record["sections"] = {k: {h: round(float(t), 1) for h, t in v.items()} for k, v in sorted(sections.items())}
    return record


INTRODUCTION = "Introduction"  # the section of the cells before a notebook's first `##` heading


def cells_by_section(cells) -> Iterator[tuple[str, dict]]:
    """(the `##` heading in force, cell) for every cell: a markdown cell's own headings count from that cell on;
    the cells before the first heading are in INTRODUCTION. One walk for the run-time record (`section_seconds`)
    and the teacher's syllabus (`lab.teacher.sections`), so their section names agree."""
    heading = INTRODUCTION
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            src = cell.get("source", "")
            for line in (src if isinstance(src, str) else "".join(src)).splitlines():
                if line.startswith("## "):
                    heading = line[3:].strip()
        yield heading, cell


def section_seconds(notebook: dict) -> dict[str, float]:
    """{`##` heading: seconds} of an executed notebook, from papermill's per-cell durations (`cells_by_section`)."""
    out: dict[str, float] = {}
    for heading, cell in cells_by_section(notebook.get("cells", [])):
        duration = cell.get("metadata", {}).get("papermill", {}).get("duration")
        if cell.get("cell_type") == "code" and duration is not None:
            out[heading] = out.get(heading, 0.0) + float(duration)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m specdec_lab.bench.readme README.md [--check]`, `--headline RUN.json`, `--record-run-times TIMES OUT`
    (module docstring)."""
    import argparse
    import json

    p = argparse.ArgumentParser(prog="python -m specdec_lab.bench.readme", description=main.__doc__)
    p.add_argument("readme", nargs="?", help="render every generated block of this README again, in place")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if a block is stale")
    p.add_argument("--headline", metavar="RUN", help="print a bench results JSON's headline table as Markdown")
    p.add_argument("--record-run-times", nargs=2, metavar=("TIMES", "OUT"),
                   help="write OUT (notebooks/run_times.json) from TIMES: `stem t0 t1` per notebook")  # fmt: skip
    p.add_argument("--executed", default="results/notebooks", metavar="DIR",
                   help="with --record-run-times: the executed notebooks, for seconds per section")  # fmt: skip
    args = p.parse_args(argv)
    if args.headline:
        try:
            with open(args.headline, encoding="utf-8") as f:
                run = json.load(f)
        except (OSError, ValueError) as e:
            p.error(f"cannot read bench results {args.headline!r}: {e}")
        print(headline_markdown(run, source=args.headline), end="")
        return 0
    if args.record_run_times:
        return _record_run_times_main(p, *args.record_run_times, executed=args.executed)
    if args.readme is None:
        p.error("name a README to render (README.md), or --headline RUN.json, or --record-run-times TIMES OUT")
    return _readme_main(p, args.readme, check=args.check)


def _readme_main(p, readme: str, check: bool) -> int:
    from pathlib import Path

    from ..io import atomic_path

    path = Path(readme)
    try:
        text = path.read_text(encoding="utf-8")
        new = render_readme(text, path.resolve().parent)
    except (OSError, ValueError) as e:
        p.error(str(e))
    old = {(m["kind"], m["path"]): m["body"] for m in readme_blocks(text)}
    stale = [f"{m['kind']}: {m['path']}" for m in readme_blocks(new) if old.get((m["kind"], m["path"])) != m["body"]]
    if check:
        for name in stale:
            print(f"stale: {readme} block '{name}'; run `{README_COMMAND}` (make readme)")
        return 1 if stale else 0
    if new != text:
        with atomic_path(path) as tmp:
            tmp.write_text(new, encoding="utf-8")
    print(f"{readme}: {len(old)} generated block(s), {len(stale)} rendered anew" +
          (f" ({', '.join(stale)})" if stale else ""))  # fmt: skip
    return 0


def _record_run_times_main(p, times: str, out: str, executed: str = "results/notebooks") -> int:
    import json
    from pathlib import Path

    from ..io import write_json

    seconds = {}
    try:
        with open(times) as f:
            for n, line in enumerate(f, 1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) not in (2, 3):
                    p.error(f"{times}:{n}: expected `stem t0 t1` or `stem seconds`, got {line.strip()!r}")
                values = [float(x) for x in fields[1:]]
                seconds[fields[0]] = values[-1] - values[0] if len(values) == 2 else values[0]
    except (OSError, ValueError) as e:
        p.error(f"cannot read notebook timings {times!r}: {e}")
    sections = {}
    for stem in seconds:
        path = Path(executed) / f"{stem}.ipynb"
        if path.is_file():
            try:
                sections[stem] = section_seconds(json.loads(path.read_text(encoding="utf-8")))
            except ValueError as e:
                p.error(f"cannot read the executed notebook {path}: {e}")
    write_json(out, run_times_record(seconds, sections))
    print(f"wrote {out} ({len(seconds)} notebooks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
