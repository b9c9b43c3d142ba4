"""Backing off where speculation does not pay: cost mode chooses k = 0 (a root-only tree, a plain decoding
step), probes on a growing schedule, and a model draft catches up on the skipped tokens in one forward.

Scenario: a tiny target; a bad draft (another random model: α ≈ 0) and a draft that is the target itself
behind a readout (`Draft.adapter`) that is random until the test drops it (then α = 1). Costs come from a
supplied curve t(n) = 1 + 0.3 (n − 1) seconds, far above the tiny models' real timings, so a draft step is
~free and the rule reads: one draft token pays iff α̂ > 0.3.
"""

from __future__ import annotations

import pytest
import torch

import specdec_lab as S
from specdec_lab.accept import Acceptance
from specdec_lab.cost import CostCurve, StepCost
from specdec_lab.cost.theory import expected_tokens_per_step
from specdec_lab.kv_cache import KVCache
from specdec_lab.memory import Memory
from specdec_lab.models.draft_model import Draft
from specdec_lab.proposers import DecodeState, DraftConfig, DraftProposer, LayerSkipConfig
from specdec_lab.proposers.draft_length import AcceptanceTracker, DraftLength, Probes
from specdec_lab.verify import prefill

PROMPT = [5, 17, 42, 7, 99, 3]
CURVE = CostCurve(sizes=[1, 2, 4, 8, 16], seconds=[1.0, 1.3, 1.9, 3.1, 5.5])  # t(n) = 1 + 0.3 (n − 1)


def curve_only(**kw) -> DraftLength:
    """Cost mode on the supplied curve alone: the loop's timings (real, ~ms) do not correct it."""
    return DraftLength("cost", cost=StepCost.of(CURVE, learn=False), **kw)


def proposer(draft: Draft, probe_every: int = 8, probe_max: int = 64, **config) -> DraftProposer:
    prop = DraftProposer(DraftConfig(draft=draft, max_draft=6, probe_every=probe_every, probe_max=probe_max,
                                     **config))  # fmt: skip
    prop.length = curve_only(k_max=6, probes=Probes(probe_every, probe_max))
    return prop


@pytest.fixture(scope="module")
def target():
    return S.tiny_model(num_layers=2, eos_token_id=None)


@pytest.fixture(scope="module")
def bad_draft():
    return Draft(model=S.tiny_model(num_layers=2, seed=1), vocab=None, name="another random model")


def scrambled_target(target) -> Draft:
    """The target as its own draft, read out through a random H × H map: α ≈ 0 until `adapter = None`."""
    h = target.config.hidden_size
    adapter = torch.randn(h, h, generator=torch.Generator().manual_seed(3)) / h**0.5
    return Draft(model=target, vocab=None, name="scrambled target", adapter=adapter)


# ---- (a) the decision rule --------------------------------------------------------------------------
def rate(alpha: float, k: int, draft_step: float) -> float:
    """Expected tokens per second: E[L + 1](α, k) / (k·t_draft + t(k + 1)); k = 0 gives 1 / t(1)."""
    return expected_tokens_per_step(alpha, k) / (k * draft_step + CURVE(k + 1))


@pytest.mark.parametrize(
    "alpha,draft_step,backs_off",
    [
        (0.1, 0.01, True),  # a poor draft: 1.1 tokens for 1.31 s < 1 token for 1 s
        (0.3, 0.0, True),  # exactly at the threshold (1.3 tokens / 1.3 s): ties go to the shorter draft
        (0.6, 0.2, False),  # 1.6 tokens / 1.5 s: one token pays, two do not (1.96 / 2.0)
        (0.9, 0.01, False),  # a good cheap draft: a long chain
        (0.9, 1.5, True),  # a good draft dearer than a target step never pays
    ],
)
def test_cost_rule_backs_off_where_no_draft_pays(alpha, draft_step, backs_off):
    length = curve_only(k_max=8, tracker=AcceptanceTracker(prior_weight=0.0), probes=Probes(0))
    length.draft_step = draft_step
    length.tracker.set(None, alpha, 100.0)  # α̂ = α
    k = length.choose(available=8)
    assert (k == 0) == backs_off
    best = max(range(9), key=lambda j: (round(rate(alpha, j, draft_step), 12), -j))  # brute force, ties short
    assert k == best
    assert length.choose(available=0) == 0  # nothing to propose (no budget): 0 whatever α̂


