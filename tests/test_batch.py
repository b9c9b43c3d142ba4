"""Speculation in a batch (`specdec_lab.batch`): B sequences, each the one loop's steps, one target forward for all.

Central tests: one forward over B rows' trees gives each row the logits of its own forward (each row at its own
cache length); after per-row `keep`, each row's K/V equal a fresh recompute of its tokens; rows advance by
different counts and finish at different steps, a queue longer than the batch flows through freed rows, and every
method's greedy output per row equals `generate`'s for that prompt alone; sampled, a batch still emits the
target's distribution (the G-test of test_sampling_methods, on a batch); bad input is refused naming the fix.
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept.exactness import g_test
from specdec_lab.batch import generate_batch
from specdec_lab.cost import CostCurve, set_cost_curve
from specdec_lab.cost.gate import SpeculationGate
from specdec_lab.eagle import random_drafter
from specdec_lab.kv_cache import KVCache, RowsCache
from specdec_lab.medusa import MedusaHeads
from specdec_lab.models.draft_model import Draft
from specdec_lab.sampling import Sampling
from specdec_lab.trees.tree import Tree
from specdec_lab.verify import prefill, verify_rows, verify_tree
from tests.test_sampling_methods import N_TOKENS, PROMPT, RUNS, autoregressive_joint, medusa_drafter, perturbed

PROMPTS = [[1, 2, 3, 1, 2, 3, 1, 2], [7, 8, 9], [4, 4, 4, 4, 4, 4], [10, 11, 12, 10, 11], [3], [20, 21, 20, 21, 20]]


@pytest.fixture(scope="module")
def model():
    model = S.tiny_model(num_layers=2, eos_token_id=None, seed=0)
    for rows in (1, 2, 3, 4):  # flat curves: every draft and tree pays, whatever the batch
        for tree in (False, True):
            set_cost_curve(model, CostCurve(sizes=[1, 64], seconds=[1.0, 1.0], tree=tree), rows=rows)
    return model


def test_one_forward_over_ragged_rows_gives_each_row_its_own_logits(model):
    contexts = [torch.arange(5) * 3 % 200, torch.arange(9) * 7 % 200, torch.arange(2) + 11]
    trees = [Tree(torch.tensor([4, 5, 6, 7]), torch.tensor([-1, 0, 0, 1])), Tree.root(9), None]
    rows = RowsCache(model, 3, capacity=64)
    for b, ctx in enumerate(contexts):
        prefill(model, rows.row(b), ctx)
    outs = verify_rows(model, rows, trees)
    assert outs[2] is None and rows.row(2).layers[0].length == 2  # no tree: left as it was
    for b in (0, 1):
        cache = KVCache.for_model(model, capacity=64)
        prefill(model, cache, contexts[b])
        ref = verify_tree(model, cache, trees[b])
        torch.testing.assert_close(outs[b].logits, ref.logits, rtol=1e-4, atol=1e-4)


@torch.inference_mode()
def test_kv_after_per_row_keep_equals_a_fresh_recompute_per_row(model):
    """Each row keeps its own path (ragged: 3, 1 and 2 entries); its K/V then equal those a fresh prefill of the
    row's committed tokens computes, and a second batched step goes on from there."""
    contexts = [[5, 6, 7], [8, 9, 10, 11, 12], [13]]
    trees = [Tree(torch.tensor([1, 2, 3, 4]), torch.tensor([-1, 0, 1, 0])), Tree.chain(2, [3, 4]),
             Tree(torch.tensor([3, 5, 6]), torch.tensor([-1, 0, 0]))]  # fmt: skip
    paths = [[0, 1, 2], [0], [0, 2]]
    rows = RowsCache(model, 3, capacity=64)
    for b, ctx in enumerate(contexts):
        prefill(model, rows.row(b), torch.tensor(ctx))
    verify_rows(model, rows, trees)
    for b, path in enumerate(paths):
        rows.row(b).keep(path)
    verify_rows(model, rows, [Tree.root(9), None, Tree.chain(1, [2])])
    rows.row(0).keep([0])
    rows.row(2).keep([0, 1])
    committed = [contexts[0] + [1, 2, 3, 9], contexts[1] + [2], contexts[2] + [3, 6, 1, 2]]
    assert rows.lengths == [len(c) for c in committed]
    for b, tokens in enumerate(committed):
        fresh = KVCache.for_model(model, capacity=64)
        prefill(model, fresh, torch.tensor(tokens))
        for mine, theirs in zip(rows.row(b).layers, fresh.layers, strict=True):
            torch.testing.assert_close(mine.keys, theirs.keys, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(mine.values, theirs.values, rtol=1e-5, atol=1e-5)


def methods(model) -> dict[str, dict]:
    heads = MedusaHeads.for_model(model, num_heads=2)
    with torch.no_grad():
        heads.w1.copy_(torch.randn(heads.w1.shape, generator=torch.Generator().manual_seed(0)) * 0.05)
    eagle = random_drafter(model, "eagle3", vocab=torch.arange(256), seed=1)
    draft = Draft(model=S.tiny_model(num_layers=2, eos_token_id=None, seed=3), vocab=None, name="another tiny")
    return {
        "autoregressive": {},
        "prompt_lookup": {"draft_length": 3},
        "draft": {"draft": draft, "draft_length": 2},
        "layer_skip": {"n_layers": 1, "draft_length": 2},
        "medusa": {"heads": heads, "tree": "cartesian:3,2"},
        "eagle": {"weights": eagle, "draft_length": 2},
        "hybrid": {"heads": medusa_drafter(model), "max_budget": 6},
        "jacobi": {},
        "lookahead": {"W": 2, "N": 3, "G": 2},
    }


@pytest.mark.parametrize("batch_size", [2, 4])
def test_every_method_per_row_equals_its_prompt_alone(model, batch_size):
    """Six prompts through `batch_size` rows (a queue longer than the batch), with an EOS that some rows emit early:
    rows finish at different steps and freed rows take the next prompt; each row's output is what `generate`
    emits for its prompt alone, for every method."""
    ref = [S.generate(model, p, max_new_tokens=14).tokens for p in PROMPTS]
    eos = Counter(t for r in ref for t in r[2:10]).most_common(1)[0][0]  # emitted by some rows, not all
    ref = [S.generate(model, p, max_new_tokens=14, eos_token_id=eos).tokens for p in PROMPTS]
    assert len({len(r) for r in ref}) > 1  # rows end at different lengths
    for name, params in methods(model).items():
        out = generate_batch(model, PROMPTS, name, max_new_tokens=14, batch_size=batch_size, eos_token_id=eos,
                             **params)  # fmt: skip
        assert [r.tokens for r in out.results] == ref, name
        assert len(set(out.active)) > 1 and max(out.active) == batch_size, (name, out.active)  # ragged, then drained
        assert out.forwards < sum(r.forwards for r in out.results), name  # rows shared their forwards
        emitted = [sum(cell[1] for step in out.grid for cell in step if cell and cell[0] == i) for i in range(6)]
        assert emitted == [len(r) for r in ref], name  # the rows × steps grid holds every emitted token


def test_the_gate_switching_modes_leaves_every_rows_output_unchanged(model):
    """A gate that switches between speculating and plain steps every step or two (`probe=2, every=1`): each row's
    output is still `generate`'s for its prompt alone, for every method, and both modes ran."""
    ref = [S.generate(model, p, max_new_tokens=14).tokens for p in PROMPTS]
    for name, params in methods(model).items():
        if name == "autoregressive":
            continue
        gate = SpeculationGate(probe=2, every=1, first=1)  # S p S p, then the better one step, S p S p, ...
        out = generate_batch(model, PROMPTS, name, max_new_tokens=14, batch_size=3, gate=gate, **params)
        assert [r.tokens for r in out.results] == ref, name
        assert min(gate.steps.values()) >= 3 and out.gate == gate.summary(), (name, gate.steps)


def test_the_gate_keeps_the_mode_that_emits_more_tokens_per_second():
    """A probe alternates the modes step by step, then the faster one runs (`first` steps, doubling up to
    `every`), either way round; a probe's first step is not counted."""
    for spec_rate, plain_rate, winner in ((10, 12, "plain"), (14, 12, "speculate")):
        gate, modes = SpeculationGate(probe=3, every=8, first=2), ""
        for _ in range(40):
            spec = gate.open()
            modes += "S" if spec else "p"
            gate.record(spec_rate if spec else plain_rate, 1.0)
        w = "p" if winner == "plain" else "S"
        assert modes == "SpSpSp" + w * 2 + "SpSpSp" + w * 4 + "SpSpSp" + w * 8 + "SpSpSp" + w * 2, modes
        assert gate.rate == {"speculate": spec_rate, "plain": plain_rate}
    gate = SpeculationGate(probe=2, every=5)
    for tokens, mode in ((1000, "speculate"), (12, "plain"), (10, "speculate"), (12, "plain")):
        assert gate.open() == (mode == "speculate")
        gate.record(tokens, 1.0)  # the first: the step that measured t(B, n), not counted
    assert gate.rate == {"speculate": 10.0, "plain": 12.0} and not gate.open()
    with pytest.raises(ValueError, match="probe, every and first >= 1"):
        SpeculationGate(probe=0)


def test_the_gate_is_asked_for_and_runs_on_more_than_one_row_of_a_speculative_method(model):
    assert generate_batch(model, PROMPTS[:2], "prompt_lookup", max_new_tokens=4, batch_size=2).gate is None
    assert generate_batch(model, PROMPTS[:2], "prompt_lookup", max_new_tokens=4, batch_size=1, gate=True).gate is None
    assert generate_batch(model, PROMPTS[:2], max_new_tokens=4, batch_size=2, gate=True).gate is None
    out = generate_batch(model, PROMPTS[:2], "prompt_lookup", max_new_tokens=4, batch_size=2, gate=True)
    assert out.gate["steps"]["speculate"] >= 1


def test_sampling_on_a_batch_emits_the_targets_distribution():
    """The G-test of test_sampling_methods on a batch: RUNS copies of one prompt, sampled at T = 1 four rows at a
    time (prompt i seeded with i), for a chain with a sampled draft (speculative rule) and Medusa's top-s trees
    (exact one-hot rule); the histogram of the first tokens follows the target's exact joint."""
    torch.set_num_threads(1)
    target = S.tiny_model(vocab_size=8, num_layers=4, eos_token_id=None, seed=2)
    for tree in (False, True):
        set_cost_curve(target, CostCurve(sizes=[1, 64], seconds=[1.0, 1.0], tree=tree), rows=4)
    joint = autoregressive_joint(target, PROMPT, Sampling(temperature=1.0), N_TOKENS)
    for name, params in {"draft": {"draft": Draft(model=perturbed(target), vocab=None, name="p"), "draft_length": 2},
                         "medusa": {"heads": medusa_drafter(target), "tree": "cartesian:3,2", "vocab": "full",
                                    "accuracy": "independent"}}.items():  # fmt: skip
        out = generate_batch(target, [PROMPT] * RUNS, name, max_new_tokens=N_TOKENS, batch_size=4, temperature=1.0,
                             seed=0, **params)  # fmt: skip
        assert sum(r.forwards for r in out.results) < RUNS * N_TOKENS, name  # drafts were accepted
        result = g_test(Counter(tuple(r.tokens) for r in out.results), joint)
        assert result["dof"] >= 4 and result["p_value"] > 1e-3, (name, result)


@pytest.mark.parametrize("name", ["autoregressive", "prompt_lookup", "medusa"])
def test_on_step_stops_one_row_early_and_the_others_go_on(model, name):
    """`on_step` per prompt: it sees each prompt's steps in order (index, trace, tokens so far, as `generate`'s
    hook does); returning False for prompt 1 after its second step ends that prompt alone ("stopped", its tokens
    so far the prefix of its own output), its row takes the next prompt, and every other prompt's output is still
    `generate`'s autoregressive output for it alone."""
    params = methods(model)[name]
    ref = [S.generate(model, p, max_new_tokens=14).tokens for p in PROMPTS]
    seen: dict[int, list] = {}

    def hook(prompt, step, trace, tokens):
        seen.setdefault(prompt, []).append((step, trace, tokens))
        return not (prompt == 1 and step == 1)  # False once: prompt 1 stops after its second step

    out = generate_batch(model, PROMPTS, name, max_new_tokens=14, batch_size=3, trace=True, on_step=hook, **params)
    for i, (r, want) in enumerate(zip(out.results, ref, strict=True)):
        calls = seen[i]
        assert [c[0] for c in calls] == list(range(r.forwards)), (name, i)  # every step of the prompt, in order
        assert [c[1] for c in calls] == r.steps, (name, i)  # its own StepTrace
        assert [c[2] for c in calls] == [sum(len(s.emitted) for s in r.steps[: j + 1]) for j in range(r.forwards)]
        if i == 1:
            assert r.stop_reason == "stopped" and r.forwards == 2 and r.tokens == want[: len(r.tokens)], name
        else:
            assert r.stop_reason == "max_new_tokens" and r.tokens == want, (name, i)
    assert len(out.results) == len(PROMPTS) and max(out.active) == 3  # the freed row took the next prompt
    plain = generate_batch(model, PROMPTS, name, max_new_tokens=14, batch_size=3, on_step=lambda *a: None, **params)
    assert [r.tokens for r in plain.results] == ref and {r.stop_reason for r in plain.results} == {"max_new_tokens"}


def test_on_step_without_trace_gets_none_and_a_stop_on_the_last_step_is_not_a_stop(model):
    seen = []
    out = generate_batch(model, PROMPTS[:3], max_new_tokens=4, batch_size=2,
                         on_step=lambda i, step, trace, n: seen.append(trace) or n < 4)  # fmt: skip
    assert seen == [None] * 12  # autoregressive: 4 steps per prompt
    assert [r.stop_reason for r in out.results] == ["max_new_tokens"] * 3  # False with the budget spent: not a stop


def test_bad_input_names_the_fix(model):
    with pytest.raises(ValueError, match="no prompts"):
        generate_batch(model, [])
    with pytest.raises(ValueError, match="batch_size must be a whole number >= 1"):
        generate_batch(model, PROMPTS, batch_size=0)
    with pytest.raises(ValueError, match="mix texts and token-id lists"):
        generate_batch(model, ["a text", [1, 2, 3]])
    with pytest.raises(ValueError, match="wrap it in a list or call generate"):
        generate_batch(model, [1, 2, 3])
    with pytest.raises(ValueError, match="decode a batch eagerly"):
        generate_batch(model, PROMPTS, compile=True)
    with pytest.raises(TypeError, match="on_step must be a function"):
        generate_batch(model, PROMPTS, on_step=True)


def test_the_policy_shrinks_what_it_proposes_as_the_step_turns_compute_bound():
    """The sizers on two batch sizes' curves: where widening a step is nearly free (memory-bound: t(8) ≈ t(1))
    they draft long, where its time grows with the tokens (compute-bound: t(n) ∝ n) they propose nothing."""
    from specdec_lab.bench.batch_policy import chosen_sizes, published_k
    from specdec_lab.trees import HeadAccuracies

    flat = CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[1.0, 1.01, 1.02, 1.05, 1.1], tree=True)
    steep = CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[1.0, 2.0, 4.0, 8.0, 16.0], tree=True)
    acc = HeadAccuracies(top=torch.tensor([[0.6, 0.1], [0.4, 0.1]])).model("independent")
    small, large = chosen_sizes({1: flat, 16: steep}, acc)
    assert small["k_at_alpha_0.7"] >= 3 and small["medusa_nodes"] >= 2
    assert large["k_at_alpha_0.9"] == 0 and large["medusa_nodes"] == 0
    assert small["k_at_alpha_0.5"] <= small["k_at_alpha_0.9"]  # the likelier a draft, the longer
    assert (published_k(1), published_k(100), published_k(1000)) == (5, 1, None)


