"""What this machine can do, decided in one place: the CPU's instruction sets and the paths that follow.

CPUs differ in ways that change which code is fast. The two that matter here:

* **bf16 matmuls** are native only where the CPU has AVX512-BF16 or AMX-BF16 (recent Xeons). Elsewhere —
  AVX2-only desktops, most laptops, many cloud EPYCs — torch emulates them, many times slower than fp32.
  So `use_bf16(None)` (the default of every trainer and evaluator here) means "bf16 where it is native,
  fp32 otherwise". Where the flags cannot be read (no /proc/cpuinfo), a small bf16-vs-fp32 matmul decides.
* **Linear kernels for few rows** (`fast_linear.tune_linear`) are chosen by measurement, since which of
  torch's gemv, a 2-column GEMM or oneDNN's packed inner product is fastest for 1, 2, ... 64 rows depends
  on the CPU; their choice is recorded next to this record (`linear_plan`).

`machine()` is the record written into bench results and training manifests, so every figure names the
ISA it was measured on.

Forcing another CPU's path: torch's own `ATEN_CPU_CAPABILITY=avx2` (with `ONEDNN_MAX_CPU_ISA=AVX2` and
`MKL_ENABLE_INSTRUCTIONS=AVX2` for the libraries) makes an AVX-512 machine run — and decide — as an AVX2
one: the bf16 decision requires torch's capability to be AVX-512 as well as the flag.
"""

from __future__ import annotations

import functools
import os
import platform
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

__all__ = ["Machine", "machine", "machine_info", "decide_bf16", "use_bf16", "cpu_flags", "isa_flags", "sync"]

# The extensions worth recording (the full flag list is hundreds of entries).
_FLAGS_OF_INTEREST = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "bf16",  # aarch64's name for its bf16 dot products
)
_BF16_FLAGS = {"avx512_bf16", "amx_bf16"}


def cpu_flags(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> tuple[str, str] | None:
    """(model name, space-separated flags) of the first CPU in a Linux cpuinfo file; None if unreadable."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    name, flags = "", ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and not name:
            name = value.strip()
        elif key in ("flags", "features") and not flags:  # x86 | aarch64
            flags = value.strip()
        if name and flags:
            break
    return (name, flags) if flags else None


def isa_flags(cpuinfo: str | os.PathLike = "/proc/cpuinfo") -> list[str]:
    """Every vector-ISA flag the CPU reports (avx*, amx*, fma, f16c, ...), sorted: what decides which kernels,
    roundings and plans a CPU runs, printed beside every CI run and figure. [] where cpuinfo is unreadable."""
    info = cpu_flags(cpuinfo)
    prefixes = ("avx", "amx", "fma", "f16c", "sse4", "vnni", "bf16", "sve", "asimd")
    return sorted(f for f in info[1].split() if f.startswith(prefixes)) if info else []


def decide_bf16(isa: str, flags: set[str] | None, arch: str = "x86_64") -> tuple[bool | None, str]:
    """Is bf16 matmul native? -> (decision, why). None when the flags are unknown (then measure).

    isa: torch's CPU capability ("AVX512", "AVX2", "DEFAULT", ...); on x86 both it and a bf16 flag must
    say yes, so forcing torch to AVX2 (`ATEN_CPU_CAPABILITY=avx2`) forces the fp32 path too.
    """
    if flags is None:
        return None, "CPU flags unreadable"
    if arch in ("aarch64", "arm64"):
        return ("bf16" in flags), ("bf16 flag" if "bf16" in flags else "no bf16 flag: emulated")
    have = sorted(_BF16_FLAGS & flags)
    if not have:
        return False, "no avx512_bf16/amx_bf16: bf16 matmuls are emulated"
    if not isa.upper().startswith("AVX512"):
        return False, f"{'/'.join(have)} present but torch runs {isa} kernels"
    return True, f"native ({'/'.join(have)})"


def _measure_bf16(n: int = 256, k: int = 576, m: int = 4096, reps: int = 3) -> bool:
    """Fallback when flags are unknown: is a bf16 matmul clearly faster than the same one in fp32?"""
    a, b = torch.randn(n, k), torch.randn(k, m)

    def best(x, y) -> float:
        times = []
        for _ in range(reps + 1):
            t0 = time.perf_counter()
            x @ y
            times.append(time.perf_counter() - t0)
        return min(times[1:])

    return best(a.bfloat16(), b.bfloat16()) < 0.8 * best(a, b)


@dataclass(frozen=True)
class Machine:
    """The facts every measurement is recorded with."""

    cpu: str  # model name as the CPU reports it
    arch: str  # platform.machine(): x86_64, aarch64, ...
    isa: str  # torch's CPU capability: the widest vector ISA its kernels use ("AVX512", "AVX2", ...)
    flags: tuple[str, ...]  # the extensions of interest the CPU reports (see _FLAGS_OF_INTEREST)
    bf16: bool  # bf16 matmuls are native here (trainers default to them only then)
    bf16_reason: str
    threads: int  # torch intra-op threads
    torch: str
    onednn: bool  # oneDNN is in this torch build (packed linear kernels possible)

    def as_dict(self) -> dict:
        """JSON-ready (lists, not tuples: a record read back from a file compares equal)."""
        return {**asdict(self), "flags": list(self.flags)}

    def describe(self) -> str:
        """One line for notebook and CLI output."""
        bf16 = "bf16 native" if self.bf16 else "bf16 emulated -> fp32"
        return f"{self.cpu or self.arch} · torch ISA {self.isa} · {bf16} · {self.threads} threads"


@functools.cache
def _machine(threads: int) -> Machine:
    arch = platform.machine()
    isa = torch.backends.cpu.get_cpu_capability()
    info = cpu_flags()
    name, flags = (info[0], set(info[1].split())) if info else ("", None)
    bf16, why = decide_bf16(isa, flags, arch)
    if bf16 is None:
        bf16 = _measure_bf16()
        why = f"{why}: measured bf16 matmul {'faster' if bf16 else 'not faster'} than fp32"
    return Machine(
        cpu=name or platform.processor(),
        arch=arch,
        isa=isa,
        flags=tuple(f for f in _FLAGS_OF_INTEREST if flags and f in flags),
        bf16=bf16,
        bf16_reason=why,
        threads=threads,
        torch=torch.__version__,
        onednn=torch.backends.mkldnn.is_available(),
    )


def machine() -> Machine:
    """This process's machine record (decided once per thread count)."""
    return _machine(torch.get_num_threads())


def use_bf16(requested: bool | None = None, device: str | torch.device = "cpu") -> bool:
    """Resolve a `bf16` option: True/False as given; None -> bf16 only where it is native on `device`."""
    if requested is not None:
        return bool(requested)
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        return machine().bf16
    return False


def machine_info(device: str | torch.device = "cpu") -> dict:
    """The record a measurement is stored with (bench results, training manifests): `machine()` plus core
    counts, library versions and the device. A bench refuses to resume a file made under another one."""
    import transformers

    device = torch.device(device)
    info = machine().as_dict()
    info["torch_threads"] = info.pop("threads")
    return {
        **info,
        "cores": os.cpu_count(),
        "cores_available": len(affinity(0)) if (affinity := getattr(os, "sched_getaffinity", None)) else None,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else info["cpu"],
    }


def sync(device: torch.device | str | None) -> None:
    """Wait for queued device work so a clock reading means something (CUDA and MPS run asynchronously)."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()
