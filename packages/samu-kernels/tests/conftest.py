"""Test setup for samu-kernels' scans.

- Without a CUDA device the Triton kernels run in the interpreter on CPU: TRITON_INTERPRET
  must be set before triton decorates any kernel, i.e. before samu_kernels' Triton
  modules are imported.
- pytest runs with --import-mode=importlib, which puts no test directory on sys.path; this
  one is added so the tests can share `kernel_cases` (a name unique in the workspace).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def device() -> torch.device:
    """CUDA when present, else CPU (interpreter)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture
def poisoned_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every buffer handed to a kernel starts as NaN (integers: -1), so that an element a
    kernel fails to write shows up in the comparison."""
    # Imported after TRITON_INTERPRET is chosen above.
    from samu_kernels.common import launch  # noqa: PLC0415

    def poisoned(like: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        fill = float("nan") if dtype.is_floating_point else -1
        return torch.full(shape, fill, dtype=dtype, device=like.device)

    monkeypatch.setattr(launch, "new_buffer", poisoned)
