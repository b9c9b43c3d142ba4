"""The price of a step, and the tools that measure it.

    curve.py        t(n): one verify forward of n tokens, measured on this device (`cost_curve_for`)
    step.py         `StepCost`: t̂(n) = t(n) · load · shape(n), plus the loop's own time; what every sizer asks
    curve_store.py  measured curves shared on disk by the processes of one job (test and notebook checks)
    curve_file.py   a device's curve as a file (`python -m specdec_lab.cost.curve_file`), read by the what-ifs
    timing.py       contenders timed in one interleaved loop, the order rotated (`interleaved`)
    noise.py        how far to trust a timing: the spread of repeats, and a warning when it is large
    gate.py         whether a batch's rows speculate, from both modes measured on the batch (`SpeculationGate`)
    plan.py         one width for a batch step: the rows' expected gains against t(B, N) (`WidthPlanner`)
    memory_wall.py  the fastest a step can be when it must read every weight once
    theory.py       closed-form acceptance math: E[tokens], speedup, optimal k (Leviathan et al.; Chen et al.)

This package's import runs only what decoding needs (curve and step).
"""

from . import curve, step
from .curve import *  # noqa: F403 - the package's face: curve.py's and step.py's public names
from .step import *  # noqa: F403

__all__ = [*curve.__all__, *step.__all__]
