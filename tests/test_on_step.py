"""generate's on_step hook: it sees every step, can stop the loop, and changes nothing when it returns None."""

import pytest

from specdec_lab import generate, tiny_model

IDS = [5, 7, 9, 11, 13, 2, 3] * 6


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def test_hook_sees_every_step(model):
    seen = []
    r = generate(model, IDS, method="prompt_lookup", draft_length=3, max_new_tokens=20,
                 on_step=lambda i, trace, n: seen.append((i, trace, n)))  # fmt: skip
    assert [i for i, _, _ in seen] == list(range(len(r.steps))) == list(range(r.forwards))
    assert [t for _, t, _ in seen] == r.steps
    emitted = [len(s.emitted) for s in r.steps]
    assert [n for _, _, n in seen] == [sum(emitted[: i + 1]) for i in range(len(emitted))]
    assert r.stop_reason == "max_new_tokens"


def test_hook_without_trace_gets_none(model):
    seen = []
    generate(model, IDS, max_new_tokens=5, trace=False, on_step=lambda i, trace, n: seen.append(trace))
    assert seen == [None] * 5


def test_stop_after_three_steps_keeps_the_tokens(model):
    full = generate(model, IDS, max_new_tokens=20)
    r = generate(model, IDS, max_new_tokens=20, on_step=lambda i, trace, n: i < 2)  # False after step 2
    assert r.stop_reason == "stopped"
    assert len(r.steps) == r.forwards == 3
    assert r.tokens == full.tokens[:3]


def test_stop_on_the_last_step_is_not_a_stop(model):
    r = generate(model, IDS, max_new_tokens=4, on_step=lambda i, trace, n: False if n >= 4 else None)
    assert r.stop_reason == "max_new_tokens" and len(r.tokens) == 4


@pytest.mark.parametrize("method,params", [("autoregressive", {}), ("prompt_lookup", {"draft_length": 3})])
def test_hook_returning_none_changes_nothing(model, method, params):
    plain = generate(model, IDS, method=method, max_new_tokens=24, **params)
    hooked = generate(model, IDS, method=method, max_new_tokens=24, on_step=lambda *a: None, **params)
    assert hooked.tokens == plain.tokens and hooked.stop_reason == plain.stop_reason
    assert [s.path for s in hooked.steps] == [s.path for s in plain.steps]
