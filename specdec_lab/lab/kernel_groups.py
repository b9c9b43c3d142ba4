"""Which setups of a kernel comparison run the very same code at a size, and how far apart the *kernels* are.

Notebook 12 times four linear-layer setups in one loop. At some sizes several of them run identical kernels (the
measured plan chose what the default plan runs, say); their medians then differ by noise alone, so a "gap" read
across setups — the fastest setup against the slowest — can be nothing but that noise. Reading a difference
between kernels means grouping the setups by the code they run and comparing the groups:

    kernels = kernels_by_setup(model, linear_setups(model), sizes)   # setup -> n -> kernel per weight shape
    read = kernel_groups({s: c(1) for s, c in curves.items()}, {s: kernels[s][1] for s in curves})
    read.groups, read.values, read.spans, read.gap      # fastest kernel first; gap: slowest / fastest - 1

Each group's value is the median of its setups' values (one timing of the code per setup that runs it).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["KernelGroups", "kernel_groups", "kernels_by_setup"]


@dataclass(frozen=True)
class KernelGroups:
    """Setups grouped by the code they run, the group with the lowest value first.

    groups[i]: the setups that run one set of kernels; values[i]: the median of their values; spans[i]: (lowest,
    highest) of their values — where a group has several setups, that spread is noise (the same code timed twice).
    """

    groups: list[tuple[str, ...]]
    values: list[float]
    spans: list[tuple[float, float]]

    @property
    def kernels(self) -> int:
        """How many different sets of kernels the setups run."""
        return len(self.groups)

    @property
    def lowest(self) -> float:
        return self.values[0]

    @property
    def highest(self) -> float:
        return self.values[-1]

    @property
    def gap(self) -> float:
        """The highest kernel's value over the lowest's, less one: 0.0 where every setup runs the same code."""
        return self.highest / self.lowest - 1 if self.kernels > 1 else 0.0

    @property
    def twins(self) -> list[tuple[str, ...]]:
        """The groups of more than one setup: where the loop timed the same code more than once."""
        return [g for g in self.groups if len(g) > 1]


def kernel_groups(values: Mapping[str, float], signature: Mapping[str, Hashable]) -> KernelGroups:
    """Group the setups of `values` (setup -> a median, or a ratio of medians) by `signature` (setup -> what code
    it runs; equal signatures, identical code) and order the groups by the median of their members' values."""
    if not values:
        raise ValueError("kernel_groups needs at least one setup")
    by_code: dict[Hashable, list[str]] = {}
    for setup in values:
        by_code.setdefault(signature[setup], []).append(setup)
    groups = sorted(
        (tuple(members) for members in by_code.values()),
        key=lambda g: statistics.median(values[s] for s in g),
    )
    return KernelGroups(
        groups=groups,
        values=[statistics.median(values[s] for s in g) for g in groups],
        spans=[(min(values[s] for s in g), max(values[s] for s in g)) for g in groups],
    )


def kernels_by_setup(
    model, setups: Mapping[str, Callable[[], None]], sizes: Sequence[int]
) -> dict[str, dict[int, tuple[str, ...]]]:
    """{setup: {n: the kernel each weight shape runs at n rows}}, read by switching each setup in
    (`kernel_setups.plan_by_size`; a setup without FastLinear layers runs torch's stock kernel everywhere).

    Switching is cheap (no repacking), but the model is left in the setup switched in last: install the one you
    want after.
    """
    from ..models.kernel_setups import plan_by_size

    plans: dict[str, dict[str, dict[int, str]]] = {}
    for name, install in setups.items():
        install()
        plans[name] = plan_by_size(model, sizes)
    shapes = sorted({shape for plan in plans.values() for shape in plan})
    return {
        name: {n: tuple(plan[shape][n] if shape in plan else "stock" for shape in shapes) for n in sizes}
        for name, plan in plans.items()
    }
