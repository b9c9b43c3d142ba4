"""The memory wall: the fastest a decode step can be when it must read every weight once.

One autoregressive step multiplies one activation row by every weight matrix: each weight byte is read
once and used for one multiply-add, so the step is bound by memory bandwidth, not arithmetic. Its floor is

    wall (s per token) = weight bytes / read bandwidth          (KV cache and activations: small, ignored)

For SmolLM2-135M in fp32 the weights are 134.5 M parameters x 4 bytes = 538 MB (the tied embedding counted
once: the lm_head reads the whole matrix, the embedding lookup one row). Bandwidth is measured here, as
torch reads: the sum of a 512 MB fp32 tensor, best of several runs, on torch's intra-op threads — a plain
streaming read, what a gemv of a matrix that does not fit in cache achieves at best. A step at the wall
leaves nothing to win by faster kernels; fewer bytes (int8/int4 weights) or fewer steps (speculation) are
what is left.

    python -m specdec_lab.cost.memory_wall                  # bandwidth, weights, wall in ms/token and tokens/s
    wall = memory_wall(model)                    # the same as a dict (what the bench records)
"""

from __future__ import annotations

import argparse
import functools
import time

import torch

__all__ = ["read_bandwidth", "machine_bandwidth", "weight_bytes", "step_bytes", "memory_wall"]

GB = 1e9


def read_bandwidth(megabytes: int = 512, repeats: int = 10) -> float:
    """Read bandwidth in bytes/s: a `megabytes` fp32 tensor summed `repeats` times, the fastest run.

    The fastest, not the median: on a shared machine noise only ever adds time. The tensor is filled first
    (its pages are then resident), and far larger than any cache, so every run streams it from memory."""
    x = torch.ones(megabytes * 2**20 // 4, dtype=torch.float32)  # (n,) fp32: 512 MB by default
    x.sum()  # first touch outside the clock
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * x.element_size() / best


def weight_bytes(model, bytes_per_param: int = 4) -> int:
    """Bytes of the model's parameters at `bytes_per_param` (4 = fp32, whatever the model holds now), each
    counted once: `parameters()` yields a tied embedding once, and FastLinear's oneDNN-packed copies are
    caches, not parameters."""
    return sum(p.numel() for p in model.parameters()) * bytes_per_param


@functools.cache
def _bandwidth(threads: int) -> float:
    return read_bandwidth()


def machine_bandwidth() -> float:
    """`read_bandwidth()` measured once per process (and thread count): what the bench records."""
    return _bandwidth(torch.get_num_threads())


def step_bytes(model, by_part: bool = False) -> int | dict[str, int]:
    """Bytes one decoding step reads, as the model holds them now: every linear layer's stored weight (a
    quantized layer's codes, scales and zeros; an fp32 layer's weight once, not its packed copy), biases and
    norm weights. The input embedding is one row per token (not counted); a tied head is counted as the head.
    by_part: {"head": the LM head's bytes, "layers": the decoder's linear layers', "other": norms and biases}."""
    from torch import nn

    from ..models.quant import QuantLinear

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    parts, seen = {"head": 0, "layers": 0, "other": 0}, set()
    for m in model.modules():
        if isinstance(m, QuantLinear):
            tensors = [("head" if m is head else "layers", b) for b in m.buffers(recurse=False)]
            tensors += [("other", m.bias)] if m.bias is not None else []
        elif isinstance(m, nn.Linear):
            tensors = [("head" if m is head else "layers", m.weight)] + (
                [("other", m.bias)] if m.bias is not None else []
            )
        elif isinstance(m, nn.Embedding):
            continue
        else:  # norms and other parameter holders: their own (1-D) parameters
            tensors = [("other", t) for t in m.parameters(recurse=False) if t.dim() == 1]
        for part, t in tensors:
            if t is not None and id(t) not in seen:
                seen.add(id(t))
                parts[part] += t.numel() * t.element_size()
    return parts if by_part else sum(parts.values())


def memory_wall(model=None, *, params_bytes: int | None = None, bandwidth: float | None = None) -> dict:
    """The wall for `model` (its fp32 weights) on this machine, as a JSON-ready record:

    read_gb_s (measured unless `bandwidth` in bytes/s is given), weights_mb, wall_ms_per_token (weights over
    bandwidth), wall_tokens_per_s (its inverse), threads, isa (torch's CPU capability)."""
    if params_bytes is None:
        if model is None:
            raise ValueError("memory_wall needs a model or params_bytes")
        params_bytes = weight_bytes(model)
    bw = bandwidth if bandwidth is not None else read_bandwidth()
    wall = params_bytes / bw
    return {
        "read_gb_s": round(bw / GB, 2),
        "weights_mb": round(params_bytes / 1e6, 1),
        "wall_ms_per_token": round(wall * 1e3, 2),
        "wall_tokens_per_s": round(1 / wall, 1),
        "threads": torch.get_num_threads(),
        "isa": torch.backends.cpu.get_cpu_capability(),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specdec_lab.cost.memory_wall", description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m", help="shipped model name, HF folder or .gguf file")
    p.add_argument("--megabytes", type=int, default=512, help="size of the tensor summed")
    p.add_argument("--repeats", type=int, default=10)
    a = p.parse_args(argv)
    from ..models.load import load_model

    lm = load_model(a.model, fast_linear=False)  # fp32, stock layers: only the parameters are counted
    w = memory_wall(lm.model, bandwidth=read_bandwidth(a.megabytes, a.repeats))
    print(f"torch ISA {w['isa']}, {w['threads']} threads")
    print(f"read bandwidth   {w['read_gb_s']:.1f} GB/s  (sum of a {a.megabytes} MB fp32 tensor, best of {a.repeats})")
    print(f"fp32 weights     {w['weights_mb']:.0f} MB  ({a.model})")
    print(f"memory wall      {w['wall_ms_per_token']:.1f} ms/token = {w['wall_tokens_per_s']:.0f} tokens/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
