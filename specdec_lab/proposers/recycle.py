"""Token Recycling (Luo et al. 2024, arXiv 2408.08696): draft from the target's own past logits.

Every verify forward computes p(. | path to node) at every node of the tree, and decoding keeps one token of it;
the paper's point is that the rest is not trash. The top-k of each of those distributions is a guess at what
follows that node's token, and tokens recur: so keep, for every token x of the vocabulary, the k tokens the
target last ranked highest after x — an adjacency table M (V, k), 49,152 × 8 ids for SmolLM2 (1.5 MB) — and
draft by walking it:

    update (after each verify):   M[x_j] <- top-k(logits_j)     for every verified node j (newest wins; the
                                                                 accepted path written last, so it wins a tie)
    propose (from the root x_0):  a static tree of rank paths (r_1, ..., r_d); node (r_1..r_d) holds
                                  M[token of (r_1..r_{d-1})][r_d]  (the paper's BFS, Algorithm 1: one depth
                                  at a time, every parent's row read at once)

           x_0 ─┬─ M[x_0][0] = a ─┬─ M[a][0]        a rank path names a walk in the table: (0, 1) is the
                │                 └─ M[a][1]        second successor of the first successor of the root
                └─ M[x_0][1] = b ─── M[b][0]

The table starts from the prompt (`fill="logits"`: the head applied to the prefill's hidden states, the same
top-k the verify steps give, for one product over the prompt; "bigrams": each prompt token's next token; "none")
and is kept in the caller's `Memory` across calls, as the paper keeps it across requests (hot start). A token
whose row was never written has no successors: its subtree is not proposed.

Which tree. The paper verifies one 80-node template on an A100, where 80 tokens cost about what 1 does. On a
CPU t(n) grows with n, so the shape comes from the one cost model: the acceptance of the rank-r successor at
depth d, a(d, r) = P(the rank-r successor of the accepted depth-(d−1) token is the target's next token), is
counted on this run's verified trees (`RankAcceptance`), and `trees.pick_budget` takes the n-node tree
maximising E[L](n) / price(n + 1) (greedy on a, exact: `trees.build`), priced again every `adapt_every` steps.
Where nothing pays it backs off and probes (`draft_length.Probes`). A fixed tree can be given instead.

Exactness. The tree is a function of the table, which is a function of the tokens before this step and the
target's logits on them, never of this step's coins; siblings are distinct (one row's top-k): the one-hot tree
rule is exact for it (`sibling_draw="deterministic"`, as Medusa's top-s), and greedy emits the target's argmax
chain whatever the table holds.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..accept.registry import TREE_RULES
from ..trees import BudgetChoice, normalize_paths, parse_tree, pick_budget, tree_options
from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .draft_length import Probes

__all__ = [
    "RecycleConfig",
    "RecycleProposer",
    "SuccessorTable",
    "RankAcceptance",
    "walk",
    "table_slot",
    "fill_from_prompt",
    "write_verified",
]

PROMPT_FILLS = ("logits", "bigrams", "none")


@dataclass
class RecycleConfig:
    top_k: int = param(8, "successors kept per token: the table's width (the paper's 8)")
    tree: str | Sequence = param(
        "auto",
        '"auto" (the n-node tree that pays most under the cost model, on the acceptance per (depth, rank) '
        'counted on this run), "chain:N", "cartesian:s1,s2", a medusa_choices file, or a list of rank paths',
    )
    max_budget: int = param(24, '"auto": the largest node budget considered')
    max_depth: int = param(6, '"auto": the deepest tree considered (the paper\'s template is 6 deep)')
    fill: str = param(
        "logits",
        '"logits": fill the table from the target\'s logits over the prompt (one head product at the start); '
        '"bigrams": each prompt token\'s next token; "none": only what verify steps give',
    )
    adapt_every: int = param(8, '"auto": steps between two pricings of the trees')
    probe_every: int = param(16, '"auto" backed off (budget 0): verify the smallest tree after this many steps')
    probe_max: int = param(128, "the wait doubling after each failed probe up to this (`draft_length.Probes`)")

    def __post_init__(self):
        if not 1 <= self.top_k <= 64:
            raise ValueError(f"top_k must be in 1..64, got {self.top_k}")
        if self.max_budget < 0 or not 1 <= self.max_depth <= 16:
            raise ValueError(f"need max_budget >= 0 and 1 <= max_depth <= 16, got {self.max_budget}, {self.max_depth}")
        if self.fill not in PROMPT_FILLS:
            raise ValueError(f"fill must be one of {', '.join(PROMPT_FILLS)}, got {self.fill!r}")
        if self.adapt_every < 1:
            raise ValueError(f"adapt_every must be >= 1, got {self.adapt_every}")
        Probes(self.probe_every, self.probe_max)  # validates the probe schedule
        if not (isinstance(self.tree, str) and self.tree == "auto"):
            paths = parse_tree(self.tree)  # fails early, naming the problem
            if any(r >= self.top_k for p in paths for r in p):
                raise ValueError(f"the tree uses ranks up to {max(r for p in paths for r in p)} but the table keeps "
                                 f"top_k={self.top_k} successors: raise top_k or use smaller ranks")  # fmt: skip


class SuccessorTable:
    """M (V, k): each token's k most likely successors as the target last ranked them; width[x] of them are valid
    (0: row never written; k for rows from logits; fewer for a prompt's bigrams)."""

    def __init__(self, vocab_size: int, k: int, device: torch.device | str = "cpu"):
        self.k = k
        self.ids = torch.zeros(vocab_size, k, dtype=torch.long, device=device)  # (V, k)
        self.width = torch.zeros(vocab_size, dtype=torch.long, device=device)  # (V,) valid successors per row
        self.writes = 0

    def write(self, tokens: Sequence[int], successors: torch.Tensor, widths: Sequence[int] | None = None) -> None:
        """M[tokens[i]] <- successors[i] (n, k), its first widths[i] valid (all k by default); a token listed twice
        keeps its last row (newest wins)."""
        last = {int(t): i for i, t in enumerate(tokens)}  # index_put with repeated indices is unordered
        if not last:
            return
        rows = torch.tensor(list(last.values()), device=successors.device)
        index = torch.tensor(list(last), device=self.ids.device)
        self.ids[index] = successors[rows].to(self.ids.device)
        width = torch.full((len(last),), self.k) if widths is None else torch.tensor(widths)[rows.cpu()]
        self.width[index] = width.to(self.width.device)
        self.writes += len(last)

    def write_logits(self, tokens: Sequence[int], logits: torch.Tensor) -> None:
        """The top-k of each row of logits (n, V) as the successors of tokens[i]."""
        self.write(tokens, logits.topk(self.k, dim=-1).indices)  # (n, k)

    def rows(self, tokens: Sequence[int]) -> list[list[int] | None]:
        """Each token's valid successors, best first, or None where its row was never written."""
        index = torch.tensor(list(tokens), device=self.ids.device)
        ids, width = self.ids[index].tolist(), self.width[index].tolist()
        return [row[:w] if w else None for row, w in zip(ids, width, strict=True)]

    def summary(self) -> dict:
        return {"rows_known": int((self.width > 0).sum()), "k": self.k, "writes": self.writes}


def walk(table: SuccessorTable, root: int, paths: Sequence[tuple[int, ...]], max_depth: int | None = None):
    """The tree the rank paths name from `root` (paths parents first): -> (tokens, parents, node paths), root
    first. One depth at a time, every parent's row read at once (the paper's BFS); a node whose parent's row is
    unknown (or narrower than the rank) is left out with its subtree, and paths deeper than max_depth too."""
    tokens, parents, kept = [root], [-1], [()]
    index = {(): 0}
    by_depth: dict[int, list[tuple[int, ...]]] = {}
    for p in paths:
        if max_depth is None or len(p) <= max_depth:
            by_depth.setdefault(len(p), []).append(p)
    for d in sorted(by_depth):
        layer = [p for p in by_depth[d] if p[:-1] in index]
        if not layer:
            break
        heads = sorted({p[:-1] for p in layer}, key=lambda q: index[q])
        rows = dict(zip(heads, table.rows([tokens[index[q]] for q in heads]), strict=True))
        for p in layer:
            row = rows[p[:-1]]
            if row is None or p[-1] >= len(row):
                continue
            index[p] = len(tokens)
            tokens.append(row[p[-1]])
            parents.append(index[p[:-1]])
            kept.append(p)
    return tokens, parents, kept


class RankAcceptance:
    """a(d, r): P(the rank-r successor of the accepted depth-(d−1) token is accepted), counted on verified trees.

    Sparse cells borrow from their rank's pooled rate, and that from a prior: a(d, r) = (hits + w·ā(r)) /
    (offers + w), ā(r) = (Σ_d hits + w·prior(r)) / (Σ_d offers + w), so a depth seen twice is not read as 0 or 1.
    """

    def __init__(self, depth: int, k: int, weight: float = 2.0, prior: float = 0.3):
        self.hits = torch.zeros(depth, k, dtype=torch.float64)  # (D, k)
        self.offers = torch.zeros(depth, k, dtype=torch.float64)  # (D, k)
        self.weight = weight
        self.prior = torch.tensor([prior / (r + 1) for r in range(k)], dtype=torch.float64)  # (k,) rank r: ∝ 1/(r+1)

    def record(self, parents: Sequence[int], paths: Sequence[tuple[int, ...]], path: Sequence[int]) -> None:
        """A verified tree (node paths as `walk` gave them) whose accepted path (node indices, root first) was
        `path`: every child of an accepted node is one offer of its (depth, rank), a hit if it was accepted."""
        on_path = set(path)
        depth = self.hits.shape[0]
        for i in range(1, len(parents)):
            if parents[i] in on_path and len(paths[i]) <= depth:
                d, r = len(paths[i]) - 1, paths[i][-1]
                self.offers[d, r] += 1
                self.hits[d, r] += i in on_path

    def table(self) -> torch.Tensor:
        """(D, k) a(d, r), shrunk as the class docstring says; each entry in [0, 1]."""
        w = self.weight
        pooled = (self.hits.sum(0) + w * self.prior) / (self.offers.sum(0) + w)  # (k,)
        return ((self.hits + w * pooled) / (self.offers + w)).clamp(0.0, 1.0)

    def summary(self) -> dict:
        return {"offers": int(self.offers.sum()), "hits": int(self.hits.sum()),
                "a_depth1": [round(x, 3) for x in self.table()[0].tolist()]}  # fmt: skip


def table_slot(state: DecodeState, k: int) -> dict:
    """The Memory slot holding the successor table under "table" (one per k; a new target starts afresh). The
    hybrid reads the table only; `RecycleProposer` keeps its acceptance counts beside it."""
    model = state.model
    head = model.get_output_embeddings()
    vocab = getattr(head, "out_features", None) or head.weight.shape[0]
    slot = state.memory.slot(f"recycle:k={k}")
    if slot.get("model") is not model or slot["table"].ids.shape[0] != vocab:
        slot.clear()
        slot.update(model=model, table=SuccessorTable(vocab, k, state.device))
    return slot


@torch.inference_mode()
def fill_from_prompt(table: SuccessorTable, state: DecodeState, prompt, how: str) -> None:
    """Rows for the prompt's tokens before the first step (`RecycleConfig.fill`)."""
    ids = state.tokens[: state.prompt_length]
    if how == "bigrams" and len(ids) > 1:
        # each token's next token first, the rest of its row kept behind it (siblings stay distinct)
        rows, widths = [], []
        for tok, old in zip(ids[1:], table.rows(ids[:-1]), strict=True):
            row = [tok, *(t for t in (old or []) if t != tok)][: table.k]
            widths.append(len(row))
            rows.append(row + [0] * (table.k - len(row)))
        table.write(ids[:-1], torch.tensor(rows, device=table.ids.device), widths)
    elif how == "logits" and prompt is not None and len(prompt.hidden):
        # the prefill covered ids[:-1]: hidden[i] (after the final norm) predicts ids[i + 1]
        head = state.model.get_output_embeddings()
        hidden = prompt.hidden  # (n-1, H)
        for s in range(0, len(hidden), 128):  # (128, V) logits at a time: a few MB, never (n, V) at once
            chunk = hidden[s : s + 128]
            table.write_logits(ids[s : s + len(chunk)], head(chunk))


@torch.inference_mode()
def write_verified(table: SuccessorTable, tree: Tree, path: Sequence[int], logits: torch.Tensor) -> None:
    """After a verify: every node's top-k successors into the table, the accepted path written last (it wins a
    token that two nodes hold: the true context over a rejected one). logits: (N, V) at the tree's nodes."""
    tokens, on_path = tree.tokens.tolist(), set(path)
    order = [j for j in range(len(tokens)) if j not in on_path] + list(path)
    table.write_logits([tokens[j] for j in order], logits[order])


class RecycleProposer(Proposer):
    name = "recycle"
    accept_rules = TREE_RULES  # deterministic siblings (one row's top-k): the one-hot rule when sampling

    def __init__(self, config: RecycleConfig | None = None, **kwargs):
        self.config = config or RecycleConfig(**kwargs)
        cfg = self.config
        self.auto = isinstance(cfg.tree, str) and cfg.tree == "auto"
        self.paths: list[tuple[int, ...]] = [] if self.auto else normalize_paths(parse_tree(cfg.tree))
        self.choice: BudgetChoice | None = None
        self.probes = Probes(cfg.probe_every, cfg.probe_max)
        self.steps = 0
        self.counts = {"steps": 0, "nodes": 0, "probes": 0, "budgets": {}, "prompt_seconds": 0.0}
        self._step: tuple[list[int], list[tuple[int, ...]]] | None = None  # this step's (parents, node paths)
        self._last: dict = {}

    # ---- setup ------------------------------------------------------------------------------------
    def start(self, state: DecodeState, prompt=None) -> None:
        cfg = self.config
        slot = table_slot(state, cfg.top_k)
        if slot.get("acceptance") is None or slot["acceptance"].hits.shape[0] != cfg.max_depth:  # another depth's
            slot["acceptance"] = RankAcceptance(cfg.max_depth, cfg.top_k)
        self.table, self.acceptance = slot["table"], slot["acceptance"]
        self.cost = state.cost
        t0 = time.perf_counter()
        fill_from_prompt(self.table, state, prompt, cfg.fill)
        self.counts["prompt_seconds"] = time.perf_counter() - t0
        if self.auto:
            self.cost.prepare(cfg.max_budget + 1, tree=True)
            self._reprice()

    def _reprice(self) -> None:
        """The tree that pays most under what the cost model and this run's acceptance counts say now."""
        cfg = self.config
        options = tree_options(self.acceptance.table(), cfg.max_budget, "greedy", cfg.max_depth, by_depth=False)
        self.choice = pick_budget(options, lambda n: self.cost.step(n, tree=True))
        self.paths = list(self.choice.trees[self.choice.budget])

    # ---- the two calls of the loop ----------------------------------------------------------------
    def propose(self, state: DecodeState) -> Tree:
        if self.auto and self.steps % self.config.adapt_every == 0:
            self._reprice()
        self.steps += 1
        paths = self.paths
        if self.auto and self.choice.budget == 0:
            if self.probes.idle_step():  # nothing pays: verify the smallest tree now and then
                paths = list(self.choice.trees[min(n for n in self.choice.trees if n > 0)])
                self.counts["probes"] += 1
        elif self.auto:
            self.probes.drafting()
        tokens, parents, kept = walk(self.table, state.root, paths, state.max_depth)
        self._step = (parents, kept)
        self._last = {"nodes": len(tokens) - 1, "probe": self.probes.probing}
        if len(tokens) == 1:
            return Tree.root(state.root, device=state.device)
        device = state.device
        return Tree(torch.tensor(tokens, device=device), torch.tensor(parents, device=device),
                    sibling_draw="deterministic")  # fmt: skip

    def update(self, state, tree, acceptance, output) -> None:
        n = len(tree)
        write_verified(self.table, tree, acceptance.path, output.logits)
        if n > 1 and self._step is not None:  # the tree as verified: the loop may have cut it to its first n nodes
            parents, kept = self._step
            self.acceptance.record(parents[:n], kept[:n], acceptance.path)
            budgets = self.counts["budgets"]
            budgets[n - 1] = budgets.get(n - 1, 0) + 1
            self.counts["nodes"] += n - 1
        self.counts["steps"] += 1
        self._last["accepted"] = acceptance.accepted_draft
        if self.probes.probing:
            self.probes.outcome(acceptance.accepted_draft > 0)

    def info(self) -> dict:
        return dict(self._last)

    def summary(self) -> dict:
        """The table's fill, the acceptance counted per (depth, rank), the budgets verified (nodes -> steps)."""
        steps = max(self.counts["steps"], 1)
        out = {"table": self.table.summary(), "acceptance": self.acceptance.summary(),
               "mean_nodes": round(self.counts["nodes"] / steps, 3), "probes": self.counts["probes"],
               "budgets": {str(k): v for k, v in sorted(self.counts["budgets"].items())},
               "prompt_seconds": round(self.counts["prompt_seconds"], 4)}  # fmt: skip
        if self.choice is not None:
            out["budget"], out["expected_length"] = self.choice.budget, round(self.choice.expected_length, 3)
        return out
