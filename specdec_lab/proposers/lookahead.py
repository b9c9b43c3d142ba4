"""Lookahead decoding (Fu et al. 2024, "Break the Sequential Dependency of LLM Inference Using Lookahead
Decoding"; reference code hao-ai-lab/LookaheadDecoding, lade/decoding.py and lade/models/llama.py).

Jacobi iteration (jacobi.py) makes good n-grams even where its guesses do not converge in place: a guess
that is wrong here is often a fine continuation of its own context, and contexts recur. Lookahead decoding
keeps the last N − 1 Jacobi iterates as a 2D window, harvests its columns as n-grams into a pool, and
verifies the pool's n-grams that start with the current token, in the same forward that advances the window:

    tree = [ root | lookahead branch: (N − 1) x W window (the root is its first cell), never accepted
                  | verification branch: <= G n-grams from the pool ]

The window. Level (row) l, column i holds a guess for the token at offset l + i after the root (level 0,
column 0 IS the root). In LADE (`j_make_causal_mask_multilevel`, `jforward_multilevel`) cell (l, i) attends
to level 0's columns 0..i and to column i of levels 1..l, at position cache_length + l + i. That is a tree:
give cell (0, i) the parent (0, i − 1) and cell (l, i) the parent (l − 1, i), a comb whose spine is level 0,
and its ancestors are exactly those cells, its depth exactly l + i. So the window is a set of non-candidate
nodes of an ordinary `Tree` (cell (l, i) = node l·C + i for C columns), verified by the one `verify_tree` of
every method, never accepted, and its K/V dropped by the loop's `keep`:

    W = 4, N = 3        tokens                offsets (= depth)      parents
    level 0:            root  a1  a2  a3      0  1  2  3             -  0  1  2
    level 1:            b0    b1  b2  b3      1  2  3  4             0  1  2  3

After the forward, the argmax at cell (N − 2, i) of the last level predicts offset N − 1 + i (one Jacobi
step down the column). Column i then reads tok(0, i), tok(1, i), ..., tok(N − 2, i), pred_i: N consecutive
tokens, an n-gram for the pool keyed by its first token. Then the window slides by one (LADE's
ALWAYS_FWD_ONE, whatever was accepted): level 0 becomes level 1 without its column 0 (the next root takes
that place), every level moves up one, and the predictions become the last level. A new window starts as
one level of W + N − 3 tokens copied from the prompt at random and fills over N − 2 warm-up steps (each
drops a column and adds the predictions as a level); nothing is harvested until it is full.

The pool: per first token at most G n-grams (the N − 1 tokens after it), least recently added first and
refreshed when added again (LADE's GUESS_SET_SIZE). `pool_from_prompt` seeds it with the prompt's n-grams
and adds the output's as it grows (LADE's POOL_FROM_PROMPT). The verification branch is the root's n-grams
as chains under the root, merged into a trie (siblings distinct); the loop's greedy acceptance keeps the
longest accepted one, so the output is exactly greedy decoding's.

Sizing, W="auto" (lookahead_budget.py). The window costs (N − 1)·W nodes in every forward and pays only
through later pool hits; the verification branch costs a node per trie token. On a GPU a forward of 50
tokens costs about one of 1, on a CPU several. So from the one cost model (`cost.StepCost`) and the hit
rates seen so far, each step verifies only the root's n-grams (most recent first) that pay for their nodes,
and every `adapt_every` steps the width is re-chosen from {0, 1, 2, 4, ..., max_window}; what was given up is
probed now and then. W = 0 with n-grams is prompt-lookup-like verification of the pool; with none, plain
decoding.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ..accept.registry import TREE_RULES
from ..trees.tree import Tree
from .base import DecodeState, Proposer, param
from .draft_length import Probes
from .lookahead_budget import LookaheadBudget

__all__ = ["LookaheadConfig", "LookaheadProposer", "Window", "NgramPool"]

TEXT, WINDOW = "text", "window"  # where a pool n-gram came from


@dataclass
class LookaheadConfig:
    W: int | str = param("auto", 'window width (columns); "auto": chosen from the cost curve and the pool\'s hit rate')
    N: int = param(4, "n-gram size: the window has N − 1 levels, a verified n-gram is N − 1 tokens after the root")
    G: int = param(8, "n-grams kept per first token, so verified per step at most (LADE's GUESS_SET_SIZE)")
    pool_from_prompt: bool = param(True, "seed the pool with the prompt's n-grams and add the output's")
    max_window: int = param(16, 'W="auto": the widest window considered')
    adapt_every: int = param(16, 'W="auto": steps between two choices of the width')
    probe_every: int = param(16, 'W="auto": verify one more n-gram than pays after this many steps (0: never)')
    probe_max: int = param(128, "the wait doubling after each failed probe up to this (`draft_length.Probes`)")
    seed: int = param(0, "of the window's initial guesses (greedy output does not depend on them, only the speed)")

    def __post_init__(self):
        if not (self.W == "auto" or (isinstance(self.W, int) and self.W >= 0)):
            raise ValueError(f"W (the window width) must be an integer >= 0 or 'auto', got {self.W!r}")
        if not isinstance(self.N, int) or self.N < 3:
            raise ValueError(
                f"N (the n-gram size) must be an integer >= 3, got {self.N!r}: the window needs N − 1 >= 2 levels, "
                "one Jacobi step between its first level and the n-grams it harvests"
            )
        if not isinstance(self.G, int) or self.G < 1:
            raise ValueError(f"G (n-grams verified per step) must be an integer >= 1, got {self.G!r}")
        if self.max_window < 1 or self.adapt_every < 1:
            raise ValueError(f"need max_window >= 1 and adapt_every >= 1, got {self.max_window}, {self.adapt_every}")
        Probes(self.probe_every, self.probe_max)  # validates the probe schedule


class Window:
    """The 2D lookahead window: up to N − 1 levels of Jacobi guesses, C columns (module docstring).

    levels[0] holds level 0's columns 1..C−1 (its column 0 is the root, new every step); levels[l >= 1]
    hold columns 0..C−1.
    """

    def __init__(self, W: int, N: int, fresh: Callable[[], int]):
        self.N, self.fresh = N, fresh
        # One level, N − 2 columns wider than W: each warm-up step drops a column (the window advances
        # with the root) and adds a level, until N − 1 levels of W columns (LADE's initial past_tokens).
        self.levels: list[list[int]] = [[fresh() for _ in range(W + N - 3)]]

    @property
    def width(self) -> int:
        return len(self.levels[0]) + 1

    @property
    def full(self) -> bool:
        return len(self.levels) == self.N - 1

    @property
    def depth(self) -> int:
        """Depth of the deepest cell, (last level, last column): offset l + i."""
        return len(self.levels) - 1 + self.width - 1

    def nodes(self) -> tuple[list[int], list[int]]:
        """(tokens, parents) of the cells after the root, in node order l·C + i (the root is node 0)."""
        c = self.width
        tokens = [t for level in self.levels for t in level]
        parents = list(range(c - 1))  # (0, i) -> (0, i − 1), i.e. node i − 1
        for level in range(1, len(self.levels)):
            parents += [(level - 1) * c + i for i in range(c)]  # (l, i) -> (l − 1, i)
        return tokens, parents

    def step(self, root: int, pred: list[int]) -> list[tuple[int, tuple[int, ...]]]:
        """One Jacobi step. pred (C,): the argmax at the last level's cells (for one level: root included).

        Returns the harvested n-grams as (first token, the N − 1 after it), one per column (none while filling).
        """
        if not self.full:  # warm-up: the predictions become a new level, every level loses its column 0
            self.levels = [level[1:] for level in self.levels] + [pred[1:]]
            return []
        columns = zip([root, *self.levels[0]], *self.levels[1:], pred, strict=True)  # column i: offsets i..i+N−1
        grams = [(col[0], tuple(col[1:])) for col in columns]
        self.levels = [self.levels[1][1:], *self.levels[2:], list(pred)]
        return grams

    def resize(self, W: int) -> None:
        """A full window keeps its guesses, cut or padded with fresh ones to W columns."""
        pad = [self.fresh() for _ in range(max(W - self.width, 0))]
        self.levels = [(self.levels[0] + pad)[: W - 1]] + [(level + pad)[:W] for level in self.levels[1:]]


class NgramPool:
    """n-grams keyed by their first token: per key at most `cap` continuations, least recently added first."""

    def __init__(self, n: int, cap: int):
        self.n, self.cap = n, cap
        self.table: dict[int, dict[tuple[int, ...], str]] = {}  # key -> {continuation: source}, in LRU order
        self.indexed = 0  # text n-grams ending before this position are in

    def add(self, key: int, gram: tuple[int, ...], source: str) -> None:
        entry = self.table.setdefault(key, {})
        old = entry.pop(gram, None)  # added again: refreshed to most recent (LADE moves it to the end)
        if old is None and len(entry) >= self.cap:
            del entry[next(iter(entry))]  # full: the least recently added goes
        entry[gram] = TEXT if TEXT in (old, source) else source  # the text would have offered it anyway

    def add_text(self, tokens: list[int]) -> None:
        """The n-grams of `tokens` ending at positions not added yet."""
        for end in range(max(self.indexed, self.n - 1), len(tokens)):
            self.add(tokens[end - self.n + 1], tuple(tokens[end - self.n + 2 : end + 1]), TEXT)
        self.indexed = len(tokens)

    def get(self, key: int) -> dict[tuple[int, ...], str]:
        return self.table.get(key, {})


class LookaheadProposer(Proposer):
    name = "lookahead"
    accept_rules = TREE_RULES  # greedy; exact one-hot sampling (pool n-grams: deterministic siblings); typical

    def __init__(self, config: LookaheadConfig | None = None, **kwargs):
        self.config = config or LookaheadConfig(**kwargs)
        self.rng = random.Random(self.config.seed)
        self.pool = NgramPool(self.config.N, self.config.G)
        self.window: Window | None = None
        self.budget: LookaheadBudget | None = None  # W="auto" only
        self.width = 0 if self.config.W == "auto" else self.config.W  # auto: chosen at the first step
        self.prompt: list[int] = []
        self._step: dict = {}  # what propose built, for update
        self._last: dict = {}
        self.counts = {"steps": 0, "window_steps": 0, "verify_steps": 0, "accepted": 0, TEXT: 0, WINDOW: 0}

    def _fresh(self) -> int:
        return self.rng.choice(self.prompt)

    def start(self, state: DecodeState, prompt=None) -> None:
        cfg = self.config
        self.prompt = state.tokens[: state.prompt_length]
        if cfg.pool_from_prompt:
            self.pool.add_text(state.tokens)
        # the update reads the window's last level by node index, so the window must fit whole in one
        # forward: a compiled step's largest bucket bounds its width (root + (N − 1)·W − 1 cells <= max_nodes)
        fits = (state.max_nodes or 10**9) // (cfg.N - 1)
        if cfg.W == "auto":
            max_window = min(cfg.max_window, fits)
            most = 1 + (cfg.N - 1) * (max_window + cfg.G)  # root + the widest window + G whole n-grams
            state.cost.prepare(most, tree=True)
            self.budget = LookaheadBudget(state.cost, cfg.N, cfg.G, max_window, cfg.adapt_every,
                                          cfg.probe_every, cfg.probe_max)  # fmt: skip
        elif cfg.W > fits:
            raise ValueError(f"lookahead: a window of W={cfg.W} columns and N − 1 = {cfg.N - 1} levels has more nodes "
                             f"than one forward verifies here ({state.max_nodes}, the compiled step's largest "
                             f"bucket); use W <= {fits} or W='auto'")  # fmt: skip
        self._set_width(self.width)

    def _set_width(self, width: int) -> None:
        if width == 0:
            self.window = None
        elif self.window is not None and self.window.full:
            if width != self.window.width:
                self.window.resize(width)
        elif self.window is None or width != self.width:
            self.window = Window(width, self.config.N, self._fresh)  # (re)start, warm-up included
        self.width = width

    # ---- the two calls of the loop ----------------------------------------------------------------
    def propose(self, state: DecodeState) -> Tree:
        if self.budget is not None and self.counts["steps"] % self.config.adapt_every == 0:
            self._set_width(self.budget.width())
        tokens, parents, candidate = [state.root], [-1], [True]
        # The window goes in only where all of it fits the loop's depth budget (the last few tokens).
        windowed = self.window is not None and self.window.depth <= state.max_depth
        if windowed:
            cells, cell_parents = self.window.nodes()
            windowed = 1 + len(cells) <= (state.max_nodes or len(cells) + 1)  # a filling window can be wider
        if windowed:
            tokens += cells
            parents += cell_parents
            candidate += [False] * len(cells)
        # The verification branch: the root's n-grams, most recent first, cut to the depth budget, as a trie
        # under the root; trie_nodes[k] = nodes of the first k n-grams (a later one only adds nodes after).
        grams: dict[tuple[int, ...], str] = {}
        for gram, source in reversed(self.pool.get(state.root).items()):
            cut = gram[: state.max_depth]
            if cut:
                grams[cut] = TEXT if TEXT in (source, grams.get(cut)) else source
        first, child, trie_nodes = len(tokens), {}, [0]
        for gram in grams:
            node = 0
            for tok in gram:
                if (node, tok) not in child:
                    child[node, tok] = len(tokens)
                    tokens.append(tok)
                    parents.append(node)
                    candidate.append(True)
                node = child[node, tok]
            trie_nodes.append(len(tokens) - first)
        k = len(grams) if self.budget is None else self.budget.grams(trie_nodes, len(tokens) - 1 - trie_nodes[-1])
        if state.max_nodes is not None:  # whole n-grams only, within one forward (the window fits: `start`)
            k = max(j for j in range(k + 1) if first + trie_nodes[j] <= state.max_nodes)
        end = first + trie_nodes[k]
        del tokens[end:], parents[end:], candidate[end:]
        shape = (self.window.width, len(self.window.levels)) if windowed else (0, 0)
        self._step = {"windowed": windowed, "shape": shape, "grams": list(grams.items())[:k], "nodes": trie_nodes[k]}
        if len(tokens) == 1:
            return Tree.root(state.root)
        return Tree(tokens, parents, candidate=candidate if windowed else None)

    def update(self, state, tree, acceptance, output) -> None:
        step, cfg = self._step, self.config
        columns, levels = step["shape"]
        if step["windowed"]:
            rows = output.logits[(levels - 1) * columns : levels * columns]  # (C, V) the last level's cells
            for key, gram in self.window.step(int(tree.tokens[0]), rows.argmax(dim=-1).tolist()):
                self.pool.add(key, gram, WINDOW)
        if cfg.pool_from_prompt:
            self.pool.add_text(state.tokens)
        # The winner: the most recent n-gram that offered the accepted tokens. Credit: the text when a text
        # n-gram offered them (it would have been verified without the window), else the window.
        a = acceptance.accepted_draft
        accepted = tuple(tree.tokens[acceptance.path[1:]].tolist())
        offered = [r for r, (gram, _) in enumerate(step["grams"]) if a and gram[:a] == accepted]
        winner = offered[0] if offered else None
        credit = None if winner is None else TEXT if any(step["grams"][r][1] == TEXT for r in offered) else WINDOW
        if self.budget is not None:
            harvested = columns if levels == cfg.N - 1 else 0  # a window still filling harvests nothing
            self.budget.observe(len(step["grams"]), winner, a, credit, harvested, step["nodes"])
        self._last = {
            "W": self.width if step["windowed"] else 0,  # the window's width (0: no window this step)
            "width_probe": self.budget is not None and self.budget.probing_width,  # a probe's window
            "columns": columns,  # the window verified: columns x levels (a filling one is wider)
            "levels": levels,
            "grams": len(step["grams"]),  # n-grams verified
            "accepted": a,
            "credit": credit,
        }
        counts = self.counts
        counts["steps"] += 1
        counts["window_steps"] += step["windowed"]
        counts["verify_steps"] += bool(step["grams"])
        counts["accepted"] += a
        if credit is not None:
            counts[credit] += a

    def info(self) -> dict:
        """This step: window width W (0: none; width_probe: the window is a probe of W="auto") and the columns
        x levels verified, n-grams verified, accepted draft tokens and whom they are credited to ("text",
        "window" or None)."""
        return dict(self._last)

    def summary(self) -> dict:
        """Steps with a window and with verification, accepted draft tokens and their credit, final width."""
        out = {**self.counts, "W": self.width, "pool_keys": len(self.pool.table)}
        if self.budget is not None:
            b = self.budget
            out |= {"y_text": round(b.y_text.value, 3), "y_win": round(b.y_win.value, 3),
                    "h_0": round(b.rank_hits[0].value, 3)}  # fmt: skip
        return out
