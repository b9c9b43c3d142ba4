"""The price of one loop step: the measured verify curve t(n), corrected online, plus the loop's own time.

Decoding a small model is memory-bound: one forward over n tokens costs far less than n forwards, but not
nothing, and on CPUs the curve is not even monotonic (2–3 tokens can take slower matmul paths than 4 or 8).
So every size a method picks — a chain's draft length, a tree's node budget, Lookahead's window — depends on
the machine, and every sizer asks the same object for its price (`StepCost`):

    price(n) = t̂(n) + ô(kind) + drafting

    t̂(n)      one verify forward of n tokens (root included): the curve t(n) measured on this device
               (`cost_curve_for`, a chain curve and a tree-mask curve), times load · shape(n), learned from
               every step the loop times
    ô(kind)    the loop's and the proposer's own seconds per step beyond the forward and beyond the
               proposer's priced drafting: accepting, keeping the path's K/V, emitting, building the tree,
               updating indices; learned per kind of step (a root-only step, a chain, a branching tree)
    drafting   what the proposer prices itself (k draft-model steps, the heads it must run), in seconds

A sizer maximises expected tokens per second, E[tokens | size] / price(size); the size "nothing" (one plain
step, price(1)) is always a candidate, so a proposer that is usually wrong backs off to plain decoding.
The loop reports every step (`StepCost.observe`), for every method; a proposer only asks. Why the loop's
own time belongs in the price: it does not shrink when the forward does, so on a faster CPU (or a GPU) it
is a larger share of a step, and a size that paid where forwards were slow can lose where they are fast.
"""

from __future__ import annotations

from .curve import CostCurve, cost_curve_for

__all__ = ["StepCost", "STEP_KINDS", "step_kind"]


STEP_KINDS = ("root", "chain", "tree")  # a root-only step (plain decoding), a chain, a branching tree


def step_kind(n: int, tree: bool) -> str:
    """The kind of a step that verifies n tokens (root included): root-only, a chain, or a branching tree."""
    return "root" if n <= 1 else "tree" if tree else "chain"


