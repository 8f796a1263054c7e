"""Shared fixtures: a tiny case and the reference result file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from samu_bench import CaseSpec

DATA = Path(__file__).parent / "data"
REFERENCE_FILE = DATA / "h800_pcie_results.json"


@pytest.fixture
def reference_document() -> dict[str, Any]:
    """The H800 PCIe reference result file, parsed."""
    document: dict[str, Any] = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))
    return document


@pytest.fixture
def tiny_case() -> CaseSpec:
    """Odd sizes: L not a multiple of any chunk, D not a power of two."""
    return CaseSpec(name="tiny", batch=2, length=7, width=24, rnn_width=32, depth=2)
