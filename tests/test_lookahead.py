"""Jacobi and Lookahead decoding: exactness, LADE's window mask and positions, the pool, the sizer.

All on tiny random models except the one `real` test.
"""

import pytest
import torch

from specdec_lab import KVCache, Tree, generate, prefill, tiny_model, verify_tree
from specdec_lab.cost import CostCurve, StepCost, set_cost_curve
from specdec_lab.proposers import DecodeState, JacobiConfig, LookaheadConfig, LookaheadProposer
from specdec_lab.proposers.lookahead import TEXT, WINDOW, NgramPool, Window
from specdec_lab.proposers.lookahead_budget import LookaheadBudget


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3)


def repetitive_prompt(seed, length=36, period=6):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(1, 256, (period,), generator=g).tolist()
    return (base * (length // period + 1))[:length]


def state_for(tokens, max_depth=64):
    n = len(tokens)
    return DecodeState(tokens=list(tokens), prompt_length=n, cache_length=n - 1, max_depth=max_depth)


# ---- greedy output is autoregressive's ----------------------------------------------------------------
CONFIGS = [
    ("jacobi", {}),
    ("jacobi", {"n": 3, "init": "repeat"}),
    ("lookahead", {"W": 3, "N": 3, "G": 2}),
    ("lookahead", {"W": 5, "N": 4, "G": 4, "pool_from_prompt": False}),
    ("lookahead", {"W": 0, "N": 3}),  # verification of prompt/output n-grams only
]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_greedy_jacobi_and_lookahead_equal_autoregressive(model, seed):
    ids = repetitive_prompt(seed)
    ref = generate(model, ids, max_new_tokens=40).tokens
    hits = 0
    for method, params in CONFIGS:
        res = generate(model, ids, method=method, max_new_tokens=40, **params)
        assert res.tokens == ref, (method, params)
        assert res.forwards == len(res.steps) and sum(len(s.emitted) for s in res.steps) == 40
        if method == "lookahead":
            hits += res.proposer["accepted"]
    assert hits > 0  # the pool did hit: the comparison covered accepted verification branches


def test_lookahead_window_n_grams_alone_are_accepted(model):
    # no text n-grams: every accepted draft token came from an n-gram the window harvested
    ids = repetitive_prompt(0)
    res = generate(model, ids, method="lookahead", W=5, N=4, G=4, pool_from_prompt=False, max_new_tokens=40)
    assert res.proposer[WINDOW] > 0 and res.proposer[TEXT] == 0
    assert res.proposer[WINDOW] == sum(s.accepted for s in res.steps)


def test_eos_inside_an_accepted_path_stops_lookahead(model):
    ids = repetitive_prompt(1)
    ref = generate(model, ids, max_new_tokens=40).tokens
    eos = ref[17]
    res = generate(model, ids, method="lookahead", W=3, N=3, G=4, max_new_tokens=40, eos_token_id=eos)
    assert res.tokens == ref[: ref.index(eos) + 1] and res.stop_reason == "eos"


# ---- the tree: LADE's mask and positions --------------------------------------------------------------
def lookahead_tree(levels, grams, root=7, N=3, G=2, max_depth=64):
    """The tree LookaheadProposer proposes for a given window and pool (the root's n-grams, most recent first)."""
    proposer = LookaheadProposer(W=len(levels[-1]), N=N, G=G, pool_from_prompt=False)
    proposer.prompt = [root]
    proposer.window = Window(len(levels[-1]), N, proposer._fresh)
    proposer.window.levels = [list(level) for level in levels]
    for gram in reversed(grams):
        proposer.pool.add(root, tuple(gram), WINDOW)
    return proposer.propose(state_for([1, 2, root], max_depth))


def test_window_mask_and_positions_for_w3_n3_g2_are_lades():
    # window: level 0 = root a1 a2, level 1 = b0 b1 b2 (W = 3, N = 3); two n-grams x1 x2, y1 y2 (G = 2)
    tree = lookahead_tree(levels=[[11, 12], [20, 21, 22]], grams=[(30, 31), (40, 41)])
    assert tree.tokens.tolist() == [7, 11, 12, 20, 21, 22, 30, 31, 40, 41]
    assert tree.candidate.tolist() == [True] + [False] * 5 + [True] * 4
    # LADE (j_make_causal_mask_multilevel): level 0 is causal; cell (l, i) sees level 0's columns 0..i and
    # column i of levels 1..l; each verified n-gram sees the root and its own earlier tokens.
    expected = torch.tensor(
        [  # r  a1 a2 b0 b1 b2 x1 x2 y1 y2
            [1, 0, 0, 0, 0, 0, 0, 0, 0, 0],  # root
            [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],  # a1
            [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],  # a2
            [1, 0, 0, 1, 0, 0, 0, 0, 0, 0],  # b0
            [1, 1, 0, 0, 1, 0, 0, 0, 0, 0],  # b1
            [1, 1, 1, 0, 0, 1, 0, 0, 0, 0],  # b2
            [1, 0, 0, 0, 0, 0, 1, 0, 0, 0],  # x1
            [1, 0, 0, 0, 0, 0, 1, 1, 0, 0],  # x2
            [1, 0, 0, 0, 0, 0, 0, 0, 1, 0],  # y1
            [1, 0, 0, 0, 0, 0, 0, 0, 1, 1],  # y2
        ],
        dtype=torch.bool,
    )
    assert torch.equal(tree.mask, expected)
    # LADE's position ids: level 0 at L + 1.., level l at L + l + i, each n-gram at L + 1 .. L + N − 1
    assert tree.position_ids(100).tolist() == [100, 101, 102, 101, 102, 103, 101, 102, 101, 102]


def lade_mask_and_offsets(W, N):
    """The window's attention and position offsets by LADE's rule, built cell by cell (no tree involved)."""
    cells = [(0, i) for i in range(W)] + [(lvl, i) for lvl in range(1, N - 1) for i in range(W)]
    sees = [[(m == 0 and j <= i) or (j == i and 1 <= m <= lvl) for (m, j) in cells] for (lvl, i) in cells]
    return torch.tensor(sees), [lvl + i for (lvl, i) in cells]


@pytest.mark.parametrize("W, N", [(1, 3), (2, 5), (4, 3), (5, 4)])
def test_window_is_a_comb_whose_ancestor_mask_and_depths_are_lades(W, N):
    levels = [list(range(10, 10 + W - 1))] + [list(range(100 * lvl, 100 * lvl + W)) for lvl in range(1, N - 1)]
    tree = lookahead_tree(levels, grams=[], N=N)
    mask, offsets = lade_mask_and_offsets(W, N)
    assert torch.equal(tree.mask, mask) and tree.depths.tolist() == offsets
    assert tree.candidate is not None and tree.candidate.tolist() == [True] + [False] * (len(tree) - 1)


def test_n_grams_sharing_a_prefix_become_a_trie():
    tree = lookahead_tree(levels=[[11, 12], [20, 21, 22]], grams=[(30, 31), (30, 32), (40, 41)], G=3)
    assert tree.tokens[6:].tolist() == [30, 31, 32, 40, 41]
    assert tree.parents[6:].tolist() == [0, 6, 6, 0, 9]  # 30 is shared: 31 and 32 are siblings


def test_window_is_left_out_where_it_does_not_fit_the_depth_budget():
    tree = lookahead_tree(levels=[[11, 12], [20, 21, 22]], grams=[(30, 31)], max_depth=2)
    assert tree.tokens.tolist() == [7, 30, 31] and tree.candidate is None  # the window is 3 deep
    tree = lookahead_tree(levels=[[11, 12], [20, 21, 22]], grams=[(30, 31)], max_depth=1)
    assert tree.tokens.tolist() == [7, 30]


def test_candidate_logits_do_not_depend_on_the_window(model):
    prompt = list(range(50, 62))
    with_window = lookahead_tree(levels=[[11, 12, 13], [20, 21, 22, 23], [24, 25, 26, 27]], grams=[(30, 31, 32),
                                 (40, 41, 42)], root=prompt[-1], N=4)  # fmt: skip
    cand = with_window.candidate.nonzero().flatten()
    alone = Tree(with_window.tokens[cand], torch.tensor([-1, 0, 1, 2, 0, 4, 5]))  # the same n-grams, no window
    logits = []
    for tree in (with_window, alone):
        cache = KVCache.for_model(model, capacity=64)
        prefill(model, cache, torch.tensor(prompt[:-1]))
        logits.append(verify_tree(model, cache, tree).logits)
    torch.testing.assert_close(logits[0][cand], logits[1], atol=1e-4, rtol=1e-4)


def test_lookahead_trace_counts_window_nodes_as_extra(model):
    res = generate(model, repetitive_prompt(2), method="lookahead", W=4, N=3, G=3, max_new_tokens=20)
    windowed = [s for s in res.steps if s.info["W"]]
    assert windowed
    for step in windowed:
        cells = step.info["levels"] * step.info["columns"] - 1
        assert step.extra == cells and step.proposed == len(step.tree_tokens) - 1 - cells
        assert all(step.tree_candidate[i] for i in step.path)


# ---- the window's Jacobi steps and the pool -----------------------------------------------------------
def test_window_warms_up_then_harvests_columns_and_slides():
    fresh = iter(range(1000, 2000)).__next__
    window = Window(W=3, N=4, fresh=fresh)
    assert window.levels == [[1000, 1001, 1002, 1003]] and window.width == 5  # W + N − 3 after the root
    # warm-up: the predictions become a level, every level loses column 0
    assert window.step(root=7, pred=[50, 51, 52, 53, 54]) == []
    assert window.levels == [[1001, 1002, 1003], [51, 52, 53, 54]]
    assert window.step(root=8, pred=[60, 61, 62, 63]) == []
    assert window.levels == [[1002, 1003], [52, 53, 54], [61, 62, 63]] and window.full and window.width == 3
    # full: column i gives the n-gram (level 0, level 1, level 2, prediction) keyed by its first token
    grams = window.step(root=9, pred=[70, 71, 72])
    assert grams == [(9, (52, 61, 70)), (1002, (53, 62, 71)), (1003, (54, 63, 72))]
    assert window.levels == [[53, 54], [61, 62, 63], [70, 71, 72]]  # slid by one


def test_pool_keeps_the_g_most_recent_per_key_and_prefers_text():
    pool = NgramPool(n=3, cap=2)
    pool.add(1, (2, 3), WINDOW)
    pool.add(1, (4, 5), WINDOW)
    pool.add(1, (2, 3), TEXT)  # refreshed (now most recent) and credited to the text
    pool.add(1, (6, 7), WINDOW)  # full: the least recent, (4, 5), goes
    assert pool.get(1) == {(2, 3): TEXT, (6, 7): WINDOW}
    pool.add_text([5, 6, 7, 8])
    assert pool.get(5) == {(6, 7): TEXT} and pool.get(6) == {(7, 8): TEXT}
    pool.add_text([5, 6, 7, 8, 9])  # only the new n-gram
    assert pool.get(7) == {(8, 9): TEXT}


@pytest.mark.parametrize(
    "params, message",
    [
        ({"W": -1}, "W .* integer >= 0 or 'auto'"),
        ({"W": "wide"}, "W .* integer >= 0 or 'auto'"),
        ({"N": 2}, "N .* integer >= 3"),
        ({"G": 0}, "G .* integer >= 1"),
    ],
)
def test_bad_lookahead_config_is_a_clear_error(params, message):
    with pytest.raises(ValueError, match=message):
        LookaheadConfig(**params)


def test_bad_jacobi_config_is_a_clear_error():
    with pytest.raises(ValueError, match="n .* integer >= 1"):
        JacobiConfig(n=0)
    with pytest.raises(ValueError, match="init must be"):
        JacobiConfig(init="zeros")


# ---- W="auto" --------------------------------------------------------------------------------------
def curve(flat: bool) -> CostCurve:
    sizes = [1, 2, 4, 8, 16, 32, 64, 128]
    seconds = [0.01 * (1 + (0.001 if flat else 0.25) * (n - 1)) for n in sizes]  # flat: GPU-like; steep: CPU-like
    return CostCurve(sizes=sizes, seconds=seconds, tree=True)


@pytest.mark.parametrize("flat", [True, False])
def test_auto_width_follows_the_cost_curve(flat):
    model = tiny_model(seed=5)  # its own model: the curve set here must not leak into other tests
    set_cost_curve(model, curve(flat))
    ids = repetitive_prompt(3)
    ref = generate(model, ids, max_new_tokens=40).tokens
    res = generate(model, ids, method="lookahead", N=3, G=4, max_window=8, adapt_every=4, max_new_tokens=40)
    assert res.tokens == ref
    widths = [s.info["W"] for s in res.steps]
    if flat:  # a wide window costs next to nothing: the widest is taken
        assert max(widths) == 8 and res.proposer["window_steps"] > 0
    else:  # every window node costs a quarter of a step: no window but the narrowest, now and then, as a probe
        assert {w for s, w in zip(res.steps, widths, strict=True) if not s.info["width_probe"]} == {0}
        assert set(widths) <= {0, 1} and res.proposer["window_steps"] < len(res.steps) / 2


def test_budget_verifies_the_n_grams_that_pay_for_their_nodes():
    def budget_on(flat: bool) -> LookaheadBudget:
        return LookaheadBudget(StepCost.of(curve(flat), learn=False), N=3, G=4, max_window=8)

    budget = budget_on(flat=False)  # a node costs a quarter of a step
    budget.rank_hits[0].value, budget.rank_hits[1].value = 1.2, 0.1  # rank 0 hits often, rank 1 rarely
    assert budget.grams([0, 2, 4, 5], window_nodes=0) == 1  # (1 + 1.2) / 1.5 beats 1 and (2.3) / 2
    budget.rank_hits[0].value = 0.2
    assert budget.grams([0, 2, 4, 5], window_nodes=0) == 0  # plain decoding: 1.2 / 1.5 < 1
    assert budget_on(flat=True).grams([0, 2, 4, 5], window_nodes=12) == 3  # nodes are free: verify all
    # a rank not worth verifying is probed now and then: the 16th step that verified fewer n-grams than were
    # offered (two so far, above) verifies one more; the wait doubles when the probe finds nothing
    ks = [budget.grams([0, 2, 4, 5], window_nodes=0) for _ in range(14)]
    assert ks == [0] * 13 + [1] and budget.gram_probes.probing
    budget.observe(k=1, winner=None, accepted=0, credit=None, width=0, nodes=2)  # the probe found nothing
    assert budget.gram_probes.interval == 32


@pytest.mark.parametrize("W, N", [(1, 3), (2, 4), (4, 3), (3, 5)])
def test_budget_prices_a_width_at_the_real_steps_input_length(W, N):
    # the root is the window's first cell: a full window of W columns adds (N − 1)·W − 1 nodes after it
    levels = [list(range(10, 10 + W - 1))] + [list(range(100 * lvl, 100 * lvl + W)) for lvl in range(1, N - 1)]
    grams = [tuple(range(30, 30 + N - 1)), tuple(range(40, 40 + N - 1))]
    tree = lookahead_tree(levels, grams=grams, N=N, G=2)
    trie = len(tree) - (N - 1) * W
    assert trie == 2 * (N - 1)  # both n-grams verified, no shared prefix
    priced = []

    class Recording(StepCost):
        def step(self, n, tree=False, drafting=0.0):
            priced.append(n)
            return 1.0

    budget = LookaheadBudget(Recording.of(curve(True), learn=False), N=N, G=2, max_window=W)
    assert budget.nodes(W, trie) == len(tree)  # not len(tree) + 1: the root is counted once
    no_window = LookaheadProposer(W=0, N=N, G=2, pool_from_prompt=False)
    for gram in reversed(grams):
        no_window.pool.add(7, gram, WINDOW)
    assert budget.nodes(0, trie) == len(no_window.propose(state_for([1, 2, 7]))) == 1 + trie
    budget.g_nodes.value = trie
    budget.scores()
    assert priced[budget.ladder.index(W)] == len(tree) and priced[0] == 1 + trie


# ---- Jacobi's trajectory ----------------------------------------------------------------------------
def test_jacobi_trajectory_is_the_fixed_point_iteration(model):
    ids = repetitive_prompt(4)
    res = generate(model, ids, method="jacobi", n=5, max_new_tokens=30)
    for step, nxt in zip(res.steps, res.steps[1:], strict=False):
        info = step.info
        assert info["before"] == step.tree_tokens[1:]  # the block proposed
        assert info["converged"] == [b == a for b, a in zip(info["before"], info["after"], strict=True)]
        a = info["accepted"]
        assert step.emitted[:a] == info["before"][:a]  # the converged prefix
        if a < len(info["after"]):
            assert step.emitted[a] == info["after"][a]  # the bonus: the first updated guess that changed
        # the next iterate starts with this step's updated guesses past the emitted tokens
        rest = info["after"][info["accepted"] + 1 :]
        assert nxt.info["before"][: len(rest)] == rest


# ---- the real model ---------------------------------------------------------------------------------
@pytest.mark.real
def test_real_model_lookahead_and_jacobi_equal_autoregressive(real_model):
    ids = real_model.chat_ids("Write a Python function that returns the squares of a list of numbers.")
    ref = generate(real_model, ids, max_new_tokens=40).tokens
    for method, params in [("lookahead", {"W": 4, "N": 4, "G": 4}), ("jacobi", {"n": 4})]:
        assert generate(real_model, ids, method=method, max_new_tokens=40, **params).tokens == ref, method
