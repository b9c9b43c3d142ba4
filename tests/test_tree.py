"""Tree structure on hand-drawn trees: mask, depths, positions, paths, constructors, malformed input."""

import pytest
import torch

from specdec_lab import MalformedTreeError, Tree
from specdec_lab.verify import tree_attention_mask

#        0
#      /   \
#     1     2
#    / \     \
#   3   4     5
#   |
#   6
PARENTS = [-1, 0, 0, 1, 1, 2, 3]
TOKENS = [10, 11, 12, 13, 14, 15, 16]


def naive_mask(parents):
    """mask[i][j] = j is i or an ancestor of i, by walking up from every node (the slow, obvious way)."""
    n = len(parents)
    mask = [[False] * n for _ in range(n)]
    for i in range(n):
        j = i
        while j != -1:
            mask[i][j] = True
            j = parents[j]
    return torch.tensor(mask)


def test_hand_drawn_tree_structure():
    tree = Tree(TOKENS, PARENTS)
    assert tree.depths.tolist() == [0, 1, 1, 2, 2, 2, 3]
    assert torch.equal(tree.mask, naive_mask(PARENTS))
    assert tree.position_ids(100).tolist() == [100, 101, 101, 102, 102, 102, 103]
    assert tree.leaves() == [4, 5, 6]
    assert tree.paths() == [[0, 1, 4], [0, 2, 5], [0, 1, 3, 6]]
    assert tree.path_to(6) == [0, 1, 3, 6]
    assert tree.children[1] == [3, 4]
    assert not tree.is_chain and tree.max_depth == 3


def test_chain_and_root():
    chain = Tree.chain(5, [6, 7, 8])
    assert chain.parents.tolist() == [-1, 0, 1, 2] and chain.is_chain
    assert torch.equal(chain.mask, torch.tril(torch.ones(4, 4, dtype=torch.bool)))
    root = Tree.root(9)
    assert len(root) == 1 and root.is_chain and root.max_depth == 0


def test_rank_paths_share_prefixes():
    topk = torch.tensor([[100, 101, 102], [200, 201, 202]])  # (depth, rank)
    tree = Tree.from_rank_paths(7, [(0,), (1,), (0, 0), (0, 1), (1, 0)], topk)
    assert tree.tokens.tolist() == [7, 100, 101, 200, 201, 200]
    assert tree.parents.tolist() == [-1, 0, 0, 1, 1, 2]
    with pytest.raises(MalformedTreeError, match="prefix-closed"):
        Tree.from_rank_paths(7, [(0, 0)], topk)


def test_attention_mask_prefix_and_tree():
    tree = Tree(TOKENS, PARENTS)
    mask = tree_attention_mask(tree, cache_length=3, dtype=torch.float32)  # (1, 1, N, 3 + N)
    assert mask.shape == (1, 1, 7, 10)
    allowed = mask[0, 0] == 0
    assert allowed[:, :3].all()  # every node sees the whole cached prefix
    assert torch.equal(allowed[:, 3:], naive_mask(PARENTS))


def test_truncate_depth_keeps_order():
    tree = Tree(TOKENS, PARENTS).truncate_depth(1)
    assert tree.tokens.tolist() == [10, 11, 12] and tree.parents.tolist() == [-1, 0, 0]
    tree2 = Tree(TOKENS, PARENTS).truncate_depth(2)
    assert tree2.parents.tolist() == [-1, 0, 0, 1, 1, 2]


@pytest.mark.parametrize(
    "parents, message",
    [
        ([-1, 2, 0], "parents must come before children"),  # parent after child
        ([-1, 2, 1], "parents must come before children"),  # cycle 1 -> 2 -> 1
        ([-1, 1], "its own parent"),  # self-loop
        ([0, 0], "root"),  # no root
        ([-1, 0, -1], "parents must come before children"),  # a second root
        ([], "at least the root"),
    ],
)
def test_malformed_trees_raise_clear_errors(parents, message):
    with pytest.raises(MalformedTreeError, match=message):
        Tree(list(range(len(parents))), parents)


def test_shape_mismatch():
    with pytest.raises(MalformedTreeError, match="equal length"):
        Tree([1, 2, 3], [-1, 0])


def test_to_networkx():
    graph = Tree(TOKENS, PARENTS).to_networkx()
    assert graph.number_of_nodes() == 7 and set(graph.successors(1)) == {3, 4}
    assert graph.nodes[6]["depth"] == 3 and graph.nodes[6]["token"] == 16


def test_truncate_nodes_keeps_a_prefix_with_its_indices():
    tree = Tree(torch.tensor([9, 1, 2, 3, 4]), torch.tensor([-1, 0, 0, 1, 2]), candidate=torch.tensor([1, 1, 1, 1, 0]))
    cut = tree.truncate_nodes(3)
    assert cut.tokens.tolist() == [9, 1, 2] and cut.parents.tolist() == [-1, 0, 0]
    assert cut.candidate.tolist() == [1, 1, 1]
    assert tree.truncate_nodes(5) is tree
    with pytest.raises(ValueError, match="at least 1"):
        tree.truncate_nodes(0)
