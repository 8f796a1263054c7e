"""pytest-benchmark setup for the step benchmarks: GPU and versions in `machine_info`."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from samu_bench.environment import collect_environment


def pytest_benchmark_update_machine_info(
    config: pytest.Config, machine_info: dict[str, Any]
) -> None:
    """Record the result-file environment block (torch, CUDA, GPU, triton, driver, ...)."""
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    machine_info["samu"] = collect_environment(device)
