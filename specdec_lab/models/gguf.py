"""A GGUF file's Q4_1 weights as they are stored: 4-bit codes, block scales and block minima, exactly.

transformers reads a GGUF file by de-quantizing every tensor to floats (`models._dequantized_copy`). To run
the file's own 4-bit model (`quant.QuantLinear`, "int4") we need the stored values instead, so that no
requantisation moves a single weight. Q4_1 (llama.cpp's ggml-common.h, `block_q4_1`) cuts every row into
blocks of 32 consecutive input elements and stores each block in 20 bytes:

    d  fp16     the block's scale                  w[j] = d * q[j] + m,   q[j] in 0..15
    m  fp16     the block's minimum
    qs 16 bytes nibbles: byte i holds q[i] (low 4 bits) and q[i + 16] (high 4 bits)

The GGUF stores a (N, K) weight as N rows of K/32 blocks (the `gguf` package hands them over as a (N, K/32
* 20) uint8 array). Names follow llama.cpp (`blk.3.attn_q.weight`); `read_q4_1` renames them to the HF
module names of a Llama model. One more wrinkle: llama.cpp's converter permutes the rows of q and k
(`permute` in convert_hf_to_gguf.py: rotary pairs interleaved), and transformers undoes it on load
(`LlamaTensorProcessor._reverse_permute_weights`). It is a permutation of whole rows and blocks run along a
row, so codes, scales and minima permute with their rows and stay exact (tested against the fp32 load).

    blocks = read_q4_1(path)                  # {"model.layers.0.self_attn.q_proj": Q4_1Blocks, ...}
    w = blocks["model.layers.0.mlp.up_proj"].dequantize()     # (1536, 576) float32, d * q + m

The LM head. SmolLM2's file ties the head to the token embedding (`token_embd.weight`, 49,152 × 576) and stores
it in Q8_0 (ggml-common.h `block_q8_0`): blocks of 32 inputs in 34 bytes, w[j] = d * q[j]:

    d  fp16     the block's scale
    qs 32 bytes int8 codes q[j] in -128..127 (llama.cpp's rule writes -127..127)

`read_q8_0_head` returns those codes and scales (`output.weight` where a file has an untied head).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["BLOCK", "Q4_1Blocks", "Q8_0Blocks", "read_q4_1", "read_q8_0_head", "unpack_q4_1", "unpack_q8_0", "HF_NAMES"]

BLOCK = 32  # elements per Q4_1 block, along the input dimension K
_BYTES = 20  # fp16 d + fp16 m + 16 bytes of nibbles
_Q8_0_BYTES = 34  # fp16 d + 32 int8 codes

# llama.cpp's tensor names inside block i -> the HF Llama module (transformers' GGUF mapping, Llama part)
HF_NAMES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


@dataclass
class Q4_1Blocks:
    """One (N, K) weight in Q4_1: w[n, k] = d[n, k // 32] * codes[n, k] + m[n, k // 32]."""

    codes: torch.Tensor  # (N, K) uint8 in 0..15
    d: torch.Tensor  # (N, K/32) float16 block scales
    m: torch.Tensor  # (N, K/32) float16 block minima

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)

    def dequantize(self) -> torch.Tensor:
        """(N, K) float32: d * q + m per block, computed in fp32 as ggml and gguf-py de-quantize."""
        n, k = self.shape
        q = self.codes.float().view(n, k // BLOCK, BLOCK)  # (N, G, 32)
        return (self.d.float()[..., None] * q + self.m.float()[..., None]).view(n, k)


@dataclass
class Q8_0Blocks:
    """One (N, K) weight in Q8_0: w[n, k] = d[n, k // 32] * codes[n, k]."""

    codes: torch.Tensor  # (N, K) int8
    d: torch.Tensor  # (N, K/32) float16 block scales

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.codes.shape)

    def dequantize(self) -> torch.Tensor:
        """(N, K) float32: d * q per block (exact in fp32: an 8-bit code times an fp16 scale)."""
        n, k = self.shape
        return (self.d.float()[..., None] * self.codes.float().view(n, k // BLOCK, BLOCK)).view(n, k)


def unpack_q8_0(raw: np.ndarray, n: int, k: int) -> Q8_0Blocks:
    """raw (N, K/32 * 34) uint8, the stored blocks of a (N, K) weight -> its codes and scales."""
    if k % BLOCK:
        raise ValueError(f"a Q8_0 row has a multiple of {BLOCK} elements; got K = {k}")
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(n, k // BLOCK, _Q8_0_BYTES)  # (N, G, 34)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0]  # (N, G) little-endian fp16
    codes = blocks[..., 2:].copy().view(np.int8)  # (N, G, 32)
    return Q8_0Blocks(codes=torch.from_numpy(codes.reshape(n, k).copy()), d=torch.from_numpy(d.copy()))


def read_q8_0_head(path: str | os.PathLike) -> Q8_0Blocks | None:
    """The LM head's Q8_0 blocks as the file stores them: `output.weight` if the file has its own head, else the
    tied `token_embd.weight`; None where that tensor is not Q8_0 (then the caller quantizes by Q8_0's rule)."""
    from gguf import GGMLQuantizationType, GGUFReader

    tensors = {t.name: t for t in GGUFReader(os.fspath(path)).tensors}
    t = tensors.get("output.weight") or tensors.get("token_embd.weight")
    if t is None or t.tensor_type != GGMLQuantizationType.Q8_0:
        return None
    k, n = (int(s) for s in t.shape)  # innermost first: (K, N)
    return unpack_q8_0(t.data, n, k)


def unpack_q4_1(raw: np.ndarray, n: int, k: int) -> Q4_1Blocks:
    """raw (N, K/32 * 20) uint8, the stored blocks of a (N, K) weight -> its codes, scales and minima."""
    if k % BLOCK:
        raise ValueError(f"a Q4_1 row has a multiple of {BLOCK} elements; got K = {k}")
    blocks = np.ascontiguousarray(raw, dtype=np.uint8).reshape(n, k // BLOCK, _BYTES)  # (N, G, 20)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0]  # (N, G) little-endian fp16, as GGUF stores it
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0]  # (N, G)
    qs = blocks[..., 4:]  # (N, G, 16)
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (N, G, 32): low nibbles 0..15, high 16..31
    return Q4_1Blocks(
        codes=torch.from_numpy(codes.reshape(n, k).copy()),
        d=torch.from_numpy(d.copy()),
        m=torch.from_numpy(m.copy()),
    )


def _unpermute_rows(x: torch.Tensor, n_head: int) -> torch.Tensor:
    """Undo llama.cpp's q/k row permutation (rows grouped per head as (2, dim/2) -> (dim/2, 2)), any trailing dims."""
    rows = x.shape[0]
    dim = rows // n_head // 2
    return x.reshape(n_head, dim, 2, *x.shape[1:]).transpose(1, 2).reshape(x.shape)


def _field(reader, key: str):
    f = reader.fields.get(key)
    if f is None:
        return None
    value = f.parts[f.data[0]]
    return bytes(value).decode() if value.dtype == np.uint8 else value.tolist()[0]


def read_q4_1(path: str | os.PathLike) -> dict[str, Q4_1Blocks]:
    """{HF module name: Q4_1Blocks} for every Q4_1 linear weight of a Llama GGUF file; {} for other files.

    Only the Llama layout is mapped (SmolLM2 and most llama.cpp conversions of Llama-family models); for
    another architecture nothing is returned and the caller requantises from the fp32 weights instead.
    """
    from gguf import GGMLQuantizationType, GGUFReader

    reader = GGUFReader(os.fspath(path))
    if _field(reader, "general.architecture") != "llama":
        return {}
    n_head = _field(reader, "llama.attention.head_count")
    n_kv = _field(reader, "llama.attention.head_count_kv") or n_head
    out: dict[str, Q4_1Blocks] = {}
    for t in reader.tensors:
        parts = t.name.split(".")  # blk.<i>.<kind>.weight
        if t.tensor_type != GGMLQuantizationType.Q4_1 or len(parts) != 4 or parts[0] != "blk":
            continue
        if parts[2] not in HF_NAMES or parts[3] != "weight":
            continue
        k, n = (int(s) for s in t.shape)  # GGUF lists dims innermost first: (K, N)
        b = unpack_q4_1(t.data, n, k)
        if parts[2] in ("attn_q", "attn_k"):
            heads = n_head if parts[2] == "attn_q" else n_kv
            b = Q4_1Blocks(*(_unpermute_rows(x, heads) for x in (b.codes, b.d, b.m)))
        out[f"model.layers.{parts[1]}.{HF_NAMES[parts[2]]}"] = b
    return out
