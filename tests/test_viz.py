"""specdec_lab.viz and notebook 00's prompt lookup dashboard (lab/prompt_lookup.py): figures from data, token
coloring, the dashboard callback.

No browser and no real model: tiny `Tree`s, hand-made traces, and `tiny_model()` runs.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

from specdec_lab import CostCurve, GenerationResult, StepTrace, Tree, generate, tiny_model
from specdec_lab.accept.tree_rules import residual
from specdec_lab.viz import figures
from specdec_lab.viz.acceptance import residual_figure
from specdec_lab.viz.cost import chain_speedup_figure, cost_curve_figure
from specdec_lab.viz.figures import save_figure
from specdec_lab.viz.tokens import show_tokens, token_roles, tokens_html, trace_table
from specdec_lab.viz.trees import node_labels, tidy_layout, tree_figure, tree_mask_figure


@pytest.fixture
def tree() -> Tree:
    #        0
    #      /   \
    #     1     2
    #    / \     \
    #   3   4     5
    #   |
    #   6
    return Tree(torch.tensor([10, 11, 12, 13, 14, 15, 11]), torch.tensor([-1, 0, 0, 1, 1, 2, 3]))


@pytest.fixture
def curve() -> CostCurve:
    return CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[0.010, 0.011, 0.012, 0.015, 0.024])


def repetitive_ids(seed: int = 3, period: int = 2, length: int = 30) -> list[int]:
    base = torch.randint(0, 256, (period,), generator=torch.Generator().manual_seed(seed)).tolist()
    return (base * length)[:length]


# ---- trees --------------------------------------------------------------------------------------------
def test_tidy_layout_centres_parents_over_children(tree):
    pos = tidy_layout(tree)
    assert set(pos) == set(range(len(tree)))
    leaves = [n for n in range(len(tree)) if not tree.children[n]]
    assert sorted(pos[n][0] for n in leaves) == [0.0, 1.0, 2.0]  # leaves at 0, 1, 2 ...
    assert [pos[n][0] for n in (6, 4, 5)] == [0.0, 1.0, 2.0]  # ... in depth-first order
    for node, kids in enumerate(tree.children):
        if kids:
            xs = [pos[k][0] for k in kids]
            assert pos[node][0] == pytest.approx((min(xs) + max(xs)) / 2)
    for node, depth in enumerate(tree.depths.tolist()):
        assert pos[node][1] == -depth


def test_tidy_layout_of_a_chain_is_a_vertical_line():
    pos = tidy_layout(Tree.chain(1, [2, 3, 4]))
    assert [pos[n] for n in range(4)] == [(0.0, 0.0), (0.0, -1.0), (0.0, -2.0), (0.0, -3.0)]


def test_tree_figure_traces(tree):
    fig = tree_figure(tree.to_networkx(), path=[0, 1, 3, 6])
    names = [t.name for t in fig.data]
    assert names == ["edges", "accepted path", "nodes"]
    nodes = fig.data[2]
    assert len(nodes.x) == len(tree)
    edges = fig.data[0]
    assert len(edges.x) == 3 * (len(tree) - 1)  # each edge: two points and a None gap
    assert [t.name for t in tree_figure(tree).data] == ["edges", "nodes"]


def test_non_candidate_nodes_are_drawn_hollow():
    t = Tree(torch.tensor([1, 2, 3]), torch.tensor([-1, 0, 0]), candidate=torch.tensor([True, True, False]))
    symbols = tree_figure(t).data[-1].marker.symbol
    assert list(symbols) == ["circle", "circle", "circle-open"]


def test_mask_heatmap_has_unique_labels(tree):
    labels = node_labels(tree)
    assert labels[1] == "1:11" and labels[6] == "6:11"  # same token twice, distinct labels
    assert len(set(labels)) == len(labels)
    fig = tree_mask_figure(tree)
    heat = fig.data[0]
    assert heat.type == "heatmap"
    assert list(heat.x) == labels and list(heat.y) == labels
    assert torch.equal(torch.tensor(heat.z, dtype=torch.bool), tree.mask)
    fig = tree_mask_figure(tree, cache_length=4)
    assert fig.data[0].x[0] == "prefix ×4" and all(row[0] == 1 for row in fig.data[0].z)


def test_labels_show_spaces_and_newlines():
    class Tok:
        def decode(self, ids):
            return "".join({1: "The", 2: " cat", 3: "\n"}[i] for i in ids)

    t = Tree(torch.tensor([1, 2, 3]), torch.tensor([-1, 0, 1]))
    assert node_labels(t, Tok()) == ["0:The", "1:▁cat", "2:↵"]


# ---- cost curve ---------------------------------------------------------------------------------------
def test_cost_curve_figure(curve):
    fig = cost_curve_figure(curve)
    names = [t.name for t in fig.data]
    assert len(names) == 4 and names[0].startswith("t(n)") and "break-even" in names[2]
    assert list(fig.data[0].y) == pytest.approx([10, 11, 12, 15, 24])  # ms
    assert list(fig.data[1].y) == pytest.approx([10, 5.5, 3, 15 / 8, 1.5])  # ms per token
    assert list(fig.data[2].y) == pytest.approx(curve.relative())
    assert list(fig.data[3].y) == [1, 2, 4, 8, 16]
    # the right panel shows the whole diagonal n and the whole break-even curve: the gap between them is the point
    x2, y2 = fig.layout.xaxis2, fig.layout.yaxis2
    assert x2.type == y2.type == "log"
    assert 10 ** y2.range[0] < min(curve.relative()) and 10 ** y2.range[1] > max(curve.sizes)
    assert 10 ** x2.range[0] < min(curve.sizes) and 10 ** x2.range[1] > max(curve.sizes)


def test_chain_speedup_figure(curve):
    fig = chain_speedup_figure(curve, ks=(1, 4), alphas=[0.0, 0.5, 1.0])
    assert [t.name for t in fig.data] == ["k = 1", "k = 4"]
    # α = 1: k + 1 tokens per forward costing t(k+1)/t(1)
    assert fig.data[1].y[-1] == pytest.approx(5 / (curve(5) / curve(1)))
    assert fig.data[0].y[0] == pytest.approx(1 / (curve(2) / curve(1)))  # α = 0: one token, dearer forward


# ---- acceptance ---------------------------------------------------------------------------------------
def test_residual_figure_draws_p_q_and_the_residual_that_restores_p():
    p = np.array([0.50, 0.25, 0.15, 0.10, 0.00])
    q = np.array([0.30, 0.40, 0.05, 0.05, 0.20])
    r, alpha = residual(torch.from_numpy(p), torch.from_numpy(q), 0).numpy(), np.minimum(p, q).sum()
    assert np.minimum(p, q) + (1 - alpha) * r == pytest.approx(p)  # accepted mass + rejected mass · residual = p

    fig = residual_figure(p, q, [f"x{i}" for i in range(5)], top=4)
    assert [t.name for t in fig.data] == ["target p", "draft q", "residual norm(max(p − q, 0))"]
    # the top 4 by max(p, q), most likely under p first: x4 is shown although the target never wants it
    assert [list(t.x) for t in fig.data] == [["x0", "x1", "x2", "x4"]] * 3
    assert list(fig.data[2].y) == pytest.approx(r[[0, 1, 2, 4]])
    assert fig.layout.template.layout.plot_bgcolor == "white" and fig.layout.width <= 950


# ---- tokens ------------------------------------------------------------------------------------------
def hand_made_result() -> GenerationResult:
    steps = [
        # proposed 3 drafts (21, 22, 23); 21 and 22 accepted, bonus 30; 23 rejected
        StepTrace([20, 21, 22, 23], [-1, 0, 1, 2], [0, 1, 2], [21, 22, 30], 0.001, 0.01, 0.001, {"k": 3}),
        # nothing proposed: one target token
        StepTrace([30], [-1], [0], [31], 0.0, 0.01, 0.0, {"k": 0}),
        # 2 proposed, none accepted
        StepTrace([31, 40, 41], [-1, 0, 1], [0], [32], 0.0, 0.01, 0.0, {"k": 2}),
    ]
    return GenerationResult(
        tokens=[21, 22, 30, 31, 32],
        prompt_tokens=[1, 2, 20],
        text=None,
        stop_reason="max_new_tokens",
        method="prompt_lookup",
        seconds=0.05,
        prefill_seconds=0.01,
        steps=steps,
        forwards=3,
    )


def spans(html: str, role: str) -> list[str]:
    return re.findall(rf'<span class="sd-{role}"[^>]*>([^<]*)</span>', html)


def test_tokens_html_marks_accepted_target_and_rejected():
    res = hand_made_result()
    assert token_roles(res) == [
        [("accepted", 21), ("accepted", 22), ("target", 30), ("rejected", 23)],
        [("target", 31)],
        [("target", 32), ("rejected", 40), ("rejected", 41)],
    ]
    html = tokens_html(res, legend=False)
    assert spans(html, "accepted") == ["[21]", "[22]"]
    assert spans(html, "target") == ["[30]", "[31]", "[32]"]
    assert spans(html, "rejected") == ["[23]", "[40]", "[41]"]
    assert "line-through" in html.split('class="sd-rejected"')[1].split(">")[0]
    assert html.count('class="sd-step"') == 3
    assert "2 accepted draft, 3 target, 3 rejected" in html
    assert spans(tokens_html(res, legend=False, show_rejected=False), "rejected") == []
    assert "sd-legend" in tokens_html(res)
    assert show_tokens(res).data == tokens_html(res)


def test_tokens_html_decodes_and_escapes():
    class Tok:
        def decode(self, ids):
            words = {21: "<b>", 22: " x", 30: "\n", 31: "y", 32: "z", 23: "w", 40: "u", 41: "v"}
            return "".join(words.get(i, "") for i in ids)  # the prompt's ids decode to nothing

    html = tokens_html(hand_made_result(), Tok(), legend=False)
    assert spans(html, "accepted")[0] == "&lt;b&gt;"
    assert "<b>" not in html
    assert "↵<br>" in html


def test_show_tokens_text_plain_is_the_emitted_text_and_the_summary_only():
    from IPython.core.formatters import PlainTextFormatter
    from IPython.display import HTML

    class Tok:
        def decode(self, ids):
            words = {21: "a", 22: "b", 30: "c", 31: "d", 32: "e", 23: "REJ", 40: "REJ", 41: "REJ"}
            return "".join(words.get(i, "") for i in ids)

    res = hand_made_result()
    shown = show_tokens(res, Tok())
    assert isinstance(shown, HTML) and shown.data == tokens_html(res, Tok())
    fmt = PlainTextFormatter()
    fmt.for_type(HTML, lambda obj, p, cycle: p.text("the HTML's visible text"))  # as course.start registers one
    text = fmt(shown)
    assert text.splitlines()[0] == "abcde"  # what was emitted, in order
    assert "REJ" not in text  # rejected proposals are not spliced into the text
    assert "2 accepted draft, 3 target, 3 rejected proposals" in text.splitlines()[1]


def test_tokens_html_on_a_real_prompt_lookup_trace():
    model = tiny_model()
    res = generate(model, repetitive_ids(), method="prompt_lookup", max_new_tokens=24, draft_length=4)
    accepted = sum(s.accepted for s in res.steps)
    assert accepted > 0  # this prompt makes the tiny model repeat itself
    html = tokens_html(res, legend=False)
    assert len(spans(html, "accepted")) == accepted
    assert len(spans(html, "target")) == res.forwards  # one target (bonus) token per forward
    assert len(spans(html, "rejected")) == sum(s.proposed - s.accepted for s in res.steps)
    table = trace_table(res)
    assert list(table["accepted"]) == [s.accepted for s in res.steps]
    assert table["emitted"].sum() == len(res.tokens)
    assert {"proposed", "ms_verify", "k", "ngram"} <= set(table.columns)


def test_tokens_html_needs_a_trace():
    res = generate(tiny_model(), [1, 2, 3], max_new_tokens=3, trace=False)
    with pytest.raises(ValueError, match="trace=True"):
        tokens_html(res)


# ---- save_figure --------------------------------------------------------------------------------------
def test_save_figure_writes_stable_html_and_skips_png_gracefully(tmp_path, curve, monkeypatch):
    def no_chromium(*args, **kwargs):
        raise RuntimeError("no Chromium here")

    monkeypatch.setattr(figures, "_write_png", no_chromium)
    fig = cost_curve_figure(curve)
    with pytest.warns(RuntimeWarning, match="PNG export"):
        saved = save_figure(fig, "cost.html", tmp_path / "figs")
    assert saved.png is None and not (tmp_path / "figs" / "cost.png").exists()
    assert saved.html == tmp_path / "figs" / "cost.html"
    first = saved.html.read_bytes()
    assert b'id="fig-cost"' in first and b'src="plotly.min.js"' in first
    assert (tmp_path / "figs" / "plotly.min.js").exists()
    with pytest.warns(RuntimeWarning):
        save_figure(fig, "cost", tmp_path / "figs")
    assert saved.html.read_bytes() == first  # fixed div id: identical bytes


def test_save_figure_without_png(tmp_path, curve):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        saved = save_figure(cost_curve_figure(curve), "c", tmp_path, png=False)
    assert saved.png is None and saved.html.exists()


@pytest.mark.slow
def test_save_figure_png_with_chromium(tmp_path, curve):
    import shutil

    if not shutil.which("chromium"):
        pytest.skip("no chromium: kaleido cannot export PNG")
    saved = save_figure(cost_curve_figure(curve), "c", tmp_path)
    assert saved.png is not None and saved.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quiet_loggers_touches_only_existing_loggers_and_restores_them(capsys):
    """kaleido's driver logs a traceback for a message it ignores; the export quiets the driver's own loggers
    (never creating one: the driver expects its own logger class) and restores their levels afterwards."""
    import logging

    own = logging.getLogger("specdec_quiet_probe.child")
    own.setLevel(logging.INFO)
    before = set(logging.Logger.manager.loggerDict)
    with figures._quiet_loggers("specdec_quiet_probe", "no_such_library_here"):
        assert own.level == logging.CRITICAL
        try:
            raise ValueError("ignored message")
        except ValueError:
            own.exception("decoding message. Ignoring")
    assert own.level == logging.INFO
    assert set(logging.Logger.manager.loggerDict) == before, "quieting created a logger"
    assert "Traceback" not in capsys.readouterr().err


# ---- widgets ------------------------------------------------------------------------------------------
def test_dashboard_callback_with_a_tiny_model():
    pytest.importorskip("ipywidgets")
    from specdec_lab.io import load_prompts
    from specdec_lab.lab.prompt_lookup import PromptLookupDashboard

    prompts = load_prompts()
    assert len(prompts) > 0 and prompts[0].text
    dash = PromptLookupDashboard(tiny_model(), prompts=prompts[:3], max_new_tokens=16)
    dash.picker.value = prompts[1].text  # choosing a prompt fills the text box (observer)
    assert dash.prompt.value == prompts[1].text

    dash.prompt.value = " ".join(map(str, repetitive_ids()))  # no tokenizer: ids
    dash.max_draft.value = 4
    dash.draft_length.value = "fixed"
    dash.compare.value = True
    run = dash.on_run()
    assert run is not None and run.equal is True
    assert len(run.result.tokens) == 16
    assert all(s.proposed <= 4 for s in run.result.steps)
    html = dash.output.value
    assert "sd-accepted" in html and "mean accepted" in html and "equal_to_autoregressive" in html
    assert not dash.button.disabled

    dash.prompt.value = "   "
    assert dash.on_run() is None
    assert "sd-error" in dash.output.value and "prompt is empty" in dash.output.value
    dash.prompt.value = "hello world"
    assert dash.on_run() is None and "token ids" in dash.output.value


def test_run_prompt_lookup_uses_a_given_cost_curve(curve):
    from specdec_lab.lab.prompt_lookup import run_prompt_lookup

    run = run_prompt_lookup(tiny_model(), repetitive_ids(), max_draft=4, max_new_tokens=12, cost_curve=curve)
    assert run.baseline is None and run.equal is None
    assert len(run.result.tokens) == 12
    assert run.stats()["new_tokens"] == 12


def test_byte_tokens_of_one_character_show_the_character_not_replacement_marks():
    """An emoji spread over byte tokens shows once, on the token that completes it (issue: 24 "�")."""
    from specdec_lab.generate import GenerationResult, StepTrace

    class Bytes:
        def decode(self, ids):
            return bytes(ids).decode("utf-8", errors="replace")

    apple = list("🍎".encode())  # 4 bytes = 4 tokens
    steps = [StepTrace([65], [-1], [0], [b], 0.0, 0.0, 0.0) for b in apple]
    res = GenerationResult(tokens=apple, prompt_tokens=[65], text=None, stop_reason="max_new_tokens",
                           method="autoregressive", seconds=1.0, prefill_seconds=0.0, steps=steps,
                           forwards=4)  # fmt: skip
    html = tokens_html(res, Bytes(), legend=False)
    assert "🍎" in html and "\ufffd" not in html
    assert node_labels(Tree(torch.tensor([65, *apple]), torch.tensor([-1, 0, 1, 2, 3])), Bytes())[-1] == "4:🍎"
