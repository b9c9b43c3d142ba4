"""Medusa decoding (Cai et al. 2024): the target's own extra heads propose a token tree, one forward verifies it.

Head k (1..K) reads h_a, the target's last hidden state at the last accepted node a, and predicts the token k
positions after the next one. The next token is the bonus the target itself supplied at a, which is the new
root, so a depth-d node (position root + d) takes its candidates from head d:

    h_a ──► head 1 top-s_1 ─► depth-1 nodes        tree = rank paths (r_1, ..., r_d): the node whose depth-j
        ──► head 2 top-s_2 ─► depth-2 nodes        token is head j's rank-r_j candidate (FasterDecoding's
        ...                                        `medusa_choices`; `medusa/trees.py`)

Per loop step (`generate`):
    propose:  run heads 1..D (D = the tree's depth) on h_a: their residual blocks, then the projection onto
              the drafting vocabulary only (below); top-s per head; place the candidates on the tree
    verify:   the loop's one tree-attention forward over every node (no extra target call: h for the next
              step comes out of it, `TreeOutput.hidden`)
    update:   h_a <- hidden state of the last accepted node

At the first step h_a is the prefill's last hidden state (the token before the root): the same relation
(head d predicts position root + d) holds there, so Medusa drafts from the very first step.

Cheap drafting. A head's projection through the whole 49k-row LM head costs about a fifth of a target
forward on a CPU. The heads project onto the drafting vocabulary instead (the shipped draft's most frequent
tokens, plus the prompt's own tokens): a candidate outside it is never proposed, which can only cost
acceptance, never exactness — the target verifies every node. Where it is faster on the device, those rows
are scored in int8 (weight-only, a quarter of the bytes; `medusa/projection.py`), on the same terms.

Which tree. `tree="auto"` picks, once per model and heads, the node budget n that maximises
E[L](n) / (t(n + 1) + heads' cost): E[L] from the heads' calibrated accuracies (`calibration.json` next to
the heads, made by `python -m specdec_lab.medusa calibrate`), t the verify cost curve measured on this
device (`cost.py`, with a tree mask), the heads' cost measured here for each depth. A steep (CPU) curve picks
a short chain or nothing; a flat (GPU-like) curve picks tens of nodes. That model ranks neighbouring budgets
within its own error, so the near-best trees (`arms`, default 3) are then timed while decoding and the
fastest measured wins (`medusa/online.py`). `tree="dynamic"` builds each step's
tree from the heads' own calibrated confidence instead (`medusa/dynamic.py`): more nodes where the heads are
sure, none where they are not. Any tree can be given instead.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..accept import TREE_RULES
from ..cost import cost_curve_for
from ..medusa.drafter import CALIBRATION, Drafter, get_drafter
from ..medusa.heads import MedusaHeads
from ..medusa.online import OnlineBudget
from ..medusa.projection import WEIGHTS
from ..tree import Tree
from ..trees import BudgetChoice, choose_budget, dynamic_tree, expected_length, normalize_paths, parse_tree
from .base import DecodeState, Proposer, param

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
        '"auto" (budget from the measured cost curve), "dynamic" (each step\'s tree from the heads\' '
        'calibrated confidence and the curve), "chain:N", "cartesian:s1,s2", a medusa_choices file (.json or '
        ".py), or a list of rank paths",
    )
    max_budget: int = param(32, '"auto"/"dynamic": the largest node budget considered')
    accuracy: str = param("conditional", '"auto": the calibrated accuracy model, "independent" or "conditional"')
    vocab: str = param(
        "auto",
        '"draft": score only the drafting vocabulary (+ prompt tokens); "full"; "auto": draft when the '
        "shipped draft's vocabulary is for this target (the shipped heads), full otherwise",
    )
    arms: int = param(
        3,
        '"auto": the near-best trees (at most this many) are timed while decoding and the fastest measured '
        "wins (`medusa/online.py`); 1 = the startup cost model's choice alone, for the whole run",
    )
    head_weights: str = param(
        "auto",
        'how drafting scores the heads on the LM head\'s rows: "fp32", "int8" (weight-only, '
        '`medusa/projection.py`: changes which tokens are proposed, never the output) or "auto" (the faster '
        "here)",
    )

    def __post_init__(self):
        if self.max_budget < 0:
            raise ValueError(f"max_budget must be >= 0, got {self.max_budget}")
        if self.accuracy not in ("independent", "conditional"):
            raise ValueError(f"accuracy must be 'independent' or 'conditional', got {self.accuracy!r}")
        if self.vocab not in ("auto", "draft", "full"):
            raise ValueError(f"vocab must be 'auto', 'draft' or 'full', got {self.vocab!r}")
        if self.head_weights not in ("auto", *WEIGHTS):
            raise ValueError(f"head_weights must be 'auto', 'fp32' or 'int8', got {self.head_weights!r}")
        if self.arms < 1:
            raise ValueError(f"arms must be >= 1, got {self.arms}")
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
    accept_rules = TREE_RULES  # greedy (exact) at temperature 0; typical acceptance (lossy) by name

    def __init__(self, config: MedusaDecodeConfig | None = None, **kwargs):
        self.config = config or MedusaDecodeConfig(**kwargs)
        self.drafter: Drafter | None = None
        self.paths: list[tuple[int, ...]] = []
        self.choice: BudgetChoice | None = None
        self.h: torch.Tensor | None = None  # (H,) hidden state at the last accepted node
        self.dynamic = self.config.tree == "dynamic"
        self.curve: list[float] = []  # dynamic: t(n) for n = 1..max_budget+1
        self.counts = {"steps": 0, "nodes": 0, "expected": 0.0, "heads_run": 0}  # dynamic: sums for `summary`
        self.online: OnlineBudget | None = None  # "auto" with arms > 1: the candidate trees, timed online
        self.shapes: list[_Shape] = []  # the arms' trees, built once
        self._arm: int | None = None  # the arm of the step in flight
        self._draft_seconds = 0.0
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
        if self.dynamic:
            self._start_dynamic(model)
        else:
            self.shape = _Shape.of(self._tree(model))
            self.paths, self.depth = self.shape.paths, self.shape.depth
            if self.online is not None:
                self.shapes = [_Shape.of(arm.paths) for arm in self.online.arms]
        self.h = prompt.hidden[-1] if prompt is not None and len(prompt.hidden) else None

    def _tree(self, model) -> list[tuple[int, ...]]:
        cfg, drafter = self.config, self.drafter
        if cfg.tree != "auto":
            paths = parse_tree(cfg.tree)
        else:
            if drafter.accuracies is None:
                raise ValueError(
                    "tree='auto' needs the heads' calibrated accuracies (calibration.json next to the heads: "
                    "`python -m specdec_lab.medusa calibrate`); or give a tree, e.g. tree='chain:2'"
                )
            curve = cost_curve_for(model, max_tokens=cfg.max_budget + 1, tree=True)
            key = (tuple(curve.seconds), cfg.accuracy, cfg.max_budget)
            if key not in drafter.choices:
                drafter.choices[key] = choose_budget(
                    drafter.accuracies.model(cfg.accuracy),
                    verify_cost=curve,
                    max_budget=cfg.max_budget,
                    head_cost=lambda depth: drafter.head_seconds.get(depth, 0.0) if depth else 0.0,
                )
            self.choice = drafter.choices[key]
            paths = list(self.choice.paths)
            if cfg.arms > 1:
                if (*key, cfg.arms) not in drafter.online:
                    drafter.online[(*key, cfg.arms)] = OnlineBudget.from_choice(self.choice, max_arms=cfg.arms)
                online = drafter.online[(*key, cfg.arms)]
                self.online = online if len(online.arms) > 1 else None
        depth = max((len(p) for p in paths), default=0)
        if depth > drafter.heads.num_heads:
            raise ValueError(f"tree is {depth} deep but the heads are only {drafter.heads.num_heads}")
        return paths

    def _start_dynamic(self, model) -> None:
        drafter, cfg = self.drafter, self.config
        if drafter.confidence is None:
            raise ValueError(
                "tree='dynamic' needs the heads' confidence calibration (the 'confidence' entry of calibration.json "
                "next to the heads: `python -m specdec_lab.medusa calibrate`); or use tree='auto' or a fixed tree"
            )
        if drafter.confidence.num_heads != drafter.heads.num_heads:
            raise ValueError(f"the confidence calibration is for {drafter.confidence.num_heads} heads, "
                             f"these heads are {drafter.heads.num_heads}")  # fmt: skip
        curve = cost_curve_for(model, max_tokens=cfg.max_budget + 1, tree=True)
        self.curve = [float(curve(n)) for n in range(1, cfg.max_budget + 2)]  # (max_budget+1,)
        # one head alone costs about what the first of a batch does; heads are computed one at a time
        one = drafter.head_seconds.get(1, 0.0)
        self.head_cost = lambda depth: one * depth
        self.depth = drafter.heads.num_heads
        self.width = drafter.confidence.top  # candidates per head: the top-S calibrated on

    # ---- the two calls of the loop ----------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, state: DecodeState) -> Tree:
        if self.dynamic:
            return self._propose_dynamic(state)
        t0 = time.perf_counter()
        self._arm = None if self.online is None or self.h is None else self.online.pick()
        shape = self.shape if self._arm is None else self.shapes[self._arm]
        if self.h is None or shape.depth == 0:  # nothing to draft from yet (one-token prompt), or n = 0
            self._last = {"nodes": 0}
            self._draft_seconds = time.perf_counter() - t0
            return Tree.root(state.root)
        top = self.drafter.candidates(self.h, shape.depth, shape.width, self.score, self.row_ids)  # (D, s)
        tokens = torch.cat([torch.tensor([state.root], device=top.device), top[shape.node_depth, shape.node_rank]])
        self._last = {"nodes": len(tokens) - 1}
        tree = Tree(tokens, shape.parents.to(top.device))
        self._draft_seconds = time.perf_counter() - t0
        return tree

    def _propose_dynamic(self, state: DecodeState) -> Tree:
        if self.h is None:
            self._last = {"nodes": 0}
            return Tree.root(state.root)
        h, drafter = self.h, self.drafter
        step = dynamic_tree(
            lambda j: drafter.head_top(h, j, self.width, self.score, self.row_ids),
            drafter.confidence,
            self.curve,
            self.head_cost,
            max_budget=self.config.max_budget,
            max_depth=min(self.depth, state.max_depth),
        )
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
        return Tree(tokens, torch.tensor([-1, *step.parents], device=device))

    def update(self, state, tree, acceptance, output) -> None:
        self.h = output.hidden[acceptance.path[-1]]  # (H,) the next step's heads read the last accepted node
        self._last["accepted"] = acceptance.accepted_draft
        if self._arm is not None:  # the step's tokens and seconds (drafting + verify + acceptance) for its arm
            seconds = self._draft_seconds + (state.verify_seconds or 0.0)
            self.online.observe(self._arm, acceptance.accepted_draft + 1, seconds)
            self._last["arm"] = self.online.arms[self._arm].budget

    def info(self) -> dict:
        return dict(self._last)

    def summary(self) -> dict:
        """The tree used: its size, depth and predicted E[L] (with the chosen budget's rate, when auto).
        Dynamic trees: the mean nodes, predicted E[L] and heads run per step."""
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
        if self.online is not None:  # the arms' sums so far (shared by every prompt of this process)
            out["online"] = self.online.to_dict()
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
