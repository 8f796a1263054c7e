"""The result type of the scan ops."""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["ScanOutput"]


class ScanOutput(NamedTuple):
    """What :func:`samu_kernels.rglru_scan` and :func:`samu_kernels.samu_scan` return.

    Attributes:
        output: [B, L, R] in the dtype of ``u``.
        final_state: [B, R] float32 (float64 for float64 inputs on the reference backend),
            the recurrence state h after the last step.
    """

    output: torch.Tensor
    final_state: torch.Tensor