class StepCost:
    """The price of one loop step on one model, for every sizer (module docstring): one per `generate` call,
    or carried across calls in a `Memory`.

        step(n, tree, drafting) = t̂(n) + ô(kind) + drafting,      t̂(n) = t(n) · load · shape(n)

    `load` (how busy the machine is now) follows every observed verify: a moving average of observed /
    (t(n) · shape(n)). `shape(n)` (how the context has changed size n's cost relative to the others: longer
    contexts raise multi-token verifies more than one-token ones) follows only size n's own verifies, slowly;
    a size not observed yet takes the nearest observed size's shape. Why two factors and not one ratio per
    size: a size that stops being verified would keep whatever ratio a burst of foreign load left it, and a
    2-token verify could look cheaper than a 1-token one for the rest of a run; a new size starts from the
    shape it was priced at and moves a few % per verify, so one noisy probe cannot reorder the sizes.

    ô(kind) starts at the root-only steps' overhead (0 before any step) and follows that kind's steps.
    `StepCost.of(curve)` prices on a given curve instead of a measured one (learn=False: never corrected).
    """

    def __init__(self, model=None, *, learn: bool = True, step=None, rows: int = 1):
        self.model = model
        self.compiled = step  # a `compiled.CompiledStep` the loop verifies with: its curve is the one to price
        self.rows = rows  # sequences verified together (a batch): the step is t(rows, n) (`cost_curve_for`)
        self.learn = learn
        self.curves: dict[bool, CostCurve] = {}  # tree? -> the measured curve
        self.load = 1.0
        self.shape: dict[tuple[bool, int], float] = {}  # (tree?, n) -> shape(n)
        self.overheads: dict[str, float] = {}  # kind -> ô
        self.steps = 0  # steps observed
        self.load_decay, self.shape_decay, self.overhead_decay = 0.6, 0.97, 0.9
        self._drafting = 0.0  # seconds the proposer priced itself in the step in flight (`note`)
        self.drafted = 0.0  # all the seconds it noted so far: > 0 marks a drafter that pays for its drafts

    @classmethod
    def of(cls, curve: CostCurve, *, learn: bool = True, overheads: dict[str, float] | None = None) -> StepCost:
        """Prices from a given curve (for chains and trees alike) and overheads; learn=False ignores every
        observation (tests, what-if notebooks: the prices stay exactly the curve's)."""
        cost = cls(learn=learn)
        cost.curves = {False: curve, True: curve}
        cost.overheads = dict(overheads or {})
        return cost

    # ---- the curves ---------------------------------------------------------------------------------
    def prepare(self, max_tokens: int, tree: bool = False) -> CostCurve:
        """Make sure the curve of `tree` kind reaches `max_tokens` (measured now, in the proposer's `start`,
        never in the middle of decoding); a fixed StepCost keeps its curve. A compiled step verifies at most
        its largest bucket (the loop cuts larger trees to it), so its curve stops there."""
        if self.compiled is not None:
            max_tokens = min(max_tokens, self.compiled.max_nodes)
        if self.model is not None and (tree not in self.curves or max(self.curves[tree].sizes) < max_tokens):
            self.curves[tree] = cost_curve_for(
                self.model, max_tokens=max_tokens, tree=tree, step=self.compiled, rows=self.rows
            )
        return self.curve(tree)

    def curve(self, tree: bool = False) -> CostCurve:
        """The measured curve of that kind (the other kind's when only that one was measured: t(1) is the
        same forward, and a chain curve prices a tree better than nothing)."""
        if tree in self.curves:
            return self.curves[tree]
        if (not tree) in self.curves:
            return self.curves[not tree]
        raise RuntimeError("no cost curve yet: the proposer's start() must call StepCost.prepare(max_tokens)")

    # ---- prices -------------------------------------------------------------------------------------
    def _shape(self, tree: bool, n: int) -> float:
        """shape(n): size n's own, else the nearest observed size's of the same kind (ties: the larger), else 1."""
        if (tree, n) in self.shape:
            return self.shape[tree, n]
        sizes = [m for t, m in self.shape if t == tree]
        if not sizes:
            return 1.0
        return self.shape[tree, min(sizes, key=lambda m: (abs(m - n), -m))]

    def verify(self, n: int, tree: bool = False) -> float:
        """t̂(n): seconds of one verify forward of n tokens, the root included (n = 1: a plain step)."""
        tree = tree and n > 1
        return self.curve(tree)(n) * self.load * self._shape(tree, n)

    def overhead(self, kind: str) -> float:
        """ô(kind): the loop's and the proposer's own seconds per step of that kind (`STEP_KINDS`)."""
        return self.overheads.get(kind, self.overheads.get("root", 0.0))

    def step(self, n: int, tree: bool = False, drafting: float = 0.0) -> float:
        """Seconds of a step verifying n tokens (root included) whose proposer priced its drafting at
        `drafting` seconds: t̂(n) + ô(kind) + drafting."""
        return self.verify(n, tree) + self.overhead(step_kind(n, tree)) + drafting

    # ---- what the loop reports ----------------------------------------------------------------------
    def note(self, seconds: float) -> None:
        """The proposer drafted for `seconds` this step, work it prices itself (its `drafting`): the loop
        leaves it out of the overhead it learns."""
        self._drafting += seconds
        self.drafted += seconds

    def observe(self, n: int, tree: bool, verify: float, other: float) -> None:
        """One step: n tokens verified in `verify` seconds (forward and acceptance); `other`: the rest of the
        step's wall time (propose, keep, emit, update, the loop's bookkeeping and hooks). The loop reports
        every step, just before it asks the proposer for the next."""
        drafting, self._drafting = self._drafting, 0.0
        if not self.learn:
            return
        self.steps += 1
        kind = step_kind(n, tree)
        own = max(other - drafting, 0.0)
        o = self.overheads.get(kind)
        self.overheads[kind] = own if o is None else self.overhead_decay * o + (1 - self.overhead_decay) * own
        tree = tree and n > 1
        if not self.curves or verify <= 0:
            return
        ratio = min(max(verify / self.curve(tree)(n), 0.25), 4.0)  # a hiccup (page fault, other load) is clipped
        a, b = self.load_decay, self.shape_decay
        shape = self._shape(tree, n)
        self.load = a * self.load + (1 - a) * ratio / shape
        self.shape[tree, n] = b * shape + (1 - b) * ratio / self.load

    def summary(self) -> dict:
        """The corrections learned so far (what a bench row or a Memory shows)."""
        return {"steps": self.steps, "load": round(self.load, 3),
                "overhead_ms": {k: round(v * 1e3, 3) for k, v in self.overheads.items()}}  # fmt: skip
