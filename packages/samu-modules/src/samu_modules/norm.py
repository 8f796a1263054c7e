"""RMSNorm with a zero-initialised `(1 + scale)` gain, alone or after a residual add."""

from __future__ import annotations

import torch
from torch import nn

from samu_kernels.rmsnorm import add_rms_norm, rms_norm


class RMSNorm(nn.Module):
    """`x * rsqrt(mean(x^2, -1) + eps) * (1 + scale)` over the last dimension.

    Parameters: `scale` [width], initialised to 0 (identity gain).
    """

    def __init__(
        self,
        width: int,
        eps: float = 1e-6,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.width = width
        self.eps = eps
        self.scale = nn.Parameter(torch.empty(width, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Zero the scale."""
        nn.init.zeros_(self.scale)

    def forward(
        self, x: torch.Tensor, out_dtype: torch.dtype | None = None, *, fused: bool = False
    ) -> torch.Tensor:
        """Normalise `x` [..., width].

        Args:
            x: [..., width], any float dtype (float32/bfloat16 when `fused`).
            out_dtype: dtype of the result (e.g. the autocast dtype of the matrix products
                that read it: the cast is then done once, here); None keeps the dtype of
                the arithmetic (`x`'s promoted with the scale's).
            fused: run samu-kernels' Triton op (float32 scale; it saves only `x` and the
                per-row rstd for the backward) instead of PyTorch ops.

        Returns:
            [..., width] in `out_dtype`.
        """
        if fused:
            return rms_norm(x, self.scale, self.eps, out_dtype=out_dtype)
        variance = torch.mean(torch.square(x), dim=-1, keepdim=True)
        y = x * torch.rsqrt(variance + self.eps) * (self.scale + 1)
        return y if out_dtype is None else y.to(out_dtype)

    def add_and_normalize(
        self,
        x: torch.Tensor,
        residual: torch.Tensor,
        out_dtype: torch.dtype | None = None,
        *,
        fused: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The residual add `s = x + residual`, then `y = self(s)`.

        Args:
            x: [..., width], e.g. a bfloat16 matrix-product output.
            residual: [..., width], the residual stream (float32 in training).
            out_dtype: dtype of `y`, as for `forward`.
            fused: one Triton kernel for the add and the norm (its `s` is float32).

        Returns:
            `(s, y)`: `s` [..., width] in the promoted dtype of `x` and `residual`
            (float32 when `fused`), `y` [..., width] in `out_dtype`.
        """
        if fused:
            return add_rms_norm(x, residual, self.scale, self.eps, out_dtype=out_dtype)
        residual_sum = x + residual
        return residual_sum, self(residual_sum, out_dtype)
