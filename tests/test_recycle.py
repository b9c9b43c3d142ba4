"""Token Recycling (`proposers/recycle.py`): the successor table, the walk, the acceptance counts by hand, greedy
identical to autoregressive, the table carried across calls by a Memory, clear errors. Its sampling exactness
is in tests/test_sampling_methods.py (the shared G-test harness). Tiny random models only."""

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept.result import Acceptance
from specdec_lab.generate import make_proposer
from specdec_lab.memory import Memory
from specdec_lab.proposers.base import DecodeState
from specdec_lab.proposers.recycle import RankAcceptance, RecycleConfig, SuccessorTable, walk
from specdec_lab.trees.tree import Tree
from specdec_lab.verify import TreeOutput


@pytest.fixture(scope="module")
def model():
    return S.tiny_model(seed=3)


PROMPT = [5, 6, 7, 8, 9] * 8  # repeats: the table's rows are right often, so trees get accepted


# ---- the table ---------------------------------------------------------------------------------------
def test_table_write_keeps_the_newest_row_and_topk_order():
    table = SuccessorTable(vocab_size=10, k=3)
    logits = torch.tensor([[0.0, 5, 4, 3, 0, 0, 0, 0, 0, 0], [9.0, 0, 0, 0, 0, 0, 0, 0, 8, 7], [0.0] * 9 + [1.0]])
    table.write_logits([4, 2, 4], logits)  # token 4 twice: its last row (the third) wins
    assert table.rows([2]) == [[0, 8, 9]]  # top-3 of row 1, best first
    assert table.rows([4])[0][0] == 9  # row 2's argmax, not row 0's
    assert table.rows([3]) == [None]  # never written: no successors
    table.write([3], torch.tensor([[7, 0, 0]]), widths=[1])  # a bigram: one valid successor
    assert table.rows([3]) == [[7]]
    assert table.summary()["rows_known"] == 3


def test_walk_follows_the_table_and_drops_unknown_subtrees():
    table = SuccessorTable(vocab_size=10, k=2)
    table.write([1, 2, 3], torch.tensor([[2, 3], [4, 5], [6, 7]]))  # 1 -> (2, 3), 2 -> (4, 5), 3 -> (6, 7)
    paths = [(0,), (1,), (0, 0), (0, 1), (1, 0), (0, 0, 0)]  # (0, 0, 0) is 1 -> 2 -> 4 -> ? : 4 is unknown
    tokens, parents, kept = walk(table, 1, paths)
    by_path = dict(zip(kept, tokens, strict=True))
    assert by_path == {(): 1, (0,): 2, (1,): 3, (0, 0): 4, (0, 1): 5, (1, 0): 6}
    assert [kept[p] for p in parents[1:]] == [(), (), (0,), (0,), (1,)]  # each node under its path's parent
    assert walk(table, 1, paths, max_depth=1)[0] == [1, 2, 3]
    assert walk(table, 9, paths)[0] == [9]  # an unknown root: nothing to propose


def test_rank_acceptance_counts_children_of_accepted_nodes_only():
    acc = RankAcceptance(depth=3, k=2, weight=0.0)  # no shrinkage: the raw rates
    # root 0; (0,) = 1, (1,) = 2; (0, 0) = 3 under 1, (1, 0) = 4 under 2; accepted path 0 -> 1 -> 3
    parents, paths = [-1, 0, 0, 1, 2], [(), (0,), (1,), (0, 0), (1, 0)]
    acc.record(parents, paths, [0, 1, 3])
    assert acc.offers.tolist() == [[1, 1], [1, 0], [0, 0]]  # (1, 0) is under the rejected (1,): no offer
    assert acc.hits.tolist() == [[1, 0], [1, 0], [0, 0]]
    shrunk = RankAcceptance(depth=3, k=2, weight=2.0)
    assert ((shrunk.table() > 0) & (shrunk.table() < 1)).all()  # unlabelled cells: the prior, never 0 or 1


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="fill must be one of"):
        RecycleConfig(fill="ngrams")
    with pytest.raises(ValueError, match="raise top_k"):
        RecycleConfig(tree="cartesian:9", top_k=8)
    with pytest.raises(ValueError, match="top_k must be"):
        RecycleConfig(top_k=0)


# ---- in the loop -------------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [{}, {"fill": "bigrams"}, {"fill": "none"}, {"tree": "cartesian:3,2"}])
def test_greedy_equals_autoregressive(model, params):
    ref = S.generate(model, PROMPT, max_new_tokens=32)
    res = S.generate(model, PROMPT, method="recycle", max_new_tokens=32, **params)
    assert res.tokens == ref.tokens
    assert sum(s.proposed for s in res.steps) > 0 and sum(len(s.path) - 1 for s in res.steps) > 0  # it drafted
    assert any(not s.tree.is_chain for s in res.steps)  # and its trees branch


def test_update_writes_every_verified_node_the_accepted_path_last(model):
    """update(): M[x_j] <- top-k(logits_j) for every node j of the verified tree; a token at two nodes keeps the
    accepted node's row (the true context), not the rejected sibling's."""
    prop = make_proposer("recycle", top_k=2, tree="cartesian:2,1")
    state = DecodeState(tokens=[1, 2], prompt_length=2, cache_length=1, max_depth=4, model=model)
    prop.start(state, None)
    tree = Tree(torch.tensor([2, 4, 4, 6]), torch.tensor([-1, 0, 1, 0]), sibling_draw="deterministic")
    logits = torch.zeros(4, 10)
    for j, (a, b) in enumerate([(1, 2), (3, 5), (7, 8), (9, 0)]):  # node j's top-2: (a, b)
        logits[j, a], logits[j, b] = 2.0, 1.0
    prop.update(state, tree, Acceptance(path=[0, 3], bonus=9), TreeOutput(logits=logits, hidden=torch.zeros(4, 1)))
    assert prop.table.rows([2, 6]) == [[1, 2], [9, 0]]
    assert prop.table.rows([4]) == [[7, 8]]  # nodes 1 and 2 both hold 4, neither accepted: the later one
    tree = Tree(torch.tensor([2, 4, 4]), torch.tensor([-1, 0, 0]), sibling_draw="deterministic")
    prop.update(state, tree, Acceptance(path=[0, 1], bonus=3), TreeOutput(logits=logits[:3], hidden=torch.zeros(3, 1)))
    assert prop.table.rows([4]) == [[3, 5]]  # node 1 was accepted: its row wins over node 2's


def test_memory_carries_the_table_across_calls(model):
    mem = Memory()
    first = S.generate(model, PROMPT, method="recycle", max_new_tokens=24, memory=mem, fill="none")
    second = S.generate(model, PROMPT, method="recycle", max_new_tokens=24, memory=mem, fill="none")
    assert first.tokens == second.tokens
    assert second.proposer["table"]["rows_known"] >= first.proposer["table"]["rows_known"]
    assert second.proposer["acceptance"]["offers"] > first.proposer["acceptance"]["offers"]  # counts go on
    assert "recycle:k=8" in mem.summary()
