"""Medusa decoding (Cai et al. 2024): the target's own extra heads propose a token tree, one forward verifies it.

Head k (1..K) reads h_a, the target's last hidden state at the last accepted node a, and predicts the token k
positions after the next one. The next token is the bonus the target itself supplied at a, which is the new
root, so a depth-d node (position root + d) takes its candidates from head d:

    h_a ──► head 1 top-s_1 ─► depth-1 nodes        tree = rank paths (r_1, ..., r_d): the node whose depth-j
        ──► head 2 top-s_2 ─► depth-2 nodes        token is head j's rank-r_j candidate (FasterDecoding's
        ...                                        `medusa_choices`; `trees/paths.py`)

Per loop step (`generate`):
    propose:  run heads 1..D (D = the tree's depth) on h_a: their residual blocks, then the projection onto
              the drafting vocabulary only (below); top-s per head; place the candidates on the tree
    verify:   the loop's one tree-attention forward over every node (no extra target call: h for the next
              step comes out of it, `TreeOutput.hidden`)
    update:   h_a <- hidden state of the last accepted node

At the first step h_a is the prefill's last hidden state (the token before the root): the same relation
(head d predicts position root + d) holds there, so Medusa drafts from the very first step.

Cheap drafting. A head's projection through the whole 49k-row LM head costs about a fifth of a target
forward on a CPU. The heads project onto the drafting vocabulary instead (`specdec_lab.models.vocab`, plus the
prompt's own tokens): a candidate outside it is never proposed, which can only cost acceptance, never
exactness — the target verifies every node. Where it is faster on the device, those rows are scored in int8
(weight-only, a quarter of the bytes; `medusa/projection.py`), on the same terms.

Which tree. `tree="auto"` picks the node budget n that maximises E[L](n) / (price(n + 1) + heads' cost):
E[L] from the heads' calibrated accuracies (`calibration.json` next to the heads, made by `python -m
specdec_lab.medusa calibrate`), the price from the one cost model (`cost.StepCost`: the verify curve measured
on this device with a tree mask, corrected by the loop's timings, plus the loop's own time), the heads' cost
measured here for each depth. A steep (CPU) curve picks a short chain or nothing; a flat (GPU-like) curve
picks tens of nodes. The candidate trees are built once (`trees.tree_options`) and priced again every
`adapt_every` steps as the cost model learns, their E[L] corrected per depth by what this run's trees have
accepted (`trees.DepthCorrection`: the calibration text is easier or harder than the text at hand, as a
chain's α̂ follows what was accepted); where nothing pays it probes the smallest tree now and then
(`draft_length.Probes`), the same exploration every sizer uses. `tree="dynamic"` builds each step's tree from
the heads' own calibrated confidence instead (`trees.dynamic`): more nodes where the heads are sure, none
where they are not. Any tree can be given instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..accept.registry import TREE_RULES
from ..medusa.drafter import CALIBRATION, Drafter, get_drafter
from ..medusa.heads import MedusaHeads
from ..medusa.projection import WEIGHTS
from ..trees import (
    BudgetChoice,
    DepthCorrection,
    dynamic_tree,
    expected_length,
    normalize_paths,
    parse_tree,
    pick_budget,
)
from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .draft_length import Probes

__all__ = ["MedusaDecodeConfig", "MedusaProposer", "Drafter", "get_drafter", "CALIBRATION"]


@dataclass
class MedusaDecodeConfig:
    heads: str | MedusaHeads | Drafter = param(
        "default",
        '"default" (shipped heads of SmolLM2-135M), a folder, MedusaHeads (full vocabulary, no calibration: '
        "give a tree), or a ready Drafter (heads + calibration)",
    )
    tree: str | Sequence = param(
        "auto",
        '"auto" (budget from the cost model), "dynamic" (each step\'s tree from the heads\' calibrated '
        'confidence and the cost model), "chain:N", "cartesian:s1,s2", a medusa_choices file (.json or .py), '
        "or a list of rank paths",
    )
    max_budget: int = param(32, '"auto"/"dynamic": the largest node budget considered')
    accuracy: str = param("conditional", '"auto": the calibrated accuracy model, "independent" or "conditional"')
    vocab: str = param(
        "auto",
        '"draft": score only the drafting vocabulary (+ prompt tokens); "full"; "auto": draft for the shipped '
        "heads (their vocabulary is the shipped one), full otherwise",
    )
    head_weights: str = param(
        "auto",
        'how drafting scores the heads on the LM head\'s rows: "fp32", "int8" (weight-only, '
        '`medusa/projection.py`: changes which tokens are proposed, never the output) or "auto" (the faster here)',
    )
    adapt_every: int = param(16, '"auto"/"dynamic": steps between two pricings of the trees on the cost model')
    probe_every: int = param(16, '"auto" backed off (budget 0): verify the smallest tree after this many steps')
    probe_max: int = param(128, "the wait doubling after each failed probe up to this (`draft_length.Probes`)")

    def __post_init__(self):
        if self.max_budget < 0:
            raise ValueError(f"max_budget must be >= 0, got {self.max_budget}")
        if self.accuracy not in ("independent", "conditional"):
            raise ValueError(f"accuracy must be 'independent' or 'conditional', got {self.accuracy!r}")
        if self.vocab not in ("auto", "draft", "full"):
            raise ValueError(f"vocab must be 'auto', 'draft' or 'full', got {self.vocab!r}")
        if self.head_weights not in ("auto", *WEIGHTS):
            raise ValueError(f"head_weights must be 'auto', 'fp32' or 'int8', got {self.head_weights!r}")
        if self.adapt_every < 1:
            raise ValueError(f"adapt_every must be >= 1, got {self.adapt_every}")
        Probes(self.probe_every, self.probe_max)  # validates the probe schedule
        if isinstance(self.tree, str) and self.tree not in ("auto", "dynamic"):
            parse_tree(self.tree)  # fails early, naming the problem


@dataclass
class _Shape:
    """A fixed tree's node order, parents and (depth, rank) per node: built once from its rank paths."""

    paths: list[tuple[int, ...]]  # validated (prefix-closed, non-negative ranks), parents first
    parents: torch.Tensor  # (N,) node 0 is the root
    node_depth: torch.Tensor  # (N-1,) head index of each non-root node
    node_rank: torch.Tensor  # (N-1,) its rank among that head's candidates
    depth: int  # heads to run
    width: int  # candidates per head

    @classmethod
    def of(cls, paths) -> _Shape:
        paths = normalize_paths(list(dict.fromkeys(tuple(p) for p in paths)))  # sorted parents-first
        index = {path: i for i, path in enumerate(paths, start=1)} | {(): 0}
        return cls(
            paths=paths,
            parents=torch.tensor([-1] + [index[path[:-1]] for path in paths]),
            node_depth=torch.tensor([len(p) - 1 for p in paths], dtype=torch.long),
            node_rank=torch.tensor([p[-1] for p in paths], dtype=torch.long),
            depth=max((len(p) for p in paths), default=0),
            width=max((p[-1] for p in paths), default=-1) + 1,
        )


