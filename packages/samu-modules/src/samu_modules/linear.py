"""A linear layer whose bias gradient is a matrix product, for graphs that torch.compile fuses."""

from __future__ import annotations

from typing import Any

import torch

from samu_modules.autocast import compute_dtype

__all__ = ["linear_matmul_bias_grad"]


class _MatmulBiasGradLinear(torch.autograd.Function):
    """`x @ weight.T + bias`, with the bias gradient computed as `ones @ dL/dout`.

    Autograd's bias gradient is a column sum over all tokens. When the output gradient comes
    from a pointwise backward (the GELU gate of the MLP), Inductor fuses that sum into the
    pointwise kernel, which then walks every token of a column in one program: on the H200 the
    fused kernel took 1.29-1.34 ms at 32768 tokens x 9216 columns, 3.6x its bytes at copy
    bandwidth (docs/performance.md). As a matrix product the sum stays a cuBLAS call of its
    own and the pointwise backward stays pointwise.
    """

    @staticmethod
    def forward(
        ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return torch.nn.functional.linear(x, weight, bias)

    @staticmethod
    def backward(
        ctx: Any, grad: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        x, weight = ctx.saved_tensors
        needs_x, needs_weight, needs_bias = ctx.needs_input_grad
        rows = grad.reshape(-1, grad.shape[-1])
        grad_x = grad @ weight if needs_x else None
        grad_weight = rows.t() @ x.reshape(-1, x.shape[-1]) if needs_weight else None
        grad_bias = (rows.new_ones(1, rows.shape[0]) @ rows).reshape(-1) if needs_bias else None
        return grad_x, grad_weight, grad_bias


def linear_matmul_bias_grad(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """`nn.functional.linear(x, weight, bias)` in x's compute dtype, whose backward computes
    the bias gradient as a matrix product (see :class:`_MatmulBiasGradLinear`).

    Args:
        x: [..., in_features], any float dtype.
        weight: [out_features, in_features]; cast to the compute dtype of `x` (the autocast
            dtype under autocast, else x's), so its gradient arrives in its own dtype.
        bias: [out_features]; cast the same way.

    Returns:
        [..., out_features] in the compute dtype of `x`.
    """
    dtype = compute_dtype(x)
    output: torch.Tensor = _MatmulBiasGradLinear.apply(
        x.to(dtype), weight.to(dtype), bias.to(dtype)
    )
    return output
