"""Which path serves the fused elementwise ops (RMSNorm, GELU gates) for a given tensor.

The rule: the Triton kernels run when the tensor lives on a CUDA device, or on the CPU when
``TRITON_INTERPRET=1`` is set (the Triton interpreter; the variable must be set before
``triton`` is first imported). Anywhere else the PyTorch reference in the op's ``naive``
module runs instead, with PyTorch's own autograd.
"""

from __future__ import annotations

import os

import torch

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16)


def triton_enabled(tensor: torch.Tensor) -> bool:
    """Whether the Triton kernels can serve ``tensor`` (see the module docstring for the rule)."""
    if tensor.is_cuda:
        return True
    return tensor.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def check_floating(name: str, tensor: object) -> torch.Tensor:
    """Return ``tensor`` if it is a float32 or bfloat16 tensor, else raise naming ``name``."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} must be float32 or bfloat16, got {tensor.dtype}")
    return tensor


def check_same_device(name: str, tensor: torch.Tensor, reference: torch.Tensor) -> None:
    """Raise a ``ValueError`` naming ``name`` if ``tensor`` is not on ``reference``'s device."""
    if tensor.device != reference.device:
        raise ValueError(
            f"{name} must be on the same device as the input ({reference.device}), "
            f"got {tensor.device}"
        )
