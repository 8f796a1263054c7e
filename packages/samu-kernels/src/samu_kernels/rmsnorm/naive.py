"""PyTorch reference of RMSNorm and of the fused residual add + RMSNorm.

Arithmetic runs in ``promote_types(dtype, float32)``: float32 for float32/bfloat16 inputs,
float64 for float64 inputs (the tests' oracle). Gradients come from PyTorch's autograd.
"""

from __future__ import annotations

import torch


def _compute_dtype(*tensors: torch.Tensor) -> torch.dtype:
    dtype = torch.float32
    for tensor in tensors:
        dtype = torch.promote_types(dtype, tensor.dtype)
    return dtype


def rms_norm_naive(
    x: torch.Tensor, scale: torch.Tensor, eps: float = 1e-6, *, out_dtype: torch.dtype | None = None
) -> torch.Tensor:
    """``x * rsqrt(mean(x^2, -1) + eps) * (1 + scale)`` in eager PyTorch.

    Args:
        x: ``[..., D]``, any floating dtype.
        scale: ``[D]``, any floating dtype.
        eps: added to the mean square.
        out_dtype: dtype of the result; ``x.dtype`` when ``None``.

    Returns:
        ``[..., D]`` in ``out_dtype``.
    """
    compute = _compute_dtype(x, scale)
    x_c = x.to(compute)
    mean_square = x_c.square().mean(dim=-1, keepdim=True)
    y = x_c * torch.rsqrt(mean_square + eps) * (1.0 + scale.to(compute))
    return y.to(out_dtype or x.dtype)


def add_rms_norm_naive(
    x: torch.Tensor,
    residual: torch.Tensor,
    scale: torch.Tensor,
    eps: float = 1e-6,
    *,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``s = x + residual`` (at least float32), then ``y = rms_norm_naive(s)``.

    Args:
        x: ``[..., D]``, any floating dtype (a matmul output, often bfloat16).
        residual: ``[..., D]``, any floating dtype (the residual stream, often float32).
        scale: ``[D]``.
        eps: added to the mean square.
        out_dtype: dtype of ``y``; the dtype of ``s`` when ``None``.

    Returns:
        ``(s, y)``: ``s`` ``[..., D]`` in ``promote_types(x, residual, float32)``, ``y`` in
        ``out_dtype``.
    """
    s = x.to(_compute_dtype(x, residual)) + residual
    return s, rms_norm_naive(s, scale, eps, out_dtype=out_dtype)