# ---- (b) a bad draft through the loop -----------------------------------------------------------------
def test_bad_draft_backs_off_and_stays_exact(target, bad_draft):
    n = 200
    ar = S.generate(target, PROMPT, max_new_tokens=n)
    r = S.generate(target, PROMPT, max_new_tokens=n, proposer=proposer(bad_draft))
    assert r.tokens == ar.tokens
    assert all(step.proposed == step.info["k"] for step in r.steps)  # info records the k chosen
    backed_off = sum(step.proposed == 0 for step in r.steps)
    assert backed_off >= 0.9 * len(r.steps)


def test_backed_off_sampling_is_sampling_from_p(target, bad_draft):
    """k = 0 steps under sampling are the target's own sampling: without probes (probe_every=0) and with α̂
    low from the start, the run draws exactly what autoregressive sampling draws with the same seed."""
    kw = {"max_new_tokens": 40, "temperature": 0.9, "top_p": 0.95, "seed": 7}
    prop = proposer(bad_draft, probe_every=0)
    prop.length.tracker.set(None, 1 / 12, 12.0)  # α̂ = 1/12
    r = S.generate(target, PROMPT, proposer=prop, **kw)
    assert all(step.proposed == 0 for step in r.steps)
    assert r.tokens == S.generate(target, PROMPT, **kw).tokens


# ---- (c) the probe schedule ---------------------------------------------------------------------------
def test_probes_at_doubling_intervals_while_they_fail(target, bad_draft):
    """Backed off, the `interval`-th consecutive k = 0 step is a one-token probe; each failed probe doubles
    the interval (8, 16, 32, 64) up to probe_max (64)."""
    r = S.generate(target, PROMPT, max_new_tokens=260, proposer=proposer(bad_draft, probe_every=8, probe_max=64))
    info = [step.info for step in r.steps]
    probes = [i for i, x in enumerate(info) if x["probe"]]
    assert all(info[i]["k"] == 1 and r.steps[i].accepted == 0 for i in probes)  # one token, rejected
    start = next(i for i, x in enumerate(info) if x["k"] == 0)  # backed off (after a failure or two)
    assert all(x["k"] == 0 or x["probe"] for x in info[start:])  # from then on only probes draft
    assert probes[0] - start == 7  # the 8th consecutive k = 0 choice is the first probe
    gaps = [b - a for a, b in zip(probes, probes[1:], strict=False)]  # steps from one probe to the next
    assert len(gaps) >= 4 and gaps == [min(16 * 2**i, 64) for i in range(len(gaps))]


def test_probe_outcome_sets_the_wait():
    length = curve_only(k_max=4, probes=Probes(2, 8))
    length.draft_step = 10.0  # a 10 s draft step: k* = 0 always

    def wait_for_probe(accepted: int) -> int:
        for steps in range(1, 100):
            if length.choose(available=4):
                length.observe(None, 1, accepted)
                return steps

    assert [wait_for_probe(0) for _ in range(5)] == [2, 4, 8, 8, 8]  # failed probes: doubling, capped
    assert [wait_for_probe(1) for _ in range(2)] == [8, 2]  # an accepted probe resets the wait


