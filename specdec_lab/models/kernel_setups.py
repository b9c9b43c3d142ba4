"""The kernel setups notebook 10 compares, switchable in place and cheaply, and a check that they agree.

A verify forward over n tokens spends its time in two kinds of kernels: the linear layers (n activation
rows times every weight matrix: `fast_linear`) and attention over the KV cache (`attention`). To compare
them fairly each setup is timed in the same loop as the others (`timing.compare_cost_curves`), so
switching between setups happens once per repeat and must not cost a repack of the weights each time.
`linear_setups` therefore keeps two sets of module objects — the `FastLinear` layers `load_model` installed
(with their oneDNN-packed weight copies) and plain `nn.Linear` layers holding the very same Parameters —
and switching puts one set into the model and sets the FastLinear plans:

    "stock nn.Linear"   torch's F.linear (MKL) for every row count
    "W xᵀ only"         (W xᵀ)ᵀ up to 16 rows, F.linear beyond   (= use_fast_linear(model, pack=False))
    "default plan"      W xᵀ for 1-2 rows, oneDNN's packed inner product for 3-64   (= use_fast_linear(model))
    "measured plan"     per weight shape and row count, the kernel `tune_linear` measured fastest

`attention_setups`: transformers' "sdpa" (copies the K/V heads for every masked GQA forward) and
`attention.ATTENTION` (masked GQA inside torch's kernel, no copy).

`agreement(model, setups)`: the largest logit difference between the setups and whether their greedy
tokens agree, over forwards of a few row counts after a cached context — every kernel computes the same
dot products, only the order of the float sums differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from .attention import ATTENTION, attention_kind
from .fast_linear import FastLinear, _relink, default_plan

__all__ = [
    "linear_setups",
    "attention_setups",
    "agreement",
    "plan_by_size",
    "same_as_default",
    "LINEAR_SETUPS",
    "ATTENTION_SETUPS",
]

LINEAR_SETUPS = ("stock nn.Linear", "W xᵀ only", "default plan", "measured plan")
ATTENTION_SETUPS = ("sdpa", ATTENTION)


def _put(model: nn.Module, modules: Mapping[str, nn.Module]) -> None:
    """Install each module at its dotted name (parents looked up in the model)."""
    for name, module in modules.items():
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, module)


def linear_setups(model: nn.Module) -> dict[str, Callable[[], None]]:
    """{setup name: a function that switches `model`'s linear layers to it} (names: LINEAR_SETUPS).

    `model` must run FastLinear layers (what `load_model` returns). "measured plan" is offered only when
    `tune_linear` gave the layers plans; calling it (or "default plan" when there is none) leaves the model
    as it was. Parameters are shared by every setup: tied weights stay tied.
    """
    fast = {name: m for name, m in model.named_modules() if isinstance(m, FastLinear)}
    if not fast:
        raise ValueError("the model has no FastLinear layers: load it with load_model() or use_fast_linear()")
    plans = {name: m.plan for name, m in fast.items()}
    packs = {name: m.pack for name, m in fast.items()}
    stock = {name: _relink(nn.Linear, m) for name, m in fast.items()}

    def plan(kind: str) -> Callable[[], None]:
        def install() -> None:
            _put(model, fast)
            for name, m in fast.items():
                if kind == "wx":  # the unpacked default; the packed copies stay cached for the next switch
                    m.pack, m.plan = packs[name], default_plan(False)
                elif kind == "default":
                    m.pack, m.plan = True, None
                else:
                    m.pack, m.plan = packs[name], plans[name]

        return install

    setups = {
        "stock nn.Linear": lambda: _put(model, stock),
        "W xᵀ only": plan("wx"),
        "default plan": plan("default"),
    }
    if any(p is not None for p in plans.values()):
        setups["measured plan"] = plan("measured")
    return setups


def plan_by_size(model: nn.Module, sizes: Sequence[int]) -> dict[str, dict[int, str]]:
    """{weight shape: {n: kernel}}: the kernel each shape's FastLinear layers run for n rows (their plan, or the
    default plan where they have none), for a table beside a timing of those sizes."""
    out: dict[str, dict[int, str]] = {}
    for m in model.modules():
        if isinstance(m, FastLinear):
            out.setdefault(f"{m.out_features}x{m.in_features}", {n: m.kernel_for(n) for n in sizes})
    return out


def same_as_default(model: nn.Module, sizes: Sequence[int]) -> list[int]:
    """The sizes at which every FastLinear layer's plan names the same kernel as the default plan (there the
    "measured plan" and "default plan" setups run identical code: any timing difference is noise)."""
    fast = [m for m in model.modules() if isinstance(m, FastLinear)]
    return [n for n in sizes if all(m.kernel_for(n) == _default_kernel(m, n) for m in fast)]


def _default_kernel(m: FastLinear, n: int) -> str:
    plan = default_plan(m.pack)
    return plan[n] if n < len(plan) else "stock"


def attention_setups(model) -> dict[str, Callable[[], None]]:
    """{"sdpa": ..., ATTENTION: ...}: functions that switch the model's attention (it must run one of them)."""
    if attention_kind(model) not in ATTENTION_SETUPS:
        raise ValueError(f"the model runs {attention_kind(model)!r} attention; expected one of {ATTENTION_SETUPS}")
    return {name: (lambda name=name: model.set_attn_implementation(name)) for name in ATTENTION_SETUPS}


@torch.inference_mode()
def agreement(
    model, setups: Mapping[str, Callable[[], None]], rows: Sequence[int] = (1, 2, 3, 8, 64), context: int = 32
) -> dict:
    """Do the setups compute the same forward? Over chains of each row count after `context` cached tokens:

    {"max_abs_diff": largest |logit difference| from the first setup's, "same_tokens": greedy tokens all
    equal, "forwards": how many forwards were compared}. The model is left in the setup that ran last.
    """
    from ..kv_cache import KVCache
    from ..trees.tree import Tree
    from ..verify import prefill, verify_tree

    vocab = model.config.get_text_config(decoder=True).vocab_size
    gen = torch.Generator().manual_seed(0)
    ctx = torch.randint(0, vocab, (context,), generator=gen)
    chains = [torch.randint(0, vocab, (n,), generator=gen) for n in rows]
    logits: dict[str, list[torch.Tensor]] = {}
    for name, install in setups.items():
        install()
        cache = KVCache.for_model(model, capacity=context + max(rows) + 8)
        prefill(model, cache, ctx)
        out = []
        for toks in chains:
            out.append(verify_tree(model, cache, Tree.chain(int(toks[0]), toks[1:])).logits.float())
            cache.rollback()
        logits[name] = out
    first, *others = logits.values()
    diff = max((float((a - b).abs().max()) for o in others for a, b in zip(first, o, strict=True)), default=0.0)
    same = all(torch.equal(a.argmax(-1), b.argmax(-1)) for o in others for a, b in zip(first, o, strict=True))
    return {"max_abs_diff": diff, "same_tokens": same, "forwards": len(chains) * len(logits)}
