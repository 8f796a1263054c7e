"""The dtypes the recurrence computes and carries in."""

from __future__ import annotations

import torch


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The autocast dtype when autocast is on for x's device type, else x.dtype.

    The recurrence's [B, L, R] inputs (u, y, RG-LRU's gate logits) are cast to it.
    """
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


def carry_dtype(dtype: torch.dtype) -> torch.dtype:
    """Dtype of the recurrence state and mixer parameters for compute `dtype`.

    float64 for float64 compute (the reference backend), else float32.
    """
    return torch.float64 if dtype == torch.float64 else torch.float32