def test_improving_draft_is_probed_back_into_use(target):
    """A draft useless until step `switch`, then perfect (the text 'turned predictable'): a later probe is
    accepted, α̂ recovers, cost mode drafts long chains again — and the output is still autoregressive's."""

    class Improves(DraftProposer):
        def __init__(self, switch: int, base: DraftProposer):
            super().__init__(base.config)
            self.length, self.switch, self.steps = base.length, switch, 0

        def update(self, state, tree, acceptance, output):
            super().update(state, tree, acceptance, output)
            self.steps += 1
            if self.steps == self.switch:
                self.draft.adapter = None  # identity readout: the draft is the target itself

    n, switch = 300, 40
    prop = Improves(switch, proposer(scrambled_target(target), probe_every=8, probe_max=64))
    r = S.generate(target, PROMPT, max_new_tokens=n, proposer=prop)
    assert r.tokens == S.generate(target, PROMPT, max_new_tokens=n).tokens
    info = [step.info for step in r.steps]
    assert all(x["k"] in (0, 1) for x in info[:switch])  # bad: backed off but for probes
    assert sum(x["k"] == 0 for x in info[:switch]) >= switch - 8
    resumed = next(i for i in range(switch, len(info)) if info[i]["k"] >= 1 and not info[i]["probe"])
    assert resumed - switch <= 64 + 2  # within one (capped) wait and the probe that brings it back
    late = r.steps[-25:-5]  # (the last steps are cut short by the token budget)
    assert min(step.proposed for step in late) >= 3 and sum(step.accepted for step in late) / len(late) >= 3


# ---- (d) the draft's cache catches up in one forward ----------------------------------------------------
def test_catch_up_after_backing_off_is_one_forward_and_exact(target, bad_draft):
    prop = proposer(bad_draft, probe_every=6, probe_max=6)
    state = DecodeState(tokens=list(PROMPT), prompt_length=len(PROMPT), cache_length=len(PROMPT) - 1,
                        max_depth=50, model=target)  # fmt: skip
    prop.start(state)
    prop.length.tracker.set(None, 1 / 12, 12.0)  # α̂ = 1/12: backed off from the first step
    fed: list[int] = []  # tokens of each draft forward
    body = bad_draft.model.get_decoder()
    hook = body.register_forward_hook(lambda mod, args, kwargs, out: fed.append(kwargs["input_ids"].shape[-1]),
                                      with_kwargs=True)  # fmt: skip
    gen = torch.Generator().manual_seed(0)
    try:
        for _stretch in range(3):  # three backed-off stretches, each ended by a probe
            seen = prop.seen
            for _ in range(5):  # backed off: root-only trees, the draft does not run
                tree = prop.propose(state)
                assert len(tree) == 1 and prop.info()["k"] == 0
                acc = Acceptance(path=[0], bonus=int(torch.randint(0, 256, (), generator=gen)))
                state.tokens.append(acc.bonus)
                prop.update(state, tree, acc, None)
            assert fed == [] and prop.seen == seen  # the gap grew by 5 tokens, nothing ran
            tree = prop.propose(state)  # the probe: catch up on every unseen token and draft one
            gap = len(state.tokens) - seen
            assert {key: prop.info()[key] for key in ("k", "probe", "fed")} == {"k": 1, "probe": True, "fed": gap}
            assert fed == [gap]  # ONE forward of the root + the 5 skipped tokens
            fed.clear()
            acc = Acceptance(path=[0], bonus=int(torch.randint(0, 256, (), generator=gen)))  # rejected
            state.tokens.append(acc.bonus)
            prop.update(state, tree, acc, None)
            assert prop.seen == prop.cache.length == len(state.tokens) - 1

            # the caught-up cache equals a fresh recompute of the draft on the same tokens
            fresh = KVCache.for_model(bad_draft.model, capacity=64)
            prefill(bad_draft.model, fresh, torch.tensor(state.tokens[: prop.seen]))
            for mine, ref in zip(prop.cache.layers, fresh.layers, strict=True):
                torch.testing.assert_close(mine.keys, ref.keys, atol=1e-5, rtol=1e-5)
                torch.testing.assert_close(mine.values, ref.values, atol=1e-5, rtol=1e-5)
            with torch.inference_mode():
                cached = prop._step(state.tokens[prop.seen :])  # (V,) next-token logits from the cache
            prop.cache.rollback()
            want = bad_draft.logits(torch.tensor([state.tokens]))[0, -1]  # (V,) from scratch
            torch.testing.assert_close(cached, want, atol=1e-4, rtol=1e-4)
            fed.clear()
    finally:
        hook.remove()


