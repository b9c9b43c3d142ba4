"""The target as loaded: weights, kernels and the step that runs them.

    load.py            load_model / tiny_model: the shipped SmolLM2-135M GGUF, any HF directory or .gguf file,
                       random-weight fakes for tests; prompt_ids for every reader of prompts
    gguf.py            a GGUF file's Q4_1 blocks as stored (4-bit codes, scales, minima), exactly
    fast_linear.py     FastLinear: the kernel for each row count 1-64 measured on this CPU (`tune_linear`)
    attention.py       grouped-query SDPA over the KV cache without copying K/V
    quant.py           weight-only int8 / int4 linear layers, and THE int8 weight-only matmul (`int8_mm`)
    compact_body.py    the Llama-family decoder body as plain ops, what the compiled step compiles
    compiled.py        CompiledStep: one torch.compile'd graph per bucket of node counts
    row_invariance.py  verifying n rows rounds exactly like decoding one (exact quantized speculation)
    kernel_setups.py   the kernel setups notebook 12 compares, switchable in place
    draft_model.py     draft models: a distilled 2-layer LM, and the layer-skip view of the target
    vocab.py           drafting vocabularies shipped as data files

`python -m specdec_lab.models --check` finds the model file, caches its fp32 weights and measures the kernels.
"""

from . import load
from .load import *  # noqa: F403 - the package's face is load.py's public names

__all__ = list(load.__all__)
