"""lab.kernel_groups: setups that run the same code count as one kernel (notebook 12, sections 1 and 3)."""

from __future__ import annotations

import pytest
import torch

from specdec_lab.lab.kernel_groups import kernel_groups, kernels_by_setup
from specdec_lab.models.fast_linear import use_fast_linear
from specdec_lab.models.kernel_setups import linear_setups

# t(1) in ms of a stored run: three setups ran the very same kernels at one row, their spread 43% (the noise floor)
T1 = {"stock nn.Linear": 63.26, "W xᵀ only": 52.51, "default plan": 36.63, "measured plan": 44.67}
SAME_AT_1 = {"stock nn.Linear": ("stock",), "W xᵀ only": ("wx",), "default plan": ("wx",), "measured plan": ("wx",)}


def test_the_gap_is_between_kernels_not_between_the_luckiest_and_the_slowest_setup():
    read = kernel_groups(T1, SAME_AT_1)
    assert read.kernels == 2
    assert read.groups == [("W xᵀ only", "default plan", "measured plan"), ("stock nn.Linear",)]
    assert read.values == [44.67, 63.26]  # the same code's medians pooled at their median
    assert read.spans[0] == (36.63, 52.51)
    assert read.twins == [("W xᵀ only", "default plan", "measured plan")]
    # the setups' range (73%) is beyond a 43% floor; the kernels' gap is not
    assert max(T1.values()) / min(T1.values()) - 1 > 0.43
    assert read.gap == pytest.approx(63.26 / 44.67 - 1)
    assert read.gap < 0.4335


def test_the_reading_turns_with_the_numbers():
    reversed_t1 = {"stock nn.Linear": 36.63, "W xᵀ only": 63.26, "default plan": 70.0, "measured plan": 52.51}
    read = kernel_groups(reversed_t1, SAME_AT_1)
    assert read.groups[0] == ("stock nn.Linear",)  # now stock is the cheaper kernel
    assert read.gap == pytest.approx(63.26 / 36.63 - 1)


def test_one_kernel_has_no_gap():
    read = kernel_groups({"a": 1.0, "b": 1.4}, {"a": "x", "b": "x"})
    assert read.kernels == 1 and read.gap == 0.0
    with pytest.raises(ValueError):
        kernel_groups({}, {})


def test_kernels_by_setup_reads_each_setups_layers():
    model = use_fast_linear(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 16)), pack=False)
    setups = linear_setups(model)
    kernels = kernels_by_setup(model, setups, [1, 2, 32])
    assert set(kernels) == set(setups)
    assert kernels["stock nn.Linear"][1] == ("stock", "stock")
    assert kernels["W xᵀ only"][1] == ("wx", "wx")
    # beyond 16 rows W xᵀ only runs torch's F.linear: the very code of the stock setup
    assert kernels["W xᵀ only"][32] == kernels["stock nn.Linear"][32]
    assert kernels["default plan"][2] == kernels["W xᵀ only"][2]
