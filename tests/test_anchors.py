"""The anchors beside transformers' eager `generate`: its compiled static-cache decoding, llama.cpp (a fake
here; the real one where llama-cpp-python is installed), and the memory wall the bench compares them with."""

import json
import shutil
import sys
import types
import warnings

import pytest
import torch

import specdec_lab as S
from specdec_lab.bench import ANCHORS, BenchInputError, RunOutput, parse_methods, run_benchmark
from specdec_lab.bench import llamacpp as L
from specdec_lab.bench.hf import hf_generate, hf_generate_compiled
from specdec_lab.bench.methods import AnchorSkipped
from specdec_lab.cost.memory_wall import memory_wall, read_bandwidth, weight_bytes
from specdec_lab.io import Prompt, eos_ids
from specdec_lab.models import find_model_file


def repetitive(seed, length=20, period=5):
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(0, 256, (period,), generator=g).tolist()
    return (base * (length // period + 1))[:length]


# ---- hf_generate_compiled -----------------------------------------------------------------------------
needs_compiler = pytest.mark.skipif(
    not any(shutil.which(c) for c in ("g++", "c++", "clang++")), reason="torch.compile on a CPU needs a C++ compiler"
)


@needs_compiler
def test_hf_generate_compiled_equals_hf_generate_and_compiles_once():
    """transformers' static cache + compiled forward (forced on CPU) gives hf_generate's greedy output on
    prompts of several lengths, with the one graph compiled in the factory and none inside a timed run."""
    torch.set_num_threads(1)
    from specdec_lab.models.attention import use_gqa_attention

    model = use_gqa_attention(S.tiny_model(fast_linear=True))  # the kernels and attention the bench runs
    prompts = [Prompt(question_id=i, category="x", ids=repetitive(i, length=n)) for i, n in enumerate((7, 20, 33))]
    res = run_benchmark(model, prompts, "autoregressive,hf_generate,hf_generate_compiled", max_new_tokens=24,
                        eos_token_id=[], progress=False)  # fmt: skip
    assert res["summary"]["hf_generate_compiled"]["identical_to_autoregressive"] == 1.0
    assert res["summary"]["hf_generate"]["identical_to_autoregressive"] == 1.0
    rows = [r for r in res["rows"] if r["method"] == "hf_generate_compiled"]
    assert all(r["new_tokens"] == 24 and r["stop_reason"] == "max_new_tokens" for r in rows)
    info = rows[0]["proposer"]
    assert info["graphs_at_compile"] >= 1 and info["compile_seconds"] > 0 and info["mode"] == "default"
    assert all(r["proposer"]["graphs_compiled"] == 0 for r in rows)  # the static cache's shapes never change
    wall = res["memory_wall"]  # recorded in the results' header: fp32 weights over measured bandwidth
    assert wall["weights_mb"] == round(weight_bytes(model) / 1e6, 1) and wall["read_gb_s"] > 0


@needs_compiler
@pytest.mark.real
@pytest.mark.slow
def test_hf_generate_compiled_equals_hf_generate_on_the_real_model(real_model):
    model, _ = real_model
    eos = eos_ids(model, real_model.tokenizer)
    compiled = hf_generate_compiled(model, eos)
    eager = hf_generate(model, eos)
    # two prompt lengths are enough here: the tiny-model test covers several, and the compile dominates the time
    texts = ["Write a Python function that checks whether a number is prime.",
             "List five uses of a paperclip, one per line."]  # fmt: skip
    for text in texts:
        ids = real_model.chat_ids(text)
        a, b = eager(ids, 64, 0), compiled(ids, 64, 0)
        assert b.tokens == a.tokens
        assert b.info["graphs_compiled"] == 0


# ---- llama.cpp, through a fake llama_cpp module ---------------------------------------------------------
class FakeLlama:
    """llama-cpp-python's `Llama` as the anchor uses it: eval per forward, generate yields greedy tokens
    (next = last + 1 mod 50), a draft model verified several tokens per eval, reset() empties the cache."""

    instances: list = []

    def __init__(self, model_path, n_ctx, n_threads, n_threads_batch, draft_model, verbose):
        self.path, self.draft, self.n_tokens, self.resets = model_path, draft_model, 0, 0
        FakeLlama.instances.append(self)

    def reset(self):
        self.n_tokens, self.resets = 0, self.resets + 1

    def eval(self, tokens):
        self.n_tokens += len(tokens)

    def generate(self, tokens, top_k, top_p, min_p, temp, repeat_penalty, reset):
        assert top_k == 1 and temp == 0.0 and repeat_penalty == 1.0 and self.n_tokens == 0
        self.eval(tokens)
        last = tokens[-1]
        while True:
            for _ in range(3 if self.draft else 1):  # a prompt-lookup forward accepts 3 tokens
                last = (last + 1) % 50
                yield last
            self.eval([last])


class FakeLookup:
    def __init__(self, max_ngram_size, num_pred_tokens):
        self.sizes = (max_ngram_size, num_pred_tokens)


@pytest.fixture
def fake_llama_cpp(monkeypatch):
    module = types.ModuleType("llama_cpp")
    module.Llama = FakeLlama
    speculative = types.ModuleType("llama_cpp.llama_speculative")
    speculative.LlamaPromptLookupDecoding = FakeLookup
    module.llama_speculative = speculative
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    monkeypatch.setitem(sys.modules, "llama_cpp.llama_speculative", speculative)
    monkeypatch.setattr(L, "_AGREEMENT", {})
    FakeLlama.instances = []
    return module


def fake_loaded(tmp_path):
    """A model as `load_model` leaves it: an HF folder whose source.json names the GGUF."""
    (tmp_path / "source.json").write_text(json.dumps({"gguf": str(tmp_path / "m.gguf"), "size": 1}))
    return types.SimpleNamespace(config=types.SimpleNamespace(_name_or_path=str(tmp_path)))


def test_llamacpp_runs_greedy_counts_forwards_stops_and_resets(fake_llama_cpp, tmp_path):
    assert L.unavailable() is None
    run = L.llamacpp(fake_loaded(tmp_path), eos_ids=[45])
    (llm,) = FakeLlama.instances
    assert llm.path.endswith("m.gguf") and llm.draft is None
    out = run([1, 2, 3], 5, 0)
    assert out.tokens == [4, 5, 6, 7, 8] and out.stop_reason == "max_new_tokens" and out.forwards == 5
    assert out.info["prompt_lookup"] is False and out.info["gguf"] == "m.gguf"
    out = run([40], 10, 0)  # 41 .. 45 = EOS
    assert out.tokens == [41, 42, 43, 44, 45] and out.stop_reason == "eos"
    assert llm.resets == 2  # every call starts from an empty KV cache
    with pytest.raises(ValueError, match="n_ctx"):
        run([1] * 2000, 100, 0)


@pytest.mark.parametrize("plain_first", [True, False])
def test_llamacpp_prompt_lookup_records_whether_it_equals_plain(fake_llama_cpp, tmp_path, plain_first):
    model = fake_loaded(tmp_path)
    plain, lookup = L.llamacpp(model, [49]), L.llamacpp_prompt_lookup(model, [49], num_pred_tokens=4)
    assert FakeLlama.instances[1].draft.sizes == (2, 4)
    if plain_first:
        p, q = plain([1, 2], 9, 0), lookup([1, 2], 9, 0)
    else:
        q, p = lookup([1, 2], 9, 0), plain([1, 2], 9, 0)  # completed when the plain output arrives
    assert q.tokens == p.tokens and q.info["equals_plain"] is True
    assert q.forwards == 3 and p.forwards == 9  # 3 tokens per forward in the fake
    assert q.info["first_diff_plain"] is None
    assert lookup([7], 9, 0).info["equals_plain"] is None  # no plain run of that prompt (yet)
    short = lookup([30], 30, 0)  # both stop at EOS 49 after 19 tokens: equal
    plain([30], 30, 0)
    assert short.info["equals_plain"] is True
    record = {}
    L._Agreement._compare(record, [1, 2, 3], [1, 5, 3])
    assert record == {"equals_plain": False, "first_diff_plain": 1}
    L._Agreement._compare(record, [1, 2], [1, 2, 3])
    assert record == {"equals_plain": False, "first_diff_plain": 2}


def test_llamacpp_needs_to_know_the_gguf(fake_llama_cpp, tmp_path):
    bare = types.SimpleNamespace(config=types.SimpleNamespace(_name_or_path=str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="llamacpp:gguf=PATH"):
        L.llamacpp(bare, [])
    L.llamacpp(bare, [], gguf=str(tmp_path / "x.gguf"))
    assert FakeLlama.instances[-1].path.endswith("x.gguf")


def test_an_unavailable_anchor_is_skipped_with_a_message(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails as when not installed
    assert "pip install llama-cpp-python" in L.unavailable()
    with pytest.warns(AnchorSkipped, match="skipping llamacpp_prompt_lookup: llama-cpp-python"):
        specs = parse_methods("autoregressive,llamacpp_prompt_lookup")
    assert [s.label for s in specs] == ["autoregressive"]
    with warnings.catch_warnings(), pytest.raises(BenchInputError, match="no method can run here"):
        warnings.simplefilter("ignore", AnchorSkipped)
        parse_methods("llamacpp")
    with pytest.raises(BenchInputError, match="unknown parameter"):  # still checked before skipping
        parse_methods("llamacpp:bogus=1")


def test_llamacpp_anchor_on_the_real_file():
    """Outside CI (llama-cpp-python builds llama.cpp): its prompt lookup equals its own plain decoding."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python not installed (optional, outside CI)")
    path = find_model_file("smollm2-135m")
    if path is None:
        pytest.skip("SmolLM2-135M model file not found")
    ids = [1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 30, 2, 198, 1, 4093, 198] * 3
    plain = L.llamacpp(None, [2], gguf=str(path))
    lookup = L.llamacpp_prompt_lookup(None, [2], gguf=str(path))
    p, q = plain(ids, 48, 0), lookup(ids, 48, 0)
    assert q.tokens == p.tokens and q.info["equals_plain"] is True
    assert p.forwards == len(p.tokens) and q.forwards <= p.forwards


def test_llamacpp_is_registered_with_its_check():
    assert {"llamacpp", "llamacpp_prompt_lookup", "hf_generate_compiled"} <= set(ANCHORS)
    assert ANCHORS["llamacpp"].unavailable is L.unavailable
    assert isinstance(RunOutput([], None, "eos").info, dict)


# ---- the memory wall ------------------------------------------------------------------------------------
def test_weight_bytes_count_tied_weights_once_and_the_wall_is_bytes_over_bandwidth():
    model = S.tiny_model(fast_linear=True)  # tied embedding; FastLinear's packed copies are not parameters
    n = sum(p.numel() for p in model.parameters())
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False)) > n  # tied: counted once
    assert weight_bytes(model) == 4 * n and weight_bytes(model, bytes_per_param=2) == 2 * n
    w = memory_wall(params_bytes=538_000_000, bandwidth=32e9)
    assert w["wall_ms_per_token"] == pytest.approx(16.81, abs=0.01) and w["read_gb_s"] == 32.0
    assert w["wall_tokens_per_s"] == pytest.approx(59.5, abs=0.1) and w["isa"]
    assert read_bandwidth(megabytes=8, repeats=2) > 0
    with pytest.raises(ValueError, match="needs a model"):
        memory_wall()