def test_probe_schedule_is_configurable():
    assert DraftProposer(DraftConfig(probe_every=4, probe_max=32)).length.probes.most == 32
    layer_skip = S.make_proposer("layer_skip", probe_every=0)
    assert layer_skip.length.probes.every == 0 and LayerSkipConfig().probe_max == 128
    with pytest.raises(ValueError, match="probe_every"):
        DraftConfig(probe_every=32, probe_max=16)
    with pytest.raises(ValueError, match="probe_every"):
        DraftConfig(probe_every=-1)


# ---- (e) α̂ carried across calls in a Memory; no draft prefill while backed off ----------------------
def test_alpha_is_carried_in_memory_and_backed_off_calls_skip_the_draft_prefill(target):
    """A bad draft learned in one call: the next call given the same Memory is backed off from its first
    step, and its draft runs only for probes — the prompt is never prefilled into the draft before then.
    Without the Memory (the default) the next call re-learns from the prior (it drafts at step 0)."""
    draft = Draft(model=S.tiny_model(num_layers=2, seed=1), vocab=None, name="another random model")
    mem = Memory()
    first = S.generate(target, PROMPT, max_new_tokens=60, proposer=proposer(draft), memory=mem)
    assert first.steps[0].info["k"] >= 1  # the prior α̂ = 0.5: it tries the draft first
    slot = mem.slot("draft:another random model")
    assert slot["tracker"].alpha(None) < 0.3
    slot["probes"].interval, slot["probes"].idle = 8, 0  # (the first call's failed probes had doubled it)

    fed: list[int] = []
    hook = draft.model.get_decoder().register_forward_hook(
        lambda mod, args, kwargs, out: fed.append(kwargs["input_ids"].shape[-1]), with_kwargs=True
    )
    try:
        again = S.generate(target, PROMPT, max_new_tokens=20, proposer=proposer(draft, probe_every=8), memory=mem)
    finally:
        hook.remove()
    assert again.tokens == S.generate(target, PROMPT, max_new_tokens=20).tokens
    info = [step.info for step in again.steps]
    assert all(x["k"] == 0 for x in info[:7]) and info[7]["probe"]  # backed off from step 0; first probe
    assert fed[0] == len(PROMPT) + 7  # the probe's forward is the draft's first: prompt + 7 emitted tokens

    assert again.steps[7].accepted == 0 and slot["probes"].interval == 16  # the failed probe doubled it
    waited = slot["probes"].idle  # backed-off steps since that probe: the next call goes on counting
    third = S.generate(target, PROMPT, max_new_tokens=12, proposer=proposer(draft, probe_every=8), memory=mem)
    assert [s.info["probe"] for s in third.steps].index(True) == 16 - waited - 1  # the schedule carried over

    fresh = S.generate(target, PROMPT, max_new_tokens=5, proposer=proposer(draft))
    assert fresh.steps[0].info["k"] >= 1  # without memory: the prior again


# ---- (e) resuming needs evidence: a lower confidence bound on α ----------------------------------------
@pytest.mark.parametrize("z,probes_to_resume", [(0.0, 1), (1.0, 3)])
def test_backed_off_rule_resumes_at_the_bound(z, probes_to_resume):
    """Backed off after rejections, accepted probes resume drafting: the first one already with z = 0 (the
    flapping the bound removes), only a run of them with z = 1 (three: the tracker remembers ~10 observations,
    the rejections among them). Each accepted probe resets the wait."""
    length = curve_only(k_max=4, probes=Probes(2, 8), resume_z=z)
    length.draft_step = 0.0  # one token pays iff α > 0.3 (module docstring)
    for _ in range(6):  # drafting fails: α̂ falls, the rule backs off
        k = length.choose(available=4)
        length.observe(None, k, 0)
    assert length.backed_off
    probes = 0
    for _ in range(40):
        k = length.choose(available=4)
        if k and not length.probing:
            break  # the rule itself drafts again
        if k:
            probes += 1
            length.observe(None, k, k)  # the probe's token is accepted
    assert probes == probes_to_resume and not length.backed_off
    assert length.probes.interval == length.probes.every
