"""Fixtures: the reference result file (H800 PCIe) and a CPU smoke file made from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REFERENCE_PATH = Path(__file__).parent / "data" / "h800_pcie_results.json"
MEMORY_FIELDS = (
    "baseline_allocated_bytes",
    "baseline_reserved_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "peak_allocated_delta_bytes",
    "peak_reserved_delta_bytes",
)


@pytest.fixture
def reference_path() -> Path:
    return REFERENCE_PATH


@pytest.fixture
def reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(REFERENCE_PATH.read_text(encoding="utf-8"))
    return data


@pytest.fixture
def cpu_smoke(reference: dict[str, Any]) -> dict[str, Any]:
    """The reference turned into a CPU smoke file: device cpu, no GPU, null memory fields."""
    reference["environment"].update(device="cpu", gpu=None, cuda=None)
    for case in reference["cases"]:
        for row in case["rows"]:
            row.update(dict.fromkeys(MEMORY_FIELDS))
    return reference
