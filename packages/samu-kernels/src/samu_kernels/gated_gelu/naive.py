"""PyTorch reference of the tanh-approximate GELU and of the GELU-gated product.

Arithmetic runs in ``promote_types(dtype, float32)``: float32 for float32/bfloat16 inputs,
float64 for float64 inputs (the tests' oracle). Gradients come from PyTorch's autograd.
"""

from __future__ import annotations

import torch
from torch.nn.functional import gelu


def gelu_tanh_naive(x: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(x)`` of ``x [...]``, returned in ``x.dtype``."""
    compute = torch.promote_types(x.dtype, torch.float32)
    return gelu(x.to(compute), approximate="tanh").to(x.dtype)


def gelu_tanh_gate_naive(gate: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(gate) * value`` of ``gate, value [..., F]``, returned in ``gate.dtype``."""
    compute = torch.promote_types(gate.dtype, torch.float32)
    product = gelu(gate.to(compute), approximate="tanh") * value.to(compute)
    return product.to(gate.dtype)