class MedusaProposer(Proposer):
    name = "medusa"
    # greedy at temperature 0; when sampling, the exact one-hot rule for its deterministic top-s siblings (a
    # function of h_a alone, never of the verification's coins); typical acceptance (lossy) by name
    accept_rules = TREE_RULES

    def __init__(self, config: MedusaDecodeConfig | None = None, **kwargs):
        self.config = config or MedusaDecodeConfig(**kwargs)
        self.drafter: Drafter | None = None
        self.paths: list[tuple[int, ...]] = []
        self.choice: BudgetChoice | None = None  # "auto": the last pricing's pick
        self.options = []  # "auto": the candidate trees (`trees.tree_options`), priced every adapt_every steps
        self.shapes: dict[tuple, _Shape] = {}  # "auto": a tree's rank paths -> its shape, built on first use
        self.probes = Probes(self.config.probe_every, self.config.probe_max)
        self.correction = DepthCorrection()  # "auto": ρ_d, what this run's trees accept against the calibration
        self._verified: tuple | None = None  # "auto": the step's tree as (budget, its E[L] by depth)
        self.h: torch.Tensor | None = None  # (H,) hidden state at the last accepted node
        self.dynamic = self.config.tree == "dynamic"
        self.prices: list[float] = []  # dynamic: price(n) for n = 1..max_budget+1, refreshed every adapt_every
        self.steps = 0
        self.counts = {"steps": 0, "nodes": 0, "expected": 0.0, "heads_run": 0, "probes": 0, "budgets": {}}
        self._last: dict = {}

    # ---- setup ------------------------------------------------------------------------------------
    def start(self, state: DecodeState, prompt=None) -> None:
        model = state.model
        cfg = self.config
        self.drafter = drafter = get_drafter(cfg.heads, model, cfg.vocab, cfg.head_weights)
        self.row_ids = drafter.rows(state.tokens[: state.prompt_length])  # (M,) or None
        weight = model.get_output_embeddings().weight  # (V, H) the shared W2
        if not drafter.head_seconds:
            drafter.measure_heads(weight, self.row_ids)
        self.score = drafter.scorer(weight, self.row_ids)  # (D, H) -> (D, M) logits, or None (own W2s)
        self.cost = state.cost
        if self.dynamic:
            self._start_dynamic()
        elif cfg.tree == "auto":
            self._start_auto()
        else:
            paths = parse_tree(cfg.tree)
            self._check_depth(max((len(p) for p in paths), default=0))
            self.shape = _Shape.of(paths)
            self.paths, self.depth = self.shape.paths, self.shape.depth
        self.h = prompt.hidden[-1] if prompt is not None and len(prompt.hidden) else None

    def _check_depth(self, depth: int) -> None:
        if depth > self.drafter.heads.num_heads:
            raise ValueError(f"tree is {depth} deep but the heads are only {self.drafter.heads.num_heads}")

    def _head_cost(self, depth: int) -> float:
        return self.drafter.head_seconds.get(depth, 0.0) if depth else 0.0

    def _start_auto(self) -> None:
        cfg, drafter = self.config, self.drafter
        if drafter.accuracies is None:
            raise ValueError(
                "tree='auto' needs the heads' calibrated accuracies (calibration.json next to the heads: "
                "`python -m specdec_lab.train medusa-calibrate`); or give a tree, e.g. tree='chain:2'"
            )
        self.options = drafter.tree_options(cfg.accuracy, cfg.max_budget)
        self.cost.prepare(cfg.max_budget + 1, tree=True)
        self._reprice()

    def _reprice(self) -> None:
        """Pick the tree that pays most under what the cost model knows now, E[L] corrected by what this run's
        trees accepted (the calibration text is easier or harder than the text at hand)."""
        price = lambda n: self.cost.step(n, tree=True)  # noqa: E731
        self.choice = pick_budget(self.options, price, self._head_cost, self.correction.factors())
        self.shape = self._shape(self.choice.budget)
        self.paths, self.depth = self.shape.paths, self.shape.depth

    def _shape(self, budget: int) -> _Shape:
        """The chosen tree of that budget (the best depth for a budget can change as prices do)."""
        paths = tuple(self.choice.trees[budget])
        if paths not in self.shapes:
            self.shapes[paths] = _Shape.of(paths)
        return self.shapes[paths]

    def _start_dynamic(self) -> None:
        drafter, cfg = self.drafter, self.config
        if drafter.confidence is None:
            raise ValueError(
                "tree='dynamic' needs the heads' confidence calibration (the 'confidence' entry of calibration.json "
                "next to the heads: `python -m specdec_lab.train medusa-calibrate`); or use tree='auto' or a fixed tree"
            )
        if drafter.confidence.num_heads != drafter.heads.num_heads:
            raise ValueError(f"the confidence calibration is for {drafter.confidence.num_heads} heads, "
                             f"these heads are {drafter.heads.num_heads}")  # fmt: skip
        self.cost.prepare(cfg.max_budget + 1, tree=True)
        # one head alone costs about what the first of a batch does; heads are computed one at a time
        one = drafter.head_seconds.get(1, 0.0)
        self.head_cost = lambda depth: one * depth
        self.depth = drafter.heads.num_heads
        self.width = drafter.confidence.top  # candidates per head: the top-S calibrated on

    # ---- the two calls of the loop ----------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, state: DecodeState) -> Tree:
        refresh = self.steps % self.config.adapt_every == 0
        self.steps += 1
        if self.dynamic:
            if refresh:
                self.prices = [self.cost.step(n, tree=True) for n in range(1, self.config.max_budget + 2)]
            return self._propose_dynamic(state)
        if refresh and self.options:
            self._reprice()
        shape = self.shape
        if self.options and self.choice.budget == 0 and self.probes.idle_step():  # nothing pays: probe
            shape = self._shape(min(n for n in self.choice.trees if n > 0)) if len(self.choice.trees) > 1 else shape
            self.counts["probes"] += shape.depth > 0
        elif self.options and self.choice.budget > 0:
            self.probes.drafting()
        self._verified = None
        if self.h is None or shape.depth == 0:  # nothing to draft from yet (one-token prompt), or n = 0
            self._last = {"nodes": 0}
            return Tree.root(state.root)
        if self.options:
            option = self.choice.options[len(shape.paths)]
            self._verified = (option.budget, option.by_depth)
        t0 = time.perf_counter()
        top = self.drafter.candidates(self.h, shape.depth, shape.width, self.score, self.row_ids)  # (D, s)
        tokens = torch.cat([torch.tensor([state.root], device=top.device), top[shape.node_depth, shape.node_rank]])
        self._last = {"nodes": len(tokens) - 1, "probe": self.probes.probing}
        state.cost.note(time.perf_counter() - t0)  # the heads: priced by the tree choice itself, not overhead
        return Tree(tokens, shape.parents.to(top.device), sibling_draw="deterministic")  # each head's top-s

    def _propose_dynamic(self, state: DecodeState) -> Tree:
        if self.h is None:
            self._last = {"nodes": 0}
            return Tree.root(state.root)
        h, drafter = self.h, self.drafter
        t0 = time.perf_counter()
        step = dynamic_tree(
            lambda j: drafter.head_top(h, j, self.width, self.score, self.row_ids),
            drafter.confidence,
            self.prices,
            self.head_cost,
            max_budget=self.config.max_budget,
            max_depth=min(self.depth, state.max_depth),
        )
        state.cost.note(time.perf_counter() - t0)
        n = len(step.paths)
        self._last = {"nodes": n, "expected_length": round(step.expected_length, 3), "heads_run": step.heads_run}
        c = self.counts
        c["steps"] += 1
        c["nodes"] += n
        c["expected"] += step.expected_length
        c["heads_run"] += step.heads_run
        if n == 0:
            return Tree.root(state.root)
        device = self.h.device
        tokens = torch.tensor([state.root, *step.tokens], device=device)  # (n+1,)
        return Tree(tokens, torch.tensor([-1, *step.parents], device=device), sibling_draw="deterministic")

    def update(self, state, tree, acceptance, output) -> None:
        self.h = output.hidden[acceptance.path[-1]]  # (H,) the next step's heads read the last accepted node
        self._last["accepted"] = acceptance.accepted_draft
        if len(tree) > 1 and not self.dynamic:  # the tree as verified (the loop cuts it near the token budget)
            budgets = self.counts["budgets"]
            budgets[len(tree) - 1] = budgets.get(len(tree) - 1, 0) + 1
            if self._verified is not None and self._verified[0] == len(tree) - 1:  # (a cut tree: not its E[L])
                self.correction.observe(self._verified[1], acceptance.accepted_draft)
        if self.probes.probing:
            self.probes.outcome(acceptance.accepted_draft > 0)

    def info(self) -> dict:
        return dict(self._last)

    def summary(self) -> dict:
        """The tree used: its size, depth and predicted E[L] ("auto": the last pick, and how many steps verified
        each budget). Dynamic trees: the mean nodes, predicted E[L] and heads run per step."""
        if self.dynamic:
            steps = max(self.counts["steps"], 1)
            return {"tree": "dynamic", "nodes": round(self.counts["nodes"] / steps, 3),
                    "expected_length": round(self.counts["expected"] / steps, 3),
                    "heads_run": round(self.counts["heads_run"] / steps, 3),
                    "block_kernel": self.drafter.block_kernel, "head_weights": self.drafter.head_weights}  # fmt: skip
        out = {"nodes": len(self.paths), "depth": self.depth, "expected_length": self.expected_length(),
               "block_kernel": self.drafter.block_kernel, "head_weights": self.drafter.head_weights}  # fmt: skip
        if self.choice is not None:
            out["budget"] = self.choice.budget
            out["budgets"] = {str(n): k for n, k in sorted(self.counts["budgets"].items())}  # nodes -> steps
            out["probes"] = self.counts["probes"]
            out["correction"] = [round(f, 3) for f in self.correction.factors()]  # ρ_d per depth
        if self.config.tree == "auto" or len(self.paths) <= 64:
            out["paths"] = [list(p) for p in self.paths]  # parents first (`_Shape.of`)
        return out

    def expected_length(self) -> float | None:
        """E[L] of the tree in use under the calibrated accuracy model (None without calibration); dynamic
        trees: the mean over the steps so far of each step's predicted E[L]."""
        if self.dynamic:
            return self.counts["expected"] / self.counts["steps"] if self.counts["steps"] else None
        acc = self.drafter.accuracies if self.drafter is not None else None
        return None if acc is None else expected_length(self.paths, acc.model(self.config.accuracy))
