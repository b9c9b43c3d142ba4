"""The loop's central equivalences and its edge cases, on tiny random models.

Every exact method's greedy output must equal autoregressive greedy decoding token for token.
"""

import pytest
import torch

from specdec_lab import Tree, generate, tiny_model
from specdec_lab.accept import GREEDY_ONLY
from specdec_lab.proposers import Proposer


def hf_greedy(model, ids, n):
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([ids], device=model.device),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long, device=model.device),
            max_new_tokens=n,
            do_sample=False,
            pad_token_id=0,
        )
    return out[0, len(ids) :].tolist()


def repetitive_prompt(seed, length=40, period=7):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(0, 256, (period,), generator=g).tolist()
    return (base * (length // period + 1))[:length]


class OracleTreeProposer(Proposer):
    """Knows the true greedy continuation; proposes a branching tree hiding it among wrong siblings.

    It exercises every tree code path (non-chain masks, keep() of a non-contiguous path, depth truncation).
    """

    name = "oracle_tree"
    accept_rules = GREEDY_ONLY  # branching trees: no chain sampling rule fits

    def __init__(self, reference: list[int], prompt_length: int, depth: int = 4, wrong_branch_first: bool = True):
        self.reference, self.prompt_length, self.depth = reference, prompt_length, depth
        self.wrong_branch_first = wrong_branch_first

    def propose(self, state):
        done = len(state.tokens) - self.prompt_length
        truth = self.reference[done : done + self.depth]
        tokens, parents = [state.root], [-1]
        prev = 0
        for d, tok in enumerate(truth):
            wrong = (tok + 1 + d) % 256
            # a wrong sibling (with a wrong child of its own) before the right node
            order = [wrong, tok] if self.wrong_branch_first else [tok, wrong]
            for t in order:
                tokens.append(t)
                parents.append(prev)
                if t == tok:
                    right = len(tokens) - 1
                else:
                    tokens.append((t + 3) % 256)
                    parents.append(len(tokens) - 2)
            prev = right
        return Tree(tokens, parents)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_autoregressive_equals_hf_generate(device, seed):
    model = tiny_model(seed=seed, device=device)
    ids = torch.randint(0, 256, (15,), generator=torch.Generator().manual_seed(seed)).tolist()
    res = generate(model, ids, max_new_tokens=40)
    assert res.tokens == hf_greedy(model, ids, 40)
    assert res.mean_accepted == 1.0 and res.forwards == 40 and res.stop_reason == "max_new_tokens"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("draft_length", [3, "heuristic", "cost"])
def test_prompt_lookup_equals_autoregressive(device, seed, draft_length):
    model = tiny_model(seed=seed, device=device)
    ids = repetitive_prompt(seed)
    ref = generate(model, ids, max_new_tokens=60)
    res = generate(model, ids, method="prompt_lookup", max_new_tokens=60, draft_length=draft_length)
    assert res.tokens == ref.tokens
    if draft_length == 3:
        assert any(s.proposed > 0 for s in res.steps)  # it really speculated


@pytest.mark.parametrize("seed", [0, 5])
@pytest.mark.parametrize("wrong_first", [True, False])
def test_branching_tree_equals_autoregressive(device, seed, wrong_first):
    model = tiny_model(seed=seed, device=device)
    ids = torch.randint(0, 256, (10,), generator=torch.Generator().manual_seed(seed)).tolist()
    ref = generate(model, ids, max_new_tokens=30).tokens
    res = generate(model, ids, max_new_tokens=30, proposer=OracleTreeProposer(ref, len(ids), 4, wrong_first))
    assert res.tokens == ref
    assert res.forwards == 6  # 5 tokens per step: 4 accepted + bonus
    assert any(s.path != list(range(len(s.path))) for s in res.steps)  # non-contiguous paths were kept


@pytest.mark.parametrize("max_new", [1, 2, 5, 7, 13])
def test_max_new_tokens_exact(max_new):
    model = tiny_model(seed=1)
    ids = list(range(30, 42))
    ref = generate(model, ids, max_new_tokens=40).tokens
    res = generate(model, ids, max_new_tokens=max_new, proposer=OracleTreeProposer(ref, len(ids), depth=6))
    assert res.tokens == ref[:max_new] and res.stop_reason == "max_new_tokens"
    emitted_before = 0
    for step in res.steps:  # no tree deeper than the tokens still allowed (a path emits depth + 1 tokens)
        assert Tree(step.tree_tokens, step.tree_parents).max_depth <= max_new - emitted_before - 1
        emitted_before += len(step.emitted)


@pytest.mark.parametrize("eos_position", [0, 2, 3, 9])
def test_eos_inside_accepted_path_stops(eos_position):
    model = tiny_model(seed=2)
    ids = list(range(50, 60))
    ref = generate(model, ids, max_new_tokens=20).tokens
    eos = ref[eos_position]
    first = ref.index(eos)  # the first occurrence is where decoding must stop
    res = generate(model, ids, max_new_tokens=20, eos_token_id=eos, proposer=OracleTreeProposer(ref, len(ids), 5))
    assert res.tokens == ref[: first + 1] and res.stop_reason == "eos"
    ar = generate(model, ids, max_new_tokens=20, eos_token_id=eos)
    assert ar.tokens == res.tokens


def test_context_window_stops_generation():
    model = tiny_model(max_position_embeddings=64)
    res = generate(model, list(range(1, 60)), method="prompt_lookup", max_new_tokens=20)
    assert len(res.tokens) == 64 - 59 and res.stop_reason == "context"


def test_trace_fields():
    model = tiny_model()
    res = generate(model, repetitive_prompt(0), method="prompt_lookup", max_new_tokens=20, draft_length=4)
    step = res.steps[0]
    assert step.tree_tokens[0] == res.prompt_tokens[-1]
    assert step.t_verify > 0 and {"ngram", "k"} <= set(step.info)
    assert sum(len(s.emitted) for s in res.steps) == len(res.tokens)
    assert res.summary()["new_tokens"] == 20


# ---- clear errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prompt": []}, "prompt is empty"),
        ({"prompt": "   "}, "prompt is empty"),
        ({"prompt": "hello"}, "needs a tokenizer"),
        ({"prompt": [1] * 600}, "context window is 512"),
        ({"prompt": [1, 2, 999]}, "outside the vocabulary"),
        ({"prompt": [1, 2], "method": "medusa_typo"}, "unknown method 'medusa_typo'"),
        ({"prompt": [1, 2], "method": "prompt_lookup", "max_draftt": 3}, "no parameter.*max_draftt"),
        ({"prompt": [1, 2], "method": "prompt_lookup", "max_draft": 0}, "max_draft must be >= 1"),
        ({"prompt": [1, 2], "method": "prompt_lookup", "draft_length": "fast"}, "draft_length must be"),
        ({"prompt": [1, 2], "method": "autoregressive", "max_draft": 3}, "takes no parameters"),
        ({"prompt": [1, 2], "max_new_tokens": 0}, "max_new_tokens must be a positive integer"),
        ({"prompt": [1, 2], "accept": "nope"}, "unknown acceptance rule"),
        ({"prompt": [1, 2], "temperature": -1.0}, "temperature must be"),
    ],
)
def test_bad_input_errors(kwargs, message):
    model = tiny_model()
    with pytest.raises(ValueError, match=message):
        generate(model, **kwargs)


def test_proposer_with_wrong_root_is_reported():
    class Broken(Proposer):
        def propose(self, state):
            return Tree.chain(state.root + 1, [1])

    with pytest.raises(RuntimeError, match="root"):
        generate(tiny_model(), [1, 2, 3], proposer=Broken())


def test_setup_takes_its_arguments_by_name():
    """`Setup.of`'s thirteen arguments are keyword-only: a positional call is refused, a named one works."""
    from specdec_lab.generate import Setup

    model = tiny_model()
    args = [model, None, "autoregressive", {}, None, None, 4, None, 0.0, None, None, False, True]
    with pytest.raises(TypeError, match="positional"):
        Setup.of(*args)
    names = ["model", "tokenizer", "method", "params", "proposer", "accept", "max_new_tokens", "eos_token_id",
             "temperature", "top_k", "top_p", "compile", "trace"]  # fmt: skip
    setup, proposer = Setup.of(**dict(zip(names, args, strict=True)))
    assert setup.method == proposer.name == "autoregressive" and setup.max_new_tokens == 4
