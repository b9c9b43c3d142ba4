"""ISA-dependent decisions: taken from what the CPU reports, pinned here for the CPUs we meet."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import specdec_lab.machine as machine_mod
from specdec_lab.machine import cpu_flags, decide_bf16, isa_flags, machine, use_bf16


@pytest.mark.parametrize(
    "isa,flags,arch,expected",
    [
        ("AVX2", {"avx2", "fma"}, "x86_64", False),  # AVX2-only EPYC / laptop: bf16 is emulated
        ("AVX512", {"avx512f", "avx512bw"}, "x86_64", False),  # AVX-512 without its bf16 extension
        ("AVX512", {"avx512f", "avx512_bf16"}, "x86_64", True),  # Cooper Lake, Sapphire Rapids, Zen 4
        ("AVX512", {"avx512f", "amx_bf16", "amx_tile"}, "x86_64", True),
        ("AVX2", {"avx512f", "avx512_bf16"}, "x86_64", False),  # torch forced to AVX2 (ATEN_CPU_CAPABILITY)
        ("DEFAULT", {"fp", "asimd", "bf16"}, "aarch64", True),
        ("DEFAULT", {"fp", "asimd"}, "aarch64", False),
    ],
)
def test_bf16_is_chosen_only_where_the_cpu_runs_it_natively(isa, flags, arch, expected):
    decision, why = decide_bf16(isa, flags, arch)
    assert decision is expected and why


def test_unknown_flags_defer_to_a_measurement():
    assert decide_bf16("AVX2", None) == (None, "CPU flags unreadable")


def test_cpuinfo_is_parsed_for_name_and_flags(tmp_path):
    (tmp_path / "cpuinfo").write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx avx2 fma\n\nprocessor\t: 1\n"
    )
    assert cpu_flags(tmp_path / "cpuinfo") == ("AMD EPYC 7B13", "fpu avx avx2 fma")
    assert cpu_flags(tmp_path / "missing") is None
    assert isa_flags(tmp_path / "cpuinfo") == ["avx", "avx2", "fma"] and isa_flags(tmp_path / "missing") == []


def test_the_machine_record_is_complete_and_consistent():
    m = machine()
    record = m.as_dict()
    assert set(record) >= {"cpu", "isa", "flags", "bf16", "bf16_reason", "threads", "torch", "onednn"}
    assert m.isa == torch.backends.cpu.get_cpu_capability() and m.threads == torch.get_num_threads()
    assert use_bf16(None) is m.bf16 and use_bf16(True) is True and use_bf16(False) is False
    assert m.isa in m.describe()


class _Bf16Ops(TorchDispatchMode):
    """Counts aten ops that produce a bfloat16 tensor."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        self.count += any(isinstance(o, torch.Tensor) and o.dtype == torch.bfloat16 for o in outs)
        return out


@pytest.mark.parametrize("native", [False, True])
def test_trainers_default_to_bf16_only_where_it_is_native(monkeypatch, native):
    """The pinned decision: on a CPU without native bf16, Medusa-1 training and evaluation by default never
    run a bf16 op (emulated bf16 made notebook 03 take 30x longer there); with it, they do."""
    from specdec_lab.medusa import MedusaHeads
    from specdec_lab.models import tiny_model
    from specdec_lab.train.medusa1 import Medusa1Config, MedusaRows, head_accuracy, train_medusa1

    fake = dataclasses.replace(machine(), bf16=native)
    monkeypatch.setattr(machine_mod, "machine", lambda: fake)
    model = tiny_model()
    gen = torch.Generator().manual_seed(0)
    rows = MedusaRows(torch.randn(40, 64, generator=gen).half(), torch.arange(30), torch.randint(0, 256, (30, 3)))
    heads = MedusaHeads.for_model(model, num_heads=2)
    with _Bf16Ops() as ops:
        train_medusa1(heads, rows, Medusa1Config(steps=2, batch_size=8, soft=0.5), progress=False)
        head_accuracy(heads, rows, bf16=None)
    assert (ops.count > 0) is native
