"""Speculation in a batch: B sequences decoded together, each by the one loop's steps, one target forward for all.

    rows = RowsCache(target, B)                               # one K/V buffer, each row at its own length
    while a prompt waits or a row decodes:
        fill every free row from the queue                    # continuous batching: prefill into that row
        for each active row:  row.begin(...)                  # budget -> max_depth; its step before observed
                              tree_b = row.propose()          # 1. each row proposes its own tree
        trees = planner.cut(trees, t(B, ·))                   # 1b. (levers="plan") one width N* for the step
        outs = verify_rows(target, rows, trees)               # 2. ONE forward over every row's tree (4D mask:
                                                              #    each row's cache and tree, padding masked)
        for each active row:  step = row.accept(tree_b, out_b)  # 3.-6. each row accepts its own path: rows
                                                              #    advance by different counts (ragged acceptance)
                              row.end(step, ...)              # its trace, on_step, stop (EOS, budget, on_step)
        a row that is done frees its slot for the next prompt

A row is a `generate.Decoding` (its own proposer, acceptance, KV rows, trace), stepped by the same `begin` and
`end` as `generate`'s one sequence (they differ only in the forward between), so every method batches and each
row's output is what `generate` would emit for its prompt alone — exactly in distribution when sampling, token for
token under greedy decoding up to fp32 rounding: a batched forward sums in other orders than a one-row one, which
can flip a near-tie (the bench records the first differing token and its top-1 − top-2 logit gap).

How much to speculate at batch B comes from the one cost model: each row prices its steps on t(B, n), the
measured seconds of one forward over B rows of n tokens (`cost.cost_curve_for(rows=B)`). A forward over few rows
× tokens is bound by reading the weights (nearly free to widen); over many it is bound by compute, so the same
sizers pick shorter drafts and smaller trees as B grows, down to proposing nothing where nothing pays. What that
price leaves out — each row's Python work and the padding to the widest row's tree, both growing with B — can be
measured on the batch itself by a `cost.gate.SpeculationGate` (`gate=True`, off by default: on the bench it did
not pay overall, `data/bench/README.md`): it runs steps that speculate and plain steps (depth 0) and keeps the mode
that emits more tokens per second, re-probing the other.

The forward pads every row to the widest row's tree, so the step costs t(B, N) at the widest N, not at each row's
own n. With `levers="plan"` (`Levers`; the default from four rows) a `cost.plan.WidthPlanner` prices the step as
it runs: after the rows propose, it picks the one width N* that maximises the batch's expected tokens per second
on t(B, N), cuts every tree to its first N* nodes, caps the next step's paid drafts (EAGLE's, Medusa's heads) one
deeper, and each row learns its cost at the width the forward ran. Each lever is a switch, so the bench measures
each apart (`bench.batched --levers off,plan`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from .cost.gate import SpeculationGate
from .cost.plan import WidthPlanner
from .cost.step import step_kind
from .generate import Clock, Decoding, GenerationResult, Setup, StepTrace
from .kv_cache import RowsCache
from .memory import Memory
from .trees.tree import Tree
from .verify import verify_rows

__all__ = ["BatchResult", "Levers", "generate_batch"]


@dataclass(frozen=True)
class Levers:
    """The batch's levers, each a switch (the bench measures each apart: `bench.batched --levers`).

    plan: one width per step (`cost.plan.WidthPlanner`): every row's tree is cut to the width N* that maximises
          the batch's expected tokens per second at t(B, N), and each row learns its cost at the width the forward
          ran (every row is padded to the widest tree). Off: each row sizes and prices its own tree alone.

    The default ("default" or None, `Levers.default(rows)`): the planner from PLAN_MIN_ROWS rows, the smallest batch
    the lever bench measured it at (`data/bench/README.md`); fewer rows size their own trees, as before it.
    """

    plan: bool = False

    NAMES = ("plan",)
    PLAN_MIN_ROWS = 4

    @classmethod
    def default(cls, rows: int) -> Levers:
        """The levers `generate_batch` runs with `rows` rows unless told otherwise (class docstring)."""
        return cls(plan=rows >= cls.PLAN_MIN_ROWS)

    @classmethod
    def of(cls, spec: Levers | str | None, rows: int = 1) -> Levers:
        """A Levers; "off" (every lever off); a '+'-joined list of lever names ("plan"); or "default" / None:
        `default(rows)`."""
        if isinstance(spec, cls):
            return spec
        if spec is None or spec == "default":
            return cls.default(rows)
        if spec == "off":
            return cls()
        if not isinstance(spec, str):
            raise TypeError(f"levers takes a Levers or a string like 'plan' or 'off', got {spec!r}")
        names = [x.strip() for x in spec.split("+") if x.strip()]
        unknown = [x for x in names if x not in cls.NAMES]
        if unknown or not names:
            raise ValueError(f"unknown lever(s) {', '.join(unknown) or repr(spec)}: levers are 'default', 'off' or a "
                             f"'+'-joined list of {', '.join(cls.NAMES)}")  # fmt: skip
        return cls(**dict.fromkeys(names, True))

    def name(self) -> str:
        """The spec `of` reads back ("off" with every lever off)."""
        return "+".join(n for n in self.NAMES if getattr(self, n)) or "off"


@dataclass
class BatchResult:
    """Every prompt's `GenerationResult` (in the order given), and the batch as a whole."""

    results: list[GenerationResult]
    batch_size: int
    seconds: float  # wall time of the whole batch, prefills included
    forwards: int  # batched target forwards (steps)
    # wall time spent filling free rows (their prompts' prefills, while the other rows waited): what a decode-only
    # figure leaves out, as the published batch tables do (`decode_tokens_per_s`)
    prefill_seconds: float = 0.0
    latency: list[float] = field(default_factory=list)  # per prompt: seconds from the start until its last token
    active: list[int] = field(default_factory=list)  # rows decoding in each step (the rest padding)
    # per step, per row: (the prompt it decodes, tokens it emitted) or None where the row was padding: the
    # ragged acceptance of a batch, drawn as a rows × steps heatmap (`viz.batching.ragged_figure`)
    grid: list[list[tuple[int, int] | None]] = field(default_factory=list)
    gate: dict | None = None  # the speculation gate's steps per mode and rates (`SpeculationGate.summary`); None: off
    plan: dict | None = None  # the width planner's steps, share cut and mean width (`WidthPlanner.summary`); None: off

    @property
    def tokens(self) -> int:
        return sum(len(r.tokens) for r in self.results)

    @property
    def tokens_per_s(self) -> float:
        """Total throughput: every prompt's new tokens over the batch's wall time."""
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def decode_tokens_per_s(self) -> float:
        """Decode-only throughput: the new tokens over the wall time less the rows' prefills (`prefill_seconds`)."""
        decode = self.seconds - self.prefill_seconds
        return self.tokens / decode if decode > 0 else float("nan")

    def summary(self) -> dict:
        lat = sorted(self.latency)
        return {
            "batch_size": self.batch_size,
            "prompts": len(self.results),
            "new_tokens": self.tokens,
            "forwards": self.forwards,
            "tokens_per_s": round(self.tokens_per_s, 2),
            "latency_median_s": round(lat[len(lat) // 2], 3) if lat else None,
            "mean_active_rows": round(sum(self.active) / len(self.active), 2) if self.active else 0.0,
            "gate": self.gate,
            "plan": self.plan,
        }


def generate_batch(
    model,
    prompts: Sequence,
    method: str = "autoregressive",
    max_new_tokens: int = 128,
    *,
    batch_size: int = 4,
    tokenizer=None,
    chat: bool | str = "auto",
    eos_token_id: int | Sequence[int] | None = None,
    accept=None,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    trace: bool = False,
    progress: bool = False,
    gate: bool | SpeculationGate = False,
    levers: Levers | str | None = None,
    on_step: Callable[[int, int, StepTrace | None, int], bool | None] | None = None,
    **params,
) -> BatchResult:
    """Decode every prompt with `method`, `batch_size` at a time in one forward per step; a finished row takes the
    next waiting prompt (continuous batching). Arguments as `generate`'s (the prompts: texts, or token-id lists);
    prompt i samples with seed + i. `gate`: True lets a `SpeculationGate` decide by measurement whether a
    speculative method's rows speculate (module docstring; more than one row only), a `SpeculationGate` of your
    own runs always; False (the default): the sizers alone decide. `levers`: which of the batch's levers run
    (`Levers`; a Levers or a spec like "plan" or "off"; None: `Levers.default`, the planner from four rows).
    `on_step`: `generate`'s hook with the prompt
    first, on_step(prompt index, the prompt's step index, its StepTrace (None without trace), tokens it emitted
    so far), called after every step of every prompt; returning False ends that prompt there (stop_reason
    "stopped", the tokens so far kept) and its row takes the next waiting prompt; the other rows go on.
    -> a `BatchResult` (each prompt's result in the order given)."""
    prompts = _check_prompts(prompts)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}")
    if on_step is not None and not callable(on_step):
        raise TypeError(f"on_step must be a function on_step(prompt, step, trace, tokens), got {on_step!r}")
    if params.get("compile"):
        raise ValueError("compile= verifies one sequence at a time: decode a batch eagerly (leave compile out)")
    setup, first = Setup.of(model=model, tokenizer=tokenizer, method=method, params=params, proposer=None,
                            accept=accept, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id,
                            temperature=temperature, top_k=top_k, top_p=top_p, compile=False, trace=trace)  # fmt: skip
    ids = [setup.prompt_ids(p, chat) for p in prompts]
    rows = min(batch_size, len(ids))
    cache = RowsCache(setup.model, rows, capacity=max(len(x) for x in ids) + max_new_tokens + 72)
    clock = Clock(setup.device, None)
    queue = list(range(len(ids)))[::-1]  # prompt indices, next last
    slots: list[tuple[int, Decoding] | None] = [None] * rows
    results: list[GenerationResult | None] = [None] * len(ids)
    latency = [0.0] * len(ids)
    out = BatchResult(results=[], batch_size=batch_size, seconds=0.0, forwards=0)
    if gate is True:
        gate = SpeculationGate() if rows > 1 and setup.method != "autoregressive" else None
    gate = gate or None
    levers = Levers.of(levers, rows)
    planner = WidthPlanner() if levers.plan and rows > 1 and setup.method != "autoregressive" else None
    bar = _progress(len(ids), progress)
    while queue or any(slots):
        free = [b for b in range(rows) if slots[b] is None][: len(queue)]  # continuous batching: each takes a prompt
        picked = [queue.pop() for _ in free]
        opened = clock.now()
        together = len(free) == rows > 1 and _padding_pays([ids[i] for i in picked])
        prefilled = _prefill_together(setup, cache, [ids[i] for i in picked]) if together else {}
        for b, i in zip(free, picked, strict=True):
            if b not in prefilled:
                cache.reset(b)
            proposer = first if i == 0 else setup.proposer()
            seq_seed = None if seed is None else seed + i
            hook = partial(on_step, i) if on_step is not None else None  # the row's hook: the prompt's index bound
            slots[b] = (i, setup.open(ids[i], cache.row(b), proposer, setup.generator(seq_seed), Memory(), clock,
                                      rows=rows, prefilled=prefilled.get(b), opened=opened, on_step=hook))  # fmt: skip
        start = clock.now()
        if picked:  # the rows just filled were prefilled from `opened` to here; the other rows waited
            out.prefill_seconds += start - opened
        speculate = gate is None or gate.open()
        cap = planner.depth_cap() if planner is not None else None  # drafts no deeper than the last width paid
        trees: list[Tree | None] = [None] * rows
        for b, slot in enumerate(slots):
            if slot is not None:
                row = slot[1]
                row.begin(start, speculate)  # not speculating: a plain step, one token per row
                if cap is not None and row.state.cost.drafted > 0:  # a drafter that pays per draft (prompt
                    row.state.max_depth = min(row.state.max_depth, cap)  # lookup's are free: never capped)
                trees[b] = row.propose()  # 1.
        live = [b for b in range(rows) if trees[b] is not None]
        if planner is not None and len(live) > 1:  # 1b. one width for the step: every row cut to N*
            trees = planner.cut(trees, _price([slots[b][1] for b in live], trees))
        width = max((len(t) for t in trees if t is not None), default=1)
        proposed = clock.now()
        outputs = verify_rows(setup.model, cache, trees, setup.layers)  # 2. one forward over every row
        verified = clock.now()
        out.forwards += 1
        out.active.append(sum(t is not None for t in trees))
        out.grid.append([None] * rows)
        emitted = 0
        for b, slot in enumerate(slots):
            if slot is None:
                continue
            i, row = slot
            step = row.accept(trees[b], outputs[b])  # 3.-6.
            if planner is not None:
                step.width = width  # priced at the width the forward ran (each row was padded to it)
                planner.record(trees[b], step.acc.path)
            out.grid[-1][b] = (i, len(step.emitted))
            emitted += len(step.emitted)
            if row.end(step, start, proposed, verified):  # an EOS, the budget, or its on_step said stop
                now = clock.now()
                results[i], latency[i] = row.result(now - row.opened), now - clock.start
                slots[b] = None
                bar.update()
        if gate is not None:
            gate.record(emitted, clock.now() - start)
    bar.close()
    out.gate = gate.summary() if gate is not None else None
    out.plan = planner.summary() if planner is not None else None
    out.results, out.latency = results, latency
    out.seconds = clock.now(drain=True) - clock.start
    return out


def _price(decodings: list[Decoding], trees: list[Tree | None]) -> Callable[[int], float]:
    """price(n): seconds of this batch step, its trees drafted already, if its forward runs n nodes per row: t̂(B, n)
    (each row's StepCost with its learned load) plus the step's overhead as proposed (the kind of the widest offer:
    drafting is spent whatever n), averaged over the rows. What does not depend on n is settled once per step."""
    branching = any(t is not None and not t.is_chain for t in trees)
    widest = max(len(t) for t in trees if t is not None)
    costs = [d.state.cost for d in decodings]
    for cost in costs:
        if not cost.curves:  # a proposer of fixed size never asked for a price: measure t(B, n) once
            cost.prepare(max(32, widest), tree=branching)
    overhead = sum(cost.overhead(step_kind(widest, branching)) for cost in costs) / len(costs)
    return lambda n: sum(cost.verify(n, branching) for cost in costs) / len(costs) + overhead


PREFILL_PADDING = 1.15  # most padded tokens per real one a joint prefill may compute (below: one forward each)


def _padding_pays(prompts: list[list[int]]) -> bool:
    """Whether one joint prefill of `prompts` beats one forward each: the joint forward pads every prompt to the
    longest (B · max P tokens) and a prefill of a hundred tokens or more is compute-bound, so its time follows the
    tokens computed; separate forwards compute Σ P and pay a forward's fixed cost each. Joint only when padding
    adds at most PREFILL_PADDING − 1 of the real tokens (prompts of about equal length gain the fixed costs; the
    measurement behind the rule is in issue 58's note)."""
    lengths = [len(p) - 1 for p in prompts]  # each prefills all but its last token (the first tree's root)
    return len(lengths) * max(lengths) <= PREFILL_PADDING * max(sum(lengths), 1)


def _prefill_together(setup: Setup, cache: RowsCache, prompts: list[list[int]]) -> dict:
    """Every row empty (the batch's first fill, or all rows finished at once): prefill all prompts in one forward,
    each prompt but its last token (the first tree's root) as a chain in its row. -> {row: PrefillOutput}; a
    one-token prompt has nothing to prefill and is left out (its row is reset and opened as usual)."""
    from .verify import PrefillOutput

    for b in range(len(cache.rows)):
        cache.reset(b)
    chains = [Tree.chain(p[0], p[1:-1]) if len(p) > 1 else None for p in prompts]
    outs = verify_rows(setup.model, cache, chains, setup.layers, logits=False)
    done = {}
    for b, (chain, out) in enumerate(zip(chains, outs, strict=True)):
        if chain is not None:
            cache.row(b).keep(list(range(len(chain))))  # commit the prompt, drop the padding
            done[b] = PrefillOutput(hidden=out.hidden, features=out.features)
    return done


def _check_prompts(prompts) -> list:
    """The prompts as a list; a clear error for none, for a single prompt, or for a mix of text and token ids."""
    if isinstance(prompts, str) or (isinstance(prompts, Sequence) and prompts and isinstance(prompts[0], int)):
        raise ValueError("generate_batch takes a list of prompts (texts or token-id lists); for one prompt, wrap it "
                         "in a list or call generate()")  # fmt: skip
    prompts = list(prompts)
    if not prompts:
        raise ValueError("no prompts: pass at least one prompt (a text, or a list of token ids)")
    kinds = {"text" if isinstance(p, str) else "ids" for p in prompts}
    if len(kinds) > 1:
        raise ValueError("the prompts mix texts and token-id lists: texts go into the chat template (chat='auto') "
                         "and ids do not, so pass all as texts or all as ids")  # fmt: skip
    return prompts


def _progress(total: int, show: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="prompts", disable=not show)
