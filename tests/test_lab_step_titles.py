"""Notebook 08's step-tree captions (`viz.lab_figures`): counts read as the lab names them."""

from __future__ import annotations


def _result():
    from specdec_lab.generate import GenerationResult, StepTrace

    def step(proposed, path, emitted):  # a chain of `proposed` drafts after the root; `path` accepted nodes
        return StepTrace(list(range(100, 101 + proposed)), list(range(-1, proposed)), path, emitted, 0, 0, 0)

    steps = [step(0, [0], [1]), step(1, [0, 1], [2, 3]), step(3, [0, 1, 2], [4, 5, 6])]
    tokens = [t for s in steps for t in s.emitted]
    return GenerationResult(tokens, [5, 6], None, "max_new_tokens", "prompt_lookup", 0.3, 0.0, steps,
                            forwards=len(steps))  # fmt: skip


def test_a_plain_step_is_one_node_and_named_a_plain_step():
    from specdec_lab.viz.lab_figures import lab_step_tree_figure

    result = _result()
    plain = lab_step_tree_figure(result, 0).layout.title.text
    assert "1 node, a plain step (nothing proposed)" in plain
    assert "1 nodes" not in plain and "0 of 0" not in plain
    one = lab_step_tree_figure(result, 1).layout.title.text  # 2 nodes, 1 of 1 accepted: the counts kept
    assert "2 nodes, 1 of 1 proposed accepted" in one
    assert "4 nodes, 2 of 3 proposed accepted" in lab_step_tree_figure(result, 2).layout.title.text
