"""The one decoding loop. Every method — autoregressive, prompt lookup, draft model, Medusa, Lookahead —
is this loop with a different proposer, and the acceptance rules that fit its trees.

    rule = the method's rule for the sampling mode     # checked up front (`AcceptRules.pick`)
    prefill(prompt[:-1])                                  # the root (last token) is not yet in the cache
    while budget left:
        1. tree = proposer.propose(state)                 # token tree rooted at the last accepted token
        2. out  = verify_tree(target, cache, tree)        # one forward over every node (tree attention),
                                                          # + the hidden states of proposer.feature_layers
        3. acc  = rule(tree, out.logits)                  # accepted path (candidates only) + bonus token
        4. cache.keep(acc.path)                           # only the path's K/V stay
        5. emit tree.tokens[path[1:]] + [bonus]           # stop at EOS (even mid-path) / max_new_tokens
        6. proposer.update(state, tree, acc, out)         # the proposer syncs its own state
        then the step is observed: state.cost.observe(...)   # all it took: the one price every sizer asks
                                   trace, on_step(...)       # a StepTrace per step; progress, Stop buttons

A root-only tree makes step 2 an ordinary decoding step, so `method="autoregressive"` is plain KV-cached
greedy decoding measured by the same code as the speculative methods.

`generate` checks its arguments once (`Setup`: the target, the compiled step, the method's rule, the EOS set)
and opens one sequence from them (`Decoding`: its proposer, cache, state and `Clock`). `Decoding.run` drives the
body above, and `generate_batch` (`batch.py`) drives the same for B rows around one forward; each step of either
is `begin` (budget -> max_depth; the step before observed) · 1. `propose` · 2. a forward · `accept` (3.-6.; it
returns a `Step`, what it did) · `end` (the step's clock marks stamped on, the trace, on_step, the stop). Timing
observes the `Step` afterwards rather than being threaded through decoding.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .accept.result import Acceptance
from .io import eos_ids
from .kv_cache import KVCache
from .machine import sync
from .memory import Memory
from .models.compiled import CompiledStep, CompileUnavailable, capacity_for, compiled_step
from .models.load import LoadedModel, prompt_ids, unwrap
from .proposers import METHODS, DecodeState, Proposer, get_method, make_proposer, register_method
from .sampling import Sampling
from .trees.tree import Tree
from .verify import PrefillOutput, TreeOutput, check_feature_layers, prefill, verify_tree

# METHODS, register_method and make_proposer live in proposers/registry.py; they are re-exported here
# because `generate(method=...)` is where users meet them.
__all__ = ["generate", "GenerationResult", "StepTrace", "METHODS", "register_method", "make_proposer"]


# ---- results ----------------------------------------------------------------------------------------
@dataclass
class StepTrace:
    """One loop iteration: the tree proposed, the path accepted, what was emitted, and timings (s).

    tree_candidate: which nodes could be accepted (None = all). Nodes that are verified but never
    accepted (Lookahead's Jacobi window) count as `extra`, not as `proposed`.
    """

    tree_tokens: list[int]
    tree_parents: list[int]
    path: list[int]
    emitted: list[int]
    t_propose: float
    t_verify: float
    t_accept: float
    info: dict = field(default_factory=dict)
    tree_candidate: list[bool] | None = None

    @property
    def tree(self) -> Tree:
        return Tree(torch.tensor(self.tree_tokens), torch.tensor(self.tree_parents), candidate=self.tree_candidate)

    @property
    def proposed(self) -> int:
        """Candidate nodes besides the root: the tokens offered for acceptance."""
        if self.tree_candidate is None:
            return len(self.tree_tokens) - 1
        return sum(self.tree_candidate[1:])

    @property
    def extra(self) -> int:
        """Non-candidate nodes: verified in the same forward (for their logits) but never accepted."""
        return len(self.tree_tokens) - 1 - self.proposed

    @property
    def accepted(self) -> int:
        return len(self.path) - 1


@dataclass
class GenerationResult:
    tokens: list[int]  # new tokens (EOS included when it stopped generation)
    prompt_tokens: list[int]
    text: str | None  # decoded new tokens (special tokens skipped), None without a tokenizer
    stop_reason: str  # "eos" | "max_new_tokens" | "context" | "stopped" (the on_step hook said so)
    method: str
    seconds: float  # wall time of the whole call, prefill included
    prefill_seconds: float
    steps: list[StepTrace] = field(default_factory=list)
    forwards: int = 0  # target forwards after prefill (= steps, also when the trace is off)
    proposer: dict = field(default_factory=dict)  # the proposer's `summary()` of the call
    compile_seconds: float = 0.0  # seconds the compiled step spent compiling in this call (not in `seconds`)

    @property
    def mean_accepted(self) -> float:
        """Tokens emitted per target forward, bonus included (autoregressive = 1.0)."""
        return len(self.tokens) / max(self.forwards, 1)

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> dict:
        return {
            "method": self.method,
            "new_tokens": len(self.tokens),
            "forwards": self.forwards,
            "mean_accepted": round(self.mean_accepted, 3),
            "tokens_per_s": round(self.tokens_per_s, 2),
            "seconds": round(self.seconds, 3),
            "stop_reason": self.stop_reason,
        }


# ---- the clock ----------------------------------------------------------------------------------------
class Clock:
    """Seconds of decoding: wall time less what a compiled step spent compiling (compiling is not decoding:
    the first call of a bucket compiles its graph, and that time is reported apart as `compile_seconds`).

    `now(drain=True)` first waits for the device's queued work, so a phase boundary means something on an
    asynchronous device; the loop drains only when it keeps a trace (per-phase timings), never otherwise.
    """

    def __init__(self, device: torch.device, step: CompiledStep | None):
        self.device, self.step = device, step
        sync(device)
        self._compiled_before = step.compile_seconds if step is not None else 0.0
        self.start = self.now()

    def compile_seconds(self) -> float:
        """Seconds the step has spent compiling since the clock started."""
        return self.step.compile_seconds - self._compiled_before if self.step is not None else 0.0

    def now(self, drain: bool = False) -> float:
        if drain:
            sync(self.device)
        return time.perf_counter() - self.compile_seconds()


@dataclass
class Step:
    """What one loop iteration did (`Decoding.accept`), for its observers: the trace, the cost model, on_step.

    judged: the clock once the rule had read the logits (the forward is done, also where the marks do not drain):
    the one time decoding takes itself. marks: the clock at start, proposed, verified, accepted (path kept, tokens
    emitted, proposer updated), stamped on by the after-step (`Decoding.end`) for whichever driver ran the step.
    """

    tree: Tree
    acc: Acceptance
    emitted: list[int]
    judged: float
    marks: tuple[float, ...] = ()  # (start, proposed, verified, accepted) once stamped
    width: int = 0  # nodes per row the forward ran (a batch pads every row to its widest tree); 0: the tree's own

    @property
    def verify(self) -> float:
        """Seconds of the forward and the acceptance."""
        return self.judged - self.marks[1]


# ---- the loop -----------------------------------------------------------------------------------------
@dataclass
class Decoding:
    """One sequence, opened from its `Setup` (`Setup.open`): its proposer, cache, state and clock, and what it has
    emitted. `run()` steps it alone; a batch steps B of them around one forward (`batch.py`). Either driver runs
    the same step: `begin` (the before-step), 1. `propose`, 2. a forward, `accept` (3.-6.), `end` (the after-step).
    """

    setup: Setup
    proposer: Proposer
    ids: list[int]
    cache: KVCache
    state: DecodeState
    clock: Clock
    on_step: Callable[[int, StepTrace | None, int], bool | None] | None = None
    prefill_seconds: float = 0.0
    opened: float = 0.0  # the clock when the sequence was opened (its prefill began)
    new: list[int] = field(default_factory=list)
    steps: list[StepTrace] = field(default_factory=list)
    forwards: int = 0
    stop_reason: str = "max_new_tokens"
    last: Step | None = None

    def budget(self) -> int:
        """Tokens the call may still emit: what max_new_tokens leaves, and the context window."""
        return min(self.setup.max_new_tokens - len(self.new), self.setup.window - len(self.state.tokens))

    def run(self) -> GenerationResult:
        """Step until the budget, an EOS or `on_step` ends the call; -> its result."""
        clock, drain = self.clock, self.setup.trace  # per-phase marks drain the device only for the trace
        done = self.finished()
        while not done:
            start = clock.now()
            self.begin(start)
            tree = self.propose()  # 1.
            proposed = clock.now(drain=drain)
            out = verify_tree(self.setup.model, self.cache, tree, self.setup.layers, step=self.setup.step)  # 2.
            verified = clock.now(drain=drain)
            done = self.end(self.accept(tree, out), start, proposed, verified)  # 3.-6.
        return self.result(clock.now(drain=True) - clock.start)

    def begin(self, start: float, speculate: bool = True) -> None:
        """Before a step begun at `start` on the clock: size it to the budget (speculate=False: a plain step, one
        token), and tell the cost model what the step before took, now that all of it is over."""
        self.state.max_depth = self.budget() - 1 if speculate else 0  # a path of depth d emits d + 1 tokens
        if self.last is not None:  # all the step before took: the one price every sizer asks
            self.observe(self.last, until=start)

    def propose(self) -> Tree:
        """1. propose a tree rooted at the last accepted token, cut to what may be verified."""
        s, compiled = self.state, self.setup.step
        tree = self.proposer.propose(s)
        if int(tree.tokens[0]) != s.root:
            raise RuntimeError(
                f"{self.setup.method}: proposed tree's root {int(tree.tokens[0])} != last token {s.root}"
            )
        if tree.max_depth > s.max_depth:
            tree = tree.truncate_depth(s.max_depth)
        if compiled is not None:  # a compiled step verifies up to its largest bucket (state.max_nodes)
            tree = tree.truncate_nodes(compiled.max_nodes)
        return tree

    def accept(self, tree: Tree, out: TreeOutput) -> Step:
        """Steps 3.-6. on the target's output `out` for `tree` (2. verified it: `verify_tree`, or a batch's one
        forward over every row)."""
        s = self.state

        # 3. accept  4. keep only the accepted path's K/V
        acc = self.setup.rule(tree, out.logits, sampling=s.sampling, generator=s.generator)
        judged = self.clock.now()  # the host has read the logits: the device is done
        self.cache.keep(acc.path)
        self.forwards += 1

        # 5. emit, stopping at the first EOS (which may sit inside the accepted path)
        emitted = tree.tokens[acc.path[1:]].tolist() + [acc.bonus]
        for i, tok in enumerate(emitted):
            if tok in self.setup.eos:
                emitted = emitted[: i + 1]
                self.stop_reason = "eos"
                break
        s.tokens.extend(emitted)
        s.cache_length = self.cache.length
        self.new.extend(emitted)

        # 6. the proposer syncs its own state
        self.proposer.update(s, tree, acc, out)
        return Step(tree, acc, emitted, judged)

    def end(self, step: Step, start: float, proposed: float, verified: float) -> bool:
        """After `step`: stamp its marks (start, proposed, verified: the driver's clock at its boundaries so far),
        keep its trace record, call on_step. -> whether the sequence is done: an EOS, the budget, or on_step
        returned False (stop_reason "stopped")."""
        step.marks = (start, proposed, verified, self.clock.now(drain=self.setup.trace))
        self.state.verify_seconds = step.verify
        self.last = step
        record = self.traced(step) if self.setup.trace else None
        if record is not None:
            self.steps.append(record)
        stop = self.on_step is not None and self.on_step(self.forwards - 1, record, len(self.new)) is False
        if self.finished():  # an EOS or the budget ends it first
            return True
        if stop:
            self.stop_reason = "stopped"
        return stop

    def finished(self) -> bool:
        """Whether the sequence is done: it emitted an EOS, or no budget is left (`stop_reason` says which)."""
        if self.stop_reason == "eos":
            return True
        if self.budget() > 0:
            return False
        self.stop_reason = "max_new_tokens" if len(self.new) >= self.setup.max_new_tokens else "context"
        return True

    def result(self, seconds: float) -> GenerationResult:
        """The sequence's result, decoded for `seconds` (its wall time, compiling left out)."""
        tokenizer = self.setup.tokenizer
        text = tokenizer.decode(self.new, skip_special_tokens=True) if tokenizer is not None else None
        return GenerationResult(tokens=self.new, prompt_tokens=list(self.ids), text=text, stop_reason=self.stop_reason,
                                method=self.setup.method, seconds=seconds, prefill_seconds=self.prefill_seconds,
                                steps=self.steps, forwards=self.forwards, proposer=self.proposer.summary(),
                                compile_seconds=self.clock.compile_seconds())  # fmt: skip

    def observe(self, step: Step, until: float) -> None:
        """Tell the cost model what `step` took: its forward and acceptance, and all else until the next step
        began (the loop's bookkeeping, the trace, the on_step hook). The step is priced at the width its forward
        ran: in a batch every row pays for the widest row's tree (`Step.width`), not for its own."""
        start, verify = step.marks[0], step.verify
        n = max(step.width, len(step.tree))
        self.state.cost.observe(n, not step.tree.is_chain, verify, until - start - verify)

    def traced(self, step: Step) -> StepTrace:
        """The trace's record of a step (its phases' seconds on the decoding clock)."""
        start, proposed, verified, done = step.marks
        tree = step.tree
        return StepTrace(tree_tokens=tree.tokens.tolist(), tree_parents=tree.parents.tolist(), path=list(step.acc.path),
                         emitted=step.emitted, t_propose=proposed - start, t_verify=verified - proposed,
                         t_accept=done - verified, info=self.proposer.info(),
                         tree_candidate=None if tree.candidate is None else tree.candidate.tolist())  # fmt: skip


def generate(
    model,
    prompt,
    method: str = "autoregressive",
    max_new_tokens: int = 128,
    *,
    tokenizer=None,
    chat: bool | str = "auto",
    eos_token_id: int | Sequence[int] | None = None,
    accept: str | Callable[..., Acceptance] | None = None,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    proposer: Proposer | None = None,
    trace: bool = True,
    memory: Memory | None = None,
    on_step: Callable[[int, StepTrace | None, int], bool | None] | None = None,
    compile: bool | CompiledStep = False,
    **params,
) -> GenerationResult:
    """Decode `max_new_tokens` (or until EOS) with one of `METHODS`; greedy and exact by default.

    model:     an HF causal LM, or a `LoadedModel` (which also supplies the tokenizer)
    prompt:    text or token ids. chat="auto" (default) puts text in the tokenizer's chat template when it
               has one (an instruct model answers the user turn); chat=False continues the raw text
    method:    a name in METHODS; `params` go to its config (e.g. max_draft=8, draft_length="heuristic")
    accept:    acceptance rule name (one the method has: `AcceptRules`) or callable; None = the method's
               default for the sampling mode (greedy at temperature 0, else its exact sampling rule)
    temperature, top_k, top_p: sampling (applied identically to target p and draft q); seed for the RNG
    proposer:  an already built Proposer instead of method/params (for experiments); its `accept_rules`
               say which rules it can use
    trace:     keep a StepTrace per step (trees, paths, timings) for notebooks
    memory:    what proposers may learn across calls (`Memory`: α̂, probe schedules, the cost model's
               corrections); None (default) = a fresh one, so every call is independent of the ones before
    on_step:   called after every step as on_step(step index, its StepTrace (None without trace), tokens
               emitted so far) — progress bars, Stop buttons; returning False ends generation there with
               stop_reason "stopped" (the tokens so far are kept). Its own time counts in `seconds`.
    compile:   a `CompiledStep` (`specdec_lab.models.compiled`) verifies every tree with the target's compiled
               body (buckets of padded nodes); True uses the `step` a LoadedModel carries, else builds one for
               this call (it compiles as it goes; build it once, `compiled.compiled_step`, to reuse the graphs).
               Seconds spent compiling are reported as `compile_seconds` and left out of `seconds`. A model
               the step cannot serve warns why and decodes eagerly.
    """
    setup, proposer = Setup.of(model=model, tokenizer=tokenizer, method=method, params=params, proposer=proposer,
                               accept=accept, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id,
                               temperature=temperature, top_k=top_k, top_p=top_p, compile=compile,
                               trace=trace)  # fmt: skip
    ids = setup.prompt_ids(prompt, chat)
    clock = Clock(setup.device, setup.step)
    capacity = min(setup.window, len(ids) + max_new_tokens + 64)
    if setup.step is not None:  # the step's capacity, or the next power of two: a few graphs serve every prompt
        capacity = max(setup.step.capacity, capacity_for(len(ids) + max_new_tokens))
    cache = KVCache.for_model(setup.model, capacity=capacity)
    memory = memory if memory is not None else Memory()
    return setup.open(ids, cache, proposer, setup.generator(seed), memory, clock, on_step=on_step).run()


@dataclass
class Setup:
    """What `generate` checks once per call, before any forward, and what opening a sequence needs: the target,
    the compiled step, the method (a proposer per sequence), its rule for the sampling mode, the feature layers,
    the EOS set, the context window. A batch opens one `Decoding` per prompt from one Setup (`batch.py`)."""

    model: object
    tokenizer: object
    step: CompiledStep | None
    method: str
    params: dict
    rule: Callable[..., Acceptance]
    layers: tuple[int, ...]
    sampling: Sampling
    eos: set[int]
    window: int
    max_new_tokens: int
    trace: bool
    device: torch.device

    @classmethod
    def of(cls, *, model, tokenizer, method, params, proposer, accept, max_new_tokens, eos_token_id, temperature,
           top_k, top_p, compile, trace) -> tuple[Setup, Proposer]:  # fmt: skip
        """`generate`'s arguments, checked (each error names the fix), and the proposer (the one given, or the
        method's, built once here to read the rules and feature layers it has). Keyword-only: thirteen arguments,
        several of one type (three sampling numbers, two flags), are read by name or not at all."""
        if compile is True and isinstance(model, LoadedModel) and model.step is not None:  # loaded compiled
            compile = model.step
        model, tokenizer = unwrap(model, tokenizer)
        step = _compiled(model, compile)
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
        sampling = Sampling(temperature=temperature, top_k=top_k, top_p=top_p)
        if proposer is None:
            spec = get_method(method)
            proposer = make_proposer(method, **params)
            rules, method_name = spec.rules_of(proposer), method
        elif params:
            raise ValueError(f"pass parameters to the proposer you built, not to generate: {', '.join(params)}")
        else:
            rules, method_name = proposer.accept_rules, proposer.name
        # Checked before any forward: a rule that does not fit the method's trees would fail mid-decoding.
        rule = rules.pick(accept, sampling, method_name)
        layers = check_feature_layers(model, proposer.feature_layers)
        eos = set(eos_ids(model, tokenizer, eos_token_id))
        setup = cls(model=model, tokenizer=tokenizer, step=step, method=method_name, params=dict(params), rule=rule,
                    layers=layers, sampling=sampling, eos=eos, window=_context_window(model),
                    max_new_tokens=max_new_tokens, trace=trace, device=next(model.parameters()).device)  # fmt: skip
        return setup, proposer

    def proposer(self) -> Proposer:
        """A fresh proposer of the method: each sequence keeps its own state."""
        return make_proposer(self.method, **self.params)

    def prompt_ids(self, prompt, chat: bool | str = "auto") -> list[int]:
        """A prompt (text or ids) as token ids, with room left to generate in the context window."""
        vocab = self.model.config.get_text_config(decoder=True).vocab_size
        ids = prompt_ids(prompt, self.tokenizer, chat, vocab)
        if len(ids) >= self.window:
            raise ValueError(
                f"prompt has {len(ids)} tokens but the model's context window is {self.window}: "
                "shorten the prompt (no room is left to generate)"
            )
        return ids

    def generator(self, seed: int | None) -> torch.Generator:
        """The sequence's RNG, seeded (a seed reproduces a run) or from torch's own."""
        generator = torch.Generator(device=self.device)
        generator.manual_seed(seed if seed is not None else int(torch.randint(0, 2**62, ()).item()))
        return generator

    def open(self, ids: list[int], cache: KVCache, proposer: Proposer, generator: torch.Generator, memory: Memory,
             clock: Clock, rows: int = 1, prefilled: PrefillOutput | None = None, opened: float | None = None,
             on_step: Callable[[int, StepTrace | None, int], bool | None] | None = None) -> Decoding:  # fmt: skip
        """Prefill `ids` (but the last: the first tree's root) into `cache`, start the proposer, and return the
        sequence ready to step; its prefill seconds run from now (or `opened`) on `clock`. rows: the sequences
        verified together with this one (a batch's size: its steps are priced at t(rows, n)). prefilled: the
        prompt's prefill, done already (a batch prefills its first prompts in one forward). on_step: called after
        each of its steps (`generate`'s on_step)."""
        opened = clock.now() if opened is None else opened
        prompt_out = prefilled or prefill(self.model, cache, torch.tensor(ids[:-1], dtype=torch.long), self.layers)
        step = self.step
        state = DecodeState(tokens=list(ids), prompt_length=len(ids), cache_length=cache.length, max_depth=0,
                            max_nodes=step.max_nodes if step is not None else None, model=self.model, cache=cache,
                            device=self.device, sampling=self.sampling, generator=generator,
                            cost=memory.cost(self.model, step, rows=rows), memory=memory)  # fmt: skip
        proposer.start(state, prompt_out)  # (may measure the cost curve: with a step, compiling its buckets)
        return Decoding(setup=self, proposer=proposer, ids=ids, cache=cache, state=state, clock=clock, on_step=on_step,
                        prefill_seconds=clock.now(drain=True) - opened, opened=opened)  # fmt: skip


def _context_window(model) -> int:
    config = model.config.get_text_config(decoder=True)
    return int(getattr(config, "max_position_embeddings", 1 << 30))


def _compiled(model, compile: bool | CompiledStep) -> CompiledStep | None:
    """The CompiledStep `generate(compile=...)` asks for, or None (eager) with a warning saying why not."""
    if compile is False or compile is None:
        return None
    if compile is not True:
        if compile.model is not model:
            raise ValueError("compile= got a CompiledStep of another model")
        return compile
    try:
        return compiled_step(model)
    except CompileUnavailable as err:
        warnings.warn(f"{err}; decoding eagerly", stacklevel=3)
        return None
