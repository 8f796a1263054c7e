"""The kernel benchmark's row arithmetic (the timing itself needs a GPU)."""

from __future__ import annotations

import math

import pytest

from samu_kernels.benchmark import COUNTED_TENSORS, REFERENCE_SHAPES, Timing, _row


@pytest.mark.parametrize("architecture", sorted(COUNTED_TENSORS))
def test_bandwidth_comes_from_device_time_and_counted_bytes(architecture: str) -> None:
    shape = REFERENCE_SHAPES["state2048_short"]
    timing = Timing(device_ms=0.5, launch_ms=1.5, method="cuda_graph")
    row = _row("backend", architecture, "state2048_short", shape, timing, copy_gbps=4000.0)
    counted = COUNTED_TENSORS[architecture] * math.prod(shape) * 2
    assert row.counted_bytes == counted
    assert row.median_ms == 0.5
    assert row.launch_ms == 1.5
    assert row.timing == "cuda_graph"
    assert row.gbps == pytest.approx(counted / 0.5e-3 / 1e9)
    assert row.percent_of_copy == pytest.approx(100 * row.gbps / 4000.0)
