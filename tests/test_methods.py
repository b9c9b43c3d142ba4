"""Methods own their acceptance rules; non-candidate nodes; registered methods (generate and the bench CLI);
layer features from the verify forward. All on tiny random models.
"""

import json
from dataclasses import dataclass

import pytest
import torch

from specdec_lab import KVCache, MalformedTreeError, Tree, generate, prefill, tiny_model, verify_tree
from specdec_lab.accept import GREEDY_ONLY
from specdec_lab.bench import register_anchor
from specdec_lab.bench.__main__ import main as bench_main
from specdec_lab.generate import METHODS, make_proposer, register_method
from specdec_lab.proposers import Proposer


@pytest.fixture(scope="module")
def model():
    return tiny_model(seed=3)


def repetitive_prompt(seed, length=30, period=6):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(1, 256, (period,), generator=g).tolist()
    return (base * (length // period + 1))[:length]


def count_body_calls(model):
    """Count decoder-body forwards (every prefill and verify goes through it); returns (calls, handle)."""
    calls = []
    handle = model.get_decoder().register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(kwargs), with_kwargs=True
    )
    return calls, handle


class TreeProposer(Proposer):
    """Proposes a branching tree (two children of the root): only greedy acceptance fits it."""

    name = "two_children"
    accept_rules = GREEDY_ONLY

    def propose(self, state):
        return Tree([state.root, 1, 2], [-1, 0, 0])


class OracleWithJunk(Proposer):
    """The true greedy continuation as a candidate chain, plus nodes verified but never accepted.

    The junk is built to be tempting: a non-candidate copy of the right token placed before the right
    node (with a child of its own), and a non-candidate node holding the *correct* next token under the
    chain's last node. A rule that ignored `candidate` would accept them. The candidates form a chain, so
    the chain rules fit (sampling included).
    """

    name = "oracle_junk"

    def __init__(self, reference, prompt_length, depth=3):
        self.reference, self.prompt_length, self.depth = reference, prompt_length, depth

    def propose(self, state):
        done = len(state.tokens) - self.prompt_length
        truth = self.reference[done : done + self.depth + 1]
        chain, beyond = truth[: self.depth], truth[self.depth :]
        tokens, parents, cand = [state.root], [-1], [True]
        if chain:  # the decoy copy of the first right token, and a child of it
            tokens += [chain[0], (chain[0] + 7) % 256]
            parents += [0, 1]
            cand += [False, False]
        prev = 0
        for tok in chain:
            tokens.append(tok)
            parents.append(prev)
            cand.append(True)
            prev = len(tokens) - 1
        for tok in beyond:  # the right next token, but not a candidate
            tokens.append(tok)
            parents.append(prev)
            cand.append(False)
        return Tree(tokens, parents, candidate=cand)


# ---- 1. a method owns its acceptance rules -----------------------------------------------------------
def test_rules_that_do_not_fit_the_method_fail_before_any_forward(model):
    calls, handle = count_body_calls(model)
    try:
        with pytest.raises(ValueError, match=r"method 'two_children' cannot sample.*its rules: greedy"):
            generate(model, [1, 2, 3], proposer=TreeProposer(), temperature=1.0)
        with pytest.raises(ValueError, match=r"'two_children' cannot use acceptance rule 'speculative'.*: greedy$"):
            generate(model, [1, 2, 3], proposer=TreeProposer(), accept="speculative")
        with pytest.raises(ValueError, match="unknown acceptance rule 'nope'"):
            generate(model, [1, 2, 3], proposer=TreeProposer(), accept="nope")
    finally:
        handle.remove()
    assert calls == []  # refused up front, not deep inside chain_nodes
    assert len(generate(model, [1, 2, 3], max_new_tokens=3, proposer=TreeProposer()).tokens) == 3


@pytest.fixture
def registered():
    """register_method, with every name it registered removed again after the test."""
    names = []

    def register(name, *args, **kwargs):
        names.append(name)
        register_method(name, *args, **kwargs)
        return name

    yield register
    for name in names:
        METHODS.pop(name, None)


def test_registry_entry_rules_override_the_proposers(model, registered):
    registered("ar_no_sampling", Proposer, rules=GREEDY_ONLY)
    with pytest.raises(ValueError, match="method 'ar_no_sampling' cannot sample"):
        generate(model, [1, 2, 3], method="ar_no_sampling", temperature=0.7)
    greedy = generate(model, [1, 2, 3], method="ar_no_sampling", max_new_tokens=4)
    assert greedy.method == "ar_no_sampling"
    assert greedy.tokens == generate(model, [1, 2, 3], max_new_tokens=4).tokens
    # the built-in chain methods keep greedy + exact speculative sampling
    sampled = generate(model, [1, 2, 3], method="autoregressive", temperature=0.7, seed=1, max_new_tokens=4)
    assert len(sampled.tokens) == 4


# ---- 2. nodes verified but never accepted -----------------------------------------------------------
@pytest.mark.parametrize("max_new", [7, 20])
def test_non_candidate_nodes_are_never_accepted_and_counted_apart(model, max_new):
    ids = list(range(40, 52))
    ref = generate(model, ids, max_new_tokens=max_new).tokens
    res = generate(model, ids, max_new_tokens=max_new, proposer=OracleWithJunk(ref, len(ids), depth=3))
    assert res.tokens == ref  # greedy output is still autoregressive's
    assert res.forwards == -(-max_new // 4)  # every step: the 3 candidates accepted + bonus
    for step in res.steps:
        tree = step.tree
        assert tree.candidate is not None and all(tree.candidate[step.path].tolist())
        assert step.proposed == int(tree.candidate[1:].sum()) and step.accepted == step.proposed
        assert step.extra == len(tree) - 1 - step.proposed
    first = res.steps[0]
    assert (first.proposed, first.extra) == (3, 3)  # decoy + its child + the correct token beyond the chain


def test_non_candidate_nodes_with_the_chain_sampling_rule(model):
    ids = list(range(60, 70))
    ref = generate(model, ids, max_new_tokens=12).tokens
    res = generate(model, ids, max_new_tokens=12, proposer=OracleWithJunk(ref, len(ids)), temperature=1.0, seed=0)
    assert len(res.tokens) == 12
    for step in res.steps:
        assert all(step.tree.candidate[step.path].tolist())  # chain_nodes walks candidates only


def test_trace_without_candidate_flags_counts_every_node_as_proposed(model):
    ids = repetitive_prompt(0)
    res = generate(model, ids, method="prompt_lookup", max_new_tokens=10, draft_length=3)
    assert all(s.tree_candidate is None and s.extra == 0 for s in res.steps)
    assert any(s.proposed == 3 for s in res.steps)


@pytest.mark.parametrize(
    "candidate, message",
    [
        ([False, True, True], "root .* must be a candidate"),
        ([True, False, True], "node 2 is a candidate but its parent 1"),
    ],
)
def test_candidates_must_form_a_subtree_at_the_root(candidate, message):
    with pytest.raises(MalformedTreeError, match=message):
        Tree([5, 6, 7], [-1, 0, 1], candidate=candidate)


# ---- registered methods run by name in generate and in the bench CLI --------------------------------
@dataclass
class EchoConfig:
    k: int = 2  # longest chain proposed


class EchoProposer(Proposer):
    """Proposes the k tokens that followed the previous occurrence of the root (a one-token prompt lookup)."""

    name = "echo"

    def __init__(self, config: EchoConfig):
        self.k = config.k

    def propose(self, state):
        tokens = state.tokens
        for j in range(len(tokens) - 2, -1, -1):
            if tokens[j] == state.root:
                follow = tokens[j + 1 : j + 1 + min(self.k, state.max_depth)]
                return Tree.chain(state.root, follow) if follow else Tree.root(state.root)
        return Tree.root(state.root)


@pytest.fixture
def echo_method(registered):
    return registered("echo", EchoProposer, EchoConfig)


def test_registered_method_runs_through_generate(model, echo_method):
    ids = repetitive_prompt(1)
    ref = generate(model, ids, max_new_tokens=16)
    res = generate(model, ids, method=echo_method, k=3, max_new_tokens=16)
    assert res.tokens == ref.tokens and res.method == "echo"
    assert any(s.proposed > 0 for s in res.steps)
    with pytest.raises(ValueError, match="method 'echo' has no parameter.*kk"):
        make_proposer("echo", kk=3)


def test_registry_names_are_checked():
    with pytest.raises(ValueError, match="without ',', ':'"):
        register_method("echo:2", EchoProposer, EchoConfig)
    with pytest.raises(ValueError, match="already a method of our loop"):
        register_anchor("autoregressive", lambda model, eos_ids: None)


def write_tiny_model_folder(folder, model):
    """An HF folder `load_model` reads: the tiny model and a word-level tokenizer of its 256 ids."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model.save_pretrained(folder)
    words = Tokenizer(models.WordLevel({"[UNK]": 0, **{f"w{i}": i for i in range(1, 256)}}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]").save_pretrained(folder)


def test_registered_method_runs_by_name_from_the_bench_cli(model, echo_method, tmp_path, capsys):
    folder = tmp_path / "tiny"
    write_tiny_model_folder(folder, model)
    prompts = tmp_path / "q.jsonl"
    lines = [
        {"question_id": q, "category": "rep", "turns": [" ".join(f"w{t}" for t in repetitive_prompt(q, 18))]}
        for q in (1, 2)
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "r.json"
    args = ["--model", str(folder), "--prompts", str(prompts), "--max-new-tokens", "8", "--linear", "stock",
            "--warmup-tokens", "2", "--out", str(out), "--no-progress"]  # fmt: skip

    assert bench_main([*args, "--methods", "nope"]) == 2
    assert "echo" in capsys.readouterr().err  # listed among the known methods
    assert bench_main([*args, "--methods", "autoregressive,echo:k=x"]) == 2  # its config types are checked
    assert "echo:k=x" in capsys.readouterr().err
    assert bench_main([*args, "--methods", "autoregressive,echo:k=3"]) == 0
    results = json.loads(out.read_text())
    assert results["methods"] == ["autoregressive", "echo:k=3"]
    echo = results["summary"]["echo:k=3"]
    assert echo["prompts"] == 2 and echo["identical_to_autoregressive"] == 1.0
    assert echo["mean_accepted"] >= 1.0


# ---- 3. layer features from the verify forward ------------------------------------------------------
LAYERS = (0, 2, 4)  # embeddings, the output of layer 2, the last layer (after the final norm)
# A cached tree forward and a cache-free full forward sum in different orders: fp32 rounding, not logic.
# (init_std=0.25 makes activations large; a wrong row or position differs by O(1).)
TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.fixture(scope="module")
def deep_model():
    return tiny_model(num_layers=4, seed=7)


def reference_states(model, ids):
    """(n, F, H) hidden states of LAYERS for `ids` from a separate, cache-free output_hidden_states forward."""
    with torch.inference_mode():
        out = model(torch.tensor([ids]), output_hidden_states=True)
    return torch.stack([out.hidden_states[layer][0] for layer in LAYERS], dim=1)


def test_prefill_and_chain_features_equal_a_full_forward(deep_model):
    prompt = list(range(20, 32))
    draft = [7, 99, 3, 41]
    cache = KVCache.for_model(deep_model, capacity=64)
    pre = prefill(deep_model, cache, torch.tensor(prompt[:-1]), LAYERS)
    out = verify_tree(deep_model, cache, Tree.chain(prompt[-1], draft), LAYERS)
    ref = reference_states(deep_model, prompt + draft)  # (n, F, H)
    assert pre.features.shape == (len(prompt) - 1, len(LAYERS), 64)
    torch.testing.assert_close(pre.features, ref[: len(prompt) - 1], **TOL)
    torch.testing.assert_close(out.features, ref[len(prompt) - 1 :], **TOL)
    torch.testing.assert_close(out.features[:, -1], out.hidden)  # the last index is the normed state


def test_branching_tree_features_equal_per_path_forwards(deep_model):
    prompt = list(range(100, 110))
    #        0
    #      /   \
    #     1     2        node 3 has a non-candidate child (features are computed for every node)
    #    / \     \
    #   3   4     5
    #   |
    #   6
    tree = Tree([prompt[-1], 11, 12, 13, 14, 15, 16], [-1, 0, 0, 1, 1, 2, 3],
                candidate=[True, True, True, True, True, True, False])  # fmt: skip
    cache = KVCache.for_model(deep_model, capacity=64)
    prefill(deep_model, cache, torch.tensor(prompt[:-1]))
    out = verify_tree(deep_model, cache, tree, LAYERS)
    assert out.features.shape == (len(tree), len(LAYERS), 64)
    for node in range(len(tree)):
        path = tree.tokens[tree.path_to(node)].tolist()  # root first
        ref = reference_states(deep_model, prompt[:-1] + path)[-1]  # (F, H) at the node's position
        torch.testing.assert_close(out.features[node], ref, **TOL)


class FeatureSpy(Proposer):
    """Reads layer features from the loop: what start() and update() receive."""

    name = "feature_spy"

    def __init__(self, layers):
        self.feature_layers = layers
        self.prompt = None
        self.outputs = []

    def start(self, state, prompt=None):
        self.prompt = prompt

    def propose(self, state):
        return Tree.chain(state.root, [5, 6])

    def update(self, state, tree, acceptance, output):
        self.outputs.append(output)


def test_generate_hands_features_to_the_proposer_from_the_same_forwards(deep_model):
    ids = list(range(30, 40))
    spy = FeatureSpy(LAYERS)
    calls, handle = count_body_calls(deep_model)
    try:
        res = generate(deep_model, ids, max_new_tokens=3, proposer=spy)
    finally:
        handle.remove()
    assert len(calls) == 1 + res.forwards  # prefill + one forward per step: no second target call
    ref = reference_states(deep_model, ids + [5, 6])
    torch.testing.assert_close(spy.prompt.features, ref[: len(ids) - 1], **TOL)
    torch.testing.assert_close(spy.outputs[0].features, ref[len(ids) - 1 :], **TOL)


def test_no_feature_layers_costs_nothing(deep_model):
    spy = FeatureSpy(())
    calls, handle = count_body_calls(deep_model)
    try:
        generate(deep_model, [1, 2, 3, 4], max_new_tokens=3, proposer=spy)
    finally:
        handle.remove()
    assert spy.prompt.features is None and all(o.features is None for o in spy.outputs)
    assert not any(kw.get("output_hidden_states") for kw in calls)  # the model recorded nothing extra


def test_one_token_prompt_gives_empty_prompt_features(deep_model):
    spy = FeatureSpy(LAYERS)
    generate(deep_model, [9], max_new_tokens=2, proposer=spy)
    assert spy.prompt.hidden.shape == (0, 64) and spy.prompt.features.shape == (0, len(LAYERS), 64)


@pytest.mark.parametrize("layers", [(5,), (-1,), (1, 9)])
def test_bad_feature_layers_are_a_clear_error(deep_model, layers):
    with pytest.raises(ValueError, match=r"not hidden-state indices of this 4-layer model: use 0\.\.4"):
        generate(deep_model, [1, 2, 3], proposer=FeatureSpy(layers))
