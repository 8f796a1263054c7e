"""Document-start masks in the form the kernels read."""

from __future__ import annotations

import torch

__all__ = ["kernel_resets"]


def kernel_resets(segment_pos: torch.Tensor | None) -> torch.Tensor | None:
    """[B, L] uint8, 1 where ``segment_pos == 0`` (a document starts); None without resets."""
    return None if segment_pos is None else (segment_pos == 0).to(torch.uint8)
