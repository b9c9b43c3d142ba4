"""KV cache equivalences: keep(path) then forward == recompute from scratch; tree logits == chain logits."""

import pytest
import torch

from specdec_lab import KVCache, Tree, prefill, tiny_model, verify_tree


def full_logits(model, ids):
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids], device=model.device)).logits[0].float()  # (T, V)


@pytest.mark.parametrize("seed", [0, 1])
def test_tree_logits_equal_each_path_run_alone(device, seed):
    """Every node's logits from one tree forward equal the logits of its path run as plain context."""
    model = tiny_model(seed=seed, device=device)
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, 256, (12,), generator=g).tolist()
    tree = Tree([prompt[-1], 5, 6, 7, 8, 9, 10], [-1, 0, 0, 1, 1, 2, 3])
    cache = KVCache.for_model(model, capacity=8)  # small: forces the buffer to grow
    prefill(model, cache, torch.tensor(prompt[:-1]))
    out = verify_tree(model, cache, tree)
    for node in range(len(tree)):
        path = tree.path_to(node)
        ref = full_logits(model, prompt[:-1] + tree.tokens[path].tolist())[-1]
        torch.testing.assert_close(out.logits[node], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("path", [[0], [0, 1], [0, 1, 3], [0, 1, 3, 6], [0, 2, 5], [0, 1, 4]])
def test_keep_path_then_forward_equals_recompute(device, path):
    model = tiny_model(seed=3, device=device)
    prompt = list(range(20, 35))
    tree = Tree([prompt[-1], 40, 41, 42, 43, 44, 45], [-1, 0, 0, 1, 1, 2, 3])
    cache = KVCache.for_model(model)
    prefill(model, cache, torch.tensor(prompt[:-1]))
    verify_tree(model, cache, tree)
    cache.keep(path)
    assert cache.length == len(prompt) - 1 + len(path)
    accepted = prompt[:-1] + tree.tokens[path].tolist()
    # the kept K/V equal a fresh prefill of the accepted sequence, slot by slot
    fresh = KVCache.for_model(model)
    prefill(model, fresh, torch.tensor(accepted))
    for kept, ref in zip(cache.layers, fresh.layers, strict=True):
        torch.testing.assert_close(kept.keys, ref.keys, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(kept.values, ref.values, rtol=1e-4, atol=1e-5)
    # and one more forward on top of the kept cache equals recomputing everything
    nxt = Tree.chain(77, [78, 79])
    out = verify_tree(model, cache, nxt)
    ref = full_logits(model, accepted + [77, 78, 79])[-3:]
    torch.testing.assert_close(out.logits, ref, rtol=1e-4, atol=1e-4)


def test_rollback_and_bad_paths():
    model = tiny_model()
    cache = KVCache.for_model(model)
    prefill(model, cache, torch.arange(10))
    verify_tree(model, cache, Tree.chain(3, [4, 5]))
    assert cache.get_seq_length() == 13 and cache.length == 10
    with pytest.raises(ValueError, match="start at the root"):
        cache.keep([1, 2])
    with pytest.raises(ValueError, match="increasing"):
        cache.keep([0, 2, 1])
    with pytest.raises(ValueError, match="past the 3 nodes"):
        cache.keep([0, 1, 5])
    cache.rollback()
    assert cache.get_seq_length() == 10
