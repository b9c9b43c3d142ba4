"""EAGLE decoding (Li et al. 2024, 2025): a one-layer drafter chains draft tokens from the target's own features.

The drafter (`specdec_lab.eagle`) at position t reads the target's features f_t and the next token x_{t+1},
and predicts x_{t+2}; its output stands in for the features at t + 1 while it drafts on. The features come
from the loop's own forwards (`feature_layers`: the prefill, then every verify), never a second target call.

With m committed tokens before the root x_m (the target's cache holds 0..m-1):

    propose:  ONE drafter forward over the positions it has not seen, seen..m-1, each with the target's TRUE
              features and the token after it (x_{t+1}; the last one pairs f_{m-1} with the root) -> d_1;
              then k − 1 single steps at positions m, m+1, ... on its own outputs: (h_{m-1}, d_1) -> d_2, ...
    update:   keep the drafter's entries of the true-feature positions (seen..m-1) and drop those of the draft
              steps (made from its own outputs, not the target's features); the target's features of the
              root and the accepted path (`TreeOutput.features[path]`) are the next propose's positions
              m..m+a, paired with the accepted drafts and the bonus token

so after every step the drafter's cache equals a fresh forward over the committed tokens with the target's
true features (EAGLE's `stable_kv`), whatever was accepted. k is the chain length of `ChainSizing` (cost
mode on the one cost model with the drafter's measured step time); backed off (k = 0) the drafter does not
run, the features of each step wait, and the next draft's first forward feeds them all.

Sampling: q is the drafter's distribution with the -inf outside its vocabulary (`EagleDrafter.target_logits`)
warped like the target's p, so chain speculative sampling stays exact. Greedy needs only the argmax of the
drafting vocabulary's logits (the same token).

Dynamic trees (`tree="dynamic"`, EAGLE-2): after the same first forward, the drafter expands the best nodes
level by level — one drafter forward per level over the chosen nodes, tree attention among their draft
entries — each node's value the product of the drafter's probabilities along its path, and the tree keeps the
n best nodes with n sized on the one cost model (`trees.expand`). The draft entries are dropped in `update`
as a chain's are. Siblings are the drafter's top candidates, a function of the path (deterministic), so
sampling on these trees is exact with the one-hot rule (`accept.tree_rules`, picked by `accept="exact"`).

Weights: `weights` names a folder (`data/eagle/smollm2-135m` by default, trained by `python -m
specdec_lab.train eagle`), an `EagleDrafter`, or "random" (an untrained drafter: tests only).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from pathlib import Path

import torch

from ..accept.registry import CHAIN_RULES, TREE_RULES
from ..eagle import SHIPPED_DIR, TRAIN_COMMAND, VARIANTS, EagleDrafter, load_drafter, random_drafter
from ..models.fast_linear import match_linear
from ..sampling import warp_probs
from ..trees import expanded_tree
from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .chain_sizing import ChainLengthConfig, ChainSizing

__all__ = ["EagleDecodeConfig", "EagleProposer", "get_eagle_drafter", "weights_folder"]

DEFAULT_WEIGHTS = "data/eagle/smollm2-135m"


@dataclass
class EagleDecodeConfig(ChainLengthConfig):
    weights: str | EagleDrafter = param(
        DEFAULT_WEIGHTS,
        f'a drafter folder (trained by `{TRAIN_COMMAND}`), an EagleDrafter, or "random" (untrained: tests only)',
    )
    variant: str = param("eagle3", '"eagle3" (three target layers) or "eagle1" (the last): weights="random" only')
    tree: str = param(
        "chain",
        '"chain": one chain of draft_length tokens; "dynamic": EAGLE-2\'s tree from the drafter\'s confidence, '
        "sized on the cost model",
    )
    max_budget: int = param(16, '"dynamic": the most nodes a tree may have (its depth is at most max_draft)')
    width: int = param(4, '"dynamic": children per expanded node, and nodes expanded per level (EAGLE-2\'s top-k)')
    adapt_every: int = param(16, '"dynamic": steps between two readings of the cost model\'s prices')

    def __post_init__(self):
        super().__post_init__()
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.tree not in ("chain", "dynamic"):
            raise ValueError(f"tree must be 'chain' or 'dynamic', got {self.tree!r}")
        if self.max_budget < 1 or self.width < 1 or self.adapt_every < 1:
            raise ValueError(f"max_budget, width and adapt_every must be >= 1, got {self.max_budget}, "
                             f"{self.width}, {self.adapt_every}")  # fmt: skip


# target -> {weights argument: drafter}; weakly keyed (a freed target's drafters go with it)
_DRAFTERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def weights_folder(weights: str) -> Path:
    """The folder `weights` names: as given (or relative to the working directory), else relative to the
    repository (so the default works from notebooks/)."""
    path = Path(weights).expanduser()
    if path.is_absolute() or path.is_dir():
        return path
    return SHIPPED_DIR.parents[1] / weights


def get_eagle_drafter(weights: str | EagleDrafter, target, variant: str = "eagle3") -> EagleDrafter:
    """Resolve a weights argument for `target`, once per process: the target's linear kernels, its step time
    measured on first use (`EagleProposer`)."""
    if isinstance(weights, EagleDrafter):
        return weights
    key = f"random:{variant}" if weights == "random" else str(weights)
    loaded = _DRAFTERS.setdefault(target, {})
    if key not in loaded:
        if weights == "random":
            drafter = random_drafter(target, variant)
        else:
            folder = weights_folder(str(weights))
            if not (folder / "config.json").is_file():
                raise FileNotFoundError(
                    f"no EAGLE drafter at {folder}: train one with `{TRAIN_COMMAND}` (it writes that folder), or "
                    f"pass weights=<a drafter folder>; weights='random' gives an untrained drafter (tests only)"
                )
            drafter = load_drafter(folder, target)
        loaded[key] = match_linear(drafter, target)
    return loaded[key]


class EagleProposer(Proposer):
    name = "eagle"

    def __init__(self, config: EagleDecodeConfig | None = None, **kwargs):
        self.config = config or EagleDecodeConfig(**kwargs)
        self.sizing = ChainSizing(self.config)
        self.drafter: EagleDrafter | None = None
        self.cache = None
        self.seen = 0  # drafter positions 0..seen-1 hold true-feature K/V (committed in its cache)
        self.pending: list[torch.Tensor] = []  # target features of positions seen.., not yet fed: (n_i, F, H)
        self.fed = 0  # positions this step's first forward fed (committed by `update`)
        self.dynamic = self.config.tree == "dynamic"
        self.accept_rules = TREE_RULES if self.dynamic else CHAIN_RULES
        self.prices: list[float] = []  # dynamic: price(n) for n = 1..max_budget+1, refreshed every adapt_every
        self.tree_counts = {"steps": 0, "nodes": 0, "expected": 0.0, "levels": 0}
        self._tree_last: dict = {}

    @property
    def length(self):
        """The chain-length rule (`draft_length.DraftLength`), as on every chain proposer."""
        return self.sizing.length

    @length.setter
    def length(self, value) -> None:
        self.sizing.length = value

    def feature_layers(self, model) -> tuple[int, ...]:
        """The target layers this drafter reads (the loop asks before its prefill: `verify.check_feature_layers`);
        they depend on the drafter's checkpoint and the target's depth, so the drafter is resolved here."""
        return get_eagle_drafter(self.config.weights, model, self.config.variant).config.feature_layers

    # ---- setup ------------------------------------------------------------------------------------
    def start(self, state: DecodeState, prompt=None) -> None:
        self.drafter = get_eagle_drafter(self.config.weights, state.model, self.config.variant)
        device = self.drafter.lm_head.weight.device
        self.cache = self.drafter.new_cache(capacity=len(state.tokens) + 256)
        self.seen, self.fed = 0, 0
        # Features of the prompt but its last token (the root): positions 0..n-2, each paired with the next token.
        self.pending = [prompt.features.to(device)] if prompt is not None and prompt.features is not None else []
        if self.drafter.step_seconds is None:  # a fact about the machine: measured once
            self.drafter.step_seconds = self._step_seconds()
        self.sizing.start(state, f"eagle:{self.config.weights if isinstance(self.config.weights, str) else 'drafter'}",
                          self.drafter.step_seconds)  # fmt: skip
        if self.dynamic:
            state.cost.prepare(self.config.max_budget + 1, tree=True)
        self.steps = 0

    @torch.inference_mode()
    def _step_seconds(self, repeats: int = 7, warmup: int = 3) -> float:
        """Median seconds of one single-position draft step (layer + drafting-vocabulary head), empty cache."""
        d = self.drafter
        h = torch.zeros(1, d.config.hidden_size, device=d.lm_head.weight.device, dtype=d.lm_head.weight.dtype)
        ids, pos = torch.zeros(1, dtype=torch.long, device=h.device), torch.zeros(1, dtype=torch.long)
        times = []
        for _ in range(repeats + warmup):
            t0 = time.perf_counter()
            d.logits(d(h, ids, pos, self.cache)[-1]).argmax()
            times.append(time.perf_counter() - t0)
            self.cache.rollback()
        return sorted(times[warmup:])[len(times[warmup:]) // 2]

    # ---- the two calls of the loop ----------------------------------------------------------------
    def _pick(self, h: torch.Tensor, state: DecodeState) -> tuple[int, torch.Tensor | None]:
        """(target token, its q (V,) or None when greedy) from the drafter's output h (H,)."""
        if state.sampling.greedy:
            return int(self.drafter.to_target(self.drafter.logits(h).argmax())), None
        q = warp_probs(self.drafter.target_logits(h), state.sampling)  # (V,) zero outside the drafting vocabulary
        return int(torch.multinomial(q, 1, generator=state.generator)), q

    def _catch_up(self, state: DecodeState) -> torch.Tensor:
        """Feed every position the drafter has not seen (seen..m-1: true features, next tokens) in one forward;
        -> (H,) its output at m-1, which predicts the token after the root."""
        d, m = self.drafter, state.cache_length
        device = d.lm_head.weight.device
        features = torch.cat(self.pending) if len(self.pending) > 1 else self.pending[0]  # (fed, F, H)
        self.fed = m - self.seen
        assert len(features) == self.fed, f"{len(features)} pending features for {self.fed} positions"
        ids = torch.tensor(state.tokens[self.seen + 1 : m + 1], device=device)  # (fed,) x_{t+1} for t = seen..m-1
        return d(d.fuse(features), ids, torch.arange(self.seen, m), self.cache)[-1]

    @torch.inference_mode()
    def propose(self, state: DecodeState) -> Tree:
        self.fed = 0
        m = state.cache_length  # the root x_m; features are known for positions 0..m-1
        fed = m - self.seen  # positions the first drafter forward feeds
        if fed == 0:  # nothing to draft from yet (a one-token prompt's first step): a plain step
            return Tree.root(state.root)
        if self.dynamic:
            return self._propose_tree(state)
        k = self.sizing.choose(state, fed)
        if k == 0:  # backed off
            return Tree.root(state.root)
        d = self.drafter
        device = d.lm_head.weight.device
        drafts: list[int] = []
        q_rows: list[torch.Tensor] = []
        seconds: list[float] = []  # (k,) wall time of each draft token
        t0 = time.perf_counter()
        h = self._catch_up(state)  # (H,) output at m-1
        for j in range(k):
            if j:
                t0 = time.perf_counter()
                tok = torch.tensor([drafts[-1]], device=device)
                h = d(h[None], tok, torch.tensor([m + j - 1]), self.cache)[0]  # (h_{m+j-2}, d_j) at m+j-1
            token, q = self._pick(h, state)
            drafts.append(token)
            if q is not None:
                q_rows.append(q)
            seconds.append(time.perf_counter() - t0)
        self.sizing.drafted(state, seconds, fed)
        probs = None
        if q_rows:  # (k+1, V), row 0 (the root) unused
            probs = torch.cat([torch.zeros_like(q_rows[0])[None], torch.stack(q_rows)])
        return Tree.chain(state.root, drafts, draft_probs=probs, device=device)

    def _propose_tree(self, state: DecodeState) -> Tree:
        """EAGLE-2's dynamic tree (module docstring): expand the best nodes level by level, keep the n best."""
        cfg, d, m = self.config, self.drafter, state.cache_length
        if self.steps % cfg.adapt_every == 0:
            self.prices = [state.cost.step(n, tree=True) for n in range(1, cfg.max_budget + 2)]
        self.steps += 1
        t0 = time.perf_counter()
        outs = {0: self._catch_up(state)}  # node -> the drafter's output there (root: its output at m-1)
        base = self.cache.get_seq_length()  # = m: the true-feature entries every node sees
        slots: dict[int, int] = {}  # node -> its drafter cache entry (expanded nodes)
        tok, par, dep = [0], [-1], [0]  # per node (0 = root): token, parent, depth
        prob = [1.0]  # per node: the drafter's probability of its token given its parent (a hybrid's values)

        def expand(level: list[int]):
            if level != [0]:
                start, n = self.cache.get_seq_length(), len(level)
                allowed = torch.zeros(n, start + n, dtype=torch.bool)
                allowed[:, :base] = True
                for r, u in enumerate(level):
                    w = par[u]
                    while w > 0:  # the ancestors' draft entries (each was expanded to make its child)
                        allowed[r, slots[w]] = True
                        w = par[w]
                    allowed[r, start + r] = True
                hidden = torch.stack([outs[par[u]] for u in level])  # (n, H) the parents' outputs
                ids = torch.tensor([tok[u] for u in level], device=hidden.device)
                positions = torch.tensor([m + dep[u] - 1 for u in level])  # a depth-j node sits at m + j − 1
                hs = d(hidden, ids, positions, self.cache, allowed)  # (n, H)
                for r, u in enumerate(level):
                    outs[u], slots[u] = hs[r], start + r
            top = d.logits(torch.stack([outs[u] for u in level])).float().softmax(-1).topk(cfg.width)  # (n, width)
            children = []
            for r, u in enumerate(level):
                targets = d.to_target(top.indices[r]).tolist()
                tok.extend(targets)
                prob.extend(top.values[r].tolist())
                par.extend([u] * len(targets))
                dep.extend([dep[u] + 1] * len(targets))
                children.append((top.values[r].tolist(), targets))
            return children

        self.expanded = (tok, par, dep, outs)  # the step's expanded tree: what a figure (or a test) reads
        self.expanded_probs = prob
        step = expanded_tree(expand, self.prices, lambda calls: calls * d.step_seconds, cfg.max_budget,
                             min(cfg.max_draft, state.max_depth), cfg.width)  # fmt: skip
        state.cost.note(time.perf_counter() - t0)
        n = len(step.tokens)
        self._tree_last = {"nodes": n, "expected_length": round(step.expected_length, 3), "levels": step.heads_run}
        c = self.tree_counts
        c["steps"] += 1
        c["nodes"] += n
        c["expected"] += step.expected_length
        c["levels"] += step.heads_run
        if n == 0:
            return Tree.root(state.root)
        device = d.lm_head.weight.device
        tokens = torch.tensor([state.root, *step.tokens], device=device)  # (n+1,)
        return Tree(tokens, torch.tensor([-1, *step.parents], device=device))

    def update(self, state, tree, acceptance, output) -> None:
        features = output.features[acceptance.path]  # (a+1, F, H) the root's and the accepted drafts' true features
        if self.fed:
            # Written: the fed true-feature positions, then draft entries (a chain's k − 1 steps, a tree's
            # expanded nodes). Keep the first, drop the rest.
            self.cache.keep(list(range(self.fed)))
            self.seen += self.fed
            self.pending, self.fed = [], 0
        self.pending.append(features)  # nothing fed (backed off, no tree): the features wait with the others
        k = len(tree) - 1
        if self.dynamic:
            self._tree_last["accepted"] = acceptance.accepted_draft
        elif k:
            self.sizing.observe(k, acceptance.accepted_draft)

    def info(self) -> dict:
        return dict(self._tree_last) if self.dynamic else dict(self.sizing.last)

    def summary(self) -> dict:
        """Chains: `ChainSizing.summary`. Dynamic trees: the mean nodes, predicted E[L] and levels per step."""
        if not self.dynamic:
            return self.sizing.summary()
        c = self.tree_counts
        steps = max(c["steps"], 1)
        return {"tree": "dynamic", "steps": c["steps"], "nodes": round(c["nodes"] / steps, 3),
                "expected_length": round(c["expected"] / steps, 3),
                "levels": round(c["levels"] / steps, 3)}  # fmt: skip
