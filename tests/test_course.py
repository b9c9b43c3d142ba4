"""`specdec_lab.lab.course`: the sentence follows the numbers (fed both orders, it turns), and an exercise's check
says what is missing, what is wrong, and what was right."""

from __future__ import annotations

import datetime
import re

import pytest
import torch

from specdec_lab.lab.course import ExerciseError, check, compare, ran_on, runs_in, start

ABOVE, BELOW, WITHIN = "{a:.1f} ms is dearer than {b:.1f} ms", "{a:.1f} ms is no dearer than {b:.1f} ms", "about equal"


@pytest.mark.parametrize(("a", "b", "expected"), [(30.0, 20.0, "30.0 ms is dearer than 20.0 ms"),
                                                  (20.0, 30.0, "20.0 ms is no dearer than 30.0 ms")])  # fmt: skip
def test_the_sentence_turns_when_the_numbers_do(a, b, expected):
    assert compare(a, b, ABOVE, BELOW) == expected
    assert compare(b, a, ABOVE, BELOW) != expected  # the opposite numbers, the opposite sentence


def test_within_noise_is_its_own_sentence():
    assert compare(30.0, 29.5, ABOVE, BELOW, WITHIN, rel_tol=0.02) == "about equal"
    assert compare(30.0, 25.0, ABOVE, BELOW, WITHIN, rel_tol=0.02).startswith("30.0 ms is dearer")
    assert compare(25.0, 30.0, ABOVE, BELOW, WITHIN, rel_tol=0.02).startswith("25.0 ms is no dearer")
    # "within 52%": the larger at most 1.52x the smaller (1.89 against 3.50 is 85% apart: not within)
    assert compare(3.50, 1.89, ABOVE, BELOW, WITHIN, rel_tol=0.52).startswith("3.5 ms is dearer")
    assert compare(2.80, 1.89, ABOVE, BELOW, WITHIN, rel_tol=0.52) == "about equal"
    assert compare(3.0, 3.0, ABOVE, BELOW, WITHIN) == "about equal"  # rel_tol 0: equal only
    assert compare(3.0, 3.0, ABOVE, BELOW) == "3.0 ms is no dearer than 3.0 ms"  # no `within`: not above
    assert compare(2, 1, "{a} over {b} at k = {k}", "", k=4) == "2 over 1 at k = 4"
    with pytest.raises(ValueError, match="NaN"):
        compare(float("nan"), 1.0, ABOVE, BELOW)


def test_check_names_a_missing_a_wrong_and_a_right_answer(capsys):
    mask = torch.tensor([[True, False], [True, True]])
    with pytest.raises(ExerciseError, match="no answer yet — replace the `...`"):
        check("the mask", ..., mask)
    with pytest.raises(ExerciseError, match="no answer yet"):
        check("the mask", None, mask)  # a stub function whose body is `...` returns None
    with pytest.raises(ExerciseError, match=r"shape \(1, 2\), expected \(2, 2\)"):
        check("the mask", mask[:1], mask)
    with pytest.raises(ExerciseError, match="1 of 4 elements differ. Hint: row i"):
        check("the mask", torch.tensor([[True, True], [True, True]]), mask, hint="Hint: row i.")
    check("the mask", mask.clone(), mask)
    assert capsys.readouterr().out == "✓ the mask: equal to the library's, element for element\n"
    check("alpha", 0.3001, 0.3, close=1e-3)
    with pytest.raises(ExerciseError, match="0.31, the library's 0.3"):
        check("alpha", 0.31, 0.3, close=1e-3)
    check("a sample", [1, 2], [2, 1], close=lambda a, b: sorted(a) == sorted(b))
    with pytest.raises(ExerciseError, match="got 3, expected 4"):
        check("k", 3, 4)