def test_the_batch_times_its_prefills_apart_for_a_decode_only_figure(model):
    # 5 prompts on 2 rows: the first fill, then 3 refills while the other row waits
    out = generate_batch(model, PROMPTS[:5], "prompt_lookup", max_new_tokens=6, batch_size=2)
    assert 0 < out.prefill_seconds < out.seconds
    assert out.decode_tokens_per_s == pytest.approx(out.tokens / (out.seconds - out.prefill_seconds))
    assert out.decode_tokens_per_s > out.tokens_per_s  # the prefills' wall time left out


def test_the_batched_bench_records_speedups_and_identity_per_row(model, tmp_path):
    from specdec_lab.bench.batched import run_batched, summarize_batched
    from specdec_lab.io import Prompt

    prompts = [Prompt(question_id=str(i), category="c", text="", ids=p) for i, p in enumerate(PROMPTS[:4])]
    out = tmp_path / "run.json"
    methods = ["autoregressive", "prompt_lookup", "hf_generate", "hf_assisted"]
    record = run_batched(model, prompts, methods, [1, 2], max_new_tokens=8, out=str(out), progress=False)
    summary = {(r["batch_size"], r["method"]): r for r in summarize_batched(record["runs"])}
    assert summary[(2, "autoregressive")]["speedup"] == 1.0 and summary[(2, "prompt_lookup")]["identical"] == "4/4"
    assert summary[(1, "hf_generate")]["identical"] == "4/4"  # transformers' greedy decoding, the same tokens
    assert "error" in summary[(2, "hf_assisted")]  # transformers refuses assisted generation on a batch: recorded
    ours = next(r for r in record["runs"] if r["batch_size"] == 2 and r["method"] == "prompt_lookup")
    assert ours["decode_tokens_per_s"] > ours["tokens_per_s"] and 0 < ours["prefill_seconds"] < ours["seconds"]
    hf = next(r for r in record["runs"] if r["batch_size"] == 2 and r["method"] == "hf_generate")
    assert "decode_tokens_per_s" not in hf  # transformers' prefills are not timed apart: no decode-only figure
    again = run_batched(model, prompts, methods, [1, 2], max_new_tokens=8, out=str(out), progress=False)
    assert again["runs"] == record["runs"]  # resumed from the file: nothing measured again


def test_a_joint_prefill_only_where_padding_is_cheap_and_either_way_rows_equal_alone(model):
    """The first fill prefills every row in one forward only when padding to the longest prompt adds little
    (`batch._padding_pays`); prompts of equal length take that path, prompts of very different lengths are
    prefilled one forward each, and either way every row equals its prompt decoded alone."""
    from specdec_lab.batch import _padding_pays

    assert _padding_pays([[1, 2, 3, 4], [5, 6, 7, 8]]) and not _padding_pays([[1] * 40, [2, 3]])
    even = [[1, 2, 3, 1, 2, 3], [7, 8, 9, 7, 8, 9], [4, 4, 4, 4, 4, 5]]
    for prompts in (even, PROMPTS[:3]):
        ref = [S.generate(model, p, max_new_tokens=10).tokens for p in prompts]
        for name in ("autoregressive", "prompt_lookup"):
            out = generate_batch(model, prompts, name, max_new_tokens=10, batch_size=3)
            assert [r.tokens for r in out.results] == ref, (name, prompts)
