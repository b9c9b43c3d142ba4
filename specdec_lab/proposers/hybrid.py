"""A cost-aware hybrid proposer: prompt lookup, Medusa and EAGLE candidates merged into the one tree that pays most.

Each source is best somewhere: prompt lookup drafts for free and is right where the text repeats; the Medusa
heads and an EAGLE drafter guess where it does not, at a price per head or drafter step. Each step this
proposer asks them for candidates, merges them into one token trie (`hybrid_trie`: the same token under the
same parent from two sources is one node), values every node by the probability that its path is accepted,
from each source's acceptance *seen so far in this run*, and verifies the best prefix-closed set of n nodes,
n chosen on the one cost model:

    n* = argmax_n  E[L](n) / (price(n + 1) + drafting),      E[L](n) = 1 + Σ of the n largest values

Sources, cheapest first:
    prompt_lookup  for each n-gram length that matches (longest first) the continuation of its most recent
                   occurrence: up to one chain per length under the root; raw estimate a prior per length,
                   corrected per length by what was accepted (ρ·prior = α̂ per n-gram length)
    recycle        (opt-in) Token Recycling's successor table (`recycle.py`: every verified node's top-k, kept
                   in the call's Memory): the root's top successors, then the best nodes' of every depth,
                   whatever proposed them, so it extends a lookup chain or a head's guess; raw estimate a prior
                   per rank, corrected per rank
    medusa         head j's top-s candidates under the best depth-(j−1) nodes of the trie (whatever proposed
                   them: head j reads the root's hidden state only, and its calibration c_j(p) is conditioned
                   on the path above being right); raw estimate c_j(p), corrected per depth
    eagle          (opt-in: it needs trained weights) EAGLE-2's expanded tree from the drafter's features
                   (`EagleProposer`'s dynamic tree); raw estimate the drafter's p, corrected per depth

A model source runs only where it pays. After the lookup, the proposer plans: it prices the trie as it stands
against the trie plus each alternative's *expected* chains — Medusa alone, EAGLE alone, both — and runs the
best (or none). A source's expected chain has, per depth d, ā_s,d, the acceptance this run has measured for
that source's best candidate (`AcceptanceTracker` per (source, depth); before any evidence, the heads'
calibration and the drafter's held-out accuracy), below the node it would extend, sharing the mass its siblings
leave; its drafting seconds are added (Medusa: measured per head; EAGLE: the moving average of its measured
seconds per step). A long, trusted lookup chain already fills the budget: nothing runs. Where the text does not
repeat the cheaper heads and the better drafter compete on measured rate, so the hybrid follows whichever is
right on this text. Medusa's heads past the first are decided one at a time, each on the candidates the heads
before it actually gave; EAGLE after Medusa is re-priced on the heads' actual candidates. A skipped source is
probed now and then (`draft_length.Probes`) so that its ā follows the text.

The values are calibrated twice: per source and key (ρ, `Calibration`), then the whole tree by κ = accepted
drafts / predicted mass of the trees verified so far (capped at 1). ρ is measured on all of a source's
candidates, but where two sources disagree each is less often right than its ρ says; without κ the trees
were sized on values some 40% above what they delivered (`tree_calibration=False` turns it off).

Exactness. Every sibling set is a function of what came before this step, never of its coins (a lookup, top-s
of heads, EAGLE-2's top-k expansion, the successor table's rows; a token appears once under a parent), so siblings
are "deterministic": greedy acceptance at T = 0, the exact one-hot tree rule when sampling (`accept.tree_rules`).

Per step `info()["accepted_sources"]` names the sources of each accepted draft token along the path
("prompt_lookup", "medusa", "medusa+prompt_lookup", ...); `summary()` counts per source what was drafted,
accepted, run, skipped and probed, and per label the accepted tokens (they sum to the accepted drafts).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..accept.registry import TREE_RULES
from ..eagle import EagleDrafter
from ..medusa.drafter import Drafter
from ..medusa.heads import MedusaHeads
from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .draft_length import AcceptanceTracker, Probes
from .eagle import DEFAULT_WEIGHTS, EagleDecodeConfig, EagleProposer, weights_folder
from .hybrid_trie import Calibration, Trie, best_rate
from .medusa import MedusaDecodeConfig, MedusaProposer
from .prompt_lookup import PromptLookupProposer, ngram_priors
from .recycle import SuccessorTable, fill_from_prompt, table_slot, write_verified

__all__ = ["HybridConfig", "HybridProposer", "SOURCES"]

SOURCES = ("prompt_lookup", "recycle", "medusa", "eagle")  # cheapest first: the order they are asked in
RECYCLE_K = 8  # recycle: successors kept per token (the paper's 8)
RECYCLE_RAW = (0.3, 0.15, 0.1, 0.075)  # recycle's raw estimate per successor rank (ρ per rank corrects it)
TREE_KEY = ("tree",)  # the calibration's key of κ, the whole tree's correction (`_evaluate`)


@dataclass
class HybridConfig:
    sources: tuple | str = param(
        ("prompt_lookup", "medusa"),
        "the candidate sources, any of prompt_lookup, recycle, medusa, eagle (a tuple, or "
        '"prompt_lookup+recycle+medusa"); eagle needs trained weights',
    )
    heads: str | MedusaHeads | Drafter = param("default", 'Medusa heads with a confidence calibration ("default")')
    weights: str | EagleDrafter = param(DEFAULT_WEIGHTS, 'EAGLE drafter folder, an EagleDrafter, or "random"')
    max_budget: int = param(16, "the most nodes a tree may have")
    max_depth: int = param(10, "the deepest node (a lookup chain's longest continuation too)")
    width: int = param(
        4,
        "Medusa: depth-(j-1) nodes that get head j's candidates; EAGLE: top-k per expansion; "
        "recycle: the root's successors, and depth-(d-1) nodes whose successors are added",
    )
    max_ngram: int = param(3, "prompt lookup: longest suffix n-gram matched")
    min_ngram: int = param(1, "prompt lookup: shortest")
    model_memory: float = param(0.9, "Medusa / EAGLE: their per-depth calibration forgets this fast, per step")
    lookup_memory: float = param(0.7, "prompt lookup: its per-length α̂ forgets this fast (matches come and go)")
    tree_calibration: bool = param(True, "scale node values by κ, accepted drafts over predicted (`_evaluate`)")
    adapt_every: int = param(16, "steps between two readings of the cost model's prices")
    probe_every: int = param(16, "a model source skipped this many steps in a row runs anyway (0: never)")
    probe_max: int = param(128, "the wait doubling after each probe that found nothing, up to this")

    def __post_init__(self):
        if isinstance(self.sources, str):
            self.sources = tuple(s for s in self.sources.replace(",", "+").split("+") if s)
        self.sources = tuple(self.sources)
        unknown = [s for s in self.sources if s not in SOURCES]
        if unknown or not self.sources or len(set(self.sources)) != len(self.sources):
            raise ValueError(f"sources must be distinct names among {', '.join(SOURCES)}; got {self.sources!r}")
        if "eagle" in self.sources and isinstance(self.weights, str) and self.weights != "random":
            folder = weights_folder(self.weights)
            if not (folder / "config.json").is_file():
                raise ValueError(
                    f"source 'eagle' needs a trained EAGLE drafter, and there is none at {folder}: train one with "
                    "`python -m specdec_lab.train eagle`, pass weights=<a drafter folder>, or leave eagle out "
                    "of sources"
                )
        if min(self.max_budget, self.max_depth, self.width, self.adapt_every) < 1:
            raise ValueError("max_budget, max_depth, width and adapt_every must be >= 1")
        if not 1 <= self.min_ngram <= self.max_ngram:
            raise ValueError(f"need 1 <= min_ngram <= max_ngram, got {self.min_ngram}, {self.max_ngram}")
        if not (0 < self.model_memory <= 1 and 0 < self.lookup_memory <= 1):
            raise ValueError("model_memory and lookup_memory must be in (0, 1]")
        Probes(self.probe_every, self.probe_max)  # validates the probe schedule


class HybridProposer(Proposer):
    name = "hybrid"
    accept_rules = TREE_RULES  # deterministic siblings: greedy, or the exact one-hot rule when sampling

    def __init__(self, config: HybridConfig | None = None, **kwargs):
        self.config = cfg = config or HybridConfig(**kwargs)
        self.lookup = PromptLookupProposer(max_ngram=cfg.max_ngram, min_ngram=cfg.min_ngram, max_draft=cfg.max_depth)
        self.table: SuccessorTable | None = None  # recycle: the successor table (`start`, from the call's Memory)
        self.medusa = self.eagle = None
        if "medusa" in cfg.sources:
            self.medusa = MedusaProposer(MedusaDecodeConfig(heads=cfg.heads, tree="dynamic", max_budget=cfg.max_budget))
        if "eagle" in cfg.sources:
            self.eagle = EagleProposer(EagleDecodeConfig(weights=cfg.weights, tree="dynamic", max_budget=cfg.max_budget,
                                                         width=cfg.width, max_draft=cfg.max_depth))  # fmt: skip
            self.feature_layers = self.eagle.feature_layers  # model -> the target layers the drafter reads
        self.priors = ngram_priors(cfg.min_ngram, cfg.max_ngram)  # the lookup's prior α per matched n-gram length
        self.probes = {s: Probes(cfg.probe_every, cfg.probe_max) for s in ("medusa", "eagle")}
        self.tree_probes = Probes(cfg.probe_every, cfg.probe_max)  # nothing pays: verify the best node anyway
        self.counts = {s: {"run": 0, "skipped": 0, "probes": 0, "drafted": 0, "accepted": 0} for s in cfg.sources}
        self.by_label: dict[str, int] = {}  # "medusa+prompt_lookup" -> accepted tokens (exclusive)
        self.plans: dict[str, int] = {}  # "medusa+eagle" -> steps the plan chose those model sources
        self._kappa = 1.0  # the tree's correction of this step's values (`_evaluate`)
        self._planned = "none"  # this step's plan ("medusa", "eagle", "medusa+eagle", "none")
        self.totals = {"steps": 0, "nodes": 0, "expected": 0.0, "accepted": 0}
        self.steps = 0
        self.calibration: Calibration | None = None  # `start`: from the call's Memory
        self.top: AcceptanceTracker | None = None
        self._ran: list[str] = []  # the sources run this step
        self._last: dict = {}

    # ---- setup ------------------------------------------------------------------------------------
    def start(self, state: DecodeState, prompt=None) -> None:
        cfg = self.config
        self.lookup.start(state, prompt)
        if "recycle" in cfg.sources:
            self.table = table_slot(state, RECYCLE_K)["table"]
            fill_from_prompt(self.table, state, prompt, "logits")
        priors = {}  # (source, depth) -> ā before any evidence
        if self.medusa is not None:
            self.medusa.start(state, prompt)
            d = self.medusa.drafter
            self.head_seconds = d.head_seconds.get(1, 0.0)  # one head alone (heads run one at a time)
            # ā before any evidence: the calibration's conditional top-1 accuracy per head (0.3 without one)
            acc = d.accuracies.conditional if d.accuracies is not None else None
            priors = {("medusa", j + 1): float(acc[j, 0]) if acc is not None and j < acc.shape[0] else 0.3
                             for j in range(d.heads.num_heads)}  # fmt: skip
        if self.eagle is not None:
            self.eagle.start(state, prompt)
            acc = self.eagle.drafter.heldout_accuracy  # the trainer's held-out top-1 per draft position
            priors |= {("eagle", j + 1): float(acc[min(j, len(acc) - 1)]) if acc else 0.3
                              for j in range(cfg.max_depth)}  # fmt: skip
        # What this run learns, in the call's Memory (carried across calls only when the caller passes one)
        slot = state.memory.slot("hybrid")
        self.calibration = slot.setdefault("calibration", Calibration({"prompt_lookup": cfg.lookup_memory,
                                                                      "recycle": cfg.lookup_memory,
                                                                      "medusa": cfg.model_memory,
                                                                      "eagle": cfg.model_memory,
                                                                      TREE_KEY[0]: cfg.model_memory}))  # fmt: skip
        self.top = slot.setdefault("top", AcceptanceTracker(prior=0.3, decay=cfg.model_memory,
                                                            priors=priors))  # fmt: skip
        # EAGLE's measured seconds per run (the last few): before any, three drafter steps
        first = [3 * self.eagle.drafter.step_seconds] if self.eagle is not None else []
        self.eagle_seconds = slot.setdefault("eagle_seconds", first)
        state.cost.prepare(cfg.max_budget + 1, tree=True)
        state.cost.prepare(cfg.max_budget + 1, tree=False)
        self.cost = state.cost

    def _evaluate(self, trie: Trie) -> None:
        """Node values, per-key calibrated, times κ: accepted drafts over the predicted mass of the trees verified
        (`TREE_KEY` in the calibration). Each source's ρ is measured on all its candidates, but two sources that
        disagree are each less often right than their ρ says; κ takes the tree's residual optimism out, so
        its size and the plan's choices are priced on honest values (the ranking is unchanged)."""
        self._kappa = min(self.calibration.factor(TREE_KEY), 1.0) if self.config.tree_calibration else 1.0
        trie.evaluate(self.calibration, self._kappa)

    def _eagle_mean(self) -> float:
        """EAGLE's drafting seconds per run: the mean of the last few measured (`eagle_seconds`)."""
        return sum(self.eagle_seconds) / len(self.eagle_seconds)

    def _prices(self) -> None:
        n = self.config.max_budget + 1
        self.chain_price = [self.cost.step(k, tree=False) for k in range(1, n + 1)]  # index n: n + 1 tokens
        self.tree_price = [self.cost.step(k, tree=True) for k in range(1, n + 1)]

    # ---- propose ----------------------------------------------------------------------------------
    def _expected_chain(self, trie: Trie, source: str, anchor: int, first: int, depths: int,
                        planned: float = 0.0) -> list[float]:  # fmt: skip
        """Values of `source`'s expected chain of `depths` nodes below `anchor` (its first at depth `first`):
        ā per depth, the first sharing what the anchor's children leave (and `planned`, the value another
        source's expected first node would take there)."""
        taken = sum(trie.nodes[k].value for k in trie.children[anchor]) + planned
        taken /= max(trie.nodes[anchor].value, 1e-12)
        v = trie.nodes[anchor].value * max(0.0, min(self.top.alpha((source, first)), 1.0 - taken))
        out = [v]
        for d in range(first + 1, first + depths):
            v *= self.top.alpha((source, d))
            out.append(v)
        return out

    def _pays(self, trie: Trie, source: str, values: list[float], drafting: float, extra: float) -> bool:
        """Would adding `values` for `extra` more seconds of drafting beat the trie as it is?"""
        cfg, now = self.config, [trie.nodes[u].value for u in range(1, len(trie.nodes))]
        without = best_rate(now, self.tree_price, drafting, cfg.max_budget)
        return best_rate(now + values, self.tree_price, drafting + extra, cfg.max_budget) > without

    def _plan(self, trie: Trie, state: DecodeState, max_depth: int) -> dict[str, bool]:
        """Which model sources pay this step: the subset (none, Medusa, EAGLE, both) whose expected chains below
        the root give the most accepted tokens per second on the trie as it stands (the lookup's chains), each
        source at its measured drafting seconds. Medusa's chain is priced at its best number of heads; with
        both, EAGLE's first node shares what Medusa's leaves (their top guesses mostly agree)."""
        cfg = self.config
        self._evaluate(trie)
        now = [trie.nodes[u].value for u in range(1, len(trie.nodes))]

        def rate(values: list[float], seconds: float) -> float:
            return best_rate(now + values, self.tree_price, seconds, cfg.max_budget)

        options = {(): rate([], 0.0)}
        heads = min(self.medusa.drafter.heads.num_heads, max_depth) if self.medusa is not None else 0
        medusa = [self._expected_chain(trie, "medusa", 0, 1, m) for m in range(1, heads + 1)]
        if medusa:
            options["medusa",] = max(rate(v, m * self.head_seconds) for m, v in enumerate(medusa, start=1))
        if self.eagle is not None and state.cache_length > self.eagle.seen:
            seconds = self._eagle_mean()
            depths = min(cfg.max_depth, state.max_depth)
            options["eagle",] = rate(self._expected_chain(trie, "eagle", 0, 1, depths), seconds)
            if medusa:
                options["medusa", "eagle"] = max(
                    rate(v + self._expected_chain(trie, "eagle", 0, 1, depths, planned=v[0]),
                         m * self.head_seconds + seconds) for m, v in enumerate(medusa, start=1))  # fmt: skip
        best = max(options, key=options.get)  # ties: the first, i.e. the fewest sources
        self._planned = label = "+".join(best) or "none"
        self.plans[label] = self.plans.get(label, 0) + 1
        return {s: s in best for s in ("medusa", "eagle")}

    def _decide(self, source: str, pays: bool) -> bool:
        """Run `source` when it pays, or as a probe after a skipped stretch (`Probes`)."""
        probes, count = self.probes[source], self.counts[source]
        if pays:
            probes.drafting()
        elif not probes.idle_step():
            count["skipped"] += 1
            return False
        count["run"] += 1
        count["probes"] += probes.probing
        self._ran.append(source)
        return True

    def _add_lookup(self, trie: Trie, tokens: list[int], max_depth: int) -> None:
        seen = set()
        for m, chain in self.lookup.matches(tokens):  # every matching length: shorter ones may continue differently
            cont = tuple(chain[:max_depth])
            if cont and cont not in seen:
                seen.add(cont)
                trie.add_chain(cont, "prompt_lookup", ("prompt_lookup", m), self.priors[m])

    def _add_recycle(self, trie: Trie, max_depth: int) -> None:
        """The successor table's walk (`recycle.py`), below the root and below the best nodes of every depth
        whatever proposed them (it extends a lookup chain or a head's guess too): the root's top-`width`
        successors, then the top-2 successors of the `width` most valuable nodes at each depth; raw estimate per
        rank (`RECYCLE_RAW`), corrected per rank by what was accepted (ρ)."""
        width, layer = self.config.width, [0]
        for d in range(1, max_depth + 1):
            rows = self.table.rows([trie.nodes[u].token for u in layer])
            grown = False
            for u, row in zip(layer, rows, strict=True):
                for r, tok in enumerate((row or [])[: width if d == 1 else 2]):
                    rank = min(r, len(RECYCLE_RAW) - 1)
                    trie.add(u, tok, "recycle", ("recycle", rank), RECYCLE_RAW[rank], top=r == 0)
                    grown = True
            if not grown or d == max_depth:
                break
            self._evaluate(trie)
            layer = [u for u in trie.ranked() if trie.nodes[u].depth == d][:width]

    def _add_medusa(self, trie: Trie, state: DecodeState, max_depth: int, planned: bool) -> float:
        """Head 1 when the plan says Medusa pays (or as a probe); the next heads one at a time while the next
        one's expected chain pays; -> seconds spent."""
        med, cfg, spent = self.medusa, self.config, 0.0
        if med.h is None:
            return 0.0
        heads = min(med.drafter.heads.num_heads, max_depth)
        for j in range(heads):  # head j (0-based) proposes depth j + 1
            self._evaluate(trie)
            anchor = trie.best(j)
            if anchor is None:
                break
            if j == 0:
                if not self._decide("medusa", planned):
                    return 0.0
            elif not any(self._pays(trie, "medusa", self._expected_chain(trie, "medusa", anchor, j + 1, m), spent,
                                    m * self.head_seconds) for m in range(1, heads - j + 1)):  # fmt: skip
                break
            t0 = time.perf_counter()
            probs, tokens = med.drafter.head_top(med.h, j, med.width, med.score, med.row_ids)
            conf = med.drafter.confidence.values(j, probs)
            spent += time.perf_counter() - t0
            below = [u for u in trie.ranked() if trie.nodes[u].depth == j][: cfg.width] if j else [0]
            for u in below:
                for r, (c, tok) in enumerate(zip(conf, tokens, strict=True)):
                    trie.add(u, int(tok), "medusa", ("medusa", j + 1), c, top=r == 0)
        return spent

    def _add_eagle(self, trie: Trie, state: DecodeState, drafting: float, planned: bool) -> float:
        """EAGLE's tree when the plan says it pays — re-priced on the heads' actual candidates when Medusa ran
        first — or as a probe; -> seconds spent."""
        depths = min(self.config.max_depth, state.max_depth)
        if planned and "medusa" in self._ran:
            self._evaluate(trie)
            planned = self._pays(trie, "eagle", self._expected_chain(trie, "eagle", 0, 1, depths), drafting,
                                 self._eagle_mean())  # fmt: skip
        if state.cache_length == self.eagle.seen or not self._decide("eagle", planned):
            return 0.0
        t0 = time.perf_counter()
        self.eagle.propose(state)  # EAGLE-2's expansion: its cache holds the expanded nodes until `update`
        spent = time.perf_counter() - t0
        self.eagle_seconds[:] = (self.eagle_seconds + [spent])[-8:]
        tok, par, dep, _ = self.eagle.expanded
        at, first = {0: 0}, set()
        for u in range(1, len(tok)):
            if dep[u] > depths:
                continue
            top = par[u] not in first  # the first child of a parent is its top-1
            first.add(par[u])
            at[u] = trie.add(at[par[u]], tok[u], "eagle", ("eagle", dep[u]), self.eagle.expanded_probs[u], top=top)
        return spent

    @torch.inference_mode()
    def propose(self, state: DecodeState) -> Tree:
        cfg = self.config
        if self.steps % cfg.adapt_every == 0:
            self._prices()
        self.steps += 1
        max_depth = min(cfg.max_depth, state.max_depth)
        trie = Trie(state.root)
        self._ran = run = []
        self._planned = "none"
        drafting = 0.0
        if max_depth >= 1:
            if "prompt_lookup" in cfg.sources:
                self._add_lookup(trie, state.tokens, max_depth)
                run.append("prompt_lookup")
                self.counts["prompt_lookup"]["run"] += 1
            if self.table is not None:
                self._add_recycle(trie, max_depth)
                run.append("recycle")
                self.counts["recycle"]["run"] += 1
            plan = self._plan(trie, state, max_depth)  # which model sources pay, priced before running any
            if self.medusa is not None:
                drafting += self._add_medusa(trie, state, max_depth, plan["medusa"])
                state.cost.note(drafting)  # the heads' seconds: priced in the choice, not loop overhead
            if self.eagle is not None:
                drafting += self._add_eagle(trie, state, drafting, plan["eagle"])  # (EAGLE notes its own)
        self._evaluate(trie)
        kept, expected, _ = trie.choose(self.chain_price, self.tree_price, drafting, cfg.max_budget, max_depth)
        if kept:
            self.tree_probes.drafting()
        elif len(trie) and self.tree_probes.idle_step():  # nothing pays: the best node, to keep learning
            kept = [trie.ranked()[0]]
            expected += trie.nodes[kept[0]].value
        for s in ("medusa", "eagle"):  # a probed source gets its best node verified, or it learns nothing
            if s in self._ran and self.probes[s].probing and not any(s in trie.nodes[u].raw for u in kept):
                mine = [u for u in trie.ranked() if s in trie.nodes[u].raw and trie.nodes[u].depth == 1]
                kept = sorted(kept + mine[:1])
        self._trie, self._kept = trie, kept
        self._last = {"nodes": len(kept), "candidates": len(trie), "expected_length": round(expected, 3),
                      "run": run, "plan": self._planned, "probe": self.tree_probes.probing}  # fmt: skip
        self.totals["steps"] += 1
        self.totals["nodes"] += len(kept)
        self.totals["expected"] += expected
        if not kept:
            return Tree.root(state.root, device=state.device)
        index = {0: 0} | {u: i for i, u in enumerate(kept, start=1)}
        tokens = [state.root] + [trie.nodes[u].token for u in kept]
        parents = [-1] + [index[trie.nodes[u].parent] for u in kept]
        return Tree(torch.tensor(tokens, device=state.device), torch.tensor(parents, device=state.device),
                    sibling_draw="deterministic")  # fmt: skip

    # ---- update -----------------------------------------------------------------------------------
    def update(self, state, tree, acceptance, output) -> None:
        if self.table is not None:
            write_verified(self.table, tree, acceptance.path, output.logits)
        if self.medusa is not None:
            self.medusa.update(state, tree, acceptance, output)
        if self.eagle is not None:
            self.eagle.update(state, tree, acceptance, output)
        trie, kept, path = self._trie, self._kept, acceptance.path
        on_path, parents = set(path), tree.parents.tolist()
        observations = []
        for i, u in enumerate(kept[: len(tree) - 1], start=1):
            node = trie.nodes[u]
            if parents[i] not in on_path:
                continue  # its parent was rejected: the node says nothing about its own estimate
            accepted = i in on_path
            for source, (key, raw) in node.raw.items():
                observations.append((key, raw, accepted))
                if source in node.top and source != "prompt_lookup":
                    self.top.observe((source, node.depth), 1, int(accepted))
        verified = [trie.nodes[u].value for u in kept[: len(tree) - 1]]
        observations.append((TREE_KEY, sum(verified) / max(self._kappa, 1e-9), len(path) - 1))  # unscaled mass
        self.calibration.observe(observations)
        labels = [trie.nodes[kept[i - 1]].label for i in path[1:]]
        for i in range(1, len(tree)):
            for source in trie.nodes[kept[i - 1]].raw:
                self.counts[source]["drafted"] += 1
        for i in path[1:]:
            for source in trie.nodes[kept[i - 1]].raw:
                self.counts[source]["accepted"] += 1
        for label in labels:
            self.by_label[label] = self.by_label.get(label, 0) + 1
        self.totals["accepted"] += len(labels)
        for s in ("medusa", "eagle"):
            if s in self._ran and self.probes[s].probing:
                self.probes[s].outcome(any(s in trie.nodes[kept[i - 1]].raw for i in path[1:]))
        if self.tree_probes.probing:
            self.tree_probes.outcome(len(path) > 1)
        self._last["accepted_sources"] = labels

    def info(self) -> dict:
        return dict(self._last)

    def summary(self) -> dict:
        """Mean nodes and predicted E[L] per step; per source: steps run (probes among them), skipped, draft
        tokens it proposed and those accepted (a token two sources proposed counts for both); `accepted_by`:
        accepted draft tokens per label (each token once: they sum to the accepted drafts); `calibration`: ρ
        per source and key, `alpha_top`: ā of each model source's best candidate per depth; `plans`: steps per
        set of model sources the plan chose to run (probes aside)."""
        t = self.totals
        steps = max(t["steps"], 1)
        return {"steps": t["steps"], "nodes": round(t["nodes"] / steps, 3),
                "expected_length": round(t["expected"] / steps, 3), "accepted": t["accepted"],
                "sources": {s: dict(c) for s, c in self.counts.items()}, "accepted_by": dict(self.by_label),
                "calibration": self.calibration.summary() if self.calibration is not None else {},
                "alpha_top": self.top.summary() if self.top is not None else {}, "plans": dict(self.plans)}  # fmt: skip