def test_the_first_output_names_the_machine_and_the_date(capsys, tmp_path, monkeypatch):
    line = ran_on(datetime.date(2026, 12, 6))
    assert re.fullmatch(r"Ran on: .+ · torch ISA \w+ · .+ · \d+ threads · torch \S+ · 2026-12-06", line), line
    monkeypatch.setenv("SPECDEC_LAB_FIGURES", str(tmp_path))
    threads = torch.get_num_threads()
    try:
        assert start("../figures") == tmp_path  # CI's override wins over the notebook's folder
        assert capsys.readouterr().out.startswith("Ran on: ")
        import plotly.io as pio

        assert pio.templates.default == "plotly_white"
    finally:
        torch.set_num_threads(threads)


def test_runs_in_reads_the_last_reproduce_run(tmp_path):
    record = tmp_path / "run_times.json"
    assert "not measured yet" in runs_in("00_x", record)
    record.write_text('{"machine": "M", "seconds": {"00_x": 95.0}}')
    assert runs_in("00_x", record) == "Runs in about 1.6 min with its defaults (the last `make reproduce`: M)."
    assert "not measured yet" in runs_in("01_y", record)
    record.write_text('{"machine": "M", "seconds": {"00_x": 23.6}}')  # under a minute: seconds, not "about 1 min"
    assert runs_in("00_x", record) == "Runs in about 24 s with its defaults (the last `make reproduce`: M)."


