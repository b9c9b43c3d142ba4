"""The token tree: what every proposer proposes and the target verifies in one forward.

A tree of N nodes is two integer vectors, `tokens` (N,) and `parents` (N,):

* Node 0 is the root: the last accepted token, whose K/V are not yet in the cache. `parents[0] = -1`.
* `parents[i] < i` for every other node: nodes are in topological order. Hence the ancestor mask is
  built in one pass, `mask[i] = mask[parents[i]] | {i}`, and a path sorted by index is sorted by depth.
* A node's position id is `cache_length + depth[i]`: the cache slot it will occupy if it is accepted,
  so keeping a path moves K/V without re-rotating them (RoPE is applied with that position).
* The attention mask of one verify forward is `[ones(N, cache_length) | mask]`: every node sees the
  whole cached prefix, then its own ancestors (itself included) inside the tree.

Not every node has to be a candidate for acceptance: Lookahead decoding appends its Jacobi window as
nodes that are verified for free but never accepted (`candidate[i] = False`). Candidates form a subtree
at the root (the root is one; a candidate's parent is one), so a rule that walks down from the root
through candidates only never meets the others. Draft probabilities `q`
(for exact speculative sampling) ride along in `draft_probs` (N, V) when a proposer samples.

How the children of one node (a sibling set) were drawn decides which exact sampling rule applies
(`accept.tree_rules`), so the tree carries it, `sibling_draw`:

* "deterministic": the sibling set is a function of the path alone (top-k of a head or a draft, n-gram
  pool matches, a lookup): q is one-hot at each sibling given the ones before it. `draft_probs` is None.
* "sampled": each sibling drawn independently from its own row of `draft_probs` (i.i.d. from the parent's q
  when the rows agree: SpecInfer's multi-draft).
* "without_replacement": siblings drawn one after another from the parent's q with the earlier ones removed
  (Gumbel-top-k, RSD); every sibling's row holds the parent's full q, and sibling order = draw order.

The draw is per tree; its default follows `draft_probs` ("sampled" when given, else "deterministic"), so a
chain from a sampling draft and every tree without q keep their meaning. Whatever the draw, a sibling set may
depend on anything decided before the step (the accepted text, earlier steps' randomness) but never on the
verification's own randomness: that is what makes a rejected sibling's q the one the rule must remove.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from ..text import path_pieces

__all__ = ["Tree", "MalformedTreeError", "SIBLING_DRAWS"]

SIBLING_DRAWS = ("deterministic", "sampled", "without_replacement")


class MalformedTreeError(ValueError):
    """The parent pointers do not describe a tree rooted at node 0 in topological order."""


def _check_parents(parents: Sequence[int]) -> None:
    if len(parents) == 0:
        raise MalformedTreeError("a tree needs at least the root node (got 0 nodes)")
    if parents[0] != -1:
        raise MalformedTreeError(f"node 0 must be the root with parent -1, got parent {parents[0]}")
    for i, p in enumerate(parents[1:], start=1):
        if p == i:
            raise MalformedTreeError(f"node {i} is its own parent (a cycle)")
        if not 0 <= p < i:
            # A parent after its child is either a cycle or an order the one-pass mask cannot handle.
            raise MalformedTreeError(
                f"node {i} has parent {p}: parents must come before children (0 <= parent < index); "
                "reorder the nodes topologically (a cycle has no such order)"
            )


def _check_candidates(candidate: list[bool], parents: list[int]) -> None:
    # Candidates form a subtree at the root: a path is accepted from the root down, so a candidate below
    # a non-candidate could never be reached, and an acceptance rule may rely on never meeting one.
    if not candidate[0]:
        raise MalformedTreeError("the root (node 0) must be a candidate: every accepted path starts there")
    for i, p in enumerate(parents[1:], start=1):
        if candidate[i] and not candidate[p]:
            raise MalformedTreeError(
                f"node {i} is a candidate but its parent {p} is not: candidates must form a subtree at the root"
            )


@dataclass(frozen=True, eq=False)
class Tree:
    """A token tree in topological order. See the module docstring for the invariants.

    tokens:      (N,) token ids, node 0 = root (last accepted token)
    parents:     (N,) parent index, -1 for the root, parents[i] < i
    candidate:   (N,) bool, nodes that may be accepted (default: all)
    draft_probs: (N, V) optional q(.|parent context) each node's token was drawn from (row of node i is the
                 distribution its token was sampled from, i.e. conditioned on its parent's path; row 0 unused)
    sibling_draw: how each sibling set was drawn, one of SIBLING_DRAWS (module docstring); None (default) =
                 "sampled" when draft_probs is given, else "deterministic"
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    candidate: torch.Tensor | None = None
    draft_probs: torch.Tensor | None = None
    meta: dict = field(default_factory=dict)
    sibling_draw: str | None = None

    def __post_init__(self):
        tokens = torch.as_tensor(self.tokens, dtype=torch.long)
        parents = torch.as_tensor(self.parents, dtype=torch.long, device=tokens.device)
        if tokens.ndim != 1 or parents.shape != tokens.shape:
            raise MalformedTreeError(
                f"tokens and parents must be 1-D of equal length, got {tuple(tokens.shape)} and {tuple(parents.shape)}"
            )
        _check_parents(parents.tolist())
        object.__setattr__(self, "tokens", tokens)
        object.__setattr__(self, "parents", parents)
        if self.candidate is not None:
            cand = torch.as_tensor(self.candidate, dtype=torch.bool, device=tokens.device)
            if cand.shape != tokens.shape:
                raise MalformedTreeError(f"candidate must have shape {tuple(tokens.shape)}, got {tuple(cand.shape)}")
            _check_candidates(cand.tolist(), parents.tolist())
            object.__setattr__(self, "candidate", cand)
        draw = self.sibling_draw
        if draw is None:
            draw = "deterministic" if self.draft_probs is None else "sampled"
        if draw not in SIBLING_DRAWS:
            raise MalformedTreeError(f"sibling_draw must be one of {', '.join(SIBLING_DRAWS)}, got {draw!r}")
        if (draw == "deterministic") != (self.draft_probs is None):
            raise MalformedTreeError(
                f"sibling_draw={draw!r} with draft_probs {'missing' if self.draft_probs is None else 'given'}: "
                "sampled siblings need their q (draft_probs), deterministic ones have a one-hot q and carry none"
            )
        if self.draft_probs is not None and (self.draft_probs.ndim != 2 or self.draft_probs.shape[0] != len(tokens)):
            raise MalformedTreeError(f"draft_probs must be (N={len(tokens)}, V), got {tuple(self.draft_probs.shape)}")
        object.__setattr__(self, "sibling_draw", draw)

    # ---- constructors -------------------------------------------------------------------------------
    @classmethod
    def root(cls, token: int, device: torch.device | str | None = None) -> Tree:
        """A root-only tree: verifying it is one autoregressive step."""
        return cls(torch.tensor([int(token)], device=device), torch.tensor([-1], device=device))

    @classmethod
    def chain(cls, root: int, draft: Sequence[int] | torch.Tensor, draft_probs=None, device=None) -> Tree:
        """root -> d1 -> d2 -> ... : the tree of classic (chain) speculative decoding."""
        draft = torch.as_tensor(draft, dtype=torch.long, device=device).reshape(-1)
        tokens = torch.cat([torch.tensor([int(root)], device=draft.device), draft])
        parents = torch.arange(-1, len(draft), device=draft.device)
        return cls(tokens, parents, draft_probs=draft_probs)

    @classmethod
    def from_rank_paths(cls, root: int, paths: Sequence[Sequence[int]], topk: torch.Tensor) -> Tree:
        """Medusa-style tree from rank paths, e.g. [(0,), (1,), (0, 0), (0, 1)].

        A path (r1, r2, ...) is the node whose depth-d token is the r_d-th most likely candidate of head d:
        `topk` (D, K) holds each depth's candidate tokens ranked. Shared prefixes become shared nodes; each
        path's parent is the path without its last rank, so the paths must be prefix-closed.
        """
        ordered = sorted({tuple(p) for p in paths}, key=lambda p: (len(p), p))  # parents first
        index = {(): 0}
        tokens, parents = [int(root)], [-1]
        for path in ordered:
            if path[:-1] not in index:
                raise MalformedTreeError(
                    f"rank path {path} has no parent path {path[:-1]} (paths must be prefix-closed)"
                )
            if len(path) > topk.shape[0] or path[-1] >= topk.shape[1]:
                raise MalformedTreeError(f"rank path {path} exceeds the candidates given, shape {tuple(topk.shape)}")
            index[path] = len(tokens)
            parents.append(index[path[:-1]])
            tokens.append(int(topk[len(path) - 1, path[-1]]))
        return cls(torch.tensor(tokens, device=topk.device), torch.tensor(parents, device=topk.device))

    # ---- derived structure --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.tokens.shape[0]

    @property
    def device(self) -> torch.device:
        return self.tokens.device

    @cached_property
    def _parents_list(self) -> list[int]:
        return self.parents.tolist()

    @cached_property
    def depths(self) -> torch.Tensor:
        """(N,) distance from the root (root = 0)."""
        depth = [0] * len(self)
        for i, p in enumerate(self._parents_list[1:], start=1):
            depth[i] = depth[p] + 1
        return torch.tensor(depth, dtype=torch.long, device=self.device)

    @cached_property
    def is_chain(self) -> bool:
        """True when node i's parent is i-1 for all i: the plain causal mask is then the tree mask."""
        return all(p == i - 1 for i, p in enumerate(self._parents_list))

    @cached_property
    def mask(self) -> torch.Tensor:
        """(N, N) bool ancestor mask, mask[i, j] = node j is node i or one of its ancestors."""
        n = len(self)
        mask = torch.zeros(n, n, dtype=torch.bool)
        mask[0, 0] = True
        for i, p in enumerate(self._parents_list[1:], start=1):
            mask[i] = mask[p]  # inherit every ancestor of the parent (parents[i] < i: already built)
            mask[i, i] = True
        return mask.to(self.device)

    def position_ids(self, cache_length: int) -> torch.Tensor:
        """(N,) position of each node: cache_length + depth (= its cache slot if accepted)."""
        return self.depths + cache_length

    @cached_property
    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(len(self))]
        for i, p in enumerate(self._parents_list[1:], start=1):
            kids[p].append(i)
        return kids

    def path_to(self, node: int) -> list[int]:
        """Node indices from the root to `node`, root first."""
        path = []
        while node != -1:
            path.append(node)
            node = self._parents_list[node]
        return path[::-1]

    def leaves(self) -> list[int]:
        return [i for i, kids in enumerate(self.children) if not kids]

    def paths(self) -> list[list[int]]:
        """Every root-to-leaf path (node indices), in leaf order."""
        return [self.path_to(leaf) for leaf in self.leaves()]

    @property
    def max_depth(self) -> int:
        return int(self.depths.max())

    def truncate_depth(self, max_depth: int) -> Tree:
        """Drop every node deeper than `max_depth` (topological order is preserved)."""
        if self.max_depth <= max_depth:
            return self
        return self._subtree((self.depths <= max_depth).nonzero().flatten())

    def truncate_nodes(self, max_nodes: int) -> Tree:
        """The first `max_nodes` nodes: a parent precedes its children, so they form a tree, and every kept
        node keeps its index (a proposer's per-node records stay valid); each sibling set keeps a prefix
        of itself, in the order its siblings were drawn."""
        if max_nodes < 1:
            raise ValueError(f"max_nodes must be at least 1 (the root), got {max_nodes}")
        if len(self) <= max_nodes:
            return self
        return self._subtree(torch.arange(max_nodes, device=self.device))

    def _subtree(self, keep: torch.Tensor) -> Tree:
        """The nodes `keep` (M,) (increasing, each one's parent kept too), renumbered 0..M-1."""
        remap = torch.full((len(self),), -1, dtype=torch.long, device=self.device)
        remap[keep] = torch.arange(len(keep), device=self.device)
        parents = torch.where(self.parents[keep] >= 0, remap[self.parents[keep].clamp(min=0)], -1)
        return Tree(
            self.tokens[keep],
            parents,
            candidate=None if self.candidate is None else self.candidate[keep],
            draft_probs=None if self.draft_probs is None else self.draft_probs[keep],
            meta=dict(self.meta),
            sibling_draw=self.sibling_draw,
        )

    def to_networkx(self, tokenizer=None):
        """A networkx DiGraph (parent -> child) with node attributes token, text, depth, candidate."""
        import networkx as nx

        graph = nx.DiGraph()
        depths = self.depths.tolist()
        cand = [True] * len(self) if self.candidate is None else self.candidate.tolist()
        tokens = self.tokens.tolist()
        # each node's text decoded along its own path: a character spread over byte tokens lands on the
        # node that completes it ("" on the ones before), never "�" per byte
        texts = path_pieces(tokens, self._parents_list, tokenizer) if tokenizer is not None else map(str, tokens)
        for i, (tok, text) in enumerate(zip(tokens, texts, strict=True)):
            graph.add_node(i, token=tok, text=text, depth=depths[i], candidate=cand[i])
            if i > 0:
                graph.add_edge(self._parents_list[i], i)
        return graph

    def __repr__(self) -> str:
        tokens, parents = self.tokens.tolist(), self._parents_list
        return f"Tree(n={len(self)}, depth={self.max_depth}, tokens={tokens}, parents={parents})"