def test_every_figure_function_uses_the_one_template():
    """Every `update_layout` in the figure code names `TEMPLATE` (viz/figures.py), so no figure falls back to
    plotly's grey default; notebooks make it the default too (`start`)."""
    import ast
    from pathlib import Path

    from specdec_lab.lab.course import TEMPLATE

    root = Path(__file__).resolve().parents[1] / "specdec_lab"
    missing = []
    for path in [*sorted((root / "viz").glob("*.py")), root / "sweep" / "gather.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "update_layout":
                if not any(k.arg == "template" for k in node.keywords):
                    missing.append(f"{path.relative_to(root)}:{node.lineno}")
    assert TEMPLATE == "plotly_white" and not missing, f"update_layout without template=TEMPLATE: {missing}"


def test_a_styled_table_markdown_and_html_store_their_text(monkeypatch):
    """`course.start` makes every pandas Styler's text/plain its formatted cells (`viz.tables.styler_text`), not
    `<pandas.io.formats.style.Styler at 0x…>`, and a Markdown's or HTML's the text it shows: what the kernel emits
    on a re-run (nbval) is then what `make store` keeps."""
    import types

    import IPython
    import pandas as pd
    from IPython.core.formatters import PlainTextFormatter
    from IPython.display import HTML, Markdown

    from specdec_lab.viz.tables import register_readable_text, styler_text

    styled = pd.DataFrame({"speed-up": [1.234, 0.9]}, index=["medusa", "draft"]).style.format("{:.2f}x")
    lines = styler_text(styled.set_caption("prompt 3")).splitlines()
    assert lines[0] == "prompt 3" and "1.23x" in lines[2] and "0.90x" in lines[3] and "Styler at" not in "".join(lines)
    assert len({len(line) for line in lines[1:]}) == 1  # aligned columns
    monkeypatch.setattr(IPython, "get_ipython", lambda: None)
    assert not register_readable_text()  # no kernel: nothing to register
    plain = PlainTextFormatter()
    shell = types.SimpleNamespace(display_formatter=types.SimpleNamespace(formatters={"text/plain": plain}))
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    assert register_readable_text()
    assert plain(styled) == styler_text(styled) and "Styler at 0x" not in plain(styled)
    assert plain(Markdown("**α** = 0.6")) == "**α** = 0.6"
    assert plain(HTML("<p>a &amp; b</p><p>c</p>")) == "a & b\nc"


def test_a_file_from_another_machine_is_named_never_this_machine(tmp_path):
    import json
    from pathlib import Path

    from specdec_lab.lab.provenance import measured_where, same_machine, table_machine

    here = {"cpu": "Intel(R) Xeon(R) Processor", "isa": "AVX512", "threads": 2}
    epyc = {"cpu": "AMD EPYC", "isa": "AVX512", "torch_threads": 2}
    assert not same_machine(epyc, here) and measured_where(epyc, here) == "AMD EPYC (AVX512, 2 threads)"
    twin = {**epyc, "cpu": here["cpu"]}
    assert same_machine(twin, here) and measured_where(twin, here).startswith("this machine (Intel")
    assert not same_machine({**twin, "torch_threads": 4}, here)  # other threads, another measurement
    assert measured_where(None, here) == "a machine the file does not record"
    committed = Path(__file__).resolve().parents[1] / "data" / "sweeps" / "tables" / "lookahead_wng.csv"
    assert table_machine(committed)["cpu"] == "AMD EPYC"  # the committed table: the machine its log names
    own = tmp_path / "table.csv"
    own.write_text("id\n")
    assert table_machine(own) is None  # nothing says where it ran
    (tmp_path / "table.json").write_text(json.dumps({"best": {"result": {"machine": epyc}}}))
    assert table_machine(own) == epyc  # a sweep's own table: its table.json's machine


def test_a_watched_reference_called_by_the_answer_is_refused(capsys):
    from specdec_lab.lab.course import ExerciseError, check, watch

    class Coins:
        def sample(self, p):
            return max(p)

    ns = {"reference": lambda x: 2 * x, "coins": Coins()}
    w = watch(ns, "reference", "coins.sample")
    w2 = watch(ns, "reference", "coins.sample")  # a stub cell run twice wraps once
    assert ns["reference"].__watched__ is w2.originals["reference"] and w.originals["reference"](3) == 6
    # an answer from the definition passes; the check's own reference goes through the unwatched original
    w2.begin_check()
    check("double", 2 * 3, w2["reference"](3), watch=w2)
    # the unwatched original taken by the answer (before the check cell begins) counts as calling the reference
    answer = w2["reference"](3)
    with pytest.raises(ExerciseError, match="the answer called `reference`"):
        check("double", answer, w2.begin_check()["reference"](3), watch=w2)
    # an answer that calls the reference (or the watched method) is refused whatever its value, and says which
    for copied in (lambda: ns["reference"](3), lambda: ns["coins"].sample([1, 6])):
        answer = copied()
        with pytest.raises(ExerciseError, match="the answer called"):
            check("double", answer, 6, watch=w2)
    check("double", 6, 6, watch=w2)  # the record is cleared by the refusal: a fresh answer is judged on its value
    assert "✓ double" in capsys.readouterr().out


def test_a_watched_module_function_goes_through_a_view_and_the_module_is_untouched():
    import json as module

    from specdec_lab.lab.course import ExerciseError, check, watch

    ns = {"policy": module}
    w = watch(ns, "policy.dumps")
    assert module.dumps is w["policy.dumps"]  # the library's module keeps its own function
    assert ns["policy"].loads is module.loads  # every other attribute is the module's
    with pytest.raises(ExerciseError, match="policy.dumps"):
        check("json", ns["policy"].dumps([1]), "[1]", watch=w)
    watch(ns, "policy.dumps")  # a stub run twice: one view, one wrapper
    assert ns["policy"].dumps.__watched__ is module.dumps


def test_a_watched_module_function_is_watched_through_its_submodules_too():
    """`accept.accept_speculative` watched: `accept.chain.accept_speculative` (the same function reached through a
    submodule) is the same watched wrapper, so the detour is refused too; the package stays untouched."""
    from specdec_lab import accept
    from specdec_lab.lab.course import ExerciseError, check, watch

    ns = {"accept": accept}
    w = watch(ns, "accept.accept_speculative")
    detour = ns["accept"].chain.accept_speculative
    assert detour is ns["accept"].accept_speculative and accept.chain.accept_speculative is w.originals[
        "accept.accept_speculative"]  # fmt: skip
    assert ns["accept"].chain.chain_nodes is accept.chain.chain_nodes  # other functions are the module's own
    with pytest.raises(TypeError):
        detour()  # the wrapper records the call, then the function refuses the missing arguments
    with pytest.raises(ExerciseError, match="accept_speculative"):
        check("rule", 1, 1, watch=w)
